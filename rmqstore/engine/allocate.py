"""Pre-allocation of segment files, and the pool of write buffers.

Creating and mapping a 1 GiB file costs time that a put should not wait for.  RocketMQ's
``AllocateMappedFileService`` therefore creates files on a background thread: when the
put path needs file *N*, it asks for *N* and *N+1*; it waits (up to a timeout) for *N*,
while *N+1* is prepared for the next rollover.  The request for a file that is already
being prepared is shared, so the next rollover usually finds its file ready.

Ahead of the first put too.  A store started for writing asks for the file its next put
needs (and the one after) at once (:meth:`AllocateMappedFileService.request_ahead`, from
``MappedFileQueue.request_files_ahead``), so a cold store's first put finds its file made
instead of waiting for it -- a broker's first send waited two seconds for its 1 GiB file.

A put never waits for a pre-fault.  Faulting a file's pages in (``MappedFile.pre_fault``,
ours: it saves each put its page faults) takes a second or more for 1 GiB, so a file is
ready -- handed to the put that asked for it -- as soon as it is created, reserved and
mapped (milliseconds).  Its pages are faulted in afterwards, on this service's thread, a
slice (:data:`PRE_FAULT_SLICE`) at a time from the write position on, never more than
:data:`PRE_FAULT_AHEAD` ahead of the log's writes: a cold store's first file gets its first
window before its first put, a file made ahead gets its pages once the writes near the end
of the one before it.  So the work follows the puts instead of taking a core for seconds
while a cold broker answers its first sends, and the flush service writes back a window of
dirty zero pages, not a whole file.  The service looks at the write position every few
milliseconds while the writes move, less often while they pause; a file to create always
goes before the next slice.  Faulting in a page a put already wrote changes nothing
(``MADV_POPULATE_WRITE`` writes no byte), so the two may meet.  Not with SYNC_FLUSH (see
``_pre_faults``), nor with a write buffer.  RocketMQ's own ``warmMappedFile``
(``warm_mapped_file_enable``, off by default) writes zeros, so it still runs before the
file is handed out, as there.

A caller that must not wait.  An async put's caller is a broker's event loop, which must
go on answering every other connection.  Inside :meth:`AllocateMappedFileService.without_waiting`
a request for a file that is not made yet answers None at once and is noted as *declined*
(per thread); the async put path (:mod:`rmqstore.engine.store_put`) then finishes that put on its
put lane, a thread of its own, where waiting is harmless.

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
import contextlib
import heapq
import itertools
import logging
import threading

from ..common import native
from ..common.config import FlushDiskType
from ..format.layout import OS_PAGE_SIZE
from ..files.mapped_file import MappedFile

__all__ = ["TransientStorePool", "AllocateRequest", "AllocateMappedFileService", "PRE_FAULT_SLICE",
           "PRE_FAULT_AHEAD"]

log = logging.getLogger(__name__)

#: how much of a file one pre-fault call faults in (4 MiB: a few ms): a file to make waits at most that
PRE_FAULT_SLICE = 4 << 20
#: how far ahead of the log's writes its pages are faulted in: the work follows the writes (a cold
#: broker's 1 GiB file is not faulted in whole while its first sends come), and so do the dirty zero
#: pages the flush service writes back
PRE_FAULT_AHEAD = 16 << 20
#: how often (seconds) the write positions are looked at while nothing is due: at first, and at most
#: (the wait doubles while the writes pause); at 570 MB/s of puts 5 ms are 3 MB, inside the window
PRE_FAULT_POLL = (0.005, 0.2)


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


class _PreFault:
    """A new commitlog file whose pages are faulted in ahead of the writes (see ``_due_fault``)."""

    __slots__ = ("mapped_file", "position")

    def __init__(self, mapped_file: MappedFile):
        self.mapped_file = mapped_file
        self.position = 0  # faulted in up to here

    def next_start(self) -> int:
        """Where the next slice starts: after the last one, or at the writes if they came past it."""
        wrote = self.mapped_file.wrote_position
        return max(self.position, wrote - wrote % OS_PAGE_SIZE)

    def finished(self) -> bool:
        return self.next_start() >= self.mapped_file.file_size

    def due(self, reach: int) -> bool:
        """Less than ``reach`` bytes are faulted in ahead of the file's writes (and the file is not done)."""
        return not self.finished() and self.next_start() < self.mapped_file.wrote_position + reach

    def reach_past(self, reach: int) -> int:
        """How much of a window reaching ``reach`` bytes past this file's writes lies in the files after it."""
        return self.mapped_file.wrote_position + reach - self.mapped_file.file_size


class _Declined(threading.local):
    """This thread's :meth:`AllocateMappedFileService.without_waiting`: on, and whether a request was declined."""

    active = False
    declined = False


class AllocateMappedFileService:
    """Creates mapped files on a background thread, one request ahead of the put path."""

    def __init__(self, config, transient_store_pool: TransientStorePool | None = None):
        self.config = config
        self.transient_store_pool = transient_store_pool
        self.wait_timeout = config.allocate_wait_timeout_ms / 1000.0
        self._table: dict[str, AllocateRequest] = {}
        self._queue: list = []
        self._seq = itertools.count()
        #: new files whose pages are still to fault in, in the log's order
        self._faults: collections.deque[_PreFault] = collections.deque()
        self._poll = PRE_FAULT_POLL[0]  # how long to wait before looking at the write positions again
        self._cput = native.module("_cput", config.native)
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._no_wait = _Declined()
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
        self._faults.clear()
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

    def _submit_both(self, next_path: str, next_next_path: str | None, file_size: int) -> bool:
        """Ask for ``next_path`` and (pool permitting) ``next_next_path``; False when the pool has no buffer.
        Called holding ``_cv``."""
        can_submit = self._can_submit()
        if can_submit <= 0 and next_path not in self._table:
            log.warning("[NOTIFYME]TransientStorePool is not enough, so create mapped file error")
            self.last_failure = "the transient store pool has no free buffer"
            return False
        self._submit(next_path, file_size)
        if next_next_path is not None and can_submit - 1 > 0:
            self._submit(next_next_path, file_size)
        return True

    def request_ahead(self, next_path: str, next_next_path: str | None, file_size: int) -> None:
        """Ask for ``next_path`` (and ``next_next_path``) without waiting: a put that needs it later finds
        it made, or being made (the request is shared)."""
        with self._cv:
            if not self._stopped:
                self._submit_both(next_path, next_next_path, file_size)

    @contextlib.contextmanager
    def without_waiting(self):
        """In this thread, within the block, a request for a file not made yet answers None at once
        instead of waiting for it; the state it yields tells afterwards (``declined``) whether one did."""
        state = self._no_wait
        state.active, state.declined = True, False
        try:
            yield state
        finally:
            state.active = False

    def put_request_and_return_mapped_file(self, next_path: str, next_next_path: str,
                                           file_size: int) -> MappedFile | None:
        """Ask for ``next_path`` (and, ahead of time, ``next_next_path``); wait for the first."""
        with self._cv:
            if self._stopped or not self._submit_both(next_path, next_next_path, file_size):
                return None
            req = self._table[next_path]
        if self._no_wait.active and not req.done.is_set():
            # (the caller finishes its put where it may wait: no failure to report, last_failure untouched)
            self._no_wait.declined = True
            return None
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
                work = self._take_work()
            if work is None:
                return
            if isinstance(work, AllocateRequest):
                self._mmap_operation(work)
            elif not self._pre_fault_slice(work):
                with self._cv:
                    if work in self._faults:
                        self._faults.remove(work)

    def _take_work(self) -> AllocateRequest | _PreFault | None:
        """Under ``_cv``, waiting as long as there is none: a file to make, else a pre-fault slice that is
        due; None once stopped."""
        while not self._stopped:
            if self._queue:  # a file to make goes before the next slice of a pre-fault
                _, _, req = heapq.heappop(self._queue)
                if self._table.get(req.file_path) is req:
                    return req
                continue
            while self._faults and self._faults[0].finished():
                self._faults.popleft()
            due = self._due_fault()
            if due is not None:
                self._poll = PRE_FAULT_POLL[0]
                return due
            if self._faults:  # far enough ahead of the writes: look again later, less often while they pause
                self._cv.wait(self._poll)
                self._poll = min(self._poll * 2, PRE_FAULT_POLL[1])
            else:
                self._cv.wait()
        return None

    def _due_fault(self) -> _PreFault | None:
        """The first file, in the log's order, with less than the window faulted in ahead of the writes.
        The window (:data:`PRE_FAULT_AHEAD`) runs from the write position on, into the next file near an
        end: a file made ahead gets its pages when the writes come near it, not while the one before fills."""
        reach = PRE_FAULT_AHEAD
        for fault in self._faults:  # (in the order the files were made: the log's)
            if fault.due(reach):
                return fault
            reach = fault.reach_past(reach)
            if reach <= 0:
                return None
        return None

    def _pre_faults(self, mf: MappedFile) -> bool:
        """Whether a new file's pages are faulted in ahead of the writes."""
        cfg = self.config
        # (not with SYNC_FLUSH: the pre-faulted pages are dirty zeros, and the group commit's first
        # fdatasync of the file would write all of them while every waiting put waits -- 170 ms
        # measured for 64 MiB; see MappedFile.pre_fault.  Not with a write buffer: puts do not
        # write the mapping.  Not after warmMappedFile: it faulted every page in already.)
        return (mf.file_size >= cfg.mapped_file_size_commit_log and cfg.pre_fault_mapped_file
                and not cfg.warm_mapped_file_enable and mf.write_buffer is None
                and cfg.flush_disk_type is not FlushDiskType.SYNC_FLUSH)

    def _pre_fault_slice(self, fault: _PreFault) -> bool:
        """Fault in the next slice of ``fault``'s file; False when it cannot be (shut down, no kernel support)."""
        mf = fault.mapped_file
        if not mf.hold():  # the file was shut down meanwhile
            return False
        try:
            start = fault.next_start()
            end = min(start + PRE_FAULT_SLICE, mf.file_size)
            ok = mf.pre_fault(self._cput, start, end)
        finally:
            mf.release()
        fault.position = end
        return ok

    def _mmap_operation(self, req: AllocateRequest) -> None:
        try:
            mf = MappedFile(req.file_path, req.file_size, self.transient_store_pool)
            cfg = self.config
            if req.file_size >= cfg.mapped_file_size_commit_log and cfg.warm_mapped_file_enable:
                mf.warm_mapped_file(cfg.flush_disk_type.value == "SYNC_FLUSH",
                                    cfg.flush_least_pages_when_warm_mapped_file)
            with self._cv:
                cancelled = self._table.get(req.file_path) is not req
                if not cancelled:
                    req.mapped_file = mf
                    self.created += 1
                    if self._pre_faults(mf):  # (its first window next, once the put waiting for it has it)
                        self._faults.append(_PreFault(mf))
            if cancelled:  # cancelled while it was being made
                mf.destroy()
        except BaseException as exc:  # reported to the waiting put as a failed allocation
            log.error("allocate %s failed: %s", req.file_path, exc)
            req.error = exc
        finally:
            req.done.set()
