"""MappedFile: one fixed-size segment file and its three positions.

A commitlog is a row of equally sized files, each named by the physical offset of its
first byte (20 digits, zero padded).  Each file keeps three positions, all relative to
the file's start:

``wrote_position``
    how far appends have gone.  Without a write buffer the bytes are already in the
    mapping (the page cache): readers may see them at once.

``committed_position``
    only meaningful with the transient store pool.  Appends then go to an off-heap
    ``write_buffer`` borrowed from the pool, and ``commit()`` copies
    ``[committed, wrote)`` into the file.  Readers see only committed bytes.  Without a
    write buffer RocketMQ never moves this position: it stays 0 (the fixtures show it),
    and ``commit()`` just answers ``wrote_position``.

``flushed_position``
    how far the file is known to be on disk.  ``flush()`` forces the file (fdatasync, which
    on Linux covers the mapping's writes; msync elsewhere) and moves it to the read position.

``read_position`` -- what a reader may read -- is ``wrote_position`` without a write
buffer and ``committed_position`` with one, so at every moment
``flushed <= read <= wrote`` (and with a write buffer ``flushed <= committed <= wrote``).

The page rules of ``commit(least_pages)`` / ``flush(least_pages)`` are RocketMQ's: act
when the file is full, or when at least ``least_pages`` whole 4 KiB pages are pending,
or (with ``least_pages == 0``) when anything is pending.

Reference counting (``hold``/``release``, RocketMQ's ``ReferenceResource``) keeps a file
mapped while a reader holds a slice of it; ``destroy()`` waits for readers to let go.

A file opened read-only keeps no descriptor and no mapping of its own: ``mapped`` maps it
when asked for, and :mod:`rmqstore.files.read_maps` may unmap it again between two reads to keep a
bounded number of maps open in the process -- a read-only store of any number of files opens
under a low ``ulimit -n``.  A writable file keeps its descriptor and its mapping, as RocketMQ's.

A full disk: every file the store writes through a mapping is sized and its pages reserved
before the first write (:mod:`rmqstore.files.file_space`, which says why).
"""

from __future__ import annotations

import logging
import mmap
import os
import sys
import threading

from ..common.errors import StoreError
from .file_space import create_sized, disk_problem, pwrite_fully, size_and_reserve
from ..format.layout import OS_PAGE_SIZE
from .read_maps import ReadMap
from .store_dir import parse_file_name
from .store_paths import offset_to_file_name  # (re-exported)

__all__ = ["MappedFile", "SelectMappedBufferResult", "offset_to_file_name", "advise_random"]

log = logging.getLogger(__name__)

#: the page cache holds a MAP_SHARED mapping's writes, so the file's fdatasync covers them (Linux)
_FDATASYNC_COVERS_MAPPING = sys.platform.startswith("linux")

_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux >= 5.14


def advise_random(mapping: mmap.mmap) -> None:
    """Tell the kernel a writable mapping is not read in order (``MADV_RANDOM``): a page fault then
    brings in one page, not a read-ahead window.

    A file the store writes through a mapping is mostly new pages, and the first write into each
    read-ahead window faults the whole window in (``read_ahead_kb``: 8 MiB on these machines, 2-20 ms
    measured, with the GIL held by the writer -- every other thread, the event loop included, waits).
    Page by page the same pages cost about 6 us each.  Used for the consume queues and the index
    files, whose readers read a few units or entries at a time; the commitlog keeps read-ahead for the
    pulls that read it in order, and its pages are faulted in ahead by the allocate service.
    """
    try:
        mapping.madvise(mmap.MADV_RANDOM)
    except (OSError, AttributeError, ValueError):
        pass  # a hint: a platform without it reads ahead as before


class SelectMappedBufferResult:
    """A read-only view of part of a mapped file; ``release()`` it when done."""

    __slots__ = ("start_offset", "size", "buffer", "mapped_file", "_released")

    def __init__(self, start_offset: int, buffer: memoryview, mapped_file: "MappedFile"):
        self.start_offset = start_offset
        self.size = len(buffer)
        self.buffer = buffer
        self.mapped_file = mapped_file
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.buffer.release()
            self.mapped_file.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


class MappedFile:
    """One segment file, mapped into memory (RocketMQ's ``MappedFile``)."""

    def __init__(self, file_name: str, file_size: int, transient_store_pool=None, *,
                 read_only: bool = False, random_access: bool = False):
        self.file_name = str(file_name)
        self.file_size = file_size
        base = os.path.basename(self.file_name)
        offset = parse_file_name(base)
        if offset is None:
            raise StoreError(f"{self.file_name}: a segment file is named by its start offset, 20 ASCII digits")
        self.file_from_offset = offset
        self.read_only = read_only
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self.write_buffer = None
        self.transient_store_pool = None
        self._ref_lock = threading.Lock()
        self._ref_count = 1
        self._available = True
        self._cleanup_over = False
        self._flush_lock = threading.Lock()
        self._open(read_only)
        if random_access and self._map is not None:
            advise_random(self._map)
        if transient_store_pool is not None and not read_only:
            buf = transient_store_pool.borrow_buffer()
            if buf is not None:
                self.write_buffer = buf
                self.transient_store_pool = transient_store_pool

    def _open(self, read_only: bool) -> None:
        self._view: ReadMap | None = None
        self._map: mmap.mmap | None = None
        self._fd = -1
        if read_only:  # mapped while read, a bounded number at a time (rmqstore.files.read_maps): no descriptor kept
            actual = os.stat(self.file_name).st_size
            if actual != self.file_size:
                raise StoreError(f"{self.file_name} is {actual} bytes, expected {self.file_size}")
            self._view = ReadMap(self.file_name, self.file_size)
        else:
            try:
                self._fd = os.open(self.file_name, os.O_RDWR)
            except FileNotFoundError:
                self._fd = create_sized(self.file_name, self.file_size)
            else:
                self._reserve_existing()
            self._map = mmap.mmap(self._fd, self.file_size)

    @property
    def mapped(self):
        """The file's mapping: writable, held while the file is open; read-only, mapped when asked for and
        maybe unmapped between two reads (:class:`~rmqstore.files.read_maps.ReadMap`): ask again each time."""
        view = self._view
        return self._map if view is None else view.buf

    def _reserve_existing(self) -> None:
        """An existing file opened for writing gets its size and its holes reserved (RocketMQ's files
        are sparse); a disk too full for that is a StoreError, not a SIGBUS at a later write."""
        try:
            size_and_reserve(self._fd, self.file_name, self.file_size)
        except OSError as exc:
            os.close(self._fd)
            raise StoreError(f"cannot reserve the space of {self.file_name}: "
                             f"{disk_problem(self.file_name, exc)}") from exc

    # -- positions -----------------------------------------------------------------
    @property
    def read_position(self) -> int:
        return self.wrote_position if self.write_buffer is None else self.committed_position

    @property
    def has_write_buffer(self) -> bool:
        return self.write_buffer is not None

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def set_positions(self, pos: int) -> None:
        """Set wrote, committed and flushed positions at once (load and recovery)."""
        self.wrote_position = self.committed_position = self.flushed_position = pos

    # -- appending -----------------------------------------------------------------
    def append_message(self, msg, callback, ctx=None):
        """Let ``callback.do_append`` write at the current position; advance by what it wrote."""
        pos = self.wrote_position
        if pos >= self.file_size:
            from ..format.status import AppendMessageResult, AppendMessageStatus

            return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
        buf = self.write_buffer if self.write_buffer is not None else self.mapped
        result = callback.do_append(self.file_from_offset, buf, pos, self.file_size - pos, msg, ctx)
        self.wrote_position = pos + result.wrote_bytes
        self.store_timestamp = result.store_timestamp
        return result

    def append_bytes(self, data) -> bool:
        """Append raw bytes (consume queue, replication); False when they do not fit."""
        pos = self.wrote_position
        n = len(data)
        if pos + n > self.file_size:
            return False
        buf = self.write_buffer if self.write_buffer is not None else self.mapped
        buf[pos:pos + n] = data
        self.wrote_position = pos + n
        return True

    # -- commit and flush ----------------------------------------------------------
    def _able(self, done: int, target: int, least_pages: int) -> bool:
        if self.is_full():
            return True
        if least_pages > 0:
            return target // OS_PAGE_SIZE - done // OS_PAGE_SIZE >= least_pages
        return target > done

    def is_able_to_commit(self, least_pages: int) -> bool:
        return self._able(self.committed_position, self.wrote_position, least_pages)

    def is_able_to_flush(self, least_pages: int) -> bool:
        return self._able(self.flushed_position, self.read_position, least_pages)

    def commit(self, least_pages: int) -> int:
        """Copy ``[committed, wrote)`` of the write buffer to the file; answer the position."""
        if self.write_buffer is None:
            return self.wrote_position  # nothing to commit: appends went to the mapping
        if self.is_able_to_commit(least_pages) and self.hold():
            try:
                self._commit0()
            finally:
                self.release()
        if self.write_buffer is not None and self.committed_position == self.file_size:
            # all data is in the file: the buffer goes back to the pool
            self.transient_store_pool.return_buffer(self.write_buffer)
            self.write_buffer = None
        return self.committed_position

    def _commit0(self) -> None:
        """Copy ``[committed, wrote)`` into the file, the range's first 8 bytes last.

        A kill can end a ``pwrite`` after any whole page (a short write), and the body CRC does not
        cover a record's topic and properties: written in one go, a cut could leave a record whose
        head and body arrived and whose properties are zeros, which recovery takes for whole.  The
        range starts at a record's head, so everything after its size and magic goes first and those
        8 bytes last: cut anywhere, the file holds either the whole range or, at its start, the
        zeros of a fresh file -- the end of the log, as if this commit never began (its puts were
        acknowledged from the pool's buffer; those not committed die with the process, as in
        RocketMQ).  A short write that is not a kill is finished, never taken for whole.
        """
        write_pos = self.wrote_position
        last = self.committed_position
        if write_pos > last:
            head_end = min(last + 8, write_pos)
            with memoryview(self.write_buffer) as view:
                pwrite_fully(self._fd, view[head_end:write_pos], head_end)
                pwrite_fully(self._fd, view[last:head_end], last)
            self.committed_position = write_pos

    def flush(self, least_pages: int) -> int:
        """Force what readers can see to disk; answer the flushed position."""
        if self.is_able_to_flush(least_pages) and self.hold():
            try:
                with self._flush_lock:
                    value = self.read_position
                    start = self.flushed_position
                    if value > start:
                        self._force(start, value)
                    self.flushed_position = max(self.flushed_position, value)
            finally:
                self.release()
        return self.flushed_position

    def _force(self, start: int, end: int) -> None:
        """Put ``[start, end)`` of the file on disk, with the GIL released.

        Bytes written by ``pwrite`` (the write-buffer path) are the file's own dirty pages;
        bytes written through the shared mapping are too: Linux tracks a MAP_SHARED page's
        writes in the page cache, so ``fdatasync`` writes them back (the kernel's
        ``msync(MS_SYNC)`` is itself ``vfs_fsync_range(file, start, end, datasync=1)``).
        ``fdatasync`` syncs the whole file -- never less than the range -- and, unlike
        CPython's ``mmap.flush`` (an ``msync`` made holding the GIL), lets every other
        thread run for the ~150 us the disk takes.  Elsewhere the mapping is msync'ed.
        """
        if _FDATASYNC_COVERS_MAPPING or self.write_buffer is not None or self.transient_store_pool is not None:
            os.fdatasync(self._fd)
        else:
            page = start - start % mmap.PAGESIZE
            self.mapped.flush(page, end - page)

    # -- reading -------------------------------------------------------------------
    def select_mapped_buffer(self, pos: int, size: int | None = None) -> SelectMappedBufferResult | None:
        """A view of ``[pos, pos+size)`` (default: up to the read position), or None."""
        read_pos = self.read_position
        if size is None:
            size = read_pos - pos
        if pos < 0 or size < 0 or pos + size > read_pos or not self.hold():
            return None
        view = memoryview(self.mapped)[pos:pos + size]
        return SelectMappedBufferResult(self.file_from_offset + pos, view, self)

    def get_bytes(self, pos: int, size: int) -> bytes:
        """Copy bytes out of the mapping (up to the file size, not checked against positions)."""
        return self.mapped[pos:pos + size]

    # -- warm-up -------------------------------------------------------------------
    def pre_fault(self, cput=None, start: int = 0, end: int | None = None) -> bool:
        """Fault the pages of ``[start, end)`` (default: every page) in writable, in one
        ``madvise(MADV_POPULATE_WRITE)`` call; ``start`` is a multiple of the page size.

        A first write to each 4 KiB page of a fresh sparse file costs a page fault
        (about 1.5 us per 1 KiB put measured here, a third of a put); the allocate
        service pays it on its own thread, a slice at a time ahead of the writes (see
        :mod:`rmqstore.engine.allocate`).  False where the kernel lacks it.
        ``cput``: the compiled put module, whose ``pre_fault`` makes the same call with the
        GIL released (``mmap.madvise`` holds it for the tens of milliseconds 64 MiB take).

        The pages it makes are dirty (zeros written, as far as the page cache knows): the
        next ``fdatasync`` of the file writes all of them back.  With ASYNC_FLUSH that is
        background work; a group commit would make its waiting puts wait for it (170 ms for
        64 MiB here), so the allocate service does not pre-fault under SYNC_FLUSH.
        """
        end = self.file_size if end is None else end
        if cput is not None:
            with memoryview(self.mapped) as whole, whole[start:end] as pages:
                return cput.pre_fault(pages)
        try:
            self.mapped.madvise(_MADV_POPULATE_WRITE, start, end - start)
            return True
        except (OSError, ValueError, AttributeError):
            return False

    def warm_mapped_file(self, sync_flush: bool, pages: int) -> None:
        """Touch every page (write a zero) so the first puts do not fault; sync flush forces as it goes."""
        mm = self.mapped
        flushed_pages = 0
        for i, pos in enumerate(range(0, self.file_size, OS_PAGE_SIZE)):
            mm[pos] = 0
            if sync_flush and i - flushed_pages >= pages:
                mm.flush(0, pos + 1)
                flushed_pages = i
        if sync_flush:
            mm.flush()
        if hasattr(mm, "madvise"):
            mm.madvise(mmap.MADV_WILLNEED)

    # -- reference counting (ReferenceResource) --------------------------------------
    def hold(self) -> bool:
        with self._ref_lock:
            if self._available and self._ref_count > 0:
                self._ref_count += 1
                return True
            return False

    def release(self) -> None:
        with self._ref_lock:
            self._ref_count -= 1
            if self._ref_count > 0:
                return
            self._cleanup()

    @property
    def ref_count(self) -> int:
        return self._ref_count

    def is_available(self) -> bool:
        return self._available

    def _cleanup(self) -> None:
        if self._cleanup_over:
            return
        # the write buffer stays attached (as in RocketMQ, whose shut-down files keep theirs);
        # destroy() hands it back to the pool
        if self._view is not None:
            self._view.close()
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a reader still has a view; keep the map, it dies with the view
                return
        if self._fd >= 0:
            os.close(self._fd)
        self._cleanup_over = True

    def shutdown(self) -> None:
        """Refuse new holds and drop the creator's reference; unmapped when readers let go."""
        with self._ref_lock:
            if not self._available:
                return
            self._available = False
        self.release()

    def is_cleanup_over(self) -> bool:
        return self._cleanup_over

    def destroy(self) -> bool:
        """Unmap and delete the file (after shutdown; True when it is gone)."""
        self.shutdown()
        if self.write_buffer is not None and self.transient_store_pool is not None:
            self.transient_store_pool.return_buffer(self.write_buffer)
            self.write_buffer = None
        if not self._cleanup_over:
            return False
        try:
            os.remove(self.file_name)
        except FileNotFoundError:
            pass
        return True

    def __repr__(self) -> str:
        return (f"MappedFile({os.path.basename(self.file_name)}, wrote={self.wrote_position}, "
                f"committed={self.committed_position}, flushed={self.flushed_position}, "
                f"write_buffer={self.write_buffer is not None})")
