"""The engine's trace: what a put really went through, stage by stage.

A tracer is anything with an ``event(stage, **fields)`` method.  The store, the
commitlog, the flush/commit services, the allocate service and the reput service each
hold a ``tracer`` attribute that is ``None`` by default; every hook is a single
``if tracer is not None`` test, so an untraced store pays one attribute load per hook.

Events carry the positions of the files they touched *before and after*
(``wrote``/``committed``/``flushed`` of the mapped file), byte ranges written (with the
layout table's field names), and the status decided -- enough for the PutPathPlayer
widget to replay a put without re-running it, and for tests to check that the trace
tells the truth (same offsets, same positions as the store).

Stages, in the order a put meets them:

``put.begin`` ``check.store_status`` ``check.message`` ``encode`` ``lock.acquire``
``mapped_file.found`` / ``mapped_file.created`` / ``mapped_file.allocated``
``append.record`` (fields with byte ranges) / ``append.blank`` then ``append.retry``
``position.wrote`` ``lock.release`` ``flush.request`` (group commit enqueue or async
wake-up) ``group_commit.swap`` ``flush`` ``group_commit.wake`` ``commit`` ``replica``
(the wait for a slave, with its outcome, how long it waited and the acknowledged offset)
``put.end`` and, from the reput thread, ``dispatch.consume_queue`` ``dispatch.index``;
with replication (:mod:`rmqstore.ha`), ``ha.push`` (a transfer to a slave) and
``replica.wake`` (a slave's ack answering waiting puts).
"""

from __future__ import annotations

import threading
import time

__all__ = ["RecordingTracer", "file_positions", "STAGES"]

STAGES = (
    "put.begin", "check.store_status", "check.message", "encode", "lock.acquire",
    "mapped_file.found", "mapped_file.created", "mapped_file.allocated",
    "append.record", "append.blank", "append.retry", "position.wrote", "lock.release",
    "flush.request", "group_commit.swap", "flush", "group_commit.wake", "commit", "replica",
    "put.end", "dispatch.consume_queue", "dispatch.index", "ha.push", "replica.wake",
)


def file_positions(mf) -> dict | None:
    """The three positions (and identity) of a mapped file, for before/after snapshots."""
    if mf is None:
        return None
    return {"file": mf.file_from_offset, "wrote": mf.wrote_position, "committed": mf.committed_position,
            "flushed": mf.flushed_position, "size": mf.file_size, "write_buffer": mf.write_buffer is not None}


class RecordingTracer:
    """Keeps every event as a dict: ``seq``, ``t_ns`` (monotonic), ``thread``, ``stage``, fields."""

    def __init__(self, stages: set[str] | None = None):
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._seq = 0
        self.stages = stages

    def event(self, stage: str, **fields) -> None:
        if self.stages is not None and stage not in self.stages:
            return
        with self._lock:
            self._seq += 1
            fields.update(seq=self._seq, t_ns=time.monotonic_ns(), thread=threading.current_thread().name,
                          stage=stage)
            self.events.append(fields)

    def by_stage(self, stage: str) -> list[dict]:
        return [e for e in self.events if e["stage"] == stage]

    def clear(self) -> None:
        with self._lock:
            self.events.clear()
