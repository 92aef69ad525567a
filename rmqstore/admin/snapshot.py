"""The whole cluster in one call, for a live view that polls it: :meth:`SnapshotOps.snapshot`.

mqadmin asks a question at a time; a view refreshed every few seconds needs everything at once, and cheaply.  A
snapshot is three rounds of requests, each round's requests sent together (``asyncio.gather`` over the pooled
connections, so a round costs about one round trip whatever the cluster's size):

1. GET_BROKER_CLUSTER_INFO to a name server: the brokers;
2. to every broker GET_BROKER_RUNTIME_INFO (version, rates, commitlog offsets, disk), and to every master
   GET_ALL_TOPIC_CONFIG (its topics and queue counts) and GET_BROKER_CONSUME_STATS (every subscription group's
   offsets and lag on every queue, in one answer);
3. to every master, GET_TOPIC_STATS_INFO for each topic shown (min and max offset and last store time per queue).

Round 3 is one request per topic and master, so :meth:`~SnapshotOps.snapshot` shows the user's topics by default --
not the system topics, retry and dead-letter topics -- or the ones named.  A broker that is down or slow does not
stop the snapshot: its row says what went wrong (``error``) and the others are there.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence, TypeVar

from ..broker.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SYSTEM_TOPIC_PREFIX, SYSTEM_TOPICS
from ..common.errors import AdminError
from .messages import MessageOps
from .results import BrokerConsumeStats, ClusterInfo, QueueOffsets, QueueProgress, json_value, queue_order
from .stored import BrokerRuntimeInfo, TopicConfigs

__all__ = ["SnapshotOps", "ClusterSnapshot", "BrokerSnapshot", "is_user_topic"]

T = TypeVar("T")


def is_user_topic(topic: str, cluster: ClusterInfo) -> bool:
    """Not a system topic (TopicValidator's, a cluster's or a broker's own name, ``rmq_sys_``), nor a retry or
    dead-letter topic."""
    return not (topic in SYSTEM_TOPICS or topic in cluster.clusters or topic.startswith(SYSTEM_TOPIC_PREFIX)
                or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
                or topic.endswith("_REPLY_TOPIC") or any(topic == b.broker_name for b in cluster.brokers))


@dataclass
class BrokerSnapshot:
    """One broker process in a snapshot: who it is, its runtime figures, or why they are missing."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    runtime: BrokerRuntimeInfo | None = None
    error: str | None = None

    @property
    def role(self) -> str:
        return "MASTER" if self.broker_id == 0 else "SLAVE"

    def row(self) -> dict:
        r = self.runtime
        return {"cluster": self.cluster, "broker_name": self.broker_name, "broker_id": self.broker_id,
                "address": self.address, "role": self.role, "version": r.version_desc if r else None,
                "put_tps": r.put_tps if r else None, "get_tps": r.get_transferred_tps if r else None,
                "commit_log_min_offset": r.commit_log_min_offset if r else None,
                "commit_log_max_offset": r.commit_log_max_offset if r else None,
                "disk_ratio": r.commit_log_disk_ratio if r else None, "error": self.error}


@dataclass
class ClusterSnapshot:
    """Brokers, queues and consumer groups at one moment (``taken_at``, ms since the epoch, when the last answer
    came).  ``queues``: per topic and queue, the offsets (masters); ``progress``: per group and queue, the offsets
    and lag (masters); ``topics``: each master's topic table."""

    taken_at: int
    cluster: ClusterInfo
    brokers: list[BrokerSnapshot]
    queues: list[QueueOffsets]
    progress: list[QueueProgress]
    topics: dict[str, TopicConfigs] = field(default_factory=dict)  # master address -> its topic table
    errors: list[str] = field(default_factory=list)

    def lag_by_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for q in self.progress:
            out[q.group] = out.get(q.group, 0) + q.lag
        return out

    def tables(self) -> dict[str, list[dict]]:
        """The three tables as rows: ``brokers``, ``queues``, ``progress``."""
        return {"brokers": [b.row() for b in self.brokers],
                "queues": [json_value(q) for q in self.queues],
                "progress": [dict(json_value(q), lag=q.lag) for q in self.progress]}

    def to_pandas(self) -> dict:
        """The three tables as ``pandas.DataFrame`` s, by name."""
        import pandas as pd

        return {name: pd.DataFrame(rows) for name, rows in self.tables().items()}

    def to_dict(self) -> dict:
        return {"taken_at": self.taken_at, "tables": self.tables(), "errors": list(self.errors)}


class SnapshotOps(MessageOps):
    """The snapshot (a part of :class:`~rmqstore.admin.AsyncAdmin`)."""

    async def snapshot(self, topics: Iterable[str] | None = None, *, groups: Iterable[str] | None = None,
                       system: bool = False) -> ClusterSnapshot:
        """Brokers, queues and consumer groups in three rounds of requests (see :mod:`rmqstore.admin.snapshot`):
        the queues of ``topics`` (default: every user topic, and the system ones too with ``system``), the
        progress of ``groups`` (default: every group with offsets)."""
        cluster = await self.cluster_list()
        brokers = [BrokerSnapshot(b.cluster, b.broker_name, b.broker_id, b.address) for b in cluster.brokers]
        masters = [b for b in brokers if b.broker_id == 0]
        runtimes, tables, stats = await asyncio.gather(
            asyncio.gather(*(self.broker_status(b.address) for b in brokers), return_exceptions=True),
            asyncio.gather(*(self.topic_configs(b.address) for b in masters), return_exceptions=True),
            asyncio.gather(*(self.broker_consume_stats(b.address) for b in masters), return_exceptions=True))
        errors: list[str] = []
        for broker, runtime in zip(brokers, runtimes):
            if isinstance(runtime, BrokerRuntimeInfo):
                broker.runtime = runtime
            else:
                broker.error = _failure(runtime, errors)
        wanted_groups = None if groups is None else set(groups)
        progress = [q for s in _answers(stats, BrokerConsumeStats, errors) for g, p in s.groups.items()
                    if wanted_groups is None or g in wanted_groups for q in p.queues]
        topic_tables = {b.address: t for b, t in zip(masters, tables) if isinstance(t, TopicConfigs)}
        _answers(tables, TopicConfigs, errors)
        wanted = None if topics is None else set(topics)
        asks = [(address, name) for address, table in topic_tables.items() for name in sorted(table.topics)
                if (name in wanted if wanted is not None else system or is_user_topic(name, cluster))]
        found = await asyncio.gather(*(self.topic_stats(a, t) for a, t in asks), return_exceptions=True)
        queues = [q for f in _answers(found, list, errors) for q in f]
        return ClusterSnapshot(int(time.time() * 1000), cluster, brokers, sorted(queues, key=queue_order),
                               sorted(progress, key=lambda q: (q.group,) + queue_order(q)), topic_tables, errors)


def _failure(result: object, errors: list[str]) -> str:
    """The text of a failed request's error, noted in ``errors``; a failure that is not an admin error (a bug)
    is raised."""
    if not isinstance(result, AdminError):
        raise result if isinstance(result, BaseException) else TypeError(f"unexpected result {result!r:.80}")
    errors.append(str(result))
    return str(result)


def _answers(results: Sequence[object], kind: type[T], errors: list[str]) -> list[T]:
    """The answers of ``kind`` among a round's results; the failures noted in ``errors``."""
    out = []
    for result in results:
        if isinstance(result, kind):
            out.append(result)
        else:
            _failure(result, errors)
    return out
