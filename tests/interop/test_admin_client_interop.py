"""``rmqstore admin`` beside RocketMQ 4.9.8's own mqadmin, and ``rmqstore.admin.Admin``'s values, against a Java
4.9.8 broker and against ours (issue 24): clusterList, topicList, topicRoute, topicStatus, updateTopic, deleteTopic,
updateSubGroup, deleteSubGroup, consumerProgress, consumerConnection, producerConnection, brokerStatus,
getBrokerConfig, updateBrokerConfig, resetOffsetByTime, queryMsgById and queryMsgByKey.

Two sides, each a name server and a broker ``broker-a`` of ``DefaultCluster``: a Java name server with the Java
broker, and a standalone ``rmqstore namesrv`` with our broker.  Both get the same traffic: ``AdminTraffic.java``
(13 keyed messages to AdminT, message i to queue i % 4, the first 10 consumed by CG_admin, which then goes offline:
lag 1, 1, 1, 0) and ``AdminbClients.java`` kept online (producer PG_adminb, push consumer CG_adminb on
AdmClientT).  Then, per command and side, mqadmin and ``rmqstore admin`` run with the same arguments against the
same side: the two outputs must be the same but for what a mask names -- only what depends on the moment of the
run (rates, disk use, hours since the first message, uptime); the figures the broker keeps (offsets, store times,
client addresses) are compared as they are.  Where mqadmin prints a Java hash map in its iteration order
(getBrokerConfig, resetOffsetByTime's queues) the lines are compared sorted.  The Python API's results are checked
against what the traffic made (offsets, lag = produced - consumed, clients) and turned into DataFrames.

JVM starts: one Java name server and broker for the module, the two traffic programs, and mqadmin in one JVM per
batch of commands (:func:`~.mqadmin_support.mqadmin_batch`): the read-only commands of both sides in one.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from broker_support import BrokerThread, NamesrvThread, run_async
from conftest import run_cli
from rmqstore.admin import Admin, BrokerAddress
from rmqstore.common.errors import AdminError
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

from .java_clients import JavaClients
from .mqadmin_support import (Mask, Side, assert_same, column, mqadmin_batch, normalize, run_traffic,
                              value_of)
from .test_admina_mqadmin import BROKER_STATUS

pytestmark = pytest.mark.timeout(1800)

CLIENT_TOPIC, CLIENT_GROUP, CLIENT_PRODUCERS, SENT = "AdmClientT", "CG_adminb", "PG_adminb", 10
#: AdminTraffic.java: messages 0-9 to AdminT queue i % 4, all consumed by CG_admin; then 10, 11, 12 to queues 0-2
PRODUCED = Counter([i % 4 for i in range(10)] + [0, 1, 2])
CONSUMED = Counter(i % 4 for i in range(10))


@dataclass
class World:
    sides: dict[str, Side]
    admins: dict[str, Admin]
    first: dict[str, str]  # side -> offset msgId of AdminT's first message
    clients: JavaClients
    bodies: Path  # where `rmqstore admin queryMsgById --body-dir` writes
    reads: dict[tuple[str, str], tuple[str, str]]  # (side, command) -> (mqadmin's output, ours)


#: the read-only commands (mqadmin's arguments; ``{broker}``, ``{first}`` filled in per side)
READS: dict[str, list[str]] = {
    "clusterList": ["clusterList"],
    "clusterList -m": ["clusterList", "-m"],
    "topicList": ["topicList"],
    "topicRoute": ["topicRoute", "-t", "AdminT"],
    "topicRoute -l": ["topicRoute", "-t", "AdminT", "-l"],
    "topicStatus": ["topicStatus", "-t", "AdminT"],
    "consumerProgress -g": ["consumerProgress", "-g", "CG_admin"],
    "consumerProgress -g online": ["consumerProgress", "-g", CLIENT_GROUP],
    "consumerProgress": ["consumerProgress"],
    "consumerConnection": ["consumerConnection", "-g", CLIENT_GROUP],
    "consumerConnection -b": ["consumerConnection", "-g", CLIENT_GROUP, "-b", "{broker}"],
    "producerConnection": ["producerConnection", "-g", CLIENT_PRODUCERS, "-t", CLIENT_TOPIC],
    "brokerStatus": ["brokerStatus", "-b", "{broker}"],
    "getBrokerConfig": ["getBrokerConfig", "-b", "{broker}"],
    "getBrokerConfig -c": ["getBrokerConfig", "-c", "DefaultCluster"],
    "queryMsgById": ["queryMsgById", "-i", "{first}"],
    "queryMsgByKey": ["queryMsgByKey", "-t", "AdminT", "-k", "key3"],
}


def fill(args: list[str], side: Side, first: str = "") -> list[str]:
    return [a.replace("{broker}", side.broker).replace("{first}", first) for a in args]


def ours(side: Side, *args: str, code: int = 0) -> str:
    """What ``rmqstore admin ARGS -n namesrv`` printed (in-process, stdout not a terminal: mqadmin's text)."""
    got, out, err = run_cli(["admin", *args, "-n", side.namesrv, "--timeout", "30"])
    assert got == code, (args, got, out, err)
    return out


def mqadmin(rmq_java, *runs: tuple[Side, list[str]]) -> list[str]:
    """mqadmin's output for each (side, arguments), all in one JVM."""
    return mqadmin_batch(rmq_java, *([*args, "-n", side.namesrv] for side, args in runs))


def wait_until(what: Callable[[], object], timeout: float = 120, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(every)


@pytest.fixture(scope="module")
def world(rmq_java, tmp_path_factory):
    base = tmp_path_factory.mktemp("admin24")
    with contextlib.ExitStack() as stack:
        ns_java = stack.enter_context(rmq_java.java_namesrv(base / "ns-java"))
        java = stack.enter_context(rmq_java.java_broker(base / "java", {"namesrvAddr": ns_java,
                                                                        "brokerName": "broker-a"}))
        ns_ours = stack.enter_context(NamesrvThread()).address
        conf = base / "ours" / "broker.conf"
        conf.parent.mkdir()
        conf.write_text("brokerName=broker-a\nbrokerClusterName=DefaultCluster\n", encoding="utf-8")
        bt = stack.enter_context(BrokerThread(base / "ours" / "store", embedded_namesrv=False, namesrv_addr=ns_ours,
                                              broker_config_path=str(conf)))
        sides = {"java": Side("java", ns_java, java), "ours": Side("ours", ns_ours, f"127.0.0.1:{bt.port}")}
        first = {name: rest.split("first=")[1] for name, rest in
                 run_traffic(rmq_java, "AdminTraffic.java", *sides.values()).items()}
        clients = JavaClients(rmq_java, {name: side.namesrv for name, side in sides.items()}, CLIENT_TOPIC)
        stack.callback(clients.close)
        clients.wait_for(lambda: clients.seen("STARTED"))
        clients.command(f"SEND {SENT}")
        admins = {name: stack.enter_context(Admin(side.namesrv, timeout=30)) for name, side in sides.items()}
        for name in sides:
            clients.wait_for(lambda n=name: len(set(clients.consumed(n))) == SENT)
            assert wait_until(lambda n=name: admins[n].consumer_progress(CLIENT_GROUP).diff_total == 0), name
        bodies = base / "bodies"
        runs = [(side, fill(args, side, first[name])) for name, side in sides.items() for args in READS.values()]
        printed = iter(mqadmin(rmq_java, *runs))
        reads = {}
        for name, side in sides.items():
            for command, args in READS.items():
                extra = ["--body-dir", str(bodies)] if command == "queryMsgById" else []
                reads[name, command] = (next(printed), ours(side, *fill(args, side, first[name]), *extra))
        yield World(sides, admins, first, clients, bodies, reads)


SIDES = ["java", "ours"]


def sorted_lines(text: str) -> str:
    """The lines sorted: what mqadmin prints in a Java hash map's order."""
    return "\n".join(sorted(normalize(text).splitlines()))


def same(world: World, side: str, command: str, mask: Mask | None = None, *, sort: bool = False) -> str:
    """mqadmin's and rmqstore admin's output of ``command`` on ``side``: equal once masked (and sorted); the text."""
    mq, py = world.reads[side, command]
    if sort:
        mq, py = sorted_lines(mq), sorted_lines(py)
    return assert_same(mq, py, mask or Mask(), names=("mqadmin", "rmqstore admin"))


# -- the cluster and its topics ---------------------------------------------------------------------------------------

#: clusterList's figures of the moment: rates and queue sizes, page-cache wait, hours since the first message, disk
CLUSTER_LIST = (column("DefaultCluster", 5, r"\d+\.\d\d\(\d+,\d+ms\)", "in")
                + column("DefaultCluster", 6, r"\d+\.\d\d\(\d+,\d+ms\)", "out")
                + column("DefaultCluster", 8, r"\d+\.\d\d", "hours") + column("DefaultCluster", 9, r"\d\.\d{4}", "disk"))


@pytest.mark.parametrize("side", SIDES)
def test_cluster_list(world, side):
    address = world.sides[side].broker
    masked = same(world, side, "clusterList", CLUSTER_LIST)
    assert masked.splitlines()[1].split()[:5] == ["DefaultCluster", "broker-a", "0", address, "V4_9_8"], masked
    masked = same(world, side, "clusterList -m")
    assert masked.splitlines()[1].split()[:2] == ["DefaultCluster", "broker-a"], masked
    info = world.admins[side].cluster_list()
    assert info.brokers == [BrokerAddress("DefaultCluster", "broker-a", 0, address)]
    assert info.clusters == {"DefaultCluster": ["broker-a"]} and info.master_addresses() == [address]
    assert info.to_pandas().to_dict("records") == [{"cluster": "DefaultCluster", "broker_name": "broker-a",
                                                    "broker_id": 0, "address": address}]


#: the Java broker creates the transaction topics at its first transaction check, a minute after it starts: between
#: mqadmin's run and ours, perhaps
LAZY_TOPICS = Mask((re.compile(r"^RMQ_SYS_TRANS_\w+\n", re.M), lambda m: ""))


@pytest.mark.parametrize("side", SIDES)
def test_topic_list(world, side):
    masked = same(world, side, "topicList", LAZY_TOPICS)
    topics = world.admins[side].topic_list()
    assert {"AdminT", "AdminDelay", CLIENT_TOPIC, "%RETRY%CG_admin", "TBW102"} <= set(topics.topics)
    assert set(masked.splitlines()) == {t for t in topics.topics if not t.startswith("RMQ_SYS_TRANS_")}
    assert list(topics.to_pandas()["topic"]) == topics.topics


@pytest.mark.parametrize("side", SIDES)
def test_topic_route(world, side):
    masked = same(world, side, "topicRoute")
    assert '"writeQueueNums":4' in masked, masked
    masked = same(world, side, "topicRoute -l")
    assert masked.splitlines()[-1].split() == ["Total:", "1", "4", "4"], masked
    route = world.admins[side].topic_route("AdminT")
    assert route.broker_addresses() == [world.sides[side].broker]
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queues] == \
        [("broker-a", 4, 4, 6)]
    assert route.to_pandas()[["broker_name", "read_queue_nums", "write_queue_nums"]].values.tolist() == \
        [["broker-a", 4, 4]]


@pytest.mark.parametrize("side", SIDES)
def test_topic_status(world, side):
    masked = same(world, side, "topicStatus")
    assert len(masked.splitlines()) == 5, masked
    status = world.admins[side].topic_status("AdminT")
    assert [(q.queue_id, q.min_offset, q.max_offset) for q in status.queues] == \
        [(q, 0, PRODUCED[q]) for q in range(4)]
    assert all(q.last_update_timestamp > 0 for q in status.queues)
    frame = status.to_pandas()
    assert frame["max_offset"].sum() == sum(PRODUCED.values()) == 13


# -- consumer groups and clients ----------------------------------------------------------------------------------------

CONSUME_TPS = value_of("Consume TPS", r"\d+\.\d\d", "rate")


@pytest.mark.parametrize("side", SIDES)
def test_consumer_progress(world, side):
    masked = same(world, side, "consumerProgress -g", CONSUME_TPS)
    assert masked.endswith("Diff Total: 3"), masked
    same(world, side, "consumerProgress -g online", CONSUME_TPS)
    # #TPS is a rate of the last minute, as an int
    same(world, side, "consumerProgress", column("CG_admin ", 3, r"\d+", "tps") + column(f"{CLIENT_GROUP} ", 5,
                                                                                          r"\d+", "tps"))
    admin = world.admins[side]
    progress = admin.consumer_progress("CG_admin")
    status = admin.topic_status("AdminT")
    # the group's queues: AdminT's and its retry topic's (which its consumer subscribes to, empty)
    assert [(q.topic, q.queue_id) for q in progress.queues] == [("%RETRY%CG_admin", 0)] + [("AdminT", q)
                                                                                           for q in range(4)]
    queues = [q for q in progress.queues if q.topic == "AdminT"]
    assert [q.broker_offset for q in queues] == [q.max_offset for q in status.queues]
    assert [q.lag for q in queues] == [PRODUCED[q] - CONSUMED[q] for q in range(4)] == [1, 1, 1, 0]
    assert progress.diff_total == 3 and all(q.last_timestamp > 0 for q in queues)
    frame = progress.to_pandas()
    assert list(frame["lag"]) == [0, 1, 1, 1, 0] and set(frame["group"]) == {"CG_admin"}
    # the online group: what its producer sent minus what its consumer consumed, queue by queue
    sent = Counter(int(line.split()[3]) for line in world.clients.seen(f"SENT {side} "))
    consumed = Counter(int(line.split()[3]) for line in world.clients.seen(f"CONSUMED {side} "))
    online = admin.consumer_progress(CLIENT_GROUP, topic=CLIENT_TOPIC)
    assert {q.queue_id: q.broker_offset for q in online.queues} == dict(sent)
    assert {q.queue_id: q.lag for q in online.queues} == {q: sent[q] - consumed[q] for q in sent} == \
        dict.fromkeys(sent, 0)
    every = {g.group: g for g in admin.all_consumer_progress().groups}
    assert (every["CG_admin"].count, every["CG_admin"].diff_total) == (0, 3)
    assert (every[CLIENT_GROUP].count, every[CLIENT_GROUP].version_desc) == (1, "V4_9_8")
    assert set(admin.all_consumer_progress().to_pandas()["group"]) >= {"CG_admin", CLIENT_GROUP}


@pytest.mark.parametrize("side", SIDES)
def test_consumer_and_producer_connection(world, side):
    masked = same(world, side, "consumerConnection")
    assert f"\n{CLIENT_TOPIC} TagA || TagB\n" in masked and f"\n%RETRY%{CLIENT_GROUP} *\n" in masked, masked
    assert same(world, side, "consumerConnection -b") == masked
    masked = same(world, side, "producerConnection")
    assert re.fullmatch(r"0001 \S+@\S+ \S+ JAVA V4_9_8", masked), masked
    admin = world.admins[side]
    cc = admin.consumer_connection(CLIENT_GROUP)
    assert [(c.language, c.version_desc) for c in cc.connections] == [("JAVA", "V4_9_8")]
    assert cc.connections[0].client_id.endswith(f"@{side}")  # AdminbClients names its instances after the side
    assert {s.topic: s.sub_string for s in cc.subscriptions} == {CLIENT_TOPIC: "TagA || TagB",
                                                                 f"%RETRY%{CLIENT_GROUP}": "*"}
    assert (cc.consume_type, cc.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
    pc = admin.producer_connection(CLIENT_PRODUCERS, CLIENT_TOPIC)
    assert [c.client_id for c in pc.connections] == [c.client_id for c in cc.connections]
    assert list(pc.to_pandas()["version_desc"]) == ["V4_9_8"] and len(cc.to_pandas()) == 1
    with pytest.raises(AdminError) as refused:
        admin.consumer_connection("NobodyG")
    assert refused.value.code == ResponseCode.TOPIC_NOT_EXIST and "%RETRY%NobodyG" in refused.value.remark


# -- brokers ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("side", SIDES)
def test_broker_status(world, side):
    masked = same(world, side, "brokerStatus", BROKER_STATUS)
    status = world.admins[side].broker_status(world.sides[side].broker)
    # AdminTraffic's 14 sends (its delayed message put twice), AdminbClients' 10
    assert status.msg_put_total_today_now == 15 + SENT, masked
    assert f"msgPutTotalTodayNow : {status.msg_put_total_today_now}" in masked
    assert status.version_desc == "V4_9_8" and status.commit_log_max_offset > 0
    assert dict(status.to_pandas().values.tolist()) == status.table


@pytest.mark.parametrize("side", SIDES)
def test_get_broker_config(world, side):
    masked = same(world, side, "getBrokerConfig", sort=True)
    assert "\nbrokerName = broker-a\n" in masked, masked
    same(world, side, "getBrokerConfig -c", sort=True)
    config = world.admins[side].get_broker_config(world.sides[side].broker)
    assert config.properties["brokerName"] == "broker-a" and config.store_path_root_dir
    assert len(config.to_pandas()) == len(config.properties) == len([line for line in masked.splitlines() if " =" in line])


# -- messages -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("side", SIDES)
def test_query_msg_by_id_and_key(world, side):
    first = world.first[side]
    body_path = Mask((re.compile(r"^Message Body Path: +\S+/([0-9A-F]{32,})$", re.M),
                      lambda m: f"Message Body Path: <bodies>/{m[1]}"))
    masked = same(world, side, "queryMsgById", body_path)
    assert f"OffsetID: {first}" in masked and "Keys: [key0]" in masked, masked
    assert "MessageTrack [consumerGroup=CG_admin, trackType=NOT_ONLINE, exceptionDesc=CODE:206" in masked
    masked = same(world, side, "queryMsgByKey")
    assert masked.splitlines()[1].split()[1:] == ["3", "0"], masked
    admin = world.admins[side]
    found = admin.query_msg_by_id(first)
    (message,) = found.messages
    assert (message.offset_msg_id, message.topic, message.keys, message.tags, message.queue_id,
            message.queue_offset, message.body) == (first, "AdminT", "key0", "tagA", 0, 0, b"admin 0")
    assert (world.bodies / message.msg_id).read_bytes() == b"admin 0"
    assert [(t.consumer_group, t.track_type) for t in found.tracks[first]] == [("CG_admin", "NOT_ONLINE")]
    by_key = admin.query_msg_by_key("AdminT", "key3")
    assert [(m.queue_id, m.queue_offset, m.body) for m in by_key.messages] == [(3, 0, b"admin 3")]
    assert by_key.to_pandas()[["keys", "body_size"]].values.tolist() == [["key3", 7]]
    assert f"{by_key.messages[0].msg_id} 3 0" in masked


# -- changes: each tool makes its own, the other tool undoes it ------------------------------------------------------------

def side_by_side(world: World, rmq_java, commands: list[list[str]], names: dict[str, str], mq_tool: str,
                 py_tool: str) -> None:
    """Each command on each side by mqadmin, then by rmqstore admin, each tool with names of its own: ``names`` maps
    a placeholder of the commands to a name with ``{tool}`` in it (``mq_tool`` for mqadmin's, ``py_tool`` for ours).
    The outputs must be equal once the names are placeholders again."""
    def args(command: list[str], side: Side, tool: str) -> list[str]:
        out = fill(command, side)
        for placeholder, name in names.items():
            out = [a.replace(placeholder, name.format(tool=tool)) for a in out]
        return out

    def unnamed(text: str, tool: str) -> str:
        for placeholder, name in names.items():
            text = text.replace(name.format(tool=tool), placeholder)
        return text
    sides = list(world.sides.values())
    printed = iter(mqadmin(rmq_java, *((s, args(c, s, mq_tool)) for s in sides for c in commands)))
    for side in sides:
        for command in commands:
            assert_same(unnamed(next(printed), mq_tool), unnamed(ours(side, *args(command, side, py_tool)), py_tool),
                        Mask(), names=("mqadmin", "rmqstore admin"))


def test_update_and_delete_topic(world, rmq_java):
    """mqadmin creates AdmMqT (to a broker) and AdmMqC (to the cluster), rmqstore admin AdmPyT and AdmPyC with
    the same options; then each deletes what the other created."""
    names = {"{T}": "Adm{tool}T", "{C}": "Adm{tool}C"}
    side_by_side(world, rmq_java, [["updateTopic", "-b", "{broker}", "-t", "{T}", "-r", "3", "-w", "2"],
                                   ["updateTopic", "-c", "DefaultCluster", "-t", "{C}", "-r", "2", "-w", "2", "-p", "4"],
                                   ["topicRoute", "-t", "{C}"]], names, "Mq", "Py")
    for side in world.sides.values():
        admin = world.admins[side.name]
        route = admin.topic_route("AdmMqT")
        assert [(q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queues] == [(3, 2, 6)], side.name
        configs = admin.topic_configs(side.broker).topics
        assert (configs["AdmPyC"].read_queue_nums, configs["AdmPyC"].perm) == (2, 4), side.name
    side_by_side(world, rmq_java, [["deleteTopic", "-c", "DefaultCluster", "-t", "{T}"],
                                   ["deleteTopic", "-c", "DefaultCluster", "-t", "{C}"]], names, "Py", "Mq")
    for side in world.sides.values():
        admin = world.admins[side.name]
        assert not {"AdmMqT", "AdmMqC", "AdmPyT", "AdmPyC"} & set(admin.topic_list().topics), side.name
        assert not {"AdmMqT", "AdmPyC"} & set(admin.topic_configs(side.broker).topics), side.name
        with pytest.raises(AdminError) as gone:
            admin.topic_route("AdmPyT")
        assert gone.value.code == ResponseCode.TOPIC_NOT_EXIST


def test_update_and_delete_sub_group(world, rmq_java):
    """The same with subscription groups: AdmMqG and AdmMqCG by mqadmin, AdmPyG and AdmPyCG by rmqstore admin."""
    names = {"{G}": "Adm{tool}G", "{C}": "Adm{tool}CG"}
    side_by_side(world, rmq_java, [["updateSubGroup", "-b", "{broker}", "-g", "{G}", "-r", "5", "-q", "2", "-d", "true"],
                                   ["updateSubGroup", "-c", "DefaultCluster", "-g", "{C}"]], names, "Mq", "Py")
    for side in world.sides.values():
        groups = world.admins[side.name].subscription_groups(side.broker)
        for name in ("AdmMqG", "AdmPyG"):
            g = groups.groups[name]
            assert (g.retry_max_times, g.retry_queue_nums, g.consume_broadcast_enable) == (5, 2, True), side.name
        frame = groups.to_pandas().set_index("group_name")
        assert frame.loc["AdmPyCG", "retry_max_times"] == 16, side.name
    side_by_side(world, rmq_java, [["deleteSubGroup", "-b", "{broker}", "-g", "{G}"],
                                   ["deleteSubGroup", "-c", "DefaultCluster", "-g", "{C}", "-r", "true"]], names,
                 "Py", "Mq")
    for side in world.sides.values():
        left = world.admins[side.name].subscription_groups(side.broker).groups
        assert not {"AdmMqG", "AdmPyG", "AdmMqCG", "AdmPyCG"} & set(left), side.name


def test_update_broker_config(world, rmq_java):
    sides = list(world.sides.values())
    printed = mqadmin(rmq_java, *((s, ["updateBrokerConfig", "-b", s.broker, "-k", "fileReservedTime", "-v", "49"])
                                  for s in sides))
    for side, mq in zip(sides, printed):
        py = ours(side, "updateBrokerConfig", "-c", "DefaultCluster", "-k", "shortPollingTimeMills", "-v", "900")
        assert mq == py == f"update broker config success, {side.broker}\n", side.name
        properties = world.admins[side.name].get_broker_config(side.broker).properties
        assert (properties["fileReservedTime"], properties["shortPollingTimeMills"]) == ("49", "900"), side.name


def _commit(address: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (queue -> offset) of ``group`` straight to the broker, as a consumer does."""
    async def commit() -> None:
        host, _, port = address.rpartition(":")
        client = await RemotingClient().connect(host, int(port))
        try:
            for queue, offset in offsets.items():
                answer = await client.invoke(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": group, "topic": topic, "queueId": str(queue), "commitOffset": str(offset)}), 30)
                assert answer.code == ResponseCode.SUCCESS, answer.remark
        finally:
            await client.close()
    run_async(commit())


def test_reset_offset_by_time(world, rmq_java):
    """An offline group: its offsets committed queue by queue (the rollback table), put back between the two tools
    so both start from the same offsets; an online group: the offsets pushed to its consumer, which consumes the
    batch again."""
    sides = list(world.sides.values())
    offline = ["resetOffsetByTime", "-g", "CG_admin", "-t", "AdminT", "-s", "0"]
    online = ["resetOffsetByTime", "-g", CLIENT_GROUP, "-t", CLIENT_TOPIC, "-s", "0"]
    before = {s.name: len(world.clients.consumed(s.name)) for s in sides}
    printed = iter(mqadmin(rmq_java, *((s, a) for s in sides for a in (offline, online))))
    for side in sides:
        admin = world.admins[side.name]
        mq_offline, mq_online = next(printed), next(printed)
        assert [q.consumer_offset for q in admin.consumer_progress("CG_admin", topic="AdminT").queues] == \
            [0, 0, 0, 0], side.name
        _commit(side.broker, "CG_admin", "AdminT", {q: CONSUMED[q] for q in range(4)})
        py_offline = ours(side, *offline)
        # mqadmin's reset made the online consumer go back to 0 and consume the batch again; then ours does
        world.clients.wait_for(lambda n=side.name: len(world.clients.consumed(n)) >= before[n] + SENT, 180)
        pushed_before = len(world.clients.consumed(side.name))
        py_online = ours(side, *online)
        masked = assert_same(sorted_lines(mq_offline), sorted_lines(py_offline), Mask(),
                             names=("mqadmin", "rmqstore admin"))
        rows = [line.split() for line in masked.splitlines() if line.startswith("broker-a ")]
        assert rows == [["broker-a", str(q), str(PRODUCED[q]), str(CONSUMED[q]), "0", "0"] for q in range(4)], masked
        masked = assert_same(sorted_lines(mq_online), sorted_lines(py_online), Mask(),
                             names=("mqadmin", "rmqstore admin"))
        assert sorted(re.findall(r"^broker-a (\d+) (\d+)$", masked, re.M)) == [(str(q), "0") for q in range(4)]
        progress = admin.consumer_progress("CG_admin", topic="AdminT")
        assert progress.diff_total == 13 and [q.lag for q in progress.queues] == [PRODUCED[q] for q in range(4)]
        world.clients.wait_for(lambda n=side.name: len(world.clients.consumed(n)) >= pushed_before + SENT, 180)
        result = admin.reset_offset_by_time(CLIENT_GROUP, CLIENT_TOPIC, 0)
        assert result.pushed and set(result.offsets.values()) == {0}
        assert list(result.to_pandas()["offset"]) == [0] * len(result.offsets)
