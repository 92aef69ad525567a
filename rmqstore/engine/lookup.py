"""Lookups: the record at a commitlog offset, by message id, by key, and a queue offset by time.

Nothing here writes.  Every function takes a store (a started :class:`MessageStore` or one
opened with :func:`~rmqstore.store.open_store`) and reads the files it has mapped; a closed
store raises (:func:`check_open`) rather than answer "nothing found" from unmapped files.

**The record at an offset.**  Every "what is at commitlog offset N" in the project -- the
``msg`` command, the record view, :func:`look_message_by_offset`, a pull's
:func:`read_record` -- reaches the bytes one way: :func:`held_record_bytes` finds the mapped
file, checks the offset is inside its readable part and *holds* the file (a running store may
be deleting it) for as long as the caller decodes.  When nothing is readable it raises
:class:`NoRecordAt` saying why (outside every file, past the readable end, file closing), and
each caller says that in its own words.

**By commitlog offset** (:func:`look_message_by_offset`, RocketMQ's ``lookMessageByOffset``):
the record's 4-byte total size at the offset, then that many bytes; a blank, a record that says
it sits elsewhere, or one of another size than asked is no message.  **By message id**
(:func:`view_message_by_id`): an offset msgId *is* store host + port + commitlog offset, so it
decodes to an offset; we also check that the record there was stored by that host.  **By key**
(:func:`query_message`, ``queryMessage``): the index files map ``hash(topic#key)`` to commitlog
offsets (:meth:`IndexService.query_offset`); each offset is then looked up.  RocketMQ does not
check that the record really carries the key (two keys can share a hash); ``verify_keys=True``
does.  The keys a record is indexed under are :func:`record_keys`'s answer, the one place that
says so.  **By time** (:func:`get_offset_in_queue_by_time`, ``getOffsetInQueueByTime``): a
binary search over one consume-queue file, reading each probed record's store timestamp
(:func:`pickup_store_timestamp`).

A lookup never creates a consume queue (:func:`consume_queue_of`); the pull path
(:mod:`rmqstore.engine.reading`) shares these helpers and re-exports every public name here.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

from .consume_queue import CQ_STORE_UNIT_SIZE
from ..common.errors import CorruptRecordError, StoreError, StoreStateError
from ..format.layout import (CONSUME_QUEUE_UNIT, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, PHYSICAL_OFFSET_POSITION,
                             RECORD_HEAD, SYSFLAG_POSITION, message_fields_struct, store_timestamp_position)
from ..format.properties import KEY_SEPARATOR, KEYS, UNIQ_KEY, string_to_properties
from ..format.record import MessageRecord, decode_message_id, decode_record

__all__ = [
    "check_open", "consume_queue_of", "hold_range", "NoRecordAt", "held_record_bytes", "decode_record_at",
    "record_keys", "read_record", "read_record_bytes", "read_message_bytes", "QueryMessageResult", "look_message_by_offset",
    "view_message_by_id", "message_keys", "query_message", "pickup_store_timestamp",
    "get_offset_in_queue_by_time",
]

log = logging.getLogger("rmqstore.engine.reading")

_I32 = message_fields_struct("sys_flag")
_I64 = message_fields_struct("store_timestamp")
_SYSFLAG_POSITION = SYSFLAG_POSITION
_UNIT = CONSUME_QUEUE_UNIT.struct


def check_open(store) -> None:
    """Reads of a closed (or shut down) store raise: its files are unmapped, so 'nothing found'
    would be a wrong answer."""
    if getattr(store, "closed", False):
        raise StoreStateError(f"{store.root}: the store is closed; open it again to read")


def consume_queue_of(store, topic: str, queue_id: int):
    """The consume queue of topic/queue, or None -- never created by a lookup."""
    return store.consume_queue_table.get((topic, queue_id))


def hold_range(queue, offset: int, size: int):
    """``(mapped file, position)`` of ``[offset, offset+size)`` if readable now, the file held."""
    if offset < 0 or size < 0:
        return None
    mf = queue.find_mapped_file_by_offset(offset)
    if mf is None:
        return None
    pos = offset - mf.file_from_offset
    if pos + size > mf.read_position or not mf.hold():
        return None
    return mf, pos


class NoRecordAt(StoreError):
    """Commitlog ``offset`` has no readable byte: ``why`` is ``"outside"`` (no file holds it),
    ``"past_end"`` (beyond the readable part of its file) or ``"closing"`` (its file is unmapped);
    ``file_from_offset`` and ``readable`` describe that file when there is one."""

    def __init__(self, offset: int, why: str, file_from_offset: int | None = None, readable: int = 0):
        super().__init__(f"commitlog offset {offset}: {why}")
        self.offset, self.why, self.file_from_offset, self.readable = offset, why, file_from_offset, readable


@contextmanager
def held_record_bytes(store, offset: int):
    """``(buffer, position, readable)``: the mapped file holding commitlog ``offset``, held for the
    ``with`` block (nothing is copied), ``offset``'s position in it and how many of its bytes
    are readable.  :class:`NoRecordAt` when no byte is readable there.  The one way every
    "record at offset" look-up (msg, the record view, ``look_message_by_offset``) reaches
    the bytes; each says what is missing in its own words."""
    mf = store.commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
    if mf is None:
        raise NoRecordAt(offset, "outside")
    pos = offset - mf.file_from_offset
    readable = mf.read_position
    if pos >= readable:
        raise NoRecordAt(offset, "past_end", mf.file_from_offset, readable)
    if mf.mapped is None or not mf.hold():
        raise NoRecordAt(offset, "closing", mf.file_from_offset, readable)
    try:
        yield mf.mapped, pos, readable
    finally:
        mf.release()


def decode_record_at(store, offset: int, *, check_crc: bool = False):
    """The record (message or blank) that decodes at commitlog ``offset`` within the readable
    part of its file: :class:`NoRecordAt` when nothing is readable there,
    :class:`CorruptRecordError` when the bytes there are no record."""
    with held_record_bytes(store, offset) as (buf, pos, readable):
        return decode_record(buf, pos, check_crc=check_crc, limit=readable)


def record_keys(props) -> list[str]:
    """The keys a message is indexed under (its properties ``props``): UNIQ_KEY, then each KEYS
    token, each once."""
    keys = []
    uniq = props.get(UNIQ_KEY)
    if uniq:
        keys.append(uniq)
    keys.extend(k for k in (props.get(KEYS) or "").split(KEY_SEPARATOR) if k and k not in keys)
    return keys


def read_record(store, offset: int, size: int, *, check_crc: bool = False):
    """The record of ``size`` bytes at commitlog ``offset``.

    Returns None when those bytes are not readable (not written yet, file gone), and
    raises :class:`CorruptRecordError` when they are readable but not that record.
    """
    cl = store.commit_log
    held = hold_range(cl.mapped_file_queue, offset, size)
    if held is None:
        return None
    mf, pos = held
    try:
        rec = decode_record(mf.mapped, pos, check_crc=check_crc, limit=pos + size)
    finally:
        mf.release()
    if not isinstance(rec, MessageRecord):
        raise CorruptRecordError("a blank (END_OF_FILE) record, not a message", offset)
    if rec.total_size != size:
        raise CorruptRecordError(f"the record is {rec.total_size} bytes, {size} expected", offset)
    if rec.physical_offset != offset:
        raise CorruptRecordError(f"the record says it sits at {rec.physical_offset}", offset)
    return rec


_HEAD = RECORD_HEAD.struct
_PHYSICAL_OFFSET = message_fields_struct("physical_offset")
_MESSAGE_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


def read_record_bytes(store, offset: int, size: int) -> bytes | None:
    """The raw message record of ``size`` bytes at commitlog ``offset``, undecoded -- what a pull carries.

    Checked as much as a pull can afford, as :func:`read_record` would refuse them: its size field says
    ``size``, its magic code is a message's and it says it sits at ``offset``; :class:`CorruptRecordError`
    otherwise.  None when the bytes are not readable (not written yet, file gone)."""
    data = read_message_bytes(store, offset, size)
    if data is None:
        return None
    total, magic = _HEAD.unpack_from(data) if size >= _HEAD.size else (None, None)
    if magic not in _MESSAGE_MAGICS:
        raise CorruptRecordError("no message's magic code there", offset)
    if total != size:
        raise CorruptRecordError(f"the record is {total} bytes, {size} expected", offset)
    if size < PHYSICAL_OFFSET_POSITION + _PHYSICAL_OFFSET.size:
        raise CorruptRecordError(f"{size} bytes is shorter than a message's fixed fields", offset)
    at = _PHYSICAL_OFFSET.unpack_from(data, PHYSICAL_OFFSET_POSITION)[0]
    if at != offset:
        raise CorruptRecordError(f"the record says it sits at {at}", offset)
    return data


def read_message_bytes(store, offset: int, size: int) -> bytes | None:
    """The raw ``size`` bytes at commitlog ``offset`` (what a pull response carries), or None
    when they are not readable (not written yet, file gone)."""
    check_open(store)
    held = hold_range(store.commit_log.mapped_file_queue, offset, size)
    if held is None:
        return None
    mf, pos = held
    try:
        return bytes(mf.mapped[pos:pos + size])
    finally:
        mf.release()


@dataclass
class QueryMessageResult:
    """What a key lookup returns (RocketMQ's ``QueryMessageResult``), messages decoded."""

    messages: list = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffer_total_size: int = 0

    @property
    def phy_offsets(self) -> list[int]:
        return [m.physical_offset for m in self.messages]

    def __repr__(self) -> str:
        return (f"QueryMessageResult(messages={len(self.messages)}, offsets={self.phy_offsets}, "
                f"index_last_update_phyoffset={self.index_last_update_phyoffset})")


# -- by offset, id and key -------------------------------------------------------------------

def look_message_by_offset(store, phy_offset: int, size: int | None = None, *,
                           check_crc: bool = False) -> MessageRecord | None:
    """The record at commitlog offset ``phy_offset``, or None.

    The size is read from the record's first 4 bytes unless given.  None when nothing
    readable is there, or what is there is a blank or not a record (RocketMQ's decoder
    returns null for those as well).
    """
    check_open(store)
    try:
        rec = decode_record_at(store, phy_offset, check_crc=check_crc)
        if not isinstance(rec, MessageRecord):
            raise CorruptRecordError("a blank (END_OF_FILE) record, not a message", phy_offset)
        if size is not None and rec.total_size != size:
            raise CorruptRecordError(f"the record is {rec.total_size} bytes, {size} expected", phy_offset)
        if rec.physical_offset != phy_offset:
            raise CorruptRecordError(f"the record says it sits at {rec.physical_offset}", phy_offset)
        return rec
    except (NoRecordAt, CorruptRecordError) as exc:
        log.debug("no message at commitlog offset %d: %s", phy_offset, exc)
        return None


def view_message_by_id(store, msg_id: str, *, check_host: bool = True) -> MessageRecord | None:
    """The record an offset msgId names (store host + port + commitlog offset), or None.

    With ``check_host`` (default) the record must have been stored by the host the id
    names -- an id of another broker that happens to point at a record here is not ours.
    A malformed id raises :class:`~rmqstore.common.errors.LayoutError`.
    """
    check_open(store)
    host, offset = decode_message_id(msg_id)
    record = look_message_by_offset(store, offset)
    if record is None:
        return None
    if check_host and record.store_host != host:
        log.debug("msgId %s names store host %s, but the record at %d was stored by %s",
                  msg_id, host, offset, record.store_host)
        return None
    return record


def message_keys(record: MessageRecord) -> set[str]:
    """The keys a record is indexed under: UNIQ_KEY and every token of KEYS (:func:`record_keys`)."""
    return set(record_keys(string_to_properties(record.properties)))


def query_message(store, topic: str, key: str, max_count: int, begin: int, end: int, *,
                  verify_keys: bool = False) -> QueryMessageResult:
    """Messages of ``topic`` indexed under ``key`` and stored within ``[begin, end]`` (ms).

    As RocketMQ's ``queryMessage``: at most ``min(max_count, max_msgs_num_batch)`` offsets
    from the index (newest index files first), sorted by commitlog offset, each looked
    up.  RocketMQ does not check the record's topic and keys -- a different key with the
    same hash comes back too; ``verify_keys=True`` drops such records.  If nothing could
    be read, the search is repeated (three tries at most) with ``end`` moved to the
    store time of the first offset found.
    """
    check_open(store)
    result = QueryMessageResult()
    max_num = min(max_count, getattr(store.config, "max_msgs_num_batch", max_count))
    last_query_msg_time = end
    for _ in range(3):
        offsets, last_ts, last_phy = store.index_service.query_offset(topic, key, max_num, begin,
                                                                      last_query_msg_time)
        if not offsets:
            break
        offsets = sorted(offsets)
        result.index_last_update_phyoffset = last_phy
        result.index_last_update_timestamp = last_ts
        for m, offset in enumerate(offsets):
            record = look_message_by_offset(store, offset)
            if record is None:
                log.error("queryMessage %s#%s: no message at commitlog offset %d", topic, key, offset)
                continue
            if m == 0:
                last_query_msg_time = record.store_timestamp
            if verify_keys and (record.topic != topic or key not in message_keys(record)):
                log.warning("queryMessage hash duplicate, %s %s at %d", topic, key, offset)
                continue
            result.messages.append(record)
            result.buffer_total_size += record.total_size
        if result.buffer_total_size > 0 or last_query_msg_time < begin:
            break
    return result


# -- by time -------------------------------------------------------------------------------


def _java_div(a: int, b: int) -> int:
    """Java's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def pickup_store_timestamp(store, offset: int, size: int) -> int:
    """The store timestamp of the record of ``size`` bytes at ``offset``, -1 if unreadable."""
    cl = store.commit_log
    if offset < cl.get_min_offset():
        return -1
    held = hold_range(cl.mapped_file_queue, offset, size)
    if held is None:
        return -1
    mf, pos = held
    try:
        if size < _SYSFLAG_POSITION + 4:
            return -1
        sys_flag = _I32.unpack_from(mf.mapped, pos + _SYSFLAG_POSITION)[0]
        ts_pos = store_timestamp_position(sys_flag)
        if ts_pos + 8 > size:
            return -1
        return _I64.unpack_from(mf.mapped, pos + ts_pos)[0]
    finally:
        mf.release()


def _file_by_mtime(files, timestamp: int):
    for mf in files:
        try:
            mtime = os.stat(mf.file_name).st_mtime_ns // 1_000_000
        except OSError:
            continue
        if mtime >= timestamp:
            return mf
    return files[-1]


def _file_by_store_time(store, files, timestamp: int):
    for mf in files:
        last = mf.read_position - CQ_STORE_UNIT_SIZE
        if last < 0 or not mf.hold():
            continue
        try:
            phy, size, _ = _UNIT.unpack_from(mf.mapped, last)
        finally:
            mf.release()
        if pickup_store_timestamp(store, phy, size) >= timestamp:
            return mf
    return files[-1]


def get_offset_in_queue_by_time(store, topic: str, queue_id: int, timestamp: int, *,
                                file_by_mtime: bool = True) -> int:
    """The queue offset of the message stored closest to ``timestamp`` (RocketMQ's search).

    As RocketMQ, the consume-queue file searched is the first whose *modification time*
    is at or after ``timestamp`` (else the last), then a binary search on the store
    timestamps of the records its units point at: an exact match wins, else the nearer of
    the two neighbours.  File mtimes say little about a store that was copied or
    rebuilt; ``file_by_mtime=False`` picks the first file whose last message was stored at
    or after ``timestamp`` instead.  Returns 0 when nothing can be read.
    """
    check_open(store)
    cq = consume_queue_of(store, topic, queue_id)
    if cq is None:
        return 0
    files = list(cq.mapped_file_queue.mapped_files)
    if not files:
        return 0
    mf = _file_by_mtime(files, timestamp) if file_by_mtime else _file_by_store_time(store, files, timestamp)
    if mf is None or mf.read_position <= 0 or not mf.hold():
        return 0
    try:
        return _search_file(store, cq, mf, timestamp)
    finally:
        mf.release()


def _search_file(store, cq, mf, timestamp: int) -> int:
    unit = CQ_STORE_UNIT_SIZE
    base = mf.file_from_offset
    low = cq.min_logic_offset - base if cq.min_logic_offset > base else 0
    high = mf.read_position - unit
    target = left = right = -1
    left_value = right_value = -1
    min_phy = store.commit_log.get_min_offset()
    buf = mf.mapped
    while high >= low:
        mid = (low + high) // (2 * unit) * unit
        phy, size, _ = _UNIT.unpack_from(buf, mid)
        if phy < min_phy:
            low = mid + unit
            left = mid
            continue
        store_time = pickup_store_timestamp(store, phy, size)
        if store_time < 0:
            return 0
        if store_time == timestamp:
            target = mid
            break
        if store_time > timestamp:
            high = mid - unit
            right, right_value = mid, store_time
        else:
            low = mid + unit
            left, left_value = mid, store_time
    if target != -1:
        pos = target
    elif left_value == -1:
        pos = right
    elif right_value == -1:
        pos = left
    else:
        pos = right if abs(timestamp - left_value) > abs(timestamp - right_value) else left
    return _java_div(base + pos, unit)
