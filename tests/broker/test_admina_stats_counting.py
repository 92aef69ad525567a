"""The broker's statistics move where RocketMQ 4.9.8's do: real sends (single and batch), a delayed send and its
delivery, pulls that find messages and pulls that do not, a consumer's send-back -- each counted once, under the
keys 4.9.8 uses, and refused requests not at all."""

from __future__ import annotations

import time

import pytest

from broker_support import BrokerThread
from test_broker_protocol import pull, send_v2
from rmqstore.broker.batch import encode_batch_body
from rmqstore.broker.stats import (BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_LATENCY, GROUP_GET_NUMS,
                                   GROUP_GET_SIZE, MINUTE, SCHEDULE_TOPIC, SNDBCK_PUT_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE)
from rmqstore.format.properties import properties_to_string
from rmqstore.format.record import decode_message_id
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(120)


def counters(bt, name: str, key: str) -> tuple[int, int] | None:
    item = bt.broker.stats.manager.get_stats_item(name, key)
    return None if item is None else (item.value, item.times)


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def connected(tmp_path):
    """A broker and a client connected to it."""
    with BrokerThread(tmp_path / "store") as bt:
        client = bt.client()
        try:
            yield bt, client
        finally:
            bt.call(client.close())


def test_sends_pulls_send_backs_and_deliveries_are_counted_as_rocketmq_counts_them(connected):
    broker, client = connected
    store = broker.broker.store
    ids = []
    for n in range(3):
        r = broker.call(client.invoke(send_v2("StatT", f"m{n}".encode(), 0)))
        assert r.code == ResponseCode.SUCCESS, r.remark
        ids.append(r.ext_fields["msgId"])
    body = encode_batch_body([(f"b{i}".encode(), properties_to_string({"KEYS": f"k{i}"}), 0) for i in range(2)])
    r = broker.call(client.invoke(send_v2("StatT", body, 0, code=RequestCode.SEND_BATCH_MESSAGE)))
    assert r.code == ResponseCode.SUCCESS, r.remark
    ids += r.ext_fields["msgId"].split(",")
    delayed = broker.call(client.invoke(send_v2("StatD", b"later", 0, {"DELAY": "1", "WAIT": "true"})))
    assert delayed.code == ResponseCode.SUCCESS
    refused = broker.call(client.invoke(send_v2("StatT", b"x", 99)))  # queue id out of range
    assert refused.code == ResponseCode.SYSTEM_ERROR
    store.wait_dispatched()

    sizes = sum(store.look_message_by_offset(decode_message_id(i)[1]).total_size for i in ids)
    assert counters(broker, TOPIC_PUT_NUMS, "StatT") == (5, 4)  # 5 messages in 4 sends
    assert counters(broker, TOPIC_PUT_SIZE, "StatT") == (sizes, 4)
    assert counters(broker, TOPIC_PUT_NUMS, SCHEDULE_TOPIC) == (1, 1)  # the delayed one, where the store put it
    assert counters(broker, TOPIC_PUT_NUMS, "StatD") is None  # ... until it is delivered

    found = broker.call(client.invoke(pull("StatT", 0, 0)))
    assert found.code == ResponseCode.SUCCESS and len(found.body) == sizes
    assert broker.call(client.invoke(pull("StatT", 0, 5))).code == ResponseCode.PULL_NOT_FOUND
    assert counters(broker, GROUP_GET_NUMS, "StatT@CG_proto") == (5, 1)
    assert counters(broker, GROUP_GET_SIZE, "StatT@CG_proto") == (sizes, 1)
    assert counters(broker, GROUP_GET_LATENCY, "0@StatT@CG_proto")[1] == 1
    assert counters(broker, BROKER_GET_NUMS, "DefaultCluster") == (5, 0)  # the value only, as 4.9.8
    figures = broker.broker.stats.store
    assert (figures.get_message_times_total_found, figures.get_message_times_total_miss,
            figures.get_message_transfered_msg_count) == (1, 1, 5)

    back = broker.call(client.invoke(RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "group": "CG_proto", "offset": str(decode_message_id(ids[0])[1]), "delayLevel": "0",
        "originMsgId": ids[0], "originTopic": "StatT", "unitMode": "false", "maxReconsumeTimes": "16"})))
    assert back.code == ResponseCode.SUCCESS, back.remark
    assert counters(broker, SNDBCK_PUT_NUMS, "StatT@CG_proto") == (1, 1)
    assert counters(broker, TOPIC_PUT_NUMS, SCHEDULE_TOPIC) == (2, 2)  # the retry waits in the schedule topic

    wait_for(lambda: counters(broker, TOPIC_PUT_NUMS, "StatD") is not None)  # delay level 1: a second
    assert counters(broker, TOPIC_PUT_NUMS, "StatD") == (1, 1)
    assert counters(broker, GROUP_GET_NUMS, SCHEDULE_TOPIC + "@SCHEDULE_CONSUMER") == (1, 1)
    # the broker's puts: 5 sends + the delayed send + its delivery (a send-back is not one in 4.9.8)
    assert counters(broker, BROKER_PUT_NUMS, "DefaultCluster") == (7, 0)
    assert store.stats.snapshot()["putMessageTimesTotal"] == 8  # ... but it is a store put


def test_the_sampler_runs_in_a_started_broker(connected):
    broker, client = connected
    assert broker.call(client.invoke(send_v2("StatS", b"one", 0))).code == ResponseCode.SUCCESS
    stats = broker.broker.stats
    assert stats.sampler is not None and stats.sampler.running
    item = stats.manager.get_stats_item(TOPIC_PUT_NUMS, "StatS")
    wait_for(lambda: item.snapshot(MINUTE).sum == 1, timeout=60)  # the next 10 s round took it
