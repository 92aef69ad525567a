"""Read-only walk over a store's commitlog: every record, in log order, and why the walk ended.

The walk never writes: each segment is opened ``O_RDONLY`` and mapped with
``mmap.ACCESS_READ``; no file is created, truncated or locked, so it is safe on a store
that a broker is using or that a crash left behind (its ``abort`` file and pre-allocated
next segment stay untouched).

Rules, as RocketMQ's own walk (``CommitLog#checkMessageAndReturnSize``) sees a log:

* segments are the files named by exactly 20 ASCII digits
  (:func:`rmqstore.files.store_dir.list_store_files`), in offset order; each must start where the
  previous one ended; other files are strays (:attr:`CommitLogScan.strays`) and not read;
* inside a segment, records follow each other from position 0; what is a record and what
  ends the segment is :func:`rmqstore.format.walk.step`'s call (lenient: no CRC, no offset check);
* a blank (END_OF_FILE) record ends the segment, and so does a segment filled exactly to
  its last byte: the walk goes on in the next one;
* 8 zero bytes -- space never written -- end the log;
* a record that does not decode (bad magic, impossible length, truncated), or fewer than 8
  bytes after the last record, ends the log.

Body CRCs are *not* checked here (a bad CRC does not end the walk); callers compare
``crc32(body)`` with ``body_crc`` themselves -- :mod:`rmqstore.format.dumpfmt` reports it.

After the iteration :attr:`CommitLogScan.stop` says where and why the walk ended.

Two paths, one walk
-------------------
A segment is decoded in chunks of columns (:func:`decode_columns`: one list or array per
field, as :class:`RecordColumns`), and :meth:`CommitLogScan.__iter__` makes its records from
them; :meth:`CommitLogScan.batches` hands the columns themselves (with each body's CRC
verdict) to a caller that wants no object per record.  The columns come from the compiled
``rmqstore._native._cdecode`` (the walk and the decode in C, without the GIL) or, when
:func:`rmqstore.common.native.module` says the pure path runs, from :func:`rmqstore.format.walk.step` and
:func:`rmqstore.format.record.decode_record` record by record -- the reference, which
``tests/unit/test_native_decode.py`` proves the compiled one equal to.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..common import native as _native_switch
from ..common.errors import StoreError
from ..format.layout import BLANK_MAGIC_CODE, MESSAGE_FIELDS
from ..format.record import Address, BlankRecord, MessageRecord, decode_record
from ..files.store_dir import list_store_files
from ..files.store_paths import commitlog_dir
from ..format.walk import End, LogEnd, step

__all__ = ["Segment", "ScanStop", "CommitLogScan", "find_commitlog_dir", "list_segments", "scan_commitlog",
           "RecordColumns", "decode_columns", "RECORD_COLUMNS", "INT_COLUMNS"]

_PROGRESS_STEP = 1 << 20  # report progress at most once per MiB (and at every segment end)
_CHUNK_RECORDS = 4096  # records decoded per chunk of columns while iterating
_CHUNK_BYTES = 8 << 20

#: the columns of a :class:`RecordColumns`: every field of a record, in the layout table's order
RECORD_COLUMNS = tuple(f.name for f in MESSAGE_FIELDS)
#: the integer columns (array('i') / array('q') from the compiled path, lists from the pure one),
#: plus ``position``: each record's position in the buffer
INT_COLUMNS = tuple(f.name for f in MESSAGE_FIELDS if f.kind in ("i32", "i64")) + ("position",)


@dataclass
class RecordColumns:
    """The message records of one stretch of a buffer, a column per field, and why the walk stopped.

    ``columns`` maps each name of :data:`RECORD_COLUMNS` (hosts as ``host(ip, port)`` made them,
    :class:`~rmqstore.format.record.Address` by default), ``position`` (each record's position in the
    buffer) and ``crc_ok`` (bytes of 0/1, one per record, or None when no CRC was computed).
    ``end`` is the buffer position where the walk stopped; ``kind`` the
    :class:`~rmqstore.format.walk.End` found there, or None when it stopped at ``stop_at`` or a maximum;
    ``blank_size`` is a blank record's declared size.
    """

    count: int
    end: int
    kind: End | None
    blank_size: int
    columns: dict

    def rows(self) -> Iterator[Any]:
        """The records as :class:`~rmqstore.format.record.MessageRecord` tuples, in order."""
        return map(MessageRecord._make, zip(*[self.columns[name] for name in RECORD_COLUMNS]))


def decode_columns(buf, pos: int = 0, base: int = 0, *, limit: int | None = None, stop_at: int | None = None,
                   crc: bool = False, strict: bool = False, max_records: int | None = None,
                   max_bytes: int | None = None, host: Callable[[bytes, int], Any] = Address,
                   native: bool | None = True) -> RecordColumns:
    """Decode the records of ``buf`` from the record boundary ``pos`` into columns.

    The walk is :func:`rmqstore.format.walk.walk_segment`'s (``limit``, ``stop_at``, ``crc``,
    ``strict`` as there); it also stops, with ``kind`` None, after ``max_records`` records
    or once ``max_bytes`` record bytes are decoded.  ``native`` False (or ``RMQSTORE_PURE``)
    runs the pure reference.
    """
    mod = _native_switch.module("_cdecode", native)
    if mod is not None:
        d = mod.decode(buf, pos, base, -1 if limit is None else limit, -1 if stop_at is None else stop_at,
                       crc=crc, strict=strict, max_records=-1 if max_records is None else max_records,
                       max_bytes=-1 if max_bytes is None else max_bytes, host=host)
        kind = None if d["kind"] is None else End(d["kind"])
        return RecordColumns(d["count"], d["end"], kind, d["blank_size"], d)
    return _decode_columns_pure(buf, pos, base, limit, stop_at, crc, strict, max_records, max_bytes, host)


def _decode_columns_pure(buf, pos, base, limit, stop_at, crc, strict, max_records, max_bytes, host) -> RecordColumns:
    lim = len(buf) if limit is None else min(limit, len(buf))
    rows, positions, crc_ok = [], [], []
    done = blank_size = 0
    kind = None
    while True:
        if stop_at is not None and stop_at <= pos < lim:
            break
        s = step(buf, pos, base, lim, crc=crc, strict=strict)
        if s.end is not None:
            kind = s.end
            blank_size = s.size if s.end is End.BLANK else 0
            break
        rows.append(decode_record(buf, pos))  # step vouched for it: a whole record
        positions.append(pos)
        crc_ok.append(1 if s.crc_ok else 0)
        done += s.size
        pos += s.size
        if (max_records is not None and len(rows) >= max_records) or (max_bytes is not None and done >= max_bytes):
            break
    columns: dict[str, Any] = {name: list(values) for name, values in
                               zip(RECORD_COLUMNS, zip(*rows))} if rows else {name: [] for name in RECORD_COLUMNS}
    if host is not Address:
        for name in ("born_host", "store_host"):
            columns[name] = [host(a.ip, a.port) for a in columns[name]]
    columns["position"] = positions
    columns["crc_ok"] = bytes(crc_ok) if crc else None
    return RecordColumns(len(rows), pos, kind, blank_size, columns)


@dataclass(frozen=True)
class Segment:
    """One commitlog file: its start offset (from its name), path and size on disk."""

    offset: int
    path: str
    size: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class ScanStop:
    """Where and why a walk ended.

    ``kind`` is how a segment's bytes ended the log -- an :class:`~rmqstore.format.walk.End`:
    ``unwritten`` (8 zero bytes: the normal end of a log), ``corrupt`` (a record that does
    not decode), ``out_of_bytes`` (a few bytes after the last record, too few for a header)
    -- or, where no segment's bytes decided it, a :class:`~rmqstore.format.walk.LogEnd`:
    ``end_of_files`` (the last segment ended in a blank or is full), ``no_files``, ``gap``
    (the next segment does not start where the previous one ended) or ``unreadable`` (a
    segment cannot be mapped).
    ``offset`` is the physical offset where the walk stopped; ``segments_not_read`` counts
    the segment files after that point.
    """

    kind: End | LogEnd
    offset: int
    reason: str
    segments_not_read: int = 0

    @property
    def clean(self) -> bool:
        """True when the log simply ended (no corruption, no gap)."""
        return self.kind in (End.UNWRITTEN, LogEnd.END_OF_FILES, LogEnd.NO_FILES)

    def __str__(self) -> str:
        extra = f"; {self.segments_not_read} later segment file(s) not read" if self.segments_not_read else ""
        return f"{self.reason} (at offset {self.offset}){extra}"


def find_commitlog_dir(path) -> str:
    """The commitlog directory of ``path``: ``path/commitlog`` or ``path`` itself if it holds segments."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise StoreError(f"{path}: no such store directory")
    if not os.path.isdir(path):
        raise StoreError(f"{path}: not a directory")
    sub = commitlog_dir(path)
    if os.path.isdir(sub):
        return sub
    if list_store_files(path).files:
        return path
    raise StoreError(f"{path}: not a store (no commitlog/ directory)")


def list_segments(commitlog_dir) -> list[Segment]:
    """The segment files of a commitlog directory, sorted by offset (:func:`rmqstore.files.store_dir.list_store_files`:
    strays are not segments; an entry named like a segment that cannot be read is a StoreError)."""
    return _segments_of(list_store_files(commitlog_dir).check())


def _segments_of(listing) -> list[Segment]:
    return [Segment(f.offset, f.path, f.size) for f in listing.files]


class CommitLogScan:
    """Iterate ``(physical_offset, record)`` over a commitlog, read-only.

    ``progress(done_bytes, total_bytes)`` is called now and then (``total_bytes`` = the
    size of all segments).  Iterate once; then :attr:`stop` tells where and why it ended,
    and :attr:`records`/:attr:`messages`/:attr:`blanks` count what was yielded.
    """

    def __init__(self, store_path, progress: Callable[[int, int], None] | None = None, *, native: bool = True):
        #: False runs the pure-Python decode (the reference); RMQSTORE_PURE=1 does too
        self.native = native
        self.commitlog_dir = find_commitlog_dir(store_path)
        listing = list_store_files(self.commitlog_dir).check()
        self.segments = _segments_of(listing)
        #: entries of the commitlog directory that are not segments (reported, never read)
        self.strays = listing.strays
        self.total_bytes = sum(s.size for s in self.segments)
        self.progress = progress
        self.stop: ScanStop | None = None
        self.records = self.messages = self.blanks = 0

    def __iter__(self) -> Iterator[tuple[int, object]]:
        for seg_offset, chunk in self._chunks(crc=False):
            if isinstance(chunk, RecordColumns):
                yield from zip([seg_offset + p for p in chunk.columns["position"]], chunk.rows())
            else:  # the blank that ended a segment
                yield seg_offset, chunk

    def batches(self, *, crc: bool = True) -> Iterator[tuple[int, RecordColumns]]:
        """``(segment offset, columns)`` of the message records, chunk by chunk (see :class:`RecordColumns`).

        ``crc`` computes each body's CRC verdict (``columns["crc_ok"]``).  Counters and
        :attr:`stop` as for the iteration."""
        for seg_offset, chunk in self._chunks(crc=crc):
            if isinstance(chunk, RecordColumns):
                yield seg_offset, chunk

    def _chunks(self, crc: bool):
        """``(segment offset, RecordColumns)`` per chunk; ``(offset of a blank, BlankRecord)`` for a blank."""
        segments = self.segments
        if not segments:
            self.stop = ScanStop(LogEnd.NO_FILES, 0, "the commitlog has no segment files")
            return
        done = 0
        expected = segments[0].offset
        for i, seg in enumerate(segments):
            later = len(segments) - i - 1
            if seg.offset != expected:
                self.stop = ScanStop(LogEnd.GAP, expected, f"segment {seg.name} does not start where the previous "
                                     f"one ended ({expected})", later + 1)
                return
            end = yield from self._walk_segment(seg, done, later, crc)
            if end is not None:  # the log ended inside this segment
                self.stop = end
                self._report(done + seg.size)
                return
            done += seg.size
            expected = seg.offset + seg.size
            self._report(done)
        self.stop = ScanStop(LogEnd.END_OF_FILES, expected, "the last segment file ends")

    def _report(self, done: int) -> None:
        if self.progress is not None:
            self.progress(done, self.total_bytes)

    def _walk_segment(self, seg: Segment, done: int, later: int, crc: bool):
        """Yield the records of one segment; return a ScanStop if the log ends in it."""
        if seg.size == 0:
            return ScanStop(LogEnd.UNREADABLE, seg.offset, f"segment {seg.name} is empty (0 bytes)", later)
        try:
            fd = os.open(seg.path, os.O_RDONLY)
        except OSError as exc:
            return ScanStop(LogEnd.UNREADABLE, seg.offset, f"cannot open segment {seg.name}: {exc.strerror}", later)
        try:
            try:
                buf = mmap.mmap(fd, seg.size, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                return ScanStop(LogEnd.UNREADABLE, seg.offset, f"cannot map segment {seg.name}: {exc}", later)
            try:
                return (yield from self._segment_chunks(buf, seg, done, later, crc))
            finally:
                buf.close()
        finally:
            os.close(fd)

    def _segment_chunks(self, buf, seg: Segment, done: int, later: int, crc: bool):
        """Chunks of one mapped segment, as :func:`rmqstore.format.walk.step` ends it; a ScanStop if the log ends in it."""
        size = seg.size
        pos = last_report = 0
        while True:
            chunk = decode_columns(buf, pos, seg.offset, crc=crc, max_records=_CHUNK_RECORDS, max_bytes=_CHUNK_BYTES,
                                   native=self.native)
            if chunk.count:
                self.records += chunk.count
                self.messages += chunk.count
                yield seg.offset, chunk
            pos = chunk.end
            if chunk.kind is End.BLANK:
                self.records += 1
                self.blanks += 1
                yield seg.offset + pos, BlankRecord(chunk.blank_size, BLANK_MAGIC_CODE)
                return None
            if chunk.kind is End.OUT_OF_BYTES and pos == size:
                return None  # filled to its last byte: the log goes on in the next segment
            if chunk.kind is not None:
                return ScanStop(chunk.kind, seg.offset + pos, _stop_reason(seg, pos, step(buf, pos, seg.offset)),
                                later)
            if self.progress is not None and pos - last_report >= _PROGRESS_STEP:
                last_report = pos
                self._report(done + pos)


def _stop_reason(seg: Segment, pos: int, s) -> str:
    if s.end is End.UNWRITTEN:
        return "8 zero bytes: the rest of the log was never written"
    return f"undecodable record in segment {seg.name} at position {pos}: {s.reason}"


def scan_commitlog(store_path, progress: Callable[[int, int], None] | None = None) -> CommitLogScan:
    """A :class:`CommitLogScan` of ``store_path`` (a store root or a commitlog directory)."""
    return CommitLogScan(store_path, progress)
