"""Delay levels and consumer retries with the real client (issue 12, Done means 3).

A short delay-level table (level 1 = 1 s, level 2 = 2 s, ...) keeps the suite fast: a
delayed message arrives no earlier than its level's delay after it was stored; a failing
listener's message goes to %RETRY%group, comes back with reconsume times + 1, and lands
in %DLQ%group after max reconsume times.
"""

from __future__ import annotations

import json
import time

import pytest

rc = pytest.importorskip("rocketmq.client")

from broker_support import BrokerThread, small_store_config  # noqa: E402
from rmqstore.broker.jsonfmt import loads  # noqa: E402
from rmqstore.format.properties import parse_properties  # noqa: E402
from rmqstore.format.record import MessageRecord, create_message_id  # noqa: E402
from rmqstore.remoting import RemotingCommand, RequestCode  # noqa: E402
from rmqstore.read.scan import scan_commitlog  # noqa: E402
from rmqstore.read.verify import verify  # noqa: E402

pytestmark = pytest.mark.timeout(120)

LEVELS = "1s 2s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


def _records(root):
    return [rec for _, rec in scan_commitlog(root) if isinstance(rec, MessageRecord)]


def _wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.05)
    return predicate()


def _producer(namesrv):
    p = rc.Producer("PG_delay")
    p.set_namesrv_addr(namesrv)
    p.start()
    return p


def test_delayed_messages_arrive_after_their_level_not_before(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root, store_config=small_store_config(message_delay_level=LEVELS)) as bt:
        p = _producer(bt.namesrv)
        sent = {}
        try:
            for i, level in enumerate((2, 3, 2)):
                m = rc.Message("DelayTopic")
                m.set_body(f"d{i}")
                m.set_delay_time_level(level)
                sent[f"d{i}".encode()] = (time.time(), level)
                assert p.send_sync(m).status == rc.SendStatus.OK
        finally:
            p.shutdown()
        got = {}
        consumer = rc.PushConsumer("CG_delay")
        consumer.set_namesrv_addr(bt.namesrv)
        consumer.subscribe("DelayTopic", lambda msg: got.setdefault(msg.body, time.time()))
        consumer.start()
        try:
            assert _wait_for(lambda: len(got) == 3, 20)
        finally:
            consumer.shutdown()
        for body, (sent_at, level) in sent.items():
            assert got[body] - sent_at >= level - 0.05, (body, got[body] - sent_at)
    records = _records(root)
    for body, (_, level) in sent.items():
        parked = [r for r in records if r.body == body and r.topic == "SCHEDULE_TOPIC_XXXX"]
        delivered = [r for r in records if r.body == body and r.topic == "DelayTopic"]
        assert len(parked) == 1 and len(delivered) == 1
        assert parked[0].queue_id == level - 1
        assert delivered[0].store_timestamp - parked[0].store_timestamp >= level * 1000
        props = parse_properties(delivered[0].properties)
        assert props["DELAY"] == str(level) and props["REAL_TOPIC"] == "DelayTopic"  # kept, as 4.9.8 stores it
        assert delivered[0].born_timestamp == parked[0].born_timestamp
    offsets = loads((root / "config" / "delayOffset.json").read_text())["offsetTable"]
    assert {int(k): v for k, v in offsets.items()} == {2: 2, 3: 1}
    # verify with the store's own delay table (the store's files do not record it; the CLI assumes RocketMQ's)
    report = verify(str(root), config=small_store_config(message_delay_level=LEVELS))
    assert report.ok, report.problems


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the wrapper re-raises
def test_a_failing_listener_goes_to_retry_comes_back_and_ends_in_the_dlq(tmp_path):
    root = tmp_path / "store"
    # the group's retryMaxTimes (16 by default), set as an admin does it: in subscriptionGroup.json
    (root / "config").mkdir(parents=True)
    (root / "config" / "subscriptionGroup.json").write_text(json.dumps(
        {"subscriptionGroupTable": {"CG_fail": {"groupName": "CG_fail", "retryMaxTimes": 2, "retryQueueNums": 1}}}))
    with BrokerThread(root, store_config=small_store_config(message_delay_level=LEVELS)) as bt:
        p = _producer(bt.namesrv)
        try:
            m = rc.Message("FailTopic")
            m.set_body("poison")
            assert p.send_sync(m).status == rc.SendStatus.OK
        finally:
            p.shutdown()
        # an earlier member of the group has been seen: its retry topic exists and is routed
        client = bt.client()
        hb = {"clientID": "earlier", "consumerDataSet": [{"groupName": "CG_fail", "subscriptionDataSet": []}]}
        assert bt.call(client.invoke(RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(hb).encode()))).code == 0
        bt.call(client.close())
        deliveries = []

        def failing(msg):
            deliveries.append((msg.topic, msg.reconsume_times, msg.body))
            raise RuntimeError("listener fails on purpose")

        consumer = rc.PushConsumer("CG_fail")
        consumer.set_namesrv_addr(bt.namesrv)
        consumer.subscribe("FailTopic", failing)
        consumer.start()
        try:
            assert _wait_for(lambda: any(r.topic == "%DLQ%CG_fail" for r in _records(root)), 30)
            time.sleep(0.5)
        finally:
            consumer.shutdown()
    assert [d[1] for d in deliveries] == [0, 1, 2] and {d[2] for d in deliveries} == {b"poison"}
    records = _records(root)
    original = next(r for r in records if r.topic == "FailTopic")
    retries = [r for r in records if r.topic == "%RETRY%CG_fail"]
    (dead,) = [r for r in records if r.topic == "%DLQ%CG_fail"]
    assert [r.reconsume_times for r in retries] == [1, 2] and dead.reconsume_times == 3
    props = parse_properties(dead.properties)
    assert props["RETRY_TOPIC"] == "FailTopic"
    assert props["ORIGIN_MESSAGE_ID"] == create_message_id(original.store_host, original.physical_offset)
    assert dead.body == b"poison"
