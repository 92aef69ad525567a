"""What ``verify`` on Spark runs in tasks: the per-file reads and the partition functions of its joins.

The driver (:mod:`rmqstore.spark.verify`, whose essay tells the whole design) ships each
task a spec -- one byte range of a commitlog segment (:func:`range_task`), one queue
directory (:func:`queue_task`), one index file (:func:`index_task`) -- and each task runs
the local driver's own code on it (:class:`~rmqstore.read.verify.local.Verifier`), returning a
summary of what it found and the rows (record facts, units, index entries) the joins
match.  The partition functions (``*_rows``) run on the joined rows: each calls the same
pure rule of :mod:`rmqstore.read.verify.rules` the single-process walk calls, on the facts of
one row plus the small metadata of its store (:class:`StoreContext`), and yields problems
as rows ``(sid, "problem", order, i, Problem)`` -- ``order`` is where the sequential walk
would find them, so that the driver can list them in its order -- or marks for the
driver's later checks.  Nothing here writes to a store (read-only maps).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..engine.dispatch import tags_code_of
from ..format.layout import INDEX_HEADER
from ..format.properties import string_to_properties
from ..format.ranges import find_record_start
from ..engine.reading import record_keys
from ..files.store_dir import parse_file_name
from ..files.store_sizes import StoreSizes
from ..format.sysflag import transaction_value
from ..read.verify import Verifier
from ..read.verify import index_rules as ir
from ..read.verify import queue_rules as qr
from ..read.verify import rules
from ..read.verify.files import QueueView
from ..read.verify.logwalk import RANGE_END
from ..format.walk import End

__all__ = ["RECORD_FACTS_SCHEMA", "UNITS_SCHEMA", "ENTRIES_SCHEMA", "NO_CAP", "StoreContext", "range_task",
           "stitch_ranges", "merge_ranges", "queue_task", "index_task", "queue_gap_rows", "unit_match_rows",
           "record_index_rows", "stray_unit_rows", "unbacked_record_rows", "merge_unbacked", "unresolved_entry_rows"]
#: one row per readable message record (``sid``: the store's number in the call)
RECORD_FACTS_SCHEMA = ("sid int, phys bigint, rel string, pos bigint, topic string, qid int, qo bigint, "
                       "sys_flag int, txn int, size int, ts bigint, want bigint, keys array<string>")
#: one row per consume-queue unit in [min, max) of its queue
UNITS_SCHEMA = "sid int, topic string, qid int, qorder int, n bigint, offset bigint, usize int, tags bigint"
#: one row per index entry (``fnum``: the file's number among the store's index files)
ENTRIES_SCHEMA = "sid int, phy bigint, fnum int, n int, h int, td int"

NO_CAP = float("inf")  # the tasks list every problem; the driver applies the cap


# -- what a task knows about its store --------------------------------------------------------------

@dataclass
class StoreContext:
    """The small metadata of one store that the cross checks need, shipped to every task."""

    root: str
    sizes: StoreSizes
    cq_ext: bool
    queues: dict = field(default_factory=dict)  # (topic, qid) -> (rel, min, max)
    index_files: list = field(default_factory=list)  # rmqstore.read.verify.index_rules.IndexFileFacts
    segments: list = field(default_factory=list)  # (start, rel, size)
    corrupt_regions: list = field(default_factory=list)
    data_end: int = 0
    log_start: int | None = None  # None: the log has no segment
    cq_horizon: int = -1
    reported_units: set = field(default_factory=set)
    forward_pointed: set = field(default_factory=set)  # offsets a stray unit points at (no reverse check)


class _Views:
    """What the rules take about one store, built once per task from its :class:`StoreContext`."""

    def __init__(self, ctx: StoreContext):
        self.ctx = ctx
        self.log = rules.LogMap(ctx.segments, ctx.corrupt_regions)
        self.index = ir.IndexMap(ctx.index_files, ctx.sizes.slots)
        self.cq_size = ctx.sizes.consume_queue or 6_000_000

    def unit_place(self, key: tuple[str, int], n: int) -> tuple[str, int]:
        return qr.unit_place(self.ctx.queues[key][0], n, self.cq_size)


def _views(cache: dict, ctxs, sid: int) -> _Views:
    v = cache.get(sid)
    if v is None:
        v = cache[sid] = _Views(ctxs[sid])
    return v


def _found(sid: int, order: tuple, problems) -> list:
    """Problems a rule found, as rows (sid, "problem", order, i, Problem)."""
    return [(sid, "problem", order, i, p) for i, p in enumerate(p for p in problems if p is not None)]


# -- tasks: one file or one directory each ------------------------------------------------------------

class _SegmentWalker(Verifier):
    """The single-process walk of one segment, keeping each record's facts for the joins."""

    def __init__(self, root: str, sizes: StoreSizes, sid: int, with_keys: bool):
        super().__init__(root, sizes, None, NO_CAP)
        self.sid, self.with_keys = sid, with_keys
        self.facts: list[tuple] = []

    def check_record(self, phys, rel, pos, rec, delay_levels) -> None:
        super().check_record(phys, rel, pos, rec, delay_levels)
        self.unbacked.clear()  # no queues here: the joins decide which records have units
        props = string_to_properties(rec.properties)
        keys = sorted(record_keys(props)) if self.with_keys else []
        self.facts.append((self.sid, phys, rel, pos, rec.topic, rec.queue_id, rec.queue_offset, rec.sys_flag,
                           transaction_value(rec.sys_flag), rec.total_size, rec.store_timestamp,
                           tags_code_of(rec.topic, props, rec.store_timestamp, delay_levels), keys))


def range_task(spec):
    """Walk the records of one segment that start in the byte range [a, b):
    (sid, rel, a, summary or None, record facts).  The whole segment is the range (0, size)."""
    sid, root, sizes, with_keys, path, a, b = spec
    v = _SegmentWalker(root, sizes, sid, with_keys)
    with v.stack:
        f = v.open(path)
        if f is None:
            return sid, v.rel(path), a, None, []
        base = parse_file_name(os.path.basename(path))
        b = min(b, f.size) if a else b  # the first range always walks (an empty file has no blank)
        last = b >= f.size
        begin = 0 if a == 0 else find_record_start(f.buf, base, a, b)
        v.data_end = None
        state, at = ("none", None) if begin is None else \
            v.walk_segment(base, f, sizes.commitlog, begin, None if last else b)
        at = at if state in (End.UNWRITTEN, RANGE_END) else None
        summary = {
            # the queue-offset check runs across segments, in the joins
            "problems": [p for p in v.report.problems if p.kind != "queue_offset_gap"],
            "begin": begin, "end": b, "state": state, "at": at,
            "records": v.report.records, "blanks": v.report.blanks, "data_end": v.data_end,
            "max_ts": v.max_store_ts, "corrupt_regions": v.corrupt_regions,
            "nonzero": f.first_nonzero(a, min(b, f.size)),
            "nonzero_after_end": f.first_nonzero(at, min(b, f.size)) if state == End.UNWRITTEN else None,
        }
        return sid, f.rel, a, summary, v.facts


def stitch_ranges(ranges: list[dict]) -> list[int] | None:
    """Which ranges of one segment (in order) hold the sequential walk: their indexes, or None when
    a range did not start where the walk before it ended (damage at a boundary: walk it whole).

    A range's walk is the sequential one exactly when it begins where the previous range's walk
    stopped (the first record start at or after the boundary); a range that the previous walk
    jumped over entirely (one record spanning it) holds nothing; after a walk that ended the
    segment (blank, zeros, damage, end of file) later ranges hold nothing."""
    taken = [0]
    cursor = ranges[0]
    for i in range(1, len(ranges)):
        if cursor["state"] != RANGE_END:
            break
        r = ranges[i]
        if cursor["at"] >= r["end"]:
            continue  # one record covers this whole range
        if r["begin"] != cursor["at"]:
            return None
        taken.append(i)
        cursor = r
    return taken


def merge_ranges(ranges: list[dict], taken: list[int]) -> dict:
    """One segment's summary from its ranges' walks (``taken``) and zero scans (all ranges)."""
    walks = [ranges[i] for i in taken]
    final = walks[-1]
    after = [r["nonzero"] for r in ranges[taken[-1] + 1:] if r["nonzero"] is not None]
    data_ends = [r["data_end"] for r in walks if r["data_end"] is not None]
    return {
        "problems": [p for r in walks for p in r["problems"]],
        "state": final["state"], "at": final["at"],
        "records": sum(r["records"] for r in walks), "blanks": sum(r["blanks"] for r in walks),
        "data_end": data_ends[-1] if data_ends else None, "max_ts": max(r["max_ts"] for r in walks),
        "corrupt_regions": [c for r in walks for c in r["corrupt_regions"]],
        "nonzero_from_0": min((r["nonzero"] for r in ranges if r["nonzero"] is not None), default=None),
        "nonzero_after_end": None if final["state"] != End.UNWRITTEN else
        (final["nonzero_after_end"] if final["nonzero_after_end"] is not None else min(after, default=None)),
    }


def queue_task(spec):
    """Read one queue directory: (sid, qorder, summary, units in [min, max))."""
    sid, qorder, root, sizes, topic, qid, qdir = spec
    v = Verifier(root, sizes, None, NO_CAP)
    with v.stack:
        q = QueueView(topic, qid, v.rel(qdir))
        ok = v.load_queue(q, qdir, sizes.consume_queue)
        units = []
        if ok:
            for n in q.present_units():
                u = q.unit(n, sizes.consume_queue)
                if u is not None:
                    units.append((sid, topic, qid, qorder, n, u[0], u[1], u[2]))
        summary = {"ok": ok, "rel": q.rel, "min": q.min, "max": q.max, "horizon": q.horizon,
                   "units": v.report.units, "problems": list(v.report.problems),
                   "reported": [key_n for key_n in v.reported_units]}
    return sid, qorder, summary, units


def index_task(spec):
    """Check one index file: (sid, rel, summary or None, entries as (phy, n, hash, time diff))."""
    sid, root, sizes, path = spec
    v = Verifier(root, sizes, None, NO_CAP)
    with v.stack:
        f = v.open(path)
        if f is None or f.size < 40:
            return sid, v.rel(path), None, []
        ix = ir.IndexFileFacts.of(f.rel, INDEX_HEADER.unpack_from(f.buf))
        v.check_index_file(ix, f, sizes.slots, sizes.entries)
        entries = [(phy, n, h, td) for phy, at in v.idx_at.items() for _, n, h, td in at]
        return sid, f.rel, {"problems": list(v.report.problems), "usable": ix.usable,
                            "entries": v.report.entries}, entries


# -- partition functions (run in tasks) -----------------------------------------------------------------

def queue_gap_rows(ctxs, rows):
    lines: dict[int, rules.QueueOffsets] = {}
    for row in rows:
        line = lines.get(row.sid) or lines.setdefault(row.sid, rules.QueueOffsets())
        # at one record: its walk checks (0), queue offset (2), unit (3), index (4)
        yield from _found(row.sid, (row.phys, 2), [line.step(row.phys, row.rel, row.pos, (row.topic, row.qid), row.qo)])


def unit_match_rows(ctxs, rows):
    cache: dict[int, _Views] = {}
    for row in rows:
        views = _views(cache, ctxs, row.sid)
        key = (row.topic, row.qid)
        cq_rel, upos = views.unit_place(key, row.n)
        found = qr.unit_vs_record(cq_rel, upos, row.n, row.topic, row.qid, (row.offset, row.usize, row.tags),
                                  row.size, row.want, row.phys, row.rel, row.pos, views.ctx.cq_ext)
        yield from _found(row.sid, (row.phys, 3), found)
        if found:
            yield row.sid, "reported", (key, row.n)


def record_index_rows(ctxs, rows):
    cache: dict[int, _Views] = {}
    for row in rows:
        views = _views(cache, ctxs, row.sid)
        entries = [tuple(e) for e in row.entries] if row.entries else None
        # records outside every index file are not looked at here (has_index False)
        found, _ = ir.record_index(views.index, row.phys, row.rel, row.pos, row.topic, row.txn, row.ts, set(row.keys),
                                   entries, has_index=False, cq_horizon=views.ctx.cq_horizon)
        yield from _found(row.sid, (row.phys, 4), found)


def _verdict_rows(sid: int, order: tuple, verdict, offset: int, unit_key=None):
    """A reference's verdict as rows: its problems, then what it tells the later checks."""
    yield from _found(sid, order, verdict.problems)
    if verdict.past_end:
        yield sid, "past_end", offset
    if verdict.pointed:
        yield sid, "pointed", offset
    if verdict.blamed:
        yield sid, "blamed", offset
    if verdict.reported:
        yield sid, "reported", unit_key


def stray_unit_rows(ctxs, rows):
    cache: dict[int, _Views] = {}
    expired: dict[int, int] = {}
    for row in rows:
        views = _views(cache, ctxs, row.sid)
        ctx = views.ctx
        key = (row.topic, row.qid)
        target = None
        if row.tphys is not None and row.offset >= (ctx.log_start or 0) and row.offset < ctx.data_end:
            target = (row.rel, row.pos, (row.ttopic, row.tqid, row.qo), row.sys_flag,
                      not (row.dispatched and row.mphys is None))
        cq_rel, upos = views.unit_place(key, row.n)
        verdict = qr.stray_unit(cq_rel, upos, row.n, row.topic, row.qid, (row.offset, row.usize, row.tags),
                                log_start=ctx.log_start, data_end=ctx.data_end, target=target, log=views.log)
        expired[row.sid] = expired.get(row.sid, 0) + verdict.expired
        yield from _verdict_rows(row.sid, (row.qorder, row.n), verdict, row.offset, (key, row.n))
    for sid, n in expired.items():
        yield sid, "expired", n


def unbacked_record_rows(ctxs, rows):
    cache: dict[int, _Views] = {}
    for row in rows:
        views = _views(cache, ctxs, row.sid)
        ctx = views.ctx
        if row.phys >= ctx.cq_horizon:
            yield ("undispatched", row.sid), ("undispatched", (1, row.phys))
            continue
        key = (row.topic, row.qid)
        q = ctx.queues.get(key)
        if q is not None and q[1] <= row.qo < q[2]:
            if (key, row.qo) in ctx.reported_units:
                continue  # that unit's problem is already reported
            if row.uoff is not None:
                p = qr.unit_points_elsewhere(row.phys, row.rel, row.pos, key, row.qo, *views.unit_place(key, row.qo),
                                             row.uoff)
                yield ("problem", row.sid, row.phys, 0), ("problem", (row.sid, "problem", (row.phys,), 0, p))
                continue
        first = (row.phys, row.rel, row.pos, key, row.qo)
        yield (("missing", row.sid, qr.unit_file(key, row.qo, views.cq_size, q[0] if q is not None else None)),
               ("missing", (1, row.qo, row.qo, first)))


def merge_unbacked(a, b):
    """Missing units of one file: (records, lowest, highest queue offset, first record); undispatched
    records of one store: (records, first offset).  Problems have keys of their own."""
    tag, x = a
    y = b[1]
    if tag == "missing":
        return tag, (x[0] + y[0], min(x[1], y[1]), max(x[2], y[2]), x[3] if x[3][0] < y[3][0] else y[3])
    return tag, (x[0] + y[0], min(x[1], y[1]))


def unresolved_entry_rows(ctxs, rows):
    cache: dict[int, _Views] = {}
    expired: dict[int, int] = {}
    for row in rows:
        views = _views(cache, ctxs, row.sid)
        verdict = ir.unresolved_entry(views.index, row.phy, row.fnum, row.n, log_start=views.ctx.log_start,
                                      data_end=views.ctx.data_end, log=views.log)
        expired[row.sid] = expired.get(row.sid, 0) + verdict.expired
        yield from _verdict_rows(row.sid, (row.first.fnum, row.first.n, row.fnum, row.n), verdict, row.phy)
    for sid, n in expired.items():
        yield sid, "expired", n
