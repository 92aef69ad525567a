"""Reading a segment in byte ranges: record boundaries found from anywhere, safely.

A parallel reader (the Spark data source) splits a large segment into byte ranges and
gives each range to a different task.  A task that starts in the middle of a segment
does not know where the next record begins.  It finds out from the record itself: a
candidate position ``p`` is a record start when

* the 4 bytes at ``p + 4`` are a message magic (found with ``bytes.find``, at C speed),
* the record's own PHYSICALOFFSET field equals ``base + p`` -- eight bytes that must
  name exactly this position, which bytes inside a body or stale data from another file
  do not (a stale record from an earlier file names *its* file's offsets),
* the record is structurally whole (lengths end it at its declared size) and its body
  CRC is right.

Ownership rule: a range ``[start, end)`` emits exactly the records whose *first byte*
lies in it; it may read past ``end`` to finish its last record, and stops at the first
record start at or past ``end`` -- so a split into N ranges reads the segment about once,
not N times.  Together the ranges of a split emit each record once.

The reference they agree with is :func:`read_segment` -- a sequential read from position
0 that, when it meets bytes that are not a record, reports the damaged region and
resynchronises at the next record start by the same rule (a scan that stopped at the
first damage could not be split: a task after the damage cannot know the damage exists).
Whether bytes are a record or an end is :func:`rmqstore.format.walk.step`'s call (strict: a bad
body CRC or a PHYSICALOFFSET naming another place is damage); a blank record ends the
segment (by its magic, as recovery and dispatch see it), and so do eight zero bytes and the
end of the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fastscan import RecordSpan, walk_segment
from .layout import PHYSICAL_OFFSET_POSITION
from .walk import End, step

__all__ = ["find_record_start", "read_range", "read_segment", "RangeRead", "split_ranges"]

_MAGICS = (b"\xda\xa3\x20\xa7", b"\xda\xa3\x20\xab")  # V1, V2


@dataclass
class RangeRead:
    """What one range (or a whole segment) yielded."""

    records: list[RecordSpan] = field(default_factory=list)
    damaged: list[tuple[int, int]] = field(default_factory=list)  # physical [from, to) skipped
    end: int = 0  # physical offset where reading stopped
    kind: End | None = None  # how the segment ended there (None: the next range's first record)

    @property
    def first_stop(self) -> tuple[int, End | None]:
        """Where a sequential walk from the range's start stopped, and why: the first damage or the end."""
        if self.damaged:
            return self.damaged[0][0], End.CORRUPT
        return self.end, self.kind


def _is_record_at(buf, base: int, p: int) -> RecordSpan | None:
    at = p + PHYSICAL_OFFSET_POSITION
    # cheap filter first: the eight bytes that must name this very position
    if p < 0 or at + 8 > len(buf) or int.from_bytes(buf[at:at + 8], "big", signed=True) != base + p:
        return None
    s = step(buf, p, base, crc=True, strict=True)
    if s.end is not None:
        return None
    return RecordSpan(base + p, s.size, s.magic, s.queue_id, s.queue_offset, s.physical_offset, s.crc_ok)


def find_record_start(buf, base: int, pos: int, limit: int | None = None) -> int | None:
    """The first position ``>= pos`` (and ``< limit``) where a valid record starts, or None."""
    limit = len(buf) if limit is None else min(limit, len(buf))
    best = None
    for magic in _MAGICS:
        q = pos + 4
        while True:
            # a later candidate than the best one so far cannot win: search only up to it
            i = buf.find(magic, q, limit + 4 if best is None else min(limit, best) + 7)
            if i < 0 or (best is not None and i - 4 >= best):
                break
            if _is_record_at(buf, base, i - 4) is not None:
                best = i - 4
                break
            q = i + 1
    return best


def read_range(buf, base: int, start: int, end: int) -> RangeRead:
    """Records of segment ``buf`` (first byte at physical ``base``) that start in ``[start, end)``.

    Reads only as far as it must: up to the first record start at or past ``end`` (its own
    last record is finished whatever its size), so the ranges of a split read the segment
    about once between them.  Only damage that *begins* inside the range is followed to
    the next record start, to report its extent.  ``RangeRead.end`` is where the range
    stopped: the first position at or past ``end`` that the next range owns, or the end
    of the written part of the segment.
    """
    out = RangeRead()
    p = start if start == 0 else find_record_start(buf, base, start)
    # a range that starts inside the damaged region before a real start must not claim it
    while p is not None and p < end:
        # strict: a bad body CRC or a PHYSICALOFFSET naming another place is damage, not a
        # record -- the rule find_record_start applies, so the sequential read and a split agree
        w = walk_segment(buf, base, start=p, end=len(buf), keep_spans=True, stop_at=end, strict=True)
        out.records.extend(w.spans)
        q = w.end - base
        if w.kind is not End.CORRUPT:  # stop_at (None), or the segment ends here
            out.end, out.kind = w.end, w.kind
            return out
        nxt = find_record_start(buf, base, q + 1)
        out.damaged.append((w.end, base + nxt if nxt is not None else base + len(buf)))
        p = nxt
    out.end = base + (p if p is not None else len(buf))
    return out


def read_segment(buf, base: int) -> RangeRead:
    """The whole segment read sequentially, resynchronising past damage (the reference)."""
    return read_range(buf, base, 0, len(buf))


def split_ranges(size: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous byte ranges covering ``[0, size)``."""
    width = -(-size // parts)
    return [(s, min(s + width, size)) for s in range(0, size, width)]
