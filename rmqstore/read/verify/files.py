"""Reading a store's files for verify: read-only maps, zero scans that skip holes, decoded views.

The I/O half of verify, shared by its drivers (:mod:`rmqstore.read.verify.local` and
:mod:`rmqstore.spark.verify`): files are opened ``O_RDONLY`` and mapped ``ACCESS_READ``, a
bounded number at a time (:mod:`rmqstore.files.read_maps`), so a walk of any number of files holds
a bounded number open; nothing is created, truncated, locked or deleted.  The rules (:mod:`rmqstore.read.verify.rules`)
see what these views decode, never a file.
"""

from __future__ import annotations

import mmap
import os

from ...format.layout import CONSUME_QUEUE_UNIT, INDEX_ENTRY
from ...files.read_maps import ReadMap
from ...files.store_dir import data_in, first_nonzero
from .queue_rules import CQ_UNIT, unit_place

__all__ = ["MappedFile", "QueueView", "EntryTable", "UNIT", "last_nonzero_end", "rel_path"]

UNIT = CONSUME_QUEUE_UNIT.struct
_ENTRY = INDEX_ENTRY.struct
_CHUNK = 1 << 20
_ZERO_CHUNK = bytes(_CHUNK)


def rel_path(root: str, path: str) -> str:
    """``path`` relative to the store root, with ``/``."""
    return os.path.relpath(path, root).replace(os.sep, "/")


def last_nonzero_end(buf, size: int, extents=None) -> int:
    """Position just after the last non-zero byte of ``buf[:size]`` (0 when all zero; holes are skipped)."""
    for a, b in reversed(data_in(0, size, extents)):
        end = b
        while end > a:
            start = max(a, end - _CHUNK)
            chunk = buf[start:end]
            if chunk != _ZERO_CHUNK[:end - start]:
                return start + len(chunk.rstrip(b"\0"))
            end = start
    return 0


class MappedFile:
    """A read-only view of one file: ``buf`` its bytes (an mmap, or ``b""`` for an empty file), mapped
    while it is read, a bounded number of files at a time (:class:`rmqstore.files.read_maps.ReadMap`: take
    ``buf`` afresh for each piece of work); ``extents`` its data regions
    (:func:`rmqstore.files.store_dir.data_extents`, None: all of it)."""

    __slots__ = ("path", "rel", "size", "view")

    def __init__(self, path: str, rel: str, size: int):
        self.path, self.rel, self.size = path, rel, size
        self.view = ReadMap(path, size)

    @property
    def buf(self):
        return self.view.buf

    @property
    def extents(self):
        return self.view.extents

    def close(self) -> None:
        self.view.close()

    def first_nonzero(self, start: int, end: int | None = None) -> int | None:
        found = first_nonzero(self.buf, start, self.size if end is None else end, self.extents)
        self.release(start, self.size if found is None else found)
        return found

    def release(self, start: int = 0, end: int | None = None) -> None:
        """Drop the pages of ``[start, end)`` from this process's memory (``MADV_DONTNEED``).

        The map is read-only and shared: the bytes stay in the page cache and a later read
        maps them again, so this changes what verify *holds* (its peak RSS), never what it
        reads.  A walk of a 1 GiB segment releases behind itself as it goes.  (A file not
        mapped now holds nothing.)"""
        if not self.view.mapped or not hasattr(mmap, "MADV_DONTNEED"):
            return
        end = self.size if end is None else min(end, self.size)
        start -= start % mmap.PAGESIZE
        if end > start:
            self.buf.madvise(mmap.MADV_DONTNEED, start, end - start)

    def last_nonzero_end(self, size: int) -> int:
        return last_nonzero_end(self.buf, size, self.extents)

    def units(self, usable: int) -> list[tuple[int, int, int]]:
        """The consume-queue units of the first ``usable`` bytes (a multiple of 20)."""
        return list(UNIT.iter_unpack(self.buf[:usable])) if usable else []


class EntryTable:
    """The entries of an index file as ``(key hash, phy offset, time diff, prev)``, decoded on access."""

    __slots__ = ("buf", "base", "count")

    def __init__(self, buf, slots: int, count: int):
        self.buf, self.base, self.count = buf, 40 + 4 * slots, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, n: int):
        return _ENTRY.unpack_from(self.buf, self.base + n * 20)


class QueueView:
    """One consume queue: its files (by start), bounds ``[min, max)``, dispatch horizon, and which
    of its units a record matched."""

    __slots__ = ("topic", "queue_id", "rel", "files", "min", "max", "horizon", "checked", "first_start",
                 "last_start")

    def __init__(self, topic: str, queue_id: int, rel: str):
        self.topic, self.queue_id, self.rel = topic, queue_id, rel
        self.files: dict[int, MappedFile] = {}
        self.min = self.max = 0
        self.horizon = -1
        #: per file (by start): one byte per unit, set once a record matched it -- as large as the
        #: files present, whatever offsets their names claim
        self.checked: dict[int, bytearray] = {}
        self.first_start = self.last_start = 0

    def mark(self, n: int, cq_size: int) -> None:
        """Unit ``n`` matched its record."""
        pos = n * CQ_UNIT
        start = pos - pos % cq_size
        done = self.checked.get(start)
        if done is not None and (pos - start) // CQ_UNIT < len(done):
            done[(pos - start) // CQ_UNIT] = 1

    def present_units(self, unchecked: bool = False):
        """Numbers of the units in ``[min, max)`` that the files present hold, in order (with
        ``unchecked``: only those no record matched)."""
        for start in sorted(self.checked):
            done = self.checked[start]
            first = start // CQ_UNIT
            for n in range(max(self.min, first), min(self.max, first + len(done))):
                if not (unchecked and done[n - first]):
                    yield n

    def unit(self, n: int, cq_size: int):
        pos = n * CQ_UNIT
        start = pos - pos % cq_size
        f = self.files.get(start)
        if f is None or pos - start + CQ_UNIT > f.size:
            return None
        return UNIT.unpack_from(f.buf, pos - start)

    def file_for(self, n: int, cq_size: int) -> tuple[str, int]:
        return unit_place(self.rel, n, cq_size)
