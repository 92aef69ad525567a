"""The store's async puts in flight, and the wait of one of them (RocketMQ's asyncPutMessage).

An async put is checked and appended in the caller's thread (``PutPath._submit_async``);
what it still waits for -- the group commit's flush, a slave's acknowledgement -- is a
request handed to those services with a callback, and the last answer completes the put's
future.  So one flush (or one ack) answers a whole group of async puts, and no thread
waits per put.  :class:`AsyncPuts` counts the puts in flight so a shutdown waits until
each has its answer; :class:`PutWait` is one put's wait.

The put lane.  The caller of an async put (a broker's event loop) must not wait for a
commitlog file either: a put that needs a file the allocate service has not made yet is
declined in the caller's thread (``AllocateMappedFileService.without_waiting``) and finished
on the lane, one thread of its own that may wait.  While the lane holds puts, later async
puts go there too, behind them, so puts are appended in the order they were made and the
caller never meets the put lock held by a put waiting for its file.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from time import perf_counter as _perf

from ..common.config import BrokerRole
from .flush import GroupCommitRequest
from .put_trace import NULL_PUT_TRACE
from ..format.status import PutMessageResult, PutMessageStatus

__all__ = ["AsyncPuts", "PutWait", "NOT_KEPT", "done_future"]

log = logging.getLogger(__name__)

_PUT_OK = PutMessageStatus.PUT_OK

#: the message of a put written but whose promise (flush, slave) was not kept
NOT_KEPT = {
    PutMessageStatus.FLUSH_DISK_TIMEOUT: "the message was written but not flushed in time",
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: "the message was written but no slave acknowledged it in time",
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ("SYNC_MASTER with no slave to replicate to (none connected, "
                                           "or more than ha_slave_fallbehind_max bytes behind)"),
}


def done_future(result: PutMessageResult) -> Future:
    future: Future = Future()
    future.set_result(result)
    return future


class AsyncPuts:
    """The store's async puts in flight: ``shutdown()`` returns when every one has its answer.

    A put counts from before its checks (:meth:`begin`, refused once shut down) until its
    future is completed (:meth:`end`), so a shutdown waits for the flushes and acks the
    running services still owe, as the pool it replaces did.  The two counts are
    ``itertools.count`` objects, whose ``next`` is atomic in CPython: no lock per put.  A
    put that passes :meth:`begin` after the shutdown read the counts is still refused, by
    the store's own check of its shutdown flag, which is set before.  Traced puts run on a
    small pool (:meth:`run_on_pool`) made the first time one is asked for.
    """

    def __init__(self):
        self._begun = itertools.count()
        self._ended = itertools.count()
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._lane: ThreadPoolExecutor | None = None
        self._lane_in = itertools.count()  # puts handed to the lane
        self._lane_out = itertools.count()  # ... and appended there

    def begin(self) -> bool:
        if self._closed:
            return False
        next(self._begun)
        return True

    def end(self) -> None:
        next(self._ended)

    @property
    def pending(self) -> int:
        """Puts begun and not yet answered."""
        return _count_value(self._begun) - _count_value(self._ended)

    def run_on_pool(self, fn, *args) -> Future:
        """``fn(*args)`` on the pool (a put already counted by :meth:`begin`); ends the put."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="put")
            pool = self._pool

        def run():
            try:
                return fn(*args)
            finally:
                self.end()

        return pool.submit(run)

    @property
    def lane_busy(self) -> bool:
        """Puts are on the lane, not yet appended: a later put goes behind them.  (Asked at every async put:
        no lane yet answers at once, and equal counts have equal reprs.)"""
        return self._lane is not None and repr(self._lane_in) != repr(self._lane_out)

    def run_in_lane(self, append, *args) -> Future:
        """``append(*args)`` -- which appends a put (counted by :meth:`begin`) and answers the future of
        its result -- on the lane, after the puts already there; the answer is that future's."""
        with self._pool_lock:
            if self._lane is None:
                self._lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="put-lane")
            lane = self._lane
        answer: Future = Future()
        next(self._lane_in)

        def run():
            try:
                inner = append(*args)
            except BaseException as exc:
                next(self._lane_out)
                answer.set_exception(exc)
                return
            next(self._lane_out)
            inner.add_done_callback(partial(_pass_on, answer))

        lane.submit(run)
        return answer

    def shutdown(self, wait: bool = True, timeout: float = 60.0) -> None:
        self._closed = True
        deadline = time.monotonic() + timeout
        while wait and self.pending > 0:
            if time.monotonic() > deadline:
                log.warning("%d async puts still unanswered after %.0f s of shutdown", self.pending, timeout)
                break
            time.sleep(0.001)
        with self._pool_lock:
            pools = (self._pool, self._lane)
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=wait)


def _pass_on(answer: Future, done: Future) -> None:
    """Complete ``answer`` as ``done`` was completed."""
    exc = done.exception()
    if exc is not None:
        answer.set_exception(exc)
    else:
        answer.set_result(done.result())


def _count_value(counter: itertools.count) -> int:
    """How far an ``itertools.count()`` has counted (its repr is ``count(N)``)."""
    return int(repr(counter)[6:-1])


class PutWait:
    """One async put waiting for its flush and/or its slave: the last answer completes its future.

    ``_left`` counts the answers still owed -- the flush's, the replica's, and the
    submitter's own (given once both requests are made, so a request answered at once
    cannot complete the future before the other is made)."""

    __slots__ = ("put_path", "puts", "item", "result", "begin", "future", "flush", "replica", "replica_begin",
                 "submitted", "_left", "_lock")

    def __init__(self, put_path, puts: AsyncPuts, item, result: PutMessageResult, begin: float):
        self.put_path = put_path  # (rmqstore.engine.store_put.PutPath: it submits the waits)
        self.puts = puts
        self.item = item
        self.result = result
        self.begin = begin
        self.future: Future = Future()
        self.flush: GroupCommitRequest | None = None
        self.replica = _PUT_OK
        self.replica_begin = 0.0
        self.submitted = False
        self._left = 3
        self._lock = threading.Lock()

    def submit(self) -> bool:
        """Hand the waits to the services; False when there is nothing to wait for."""
        put_path = self.put_path
        if put_path.config.broker_role is not BrokerRole.SYNC_MASTER:  # the flush alone answers: no count
            self.flush = put_path.submit_flush(self.result, self.item, NULL_PUT_TRACE, self._finish)
            self.submitted = self.flush is not None
            return self.submitted
        self.replica_begin = _perf()
        self.replica = put_path.submit_replica(self.result, self.item, self._answered)
        if isinstance(self.replica, PutMessageStatus):
            self._left -= 1  # (no request made: nobody else touches the count yet)
        self.flush = put_path.submit_flush(self.result, self.item, NULL_PUT_TRACE, self._answered)
        if self.flush is None:
            self._answered(None)
        if self.flush is None and isinstance(self.replica, PutMessageStatus) and self.replica is _PUT_OK:
            return False  # nothing waited: the caller answers at once
        self.submitted = True
        self._answered(None)
        return True

    def _answered(self, _request) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._finish()

    def _finish(self, _request=None) -> None:
        put_path = self.put_path
        try:
            status = self.flush.status if self.flush is not None else _PUT_OK
            replica_status = _PUT_OK
            if self.replica is not _PUT_OK:  # a SYNC_MASTER put
                replica_status = put_path.replica_status(self.replica, NULL_PUT_TRACE, self.replica_begin)
            result = put_path.settle(self.result, status, replica_status)
            self.future.set_result(put_path.record(self.item, result, self.begin, NULL_PUT_TRACE))
        finally:
            self.puts.end()
