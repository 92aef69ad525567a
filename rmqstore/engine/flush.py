"""Flush and commit services: how appended bytes reach the disk.

SYNC_FLUSH -- group commit.  A put that must be on disk before it is acknowledged
hands a request ("flush up to offset N") to :class:`GroupCommitService` and waits.  The
service keeps two lists: writers add to ``requests_write`` under a small lock; the
service thread swaps the two lists, flushes once, and wakes every request in
``requests_read`` whose offset is now flushed.  One ``fdatasync`` thus serves every put
that arrived while the previous one ran -- that is what makes sync flush affordable.  A
request not served within ``sync_flush_timeout`` ends in FLUSH_DISK_TIMEOUT (answered by
the service, or by its watchdog while a flush is stuck on the disk).

Who waits.  A synchronous put blocks on its request.  An async put (RocketMQ's
``asyncPutMessage``) appends in the caller's thread and gives its request a callback that
completes the put's future, so the flush that covers a group of async puts completes all
their futures in one pass and no thread waits per put.  The flush itself is an
``fdatasync`` of the segment's descriptor, which releases the GIL, so the writers go on
appending while the disk works (CPython's ``mmap.flush`` holds the GIL through its
``msync``; on Linux both write back the same dirty pages).

Gathering.  With several writers, each flush would serve only about half of them: those
answered by the last flush put again while the next one already runs.  After a round that
answered several requests the service waits a moment (a fraction of that round's time, at
most a millisecond, and only until as many requests are waiting as it answered plus those
already there) so the next flush serves them all.  RocketMQ flushes at once; the wait is
ours, and one writer never waits for it.

The hand-off, twice.  On the pure path a waiting writer blocks on its request's own
``threading.Lock`` and the service releases the locks one by one, each release a futex
wake made holding the GIL.  A service given a ``gate`` (the compiled ``rmqstore._native._cwait``,
when the store runs the fast path) gives each request a latch on it instead: the round
marks its answered requests and wakes them all with one broadcast (one system call, not one
per writer), and the writers sleep and check without the GIL.  Same answers, same order; fewer hand-offs.

ASYNC_FLUSH -- :class:`FlushRealTimeService` wakes every ``flush_interval_commit_log``
ms (or when poked) and flushes if at least ``flush_commit_log_least_pages`` pages are
dirty, and everything every ``flush_commit_log_thorough_interval`` ms.

Transient store pool -- :class:`CommitRealTimeService` copies write buffers into the
files every ``commit_interval_commit_log`` ms and pokes the flush service when it moved
anything.

Consume queues -- :class:`FlushConsumeQueueService`: every second, the checkpoint every minute.

All are real threads with a clean shutdown: on stop each does a final full pass, as
RocketMQ's services do.

A failed pass (EIO, ENOSPC: an ``msync``, ``fdatasync`` or commit ``pwrite`` that the disk
refused) does not end the thread -- RocketMQ's services die silently there while puts go
on answering PUT_OK.  The error goes to the commitlog's ``on_io_error`` hook (the store
becomes not writeable, so no later put is acknowledged), waiting sync puts are answered
FLUSH_DISK_TIMEOUT at once, and the service keeps trying, so bytes already acknowledged
still reach the file if the disk recovers.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ..format.status import PutMessageStatus

__all__ = ["GroupCommitRequest", "GroupCommitService", "FlushRealTimeService", "CommitRealTimeService",
           "FlushConsumeQueueService", "ServiceThread"]

log = logging.getLogger(__name__)

RETRY_TIMES_OVER = 10


class ServiceThread:
    """A loop on a thread with ``wakeup()`` and ``wait_for_running(ms)`` (RocketMQ's ServiceThread)."""

    name = "ServiceThread"

    def __init__(self):
        self._stopped = False
        self._notified = threading.Event()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None  # the failure of the last pass, until one succeeds

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self.run()
        except Exception:  # a dying service must say so
            log.exception("%s service has exception", self.name)

    def is_stopped(self) -> bool:
        return self._stopped

    def wakeup(self) -> None:
        if not self._notified.is_set():  # a poke is cheap when one is already pending
            self._notified.set()

    def wait_for_running(self, interval_ms: float) -> None:
        if not self._notified.wait(interval_ms / 1000.0):
            pass
        self._notified.clear()
        self.on_wait_end()

    def on_wait_end(self) -> None:
        pass

    def shutdown(self) -> None:
        self._stopped = True
        self._stop_event.set()
        self.wakeup()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=90)

    def run(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def guarded(self, action, *args) -> bool | None:
        """``action(*args)``, or None when it raised: the error is reported, the thread lives on."""
        try:
            result = action(*args)
        except Exception as exc:
            self.io_failed(exc)
            return None
        if self.last_error is not None:
            log.warning("%s works again after: %s", self.name, self.last_error)
            self.last_error = None
        return result

    def io_failed(self, exc: Exception) -> None:
        """Report a failed commit or flush once (until one succeeds) to ``commit_log.on_io_error``."""
        reason = f"{self.name}: {exc}"
        if self.last_error is None:
            log.error("%s failed, the store stops taking puts: %s", self.name, exc)
        self.last_error = reason
        hook = self.io_error_hook()
        if hook is not None:
            hook(reason)

    def io_error_hook(self):
        """Who hears of a failed pass: the commitlog's ``on_io_error`` (the store's ``make_not_writeable``)."""
        return getattr(getattr(self, "commit_log", None), "on_io_error", None)


class GroupCommitRequest:
    """'Tell me when the log is flushed up to ``next_offset``.'

    A synchronous put blocks on a plain lock that the service releases -- the cheapest
    hand-off CPython has -- instead of a Future with its condition variable.  An async put
    gives ``on_done`` instead, called with the request by whoever answers it (the service,
    or the watchdog at the deadline), so one flush completes a whole group of futures with
    no thread per put.  A request is answered once: the first :meth:`wakeup_customer` takes
    its one token (``list.pop`` is atomic in CPython), later ones do nothing.
    """

    __slots__ = ("next_offset", "deadline", "status", "on_done", "_lock", "_latch", "_token")

    def __init__(self, next_offset: int, timeout_ms: int, on_done=None, gate=None):
        self.next_offset = next_offset
        self.deadline = time.monotonic() + timeout_ms / 1000.0
        self.status: PutMessageStatus | None = None
        self.on_done = on_done
        self._token = [True]
        self._lock: threading.Lock | None = None
        self._latch = None
        if on_done is None:  # somebody will wait() on it
            if gate is not None:  # the service's compiled gate (see the module essay)
                self._latch = gate.latch()
            else:
                self._lock = threading.Lock()
                self._lock.acquire()

    def wakeup_customer(self, status: PutMessageStatus, broadcast: bool = True) -> bool:
        """Answer ``status`` (True), unless the request was answered already (False).

        ``broadcast=False``: a latch is only marked; the caller wakes the gate once for a round."""
        try:
            self._token.pop()
        except IndexError:
            return False
        self.status = status
        if self._lock is not None:
            self._lock.release()
        elif self._latch is not None:
            self._latch.set()
            if broadcast:
                self._latch.gate.broadcast()
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:  # the answering service must live on
                log.exception("completing the put waiting for offset %d failed", self.next_offset)
        return True

    def wait(self, timeout: float) -> PutMessageStatus:
        """The flush status, or FLUSH_DISK_TIMEOUT if the service does not answer in time."""
        if self._latch is not None:
            return self.status if self._latch.wait(timeout) else PutMessageStatus.FLUSH_DISK_TIMEOUT
        if self._lock is None:
            raise TypeError("a request made with on_done is not waited on")
        if self._lock.acquire(timeout=timeout):
            return self.status
        return PutMessageStatus.FLUSH_DISK_TIMEOUT


class GroupCommitService(ServiceThread):
    """Answers SYNC_FLUSH puts: one flush for every request that arrived while the last one ran.

    A request whose deadline passes while the service is stuck in a flush (a disk that
    does not answer) is answered FLUSH_DISK_TIMEOUT by a watchdog thread that looks every
    ``WATCHDOG_INTERVAL`` seconds, so an async put's future never waits on the disk
    longer than ``sync_flush_timeout`` (and a little).  ``flushes`` counts the flushes
    the service made, ``requests_served`` the requests it answered.
    """

    name = "GroupCommitService"
    WATCHDOG_INTERVAL = 0.05
    GATHER_FRACTION = 0.5  # of the last round's time, waited for the answered writers to come back
    GATHER_MAX = 0.001  # s

    def __init__(self, commit_log, checkpoint_hook=None, gate=None):
        super().__init__()
        self.commit_log = commit_log
        #: the compiled hand-off (``rmqstore._native._cwait.Gate``) its requests' latches wait on, or None
        self.gate = gate
        self.requests_write: list[GroupCommitRequest] = []
        self.requests_read: list[GroupCommitRequest] = []
        self._lock = threading.Lock()
        self.checkpoint_hook = checkpoint_hook
        self.flushes = 0
        self.requests_served = 0
        self.requests_expired = 0  # answered FLUSH_DISK_TIMEOUT by the watchdog
        self._want = 1  # requests waiting that wake the service (more while it gathers a group)
        self._watchdog: threading.Thread | None = None

    def start(self) -> None:
        super().start()
        self._watchdog = threading.Thread(target=self._watch, name=self.name + "Watchdog", daemon=True)
        self._watchdog.start()

    def shutdown(self) -> None:
        super().shutdown()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=5)

    def put_request(self, request: GroupCommitRequest) -> None:
        with self._lock:
            self.requests_write.append(request)
            n = len(self.requests_write)
        if n >= self._want:
            self.wakeup()

    def _swap_requests(self) -> None:
        with self._lock:
            self.requests_write, self.requests_read = self.requests_read, self.requests_write

    def on_wait_end(self) -> None:
        self._swap_requests()
        self.commit_log.tracer.group_commit_swap(self.requests_read)

    def _watch(self) -> None:
        while not self._stop_event.wait(self.WATCHDOG_INTERVAL):
            self.expire_overdue()

    def expire_overdue(self) -> int:
        """Answer FLUSH_DISK_TIMEOUT to every waiting request past its deadline; count them."""
        now = time.monotonic()
        with self._lock:
            waiting = self.requests_read + self.requests_write
        expired = 0
        for req in waiting:
            if req.deadline <= now and req.status is None \
                    and req.wakeup_customer(PutMessageStatus.FLUSH_DISK_TIMEOUT):
                expired += 1
        if expired:
            log.warning("%d sync flush requests timed out waiting for the disk", expired)
            self.requests_expired += expired
        return expired

    def _gather(self, answered: int, took: float) -> None:
        """Before the next round, give the writers just answered a moment to come back.

        Without it the writers split into two cohorts: while one waits for a flush, the other
        (answered by the previous one) puts again and waits for the next, so each flush
        serves about half of them.  So after a round that answered ``answered`` requests,
        the service waits until ``answered`` more have joined the ones already waiting, or
        ``GATHER_FRACTION`` of the last round's time (at most ``GATHER_MAX`` s) passed, and
        the next flush serves them all.  A round that answered one request (a lone writer)
        does not wait; nor does a round whose writers are back already.
        """
        if answered <= 1 or self.GATHER_FRACTION <= 0:
            return
        with self._lock:
            want = answered + len(self.requests_write)
        self._want = want
        self._notified.clear()
        with self._lock:
            have = len(self.requests_write)
        if have < want and not self.is_stopped():
            self._notified.wait(min(took * self.GATHER_FRACTION, self.GATHER_MAX))
        self._want = 1
        if self.requests_write or self.is_stopped():
            self.wakeup()

    def _do_commit(self) -> int:
        """Serve the swapped-in requests (one flush for all that it covers); the number answered."""
        queue = self.commit_log.mapped_file_queue
        tr = self.commit_log.tracer
        answered = 0
        if self.requests_read:
            for req in self.requests_read:
                if req.status is not None:  # answered by the watchdog already
                    continue
                flush_ok = queue.flushed_where >= req.next_offset
                failed = False
                for _ in range(2):
                    if flush_ok:
                        break
                    failed = self.guarded(tr.flush, queue, 0, "GroupCommitService") is None
                    self.flushes += 1
                    flush_ok = queue.flushed_where >= req.next_offset
                    if failed:
                        break
                if failed:  # the disk refused: not flushed, and waiting longer will not help
                    req.wakeup_customer(PutMessageStatus.FLUSH_DISK_TIMEOUT, False)
                elif flush_ok:
                    tr.group_commit_wake(req, queue)
                    req.wakeup_customer(PutMessageStatus.PUT_OK, False)
                elif time.monotonic() >= req.deadline:
                    req.wakeup_customer(PutMessageStatus.FLUSH_DISK_TIMEOUT, False)
                else:  # not yet (e.g. the bytes are still in a write buffer): try next round
                    self.put_request(req)
                    continue
                self.requests_served += 1
                answered += 1
            if self.gate is not None:  # the round's latches, woken at once (a lock answered itself)
                self.gate.broadcast()
            if self.checkpoint_hook is not None and queue.store_timestamp > 0:
                self.checkpoint_hook(queue.store_timestamp)
            self.requests_read = []
        else:
            # messages that did not wait for their flush still get flushed
            self.guarded(tr.flush, queue, 0, "GroupCommitService")
        return answered

    def run(self) -> None:
        while not self.is_stopped():
            self.wait_for_running(10)
            began = time.monotonic()
            answered = self._do_commit()
            self._gather(answered, time.monotonic() - began)
        # let in-flight requests finish, then serve them once more
        time.sleep(0.01)
        self._swap_requests()
        self._do_commit()


class FlushRealTimeService(ServiceThread):
    name = "FlushRealTimeService"

    def __init__(self, commit_log, config, checkpoint_hook=None):
        super().__init__()
        self.commit_log = commit_log
        self.config = config
        self.checkpoint_hook = checkpoint_hook
        self.last_flush_timestamp = 0.0

    def run(self) -> None:
        cfg = self.config
        queue = self.commit_log.mapped_file_queue
        while not self.is_stopped():
            interval = cfg.flush_interval_commit_log
            least_pages = cfg.flush_commit_log_least_pages
            now = time.monotonic() * 1000
            if now >= self.last_flush_timestamp + cfg.flush_commit_log_thorough_interval:
                self.last_flush_timestamp = now
                least_pages = 0
            if cfg.flush_commit_log_timed:
                # a plain sleep that pokes do not shorten (flushCommitLogTimed); shutdown does
                self._stop_event.wait(interval / 1000.0)
            else:
                self.wait_for_running(interval)
            self.guarded(self.commit_log.tracer.flush, queue, least_pages, "FlushRealTimeService")
            if self.checkpoint_hook is not None and queue.store_timestamp > 0:
                self.checkpoint_hook(queue.store_timestamp)
        for _ in range(RETRY_TIMES_OVER):
            if self.guarded(queue.flush, 0) is not False:
                break


class CommitRealTimeService(ServiceThread):
    name = "CommitRealTimeService"

    def __init__(self, commit_log, config, flush_service: FlushRealTimeService):
        super().__init__()
        self.commit_log = commit_log
        self.config = config
        self.flush_service = flush_service
        self.last_commit_timestamp = 0.0

    def run(self) -> None:
        cfg = self.config
        queue = self.commit_log.mapped_file_queue
        while not self.is_stopped():
            interval = cfg.commit_interval_commit_log
            least_pages = cfg.commit_commit_log_least_pages
            now = time.monotonic() * 1000
            if now >= self.last_commit_timestamp + cfg.commit_commit_log_thorough_interval:
                self.last_commit_timestamp = now
                least_pages = 0
            nothing_moved = self.guarded(self.commit_log.tracer.commit, queue, least_pages)
            if nothing_moved is False:
                self.last_commit_timestamp = now
                self.flush_service.wakeup()
            self.wait_for_running(interval)
        for _ in range(RETRY_TIMES_OVER):
            if self.guarded(queue.commit, 0) is not False:
                break


class FlushConsumeQueueService(ServiceThread):
    """Flushes consume queues every second; every minute a thorough pass also saves the checkpoint.

    The consume queues and the checkpoint are the ``dispatcher``'s (:class:`rmqstore.engine.dispatch.Dispatcher`);
    ``on_io_error`` hears of a flush the disk refused (the store's ``checks.make_not_writeable``).
    """

    name = "FlushConsumeQueueService"

    def __init__(self, config, dispatcher, on_io_error: Callable[[str], None]):
        super().__init__()
        self.config = config
        self.dispatcher = dispatcher
        self.on_io_error = on_io_error
        self.last_thorough = 0.0  # as RocketMQ: the first pass (about 1 s after start) is thorough

    def _do_flush(self, retry_times: int) -> None:
        cfg = self.config
        least_pages = cfg.flush_consume_queue_least_pages
        thorough = retry_times == RETRY_TIMES_OVER
        now = time.monotonic()
        if now >= self.last_thorough + cfg.flush_consume_queue_thorough_interval / 1000.0:
            self.last_thorough = now
            thorough = True
        if thorough:
            least_pages = 0
        checkpoint = self.dispatcher.checkpoint
        logics_ts = checkpoint.logics_msg_timestamp if checkpoint else 0
        for cq in list(self.dispatcher.consume_queue_table.values()):
            for _ in range(retry_times):
                if self.guarded(cq.flush, least_pages) is not False:  # (None: failed, reported)
                    break
        if thorough and checkpoint is not None:
            if logics_ts > 0:
                checkpoint.logics_msg_timestamp = logics_ts
            self.guarded(checkpoint.flush)

    def io_error_hook(self):
        return self.on_io_error

    def run(self) -> None:
        while not self.is_stopped():
            self._stop_event.wait(self.config.flush_interval_consume_queue / 1000.0)
            self._do_flush(1)
        self._do_flush(RETRY_TIMES_OVER)
