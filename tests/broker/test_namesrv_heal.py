"""A route lost by any means comes back within one registration period.

A name server believes what it is told: anyone may send UNREGISTER_BROKER (104) with a
broker's cluster, name and id, or REGISTER_BROKER with the same identity from another
connection (whose close then removes the route).  RocketMQ heals both because every broker
registers again every ``registerNameServerPeriod`` (30 s) and every name server drops
brokers it has not heard from for 120 s (``scanNotActiveBroker``, every 10 s).  These tests
do the damage with raw remoting requests and wait for the next registration round (a short
period here), for the embedded name server and for a standalone one; and they check that the
name server's scan drops a silent broker on its own, with no route query to trigger it.
"""

from __future__ import annotations

import json
import time

import pytest

from broker_support import BrokerThread, NamesrvThread
from rmqstore.format.crc import crc32
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(60)

PERIOD = 0.3  # the registration period these brokers run with (RocketMQ: 30 s)


def _invoke(thread, address: str, request: RemotingCommand, keep_open: bool = False):
    """Send one request to ``address`` from a fresh connection on ``thread``'s loop: (client, response)."""
    host, port = address.rsplit(":", 1)

    async def go():
        client = await RemotingClient().connect(host, int(port))
        try:
            return client, await client.invoke(request)
        finally:
            if not keep_open:
                await client.close()
    return thread.call(go())


def _route_code(thread, address: str, topic: str = "TBW102") -> int:
    return _invoke(thread, address, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))[1].code


def _wait_for_route(thread, address: str, within: float) -> float:
    """Seconds until the route of TBW102 is answered again (fails after ``within``)."""
    start = time.monotonic()
    while _route_code(thread, address) != ResponseCode.SUCCESS:
        assert time.monotonic() - start < within, f"no route {within} s after it was lost"
        time.sleep(0.05)
    return time.monotonic() - start


def _identity(broker) -> dict:
    c = broker.config
    return {"clusterName": c.broker_cluster_name, "brokerName": c.broker_name, "brokerId": str(c.broker_id)}


def _impostor_registration(broker) -> RemotingCommand:
    """REGISTER_BROKER with the broker's identity, another address and no topics."""
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {"topicConfigTable": {}}}).encode()
    header = dict(_identity(broker), brokerAddr="127.0.0.1:1", haServerAddr="", compressed="false",
                  bodyCrc32=str(crc32(body)))
    return RemotingCommand(RequestCode.REGISTER_BROKER, header, body)


def test_an_unregister_sent_to_the_embedded_name_server_heals_within_one_period(tmp_path):
    with BrokerThread(tmp_path / "store", register_period=PERIOD) as bt:
        assert _route_code(bt, bt.namesrv) == ResponseCode.SUCCESS
        _, r = _invoke(bt, bt.namesrv, RemotingCommand(RequestCode.UNREGISTER_BROKER, _identity(bt.broker)))
        assert r.code == ResponseCode.SUCCESS
        assert _route_code(bt, bt.namesrv) == ResponseCode.TOPIC_NOT_EXIST  # the damage is real (as in RocketMQ)
        assert _wait_for_route(bt, bt.namesrv, within=10 * PERIOD + 5) < 10 * PERIOD + 5


def test_an_impostor_registration_on_the_embedded_name_server_heals_after_its_connection_closes(tmp_path):
    with BrokerThread(tmp_path / "store", register_period=PERIOD) as bt:
        impostor, r = _invoke(bt, bt.namesrv, _impostor_registration(bt.broker), keep_open=True)
        try:
            assert r.code == ResponseCode.SUCCESS
            # the impostor holds the identity until the broker's next round takes it back
            _wait_for_route(bt, bt.namesrv, within=10 * PERIOD + 5)
        finally:
            bt.call(impostor.close())
        time.sleep(0.1)  # the close may remove the route the broker re-registered: the next round restores it
        _wait_for_route(bt, bt.namesrv, within=10 * PERIOD + 5)
        route = _invoke(bt, bt.namesrv, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}))[1]
        assert bt.broker.address.encode() in route.body and b"127.0.0.1:1" not in route.body


def test_an_unregister_sent_to_a_standalone_name_server_heals_within_one_period(tmp_path):
    with NamesrvThread() as ns:
        with BrokerThread(tmp_path / "store", embedded_namesrv=False, namesrv_addr=ns.address,
                          register_period=PERIOD) as bt:
            assert _route_code(ns, ns.address) == ResponseCode.SUCCESS
            _invoke(ns, ns.address, RemotingCommand(RequestCode.UNREGISTER_BROKER, _identity(bt.broker)))
            assert _route_code(ns, ns.address) == ResponseCode.TOPIC_NOT_EXIST
            _wait_for_route(ns, ns.address, within=10 * PERIOD + 5)


def test_the_name_server_drops_a_silent_broker_by_its_own_scan():
    """scanNotActiveBroker: the expired registration goes (and its connection is closed) with no
    route query to notice it."""
    with NamesrvThread(expiry=0.4, scan_interval=0.1) as ns:
        body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {"topicConfigTable": {
            "T1": {"topicName": "T1", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}}}}).encode()
        header = {"brokerName": "b1", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": "0",
                  "haServerAddr": "", "compressed": "false", "bodyCrc32": str(crc32(body))}
        client, r = _invoke(ns, ns.address, RemotingCommand(RequestCode.REGISTER_BROKER, header, body),
                            keep_open=True)
        try:
            assert r.code == ResponseCode.SUCCESS and len(ns.namesrv.registrations) == 1
            deadline = time.monotonic() + 10
            while ns.namesrv.registrations and time.monotonic() < deadline:
                time.sleep(0.05)
            assert ns.namesrv.registrations == []
            ns.call(client.connection.closed.wait(), 10)  # RocketMQ closes the silent broker's channel too
        finally:
            ns.call(client.close())


def test_the_registration_period_is_registerNameServerPeriod_kept_within_10_to_60_s():
    from rmqstore.broker import Broker
    from rmqstore.broker.config import load_broker_conf

    config, _, unknown = load_broker_conf("brokerName=b\nregisterNameServerPeriod=5000\n")
    assert unknown == [] and config.register_name_server_period == 5000
    assert Broker("/nonexistent", config).registration.period == 10.0  # RocketMQ's floor
    for ms, seconds in ((30_000, 30.0), (45_000, 45.0), (600_000, 60.0)):
        config.register_name_server_period = ms
        assert Broker("/nonexistent", config).registration.period == seconds
