"""Dispatch: from commitlog records to consume-queue units and index entries.

The put path only appends to the commitlog.  Everything a consumer or a key lookup
needs is *derived* from it afterwards by :class:`ReputMessageService`, a thread that
follows the log a little behind the writers (``reput_from_offset``) and turns each record
into a :class:`DispatchRequest` -- the handful of values the consume queue and the index
need -- and hands it to the :class:`Dispatcher`.  Because everything derived can be derived
again, recovery only has to make the commitlog right and then re-dispatch.

The :class:`Dispatcher` is RocketMQ's ``dispatcherList`` (the consume-queue and the index
dispatchers) as one object: it owns the consume-queue table and the index service, and it
alone decides what a dispatched record does -- its unit, its index entries, the
arriving-message listener, the checkpoint's times (on a slave the appended bytes carry no
store time, so the logics time stands for the physic one too).  It takes records two ways,
side by side: :meth:`Dispatcher.dispatch` (one request, the pure path) and
:meth:`Dispatcher.dispatch_run` (a compiled run, below).  The reput service and recovery
only hand records to it.

Rules (RocketMQ's ``checkMessageAndReturnSize`` and the two dispatchers):

* tags code: Java ``hashCode`` of TAGS (0 without tags); on ``SCHEDULE_TOPIC_XXXX`` the
  delivery time instead: store timestamp + the delay of the DELAY level;
* prepared and rolled-back transaction records get no consume-queue unit; rolled-back
  ones get no index entries either;
* a blank record sends the reader to the next file, and so does a file read to its last
  byte; running out of readable bytes waits for more (on a slave a record can arrive in
  halves); any other end (:func:`rmqstore.format.walk.step`, lenient) stops the reader there.

:func:`dispatch_request` is pure (record in, request out), and so is the walk of one file
(:func:`reput_segment`); the service is the thin threaded layer around them.

The compiled path (``rmqstore._native._cdispatch``, chosen by :func:`rmqstore.common.native.module`)
---------------------------------------------------------------------------------------
Per record, the pure path costs tens of microseconds of Python on the writers' GIL.  The
compiled path takes a *run* of records at once (:func:`reput_segment_native`): one C call
walks them with the walk's rules and computes each one's tags code and index key hashes,
grouping the consume-queue units per topic-queue into contiguous 20-byte runs; a second
writes the index entries straight into the index file's mapping; both release the GIL
(on runs long enough to pay for handing it over), so the second core does that work while
the writers run.  Python then writes each queue's run with one append (:meth:`ConsumeQueue.append_units`),
wakes that queue's long-polling pulls once, and sets the checkpoint's logics time.

Its rule for staying exact: the compiled path takes only what cannot go otherwise than
the pure path's record-by-record order would -- units appended to the end of their
queue's current file, entries into the current index file for records whose keys all
fit.  The first record that needs anything else (a new consume-queue or index file, a
pre-blank fill, a repeated unit, a queue seen for the first time, a DELAY value that is
not a plain decimal) cuts the run: the records before it are written in bulk, that record
goes through the pure path (:func:`dispatch_request` and :meth:`Dispatcher.dispatch`), and the
next run starts after it.  So a file that cannot be created fails at the same record as
in the pure path, and everything past it is untouched.  Where the compiled walk stops at
something that is not a record, :func:`rmqstore.format.walk.step` says what it is, in the pure
path's words.  A store with a tracer runs the pure path (the trace shows its stages).

A record the dispatchers cannot take (a consume-queue or index file the disk has no room
for) stops the service *at that record*: the store becomes not writeable (RocketMQ's
logics-queue / index-file error flags), the thread stays alive but idle, and nothing is
skipped -- the abort file stays, so the next start recovers abnormally and dispatches the
record again (RocketMQ's reput moves on past it and the queue never gets the unit).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import time
from bisect import bisect_left
from typing import Any, Callable

from ..common import native
from ..common.config import BrokerRole
from .consume_queue import ConsumeQueue, consume_queue_ids
from .put_trace import NULL_PUT_TRACE
from ..common.errors import StoreError
from ..format.properties import DELAY, KEYS, TAGS, UNIQ_KEY, java_string_hash, parse_properties
from ..format.record import decode_record
from ..files.store_paths import consume_queue_dir
from ..format.sysflag import gets_queue_unit
from ..format.walk import End, SegmentEnd, step, walk_segment

__all__ = ["DispatchRequest", "dispatch_request", "Dispatcher", "ReputMessageService", "tags_code_of",
           "SCHEDULE_TOPIC", "reput_segment", "reput_segment_native", "delay_table", "MAX_BATCH"]

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


class DispatchRequest:
    __slots__ = ("topic", "queue_id", "commit_log_offset", "msg_size", "tags_code", "store_timestamp",
                 "consume_queue_offset", "keys", "uniq_key", "sys_flag", "prepared_transaction_offset")

    def __init__(self, topic, queue_id, commit_log_offset, msg_size, tags_code, store_timestamp,
                 consume_queue_offset, keys, uniq_key, sys_flag, prepared_transaction_offset):
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_offset = commit_log_offset
        self.msg_size = msg_size
        self.tags_code = tags_code
        self.store_timestamp = store_timestamp
        self.consume_queue_offset = consume_queue_offset
        self.keys = keys
        self.uniq_key = uniq_key
        self.sys_flag = sys_flag
        self.prepared_transaction_offset = prepared_transaction_offset

    def __repr__(self) -> str:
        return (f"DispatchRequest({self.topic}-{self.queue_id} @{self.commit_log_offset} "
                f"size={self.msg_size} cq={self.consume_queue_offset} tags={self.tags_code})")


def tags_code_of(topic: str, props: dict, store_timestamp: int, delay_levels: dict[int, int]) -> int:
    tags = props.get(TAGS)
    code = java_string_hash(tags) if tags else 0
    if topic == SCHEDULE_TOPIC and props.get(DELAY) is not None and delay_levels:
        try:
            level = int(props[DELAY])
        except ValueError:
            level = 0
        level = min(level, max(delay_levels))
        if level > 0:
            code = store_timestamp + delay_levels[level]
    return code


def dispatch_request(record, delay_levels: dict[int, int]) -> DispatchRequest:
    """The dispatch request of one decoded message record (pure)."""
    props = parse_properties(record.properties)
    return DispatchRequest(record.topic, record.queue_id, record.physical_offset, record.total_size,
                           tags_code_of(record.topic, props, record.store_timestamp, delay_levels),
                           record.store_timestamp, record.queue_offset, props.get(KEYS), props.get(UNIQ_KEY),
                           record.sys_flag, record.prepared_transaction_offset)


def reput_segment(buf, base: int, start: int, readable: int, dispatch, delay_levels: dict[int, int],
                  native: bool = True) -> tuple[SegmentEnd, int, Exception | None]:
    """Dispatch the records of one file (first byte at ``base``) from ``start`` up to ``readable``.

    Returns where and why the walk stopped, how many records were dispatched, and the
    error of the record the dispatchers could not take (the walk stops *at* it) or None.
    ``native`` False keeps the walk itself in Python (a store on the pure path, or traced).
    """
    failure: list = []

    def on_record(pos, _s):
        try:
            dispatch(dispatch_request(decode_record(buf, pos), delay_levels))
        except (StoreError, OSError) as exc:
            failure.append((pos, exc))
            return False
        return None

    end = walk_segment(buf, base, start=start, limit=readable, on_record=on_record, native=native)
    if failure:
        pos, exc = failure[0]
        return SegmentEnd(pos, None, str(exc), end.records - 1), end.records - 1, exc
    return end, end.records, None


#: records one compiled run parses at most
MAX_BATCH = 65536
_SMALL_BATCH = 256  # after a cut
_UNIT_END = struct.Struct(">qi")  # a consume-queue unit's offset and size


def delay_table(delay_levels: dict[int, int]) -> tuple[int, ...] | None:
    """The delay levels as the compiled parse takes them (ms of levels 1..N), or None when they are not 1..N."""
    if sorted(delay_levels) != list(range(1, len(delay_levels) + 1)):
        return None
    return tuple(delay_levels[level] for level in range(1, len(delay_levels) + 1))


class Dispatcher:
    """The consume queues and the index, fed with dispatched records (RocketMQ's ``dispatcherList``).

    ``checkpoint`` is set once the store has opened it (:meth:`rmqstore.store.MessageStore.load`);
    ``message_arriving_listener`` -- ``(topic, queue id, new max offset)``, called after each
    queue's new units -- wakes a broker's long-polling pulls (RocketMQ's MessageArrivingListener);
    ``tracer_of`` answers the store's tracer (:mod:`rmqstore.engine.put_trace`).
    """

    def __init__(self, root: str, config, index_service, *, read_only: bool = False,
                 tracer_of: Callable[[], Any] = lambda: NULL_PUT_TRACE):
        self.root = root
        self.config = config
        self.read_only = read_only
        self.index_service = index_service
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self._table_lock = threading.Lock()
        self.checkpoint = None
        self.message_arriving_listener: Callable[[str, int, int], None] | None = None
        self.tracer_of = tracer_of

    # -- the consume-queue table -----------------------------------------------------------
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queue_table.get(key)
        if cq is None:
            with self._table_lock:
                cq = self.consume_queue_table.get(key)
                if cq is None:
                    cq = ConsumeQueue(self.root, topic, queue_id, self.config.mapped_file_size_consume_queue,
                                      read_only=self.read_only, native=self.config.native)
                    self.consume_queue_table[key] = cq
        return cq

    def load_consume_queues(self) -> None:
        """Map every consume queue on disk (recovery recovers them: rmqstore.engine.recovery)."""
        for topic, qid in consume_queue_ids(self.root):
            if (topic, qid) not in self.consume_queue_table:
                self.find_consume_queue(topic, qid).load()

    def max_physic_offset(self) -> int:
        """The end of the furthest message any consume queue points at (-1: none)."""
        return max((cq.max_physic_offset for cq in self.consume_queue_table.values()), default=-1)

    def destroy_topic_queues(self, topic: str, forget_offsets: Callable[[str], None]) -> list[int]:
        """Forget ``topic``'s consume queues, then (``forget_offsets``) their next queue offsets, and
        delete their files and folder; the queue ids (see :meth:`rmqstore.store.MessageStore.destroy_topic_queues`,
        which pauses dispatch around it)."""
        with self._table_lock:
            keys = sorted(key for key in self.consume_queue_table if key[0] == topic)
            queues = [self.consume_queue_table.pop(key) for key in keys]
        forget_offsets(topic)
        for cq in queues:
            cq.delete_files()
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(consume_queue_dir(self.root, topic, 0)))
        return [queue_id for _, queue_id in keys]

    def shutdown(self, flush_index: bool) -> None:
        """Flush (a writable store) and unmap every consume queue, then the index."""
        for cq in list(self.consume_queue_table.values()):
            if not self.read_only:
                cq.flush(0)
            cq.shutdown()
        if flush_index:
            self.index_service.flush()
        self.index_service.shutdown()  # (flushes each writable index file)

    # -- dispatching ---------------------------------------------------------------------
    def _stored_until(self, store_timestamp: int | None) -> None:
        """The checkpoint's times after units up to a record stored at ``store_timestamp`` (None: no unit)."""
        if store_timestamp is not None and self.checkpoint is not None:
            if self.config.broker_role is BrokerRole.SLAVE:  # appends carry no store time
                self.checkpoint.physic_msg_timestamp = store_timestamp
            self.checkpoint.logics_msg_timestamp = store_timestamp

    def _arrived(self, topic: str, queue_id: int, next_offset: int) -> None:
        """A queue's new units: wake its long-polling pulls."""
        listener = self.message_arriving_listener
        if listener is not None:
            listener(topic, queue_id, next_offset)

    def dispatch(self, req: DispatchRequest) -> None:
        """Hand one record to the consume queue and the index (CommitLogDispatcher*): the pure path."""
        tr = self.tracer_of()
        if gets_queue_unit(req.sys_flag):
            cq = self.find_consume_queue(req.topic, req.queue_id)
            before = tr.queue_max(cq)
            stored = cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code,
                                                  req.consume_queue_offset)
            if not stored:
                log.error("[BUG] consume queue %s-%d could not take offset %d", req.topic, req.queue_id,
                          req.consume_queue_offset)
            self._stored_until(req.store_timestamp if stored else None)
            self._arrived(req.topic, req.queue_id, req.consume_queue_offset + 1)
            tr.dispatched(req, cq, before)
        else:
            tr.dispatch_skipped(req)
        if self.config.message_index_enable:
            self.index_service.build_index(req)
            tr.indexed(req)

    def dispatch_run(self, batch) -> int:
        """Write the consume-queue units and index entries of a compiled batch's first records; how many.

        The run is cut before the first record the bulk writes cannot take as :meth:`dispatch`
        would (see the module essay); what comes before it is written, nothing after it.
        """
        limit = batch.count
        plans = []
        table = self.consume_queue_table
        for topic, queue_id, first, units, records, run in batch.groups:
            cq = table.get((topic, queue_id))
            numbers = memoryview(records).cast("i")
            room = 0
            if cq is not None:
                offset, size = _UNIT_END.unpack_from(units, 0)
                room = cq.bulk_room(first, offset + size)
            take = min(room, run)
            if take < len(numbers):
                limit = min(limit, numbers[take])
            plans.append((cq, topic, queue_id, first, units, numbers))
        if limit and self.config.message_index_enable:
            limit = self.index_service.build_index_batch(batch, limit)
        if not limit:
            return 0
        for cq, topic, queue_id, first, units, numbers in plans:
            k = bisect_left(numbers, limit)
            if k:
                offset, size = _UNIT_END.unpack_from(units, (k - 1) * 20)
                cq.append_units(memoryview(units)[:k * 20], offset + size)
                self._arrived(topic, queue_id, first + k)
        self._stored_until(batch.cq_timestamp(limit))
        return limit


def _dispatch_one(buf, pos: int, dispatch, delay_levels) -> tuple[int, Exception | None]:
    """The pure path for the record at ``pos``: its size, and the error if the dispatchers refused it."""
    record = decode_record(buf, pos)
    try:
        dispatch(dispatch_request(record, delay_levels))
    except (StoreError, OSError) as exc:
        return record.total_size, exc
    return record.total_size, None


def reput_segment_native(cdispatch, dispatcher: Dispatcher, buf, base: int, start: int, readable: int,
                         delay_levels: dict[int, int], table: tuple[int, ...]) -> tuple[SegmentEnd, int, Exception | None]:
    """:func:`reput_segment` on the compiled path: runs of records in bulk (:meth:`Dispatcher.dispatch_run`),
    the pure path (:meth:`Dispatcher.dispatch`) where a run is cut."""
    pos = start
    count = 0
    with_keys = bool(dispatcher.config.message_index_enable)
    run = MAX_BATCH
    while True:
        batch = cdispatch.parse(buf, pos, readable, table, run, with_keys)
        done = dispatcher.dispatch_run(batch) if batch.count else 0
        count += done
        if done < batch.count:
            pos = batch.record_pos(done)  # the record the bulk writes left to the pure path
            # cuts come in clusters (a queue's first records, files rolling over together): parse
            # little past the next one rather than a whole run again, and grow back while none comes
            run = _SMALL_BATCH
        else:
            run = min(run * 4, MAX_BATCH)
            pos = batch.stop_pos
            if batch.stop == cdispatch.MORE:
                continue
            s = step(buf, pos, base, readable)
            if s.end is not None:
                return SegmentEnd(pos, s.end, s.reason, count, s), count, None
            # else a record the compiled parse leaves to the pure path (cdispatch.DEFER)
        record_size, failure = _dispatch_one(buf, pos, dispatcher.dispatch, delay_levels)
        if failure is not None:
            return SegmentEnd(pos, None, str(failure), count), count, failure
        count += 1
        pos += record_size


class ReputMessageService:
    """Follows the commitlog and hands every record to the dispatcher (RocketMQ's ReputMessageService).

    ``on_stop`` hears why dispatch stopped at a record (the store's ``make_not_writeable``).
    """

    name = "ReputMessageService"

    def __init__(self, commit_log, dispatcher: Dispatcher, *, on_stop: Callable[[str], None] | None = None,
                 interval_s: float = 0.001):
        self.commit_log = commit_log
        self.dispatcher = dispatcher
        self.on_stop = on_stop
        self.reput_from_offset = 0
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: why dispatch stopped (a record the consume queue or index could not take), or None
        self.failure: str | None = None
        #: the compiled dispatch (rmqstore._native._cdispatch), or None: the pure path
        self.native = native.module("_cdispatch", dispatcher.config.native)
        self._delay_table: tuple[int, ...] | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def shutdown(self) -> None:
        # let it catch up first, as RocketMQ waits up to 5 s for the reput to finish
        deadline = time.monotonic() + 5
        while self.behind() > 0 and time.monotonic() < deadline and self._thread is not None \
                and self.failure is None:
            time.sleep(0.005)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    @contextlib.contextmanager
    def paused(self):
        """No dispatch pass runs inside this block (a pass under way finishes first): the store destroys a
        topic's consume queues in one (:meth:`rmqstore.store.MessageStore.destroy_topic_queues`)."""
        with self._lock:
            yield

    def behind(self) -> int:
        return self.commit_log.get_max_offset() - self.reput_from_offset

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            try:
                self.do_reput()
            except Exception:
                log.exception("%s service has exception", self.name)

    def _stop_at(self, exc: Exception) -> None:
        self.failure = (f"dispatch stopped at commitlog offset {self.reput_from_offset} "
                        f"(reopen the store once there is room): {exc}")
        log.error("%s", self.failure)
        if self.on_stop is not None:
            self.on_stop(self.failure)

    def do_reput(self) -> int:
        """Dispatch everything between ``reput_from_offset`` and the readable end; count records."""
        with self._lock:
            if self.failure is not None:
                return 0  # stopped at a record that could not be dispatched (see the module essay)
            return self._do_reput()

    def _table(self, delay_levels: dict[int, int]) -> tuple[int, ...] | None:
        if self._delay_table is None:
            self._delay_table = delay_table(delay_levels)
        return self._delay_table

    def _do_reput(self) -> int:
        commit_log = self.commit_log
        dispatcher = self.dispatcher
        queue = commit_log.mapped_file_queue
        delay_levels = commit_log.delay_levels
        if self.reput_from_offset < commit_log.get_min_offset():
            self.reput_from_offset = commit_log.get_min_offset()
        count = 0
        while self.reput_from_offset < commit_log.get_max_offset():
            mf = queue.find_mapped_file_by_offset(self.reput_from_offset)
            if mf is None:
                break
            base = mf.file_from_offset
            if self.native is not None and not commit_log.tracer.active and self._table(delay_levels) is not None:
                end, done, failure = reput_segment_native(self.native, dispatcher, mf.mapped, base,
                                                          self.reput_from_offset - base, mf.read_position,
                                                          delay_levels, self._delay_table)
            else:
                # the pure dispatch walks in Python too when the store asks for the pure path or is traced
                end, done, failure = reput_segment(mf.mapped, base, self.reput_from_offset - base,
                                                   mf.read_position, dispatcher.dispatch, delay_levels,
                                                   dispatcher.config.native and not commit_log.tracer.active)
            count += done
            self.reput_from_offset = base + end.pos
            if failure is not None:
                self._stop_at(failure)
                return count
            if end.kind is End.BLANK or end.pos == mf.file_size:
                self.reput_from_offset = base + mf.file_size  # on into the next file
                continue
            if end.kind is not End.OUT_OF_BYTES:  # waiting for more bytes is normal; this is not
                log.error("[BUG] dispatch stopped at an undecodable record at %d: %s", base + end.pos, end.reason)
            break
        return count
