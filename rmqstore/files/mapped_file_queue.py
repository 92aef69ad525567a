"""MappedFileQueue: the row of segment files that together form one log.

The queue turns a global offset into (file, position) -- files are equally sized and
named by their first offset, so that is a division -- and keeps two global marks,
``flushed_where`` and ``committed_where``: how far the *whole log* is on disk and in the
file.  ``flush()``/``commit()`` always work on the file that contains the mark, so a
flush that crosses into a new file finishes the old one first.

Files are appended at the end only (by the put path, through ``get_last_mapped_file``)
and removed at the front (expiry) or the back (``truncate_dirty_files`` after recovery).
The list is replaced, never mutated in place, so readers can iterate a snapshot without
a lock, as RocketMQ's ``CopyOnWriteArrayList`` allows.
"""

from __future__ import annotations

import logging
import os

from ..common.errors import StoreError
from .file_space import disk_problem
from .mapped_file import MappedFile, offset_to_file_name
from .store_dir import StoreFile, grid_problem, list_store_files
from .store_sizes import interrupted_allocation_note, interrupted_allocations

__all__ = ["MappedFileQueue"]

log = logging.getLogger(__name__)


class MappedFileQueue:
    def __init__(self, store_path: str, mapped_file_size: int, allocate_service=None, *,
                 read_only: bool = False, transient_store_pool=None, random_access: bool = False):
        self.store_path = str(store_path)
        self.random_access = random_access  # written files mapped MADV_RANDOM (mapped_file.advise_random)
        self.mapped_file_size = mapped_file_size
        self.allocate_service = allocate_service
        self.transient_store_pool = transient_store_pool
        self.read_only = read_only
        self.mapped_files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        #: why the last file creation failed ("" when none did): the put's answer names it
        self.create_error = ""
        #: the files a read-only load left out (allocations a kill interrupted)
        self.left_out: list[StoreFile] = []

    # -- loading -------------------------------------------------------------------
    def load(self) -> bool:
        """Map every segment of the folder (all must have the configured size and sit on the grid
        of that size); positions = full.  Strays are logged and left alone
        (:func:`rmqstore.files.store_dir.list_store_files`); an unusable entry is a StoreError.  Read-only,
        the allocations a kill interrupted at the end of the folder are left out with a warning
        (:func:`rmqstore.files.store_sizes.interrupted_allocations`; a writable open after the crash has
        deleted them) and listed in :attr:`left_out`."""
        listing = list_store_files(self.store_path).check()
        for stray in listing.strays:
            log.warning("%s: %s", stray.path, stray.why)
        segments = list(listing.files)
        if self.read_only:
            self.left_out = interrupted_allocations(segments, self.mapped_file_size)
            for f in self.left_out:
                log.warning("%s: %s", f.path, interrupted_allocation_note(f.size, self.mapped_file_size))
            segments = segments[:len(segments) - len(self.left_out)]
        files = []
        try:
            for f in segments:
                if f.size != self.mapped_file_size:
                    log.warning("%s length %d not matched message store config value %d",
                                f.path, f.size, self.mapped_file_size)
                    raise StoreError(f"{f.path} is {f.size} bytes but the configured segment size is "
                                     f"{self.mapped_file_size}; every segment must have that size")
                why = grid_problem(f.offset, self.mapped_file_size)
                if why is not None:
                    raise StoreError(f"{f.path}: {why}; the segment cannot be placed in the log")
                mf = MappedFile(f.path, self.mapped_file_size, read_only=self.read_only,
                                random_access=self.random_access)
                mf.set_positions(self.mapped_file_size)
                files.append(mf)
        except BaseException:
            for mf in files:
                mf.shutdown()
            raise
        self.mapped_files = files
        return True

    # -- lookup --------------------------------------------------------------------
    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def get_last_mapped_file(self, start_offset: int | None = None, need_create: bool = True
                             ) -> MappedFile | None:
        """The file to append to; with ``start_offset``, create one if there is none or it is full."""
        files = self.mapped_files
        last = files[-1] if files else None
        if start_offset is None:
            return last
        create_offset = self._create_offset(last, start_offset)
        if create_offset != -1 and need_create:
            return self._create(create_offset, first=last is None)
        return last

    def _create_offset(self, last: MappedFile | None, start_offset: int) -> int:
        """Where the file to append to must be created (-1: the last file has room)."""
        if last is None:
            return start_offset - start_offset % self.mapped_file_size
        if last.is_full():
            return last.file_from_offset + self.mapped_file_size
        return -1

    def _path(self, offset: int) -> str:
        return os.path.join(self.store_path, offset_to_file_name(offset))

    def request_files_ahead(self, start_offset: int = 0) -> None:
        """Ask the allocate service, without waiting, for the files ``get_last_mapped_file(start_offset)``
        would ask for -- the file to append to and the one after it -- or, while the last file has room,
        for the one after it: a started store's first put (or next rollover) then finds its file made."""
        if self.allocate_service is None or self.read_only or not self._make_folder():
            return
        files = self.mapped_files
        last = files[-1] if files else None
        create_offset = self._create_offset(last, start_offset)
        if create_offset == -1 and last is not None:
            self.allocate_service.request_ahead(self._path(last.file_from_offset + self.mapped_file_size), None,
                                                self.mapped_file_size)
        else:
            self.allocate_service.request_ahead(self._path(create_offset),
                                                self._path(create_offset + self.mapped_file_size),
                                                self.mapped_file_size)

    def _make_folder(self) -> bool:
        try:
            os.makedirs(self.store_path, exist_ok=True)
        except OSError as exc:  # answered as CREATE_MAPEDFILE_FAILED, not raised into the put
            log.error("create folder %s failed: %s", self.store_path, exc)
            self.create_error = f"cannot create folder {self.store_path}: {disk_problem(self.store_path, exc)}"
            return False
        except ValueError as exc:  # a name no file system takes: a NUL byte in a topic of a damaged log
            log.error("create folder %r failed: %s", self.store_path, exc)
            self.create_error = f"cannot create folder {self.store_path!r}: {exc}"
            return False
        return True

    def _create(self, create_offset: int, first: bool) -> MappedFile | None:
        if self.read_only:
            return None
        next_path = self._path(create_offset)
        next_next = self._path(create_offset + self.mapped_file_size)
        if not self._make_folder():
            return None
        if self.allocate_service is not None:
            mf = self.allocate_service.put_request_and_return_mapped_file(
                next_path, next_next, self.mapped_file_size)
            if mf is None:
                self.create_error = self.allocate_service.last_failure
        else:
            try:
                mf = MappedFile(next_path, self.mapped_file_size, self.transient_store_pool,
                                random_access=self.random_access)
            except (OSError, StoreError) as exc:  # a full disk is a StoreError naming it
                log.error("create mapped file %s failed: %s", next_path, exc)
                self.create_error = str(exc)
                mf = None
        if mf is not None:
            if first:
                mf.first_create_in_queue = True
            self.mapped_files = self.mapped_files + [mf]
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False
                                   ) -> MappedFile | None:
        files = self.mapped_files
        if not files:
            return None
        first, last = files[0], files[-1]
        if offset < first.file_from_offset or offset >= last.file_from_offset + self.mapped_file_size:
            return first if return_first_on_not_found else None
        index = offset // self.mapped_file_size - first.file_from_offset // self.mapped_file_size
        if 0 <= index < len(files):
            mf = files[index]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        for mf in files:  # a hole in the row of files: search
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return first if return_first_on_not_found else None

    # -- offsets -------------------------------------------------------------------
    def get_min_offset(self) -> int:
        first = self.get_first_mapped_file()
        return first.file_from_offset if first is not None else -1

    def get_max_offset(self) -> int:
        """End of what readers may read (read position of the last file)."""
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.read_position if last is not None else 0

    def get_max_wrote_position(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def remain_how_many_data_to_commit(self) -> int:
        return self.get_max_wrote_position() - self.committed_where

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_offset() - self.flushed_where

    # -- flush and commit ----------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``. True means nothing moved."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        tmp_timestamp = mf.store_timestamp
        offset = mf.flush(least_pages)
        where = mf.file_from_offset + offset
        result = where == self.flushed_where
        self.flushed_where = where
        if least_pages == 0:
            self.store_timestamp = tmp_timestamp
        return result

    def commit(self, least_pages: int) -> bool:
        """Commit the file holding ``committed_where``. True means nothing moved."""
        mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True
        offset = mf.commit(least_pages)
        where = mf.file_from_offset + offset
        result = where == self.committed_where
        self.committed_where = where
        return result

    # -- truncation ----------------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Cut the log at ``offset``: files after it are deleted, the one holding it shortened.

        Only positions move inside the kept file; its bytes after ``offset`` stay on disk
        (as in RocketMQ) and are overwritten by later appends.
        """
        keep = []
        for mf in self.mapped_files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail > offset:
                if offset >= mf.file_from_offset:
                    mf.set_positions(offset % self.mapped_file_size)
                    keep.append(mf)
                elif self.read_only:
                    mf.shutdown()  # read-only: forget the file, never delete it
                else:
                    mf.destroy()
            else:
                keep.append(mf)
        self.mapped_files = keep

    def delete_last_mapped_file(self) -> None:
        if self.mapped_files:
            last = self.mapped_files[-1]
            if self.read_only:
                last.shutdown()
            else:
                last.destroy()
            self.mapped_files = self.mapped_files[:-1]

    def shutdown(self) -> None:
        for mf in self.mapped_files:
            mf.shutdown()

    def destroy(self) -> None:
        for mf in self.mapped_files:
            mf.destroy()
        self.mapped_files = []
        self.flushed_where = 0
