"""The engine's tracing, as an observer at the stage boundaries of a put (and of what answers it).

The engine never asks whether a put is traced.  At each stage boundary it calls one hook
of ``commit_log.tracer`` -- the put path, the commit log's append, the flush and commit
services, the group commit, the dispatch of the reput thread, the HA push and the slaves'
acks -- and that object is one of two:

* :data:`NULL_PUT_TRACE` (no tracer): every hook does nothing, or only the work itself
  (``flush`` and ``commit`` flush and commit);
* a :class:`PutTrace` over a tracer of :mod:`rmqstore.common.trace` (anything with
  ``event(stage, **fields)``): each hook turns the objects it is given into the stage's
  event -- positions of the mapped file before and after, the record's fields with their
  byte ranges, the status decided.

The hooks take the raw objects (the mapped file, the result, the request), never ready-made
fields, so an untraced put computes nothing of an event: it pays one no-op call a boundary.
``active`` is False on the null one only; the two decisions that hang on it are the compiled
put's (``_native/cput.c`` declines a put unless the commit log's tracer *is*
:data:`NULL_PUT_TRACE`, one pointer comparison) and the compiled dispatch's (a traced store
dispatches and recovers in Python, whose stages the trace shows).  :func:`put_trace` makes
the observer of a tracer (None: the null one); ``MessageStore.tracer`` sets it and answers
the tracer back.  The stages and their fields are listed in :mod:`rmqstore.common.trace`.
"""

from __future__ import annotations

from time import perf_counter as _perf
from typing import Any

from ..common.trace import file_positions
from ..format.message import MessageBatch
from ..format.record import decode_record, record_field_spans
from ..format.status import AppendMessageStatus, PutMessageResult

__all__ = ["PutTrace", "NullPutTrace", "NULL_PUT_TRACE", "put_trace"]

#: the fields of a flush request that waits for nothing, by its mode
_WAKEUPS: dict[str, dict[str, Any]] = {
    "group_commit_wakeup": {"waits": False},
    "commit_wakeup": {"service": "CommitRealTimeService"},
    "async_wakeup": {"service": "FlushRealTimeService"},
}


class NullPutTrace:
    """No tracer: every hook a no-op (``flush`` and ``commit`` do the work, nothing more)."""

    active = False
    tracer: Any = None  # (the tracer observed; None: none)

    def checked(self, item, store_refusal, message_refusal) -> None:
        pass

    def encoded(self, msg, enc) -> None:
        pass

    def lock_acquired(self, lock) -> None:
        pass

    def file_found(self, mf, lock) -> dict | None:
        return None

    def new_file(self, queue, mf, lock) -> dict | None:
        return None

    def blank(self, mf, result, before) -> None:
        pass

    def appended(self, mf, result, before) -> None:
        pass

    def lock_released(self) -> None:
        pass

    def group_commit_request(self, req, timeout_ms: int) -> None:
        pass

    def flush_wakeup(self, mode: str) -> None:
        pass

    def replica(self, role: str, status, replica, waits: bool, begin: float, ha_service) -> None:
        pass

    def end(self, result, elapsed_ms: float) -> None:
        pass

    def flush(self, queue, least_pages: int, by: str) -> bool:
        return queue.flush(least_pages)

    def commit(self, queue, least_pages: int) -> bool:
        return queue.commit(least_pages)

    def group_commit_swap(self, requests) -> None:
        pass

    def group_commit_wake(self, req, queue) -> None:
        pass

    def queue_max(self, cq) -> int | None:
        return None

    def dispatched(self, req, cq, before) -> None:
        pass

    def dispatch_skipped(self, req) -> None:
        pass

    def indexed(self, req) -> None:
        pass

    def ha_push(self, slave: str, offset: int, size: int) -> None:
        pass

    def replica_wake(self, acked: int, served: int, timed_out: int, waiting: int) -> None:
        pass


#: the engine's tracer when none is set (one object: the compiled put recognises it)
NULL_PUT_TRACE = NullPutTrace()


class PutTrace(NullPutTrace):
    """The stage boundaries of the engine as events of ``tracer`` (see :mod:`rmqstore.common.trace`)."""

    active = True

    def __init__(self, tracer):
        self.tracer = tracer

    # -- the put path: checks, encode, append under the lock ---------------------------------------
    def checked(self, item, store_refusal, message_refusal) -> None:
        """The checks stage: the put begins, the store's state, and the message's check when that ran."""
        self.tracer.event("put.begin", kind="batch" if isinstance(item, MessageBatch) else "single",
                          topic=getattr(item, "topic", None), queue_id=getattr(item, "queue_id", None))
        for stage, refusal in (("check.store_status", store_refusal), ("check.message", message_refusal)):
            self.tracer.event(stage, status=refusal.status.name if refusal else "OK",
                              message=refusal.message if refusal else "")
            if refusal is not None:
                return  # (refused by the store: the message was not checked)

    def encoded(self, msg, enc) -> None:
        if isinstance(enc, PutMessageResult):  # refused
            self.tracer.event("encode", status=enc.status.name, message=enc.message)
            return
        rewritten = enc.topic_queue_key != (msg.topic, msg.queue_id)
        self.tracer.event("encode", status="OK", length=enc.length, topic=enc.topic_queue_key[0],
                          queue_id=enc.topic_queue_key[1], delay_rewrite=rewritten, outside_lock=True)

    def lock_acquired(self, lock) -> None:
        self.tracer.event("lock.acquire", lock=type(lock).__name__)

    def file_found(self, mf, lock) -> dict | None:
        """The put lock taken (``lock``) and the last file takes the append: its positions (also the
        append's ``before``).  One hook for the two events: an untraced put makes one call."""
        self.lock_acquired(lock)
        self.tracer.event("mapped_file.found", positions=file_positions(mf))
        return file_positions(mf)

    def new_file(self, queue, mf, lock) -> dict | None:
        """A new file takes the append (None: none could be made); its positions, as :meth:`file_found`.
        ``lock``: the put lock just taken, as there; None after a blank (the lock held since)."""
        if lock is not None:
            self.lock_acquired(lock)
        svc = queue.allocate_service
        stage = "mapped_file.allocated" if svc is not None else "mapped_file.created"
        self.tracer.event(stage, positions=file_positions(mf),
                          by="AllocateMappedFileService" if svc is not None else "put thread")
        return file_positions(mf)

    def blank(self, mf, result, before) -> None:
        self.tracer.event("append.blank", offset=result.wrote_offset, size=result.wrote_bytes,
                          header=(result.wrote_offset, result.wrote_offset + 8),
                          before=before, after=file_positions(mf))
        self.tracer.event("append.retry", reason="END_OF_FILE: the record does not fit; next file")

    def appended(self, mf, result, before) -> None:
        """The record(s) just written, field by field with physical byte ranges."""
        records = []
        pos = result.wrote_offset - mf.file_from_offset
        end = pos + result.wrote_bytes
        buf = mf.write_buffer if mf.write_buffer is not None else mf.mapped
        while result.status is AppendMessageStatus.PUT_OK and pos < end:
            rec = decode_record(buf, pos)
            spans = [(name, start, stop) for name, start, stop, _ in
                     record_field_spans(rec, mf.file_from_offset + pos)]
            records.append({"offset": mf.file_from_offset + pos, "size": rec.total_size,
                            "queue_offset": rec.queue_offset, "topic": rec.topic, "queue_id": rec.queue_id,
                            "fields": spans})
            pos += rec.total_size
        self.tracer.event("append.record", status=result.status.name, offset=result.wrote_offset,
                          size=result.wrote_bytes, queue_offset=result.logics_offset,
                          store_timestamp=result.store_timestamp, records=records,
                          into="write_buffer" if mf.write_buffer is not None else "mmap")
        self.tracer.event("position.wrote", before=before, after=file_positions(mf))

    def lock_released(self) -> None:
        self.tracer.event("lock.release")

    # -- the waits: flush request, replica, the put's end -----------------------------------------
    def group_commit_request(self, req, timeout_ms: int) -> None:
        self.tracer.event("flush.request", mode="group_commit", next_offset=req.next_offset, timeout_ms=timeout_ms)

    def flush_wakeup(self, mode: str) -> None:
        self.tracer.event("flush.request", mode=mode, **_WAKEUPS[mode])

    def replica(self, role: str, status, replica, waits: bool, begin: float, ha_service) -> None:
        self.tracer.event("replica", role=role, status=status.name, waits=waits,
                          next_offset=replica.next_offset if waits else None, waited_ms=(_perf() - begin) * 1000,
                          acked=ha_service.push2_slave_max_offset if ha_service is not None else None)

    def end(self, result, elapsed_ms: float) -> None:
        self.tracer.event("put.end", status=result.status.name, message=result.message, elapsed_ms=elapsed_ms)

    # -- the services: flush, commit, group commit ---------------------------------------------------
    def flush(self, queue, least_pages: int, by: str) -> bool:
        """``queue.flush``, reporting the file it flushed before and after."""
        mf = queue.find_mapped_file_by_offset(queue.flushed_where, queue.flushed_where == 0)
        before = file_positions(mf)
        nothing = queue.flush(least_pages)
        if not nothing:
            self.tracer.event("flush", by=by, least_pages=least_pages, before=before, after=file_positions(mf),
                              flushed_where=queue.flushed_where)
        return nothing

    def commit(self, queue, least_pages: int) -> bool:
        """``queue.commit``, reporting the write buffer copied into the file."""
        mf = queue.find_mapped_file_by_offset(queue.committed_where, queue.committed_where == 0)
        before = file_positions(mf)
        nothing = queue.commit(least_pages)
        if not nothing:
            self.tracer.event("commit", by="CommitRealTimeService", least_pages=least_pages, before=before,
                              after=file_positions(mf), committed_where=queue.committed_where,
                              range=(before["file"] + before["committed"], queue.committed_where) if before else None)
        return nothing

    def group_commit_swap(self, requests) -> None:
        if requests:
            self.tracer.event("group_commit.swap", requests=[r.next_offset for r in requests])

    def group_commit_wake(self, req, queue) -> None:
        self.tracer.event("group_commit.wake", next_offset=req.next_offset, status="PUT_OK",
                          flushed_where=queue.flushed_where)

    # -- the reput thread's dispatch ---------------------------------------------------------------
    def queue_max(self, cq) -> int | None:
        return cq.get_max_offset_in_queue()

    def dispatched(self, req, cq, before) -> None:
        self.tracer.event("dispatch.consume_queue", topic=req.topic, queue_id=req.queue_id,
                          queue_offset=req.consume_queue_offset,
                          unit=(req.commit_log_offset, req.msg_size, req.tags_code),
                          max_offset_before=before, max_offset_after=cq.get_max_offset_in_queue())

    def dispatch_skipped(self, req) -> None:
        self.tracer.event("dispatch.consume_queue", topic=req.topic, queue_id=req.queue_id, skipped=True,
                          reason="prepared/rolled-back transaction records get no consume-queue unit")

    def indexed(self, req) -> None:
        self.tracer.event("dispatch.index", offset=req.commit_log_offset, uniq_key=req.uniq_key, keys=req.keys)

    # -- replication ---------------------------------------------------------------------------------
    def ha_push(self, slave: str, offset: int, size: int) -> None:
        self.tracer.event("ha.push", slave=slave, offset=offset, size=size)

    def replica_wake(self, acked: int, served: int, timed_out: int, waiting: int) -> None:
        self.tracer.event("replica.wake", acked=acked, served=served, timed_out=timed_out, waiting=waiting)


def put_trace(tracer) -> NullPutTrace:
    """The engine's observer of ``tracer``: :data:`NULL_PUT_TRACE` for None."""
    return NULL_PUT_TRACE if tracer is None else PutTrace(tracer)
