"""Verify's bulk pass over a segment: the per-record rules run only where something differs.

The rules (:mod:`rmqstore.read.verify.rules` and its siblings) are the reference: they word every
fault, one record at a time, on decoded records.  Most records of a healthy log give them
nothing to say, and deciding *that* needs no decode: the consume queue verify expects is
exactly what dispatch writes, so the units the compiled dispatch parse
(``rmqstore._native._cdispatch.parse``) would write for a run of records -- grouped per topic-queue,
tags codes computed as RocketMQ does -- are compared with the consume-queue files' bytes as
slices, and ``rmqstore._native._cdecode.record_facts`` gives the run's physical offsets, newest store
timestamp and the records whose body CRC or PHYSICALOFFSET fails (all in C, the GIL released).

What the bulk pass may skip, it can prove silent: a record is left out of the rules only
when its CRC and PHYSICALOFFSET hold and its queue's group of units in the run matches the
files byte for byte (same queue offsets, in one consecutive line continuing the queue's
previous one, every unit inside the queue's bounds).  For such a record the rules would find
nothing and change only what the pass sets in bulk: the count, the record starts, the newest
store timestamp, the units marked as matched and the queue's next offset.  Every other record
goes through :meth:`~rmqstore.read.verify.logwalk.LogWalk.judge_record` in log order (a group that
differs goes whole, so a queue's offsets are followed by one side only), and where the parse
stops -- an end, a record it defers, a CRC or PHYSICALOFFSET failure (which may end the log) --
the pure walk takes the one record at that position.  So the report is the pure path's, line
for line (tests/unit/test_native_verify.py).

The pass runs for a store without an index folder: with one, each record's keys must be
checked against the index (the rules' :func:`~rmqstore.read.verify.index_rules.record_index`), and
the whole walk stays on the pure path.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Protocol

from ...common import native
from ...engine.dispatch import delay_table
from ...format.record import decode_record
from .queue_rules import CQ_UNIT

if TYPE_CHECKING:
    from ...files.store_sizes import StoreSizes
    from .files import MappedFile, QueueView
    from .report import VerifyReport
    from .rules import QueueOffsets

__all__ = ["BulkTools", "bulk_tools", "walk_segment_bulk", "RUN_BYTES", "RANGE_END", "Walk"]

#: verify's walk stopped at a byte range's end (not an end of the segment)
RANGE_END = "range_end"

#: bytes of log one parse takes at most (the pages behind it are then released)
RUN_BYTES = 32 << 20
_MAX_RECORDS = 1 << 20
_SMALL_RUN = 64 << 10


class Walk(Protocol):
    """What the bulk pass reads and sets of the walk it speeds up (:class:`~rmqstore.read.verify.logwalk.LogWalk`,
    which calls it): the walk's own state, its one-record judgement and its pure segment walk."""

    sizes: StoreSizes
    report: VerifyReport
    starts: array[int]
    data_end: int
    max_store_ts: int
    queues: dict[tuple[str, int], QueueView]
    queue_offsets: QueueOffsets

    def judge_record(self, phys: int, rel: str, pos: int, rec, delay_levels) -> None: ...

    def walk_segment(self, start: int, f: MappedFile, seg_size: int, pos: int = 0,
                     stop: int | None = None) -> tuple[str, int]: ...


class BulkTools:
    """The compiled modules and the delay table of one run."""

    __slots__ = ("parse", "facts", "delays", "more")

    def __init__(self, cdispatch, cdecode, delays: tuple[int, ...]):
        self.parse, self.facts, self.delays, self.more = cdispatch.parse, cdecode.record_facts, delays, cdispatch.MORE


def bulk_tools(switch: bool | None, delay_levels: dict[int, int], has_index: bool, cq_size: int | None) \
        -> BulkTools | None:
    """The tools of the bulk pass, or None when the pure walk must run (a switch says so, a module
    is not built, the delay levels are not 1..N, the store has an index, odd consume-queue sizes)."""
    cdispatch, cdecode = native.module("_cdispatch", switch), native.module("_cdecode", switch)
    delays = delay_table(delay_levels)
    if cdispatch is None or cdecode is None or delays is None or has_index or not cq_size or cq_size % CQ_UNIT:
        return None
    return BulkTools(cdispatch, cdecode, delays)


def walk_segment_bulk(v: Walk, tools: BulkTools, start: int, f: MappedFile, seg_size: int) -> tuple[str, int]:
    """:meth:`LogWalk.walk_segment` of a whole segment, the bulk way; the same ``(state, p)``."""
    buf, n, pos, run = f.buf, f.size, 0, RUN_BYTES
    while True:
        lim = min(n, pos + run)
        # the run's records up to the first the rules must see alone (CRC, PHYSICALOFFSET), then
        # their units; where the parse stops short of that (a record it defers or refuses), the facts
        # are taken again up to there
        facts = tools.facts(buf, start, pos, lim)
        batch = tools.parse(buf, pos, facts[1], tools.delays, _MAX_RECORDS, False)
        if batch.stop_pos != facts[1]:
            facts = tools.facts(buf, start, pos, batch.stop_pos)
        count, stop, starts, max_ts, _ = facts
        if count != batch.count or stop != batch.stop_pos:  # cannot happen: both follow the same sizes
            return v.walk_segment(start, f, seg_size, pos=pos)
        absorb(v, batch, buf, start, f.rel, starts, max_ts)
        f.release(pos, stop)
        pos = stop
        if batch.stop == tools.more:
            continue
        # the position the parse would not take: one record (or the end) by the pure walk
        state, p = v.walk_segment(start, f, seg_size, pos=pos, stop=pos + 1)
        if state != RANGE_END:
            return state, p
        # a record across the run's limit lets the next run grow; one the rules took inside it (damage,
        # a deferred record) starts small runs, so a stretch of such records costs no re-reading
        run = min(run * 4, RUN_BYTES) if p > lim else _SMALL_RUN
        pos = p


def absorb(v: Walk, batch, buf, start: int, rel: str, starts: bytes, max_ts: int | None) -> None:
    """The records of one parsed run: the silent ones in bulk, the rest through the rules, in log order."""
    if not batch.count:
        return
    first_record = len(v.starts)
    v.starts.frombytes(starts)
    v.report.records += batch.count
    if max_ts is not None and max_ts > v.max_store_ts:
        v.max_store_ts = max_ts
    judged: list[int] = []
    for topic, queue_id, first, units, records, run in batch.groups:
        if not matched_group(v, (topic, queue_id), first, units, run):
            judged.extend(memoryview(records).cast("i"))
    delay_levels = v.sizes.delay_levels
    for r in sorted(judged):
        p = batch.record_pos(r)
        v.judge_record(v.starts[first_record + r], rel, p, decode_record(buf, p), delay_levels)
    v.data_end = start + batch.stop_pos


def matched_group(v: Walk, key: tuple[str, int], first: int, units: bytes, run: int) -> bool:
    """True (and the units marked, the queue's next offset set) when the units one run of records
    would dispatch to ``key`` are the consume queue's bytes, in its bounds, continuing its line."""
    k = len(units) // CQ_UNIT
    q = v.queues.get(key)
    if run != k or q is None or first < q.min or first + k > q.max:
        return False
    nxt = v.queue_offsets.next.get(key)
    if nxt is not None and first not in nxt:
        return False
    cqs = v.sizes.consume_queue
    pieces = []
    u = 0
    while u < k:
        at = (first + u) * CQ_UNIT
        fstart = at - at % cqs
        m = min(k - u, (fstart + cqs - at) // CQ_UNIT)
        cf = q.files.get(fstart)
        lo = at - fstart
        if cf is None or lo + m * CQ_UNIT > cf.size or cf.buf[lo:lo + m * CQ_UNIT] != units[u * CQ_UNIT:(u + m) * CQ_UNIT]:
            return False
        pieces.append((fstart, lo // CQ_UNIT, m))
        u += m
    for fstart, a, m in pieces:
        done = q.checked.get(fstart)
        if done is not None and a < len(done):
            b = min(a + m, len(done))
            done[a:b] = b"\1" * (b - a)
    v.queue_offsets.next[key] = (first + k,)
    return True
