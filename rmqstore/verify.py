"""Verify a store: every byte that can be checked against another, read-only.

A RocketMQ store holds one fact several times: a message's place in its queue is written
in the commitlog record (topic, queue id, queue offset), again in the consume-queue unit
that points at the record, and its keys once more in the index.  Nothing but the body is
protected by a checksum, so damage shows up as a *disagreement* between copies.  This
module walks all of them and reports each disagreement as a :class:`Problem` that names
where (a file relative to the store root, and a byte position in it) and what.

What is checked, and why:

store folders (:func:`rmqstore.store_dir.list_store_files`, the listing every reader uses)
    * only names of exactly 20 ASCII digits are segments (17 for index files); anything
      else is a stray, reported as a warning and never read; an entry with such a name
      that cannot be a file of the store (a dangling symlink, a symlink loop, a directory,
      a file over 2**31 - 1 bytes, a name past the largest offset) is an error and not read;
    * a segment whose name is not a multiple of the file size cannot be placed among the
      others: an error, and it is not read -- so what verify reads, and the memory and time
      it takes, follow the files present, never the offsets their names claim;

commitlog (``commitlog/<20-digit start offset>``)
    * files are contiguous: each is named by the offset where the previous one ended, all
      have the segment size -- RocketMQ maps a global offset to a file by division, so a
      missing or odd-sized file makes later offsets unreadable (``MappedFileQueue#doLoad``
      even refuses to start); the segment size is told by the files that hold a record, so
      a file of random bytes alone in ``commitlog/`` is damage, not a store;
    * the size chain: a file's first record is at position 0, each record starts where the
      previous one ended, and a file ends in an END_OF_FILE blank that reaches exactly its
      end -- the only way recovery and dispatch find records is by following sizes; a
      file that ends without a blank was cut short (a record always leaves room for one);
    * every record decodes (magic, lengths consistent with the total size, UTF-8), its
      PHYSICALOFFSET field equals where it lies, and its body CRC matches -- recovery
      (``checkMessageAndReturnSize`` with ``checkCRCOnRecover``) truncates the log at the
      first record that fails any of these, so everything after it would be lost;
    * per queue, queue offsets in log order are consecutive (the put lock hands them out
      one by one);
    * after the end of the log (8 zero bytes) nothing but zeros follows; later files with
      data mean a hole, all-zero later files are pre-allocated (a warning).

consume queues (``consumequeue/<topic>/<queueId>/<20-digit logical offset>``)
    * file sizes and names as for the commitlog; units are valid (offset >= 0, size > 0)
      up to the last written one, leading pre-blank units aside;
    * every unit in [min, max) points at a record that decodes, whose topic, queue id and
      queue offset are this queue and this unit's number, whose size is the unit's size and
      whose tags code is the unit's (Java hash of TAGS, the delivery time on
      ``SCHEDULE_TOPIC_XXXX``; with ``consumequeue_ext/`` present, codes at or below
      ``Integer.MIN_VALUE - 1`` are ConsumeQueueExt addresses and not compared); units point at increasing offsets and never past the end
      of the commitlog;
    * the other way round: every dispatchable record (not a prepared or rolled-back
      transaction) below the *dispatch horizon* -- the end of the furthest record any queue
      knows -- has its unit.  Records after the horizon are not yet dispatched (a warning:
      the next start re-dispatches them); records before it without a unit are lost to
      consumers.

index (``index/<yyyyMMddHHmmssSSS>``)
    * file size fits the slot and entry counts; the header's counts are in range and its
      hash-slot count equals the number of used slots; begin <= end;
    * every entry's chain link points to an older entry of the same slot, every entry is
      reachable from its slot, every slot points at an entry of that slot;
    * every entry points at a record whose ``topic#key`` (each KEYS token, UNIQ_KEY) hashes
      to the entry's hash, and whose store time matches the entry's time difference;
      entries are in log order and files follow each other;
    * the other way round: every indexable record between the first file's begin offset
      and the last file's end offset has an entry for each of its keys, and so does every
      one below the dispatch horizon (dispatch indexes a record with its unit): keyed
      records outside every index file are reported once per stretch -- what a crash
      recovery that drops the newest index files (RocketMQ's) leaves unfindable by key;
    * the newest index file short and all zeros is an interrupted creation (a warning).

other files
    ``checkpoint`` must be the 4096-byte file whose first 24 bytes hold three timestamps;
    ``abort`` present means the last run did not shut down cleanly (a warning; see below).

Blame.  When a unit and a record disagree, the side that disagrees with the rest is
blamed: a record whose queue fields are claimed by no unit while a unit points at it has a
damaged header (the problem names the commitlog file), a unit that points at a record
claimed by another unit is damaged (the problem names the consume-queue file).

Severity.  ``error`` is damage: a consumer or a recovery would lose or misread data.
``warning`` is a state a RocketMQ start repairs or that is normal after a crash: the abort
file, pre-allocated empty segments, records not yet dispatched, non-zero bytes after the
end of the log (left by a torn write or by RocketMQ's own truncation), a last record
that does not decode when the abort file says the writer died (a torn tail: recovery cuts
it off), and one that does not decode after a clean shutdown while no unit or index entry
points at or past it (the rest of a torn write a recovery cut off, after a shorter put).
A record that decodes but fails recovery's check (body CRC, PHYSICALOFFSET) while nothing
points at or past it is where recovery ends the log: the walk stops there with a warning
(what a power cut leaves after a recovery and a clean shutdown), and the records after it
are not "undispatched" -- no start dispatches them.
A first commitlog file that does not start at 0 is indistinguishable from expired files
and only noted.

Nothing here writes: files are opened ``O_RDONLY`` and mapped ``ACCESS_READ``; no file is
created, truncated, locked or deleted.  :func:`verify` takes an open store (its root and
sizes are used; it does not rely on the store's in-memory positions) or a path, in which
case the sizes are inferred tolerantly from the files so that a store too damaged to open
can still be examined.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from array import array
from collections import Counter
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

from .checkpoint import read_checkpoint
from .config import StoreConfig
from .crc import crc32
from .dispatch import tags_code_of
from .errors import CorruptRecordError, RmqStoreError, StoreError
from .index import index_key_hash
from .layout import CHECKPOINT_FILE_SIZE, INDEX_ENTRY, INDEX_HEADER
from .properties import KEY_SEPARATOR, KEYS, UNIQ_KEY, string_to_properties
from .record import BlankRecord, decode_record
from .store_dir import (FolderListing, data_extents, grid_problem, holds_record, list_store_files,
                        resolve_store_root)
from .sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE,
                      TRANSACTION_ROLLBACK_TYPE)

__all__ = ["Problem", "VerifyReport", "verify", "KINDS", "ERROR", "WARNING"]

ERROR = "error"
WARNING = "warning"

#: every problem kind, with what it means
KINDS = {
    # the store as a whole
    "not_a_store": "the directory holds no commitlog/ directory",
    "unopenable": "open_store refused the store (the message says why)",
    "unclean_shutdown": "the abort file is present: the last run did not shut down cleanly",
    "unreadable_file": "a file cannot be opened or mapped",
    "unexpected_file": "a file or directory that is not part of a store layout",
    # commitlog
    "file_size": "a file's size differs from the size its kind of file has in this store",
    "file_name": "a file's name cannot place it (not a multiple of the file size, or past the largest offset)",
    "missing_segment": "a commitlog file is missing between two others",
    "overlapping_segment": "a commitlog file starts before the previous one ends",
    "undecodable_record": "bytes where a record must start do not decode",
    "torn_tail": "the last record of the log does not decode, after a crash (recovery cuts it off)",
    "blank_size": "an END_OF_FILE blank does not reach the end of its file",
    "no_blank": "a file ends without an END_OF_FILE blank (cut short?)",
    "physical_offset": "a record's PHYSICALOFFSET field differs from where it lies",
    "body_crc": "a record's body does not match its BODYCRC",
    "queue_offset_gap": "queue offsets of one queue are not consecutive in log order",
    "log_hole": "the log ends (zeros) but a later file holds data",
    "garbage_after_end": "non-zero bytes after the end of the log in its last file",
    "preallocated_segment": "an all-zero commitlog file after the end of the log",
    "log_start": "the commitlog does not start at offset 0 (expired or missing first files)",
    "log_short": "consume queues or the index point past the end of the commitlog",
    "record_header": "a record's topic/queue/queue offset/type disagree with the unit pointing at it",
    # consume queues
    "missing_cq_file": "a consume-queue file is missing",
    "invalid_unit": "a consume-queue unit before the queue's end is not valid",
    "unit_order": "consume-queue units do not point at increasing offsets",
    "unit_target": "a unit does not point at the start of a readable record",
    "unit_mismatch": "a unit disagrees with the record it points at (queue, size, tags)",
    "record_without_unit": "a dispatched record has no consume-queue unit",
    "undispatched": "records after the dispatch horizon have no unit yet (a start re-dispatches them)",
    "expired_refs": "units or index entries point before the start of the commitlog",
    # index
    "index_header": "an index file's header is inconsistent",
    "index_slot": "an index slot does not point at an entry of its own slot",
    "index_chain": "an index entry's chain link is broken",
    "index_entry": "an index entry disagrees with the record it points at",
    "index_order": "index entries or files are not in log order",
    "index_missing_key": "an indexed record has no entry for one of its keys",
    # checkpoint
    "checkpoint": "the checkpoint file is missing, unreadable or of the wrong size",
    "checkpoint_ahead": "the checkpoint names a time after the newest record",
}

_ZERO8 = bytes(8)
_CHUNK = 1 << 20
_ZERO_CHUNK = bytes(_CHUNK)
_UNIT = struct.Struct(">qiq")
_ENTRY = INDEX_ENTRY.struct
_HDR = INDEX_HEADER
_INT_MAX = 0x7FFFFFFF
_PRE_BLANK = (0, _INT_MAX, 0)
_EXT_ADDR_MAX = -(2**31) - 1  # ConsumeQueueExt.MAX_ADDR: tags codes at or below are ext addresses
_CQ_UNIT = 20
_DETAIL_CAP = 100  # problems of one kind listed; more are counted in ``suppressed``


@dataclass(frozen=True)
class Problem:
    """One finding: ``kind`` (see :data:`KINDS`), where (``path`` relative to the store root,
    ``offset`` a byte position in that file or None), what (``message``) and how bad."""

    kind: str
    path: str
    offset: int | None
    message: str
    severity: str = ERROR

    @property
    def where(self) -> str:
        return self.path if self.offset is None else f"{self.path}:{self.offset}"

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message} [{self.kind}]"


@dataclass
class VerifyReport:
    """What was checked and what was found."""

    root: str
    segments: int = 0
    commitlog_bytes: int = 0
    log_start: int = 0
    log_end: int = 0
    records: int = 0
    blanks: int = 0
    queues: int = 0
    units: int = 0
    index_files: int = 0
    entries: int = 0
    abort: bool = False
    problems: list[Problem] = field(default_factory=list)
    suppressed: dict[str, int] = field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != ERROR]

    @property
    def suppressed_errors(self) -> int:
        return sum(n for k, n in self.suppressed.items() if not k.startswith("warning:"))

    @property
    def ok(self) -> bool:
        """True when no damage was found (warnings allowed)."""
        return not self.errors and not self.suppressed_errors

    def summary(self) -> str:
        if self.ok:
            w = len(self.warnings)
            return "OK: no damage found" + (f" ({w} warning{'s' * (w != 1)})" if w else "")
        n = len(self.errors) + self.suppressed_errors
        return f"DAMAGED: {n} problem{'s' * (n != 1)} found"

    def to_dict(self) -> dict:
        return {
            "root": self.root, "ok": self.ok, "summary": self.summary(),
            "checked": {"segments": self.segments, "commitlogBytes": self.commitlog_bytes,
                        "logStart": self.log_start, "logEnd": self.log_end, "records": self.records,
                        "blanks": self.blanks, "queues": self.queues, "units": self.units,
                        "indexFiles": self.index_files, "entries": self.entries},
            "abort": self.abort,
            "errors": len(self.errors) + self.suppressed_errors,
            "warnings": len(self.warnings) + sum(n for k, n in self.suppressed.items() if k.startswith("warning:")),
            "problems": [p.to_dict() for p in self.problems],
            "suppressed": dict(self.suppressed),
        }


# -- sizes ------------------------------------------------------------------------------------

@dataclass
class _Sizes:
    commitlog: int | None = None
    consume_queue: int | None = None
    slots: int | None = None
    entries: int | None = None
    delay_levels: dict = field(default_factory=dict)


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _file_size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _pick_size(sizes: list[int], prefer=None, first: int | None = None) -> int | None:
    """The most common size (ties: one ``prefer`` accepts, then the first file's, then the largest)."""
    if not sizes:
        return None
    counts = Counter(sizes)
    best = max(counts.values())
    tied = [s for s, c in counts.items() if c == best]
    if prefer is not None and any(prefer(s) for s in tied):
        tied = [s for s in tied if prefer(s)]
    if first in tied:
        return first
    return max(tied)


def _files(directory: str, kind: str = "segment") -> FolderListing:
    """:func:`rmqstore.store_dir.list_store_files`, with a folder that cannot be listed as empty."""
    try:
        return list_store_files(directory, kind)
    except StoreError:
        return FolderListing(directory)


def _queue_file_dirs(root: str):
    """Every directory two levels under ``consumequeue/`` (where consume-queue files are)."""
    base = os.path.join(root, "consumequeue")
    for topic in _listdir(base):
        for qid in _listdir(os.path.join(base, topic)):
            yield os.path.join(base, topic, qid)


def _infer_sizes(root: str) -> _Sizes:
    """Sizes from the files, tolerant of odd ones (which the checks then report).  The commitlog
    size is told only by files that hold a record (:func:`rmqstore.store_dir.holds_record`)."""
    sizes = _Sizes(delay_levels=StoreConfig().delay_level_table())
    seg = [f.size for f in _files(os.path.join(root, "commitlog")).files if f.size > 8 and holds_record(f.path, f.size)]
    if seg:
        sizes.commitlog = _pick_size(seg, first=seg[0])
    cq = [f.size for qdir in _queue_file_dirs(root) for f in _files(qdir).files]
    sizes.consume_queue = _pick_size(cq, prefer=lambda s: s > 0 and s % _CQ_UNIT == 0)
    idx = [f.size for f in _files(os.path.join(root, "index"), "index").files]
    fits = [s for s in idx if s > 40 + 84 - 1 and (s - 40) % 84 == 0]
    size = _pick_size(fits)
    if size is not None:
        sizes.slots = (size - 40) // 84
        sizes.entries = 4 * sizes.slots
    return sizes


def _sizes_of(config: StoreConfig) -> _Sizes:
    return _Sizes(config.mapped_file_size_commit_log, config.mapped_file_size_consume_queue,
                  config.max_hash_slot_num, config.max_index_num, config.delay_level_table())


# -- helpers -----------------------------------------------------------------------------------

def _data_in(start: int, end: int, extents) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` that hold data (``extents``: a file's data regions, None = all)."""
    if extents is None:
        return [(start, end)] if start < end else []
    return [(max(a, start), min(b, end)) for a, b in extents if a < end and b > start]


def _first_nonzero(buf, start: int, end: int, extents=None) -> int | None:
    """Position of the first non-zero byte in ``buf[start:end]``, or None (holes are skipped)."""
    for a, b in _data_in(start, end, extents):
        pos = a
        while pos < b:
            n = min(_CHUNK, b - pos)
            chunk = buf[pos:pos + n]
            if chunk != _ZERO_CHUNK[:n]:
                stripped = chunk.lstrip(b"\0")
                return pos + (n - len(stripped))
            pos += n
    return None


def _last_nonzero_end(buf, size: int, extents=None) -> int:
    """Position just after the last non-zero byte of ``buf[:size]`` (0 when all zero; holes are skipped)."""
    for a, b in reversed(_data_in(0, size, extents)):
        end = b
        while end > a:
            start = max(a, end - _CHUNK)
            chunk = buf[start:end]
            if chunk != _ZERO_CHUNK[:end - start]:
                return start + len(chunk.rstrip(b"\0"))
            end = start
    return 0


def _record_keys(topic: str, props: dict) -> set[str]:
    keys = set()
    uniq = props.get(UNIQ_KEY)
    if uniq:
        keys.add(uniq)
    for k in (props.get(KEYS) or "").split(KEY_SEPARATOR):
        if k:
            keys.add(k)
    return keys


class _MappedFile:
    """A read-only view of one file: an mmap, or ``b""`` for an empty file; ``extents`` are its
    data regions (:func:`rmqstore.store_dir.data_extents`, None: all of it)."""

    __slots__ = ("path", "rel", "size", "buf", "extents")

    def __init__(self, path: str, rel: str, size: int, buf, extents=None):
        self.path, self.rel, self.size, self.buf, self.extents = path, rel, size, buf, extents

    def first_nonzero(self, start: int, end: int | None = None) -> int | None:
        return _first_nonzero(self.buf, start, self.size if end is None else end, self.extents)

    def last_nonzero_end(self, size: int) -> int:
        return _last_nonzero_end(self.buf, size, self.extents)


class _Queue:
    __slots__ = ("topic", "queue_id", "rel", "files", "min", "max", "horizon", "checked", "first_start",
                 "last_start")

    def __init__(self, topic: str, queue_id: int, rel: str):
        self.topic, self.queue_id, self.rel = topic, queue_id, rel
        self.files: dict[int, _MappedFile] = {}
        self.min = self.max = 0
        self.horizon = -1
        #: per file (by start): one byte per unit, set once a record matched it -- as large as the
        #: files present, whatever offsets their names claim
        self.checked: dict[int, bytearray] = {}
        self.first_start = self.last_start = 0

    def mark(self, n: int, cq_size: int) -> None:
        """Unit ``n`` matched its record."""
        pos = n * _CQ_UNIT
        start = pos - pos % cq_size
        done = self.checked.get(start)
        if done is not None and (pos - start) // _CQ_UNIT < len(done):
            done[(pos - start) // _CQ_UNIT] = 1

    def present_units(self, unchecked: bool = False):
        """Numbers of the units in ``[min, max)`` that the files present hold, in order (with
        ``unchecked``: only those no record matched)."""
        for start in sorted(self.checked):
            done = self.checked[start]
            first = start // _CQ_UNIT
            for n in range(max(self.min, first), min(self.max, first + len(done))):
                if not (unchecked and done[n - first]):
                    yield n

    def unit(self, n: int, cq_size: int):
        pos = n * _CQ_UNIT
        start = pos - pos % cq_size
        f = self.files.get(start)
        if f is None or pos - start + _CQ_UNIT > f.size:
            return None
        return _UNIT.unpack_from(f.buf, pos - start)

    def file_for(self, n: int, cq_size: int) -> tuple[str, int]:
        pos = n * _CQ_UNIT
        start = pos - pos % cq_size
        return f"{self.rel}/{start:020d}", pos - start


class _IndexFile:
    __slots__ = ("rel", "buf", "number", "begin_ts", "end_ts", "begin_phy", "end_phy", "slot_count", "count",
                 "usable")

    def __init__(self, rel: str, buf, number: int):
        self.rel, self.buf, self.number = rel, buf, number
        h = _HDR.unpack_from(buf)
        self.begin_ts, self.end_ts = h.begin_timestamp, h.end_timestamp
        self.begin_phy, self.end_phy = h.begin_phy_offset, h.end_phy_offset
        self.slot_count, self.count = h.hash_slot_count, h.index_count
        self.usable = 0


# -- the verifier ----------------------------------------------------------------------------------

class _Verifier:
    def __init__(self, root: str, sizes: _Sizes, progress: Callable[[int, int], None] | None,
                 cap: int = _DETAIL_CAP):
        self.root = root
        self.sizes = sizes
        self.progress = progress
        self.cap = cap
        self.report = VerifyReport(root=root)
        self._kind_counts: Counter = Counter()
        self._done = 0
        self._total = 0
        self._stack = ExitStack()
        self.segments: list[tuple[int, _MappedFile]] = []
        self._seg_starts: list[int] = []
        self.queues: dict[tuple[str, int], _Queue] = {}
        self.index_files: list[_IndexFile] = []
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
        self.index_range: tuple[int | None, int | None] = (None, None)
        self.index_max_phy = -1  # the furthest record an index entry points at
        self.has_index = False  # an index/ directory exists: dispatched records with keys need entries
        self.unindexed: list[tuple[int, str, int]] = []  # (phys, rel, pos) dispatched, keyed, outside index_range
        self.interrupted_index: str | None = None  # the newest index file, short and all zeros (skipped)
        #: end the walk at a record recovery rejects when nothing points at or past it (the whole-store
        #: walk of :func:`verify`; the byte-range walks of rmqstore.spark.verify do not know every reference)
        self.stop_at_recovered_end = False
        self.past_end: list[int] = []  # offsets past the end of the log that units/entries point at
        self.unclaimed_tail: int | None = None  # index in problems of an undecodable last record (no abort)
        self.abort = False
        #: ConsumeQueueExt in use (enableConsumeQueueExt): tags codes <= Integer.MIN_VALUE - 1 are addresses
        self.cq_ext = os.path.isdir(os.path.join(root, "consumequeue_ext"))

    # -- bookkeeping ------------------------------------------------------------------------
    def add(self, kind: str, path: str, offset: int | None, message: str, severity: str = ERROR) -> None:
        key = kind if severity == ERROR else f"warning:{kind}"
        self._kind_counts[key] += 1
        if self._kind_counts[key] > self.cap:
            self.report.suppressed[key] = self.report.suppressed.get(key, 0) + 1
            return
        self.report.problems.append(Problem(kind, path, offset, message, severity))

    def tick(self, n: int) -> None:
        self._done += n
        if self.progress is not None:
            self.progress(self._done, self._total)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def open(self, path: str) -> _MappedFile | None:
        rel = self.rel(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            self.add("unreadable_file", rel, None, f"cannot open: {exc.strerror}")
            return None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return _MappedFile(path, rel, 0, b"")
            try:
                buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                self.add("unreadable_file", rel, None, f"cannot map: {exc}")
                return None
            extents = data_extents(fd, size)
        finally:
            os.close(fd)
        self._stack.callback(buf.close)
        return _MappedFile(path, rel, size, buf, extents)

    # -- run ----------------------------------------------------------------------------------
    def run(self) -> VerifyReport:
        with self._stack:
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
        dirs = [(os.path.join(self.root, "commitlog"), "segment"), (os.path.join(self.root, "index"), "index")]
        dirs += [(qdir, "segment") for qdir in _queue_file_dirs(self.root)]
        return sum(f.size for d, kind in dirs for f in _files(d, kind).files)

    def store_files(self, directory: str, kind: str, what: str) -> list:
        """The files of one store folder (:func:`rmqstore.store_dir.list_store_files`); strays are
        reported as warnings and left alone, entries that cannot be store files as errors."""
        try:
            listing = list_store_files(directory, kind)
        except StoreError as exc:
            self.add("unreadable_file", self.rel(directory), None, str(exc))
            return []
        for stray in listing.strays:
            self.add("unexpected_file", self.rel(stray.path), None, f"not {what}; not read, left alone", WARNING)
        for bad in listing.unusable:
            self.add("file_name" if bad.bad_name else "unreadable_file", self.rel(bad.path), None,
                     f"{bad.why}; not examined")
        return list(listing.files)

    def check_store_files(self) -> None:
        self.abort = os.path.exists(os.path.join(self.root, "abort"))
        if self.abort:
            self.add("unclean_shutdown", "abort", None,
                     "abort file present: the last run did not shut down cleanly; the next start runs "
                     "RocketMQ's abnormal recovery (re-checks the log from the checkpoint, re-dispatches)", WARNING)
        if not os.path.isdir(os.path.join(self.root, "commitlog")):
            self.add("not_a_store", "commitlog", None, "no commitlog/ directory: this is not a store (or its "
                     "commitlog was removed)")

    # -- consume queues ---------------------------------------------------------------------------
    def load_queues(self) -> None:
        base = os.path.join(self.root, "consumequeue")
        if not os.path.isdir(base):
            return
        cqs = self.sizes.consume_queue
        for topic, qid, qdir in self._queue_dirs(base):
            q = _Queue(topic, qid, self.rel(qdir))
            if self._load_queue(q, qdir, cqs):
                self.queues[(topic, qid)] = q
        self.report.queues = len(self.queues)
        self.cq_horizon = max((q.horizon for q in self.queues.values()), default=-1)

    def _queue_dirs(self, base: str):
        """(topic, queue id, directory) of every queue directory, in listing order; odd entries reported."""
        for topic in _listdir(base):
            tdir = os.path.join(base, topic)
            if not os.path.isdir(tdir):
                self.add("unexpected_file", self.rel(tdir), None, "a file where a topic directory belongs", WARNING)
                continue
            for qid in _listdir(tdir):
                qdir = os.path.join(tdir, qid)
                if not (qid.isascii() and (qid.isdigit() or (qid[:1] == "-" and qid[1:].isdigit()))) \
                        or not os.path.isdir(qdir):
                    self.add("unexpected_file", self.rel(qdir), None,
                             "not a queue directory (a queue directory is named by its numeric queue id)", WARNING)
                    continue
                yield topic, int(qid), qdir

    def _load_queue(self, q: _Queue, qdir: str, cqs: int | None) -> bool:
        names = self.store_files(qdir, "segment", "a consume-queue file (named by its 20-digit logical offset)")
        if not names:
            return False
        if not cqs or cqs < _CQ_UNIT:
            for sf in names:
                self.add("file_size", self.rel(sf.path), None, "the consume-queue file size of this store cannot be "
                         "told (no file holds whole 20-byte units)")
            return False
        prev_end = None
        files = []
        for sf in names:
            start, n = sf.offset, sf.name
            why = grid_problem(start, cqs)
            if why is not None:  # cannot be placed among the queue's units: not read
                self.add("file_name", self.rel(sf.path), None, f"{why}; its units cannot be numbered, not examined")
                self.tick(sf.size)
                continue
            f = self.open(sf.path)
            if f is None:
                continue
            self.tick(f.size)
            if f.size != cqs:
                self.add("file_size", f.rel, None, f"consume-queue file is {f.size} bytes; the other consume-queue "
                         f"files of this store are {cqs} bytes")
            if prev_end is not None and start != prev_end:
                if start > prev_end:
                    for off in range(prev_end, start, cqs)[:10]:
                        self.add("missing_cq_file", f"{q.rel}/{off:020d}", None,
                                 f"consume-queue file missing: units {off // _CQ_UNIT}..{(off + cqs) // _CQ_UNIT - 1} "
                                 f"of {q.topic}/{q.queue_id} are gone (the next file present is {n})")
                else:
                    self.add("file_name", f.rel, None, f"starts at {start}, before the previous file ends ({prev_end})")
            prev_end = start + cqs
            q.files[start] = f
            files.append((start, f))
        if not files:
            return False
        q.first_start, q.last_start = files[0][0], files[-1][0]
        # walk the units: leading pre-blanks, then valid units up to the last written one
        q.min = q.first_start // _CQ_UNIT
        first = True
        last_offset = None
        last_valid_end = -1
        end_unit = q.min
        present = 0  # units in the files (a missing file's units are not counted)
        for i, (start, f) in enumerate(files):
            usable = min(f.size, cqs) - min(f.size, cqs) % _CQ_UNIT
            if i == len(files) - 1:
                written = f.last_nonzero_end(usable)
                usable = written + (-written) % _CQ_UNIT
            q.checked[start] = bytearray(usable // _CQ_UNIT)  # the units read, not the file's size
            for pos in range(0, usable, _CQ_UNIT):
                offset, size, tags = _UNIT.unpack_from(f.buf, pos)
                n = (start + pos) // _CQ_UNIT
                if first and (offset, size, tags) == _PRE_BLANK:
                    q.min = n + 1
                    continue
                first = False
                if offset < 0 or size <= 0:
                    what = "empty (never written) unit inside the queue" if (offset, size, tags) == (0, 0, 0) \
                        else "invalid unit"
                    self.add("invalid_unit", f.rel, pos, f"{what}: unit {n} of {q.topic}/{q.queue_id} is "
                             f"(offset {offset}, size {size}, tags {tags}); recovery stops the queue here")
                    self.reported_units.add(((q.topic, q.queue_id), n))
                    continue
                if last_offset is not None and offset <= last_offset:
                    self.add("unit_order", f.rel, pos, f"unit {n} of {q.topic}/{q.queue_id} points at offset "
                             f"{offset}, not after the previous unit's {last_offset}")
                last_offset = offset
                last_valid_end = offset + size
            end_unit = (start + usable) // _CQ_UNIT
            present += usable // _CQ_UNIT
        q.max = max(end_unit, q.min)
        q.horizon = last_valid_end
        self.report.units += max(present - (q.min - q.first_start // _CQ_UNIT), 0)
        return True

    # -- index ------------------------------------------------------------------------------------
    def load_index(self) -> None:
        d = os.path.join(self.root, "index")
        if not os.path.isdir(d):
            return
        self.has_index = True
        slots, num = self.sizes.slots, self.sizes.entries
        expected = 40 + 4 * slots + 20 * num if slots else None
        prev = None
        files = self.store_files(d, "index", "an index file (named yyyyMMddHHmmssSSS, 17 digits)")
        for sf in files:
            f = self.open(sf.path)
            if f is None:
                continue
            self.tick(f.size)
            if expected is None:
                self.add("file_size", f.rel, None, f"index file of {f.size} bytes: no index file of this store "
                         "has a size of 40 + 4*slots + 20*(4*slots) bytes, so its layout cannot be told")
                continue
            if f.size != expected:
                # the newest file short and all zeros: its creation was interrupted (nothing was in it)
                interrupted = sf is files[-1] and _first_nonzero(f.buf, 0, f.size) is None
                self.add("file_size", f.rel, None, f"index file is {f.size} bytes; with {slots} slots and {num} "
                         f"entries (the other index files' size) it is {expected} bytes"
                         + ("; the newest file and all zeros: a creation a crash or a full disk interrupted "
                            "(readers skip it, a writable open deletes it)" if interrupted else ""),
                         WARNING if interrupted else ERROR)
                if interrupted:
                    self.interrupted_index = f.rel
                if f.size < 40 or interrupted:
                    continue
            ix = _IndexFile(f.rel, f.buf, len(self.index_files))
            self._check_index_file(ix, f.size, slots, num)
            if prev is not None and ix.count > 1 and prev.count > 1 and ix.begin_phy < prev.end_phy:
                self.add("index_order", ix.rel, 16, f"begins at offset {ix.begin_phy}, before the previous index "
                         f"file {prev.rel.rsplit('/', 1)[-1]} ends ({prev.end_phy})")
            self.index_files.append(ix)
            if ix.count > 1:
                prev = ix
        self.report.index_files = len(self.index_files)
        self.index_range = self._index_range()
        self.index_max_phy = max(self.idx_at, default=-1)

    def _check_index_file(self, ix: _IndexFile, size: int, slots: int, num: int) -> None:
        rel = ix.rel
        # 0 is a file created but not flushed before its first key (RocketMQ's load reads it as 1;
        # were entries lost with it, the slot checks below find the slots pointing past the count)
        if not 0 <= ix.count <= num:
            self.add("index_header", rel, 36, f"indexCount {ix.count} is outside [0, {num}]")
        if not 0 <= ix.slot_count <= slots:
            self.add("index_header", rel, 32, f"hashSlotCount {ix.slot_count} is outside [0, {slots}]")
        count = min(max(ix.count, 1), num)
        base = 40 + 4 * slots
        # entries that lie inside the file
        count = max(1, min(count, (size - base) // 20 if size > base else 1))
        ix.usable = count
        if count > 1:
            if ix.begin_phy > ix.end_phy:
                self.add("index_header", rel, 16, f"beginPhyOffset {ix.begin_phy} is after endPhyOffset {ix.end_phy}")
            if ix.begin_ts > ix.end_ts:
                self.add("index_header", rel, 0, f"beginTimestamp {ix.begin_ts} is after endTimestamp {ix.end_ts}")
        hashes = [0] * count
        last_phy = None
        for n in range(1, count):
            pos = base + n * 20
            h, phy, td, prev = _ENTRY.unpack_from(ix.buf, pos)
            hashes[n] = h
            if h < 0:
                self.add("index_entry", rel, pos, f"entry {n} has key hash {h}; key hashes are never negative")
            if not 0 <= prev < n:
                self.add("index_chain", rel, pos + 16, f"entry {n} links to entry {prev}; a link goes to an older "
                         f"entry (0 <= link < {n})")
            elif prev > 0 and slots and hashes[prev] % slots != h % slots:
                self.add("index_chain", rel, pos + 16, f"entry {n} (slot {h % slots}) links to entry {prev} of "
                         f"slot {hashes[prev] % slots}")
            if td < 0:
                self.add("index_entry", rel, pos + 12, f"entry {n} has a negative time difference {td}")
            if not ix.begin_phy <= phy <= ix.end_phy:
                self.add("index_entry", rel, pos + 4, f"entry {n} points at offset {phy}, outside the file's "
                         f"[{ix.begin_phy}, {ix.end_phy}]")
            if last_phy is not None and phy < last_phy:
                self.add("index_order", rel, pos + 4, f"entry {n} points at offset {phy}, before the previous "
                         f"entry's {last_phy}")
            last_phy = phy
            self.idx_at.setdefault(phy, []).append((ix.number, n, h, td))
        self.report.entries += count - 1
        # slots: each points at the newest entry of its own chain; chains cover every entry once
        if not slots or size < base:
            return
        values = struct.unpack_from(f">{slots}i", ix.buf, 40)
        used = 0
        seen = bytearray(count)
        for s, v in enumerate(values):
            if v == 0:
                continue
            used += 1
            if not 0 < v < count:
                self.add("index_slot", rel, 40 + 4 * s, f"slot {s} points at entry {v}, outside [1, {count})")
                continue
            if hashes[v] % slots != s:
                self.add("index_slot", rel, 40 + 4 * s, f"slot {s} points at entry {v}, whose key hash belongs "
                         f"to slot {hashes[v] % slots}")
                continue
            n, steps = v, 0
            while n > 0 and not seen[n] and steps < count:
                seen[n] = 1
                steps += 1
                prev = _ENTRY.unpack_from(ix.buf, base + n * 20)[3]
                n = prev if 0 <= prev < n else 0
        if used != ix.slot_count:
            self.add("index_header", rel, 32, f"hashSlotCount is {ix.slot_count} but {used} slots are in use")
        unreachable = [n for n in range(1, count) if not seen[n]]
        if unreachable:
            self.add("index_chain", rel, base + unreachable[0] * 20,
                     f"{len(unreachable)} entr{'ies are' if len(unreachable) > 1 else 'y is'} not reachable from "
                     f"any slot (first: entry {unreachable[0]}); key lookups cannot find them")

    # -- commitlog --------------------------------------------------------------------------------
    def walk_commitlog(self) -> None:
        cl = os.path.join(self.root, "commitlog")
        if not os.path.isdir(cl):
            return
        size = self.sizes.commitlog
        segs = []
        for sf in self.store_files(cl, "segment", "a commitlog file (named by its 20-digit start offset)"):
            why = grid_problem(sf.offset, size) if size and size > 8 else None
            if why is not None:  # cannot be placed in the log: not walked
                self.add("file_name", self.rel(sf.path), None, f"{why}; the file cannot be placed in the log, "
                         "not examined")
                self.tick(sf.size)
                continue
            segs.append((sf.offset, sf.path))
        self.report.segments = len(segs)
        if not segs:
            return
        self.report.log_start = segs[0][0]
        if segs[0][0] != 0:
            self.add("log_start", self.rel(segs[0][1]), None, f"the commitlog starts at offset {segs[0][0]}, not 0: "
                     "earlier files were deleted (expired, as RocketMQ does after fileReservedTime) or are missing",
                     WARNING)
        expected = None
        ended: tuple[str, int, int] | None = None  # (rel, pos, phys) where 8 zero bytes end the log
        corrupt_tail = False  # the last file with data ended on an undecodable record
        pending_zero: list[str] = []  # all-zero files after the end
        last_corrupt: int | None = None  # index in problems of the last undecodable-record problem
        garbage = None  # (rel, end pos, first non-zero pos) after the end of the log
        self.queue_next: dict[tuple[str, int], tuple[int, ...]] = {}
        for start, path in segs:
            f = self.open(path)
            if f is None:
                expected = start + (size or 0)
                continue
            self.report.commitlog_bytes += f.size
            if size is None or size <= 8:
                self.add("file_size", f.rel, None, f"commitlog file of {f.size} bytes that holds no record (at "
                         "position 0 neither a record that decodes nor unwritten space), and no commitlog file "
                         "that does tells the segment size: not a segment")
                self.tick(f.size)
                continue
            if f.size != size:
                self.add("file_size", f.rel, None, f"commitlog file is {f.size} bytes; the other commitlog files "
                         f"of this store are {size} bytes (truncated, or bytes appended?)")
            if expected is not None and start != expected:
                if start > expected:
                    for off in range(expected, start, size)[:10]:
                        self.add("missing_segment", f"commitlog/{off:020d}", None,
                                 f"commitlog file missing: offsets {off}..{off + size - 1} are gone (the next file "
                                 f"present is {start:020d})")
                else:
                    self.add("overlapping_segment", f.rel, None, f"starts at {start}, before the previous file "
                             f"ends ({expected})")
            expected = start + size
            self.segments.append((start, f))
            self._seg_starts.append(start)
            if ended is not None or corrupt_tail:
                if self._nonzero_from(f, 0) is None:
                    pending_zero.append(f.rel)
                    self.tick(f.size)
                    continue
                if ended is not None:
                    rel, pos, phys = ended
                    later = ", ".join(pending_zero + [f.rel])
                    self.add("log_hole", rel, pos, f"the log ends here at offset {phys} (8 zero bytes), but later "
                             f"file(s) hold data ({later}); recovery would drop everything after this point")
                else:
                    for rel in pending_zero:
                        self.add("log_hole", rel, None, "all-zero commitlog file between files that hold data")
                ended, corrupt_tail, pending_zero, garbage = None, False, [], None
            state = self._walk_segment(start, f, size)
            if state[0] == "unwritten":
                pos = state[1]
                ended = (f.rel, pos, start + pos)
                nz = self._nonzero_from(f, pos)
                garbage = (f.rel, pos, nz) if nz is not None else None
            elif state[0] == "corrupt":
                last_corrupt = state[1]
                corrupt_tail = True
            elif state[0] == "recovered_end":
                ended = (f.rel, state[1], start + state[1])  # (files with data after it: a hole)
            self.tick(f.size)
        # after the last file
        for rel in pending_zero:
            self.add("preallocated_segment", rel, None, "all-zero commitlog file after the end of the log: "
                     "pre-allocated by a writer that did not shut down cleanly (recovery deletes it)", WARNING)
        if garbage is not None:
            rel, pos, nz = garbage
            self.add("garbage_after_end", rel, nz, f"non-zero bytes at position {nz}, after the end of the log at "
                     f"position {pos}: left by a torn write or by a recovery that cut the log here (RocketMQ "
                     "ignores and overwrites them)", WARNING)
        if corrupt_tail and last_corrupt is not None and self.abort:
            self._as_warning(last_corrupt, "torn_tail", "it is the last record of the log and the abort file "
                             "says the writer died: a torn write that recovery will cut off")
        elif corrupt_tail and last_corrupt is not None:
            self.unclaimed_tail = last_corrupt  # judged once every reference is known (finish_log_refs)

    def _as_warning(self, i: int, kind: str, why: str) -> None:
        """Problem ``i``, an undecodable record, turns out to be a state recovery handles: a warning."""
        p = self.report.problems[i]
        if p.kind == "undecodable_record":
            self.report.problems[i] = replace(p, kind=kind, severity=WARNING, message=f"{p.message}; {why}")

    def _nonzero_from(self, f: _MappedFile, pos: int) -> int | None:
        """Position of the first non-zero byte of segment ``f`` from ``pos`` on, or None."""
        return f.first_nonzero(pos)

    def _walk_segment(self, start: int, f: _MappedFile, seg_size: int, pos: int = 0, stop: int | None = None):
        """Follow the size chain of one segment from ``pos`` (a record start); with ``stop``, return
        ("range_end", p) at the first record start p >= stop (a byte range's walk, see rmqstore.spark.verify)."""
        buf, n = f.buf, f.size
        delay_levels = self.sizes.delay_levels
        while True:
            if stop is not None and pos >= stop:
                return ("range_end", pos)
            if pos == n or n - pos < 8:
                left = n - pos
                self.add("no_blank", f.rel, pos, f"the file ends {left} byte{'s' * (left != 1)} after its last record, "
                         "without an END_OF_FILE blank; a writer always leaves room for one (file cut short?)")
                self.data_end = start + pos
                return ("eof",)
            if buf[pos:pos + 8] == _ZERO8:
                return ("unwritten", pos)
            try:
                rec = decode_record(buf, pos)
            except CorruptRecordError as exc:
                reason = str(exc).replace(f" (at offset {pos})", "")
                self.add("undecodable_record", f.rel, pos, f"undecodable record at physical offset {start + pos}: "
                         f"{reason}; the size chain breaks here and the rest of this file cannot be read")
                self.corrupt_regions.append((start + pos, start + n, f.rel, pos))
                return ("corrupt", len(self.report.problems) - 1)
            if isinstance(rec, BlankRecord):
                self.report.blanks += 1
                if pos + rec.total_size != n:
                    self.add("blank_size", f.rel, pos, f"END_OF_FILE blank at position {pos} declares {rec.total_size} "
                             f"bytes, reaching {pos + rec.total_size}, but the file is {n} bytes")
                self.data_end = start + n
                return ("blank",)
            phys = start + pos
            if self.stop_at_recovered_end and self._recovery_ends_log_at(phys, f.rel, pos, rec):
                self.data_end = phys
                return ("recovered_end", pos)
            self._check_record(phys, f.rel, pos, rec, delay_levels)
            pos += rec.total_size
            self.data_end = phys + rec.total_size

    def _recovery_ends_log_at(self, phys: int, rel: str, pos: int, rec) -> bool:
        """A decodable record recovery rejects (body CRC, PHYSICALOFFSET) that nothing points at or past.

        Recovery ends the log there (:func:`rmqstore.recovery.check_record`) and leaves the
        bytes after it on disk, so after a power cut, a recovery and a clean shutdown such a
        record -- and the records after it that a lost page did not reach -- lie after the end:
        a warning, and not records a start would dispatch.  A unit or index entry at or past
        it means the store used what follows: then it is damage (the record's own checks).
        """
        crc_ok = not rec.body or crc32(rec.body) == rec.body_crc
        if crc_ok and rec.physical_offset == phys:
            return False
        if self.cq_horizon > phys or self.index_max_phy >= phys:
            return False
        why = "its body CRC does not match" if not crc_ok else \
            f"it says it is at {rec.physical_offset} (PHYSICALOFFSET field)"
        kind, state = ("torn_tail", "the abort file says the writer died: recovery will end the log here") \
            if self.abort else ("garbage_after_end", "a recovery ended the log here (RocketMQ ignores and "
                                "overwrites these bytes)")
        self.add(kind, rel, pos, f"the record at physical offset {phys} fails recovery's check ({why}) and no "
                 f"consume-queue unit or index entry points at or past it: the end of the log; {state}", WARNING)
        return True

    def _check_record(self, phys: int, rel: str, pos: int, rec, delay_levels) -> None:
        self.report.records += 1
        self.starts.append(phys)
        if rec.store_timestamp > self.max_store_ts:
            self.max_store_ts = rec.store_timestamp
        if rec.physical_offset != phys:
            self.add("physical_offset", rel, pos, f"record at physical offset {phys} says it is at "
                     f"{rec.physical_offset} (PHYSICALOFFSET field)")
        crc = crc32(rec.body)
        if crc != rec.body_crc:
            self.add("body_crc", rel, pos, f"body CRC of the record at physical offset {phys} is {crc}, the record "
                     f"says {rec.body_crc}: the body ({len(rec.body)} bytes) is damaged")
        txn = rec.sys_flag & TRANSACTION_MASK
        props = string_to_properties(rec.properties)
        key = (rec.topic, rec.queue_id)
        qo = rec.queue_offset
        if txn in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            self._queue_offset_step(phys, rel, pos, key, qo)
            # reverse: its unit
            q = self.queues.get(key)
            backed = False
            if q is not None and q.min <= qo < q.max:
                unit = q.unit(qo, self.sizes.consume_queue)
                if unit is not None and unit[0] == phys:
                    backed = True
                    q.mark(qo, self.sizes.consume_queue)
                    want = tags_code_of(rec.topic, props, rec.store_timestamp, delay_levels)
                    self._compare_unit(q, qo, unit, rec.total_size, want, phys, rel, pos)
            if not backed:
                self.unbacked.append((phys, rel, pos, key, qo))
        # index: entries pointing here, and entries this record needs
        entries = self.idx_at.pop(phys, None)
        keys = _record_keys(rec.topic, props) if (entries or self.has_index) else set()
        self._check_record_index(phys, rel, pos, rec.topic, txn, rec.store_timestamp, keys, entries)

    def _check_record_index(self, phys: int, rel: str, pos: int, topic: str, txn: int, store_ts: int,
                            keys, entries) -> None:
        """The index entries pointing at one record, and the keys of it that have none."""
        hashes = {index_key_hash(f"{topic}#{k}"): k for k in keys}
        if entries:
            for fnum, n, h, td in entries:
                ix = self.index_files[fnum]
                epos = 40 + 4 * self.sizes.slots + n * 20
                if txn == TRANSACTION_ROLLBACK_TYPE:
                    self.add("index_entry", ix.rel, epos, f"entry {n} points at the rolled-back transaction record "
                             f"at {phys} ({rel}:{pos}); rolled-back records are not indexed")
                elif h not in hashes:
                    shown = ", ".join(sorted(keys)[:5]) or "none"
                    self.add("index_entry", ix.rel, epos, f"entry {n} has key hash {h}, but the record it points at "
                             f"({topic} at {phys}, {rel}:{pos}) has keys {shown}, none hashing to it")
                elif n > 1 and ix.begin_ts > 0 and not self._time_ok(ix.begin_ts, td, store_ts):
                    self.add("index_entry", ix.rel, epos + 12, f"entry {n} says the record was stored {td} s after "
                             f"{ix.begin_ts}, but the record at {phys} ({rel}:{pos}) was stored at "
                             f"{store_ts}")
        if not hashes or txn == TRANSACTION_ROLLBACK_TYPE:
            return
        lo, hi = self.index_range
        in_range = bool(self.index_files) and lo is not None and lo <= phys < hi
        if not in_range and not (self.has_index and phys < self.cq_horizon):
            return  # not dispatched yet (the next start indexes it), or no index at all
        have = {h for _, _, h, _ in entries or ()}
        missing = [k for h, k in hashes.items() if h not in have]
        if not missing:
            return
        if not in_range:
            self.unindexed.append((phys, rel, pos))  # dispatched, yet outside every index file: reported once
            return
        ix = self._index_file_for(phys)
        self.add("index_missing_key", ix.rel, None, f"the record at {phys} ({rel}:{pos}, topic "
                 f"{topic}) has no index entry for key(s) {', '.join(sorted(missing)[:5])}; a key "
                 "lookup will not find it")

    @staticmethod
    def _time_ok(begin_ts: int, td: int, store_ts: int) -> bool:
        if td == 0:
            return store_ts < begin_ts + 1000
        if td == _INT_MAX:
            return store_ts >= begin_ts + td * 1000
        return begin_ts + td * 1000 <= store_ts < begin_ts + (td + 1) * 1000

    def _index_range(self):
        used = [ix for ix in self.index_files if ix.usable > 1]
        if not used:
            return None, None
        return used[0].begin_phy, used[-1].end_phy

    def _index_file_for(self, phys: int) -> _IndexFile:
        best = self.index_files[-1]
        for ix in self.index_files:
            if ix.usable > 1 and ix.begin_phy <= phys <= ix.end_phy:
                best = ix
        return best

    def _queue_offset_step(self, phys: int, rel: str, pos: int, key: tuple[str, int], qo: int) -> None:
        """Queue offsets of one queue follow each other in log order (called in log order)."""
        nxt = self.queue_next.get(key)
        if nxt is not None and qo not in nxt:
            self.add("queue_offset_gap", rel, pos + 20, f"record at physical offset {phys} has queue offset {qo} "
                     f"in {key[0]}/{key[1]}; the previous record of that queue makes {nxt[0]} the next")
            self.queue_next[key] = (nxt[0] + 1, qo + 1)  # either the old line goes on, or a new one starts
        else:
            self.queue_next[key] = (qo + 1,)

    def _compare_unit(self, q: _Queue, n: int, unit, rec_size: int, want: int, phys: int, rel: str,
                      pos: int) -> None:
        """A unit against the record it points at: ``rec_size`` and ``want`` (its tags code)."""
        _, size, tags = unit
        cq_rel, upos = q.file_for(n, self.sizes.consume_queue)
        if size != rec_size:
            self.add("unit_mismatch", cq_rel, upos, f"unit {n} of {q.topic}/{q.queue_id} says size {size}; the "
                     f"record at {phys} ({rel}:{pos}) is {rec_size} bytes")
            self.reported_units.add(((q.topic, q.queue_id), n))
        if tags > _EXT_ADDR_MAX or not self.cq_ext:
            if tags != want:
                self.add("unit_mismatch", cq_rel, upos + 12, f"unit {n} of {q.topic}/{q.queue_id} has tags code "
                         f"{tags}; the record at {phys} ({rel}:{pos}) gives {want}")
                self.reported_units.add(((q.topic, q.queue_id), n))

    # -- forward consume-queue check: units not matched during the walk ------------------------------
    def _record_index(self, phys: int) -> int | None:
        i = bisect.bisect_left(self.starts, phys)
        if i < len(self.starts) and self.starts[i] == phys:
            return i
        return None

    def _segment_for(self, phys: int) -> tuple[int, _MappedFile] | None:
        i = bisect.bisect_right(self._seg_starts, phys) - 1
        if i >= 0:
            start, f = self.segments[i]
            if phys - start < f.size:
                return start, f
        return None

    def _where(self, phys: int) -> str:
        seg = self._segment_for(phys)
        return f"{seg[1].rel}:{phys - seg[0]}" if seg else f"offset {phys}"

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
                        and self._record_index(offset) is not None:
                    seg = self._segment_for(offset)
                    try:
                        rec = decode_record(seg[1].buf, offset - seg[0])
                    except CorruptRecordError:  # cannot happen: the walk decoded it
                        continue
                    if unbacked_offsets is None:
                        unbacked_offsets = {u[0] for u in self.unbacked}
                    target = (seg[1].rel, offset - seg[0], (rec.topic, rec.queue_id, rec.queue_offset), rec.sys_flag,
                              offset not in unbacked_offsets)
                expired += self._forward_unit(key, q, n, unit, log_start, target)
        self._report_expired_units(expired, log_start)

    def _report_expired_units(self, expired: int, log_start: int) -> None:
        if expired:
            self.add("expired_refs", "consumequeue", None, f"{expired} consume-queue unit(s) point before the start "
                     f"of the commitlog ({log_start}); their messages expired", WARNING)

    def _forward_unit(self, key, q: _Queue, n: int, unit, log_start: int, target) -> int:
        """Unit ``n`` of ``q``, matched by no record during the walk: why.  ``target`` is the readable
        record at the unit's offset as (rel, pos, (topic, queue id, queue offset), sysFlag, backed by
        its own unit) or None.  Returns 1 when the unit points before the log (expired), else 0."""
        offset, size, tags = unit
        cq_rel, upos = q.file_for(n, self.sizes.consume_queue)
        if offset < 0 or size <= 0:
            return 0  # reported as invalid_unit
        if self.segments and offset < log_start:
            return 1
        if offset >= self.data_end:
            self.past_end.append(offset)
            self.add("unit_target", cq_rel, upos, f"unit {n} of {q.topic}/{q.queue_id} points at offset "
                     f"{offset}, past the end of the commitlog's data ({self.data_end})")
            return 0
        if target is None:
            self.add("unit_target", cq_rel, upos, f"unit {n} of {q.topic}/{q.queue_id} points at offset "
                     f"{offset}, which is not the start of a readable record{self._unreadable_where(offset)}")
            return 0
        rel, pos, claim, sys_flag, record_backed = target
        self.forward_pointed.add(offset)
        txn = sys_flag & TRANSACTION_MASK
        if claim == (q.topic, q.queue_id, n) and txn not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            self.add("record_header", rel, pos + 36, f"record at {offset} is of {q.topic}/{q.queue_id} queue "
                     f"offset {n} and unit {n} points at it, but its sysFlag {sys_flag:#x} makes it a "
                     "prepared/rolled-back transaction, which has no unit")
            self.blamed_records.add(offset)
        elif record_backed or txn not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            # the record is the unit of another position: this unit is the stray one
            self.add("unit_mismatch", cq_rel, upos, f"unit {n} of {q.topic}/{q.queue_id} points at the record "
                     f"at {offset} ({rel}:{pos}), which is {claim[0]}/{claim[1]} queue offset {claim[2]}"
                     + (" and has its own unit" if record_backed else ""))
        else:
            self.add("record_header", rel, pos, f"record at {offset} says it is {claim[0]}/{claim[1]} queue "
                     f"offset {claim[2]}, but unit {n} of {q.topic}/{q.queue_id} points at it and no unit of "
                     f"{claim[0]}/{claim[1]} does: its topic/queue id/queue offset fields are damaged")
            self.blamed_records.add(offset)
        self.reported_units.add((key, n))
        return 0

    def _unreadable_where(self, offset: int) -> str:
        """Where an offset that is not a record start lies: in a damaged region, or in which file."""
        region = next((r for r in self.corrupt_regions if r[0] <= offset < r[1]), None)
        return f", inside the unreadable part of {region[2]} (from position {region[3]})" if region \
            else f" ({self._where(offset)})"

    # -- reverse: records without units --------------------------------------------------------------
    def finish_reverse(self) -> None:
        cqs = self.sizes.consume_queue or 6_000_000
        horizon = self.cq_horizon
        undispatched = []
        missing: dict[str, list] = {}
        for phys, rel, pos, key, qo in self.unbacked:
            if phys in self.forward_pointed or phys in self.blamed_records:
                continue
            if phys >= horizon:
                undispatched.append(phys)
                continue
            q = self.queues.get(key)
            if q is not None and q.min <= qo < q.max:
                if (key, qo) in self.reported_units:
                    continue  # that unit's problem is already reported
                unit = q.unit(qo, cqs)
                if unit is not None:
                    self._unit_points_elsewhere(phys, rel, pos, key, qo, unit[0])
                    continue
            missing.setdefault(self._unit_file(key, qo), []).append((phys, rel, pos, key, qo))
        self._report_unbacked({cq_rel: (len(recs), min(r[4] for r in recs), max(r[4] for r in recs), recs[0])
                               for cq_rel, recs in missing.items()},
                              (len(undispatched), undispatched[0]) if undispatched else None)

    def _unit_file(self, key: tuple[str, int], qo: int) -> str:
        """The consume-queue file (relative path) that holds unit ``qo`` of queue ``key``."""
        cqs = self.sizes.consume_queue or 6_000_000
        q = self.queues.get(key)
        if q is None:
            return f"consumequeue/{key[0]}/{key[1]}/{(qo * _CQ_UNIT) - (qo * _CQ_UNIT) % cqs:020d}"
        return q.file_for(qo, cqs)[0]

    def _unit_points_elsewhere(self, phys: int, rel: str, pos: int, key: tuple[str, int], qo: int,
                               unit_offset: int) -> None:
        cq_rel, upos = self.queues[key].file_for(qo, self.sizes.consume_queue or 6_000_000)
        self.add("record_header", rel, pos, f"record at {phys} says it is {key[0]}/{key[1]} queue offset "
                 f"{qo}, but that unit ({cq_rel}:{upos}) points at {unit_offset} instead and no unit points at "
                 "this record: its topic/queue id/queue offset fields are damaged")

    def _report_unbacked(self, missing: dict, undispatched: tuple[int, int] | None) -> None:
        """``missing``: consume-queue file -> (records, lowest and highest queue offset, first record as
        (phys, rel, pos, key, qo)), in log order of the first record; ``undispatched``: (records, first
        offset) after the dispatch horizon."""
        cqs = self.sizes.consume_queue or 6_000_000
        horizon = self.cq_horizon
        for cq_rel, (count, qo_lo, qo_hi, first) in missing.items():
            phys, rel, pos, key, qo = first
            q = self.queues.get(key)
            if q is None:
                why = f"no consume queue {key[0]}/{key[1]} exists (its files are missing)"
            elif q.min <= qo < q.max:
                why = "the consume-queue file that holds these units is missing or short"
            elif qo < q.min:
                why = f"the queue starts at {q.min}"
            else:
                why = f"the queue ends at {q.max}"
            exists = os.path.exists(os.path.join(self.root, *cq_rel.split("/")))
            self.add("record_without_unit", cq_rel, (qo * _CQ_UNIT) % cqs if exists else None,
                     f"{count} record(s) of {key[0]}/{key[1]} (queue offsets {qo_lo}..{qo_hi}, first at "
                     f"{phys}, {rel}:{pos}) have no unit{'' if exists else ' (this file is missing)'}: {why}, yet "
                     f"later records were dispatched (up to {horizon}); consumers cannot see them")
        if undispatched:
            self.add("undispatched", self._where(undispatched[1]).split(":")[0], None,
                     f"{undispatched[0]} record(s) from offset {undispatched[1]} on have no consume-queue unit yet "
                     f"(the furthest any queue reaches is {max(horizon, 0)}); the next start dispatches them", WARNING)

    def finish_index(self) -> None:
        log_start = self.report.log_start if self.segments else 0
        expired = 0
        for phy, entries in self.idx_at.items():
            for fnum, n, h, td in entries:
                expired += self._unresolved_entry(phy, fnum, n, log_start)
        self._report_expired_entries(expired, log_start)
        self._report_unindexed()

    def _report_unindexed(self) -> None:
        """Dispatched records with keys before the index's first entry or after its last: lost to key lookups.

        Dispatch indexes a record together with its consume-queue unit, so every keyed record
        below the dispatch horizon needs entries.  Those after the last entry are what a crash
        recovery that dropped the newest index files (RocketMQ's) did not index again; with the
        abort file present, the next start (ours) indexes them again: a warning.
        """
        lo, hi = self.index_range
        before = [r for r in self.unindexed if lo is not None and r[0] < lo]
        after = [r for r in self.unindexed if lo is None or r[0] >= hi]
        last = self.index_files[-1].rel if self.index_files else "index"
        for recs, is_after in ((before, False), (after, True)):
            if not recs:
                continue
            # records after the last entry belong in the next file: a skipped empty one lost them
            target = (self.interrupted_index or last) if is_after else last
            phys, rel, pos = recs[0]
            where = "with no index entries at all" if lo is None else (
                f"after the index's last entry ({hi})" if is_after else f"before the index's first entry ({lo})")
            soft = self.abort and is_after
            self.add("index_missing_key", target, None,
                     f"{len(recs)} dispatched record(s) with keys from offset {phys} ({rel}:{pos}) on, {where}, have "
                     f"no index entry for their keys (their consume-queue units exist, up to {self.cq_horizon}); a "
                     "key lookup will not find them" + ("; the next start indexes them again" if soft else ""),
                     WARNING if soft else ERROR)

    def _unresolved_entry(self, phy: int, fnum: int, n: int, log_start: int) -> int:
        """An index entry that points at no readable record: why (1 when it expired, else 0)."""
        ix = self.index_files[fnum]
        epos = 40 + 4 * self.sizes.slots + n * 20
        if self.segments and phy < log_start:
            return 1
        if phy >= self.data_end:
            self.past_end.append(phy)
            self.add("index_entry", ix.rel, epos, f"entry {n} points at offset {phy}, past the end of the "
                     f"commitlog's data ({self.data_end})")
            return 0
        self.add("index_entry", ix.rel, epos, f"entry {n} points at offset {phy}, which is not the start of "
                 f"a readable record{self._unreadable_where(phy)}")
        return 0

    def _report_expired_entries(self, expired: int, log_start: int) -> None:
        if expired:
            self.add("expired_refs", "index", None, f"{expired} index entr{'ies point' if expired > 1 else 'y points'} "
                     f"before the start of the commitlog ({log_start}); their messages expired", WARNING)

    def finish_log_refs(self) -> None:
        """Several references past the end: the commitlog lost its tail (a missing or cut file).

        With none at all, undecodable bytes where the log's last file stops are not a lost
        record but what a recovery leaves: it cuts a torn write off by position and does not
        zero it, and a later put shorter than the torn record leaves its rest after the end.
        RocketMQ's recovery stops there and the next put overwrites it, so that is a warning.
        """
        if self.unclaimed_tail is not None and not self.past_end:
            self._as_warning(self.unclaimed_tail, "garbage_after_end", "it is where the log's last file stops "
                             "and no consume-queue unit or index entry points at or past it: bytes a recovery "
                             "cut off (a torn write), which RocketMQ ignores and overwrites")
        past = sorted(self.past_end)
        if len(past) < 2 or not self.sizes.commitlog:
            return
        size = self.sizes.commitlog
        first = past[0]
        start = first - first % size
        seg_path = f"commitlog/{start:020d}"
        exists = os.path.exists(os.path.join(self.root, "commitlog", f"{start:020d}"))
        self.add("log_short", seg_path, first - start if exists else None,
                 f"{len(past)} consume-queue unit(s)/index entr(ies) point at offsets {past[0]}..{past[-1]}, past the "
                 f"end of the commitlog's data ({self.data_end}): "
                 + ("this file was cut short or zeroed" if exists else "this commitlog file is missing"))

    # -- checkpoint -----------------------------------------------------------------------------------
    def check_checkpoint(self) -> None:
        path = os.path.join(self.root, "checkpoint")
        if not os.path.lexists(path):
            if self.report.records:
                self.add("checkpoint", "checkpoint", None, "no checkpoint file: a start cannot tell how far the "
                         "consume queues and the index were flushed", WARNING)
            return
        size = _file_size(path)
        if size is None or not os.path.isfile(path):
            self.add("checkpoint", "checkpoint", None, "the checkpoint is not a readable file")
            return
        if size != CHECKPOINT_FILE_SIZE:
            self.add("checkpoint", "checkpoint", None, f"the checkpoint file is {size} bytes; RocketMQ writes "
                     f"{CHECKPOINT_FILE_SIZE}")
        try:
            cp = read_checkpoint(path)
        except (RmqStoreError, OSError) as exc:
            self.add("checkpoint", "checkpoint", None, f"cannot read the checkpoint: {exc}")
            return
        if cp is None:
            return
        if self.max_store_ts and cp.physic_msg_timestamp > self.max_store_ts:
            self.add("checkpoint_ahead", "checkpoint", 0, f"physicMsgTimestamp {cp.physic_msg_timestamp} is after "
                     f"the newest record's store time {self.max_store_ts}: records it counted as flushed are gone",
                     WARNING)


def verify(target, *, progress: Callable[[int, int], None] | None = None, config: StoreConfig | None = None,
           max_problems_per_kind: int = _DETAIL_CAP) -> VerifyReport:
    """Check a store; return a :class:`VerifyReport` (never raises for damaged files).

    ``target`` is an open :class:`~rmqstore.store.MessageStore` (its root and config are
    used) or a path (a store root or a fixture folder holding ``store/``).  For a path the
    store is first opened read-only, as a check of its own (a refusal is reported as an
    ``unopenable`` problem), and its sizes are inferred from the files.  ``progress(done,
    total)`` is called with bytes of files examined.  Raises
    :class:`~rmqstore.errors.StoreError` only when ``target`` is not a directory.
    """
    root, sizes, problems = _prepare(target, config)
    v = _Verifier(root, sizes, progress, max_problems_per_kind)
    v.stop_at_recovered_end = True
    v.report.problems.extend(problems)
    return v.run()


def _prepare(target, config: StoreConfig | None) -> tuple[str, _Sizes, list[Problem]]:
    """The store root, its sizes, and the ``unopenable`` problem of a path that open_store refuses."""
    problems: list[Problem] = []
    if hasattr(target, "root") and hasattr(target, "config"):
        return str(target.root), _sizes_of(config or target.config), problems
    root = resolve_store_root(target)
    if config is not None:
        return root, _sizes_of(config), problems
    sizes = _infer_sizes(root)
    from .store import open_store

    try:
        store = open_store(root, read_only=True)
    except RmqStoreError as exc:
        problems.append(Problem("unopenable", ".", None, f"open_store(read_only=True) refuses this store: {exc}"))
    else:
        store.close()
    return root, sizes, problems
