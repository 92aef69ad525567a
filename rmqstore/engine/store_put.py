"""The put pipeline: checks -> encode + append -> wait -> record.

RocketMQ's ``DefaultMessageStore#asyncPutMessage`` and ``CommitLog#handleDiskFlush`` /
``handleHA``.  Every put goes through the same four stages of :class:`PutPath`:

1. **checks** (:meth:`PutPath.checked`): the store's state, then the message's
   (:mod:`rmqstore.engine.store_checks`); a refusal skips to the record;
2. **encode + append**: the commit log encodes outside the put lock and appends under it
   (:mod:`rmqstore.engine.commit_log`);
3. **wait** for what the configuration promises (:meth:`PutPath.finish`):

   * with SYNC_FLUSH and a message that waits for its store, a group-commit request is handed
     to the flush service and waited on (FLUSH_DISK_TIMEOUT when it does not come in time);
     otherwise the flush (or commit) service is only woken;
   * with SYNC_MASTER, at the same time, a replica request waits for a slave's acknowledgement
     (:mod:`rmqstore.engine.ha`): SLAVE_NOT_AVAILABLE at once when no slave is connected or the slave
     is too far behind, FLUSH_SLAVE_TIMEOUT when none acknowledged it in time.  The replica
     request is made *before* the flush wait so the two overlap, and a replication status
     other than PUT_OK overrides the flush status, as in RocketMQ (:meth:`PutPath.settle`, the
     one place that answers a put's waits);

4. **record** (:meth:`PutPath.record`): the put's end for the tracer and its count in
   :class:`StoreStats` -- every put the Python side answers, refused or not, is counted there.

The async form is the same pipeline completed by a callback: stages 1 and 2 run in the
caller's thread, the wait is handed to the services as flush and replica requests whose
answers complete a :class:`~rmqstore.engine.async_puts.PutWait`, and that ends with the same
:meth:`~PutPath.settle` and :meth:`~PutPath.record` -- so one flush (or one slave ack)
completes a whole group of async puts and no thread waits per put.  Nor does the caller (a
broker's event loop) wait for a commitlog file: a put that needs one the allocate service has
not made yet goes on on the put lane, and the async puts after it follow it there until the
lane is empty (:mod:`rmqstore.engine.async_puts`).

Each stage boundary calls a hook of the commit log's tracer (:mod:`rmqstore.engine.put_trace`):
with a tracer set each stage is an event; without one every hook is a no-op and the path computes
nothing for it.  Without a tracer the common case goes through the compiled put first
(:mod:`rmqstore.engine.native_put`): one C call for the checks, the encoding, the append, the
wake-up and the counting; whatever it declines runs here, unchanged, and a compiled put that
must wait ends in :meth:`PutPath.finish` (wait, then record) like a pure one.
:class:`PutPath` is a part :class:`~rmqstore.store.MessageStore` holds, built from its
commit log, checks and statistics; the services it waits on are handed to it at start.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable
from concurrent.futures import Future
from time import monotonic as _monotonic
from time import perf_counter as _perf

from . import native_put
from .allocate import AllocateMappedFileService
from .commit_log import CommitLog
from ..common.config import BrokerRole, FlushDiskType, StoreConfig
from .flush import CommitRealTimeService, FlushRealTimeService, GroupCommitRequest, GroupCommitService
from .ha import HAService
from ..format.message import Message, MessageBatch
from ..format.status import PutMessageResult, PutMessageStatus
from .store_checks import PutChecks
from .async_puts import NOT_KEPT, AsyncPuts, PutWait, done_future
from .put_trace import NULL_PUT_TRACE

__all__ = ["PutPath", "StoreStats"]

log = logging.getLogger(__name__)

_PUT_OK = PutMessageStatus.PUT_OK
_ITEMS = (Message, MessageBatch)  # what a put takes (anything else was refused and is counted as topic "?")



def _bucket(elapsed_ms: float) -> int:
    for i, bound in enumerate((0, 10, 50, 100, 200, 500)):
        if elapsed_ms <= bound:
            return i
    return 6


class StoreStats:
    """Put statistics (a slice of RocketMQ's StoreStatsService).

    Two sets of counters: these, which the pure path updates under a lock, and the compiled
    put's own (``native``: a function answering them, :mod:`rmqstore.engine.native_put`), which it
    updates while it holds the GIL; :meth:`snapshot` adds the two.
    """

    def __init__(self):
        self._lock = threading.Lock()
        #: the compiled put's counters (``Putter.counters``), or None
        self.native: Callable[[], dict] | None = None
        self.put_message_times_total: dict[str, int] = {}
        self.put_message_size_total: dict[str, int] = {}
        self.put_message_failed_times = 0
        self.put_message_entire_time_max = 0.0  # ms
        self.put_message_distribute_time = [0] * 7  # <=0ms, 0-10, 10-50, 50-100, 100-200, 200-500, >500
        self.put_ok_count = 0  # the puts answered PUT_OK (as the compiled put counts its own: a number, no name)
        self.status_counts: dict[str, int] = {}  # the other answers by status name

    def record_put(self, topic: str, result: PutMessageResult, elapsed_ms: float) -> None:
        """Count one put of ``topic`` answered ``result`` after ``elapsed_ms`` (a stored batch: all its
        messages): the pipeline's last stage (:meth:`PutPath.record`), and a compiled put's refusal."""
        status = result.status
        with self._lock:
            if status is _PUT_OK:
                ar = result.append_result
                times, sizes = self.put_message_times_total, self.put_message_size_total
                times[topic] = times.get(topic, 0) + ar.msg_num
                sizes[topic] = sizes.get(topic, 0) + ar.wrote_bytes
                self.put_ok_count += 1
            else:
                self.put_message_failed_times += 1
                name = status.name
                self.status_counts[name] = self.status_counts.get(name, 0) + 1
            if elapsed_ms > self.put_message_entire_time_max:
                self.put_message_entire_time_max = elapsed_ms
            i = 0 if elapsed_ms <= 0 else 1 if elapsed_ms <= 10 else _bucket(elapsed_ms)
            self.put_message_distribute_time[i] += 1

    def snapshot(self) -> dict:
        native = self.native() if self.native is not None else None
        with self._lock:
            times = dict(self.put_message_times_total)
            sizes = dict(self.put_message_size_total)
            status_counts = dict(self.status_counts)
            ok = self.put_ok_count
            dist = list(self.put_message_distribute_time)
            time_max = self.put_message_entire_time_max
            failed = self.put_message_failed_times
        if native is not None:
            for topic, n in native["times"].items():
                times[topic] = times.get(topic, 0) + n
            for topic, n in native["sizes"].items():
                sizes[topic] = sizes.get(topic, 0) + n
            ok += native["ok"]
            dist = [a + b for a, b in zip(dist, native["dist"])]
            time_max = max(time_max, native["max_ms"])
        if ok:
            status_counts["PUT_OK"] = ok
        return {
            "putMessageTimesTotal": sum(times.values()),
            "putMessageSizeTotal": sum(sizes.values()),
            "putMessageFailedTimes": failed,
            "putMessageEntireTimeMax": time_max,
            "putMessageDistributeTime": dist,
            "byTopic": times,
            "statusCounts": status_counts,
        }


class PutPath:
    """Puts, replays and the async forms: checks -> encode + append -> wait -> record.

    Built by the store from its parts: ``config``, the ``commit_log`` that appends,
    the ``checks`` (:class:`~rmqstore.engine.store_checks.PutChecks`, whose state says whether a
    put may run), the ``stats`` every put is counted in, and the ``allocate_service`` an async
    put must not wait for.  The services a put waits on -- the group commit or the flush (and
    commit) service, HA -- exist once the store starts, which hands them over with
    :meth:`connect`; the compiled puts are made then too.
    """

    def __init__(self, config: StoreConfig, commit_log: CommitLog, checks: PutChecks, stats: StoreStats,
                 allocate_service: AllocateMappedFileService):
        self.config = config
        self.commit_log = commit_log
        self.checks = checks
        self.stats = stats
        self.allocate_service = allocate_service
        self.group_commit_service: GroupCommitService | None = None
        self.flush_service: FlushRealTimeService | None = None
        self.commit_service: CommitRealTimeService | None = None
        self.ha_service: HAService | None = None
        #: the compiled put (rmqstore.engine.native_put), made by connect(); None: every put takes the pure path
        self.putter: Any = None
        self.async_putter: Any = None  # the compiled append of the async puts (rmqstore.engine.native_put.make_putter)
        self.async_puts: AsyncPuts | None = None  # the async puts in flight, made by the first one
        self._async_lock = threading.Lock()

    def connect(self, *, group_commit_service: GroupCommitService | None, flush_service: FlushRealTimeService | None,
                commit_service: CommitRealTimeService | None, ha_service: HAService | None) -> None:
        """The started store's services (the ones a put waits on), and the compiled puts made with them."""
        self.group_commit_service = group_commit_service
        self.flush_service = flush_service
        self.commit_service = commit_service
        self.ha_service = ha_service
        self.putter = native_put.make_putter(self)
        self.async_putter = native_put.make_putter(self, appender=True)
        self.stats.native = self.putter.counters if self.putter is not None else None

    def close(self) -> None:
        """Wait until every async put in flight has its answer (the store is shut down already)."""
        with self._async_lock:
            puts = self.async_puts
        if puts is not None:
            puts.shutdown(wait=True)

    def put_message(self, msg: Message) -> PutMessageResult:
        """Put one message and wait for what the configuration promises (sync flush, slave).

        The compiled put (:mod:`rmqstore.engine.native_put`) takes the common case in one call; it
        answers None for anything else -- and always with a tracer set -- and the pure path runs.
        """
        putter = self.putter
        if putter is not None:
            result = putter.put(msg)
            if result is not None:
                return result
        return self._put(msg, self.checks.check_message, self.commit_log.put_message)

    def put_messages(self, batch: MessageBatch) -> PutMessageResult:
        """Put a batch (one topic and queue, consecutive queue offsets, never across files)."""
        putter = self.putter
        if putter is not None:
            result = putter.put_batch(batch)
            if result is not None:
                return result
        return self._put(batch, self.checks.check_messages, self.commit_log.put_messages)

    def replay_message(self, msg: Message) -> PutMessageResult:
        """Write a recorded record again (``rmqstore load``): the one way to give what the store decides.

        ``msg.store_timestamp`` (required) and ``msg.body_crc`` (optional) are written as
        recorded; ``msg.queue_offset`` (optional) must be the one the store gives the record
        anyway -- its queue's next one, 0 for a prepared or rolled-back record -- or the
        replay is refused with MESSAGE_ILLEGAL, so a copy's consume queues count as the
        original's.  The store timestamp must be a non-negative int64 but need not grow:
        RocketMQ takes it from the wall clock, which may step back, and a copy keeps that.
        No delay-level rewrite: the record is stored as it was.
        """
        return self._put(msg, self.checks.check_replayed_message, self.commit_log.put_message)

    # -- the pipeline: checks -> encode + append -> wait -> record ----------------------------------
    def _put(self, item, check, append) -> PutMessageResult:
        """The whole pipeline in the caller's thread (a synchronous put, a traced or refused async one)."""
        begin = _perf()
        tr = self.commit_log.tracer
        result = self.checked(item, check, tr)
        if result is None:
            result = append(item)  # the commit log encodes, then appends under the put lock
        return self.finish(result, item, begin, tr)

    def checked(self, item, check, tr) -> PutMessageResult | None:
        """The checks: the store's state, then the item's (``check``); the refusal, or None."""
        refusal = self.checks.check_store_status()
        message_refusal = check(item) if refusal is None else None
        tr.checked(item, refusal, message_refusal)
        return refusal if refusal is not None else message_refusal

    def finish(self, result: PutMessageResult, item, begin: float, tr, clock=_perf) -> PutMessageResult:
        """After the append (or a refusal): wait for what the configuration promises, then record.

        RocketMQ's ``handleDiskFlush`` and ``handleHA``: the replica request is made *before* the flush
        wait so the two overlap, and :meth:`settle` answers.  ``begin`` is the put's start on ``clock``
        (the compiled put's is ``time.monotonic``)."""
        if result.status is _PUT_OK:
            replica = self.submit_replica(result, item)
            req = self.submit_flush(result, item, tr)
            flush = _PUT_OK if req is None else req.wait(self.config.sync_flush_timeout / 1000.0 + 1.0)
            if replica is not _PUT_OK or tr.active:  # (nothing to wait for or to trace otherwise)
                replica = self.replica_status(replica, tr)
            if flush is not _PUT_OK or replica is not _PUT_OK:  # (a promise not kept: settle answers)
                result = self.settle(result, flush, replica)
        return self.record(item, result, begin, tr, clock)

    def record(self, item, result: PutMessageResult, begin: float, tr, clock=_perf) -> PutMessageResult:
        """The last stage: the put's end for the tracer and its count in the statistics; the result."""
        elapsed_ms = (clock() - begin) * 1000
        tr.end(result, elapsed_ms)
        self.stats.record_put(item.topic if isinstance(item, _ITEMS) else "?", result, elapsed_ms)
        return result

    @staticmethod
    def settle(result: PutMessageResult, flush: PutMessageStatus, replica: PutMessageStatus) -> PutMessageResult:
        """The answer of an appended put whose flush and replica waits ended with these statuses:
        replication overrides the flush status, as in RocketMQ; a promise not kept says so."""
        status = flush if replica is _PUT_OK else replica
        return (result if status is _PUT_OK
                else PutMessageResult(status, result.append_result, NOT_KEPT.get(status, "")))

    def async_put_message(self, msg: Message) -> Future:
        """Like ``asyncPutMessage``: appended now, in the caller's thread; a future of the result,
        completed by the service that keeps the promise (the group commit, the slave's ack)."""
        fast = self.async_putter
        return self._submit_async(msg, self.checks.check_message, self.commit_log.put_message,
                                  fast.put if fast is not None else None)

    def async_put_messages(self, batch: MessageBatch) -> Future:
        fast = self.async_putter
        return self._submit_async(batch, self.checks.check_messages, self.commit_log.put_messages,
                                  fast.put_batch if fast is not None else None)

    def _submit_async(self, item, check, append, fast=None) -> Future:
        # RocketMQ's design: check and append here, then hand the wait to the flush (and replica)
        # services as requests whose answer completes the future -- one flush completes a whole
        # group, and no thread waits per put.  With a tracer the put runs whole on a small pool,
        # so the trace shows the same stages as a synchronous put.  A put that would wait for a
        # commitlog file here goes to the put lane instead, and so do the puts after it while the
        # lane holds any (they keep their order; the caller never waits for a file).
        puts = self.async_puts
        if puts is None and not self.checks.shutdown_flag:
            with self._async_lock:  # close() takes it too: nothing is made after it looked
                if self.async_puts is None and not self.checks.shutdown_flag:
                    self.async_puts = AsyncPuts()
                puts = self.async_puts
        if puts is None or not puts.begin():  # shut down: the put answers SERVICE_NOT_AVAILABLE
            return done_future(self._put(item, check, append))
        if self.commit_log.tracer.active:
            return puts.run_on_pool(self._put, item, check, append)
        if puts.lane_busy:  # puts before this one wait there for their file: it goes behind them
            return puts.run_in_lane(self._append_async, puts, item, check, append, fast, _perf(), True)
        return self._append_async(puts, item, check, append, fast, _perf(), False)

    def _append_async(self, puts: AsyncPuts, item, check, append, fast, begin: float, may_wait: bool) -> Future:
        """Check and append an async put (counted by ``puts.begin``), then hand its waits to the services.

        Unless ``may_wait`` (on the put lane), a put that needs a commitlog file the allocate
        service has not made yet does not wait for it here: it goes on on the lane (:mod:`.async_puts`).
        """
        wait = None
        handed = False
        try:
            if may_wait:
                result = self._append_now(item, check, append, fast)
            else:
                with self.allocate_service.without_waiting() as attempt:
                    result = self._append_now(item, check, append, fast)
                if attempt.declined and result.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
                    handed = True  # nothing of it was written (a blank ending a full file at most)
                    return puts.run_in_lane(self._append_async, puts, item, check, append, fast, begin, True)
            if result.status is _PUT_OK:
                wait = PutWait(self, puts, item, result, begin)
                if wait.submit():
                    return wait.future  # the services' answers finish the pipeline (PutWait)
            self.record(item, result, begin, NULL_PUT_TRACE)
        finally:
            if not handed and (wait is None or not wait.submitted):
                puts.end()
        return done_future(result)

    def _append_now(self, item, check, append, fast) -> PutMessageResult:
        # the compiled append (checks + append, nothing else) when it takes the item; else the pipeline's
        # first stages (an async put is traced only on the pool: its tracer here is the null one)
        result = fast(item) if fast is not None else None
        if result is None:
            result = self.checked(item, check, NULL_PUT_TRACE)
            if result is None:
                result = append(item)
        return result

    def submit_flush(self, result: PutMessageResult, msg, tr, on_done=None) -> GroupCommitRequest | None:
        """RocketMQ's handleDiskFlush, up to the wait: a group-commit request, or None (a wake-up)."""
        cfg = self.config
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            service = self.group_commit_service
            if msg.wait_store_msg_ok:
                ar = result.append_result
                req = GroupCommitRequest(ar.wrote_offset + ar.wrote_bytes, cfg.sync_flush_timeout, on_done,
                                         service.gate)
                tr.group_commit_request(req, cfg.sync_flush_timeout)
                service.put_request(req)
                return req
            tr.flush_wakeup("group_commit_wakeup")
            service.wakeup()
        elif self.commit_service is not None:
            tr.flush_wakeup("commit_wakeup")
            self.commit_service.wakeup()
        else:
            tr.flush_wakeup("async_wakeup")
            self.flush_service.wakeup()
        return None

    def submit_replica(self, result: PutMessageResult, msg, on_done=None):
        """RocketMQ's submitReplicaRequest: a request to wait on, or the status at once."""
        if self.config.broker_role is not BrokerRole.SYNC_MASTER or not msg.wait_store_msg_ok:
            return _PUT_OK
        ar = result.append_result
        end = ar.wrote_offset + ar.wrote_bytes
        ha = self.ha_service
        if ha is None or not ha.is_slave_ok(end):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        return ha.submit(end, self.config.sync_flush_timeout, on_done)

    def replica_status(self, replica, tr, begin: float | None = None) -> PutMessageStatus:
        """Wait for the replica request (if one was made); trace the wait as its own stage.

        With ``begin`` (an async put's, answered already) the wait is counted from then."""
        waits = not isinstance(replica, PutMessageStatus)
        timeout = self.config.sync_flush_timeout / 1000.0
        if begin is None:
            begin = _perf()
            # the request's wait began when it was made, as its deadline counts (timeout after)
            made = begin - (_monotonic() - (replica.deadline - timeout)) if waits else begin
            status = replica.wait(timeout + 1.0) if waits else replica
        else:
            made = begin
            status = replica.status if waits else replica
        if (waits or status is not _PUT_OK) and self.ha_service is not None:  # a SYNC_MASTER wait
            self.ha_service.note_replica_outcome(status, (_perf() - made) * 1000,
                                                 replica.next_offset if waits else None)
        tr.replica(self.config.broker_role.value, status, replica, waits, begin, self.ha_service)
        return status
