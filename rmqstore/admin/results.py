"""What the admin calls answer: plain dataclasses, each a table with ``.to_pandas()``.

Names follow RocketMQ's classes in Python style (``ConsumeStats`` -> :class:`ConsumerProgress`, ``TopicOffset`` ->
:class:`QueueOffsets`, ``KVTable`` -> :class:`BrokerRuntimeInfo`), values are the broker's as it sent them
(offsets, counts, milliseconds since the epoch), and every result that is a list of rows says which rows in
:meth:`Table.rows` -- one dict per row, the same keys for every row -- which ``to_pandas()`` (pandas imported then,
not before: the core runs without it) and ``to_dict()`` (for ``--json``) are built on.  What a broker holds (runtime figures,
configuration, topic and group tables, messages) is in :mod:`.stored`; a topic's and a group's configs are the
broker's own classes (:class:`~rmqstore.broker.topics.TopicConfig`, :class:`~rmqstore.broker.groups.SubscriptionGroupConfig`):
one definition of what a topic is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..broker.clients import SubscriptionData, version_desc
from ..broker.namesrv.routes import MASTER_ID, BrokerData, QueueData

__all__ = ["Table", "json_value", "queue_order", "BrokerAddress", "ClusterInfo", "TopicList", "TopicRoute",
           "select_broker_addr", "QueueOffsets", "TopicStatus", "QueueProgress", "ConsumerProgress",
           "BrokerConsumeStats", "GroupProgress", "GroupsProgress", "ClientConnection", "ConsumerConnection",
           "ProducerConnection", "ResetOffsets", "RollbackStats"]

def queue_order(queue: Any) -> tuple:
    """MessageQueue's order (``compareTo``): topic, broker name, queue id -- of anything with those attributes."""
    return (queue.topic, queue.broker_name, queue.queue_id)


def json_value(value: Any) -> Any:
    """``value`` as JSON can hold it: dataclasses and dicts recursively, bytes as text when they are UTF-8 (else
    hex, under ``{"hex": ...}``), sets and tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_value(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": bytes(value).hex()}
    return value


class Table:
    """A result that is a table: :meth:`rows` (dicts with the keys of :attr:`columns`), :meth:`to_pandas`,
    :meth:`to_dict`."""

    columns: ClassVar[tuple[str, ...]] = ()

    def rows(self) -> list[dict]:
        raise NotImplementedError

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (pandas is imported here, on first use)."""
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(self.columns))

    def to_dict(self) -> dict:
        """Every field, JSON-ready (what ``rmqstore admin ... --json`` prints)."""
        return json_value(self)


# -- the cluster ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class BrokerAddress:
    """One broker process: its cluster, its name (master and slaves share it), its id (0: master) and address."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str

    @property
    def is_master(self) -> bool:
        return self.broker_id == MASTER_ID


@dataclass
class ClusterInfo(Table):
    """``ClusterInfo``: every broker the name server knows, by cluster (GET_BROKER_CLUSTER_INFO)."""

    brokers: list[BrokerAddress]
    clusters: dict[str, list[str]]  # cluster -> broker names

    columns = ("cluster", "broker_name", "broker_id", "address")

    def rows(self) -> list[dict]:
        return [dataclasses.asdict(b) for b in self.brokers]

    def cluster_names(self) -> list[str]:
        return sorted(self.clusters)

    def master_addresses(self, cluster: str | None = None) -> list[str]:
        """The masters' addresses (of one cluster): where changes go (``CommandUtil.fetchMasterAddrByClusterName``)."""
        return [b.address for b in self.brokers if b.is_master and cluster in (None, b.cluster)]

    def addresses(self, cluster: str | None = None) -> list[str]:
        """Every broker's address, masters and slaves (of one cluster)."""
        return [b.address for b in self.brokers if cluster in (None, b.cluster)]

    def broker_name_of(self, address: str) -> str | None:
        return next((b.broker_name for b in self.brokers if b.address == address), None)

    def master_of(self, broker_name: str) -> str | None:
        return next((b.address for b in self.brokers if b.broker_name == broker_name and b.is_master), None)


@dataclass
class TopicList(Table):
    """``TopicList``: the topic names a name server routes (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""

    topics: list[str]

    columns = ("topic",)

    def rows(self) -> list[dict]:
        return [{"topic": t} for t in self.topics]


def select_broker_addr(data: BrokerData) -> str | None:
    """The address a broker name is reached at: its master's, else a slave's (``BrokerData.selectBrokerAddr``, its
    pick made the lowest id)."""
    if MASTER_ID in data.broker_addrs:
        return data.broker_addrs[MASTER_ID]
    return next((data.broker_addrs[i] for i in sorted(data.broker_addrs)), None)


@dataclass
class TopicRoute(Table):
    """``TopicRouteData``: where a topic's queues are (GET_ROUTEINFO_BY_TOPIC); its queue and broker datas are the
    name server's own classes (:mod:`rmqstore.broker.namesrv.routes`)."""

    topic: str
    brokers: list[BrokerData]
    queues: list[QueueData]
    order_topic_conf: str | None = None
    filter_servers: dict[str, list[str]] = field(default_factory=dict)

    columns = ("cluster", "broker_name", "broker_addrs", "read_queue_nums", "write_queue_nums", "perm")

    def rows(self) -> list[dict]:
        by_name = {q.broker_name: q for q in self.queues}
        out = []
        for b in sorted(self.brokers, key=lambda b: b.broker_name):
            q = by_name.get(b.broker_name)
            out.append({"cluster": b.cluster, "broker_name": b.broker_name, "broker_addrs": dict(b.broker_addrs),
                        "read_queue_nums": q.read_queue_nums if q else 0,
                        "write_queue_nums": q.write_queue_nums if q else 0, "perm": q.perm if q else 0})
        return out

    def broker_addresses(self) -> list[str]:
        """The address each broker name is reached at (its master, else a slave), in the route's order."""
        return [a for a in (select_broker_addr(b) for b in self.brokers) if a is not None]


# -- topics and groups ----------------------------------------------------------------------------------------

@dataclass
class QueueOffsets:
    """One queue's offsets (``TopicOffset``): the oldest and the next offset, and the last message's store time."""

    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass
class TopicStatus(Table):
    """``TopicStatsTable`` of every broker of a topic (GET_TOPIC_STATS_INFO), queues sorted as MessageQueue sorts."""

    topic: str
    queues: list[QueueOffsets]

    columns = ("topic", "broker_name", "queue_id", "min_offset", "max_offset", "last_update_timestamp")

    def rows(self) -> list[dict]:
        return [dataclasses.asdict(q) for q in self.queues]


@dataclass
class QueueProgress:
    """One queue of a consumer group (``OffsetWrapper``): the broker's next offset, the group's committed offset,
    the store time of the last message consumed (0: none) and, with ``consumerProgress -s``, the client holding
    the queue."""

    group: str
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    client_ip: str | None = None

    @property
    def lag(self) -> int:
        """Messages not consumed yet (mqadmin's #Diff)."""
        return self.broker_offset - self.consumer_offset


@dataclass
class ConsumerProgress(Table):
    """A group's ``ConsumeStats`` over every broker (GET_CONSUME_STATS): per queue offsets and lag, and the
    group's consume rate (messages a second, the last minute)."""

    group: str
    queues: list[QueueProgress]
    consume_tps: float

    columns = ("group", "topic", "broker_name", "queue_id", "broker_offset", "consumer_offset", "lag",
               "last_timestamp", "client_ip")

    @property
    def diff_total(self) -> int:
        return sum(q.lag for q in self.queues)

    def rows(self) -> list[dict]:
        return [dict(dataclasses.asdict(q), lag=q.lag) for q in self.queues]


@dataclass
class BrokerConsumeStats(Table):
    """``ConsumeStatsList`` of one broker (GET_BROKER_CONSUME_STATS): every subscription group's queues there, in
    one answer -- what a live view polls for the lag of every group."""

    address: str
    groups: dict[str, ConsumerProgress]
    total_diff: int

    columns = ConsumerProgress.columns

    def rows(self) -> list[dict]:
        return [row for progress in self.groups.values() for row in progress.rows()]


@dataclass
class GroupProgress:
    """One row of ``consumerProgress`` without ``-g``: a group's online clients and its total lag."""

    group: str
    count: int  # clients online
    version: int | None  # the lowest client version, None when none is online
    consume_type: str | None  # CONSUME_ACTIVELY (pull) or CONSUME_PASSIVELY (push)
    message_model: str | None  # CLUSTERING or BROADCASTING
    consume_tps: float
    diff_total: int

    @property
    def version_desc(self) -> str | None:
        return None if self.version is None else version_desc(self.version)


@dataclass
class GroupsProgress(Table):
    """Every consumer group the name server has a retry topic of, with its progress."""

    groups: list[GroupProgress]

    columns = ("group", "count", "version", "version_desc", "consume_type", "message_model", "consume_tps",
               "diff_total")

    def rows(self) -> list[dict]:
        return [dict(dataclasses.asdict(g), version_desc=g.version_desc) for g in self.groups]


@dataclass
class ClientConnection:
    """A client's connection to a broker (``Connection``): its id, address, language and version."""

    client_id: str
    client_addr: str
    language: str
    version: int

    @property
    def version_desc(self) -> str:
        return version_desc(self.version)


@dataclass
class ConsumerConnection(Table):
    """``ConsumerConnection``: a group's clients online and what they subscribe to (GET_CONSUMER_CONNECTION_LIST)."""

    group: str
    connections: list[ClientConnection]
    subscriptions: list[SubscriptionData]
    consume_type: str
    message_model: str
    consume_from_where: str

    columns = ("client_id", "client_addr", "language", "version", "version_desc")

    def rows(self) -> list[dict]:
        return [dict(dataclasses.asdict(c), version_desc=c.version_desc) for c in self.connections]

    def min_version(self) -> int:
        """``computeMinVersion``: the oldest client's version."""
        return min((c.version for c in self.connections), default=2**31 - 1)


@dataclass
class ProducerConnection(Table):
    """``ProducerConnection``: a producer group's clients connected to a broker (GET_PRODUCER_CONNECTION_LIST)."""

    group: str
    connections: list[ClientConnection]

    columns = ConsumerConnection.columns
    rows = ConsumerConnection.rows


@dataclass
class RollbackStats:
    """A queue reset by committing the offset directly (``RollbackStats``; the group had no client online)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


@dataclass
class ResetOffsets(Table):
    """``resetOffsetByTime``: per queue the offset the group now starts from.  ``pushed`` says how: True, the
    broker told the group's online clients (INVOKE_BROKER_TO_RESET_OFFSET); False, no client was online and the
    offsets were committed directly (``rollback`` holds the details)."""

    group: str
    topic: str
    timestamp: int
    force: bool
    offsets: dict[tuple[str, int], int]  # (broker name, queue id) -> offset
    pushed: bool = True
    rollback: list[RollbackStats] = field(default_factory=list)

    columns = ("broker_name", "queue_id", "offset")

    def rows(self) -> list[dict]:
        return [{"broker_name": b, "queue_id": q, "offset": o} for (b, q), o in sorted(self.offsets.items())]
