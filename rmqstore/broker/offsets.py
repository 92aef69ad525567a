"""Consumer offsets: how far each consumer group has consumed each queue.

The broker does not track deliveries; a consumer *tells* it where it is, in three ways:
UPDATE_CONSUMER_OFFSET (15), the commit-offset piggyback of a PULL_MESSAGE (the
consumer's committed offset rides along with its next pull), and the unregistering of a
client.  The table is ``topic@group -> queue id -> offset`` and is written to
``config/consumerOffset.json`` every ``flushConsumerOffsetInterval`` (5 s) and at shutdown,
in RocketMQ's format (``{"offsetTable":{"T@g":{0:12,1:7}}}``, fastjson's unquoted integer
keys), so that a restarted broker -- ours or a real one -- hands consumers the offsets
they committed.
"""

from __future__ import annotations

import logging
import threading

from .jsonfmt import dumps, read_config_file, write_config_file
from ..remoting.throttle import LogThrottle
from ..files.store_paths import CONSUMER_OFFSET_JSON, config_path

__all__ = ["ConsumerOffsetManager", "TOPIC_GROUP_SEPARATOR"]

log = logging.getLogger(__name__)
_throttled = LogThrottle(log)  # a client can send these as fast as it likes: a few a minute reach the log

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, store_root: str):
        self.path = config_path(store_root, CONSUMER_OFFSET_JSON)
        self.table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False

    def commit_offset(self, client: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic + TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            queues = self.table.setdefault(key, {})
            old = queues.get(queue_id)
            if old is not None and offset < old:
                _throttled("offset less than store", logging.WARNING,
                           "[NOTIFYME]update consumer offset less than store. clientHost=%s, key=%s, "
                           "queueId=%d, requestOffset=%d, storeOffset=%d", client, key, queue_id, offset, old)
            queues[queue_id] = offset
            self._dirty = True

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        with self._lock:
            return self.table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}).get(queue_id, -1)

    def remove_offset(self, group: str) -> list[str]:
        """``removeOffset``: forget every offset of ``group`` (a deleted subscription group); the keys removed.
        Written with the next persist."""
        with self._lock:
            gone = [key for key in self.table if key.split(TOPIC_GROUP_SEPARATOR)[1:] == [group]]
            for key in gone:
                del self.table[key]
                log.warning("clean group offset %s", key)
            self._dirty = self._dirty or bool(gone)
        return gone

    def load(self) -> None:
        data = read_config_file(self.path)
        if not isinstance(data, dict):
            return
        table = {}
        for key, queues in (data.get("offsetTable") or {}).items():
            if not isinstance(queues, dict):
                continue
            try:
                table[str(key)] = {int(q): int(o) for q, o in queues.items()}
            except (TypeError, ValueError):
                log.warning("%s: skipping unreadable offsets of %r", self.path, key)
        with self._lock:
            self.table = table

    def persist(self, force: bool = True) -> None:
        with self._lock:
            if not (force or self._dirty):
                return
            text = dumps({"offsetTable": {k: dict(sorted(v.items())) for k, v in self.table.items()}}, pretty=True)
            self._dirty = False
        write_config_file(self.path, text)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        """``whichTopicByConsumer``: the topics ``group`` committed an offset of."""
        with self._lock:
            keys = list(self.table)
        return {topic for topic, _, g in (k.partition(TOPIC_GROUP_SEPARATOR) for k in keys) if g == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        """``whichGroupByTopic``: the groups that committed an offset of ``topic``."""
        with self._lock:
            keys = list(self.table)
        return {g for t, _, g in (k.partition(TOPIC_GROUP_SEPARATOR) for k in keys) if t == topic}
