"""Read-only walk over a store's commitlog: every record, in log order, and why the walk ended.

The walk never writes: each segment is opened ``O_RDONLY`` and mapped with
``mmap.ACCESS_READ``; no file is created, truncated or locked, so it is safe on a store
that a broker is using or that a crash left behind (its ``abort`` file and pre-allocated
next segment stay untouched).

Rules, as RocketMQ's own walk (``CommitLog#checkMessageAndReturnSize``) sees a log:

* segments are the files named by exactly 20 ASCII digits
  (:func:`rmqstore.store_dir.list_store_files`), in offset order; each must start where the
  previous one ended; other files are strays (:attr:`CommitLogScan.strays`) and not read;
* inside a segment, records follow each other from position 0; what is a record and what
  ends the segment is :func:`rmqstore.walk.step`'s call (lenient: no CRC, no offset check);
* a blank (END_OF_FILE) record ends the segment, and so does a segment filled exactly to
  its last byte: the walk goes on in the next one;
* 8 zero bytes -- space never written -- end the log;
* a record that does not decode (bad magic, impossible length, truncated), or fewer than 8
  bytes after the last record, ends the log.

Body CRCs are *not* checked here (a bad CRC does not end the walk); callers compare
``crc32(body)`` with ``body_crc`` themselves -- :mod:`rmqstore.dumpfmt` reports it.

After the iteration :attr:`CommitLogScan.stop` says where and why the walk ended.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Callable, Iterator

from .errors import StoreError
from .layout import BLANK_MAGIC_CODE
from .record import BlankRecord, decode_record
from .store_dir import list_store_files
from .store_paths import commitlog_dir
from .walk import End, LogEnd, step

__all__ = ["Segment", "ScanStop", "CommitLogScan", "find_commitlog_dir", "list_segments", "scan_commitlog"]

_PROGRESS_STEP = 1 << 20  # report progress at most once per MiB (and at every segment end)


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

    ``kind`` is how a segment's bytes ended the log -- an :class:`~rmqstore.walk.End`:
    ``unwritten`` (8 zero bytes: the normal end of a log), ``corrupt`` (a record that does
    not decode), ``out_of_bytes`` (a few bytes after the last record, too few for a header)
    -- or, where no segment's bytes decided it, a :class:`~rmqstore.walk.LogEnd`:
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
    """The segment files of a commitlog directory, sorted by offset (:func:`rmqstore.store_dir.list_store_files`:
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

    def __init__(self, store_path, progress: Callable[[int, int], None] | None = None):
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
            end = yield from self._walk_segment(seg, done, later)
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

    def _walk_segment(self, seg: Segment, done: int, later: int):
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
                size = seg.size
                pos = 0
                last_report = 0
                while True:
                    s = step(buf, pos, seg.offset)
                    if s.end is None:
                        rec = decode_record(buf, pos)  # step vouched for it: a whole record
                    elif s.end is End.BLANK:
                        rec = BlankRecord(s.size, BLANK_MAGIC_CODE)
                    elif s.end is End.OUT_OF_BYTES and pos == size:
                        return None  # filled to its last byte: the log goes on in the next segment
                    else:
                        return ScanStop(s.end, seg.offset + pos, _stop_reason(seg, pos, s), later)
                    self.records += 1
                    yield seg.offset + pos, rec
                    if s.end is End.BLANK:
                        self.blanks += 1
                        return None
                    self.messages += 1
                    pos += s.size
                    if self.progress is not None and pos - last_report >= _PROGRESS_STEP:
                        last_report = pos
                        self._report(done + pos)
            finally:
                buf.close()
        finally:
            os.close(fd)


def _stop_reason(seg: Segment, pos: int, s) -> str:
    if s.end is End.UNWRITTEN:
        return "8 zero bytes: the rest of the log was never written"
    return f"undecodable record in segment {seg.name} at position {pos}: {s.reason}"


def scan_commitlog(store_path, progress: Callable[[int, int], None] | None = None) -> CommitLogScan:
    """A :class:`CommitLogScan` of ``store_path`` (a store root or a commitlog directory)."""
    return CommitLogScan(store_path, progress)
