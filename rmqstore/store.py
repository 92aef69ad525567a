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

Each refusal is a :class:`~rmqstore.format.status.PutMessageResult` with RocketMQ's status
and a message naming what was wrong; nothing is written, and later puts land as if the
refused one had never been tried.

After the append the store waits for what the configuration promises: with SYNC_FLUSH
(and a message that waits for its store), for the group-commit service to flush it; with
SYNC_MASTER, at the same time, for a slave to acknowledge it (:mod:`rmqstore.engine.ha`):
SLAVE_NOT_AVAILABLE at once when no slave is connected or the slave is too far behind,
FLUSH_SLAVE_TIMEOUT when none acknowledged it in time; a replication status other than
PUT_OK overrides the flush status, as in RocketMQ.

The clock and the store host are injectable, so a recorded workload replays exactly.

The parts, along RocketMQ's lines: this module holds the store's lifecycle (``load`` with
recovery, ``start`` wiring the services, ``shutdown``/``close``) and the read delegations to :mod:`rmqstore.engine.reading`; the gates are
:mod:`rmqstore.engine.store_checks`, the put path and its waits :mod:`rmqstore.engine.store_put`, the lock
:mod:`rmqstore.files.store_lock` -- parts :class:`MessageStore` holds, one job each, each given its
collaborators; the consume queues and the index are the :class:`~rmqstore.engine.dispatch.Dispatcher`'s.

One writer per directory: a writable store takes ``<root>/lock`` (a POSIX record lock, as
RocketMQ does, which keeps other processes out) and registers its root in this process
(by real path and by device/inode), because a POSIX lock does not stop a second writer in
the same process.  Either refusal happens before anything in the directory is touched.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable

from .engine.allocate import AllocateMappedFileService, TransientStorePool
from .files.checkpoint import StoreCheckpoint
from .engine.commit_log import CommitLog, wall_clock_ms
from .engine.consume_queue import ConsumeQueue
from .engine.dispatch import Dispatcher, ReputMessageService
from .engine.index import IndexService
from .common import native
from .engine import recovery
from .common.config import BrokerRole, FlushDiskType, StoreConfig
from .common.errors import StoreError, StoreStateError
from .engine.flush import CommitRealTimeService, FlushConsumeQueueService, FlushRealTimeService, GroupCommitService
from .engine.ha import HAService
from .engine.store_checks import TOPIC_PATTERN, PutChecks
from .files.store_lock import StoreLock
from .files.store_paths import abort_path, commitlog_dir
from .engine.put_trace import put_trace
from .engine.store_put import PutPath, StoreStats

__all__ = ["MessageStore", "StoreStats", "TOPIC_PATTERN", "open_store"]

log = logging.getLogger(__name__)


class MessageStore:
    """A writable store rooted at ``root`` (``commitlog/``, ``checkpoint``, ``abort``, ``lock``).

    A facade over its parts, each made here with its collaborators: the ``commit_log``, the
    ``dispatcher`` (consume queues and index) and the ``reput_message_service`` feeding it,
    the ``checks`` (the store's state and the message gates), the ``put_path`` (puts, waits,
    statistics) and the ``lock``; ``start`` makes the services and hands them to the put path.
    """

    def __init__(self, root, config: StoreConfig | None = None, *, clock=None, topic_queue_nums=None,
                 read_only: bool = False, **overrides):
        self.root = str(root)
        self.read_only = read_only
        if config is None:
            config = StoreConfig(**overrides)
        elif overrides:
            raise TypeError("pass either a StoreConfig or keyword overrides, not both")
        self.config = config
        self.clock = clock or wall_clock_ms
        self.topic_queue_nums = dict(topic_queue_nums or {})
        self.transient_store_pool = None
        if config.is_transient_store_pool_enabled:
            self.transient_store_pool = TransientStorePool(config.transient_store_pool_size,
                                                           config.mapped_file_size_commit_log)
        self.allocate_service = AllocateMappedFileService(config, self.transient_store_pool)
        self.commit_log = CommitLog(commitlog_dir(self.root), config, clock=self.clock,
                                    allocate_service=None if read_only else self.allocate_service,
                                    transient_store_pool=self.transient_store_pool, read_only=read_only)
        self.index_service = IndexService(self.root, config.max_hash_slot_num, config.max_index_num,
                                          clock=self.clock, read_only=read_only)
        commit_log = self.commit_log
        #: the consume queues and the index, fed with dispatched records (rmqstore.engine.dispatch)
        self.dispatcher = Dispatcher(self.root, config, self.index_service, read_only=read_only,
                                     tracer_of=lambda: commit_log.tracer)
        #: the store's state and the message checks (rmqstore.engine.store_checks)
        self.checks = PutChecks(config, commit_log, self.clock, self.topic_queue_nums, read_only)
        self.reput_message_service = ReputMessageService(commit_log, self.dispatcher,
                                                         on_stop=self.checks.make_not_writeable)
        self.stats = StoreStats()
        #: puts, replays and their async forms (rmqstore.engine.store_put); its methods are the store's own
        self.put_path = PutPath(config, commit_log, self.checks, self.stats, self.allocate_service)
        self.put_message = self.put_path.put_message
        self.put_messages = self.put_path.put_messages
        self.replay_message = self.put_path.replay_message
        self.async_put_message = self.put_path.async_put_message
        self.async_put_messages = self.put_path.async_put_messages
        self.flush_consume_queue_service: FlushConsumeQueueService | None = None
        self.group_commit_service: GroupCommitService | None = None
        self.flush_service: FlushRealTimeService | None = None
        self.commit_service: CommitRealTimeService | None = None
        self.ha_service: HAService | None = None  # replication (rmqstore.engine.ha), made by start()
        self.commit_log.on_io_error = self.checks.make_not_writeable
        self.closed = False  # set by close()/shutdown(): reads then raise instead of finding nothing
        self._started = False
        self._loaded = False
        self.last_exit_ok: bool | None = None  # set by load(): False when an abort file was found
        self.lock = StoreLock(self.root)  # <root>/lock, held from load() to shutdown()/close()

    # -- the checks' state, as the store's (rmqstore.engine.store_checks.PutChecks) ---------------
    @property
    def shutdown_flag(self) -> bool:
        """Set until the store starts, and again once it shuts down (puts are refused)."""
        return self.checks.shutdown_flag

    @property
    def writeable(self) -> bool:
        return self.checks.writeable

    @writeable.setter
    def writeable(self, value: bool) -> None:
        self.checks.writeable = value

    @property
    def not_writeable_reason(self) -> str:
        return self.checks.not_writeable_reason

    @property
    def tracer(self):
        """The put-path tracer (see :mod:`rmqstore.common.trace`), or None; every service reads it, as
        the commit log's observer of it (:mod:`rmqstore.engine.put_trace`)."""
        return self.commit_log.tracer.tracer

    @tracer.setter
    def tracer(self, value) -> None:
        self.commit_log.tracer = put_trace(value)

    # -- the dispatcher's parts, as the store's (rmqstore.engine.dispatch.Dispatcher) ---------------
    @property
    def consume_queue_table(self) -> dict[tuple[str, int], ConsumeQueue]:
        return self.dispatcher.consume_queue_table

    @property
    def checkpoint(self) -> StoreCheckpoint | None:
        """The store's checkpoint (opened by ``load``; a read-only store's is a snapshot), or None."""
        return self.dispatcher.checkpoint

    @property
    def message_arriving_listener(self) -> Callable[[str, int, int], None] | None:
        """Called from the reput thread after a queue's new units: (topic, queue id, new max offset);
        a broker wakes its long-polling pulls with it (RocketMQ's MessageArrivingListener)."""
        return self.dispatcher.message_arriving_listener

    @message_arriving_listener.setter
    def message_arriving_listener(self, listener: Callable[[str, int, int], None] | None) -> None:
        self.dispatcher.message_arriving_listener = listener

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return self.dispatcher.find_consume_queue(topic, queue_id)

    # -- lifecycle -----------------------------------------------------------------
    @property
    def abort_file(self) -> str:
        return abort_path(self.root)

    # -- load and recovery (rmqstore.engine.recovery) ---------------------------------------
    def load(self) -> bool:
        """Map the store's files and recover (RocketMQ's ``DefaultMessageStore#load``).

        ``abort`` absent means the last run shut down cleanly (normal recovery), present
        means it died (abnormal recovery: re-dispatch from the checkpoint on).  See
        :mod:`rmqstore.engine.recovery`.  Writable: ``<root>/lock`` is taken first, before
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
            self.lock.take()
            try:
                return self._load()
            except BaseException:
                self.lock.release()
                raise
        if not os.path.isdir(self.root):
            raise StoreError(f"{self.root}: no such store directory")
        return self._load()

    def _load(self) -> bool:
        self.last_exit_ok = not os.path.exists(self.abort_file)
        recovery.remove_creation_leftovers(self.root, self.read_only)
        if not self.last_exit_ok:
            recovery.remove_interrupted_allocations(self.root, self.config, self.read_only)
        self.commit_log.load()
        self.dispatcher.load_consume_queues()
        checkpoint = self.dispatcher.checkpoint = recovery.open_checkpoint(self.root, self.read_only)
        self.index_service.checkpoint = checkpoint
        self.index_service.load(self.last_exit_ok)
        recovery.recover(self.commit_log, self.dispatcher, self.last_exit_ok)
        self._loaded = True
        return True

    def start(self) -> None:
        if self.read_only:
            raise StoreStateError("a store opened read-only cannot be started (it would write)")
        if self._started:
            raise StoreStateError("store already started")
        if not self._loaded:
            self.load()  # recovery (rmqstore.engine.recovery)
        self.lock.take()
        if self.config.ha_enable or self.config.broker_role is BrokerRole.SLAVE:
            ha = HAService(self)
            ha.begin_accept()  # a port in use refuses the start before anything is written
            self.ha_service = ha
        open(self.abort_file, "wb").close()
        # as RocketMQ's start(): dispatch from the furthest message any consume queue holds,
        # catch up before anything else runs, then take the queue offsets from the queues
        self.reput_message_service.reput_from_offset = self._dispatched_up_to()
        self.reput_message_service.do_reput()
        recovery.recover_topic_queue_table(self.commit_log, self.dispatcher)
        if self.transient_store_pool is not None:
            self.transient_store_pool.init()
        self.allocate_service.start()
        cfg = self.config
        if cfg.broker_role is not BrokerRole.SLAVE:  # (a slave's files follow its master's offsets)
            # the file the first put needs, made before it comes (rmqstore.engine.allocate)
            self.commit_log.mapped_file_queue.request_files_ahead()

        def on_flushed(ts):
            self.checkpoint.physic_msg_timestamp = ts

        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            cwait = native.module("_cwait", cfg.native)
            self.group_commit_service = GroupCommitService(self.commit_log, on_flushed,
                                                           cwait.Gate() if cwait is not None else None)
            self.group_commit_service.start()
        else:
            self.flush_service = FlushRealTimeService(self.commit_log, cfg, on_flushed)
            self.flush_service.start()
            if self.transient_store_pool is not None:
                self.commit_service = CommitRealTimeService(self.commit_log, cfg, self.flush_service)
                self.commit_service.start()
        self.reput_message_service.start()
        self.flush_consume_queue_service = FlushConsumeQueueService(cfg, self.dispatcher,
                                                                    self.checks.make_not_writeable)
        self.flush_consume_queue_service.start()
        self.checks.shutdown_flag = False
        if self.ha_service is not None:
            self.ha_service.start()
        self.put_path.connect(group_commit_service=self.group_commit_service, flush_service=self.flush_service,
                              commit_service=self.commit_service, ha_service=self.ha_service)
        self._started = True

    def close(self) -> None:
        """Unmap everything of a read-only store (a started one: same as shutdown).

        A writable store that was loaded (recovered) but never started is flushed and
        unmapped; its ``abort`` file, if the last run left one, stays where it is.
        """
        if not self.read_only and self._started:
            self.shutdown()
            return
        self.dispatcher.shutdown(flush_index=False)
        if self.checkpoint is not None and not self.read_only:
            self.checkpoint.shutdown()
        self.dispatcher.checkpoint = None
        self.commit_log.shutdown()
        self.closed = True
        self.lock.release()

    def shutdown(self) -> None:
        if self.checks.shutdown_flag:
            return
        self.checks.shutdown_flag = True
        self.put_path.close()
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
        self.dispatcher.shutdown(flush_index=True)
        self.checkpoint.shutdown()
        self.commit_log.shutdown()
        if self.transient_store_pool is not None:
            self.transient_store_pool.destroy()
        if self.writeable and os.path.exists(self.abort_file):
            os.remove(self.abort_file)
        self.closed = True
        self.lock.release()

    def __enter__(self):
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()

    # -- dispatch ------------------------------------------------------------------
    def destroy_topic_queues(self, topic: str) -> list[int]:
        """A deleted topic's consume queues go (RocketMQ's ``cleanUnusedTopic`` for one topic): each queue's
        files and folder are deleted and its next queue offset is forgotten, so the topic, created again,
        starts its queues at offset 0.  Its messages stay in the commitlog until it expires.  A file a
        reader still maps is unlinked all the same (its map stays valid until the reader lets go).  The
        queue ids destroyed.  No dispatch pass runs meanwhile: one under way could be writing to these queues
        (or making their folders), and a pass that fails stops the store's puts.  The topic's next queue offsets
        go under the put lock, so a message put meanwhile starts its queue over at 0 -- and is dispatched to
        a new queue after this returns."""
        with self.reput_message_service.paused():
            return self.dispatcher.destroy_topic_queues(topic, self.commit_log.forget_topic_queues)

    def _dispatched_up_to(self) -> int:
        """Where the reput service starts: the end of the furthest message any queue knows."""
        start = max(self.dispatcher.max_physic_offset(), 0)
        return max(start, self.commit_log.get_min_offset()) if self.commit_log.mapped_file_queue.mapped_files else start

    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Block until the reput service has dispatched everything readable (tests, tools).  With the transient
        store pool a put is readable once the commit service has committed it: until then nothing is behind."""
        deadline = time.monotonic() + timeout
        while self.reput_message_service.behind() > 0:
            if time.monotonic() > deadline:
                return False
            self.reput_message_service.wakeup()
            time.sleep(0.001)
        return True

    # -- a slave's replication (rmqstore.engine.ha) ----------------------------------------------
    def update_ha_master_address(self, address: str | None) -> None:
        """A slave's new master (``updateHaMasterAddress``: the broker learns it from the name server)."""
        if self.ha_service is None:
            raise StoreStateError("no HA service: the store is not started, or not a slave")
        self.ha_service.update_master_address(address)

    def append_to_commit_log(self, start_offset: int, data) -> bool:
        """A slave appends replicated bytes (``appendToCommitLog``); the reput service dispatches them."""
        if self.checks.shutdown_flag:
            return False
        ok = self.commit_log.append_data(start_offset, data)
        if ok:
            self.reput_message_service.wakeup()
        return ok

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

    # -- reads (rmqstore.engine.reading) ------------------------------------------------------
    # Thin delegations to the read path in rmqstore/engine/reading.py; nothing here writes.
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                    message_filter=None, **kwargs):
        """Pull messages by queue offset (``getMessage``); see :func:`rmqstore.engine.reading.get_message`."""
        from .engine import reading
        return reading.get_message(self, group, topic, queue_id, offset, max_count, message_filter, **kwargs)

    def look_message_by_offset(self, phy_offset: int, size: int | None = None, **kwargs):
        """The record at a commitlog offset, or None (``lookMessageByOffset``)."""
        from .engine import reading
        return reading.look_message_by_offset(self, phy_offset, size, **kwargs)

    def view_message_by_id(self, msg_id: str, **kwargs):
        """The record an offset msgId names, or None."""
        from .engine import reading
        return reading.view_message_by_id(self, msg_id, **kwargs)

    def query_message(self, topic: str, key: str, max_count: int, begin: int, end: int, **kwargs):
        """Messages by key through the index (``queryMessage``)."""
        from .engine import reading
        return reading.query_message(self, topic, key, max_count, begin, end, **kwargs)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        from .engine import reading
        return reading.get_max_offset_in_queue(self, topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        from .engine import reading
        return reading.get_min_offset_in_queue(self, topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        from .engine import reading
        return reading.get_commit_log_offset_in_queue(self, topic, queue_id, queue_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int, **kwargs) -> int:
        from .engine import reading
        return reading.get_offset_in_queue_by_time(self, topic, queue_id, timestamp, **kwargs)
    # -- end of reads --------------------------------------------------------------------


def open_store(path, read_only: bool = True, config: StoreConfig | None = None) -> MessageStore:
    """Open any store directory (RocketMQ 4.x/5.x, ours, a live broker's) -- by default without writing.

    Sizes come from the files (:func:`rmqstore.files.store_sizes.infer_config`) unless ``config``
    is given.  A read-only store maps every file read-only and never creates, truncates,
    locks or deletes anything; ``close()`` it when done.  With ``read_only=False`` the
    store is loaded (recovered) and started for writing.
    """
    from .files.store_dir import resolve_store_root
    from .files.store_sizes import infer_config

    root = resolve_store_root(path)
    config = config or infer_config(root)
    store = MessageStore(root, config, read_only=read_only)
    store.load()
    if not read_only:
        store.start()
    return store
