"""The gates a put passes before the commitlog sees it (RocketMQ's ``checkStoreStatus`` and ``checkMessage``).

Two of the three gates of :mod:`rmqstore.store` live here:

1. the store's state -- shut down, a slave, not writeable (a disk went bad, see
   :meth:`PutChecks.make_not_writeable`), or the page cache busy (a writer has held the
   put lock for longer than ``os_page_cache_busy_timeout_mills``) each refuse the put;
2. the message -- types, topic length and characters, properties length, queue id, every
   integer field against its width in the record (:func:`rmqstore.format.record.field_problem`,
   the layout's widths), and none of what the store decides (store timestamp, queue offset,
   body CRC) unless the put is the replay of a recorded record.

The third gate, the commitlog's own encoder, is :mod:`rmqstore.engine.commit_log`'s.  A refusal is
a :class:`~rmqstore.format.status.PutMessageResult` (SERVICE_NOT_AVAILABLE, OS_PAGECACHE_BUSY or
MESSAGE_ILLEGAL) whose message names what was wrong; nothing is written.

The common case -- a plain :class:`~rmqstore.format.message.Message` to a topic already seen --
is decided by one expression without building anything; every other message takes the
full check, and a topic that passed it joins the fast path.  :class:`PutChecks` is a part the
store holds (:class:`~rmqstore.store.MessageStore`), its collaborators given to it.
"""

from __future__ import annotations

import logging
import re
from typing import Callable

from .commit_log import CommitLog
from ..common.config import BrokerRole, StoreConfig
from ..format.message import Message, MessageBatch
from ..format.layout import MAX_PROPERTIES_BYTES, MAX_QUEUE_ID, MAX_TOPIC_BYTES_V1, field_problem
from ..format.status import PutMessageResult, PutMessageStatus

__all__ = ["PutChecks", "TOPIC_PATTERN", "MAX_TOPIC_LENGTH", "MAX_PROPERTIES_CHARS", "MAX_QUEUE_ID"]

log = logging.getLogger("rmqstore.store")

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
#: RocketMQ's topic validator counts characters against the record's byte limit
MAX_TOPIC_LENGTH = MAX_TOPIC_BYTES_V1
#: ``checkMessage`` counts the properties string's characters against the record's byte limit
MAX_PROPERTIES_CHARS = MAX_PROPERTIES_BYTES
#: integer fields a producer gives, checked against their widths in the record
_PRODUCER_INT_FIELDS = ("flag", "sys_flag", "born_timestamp", "reconsume_times", "prepared_transaction_offset")
_BATCH_INT_FIELDS = ("sys_flag", "born_timestamp", "reconsume_times")
#: what the store decides and only a replay of a recorded record may give
_REPLAY_FIELDS = ("store_timestamp", "queue_offset", "body_crc")


class PutChecks:
    """The store's state and the message checks: the first two gates of a put.

    Its collaborators are given: the store's ``config``, ``commit_log`` (whose put lock's
    holding time says whether the page cache is busy), ``clock``, ``topic_queue_nums`` (queue
    id limits per topic) and whether the store is ``read_only``.  It holds the state it checks:
    ``shutdown_flag`` (set until the store starts and again once it shuts down), ``writeable``
    and why not, and ``good_topics`` (topics a full check passed -> their queue id limit),
    which the compiled put reads too (:mod:`rmqstore.engine.native_put`).
    """

    def __init__(self, config: StoreConfig, commit_log: CommitLog, clock: Callable[[], int],
                 topic_queue_nums: dict, read_only: bool):
        self.config = config
        self.commit_log = commit_log
        self.clock = clock
        self.topic_queue_nums = topic_queue_nums
        self.read_only = read_only
        self.shutdown_flag = True
        self.writeable = True
        self.not_writeable_reason = ""
        self.good_topics: dict[str, int] = {}

    def is_os_page_cache_busy(self) -> bool:
        begin = self.commit_log.begin_time_in_lock
        return begin > 0 and self.clock() - begin > self.config.os_page_cache_busy_timeout_mills

    def make_not_writeable(self, reason: str) -> None:
        """Refuse every later put (SERVICE_NOT_AVAILABLE naming ``reason``) until the store is reopened.

        RocketMQ's RunningFlags (logics queue / index file error): a flush, commit or dispatch
        that the disk refused.  The abort file then stays at shutdown, so the next start
        recovers abnormally and dispatches again what was not.
        """
        if self.writeable:
            log.error("message store is not writeable from now on: %s", reason)
            self.not_writeable_reason = reason
        self.writeable = False

    def check_store_status(self) -> PutMessageResult | None:
        if self.shutdown_flag:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, message=(
                "message store is opened read-only" if self.read_only
                else "message store is shut down (or not started)"))
        if self.config.broker_role is BrokerRole.SLAVE:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    message="this store is a slave; puts go to the master")
        if not self.writeable:
            reason = self.not_writeable_reason
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, message=(
                f"message store is not writeable: {reason}" if reason else "message store is not writeable"))
        if self.commit_log.begin_time_in_lock and self.is_os_page_cache_busy():  # (no put holds the lock: not busy)
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY,
                                    message="the put lock has been held too long (page cache busy)")
        return None

    def _check_topic(self, topic) -> str | None:
        if not isinstance(topic, str):
            return f"topic must be a str, got {type(topic).__name__}"
        if len(topic) > MAX_TOPIC_LENGTH:
            return f"topic is {len(topic)} characters, longer than {MAX_TOPIC_LENGTH}"
        if not TOPIC_PATTERN.match(topic):
            return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-] (or is empty)"
        return None

    def _check_queue(self, topic, queue_id) -> str | None:
        if type(queue_id) is not int:
            return f"queue id must be an int, got {type(queue_id).__name__}"
        limit = self.topic_queue_nums.get(topic, MAX_QUEUE_ID + 1)
        if not 0 <= queue_id < limit:
            return f"queue id {queue_id} is out of range [0, {limit}) for topic {topic!r}"
        return None

    def check_message(self, msg) -> PutMessageResult | None:
        """``checkMessage``: None when the message may be put, else MESSAGE_ILLEGAL and why.

        Integer fields that the fast path does not look at are range-checked by the encoder
        (the same layout widths, :func:`rmqstore.format.record.field_problem`).
        """
        if (type(msg) is Message and msg.topic in self.good_topics and type(msg.queue_id) is int
                and 0 <= msg.queue_id < self.good_topics[msg.topic] and type(msg.properties) is str
                and len(msg.properties) <= MAX_PROPERTIES_CHARS and type(msg.body) is bytes
                and msg.store_timestamp is None and msg.queue_offset is None and msg.body_crc is None):
            return None  # the common case, decided without building messages
        return self._check_message(msg, replay=False)

    def check_replayed_message(self, msg) -> PutMessageResult | None:
        """:meth:`check_message` for :meth:`replay_message`: the recorded values must be there and fit."""
        return self._check_message(msg, replay=True)

    def _check_message(self, msg, replay: bool) -> PutMessageResult | None:
        problem = None
        if not isinstance(msg, Message):
            problem = f"expected a Message, got {type(msg).__name__}"
        elif not isinstance(msg.body, (bytes, bytearray, memoryview)):
            problem = f"body must be bytes, got {type(msg.body).__name__}"
        elif not isinstance(msg.properties, str):
            problem = f"properties must be a str, got {type(msg.properties).__name__}"
        elif len(msg.properties) > MAX_PROPERTIES_CHARS:
            problem = f"properties string is {len(msg.properties)} characters, longer than {MAX_PROPERTIES_CHARS}"
        else:
            problem = (self._check_topic(msg.topic) or self._check_queue(msg.topic, msg.queue_id)
                       or _int_fields_problem(msg, _PRODUCER_INT_FIELDS)
                       or (_replay_fields_problem(msg) if replay else _decided_fields_problem(msg)))
        if problem:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=problem)
        if len(self.good_topics) < 100_000:
            self.good_topics[msg.topic] = self.topic_queue_nums.get(msg.topic, MAX_QUEUE_ID + 1)
        return None

    def check_messages(self, batch) -> PutMessageResult | None:
        problem = None
        if not isinstance(batch, MessageBatch):
            problem = f"expected a MessageBatch, got {type(batch).__name__}"
        elif not batch.items:
            problem = "a batch needs at least one message"
        elif len(batch.items) > self.config.max_msgs_num_batch * 1000:
            problem = f"batch of {len(batch.items)} messages is too large"
        else:
            problem = (self._check_topic(batch.topic) or self._check_queue(batch.topic, batch.queue_id)
                       or _int_fields_problem(batch, _BATCH_INT_FIELDS))
            if problem is None:
                for i, item in enumerate(batch.items):
                    if not isinstance(item.body, (bytes, bytearray, memoryview)):
                        problem = f"batch item {i}: body must be bytes, got {type(item.body).__name__}"
                        break
                    if not isinstance(item.properties, str):
                        problem = f"batch item {i}: properties must be a str"
                        break
                    problem = field_problem("flag", item.flag)
                    if problem:
                        problem = f"batch item {i}: {problem}"
                        break
        if problem:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=problem)
        if len(self.good_topics) < 100_000:  # (the compiled batch put takes only checked topics)
            self.good_topics[batch.topic] = self.topic_queue_nums.get(batch.topic, MAX_QUEUE_ID + 1)
        return None


def _int_fields_problem(item, names) -> str | None:
    """The first of ``item``'s integer fields ``names`` that does not fit its width in the record."""
    for name in names:
        problem = field_problem(name, getattr(item, name))
        if problem:
            return problem
    return None


def _decided_fields_problem(msg: Message) -> str | None:
    """A put may not give what the store decides (RocketMQ's put path overwrites these; we refuse)."""
    for name in _REPLAY_FIELDS:
        if getattr(msg, name) is not None:
            return (f"{name} is decided by the store; only a replay of a recorded record "
                    f"(MessageStore.replay_message, rmqstore load) may give it")
    return None


def _replay_fields_problem(msg: Message) -> str | None:
    """A replayed record's recorded values: a store timestamp (required) and offsets that fit."""
    if msg.store_timestamp is None:
        return "a replayed record needs its recorded store_timestamp"
    for name in _REPLAY_FIELDS:
        value = getattr(msg, name)
        if value is None:
            continue
        problem = field_problem(name, value)
        if problem:
            return problem
        if value < 0 and name != "body_crc":  # a CRC is any 32-bit pattern a record may hold
            return f"{name} = {value} is negative"
    return None
