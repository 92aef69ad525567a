"""Clients as an admin sees them: GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204), and the
requests the broker relays to a client over the client's own connection: GET_CONSUMER_RUNNING_INFO (307) and
INVOKE_BROKER_TO_RESET_OFFSET (222), which pushes RESET_CONSUMER_CLIENT_OFFSET (220).

The "clients" here are our RemotingClient sending the Java client's HEART_BEAT body, with processors of their own
for what the broker asks them, so the bodies are checked exactly as 4.9.8's AdminBrokerProcessor and
Broker2Client build them.
"""

from __future__ import annotations

import json
import time

import pytest

from broker_support import BrokerThread
from rmqstore.broker.jsonfmt import dumps, loads
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(120)

V4_9_8 = 409  # MQVersion.Version.V4_9_8.ordinal(): what a 4.9.8 client sends as its version

SUB_T = {"classFilterMode": False, "codeSet": [2598919, 2598920], "expressionType": "TAG",
         "subString": "TagA || TagB", "subVersion": 1700000000001, "tagsSet": ["TagA", "TagB"], "topic": "TopicC"}
SUB_RETRY = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
             "subVersion": 1700000000002, "tagsSet": [], "topic": "%RETRY%GroupC"}


def heartbeat(client_id: str, *, consumer_group: str | None = "GroupC", producer_group: str | None = "GroupP",
              subs=(SUB_T, SUB_RETRY), model: str = "CLUSTERING") -> RemotingCommand:
    """HEART_BEAT as a 4.9.8 Java push consumer and producer send it (HeartbeatData's fastjson)."""
    data: dict = {"clientID": client_id, "consumerDataSet": [], "producerDataSet": []}
    if consumer_group:
        data["consumerDataSet"].append({"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                                        "consumeType": "CONSUME_PASSIVELY", "groupName": consumer_group,
                                        "messageModel": model, "subscriptionDataSet": list(subs),
                                        "unitMode": False})
    if producer_group:
        data["producerDataSet"] += [{"groupName": producer_group}, {"groupName": "CLIENT_INNER_PRODUCER"}]
    return RemotingCommand(RequestCode.HEART_BEAT, body=dumps(data).encode(), language="JAVA", version=V4_9_8)


class FakeClient:
    """A connection that heartbeats like a Java client and answers what the broker asks it."""

    def __init__(self, bt: BrokerThread, client_id: str, answers: dict | None = None):
        self.bt = bt
        self.client_id = client_id
        self.received: list[RemotingCommand] = []
        processors = {code: self._answer(handler) for code, handler in (answers or {}).items()}
        self.client = bt.call(RemotingClient(processors).connect("127.0.0.1", bt.port))

    def _answer(self, handler):
        def process(conn, req):
            self.received.append(req)
            return handler(req)
        return process

    @property
    def address(self) -> str:
        host, port = self.client.connection.writer.get_extra_info("sockname")[:2]
        return f"{host}:{port}"

    def invoke(self, request: RemotingCommand, timeout: float = 20) -> RemotingCommand:
        return self.bt.call(self.client.invoke(request, timeout))

    def close(self) -> None:
        self.bt.call(self.client.close())


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        yield bt


def connection_list(bt, code, **fields) -> RemotingCommand:
    return bt.invoke(RemotingCommand(code, fields))


def test_consumer_connection_lists_each_client_and_the_groups_subscriptions(broker):
    one = FakeClient(broker, "127.0.0.1@one")
    two = FakeClient(broker, "127.0.0.1@two")
    try:
        assert one.invoke(heartbeat("127.0.0.1@one")).code == ResponseCode.SUCCESS
        assert two.invoke(heartbeat("127.0.0.1@two", producer_group=None)).code == ResponseCode.SUCCESS
        r = connection_list(broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="GroupC")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        body = loads(r.body.decode())
        connections = sorted(body.pop("connectionSet"), key=lambda c: c["clientId"])
        assert connections == [
            {"clientAddr": one.address, "clientId": "127.0.0.1@one", "language": "JAVA", "version": V4_9_8},
            {"clientAddr": two.address, "clientId": "127.0.0.1@two", "language": "JAVA", "version": V4_9_8}]
        assert body == {"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "subscriptionTable": {"%RETRY%GroupC": SUB_RETRY, "TopicC": SUB_T}}
        # fastjson's text: sorted keys, the sets in the order the client sent them
        assert '"tagsSet":["TagA","TagB"]' in r.body.decode() and '"codeSet":[2598919,2598920]' in r.body.decode()
        # a newer heartbeat without a topic drops the topic from the group's subscriptions (updateSubscription)
        newer = dict(SUB_RETRY, subVersion=SUB_RETRY["subVersion"] + 1)
        assert one.invoke(heartbeat("127.0.0.1@one", subs=[newer])).code == ResponseCode.SUCCESS
        r = connection_list(broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="GroupC")
        assert loads(r.body.decode())["subscriptionTable"] == {"%RETRY%GroupC": newer}
    finally:
        one.close()
        two.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = connection_list(broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="GroupC")
        if r.code != ResponseCode.SUCCESS:
            break
        time.sleep(0.05)
    assert (r.code, r.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[GroupC] not online")


def test_producer_connection_lists_the_groups_clients(broker):
    r = connection_list(broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, producerGroup="GroupP")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[GroupP] not exist")
    one = FakeClient(broker, "127.0.0.1@one")
    try:
        assert one.invoke(heartbeat("127.0.0.1@one", consumer_group=None)).code == ResponseCode.SUCCESS
        r = connection_list(broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, producerGroup="GroupP")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert loads(r.body.decode()) == {"connectionSet": [{"clientAddr": one.address, "clientId": "127.0.0.1@one",
                                                             "language": "JAVA", "version": V4_9_8}]}
        # UNREGISTER_CLIENT takes the group's last client: the group goes (ProducerManager.unregisterProducer)
        r = one.invoke(RemotingCommand(RequestCode.UNREGISTER_CLIENT, {"clientID": "127.0.0.1@one",
                                                                        "producerGroup": "GroupP"}))
        assert r.code == ResponseCode.SUCCESS
        r = connection_list(broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, producerGroup="GroupP")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[GroupP] not exist")
    finally:
        one.close()


def test_a_client_that_is_not_java_is_listed_with_its_language(broker):
    one = FakeClient(broker, "10.0.0.1@cpp")
    try:
        request = heartbeat("10.0.0.1@cpp", consumer_group=None)
        request.language, request.version = "CPP", 1
        assert one.invoke(request).code == ResponseCode.SUCCESS
        r = connection_list(broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, producerGroup="GroupP")
        assert loads(r.body.decode())["connectionSet"][0]["language"] == "CPP"
        assert loads(r.body.decode())["connectionSet"][0]["version"] == 1
    finally:
        one.close()


def _running_info(req: RemotingCommand) -> RemotingCommand:
    info = {"jstack": req.ext_fields.get("jstackEnable"), "properties": {"consumeType": "CONSUME_PASSIVELY"}}
    return req.response(ResponseCode.SUCCESS, body=json.dumps(info).encode())


def test_consumer_running_info_is_fetched_from_the_client_over_its_connection(broker):
    one = FakeClient(broker, "127.0.0.1@one", {RequestCode.GET_CONSUMER_RUNNING_INFO: _running_info})
    try:
        assert one.invoke(heartbeat("127.0.0.1@one")).code == ResponseCode.SUCCESS
        ask = RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "GroupC",
                                                                      "clientId": "127.0.0.1@one",
                                                                      "jstackEnable": "true"})
        r = broker.invoke(ask)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert json.loads(r.body) == {"jstack": "true", "properties": {"consumeType": "CONSUME_PASSIVELY"}}
        # the client was asked with the admin's header fields and body
        (asked,) = one.received
        assert asked.code == RequestCode.GET_CONSUMER_RUNNING_INFO and not asked.is_response
        assert asked.ext_fields == ask.ext_fields
        for client_id, remark in [("127.0.0.1@nobody", "The Consumer <GroupC> <127.0.0.1@nobody> not online")]:
            r = broker.invoke(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                              {"consumerGroup": "GroupC", "clientId": client_id}))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark)
    finally:
        one.close()


def test_consumer_running_info_of_a_client_too_old(broker):
    old = FakeClient(broker, "127.0.0.1@old")
    try:
        request = heartbeat("127.0.0.1@old")
        request.version = 61  # V3_1_7: before V3_1_8_SNAPSHOT
        assert old.invoke(request).code == ResponseCode.SUCCESS
        r = broker.invoke(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                          {"consumerGroup": "GroupC", "clientId": "127.0.0.1@old"}))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <127.0.0.1@old> Version "
                                                                 "<V3_1_7> too low to finish, please upgrade it to "
                                                                 "V3_1_8_SNAPSHOT")
    finally:
        old.close()


def test_consumer_running_info_of_a_silent_client_times_out(broker):
    """4.9.8 waits 10 s for the client's answer, then answers CONSUME_MSG_TIMEOUT."""
    import asyncio

    async def never(req):
        await asyncio.sleep(3600)

    silent = FakeClient(broker, "127.0.0.1@silent", {RequestCode.GET_CONSUMER_RUNNING_INFO: never})
    try:
        assert silent.invoke(heartbeat("127.0.0.1@silent")).code == ResponseCode.SUCCESS
        r = broker.invoke(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                          {"consumerGroup": "GroupC", "clientId": "127.0.0.1@silent"}), 30)
        assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT
        assert r.remark.startswith("consumer <GroupC> <127.0.0.1@silent> Timeout: ")
    finally:
        silent.close()


def reset_offset(topic: str, group: str, timestamp: int, force: bool, language: str = "JAVA") -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET as mqadmin resetOffsetByTime sends it (-c: the C++ client's body)."""
    return RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": topic, "group": group, "timestamp": str(timestamp), "isForce": str(force).lower()},
        language=language)


def _fill(broker, topic: str, per_queue: int) -> None:
    from test_admin_topics import create_topic
    from test_broker_protocol import send_v2
    assert broker.invoke(create_topic(topic, read=2, write=2)).code == ResponseCode.SUCCESS
    for i in range(per_queue * 2):
        assert broker.invoke(send_v2(topic, b"m", i % 2)).code == ResponseCode.SUCCESS
    assert broker.broker.store.wait_dispatched()


def test_reset_offset_by_time_answers_the_offsets_and_pushes_them_to_the_clients(broker):
    _fill(broker, "ResetT", 4)
    offsets = broker.broker.offsets
    offsets.commit_offset("test", "GroupC", "ResetT", 0, 3)
    offsets.commit_offset("test", "GroupC", "ResetT", 1, 1)
    one = FakeClient(broker, "127.0.0.1@one", {RequestCode.RESET_CONSUMER_CLIENT_OFFSET: lambda req: None})
    try:
        assert one.invoke(heartbeat("127.0.0.1@one")).code == ResponseCode.SUCCESS
        # to the start (timestamp 0 finds offset 0): forced or not, every queue goes back to 0
        r = broker.invoke(reset_offset("ResetT", "GroupC", 0, False))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        table = ('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"ResetT"}:0,'
                 '{"brokerName":"broker-a","queueId":1,"topic":"ResetT"}:0}}')
        assert r.body.decode() == table
        deadline = time.monotonic() + 20
        while not one.received and time.monotonic() < deadline:
            time.sleep(0.02)
        (pushed,) = one.received
        assert pushed.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET and pushed.is_oneway
        assert pushed.ext_fields == {"topic": "ResetT", "group": "GroupC", "timestamp": "0", "isForce": "false"}
        assert pushed.body.decode() == table
        # "now" (-1) is each queue's max offset: taken when forced, else only where it is below the committed one
        r = broker.invoke(reset_offset("ResetT", "GroupC", -1, True))
        assert r.body.decode() == table.replace("}:0", "}:4")
        r = broker.invoke(reset_offset("ResetT", "GroupC", -1, False))
        assert r.body.decode() == table.replace("}:0,", "}:3,").replace("}:0}", "}:1}")
        # the C++ client's body: a list (ResetOffsetBodyForC) when the admin's request says CPP
        one.received.clear()
        r = broker.invoke(reset_offset("ResetT", "GroupC", 0, True, language="CPP"))
        assert r.body.decode() == table  # the answer to the admin is the map all the same
        deadline = time.monotonic() + 20
        while not one.received and time.monotonic() < deadline:
            time.sleep(0.02)
        assert loads(one.received[0].body.decode()) == {"offsetTable": [
            {"brokerName": "broker-a", "offset": 0, "queueId": 0, "topic": "ResetT"},
            {"brokerName": "broker-a", "offset": 0, "queueId": 1, "topic": "ResetT"}]}
    finally:
        one.close()


def test_reset_offset_refusals(broker):
    _fill(broker, "ResetT", 1)
    r = broker.invoke(reset_offset("NoSuchT", "GroupC", 0, True))
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "[reset-offset] reset offset failed, no topic in this "
                                                             "broker. topic=NoSuchT")
    r = broker.invoke(reset_offset("ResetT", "GroupC", 0, True))
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <GroupC> not exist")
    broker.broker.offsets.commit_offset("test", "GroupC", "ResetT", 0, 1)
    broker.broker.offsets.commit_offset("test", "GroupC", "ResetT", 1, 1)
    r = broker.invoke(reset_offset("ResetT", "GroupC", 0, True))
    assert (r.code, r.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "Consumer not online, so can not reset offset, "
                                                                    "Group: GroupC Topic: ResetT Timestamp: 0")
    old = FakeClient(broker, "127.0.0.1@old")
    try:
        request = heartbeat("127.0.0.1@old")
        request.version = 27  # V3_0_6: before V3_0_7_SNAPSHOT
        assert old.invoke(request).code == ResponseCode.SUCCESS
        r = broker.invoke(reset_offset("ResetT", "GroupC", 0, True))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the client does not support this feature. "
                                                                 "version=V3_0_6")
    finally:
        old.close()


def test_version_desc_is_mqversion_get_version_desc():
    """MQVersion.Version's ordinals, at the seams of its list (read from 4.9.8's enum: 613 names)."""
    from rmqstore.broker.clients import version_desc
    assert [version_desc(v) for v in (0, 1, 15, 16, 45, 46, 66, 86, 87, 409, 410, 611, 612, 9999)] == [
        "V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_FINAL", "V3_0_1_SNAPSHOT", "V3_0_15", "V3_1_0_SNAPSHOT",
        "V3_2_0_SNAPSHOT", "V3_3_1_SNAPSHOT", "V3_3_1", "V4_9_8", "V4_9_9_SNAPSHOT", "V5_9_9", "HIGHER_VERSION",
        "HIGHER_VERSION"]
