"""Pre-allocation of segment files, and the pool of write buffers.

Creating and mapping a 1 GiB file costs time that a put should not wait for.  RocketMQ's
``AllocateMappedFileService`` therefore creates files on a background thread: when the
put path needs file *N*, it asks for *N* and *N+1*; it waits (up to a timeout) for *N*,
while *N+1* is prepared for the next rollover.  The request for a file that is already
being prepared is shared, so the next rollover usually finds its file ready.

``TransientStorePool`` lends whole-file write buffers.  With it, appends land in memory
that is never paged out and reach the file only when the commit service copies them.
Buffers are reused as they are -- RocketMQ does not clear them, which is why blank
tails of its files can hold stale bytes; our put path zeroes the tail it declares blank.

A request that failed (a full disk: the file could not be reserved) is not kept as the
answer for that file: the next put that needs it asks again, so puts resume once space
returns.  The request made ahead for the file after it is cancelled (a file made for it
deleted): without its predecessor it is useless, and it would take the space that the
predecessor needs.  Why it failed is kept in ``last_failure`` for the put's message.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading

from . import native
from .config import FlushDiskType
from .mapped_file import MappedFile

__all__ = ["TransientStorePool", "AllocateRequest", "AllocateMappedFileService"]

log = logging.getLogger(__name__)


class TransientStorePool:
    """``pool_size`` write buffers of ``file_size`` bytes each (RocketMQ's TransientStorePool)."""

    def __init__(self, pool_size: int, file_size: int):
        self.pool_size = pool_size
        self.file_size = file_size
        self._buffers: collections.deque[bytearray] = collections.deque()
        self._lock = threading.Lock()

    def init(self) -> None:
        for _ in range(self.pool_size):
            self._buffers.append(bytearray(self.file_size))

    def destroy(self) -> None:
        with self._lock:
            self._buffers.clear()

    def borrow_buffer(self) -> bytearray | None:
        with self._lock:
            buf = self._buffers.popleft() if self._buffers else None
        if buf is not None and len(self._buffers) < self.pool_size * 0.4:
            log.info("transient store pool only remain %d sheets", len(self._buffers))
        return buf

    def return_buffer(self, buf: bytearray) -> None:
        with self._lock:
            self._buffers.appendleft(buf)  # RocketMQ offers it back first

    def available_buffer_nums(self) -> int:
        return len(self._buffers)


class AllocateRequest:
    """One file to create; ``done`` is set when ``mapped_file`` is ready (or failed)."""

    __slots__ = ("file_path", "file_size", "mapped_file", "done", "error")

    def __init__(self, file_path: str, file_size: int):
        self.file_path = file_path
        self.file_size = file_size
        self.mapped_file: MappedFile | None = None
        self.done = threading.Event()
        self.error: BaseException | None = None

    def sort_key(self):
        # larger files first, then lower offsets first (AllocateRequest.compareTo)
        import os
        return (-self.file_size, int(os.path.basename(self.file_path)))


class AllocateMappedFileService:
    """Creates mapped files on a background thread, one request ahead of the put path."""

    def __init__(self, config, transient_store_pool: TransientStorePool | None = None):
        self.config = config
        self.transient_store_pool = transient_store_pool
        self.wait_timeout = config.allocate_wait_timeout_ms / 1000.0
        self._table: dict[str, AllocateRequest] = {}
        self._queue: list = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.created = 0
        #: why the last ``put_request_and_return_mapped_file`` answered None (for the put's message)
        self.last_failure = ""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="AllocateMappedFileService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
        # files made ahead of need are removed on a clean shutdown
        for req in list(self._table.values()):
            if req.mapped_file is not None:
                log.info("delete pre allocated mapped file %s", req.file_path)
                req.mapped_file.destroy()
        self._table.clear()

    def _can_submit(self) -> int:
        pool = self.transient_store_pool
        if pool is not None and self.config.fast_fail_if_no_buffer_in_store_pool:
            return pool.available_buffer_nums() - len(self._queue)
        return 2

    def _submit(self, path: str, size: int) -> bool:
        req = self._table.get(path)
        if req is not None and req.error is None:
            return True  # being prepared, or ready
        # (a request that failed -- a full disk -- is tried again, so puts resume once space returns)
        req = AllocateRequest(path, size)
        self._table[path] = req
        heapq.heappush(self._queue, (req.sort_key(), next(self._seq), req))
        self._cv.notify()
        return True

    def put_request_and_return_mapped_file(self, next_path: str, next_next_path: str,
                                           file_size: int) -> MappedFile | None:
        """Ask for ``next_path`` (and, ahead of time, ``next_next_path``); wait for the first."""
        with self._cv:
            if self._stopped:
                return None
            can_submit = self._can_submit()
            if can_submit <= 0 and next_path not in self._table:
                log.warning("[NOTIFYME]TransientStorePool is not enough, so create mapped file error")
                self.last_failure = "the transient store pool has no free buffer"
                return None
            self._submit(next_path, file_size)
            if can_submit - 1 > 0:
                self._submit(next_next_path, file_size)
            req = self._table[next_path]
        if not req.done.wait(self.wait_timeout):
            log.warning("create mmap timeout %s %d", req.file_path, req.file_size)
            self.last_failure = f"timed out after {self.wait_timeout:g} s waiting for {req.file_path}"
            return None
        with self._cv:
            if self._table.get(next_path) is req:
                self._table.pop(next_path)
        if req.error is not None:
            self.last_failure = str(req.error)
            self._cancel(next_next_path)  # useless without this one, and it takes the space this one needs
            return None
        return req.mapped_file

    def _cancel(self, path: str) -> None:
        """Forget the request for ``path``; a file already made for it is deleted (see _mmap_operation)."""
        with self._cv:
            req = self._table.pop(path, None)
        if req is not None and req.mapped_file is not None:
            req.mapped_file.destroy()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopped:
                    self._cv.wait()
                if self._stopped:
                    return
                _, _, req = heapq.heappop(self._queue)
                if self._table.get(req.file_path) is not req:
                    continue
            self._mmap_operation(req)

    def _mmap_operation(self, req: AllocateRequest) -> None:
        try:
            mf = MappedFile(req.file_path, req.file_size, self.transient_store_pool)
            cfg = self.config
            if req.file_size >= cfg.mapped_file_size_commit_log:
                if cfg.warm_mapped_file_enable:
                    mf.warm_mapped_file(cfg.flush_disk_type.value == "SYNC_FLUSH",
                                        cfg.flush_least_pages_when_warm_mapped_file)
                elif cfg.pre_fault_mapped_file and mf.write_buffer is None and \
                        cfg.flush_disk_type is not FlushDiskType.SYNC_FLUSH:
                    # (not with SYNC_FLUSH: the pre-faulted pages are dirty zeros, and the group
                    # commit's first fdatasync of the file would write all 64 MiB of them while
                    # every waiting put waits -- 170 ms measured; see MappedFile.pre_fault)
                    mf.pre_fault(native.module("_cput", cfg.native))
            with self._cv:
                cancelled = self._table.get(req.file_path) is not req
                if not cancelled:
                    req.mapped_file = mf
                    self.created += 1
            if cancelled:  # cancelled while it was being made
                mf.destroy()
        except BaseException as exc:  # reported to the waiting put as a failed allocation
            log.error("allocate %s failed: %s", req.file_path, exc)
            req.error = exc
        finally:
            req.done.set()
