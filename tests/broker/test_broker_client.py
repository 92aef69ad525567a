"""A real RocketMQ client (``rocketmq`` 0.4.4, the official C++ client) against ``rmqstore broker``.

Done means 1 and 2 of issue 12: every message a real producer sends is in the commitlog
exactly once with its topic, queue, body, properties and born host, and verify is clean;
a push consumer and a pull consumer each receive every message exactly once, in queue
order per queue; committed offsets are in config/consumerOffset.json and survive a restart.
"""

from __future__ import annotations

import json
import os
import time

import pytest

rc = pytest.importorskip("rocketmq.client")

from broker_support import BrokerThread  # noqa: E402
from conftest import run_cli  # noqa: E402
from rmqstore.broker.jsonfmt import loads  # noqa: E402
from rmqstore.format.properties import parse_properties  # noqa: E402
from rmqstore.format.record import MessageRecord  # noqa: E402
from rmqstore.read.scan import scan_commitlog  # noqa: E402

pytestmark = pytest.mark.timeout(120)

N = 24
TOPIC = "BrokerTopic"


def _producer(namesrv: str, group: str = "PG_test"):
    p = rc.Producer(group)
    p.set_namesrv_addr(namesrv)
    p.set_timeout(5000)
    p.start()
    return p


def _send_all(namesrv: str, n: int = N, topic: str = TOPIC):
    """Send n messages (keys, tags alternating); returns the SendResults by body."""
    p = _producer(namesrv)
    try:
        results = {}
        for i in range(n):
            m = rc.Message(topic)
            m.set_keys(f"key-{i}")
            m.set_tags("even" if i % 2 == 0 else "odd")
            m.set_body(f"message {i}")
            m.set_property("seq", str(i))
            r = p.send_sync(m)
            assert r.status == rc.SendStatus.OK
            results[f"message {i}".encode()] = r
        return results
    finally:
        p.shutdown()


def _records(root) -> list[MessageRecord]:
    return [rec for _, rec in scan_commitlog(root) if isinstance(rec, MessageRecord)]


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_real_producer_messages_land_once_with_their_fields(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        results = _send_all(bt.namesrv)
    records = [r for r in _records(root) if r.topic == TOPIC]
    assert sorted(r.body for r in records) == sorted(results)  # every one, exactly once
    by_queue: dict[int, list[int]] = {}
    for rec in records:
        props = parse_properties(rec.properties)
        i = int(rec.body.split()[1])
        assert props["KEYS"] == f"key-{i}"
        assert props["TAGS"] == ("even" if i % 2 == 0 else "odd")
        assert props["seq"] == str(i)
        assert props["CLUSTER"] == "DefaultCluster"
        assert "WAIT" not in props and "UNIQ_KEY" in props
        assert str(rec.born_host).startswith("127.0.0.1:") and rec.born_host.port > 0
        r = results[rec.body]
        assert rec.queue_offset == r.offset and props["UNIQ_KEY"] == r.msg_id
        by_queue.setdefault(rec.queue_id, []).append(rec.queue_offset)
    for offsets in by_queue.values():
        assert offsets == list(range(len(offsets)))
    code, out, err = run_cli(["verify", root])
    assert code == 0, out + err


def test_push_and_pull_consumers_get_every_message_once_in_queue_order(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        _send_all(bt.namesrv)
        got = []
        consumer = rc.PushConsumer("CG_push")
        consumer.set_namesrv_addr(bt.namesrv)

        def on_message(msg):
            got.append((msg.queue_id, msg.queue_offset, msg.body))

        consumer.subscribe(TOPIC, on_message)
        consumer.start()
        try:
            assert _wait_for(lambda: len(got) >= N)
            time.sleep(0.5)  # anything delivered twice would show up now
        finally:
            consumer.shutdown()
        puller = rc.PullConsumer("CG_pull")
        puller.offset_table = {}  # the wrapper keeps offsets in a class attribute
        puller.set_namesrv_addr(bt.namesrv)
        puller.start()
        try:
            pulled = [(m.queue_id, m.queue_offset, m.body) for m in puller.pull(TOPIC)]
        finally:
            puller.shutdown()
    for received in (got, pulled):
        assert len(received) == N and len(set(received)) == N
        assert sorted(b for _, _, b in received) == sorted(f"message {i}".encode() for i in range(N))
        per_queue: dict[int, list[int]] = {}
        for q, off, _ in received:
            per_queue.setdefault(q, []).append(off)
        for offsets in per_queue.values():
            assert offsets == sorted(offsets) and offsets == list(range(len(offsets)))


def test_committed_offsets_survive_a_restart(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        _send_all(bt.namesrv, 8)
        got = []
        consumer = rc.PushConsumer("CG_restart")
        consumer.set_namesrv_addr(bt.namesrv)
        consumer.subscribe(TOPIC, lambda msg: got.append(msg.body))
        consumer.start()
        try:
            assert _wait_for(lambda: len(got) >= 8)

            def committed():
                table = bt.broker.offsets.table.get(f"{TOPIC}@CG_restart", {})
                return sum(table.values()) == 8
            assert _wait_for(committed, 20)  # the client commits every 5 s
        finally:
            consumer.shutdown()
    saved = loads((root / "config" / "consumerOffset.json").read_text())["offsetTable"][f"{TOPIC}@CG_restart"]
    assert sum(saved.values()) == 8
    assert not os.path.exists(root / "abort")
    with BrokerThread(root) as bt:
        assert {int(q): o for q, o in saved.items()} == bt.broker.offsets.table[f"{TOPIC}@CG_restart"]
        _send_all(bt.namesrv, 3)
        again = []
        consumer = rc.PushConsumer("CG_restart")
        consumer.set_namesrv_addr(bt.namesrv)
        consumer.subscribe(TOPIC, lambda msg: again.append(msg.body))
        consumer.start()
        try:
            assert _wait_for(lambda: len(again) >= 3)
            time.sleep(0.5)
        finally:
            consumer.shutdown()
    assert sorted(again) == [b"message 0", b"message 1", b"message 2"]  # only the new ones
    assert json.dumps(saved)  # (plain data)
