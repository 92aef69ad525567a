"""The compiled group-commit hand-off (rmqstore._native._cwait) answers what the pure locks answer.

A SYNC_FLUSH writer waits for its ``GroupCommitRequest``: on the pure path on a
``threading.Lock`` the service releases, on the fast path on a latch of the service's gate,
woken by one broadcast a round.  The same requests, answered the same way, must give the
same statuses on both; a latch never returns before it is set and broadcast (or its time is
up); a SYNC_FLUSH store puts from several threads with every put acknowledged after its flush.
"""

from __future__ import annotations

import threading
import time

import pytest

from conftest import compiled_module
from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.common import native
from rmqstore.engine.flush import GroupCommitRequest
from rmqstore.format.status import PutMessageStatus


@pytest.fixture
def cwait():
    return compiled_module("_cwait")


def test_a_latch_returns_once_set_and_broadcast_and_not_before(cwait):
    gate = cwait.Gate()
    latch = gate.latch()
    assert latch.gate is gate and latch.is_set is False
    t0 = time.monotonic()
    assert latch.wait(0.05) is False  # nobody set it: the time runs out
    assert time.monotonic() - t0 >= 0.04
    got = []
    waiter = threading.Thread(target=lambda: got.append(latch.wait(10.0)))
    waiter.start()
    time.sleep(0.02)
    gate.broadcast()  # a broadcast for somebody else: this writer sleeps on
    time.sleep(0.02)
    assert got == [] and waiter.is_alive()
    latch.set()
    gate.broadcast()
    waiter.join(5)
    assert got == [True] and latch.is_set
    assert latch.wait(0) is True  # set already: at once


def test_one_broadcast_wakes_exactly_the_set_latches(cwait):
    gate = cwait.Gate()
    latches = [gate.latch() for _ in range(8)]
    results: dict[int, bool] = {}

    def wait(i):
        results[i] = latches[i].wait(0.5 if i % 2 else 10.0)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    for latch in latches[::2]:
        latch.set()
    gate.broadcast()
    for t in threads:
        t.join(5)
    assert results == {i: i % 2 == 0 for i in range(8)}


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_latch_names_a_bad_timeout(cwait, bad):
    with pytest.raises(ValueError, match="timeout"):
        cwait.Gate().latch().wait(bad)
    with pytest.raises(TypeError):
        cwait.Gate().latch().wait("1")
    with pytest.raises(TypeError):
        cwait.Latch(object())
    with pytest.raises(TypeError):
        cwait.Gate(1)


@pytest.mark.parametrize("answer", [PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, None])
def test_a_request_answers_the_same_on_a_lock_and_on_a_latch(cwait, answer):
    gate = cwait.Gate()
    seen = []
    for req in (GroupCommitRequest(100, 1000), GroupCommitRequest(100, 1000, gate=gate)):
        if answer is not None:
            assert req.wakeup_customer(answer) is True
            assert req.wakeup_customer(PutMessageStatus.PUT_OK) is False  # answered once
        seen.append(req.wait(0.05))
    expected = answer if answer is not None else PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert seen == [expected, expected]


def test_a_round_marks_then_wakes_once(cwait):
    """wakeup_customer(..., broadcast=False) marks only; the writer returns at the round's broadcast."""
    gate = cwait.Gate()
    req = GroupCommitRequest(100, 1000, gate=gate)
    got = []
    waiter = threading.Thread(target=lambda: got.append(req.wait(10.0)))
    waiter.start()
    time.sleep(0.02)
    req.wakeup_customer(PutMessageStatus.PUT_OK, False)
    time.sleep(0.05)
    assert got == []  # marked, not woken
    gate.broadcast()
    waiter.join(5)
    assert got == [PutMessageStatus.PUT_OK]


@pytest.mark.parametrize("use_native", [True, False])
def test_sync_flush_puts_from_many_threads_are_acknowledged_on_disk(tmp_path, use_native):
    if use_native:
        compiled_module("_cwait")
        if native.forced_pure():
            pytest.skip("RMQSTORE_PURE is set: the store runs the pure hand-off")
    store = MessageStore(str(tmp_path / "s"), StoreConfig(flush_disk_type="SYNC_FLUSH", native=use_native,
                                                          mapped_file_size_commit_log=1 << 20))
    store.start()
    try:
        svc = store.group_commit_service
        assert (svc.gate is not None) is use_native
        results: list = []

        def writer(t):
            for i in range(150):
                r = store.put_message(Message("SyncTopic", b"%d-%d" % (t, i) * 40, queue_id=t))
                results.append((r.status, r.append_result.wrote_offset + r.append_result.wrote_bytes,
                                store.commit_log.mapped_file_queue.flushed_where))

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [s for s, _, _ in results] == [PutMessageStatus.PUT_OK] * 900
        # acknowledged means flushed: when a put returned, the flushed position covered its record
        assert all(flushed >= end for _, end, flushed in results)
        assert svc.requests_served == 900 and svc.flushes < 900  # grouped
    finally:
        store.shutdown()
