"""ConsumeOrderly's send-back, as the broker sees it (the Java client's ``ConsumeMessageOrderlyService.sendMessageBack``).

An orderly consumer does not use CONSUMER_SEND_MSG_BACK: once a message it keeps suspending has been
reconsumed ``maxReconsumeTimes`` times, its client *sends* a copy to ``%RETRY%group`` through its own
producer -- the consumed message's properties (so no WAIT), RECONSUME_TIME and MAX_RECONSUME_TIMES in
the header fields ``reconsumeTimes`` / ``maxReconsumeTimes``, and delay level ``3 + reconsume times``.
The broker's send path (``handleRetryAndDLQ``) turns a retry-topic send whose reconsume times reached
its max into a ``%DLQ%group`` message; the delay level still applies (4.9.8 sets DELAY 0 on the message
and then replaces its properties with the sent ones), so it reaches the DLQ through the schedule topic.

The property map and the stored text: 4.9.8 takes WAIT out of the stored text and keeps it in the map,
and a delay rewrite stores the map -- so a delayed message's record carries the WAIT its sender sent,
and none when it sent none (we used to write WAIT=true whatever was sent). The interop tier compares
the whole DLQ message with the Java broker's (tests/interop/test_orderly_java.py).
"""

from __future__ import annotations

import time

import pytest

from broker_support import BrokerThread, small_store_config
from rmqstore.format.properties import parse_properties
from rmqstore.format.record import MessageRecord
from rmqstore.remoting import ResponseCode
from rmqstore.read.scan import scan_commitlog
from test_broker_protocol import send_v2

pytestmark = pytest.mark.timeout(90)

LEVELS = " ".join(["1s"] * 18)


def _records(root) -> list[MessageRecord]:
    return [rec for _, rec in scan_commitlog(root) if isinstance(rec, MessageRecord)]


def _send(bt: BrokerThread, topic: str, body: bytes, props: dict, **ext) -> None:
    client = bt.client()
    try:
        req = send_v2(topic, body, -1, props)
        req.ext_fields.update(ext)
        r = bt.call(client.invoke(req))
        assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        bt.call(client.close())


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.05)
    return predicate()


def test_a_delayed_record_carries_the_wait_its_sender_sent(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root, store_config=small_store_config(message_delay_level=LEVELS)) as bt:
        for body, props in ((b"sent-true", {"WAIT": "true", "DELAY": "2"}),
                            (b"sent-false", {"WAIT": "false", "DELAY": "2"}),
                            (b"sent-none", {"DELAY": "2"})):
            _send(bt, "WaitT", body, props)
        assert _wait_for(lambda: len([r for r in _records(root) if r.topic == "WaitT"]) == 3)
    scheduled = {r.body: parse_properties(r.properties) for r in _records(root) if r.topic == "SCHEDULE_TOPIC_XXXX"}
    delivered = {r.body: parse_properties(r.properties) for r in _records(root) if r.topic == "WaitT"}
    for props in (scheduled, delivered):   # the delivery stores the scheduled record's text, as 4.9.8
        assert props[b"sent-true"].get("WAIT") == "true"
        assert props[b"sent-false"].get("WAIT") == "false"
        assert "WAIT" not in props[b"sent-none"], props[b"sent-none"]


def test_an_orderly_send_back_past_max_reconsume_times_lands_in_the_dlq(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root, store_config=small_store_config(message_delay_level=LEVELS)) as bt:
        # what ConsumeMessageOrderlyService.sendMessageBack sends after 2 reconsumes with maxReconsumeTimes 2
        # (and one still below its max, which stays a retry message)
        base = {"RETRY_TOPIC": "OrderT", "ORIGIN_MESSAGE_ID": "AC1100010000000000000000000000AB", "TAGS": "t"}
        _send(bt, "%RETRY%CG_o", b"dead", dict(base, DELAY="5"), j="2", l="2")
        _send(bt, "%RETRY%CG_o", b"again", dict(base, DELAY="4"), j="1", l="2")
        assert _wait_for(lambda: {r.body for r in _records(root) if not r.topic.startswith("SCHEDULE")}
                         >= {b"dead", b"again"})
    stored = {r.body: r for r in _records(root) if not r.topic.startswith("SCHEDULE")}
    dead, again = stored[b"dead"], stored[b"again"]
    assert (dead.topic, dead.queue_id, dead.reconsume_times) == ("%DLQ%CG_o", 0, 2)
    assert (again.topic, again.reconsume_times) == ("%RETRY%CG_o", 1)
    props = parse_properties(dead.properties)
    assert props["REAL_TOPIC"] == "%DLQ%CG_o" and props["DELAY"] == "5" and props["RETRY_TOPIC"] == "OrderT"
    assert "WAIT" not in props
    assert "%DLQ%CG_o" in bt.broker.topics.table and bt.broker.topics.table["%DLQ%CG_o"].read_queue_nums == 1
