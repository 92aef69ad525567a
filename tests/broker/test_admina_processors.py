"""The statistics and status requests mqadmin sends, answered as RocketMQ 4.9.8's AdminBrokerProcessor answers them:
GET_BROKER_RUNTIME_INFO (28), VIEW_BROKER_STATS_DATA (315), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_BROKER_CONSUME_STATS (317) and QUERY_TOPIC_CONSUME_BY_WHO (300), with the bodies fastjson writes (maps keyed by
MessageQueue objects).  tests/interop/test_admina_mqadmin.py has the real mqadmin read them."""

from __future__ import annotations

import json
import re
import time

import pytest

from broker_support import BrokerThread, small_store_config
from test_broker_protocol import pull, send_v2
from rmqstore.broker.jsonfmt import loads
from rmqstore.broker.stats import MINUTE, TOPIC_PUT_NUMS
from rmqstore.format.record import decode_message_id
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(120)

#: the keys a 4.9.8 broker's table has after a delay-level-1 delivery, the transient store pool off (seen on the
#: real broker: tests/interop/test_admina_mqadmin.py compares the whole brokerStatus output)
RUNTIME_KEYS = {
    "EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity", "bootTimestamp", "brokerVersion",
    "brokerVersionDesc", "commitLogDirCapacity", "commitLogDiskRatio", "commitLogMaxOffset", "commitLogMinOffset",
    "consumeQueueDiskRatio", "dispatchBehindBytes", "dispatchMaxBuffer", "earliestMessageTimeStamp", "getFoundTps",
    "getMessageEntireTimeMax", "getMissTps", "getTotalTps", "getTransferedTps", "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow", "msgGetTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow",
    "msgPutTotalYesterdayMorning", "pageCacheLockTimeMills", "pullThreadPoolQueueCapacity",
    "pullThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueSize", "putLatency99", "putLatency999",
    "putMessageAverageSize", "putMessageDistributeTime", "putMessageEntireTimeMax", "putMessageFailedTimes",
    "putMessageSizeTotal", "putMessageTimesTotal", "putTps", "queryThreadPoolQueueCapacity",
    "queryThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueSize", "remainHowManyDataToFlush",
    "remainTransientStoreBufferNumbs", "runtime", "scheduleMessageOffset_1", "sendThreadPoolQueueCapacity",
    "sendThreadPoolQueueHeadWaitTimeMills", "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp",
}

_MQ_KEY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(-?\d+),"topic":"([^"]*)"\}:')


def body_json(r: RemotingCommand):
    """The body parsed; a MessageQueue map key ``{"brokerName":b,"queueId":q,"topic":t}`` becomes ``"t#b#q"``."""
    return loads(_MQ_KEY.sub(lambda m: f'"{m[3]}#{m[1]}#{m[2]}":', r.body.decode("utf-8")))


class Admin:
    """A broker and a client asking it."""

    def __init__(self, bt: BrokerThread):
        self.bt = bt
        self.client = bt.client()

    def ask(self, code: int, body: bytes = b"", **ext) -> RemotingCommand:
        return self.bt.call(self.client.invoke(RemotingCommand(code, {k: str(v) for k, v in ext.items()}, body)))

    def send(self, topic: str, body: bytes, queue_id: int, props: dict | None = None) -> str:
        r = self.bt.call(self.client.invoke(send_v2(topic, body, queue_id, props)))
        assert r.code == ResponseCode.SUCCESS, r.remark
        return r.ext_fields["msgId"]

    def store_time(self, msg_id: str) -> int:
        return self.bt.broker.store.look_message_by_offset(decode_message_id(msg_id)[1]).store_timestamp

    def heartbeat(self, group: str, topic: str) -> None:
        sub = {"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1}
        data = {"clientID": f"127.0.0.1@{group}", "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [sub]}]}
        assert self.ask(RequestCode.HEART_BEAT, json.dumps(data).encode()).code == ResponseCode.SUCCESS

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        assert self.ask(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup=group, topic=topic, queueId=queue_id,
                        commitOffset=offset).code == ResponseCode.SUCCESS


@pytest.fixture
def admin(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        a = Admin(bt)
        try:
            yield a
        finally:
            bt.call(a.client.close())


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- GET_BROKER_RUNTIME_INFO ------------------------------------------------------------------------------------

def test_the_runtime_table_has_4_9_8s_keys_and_the_stores_values(admin):
    bt = admin.bt
    store = bt.broker.store
    for n in range(3):
        admin.send("RtT", f"m{n}".encode(), 0)
    admin.send("RtD", b"later", 0, {"DELAY": "1", "WAIT": "true"})
    wait_for(lambda: bt.broker.schedule_service.offsets.get(1) == 1)  # delivered after its second
    store.wait_dispatched()
    assert bt.call(admin.client.invoke(pull("RtT", 0, 0))).code == ResponseCode.SUCCESS
    r = admin.ask(RequestCode.GET_BROKER_RUNTIME_INFO)
    assert r.code == ResponseCode.SUCCESS
    table = body_json(r)["table"]
    path_keys = [k for k in table if k.startswith("commitLogDiskRatio_")]
    assert path_keys == [f"commitLogDiskRatio_{store.root}/commitlog"]
    assert set(table) - set(path_keys) == RUNTIME_KEYS
    assert table["brokerVersion"] == "409" and table["brokerVersionDesc"] == "V4_9_8"
    assert table["putMessageTimesTotal"] == table["msgPutTotalTodayNow"] == "5"  # 3 + the delayed + its delivery
    assert table["putMessageSizeTotal"] == str(store.stats.snapshot()["putMessageSizeTotal"])
    assert table["msgGetTotalTodayNow"] == "3" and table["msgPutTotalTodayMorning"] == "0"
    assert table["commitLogMinOffset"] == "0" and table["commitLogMaxOffset"] == str(store.get_max_phy_offset())
    assert table["scheduleMessageOffset_1"] == "1,1"  # delivered up to 1 of 1
    assert table["dispatchBehindBytes"] == "0" and table["pageCacheLockTimeMills"] == "0"
    assert (table["sendThreadPoolQueueCapacity"], table["pullThreadPoolQueueCapacity"],
            table["queryThreadPoolQueueCapacity"], table["EndTransactionThreadPoolQueueCapacity"]) == (
        "10000", "100000", "20000", "100000")
    assert table["remainTransientStoreBufferNumbs"] == "2147483647"  # no pool: Integer.MAX_VALUE
    assert re.fullmatch(r"\d+ B|\d+\.\d [KMGTPE]iB", table["remainHowManyDataToFlush"])
    size = r"(\d+ B|\d+\.\d [KMGTPE]iB)"
    assert re.fullmatch(rf"Total : {size}, Free : {size}\.", table["commitLogDirCapacity"])
    assert re.fullmatch(r"\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]", table["runtime"])
    assert 0 <= int(time.time() * 1000) - int(table["bootTimestamp"]) < 600_000
    for key in ("commitLogDiskRatio", "consumeQueueDiskRatio", path_keys[0]):  # used space, rounded up to 1 %
        assert re.fullmatch(r"0\.\d\d?|1\.0", table[key])
    # 4.9.8's getEarliestMessageTime reads 2 * maxMessageSize (8 MiB) from the first offset: -1 until it can
    assert table["earliestMessageTimeStamp"] == "-1"


def test_the_earliest_message_time_and_the_transient_pool(tmp_path):
    cfg = small_store_config(max_message_size=1024, transient_store_pool_enable=True)
    with BrokerThread(tmp_path / "store", store_config=cfg) as bt:
        admin = Admin(bt)
        try:
            first = admin.send("RtE", b"f" * 900, 0)
            assert body_json(admin.ask(RequestCode.GET_BROKER_RUNTIME_INFO))["table"]["earliestMessageTimeStamp"] \
                == "-1"  # a range of 2 * maxMessageSize from the first offset is read: not yet written
            for _ in range(2):
                admin.send("RtE", b"n" * 900, 0)
            store = bt.broker.store  # readable once committed from the pool's buffer to the file
            wait_for(lambda: store.commit_log.mapped_file_queue.get_max_offset() >= 2 * cfg.max_message_size)
            table = body_json(admin.ask(RequestCode.GET_BROKER_RUNTIME_INFO))["table"]
            assert table["earliestMessageTimeStamp"] == str(admin.store_time(first))
        finally:
            bt.call(admin.client.close())
    assert 0 <= int(table["remainTransientStoreBufferNumbs"]) < cfg.transient_store_pool_size  # one is in use
    assert re.fullmatch(r"\d+ B|\d+\.\d [KMGTPE]iB", table["remainHowManyDataToCommit"])
    assert "scheduleMessageOffset_1" not in table  # no level delivered yet


# -- VIEW_BROKER_STATS_DATA -------------------------------------------------------------------------------------

def test_view_broker_stats_data_answers_the_three_windows(admin):
    stats = admin.bt.broker.stats
    stats.sampler.stop()  # the windows sampled by hand below, at known times
    admin.send("VsT", b"a", 0)
    admin.send("VsT", b"b", 1)
    stats.manager.sample(MINUTE, 1_000_000)
    item = stats.manager.get_stats_item(TOPIC_PUT_NUMS, "VsT")
    assert item.snapshot(MINUTE).sum == 2
    r = admin.ask(RequestCode.VIEW_BROKER_STATS_DATA, statsName="TOPIC_PUT_NUMS", statsKey="VsT")
    assert r.code == ResponseCode.SUCCESS
    # 2 messages in 2 calls over the 10 s before the first sample; the hour and day lists were never sampled
    assert r.body.decode() == ('{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":0.0,"sum":0,'
                               '"tps":0.0},"statsMinute":{"avgpt":1.0,"sum":2,"tps":0.2}}')
    missing = admin.ask(RequestCode.VIEW_BROKER_STATS_DATA, statsName="TOPIC_PUT_NUMS", statsKey="nope")
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <nope> not exist")
    unknown = admin.ask(RequestCode.VIEW_BROKER_STATS_DATA, statsName="NO_SUCH", statsKey="VsT")
    assert unknown.code == ResponseCode.SYSTEM_ERROR


# -- GET_TOPIC_STATS_INFO ---------------------------------------------------------------------------------------

def test_topic_stats_have_each_write_queues_offsets_and_last_store_time(admin):
    ids = [admin.send("TsT", f"m{n}".encode(), 0) for n in range(3)] + [admin.send("TsT", b"x", 2)]
    admin.bt.broker.store.wait_dispatched()
    r = admin.ask(RequestCode.GET_TOPIC_STATS_INFO, topic="TsT")
    assert r.code == ResponseCode.SUCCESS
    assert r.body.decode().startswith('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TsT"}:'
                                      '{"lastUpdateTimestamp":')
    table = body_json(r)["offsetTable"]
    assert table == {
        "TsT#broker-a#0": {"lastUpdateTimestamp": admin.store_time(ids[2]), "maxOffset": 3, "minOffset": 0},
        "TsT#broker-a#1": {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0},
        "TsT#broker-a#2": {"lastUpdateTimestamp": admin.store_time(ids[3]), "maxOffset": 1, "minOffset": 0},
        "TsT#broker-a#3": {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0},
    }
    missing = admin.ask(RequestCode.GET_TOPIC_STATS_INFO, topic="NoSuchT")
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchT] not exist")


# -- GET_CONSUME_STATS and GET_BROKER_CONSUME_STATS -------------------------------------------------------------

def consume_setup(admin) -> list[str]:
    ids = [admin.send("CsT", f"m{n}".encode(), 0) for n in range(3)] + [admin.send("CsT", b"x", 2)]
    admin.bt.broker.store.wait_dispatched()
    admin.commit("CG_cs", "CsT", 0, 2)
    return ids


def test_consume_stats_of_a_group_from_its_offsets(admin):
    ids = consume_setup(admin)
    stats = admin.bt.broker.stats
    stats.sampler.stop()
    pulled = admin.bt.call(admin.client.invoke(pull("CsT", 0, 0)))  # as CG_proto: another group
    assert pulled.code == ResponseCode.SUCCESS
    stats.manager.sample(MINUTE, 1_000_000)
    expected = {
        "CsT#broker-a#0": {"brokerOffset": 3, "consumerOffset": 2, "lastTimestamp": admin.store_time(ids[1])},
        "CsT#broker-a#1": {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0},
        "CsT#broker-a#2": {"brokerOffset": 1, "consumerOffset": 0, "lastTimestamp": 0},
        "CsT#broker-a#3": {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0},
    }
    for ext in ({}, {"topic": "CsT"}):
        r = admin.ask(RequestCode.GET_CONSUME_STATS, consumerGroup="CG_cs", **ext)
        assert r.code == ResponseCode.SUCCESS
        assert body_json(r) == {"consumeTps": 0.0, "offsetTable": expected}
    # the group that pulled: 3 messages in the 10 s before the sample -> consumeTps 0.3; it committed nothing
    r = body_json(admin.ask(RequestCode.GET_CONSUME_STATS, consumerGroup="CG_proto", topic="CsT"))
    assert r["consumeTps"] == 0.3 and r["offsetTable"]["CsT#broker-a#0"]["consumerOffset"] == 0
    # no topic and no offsets: nothing to show (mqadmin then says the group consumed nothing)
    assert body_json(admin.ask(RequestCode.GET_CONSUME_STATS, consumerGroup="CG_none")) == {
        "consumeTps": 0.0, "offsetTable": {}}


def test_an_online_group_shows_only_the_topics_it_subscribes_to(admin):
    consume_setup(admin)
    admin.commit("CG_cs", "OtherT", 0, 0)
    admin.send("OtherT", b"o", 0)
    admin.heartbeat("CG_cs", "OtherT")  # online, subscribed to OtherT only: CsT's offsets are not shown
    r = body_json(admin.ask(RequestCode.GET_CONSUME_STATS, consumerGroup="CG_cs"))
    assert sorted(r["offsetTable"]) == [f"OtherT#broker-a#{q}" for q in range(4)]


def test_broker_consume_stats_list_every_group_with_offsets(admin):
    ids = consume_setup(admin)
    admin.heartbeat("CG_cs", "CsT")  # a consumer makes the subscription group (an offset commit does not)
    r = admin.ask(RequestCode.GET_BROKER_CONSUME_STATS, isOrder="false")
    assert r.code == ResponseCode.SUCCESS
    data = body_json(r)
    assert data["brokerAddr"] == admin.bt.broker.config.broker_addr and data["totalDiff"] == 2  # (3-2) + (1-0)
    groups = {g: stats for entry in data["consumeStatsList"] for g, stats in entry.items()}
    assert set(groups) == set(admin.bt.broker.groups.table) and "CG_cs" in groups  # every group, offsets or not
    assert groups["CG_cs"] == [{"consumeTps": 0.0, "offsetTable": {
        "CsT#broker-a#0": {"brokerOffset": 3, "consumerOffset": 2, "lastTimestamp": admin.store_time(ids[1])},
        "CsT#broker-a#1": {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0},
        "CsT#broker-a#2": {"brokerOffset": 1, "consumerOffset": 0, "lastTimestamp": 0},
        "CsT#broker-a#3": {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0}}}]
    ordered = body_json(admin.ask(RequestCode.GET_BROKER_CONSUME_STATS, isOrder="true"))
    assert ordered["totalDiff"] == 0  # CsT is not an order topic
    assert {g: s for e in ordered["consumeStatsList"] for g, s in e.items()}["CG_cs"] == []


# -- QUERY_TOPIC_CONSUME_BY_WHO ---------------------------------------------------------------------------------

def test_who_consumes_a_topic_online_groups_and_groups_with_offsets(admin):
    admin.send("WhoT", b"w", 0)
    admin.commit("CG_offsets", "WhoT", 0, 1)
    admin.heartbeat("CG_online", "WhoT")
    admin.heartbeat("CG_elsewhere", "OtherT")
    r = admin.ask(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic="WhoT")
    assert r.code == ResponseCode.SUCCESS
    assert body_json(r) == {"groupList": ["CG_offsets", "CG_online"]}
    assert body_json(admin.ask(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic="NobodyT")) == {"groupList": []}
