"""rmqstore.admin's calls against our broker (its embedded name server), each checked against what the broker
holds: topics and their queues, subscription groups, a group's offsets and lag, clients online, offset resets
(pushed to an online group, committed for an offline one), messages by id and by key with their tracks, the broker's
runtime figures and configuration, and the cluster snapshot a live view polls -- with a broker that is down in it.
The same calls against the Java broker, beside mqadmin: tests/interop/test_admin_client_interop.py."""

from __future__ import annotations

import json
import time

import pytest

from broker_support import BrokerThread
from rmqstore.admin import Admin
from rmqstore.broker.namesrv.register_body import encode_register_body
from rmqstore.common.errors import AdminError
from rmqstore.format.record import decode_message_id
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from test_broker_protocol import send_v2

pytestmark = pytest.mark.timeout(180)

GROUP, PRODUCER_GROUP, TOPIC = "CG_ops", "PG_ops", "OpsT"


class World:
    """Our broker, a wire client standing for a RocketMQ client (heartbeats, sends, commits) and an admin."""

    def __init__(self, bt: BrokerThread):
        self.bt = bt
        self.address = f"127.0.0.1:{bt.port}"
        self.client = bt.client()
        self.admin = Admin(bt.namesrv, timeout=10)
        self.sub_version = 0

    def ask(self, code: int, body: bytes = b"", **ext) -> RemotingCommand:
        answer = self.bt.call(self.client.invoke(RemotingCommand(code, {k: str(v) for k, v in ext.items()}, body)))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return answer

    def heartbeat(self, topic: str = TOPIC, tags: str = "*") -> None:
        """A push consumer of GROUP on ``topic`` and a producer of PRODUCER_GROUP, online on this connection (each
        heartbeat's subscription newer than the last)."""
        tag_set = [] if tags == "*" else tags.split(" || ")
        self.sub_version += 1
        sub = {"topic": topic, "subString": tags, "tagsSet": tag_set, "codeSet": [], "subVersion": self.sub_version}
        data = {"clientID": "127.0.0.1@ops", "producerDataSet": [{"groupName": PRODUCER_GROUP}],
                "consumerDataSet": [{"groupName": GROUP, "consumeType": "CONSUME_PASSIVELY",
                                     "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                     "subscriptionDataSet": [sub]}]}
        self.bt.call(self.client.invoke(RemotingCommand(RequestCode.HEART_BEAT, {}, json.dumps(data).encode(),
                                                        language="JAVA", version=409)))

    def send(self, topic: str, body: bytes, queue_id: int, **props) -> str:
        answer = self.bt.call(self.client.invoke(send_v2(topic, body, queue_id, dict(props, WAIT="true"))))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert self.bt.broker.store.wait_dispatched(30)  # in its consume queue and index, as the admin will ask
        return answer.ext_fields["msgId"]

    def commit(self, topic: str, queue_id: int, offset: int, group: str = GROUP) -> None:
        self.ask(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup=group, topic=topic, queueId=queue_id,
                 commitOffset=offset)

    def close(self) -> None:
        self.admin.close()
        self.bt.call(self.client.close())


@pytest.fixture
def world(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        w = World(bt)
        try:
            yield w
        finally:
            w.close()


def traffic(w: World) -> list[str]:
    """TOPIC with 4 queues, 7 messages (queue i % 4, key k<i>, tag tagA/tagB), GROUP online, 1 and 2 consumed on
    queues 0 and 1, offsets 0 committed on queues 2 and 3: lag 1, 0, 2, 1 on queues 0-3."""
    w.admin.update_topic(TOPIC, broker_addr=w.address, read_queue_nums=4, write_queue_nums=4)
    ids = [w.send(TOPIC, f"ops {i}".encode(), i % 4, KEYS=f"k{i}", TAGS="tagA" if i % 2 == 0 else "tagB")
           for i in range(7)]
    w.heartbeat()
    for queue_id, offset in enumerate((1, 2, 0, 0)):
        w.commit(TOPIC, queue_id, offset)
    return ids


# -- topics ---------------------------------------------------------------------------------------------------------

def test_topics_created_routed_counted_and_deleted(world):
    w = world
    applied = w.admin.update_topic("OpsA", broker_addr=w.address, read_queue_nums=3, write_queue_nums=2, perm=6)
    assert applied.brokers == [w.address] and applied.config.write_queue_nums == 2
    config = w.bt.broker.topics.select("OpsA")
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (3, 2, 6)
    w.admin.update_topic("OpsB", cluster="DefaultCluster")  # mqadmin's default 8 and 8, to every master
    assert w.bt.broker.topics.select("OpsB").write_queue_nums == 8
    route = w.admin.topic_route("OpsA")
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queues] == [("broker-a", 3, 2)]
    assert route.broker_addresses() == [w.address]
    assert {"OpsA", "OpsB"} <= set(w.admin.topic_list().topics)
    for i in range(5):
        w.send("OpsA", b"x", i % 2)
    status = w.admin.topic_status("OpsA")
    assert [(q.queue_id, q.min_offset, q.max_offset) for q in status.queues] == [(0, 0, 3), (1, 0, 2)]
    store = w.bt.broker.store
    assert all(q.last_update_timestamp == store.get_message("", "OpsA", q.queue_id, q.max_offset - 1, 1)
               .messages[0].store_timestamp for q in status.queues)
    assert list(status.to_pandas()["max_offset"]) == [3, 2]
    deleted = w.admin.delete_topic("OpsA", "DefaultCluster")
    assert deleted.brokers == [w.address] and w.bt.broker.topics.select("OpsA") is None
    with pytest.raises(AdminError) as info:
        w.admin.topic_route("OpsA")
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST


def test_an_ordered_topic_puts_its_layout_on_the_name_server(world):
    w = world
    applied = w.admin.update_topic("OpsOrderT", broker_addr=w.address, write_queue_nums=2, read_queue_nums=2,
                                   order=True)
    assert applied.order_conf == "broker-a:2" and applied.name_servers == [w.bt.namesrv]
    assert w.bt.broker.namesrv.kv.get_kv_config("ORDER_TOPIC_CONFIG", "OpsOrderT") == "broker-a:2"


# -- subscription groups ---------------------------------------------------------------------------------------------

def test_subscription_groups_created_and_deleted(world):
    w = world
    w.admin.update_sub_group("OpsG", broker_addr=w.address, retry_max_times=3, retry_queue_nums=2,
                             consume_broadcast_enable=True)
    group = w.bt.broker.groups.table["OpsG"]
    assert (group.retry_max_times, group.retry_queue_nums, group.consume_broadcast_enable,
            group.consume_from_min_enable) == (3, 2, True, False)
    assert w.admin.subscription_groups(w.address).groups["OpsG"] == group
    w.commit(TOPIC if w.bt.broker.topics.select(TOPIC) else "TBW102", 0, 0, group="OpsG")
    w.admin.delete_sub_group("OpsG", broker_addr=w.address, remove_offset=True)
    assert "OpsG" not in w.bt.broker.groups.table
    assert not w.bt.broker.offsets.which_topic_by_consumer("OpsG")


# -- progress, connections, resets ------------------------------------------------------------------------------------

def test_consumer_progress_per_queue_and_of_every_group(world):
    w = world
    traffic(w)
    progress = w.admin.consumer_progress(GROUP)
    rows = {(q.topic, q.queue_id): (q.broker_offset, q.consumer_offset, q.lag) for q in progress.queues}
    assert {k: v for k, v in rows.items() if k[0] == TOPIC} == {(TOPIC, 0): (2, 1, 1), (TOPIC, 1): (2, 2, 0),
                                                                 (TOPIC, 2): (2, 0, 2), (TOPIC, 3): (1, 0, 1)}
    assert progress.diff_total == 4 and progress.group == GROUP
    first = w.bt.broker.store.get_message("", TOPIC, 0, 0, 1).messages[0].store_timestamp
    assert next(q for q in progress.queues if q.topic == TOPIC and q.queue_id == 0).last_timestamp == first
    frame = progress.to_pandas()
    assert int(frame["lag"].sum()) == 4 and set(frame.columns) >= {"broker_offset", "consumer_offset", "lag"}
    (row,) = [g for g in w.admin.all_consumer_progress().groups if g.group == GROUP]
    assert (row.count, row.version_desc, row.consume_type, row.message_model, row.diff_total) == (
        1, "V4_9_8", "CONSUME_PASSIVELY", "CLUSTERING", 4)


def test_a_group_that_consumed_nothing_is_refused_as_mqadmin_refuses_it(world):
    w = world
    w.admin.update_sub_group("OpsIdleG", broker_addr=w.address)
    w.heartbeat()  # creates GROUP's retry topic; OpsIdleG has none
    with pytest.raises(AdminError) as info:
        w.admin.consumer_progress("OpsIdleG")
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST and "%RETRY%OpsIdleG" in info.value.remark


def test_consumer_and_producer_connections(world):
    w = world
    traffic(w)
    cc = w.admin.consumer_connection(GROUP)
    (conn,) = cc.connections
    assert (conn.client_id, conn.language, conn.version_desc) == ("127.0.0.1@ops", "JAVA", "V4_9_8")
    assert conn.client_addr == w.bt.call(_local_address(w.client))
    assert [(s.topic, s.sub_string) for s in cc.subscriptions] == [(TOPIC, "*")]
    assert (cc.consume_type, cc.message_model, cc.consume_from_where) == ("CONSUME_PASSIVELY", "CLUSTERING",
                                                                           "CONSUME_FROM_LAST_OFFSET")
    assert w.admin.consumer_connection(GROUP, broker_addr=w.address).connections == cc.connections
    pc = w.admin.producer_connection(PRODUCER_GROUP, TOPIC)
    assert [c.client_id for c in pc.connections] == ["127.0.0.1@ops"]
    with pytest.raises(AdminError) as info:
        w.admin.consumer_connection("NobodyG", broker_addr=w.address)
    assert info.value.code == ResponseCode.CONSUMER_NOT_ONLINE


async def _local_address(client) -> str:
    host, port = client.connection.writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


def test_reset_offsets_pushed_to_an_online_group(world):
    w = world
    traffic(w)
    reset = w.admin.reset_offset_by_time(GROUP, TOPIC, 0)
    assert reset.pushed and reset.offsets == {("broker-a", q): 0 for q in range(4)}
    assert list(reset.to_pandas()["offset"]) == [0, 0, 0, 0]


def test_reset_offsets_committed_for_an_offline_group(world):
    w = world
    traffic(w)
    w.bt.call(w.client.close())  # the group goes offline
    w.client = w.bt.client()
    deadline = time.monotonic() + 30
    while w.bt.broker.clients.consumers.get(GROUP) and w.bt.broker.clients.consumers[GROUP].connections:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    reset = w.admin.reset_offset_by_time(GROUP, TOPIC, "now", force=True)
    assert not reset.pushed and reset.offsets == {("broker-a", 0): 2, ("broker-a", 1): 2, ("broker-a", 2): 2,
                                                  ("broker-a", 3): 1}
    assert [w.bt.broker.offsets.query_offset(GROUP, TOPIC, q) for q in range(4)] == [2, 2, 2, 1]
    back = w.admin.reset_offset_by_time(GROUP, TOPIC, 0, force=False)  # not forced: only where it goes back
    assert [r.rollback_offset for r in back.rollback] == [0, 0, 0, 0]
    assert [w.bt.broker.offsets.query_offset(GROUP, TOPIC, q) for q in range(4)] == [0, 0, 0, 0]


# -- messages ---------------------------------------------------------------------------------------------------------

def test_query_msg_by_id_with_its_tracks(world):
    w = world
    ids = traffic(w)
    result = w.admin.query_msg_by_id(ids[0])
    (msg,) = result.messages
    _, physical = decode_message_id(ids[0])
    assert (msg.offset_msg_id, msg.commit_log_offset, msg.topic, msg.keys, msg.tags, msg.queue_id,
            msg.queue_offset, msg.body) == (ids[0], physical, TOPIC, "k0", "tagA", 0, 0, b"ops 0")
    assert msg.store_host == w.address
    assert [(t.consumer_group, t.track_type) for t in result.tracks[ids[0]]] == [(GROUP, "CONSUMED")]
    not_yet = w.admin.query_msg_by_id(ids[2]).tracks[ids[2]]  # queue 2: nothing committed
    assert [t.track_type for t in not_yet] == ["NOT_CONSUME_YET"]
    w.heartbeat(tags="tagB")  # the group now takes tagB only: a consumed tagA message was filtered out
    assert [t.track_type for t in w.admin.query_msg_by_id(ids[0]).tracks[ids[0]]] == ["CONSUMED_BUT_FILTERED"]


def test_query_msg_by_key(world):
    w = world
    ids = traffic(w)
    found = w.admin.query_msg_by_key(TOPIC, "k5")
    assert [(m.offset_msg_id, m.body) for m in found.messages] == [(ids[5], b"ops 5")]
    assert found.index_last_update_timestamp > 0
    assert w.admin.query_msg_by_key(TOPIC, "nokey").messages == []
    with pytest.raises(AdminError):
        w.admin.query_msg_by_id("7F000001000000000000000000000000")  # nothing listens at 127.0.0.1:0


# -- the broker -------------------------------------------------------------------------------------------------------

def test_broker_status_and_config(world):
    w = world
    traffic(w)
    status = w.admin.broker_status(w.address)
    assert status.commit_log_max_offset == w.bt.broker.store.get_max_phy_offset()
    assert status.msg_put_total_today_now == 7 and status.version_desc == "V4_9_8"
    config = w.admin.get_broker_config(w.address)
    assert config.properties["brokerName"] == "broker-a"
    assert config.store_path_root_dir == w.bt.broker.store_root
    w.admin.update_broker_config(w.address, {"shortPollingTimeMills": 700})
    assert w.admin.get_broker_config(w.address).properties["shortPollingTimeMills"] == "700"


# -- the snapshot a live view polls --------------------------------------------------------------------------------

def register_dead_broker(w: World, address: str):
    """A broker ``broker-dead`` the name server routes, at an address nothing listens on (registered over a
    connection kept open: a name server forgets a broker whose registering connection closes)."""
    host, _, port = w.bt.namesrv.rpartition(":")
    client = w.bt.call(RemotingClient().connect(host, int(port)))
    header = {"clusterName": "DefaultCluster", "brokerAddr": address, "brokerName": "broker-dead", "brokerId": "0",
              "haServerAddr": address, "compressed": "false"}
    body = encode_register_body({"counter": 1, "timestamp": 1}, {})
    answer = w.bt.call(client.invoke(RemotingCommand(RequestCode.REGISTER_BROKER, header, body, version=409)))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return client


def test_a_snapshot_of_brokers_queues_and_lag_with_a_broker_down(world):
    w = world
    traffic(w)
    w.admin.update_topic("OpsQuietT", broker_addr=w.address, read_queue_nums=1, write_queue_nums=1)
    dead_address = "127.0.0.1:1"
    keeper = register_dead_broker(w, dead_address)
    try:
        snap = w.admin.snapshot()
    finally:
        w.bt.call(keeper.close())
    by_name = {b.broker_name: b for b in snap.brokers}
    assert by_name["broker-a"].runtime.commit_log_max_offset == w.bt.broker.store.get_max_phy_offset()
    assert by_name["broker-dead"].runtime is None and dead_address in by_name["broker-dead"].error
    assert snap.errors and all(dead_address in e for e in snap.errors)
    queues = {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in snap.queues}
    assert queues == {(TOPIC, 0): (0, 2), (TOPIC, 1): (0, 2), (TOPIC, 2): (0, 2), (TOPIC, 3): (0, 1),
                      ("OpsQuietT", 0): (0, 0)}  # user topics only: no system, retry or dead-letter topic
    lag = {(q.topic, q.queue_id): q.lag for q in snap.progress if q.group == GROUP}
    assert {k: v for k, v in lag.items() if k[0] == TOPIC} == {(TOPIC, 0): 1, (TOPIC, 1): 0, (TOPIC, 2): 2,
                                                               (TOPIC, 3): 1}
    assert snap.lag_by_group()[GROUP] == 4
    frames = snap.to_pandas()
    assert set(frames) == {"brokers", "queues", "progress"} and len(frames["brokers"]) == 2
    assert json.loads(json.dumps(snap.to_dict()))["tables"]["brokers"][0]["broker_name"] == "broker-a"
    only = w.admin.snapshot(["OpsQuietT"], groups=[])
    assert [(q.topic, q.queue_id) for q in only.queues] == [("OpsQuietT", 0)] and only.progress == []
