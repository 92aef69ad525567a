"""The name server's admin requests, answered as 4.9.8's ``DefaultRequestProcessor`` answers them.

KV config (100/101/102/219, persisted in ``kvConfigPath`` as ``KVConfigManager`` writes it), the name
server's own config (GET/UPDATE_NAMESRV_CONFIG 319/318, with the black list and ``configStorePath``),
topic lists (206, 224, 304, the unit lists), DELETE_TOPIC_IN_NAMESRV (216), WIPE/ADD_WRITE_PERM_OF_BROKER
(205/327) and QUERY_DATA_VERSION (322) -- on the standalone name server, the embedded one and through
``rmqstore namesrv --config``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker_support import BrokerThread, NamesrvThread
from rmqstore.broker.jsonfmt import loads
from rmqstore.broker.namesrv import NamesrvConfig
from rmqstore.remoting import RequestCode, ResponseCode
from test_namesrv_routes import A0, A1, B0, Peer, queues_of, register_body, register_request, topic

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]


def kv(p: Peer, code: int, namespace: str | None, key: str | None = None, value: str | None = None):
    ext = {k: v for k, v in (("namespace", namespace), ("key", key), ("value", value)) if v is not None}
    return p.ask(code, ext)


def properties(body: bytes) -> dict[str, str]:
    return dict(line.split("=", 1) for line in body.decode().splitlines() if line)


@pytest.fixture
def ns(tmp_path):
    config = NamesrvConfig(kv_config_path=str(tmp_path / "kvConfig.json"),
                           config_store_path=str(tmp_path / "namesrv.properties"))
    with NamesrvThread(config=config) as thread:
        yield thread


@pytest.fixture
def peer(ns):
    with Peer(ns, ns.address) as p:
        yield p


def test_kv_config_put_get_list_delete_and_persisted_as_kvconfigmanager_writes_it(ns, peer, tmp_path):
    assert kv(peer, RequestCode.PUT_KV_CONFIG, "NS1", "k1", "v1").code == ResponseCode.SUCCESS
    assert kv(peer, RequestCode.PUT_KV_CONFIG, "NS1", "k2", "v2").code == ResponseCode.SUCCESS
    r = kv(peer, RequestCode.GET_KV_CONFIG, "NS1", "k1")
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["value"] == "v1"
    r = kv(peer, RequestCode.GET_KV_CONFIG, "NS1", "nope")
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: NS1 Key: nope")
    r = kv(peer, RequestCode.GET_KVLIST_BY_NAMESPACE, "NS1")
    assert r.code == ResponseCode.SUCCESS and loads(r.body.decode()) == {"table": {"k1": "v1", "k2": "v2"}}
    r = kv(peer, RequestCode.GET_KVLIST_BY_NAMESPACE, "NS2")
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: NS2")
    r = kv(peer, RequestCode.PUT_KV_CONFIG, None, "k", "v")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    assert kv(peer, RequestCode.DELETE_KV_CONFIG, "NS1", "k2").code == ResponseCode.SUCCESS
    assert kv(peer, RequestCode.DELETE_KV_CONFIG, "NS9", "k2").code == ResponseCode.SUCCESS  # nothing to delete
    assert loads((tmp_path / "kvConfig.json").read_text()) == {"configTable": {"NS1": {"k1": "v1"}}}
    # a name server started on the same kvConfigPath has the table
    with NamesrvThread(config=NamesrvConfig(kv_config_path=str(tmp_path / "kvConfig.json"))) as again:
        with Peer(again, again.address) as p:
            assert kv(p, RequestCode.GET_KV_CONFIG, "NS1", "k1").ext_fields["value"] == "v1"


def test_a_kv_config_file_that_does_not_parse_is_named_and_not_overwritten(tmp_path):
    bad = tmp_path / "kvConfig.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        NamesrvThread(config=NamesrvConfig(kv_config_path=str(bad)))
    assert bad.read_text() == "{not json"


def test_namesrv_config_get_update_black_list_and_persisted(peer, tmp_path):
    r = peer.ask(RequestCode.GET_NAMESRV_CONFIG)
    got = properties(r.body)
    assert r.code == ResponseCode.SUCCESS
    assert got["kvConfigPath"] == str(tmp_path / "kvConfig.json")
    assert got["orderMessageEnable"] == "false" and got["productEnvName"] == "center"
    assert got["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    assert got["listenPort"] == peer.thread.address.rsplit(":", 1)[1]
    r = peer.ask(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/elsewhere\n")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    r = peer.ask(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=maybe\n")
    assert r.code == ResponseCode.SYSTEM_ERROR and "orderMessageEnable" in r.remark
    r = peer.ask(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\nnoSuchKey=1\n")
    assert r.code == ResponseCode.SUCCESS
    got = properties(peer.ask(RequestCode.GET_NAMESRV_CONFIG).body)
    assert got["orderMessageEnable"] == "true" and "noSuchKey" not in got
    assert properties((tmp_path / "namesrv.properties").read_bytes())["orderMessageEnable"] == "true"
    # orderMessageEnable: a route carries the topic's ORDER_TOPIC_CONFIG value
    peer.send(register_request("broker-a", 0, A0, register_body([topic("T")])))
    kv(peer, RequestCode.PUT_KV_CONFIG, "ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    assert peer.route("T")[0]["orderTopicConf"] == "broker-a:4"


def test_topic_lists_delete_topic_and_write_perm(peer):
    peer.send(register_request("broker-a", 0, A0, register_body([topic("T"), topic("A"), topic("U", sys_flag=1),
                                                                 topic("S", sys_flag=2)])))
    peer.send(register_request("broker-a", 1, A1, register_body([])))
    peer.send(register_request("broker-b", 0, B0, register_body([topic("T"), topic("B")]), cluster="C2"))

    def topics(code, **ext):
        r = peer.ask(code, ext)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return loads(r.body.decode())

    assert sorted(topics(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)["topicList"]) == ["A", "B", "S", "T", "U"]
    assert sorted(topics(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="C")["topicList"]) == ["A", "S", "T", "U"]
    assert topics(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="nowhere") == {"topicList": []}
    system = topics(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert sorted(system["topicList"]) == ["C", "C2", "broker-a", "broker-b"] and system["brokerAddr"] in (A0, A1, B0)
    assert topics(RequestCode.GET_UNIT_TOPIC_LIST)["topicList"] == ["U"]
    assert topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)["topicList"] == ["S"]
    assert topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)["topicList"] == ["S"]

    r = peer.ask(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["wipeTopicCount"] == "4"
    assert queues_of(peer.route("T")[0]) == {"broker-a": (4, 4, 4), "broker-b": (4, 4, 6)}
    r = peer.ask(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["addTopicCount"] == "4"
    assert queues_of(peer.route("T")[0])["broker-a"] == (4, 4, 6)

    assert peer.ask(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "C2"}).code == 0
    assert queues_of(peer.route("T")[0]) == {"broker-a": (4, 4, 6)}  # only the cluster's brokers lost it
    assert peer.ask(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "A"}).code == 0
    _, r = peer.route("A")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.remark == ("No topic route info in name server for the topic: A\n"
                        "See http://rocketmq.apache.org/docs/faq/ for further details.")


def test_query_data_version(peer):
    peer.send(register_request("broker-a", 0, A0, register_body([topic("T")], counter=3, timestamp=42)))
    header = {"brokerName": "broker-a", "brokerAddr": A0, "clusterName": "C", "brokerId": 0}
    same = peer.ask(RequestCode.QUERY_DATA_VERSION, header, b'{"counter":3,"timestamp":42}')
    assert same.code == ResponseCode.SUCCESS and same.ext_fields["changed"] == "false"
    assert loads(same.body.decode()) == {"counter": 3, "timestamp": 42}
    newer = peer.ask(RequestCode.QUERY_DATA_VERSION, header, b'{"counter":4,"timestamp":43}')
    assert newer.ext_fields["changed"] == "true"
    unknown = peer.ask(RequestCode.QUERY_DATA_VERSION, dict(header, brokerAddr="127.0.0.1:1"),
                       b'{"counter":4,"timestamp":43}')
    assert unknown.ext_fields["changed"] == "true" and unknown.body == b""


def test_the_embedded_name_server_keeps_kv_config_in_the_stores_config_folder(tmp_path):
    with BrokerThread(tmp_path / "store") as bt, Peer(bt, bt.namesrv) as p:
        assert kv(p, RequestCode.PUT_KV_CONFIG, "NS", "k", "v").code == ResponseCode.SUCCESS
        got = properties(p.ask(RequestCode.GET_NAMESRV_CONFIG).body)
        assert got["kvConfigPath"] == str(tmp_path / "store" / "config" / "kvConfig.json")
        r = p.ask(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert "TBW102" in loads(r.body.decode())["topicList"]
    with BrokerThread(tmp_path / "store") as bt, Peer(bt, bt.namesrv) as p:  # restarted: the table is back
        assert kv(p, RequestCode.GET_KV_CONFIG, "NS", "k").ext_fields["value"] == "v"


def test_rmqstore_namesrv_reads_namesrv_conf_and_keeps_kv_config_across_restarts(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"kvConfigPath={tmp_path / 'kv' / 'kvConfig.json'}\nproductEnvName=test-env\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def start():
        proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "namesrv", "--listen", "127.0.0.1:0",
                                 "--config", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        line = proc.stdout.readline()
        m = re.search(r"name server listening on (127\.0\.0\.1:\d+)", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        return proc, m.group(1)

    def stop(proc):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read()

    from rmqstore.broker.background import ServiceThread

    class Idle:  # a loop to run the client on
        async def start(self):
            pass

        async def stop(self):
            pass

    with ServiceThread(Idle()) as loop:
        proc, address = start()
        try:
            with Peer(loop, address) as p:
                got = properties(p.ask(RequestCode.GET_NAMESRV_CONFIG).body)
                assert got["productEnvName"] == "test-env" and got["configStorePath"] == str(conf)
                assert kv(p, RequestCode.PUT_KV_CONFIG, "NS", "k", "v").code == ResponseCode.SUCCESS
        finally:
            stop(proc)
        proc, address = start()
        try:
            with Peer(loop, address) as p:
                assert kv(p, RequestCode.GET_KV_CONFIG, "NS", "k").ext_fields["value"] == "v"
        finally:
            stop(proc)
