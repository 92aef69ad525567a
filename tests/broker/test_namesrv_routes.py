"""Routes merged from several brokers as 4.9.8's ``RouteInfoManager`` merges them.

Raw REGISTER_BROKER requests (the JSON a Java broker sends, or its compressed form) to a standalone
name server and to the embedded one of ``rmqstore broker``: queue data per broker name (a master's
topic table only, replaced on a new data version or a first registration), master and slave
addresses per broker id, the cluster table, and what UNREGISTER_BROKER and a closed connection take
away.  The route body is standard JSON (quoted broker ids) for a client of 4.9.4 or later, fastjson's
own text (unquoted ids) for an older one, as 4.9.8's name server answers.
"""

from __future__ import annotations

import json
import struct
import time
import zlib

import pytest

from broker_support import BrokerThread, NamesrvThread
from rmqstore.broker.jsonfmt import loads
from rmqstore.broker.namesrv import RouteInfoManager, decode_register_body, encode_register_body
from rmqstore.broker.topics import TopicConfig
from rmqstore.format.crc import crc32
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(60)

V4_9_8 = 409  # MQVersion.Version.V4_9_8.ordinal(): what a 4.9.8 client sends
A0, A1, B0 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"


def topic(name: str, queues: int = 4, perm: int = 6, sys_flag: int = 0) -> dict:
    return {"order": False, "perm": perm, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
            "topicName": name, "topicSysFlag": sys_flag, "writeQueueNums": queues}


def register_body(topics: list[dict], counter: int = 1, timestamp: int = 1700000000000) -> bytes:
    wrapper = {"dataVersion": {"counter": counter, "timestamp": timestamp},
               "topicConfigTable": {t["topicName"]: t for t in topics}}
    return json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper}).encode()


def register_request(name: str, broker_id: int, addr: str, body: bytes, cluster: str = "C",
                     compressed: bool = False) -> RemotingCommand:
    header = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "brokerId": str(broker_id),
              "haServerAddr": addr.replace(":109", ":119"), "compressed": str(compressed).lower(),
              "bodyCrc32": str(crc32(body))}
    req = RemotingCommand(RequestCode.REGISTER_BROKER, header, body)
    req.version = V4_9_8
    return req


class Peer:
    """A connection to a name server on the thread that runs it; each request waits for its answer."""

    def __init__(self, thread, address: str):
        self.thread = thread
        host, port = address.rsplit(":", 1)
        self.client = thread.call(RemotingClient().connect(host, int(port)))

    def ask(self, code: int, ext: dict | None = None, body: bytes = b"", version: int = V4_9_8) -> RemotingCommand:
        req = RemotingCommand(code, {k: str(v) for k, v in (ext or {}).items()}, body)
        req.version = version
        return self.thread.call(self.client.invoke(req))

    def send(self, req: RemotingCommand) -> RemotingCommand:
        return self.thread.call(self.client.invoke(req))

    def route(self, name: str, version: int = V4_9_8):
        r = self.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name}, version=version)
        return (loads(r.body.decode()) if r.code == ResponseCode.SUCCESS else None), r

    def close(self) -> None:
        self.thread.call(self.client.close())

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def queues_of(route: dict) -> dict:
    return {q["brokerName"]: (q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]}


def addrs_of(route_or_cluster: dict) -> dict:
    datas = route_or_cluster.get("brokerDatas") or route_or_cluster["brokerAddrTable"].values()
    return {d["brokerName"]: {int(k): v for k, v in d["brokerAddrs"].items()} for d in datas}


@pytest.fixture
def ns():
    with NamesrvThread() as thread:
        yield thread


def test_two_masters_and_a_slave_merge_into_one_route(ns):
    a0, a1, b0 = Peer(ns, ns.address), Peer(ns, ns.address), Peer(ns, ns.address)
    try:
        assert a0.send(register_request("broker-a", 0, A0, register_body([topic("T", 4), topic("OnlyA")]))).code == 0
        # a slave's topic table is not its broker name's: only the master's counts
        assert a1.send(register_request("broker-a", 1, A1, register_body([topic("T", 16), topic("SlaveOnly")]))).code == 0
        assert b0.send(register_request("broker-b", 0, B0, register_body([topic("T", 2, perm=4)]),
                                        cluster="C2")).code == 0
        route, raw = a0.route("T")
        assert queues_of(route) == {"broker-a": (4, 4, 6), "broker-b": (2, 2, 4)}
        assert addrs_of(route) == {"broker-a": {0: A0, 1: A1}, "broker-b": {0: B0}}
        assert {d["brokerName"]: d["cluster"] for d in route["brokerDatas"]} == {"broker-a": "C", "broker-b": "C2"}
        assert route["filterServerTable"] == {}
        # 4.9.8 lists them in its HashSet's order (tools ask the first broker data of a route)
        assert [d["brokerName"] for d in route["brokerDatas"]] == ["broker-b", "broker-a"]
        assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-b", "broker-a"]
        assert f'"0":"{A0}"'.encode() in raw.body  # 4.9.4 and later: standard JSON
        _, old = a0.route("T", version=300)
        assert f'0:"{A0}"'.encode() in old.body and b'"0":' not in old.body  # older clients: fastjson's own
        assert queues_of(a0.route("OnlyA")[0]) == {"broker-a": (4, 4, 6)}
        assert a0.route("SlaveOnly")[0] is None
        r = a0.ask(RequestCode.GET_BROKER_CLUSTER_INFO)
        assert r.code == ResponseCode.SUCCESS
        info = loads(r.body.decode())
        assert {k: sorted(v) for k, v in info["clusterAddrTable"].items()} == {"C": ["broker-a"], "C2": ["broker-b"]}
        assert addrs_of(info) == {"broker-a": {0: A0, 1: A1}, "broker-b": {0: B0}}
        assert f'0:"{A0}"'.encode() in r.body  # ClusterInfo is fastjson's own text, whatever the version
    finally:
        for p in (a0, a1, b0):
            p.close()


def test_queue_datas_are_replaced_only_on_a_new_data_version(ns):
    p = Peer(ns, ns.address)
    try:
        p.send(register_request("broker-b", 0, B0, register_body([topic("T", 2), topic("Gone", 2)], counter=5)))
        # the same data version: the name server keeps what it has (the broker only renews its registration)
        p.send(register_request("broker-b", 0, B0, register_body([topic("T", 8)], counter=5)))
        assert queues_of(p.route("T")[0]) == {"broker-b": (2, 2, 6)}
        p.send(register_request("broker-b", 0, B0, register_body([topic("T", 8)], counter=6)))
        assert queues_of(p.route("T")[0]) == {"broker-b": (8, 8, 6)}
        # a topic left out of a new table stays routed: 4.9.8 only adds and updates (216 deletes)
        assert queues_of(p.route("Gone")[0]) == {"broker-b": (2, 2, 6)}
    finally:
        p.close()


def test_one_address_has_one_broker_id(ns):
    """A slave switched to master: its address under id 1 goes when it registers as id 0."""
    p = Peer(ns, ns.address)
    try:
        p.send(register_request("broker-a", 1, A1, register_body([topic("T")])))
        p.send(register_request("broker-a", 0, A1, register_body([topic("T")])))
        assert addrs_of(p.route("T")[0]) == {"broker-a": {0: A1}}
    finally:
        p.close()


def test_unregister_and_closed_connections_take_addresses_then_broker_names_away(ns):
    a0, a1, b0 = Peer(ns, ns.address), Peer(ns, ns.address), Peer(ns, ns.address)
    try:
        a0.send(register_request("broker-a", 0, A0, register_body([topic("T"), topic("A")])))
        a1.send(register_request("broker-a", 1, A1, register_body([])))
        b0.send(register_request("broker-b", 0, B0, register_body([topic("T")])))
        r = b0.ask(RequestCode.UNREGISTER_BROKER, {"clusterName": "C", "brokerAddr": A0, "brokerName": "broker-a",
                                                   "brokerId": 0})
        assert r.code == ResponseCode.SUCCESS
        # the slave still serves broker-a: its queue data stays, with the slave's address
        route = b0.route("T")[0]
        assert queues_of(route).keys() == {"broker-a", "broker-b"}
        assert addrs_of(route) == {"broker-a": {1: A1}, "broker-b": {0: B0}}
        a1.close()  # the slave's connection closes: broker-a has no address left and leaves every table
        deadline = time.monotonic() + 10
        while "broker-a" in addrs_of(b0.route("T")[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert addrs_of(b0.route("T")[0]) == {"broker-b": {0: B0}}
        assert b0.route("A")[0] is None
        info = loads(b0.ask(RequestCode.GET_BROKER_CLUSTER_INFO).body.decode())
        assert info["clusterAddrTable"] == {"C": ["broker-b"]} and list(info["brokerAddrTable"]) == ["broker-b"]
    finally:
        for p in (a0, b0):
            p.close()


def compressed_body(topics: list[dict], counter: int = 1) -> bytes:
    """RegisterBrokerBody.encode(true): deflated length-prefixed parts, a topic as TopicConfig.encode()'s
    ``name read write perm filterType``."""
    def part(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data
    raw = part(json.dumps({"counter": counter, "timestamp": 1700000000000}).encode())
    raw += struct.pack(">i", len(topics))
    for t in topics:
        raw += part(f"{t['topicName']} {t['readQueueNums']} {t['writeQueueNums']} {t['perm']} "
                    f"{t['topicFilterType']}".encode())
    raw += part(b"[]")
    return zlib.compress(raw, 9)


def test_a_compressed_registration_is_read(ns):
    p = Peer(ns, ns.address)
    try:
        r = p.send(register_request("broker-z", 0, B0, compressed_body([topic("Z", 3, sys_flag=1)]), compressed=True))
        assert r.code == ResponseCode.SUCCESS, r.remark
        route = p.route("Z")[0]
        assert queues_of(route) == {"broker-z": (3, 3, 6)}
        assert route["queueDatas"][0]["topicSysFlag"] == 0  # the compressed form carries no flag
        bad = register_request("broker-z", 0, B0, b"not deflated", compressed=True)
        r = p.send(bad)
        assert r.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody" in r.remark
    finally:
        p.close()


def test_the_registration_answer_carries_the_order_topic_kv_table(ns):
    p = Peer(ns, ns.address)
    try:
        assert p.send(register_request("broker-a", 0, A0, register_body([topic("T")]))).body == b""
        r = p.ask(RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"})
        assert r.code == ResponseCode.SUCCESS
        r = p.send(register_request("broker-a", 0, A0, register_body([topic("T")])))
        assert loads(r.body.decode()) == {"table": {"T": "broker-a:4"}}
    finally:
        p.close()


def test_the_embedded_name_server_merges_another_brokers_registration(tmp_path):
    """A Java broker may register with `rmqstore broker`'s own name server: the route of a topic both
    brokers have names both, and the cluster table lists both."""
    with BrokerThread(tmp_path / "store") as bt:
        p = Peer(bt, bt.namesrv)
        try:
            r = p.send(register_request("broker-j", 0, B0, register_body([topic("TBW102", 8, perm=7)]),
                                        cluster="DefaultCluster"))
            assert r.code == ResponseCode.SUCCESS
            route = p.route("TBW102")[0]
            assert queues_of(route) == {"broker-a": (8, 8, 7), "broker-j": (8, 8, 7)}
            assert addrs_of(route) == {"broker-a": {0: bt.broker.address}, "broker-j": {0: B0}}
            info = loads(p.ask(RequestCode.GET_BROKER_CLUSTER_INFO).body.decode())
            assert sorted(info["clusterAddrTable"]["DefaultCluster"]) == ["broker-a", "broker-j"]
            # a topic the broker creates is routed at once (the embedded registration is in-process)
            async def create():
                bt.broker.topics.create_system_topic("NewOnA", 2, 6)
            bt.call(create())
            assert queues_of(p.route("NewOnA")[0]) == {"broker-a": (2, 2, 6)}
        finally:
            p.close()


def test_a_silent_registration_expires_but_the_in_process_one_does_not():
    """scanNotActiveBroker drops a connection's registration not renewed for 120 s, with its routes; the
    embedded name server's own broker registers in-process (no connection) and stays."""
    now = [0.0]
    routes = RouteInfoManager(clock=lambda: now[0])
    connection = object()
    t = TopicConfig("T", 4, 4)
    routes.register_broker("C", A0, "broker-a", 0, "", (1, 1), {"T": t}, [], None)
    routes.register_broker("C", B0, "broker-b", 0, "", (1, 1), {"T": t}, [], connection)  # type: ignore[arg-type]
    now[0] = 119.0
    assert routes.scan_not_active_broker() == []
    now[0] = 120.0
    assert [live.address for live in routes.scan_not_active_broker()] == [B0]
    assert [q["brokerName"] for q in routes.pickup_topic_route_data("T")["queueDatas"]] == ["broker-a"]
    now[0] = 10_000.0
    assert routes.scan_not_active_broker() == [] and list(routes.broker_live_table) == [A0]


def test_our_register_body_reads_back_in_both_forms():
    configs = {"T": TopicConfig("T", 3, 5, 6, topic_sys_flag=2), "U": TopicConfig("U", 1, 1, 2)}
    version = {"counter": 7, "timestamp": 1700000000123}
    plain = decode_register_body(encode_register_body(version, configs, False), False)
    assert (plain.data_version, plain.topic_configs, plain.filter_servers) == ((7, 1700000000123), configs, [])
    packed = decode_register_body(encode_register_body(version, configs, True), True)
    assert packed.data_version == (7, 1700000000123)
    # TopicConfig.encode() carries no system flag: 0 after the trip, as in 4.9.8
    assert packed.topic_configs == {"T": TopicConfig("T", 3, 5, 6), "U": TopicConfig("U", 1, 1, 2)}
    assert decode_register_body(compressed_body([topic("T", 3)]), True).topic_configs["T"].read_queue_nums == 3
