"""Which broker serves which topic: RocketMQ 4.9.8's ``RouteInfoManager``, table for table.

A name server knows only what brokers tell it.  Five tables hold it, as in RocketMQ:

* ``topic_queue_table`` -- topic -> broker name -> :class:`QueueData` (read and write queue counts,
  permission, system flag).  Only a *master* (broker id 0) writes its broker name's queue data, and
  only when its registration brings a data version the name server has not seen from its address (or
  the broker name or address is new): then each topic of the registration's table is added or
  replaced.  A topic missing from a later table stays -- 4.9.8 never removes one on registration;
  DELETE_TOPIC_IN_NAMESRV does;
* ``broker_addr_table`` -- broker name -> :class:`BrokerData` (cluster, address by broker id, 0 the
  master).  One address has one id: a slave turned master loses its old id;
* ``cluster_addr_table`` -- cluster -> broker names;
* ``broker_live_table`` -- broker address -> :class:`BrokerLiveInfo` (last registration, data
  version, the connection it came over, HA address).  ``None`` is the connection of the embedded
  name server's own broker, which registers in-process;
* ``filter_server_table`` -- broker address -> filter servers (4.9.8 brokers send none).

Removal follows RocketMQ too: UNREGISTER_BROKER (or the registration's connection closing, or
:meth:`RouteInfoManager.scan_not_active_broker` finding it silent for 120 s) takes one address away;
a broker name whose last address goes leaves the cluster table and every topic's queue data, and a
topic with no queue data left is no longer routed.  Where RocketMQ's ``onChannelDestroy`` falls back to
the closed socket's peer address (never a broker's listening address), this one looks only for the
registrations the connection made.

The bodies are the Java classes' JSON (:mod:`rmqstore.broker.jsonfmt`): ClusterInfo and TopicList as
fastjson writes them; TopicRouteData in two forms, see :func:`encode_route`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ...remoting import Connection
from ..jsonfmt import dumps
from ..topics import PERM_READ, PERM_WRITE, TopicConfig

__all__ = ["QueueData", "BrokerData", "BrokerLiveInfo", "RouteInfoManager", "DataVersion", "MASTER_ID",
           "BROKER_CHANNEL_EXPIRED_TIME", "encode_route", "topic_list_body", "java_hash_order",
           "java_string_hash"]

log = logging.getLogger(__name__)

MASTER_ID = 0  # MixAll.MASTER_ID
BROKER_CHANNEL_EXPIRED_TIME = 120.0  # seconds
FLAG_UNIT, FLAG_UNIT_SUB = 1, 2  # TopicSysFlag

#: DataVersion as a comparable value: (counter, timestamp)
DataVersion = tuple[int, int]


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    @classmethod
    def of(cls, broker_name: str, config: TopicConfig) -> "QueueData":
        return cls(broker_name, config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag)

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"brokerAddrs": dict(sorted(self.broker_addrs.items())), "brokerName": self.broker_name,
                "cluster": self.cluster}


@dataclass
class BrokerLiveInfo:
    """What the live table keeps per broker address; the identity fields are ours (views and logs)."""

    last_update: float
    data_version: DataVersion
    connection: Connection | None
    ha_server_addr: str
    cluster: str = ""
    broker_name: str = ""
    broker_id: int = 0
    address: str = ""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit number."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_hash_order(names) -> list[str]:
    """``names`` in the order a Java ``HashMap``/``HashSet`` of them (default capacity, grown as filled)
    iterates: by bucket, ``(h ^ h >>> 16) & (capacity - 1)``.  4.9.8 lists a route's queue and broker datas
    in that order, and tools take the first broker data of a route as *the* broker of a topic
    (``topicList -c``, ``topicClusterList``, ``queryTopicConsumeByWho``): the same order asks the same broker."""
    names = list(names)
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(names, key=lambda n: (bucket(n), n))


def topic_list_body(topics, broker_addr: str | None = None) -> bytes:
    """TopicList: ``{"brokerAddr":...,"topicList":[...]}``, the address left out when there is none."""
    body: dict[str, Any] = {}
    if broker_addr is not None:
        body["brokerAddr"] = broker_addr
    body["topicList"] = list(topics)
    return dumps(body).encode("utf-8")


def encode_route(route: dict, standard_json: bool) -> bytes:
    """TopicRouteData as 4.9.8 writes it for the asking client: standard JSON (broker ids quoted, keys
    sorted, non-ASCII escaped: fastjson's BrowserCompatible + MapSortField) for a client of 4.9.4 or later
    or one that asks ``acceptStandardJsonOnly``; fastjson's own text (ids unquoted) for the others."""
    if standard_json:
        return json.dumps(route, sort_keys=True, separators=(",", ":")).encode("ascii")
    return dumps(route).encode("utf-8")


class RouteInfoManager:
    """The five tables and the operations of RocketMQ's ``RouteInfoManager`` (one event loop: no lock)."""

    def __init__(self, expiry: float = BROKER_CHANNEL_EXPIRED_TIME, clock: Callable[[], float] = time.monotonic):
        self.expiry = expiry
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration ------------------------------------------------------------------------------
    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, ha_server_addr: str,
                        data_version: DataVersion, topic_configs: dict[str, TopicConfig] | None,
                        filter_servers: list[str] | None, connection: Connection | None) -> dict:
        """``registerBroker``; the RegisterBrokerResult fields for the answer (a slave's master)."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        data = self.broker_addr_table.get(broker_name)
        first = data is None
        if data is None:
            data = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
        for other_id in [i for i, a in data.broker_addrs.items() if a == broker_addr and i != broker_id]:
            del data.broker_addrs[other_id]  # one address, one id (a slave switched to master)
        old = data.broker_addrs.get(broker_id)
        data.broker_addrs[broker_id] = broker_addr
        if broker_id == MASTER_ID and old != broker_addr:
            log.info("cluster %s broker %s: master address %s -> %s", data.cluster, broker_name, old, broker_addr)
        first = first or old is None
        if topic_configs is not None and broker_id == MASTER_ID:
            if first or self.is_broker_topic_config_changed(broker_addr, data_version):
                for config in topic_configs.values():
                    self._create_and_update_queue_data(broker_name, config)
        if broker_addr not in self.broker_live_table:
            log.info("new broker registered: %s (HA %s)", broker_addr, ha_server_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(self.clock(), data_version, connection, ha_server_addr,
                                                             cluster, broker_name, broker_id, broker_addr)
        if filter_servers is not None:
            if filter_servers:
                self.filter_server_table[broker_addr] = list(filter_servers)
            else:
                self.filter_server_table.pop(broker_addr, None)
        return self._master_of(data) if broker_id != MASTER_ID else {}

    def _master_of(self, data: BrokerData) -> dict:
        master_addr = data.broker_addrs.get(MASTER_ID)
        live = self.broker_live_table.get(master_addr) if master_addr is not None else None
        if live is None:
            return {}
        return {"haServerAddr": live.ha_server_addr, "masterAddr": master_addr}

    def _create_and_update_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        queue_data = QueueData.of(broker_name, config)
        per_broker = self.topic_queue_table.setdefault(config.topic_name, {})
        old = per_broker.get(broker_name)
        per_broker[broker_name] = queue_data
        if old is None and len(per_broker) == 1:
            log.info("new topic registered: %s %s", config.topic_name, queue_data)
        elif old is not None and old != queue_data:
            log.info("topic %s changed: %s -> %s", config.topic_name, old, queue_data)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update = self.clock()

    # -- removal -----------------------------------------------------------------------------------
    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        data = self.broker_addr_table.get(broker_name)
        if data is None:
            return
        data.broker_addrs.pop(broker_id, None)
        if data.broker_addrs:
            return
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]
        self._remove_topics_of(broker_name)

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            per_broker = self.topic_queue_table[topic]
            per_broker.pop(broker_name, None)
            if not per_broker:
                del self.topic_queue_table[topic]

    def on_connection_closed(self, connection: Connection) -> None:
        """``onChannelDestroy``: the registrations that came over ``connection`` go."""
        for addr, live in list(self.broker_live_table.items()):
            if live.connection is connection:
                log.info("the connection of broker %s closed: its routes go", addr)
                self._destroy(addr)

    def _destroy(self, broker_addr: str) -> None:
        """Take ``broker_addr`` out of every table (its broker name too, when it was the last address)."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for data in list(self.broker_addr_table.values()):
            found = [i for i, a in data.broker_addrs.items() if a == broker_addr]
            if not found:
                continue
            del data.broker_addrs[found[0]]
            if not data.broker_addrs:
                del self.broker_addr_table[data.broker_name]
                for cluster, names in list(self.cluster_addr_table.items()):
                    if data.broker_name in names:
                        names.discard(data.broker_name)
                        if not names:
                            del self.cluster_addr_table[cluster]
                        break
                self._remove_topics_of(data.broker_name)
            return

    def scan_not_active_broker(self) -> list[BrokerLiveInfo]:
        """``scanNotActiveBroker``: the registrations not renewed within the expiry go (their connections
        are returned, for the caller to close).  An in-process registration (no connection) never expires:
        its broker lives as long as the name server's process."""
        now = self.clock()
        expired = [live for live in self.broker_live_table.values()
                   if live.connection is not None and now - live.last_update >= self.expiry]
        for live in expired:
            log.warning("broker %s not renewed for %.0f s: removed", live.address, self.expiry)
            self._destroy(live.address)
        return expired

    # -- admin -------------------------------------------------------------------------------------
    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the topic's queue data of the cluster's brokers, or all of it."""
        if not cluster:
            self.topic_queue_table.pop(topic, None)
            return
        per_broker = self.topic_queue_table.get(topic)
        if per_broker is None:
            return
        for name in self.cluster_addr_table.get(cluster, ()):
            per_broker.pop(name, None)
        if not per_broker:
            del self.topic_queue_table[topic]

    def operate_write_perm_of_broker(self, broker_name: str, wipe: bool) -> int:
        """WIPE (write bit off) or ADD (read and write) on every topic the broker name serves; how many."""
        count = 0
        for per_broker in self.topic_queue_table.values():
            queue_data = per_broker.get(broker_name)
            if queue_data is not None:
                queue_data.perm = queue_data.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                count += 1
        return count

    # -- queries -----------------------------------------------------------------------------------
    def pickup_topic_route_data(self, topic: str) -> dict | None:
        """TopicRouteData of ``topic`` (without orderTopicConf), or None when no broker serves it."""
        per_broker = self.topic_queue_table.get(topic)
        if not per_broker:
            return None
        names = java_hash_order(per_broker)
        broker_datas = [self.broker_addr_table[n].to_json() for n in names if n in self.broker_addr_table]
        if not broker_datas:
            return None
        filters = {a: self.filter_server_table[a] for d in broker_datas for a in d["brokerAddrs"].values()
                   if a in self.filter_server_table}
        return {"brokerDatas": broker_datas, "filterServerTable": filters,
                "queueDatas": [per_broker[n].to_json() for n in names]}

    def cluster_info_body(self) -> bytes:
        """ClusterInfo: ``brokerAddrTable`` and ``clusterAddrTable``."""
        return dumps({"brokerAddrTable": {n: d.to_json() for n, d in sorted(self.broker_addr_table.items())},
                      "clusterAddrTable": {c: sorted(n) for c, n in sorted(self.cluster_addr_table.items())}}
                     ).encode("utf-8")

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, per_broker in self.topic_queue_table.items() if names & per_broker.keys())

    def system_topics(self) -> tuple[list[str], str | None]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names (the topics every broker creates for
        them), and one broker's address to ask for the rest."""
        topics = set(self.cluster_addr_table)
        for names in self.cluster_addr_table.values():
            topics |= names
        addr = next((a for d in self.broker_addr_table.values() for a in d.broker_addrs.values()), None)
        return sorted(topics), addr

    def topics_whose_first_queue_data(self, pick: Callable[[int], bool]) -> list[str]:
        """The unit lists: topics whose first queue data's system flag passes ``pick``."""
        return sorted(t for t, per_broker in self.topic_queue_table.items()
                      if per_broker and pick(next(iter(per_broker.values())).topic_sys_flag))

    def unit_topics(self) -> list[str]:
        return self.topics_whose_first_queue_data(lambda f: bool(f & FLAG_UNIT))

    def has_unit_sub_topics(self) -> list[str]:
        return self.topics_whose_first_queue_data(lambda f: bool(f & FLAG_UNIT_SUB))

    def has_unit_sub_ununit_topics(self) -> list[str]:
        return self.topics_whose_first_queue_data(lambda f: not f & FLAG_UNIT and bool(f & FLAG_UNIT_SUB))
