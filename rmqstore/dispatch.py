"""Dispatch: from commitlog records to consume-queue units and index entries.

The put path only appends to the commitlog.  Everything a consumer or a key lookup
needs is *derived* from it afterwards by :class:`ReputMessageService`, a thread that
follows the log a little behind the writers (``reput_from_offset``) and turns each record
into a :class:`DispatchRequest` -- the handful of values the consume queue and the index
need -- and hands it to the dispatchers.  Because everything derived can be derived
again, recovery only has to make the commitlog right and then re-dispatch.

Rules (RocketMQ's ``checkMessageAndReturnSize`` and the two dispatchers):

* tags code: Java ``hashCode`` of TAGS (0 without tags); on ``SCHEDULE_TOPIC_XXXX`` the
  delivery time instead: store timestamp + the delay of the DELAY level;
* prepared and rolled-back transaction records get no consume-queue unit; rolled-back
  ones get no index entries either;
* a blank record sends the reader to the next file, and so does a file read to its last
  byte; running out of readable bytes waits for more (on a slave a record can arrive in
  halves); any other end (:func:`rmqstore.walk.step`, lenient) stops the reader there.

:func:`dispatch_request` is pure (record in, request out), and so is the walk of one file
(:func:`reput_segment`); the service is the thin threaded layer around them.

The compiled path (``rmqstore._cdispatch``, chosen by :func:`rmqstore.native.module`)
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
goes through the pure path (:func:`dispatch_request` and ``store.do_dispatch``), and the
next run starts after it.  So a file that cannot be created fails at the same record as
in the pure path, and everything past it is untouched.  Where the compiled walk stops at
something that is not a record, :func:`rmqstore.walk.step` says what it is, in the pure
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
import struct
import threading
import time
from bisect import bisect_left

from . import native
from .config import BrokerRole
from .errors import StoreError
from .properties import DELAY, KEYS, TAGS, UNIQ_KEY, java_string_hash, parse_properties
from .record import decode_record
from .walk import End, SegmentEnd, step, walk_segment

__all__ = ["DispatchRequest", "dispatch_request", "ReputMessageService", "tags_code_of",
           "SCHEDULE_TOPIC", "reput_segment", "reput_segment_native", "dispatch_batch", "delay_table",
           "MAX_BATCH"]

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


def dispatch_batch(store, batch) -> int:
    """Write the consume-queue units and index entries of a compiled batch's first records; how many.

    The run is cut before the first record the bulk writes cannot take as the pure path
    would (see the module essay); what comes before it is written, nothing after it.
    """
    limit = batch.count
    plans = []
    table = store.consume_queue_table
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
    if limit and store.config.message_index_enable:
        limit = store.index_service.build_index_batch(batch, limit)
    if not limit:
        return 0
    listener = store.message_arriving_listener
    for cq, topic, queue_id, first, units, numbers in plans:
        k = bisect_left(numbers, limit)
        if k:
            offset, size = _UNIT_END.unpack_from(units, (k - 1) * 20)
            cq.append_units(memoryview(units)[:k * 20], offset + size)
            if listener is not None:
                listener(topic, queue_id, first + k)
    timestamp = batch.cq_timestamp(limit)
    if timestamp is not None and store.checkpoint is not None:
        if store.config.broker_role is BrokerRole.SLAVE:  # appends carry no store time
            store.checkpoint.physic_msg_timestamp = timestamp
        store.checkpoint.logics_msg_timestamp = timestamp
    return limit


def _dispatch_one(buf, pos: int, dispatch, delay_levels) -> tuple[int, Exception | None]:
    """The pure path for the record at ``pos``: its size, and the error if the dispatchers refused it."""
    record = decode_record(buf, pos)
    try:
        dispatch(dispatch_request(record, delay_levels))
    except (StoreError, OSError) as exc:
        return record.total_size, exc
    return record.total_size, None


def reput_segment_native(cdispatch, store, buf, base: int, start: int, readable: int, delay_levels: dict[int, int],
                         table: tuple[int, ...]) -> tuple[SegmentEnd, int, Exception | None]:
    """:func:`reput_segment` on the compiled path: runs of records in bulk, the pure path where a run is cut."""
    pos = start
    count = 0
    with_keys = bool(store.config.message_index_enable)
    run = MAX_BATCH
    while True:
        batch = cdispatch.parse(buf, pos, readable, table, run, with_keys)
        done = dispatch_batch(store, batch) if batch.count else 0
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
        record_size, failure = _dispatch_one(buf, pos, store.do_dispatch, delay_levels)
        if failure is not None:
            return SegmentEnd(pos, None, str(failure), count), count, failure
        count += 1
        pos += record_size


class ReputMessageService:
    """Follows the commitlog and dispatches every record (RocketMQ's ReputMessageService)."""

    name = "ReputMessageService"

    def __init__(self, store, interval_s: float = 0.001):
        self.store = store
        self.reput_from_offset = 0
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: why dispatch stopped (a record the consume queue or index could not take), or None
        self.failure: str | None = None
        #: the compiled dispatch (rmqstore._cdispatch), or None: the pure path
        self.native = native.module("_cdispatch", getattr(store.config, "native", True))
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
        return self.store.commit_log.get_max_offset() - self.reput_from_offset

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
        make_not_writeable = getattr(self.store, "make_not_writeable", None)
        if make_not_writeable is not None:
            make_not_writeable(self.failure)

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
        store = self.store
        commit_log = store.commit_log
        queue = commit_log.mapped_file_queue
        delay_levels = commit_log._delay_levels
        if self.reput_from_offset < commit_log.get_min_offset():
            self.reput_from_offset = commit_log.get_min_offset()
        count = 0
        while self.reput_from_offset < commit_log.get_max_offset():
            mf = queue.find_mapped_file_by_offset(self.reput_from_offset)
            if mf is None:
                break
            base = mf.file_from_offset
            if self.native is not None and commit_log.tracer is None and self._table(delay_levels) is not None:
                end, done, failure = reput_segment_native(self.native, store, mf.mapped, base,
                                                          self.reput_from_offset - base, mf.read_position,
                                                          delay_levels, self._delay_table)
            else:
                # the pure dispatch walks in Python too when the store asks for the pure path or is traced
                end, done, failure = reput_segment(mf.mapped, base, self.reput_from_offset - base,
                                                   mf.read_position, store.do_dispatch, delay_levels,
                                                   getattr(store.config, "native", True) and commit_log.tracer is None)
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
