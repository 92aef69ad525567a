"""A lean walk over one commitlog segment: sizes, offsets and CRCs without decoding.

:func:`rmqstore.record.decode_record` builds a whole record -- copies the body, decodes
the topic and properties, makes a namedtuple.  Checking a store (``verify``), counting
it, or finding record boundaries for a parallel reader needs much less: for each record
its total size, magic, stored CRC, physical-offset field and where the body lies.  This
module reads exactly that, with one ``unpack_from`` for the fixed head and the CRC taken
over a ``memoryview`` slice (no copy), and checks the same structural rules as the full
decoder: a known magic, a total size that fits, a body length that fits, lengths that end
the record exactly where the total size says.

The walk never raises on bad bytes: it stops and says why (:class:`SegmentWalk`), so a
caller decides whether that is the normal end of a log or damage.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .crc import raw_crc32
from .layout import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, message_header_struct
from .sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

__all__ = ["SegmentWalk", "walk_segment", "RecordSpan"]

# total, magic, crc, queue id, flag, queue offset, physical offset, sys flag
_HEAD = struct.Struct(">iiiiiqqi")
_BODY_AT = {(b, s): message_header_struct(b, s).size for b in (False, True) for s in (False, True)}
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_MIN_RECORD = 91


@dataclass(slots=True)
class RecordSpan:
    """One record as the lean walk sees it."""

    offset: int  # physical offset where it starts
    total_size: int
    magic: int
    queue_id: int
    queue_offset: int
    physical_offset_field: int
    crc_ok: bool | None  # None when not checked


@dataclass
class SegmentWalk:
    """What a walk of one segment found."""

    base: int
    records: int = 0
    bytes_in_records: int = 0
    blank_at: int | None = None  # physical offset of the blank record, if any
    end: int = 0  # physical offset where the walk stopped
    stop: str = ""  # 'blank', 'unwritten', 'end_of_file', 'corrupt', 'stop_at'
    reason: str = ""
    crc_failures: list[int] = field(default_factory=list)  # physical offsets
    offset_mismatches: list[int] = field(default_factory=list)  # physical offsets
    spans: list[RecordSpan] | None = None


def walk_segment(buf, base: int, *, start: int = 0, end: int | None = None, check_crc: bool = True,  # noqa: C901 -- the one walk replaces it (issue 14)
                 keep_spans: bool = False, stop_at: int | None = None) -> SegmentWalk:
    """Walk records of ``buf`` (one segment whose first byte is at physical ``base``).

    Starts at ``start`` (a record boundary) and stops at a blank, at 8 zero bytes, at
    ``end`` (default: the buffer end) or at the first bytes that are not a record.
    ``stop_at`` (a position in ``buf``) stops the walk *before* the first record that
    starts at or past it (``stop == 'stop_at'``): a record starting before it is still
    read whole, even when it ends past it -- the rule of a byte-range reader.
    """
    limit = len(buf) if end is None else min(end, len(buf))
    stop = limit if stop_at is None else min(stop_at, limit)
    walk = SegmentWalk(base=base, spans=[] if keep_spans else None)
    unpack_head = _HEAD.unpack_from
    unpack_i32 = _I32.unpack_from
    crc_fn = raw_crc32
    mv = memoryview(buf)
    pos = start
    records = 0
    used = 0
    crc_failures = walk.crc_failures
    mismatches = walk.offset_mismatches
    spans = walk.spans
    try:
        while True:
            if pos >= stop:
                walk.stop, walk.reason = ("stop_at", "reached stop_at") if pos < limit else \
                    ("end_of_file", "reached the end of the segment")
                break
            if pos + 8 > limit:
                walk.stop, walk.reason = "end_of_file", "reached the end of the segment"
                break
            if pos + _HEAD.size > limit:
                total, magic = struct.unpack_from(">ii", buf, pos)
                sys_flag = qid = qoff = phys = crc = 0
            else:
                total, magic, crc, qid, _flag, qoff, phys, sys_flag = unpack_head(buf, pos)
            if magic == BLANK_MAGIC_CODE:
                if total < 8 or pos + total > len(buf):
                    walk.stop, walk.reason = "corrupt", f"blank record declares {total} bytes"
                else:
                    walk.stop, walk.reason = "blank", "END_OF_FILE blank record"
                    walk.blank_at = base + pos
                break
            if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
                if total == 0 and magic == 0:
                    walk.stop, walk.reason = "unwritten", "8 zero bytes: nothing written here"
                else:
                    walk.stop, walk.reason = "corrupt", f"bad magic code {magic & 0xFFFFFFFF:#010x}"
                break
            rec_end = pos + total
            if total < _MIN_RECORD or rec_end > limit:
                walk.stop, walk.reason = "corrupt", f"record declares {total} bytes, {limit - pos} remain"
                break
            body_at = pos + _BODY_AT[bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)]
            body_len = unpack_i32(buf, body_at - 4)[0]
            topic_at = body_at + body_len
            v2 = magic == MESSAGE_MAGIC_CODE_V2
            if body_len < 0 or topic_at + (2 if v2 else 1) + 2 > rec_end:
                walk.stop, walk.reason = "corrupt", f"body length {body_len} overruns the record"
                break
            if v2:
                raw_len = _I16.unpack_from(buf, topic_at)[0]
                props_at = topic_at + 2 + raw_len
            else:
                raw_len = buf[topic_at]
                raw_len = raw_len - 256 if raw_len > 127 else raw_len
                props_at = topic_at + 1 + raw_len
            if raw_len < 0 or props_at + 2 > rec_end or props_at + 2 + _I16.unpack_from(buf, props_at)[0] != rec_end:
                walk.stop, walk.reason = "corrupt", "topic/properties lengths do not end the record at its size"
                break
            crc_ok = None
            if check_crc:
                crc_ok = (crc_fn(mv[body_at:topic_at]) & 0x7FFFFFFF) == crc
                if not crc_ok:
                    crc_failures.append(base + pos)
            if phys != base + pos:
                mismatches.append(base + pos)
            if spans is not None:
                spans.append(RecordSpan(base + pos, total, magic, qid, qoff, phys, crc_ok))
            records += 1
            used += total
            pos = rec_end
    finally:
        mv.release()
    walk.records = records
    walk.bytes_in_records = used
    walk.end = base + pos
    return walk
