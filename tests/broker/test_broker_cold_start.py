"""A cold broker's first send never stops its event loop (issue 20, finding 6).

A fresh store has no commitlog file; the first put needs one, and a real one is 1 GiB that
the allocate service creates and pre-faults.  Whatever that costs, it is paid on the allocate
service's thread: the send waits for its file off the event loop, and the loop goes on
answering the embedded name server's route queries and the clients' heartbeats meanwhile.

The test makes the allocation as slow as it likes: the allocate service's file creation waits
for the test's word.  No timing is asserted -- only what is answered while the file is not
made yet (generous deadlines), and which thread made it.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from broker_support import BrokerThread, small_store_config
from test_broker_protocol import send_v2
from rmqstore.engine import allocate
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(120)

#: what the test waits for an answer that needs nothing but a free event loop (generous: a loaded machine)
PROMPT = 20.0


@pytest.fixture
def held_allocation(monkeypatch):
    """The allocate service's file creation, held until ``release`` is set; ``threads`` names who made each file."""
    release = threading.Event()
    threads: list[str] = []
    real = allocate.MappedFile

    def slow_mapped_file(*args, **kwargs):
        threads.append(threading.current_thread().name)
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(allocate, "MappedFile", slow_mapped_file)
    yield release, threads
    release.set()


def answered(bt: BrokerThread, request, what: str):
    """The answer to ``request`` (a coroutine run on the broker's loop), which must come within PROMPT."""
    try:
        return bt.call(request, PROMPT)
    except TimeoutError:
        raise AssertionError(f"{what} unanswered after {PROMPT:g} s: the event loop is blocked") from None


def test_first_send_waits_for_its_file_off_the_event_loop(tmp_path, held_allocation):
    release, threads = held_allocation
    # the put would wait a minute for its file: long enough that a loop it blocked could not answer in time
    config = small_store_config(allocate_wait_timeout_ms=60_000)
    with BrokerThread(tmp_path / "store", store_config=config) as bt:
        producer = bt.client()
        ns_host, ns_port = bt.namesrv.rsplit(":", 1)
        namesrv = bt.call(RemotingClient().connect(ns_host, int(ns_port)))
        try:
            first = asyncio.run_coroutine_threadsafe(producer.invoke(send_v2("ColdTopic", b"first")), bt.loop)
            # while the first send waits for its commitlog file, the loop answers everyone else
            for _ in range(3):
                route = answered(bt, namesrv.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                    {"topic": "TBW102"})), "GET_ROUTEINFO_BY_TOPIC")
                assert route.code == ResponseCode.SUCCESS, route.remark
                hb = {"clientID": "127.0.0.1@cold", "producerDataSet": [{"groupName": "PG_proto"}],
                      "consumerDataSet": []}
                beat = answered(bt, producer.invoke(RemotingCommand(RequestCode.HEART_BEAT,
                                                                    body=json.dumps(hb).encode())), "HEART_BEAT")
                assert beat.code == ResponseCode.SUCCESS, beat.remark
            assert not first.done(), "the send was answered before its commitlog file existed"
            release.set()
            answer = first.result(PROMPT)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert answer.ext_fields["queueOffset"] == "0"
            assert bt.call(producer.invoke(send_v2("ColdTopic", b"second")), PROMPT).ext_fields["queueOffset"] == "1"
        finally:
            release.set()
            bt.call(producer.close())
            bt.call(namesrv.close())
        assert threads and set(threads) == {"AllocateMappedFileService"}, threads
        store = bt.broker.store
        assert store.wait_dispatched()
        got = store.get_message("g", "ColdTopic", 0, 0, 32)
        assert [bytes(m.body) for m in got.messages] == [b"first", b"second"]  # each stored once
