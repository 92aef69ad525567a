"""CommitLog: the put path -- one lock, one append position, many writers.

Every message of every topic is appended to one log.  The only serialised section is
short: under the put lock the store (1) takes the store timestamp, (2) finds the last
mapped file or gets a new one, (3) runs ``do_append``, which decides the queue offset
and the physical offset and copies the pre-encoded record into the file.  Everything
that can happen outside the lock does: the body CRC, the delay-level rewrite, the
encoding of the record (with placeholders for the three values the lock decides:
:mod:`rmqstore.format.message_encoder`), and afterwards the flush request.

END_OF_FILE.  A record is written only if it leaves at least 8 bytes behind it
(``msgLen + 8 <= remaining``); otherwise the rest of the file becomes one blank record
(``maxBlank`` + BLANK_MAGIC_CODE) and the put is retried once in a fresh file.  That is
why a file can end in an 8-byte blank, and why no record ever spans two files.

Where RocketMQ 4.9.8 goes wrong we do not copy it (see :data:`DIFFERENCES`): a record
that cannot fit in any file is refused instead of being reported PUT_OK and lost, a
topic whose UTF-8 form exceeds 127 bytes is refused instead of writing an unreadable
record, the bytes after a blank header are zeroed instead of leaking stale buffer
contents, and a full disk is an answer, not a SIGBUS.

A full disk.  Every file is reserved before the mapping writes to it
(:func:`rmqstore.files.file_space.reserve_space`), so the put that needs a file the disk has
no room for answers CREATE_MAPEDFILE_FAILED naming the disk (``MappedFileQueue.create_error``),
and the next put tries again: once space returns, puts go on.  A flush or commit the disk
refuses makes the store not writeable through ``on_io_error`` (:mod:`rmqstore.engine.flush`).

The compiled put.  :mod:`rmqstore.engine.native_put` runs the common case of this whole path --
encode, lock, file, blank and retry, offsets, results -- in one C call
(``rmqstore/_native/cput.c``) under the same put lock, which it only tries: a Python writer
inside the lock (a traced put, a replay, a slave's ``append_data``, a blank of a replay)
sends the put here instead.  A new file comes from :meth:`CommitLog.next_file_for_put`.  It
writes a record's bytes from byte 8 on first and its size and magic last, in one store, so
a kill -9 never leaves a half record whose head claims it whole.

Replay.  A :class:`~rmqstore.format.message.Message` with ``store_timestamp`` set is a stored
record being written again (``rmqstore load``, which goes through
``MessageStore.replay_message``; ``put_message`` refuses such a message): it keeps its
topic, properties, store timestamp and (if given) body CRC, and gets no delay rewrite.  A
recorded queue offset is not written as given but checked, under the put lock, to be the
one the store gives the record anyway (the queue's next one; 0 for a prepared or
rolled-back record) -- otherwise MESSAGE_ILLEGAL -- so a copy's consume queues count
exactly as the original's.  RocketMQ's own put path ignores both values and always
decides them (``DefaultAppendMessageCallback`` takes the queue offset from the topic-queue
table, ``putMessage`` the store timestamp from the clock).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ..format.layout import BLANK_MAGIC_CODE, BLANK_RECORD, END_FILE_MIN_BLANK_LENGTH, QUEUE_OFFSET_POSITION, \
    message_fields_struct
from ..files.mapped_file_queue import MappedFileQueue
from ..format.message import Message, MessageBatch
from ..format.message_encoder import EncodedBatch, EncodedMessage, MessageEncoder
from ..format.properties import DELAY, REAL_QID, REAL_TOPIC, WAIT, string_to_properties, properties_to_string
from ..format.record import Address, socket_address
from .put_trace import NULL_PUT_TRACE, NullPutTrace
from ..format.status import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus
from ..format.sysflag import TRANSACTION_NOT_TYPE, gets_queue_unit, transaction_value

__all__ = ["CommitLog", "EncodedMessage", "EncodedBatch", "PutMessageSpinLock", "DIFFERENCES",
           "SCHEDULE_TOPIC", "MessageEncoder", "wall_clock_ms"]

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

#: where our writer deliberately differs from Apache RocketMQ 4.9.8
DIFFERENCES = {
    "oversize": "A record larger than a whole commitlog file (msgLen + 8 > file size) is refused with "
                "MESSAGE_ILLEGAL. RocketMQ reports PUT_OK, stores nothing and turns the next file into "
                "one blank record.",
    "utf8_topic": "A topic whose UTF-8 form exceeds 127 bytes is refused with MESSAGE_ILLEGAL. RocketMQ "
                  "counts characters, writes the byte count into one signed byte and so writes an "
                  "unreadable record.",
    "blank_tail": "The bytes after a blank record's 8-byte header are zeroed. With the transient store "
                  "pool RocketMQ commits stale bytes of an earlier file there.",
    "topic_chars": "Topics are checked against RocketMQ's ^[%|a-zA-Z0-9_-]+$ in the store; RocketMQ "
                   "checks them only in the broker and client.",
    "decided_fields": "A put that gives a store timestamp, queue offset or body CRC is refused with "
                      "MESSAGE_ILLEGAL; RocketMQ's put path silently overwrites them. Only a replay "
                      "(MessageStore.replay_message, rmqstore load) keeps recorded values, and a recorded "
                      "queue offset must be the one the store would give.",
    "disk_full": "Commitlog and consume-queue files reserve their blocks when created (posix_fallocate), "
                 "index files page by page before first use, so a full disk is an answer -- "
                 "CREATE_MAPEDFILE_FAILED naming the disk, then SERVICE_NOT_AVAILABLE once a flush, commit "
                 "or dispatch failed -- never a SIGBUS, and no put is acknowledged after such a failure. "
                 "RocketMQ maps sparse files and dies of SIGBUS on a full disk; with the transient store "
                 "pool its commit thread dies while puts go on answering PUT_OK, and those messages are "
                 "lost. A record that dispatch cannot take stops dispatch (to resume at the next start) "
                 "instead of being skipped.",
    "ha_first_report": "A slave's first HA report beyond the master's max offset (or negative) closes the "
                       "connection. RocketMQ checks only later reports: the first one raises "
                       "push2SlaveMaxOffset, and SYNC_MASTER puts answer PUT_OK that no slave holds.",
    "ha_replica_deadline": "A SYNC_MASTER put waits for its slave at most sync_flush_timeout from the put. "
                           "RocketMQ's GroupTransferService starts each queued request's wait when it reaches "
                           "it, so with a dead slave the n-th queued put waits up to n timeouts (UNKNOWN_ERROR "
                           "after 10 s).",
    "ha_report_on_connect": "Our slave reports its max offset as soon as it connects; RocketMQ's first report "
                            "comes haSendHeartbeatInterval (5 s) later. The master side accepts either.",
}

_QO_PHY = message_fields_struct("queue_offset", "physical_offset")  # patched together inside the put lock
_I64 = message_fields_struct("store_timestamp")
_BLANK = BLANK_RECORD.struct
_PUT_OK = AppendMessageStatus.PUT_OK


def wall_clock_ms() -> int:
    """The store's default clock: milliseconds since the epoch (the compiled put reads the same clock itself)."""
    return time.time_ns() // 1_000_000


class PutMessageSpinLock:
    """RocketMQ's spin put lock: try, and yield the processor while another writer holds it."""

    def __init__(self):
        self._lock = threading.Lock()

    @property
    def raw_lock(self):
        """The lock underneath, which the compiled put tries without blocking (rmqstore.engine.native_put)."""
        return self._lock

    def acquire(self):
        lock = self._lock
        while not lock.acquire(False):
            time.sleep(0)
        return True

    def release(self):
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self._lock.release()


def _create_failed(what: str, queue) -> str:
    """The message of CREATE_MAPEDFILE_FAILED: what could not be created, and why (the disk)."""
    why = queue.create_error
    return f"could not create {what}: {why}" if why else f"could not create {what}"


def _zero_fill(buf, start: int, end: int) -> None:
    if end > start:
        buf[start:end] = bytes(end - start)


class DefaultAppendMessageCallback:
    """``do_append``: runs under the put lock, writes one record (or batch, or blank)."""

    def __init__(self, commit_log: "CommitLog"):
        self.commit_log = commit_log

    def next_queue_offset(self, enc: EncodedMessage) -> int:
        """The queue offset the store gives ``enc`` now (under the put lock): its queue's next one
        from the topic-queue table, or 0 for a prepared/rolled-back record (no consume queue holds it)."""
        if not enc.gets_unit:
            return 0
        return self.commit_log.topic_queue_table.get(enc.topic_queue_key, 0)

    def do_append(self, file_from_offset: int, buf, pos: int, max_blank: int, enc, ctx=None):
        if isinstance(enc, EncodedBatch):
            return self._append_batch(file_from_offset, buf, pos, max_blank, enc)
        cl = self.commit_log
        wrote_offset = file_from_offset + pos
        store_ts = cl.current_store_timestamp
        msg_len = enc.length
        if msg_len + END_FILE_MIN_BLANK_LENGTH > max_blank:
            return self._blank(buf, pos, max_blank, wrote_offset, store_ts)
        # always the store's own number: a replayed record's recorded one was checked equal to it
        queue_offset = self.next_queue_offset(enc)
        # the record is whole before it reaches the file (one copy): patched in the file, field by
        # field, a kill between two fields left a record recovery takes for valid with a store time of 0
        enc.place(queue_offset, wrote_offset, store_ts)
        buf[pos:pos + msg_len] = enc.data
        if enc.gets_unit:
            cl.topic_queue_table[enc.topic_queue_key] = queue_offset + 1
        return AppendMessageResult(_PUT_OK, wrote_offset, msg_len, None, store_ts, queue_offset, 1,
                                   store_host=enc.store_host)

    def _blank(self, buf, pos, max_blank, wrote_offset, store_ts):
        _BLANK.pack_into(buf, pos, max_blank, BLANK_MAGIC_CODE)
        _zero_fill(buf, pos + 8, pos + max_blank)
        return AppendMessageResult(AppendMessageStatus.END_OF_FILE, wrote_offset, max_blank, "",
                                   store_ts, 0, 0)

    def _append_batch(self, file_from_offset, buf, pos, max_blank, enc: EncodedBatch):
        cl = self.commit_log
        wrote_offset = file_from_offset + pos
        store_ts = cl.current_store_timestamp
        if enc.length + END_FILE_MIN_BLANK_LENGTH > max_blank:
            return self._blank(buf, pos, max_blank, wrote_offset, store_ts)
        key = enc.topic_queue_key
        table = cl.topic_queue_table
        begin_queue_offset = queue_offset = table.get(key, 0)
        data = enc.data
        ts_pos = enc.store_ts_pos
        rel = 0
        offsets = []
        for length in enc.lengths:
            phys = wrote_offset + rel
            _QO_PHY.pack_into(data, rel + QUEUE_OFFSET_POSITION, queue_offset, phys)
            _I64.pack_into(data, rel + ts_pos, store_ts)
            offsets.append(phys)
            queue_offset += 1
            rel += length
        buf[pos:pos + enc.length] = data
        table[key] = queue_offset
        return AppendMessageResult(_PUT_OK, wrote_offset, enc.length, None, store_ts, begin_queue_offset,
                                   len(enc.lengths), store_host=enc.store_host, offsets=offsets)


class CommitLog:
    """The commitlog of one store (RocketMQ's ``CommitLog``)."""

    def __init__(self, store_path: str, config, *, clock=None, allocate_service=None,
                 transient_store_pool=None, read_only: bool = False):
        self.config = config
        self.clock = clock or wall_clock_ms
        self.mapped_file_queue = MappedFileQueue(store_path, config.mapped_file_size_commit_log,
                                                 allocate_service, read_only=read_only,
                                                 transient_store_pool=transient_store_pool)
        self.topic_queue_table: dict[tuple[str, int], int] = {}  # (topic, queue id) -> next queue offset
        self.put_message_lock = (threading.RLock() if config.use_reentrant_lock_when_put_message
                                 else PutMessageSpinLock())
        self.encoder = MessageEncoder(config.max_message_size, Address.parse(config.store_host), socket_address)
        self.append_callback = DefaultAppendMessageCallback(self)
        self.current_store_timestamp = 0
        self.begin_time_in_lock = 0
        #: delay level -> ms (``messageDelayLevel``): the delay rewrite's, and dispatch's tags codes
        self.delay_levels = config.delay_level_table()
        self.max_delay_level = max(self.delay_levels) if self.delay_levels else 0
        #: the engine's tracer (:mod:`rmqstore.engine.put_trace`): every stage boundary calls one of its hooks
        self.tracer: NullPutTrace = NULL_PUT_TRACE
        #: called with a reason when a flush or commit service fails (the store stops taking puts)
        self.on_io_error: Callable[[str], None] | None = None

    # -- lifecycle -----------------------------------------------------------------
    def load(self) -> bool:
        return self.mapped_file_queue.load()

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown()

    # -- offsets -------------------------------------------------------------------
    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def get_min_offset(self) -> int:
        return self.mapped_file_queue.get_min_offset()

    def forget_topic_queues(self, topic: str) -> None:
        """Forget the next queue offsets of ``topic``'s queues (a deleted topic's), under the put lock."""
        with self.put_message_lock:
            for key in [key for key in self.topic_queue_table if key[0] == topic]:
                del self.topic_queue_table[key]

    def roll_next_file(self, offset: int) -> int:
        size = self.config.mapped_file_size_commit_log
        return offset + size - offset % size

    # -- the put path --------------------------------------------------------------
    def _prepare(self, msg: Message):
        """Delay rewrite (not for replayed records); returns topic, queue id, properties."""
        topic, queue_id, props = msg.topic, msg.queue_id, msg.properties
        if msg.store_timestamp is None:
            level = msg.delay_time_level
            if level > 0 and gets_queue_unit(msg.sys_flag):
                pmap = string_to_properties(props)
                if WAIT not in pmap and msg.wait_in_map is not None:  # the map's WAIT, out of the text
                    pmap[WAIT] = msg.wait_in_map
                if level > self.max_delay_level:
                    level = self.max_delay_level
                    pmap[DELAY] = str(level)
                pmap[REAL_TOPIC] = topic
                pmap[REAL_QID] = str(queue_id)
                props = properties_to_string(pmap)
                topic, queue_id = SCHEDULE_TOPIC, level - 1
        return topic, queue_id, props

    def destination(self, item: Message | MessageBatch) -> tuple[str, int]:
        """The topic and queue a put stores ``item`` in: a delayed message's schedule queue, else its own
        (what RocketMQ's ``msg.getTopic()`` / ``getQueueId()`` say after the put; a batch has no delay)."""
        if isinstance(item, MessageBatch):
            return item.topic, item.queue_id
        topic, queue_id, _ = self._prepare(item)
        return topic, queue_id

    def encode(self, msg: Message) -> EncodedMessage | PutMessageResult:
        topic, queue_id, props = self._prepare(msg)
        return self.encoder.encode(msg, topic, queue_id, props, msg.sys_flag)

    def put_message(self, msg: Message) -> PutMessageResult:
        """Append one message; the result says where (flush/replication not yet awaited)."""
        enc = self.encode(msg)
        self.tracer.encoded(msg, enc)
        if isinstance(enc, PutMessageResult):
            return enc
        return self.append_encoded(enc)

    def put_messages(self, batch: MessageBatch) -> PutMessageResult:
        if transaction_value(batch.sys_flag) != TRANSACTION_NOT_TYPE:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    message="a batch cannot carry a transaction type")
        if batch.delay_time_level > 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    message="a batch cannot carry a delay level")
        enc = self.encoder.encode_batch(batch)
        if isinstance(enc, PutMessageResult):
            return enc
        return self.append_encoded(enc)

    def append_encoded(self, enc) -> PutMessageResult:  # noqa: C901 -- the whole put under one lock
        if enc.length + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                f"record of {enc.length} bytes can never fit in a commitlog file of "
                f"{self.config.mapped_file_size_commit_log} bytes (8 bytes must stay free for a blank)"))
        queue = self.mapped_file_queue
        callback = self.append_callback
        lock = self.put_message_lock
        tr = self.tracer
        lock.acquire()
        try:
            if enc.queue_offset is not None:  # a replayed record's (a batch has none)
                refused = self._check_recorded_queue_offset(enc)
                if refused is not None:
                    tr.lock_acquired(lock)  # (else the file's boundary below says it, one hook for both)
                    return refused
            mf = queue.get_last_mapped_file()
            begin = self.clock()
            self.begin_time_in_lock = begin
            store_ts = enc.store_timestamp if enc.store_timestamp is not None else begin  # (recorded: a replay's)
            self.current_store_timestamp = store_ts
            if mf is None or mf.is_full():
                mf = queue.get_last_mapped_file(0)
                before = tr.new_file(queue, mf, lock)
            else:
                before = tr.file_found(mf, lock)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED,
                                        message=_create_failed("a commitlog file", queue))
            result = mf.append_message(enc, callback)
            if result.status is AppendMessageStatus.END_OF_FILE:
                tr.blank(mf, result, before)
                mf = queue.get_last_mapped_file(0)
                before = tr.new_file(queue, mf, None)  # (the lock held since)
                if mf is None:
                    return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, result,
                                            _create_failed("the next commitlog file", queue))
                result = mf.append_message(enc, callback)
            tr.appended(mf, result, before)
        finally:
            self.begin_time_in_lock = 0  # also on the early returns (RocketMQ resets it there too)
            lock.release()
            tr.lock_released()
        if result.status is not AppendMessageStatus.PUT_OK:
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, result,
                                    f"append ended with {result.status.name}")
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def next_file_for_put(self, blank_result: AppendMessageResult | None = None):
        """The compiled put's new file (under its put lock): the file to append to, or the
        CREATE_MAPEDFILE_FAILED answer when none can be made (after ``blank_result``, the next one)."""
        queue = self.mapped_file_queue
        mf = queue.get_last_mapped_file(0)
        if mf is not None:
            return mf
        what = "the next commitlog file" if blank_result is not None else "a commitlog file"
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, blank_result, _create_failed(what, queue))

    def _check_recorded_queue_offset(self, enc: EncodedMessage) -> PutMessageResult | None:
        """A replayed record's queue offset must be the one the store gives it now (under the lock)."""
        expected = self.append_callback.next_queue_offset(enc)
        if enc.queue_offset == expected:
            return None
        topic, queue_id = enc.topic_queue_key
        if not enc.gets_unit:
            why = "a prepared or rolled-back record is stored with queue offset 0"
        else:
            why = (f"the next queue offset of {topic}-{queue_id} is {expected} (a replay writes each queue's "
                   f"records in order, without gaps)")
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
            f"recorded queue_offset {enc.queue_offset} does not follow: {why}"))

    def append_blank_at_current_position(self) -> AppendMessageResult | None:
        """Fill the rest of the current file with a blank record (replay of a recorded blank)."""
        with self.put_message_lock:
            mf = self.mapped_file_queue.get_last_mapped_file()
            if mf is None or mf.is_full():
                mf = self.mapped_file_queue.get_last_mapped_file(0)
            if mf is None:
                return None
            pos = mf.wrote_position
            buf = mf.write_buffer if mf.write_buffer is not None else mf.mapped
            result = self.append_callback._blank(buf, pos, mf.file_size - pos, mf.file_from_offset + pos,
                                                 self.current_store_timestamp)
            mf.wrote_position = mf.file_size
            return result

    # -- replication (rmqstore.engine.ha) --------------------------------------------------------
    def get_data(self, offset: int):
        """Readable bytes from ``offset`` to the end of its file, held (``getData``); or None.

        Unlike RocketMQ's ``getData(offset, offset == 0)`` an offset before the first file
        answers None, never the first file's bytes under a wrong offset.
        """
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.config.mapped_file_size_commit_log)

    def append_data(self, start_offset: int, data) -> bool:
        """A slave's append of replicated bytes (``appendData``): exactly at the end of the log.

        The file that holds ``start_offset`` is created if the log ends at a file boundary
        (or is empty); bytes that would not start at the end, or not fit the file, are
        refused (False) and nothing is written.
        """
        with self.put_message_lock:
            queue = self.mapped_file_queue
            mf = queue.get_last_mapped_file(start_offset)
            if mf is None:
                log.error("appendData: no commitlog file for offset %d", start_offset)
                return False
            end = mf.file_from_offset + mf.wrote_position
            if end != start_offset:
                log.error("appendData: %d bytes offered at %d, but the log ends at %d", len(data), start_offset, end)
                return False
            return mf.append_bytes(data)

    def is_mapped_files_empty(self) -> bool:
        return not self.mapped_file_queue.mapped_files
