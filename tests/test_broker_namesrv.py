"""A standalone name server (``rmqstore namesrv``) that brokers register with.

The broker registers at start and when a topic is created, unregisters when it stops; a
registration not renewed within the expiry disappears; a bad body checksum is refused.
The real client finds the broker through the standalone name server.
"""

from __future__ import annotations

import json
import time

import pytest

from broker_support import BrokerThread, NamesrvThread
from rmqstore.crc import crc32
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(60)


def _route(ns: NamesrvThread, topic: str) -> RemotingCommand:
    host, port = ns.address.rsplit(":", 1)

    async def ask():
        client = await RemotingClient().connect(host, int(port))
        try:
            return await client.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        finally:
            await client.close()
    return ns.call(ask())


def test_a_broker_registers_its_topics_and_unregisters_when_it_stops(tmp_path):
    rc = pytest.importorskip("rocketmq.client")
    with NamesrvThread() as ns:
        with BrokerThread(tmp_path / "store", embedded_namesrv=False, namesrv_addr=ns.address) as bt:
            r = _route(ns, "TBW102")
            assert r.code == ResponseCode.SUCCESS and f':"{bt.broker.address}"'.encode() in r.body
            assert _route(ns, "StandaloneTopic").code == ResponseCode.TOPIC_NOT_EXIST
            p = rc.Producer("PG_ns")
            p.set_namesrv_addr(ns.address)
            p.start()
            try:
                m = rc.Message("StandaloneTopic")
                m.set_body("via the standalone name server")
                assert p.send_sync(m).status == rc.SendStatus.OK
            finally:
                p.shutdown()
            deadline = time.monotonic() + 5  # the new topic is registered at once, not at the next round
            while _route(ns, "StandaloneTopic").code != ResponseCode.SUCCESS and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _route(ns, "StandaloneTopic").code == ResponseCode.SUCCESS
        assert _route(ns, "TBW102").code == ResponseCode.TOPIC_NOT_EXIST  # unregistered on stop


def test_registrations_expire_and_bad_checksums_are_refused():
    with NamesrvThread(expiry=0.4) as ns:
        host, port = ns.address.rsplit(":", 1)
        body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {"topicConfigTable": {
            "T1": {"topicName": "T1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}}}}).encode()
        header = {"brokerName": "b1", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "brokerId": "0",
                  "haServerAddr": "", "compressed": "false"}

        async def register(crc):
            client = await RemotingClient().connect(host, int(port))
            r = await client.invoke(RemotingCommand(RequestCode.REGISTER_BROKER, dict(header, bodyCrc32=crc), body))
            return client, r
        client, r = ns.call(register(crc32(body) ^ 1))
        ns.call(client.close())
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "crc32 not match"
        client, r = ns.call(register(crc32(body)))
        try:
            assert r.code == ResponseCode.SUCCESS
            route = _route(ns, "T1")
            assert route.code == ResponseCode.SUCCESS and b'"writeQueueNums":2' in route.body
            time.sleep(0.6)
            assert _route(ns, "T1").code == ResponseCode.TOPIC_NOT_EXIST  # not renewed: expired
        finally:
            ns.call(client.close())
