"""The local driver of verify: one process reads the whole store and calls the rules.

:func:`verify` (what ``rmqstore verify`` runs) builds a :class:`Verifier` and runs its
phases in order: the store's folders, the consume queues, the index, the commitlog walk
(every record against its unit and its index entries, as it is met), then the units and
entries no record matched, the records no unit backs, the references past the end of the
log, and the checkpoint.  Every decision and every message comes from the rule modules
(:mod:`rmqstore.read.verify.rules`, :mod:`~rmqstore.read.verify.queue_rules`,
:mod:`~rmqstore.read.verify.index_rules`); this module reads files and keeps the state that
ties the phases together.  :mod:`rmqstore.spark.verify` subclasses :class:`Verifier` for
the small, global part of its work and answers the per-file phases from Spark tasks, so
the phases that it overrides (:meth:`Verifier.walk_segment`, :meth:`Verifier.nonzero_from`,
:meth:`Verifier.check_index_file`, :meth:`Verifier.open`, :meth:`Verifier.add`) are its
public hooks.

Nothing here writes.  :func:`verify` takes an open store (its root and sizes are used; it
does not rely on the store's in-memory positions) or a path, in which case the sizes are
inferred tolerantly from the files (:func:`rmqstore.files.store_sizes.guess_sizes`) so that a store
too damaged to open can still be examined.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections import Counter
from contextlib import ExitStack
from typing import Any, Callable

from ...files.checkpoint import read_checkpoint
from ...common.config import StoreConfig
from ...common.errors import CorruptRecordError, RmqStoreError, StoreError
from ...format.layout import INDEX_HEADER
from ...format.record import decode_record
from ...files.store_dir import (grid_problem, is_shape_error, list_names, list_store_files, queue_folders,
                                readable_store_files, resolve_store_root)
from ...files.store_sizes import StoreSizes, guess_sizes, index_size
from ...files.store_lock import lock_holder, process_command
from ...files import store_paths as sp
from . import index_rules as ir
from . import queue_rules as qr
from . import rules
from .files import EntryTable, MappedFile, QueueView, rel_path
from .logwalk import LogWalk
from .report import DETAIL_CAP, ERROR, Problem, VerifyReport

__all__ = ["verify", "prepare", "Verifier"]


class Verifier(LogWalk):
    """The state of one store's verification, and its phases (see the module doc; the commitlog
    walk is :class:`~rmqstore.read.verify.logwalk.LogWalk`)."""

    def __init__(self, root: str, sizes: StoreSizes, progress: Callable[[int, int], None] | None = None,
                 cap: float = DETAIL_CAP, native: bool | None = True):
        self.root = root
        #: the compiled bulk pass may run (a store's StoreConfig.native; RMQSTORE_PURE overrides)
        self.native = native
        self.bulk = None
        self.sizes = sizes
        self.progress = progress
        self.cap = cap
        self.report = VerifyReport(root=root)
        self._kind_counts: Counter = Counter()
        self._done = 0
        self._total = 0
        #: the open maps; closed when the run ends
        self.stack = ExitStack()
        self.segments: list[tuple[int, MappedFile]] = []
        self.seg_starts: list[int] = []
        self.log = rules.LogMap(())
        self.queues: dict[tuple[str, int], QueueView] = {}
        self.index_files: list[ir.IndexFileFacts] = []
        self.index = ir.IndexMap((), sizes.slots)
        self.index_bufs: list = []  # the maps of index_files
        self.idx_at: dict[int, list[tuple[int, int, int, int]]] = {}  # phy -> (file#, entry#, hash, time_diff)
        self.starts = array("q")  # physical offsets of every readable message record, increasing
        self.corrupt_regions: list[tuple[int, int, str, int]] = []  # (phys start, phys end, rel, pos)
        self.unbacked: list[tuple[int, str, int, tuple[str, int], int]] = []  # (phys, rel, pos, key, qo)
        self.blamed_records: set[int] = set()
        self.reported_units: set[tuple[tuple[str, int], int]] = set()
        self.forward_pointed: set[int] = set()
        self.data_end = 0  # end of the last readable record (or blank) of the log
        self.max_store_ts = 0
        self.cq_horizon = -1
        self.index_max_phy = -1  # the furthest record an index entry points at
        self.has_index = False  # an index/ directory exists: dispatched records with keys need entries
        self.unindexed: list[tuple[int, str, int]] = []  # (phys, rel, pos) dispatched, keyed, outside the index
        self.interrupted_index: str | None = None  # the newest index file, short and all zeros (skipped)
        #: end the walk at a record recovery rejects when nothing points at or past it (the whole-store
        #: walk of :func:`verify`; the byte-range walks of rmqstore.spark.verify do not know every reference)
        self.stop_at_recovered_end = False
        self.queue_offsets = rules.QueueOffsets()
        self.past_end: list[int] = []  # offsets past the end of the log that units/entries point at
        self.unclaimed_tail: int | None = None  # index in problems of an undecodable last record (no abort)
        self.abort = False
        self.live: int | None = None  # the pid of the live process holding the store's lock
        #: ConsumeQueueExt in use (enableConsumeQueueExt): tags codes <= Integer.MIN_VALUE - 1 are addresses
        self.cq_ext = os.path.isdir(os.path.join(root, "consumequeue_ext"))

    @property
    def index_range(self) -> tuple[int | None, int | None]:
        return self.index.range

    # -- bookkeeping ------------------------------------------------------------------------
    def add(self, kind: str, path: str, offset: int | None, message: str, severity: str = ERROR) -> None:
        """Record one problem (at most ``cap`` of a kind are listed; the rest are counted)."""
        key = kind if severity == ERROR else f"warning:{kind}"
        self._kind_counts[key] += 1
        if self._kind_counts[key] > self.cap:
            self.report.suppressed[key] = self.report.suppressed.get(key, 0) + 1
            return
        self.report.problems.append(Problem(kind, path, offset, message, severity))

    def note(self, *problems: Problem | None) -> None:
        """Record what a rule found (None: nothing)."""
        for p in problems:
            if p is not None:
                self.add(p.kind, p.path, p.offset, p.message, p.severity)

    def tick(self, n: int) -> None:
        self._done += n
        if self.progress is not None:
            self.progress(self._done, self._total)

    def rel(self, path: str) -> str:
        return rel_path(self.root, path)

    def exists(self, rel: str) -> bool:
        return os.path.exists(os.path.join(self.root, *rel.split("/")))

    def open(self, path: str) -> MappedFile | None:
        """One file, read-only: mapped while it is read, a bounded number at a time (closed with
        :attr:`stack`).  The system refusing it (``EMFILE``, ``EACCES``...) raises the OSError: an
        error of the run, which says nothing about the store."""
        f = MappedFile(path, self.rel(path), os.stat(path).st_size)
        self.stack.callback(f.close)
        return f

    # -- run ----------------------------------------------------------------------------------
    def run(self) -> VerifyReport:
        with self.stack:
            self._total = self._estimate_total()
            self.check_store_files()
            self.load_queues()
            self.load_index()
            self.walk_commitlog()
            self.check_units_forward()
            self.finish_reverse()
            self.finish_index()
            self.finish_log_refs()
            self.check_checkpoint()
        if self.progress is not None:
            self.progress(self._total, self._total)
        self.report.abort = self.abort
        self.report.log_end = self.data_end
        return self.report

    def _estimate_total(self) -> int:
        dirs = [(sp.commitlog_dir(self.root), "segment"), (sp.index_dir(self.root), "index")]
        dirs += [(qdir, "segment") for qdir in queue_folders(self.root)]
        return sum(f.size for d, kind in dirs for f in readable_store_files(d, kind).files)

    def store_files(self, directory: str, kind: str, what: str) -> list:
        """The files of one store folder (:func:`rmqstore.files.store_dir.list_store_files`); strays are
        reported as warnings and left alone, entries that cannot be store files as errors."""
        try:
            listing = list_store_files(directory, kind)
        except StoreError as exc:
            self.note(rules.unlistable_folder(self.rel(directory), str(exc)))
            return []
        self.note(*rules.listing_problems(listing, what, self.rel))
        return list(listing.files)

    def check_store_files(self) -> None:
        self.abort = os.path.exists(sp.abort_path(self.root))
        self.live = self.report.live = lock_holder(self.root)
        if self.live is not None:  # a running store keeps its abort file: live, not crashed
            self.note(rules.live_store(self.live, process_command(self.live), self.live == os.getpid()))
        elif self.abort:
            self.note(rules.unclean_shutdown())
        if not os.path.isdir(sp.commitlog_dir(self.root)):
            self.note(rules.not_a_store())

    # -- consume queues ---------------------------------------------------------------------------
    def load_queues(self) -> None:
        base = sp.consume_queue_root(self.root)
        if not os.path.isdir(base):
            return
        cqs = self.sizes.consume_queue
        for topic, qid, qdir in self.queue_dirs(base):
            q = QueueView(topic, qid, self.rel(qdir))
            if self.load_queue(q, qdir, cqs):
                self.queues[(topic, qid)] = q
        self.report.queues = len(self.queues)
        self.cq_horizon = max((q.horizon for q in self.queues.values()), default=-1)

    def queue_dirs(self, base: str):
        """(topic, queue id, directory) of every queue directory, in listing order; odd entries reported."""
        for topic in list_names(base):
            tdir = os.path.join(base, topic)
            if not os.path.isdir(tdir):
                self.note(qr.odd_queue_folder_entry(self.rel(tdir), topic_level=True))
                continue
            for qid in list_names(tdir):
                qdir = os.path.join(tdir, qid)
                if not (qid.isascii() and (qid.isdigit() or (qid[:1] == "-" and qid[1:].isdigit()))) \
                        or not os.path.isdir(qdir):
                    self.note(qr.odd_queue_folder_entry(self.rel(qdir), topic_level=False))
                    continue
                yield topic, int(qid), qdir

    def load_queue(self, q: QueueView, qdir: str, cqs: int | None) -> bool:
        """Read one queue's files into ``q`` (bounds, horizon, units present); False when none is usable."""
        names = self.leave_out_interrupted(
            self.store_files(qdir, "segment", "a consume-queue file (named by its 20-digit logical offset)"), cqs)
        if not names:
            return False
        if not cqs or cqs < qr.CQ_UNIT:
            self.note(*(qr.sizeless_queue_file(self.rel(sf.path)) for sf in names))
            return False
        prev_end = None
        files = []
        for sf in names:
            why = grid_problem(sf.offset, cqs)
            if why is not None:  # cannot be placed among the queue's units: not read
                self.note(qr.unplaced_queue_file(self.rel(sf.path), why))
                self.tick(sf.size)
                continue
            f = self.open(sf.path)
            if f is None:
                continue
            self.tick(f.size)
            self.note(qr.queue_file_size(f.rel, f.size, cqs),
                      *qr.queue_file_gap(q.rel, f.rel, q.topic, q.queue_id, sf.offset, prev_end, cqs))
            prev_end = sf.offset + cqs
            q.files[sf.offset] = f
            files.append((sf.offset, f))
        if not files:
            return False
        q.first_start, q.last_start = files[0][0], files[-1][0]
        decoded = []
        for i, (start, f) in enumerate(files):
            usable = min(f.size, cqs) - min(f.size, cqs) % qr.CQ_UNIT
            if i == len(files) - 1:  # up to the last written unit
                written = f.last_nonzero_end(usable)
                usable = written + (-written) % qr.CQ_UNIT
            q.checked[start] = bytearray(usable // qr.CQ_UNIT)  # the units read, not the file's size
            decoded.append((f.rel, start // qr.CQ_UNIT, f.units(usable)))
        scan = qr.scan_units(q.topic, q.queue_id, decoded)
        self.note(*scan.problems)
        self.reported_units.update(((q.topic, q.queue_id), n) for n in scan.reported)
        q.min = scan.min
        q.max = max(decoded[-1][1] + len(decoded[-1][2]), q.min)
        q.horizon = scan.horizon
        present = sum(len(units) for _, _, units in decoded)  # a missing file's units are not counted
        self.report.units += max(present - (q.min - q.first_start // qr.CQ_UNIT), 0)
        return True

    # -- index ------------------------------------------------------------------------------------
    def load_index(self) -> None:
        d = sp.index_dir(self.root)
        if not os.path.isdir(d):
            return
        self.has_index = True
        slots, num = self.sizes.slots, self.sizes.entries
        prev = None
        files = self.store_files(d, "index", "an index file (named yyyyMMddHHmmssSSS, 17 digits)")
        for sf in files:
            f = self.open(sf.path)
            if f is None:
                continue
            self.tick(f.size)
            if not slots:
                self.note(ir.sizeless_index_file(f.rel, f.size))
                continue
            # the newest file short and all zeros: its creation was interrupted (nothing was in it)
            interrupted = f.size != index_size(slots, num) and sf is files[-1] and f.first_nonzero(0) is None
            p = ir.index_file_size(f.rel, f.size, slots, num, interrupted)
            self.note(p)
            if p is not None:
                if interrupted:
                    self.interrupted_index = f.rel
                if f.size < 40 or interrupted:
                    continue
            ix = ir.IndexFileFacts.of(f.rel, INDEX_HEADER.unpack_from(f.buf))
            self.check_index_file(ix, f, slots, num)
            self.note(ir.index_file_order(ix, prev))
            self.index_files.append(ix)
            if ix.count > 1:
                prev = ix
        self.report.index_files = len(self.index_files)
        self.index = ir.IndexMap(self.index_files, slots)
        self.index_max_phy = max(self.idx_at, default=-1)

    def check_index_file(self, ix: ir.IndexFileFacts, f: MappedFile, slots: int, num: int) -> None:
        """One index file on its own; its entries are kept by the offset they point at."""
        count = ir.entry_count(ix.count, f.size, slots, num)
        entries = EntryTable(f.buf, slots, count)
        values = struct.unpack_from(f">{slots}i", f.buf, 40) if f.size >= 40 + 4 * slots else ()
        check = ir.check_index_file(ix, f.size, slots, num, entries, values)
        self.note(*check.problems)
        ix.usable = check.usable
        number = len(self.index_files)
        for n in range(1, check.usable):
            h, phy, td, _ = entries[n]
            self.idx_at.setdefault(phy, []).append((number, n, h, td))
        self.report.entries += check.usable - 1

    # -- units no record matched ------------------------------------------------------------------
    def log_start_or_none(self) -> int | None:
        return self.report.log_start if self.segments else None

    def check_units_forward(self) -> None:
        cqs = self.sizes.consume_queue
        log_start = self.report.log_start if self.segments else 0
        expired = 0
        unbacked_offsets = None
        for key, q in self.queues.items():
            for n in q.present_units(unchecked=True):
                if (key, n) in self.reported_units:
                    continue
                unit = q.unit(n, cqs)
                if unit is None:
                    continue
                offset = unit[0]
                target = None
                if unit[1] > 0 and offset >= log_start and offset < self.data_end \
                        and self.record_at(offset) is not None:
                    seg = self.segment_for(offset)
                    try:
                        rec = decode_record(seg[1].buf, offset - seg[0])
                    except CorruptRecordError:  # cannot happen: the walk decoded it
                        continue
                    if unbacked_offsets is None:
                        unbacked_offsets = {u[0] for u in self.unbacked}
                    target = (seg[1].rel, offset - seg[0], (rec.topic, rec.queue_id, rec.queue_offset), rec.sys_flag,
                              offset not in unbacked_offsets)
                expired += self.stray_unit(key, q, n, unit, target)
        self.note(qr.expired_units(expired, log_start))

    def stray_unit(self, key, q: QueueView, n: int, unit, target) -> int:
        """Unit ``n`` of ``q``, matched by no record during the walk (see :func:`queue_rules.stray_unit`);
        1 when it points before the log (expired), else 0."""
        cq_rel, upos = q.file_for(n, self.sizes.consume_queue)
        v = qr.stray_unit(cq_rel, upos, n, q.topic, q.queue_id, unit, log_start=self.log_start_or_none(),
                          data_end=self.data_end, target=target, log=self.log)
        self.apply(v, unit[0], (key, n))
        return int(v.expired)

    def apply(self, v: qr.Verdict, offset: int, unit_key=None) -> None:
        """What a reference's verdict tells the later checks."""
        self.note(*v.problems)
        if v.past_end:
            self.past_end.append(offset)
        if v.pointed:
            self.forward_pointed.add(offset)
        if v.blamed:
            self.blamed_records.add(offset)
        if v.reported:
            self.reported_units.add(unit_key)

    # -- records no unit backs --------------------------------------------------------------------------
    def finish_reverse(self) -> None:
        cqs = self.sizes.consume_queue or 6_000_000
        undispatched = []
        missing: dict[str, list] = {}
        for phys, rel, pos, key, qo in self.unbacked:
            if phys in self.forward_pointed or phys in self.blamed_records:
                continue
            if phys >= self.cq_horizon:
                undispatched.append(phys)
                continue
            q = self.queues.get(key)
            if q is not None and q.min <= qo < q.max:
                if (key, qo) in self.reported_units:
                    continue  # that unit's problem is already reported
                unit = q.unit(qo, cqs)
                if unit is not None:
                    self.note(qr.unit_points_elsewhere(phys, rel, pos, key, qo, *q.file_for(qo, cqs), unit[0]))
                    continue
            missing.setdefault(self.unit_file(key, qo), []).append((phys, rel, pos, key, qo))
        self.report_unbacked({cq_rel: (len(recs), min(r[4] for r in recs), max(r[4] for r in recs), recs[0])
                              for cq_rel, recs in missing.items()},
                             (len(undispatched), undispatched[0]) if undispatched else None)

    def unit_file(self, key: tuple[str, int], qo: int) -> str:
        """The consume-queue file (relative path) that holds unit ``qo`` of queue ``key``."""
        q = self.queues.get(key)
        return qr.unit_file(key, qo, self.sizes.consume_queue or 6_000_000, q.rel if q is not None else None)

    def report_unbacked(self, missing: dict, undispatched: tuple[int, int] | None) -> None:
        """See :func:`queue_rules.unbacked_problems`."""
        self.note(*qr.unbacked_problems(missing, undispatched,
                                        bounds={k: (q.min, q.max) for k, q in self.queues.items()},
                                        exists=self.exists, horizon=self.cq_horizon,
                                        cq_size=self.sizes.consume_queue or 6_000_000, where=self.log.where))

    # -- index entries no record matched ----------------------------------------------------------------
    def finish_index(self) -> None:
        expired = 0
        for phy, entries in self.idx_at.items():
            for fnum, n, _h, _td in entries:
                expired += self.unresolved_entry(phy, fnum, n)
        self.note(ir.expired_entries(expired, self.report.log_start if self.segments else 0))
        self.note(*ir.unindexed_problems(self.index, self.unindexed, interrupted=self.interrupted_index,
                                         abort=self.abort, cq_horizon=self.cq_horizon))

    def unresolved_entry(self, phy: int, fnum: int, n: int) -> int:
        """An index entry that points at no readable record: why (1 when it expired, else 0)."""
        v = ir.unresolved_entry(self.index, phy, fnum, n, log_start=self.log_start_or_none(), data_end=self.data_end,
                                log=self.log)
        self.apply(v, phy)
        return int(v.expired)

    def finish_log_refs(self) -> None:
        """Several references past the end: the commitlog lost its tail (a missing or cut file).

        With none at all, undecodable bytes where the log's last file stops are not a lost
        record but what a recovery leaves: it cuts a torn write off by position and does not
        zero it, and a later put shorter than the torn record leaves its rest after the end.
        RocketMQ's recovery stops there and the next put overwrites it, so that is a warning.
        """
        if self.unclaimed_tail is not None and not self.past_end:
            self.recast(self.unclaimed_tail, rules.CUT_OFF_TAIL)
        self.note(rules.log_short(self.past_end, self.data_end, self.sizes.commitlog, self.exists))

    # -- checkpoint -----------------------------------------------------------------------------------
    def check_checkpoint(self) -> None:
        path = sp.checkpoint_path(self.root)
        facts: dict[str, Any] = {"present": os.path.lexists(path), "records": self.report.records,
                                 "max_store_ts": self.max_store_ts}
        if facts["present"]:
            try:
                facts["size"] = os.stat(path).st_size
            except OSError as exc:  # a dangling link, a loop
                if not is_shape_error(exc):
                    raise
                facts["size"] = None
            facts["is_file"] = os.path.isfile(path)
            if facts["size"] is not None and facts["is_file"]:
                try:
                    facts["value"] = read_checkpoint(path)
                except RmqStoreError as exc:
                    facts["error"] = str(exc)
        self.note(*rules.checkpoint_problems(**facts))


def verify(target, *, progress: Callable[[int, int], None] | None = None, config: StoreConfig | None = None,
           max_problems_per_kind: int = DETAIL_CAP, native: bool | None = None) -> VerifyReport:
    """Check a store; return a :class:`~rmqstore.read.verify.report.VerifyReport` (never raises for damaged files).

    ``target`` is an open :class:`~rmqstore.store.MessageStore` (its root and config are
    used) or a path (a store root or a fixture folder holding ``store/``).  For a path the
    store is first opened read-only, as a check of its own (a refusal is reported as an
    ``unopenable`` problem), and its sizes are inferred from the files.  ``progress(done,
    total)`` is called with bytes of files examined.  ``native`` False keeps the commitlog walk on
    the pure rules record by record (None: the config's ``native``, else True; ``RMQSTORE_PURE``
    overrides), True lets the bulk pass (:mod:`rmqstore.read.verify.bulk`) run.  Raises
    :class:`~rmqstore.common.errors.StoreError` only when ``target`` is not a directory, and the OSError
    of a system that refuses the run a file (``EMFILE``, ``EACCES``, ``EIO``...: an error of the
    run, not a problem of the store; see :func:`rmqstore.files.store_dir.is_shape_error`).  Files are
    mapped a bounded number at a time (:mod:`rmqstore.files.read_maps`), whatever the store's size.
    """
    root, sizes, problems = prepare(target, config)
    if native is None:
        native = getattr(config or getattr(target, "config", None), "native", True)
    v = Verifier(root, sizes, progress, max_problems_per_kind, native=native)
    v.stop_at_recovered_end = True
    v.report.problems.extend(problems)
    return v.run()


def prepare(target, config: StoreConfig | None = None) -> tuple[str, StoreSizes, list[Problem]]:
    """The store root, its sizes, and the ``unopenable`` problem of a path that open_store refuses."""
    problems: list[Problem] = []
    if hasattr(target, "root") and hasattr(target, "config"):
        return str(target.root), StoreSizes.of(config or target.config), problems
    root = resolve_store_root(target)
    if config is not None:
        return root, StoreSizes.of(config), problems
    sizes = guess_sizes(root)
    from ...store import open_store

    try:
        store = open_store(root, read_only=True)
    except RmqStoreError as exc:
        problems.append(Problem("unopenable", ".", None, f"open_store(read_only=True) refuses this store: {exc}"))
    else:
        store.close()
    return root, sizes, problems
