"""A standalone name server (``rmqstore namesrv``) that brokers register with.

The broker registers at start and when a topic is created, unregisters when it stops; a
registration not renewed within the expiry disappears; a bad body checksum is refused.
The real client finds the broker through the standalone name server.  A slave is answered
its master's HA address and replicates from it.
"""

from __future__ import annotations

import json
import time

import pytest

from broker_support import BrokerThread, NamesrvThread, small_store_config
from rmqstore import BrokerRole, Message, PutMessageStatus
from rmqstore.format.crc import crc32
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


def test_a_slave_is_answered_its_masters_ha_address(tmp_path):
    """RegisterBrokerResponseHeader: a slave (id > 0) gets the live master's haServerAddr and
    masterAddr; a master, a slave of a broker name with no master, and a slave whose master left
    get neither field (RocketMQ's null fields are not sent)."""
    with NamesrvThread() as ns:
        host, port = ns.address.rsplit(":", 1)
        body = b'{"filterServerList":[],"topicConfigSerializeWrapper":{"topicConfigTable":{}}}'

        async def register(name, broker_id, addr, ha_addr):
            client = await RemotingClient().connect(host, int(port))
            header = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "brokerId": str(broker_id),
                      "haServerAddr": ha_addr, "compressed": "false", "bodyCrc32": str(crc32(body))}
            r = await client.invoke(RemotingCommand(RequestCode.REGISTER_BROKER, header, body))
            assert r.code == ResponseCode.SUCCESS, r.remark
            return client, r.ext_fields

        early, fields = ns.call(register("bx", 1, "127.0.0.1:20911", "127.0.0.1:20912"))
        assert "haServerAddr" not in fields and "masterAddr" not in fields  # no master yet
        master, fields = ns.call(register("bx", 0, "127.0.0.1:10911", "10.0.0.7:10912"))
        assert "haServerAddr" not in fields and "masterAddr" not in fields  # a master is told nothing
        slave, fields = ns.call(register("bx", 1, "127.0.0.1:20911", "127.0.0.1:20912"))
        assert fields["haServerAddr"] == "10.0.0.7:10912" and fields["masterAddr"] == "127.0.0.1:10911"
        other, fields = ns.call(register("by", 2, "127.0.0.1:30911", "127.0.0.1:30912"))
        assert "haServerAddr" not in fields  # another broker name's master is not its master
        ns.call(master.close())
        deadline = time.monotonic() + 5  # the master's connection closed: its registration goes
        while any(r.broker_id == 0 for r in ns.namesrv.registrations) and time.monotonic() < deadline:
            time.sleep(0.02)
        again, fields = ns.call(register("bx", 1, "127.0.0.1:20911", "127.0.0.1:20912"))
        assert "haServerAddr" not in fields and "masterAddr" not in fields
        for client in (early, slave, other, again):
            ns.call(client.close())


def test_a_slave_learns_its_masters_ha_address_from_the_name_server(tmp_path):
    """A SLAVE broker without haMasterAddress takes the HA address the name server answers its
    registration with, replicates from it (SYNC_MASTER puts answer PUT_OK), and moves to a new
    address a later registration answers."""
    with NamesrvThread() as ns:
        host, port = ns.address.rsplit(":", 1)
        body = b'{"filterServerList":[],"topicConfigSerializeWrapper":{"topicConfigTable":{}}}'
        header = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster",
                  "brokerId": "0", "haServerAddr": "127.0.0.1:1", "compressed": "false", "bodyCrc32": str(crc32(body))}

        async def fake_master():  # a master whose HA port nobody listens on
            client = await RemotingClient().connect(host, int(port))
            await client.invoke(RemotingCommand(RequestCode.REGISTER_BROKER, header, body))
            return client
        fake = ns.call(fake_master())
        slave_cfg = small_store_config(broker_role=BrokerRole.SLAVE, ha_reconnect_interval=100)
        with BrokerThread(tmp_path / "s", embedded_namesrv=False, namesrv_addr=ns.address, broker_id=1,
                          store_config=slave_cfg) as slave:
            client = slave.broker.store.ha_service.ha_client
            assert slave.broker.learns_ha_master and client.master_address == "127.0.0.1:1"
            assert not client.connected
            master_cfg = small_store_config(broker_role=BrokerRole.SYNC_MASTER, ha_enable=True, ha_listen_port=0)
            with BrokerThread(tmp_path / "m", embedded_namesrv=False, namesrv_addr=ns.address,
                              store_config=master_cfg) as master:
                ns.call(fake.close())
                ha = master.broker.store.ha_service
                assert master.broker.ha_server_addr == ha.listen_address
                assert slave.call(slave.broker.registration.register_all()) == 1  # the next round
                assert client.master_address == ha.listen_address
                assert slave.broker.registration.master_addr == master.broker.address
                deadline = time.monotonic() + 10
                while ha.connection_count == 0 and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert ha.connection_count == 1
                store = master.broker.store
                for i in range(20):
                    r = store.put_message(Message(topic="Learned", queue_id=0, body=b"x%d" % i))
                    end = r.append_result.wrote_offset + r.append_result.wrote_bytes
                    assert r.status is PutMessageStatus.PUT_OK
                    assert slave.broker.store.get_max_phy_offset() >= end
