"""The broker's remoting limits against hostile clients, on a real broker (issue 20, findings 2-5).

A valid request followed by garbage in the same write is answered before the connection
closes; idle and dribbling connections cannot lock clients out; clients that never read
cannot grow the broker past its unsent-bytes budget; bad input costs a bounded number of
log lines.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time

import pytest

from broker_support import BrokerThread
from test_broker_protocol import pull, send_v2
from rmqstore.remoting import FrameDecoder, Limits, RemotingCommand, RequestCode, ResponseCode, encode_frame

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        yield bt


def _read_to_eof(sock: socket.socket, timeout: float = 20) -> list[RemotingCommand]:
    """Every frame the broker sends on ``sock`` until it closes the connection."""
    sock.settimeout(timeout)
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return FrameDecoder().feed(bytes(data))


def test_a_send_followed_by_garbage_in_one_write_is_stored_and_answered(broker):
    store = broker.broker.store
    before = store.get_max_phy_offset()
    request = send_v2("GarbageTailTopic", b"kept")
    request.opaque = 77
    with socket.create_connection(("127.0.0.1", broker.port), timeout=20) as s:
        s.sendall(encode_frame(request) + struct.pack(">i", 2**31 - 1) + b"x" * 64)
        answers = _read_to_eof(s)
    assert [(a.opaque, a.code) for a in answers] == [(77, ResponseCode.SUCCESS)]
    assert answers[0].ext_fields["queueOffset"] == "0" and store.get_max_phy_offset() > before


def test_malformed_headers_cost_a_bounded_number_of_log_lines(broker, caplog):
    """2,000 pulls without their header fields: each answered SYSTEM_ERROR naming the field, as before, and
    the log gets a few lines and a count, not 2,000 tracebacks."""
    from rmqstore.broker import offsets, topics

    caplog.set_level(logging.INFO, logger="rmqstore")
    # the two throttles are the process's: close the windows earlier tests opened, so that the flood's lines
    # fall in one window of their own (one ending during the flood would let a second burst through)
    for throttle in (offsets._throttled, topics._throttled):
        throttle.flush()
    caplog.clear()
    client = broker.client()
    try:
        async def flood():
            answers = []
            for _ in range(10):
                answers += await asyncio.gather(*(client.invoke(RemotingCommand(
                    RequestCode.PULL_MESSAGE, {"topic": "NoSuchFields"})) for _ in range(200)))
            return answers
        answers = broker.call(flood())
        assert broker.call(client.invoke(send_v2("AfterFlood", b"ok"))).code == ResponseCode.SUCCESS
    finally:
        broker.call(client.close())
    assert {(a.code, a.remark) for a in answers} == {
        (ResponseCode.SYSTEM_ERROR, "HeaderError: the custom field <consumerGroup> is null")}
    lines = [r for r in caplog.records if r.name.startswith("rmqstore")]
    assert not [r for r in lines if r.exc_info]
    assert 1 <= len([r for r in lines if "<consumerGroup> is null" in r.getMessage()]) <= 20
    assert len(lines) <= 40, [r.getMessage() for r in lines]


def test_requests_a_client_can_repeat_at_will_cost_a_bounded_number_of_log_lines(broker, caplog):
    """The broker's own per-request warnings a peer can trigger (an offset commit going backwards, a send
    to a new topic whose default topic does not exist) are throttled too: 500 of each, a few lines."""
    from rmqstore.broker import offsets, topics

    caplog.set_level(logging.INFO, logger="rmqstore")
    # the two throttles are the process's: close the windows earlier tests opened, so that the flood's lines
    # fall in one window of their own (one ending during the flood would let a second burst through)
    for throttle in (offsets._throttled, topics._throttled):
        throttle.flush()
    caplog.clear()
    client = broker.client()
    try:
        async def flood():
            answers = []
            for i in range(500):
                answers.append(await client.invoke(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": "CG_back", "topic": "TBW102", "queueId": "0", "commitOffset": str(1000 - i)})))
                request = send_v2(f"NoDefault{i}", b"x")
                request.ext_fields["c"] = "NoSuchDefaultTopic"
                answers.append(await client.invoke(request))
            return answers
        answers = broker.call(flood(), 60)
    finally:
        broker.call(client.close())
    assert {a.code for a in answers[0::2]} == {ResponseCode.SUCCESS}
    assert {a.code for a in answers[1::2]} == {ResponseCode.TOPIC_NOT_EXIST}
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("rmqstore")]
    backwards = [m for m in messages if "less than store" in m]
    refused = [m for m in messages if m.startswith("create new topic")]
    assert 1 <= len(backwards) <= 10 and 1 <= len(refused) <= 10, messages[:30]
    assert len(messages) <= 30, messages[:40]


def test_silent_connections_at_the_cap_do_not_lock_producers_out(tmp_path):
    """The cap (broker.conf's maxConnections) filled with connections that never send a frame: each new producer
    is served at once, a silent connection is evicted for it."""
    cap = 64
    with BrokerThread(tmp_path / "store", max_connections=cap) as bt:
        silent = [socket.create_connection(("127.0.0.1", bt.port)) for _ in range(cap)]
        try:
            deadline = time.monotonic() + 20
            while len(bt.broker.server.connections) < cap and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(bt.broker.server.connections) == cap
            for n in range(5):
                client = bt.client()
                try:
                    assert bt.call(client.invoke(send_v2("CapTopic", b"in %d" % n))).code == ResponseCode.SUCCESS
                finally:
                    bt.call(client.close())
            assert len(bt.broker.server.connections) <= cap
        finally:
            for s in silent:
                s.close()


def test_consumers_that_never_read_their_pulls_cannot_grow_the_broker_past_its_budget(tmp_path, caplog):
    """Four clients send 200 pulls of big messages each and never read: the broker's buffers of unsent answers
    stay within the budget plus the stated bound, a producer and a consumer that read are served throughout, and
    the log says so once."""
    caplog.set_level(logging.INFO, logger="rmqstore")
    mib, hogs, per_hog = 1 << 20, 4, 200
    limits = Limits(unsent_budget=4 * mib, connection_unsent_high=mib, max_in_flight=64)
    with BrokerThread(tmp_path / "store", limits=limits) as bt:
        client = bt.client()
        body = b"m" * (250 * 1024)  # one per pull: RocketMQ's 256 KiB transfer limit
        try:
            for n in range(8):
                assert bt.call(client.invoke(send_v2("BigPull", body, 0))).code == ResponseCode.SUCCESS
            sample = bt.call(client.invoke(pull("BigPull", 0, 0)))
            assert sample.code == ResponseCode.SUCCESS and len(sample.body) > len(body)
            frame = len(encode_frame(sample))
            bound = limits.unsent_budget + (hogs + 1) * (64 * 1024 + frame)  # as in the remoting unit test
            server, peak = bt.broker.server, [0]

            async def sampling(stop: asyncio.Event):
                while not stop.is_set():
                    peak[0] = max(peak[0], sum(c.writer.transport.get_write_buffer_size() for c in server.connections))
                    await asyncio.sleep(0.002)

            stop = bt.call(_make_event())
            sampler = asyncio.run_coroutine_threadsafe(sampling(stop), bt.loop)
            flood = []
            for _ in range(hogs):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", bt.port))
                requests = [pull("BigPull", 0, n % 8) for n in range(per_hog)]
                for n, r in enumerate(requests):
                    r.opaque = n + 1
                s.sendall(b"".join(encode_frame(r) for r in requests))
                flood.append(s)
            try:
                deadline = time.monotonic() + 30
                while server.budget.over_since is None:  # the hogs fill the broker's buffers past the budget
                    assert time.monotonic() < deadline, server.unsent_bytes
                    time.sleep(0.01)
                for n in range(10):  # while over budget, a producer and a consumer that read are served
                    assert bt.call(client.invoke(send_v2("BigPull", b"small %d" % n, 1), timeout=10)).code == 0
                    r = bt.call(client.invoke(pull("BigPull", 0, n % 8), timeout=10))
                    assert r.code == ResponseCode.SUCCESS and len(r.body) > len(body)
                    time.sleep(0.02)
                assert server.budget.over_since is not None  # the hogs still read nothing
                assert limits.unsent_budget < peak[0] <= bound, (peak[0], bound)
                assert server.unsent_bytes <= server.budget.peak <= bound
            finally:
                bt.loop.call_soon_threadsafe(stop.set)
                sampler.result(10)
                for s in flood:
                    s.close()
        finally:
            bt.call(client.close())
    over = [r for r in caplog.records if "budget" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(over) == 1, [r.getMessage() for r in caplog.records if "budget" in r.getMessage()]


async def _make_event() -> asyncio.Event:
    return asyncio.Event()


def test_broker_conf_sets_the_connection_limits():
    from rmqstore.broker import Broker
    from rmqstore.broker.config import load_broker_conf

    config, _, unknown = load_broker_conf(
        "maxConnections=50\nserverChannelMaxIdleTimeSeconds=7\nserverFirstFrameTimeoutSeconds=3\n"
        "serverFrameTimeoutSeconds=4\nserverUnsentBudgetBytes=1048576\nserverConnectionUnsentHighBytes=65536\n")
    assert unknown == []
    limits = Broker("/nonexistent", config).server.limits
    assert (limits.max_connections, limits.idle_timeout, limits.first_frame_timeout, limits.frame_timeout,
            limits.unsent_budget, limits.connection_unsent_high) == (50, 7.0, 3.0, 4.0, 1 << 20, 1 << 16)
    defaults = Broker("/nonexistent").server.limits
    assert (defaults.first_frame_timeout, defaults.frame_timeout, defaults.unsent_budget) == (10.0, 30.0, 64 << 20)
