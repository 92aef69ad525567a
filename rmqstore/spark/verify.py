"""``verify`` on Spark: the checks of :mod:`rmqstore.read.verify`, with the data-sized work in tasks.

:func:`rmqstore.read.verify.verify` reads a store in one process: it walks every consume queue,
every index file and every commitlog segment, then matches them against each other.  The
work that grows with the data is (1) decoding and checking every record, (2) reading every
consume-queue unit and index entry, and (3) matching the copies of one fact against each
other.  Here (1) and (2) run as Spark tasks -- one per byte range of a commitlog segment,
one per queue directory, one per index file -- and (3) as Spark joins:

* unit <-> record, forwards: records (dispatchable ones) join units on (queue, queue
  offset, physical offset); a match is compared (size, tags code) and every unit left
  over joins the records by offset to find out *why* it matched nothing;
* unit <-> record, backwards: dispatchable records matched by no unit and pointed at by no
  stray unit join the units of their (queue, queue offset) to tell a damaged record header
  from a missing unit; missing units are aggregated per consume-queue file in Spark;
* queue-offset continuity: records repartitioned by queue and sorted by offset within
  partitions -- log order per queue, streamed, never collected;
* index: entries grouped by the offset they point at join the records (entries against
  keys, hashes and times; keys without an entry), and entries that hit no record.

What the driver holds is small and global: file lists, file naming and sizes, the size
chain *between* segments (which segment ends the log, holes, pre-allocated files, the torn
tail) from one summary per segment, the checkpoint, and the problems themselves.

Byte ranges, stitched exactly.  The sequential walk follows the size chain from position 0
of a segment and stops for good at the first bytes that do not decode; a range task that
starts mid-segment cannot know what the chain did before it.  So each range task finds its
first record start the way :mod:`rmqstore.format.ranges` does (magic, own PHYSICALOFFSET, good
CRC), walks the chain from there with the sequential code, and stops at the first record
start at or after its end -- *that position* is the seam.  The driver accepts a range only
when it began exactly at the seam the range before it reported (then its walk *is* the
sequential walk: same start, same code); a range that one record spans entirely holds
nothing; ranges after a walk that ended the segment (blank, zeros, damage, end of file)
hold nothing.  When a range began elsewhere -- a record with a bad CRC or a damaged header
right at the boundary, which the start finder rightly refuses -- that segment is walked
again whole in a second, small round.  Clean stores never need it.

A queue directory is one task, not one file: leading pre-blank units and the unit order run
across the files of a queue (:meth:`~rmqstore.read.verify.local.Verifier.load_queue`), and a queue's files are few.

One rule set, not two.  Every decision and every message comes from the rules of
:mod:`rmqstore.read.verify.rules` (and its ``queue_rules``, ``index_rules``): a task calls the
same pure rule the single-process walk calls, on facts it read (a unit and the record it
points at, a record and the index entries at its offset, a stray unit and what lies where
it points) plus the small metadata of its store (where segments and damaged regions lie,
queue bounds, index headers).  The per-file reads run the local driver's own code in the
task (:meth:`~rmqstore.read.verify.local.Verifier.walk_segment`,
:meth:`~rmqstore.read.verify.local.Verifier.load_queue`,
:meth:`~rmqstore.read.verify.local.Verifier.check_index_file`), and the driver subclass of
:class:`~rmqstore.read.verify.local.Verifier` answers the single-process walk's questions (how
did this segment end?  is the rest of the file zero?) from the task summaries.  So the
reports are *equal*: the same problems with the same messages, the same counters.

Order and the per-kind cap.  The single-process report lists problems in the order its walk
finds them, and at most ``max_problems_per_kind`` of a kind (the rest are counted in
``suppressed``), so the order decides which are listed.  Here every problem is stamped with
the place the sequential walk would find it at -- (phase, then: queue directory order;
segment start for file checks; log offset and the check's rank within one record; queue
then unit number; first index entry at an offset) -- and at the end the problems are sorted
by stamp and the cap is applied in that order.  The list is therefore the same list, in
the same order.

Several stores run together: every row carries the store's number (``sid``), so each
phase is one Spark job for all of them.  Reading never writes to a store (read-only maps).

This module is the driver; what runs in tasks -- the per-file reads, the stitching of a
segment's ranges, the partition functions of the joins -- is :mod:`rmqstore.spark.verify_tasks`.
"""

from __future__ import annotations

import os
from collections import Counter
from contextlib import ExitStack
from typing import Callable

from ..files import store_paths as sp
from ..files.store_dir import grid_problem, parse_file_name, readable_store_files
from ..files.store_sizes import StoreSizes
from ..format.sysflag import INDEX_ENTRY_TYPES, QUEUE_UNIT_TYPES
from ..read.verify import DETAIL_CAP, ERROR, Verifier, VerifyReport, prepare
from ..read.verify import index_rules as ir
from ..read.verify import queue_rules as qr
from ..read.verify.files import MappedFile, QueueView
from .commitlog_source import DEFAULT_SPLIT
from .verify_tasks import (ENTRIES_SCHEMA, NO_CAP, RECORD_FACTS_SCHEMA, UNITS_SCHEMA, StoreContext, index_task,
                           merge_ranges, merge_unbacked, queue_gap_rows, queue_task, range_task, record_index_rows, stray_unit_rows,
                           stitch_ranges, unbacked_record_rows, unit_match_rows, unresolved_entry_rows)

__all__ = ["verify", "RECORD_FACTS_SCHEMA", "UNITS_SCHEMA", "ENTRIES_SCHEMA"]

_DISPATCHED = QUEUE_UNIT_TYPES  # (the rule of rmqstore.format.sysflag.gets_queue_unit, as a column test)
_LAST = 1 << 80  # sorts after every offset
_TASK_BYTES = 256 << 20  # file bytes per task, about


# -- the driver side of one store -------------------------------------------------------------------

class _SparkVerifier(Verifier):
    """The single-process verifier with its per-file walks answered from task summaries."""

    def __init__(self, root: str, sizes: StoreSizes, cap: int, prepared: list):
        super().__init__(root, sizes, None, NO_CAP)  # the cap is applied at the end, in the walk's order
        self.final_cap, self.prepared = cap, prepared
        self.segment_results: dict[str, dict] = {}
        self.index_results: dict[str, dict] = {}
        self.stamp: tuple = (0,)  # where the sequential walk would be now
        self.keys: list[tuple] = []

    def add(self, kind, path, offset, message, severity=ERROR) -> None:
        super().add(kind, path, offset, message, severity)
        self.keys.append(self.stamp + (len(self.keys),))

    def replay(self, problems) -> None:
        for p in problems:
            self.add(p.kind, p.path, p.offset, p.message, p.severity)

    def finalize(self) -> None:
        """Problems in the sequential walk's order, with its per-kind cap."""
        counts: Counter = Counter()
        kept, suppressed = [], {}
        for _, p in sorted(zip(self.keys, self.report.problems), key=lambda kp: kp[0]):
            key = p.kind if p.severity == ERROR else f"warning:{p.kind}"
            counts[key] += 1
            if counts[key] > self.final_cap:
                suppressed[key] = suppressed.get(key, 0) + 1
            else:
                kept.append(p)
        self.report.problems = self.prepared + kept
        self.report.suppressed = suppressed

    def open(self, path: str):
        start = parse_file_name(os.path.basename(path))
        if sp.is_commitlog_dir(os.path.dirname(path)) and start is not None:
            self.stamp = (4, start, -1)  # a segment's file checks come before its records
        return super().open(path)

    def nonzero_from(self, f: MappedFile, pos: int) -> int | None:
        res = self.segment_results.get(f.rel)
        if res is None:  # no task could read it: ask the file here
            return super().nonzero_from(f, pos)
        return res["nonzero_from_0"] if pos == 0 else res["nonzero_after_end"]

    def walk_segment(self, start: int, f: MappedFile, seg_size: int):
        res = self.segment_results.get(f.rel)
        if res is None:
            return super().walk_segment(start, f, seg_size)
        for p in res["problems"]:
            self.stamp = (4, start + (p.offset or 0), 0)
            self.add(p.kind, p.path, p.offset, p.message, p.severity)
        self.stamp = (4, start + f.size, -1)  # what follows the last segment comes after all its records
        self.report.records += res["records"]
        self.report.blanks += res["blanks"]
        self.corrupt_regions.extend(res["corrupt_regions"])
        self.max_store_ts = max(self.max_store_ts, res["max_ts"])
        if res["data_end"] is not None:
            self.data_end = res["data_end"]
        return res["state"], res["at"]

    def check_index_file(self, ix: ir.IndexFileFacts, f: MappedFile, slots: int, num: int) -> None:
        res = self.index_results.get(ix.rel)
        if res is None:
            return super().check_index_file(ix, f, slots, num)
        self.replay(res["problems"])
        ix.usable = res["usable"]
        self.report.entries += res["entries"]

    def context(self) -> StoreContext:
        return StoreContext(
            self.root, self.sizes, self.cq_ext,
            {key: (q.rel, q.min, q.max) for key, q in self.queues.items()},
            list(self.index_files), [(start, f.rel, f.size) for start, f in self.segments],
            list(self.corrupt_regions), self.data_end, self.log_start_or_none(), self.cq_horizon,
            set(self.reported_units))


# -- the run over several stores ------------------------------------------------------------------------

def _add_sorted(v: _SparkVerifier, phase: int, rows) -> None:
    """Add problems found in tasks, each at the place of the sequential walk it was found at."""
    for _, order, i, p in rows:
        v.stamp = (phase, *order, i)
        v.add(p.kind, p.path, p.offset, p.message, p.severity)


class _Run:
    def __init__(self, spark, verifiers: list[_SparkVerifier], split: int):
        self.spark, self.sc, self.vs, self.split = spark, spark.sparkContext, verifiers, split
        self.cached = []

    def _tasks(self, fn, specs, sizes: list[int]):
        """Run ``fn`` on every spec; specs are grouped into partitions of about ``_TASK_BYTES`` of files
        (at least one per core when there are that many specs)."""
        parts = min(len(specs), max(self.sc.defaultParallelism, -(-sum(sizes) // _TASK_BYTES))) or 1
        rdd = self.sc.parallelize(specs, parts).map(fn).persist()
        self.cached.append(rdd)
        return rdd

    def _frame(self, rdd, schema: str):
        return self.spark.createDataFrame(rdd, schema)

    def _persist(self, df):
        df = df.persist()
        self.cached.append(df)
        return df

    def run(self, progress) -> list[VerifyReport]:
        steps = [self.store_files, self.load_queues, self.load_index, self.walk_commitlog, self.record_checks,
                 self.forward, self.reverse, self.unresolved_entries, self.finish]
        with ExitStack() as stack:
            for v in self.vs:
                stack.enter_context(v.stack)
            try:
                for i, step in enumerate(steps):
                    step()
                    if progress is not None:
                        progress(i + 1, len(steps))
            finally:
                for c in self.cached:
                    c.unpersist()
        return [v.report for v in self.vs]

    def store_files(self) -> None:
        for v in self.vs:
            v.stamp = (1,)
            v.check_store_files()

    # -- consume queues: one task per queue directory -------------------------------------------
    def load_queues(self) -> None:
        specs = []
        for sid, v in enumerate(self.vs):
            base = sp.consume_queue_root(v.root)
            if os.path.isdir(base):
                v.stamp = (2, len(specs), 0)  # odd directory entries come before the queue after them
                for topic, qid, qdir in v.queue_dirs(base):
                    specs.append((sid, len(specs), v.root, v.sizes, topic, qid, qdir))
                    v.stamp = (2, len(specs), 0)
        rdd = self._tasks(queue_task, specs, [_dir_bytes(s[-1]) for s in specs])
        for sid, qorder, res, _ in sorted(rdd.map(lambda r: r[:3] + (None,)).collect(), key=lambda r: r[1]):
            v = self.vs[sid]
            v.stamp = (2, qorder, 1)
            v.replay(res["problems"])
            if res["ok"]:
                topic, qid = specs[qorder][4:6]
                q = QueueView(topic, qid, res["rel"])
                q.min, q.max, q.horizon = res["min"], res["max"], res["horizon"]
                v.queues[(topic, qid)] = q
                v.report.units += res["units"]
                v.reported_units.update(res["reported"])
        for v in self.vs:
            v.report.queues = len(v.queues)
            v.cq_horizon = max((q.horizon for q in v.queues.values()), default=-1)
        self.units = self._persist(self._frame(rdd.flatMap(lambda r: r[3]), UNITS_SCHEMA))

    # -- index: one task per index file ------------------------------------------------------------
    def load_index(self) -> None:
        specs = []
        for sid, v in enumerate(self.vs):
            d = sp.index_dir(v.root)
            if v.sizes.slots and os.path.isdir(d):
                specs += [(sid, v.root, v.sizes, f.path) for f in readable_store_files(d, "index").files]
        rdd = self._tasks(index_task, specs, [_file_bytes(s[-1]) for s in specs])
        for sid, rel, res, _ in rdd.map(lambda r: r[:3] + (None,)).collect():
            if res is not None:
                self.vs[sid].index_results[rel] = res
        for v in self.vs:
            v.stamp = (3,)
            v.load_index()
        numbers = {(sid, ix.rel): number for sid, v in enumerate(self.vs) for number, ix in enumerate(v.index_files)}
        rows = rdd.flatMap(lambda r: [(r[0], phy, numbers[(r[0], r[1])], n, h, td) for phy, n, h, td in r[3]]
                           if (r[0], r[1]) in numbers else [])
        self.entries = self._persist(self._frame(rows, ENTRIES_SCHEMA))

    # -- commitlog: one task per segment, the chain between segments on the driver ---------------------
    def walk_commitlog(self) -> None:
        specs = []
        for sid, v in enumerate(self.vs):
            cl = sp.commitlog_dir(v.root)
            if v.sizes.commitlog and v.sizes.commitlog > 8 and os.path.isdir(cl):
                for f in readable_store_files(cl).files:
                    if grid_problem(f.offset, v.sizes.commitlog) is not None:
                        continue  # reported by the walk on the driver, never read
                    specs += [(sid, v.root, v.sizes, bool(v.index_files), f.path, a, a + self.split)
                              for a in range(0, max(f.size, 1), self.split)]
        rdd = self._tasks(range_task, specs, [s[-1] - s[-2] for s in specs])
        by_segment: dict[tuple[int, str], list] = {}
        for sid, rel, a, res, _ in rdd.map(lambda r: r[:4] + (None,)).collect():
            if res is not None:
                by_segment.setdefault((sid, rel), []).append((a, res))
        taken, again = set(), []
        for (sid, rel), got in by_segment.items():
            ranges = [res for _, res in sorted(got, key=lambda g: g[0])]
            which = stitch_ranges(ranges)
            if which is None:
                again.append(next(s for s in specs if s[0] == sid and self.vs[sid].rel(s[4]) == rel and s[5] == 0))
                continue
            taken.update((sid, rel, sorted(got, key=lambda g: g[0])[i][0]) for i in which)
            self.vs[sid].segment_results[rel] = merge_ranges(ranges, which)
        facts = rdd.filter(lambda r: (r[0], r[1], r[2]) in taken).flatMap(lambda r: r[4])
        if again:  # damage at a range boundary: those segments walked whole, from position 0
            whole = self._tasks(range_task, [s[:5] + (0, 1 << 62) for s in again], [0] * len(again))
            for sid, rel, _, res, _ in whole.map(lambda r: r[:4] + (None,)).collect():
                if res is not None:
                    self.vs[sid].segment_results[rel] = merge_ranges([res], [0])
            facts = facts.union(whole.flatMap(lambda r: r[4]))
        for v in self.vs:
            v.walk_commitlog()
        self.records = self._persist(self._frame(facts, RECORD_FACTS_SCHEMA))
        self.ctxs = [v.context() for v in self.vs]

    # -- what the sequential walk checks at each record --------------------------------------------------
    def record_checks(self) -> None:
        from pyspark.sql import functions as F

        r, u = self.records.alias("r"), self.units.alias("u")
        dispatched = r.where(F.col("r.txn").isin(*_DISPATCHED))
        matched = dispatched.join(u, (F.col("r.sid") == F.col("u.sid")) & (F.col("r.topic") == F.col("u.topic"))
                                  & (F.col("r.qid") == F.col("u.qid")) & (F.col("r.qo") == F.col("u.n"))
                                  & (F.col("r.phys") == F.col("u.offset")))
        self.matched = self._persist(matched.select("r.sid", "r.topic", "r.qid", "u.n", "r.phys"))
        ctxs = self.ctxs
        # a match that disagrees (size, tags code)
        out = matched.where((F.col("u.usize") != F.col("r.size")) | (F.col("u.tags") != F.col("r.want"))) \
            .select("r.sid", "r.phys", "r.rel", "r.pos", "r.topic", "r.qid", "u.n", "u.offset", "u.usize", "u.tags",
                    "r.size", "r.want").rdd.mapPartitions(lambda it: unit_match_rows(ctxs, it))
        # queue offsets per queue in log order: repartitioned by queue, sorted by offset, streamed
        by_queue = dispatched.select("sid", "topic", "qid", "phys", "rel", "pos", "qo") \
            .repartition("sid", "topic", "qid").sortWithinPartitions("sid", "topic", "qid", "phys")
        out = out.union(by_queue.rdd.mapPartitions(lambda it: queue_gap_rows(ctxs, it)))
        # index entries at each record, and keys without an entry
        if any(v.index_files for v in self.vs):
            out = out.union(self._record_index_rows())
        rows = []
        for sid, tag, *rest in out.collect():
            if tag == "reported":
                self.vs[sid].reported_units.add(rest[0])
            else:
                rows.append((sid, tag, *rest))
        self._add_rows(4, rows)

    def _record_index_rows(self):
        from pyspark.sql import functions as F

        at = self.entries.groupBy("sid", "phy").agg(
            F.sort_array(F.collect_list(F.struct("fnum", "n", "h", "td"))).alias("entries"))
        in_range = F.lit(False)
        for sid, v in enumerate(self.vs):
            lo, hi = v.index_range
            if v.index_files and lo is not None:
                in_range = in_range | ((F.col("r.sid") == sid) & (F.col("r.phys") >= lo) & (F.col("r.phys") < hi))
        joined = self.records.alias("r").join(at.alias("e"), (F.col("r.sid") == F.col("e.sid"))
                                              & (F.col("r.phys") == F.col("e.phy")), "left")
        cand = joined.where(F.col("e.entries").isNotNull()
                            | (in_range & (F.size("r.keys") > 0) & F.col("r.txn").isin(*INDEX_ENTRY_TYPES)))
        ctxs = self.ctxs
        return cand.select("r.sid", "r.phys", "r.rel", "r.pos", "r.topic", "r.txn", "r.ts", "r.keys",
                           "e.entries").rdd.mapPartitions(lambda it: record_index_rows(ctxs, it))

    def _add_rows(self, phase: int, rows) -> None:
        by_store: dict[int, list] = {}
        for sid, tag, *rest in rows:
            by_store.setdefault(sid, []).append((tag, *rest))
        for sid, got in by_store.items():
            _add_sorted(self.vs[sid], phase, got)

    # -- units that matched no record ----------------------------------------------------------------------
    def forward(self) -> None:
        from pyspark.sql import functions as F

        key = ["sid", "topic", "qid", "n"]
        left = self.units.join(self.matched.select(*key), key, "left_anti") \
            .where((F.col("offset") >= 0) & (F.col("usize") > 0))
        target = self.records.select(F.col("sid").alias("tsid"), F.col("phys").alias("tphys"), "rel", "pos",
                                     F.col("topic").alias("ttopic"), F.col("qid").alias("tqid"), "qo", "sys_flag",
                                     F.col("txn").isin(*_DISPATCHED).alias("dispatched"))
        backed = self.matched.select(F.col("sid").alias("msid"), F.col("phys").alias("mphys"))
        joined = left.join(target, (left["sid"] == target["tsid"]) & (left["offset"] == target["tphys"]), "left") \
            .join(backed, (F.col("tsid") == F.col("msid")) & (F.col("tphys") == F.col("mphys")), "left")
        ctxs = self.ctxs
        out = joined.rdd.mapPartitions(lambda it: stray_unit_rows(ctxs, it)).collect()
        self._sort_out(out, 6, qr.expired_units,
                       {"pointed": "forward_pointed", "blamed": "blamed_records", "reported": "reported_units"})
        self.ctxs = [v.context() for v in self.vs]
        for v, ctx in zip(self.vs, self.ctxs):
            ctx.forward_pointed = v.forward_pointed | v.blamed_records

    # -- dispatched records that no unit points at ----------------------------------------------------------
    def reverse(self) -> None:
        from pyspark.sql import functions as F

        pointed = [(sid, off) for sid, c in enumerate(self.ctxs) for off in c.forward_pointed]
        pointed_df = self._frame(self.sc.parallelize(pointed, 1), "sid int, phys bigint")
        unbacked = self.records.where(F.col("txn").isin(*_DISPATCHED)) \
            .join(self.matched.select("sid", "phys"), ["sid", "phys"], "left_anti") \
            .join(pointed_df, ["sid", "phys"], "left_anti")
        units = self.units.select("sid", "topic", "qid", F.col("n").alias("qo"), F.col("offset").alias("uoff"))
        joined = unbacked.join(units, ["sid", "topic", "qid", "qo"], "left")
        ctxs = self.ctxs
        # one job: problems pass through, missing units and undispatched records are aggregated
        out = joined.rdd.mapPartitions(lambda it: unbacked_record_rows(ctxs, it)).reduceByKey(merge_unbacked).collect()
        problems, undispatched = [], {}
        by_store: dict[int, list] = {}
        for key, (tag, value) in out:
            if tag == "problem":
                problems.append(value)
            elif tag == "missing":
                by_store.setdefault(key[1], []).append((key[2], value))
            else:
                undispatched[key[1]] = value
        self._add_rows(7, problems)
        for sid, v in enumerate(self.vs):
            v.stamp = (8,)
            groups = sorted(by_store.get(sid, []), key=lambda g: g[1][3][0])
            v.report_unbacked(dict(groups), undispatched.get(sid))

    # -- index entries that point at no record ---------------------------------------------------------------
    def unresolved_entries(self) -> None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        left = self.entries.join(self.records.select("sid", F.col("phys").alias("phy")), ["sid", "phy"], "left_anti")
        first = F.min(F.struct("fnum", "n")).over(Window.partitionBy("sid", "phy"))
        left = left.withColumn("first", first)
        ctxs = self.ctxs
        out = left.rdd.mapPartitions(lambda it: unresolved_entry_rows(ctxs, it)).collect()
        self._sort_out(out, 9, ir.expired_entries)

    def _sort_out(self, out, phase: int, report_expired, marks: dict[str, str] | None = None) -> None:
        """Rows ``(sid, tag, *rest)`` of a pointer check (units forward, index entries) back to their
        verifiers: counts of expired pointers (reported per store, by the ``report_expired`` rule),
        offsets past the end, ``marks`` (tag -> the verifier's set to add ``rest[0]`` to), and problems."""
        marks = marks or {}
        expired = [0] * len(self.vs)
        problems = []
        for sid, tag, *rest in out:
            v = self.vs[sid]
            if tag == "expired":
                expired[sid] += rest[0]
            elif tag == "past_end":
                v.past_end.append(rest[0])
            elif tag in marks:
                getattr(v, marks[tag]).add(rest[0])
            else:
                problems.append((sid, tag, *rest))
        self._add_rows(phase, problems)
        for sid, v in enumerate(self.vs):
            v.stamp = (phase, _LAST)
            v.note(report_expired(expired[sid], v.report.log_start if v.segments else 0))

    def finish(self) -> None:
        for v in self.vs:
            v.stamp = (10,)
            v.finish_log_refs()
            v.check_checkpoint()
            v.finalize()
            v.report.abort = v.abort
            v.report.log_end = v.data_end


def _file_bytes(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _dir_bytes(path: str) -> int:
    return sum(f.size for f in readable_store_files(path).files)


# -- the entry point ----------------------------------------------------------------------------------------

def verify(spark, paths, *, config=None, max_problems_per_kind: int = DETAIL_CAP, split_size: int = DEFAULT_SPLIT,
           progress: Callable[[int, int], None] | None = None):
    """Verify one store or several on Spark; equal to :func:`rmqstore.read.verify.verify` on each.

    ``paths``: a store root (or fixture folder holding ``store/``), an open
    :class:`~rmqstore.store.MessageStore`, or a list of them -- a single one returns one
    :class:`~rmqstore.read.verify.VerifyReport`, a list returns a list of reports in the same
    order.  ``config`` gives the file sizes instead of inferring them from the files.
    ``split_size``: commitlog segments are walked in byte ranges of this size (one task each).
    ``progress(done, total)`` is called after each phase.  Reading never writes to a store.
    """
    single = isinstance(paths, (str, os.PathLike)) or hasattr(paths, "root")
    verifiers = []
    for target in ([paths] if single else list(paths)):
        root, sizes, problems = prepare(target, config)
        verifiers.append(_SparkVerifier(root, sizes, max_problems_per_kind, problems))
    reports = _Run(spark, verifiers, split_size).run(progress)
    return reports[0] if single else reports
