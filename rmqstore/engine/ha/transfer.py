"""GroupTransferService: a SYNC_MASTER put waits until a slave acknowledged its end offset.

This is group commit again, with the slave's ack in place of the flush.  A put that must
be replicated hands a :class:`ReplicaRequest` ("tell me when a slave has everything up
to offset N") to the service and blocks.  Requests wait in one list under a small lock;
every time a slave's report moves ``push2SlaveMaxOffset``
(:meth:`GroupTransferService.notify_transfer_some`) every request whose offset is now
covered is woken in one pass.  One 8-byte report from the slave thus answers every put
that was appended before the bytes it acknowledges -- the batching that makes
SYNC_MASTER affordable.  RocketMQ hands the ack to the service thread, which then wakes
the puts; here the thread that read the ack wakes them itself, one thread hand-off less
per round (in CPython each hand-off can wait for the GIL), and the service thread only
ends the requests whose deadline passed.

A request not covered by its deadline (``sync_flush_timeout`` after it was made, as
RocketMQ 4.9.8's GroupTransferService waits ``syncFlushTimeout``) ends in
FLUSH_SLAVE_TIMEOUT.  RocketMQ counts that wait from the moment the service reaches the
request, one request after the other, so with a dead slave the n-th queued put waits up
to n timeouts (its caller gives up with UNKNOWN_ERROR after 10 s); ours counts from the
put, so every put is answered within the timeout.

:class:`WaitNotifyObject` is the other wake-up: the master's write threads sleep on it
(100 ms at most) when the slave has everything, and a put whose bytes could not be pushed
at once (:meth:`HAConnection.push_now`) wakes them all, so they leave now instead of at
the next poll.
"""

from __future__ import annotations

import logging
import threading
import time

from ..flush import GroupCommitRequest, ServiceThread
from ..put_trace import NULL_PUT_TRACE
from ...format.status import PutMessageStatus

__all__ = ["ReplicaRequest", "GroupTransferService", "WaitNotifyObject"]

log = logging.getLogger(__name__)

_OK = PutMessageStatus.PUT_OK
_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT


class ReplicaRequest(GroupCommitRequest):
    """'Tell me when a slave has acknowledged everything up to ``next_offset``.'"""

    __slots__ = ()

    def wait(self, timeout: float) -> PutMessageStatus:
        """The replication status, or FLUSH_SLAVE_TIMEOUT if the service does not answer in time."""
        if self._lock is None:
            raise TypeError("a request made with on_done is not waited on")
        if self._lock.acquire(timeout=timeout):
            return self.status
        return _TIMEOUT


class WaitNotifyObject:
    """Wake every sleeping write thread at once, losing no wake-up (RocketMQ's WaitNotifyObject).

    A waiter notes :attr:`generation` *before* it looks for work and sleeps only while the
    generation is unchanged, so a wake-up between its look and its sleep is not lost.
    """

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self.generation = 0
        self._waiting = 0

    def wakeup_all(self) -> None:
        if self._waiting == 0:  # nobody sleeps: the next look finds the work anyway
            self.generation += 1
            return
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def wait_for_running(self, seen: int, timeout: float) -> None:
        with self._cond:
            if self.generation != seen:
                return
            self._waiting += 1
            try:
                self._cond.wait(timeout)
            finally:
                self._waiting -= 1


class GroupTransferService(ServiceThread):
    """Answers SYNC_MASTER puts as the slaves' acknowledgements arrive."""

    name = "GroupTransferService"

    def __init__(self, ha_service, tracer_of=lambda: NULL_PUT_TRACE):
        super().__init__()
        self.ha_service = ha_service
        self.tracer_of = tracer_of
        self.pending: list[ReplicaRequest] = []
        self._lock = threading.Lock()
        self.requests_served = 0
        self.rounds = 0

    def put_request(self, request: ReplicaRequest) -> None:
        with self._lock:
            self.pending.append(request)
        if self.ha_service.push2_slave_max_offset >= request.next_offset:
            self.serve()  # covered already, by an ack that came before the request

    def notify_transfer_some(self) -> None:
        """A slave acknowledged more (``push2SlaveMaxOffset`` moved): answer whom it covers, now."""
        self.serve()

    def serve(self, final: bool = False) -> int:
        """Wake the covered and the expired requests (all of them when ``final``); count them."""
        tr = self.tracer_of()  # taken before any put is woken (and may turn its tracer off)
        acked = self.ha_service.push2_slave_max_offset
        now = time.monotonic()
        with self._lock:
            if not self.pending:
                return 0
            covered = [r for r in self.pending if acked >= r.next_offset]
            expired = [r for r in self.pending if acked < r.next_offset and (final or now >= r.deadline)]
            if not covered and not expired:
                return 0
            self.pending = [r for r in self.pending if acked < r.next_offset and not (final or now >= r.deadline)]
            waiting = len(self.pending)
            self.requests_served += len(covered) + len(expired)
            self.rounds += 1
        tr.replica_wake(acked, len(covered), len(expired), waiting)  # before the wakes: a woken put may read the trace
        for req in covered:
            req.wakeup_customer(_OK)
        for req in expired:
            log.warning("transfer message to slave timeout, %d", req.next_offset)
            req.wakeup_customer(_TIMEOUT)
        return len(covered) + len(expired)

    def run(self) -> None:
        while not self.is_stopped():
            self._stop_event.wait(0.01)  # deadlines to the 10 ms, as RocketMQ's waitForRunning(10)
            self.serve()
        time.sleep(0.01)  # let in-flight requests arrive, then answer every one
        self.serve(final=True)
