"""A lean walk over one commitlog segment: counts, offsets and CRCs without decoding.

:func:`rmqstore.format.record.decode_record` builds a whole record -- copies the body, decodes
the topic and properties, makes a namedtuple.  Counting a segment, or finding record
boundaries for a parallel reader, needs much less: for each record its total size, magic,
stored CRC, physical-offset field.  This module collects exactly that over
:func:`rmqstore.format.walk.walk_segment` -- the one decision of where a segment ends lives in
:mod:`rmqstore.format.walk`; here are only the statistics of a walk.

The walk never raises on bad bytes: it stops and says why (:attr:`SegmentWalk.kind`, a
:class:`rmqstore.format.walk.End`, or None when it stopped at ``stop_at``), so a caller decides
whether that is the normal end of a log or damage.  CRC failures and PHYSICALOFFSET
fields that name another position are collected, not ends (a lenient walk).

Where the compiled walk is built (:func:`rmqstore.format.walk.native_walk`), the whole segment is
walked in C with the GIL released and the statistics come back in bulk (the offsets of CRC
failures and mismatches, and the spans, as int64 columns) -- not one Python call per
record.  The result is the pure walk's, field for field (tests/unit/test_native_walk.py).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from . import walk as _walk
from .walk import End, Step

__all__ = ["SegmentWalk", "walk_segment", "RecordSpan", "End"]


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
    kind: End | None = None  # why it stopped; None: at stop_at
    reason: str = ""
    crc_failures: list[int] = field(default_factory=list)  # physical offsets
    offset_mismatches: list[int] = field(default_factory=list)  # physical offsets
    spans: list[RecordSpan] | None = None
    last: Step | None = None  # the step that ended the walk (None at stop_at)


def walk_segment(buf, base: int, *, start: int = 0, end: int | None = None, check_crc: bool = True,
                 keep_spans: bool = False, stop_at: int | None = None, strict: bool = False,
                 native: bool | None = True) -> SegmentWalk:
    """Walk records of ``buf`` (one segment whose first byte is at physical ``base``).

    Starts at ``start`` (a record boundary) and stops at the first end
    (:func:`rmqstore.format.walk.step`; ``end`` is the readable limit, default the buffer end).
    ``stop_at`` (a position in ``buf``) stops the walk *before* the first record that
    starts at or past it (``kind is None``): a record starting before it is still read
    whole, even when it ends past it -- the rule of a byte-range reader.  ``strict``: a bad
    body CRC or PHYSICALOFFSET ends the walk (``CORRUPT``) instead of being collected.
    ``native`` False keeps to the pure walk (a store's ``StoreConfig.native``).
    """
    c = _walk.native_walk(native)
    if c is not None:
        lim = len(buf) if end is None else min(end, len(buf))
        if _walk.fits_compiled(base, start, lim, stop_at):
            return _compiled(c, buf, base, start, lim, check_crc, keep_spans, stop_at, strict)
    walk = SegmentWalk(base=base, spans=[] if keep_spans else None)
    crc_failures = walk.crc_failures
    mismatches = walk.offset_mismatches
    spans = walk.spans
    used = 0

    def on_record(pos, s):
        nonlocal used
        at = base + pos
        if s.crc_ok is False:
            crc_failures.append(at)
        if s.physical_offset != at:
            mismatches.append(at)
        if spans is not None:
            spans.append(RecordSpan(at, s.size, s.magic, s.queue_id, s.queue_offset, s.physical_offset, s.crc_ok))
        used += s.size

    stop = _walk.walk_segment(buf, base, start=start, limit=end, stop_at=stop_at, crc=check_crc,
                              strict=strict, on_record=on_record)
    walk.records = stop.records
    walk.bytes_in_records = used
    walk.end = base + stop.pos
    walk.kind = stop.kind
    walk.reason = stop.reason
    walk.last = stop.last
    if stop.kind is End.BLANK:
        walk.blank_at = base + stop.pos
    return walk


def _column(raw: bytes) -> list[int]:
    col = array("q")
    col.frombytes(raw)
    return col.tolist()


def _compiled(c, buf, base: int, start: int, lim: int, check_crc: bool, keep_spans: bool, stop_at: int | None,
              strict: bool) -> SegmentWalk:
    """:func:`walk_segment` by the compiled walk: one call, the per-record results in bulk."""
    pos, code, records, used, _size, fails, mism, spans = c.walk(
        buf, base, start, lim, -1 if stop_at is None else stop_at, check_crc, strict, True, keep_spans)
    stop = _walk.ended(buf, base, pos, code, records, lim, crc=check_crc, strict=strict)
    walk = SegmentWalk(base=base, records=records, bytes_in_records=used, end=base + pos, kind=stop.kind,
                       reason=stop.reason, crc_failures=_column(fails), offset_mismatches=_column(mism),
                       last=stop.last)
    if keep_spans:
        col = _column(spans)
        walk.spans = [RecordSpan(at, size, magic, qid, qoff, phys, None if ok < 0 else ok == 1)
                      for at, size, magic, _crc, ok, qid, qoff, phys, _flag, _len
                      in (col[i:i + 10] for i in range(0, len(col), 10))]
    if stop.kind is End.BLANK:
        walk.blank_at = base + pos
    return walk
