"""How a segment ends: one step over a commitlog buffer, one vocabulary of ends.

The hard idea
-------------
A commitlog segment has no "end" field.  Files are pre-allocated at full size and fill
from the front, so every reader of the log -- recovery, dispatch, the scans, the
inspector, the Spark readers -- must find out, record after record, whether the bytes at
a position are a record or the end of what was written.  RocketMQ answers that question
in one method, ``CommitLog#checkMessageAndReturnSize``, which serves both recovery and the
reput (dispatch) thread.  This module is that method for rmqstore: :func:`step` looks at
one position and says either "a message record of N bytes starts here" or "the segment
ends here, and this is why" -- and every walk of the log is a loop over it.  No other
module decides whether bytes are a record.

The ends (:class:`End`)
-----------------------
``BLANK``
    an END_OF_FILE blank record (``BLANK_MAGIC_CODE``): the writer had no room for the
    next record and filled the rest of the file.  Recognised by its magic alone, whatever
    size it declares (RocketMQ's rule); :attr:`Step.blank_fills` says whether the declared
    size reaches the end of the segment, for the readers that care.
``UNWRITTEN``
    eight zero bytes where a record header would be: space never written.
``OUT_OF_BYTES``
    the readable bytes ran out: fewer than eight are left before the limit (none at all
    when the segment is exactly full), or a record crosses the readable limit while still
    fitting in the segment (a replica whose second half has not arrived yet).
``CORRUPT``
    anything else -- a bad magic, a size no record can have, lengths inside the record
    that do not end it at its declared size, a topic or properties that are not UTF-8,
    and, for a *strict* walk, a body CRC that does not match or a PHYSICALOFFSET field
    that does not name the record's own position.  :attr:`Step.reason` says which.

The same word meant two things before this module ("end_of_file" was a blank record in
recovery and running out of bytes in the lean walk); here a blank is ``BLANK`` and
running out is ``OUT_OF_BYTES``, everywhere.

What stays the caller's
-----------------------
Options, not rules: ``crc`` computes the body CRC (:attr:`Step.crc_ok`), ``strict`` makes a
bad CRC (non-empty bodies, as RocketMQ) or a wrong PHYSICALOFFSET end the walk as
``CORRUPT`` -- recovery and the byte-range reader are strict, the scans are not.  And
policy on top of an end: recovery goes on into the next segment only after a ``BLANK``
(RocketMQ's loop), a reader of files also after a segment that is exactly full; the
byte-range reader resynchronises after ``CORRUPT`` to report the damaged region; the Spark
rebuild accepts only a blank that fills its segment.  What an end *is* is decided here
and nowhere else.

:func:`walk_segment` is the loop every caller uses: from a record boundary to the first
end (or to ``stop_at``), handing each record to ``on_record``.

Two loops, one table
--------------------
A walk that needs no per-record callback runs compiled when it can (``rmqstore._native._cwalk.walk``,
chosen by :func:`rmqstore.common.native.module`): the same table as :func:`step`, in C, with the
GIL released.  The compiled walk says only *where* the walk ended and *which* kind of end
it met; the reason's words and :attr:`SegmentEnd.last` come from running :func:`step` once
at that position, so the vocabulary of ends stays here.  The pure loop below is the
reference: ``tests/unit/test_native_walk.py`` proves the two end at the same place, the same
way, over the same records.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from enum import Enum

from ..common import native as _native
from .crc import raw_crc32
from .layout import (BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, message_fields_struct,
                     message_header_struct)
from .sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

__all__ = ["End", "LogEnd", "Step", "step", "SegmentEnd", "walk_segment", "native_walk", "fits_compiled", "end_kind", "ended",
           "MIN_RECORD_SIZE"]


class End(str, Enum):
    """Why a walk of one segment stopped (see the module essay)."""

    BLANK = "blank"
    UNWRITTEN = "unwritten"
    OUT_OF_BYTES = "out_of_bytes"
    CORRUPT = "corrupt"

    def __str__(self) -> str:
        return self.value


class LogEnd(str, Enum):
    """Why a walk over a *directory* of segments stopped where no segment's bytes decided it."""

    NO_FILES = "no_files"  # the commitlog has no segment files
    END_OF_FILES = "end_of_files"  # the last segment file ended (a blank, or exactly full)
    GAP = "gap"  # the next segment does not start where the previous one ended
    UNREADABLE = "unreadable"  # a segment cannot be opened or mapped

    def __str__(self) -> str:
        return self.value


#: no record is shorter (a V1 record with empty body, topic and properties)
MIN_RECORD_SIZE = 91
_MASK = 0x7FFFFFFF
# total, magic, crc, queue id, flag, queue offset, physical offset, sys flag: the layout table's
_HEAD = message_fields_struct("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset",
                              "physical_offset", "sys_flag")
_TWO = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_BODY_AT = {(b, s): message_header_struct(b, s).size for b in (False, True) for s in (False, True)}


class Step:
    """What :func:`step` found at one position: a message record (``end is None``) or an end."""

    __slots__ = ("end", "size", "reason", "magic", "crc", "crc_ok", "queue_id", "queue_offset",
                 "physical_offset", "sys_flag", "body_len", "blank_fills")

    def __init__(self, end: End | None, size: int = 0, reason: str = "", magic: int = 0, crc: int = 0,
                 crc_ok: bool | None = None, queue_id: int = 0, queue_offset: int = 0, physical_offset: int = 0,
                 sys_flag: int = 0, body_len: int = 0, blank_fills: bool = False):
        self.end = end  # None: a message record
        self.size = size  # a record's total size, a blank's declared size, else 0
        self.reason = reason
        self.magic = magic
        self.crc = crc  # the stored body CRC
        self.crc_ok = crc_ok  # None when not computed
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.physical_offset = physical_offset  # the record's PHYSICALOFFSET field
        self.sys_flag = sys_flag
        self.body_len = body_len
        self.blank_fills = blank_fills  # a blank whose declared size reaches the segment's end

    @property
    def is_record(self) -> bool:
        return self.end is None

    def __repr__(self) -> str:
        what = "record" if self.end is None else self.end.value
        return f"Step({what}, size={self.size}{', ' + self.reason if self.reason else ''})"


def _corrupt(reason: str) -> Step:
    return Step(End.CORRUPT, reason=reason)


def _utf8(buf, start: int, end: int) -> bool:
    try:
        str(buf[start:end], "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def step(buf, pos: int, base: int = 0, limit: int | None = None, *, crc: bool = False,  # noqa: C901 -- the one decision table of how a segment ends; split, it would be walked twice
         strict: bool = False) -> Step:
    """What starts at ``buf[pos:]`` -- a record or an end -- in a segment whose first byte is at ``base``.

    ``buf`` is the whole segment (its length is the segment's end); ``limit`` (default
    ``len(buf)``) is where readable bytes end.  ``crc`` computes the body CRC; ``strict``
    ends the walk (``CORRUPT``) at a bad CRC of a non-empty body or a PHYSICALOFFSET that
    is not ``base + pos``.  Never raises on bad bytes.
    """
    size = len(buf)
    lim = size if limit is None else min(limit, size)
    if pos < 0 or pos + 8 > lim:
        left = max(lim - pos, 0)
        return Step(End.OUT_OF_BYTES, reason="the segment is full" if left == 0 else
                    f"{left} byte(s) left, fewer than a record header")
    if pos + _HEAD.size <= lim:
        total, magic, stored_crc, qid, _flag, qoff, phys, sys_flag = _HEAD.unpack_from(buf, pos)
    else:
        total, magic = _TWO.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return Step(End.BLANK, total, "END_OF_FILE blank record", magic, blank_fills=pos + total == size)
    if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
        if total == 0 and magic == 0:
            return Step(End.UNWRITTEN, reason="8 zero bytes: nothing written here")
        return _corrupt(f"bad magic code {magic & 0xFFFFFFFF:#010x}")
    rec_end = pos + total
    if total < MIN_RECORD_SIZE:
        return _corrupt(f"record declares {total} bytes, shorter than any record")
    if rec_end > lim:
        if rec_end <= size:
            return Step(End.OUT_OF_BYTES, reason=f"record of {total} bytes runs past the readable end")
        return _corrupt(f"record declares {total} bytes, {lim - pos} remain")
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    tl_size = 2 if v2 else 1
    body_at = pos + _BODY_AT[bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)]
    if body_at + tl_size + 2 > rec_end:
        return _corrupt(f"record declares {total} bytes, too short for its header")
    body_len = _I32.unpack_from(buf, body_at - 4)[0]
    topic_at = body_at + body_len
    if body_len < 0 or topic_at + tl_size + 2 > rec_end:
        return _corrupt(f"body length {body_len} overruns the record")
    if v2:
        topic_len = _I16.unpack_from(buf, topic_at)[0]
    else:
        topic_len = (buf[topic_at] ^ 0x80) - 0x80  # a signed byte
    props_at = topic_at + tl_size + topic_len
    if topic_len < 0 or props_at + 2 > rec_end:
        return _corrupt(f"topic length {topic_len} overruns the record")
    props_len = _I16.unpack_from(buf, props_at)[0]
    if props_at + 2 + props_len != rec_end:
        return _corrupt(f"properties length {props_len} does not end the record at its declared size {total}")
    if not (_utf8(buf, topic_at + tl_size, props_at) and _utf8(buf, props_at + 2, rec_end)):
        return _corrupt("topic or properties are not UTF-8")
    crc_ok = None
    if crc:
        crc_ok = (raw_crc32(memoryview(buf)[body_at:topic_at]) & _MASK) == stored_crc
    if strict:
        if crc_ok is False and body_len > 0:
            return _corrupt(f"body CRC mismatch: stored {stored_crc}")
        if phys != base + pos:
            return _corrupt(f"the PHYSICALOFFSET field says {phys}, the record is at {base + pos}")
    return Step(None, total, "", magic, stored_crc, crc_ok, qid, qoff, phys, sys_flag, body_len)


@dataclass
class SegmentEnd:
    """Where and why :func:`walk_segment` stopped."""

    pos: int  # position in the buffer
    kind: End | None  # None: stopped at ``stop_at`` before reaching an end
    reason: str
    records: int = 0  # records handed to on_record
    last: Step | None = None  # the step that ended the walk (None at stop_at)

    def offset(self, base: int) -> int:
        return base + self.pos


def end_kind(code: int) -> End | None:
    """The :class:`End` numbered ``code`` by the compiled walk (0: stopped at ``stop_at``)."""
    return _KIND_OF_CODE[code]


_KIND_OF_CODE = (None, End.BLANK, End.UNWRITTEN, End.OUT_OF_BYTES, End.CORRUPT)
_I64 = 1 << 62  # positions and bases the compiled walk takes (int64, with room to add a size)


def native_walk(native: bool | None = True):
    """The compiled walk (``rmqstore._native._cwalk``) when the fast path runs, else None (see :mod:`rmqstore.common.native`)."""
    return _native.module("_cwalk", native)


def fits_compiled(base: int, start: int, limit: int, stop_at: int | None) -> bool:
    """Arguments the compiled walk takes as they are (odd ones -- negative, huge -- take the pure loop)."""
    return -_I64 < base < _I64 and 0 <= start < _I64 and 0 <= limit < _I64 and (stop_at is None or 0 <= stop_at < _I64)


def walk_segment(buf, base: int = 0, *, start: int = 0, limit: int | None = None, stop_at: int | None = None,
                 crc: bool = False, strict: bool = False, on_record=None, native: bool | None = True) -> SegmentEnd:
    """Step from the record boundary ``start`` to the first end; ``on_record(pos, step)`` gets each record.

    ``stop_at`` (a position) stops *before* the first record that starts at or past it,
    short of ``limit`` -- a record starting before it is read whole (the byte-range rule).
    ``on_record`` may return ``False`` to stop right after that record (``kind`` None).
    The compiled walk runs where it is built and ``native`` (a store's
    ``StoreConfig.native``) allows it -- in one call without ``on_record``, else a chunk of
    records at a time, each handed over as the :class:`Step` the pure loop would have made.
    """
    lim = len(buf) if limit is None else min(limit, len(buf))
    c = native_walk(native)
    if c is not None and fits_compiled(base, start, lim, stop_at):
        if on_record is None:
            pos, code, records = c.walk(buf, base, start, lim, -1 if stop_at is None else stop_at, crc, strict)[:3]
            return ended(buf, base, pos, code, records, lim, crc=crc, strict=strict)
        return _compiled_chunks(c, buf, base, start, lim, stop_at, crc, strict, on_record)
    pos = start
    records = 0
    while True:
        if stop_at is not None and stop_at <= pos < lim:
            return SegmentEnd(pos, None, "reached stop_at", records)
        s = step(buf, pos, base, lim, crc=crc, strict=strict)
        if s.end is not None:
            return SegmentEnd(pos, s.end, s.reason, records, s)
        records += 1
        if on_record is not None and on_record(pos, s) is False:
            return SegmentEnd(pos + s.size, None, "stopped by the caller", records)
        pos += s.size


#: bytes of records the chunked compiled walk reads ahead of the caller's callback
CHUNK = 1 << 20
_SPAN = 10  # int64 columns per record of the compiled walk's spans


def _compiled_chunks(c, buf, base: int, start: int, lim: int, stop_at: int | None, crc: bool, strict: bool,
                     on_record) -> SegmentEnd:
    """:func:`walk_segment` with a callback on the compiled walk: a chunk of records at a time."""
    pos = start
    records = 0
    while True:
        chunk_stop = pos + CHUNK if stop_at is None else min(stop_at, pos + CHUNK)
        end, code, n, _used, _size, _f, _m, raw = c.walk(buf, base, pos, lim, chunk_stop, crc, strict, False, True)
        col = array("q")
        col.frombytes(raw)
        for i in range(0, len(col), _SPAN):
            at, size, magic, stored, ok, qid, qoff, phys, sys_flag, body_len = col[i:i + _SPAN]
            p = at - base
            records += 1
            s = Step(None, size, "", magic, stored, None if ok < 0 else ok == 1, qid, qoff, phys, sys_flag, body_len)
            if on_record(p, s) is False:
                return SegmentEnd(p + size, None, "stopped by the caller", records)
        if code != 0 or (stop_at is not None and stop_at <= end < lim):
            return ended(buf, base, end, code, records, lim, crc=crc, strict=strict)
        pos = end


def ended(buf, base: int, pos: int, code: int, records: int, limit: int, *, crc: bool = False,
          strict: bool = False) -> SegmentEnd:
    """The :class:`SegmentEnd` of a compiled walk that stopped at ``pos`` with end ``code``: the
    reason and the ending :class:`Step` are :func:`step`'s at that one position."""
    kind = end_kind(code)
    if kind is None:
        return SegmentEnd(pos, None, "reached stop_at", records)
    s = step(buf, pos, base, limit, crc=crc, strict=strict)
    return SegmentEnd(pos, kind, s.reason, records, s)
