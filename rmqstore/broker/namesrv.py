"""The name server role: which broker serves which topic (GET_ROUTEINFO_BY_TOPIC, 105).

A RocketMQ client knows only name server addresses.  Before it sends to or pulls from a
topic it asks a name server for the topic's route: the brokers (name, cluster, address by
broker id, 0 being the master) and, per broker, the topic's read and write queue counts
and permission.  It then talks to the brokers directly.  An unknown topic is answered
TOPIC_NOT_EXIST (17); a producer then asks for the route of the default topic TBW102 and
sends there, and the broker creates the topic from it (auto-create).

The name server learns routes from :class:`BrokerRegistration` objects, in two ways:

* **embedded** (``rmqstore broker``): the registration holds the broker's live topic
  table, so every topic the broker has is routed at once (retry topics included, created
  at a consumer's heartbeat);
* **standalone** (``rmqstore namesrv``): brokers send REGISTER_BROKER (103) every 30 s with
  their topic table as body; one whose connection closes or that sends UNREGISTER_BROKER
  (104) goes at once.

Either way the broker registers again every period (:mod:`rmqstore.broker.registration`), so
a registration removed by a stray UNREGISTER_BROKER, or replaced by another connection's
REGISTER_BROKER with the same identity, is back within one period.  The other half of that
bargain is :meth:`NameServer.scan_not_active_broker` (RocketMQ's ``scanNotActiveBroker``,
every 10 s): a registration with a connection that has not been renewed for 120 s is dropped
and its connection closed, so a broker that hangs without closing its socket leaves the
routes too.  The embedded registration has no connection; its broker renews it in-process.

A registration also pairs masters and slaves (RocketMQ's ``RouteInfoManager.registerBroker``):
each broker sends its HA address (``haServerAddr``), and the answer to a *slave* (broker id
above 0) carries the HA address and broker address of the live master of its broker name
(id 0) -- RegisterBrokerResponseHeader's ``haServerAddr`` and ``masterAddr``.  A master, or a
slave whose master is not registered, gets neither field.  A slave started without
``haMasterAddress`` connects to the HA address it is answered (:mod:`rmqstore.broker.registration`).

The route body is TopicRouteData as fastjson writes it: sorted keys, the broker-id map with
unquoted integer keys.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from ..crc import crc32
from ..remoting import Connection, RemotingCommand, RemotingServer, RequestCode, ResponseCode
from .headers import Header
from .jsonfmt import dumps, loads
from .tasks import BackgroundTask
from .topics import TopicConfig

__all__ = ["BrokerRegistration", "NameServer", "route_data", "register_broker_result", "TopicTable",
           "BROKER_CHANNEL_EXPIRED_TIME", "SCAN_NOT_ACTIVE_BROKER_INTERVAL", "MASTER_ID"]

log = logging.getLogger(__name__)

BROKER_CHANNEL_EXPIRED_TIME = 120.0  # seconds (RouteInfoManager)
SCAN_NOT_ACTIVE_BROKER_INTERVAL = 10.0  # seconds (NamesrvController's scan of not active brokers)
MASTER_ID = 0  # MixAll.MASTER_ID: the broker id of a master


class TopicTable:
    """The topic configs a broker registered (what ``TopicConfigManager.select`` answers for a live one)."""

    def __init__(self, configs: dict[str, TopicConfig]):
        self.configs = configs

    def select(self, topic: str) -> TopicConfig | None:
        return self.configs.get(topic)


@dataclass
class BrokerRegistration:
    """One broker as a name server sees it; ``topics`` answers ``select(topic)``."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    topics: Any  # answers select(topic)
    connection: Connection | None = None
    ha_server_addr: str = ""
    last_update: float = field(default_factory=time.monotonic)


def route_data(topic: str, registrations: list[BrokerRegistration]) -> dict | None:
    """TopicRouteData of ``topic`` over the given brokers, or None when none serves it."""
    queue_datas: dict = {}
    broker_datas: dict = {}
    for reg in sorted(registrations, key=lambda r: (r.broker_name, r.broker_id)):
        config = reg.topics.select(topic)
        if config is None:
            continue
        if reg.broker_name not in queue_datas or reg.broker_id == 0:  # the master's config wins
            queue_datas[reg.broker_name] = {"brokerName": reg.broker_name, "perm": config.perm,
                                            "readQueueNums": config.read_queue_nums,
                                            "topicSysFlag": config.topic_sys_flag,
                                            "writeQueueNums": config.write_queue_nums}
        data = broker_datas.setdefault(reg.broker_name, {"brokerAddrs": {}, "brokerName": reg.broker_name,
                                                         "cluster": reg.cluster})
        data["brokerAddrs"][reg.broker_id] = reg.address
    if not queue_datas:
        return None
    return {"brokerDatas": list(broker_datas.values()), "filterServerTable": {},
            "queueDatas": list(queue_datas.values())}


def register_broker_result(registrations: list[BrokerRegistration], broker_name: str, broker_id: int) -> dict:
    """RegisterBrokerResponseHeader's fields for a broker that just registered: for a slave, its
    master's ``haServerAddr`` and ``masterAddr``; nothing for a master or when no master is live
    (RocketMQ leaves both null, and a null field is not sent)."""
    if broker_id == MASTER_ID:
        return {}
    master = next((r for r in registrations if r.broker_name == broker_name and r.broker_id == MASTER_ID), None)
    if master is None:
        return {}
    return {"haServerAddr": master.ha_server_addr, "masterAddr": master.address}


class NameServer:
    """The processors of a name server on its own listening socket."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9876, limits=None,
                 expiry: float = BROKER_CHANNEL_EXPIRED_TIME, scan_interval: float = SCAN_NOT_ACTIVE_BROKER_INTERVAL):
        self.server = RemotingServer(host, port, limits, on_close=self._connection_closed)
        self.expiry = expiry
        self.scan_interval = scan_interval
        self.registrations: list[BrokerRegistration] = []
        self._scan_task = BackgroundTask()
        self._closing: set[asyncio.Task] = set()
        self.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route_info)
        self.server.register(RequestCode.REGISTER_BROKER, self.register_broker)
        self.server.register(RequestCode.UNREGISTER_BROKER, self.unregister_broker)

    def add_broker(self, registration: BrokerRegistration) -> None:
        self._remove(registration.cluster, registration.broker_name, registration.broker_id)
        self.registrations.append(registration)

    def scan_not_active_broker(self) -> list[BrokerRegistration]:
        """Drop the registrations with a connection not renewed within the expiry, closing their
        connections; the ones that remain (embedded or renewed in time) are returned."""
        now = time.monotonic()
        alive = [r for r in self.registrations if r.connection is None or now - r.last_update < self.expiry]
        for r in self.registrations:
            if r not in alive:
                log.warning("broker %s (%s) not renewed for %.0f s: removed", r.broker_name, r.address, self.expiry)
                self._close_soon(r.connection)
        self.registrations = alive
        return alive

    def live_registrations(self) -> list[BrokerRegistration]:
        """The registrations a route is made of: what :meth:`scan_not_active_broker` leaves (a route
        never names a broker past its expiry, whenever the last scan ran)."""
        return self.scan_not_active_broker()

    def _close_soon(self, conn: Connection | None) -> None:
        if conn is not None and not conn.closed.is_set():
            task = asyncio.get_running_loop().create_task(conn.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _scan_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval)
            self.scan_not_active_broker()

    def get_route_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = Header(req.ext_fields).str("topic")
        route = route_data(topic, self.live_registrations())
        if route is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}")
        return req.response(ResponseCode.SUCCESS, body=dumps(route).encode("utf-8"))

    def register_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        name, addr, cluster, broker_id = h.str("brokerName"), h.str("brokerAddr"), h.str("clusterName"), \
            h.int("brokerId")
        if h.bool("compressed"):
            return req.response(ResponseCode.SYSTEM_ERROR, "compressed registration bodies are not supported")
        expected = h.int("bodyCrc32", 0, 64)
        if expected and crc32(req.body) != expected:
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = loads(req.body.decode("utf-8")) if req.body else {}
        table = ((body.get("topicConfigSerializeWrapper") or {}).get("topicConfigTable") or {}) \
            if isinstance(body, dict) else {}
        configs = {str(k): TopicConfig.from_json(v) for k, v in table.items() if isinstance(v, dict)}
        self.add_broker(BrokerRegistration(cluster, name, broker_id, addr, TopicTable(configs), conn,
                                           ha_server_addr=h.str("haServerAddr", "")))
        return req.response(ResponseCode.SUCCESS,
                            ext_fields=register_broker_result(self.live_registrations(), name, broker_id))

    def unregister_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        self._remove(h.str("clusterName"), h.str("brokerName"), h.int("brokerId"))
        return req.response(ResponseCode.SUCCESS)

    def _remove(self, cluster: str, name: str, broker_id: int) -> None:
        self.registrations = [r for r in self.registrations
                              if (r.cluster, r.broker_name, r.broker_id) != (cluster, name, broker_id)]

    def _connection_closed(self, conn: Connection) -> None:
        self.registrations = [r for r in self.registrations if r.connection is not conn]

    async def start(self) -> None:
        await self.server.start()
        self._scan_task.start(self._scan_periodically())

    async def stop(self) -> None:
        await self._scan_task.stop()
        await self.server.stop()
        await asyncio.gather(*self._closing, return_exceptions=True)

    @property
    def address(self) -> str:
        return self.server.address
