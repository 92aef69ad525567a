"""The compiled put of a started store: one ``rmqstore._native._cput.Putter``, and what it hands back to Python.

The hard idea
-------------
The pure put path is a row of RocketMQ-shaped layers -- ``PutPath._put`` -> the checks ->
``CommitLog.put_message`` -> ``MessageEncoder.encode`` -> ``append_encoded`` ->
``MappedFile.append_message`` -> ``do_append`` -> results -> flush wake-up -> statistics --
and each layer costs Python calls.  The compiled ``Putter`` does the common case of the same
row in one C call (``rmqstore/_native/cput.c``), holding the GIL throughout, so no Python
object it reads can change under it; everything else it declines before touching anything
(it answers None) and the caller runs the pure path, which words every refusal and does every
unusual thing: a delay-level rewrite, a replay, a host string not seen before, a tracer set.
A put lock held by another writer is spun for (the GIL let go between tries), as the pure path's
``PutMessageSpinLock`` spins.

Its parts are the store's own objects, never copies: the put lock (the lock underneath
``PutMessageSpinLock`` or the ``RLock``, tried without blocking, then spun for), the topic-queue table, the
mapped file queue (a new file comes from :meth:`CommitLog.next_file_for_put`), the clock
(the wall clock read in C when the store keeps its default), the store's checks (their state --
shut down, writeable -- and ``good_topics``: a topic the pure checks passed once), the encoder's
cache of parsed hosts.

After the append: with ASYNC_FLUSH (and no SYNC_MASTER) the Putter wakes the flush (or
commit) service and counts the put in its own counters, which :class:`~rmqstore.engine.store_put.StoreStats`
adds to its snapshot; otherwise it hands the result to :func:`finish_waits`, which waits for the
group commit and the slave as the pure path does and counts the put in ``StoreStats``.

Equality with the pure path is proven by ``tests/unit/test_native_put.py``.
"""

from __future__ import annotations

import time
from functools import partial

from ..common import native
from .commit_log import PutMessageSpinLock, wall_clock_ms
from .put_trace import NULL_PUT_TRACE
from ..common.config import BrokerRole, FlushDiskType
from ..format.message import BatchItem, Message, MessageBatch
from ..format.record import Address
from ..format.status import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus

__all__ = ["make_putter", "finish_waits", "appended"]

_PUT_OK = PutMessageStatus.PUT_OK


def make_putter(put_path, *, appender: bool = False):
    """The compiled put of a started store's ``put_path`` (:class:`~rmqstore.engine.store_put.PutPath`), or None
    when the pure path runs (not built, switched off).

    ``appender``: a Putter that checks and appends only and hands every result back
    untouched (its ``finish`` is :func:`appended`) -- the async puts' append, whose waits the
    flush and replica services answer (``PutPath._submit_async``).
    """
    mod = native.module("_cput", put_path.config.native)
    if mod is None:
        return None
    cfg = put_path.config
    cl = put_path.commit_log
    checks = put_path.checks
    lock = cl.put_message_lock
    raw = lock.raw_lock if isinstance(lock, PutMessageSpinLock) else lock
    waits = cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH or cfg.broker_role is BrokerRole.SYNC_MASTER
    service = put_path.commit_service if put_path.commit_service is not None else put_path.flush_service
    return mod.Putter(
        store=checks, commit_log=cl, queue=cl.mapped_file_queue, good_topics=checks.good_topics,
        acquire=raw.acquire, release=raw.release,
        clock=None if cl.clock is wall_clock_ms else cl.clock,
        default_host=cl.encoder.default_store_host, addr_cache=cl.encoder.addr_cache,
        wakeup=None if waits or appender or service is None else service.wakeup,
        finish=appended if appender else partial(finish_waits, put_path) if waits else None,
        next_file=cl.next_file_for_put, record=put_path.stats.record_put, slave_role=BrokerRole.SLAVE,
        null_tracer=NULL_PUT_TRACE,
        types=(Message, MessageBatch, BatchItem, Address, AppendMessageResult, PutMessageResult),
        statuses=(_PUT_OK, AppendMessageStatus.PUT_OK, AppendMessageStatus.END_OF_FILE,
                  PutMessageStatus.UNKNOWN_ERROR),
        max_message_size=cl.encoder.max_message_size, max_record_size=cl.encoder.max_record_size,
        file_size=cfg.mapped_file_size_commit_log, max_batch=cfg.max_msgs_num_batch * 1000)


def appended(result: PutMessageResult, _item, _begin: float) -> PutMessageResult:
    """An appender's finish: the append's result as it is (the caller waits and counts)."""
    return result


def finish_waits(put_path, result: PutMessageResult, item, begin: float) -> PutMessageResult:
    """After a compiled append with SYNC_FLUSH or SYNC_MASTER: the pipeline's end, the waits then the
    record (``PutPath.finish``), ``begin`` on the compiled put's clock (monotonic)."""
    return put_path.finish(result, item, begin, NULL_PUT_TRACE, time.monotonic)
