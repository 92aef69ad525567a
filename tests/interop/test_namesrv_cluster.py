"""Mixed clusters and the name server's admin face, against the real RocketMQ 4.9.8.

One cluster for the module (one Java name server, one Java broker: JVM starts are slow here):

* ``J`` -- Apache's name server;  ``S`` -- a standalone ``rmqstore`` name server;
* ``broker-b`` -- an ``rmqstore`` broker with its embedded name server ``E``, registering with J and S too;
* ``broker-a`` -- an Apache broker registering with J, S and E.

So the three name servers hold the same two brokers, and what a client or ``mqadmin`` gets from S and E
can be compared with what it gets from J, addresses and all.  Traffic (ClusterTraffic.java): a topic on
both brokers, a Java producer spreading its sends, two push consumers of one group rebalancing the
queues, every message consumed once -- through J (Apache's name server, an Apache and an rmqstore broker),
S and E (the reverse roles), and through a second standalone name server with two rmqstore brokers.
``mqadmin`` runs its name-server commands against J, S and E; NsAdmin.java asks through the Java admin
API what mqadmin has no command for (GET_KV_CONFIG's value, GET_KVLIST_BY_NAMESPACE, GET_TOPICS_BY_CLUSTER,
DELETE_TOPIC_IN_NAMESRV).
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass

import pytest

from broker_support import BrokerThread, NamesrvThread
from rmqstore.broker.jsonfmt import loads
from rmqstore.broker.namesrv import encode_register_body
from rmqstore.broker.topics import TopicConfig
from rmqstore.format.crc import crc32
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqstore.remoting.codes import MQVersion

from .mqadmin_support import mqadmin_batch
from .rmqjava import case_lines

pytestmark = pytest.mark.timeout(900)

#: the topics of the module, created on both brokers (4 read and write queues each)
TOPICS = ("MixJ", "MixS", "MixE", "NsTopic", "DelT")
#: NettyServerConfig's thread, buffer and allocator knobs: 4.9.8's name server reports them, ours has none
NETTY_KNOBS = {"serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
               "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverSocketSndBufSize",
               "serverSocketRcvBufSize", "writeBufferHighWaterMark", "writeBufferLowWaterMark", "serverSocketBacklog",
               "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector"}
#: values that name where a name server runs (its port, its files, its home), not how it behaves
WHERE_KEYS = {"listenPort", "kvConfigPath", "configStorePath", "rocketmqHome"}


@dataclass
class Cluster:
    java_ns: str
    ours_ns: str
    embedded_ns: str
    java_broker: str
    broker_b: BrokerThread

    @property
    def name_servers(self) -> dict[str, str]:
        return {"J": self.java_ns, "S": self.ours_ns, "E": self.embedded_ns}


def _route_brokers(loop, namesrv: str, topic: str) -> set[str]:
    host, port = namesrv.rsplit(":", 1)

    async def ask():
        client = await RemotingClient().connect(host, int(port))
        try:
            req = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            req.version = MQVersion.V4_9_8
            return await client.invoke(req)
        finally:
            await client.close()
    r = loop.call(ask())
    return {q["brokerName"] for q in loads(r.body.decode())["queueDatas"]} if r.code == ResponseCode.SUCCESS else set()


def _ask(cluster: "Cluster", code: int) -> RemotingCommand:
    """One request to Apache's name server."""
    host, port = cluster.java_ns.rsplit(":", 1)

    async def ask():
        client = await RemotingClient().connect(host, int(port))
        try:
            return await client.invoke(RemotingCommand(code, {}))
        finally:
            await client.close()
    return cluster.broker_b.call(ask())


def _wait_for_routes(loop, name_servers, topics, brokers: set[str], within: float = 120) -> None:
    deadline = time.monotonic() + within
    for ns in name_servers:
        for topic in topics:
            while _route_brokers(loop, ns, topic) != brokers:
                assert time.monotonic() < deadline, f"{topic} not routed to {brokers} by {ns} in {within} s"
                time.sleep(0.3)


def _create_on_ours(bt: BrokerThread, topics) -> None:
    async def create():
        for topic in topics:
            bt.broker.topics.put(TopicConfig(topic, 4, 4))
    bt.call(create())


@pytest.fixture(scope="module")
def cluster(rmq_java, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ns-cluster")
    with contextlib.ExitStack() as stack:
        java_ns = stack.enter_context(rmq_java.java_namesrv(tmp / "java-ns"))
        ours = stack.enter_context(NamesrvThread())
        broker_b = stack.enter_context(BrokerThread(tmp / "broker-b", broker_name="broker-b",
                                                    namesrv_addr=f"{java_ns};{ours.address}"))
        # transactionCheckInterval: the Java broker creates RMQ_SYS_TRANS_HALF_TOPIC at its first check (60 s
        # after its start by default) and registers anew -- now, not in the middle of a comparison
        java_broker = stack.enter_context(rmq_java.java_broker(
            tmp / "broker-a", {"brokerName": "broker-a", "namesrvAddr": f"{java_ns};{ours.address};{broker_b.namesrv}",
                               "transactionCheckInterval": "1000"}))
        c = Cluster(java_ns, ours.address, broker_b.namesrv, java_broker, broker_b)
        _create_on_ours(broker_b, TOPICS)
        out = rmq_java.run_java("NsAdmin.java", *(f"create-{t},{java_ns},create,{java_broker},{t},4" for t in TOPICS))
        assert set(case_lines(out).values()) == {"created"}, out
        _wait_for_routes(ours, c.name_servers.values(), TOPICS, {"broker-a", "broker-b"})
        _wait_for_routes(ours, c.name_servers.values(), ["RMQ_SYS_TRANS_HALF_TOPIC"], {"broker-a"})
        yield c


def test_a_topic_spread_over_mixed_brokers_is_produced_and_consumed_once_through_every_name_server(
        cluster, rmq_java, tmp_path):
    """(a) Apache's name server, an Apache broker-a and an rmqstore broker-b; (b) the same brokers under
    a standalone rmqstore name server and under broker-b's embedded one; (c) two rmqstore brokers under
    one standalone rmqstore name server."""
    with NamesrvThread() as ns2, \
            BrokerThread(tmp_path / "a", broker_name="broker-a", embedded_namesrv=False, namesrv_addr=ns2.address) \
            as a, BrokerThread(tmp_path / "b", broker_name="broker-b", embedded_namesrv=False,
                               namesrv_addr=ns2.address) as b:
        for bt in (a, b):
            _create_on_ours(bt, ["MixC"])
        _wait_for_routes(ns2, [ns2.address], ["MixC"], {"broker-a", "broker-b"})
        out = rmq_java.run_java("ClusterTraffic.java",
                                f"J,{cluster.java_ns},MixJ,CG_J,40", f"S,{cluster.ours_ns},MixS,CG_S,40",
                                f"E,{cluster.embedded_ns},MixE,CG_E,40", f"C,{ns2.address},MixC,CG_C,40",
                                timeout=900)
    got = case_lines(out)
    # AllocateMessageQueueAveragely: the queues sorted by broker, the consumers by id -- c1 takes broker-a's
    expected = ("queues=broker-a:4,broker-b:4 sent=broker-a:20,broker-b:20 got=40 dup=0 lost=0 "
                "c1=broker-a:4 c2=broker-b:4 c1got=broker-a:20 c2got=broker-b:20")
    assert got == {"J": expected, "S": expected, "E": expected, "C": expected}, out


def _mask(text: str, cluster: Cluster) -> str:
    for ns in cluster.name_servers.values():
        text = text.replace(ns, "<NS>")
    return text


def _lines(text: str) -> set[str]:
    return {" ".join(line.split()) for line in text.splitlines() if line.strip()}


def _cluster_rows(text: str) -> set[tuple[str, ...]]:
    """clusterList's rows, their first four columns (cluster, broker name, id, address): what the name
    server answers. The version and statistics columns are GET_BROKER_RUNTIME_INFO's (28), each broker's."""
    return {tuple(line.split()[:4]) for line in text.splitlines()[1:] if line.strip()}


def _route(text: str) -> dict:
    route = loads(text)
    route["queueDatas"].sort(key=lambda q: q["brokerName"])
    route["brokerDatas"].sort(key=lambda d: d["brokerName"])
    return route


def test_mqadmin_reads_the_cluster_from_our_name_servers_as_from_apaches(cluster, rmq_java):
    commands = ("topicList", "topicList -c", "topicClusterList -t NsTopic", "topicRoute -t NsTopic", "clusterList")
    runs = [(name, cmd) for name in cluster.name_servers for cmd in commands]
    texts = mqadmin_batch(rmq_java, *([*cmd.split(), "-n", cluster.name_servers[name]] for name, cmd in runs))
    outputs: dict[str, dict[str, str]] = {}
    for (name, cmd), text in zip(runs, texts):
        outputs.setdefault(name, {})[cmd] = text
    java = outputs["J"]
    assert {"NsTopic", "MixJ", "TBW102", "broker-a", "broker-b", "DefaultCluster"} <= _lines(java["topicList"])
    assert _cluster_rows(java["clusterList"]) == {
        ("DefaultCluster", "broker-a", "0", cluster.java_broker),
        ("DefaultCluster", "broker-b", "0", cluster.broker_b.broker.address)}
    assert java["topicClusterList -t NsTopic"].split() == ["DefaultCluster"]
    for name in ("S", "E"):
        ours = outputs[name]
        assert _lines(ours["topicList"]) == _lines(java["topicList"]), name
        assert _lines(ours["topicList -c"]) == _lines(java["topicList -c"]), name
        assert ours["topicClusterList -t NsTopic"] == java["topicClusterList -t NsTopic"], name
        assert _route(ours["topicRoute -t NsTopic"]) == _route(java["topicRoute -t NsTopic"]), name
        assert _cluster_rows(ours["clusterList"]) == _cluster_rows(java["clusterList"]), name


def _namesrv_configs(text: str) -> dict[str, dict[str, str]]:
    """getNamesrvConfig's sections: {name server: {key: value}}."""
    out: dict[str, dict[str, str]] = {}
    section: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"=+(.+?)=+$", line)
        if m:
            section = out.setdefault(m.group(1), {})
        elif "=" in line:
            key, _, value = line.partition("=")
            section[key.strip()] = value.strip()
    return out


def _ns_admin(rmq_java, cluster: Cluster, *ops: str) -> dict[str, dict[str, str]]:
    """NsAdmin's answers per op and name server: {op: {"J": ..., "S": ..., "E": ...}}."""
    cases = [f"{op.replace(',', '_')}@{name},{ns},{op}" for op in ops for name, ns in cluster.name_servers.items()]
    got = case_lines(rmq_java.run_java("NsAdmin.java", *cases))
    out: dict[str, dict[str, str]] = {}
    for case, result in got.items():
        op, _, name = case.rpartition("@")
        out.setdefault(op, {})[name] = result
    return out


def test_mqadmin_config_kv_write_perm_and_topic_deletion_on_our_name_servers_as_on_apaches(cluster, rmq_java):
    all_ns = ";".join(cluster.name_servers.values())
    conf = "broker-a:4;broker-b:4"
    # the name servers' configuration, read, updated (once refused) and read again; then a kv config written and
    # read back through updateOrderConf on each, and broker-a's write permission wiped: one JVM (mqadmin_batch)
    first, done, refused, second, kv_done, *order_confs, wiped = mqadmin_batch(
        rmq_java, ["getNamesrvConfig", "-n", all_ns],
        ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true", "-n", all_ns],
        ["updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/elsewhere", "-n", all_ns],
        ["getNamesrvConfig", "-n", all_ns],
        ["updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "NsTopic", "-v", conf, "-n", all_ns],
        *(["updateOrderConf", "-t", "NsTopic", "-m", "get", "-n", ns] for ns in cluster.name_servers.values()),
        ["wipeWritePerm", "-b", "broker-a", "-n", all_ns])
    configs = _namesrv_configs(first)
    java = configs[cluster.java_ns]
    assert java["orderMessageEnable"] == "false" and NETTY_KNOBS <= java.keys()
    for ns in (cluster.ours_ns, cluster.embedded_ns):
        ours = configs[ns]
        assert java.keys() - ours.keys() - {"rocketmqHome"} == NETTY_KNOBS, ns
        assert ours.keys() <= java.keys(), ns
        assert {k: v for k, v in ours.items() if k not in WHERE_KEYS} == \
               {k: v for k, v in java.items() if k not in WHERE_KEYS | NETTY_KNOBS}, ns
        assert ours["listenPort"] == ns.rsplit(":", 1)[1]

    assert _mask(done, cluster) == "update name server config success![<NS>, <NS>, <NS>]\norderMessageEnable : true\n"
    assert "CODE: 16  DESC: Can not update config in black list." in refused
    configs = _namesrv_configs(second)
    assert {ns: (c["orderMessageEnable"], c["kvConfigPath"] != "/tmp/elsewhere") for ns, c in configs.items()} == \
           {ns: ("true", True) for ns in cluster.name_servers.values()}

    assert kv_done == "create or update kv config to namespace success.\n"
    for ns, got in zip(cluster.name_servers.values(), order_confs):
        assert got == f"get orderConf success. topic=[NsTopic], orderConf=[{conf}] ", ns
    topics = loads(_ask(cluster, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body.decode())["topicList"]
    count = sum("broker-a" in _route_brokers(cluster.broker_b, cluster.java_ns, t) for t in topics)
    before = _ns_admin(rmq_java, cluster, "kvget,ORDER_TOPIC_CONFIG,NsTopic", "kvlist,ORDER_TOPIC_CONFIG",
                       "bycluster,DefaultCluster", "alltopics", "route,NsTopic")
    added, deleted = mqadmin_batch(rmq_java, ["addWritePerm", "-b", "broker-a", "-n", all_ns],
                                   ["deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "NsTopic", "-n", all_ns])
    assert deleted == "delete kv config from namespace success.\n"
    after = _ns_admin(rmq_java, cluster, "kvget,ORDER_TOPIC_CONFIG,NsTopic", "kvlist,ORDER_TOPIC_CONFIG",
                      "route,NsTopic", "delete,DelT,DefaultCluster", "route,MixJ")

    # the same broker-a topics on every name server: the same count wiped and added back
    for verb, text in (("wipe", wiped), ("add", added)):
        lines = sorted(_mask(text, cluster).splitlines())
        assert lines == [f"{verb} write perm of broker[broker-a] in name server[<NS>] OK, {count}"] * 3, text
    for op, answers in list(before.items()) + list(after.items()):
        assert answers["S"] == answers["J"] and answers["E"] == answers["J"], (op, answers)
    assert before["kvget_ORDER_TOPIC_CONFIG_NsTopic"]["J"] == conf
    assert before["route_NsTopic"]["J"] == f"broker-a:4:4:4,broker-b:4:4:6 order={conf}"  # wiped: no write
    assert after["kvget_ORDER_TOPIC_CONFIG_NsTopic"]["J"] == "code=22"
    assert after["kvlist_ORDER_TOPIC_CONFIG"]["J"] == ""  # the namespace stays, empty
    assert after["route_NsTopic"]["J"] == "broker-a:4:4:6,broker-b:4:4:6"
    assert after["delete_DelT_DefaultCluster"]["J"] == "deleted route=code=17"
    assert after["route_MixJ"]["J"] == "broker-a:4:4:6,broker-b:4:4:6"


def test_apaches_name_server_reads_our_register_broker_body_plain_and_compressed(cluster):
    """What our broker sends (namesrv.register_body, the body NamesrvRegistration sends; compressed as with
    compressedRegister=true) is what 4.9.8's name server parses: the topics are routed."""
    host, port = cluster.java_ns.rsplit(":", 1)
    configs = {"ZPlain": TopicConfig("ZPlain", 3, 3), "ZPacked": TopicConfig("ZPacked", 5, 5, topic_sys_flag=1)}

    async def register_and_ask(name: str, addr: str, compressed: bool, topic: str):
        client = await RemotingClient().connect(host, int(port))
        try:
            body = encode_register_body({"counter": 1, "timestamp": 1}, {topic: configs[topic]}, compressed)
            ident = {"brokerName": name, "brokerAddr": addr, "clusterName": "ZCluster", "brokerId": "0"}
            req = RemotingCommand(RequestCode.REGISTER_BROKER, dict(ident, haServerAddr="", bodyCrc32=str(crc32(body)),
                                                                    compressed=str(compressed).lower()), body)
            req.version = MQVersion.V4_9_8
            registered = await client.invoke(req)
            route = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            route.version = MQVersion.V4_9_8
            answer = await client.invoke(route)
            await client.invoke(RemotingCommand(RequestCode.UNREGISTER_BROKER, ident))
            return registered, answer
        finally:
            await client.close()
    for name, addr, compressed, topic in (("broker-zp", "127.0.0.1:1", False, "ZPlain"),
                                          ("broker-zc", "127.0.0.1:2", True, "ZPacked")):
        registered, answer = cluster.broker_b.call(register_and_ask(name, addr, compressed, topic))
        assert registered.code == ResponseCode.SUCCESS, registered.remark
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        (queue_data,) = loads(answer.body.decode())["queueDatas"]
        q = configs[topic]
        assert queue_data == {"brokerName": name, "perm": q.perm, "readQueueNums": q.read_queue_nums,
                              "topicSysFlag": 0 if compressed else q.topic_sys_flag,
                              "writeQueueNums": q.write_queue_nums}
