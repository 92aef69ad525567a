"""A name server on its own listening socket: routes, KV config and config behind the processor.

:class:`NameServer` is RocketMQ's ``NamesrvController``: a :class:`~.routes.RouteInfoManager`, a
:class:`~.kvconfig.KVConfigManager` (loaded at construction: a bad ``kvConfig.json`` stops the start with
its name), a :class:`~.config.NamesrvConfig` and the :class:`~.processor.DefaultRequestProcessor` on a
:class:`~rmqstore.remoting.RemotingServer`.  Every ``scan_interval`` (10 s) it drops the registrations
not renewed for ``expiry`` (120 s) and closes their connections (``scanNotActiveBroker``); a
registration's connection closing drops it at once.  A route is also never answered from a
registration past its expiry, whenever the last scan ran (stricter than 4.9.8, which waits for the scan).

Two ways in, one table:

* **standalone** (``rmqstore namesrv``): brokers -- ours, Apache's -- send REGISTER_BROKER every 30 s;
* **embedded** (``rmqstore broker``): the broker in the same process registers through
  :meth:`NameServer.register_broker_in_process` (no connection) at every round and at every change of its
  topic table, so its new topics are routed at once; other brokers, a Java broker too, register over the
  network as with a standalone one.
"""

from __future__ import annotations

import asyncio
import logging
import os

from ...remoting import Connection, RemotingServer
from ...remoting.server import Limits
from ..tasks import BackgroundTask
from ..topics import TopicConfig
from .config import NamesrvConfig
from .kvconfig import KVConfigManager
from .processor import DefaultRequestProcessor
from .routes import BROKER_CHANNEL_EXPIRED_TIME, BrokerLiveInfo, RouteInfoManager

__all__ = ["NameServer", "SCAN_NOT_ACTIVE_BROKER_INTERVAL", "embedded_namesrv_config"]

log = logging.getLogger(__name__)

SCAN_NOT_ACTIVE_BROKER_INTERVAL = 10.0  # seconds (NamesrvController's scan of not active brokers)
KV_CONFIG_JSON, NAMESRV_PROPERTIES = "kvConfig.json", "namesrv.properties"


def embedded_namesrv_config(config_folder: str) -> NamesrvConfig:
    """The embedded name server's configuration: its KV table and its updates kept in the store's
    ``config/`` folder (``namesrv.properties`` read back when it is there)."""
    kv_path = os.path.join(config_folder, KV_CONFIG_JSON)
    store_path = os.path.join(config_folder, NAMESRV_PROPERTIES)
    config = NamesrvConfig(kv_config_path=kv_path, config_store_path=store_path)
    if os.path.exists(store_path):
        config = NamesrvConfig.load(store_path, config)
    config.kv_config_path, config.config_store_path = kv_path, store_path  # the store's own, wherever it moved
    return config


class NameServer:
    """The processors of a name server on its own listening socket."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9876, limits: Limits | None = None,
                 expiry: float = BROKER_CHANNEL_EXPIRED_TIME, scan_interval: float = SCAN_NOT_ACTIVE_BROKER_INTERVAL,
                 config: NamesrvConfig | None = None):
        self.config = config or NamesrvConfig()
        if limits is None:
            limits = Limits(idle_timeout=float(self.config.server_channel_max_idle_time_seconds))
        else:
            self.config.server_channel_max_idle_time_seconds = int(limits.idle_timeout)
        self.server = RemotingServer(host, port, limits, on_close=self._connection_closed)
        self.server.role = "name server"
        self.routes = RouteInfoManager(expiry)
        self.kv = KVConfigManager(self.config.kv_config_path)
        self.kv.load()
        self.scan_interval = scan_interval
        self._scan_task = BackgroundTask()
        self._closing: set[asyncio.Task] = set()
        DefaultRequestProcessor(self).register(self.server)

    @property
    def registrations(self) -> list[BrokerLiveInfo]:
        """The live table's entries: one per registered broker address."""
        return list(self.routes.broker_live_table.values())

    def register_broker_in_process(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                                   ha_server_addr: str, data_version: tuple[int, int],
                                   topic_configs: dict[str, TopicConfig]) -> dict:
        """A broker of this process registers (no connection, no body to decode); the answer's fields."""
        return self.routes.register_broker(cluster, broker_addr, broker_name, broker_id, ha_server_addr,
                                           data_version, topic_configs, [], None)

    def route_data(self, topic: str) -> dict | None:
        """TopicRouteData of ``topic`` from the registrations within their expiry."""
        self.scan_not_active_broker()
        return self.routes.pickup_topic_route_data(topic)

    def scan_not_active_broker(self) -> None:
        for live in self.routes.scan_not_active_broker():
            self._close_soon(live.connection)

    def _close_soon(self, conn: Connection | None) -> None:
        if conn is not None and not conn.closed.is_set():
            task = asyncio.get_running_loop().create_task(conn.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _scan_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval)
            self.scan_not_active_broker()

    def _connection_closed(self, conn: Connection) -> None:
        self.routes.on_connection_closed(conn)

    async def start(self) -> None:
        await self.server.start()
        self.config.listen_port = self.server.port
        self._scan_task.start(self._scan_periodically())

    async def stop(self) -> None:
        await self._scan_task.stop()
        await self.server.stop()
        await asyncio.gather(*self._closing, return_exceptions=True)

    @property
    def address(self) -> str:
        return self.server.address
