"""MessageStore: the facade a broker talks to (RocketMQ's ``DefaultMessageStore``).

A put goes through three gates before the commitlog sees it:

1. the store's state -- shut down, a slave, not writeable (a disk went bad), or the page
   cache busy (a writer has held the put lock for longer than
   ``os_page_cache_busy_timeout_mills``) each refuse the put;
2. the message -- types, topic length and characters, properties length, queue id, every
   integer field against its width in the record, and none of what the store decides
   (store timestamp, queue offset, body CRC: only :meth:`MessageStore.replay_message`,
   the replay of a recorded record, may give those, and a recorded queue offset must be
   the one the store would give);
3. the commitlog's own encoder -- body and record size, UTF-8 forms and lengths, hosts
   (socket addresses: ports 0..65535).

Each refusal is a :class:`~rmqstore.status.PutMessageResult` with RocketMQ's status
and a message naming what was wrong; nothing is written, and later puts land as if the
refused one had never been tried.

After the append the store waits for what the configuration promises: with SYNC_FLUSH
(and a message that waits for its store), for the group-commit service to flush it; with
SYNC_MASTER, at the same time, for a slave to acknowledge it (:mod:`rmqstore.ha`):
SLAVE_NOT_AVAILABLE at once when no slave is connected or the slave is too far behind,
FLUSH_SLAVE_TIMEOUT when none acknowledged it in time; a replication status other than
PUT_OK overrides the flush status, as in RocketMQ.

The clock and the store host are injectable, so a recorded workload replays exactly.

One writer per directory: a writable store takes ``<root>/lock`` (a POSIX record lock, as
RocketMQ does, which keeps other processes out) and registers its root in this process
(by real path and by device/inode), because a POSIX lock does not stop a second writer in
the same process.  Either refusal happens before anything in the directory is touched.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from time import perf_counter as _perf
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from .allocate import AllocateMappedFileService, TransientStorePool
from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .consume_queue import ConsumeQueue, consume_queue_ids
from .dispatch import ReputMessageService, builds_consume_queue
from .index import IndexService
from . import recovery
from .config import BrokerRole, FlushDiskType, StoreConfig
from .errors import StoreError, StoreStateError
from .flush import (RETRY_TIMES_OVER, CommitRealTimeService, FlushRealTimeService, GroupCommitRequest,
                    GroupCommitService, ServiceThread)
from .ha import HAService
from .message import Message, MessageBatch
from .record import field_problem
from .status import PutMessageResult, PutMessageStatus
from .store_paths import abort_path, commitlog_dir, lock_path

__all__ = ["MessageStore", "StoreStats", "TOPIC_PATTERN", "open_store"]

log = logging.getLogger(__name__)

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_CHARS = 32767
MAX_QUEUE_ID = 2**31 - 1
#: integer fields a producer gives, checked against their widths in the record
_PRODUCER_INT_FIELDS = ("flag", "sys_flag", "born_timestamp", "reconsume_times", "prepared_transaction_offset")
_BATCH_INT_FIELDS = ("sys_flag", "born_timestamp", "reconsume_times")
#: what the store decides and only a replay of a recorded record may give
_REPLAY_FIELDS = ("store_timestamp", "queue_offset", "body_crc")


_PUT_OK = PutMessageStatus.PUT_OK


class _WritersRegistry:
    """The store roots this process has open for writing.

    The lock file's POSIX record lock keeps other processes out, but it belongs to the
    process: a second writable ``MessageStore`` on the same directory in this process
    would take it again silently.  So each writable root is registered here, under its
    real path and its (device, inode) -- a symlink, another spelling or a bind mount of
    the same directory is the same store.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict = {}  # key -> the MessageStore holding it

    def take(self, store: "MessageStore") -> tuple:
        """Register ``store.root`` (which must exist) or raise :class:`StoreStateError`."""
        st = os.stat(store.root)
        keys = (("path", os.path.realpath(store.root)), ("inode", st.st_dev, st.st_ino))
        with self._lock:
            for key in keys:
                holder = self._held.get(key)
                if holder is not None and holder is not store:
                    raise StoreStateError(
                        f"{store.root} is in use: it is already open for writing in this process"
                        + (f" (as {holder.root})" if holder.root != store.root else ""))
            for key in keys:
                self._held[key] = store
        return keys

    def release(self, store: "MessageStore", keys) -> None:
        with self._lock:
            for key in keys:
                if self._held.get(key) is store:
                    del self._held[key]


_WRITERS = _WritersRegistry()


class FlushConsumeQueueService(ServiceThread):
    """Flushes consume queues every second; every minute a thorough pass also saves the checkpoint."""

    name = "FlushConsumeQueueService"

    def __init__(self, store: "MessageStore"):
        super().__init__()
        self.store = store
        self.last_thorough = 0.0  # as RocketMQ: the first pass (about 1 s after start) is thorough

    def _do_flush(self, retry_times: int) -> None:
        cfg = self.store.config
        least_pages = cfg.flush_consume_queue_least_pages
        thorough = retry_times == RETRY_TIMES_OVER
        now = time.monotonic()
        if now >= self.last_thorough + cfg.flush_consume_queue_thorough_interval / 1000.0:
            self.last_thorough = now
            thorough = True
        if thorough:
            least_pages = 0
        logics_ts = self.store.checkpoint.logics_msg_timestamp if self.store.checkpoint else 0
        for cq in list(self.store.consume_queue_table.values()):
            for _ in range(retry_times):
                if self.guarded(cq.flush, least_pages) is not False:  # (None: failed, reported)
                    break
        if thorough and self.store.checkpoint is not None:
            if logics_ts > 0:
                self.store.checkpoint.logics_msg_timestamp = logics_ts
            self.guarded(self.store.checkpoint.flush)

    def io_error_hook(self):
        return self.store.make_not_writeable

    def run(self) -> None:
        while not self.is_stopped():
            self._stop_event.wait(self.store.config.flush_interval_consume_queue / 1000.0)
            self._do_flush(1)
        self._do_flush(RETRY_TIMES_OVER)


def _bucket(elapsed_ms: float) -> int:
    for i, bound in enumerate((0, 10, 50, 100, 200, 500)):
        if elapsed_ms <= bound:
            return i
    return 6


class StoreStats:
    """Put statistics (a slice of RocketMQ's StoreStatsService)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.put_message_times_total: dict[str, int] = {}
        self.put_message_size_total: dict[str, int] = {}
        self.put_message_failed_times = 0
        self.put_message_entire_time_max = 0.0  # ms
        self.put_message_distribute_time = [0] * 7  # <=0ms, 0-10, 10-50, 50-100, 100-200, 200-500, >500
        self.status_counts: dict[str, int] = {}

    def record(self, topic: str, result: PutMessageResult, elapsed_ms: float, msg_num: int = 1) -> None:
        with self._lock:
            if result.status is _PUT_OK:
                self.put_message_times_total[topic] = self.put_message_times_total.get(topic, 0) + msg_num
                self.put_message_size_total[topic] = (self.put_message_size_total.get(topic, 0)
                                                      + result.append_result.wrote_bytes)
            else:
                self.put_message_failed_times += 1
            name = result.status.name
            self.status_counts[name] = self.status_counts.get(name, 0) + 1
            if elapsed_ms > self.put_message_entire_time_max:
                self.put_message_entire_time_max = elapsed_ms
            i = 0 if elapsed_ms <= 0 else 1 if elapsed_ms <= 10 else _bucket(elapsed_ms)
            self.put_message_distribute_time[i] += 1

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "putMessageTimesTotal": sum(self.put_message_times_total.values()),
                "putMessageSizeTotal": sum(self.put_message_size_total.values()),
                "putMessageFailedTimes": self.put_message_failed_times,
                "putMessageEntireTimeMax": self.put_message_entire_time_max,
                "putMessageDistributeTime": list(self.put_message_distribute_time),
                "byTopic": dict(self.put_message_times_total),
                "statusCounts": dict(self.status_counts),
            }


class MessageStore:
    """A writable store rooted at ``root`` (``commitlog/``, ``checkpoint``, ``abort``, ``lock``)."""

    def __init__(self, root, config: StoreConfig | None = None, *, clock=None, topic_queue_nums=None,
                 read_only: bool = False, **overrides):
        self.root = str(root)
        self.read_only = read_only
        if config is None:
            config = StoreConfig(**overrides)
        elif overrides:
            raise TypeError("pass either a StoreConfig or keyword overrides, not both")
        self.config = config
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.topic_queue_nums = dict(topic_queue_nums or {})
        self._good_topics: dict[str, int] = {}  # topics already checked -> queue id limit
        self.transient_store_pool = None
        if config.is_transient_store_pool_enabled:
            self.transient_store_pool = TransientStorePool(config.transient_store_pool_size,
                                                           config.mapped_file_size_commit_log)
        self.allocate_service = AllocateMappedFileService(config, self.transient_store_pool)
        self.commit_log = CommitLog(commitlog_dir(self.root), config, clock=self.clock,
                                    allocate_service=None if read_only else self.allocate_service,
                                    transient_store_pool=self.transient_store_pool, read_only=read_only)
        self.stats = StoreStats()
        self.checkpoint: StoreCheckpoint | None = None
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self._cq_lock = threading.Lock()
        self.index_service = IndexService(self.root, config.max_hash_slot_num, config.max_index_num,
                                          clock=self.clock, read_only=read_only)
        self.reput_message_service = ReputMessageService(self)
        self.flush_consume_queue_service: FlushConsumeQueueService | None = None
        self.group_commit_service: GroupCommitService | None = None
        self.flush_service: FlushRealTimeService | None = None
        self.commit_service: CommitRealTimeService | None = None
        self.ha_service: HAService | None = None  # replication (rmqstore.ha), made by start()
        self.writeable = True
        self.not_writeable_reason = ""
        self.commit_log.on_io_error = self.make_not_writeable
        self.shutdown_flag = True
        self.closed = False  # set by close()/shutdown(): reads then raise instead of finding nothing
        self._started = False
        self._loaded = False
        self.last_exit_ok: bool | None = None  # set by load(): False when an abort file was found
        self._async_pool: ThreadPoolExecutor | None = None
        self._async_pool_lock = threading.Lock()
        self._lock_fd: int | None = None  # <root>/lock, held from load() to shutdown()/close()
        self._writer_keys: tuple = ()  # this root's entries in the in-process registry of writers
        #: called from the reput thread after each consume-queue unit: (topic, queue id, new max offset);
        #: a broker wakes its long-polling pulls with it (RocketMQ's MessageArrivingListener)
        self.message_arriving_listener: Callable[[str, int, int], None] | None = None

    # -- lifecycle -----------------------------------------------------------------
    @property
    def abort_file(self) -> str:
        return abort_path(self.root)

    # -- load and recovery (rmqstore.recovery) ---------------------------------------
    def load(self) -> bool:
        """Map the store's files and recover (RocketMQ's ``DefaultMessageStore#load``).

        ``abort`` absent means the last run shut down cleanly (normal recovery), present
        means it died (abnormal recovery: re-dispatch from the checkpoint on).  See
        :mod:`rmqstore.recovery`.  Writable: ``<root>/lock`` is taken first, before
        recovery may truncate or delete anything (RocketMQ takes it later, in ``start``),
        so a store that another writer holds -- another process, or another
        ``MessageStore`` in this one -- raises :class:`StoreStateError` untouched;
        ``shutdown()``/``close()`` release it.  Read-only: files are mapped read-only and
        the ends found in memory; nothing is created, truncated, dispatched, deleted or locked.
        """
        if self._loaded:
            return True
        if not self.read_only:
            if os.path.exists(self.root) and not os.path.isdir(self.root):
                raise StoreError(f"{self.root}: not a directory (a store root is a directory)")
            os.makedirs(self.root, exist_ok=True)
            # before anything is truncated or deleted: a store another writer holds (a live
            # broker, a second MessageStore in this process or another) is refused here, untouched
            self._take_lock()
            try:
                return self._load()
            except BaseException:
                self._release_lock()
                raise
        if not os.path.isdir(self.root):
            raise StoreError(f"{self.root}: no such store directory")
        return self._load()

    def _load(self) -> bool:
        self.last_exit_ok = not os.path.exists(self.abort_file)
        recovery.remove_creation_leftovers(self)
        if not self.last_exit_ok:
            recovery.remove_interrupted_allocations(self)
        self.commit_log.load()
        self._load_consume_queues()
        self.checkpoint = recovery.open_checkpoint(self)
        self.index_service.checkpoint = self.checkpoint
        self.index_service.load(self.last_exit_ok)
        recovery.recover(self, self.last_exit_ok)
        self._loaded = True
        return True

    def _take_lock(self) -> None:
        """Lock ``<root>/lock`` like RocketMQ (a POSIX record lock, which Java's FileLock also uses)."""
        import fcntl

        if self._lock_fd is not None:
            return
        keys = _WRITERS.take(self)  # this process first: the POSIX lock would not see a second writer here
        try:
            fd = os.open(lock_path(self.root), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                os.close(fd)
                raise StoreStateError(f"{self.root} is in use: another process holds its lock file") from None
            if os.pread(fd, 4, 0) != b"lock":  # RocketMQ's content; an existing lock file stays untouched
                os.pwrite(fd, b"lock", 0)
        except BaseException:
            _WRITERS.release(self, keys)
            raise
        self._lock_fd = fd
        self._writer_keys = keys

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing drops the POSIX lock
            _WRITERS.release(self, self._writer_keys)
            self._writer_keys = ()

    def start(self) -> None:
        if self.read_only:
            raise StoreStateError("a store opened read-only cannot be started (it would write)")
        if self._started:
            raise StoreStateError("store already started")
        if not self._loaded:
            self.load()  # recovery (rmqstore.recovery)
        self._take_lock()
        if self.config.ha_enable or self.config.broker_role is BrokerRole.SLAVE:
            ha = HAService(self)
            ha.begin_accept()  # a port in use refuses the start before anything is written
            self.ha_service = ha
        open(self.abort_file, "wb").close()
        # as RocketMQ's start(): dispatch from the furthest message any consume queue holds,
        # catch up before anything else runs, then take the queue offsets from the queues
        self.reput_message_service.reput_from_offset = self._dispatched_up_to()
        self.reput_message_service.do_reput()
        recovery.recover_topic_queue_table(self)
        if self.transient_store_pool is not None:
            self.transient_store_pool.init()
        self.allocate_service.start()
        cfg = self.config

        def on_flushed(ts):
            self.checkpoint.physic_msg_timestamp = ts

        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.group_commit_service = GroupCommitService(self.commit_log, on_flushed)
            self.group_commit_service.start()
        else:
            self.flush_service = FlushRealTimeService(self.commit_log, cfg, on_flushed)
            self.flush_service.start()
            if self.transient_store_pool is not None:
                self.commit_service = CommitRealTimeService(self.commit_log, cfg, self.flush_service)
                self.commit_service.start()
        self.reput_message_service.start()
        self.flush_consume_queue_service = FlushConsumeQueueService(self)
        self.flush_consume_queue_service.start()
        self.shutdown_flag = False
        if self.ha_service is not None:
            self.ha_service.start()
        self._started = True

    def close(self) -> None:
        """Unmap everything of a read-only store (a started one: same as shutdown).

        A writable store that was loaded (recovered) but never started is flushed and
        unmapped; its ``abort`` file, if the last run left one, stays where it is.
        """
        if not self.read_only and self._started:
            self.shutdown()
            return
        for cq in self.consume_queue_table.values():
            if not self.read_only:
                cq.flush(0)
            cq.shutdown()
        self.index_service.shutdown()  # (flushes each writable index file)
        if self.checkpoint is not None and not self.read_only:
            self.checkpoint.shutdown()
        self.checkpoint = None
        self.commit_log.shutdown()
        self.closed = True
        self._release_lock()

    def shutdown(self) -> None:
        if self.shutdown_flag:
            return
        self.shutdown_flag = True
        with self._async_pool_lock:
            pool = self._async_pool
        if pool is not None:
            pool.shutdown(wait=True)
        if self.ha_service is not None:
            self.ha_service.shutdown()
        # commit first (it pokes flush), then flush, as RocketMQ stops them
        if self.commit_service is not None:
            self.commit_service.shutdown()
        if self.flush_service is not None:
            self.flush_service.shutdown()
        if self.group_commit_service is not None:
            self.group_commit_service.shutdown()
        self.allocate_service.shutdown()
        self.reput_message_service.shutdown()
        self.flush_consume_queue_service.shutdown()
        queue = self.commit_log.mapped_file_queue
        while not queue.commit(0):
            pass
        while not queue.flush(0):
            pass
        if queue.store_timestamp:
            self.checkpoint.physic_msg_timestamp = queue.store_timestamp
        for cq in list(self.consume_queue_table.values()):
            cq.flush(0)
            cq.shutdown()
        self.index_service.flush()
        self.index_service.shutdown()
        self.checkpoint.shutdown()
        self.commit_log.shutdown()
        if self.transient_store_pool is not None:
            self.transient_store_pool.destroy()
        if self.writeable and os.path.exists(self.abort_file):
            os.remove(self.abort_file)
        self.closed = True
        self._release_lock()

    def __enter__(self):
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()

    # -- checks --------------------------------------------------------------------
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
        if self.is_os_page_cache_busy():
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
        (the same layout widths, :func:`rmqstore.record.field_problem`).
        """
        if (type(msg) is Message and msg.topic in self._good_topics and type(msg.queue_id) is int
                and 0 <= msg.queue_id < self._good_topics[msg.topic] and type(msg.properties) is str
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
        if len(self._good_topics) < 100_000:
            self._good_topics[msg.topic] = self.topic_queue_nums.get(msg.topic, MAX_QUEUE_ID + 1)
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
        return None

    # -- puts ----------------------------------------------------------------------
    def put_message(self, msg: Message) -> PutMessageResult:
        """Put one message and wait for what the configuration promises (sync flush, slave)."""
        return self._put(msg, self.check_message, self.commit_log.put_message)

    def put_messages(self, batch: MessageBatch) -> PutMessageResult:
        """Put a batch (one topic and queue, consecutive queue offsets, never across files)."""
        return self._put(batch, self.check_messages, self.commit_log.put_messages)

    def replay_message(self, msg: Message) -> PutMessageResult:
        """Write a recorded record again (``rmqstore load``): the one way to give what the store decides.

        ``msg.store_timestamp`` (required) and ``msg.body_crc`` (optional) are written as
        recorded; ``msg.queue_offset`` (optional) must be the one the store gives the record
        anyway -- its queue's next one, 0 for a prepared or rolled-back record -- or the
        replay is refused with MESSAGE_ILLEGAL, so a copy's consume queues count as the
        original's.  The store timestamp must be a non-negative int64 but need not grow:
        RocketMQ takes it from the wall clock, which may step back, and a copy keeps that.
        No delay-level rewrite: the record is stored as it was.
        """
        return self._put(msg, self.check_replayed_message, self.commit_log.put_message)

    @property
    def tracer(self):
        """The put-path tracer (see :mod:`rmqstore.trace`); one attribute shared by every service."""
        return self.commit_log.tracer

    @tracer.setter
    def tracer(self, value) -> None:
        self.commit_log.tracer = value

    def _put(self, item, check, append) -> PutMessageResult:
        begin = _perf()
        tr = self.commit_log.tracer
        if tr is None:
            result = self.check_store_status() or check(item)
        else:
            result = self._traced_checks(tr, item, check)
        if result is None:
            result = append(item)
            if result.status is _PUT_OK:
                result = self._wait_flush_and_replica(result, item)
        ok = result.status is _PUT_OK
        if tr is not None:
            tr.event("put.end", status=result.status.name, message=result.message,
                     elapsed_ms=(_perf() - begin) * 1000)
        self.stats.record(item.topic if isinstance(item, (Message, MessageBatch)) else "?", result,
                          (_perf() - begin) * 1000, result.append_result.msg_num if ok else 1)
        return result

    def _traced_checks(self, tr, item, check) -> PutMessageResult | None:
        tr.event("put.begin", kind="batch" if isinstance(item, MessageBatch) else "single",
                 topic=getattr(item, "topic", None), queue_id=getattr(item, "queue_id", None))
        result = self.check_store_status()
        tr.event("check.store_status", status=result.status.name if result else "OK",
                 message=result.message if result else "")
        if result is None:
            result = check(item)
            tr.event("check.message", status=result.status.name if result else "OK",
                     message=result.message if result else "")
        return result

    def async_put_message(self, msg: Message) -> Future:
        """Like ``asyncPutMessage``: a future of the result (resolved when the promise is kept)."""
        return self._submit_async(self.put_message, msg)

    def async_put_messages(self, batch: MessageBatch) -> Future:
        return self._submit_async(self.put_messages, batch)

    def _submit_async(self, fn, arg) -> Future:
        # appends are serialised by the put lock anyway; waiting for the flush is what may block,
        # so the wait happens on a small pool and the caller gets a future at once
        pool = self._async_pool
        if pool is None and not self.shutdown_flag:
            from concurrent.futures import ThreadPoolExecutor

            with self._async_pool_lock:  # shutdown() takes it too: no pool is made after it looked
                if self._async_pool is None and not self.shutdown_flag:
                    self._async_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="put")
                pool = self._async_pool
        if pool is not None and not self.shutdown_flag and not (
                self.config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
                and self.config.broker_role is not BrokerRole.SYNC_MASTER):
            try:
                return pool.submit(fn, arg)
            except RuntimeError:  # shut down meanwhile: fn answers SERVICE_NOT_AVAILABLE below
                pass
        future: Future = Future()
        future.set_result(fn(arg))  # nothing to wait for, or a refusal (not started, shut down)
        return future

    def _wait_flush_and_replica(self, result: PutMessageResult, msg) -> PutMessageResult:
        status = _PUT_OK
        cfg = self.config
        tr = self.commit_log.tracer
        replica = self._submit_replica(result, msg)  # before the flush wait: the two overlap
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            service = self.group_commit_service
            if msg.wait_store_msg_ok:
                ar = result.append_result
                req = GroupCommitRequest(ar.wrote_offset + ar.wrote_bytes, cfg.sync_flush_timeout)
                if tr is not None:
                    tr.event("flush.request", mode="group_commit", next_offset=req.next_offset,
                             timeout_ms=cfg.sync_flush_timeout)
                service.put_request(req)
                status = req.wait(cfg.sync_flush_timeout / 1000.0 + 1.0)
            else:
                if tr is not None:
                    tr.event("flush.request", mode="group_commit_wakeup", waits=False)
                service.wakeup()
        elif self.commit_service is not None:
            if tr is not None:
                tr.event("flush.request", mode="commit_wakeup", service="CommitRealTimeService")
            self.commit_service.wakeup()
        else:
            if tr is not None:
                tr.event("flush.request", mode="async_wakeup", service="FlushRealTimeService")
            self.flush_service.wakeup()
        replica_status = self._replica_status(replica, tr)
        if replica_status is not _PUT_OK:
            status = replica_status  # replication overrides the flush status, as in RocketMQ
        if status is _PUT_OK:
            return result
        return PutMessageResult(status, result.append_result, {
            PutMessageStatus.FLUSH_DISK_TIMEOUT: "the message was written but not flushed in time",
            PutMessageStatus.FLUSH_SLAVE_TIMEOUT: "the message was written but no slave acknowledged it in time",
            PutMessageStatus.SLAVE_NOT_AVAILABLE: ("SYNC_MASTER with no slave to replicate to (none connected, "
                                                   "or more than ha_slave_fallbehind_max bytes behind)"),
        }.get(status, ""))

    def _submit_replica(self, result: PutMessageResult, msg):
        """RocketMQ's submitReplicaRequest: a request to wait on, or the status at once."""
        if self.config.broker_role is not BrokerRole.SYNC_MASTER or not msg.wait_store_msg_ok:
            return _PUT_OK
        ar = result.append_result
        end = ar.wrote_offset + ar.wrote_bytes
        ha = self.ha_service
        if ha is None or not ha.is_slave_ok(end):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        return ha.submit(end, self.config.sync_flush_timeout)

    def _replica_status(self, replica, tr) -> PutMessageStatus:
        """Wait for the replica request (if one was made); trace the wait as its own stage."""
        waits = not isinstance(replica, PutMessageStatus)
        begin = _perf()
        status = replica.wait(self.config.sync_flush_timeout / 1000.0 + 1.0) if waits else replica
        if (waits or status is not _PUT_OK) and self.ha_service is not None:  # a SYNC_MASTER wait
            self.ha_service.note_replica_outcome(status, (_perf() - begin) * 1000,
                                                 replica.next_offset if waits else None)
        if tr is not None:
            tr.event("replica", role=self.config.broker_role.value, status=status.name, waits=waits,
                     next_offset=replica.next_offset if waits else None, waited_ms=(_perf() - begin) * 1000,
                     acked=self.ha_service.push2_slave_max_offset if self.ha_service is not None else None)
        return status

    def update_ha_master_address(self, address: str | None) -> None:
        """A slave's new master (``updateHaMasterAddress``: the broker learns it from the name server)."""
        if self.ha_service is None:
            raise StoreStateError("no HA service: the store is not started, or not a slave")
        self.ha_service.update_master_address(address)

    def append_to_commit_log(self, start_offset: int, data) -> bool:
        """A slave appends replicated bytes (``appendToCommitLog``); the reput service dispatches them."""
        if self.shutdown_flag:
            return False
        ok = self.commit_log.append_data(start_offset, data)
        if ok:
            self.reput_message_service.wakeup()
        return ok

    # -- dispatch ------------------------------------------------------------------
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queue_table.get(key)
        if cq is None:
            with self._cq_lock:
                cq = self.consume_queue_table.get(key)
                if cq is None:
                    cq = ConsumeQueue(self.root, topic, queue_id, self.config.mapped_file_size_consume_queue,
                                      read_only=self.read_only)
                    self.consume_queue_table[key] = cq
        return cq

    def _load_consume_queues(self) -> None:
        """Map every consume queue on disk (recovery recovers them: rmqstore.recovery)."""
        for topic, qid in consume_queue_ids(self.root):
            if (topic, qid) not in self.consume_queue_table:
                self.find_consume_queue(topic, qid).load()

    def _dispatched_up_to(self) -> int:
        """Where the reput service starts: the end of the furthest message any queue knows."""
        best = max((cq.max_physic_offset for cq in self.consume_queue_table.values()), default=-1)
        start = max(best, 0)
        return max(start, self.commit_log.get_min_offset()) if self.commit_log.mapped_file_queue.mapped_files else start

    def do_dispatch(self, req) -> None:
        """Hand one record to the consume queue and the index (CommitLogDispatcher*)."""
        tr = self.commit_log.tracer
        if builds_consume_queue(req):
            cq = self.find_consume_queue(req.topic, req.queue_id)
            before = cq.get_max_offset_in_queue() if tr is not None else None
            if cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code,
                                            req.consume_queue_offset):
                if self.checkpoint is not None:
                    if self.config.broker_role is BrokerRole.SLAVE:  # appends carry no store time
                        self.checkpoint.physic_msg_timestamp = req.store_timestamp
                    self.checkpoint.logics_msg_timestamp = req.store_timestamp
            else:
                log.error("[BUG] consume queue %s-%d could not take offset %d", req.topic, req.queue_id,
                          req.consume_queue_offset)
            listener = self.message_arriving_listener
            if listener is not None:
                listener(req.topic, req.queue_id, req.consume_queue_offset + 1)
            if tr is not None:
                tr.event("dispatch.consume_queue", topic=req.topic, queue_id=req.queue_id,
                         queue_offset=req.consume_queue_offset, unit=(req.commit_log_offset, req.msg_size,
                                                                      req.tags_code),
                         max_offset_before=before, max_offset_after=cq.get_max_offset_in_queue())
        elif tr is not None:
            tr.event("dispatch.consume_queue", topic=req.topic, queue_id=req.queue_id, skipped=True,
                     reason="prepared/rolled-back transaction records get no consume-queue unit")
        if self.config.message_index_enable:
            self.index_service.build_index(req)
            if tr is not None:
                tr.event("dispatch.index", offset=req.commit_log_offset, uniq_key=req.uniq_key, keys=req.keys)

    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Block until the reput service has dispatched everything readable (tests, tools)."""
        deadline = time.monotonic() + timeout
        while self.reput_message_service.behind() > 0:
            if time.monotonic() > deadline:
                return False
            self.reput_message_service.wakeup()
            time.sleep(0.001)
        return True

    # -- inspection ----------------------------------------------------------------
    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def positions(self) -> list[dict]:
        """Every commitlog file's positions, as the fixture manifests record them."""
        return [{"file": os.path.basename(mf.file_name), "fileFromOffset": mf.file_from_offset,
                 "wrotePosition": mf.wrote_position, "committedPosition": mf.committed_position,
                 "flushedPosition": mf.flushed_position, "readPosition": mf.read_position,
                 "isFull": mf.is_full(), "hasWriteBuffer": mf.has_write_buffer}
                for mf in self.commit_log.mapped_file_queue.mapped_files]

    # -- reads (rmqstore.reading) ------------------------------------------------------
    # Thin delegations to the read path in rmqstore/reading.py; nothing here writes.
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                    message_filter=None, **kwargs):
        """Pull messages by queue offset (``getMessage``); see :func:`rmqstore.reading.get_message`."""
        from . import reading
        return reading.get_message(self, group, topic, queue_id, offset, max_count, message_filter, **kwargs)

    def look_message_by_offset(self, phy_offset: int, size: int | None = None, **kwargs):
        """The record at a commitlog offset, or None (``lookMessageByOffset``)."""
        from . import reading
        return reading.look_message_by_offset(self, phy_offset, size, **kwargs)

    def view_message_by_id(self, msg_id: str, **kwargs):
        """The record an offset msgId names, or None."""
        from . import reading
        return reading.view_message_by_id(self, msg_id, **kwargs)

    def query_message(self, topic: str, key: str, max_count: int, begin: int, end: int, **kwargs):
        """Messages by key through the index (``queryMessage``)."""
        from . import reading
        return reading.query_message(self, topic, key, max_count, begin, end, **kwargs)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        from . import reading
        return reading.get_max_offset_in_queue(self, topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        from . import reading
        return reading.get_min_offset_in_queue(self, topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        from . import reading
        return reading.get_commit_log_offset_in_queue(self, topic, queue_id, queue_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int, **kwargs) -> int:
        from . import reading
        return reading.get_offset_in_queue_by_time(self, topic, queue_id, timestamp, **kwargs)
    # -- end of reads --------------------------------------------------------------------


def open_store(path, read_only: bool = True, config: StoreConfig | None = None) -> MessageStore:
    """Open any store directory (RocketMQ 4.x/5.x, ours, a live broker's) -- by default without writing.

    Sizes come from the files (:func:`rmqstore.store_dir.infer_config`) unless ``config``
    is given.  A read-only store maps every file read-only and never creates, truncates,
    locks or deletes anything; ``close()`` it when done.  With ``read_only=False`` the
    store is loaded (recovered) and started for writing.
    """
    from .store_dir import infer_config, resolve_store_root

    root = resolve_store_root(path)
    config = config or infer_config(root)
    store = MessageStore(root, config, read_only=read_only)
    store.load()
    if not read_only:
        store.start()
    return store


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
