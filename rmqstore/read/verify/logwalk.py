"""The commitlog walk of verify's local driver: segments in order, each along its size chain.

This is the one place verify reads the log: :meth:`LogWalk.walk_commitlog` places the
segments and checks the chain between them (missing, overlapping, odd-sized files; the end
of the log; holes and pre-allocated files after it), :meth:`LogWalk.walk_segment` follows
one segment's records on the store's one segment walk (:func:`rmqstore.format.walk.walk_segment`:
where and why a segment ends is decided there, in the vocabulary of :class:`rmqstore.format.walk.End`;
with the compiled modules, the bulk pass of :mod:`rmqstore.read.verify.bulk` gives the same findings),
and :meth:`LogWalk.check_record` checks each record as it is met -- against the rules, its
unit and its index entries.  The words are the rules' (:mod:`rmqstore.read.verify.rules`); a blank
is an end whatever size it declares (RocketMQ's rule), a size that does not reach the end of
its file is a ``blank_size`` finding.
A mixin of :class:`rmqstore.read.verify.local.Verifier`, whose state it uses.
"""

from __future__ import annotations

import bisect
import os
from array import array
from typing import TYPE_CHECKING

from ...files import store_paths as sp
from ...engine.dispatch import tags_code_of
from ...format.properties import string_to_properties
from ...engine.reading import record_keys
from ...format.record import decode_record
from ...files.store_dir import grid_problem
from ...files.store_sizes import StoreSizes, interrupted_allocations
from ...format.sysflag import gets_queue_unit
from ...format.walk import End, walk_segment
from . import index_rules as ir
from . import queue_rules as qr
from . import rules
from .bulk import RANGE_END, BulkTools, bulk_tools, walk_segment_bulk
from .files import MappedFile, QueueView
from .report import Problem, VerifyReport

__all__ = ["LogWalk", "RANGE_END", "RECOVERED_END"]

#: verify's walk stopped at a record recovery rejects, where recovery ends the log
RECOVERED_END = "recovered_end"
#: the walk drops what it has read from memory every this many bytes (its peak RSS, not its reads)
RELEASE_EVERY = 32 << 20


class LogWalk:
    """The commitlog phases of :class:`~rmqstore.read.verify.local.Verifier`.

    The state below is the Verifier's (set in its ``__init__``), declared here for the type
    checker: the attributes and methods this mixin reads and writes, and nothing else.
    """

    root: str
    sizes: StoreSizes
    report: VerifyReport
    abort: bool
    live: int | None
    cq_ext: bool
    stop_at_recovered_end: bool
    segments: list[tuple[int, MappedFile]]
    seg_starts: list[int]
    starts: array[int]
    log: rules.LogMap
    corrupt_regions: list[tuple[int, int, str, int]]
    data_end: int
    max_store_ts: int
    unclaimed_tail: int | None
    queues: dict[tuple[str, int], QueueView]
    queue_offsets: rules.QueueOffsets
    cq_horizon: int
    unbacked: list[tuple[int, str, int, tuple[str, int], int]]
    reported_units: set[tuple[tuple[str, int], int]]
    index: ir.IndexMap
    idx_at: dict[int, list[tuple[int, int, int, int]]]
    index_max_phy: int
    has_index: bool
    unindexed: list[tuple[int, str, int]]
    #: the compiled tools of the bulk pass (:mod:`rmqstore.read.verify.bulk`), None: the pure walk
    native: bool | None
    bulk: BulkTools | None = None

    if TYPE_CHECKING:
        def note(self, *problems: Problem | None) -> None: ...
        def tick(self, n: int) -> None: ...
        def rel(self, path: str) -> str: ...
        def open(self, path: str) -> MappedFile | None: ...
        def store_files(self, directory: str, kind: str, what: str) -> list: ...

    # -- commitlog --------------------------------------------------------------------------------
    def walk_commitlog(self) -> None:  # noqa: C901 -- one pass over the segments, one rule call per finding
        cl = sp.commitlog_dir(self.root)
        if not os.path.isdir(cl):
            return
        size = self.sizes.commitlog
        segs = []
        for sf in self.leave_out_interrupted(
                self.store_files(cl, "segment", "a commitlog file (named by its 20-digit start offset)"), size):
            why = grid_problem(sf.offset, size) if size and size > 8 else None
            if why is not None:  # cannot be placed in the log: not walked
                self.note(rules.unplaced_segment(self.rel(sf.path), why))
                self.tick(sf.size)
                continue
            segs.append((sf.offset, sf.path))
        self.report.segments = len(segs)
        if not segs:
            return
        self.bulk = bulk_tools(self.native, self.sizes.delay_levels, self.has_index or bool(self.idx_at),
                               self.sizes.consume_queue)
        self.report.log_start = segs[0][0]
        self.note(rules.log_start(self.rel(segs[0][1]), segs[0][0]))
        expected = None
        ended: tuple[str, int, int] | None = None  # (rel, pos, phys) where 8 zero bytes end the log
        corrupt_tail = False  # the last file with data ended on an undecodable record
        pending_zero: list[str] = []  # all-zero files after the end
        last_corrupt: int | None = None  # index in problems of the last undecodable-record problem
        garbage = None  # (rel, end pos, first non-zero pos) after the end of the log
        for start, path in segs:
            f = self.open(path)
            if f is None:
                expected = start + (size or 0)
                continue
            self.report.commitlog_bytes += f.size
            if size is None or size <= 8:
                self.note(rules.sizeless_segment(f.rel, f.size))
                self.tick(f.size)
                continue
            self.note(rules.segment_size(f.rel, f.size, size), *rules.segment_gap(f.rel, start, expected, size))
            expected = start + size
            self.segments.append((start, f))
            self.seg_starts.append(start)
            if ended is not None or corrupt_tail:
                if self.nonzero_from(f, 0) is None:
                    pending_zero.append(f.rel)
                    self.tick(f.size)
                    continue
                if ended is not None:
                    self.note(rules.log_hole(*ended, pending_zero + [f.rel]))
                else:
                    self.note(*(rules.zero_file_inside_log(rel) for rel in pending_zero))
                ended, corrupt_tail, pending_zero, garbage = None, False, [], None
            state, pos = self.walk_segment(start, f, size)
            if state == End.UNWRITTEN:
                ended = (f.rel, pos, start + pos)
                nz = self.nonzero_from(f, pos)
                garbage = (f.rel, pos, nz) if nz is not None else None
            elif state == End.CORRUPT:
                last_corrupt = len(self.report.problems) - 1  # the undecodable record, just noted
                corrupt_tail = True
            elif state == RECOVERED_END:
                ended = (f.rel, pos, start + pos)  # (files with data after it: a hole)
            self.tick(f.size)
        # after the last file
        self.note(*(rules.preallocated_segment(rel, self.live is not None) for rel in pending_zero))
        if garbage is not None:
            self.note(rules.garbage_after_end(*garbage))
        if corrupt_tail and last_corrupt is not None and self.abort:
            self.recast(last_corrupt, rules.TORN_TAIL if self.live is None else rules.LIVE_TAIL)
        elif corrupt_tail and last_corrupt is not None:
            self.unclaimed_tail = last_corrupt  # judged once every reference is known (finish_log_refs)
        self.log = rules.LogMap([(start, f.rel, f.size) for start, f in self.segments], self.corrupt_regions)

    def leave_out_interrupted(self, files: list, size: int | None) -> list:
        """``files`` (a segment folder's) without the allocations a kill interrupted at its end, each
        reported as the warning readers give when they leave it out."""
        left = interrupted_allocations(files, size)
        for sf in left:
            self.note(rules.interrupted_allocation(self.rel(sf.path), sf.size, size))
        return files[:len(files) - len(left)]

    def recast(self, i: int, kind_why: tuple[str, str]) -> None:
        """Problem ``i``, an undecodable record, turns out to be a state recovery handles: a warning."""
        self.report.problems[i] = rules.recast(self.report.problems[i], kind_why)

    def nonzero_from(self, f: MappedFile, pos: int) -> int | None:
        """Position of the first non-zero byte of segment ``f`` from ``pos`` on, or None."""
        return f.first_nonzero(pos)

    def walk_segment(self, start: int, f: MappedFile, seg_size: int, pos: int = 0,
                     stop: int | None = None) -> tuple[str, int]:
        """Follow the records of one segment from ``pos`` (a record start) on the store's one segment
        walk (:func:`rmqstore.format.walk.walk_segment`); return ``(state, p)``.

        ``state`` is the :class:`~rmqstore.format.walk.End` that ended the segment at position ``p``, or
        :data:`RECOVERED_END` (``p``: a record recovery rejects that nothing points at or past, see
        :func:`~rmqstore.read.verify.rules.recovery_ends_log`), or -- with ``stop`` -- :data:`RANGE_END`
        (``p``: the first record start at or after ``stop``; a byte range's walk, see
        rmqstore.spark.verify).  What the end is, the walk decides; what verify says of it, the rules.
        """
        if stop is None and pos == 0 and self.bulk is not None:
            return walk_segment_bulk(self, self.bulk, start, f, seg_size)
        buf, n = f.buf, f.size
        delay_levels = self.sizes.delay_levels
        recovered: list[int] = []

        released = pos  # the walked bytes below this are dropped from memory (MappedFile.release)

        def on_record(p: int, _step) -> bool:
            nonlocal released
            if p - released >= RELEASE_EVERY:
                f.release(released, p)
                released = p
            phys = start + p
            rec = decode_record(buf, p)  # the walk found a whole record here: it decodes
            if self.stop_at_recovered_end:
                end = rules.recovery_ends_log(f.rel, p, phys, rec, self.abort,
                                              self.cq_horizon > phys or self.index_max_phy >= phys)
                if end is not None:
                    self.note(end)
                    self.data_end = phys
                    recovered.append(p)
                    return False
            self.check_record(phys, f.rel, p, rec, delay_levels)
            self.data_end = phys + rec.total_size
            return True

        e = walk_segment(buf, start, start=pos, stop_at=stop, on_record=on_record)
        f.release(released, e.pos)
        if recovered:
            return RECOVERED_END, recovered[0]
        if e.kind is None:
            return RANGE_END, e.pos
        if e.kind is End.OUT_OF_BYTES:
            self.note(rules.no_blank(f.rel, e.pos, n - e.pos))
            self.data_end = start + e.pos
        elif e.kind is End.CORRUPT:
            self.note(rules.undecodable_record(f.rel, e.pos, start + e.pos, e.reason))
            self.corrupt_regions.append((start + e.pos, start + n, f.rel, e.pos))
        elif e.kind is End.BLANK:
            self.report.blanks += 1
            self.note(rules.blank_size(f.rel, e.pos, e.last.size if e.last is not None else 0, n))
            self.data_end = start + n
        return e.kind, e.pos

    def check_record(self, phys: int, rel: str, pos: int, rec, delay_levels) -> None:
        """One decoded message record: counted, then judged (:meth:`judge_record`)."""
        self.report.records += 1
        self.starts.append(phys)
        if rec.store_timestamp > self.max_store_ts:
            self.max_store_ts = rec.store_timestamp
        self.judge_record(phys, rel, pos, rec, delay_levels)

    def judge_record(self, phys: int, rel: str, pos: int, rec, delay_levels) -> None:
        """One counted record: its own checks, its queue offset, its unit, its index entries."""
        self.note(*rules.record_problems(phys, rel, pos, rec))
        props = string_to_properties(rec.properties)
        key = (rec.topic, rec.queue_id)
        qo = rec.queue_offset
        if gets_queue_unit(rec.sys_flag):
            self.note(self.queue_offsets.step(phys, rel, pos, key, qo))
            q = self.queues.get(key)
            backed = False
            if q is not None and q.min <= qo < q.max:
                unit = q.unit(qo, self.sizes.consume_queue)
                if unit is not None and unit[0] == phys:
                    backed = True
                    q.mark(qo, self.sizes.consume_queue)
                    want = tags_code_of(rec.topic, props, rec.store_timestamp, delay_levels)
                    self.compare_unit(q, qo, unit, rec.total_size, want, phys, rel, pos)
            if not backed:
                self.unbacked.append((phys, rel, pos, key, qo))
        # index: entries pointing here, and entries this record needs
        entries = self.idx_at.pop(phys, None)
        keys = record_keys(props) if (entries or self.has_index) else []
        found, unindexed = ir.record_index(self.index, phys, rel, pos, rec.topic, rec.sys_flag, rec.store_timestamp, keys,
                                           entries, has_index=self.has_index, cq_horizon=self.cq_horizon)
        self.note(*found)
        if unindexed:
            self.unindexed.append((phys, rel, pos))

    def compare_unit(self, q: QueueView, n: int, unit, rec_size: int, want: int, phys: int, rel: str,
                     pos: int) -> None:
        cq_rel, upos = q.file_for(n, self.sizes.consume_queue)
        found = qr.unit_vs_record(cq_rel, upos, n, q.topic, q.queue_id, unit, rec_size, want, phys, rel, pos,
                                  self.cq_ext)
        self.note(*found)
        if found:
            self.reported_units.add(((q.topic, q.queue_id), n))

    def record_at(self, phys: int) -> int | None:
        """The number of the readable record that starts at ``phys``, or None."""
        i = bisect.bisect_left(self.starts, phys)
        if i < len(self.starts) and self.starts[i] == phys:
            return i
        return None

    def segment_for(self, phys: int):
        """(start, file) of the segment that holds ``phys``, or None."""
        i = bisect.bisect_right(self.seg_starts, phys) - 1
        if i >= 0:
            start, f = self.segments[i]
            if phys - start < f.size:
                return start, f
        return None
