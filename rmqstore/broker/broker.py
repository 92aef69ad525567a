"""The broker: a MessageStore behind RocketMQ's remoting protocol (``BrokerController``).

:class:`Broker` assembles the pieces -- the store (its own threads: flush, reput,
allocation, as always), the topic table, consumer offsets, client groups, the request
processors and one :class:`~rmqstore.remoting.RemotingServer` -- and, for the
one-process setup a newcomer needs, an embedded :class:`~rmqstore.broker.namesrv.NameServer`
that routes every topic of this broker.  Everything network-facing runs on one asyncio
event loop; processors call into the store directly (reads and async-flush puts are
quick), and a put that must wait for a SYNC_FLUSH waits on the store's own pool, not on
the loop.

Lifecycle: :meth:`start` loads and starts the store (recovery first, as ever), loads
``config/topics.json`` and ``config/consumerOffset.json``, then listens.  :meth:`stop`
closes the listeners and every client connection, persists offsets and topics, and shuts
the store down cleanly (flush, checkpoint, no abort file left).
"""

from __future__ import annotations

import asyncio
import logging

from ..common.config import BrokerRole, StoreConfig
from ..remoting import Limits, RemotingServer
from ..store import MessageStore
from .admin import AdminBrokerProcessor
from .admin_stats import AdminStatsProcessor
from .broker_to_client import Broker2Client
from .clients import ClientManager
from .groups import SubscriptionGroupManager
from .acl import install_acl
from .config import BrokerConfig
from .namesrv import NameServer, embedded_namesrv_config
from .offsets import ConsumerOffsetManager
from .pull import PullMessageProcessor
from .queries import OffsetQueries
from .rebalance_lock import RebalanceLockProcessor
from .registration import NamesrvRegistration, clamped_register_period
from .retry import SendMessageBackProcessor
from .schedule import ScheduleMessageService
from .send import SendMessageProcessor
from .stats_service import BrokerStatistics
from .tasks import BackgroundTask
from .topics import TopicConfigManager
from .transaction import TransactionService
from ..files.store_paths import config_dir

__all__ = ["Broker", "DIFFERENCES", "limits_of"]

#: where the broker deliberately differs from Apache RocketMQ 4.9.8 (or does not do something yet)
DIFFERENCES = {
    "max_connections": "A broker holds at most maxConnections (1024) client connections; at the cap a newcomer "
                       "evicts the oldest connection that never completed a frame, else the one idle longest, and a "
                       "connection owes its first frame within 10 s and each frame within 30 s of its first byte "
                       "(serverFirstFrameTimeoutSeconds, serverFrameTimeoutSeconds). RocketMQ has no cap and relies "
                       "on the operating system's limits.",
    "unsent_budget": "Answers clients have not read are bounded per connection (serverConnectionUnsentHighBytes, "
                     "4 MiB: it reads no further request) and for the whole broker (serverUnsentBudgetBytes, 64 MiB: "
                     "the connections holding the most are not read until the total is under half); RocketMQ "
                     "queues every answer in Netty's outbound buffer however slow the reader.",
    "expression_type": "Pulls filter by TAG only; an SQL92 subscription is answered SUBSCRIPTION_PARSE_FAILED.",
    "wait_false_sync_flush": "With SYNC_FLUSH, a send whose WAIT property is false still waits for the flush: "
                             "WAIT is dropped from the stored properties as 4.9.8 does, and our Message keeps "
                             "no separate flag for it (the safer side: more durable, slower).",
}

log = logging.getLogger(__name__)


def limits_of(config: BrokerConfig) -> Limits:
    """The remoting limits a broker.conf asks for (RocketMQ's idle time, the rest our own keys)."""
    return Limits(max_connections=config.max_connections,
                  idle_timeout=float(config.server_channel_max_idle_time_seconds),
                  first_frame_timeout=float(config.server_first_frame_timeout_seconds),
                  frame_timeout=float(config.server_frame_timeout_seconds),
                  unsent_budget=config.server_unsent_budget_bytes,
                  connection_unsent_high=config.server_connection_unsent_high_bytes)


class Broker:
    def __init__(self, store_root: str, config: BrokerConfig | None = None, store_config: StoreConfig | None = None,
                 *, listen_host: str | None = None, namesrv_listen: tuple[str, int] | None = None,
                 limits: Limits | None = None, register_period: float | None = None):
        self.config = config or BrokerConfig()
        self.store_root = str(store_root)
        self.store_config = store_config or StoreConfig()
        self.store: MessageStore | None = None  # created in start(), once the listening port is known
        self.topics = TopicConfigManager(self.store_root, self.config, len(self.store_config.delay_level_table()))
        self.offsets = ConsumerOffsetManager(self.store_root)
        self.groups = SubscriptionGroupManager(self.store_root, self.config)
        self.clients = ClientManager(self.topics, self.groups)
        self.limits = limits or limits_of(self.config)
        self.stats = BrokerStatistics(self.config.broker_cluster_name)
        self.server = RemotingServer(listen_host or self.config.broker_ip1, self.config.listen_port, self.limits,
                                     on_close=self.clients.connection_closed)
        self.server.role = "broker"
        self.acl = install_acl(self.server, self.config)  # None unless aclEnable: no hook at all
        self.send_processor = SendMessageProcessor(self)
        self.pull_processor = PullMessageProcessor(self)
        self.send_back_processor = SendMessageBackProcessor(self)
        self.schedule_service = ScheduleMessageService(self)
        self.transaction_service = TransactionService(self)
        self.rebalance_locks = RebalanceLockProcessor()
        for part in (self.send_processor, self.pull_processor, self.send_back_processor, self.clients,
                     self.transaction_service, OffsetQueries(self), self.rebalance_locks, AdminStatsProcessor(self),
                     AdminBrokerProcessor(self), Broker2Client(self)):
            part.register(self.server)
        self.namesrv = NameServer(*namesrv_listen, limits=self.limits,
                                  config=embedded_namesrv_config(self.config_dir())) if namesrv_listen else None
        if self.namesrv is not None:
            self.namesrv.server.role = "embedded name server"
        period = register_period or clamped_register_period(self.config.register_name_server_period)
        self.registration = NamesrvRegistration(self, self.config.namesrv_addr, period, embedded=self.namesrv)
        self._persist_task = BackgroundTask()
        self._started = False

    @property
    def address(self) -> str:
        return self.server.address

    @property
    def learns_ha_master(self) -> bool:
        """A SLAVE without haMasterAddress takes its master's HA address from the name server's answer
        (RocketMQ: ``updateMasterHAServerAddrPeriodically``, when haMasterAddress is shorter than 6)."""
        return (self.store_config.broker_role is BrokerRole.SLAVE
                and len(self.store_config.ha_master_address or "") < 6)

    @property
    def ha_server_addr(self) -> str:
        """The HA address this broker registers (``getHAServerAddr``: brokerIP2 and the HA port).  A master
        that listens on a wildcard address names brokerIP2, else brokerIP1; a slave names its configured port."""
        cfg, store_cfg = self.config, self.store_config
        ha = self.store.ha_service if self.store is not None else None
        listen = ha.listen_address if ha is not None else None
        if listen is None:
            return f"{cfg.broker_ip2 or cfg.broker_ip1}:{store_cfg.ha_listen_port}"
        host, _, port = listen.rpartition(":")
        if cfg.broker_ip2 or host in ("0.0.0.0", "::", ""):
            host = cfg.broker_ip2 or cfg.broker_ip1
        return f"{host}:{port}"

    async def start(self) -> None:
        try:  # (a ListenError names the address and which server wanted it)
            self.config.listen_port = self.server.bind()
            if self.namesrv is not None:
                self.namesrv.server.bind()
        except BaseException:
            await self._close_listeners()
            raise
        self.store_config.store_host = self.config.broker_addr
        self.store = MessageStore(self.store_root, self.store_config)
        try:
            self.store.load()
            self.store.start()
        except BaseException:
            await self._close_listeners()
            raise
        try:
            self.topics.load()
            self.topics.persist()
            self.offsets.load()
            self.groups.load()
            self.groups.persist()
            self.stats.start(self.store.stats.snapshot)
            self.pull_processor.hold_service.start(asyncio.get_running_loop())
            self.schedule_service.start()
            self.transaction_service.start()
            await self.server.start()
            if self.namesrv is not None:
                self.registration.register_embedded()  # routed from the name server's first request on
                await self.namesrv.start()
            await self.registration.start()
        except BaseException:
            await self._close_listeners()
            self.stats.stop()
            self.store.shutdown()
            raise
        self._persist_task.start(self._persist_periodically())
        self._started = True
        log.info("broker %s listening on %s (store %s)", self.config.broker_name, self.address, self.store_root)

    async def _close_listeners(self) -> None:
        if self.namesrv is not None:
            await self.namesrv.stop()
        await self.server.stop()

    async def _persist_periodically(self) -> None:
        interval = self.config.flush_consumer_offset_interval / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                self.offsets.persist(force=False)
                self.schedule_service.persist()
            except OSError:
                log.exception("persisting consumer offsets failed")

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        await self._persist_task.stop()
        await self.registration.stop()
        await self._close_listeners()
        await self.schedule_service.stop()
        await self.transaction_service.stop()
        self.pull_processor.hold_service.stop()
        self.stats.stop()
        self.offsets.persist()
        self.topics.persist()
        self.groups.persist()
        await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
        log.info("broker %s stopped", self.config.broker_name)

    def config_dir(self) -> str:
        return config_dir(self.store_root)
