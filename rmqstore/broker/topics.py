"""Topics the broker knows: ``config/topics.json`` and the rules around it.

RocketMQ's ``TopicConfigManager`` keeps one :class:`TopicConfig` per topic (read and write
queue counts, permission bits, flags) and writes the table to ``config/topics.json`` after
every change.  A topic comes to exist in one of three ways: it is a system topic the
broker creates at start (TBW102, SELF_TEST_TOPIC, SCHEDULE_TOPIC_XXXX, the cluster's and
the broker's own name...), an admin creates it, or a producer sends to it and the broker
creates it from the *default topic* the producer names (TBW102), with at most that topic's
queue count -- only if the default topic's permission has the INHERIT bit, which it has
while ``autoCreateTopicEnable`` is true.  Retry topics (``%RETRY%group``) are created
when a consumer group first needs one.

The file is fastjson's text (:mod:`rmqstore.broker.jsonfmt`), written atomically with a
``.bak``, so a real broker can take over the directory.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from .jsonfmt import ConfigTable
from ..format.layout import MAX_TOPIC_BYTES_V1
from ..remoting.throttle import LogThrottle
from ..files.store_paths import TOPICS_JSON, config_path

__all__ = ["PERM_PRIORITY", "PERM_READ", "PERM_WRITE", "PERM_INHERIT", "TopicConfig", "TopicConfigManager",
           "validate_topic", "AUTO_CREATE_TOPIC_KEY_TOPIC", "SCHEDULE_TOPIC", "RETRY_GROUP_TOPIC_PREFIX",
           "DLQ_GROUP_TOPIC_PREFIX", "NOT_ALLOWED_SEND_TOPICS", "retry_topic", "is_writeable", "is_readable",
           "SYSTEM_TOPICS", "SYSTEM_TOPIC_PREFIX", "TRACE_TOPIC", "TRANS_HALF_TOPIC", "TRANS_OP_HALF_TOPIC"]

log = logging.getLogger(__name__)
_throttled = LogThrottle(log)  # sends name any topic they like: a few refusals a minute reach the log

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
#: TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
NOT_ALLOWED_SEND_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
                                     TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC})

#: TopicValidator.SYSTEM_TOPIC_SET as it starts; a broker adds its cluster's and its own name and its reply topic
SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC, TRACE_TOPIC,
                           TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
#: any topic with this prefix is a system topic too
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = MAX_TOPIC_BYTES_V1  # TopicValidator.TOPIC_MAX_LENGTH: the record's limit


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def validate_topic(topic: str | None) -> str | None:
    """None for a usable topic name, else RocketMQ's remark (``TopicValidator.validateTopic``)."""
    if not topic:
        return "The specified topic is blank."
    if not _TOPIC_RE.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, d: dict) -> "TopicConfig":
        return cls(str(d["topicName"]), int(d.get("readQueueNums", 16)), int(d.get("writeQueueNums", 16)),
                   int(d.get("perm", 6)), str(d.get("topicFilterType", "SINGLE_TAG")),
                   int(d.get("topicSysFlag", 0)), bool(d.get("order", False)))


class TopicConfigManager(ConfigTable):
    """The topic table of one broker, persisted in ``<store>/config/topics.json``."""

    table_key = "topicConfigTable"

    def __init__(self, store_root: str, broker_config, delay_levels: int = 18):
        super().__init__(config_path(store_root, TOPICS_JSON))
        self.delay_levels = delay_levels
        self.broker_config = broker_config
        #: called after a topic is added or changed (a broker registering with name servers re-registers)
        self.on_change = None
        self._add_system_topics()

    def entry_from_json(self, name: str, d: dict) -> "TopicConfig":
        return TopicConfig.from_json(d)

    def _add_system_topics(self) -> None:
        bc = self.broker_config
        reply = bc.broker_cluster_name + "_REPLY_TOPIC"
        #: TopicValidator's system topics with this broker's own: neither created nor deleted by an admin
        self.system_topics = SYSTEM_TOPICS | {bc.broker_cluster_name, bc.broker_name, reply}
        self.table[SELF_TEST_TOPIC] = TopicConfig(SELF_TEST_TOPIC, 1, 1)
        if bc.auto_create_topic_enable:
            n = bc.default_topic_queue_nums
            self.table[AUTO_CREATE_TOPIC_KEY_TOPIC] = TopicConfig(
                AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_INHERIT | PERM_READ | PERM_WRITE)
        self.table[BENCHMARK_TOPIC] = TopicConfig(BENCHMARK_TOPIC, 1024, 1024)
        perm = PERM_INHERIT | (PERM_READ | PERM_WRITE if bc.cluster_topic_enable else 0)
        self.table[bc.broker_cluster_name] = TopicConfig(bc.broker_cluster_name, 16, 16, perm)
        perm = PERM_INHERIT | (PERM_READ | PERM_WRITE if bc.broker_topic_enable else 0)
        self.table[bc.broker_name] = TopicConfig(bc.broker_name, 1, 1, perm)
        self.table[OFFSET_MOVED_EVENT] = TopicConfig(OFFSET_MOVED_EVENT, 1, 1)
        self.table[SCHEDULE_TOPIC] = TopicConfig(SCHEDULE_TOPIC, self.delay_levels, self.delay_levels)
        if bc.trace_topic_enable:  # where clients with message trace on write their records (a system topic, as 4.9.8)
            self.table[bc.msg_trace_topic_name] = TopicConfig(bc.msg_trace_topic_name, 1, 1)
            self.system_topics = self.system_topics | {bc.msg_trace_topic_name}
        self.table[reply] = TopicConfig(reply, 1, 1)

    # -- lookups and creation ------------------------------------------------------------------
    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        """``TopicValidator.isSystemTopic`` on this broker."""
        return topic in self.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    def put(self, config: TopicConfig) -> None:
        """``updateTopicConfig``: add or replace a topic, count a data version, persist, tell the name servers."""
        self.table[config.topic_name] = config
        self.changed()
        if self.on_change is not None:
            self.on_change()

    def delete(self, topic: str) -> bool:
        """``deleteTopicConfig``: False when there was no such topic.  The name servers are not told: the
        admin deletes the route there itself (DELETE_TOPIC_IN_NAMESRV), as with RocketMQ."""
        if self.table.pop(topic, None) is None:
            log.warning("delete topic config failed, topic: %s not exists", topic)
            return False
        self.changed()
        return True

    def create_in_send(self, topic: str, default_topic: str, client_queue_nums: int,
                       topic_sys_flag: int = 0) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: a new topic shaped after the default topic, or None."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        default = self.table.get(default_topic)
        if default is None:
            _throttled("create topic failed", logging.WARNING,
                       "create new topic %s failed: default topic %s does not exist", topic, default_topic)
            return None
        perm = default.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.auto_create_topic_enable:
            perm = PERM_READ | PERM_WRITE
        if not perm & PERM_INHERIT:
            _throttled("create topic failed", logging.WARNING,
                       "create new topic %s failed: default topic %s has no inherit permission (%d)",
                       topic, default_topic, perm)
            return None
        queue_nums = max(0, min(client_queue_nums, default.write_queue_nums))
        config = TopicConfig(topic, queue_nums, queue_nums, perm & ~PERM_INHERIT, topic_sys_flag=topic_sys_flag)
        self.put(config)
        return config

    def create_system_topic(self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0) -> TopicConfig:
        """``createTopicInSendMessageBackMethod`` and friends: a topic the broker itself needs."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self.put(config)
        return config
