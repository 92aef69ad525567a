"""Message trace on the broker's side: the trace topic, and trace records found by key.

A client with trace enabled sends its trace records (one message holding one or more records, its keys
the traced messages' ids and keys) to ``RMQ_SYS_TRACE_TOPIC``; ``mqadmin queryMsgTraceById`` finds them
with a QUERY_MESSAGE on that topic, the msgId as the key.  The broker creates the topic at start when
``traceTopicEnable`` is true (named by ``msgTraceTopicName``, one queue, as 4.9.8's TopicConfigManager);
otherwise the first trace record creates it from TBW102 like any topic (``autoCreateTopicEnable``).
The Java client and mqadmin against our broker and the Java broker: tests/interop/test_orderly_trace.py.
"""

from __future__ import annotations

import pytest

from broker_support import BrokerThread
from rmqstore.broker.config import load_broker_conf
from rmqstore.broker.jsonfmt import loads
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from test_broker_protocol import send_v2

pytestmark = pytest.mark.timeout(90)

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _route(bt: BrokerThread, topic: str) -> RemotingCommand:
    host, port = bt.namesrv.rsplit(":", 1)
    client = bt.call(RemotingClient().connect(host, int(port)))
    try:
        return bt.call(client.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})))
    finally:
        bt.call(client.close())


def test_broker_conf_reads_the_trace_keys():
    config, _, unknown = load_broker_conf("traceTopicEnable=true\nmsgTraceTopicName=MyTraceTopic\n")
    assert (config.trace_topic_enable, config.msg_trace_topic_name, unknown) == (True, "MyTraceTopic", [])
    config, _, _ = load_broker_conf("")
    assert (config.trace_topic_enable, config.msg_trace_topic_name) == (False, TRACE_TOPIC)


@pytest.mark.parametrize("name", [TRACE_TOPIC, "MyTraceTopic"])
def test_trace_topic_enable_creates_the_trace_topic_at_start(tmp_path, name):
    with BrokerThread(tmp_path / "store", trace_topic_enable=True, msg_trace_topic_name=name) as bt:
        config = bt.broker.topics.select(name)
        assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, 6)
        r = _route(bt, name)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [q["writeQueueNums"] for q in loads(r.body.decode())["queueDatas"]] == [1]


def test_without_trace_topic_enable_the_first_trace_record_creates_the_topic(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        assert bt.broker.topics.select(TRACE_TOPIC) is None
        assert _route(bt, TRACE_TOPIC).code == ResponseCode.TOPIC_NOT_EXIST
        client = bt.client()
        try:
            # a Pub record as the client's AsyncTraceDispatcher sends it: keys = the traced msgId and keys
            record = "Pub\x01" + "\x01".join(["1700000000000", "DefaultRegion", "PG", "T", "7F00000100002A9F0000000000000000",
                                              "tagA", "key-1", "127.0.0.1:10911", "9", "3", "0", "7F000001", "true"]) + "\x02"
            r = bt.call(client.invoke(send_v2(TRACE_TOPIC, record.encode(), -1,
                                              {"KEYS": "7F00000100002A9F0000000000000000 key-1", "WAIT": "true"})))
            assert r.code == ResponseCode.SUCCESS, r.remark
            bt.broker.store.wait_dispatched()
            for key in ("7F00000100002A9F0000000000000000", "key-1"):   # every key of the set is indexed
                found = bt.call(client.invoke(RemotingCommand(RequestCode.QUERY_MESSAGE, {
                    "topic": TRACE_TOPIC, "key": key, "maxNum": "64", "beginTimestamp": "0",
                    "endTimestamp": str(2**62), "_UNIQUE_KEY_QUERY": "false"})))
                assert found.code == ResponseCode.SUCCESS and record.encode() in found.body, (key, found.remark)
        finally:
            bt.call(client.close())
        assert bt.broker.topics.select(TRACE_TOPIC).write_queue_nums == 4   # shaped after TBW102, as any topic
