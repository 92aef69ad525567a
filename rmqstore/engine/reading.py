"""The read path: how a consumer, an admin tool or a key lookup finds a message.

Nothing here writes.  Every function takes a store (a started :class:`MessageStore` or
one opened with :func:`~rmqstore.store.open_store`) and reads the files it has mapped.

**Pull by queue offset** (:func:`get_message`, RocketMQ's ``getMessage``).  A consumer
knows a topic, a queue id and the number of the next message it wants -- its *queue
offset*.  It never scans the commitlog:

1. queue offset *n* -> byte ``n * 20`` of the consume queue ``consumequeue/<topic>/<queueId>/``
   (which file: ``n * 20 // file size``), one 20-byte *unit*:
   commitlog offset (8), record size (4), tags hash code (8);
2. the tags code lets a filter drop the message without touching the commitlog;
3. commitlog offset -> commitlog file (``offset // segment size``) and position in it
   (``offset % segment size``); ``size`` bytes there are the record, decoded field by field.

One call reads units from one consume-queue file at most, and stops early when the batch
is full (``max_count`` messages, or RocketMQ's transfer limits: 32 messages / 256 KiB when
the data is likely in memory, 8 / 64 KiB when not).  The answer always says where to
continue (``next_begin_offset``) and, when the offset asked for was wrong, what to ask for
instead -- the rules of RocketMQ's ``getMessage`` and ``nextOffsetCorrection`` (a master
corrects the offset; a slave keeps it unless ``offset_check_in_slave``):

==========================  ===========================================  ==================
offset asked                status                                       next begin offset
==========================  ===========================================  ==================
queue has no units          NO_MESSAGE_IN_QUEUE                          0
``< min``                   OFFSET_TOO_SMALL                             min
``== max``                  OFFSET_OVERFLOW_ONE                          offset (wait here)
``> max``                   OFFSET_OVERFLOW_BADLY                        max
unit file missing           OFFSET_FOUND_NULL                            start of next file
in range                    FOUND / NO_MATCHED_MESSAGE /                 offset + units read
                            MESSAGE_WAS_REMOVING
no such queue               NO_MATCHED_LOGIC_QUEUE                       0
==========================  ===========================================  ==================

Prepared and rolled-back transaction records never reach a consume queue (dispatch does
not give them a unit), so a pull can never return them.

The lookups -- the record at a commitlog offset, by message id, by key, a queue offset by
time -- are :mod:`rmqstore.engine.lookup`'s (re-exported here, so ``rmqstore.engine.reading`` stays the one
import for the whole read path); a pull reads its records through the same
:func:`~rmqstore.engine.lookup.read_record`.

Where we differ from RocketMQ 4.9.8 (see :data:`DIFFERENCES`): a lookup never creates a
consume queue, so an unknown topic/queue answers NO_MATCHED_LOGIC_QUEUE; a unit that
points at bytes that are not its record is skipped and logged instead of being handed on.
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

from ..common.config import BrokerRole
from .consume_queue import CQ_STORE_UNIT_SIZE, iter_units
from ..common.errors import CorruptRecordError, StoreStateError
from .lookup import (NoRecordAt, QueryMessageResult, check_open, consume_queue_of, decode_record_at,
                     get_offset_in_queue_by_time, held_record_bytes, look_message_by_offset, message_keys,
                     pickup_store_timestamp, query_message, read_message_bytes, read_record, read_record_bytes, record_keys,
                     view_message_by_id)
from ..format.properties import TAGS, java_string_hash, string_to_properties
from ..format.record import MessageRecord

__all__ = [
    "GetMessageStatus", "GetMessageResult", "QueryMessageResult", "ConsumeQueueUnit", "TransferLimits",
    "TagFilter", "DIFFERENCES",
    "get_message", "look_message_by_offset", "view_message_by_id", "query_message",
    "get_max_offset_in_queue", "get_min_offset_in_queue", "get_commit_log_offset_in_queue",
    "get_offset_in_queue_by_time", "pickup_store_timestamp", "message_keys", "check_open", "read_message_bytes",
    "record_keys", "NoRecordAt", "held_record_bytes", "decode_record_at",
]

log = logging.getLogger(__name__)

_MAX_FILTER_BYTES = 16000  # getMessage reads at most max(16000, maxMsgNums * 20) bytes of units
_EXT_ADDR_MAX = -2**31 - 1  # ConsumeQueueExt.MAX_ADDRESS: tags codes at or below it are ext addresses

#: where this read path deliberately differs from RocketMQ 4.9.8
DIFFERENCES = {
    "unknown_queue": "A lookup never creates a consume queue. RocketMQ's findConsumeQueue creates an empty "
                     "one on every lookup, so for an unknown topic/queue it answers NO_MESSAGE_IN_QUEUE (and "
                     "NO_MATCHED_LOGIC_QUEUE never happens); we answer NO_MATCHED_LOGIC_QUEUE. Offsets are "
                     "the same either way (min 0, max 0, next 0), and the broker handles both alike.",
    "bad_unit": "A consume-queue unit whose bytes do not decode as the record it points at (wrong offset, "
                "wrong size, garbage) is skipped and logged; RocketMQ hands the bytes to the consumer.",
    "offset_zero": "Reading commitlog offset 0 when the first file does not start at 0 finds nothing; "
                   "RocketMQ falls back to the first file and reads its first record.",
    "shut_down": "get_message on a writable store that is shut down (or not started) raises "
                 "StoreStateError; RocketMQ returns null.",
}


class GetMessageStatus(enum.Enum):
    """RocketMQ's ``GetMessageStatus`` (4.9.8: no OFFSET_RESET yet)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class ConsumeQueueUnit(NamedTuple):
    """One consume-queue unit, with the queue offset it sits at."""

    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int


@dataclass
class GetMessageResult:
    """What a pull returns (RocketMQ's ``GetMessageResult``), messages decoded.

    ``units[i]`` is the consume-queue unit ``messages[i]`` was found through.
    """

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int = 0
    max_offset: int = 0
    messages: list = field(default_factory=list)
    units: list = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    #: a ``raw`` pull's records as stored, undecoded (RocketMQ's messageBufferList); ``messages`` stays empty
    buffers: list = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.units)

    @property
    def found(self) -> bool:
        return self.status is GetMessageStatus.FOUND

    def _add(self, record: MessageRecord | bytes, unit: ConsumeQueueUnit) -> None:
        (self.buffers if isinstance(record, bytes) else self.messages).append(record)
        self.units.append(unit)
        self.buffer_total_size += unit.size

    def __repr__(self) -> str:
        return (f"GetMessageResult(status={self.status.name}, messages={len(self.messages)}, "
                f"next_begin_offset={self.next_begin_offset}, min_offset={self.min_offset}, "
                f"max_offset={self.max_offset}, buffer_total_size={self.buffer_total_size})")


@dataclass(frozen=True)
class TransferLimits:
    """How much one pull may return (``MessageStoreConfig`` maxTransfer*; RocketMQ's defaults).

    Data within ``access_message_in_memory_max_ratio`` percent of physical memory from
    the end of the commitlog counts as "in memory" and gets the larger limits.
    """

    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40

    @classmethod
    def of(cls, config) -> "TransferLimits":
        """The limits a store configuration names, RocketMQ's defaults for the rest."""
        base = cls()
        return cls(**{name: getattr(config, name, getattr(base, name)) for name in cls.__dataclass_fields__})


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


_TOTAL_PHYSICAL_MEMORY = _total_physical_memory()


class TagFilter:
    """Filter by tags as a RocketMQ TAG subscription does (``"*"`` or ``"a || b"``).

    The consume-queue stage compares tag hash codes (cheap, may let a hash collision
    through, as RocketMQ's broker does); with ``exact=True`` the commit-log stage also
    checks the record's TAGS property, which RocketMQ leaves to the client.
    """

    def __init__(self, expression: str = "*", *, exact: bool = False):
        tags = [t.strip() for t in expression.split("||") if t.strip()]
        self.all = not tags or "*" in tags
        self.tags = frozenset(tags)
        self.codes = frozenset(java_string_hash(t) for t in tags)
        self.exact = exact

    def is_matched_by_consume_queue(self, tags_code, cq_ext_unit=None) -> bool:
        if self.all or tags_code is None:
            return True
        return tags_code in self.codes

    @property
    def reads_commit_log(self) -> bool:
        """Whether :meth:`is_matched_by_commit_log` looks at the record (else it lets every one through)."""
        return self.exact and not self.all

    def is_matched_by_commit_log(self, record: MessageRecord, properties=None) -> bool:
        if self.all or not self.exact:
            return True
        props = properties if properties is not None else string_to_properties(record.properties)
        return props.get(TAGS) in self.tags


# -- small helpers ---------------------------------------------------------------------------

def _next_offset_correction(store, old_offset: int, new_offset: int) -> int:
    cfg = store.config
    if cfg.broker_role is not BrokerRole.SLAVE or getattr(cfg, "offset_check_in_slave", False):
        return new_offset
    return old_offset


def _index_units(cq, queue_offset: int, max_units: int) -> Iterator[ConsumeQueueUnit] | None:
    """Units from ``queue_offset`` to the readable end of its file (at most ``max_units``), made as the pull
    takes them: a pull of 32 stops long before the 800 units (16,000 bytes) it may scan for matches.

    None where RocketMQ's ``getIndexBuffer`` returns null: below the minimum, no file, or
    nothing readable at that position.
    """
    pos = queue_offset * CQ_STORE_UNIT_SIZE
    if pos < cq.min_logic_offset:
        return None
    mf = cq.mapped_file_queue.find_mapped_file_by_offset(pos)
    if mf is None:
        return None
    rel = pos - mf.file_from_offset
    read_pos = mf.read_position
    if not 0 <= rel < read_pos or not mf.hold():
        return None
    try:
        block = bytes(mf.mapped[rel:min(read_pos, rel + max_units * CQ_STORE_UNIT_SIZE)])  # copied while held
    finally:
        mf.release()
    return (ConsumeQueueUnit(queue_offset + p // CQ_STORE_UNIT_SIZE, off, size, tags)
            for p, off, size, tags in iter_units(block))


def _check_readable(store) -> None:
    check_open(store)
    if not getattr(store, "read_only", False) and getattr(store, "shutdown_flag", False):
        raise StoreStateError("message store is shut down (or not started), so getMessage is forbidden")


def _filter_consume_queue(message_filter, tags_code):
    if message_filter is None:
        return True
    if callable(message_filter) and not hasattr(message_filter, "is_matched_by_consume_queue"):
        return message_filter(tags_code)
    return message_filter.is_matched_by_consume_queue(tags_code, None)


def _reads_commit_log(message_filter) -> bool:
    """Whether ``message_filter`` needs the decoded record (its commit-log stage looks at it)."""
    if not hasattr(message_filter, "is_matched_by_commit_log"):
        return False
    return getattr(message_filter, "reads_commit_log", True)


def _filter_commit_log(message_filter, record) -> bool:
    if message_filter is None or not hasattr(message_filter, "is_matched_by_commit_log"):
        return True
    return message_filter.is_matched_by_commit_log(record, None)


# -- pull ------------------------------------------------------------------------------------

def get_message(store, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                message_filter=None, *, limits: TransferLimits | None = None,
                check_crc: bool = False, raw: bool = False) -> GetMessageResult:
    """Pull up to ``max_count`` messages of topic/queue from queue offset ``offset``.

    With ``raw`` the records come as stored, in ``result.buffers`` (what a broker's pull answers with,
    RocketMQ's getMessage), not decoded into ``result.messages`` -- unless ``check_crc`` or the filter's
    commit-log stage needs them decoded; either way each one is checked to be the record its unit names.

    ``group`` is the consumer group (RocketMQ only uses it for statistics).
    ``message_filter`` is None, a callable ``f(tags_code) -> bool``, or an object with
    ``is_matched_by_consume_queue(tags_code, cq_ext_unit)`` and optionally
    ``is_matched_by_commit_log(record, properties)`` (see :class:`TagFilter`).
    ``limits`` defaults to :meth:`TransferLimits.of` the store's config.
    """
    _check_readable(store)
    limits = limits or TransferLimits.of(store.config)
    status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin = offset
    min_offset = max_offset = 0
    result = None
    max_offset_py = store.commit_log.get_max_offset()

    cq = consume_queue_of(store, topic, queue_id)
    if cq is None:
        status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        next_begin = _next_offset_correction(store, offset, 0)
    else:
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        if max_offset == 0:
            status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
            next_begin = _next_offset_correction(store, offset, 0)
        elif offset < min_offset:
            status = GetMessageStatus.OFFSET_TOO_SMALL
            next_begin = _next_offset_correction(store, offset, min_offset)
        elif offset == max_offset:
            status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            next_begin = _next_offset_correction(store, offset, offset)
        elif offset > max_offset:
            status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            next_begin = _next_offset_correction(store, offset, max_offset)
        else:
            max_units = -(-max(_MAX_FILTER_BYTES, max_count * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE)
            units = _index_units(cq, offset, max_units)
            if units is None:
                status = GetMessageStatus.OFFSET_FOUND_NULL
                per_file = cq.mapped_file_size // CQ_STORE_UNIT_SIZE
                next_begin = _next_offset_correction(store, offset, offset + per_file - offset % per_file)
                log.warning("consumer request topic %s offset %d (min %d, max %d): access logic queue failed",
                            topic, offset, min_offset, max_offset)
            else:
                result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset)
                raw_only = raw and not check_crc and not _reads_commit_log(message_filter)
                reader = _raw_reader if raw_only else _decoding_reader
                status, read, max_phy_pulling = _pull_units(store, result, units, max_count, limits,
                                                            max_offset_py, message_filter, check_crc, topic, reader)
                next_begin = offset + read
                memory = int(_TOTAL_PHYSICAL_MEMORY * (limits.access_message_in_memory_max_ratio / 100.0))
                result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory

    if result is None:
        result = GetMessageResult(status, next_begin)
    result.status = status
    result.next_begin_offset = next_begin
    result.min_offset = min_offset
    result.max_offset = max_offset
    return result


def _is_batch_full(limits: TransferLimits, size: int, max_count: int, buffer_total: int, count: int,
                   in_disk: bool) -> bool:
    if buffer_total == 0 or count == 0:
        return False
    if max_count <= count:
        return True
    if in_disk:
        return (buffer_total + size > limits.max_transfer_bytes_on_message_in_disk
                or count > limits.max_transfer_count_on_message_in_disk - 1)
    return (buffer_total + size > limits.max_transfer_bytes_on_message_in_memory
            or count > limits.max_transfer_count_on_message_in_memory - 1)


def _raw_reader(store, offset: int, size: int, check_crc: bool):
    return read_record_bytes(store, offset, size)


def _decoding_reader(store, offset: int, size: int, check_crc: bool):
    return read_record(store, offset, size, check_crc=check_crc)


def _pull_units(store, result, units, max_count, limits, max_offset_py, message_filter, check_crc, topic, reader):
    """The unit loop of getMessage; returns (status, units consumed, last commitlog offset seen).  ``reader``
    gives a unit's record: :func:`_decoding_reader`, or :func:`_raw_reader` (a raw pull whose filter needs no
    decoded record: the bytes as stored)."""
    status = GetMessageStatus.NO_MATCHED_MESSAGE
    memory = int(_TOTAL_PHYSICAL_MEMORY * (limits.access_message_in_memory_max_ratio / 100.0))
    next_phy_file_start = None
    max_phy_pulling = 0
    read = 0
    for unit in units:
        offset_py, size_py, tags_code = unit.commit_log_offset, unit.size, unit.tags_code
        max_phy_pulling = offset_py
        if next_phy_file_start is not None and offset_py < next_phy_file_start:
            read += 1
            continue
        in_disk = max_offset_py - offset_py > memory
        if _is_batch_full(limits, size_py, max_count, result.buffer_total_size, len(result.units), in_disk):
            break
        read += 1
        if tags_code <= _EXT_ADDR_MAX:
            tags_code = None  # a ConsumeQueueExt address; ext is not supported, so the code is unknown
        if not _filter_consume_queue(message_filter, tags_code):
            if result.buffer_total_size == 0:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            continue
        try:
            record = reader(store, offset_py, size_py, check_crc)
        except CorruptRecordError as exc:
            log.error("consume queue %s unit %d points at commitlog offset %d (%d bytes), which does not "
                      "hold that record: %s", topic, unit.queue_offset, offset_py, size_py, exc)
            continue
        if record is None:
            if result.buffer_total_size == 0:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            next_phy_file_start = store.commit_log.roll_next_file(offset_py)
            continue
        if reader is _decoding_reader and not _filter_commit_log(message_filter, record):
            if result.buffer_total_size == 0:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            continue
        result._add(record, unit)
        status = GetMessageStatus.FOUND
        next_phy_file_start = None
    return status, read, max_phy_pulling


# -- queue offsets ---------------------------------------------------------------------------

def get_max_offset_in_queue(store, topic: str, queue_id: int) -> int:
    """The queue offset the next message will get (0 for an unknown queue)."""
    check_open(store)
    cq = consume_queue_of(store, topic, queue_id)
    return cq.get_max_offset_in_queue() if cq is not None else 0


def get_min_offset_in_queue(store, topic: str, queue_id: int) -> int:
    """The first queue offset still readable (0 for an unknown queue, as RocketMQ's new queue says)."""
    check_open(store)
    cq = consume_queue_of(store, topic, queue_id)
    return cq.get_min_offset_in_queue() if cq is not None else 0


def get_commit_log_offset_in_queue(store, topic: str, queue_id: int, queue_offset: int) -> int:
    """The commitlog offset unit ``queue_offset`` points at (0 when there is no such unit)."""
    check_open(store)
    cq = consume_queue_of(store, topic, queue_id)
    if cq is None:
        return 0
    unit = next(_index_units(cq, queue_offset, 1) or iter(()), None)
    return unit.commit_log_offset if unit is not None else 0


