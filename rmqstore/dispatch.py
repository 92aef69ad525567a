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

A record the dispatchers cannot take (a consume-queue or index file the disk has no room
for) stops the service *at that record*: the store becomes not writeable (RocketMQ's
logics-queue / index-file error flags), the thread stays alive but idle, and nothing is
skipped -- the abort file stays, so the next start recovers abnormally and dispatches the
record again (RocketMQ's reput moves on past it and the queue never gets the unit).
"""

from __future__ import annotations

import logging
import threading
import time

from .errors import StoreError
from .properties import DELAY, KEYS, TAGS, UNIQ_KEY, java_string_hash, parse_properties
from .record import decode_record
from .sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from .walk import End, SegmentEnd, walk_segment

__all__ = ["DispatchRequest", "dispatch_request", "ReputMessageService", "tags_code_of",
           "SCHEDULE_TOPIC", "reput_segment"]

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


def builds_consume_queue(req: DispatchRequest) -> bool:
    return req.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def reput_segment(buf, base: int, start: int, readable: int, dispatch,
                  delay_levels: dict[int, int]) -> tuple[SegmentEnd, int, Exception | None]:
    """Dispatch the records of one file (first byte at ``base``) from ``start`` up to ``readable``.

    Returns where and why the walk stopped, how many records were dispatched, and the
    error of the record the dispatchers could not take (the walk stops *at* it) or None.
    """
    failure: list = []

    def on_record(pos, _s):
        try:
            dispatch(dispatch_request(decode_record(buf, pos), delay_levels))
        except (StoreError, OSError) as exc:
            failure.append((pos, exc))
            return False
        return None

    end = walk_segment(buf, base, start=start, limit=readable, on_record=on_record)
    if failure:
        pos, exc = failure[0]
        return SegmentEnd(pos, None, str(exc), end.records - 1), end.records - 1, exc
    return end, end.records, None


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
            end, done, failure = reput_segment(mf.mapped, base, self.reput_from_offset - base, mf.read_position,
                                               store.do_dispatch, delay_levels)
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
