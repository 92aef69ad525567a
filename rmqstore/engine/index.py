"""IndexService: find messages by key across a store's index files (RocketMQ's IndexService).

The files themselves -- one fixed-size hash table with chaining each, appended to only --
are :class:`rmqstore.engine.index_file.IndexFile` (its essay holds the layout).  The service keeps
them in creation order (they are named by the wall-clock time of their creation,
``yyyyMMddHHmmssSSS``): a key goes into the last one, and a full file is followed by a new one
that starts where it ended (its begin offset/timestamp are the previous file's end values).
A query walks the files newest first, each only if its time range meets the one asked for.

Keys: ``topic#UNIQ_KEY`` and ``topic#k`` for each space-separated token k of KEYS; the
hash is ``abs(javaHashCode(key))`` (0 if that overflows).  Rolled-back transaction
messages are not indexed; records below a file's end offset are skipped (idempotent
re-dispatch).

After a crash (``IndexService.load``, ``delete_files_after``): a short file of zeros (a
kill or a full disk between creating and sizing it) is deleted by a writable load and
skipped with a warning by a read-only one; a file with no entry continues the previous
file (a kill can leave its header unwritten); entries for records past the end of the
log are dropped (a power cut can lose commitlog pages the index file kept).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ..common.errors import StoreError
from .index_file import IndexFile, index_file_size, index_key_hash
from ..format.properties import KEY_SEPARATOR
from ..files.store_dir import file_is_all_zero, list_store_files
from ..files.store_paths import index_dir, index_file_name  # (index_file_name re-exported)
from ..format.sysflag import gets_index_entries

__all__ = ["IndexFile", "IndexService", "index_key_hash", "index_file_size", "index_file_name"]

log = logging.getLogger(__name__)


class IndexService:
    """Builds and queries the index files of a store (RocketMQ's IndexService)."""

    def __init__(self, root: str, hash_slot_num: int, index_num: int, *, clock=None, checkpoint=None,
                 read_only: bool = False, tz=None):
        self.store_path = index_dir(root)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.checkpoint = checkpoint
        self.read_only = read_only
        self.tz = tz
        self.index_files: list[IndexFile] = []
        self._lock = threading.RLock()

    def load(self, last_exit_ok: bool = True) -> bool:
        expected = index_file_size(self.hash_slot_num, self.index_num)
        listing = list_store_files(self.store_path, "index")
        for stray in listing.strays:
            log.warning("%s: %s", stray.path, stray.why)
        for bad in listing.unusable:  # a directory, a dangling link ... where an index file belongs
            if not self.read_only:
                raise bad.error()
            log.warning("skipping %s: %s", bad.path, bad.why)
        for entry in listing.files:
            path = entry.path
            if entry.size != expected and self._skip_misfit(path, expected):
                continue
            f = IndexFile(path, self.hash_slot_num, self.index_num, read_only=self.read_only)
            if not last_exit_ok and self.checkpoint is not None and \
                    f.end_timestamp > self.checkpoint.index_msg_timestamp and not self.read_only:
                f.destroy()  # may hold entries for records recovery will drop
                continue
            self._continue_previous(f, self.index_files[-1] if self.index_files else None)
            self.index_files.append(f)
        if not last_exit_ok and not self.read_only and self.index_files and self.index_files[-1].repair_torn_put():
            log.warning("%s: a slot pointed at an entry the header does not count (a put a crash "
                        "interrupted): set back along its chain", self.index_files[-1].path)
        return True

    def _skip_misfit(self, path: str, expected: int) -> bool:
        """An index file of the wrong size: skipped (read-only) or deleted (empty), else refused.

        A kill or a full disk between creating an index file and sizing it leaves a short
        file of zeros; it holds no entry.  RocketMQ refuses to load such a store.
        """
        size = os.path.getsize(path)
        if not os.path.isfile(path) or not file_is_all_zero(path):
            if self.read_only:
                log.warning("skipping %s: %d bytes, an index file of this store is %d", path, size, expected)
                return True
            raise StoreError(f"{path} is {size} bytes; with {self.hash_slot_num} slots and "
                             f"{self.index_num} entries an index file is {expected} bytes")
        if self.read_only:
            log.warning("skipping %s: %d bytes of zeros, an index file whose creation was interrupted", path, size)
        else:
            log.warning("deleting %s: %d bytes of zeros, an index file whose creation was interrupted", path, size)
            os.remove(path)
        return True

    def _continue_previous(self, f: IndexFile, prev: IndexFile | None) -> None:
        """A file with no entry begins and ends where ``prev`` ends (the first file: where it begins).

        That is the header its creation writes.  Three states break it: a kill right after
        sizing a new file leaves a header of zeros (dispatch would then fill it from offset 0
        on, before the previous file's end); a kill inside the header's write leaves part of
        it (a begin time with no end time); and cutting entries off ``prev``
        (:meth:`delete_files_after`) leaves the file beginning after them (dispatch would skip
        the records in between).
        """
        if self.read_only or f.has_entries():
            return
        phy, ts = (prev.end_phy_offset, prev.end_timestamp) if prev else (f.begin_phy_offset, f.begin_timestamp)
        if f.begins_where(phy, ts):
            return
        log.warning("%s has no entry; its header (begin %d at %d, end %d at %d) is not the one it was created "
                    "with: it begins and ends at offset %d, time %d", f.path, f.begin_phy_offset,
                    f.begin_timestamp, f.end_phy_offset, f.end_timestamp, phy, ts)
        f.begin_where(phy, ts)

    def indexed_up_to(self) -> int:
        """The offset from which records may lack entries: the last file's end offset (0: no file).

        Records below it are skipped by :meth:`build_index`; the record at it may have keys
        in a later file that is gone, and is indexed again.
        """
        with self._lock:
            return self.index_files[-1].end_phy_offset if self.index_files else 0

    def _create_file(self) -> IndexFile | None:
        prev = self.index_files[-1] if self.index_files else None
        end_phy = prev.end_phy_offset if prev else 0
        end_ts = prev.end_timestamp if prev else 0
        os.makedirs(self.store_path, exist_ok=True)
        now = self.clock()
        name = index_file_name(now, self.tz)
        while any(f.file_name == name for f in self.index_files):
            now += 1
            name = index_file_name(now, self.tz)
        f = IndexFile(os.path.join(self.store_path, name), self.hash_slot_num, self.index_num, end_phy, end_ts)
        self.index_files.append(f)
        if prev is not None:
            prev.flush()
            if self.checkpoint is not None:
                self.checkpoint.index_msg_timestamp = prev.end_timestamp
                self.checkpoint.flush()
        return f

    def get_and_create_last_index_file(self) -> IndexFile | None:
        with self._lock:
            if self.index_files and not self.index_files[-1].is_write_full():
                return self.index_files[-1]
            if self.read_only:
                return None
            return self._create_file()

    def build_index(self, req) -> None:
        """Index one dispatched message (``req`` has topic, keys, uniq_key, sys_flag, offsets)."""
        f = self.get_and_create_last_index_file()
        if f is None:
            return
        if req.commit_log_offset < f.end_phy_offset:
            return
        if not gets_index_entries(req.sys_flag):
            return
        topic = req.topic
        if req.uniq_key:
            f = self._put_key(f, f"{topic}#{req.uniq_key}", req)
            if f is None:
                return
        if req.keys:
            for key in req.keys.split(KEY_SEPARATOR):
                if key:
                    f = self._put_key(f, f"{topic}#{key}", req)
                    if f is None:
                        return

    def build_index_batch(self, batch, n: int) -> int:
        """Index the first ``n`` records of a compiled dispatch batch; how many were done.

        The records go into the last file while it has room for each one's keys whole;
        0 when there is no file or it is full (the pure :meth:`build_index` of the next
        record creates the next one, as it would have).
        """
        files = self.index_files
        f = files[-1] if files else None
        if f is None or f.is_write_full() or self.read_only:
            return 0
        return f.put_batch(batch, n)

    def _put_key(self, f: IndexFile, key: str, req) -> IndexFile | None:
        while not f.put_key(key, req.commit_log_offset, req.store_timestamp):
            f = self.get_and_create_last_index_file()
            if f is None:
                return None
        return f

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """Physical offsets for ``topic#key`` stored in [begin, end]; newest files first.

        Returns ``(offsets, index_last_update_timestamp, index_last_update_phyoffset)``.
        """
        out: list[int] = []
        last_ts = last_phy = 0
        with self._lock:
            files = list(self.index_files)
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offset(f"{topic}#{key}", max_num, begin, end, out)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return out, last_ts, last_phy

    def delete_files_after(self, phy_offset: int, store_timestamp_at=None) -> None:
        """Drop index files whose entries start at or after ``phy_offset`` (after truncation).

        With ``store_timestamp_at`` (the store time of the record at an offset below
        ``phy_offset``), the entries at or after it in the files that stay are dropped too
        (:meth:`IndexFile.truncate_entries`): after a power cut the index can hold entries
        for records the commitlog lost, and a later record stored at such an offset would
        come back for a key it does not have.
        """
        with self._lock:
            keep = []
            for f in self.index_files:
                if f.begin_phy_offset >= phy_offset and f.index_count > 1 and not self.read_only:
                    f.destroy()
                else:
                    keep.append(f)
            self.index_files = keep
            if self.read_only or store_timestamp_at is None:
                return
            for prev, f in zip([None, *keep], keep):
                if f.end_phy_offset >= phy_offset and f.index_count > 1:
                    dropped = f.truncate_entries(phy_offset, store_timestamp_at)
                    if dropped:
                        log.warning("%s: dropped %d entries for records at or after %d, the end of the log",
                                    f.path, dropped, phy_offset)
                elif prev is not None:
                    self._continue_previous(f, prev)

    def flush(self) -> None:
        with self._lock:
            for f in self.index_files:
                f.flush()

    def shutdown(self) -> None:
        with self._lock:
            for f in self.index_files:
                f.shutdown()
            self.index_files = []
