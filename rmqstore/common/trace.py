"""The engine's trace: what a put really went through, stage by stage -- from the wire to the disk.

A tracer is anything with an ``event(stage, **fields)`` method.  Where it is read:

* the store: ``store.tracer`` is a property over ``store.commit_log.tracer`` -- the one
  attribute every store service reads, which holds the engine's observer of the tracer
  (:mod:`rmqstore.engine.put_trace`).  The commitlog's put path, the flush and commit
  services (through ``commit_log.tracer``), the put's flush/replica wait, the reput
  thread's dispatch (``Dispatcher.dispatch`` reads ``commit_log.tracer``) and the HA push and
  group transfer service all look there.  The allocate
  service holds no tracer: a new
  file shows up as ``mapped_file.allocated`` from the put thread that received it, and the
  reput service holds none either.
* the broker: ``broker.send_processor.tracer`` (the send processor's checks and answer) and
  a wire tap in ``broker.server.frame_recorder`` (each request frame as the connection's
  decoder cut it).  :func:`rmqstore.broker.recording.trace_broker` sets the three and restores them.

Tracing is an observer at the stage boundaries, as h11 emits events: the code calls a hook
at each boundary and never asks whether anyone listens.  Off, the hook's owner holds a null
tracer whose every hook is a no-op -- :data:`NULL_TRACER` here (the broker's send processor),
:data:`rmqstore.engine.put_trace.NULL_PUT_TRACE` in the engine, whose hooks take the raw
objects (the mapped file, the result) so that an untraced put computes none of an event's
fields.  ``active`` says which is which, for the two decisions that hang on it: the compiled
put and the compiled dispatch run only with no tracer (a trace shows the Python stages).

Events carry the positions of the files they touched *before and after*
(``wrote``/``committed``/``flushed`` of the mapped file), byte ranges written (with the
layout table's field names), and the status decided -- enough for the PutPathPlayer
widget to replay a put without re-running it, and for tests to check that the trace
tells the truth (same offsets, same positions as the store).

**The hard idea: one trace, three layers, one clock.**  A send through the broker is traced
by one tracer attached to the wire, the processor and the store at once, so its events share
one sequence number and the order of the trace *is* the order things happened: the frame's
bytes as the decoder cut them (``wire.*``, one event per field: length, serialize type and
header length, each header member, each extFields entry named with its long name -- the
one-letter names of SEND_MESSAGE_V2 mapped by ``SendMessageRequestHeaderV2``'s table --, the
properties, the body), then the processor's checks (``send.*``), then the store's stages as
below.  The body and properties *limits* are the store's checks (``check.message`` and
``encode``, with their status and message), as in RocketMQ 4.9.8, whose processor only maps
the store's refusal to MESSAGE_ILLEGAL (``send.response``).

Stages of the wire (:data:`WIRE_STAGES`): ``wire.frame`` (the whole frame, its bytes in
``data``) ``wire.length`` ``wire.header_meta`` ``wire.header`` (one per member: ``field``)
``wire.ext_field`` (one per entry: ``key``, ``name``) ``wire.properties`` (the properties
entry, parsed) ``wire.body``; each has ``span`` = ``[start, end)`` in the frame.

Stages of the send processor (:data:`SEND_STAGES`): ``send.check.broker_permission``
``send.check.topic_name`` ``send.check.system_topic`` ``send.check.topic_config``
``send.check.auto_create`` (only when the topic did not exist) ``send.check.queue_id``
``send.queue_picked`` (a negative queue id) ``send.check.topic_permission``
``send.retry_or_dlq`` (a retry topic) ``send.message`` ``send.response``; a check's ``status``
is OK or the response code that refused.

Stages of the store (:data:`STAGES`), in the order a put meets them:

``put.begin`` ``check.store_status`` ``check.message`` ``encode`` ``lock.acquire``
``mapped_file.found`` / ``mapped_file.created`` / ``mapped_file.allocated``
``append.record`` (fields with byte ranges) / ``append.blank`` then ``append.retry``
``position.wrote`` ``lock.release`` ``flush.request`` (group commit enqueue or async
wake-up) ``group_commit.swap`` ``flush`` ``group_commit.wake`` ``commit`` ``replica``
(the wait for a slave, with its outcome, how long it waited and the acknowledged offset)
``put.end`` and, from the reput thread, ``dispatch.consume_queue`` ``dispatch.index``;
with replication (:mod:`rmqstore.engine.ha`), ``ha.push`` (a transfer to a slave) and
``replica.wake`` (a slave's ack answering waiting puts).

This module is the vocabulary and the recorder every layer's hooks call; it imports
nothing of the engine.  Recording a whole put path -- a fresh traced store, or a fresh
traced broker fed request frames over loopback TCP -- is :mod:`rmqstore.broker.recording`'s
(it needs the store and the broker).  Both recordings return a :class:`PutPathTrace`,
which the PutPathPlayer widget plays.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

__all__ = ["NullTracer", "NULL_TRACER", "RecordingTracer", "file_positions", "STAGES", "WIRE_STAGES", "SEND_STAGES", "PutPathTrace"]

STAGES = (
    "put.begin", "check.store_status", "check.message", "encode", "lock.acquire",
    "mapped_file.found", "mapped_file.created", "mapped_file.allocated",
    "append.record", "append.blank", "append.retry", "position.wrote", "lock.release",
    "flush.request", "group_commit.swap", "flush", "group_commit.wake", "commit", "replica",
    "put.end", "dispatch.consume_queue", "dispatch.index", "ha.push", "replica.wake",
)

WIRE_STAGES = ("wire.frame", "wire.length", "wire.header_meta", "wire.header", "wire.ext_field", "wire.properties",
               "wire.body")

SEND_STAGES = (
    "send.check.broker_permission", "send.check.topic_name", "send.check.system_topic", "send.check.topic_config",
    "send.check.auto_create", "send.check.queue_id", "send.queue_picked", "send.check.topic_permission",
    "send.retry_or_dlq", "send.message", "send.response",
)

def file_positions(mf) -> dict | None:
    """The three positions (and identity) of a mapped file, for before/after snapshots."""
    if mf is None:
        return None
    return {"file": mf.file_from_offset, "wrote": mf.wrote_position, "committed": mf.committed_position,
            "flushed": mf.flushed_position, "size": mf.file_size, "write_buffer": mf.write_buffer is not None}


class NullTracer:
    """No tracer: every event is dropped (``active`` False).  Use the one :data:`NULL_TRACER`."""

    active = False

    def event(self, stage: str, **fields) -> None:
        pass


#: the tracer of an untraced broker (one object, so "not traced" is an identity test)
NULL_TRACER = NullTracer()


class RecordingTracer:
    """Keeps every event as a dict: ``seq``, ``t_ns`` (monotonic), ``thread``, ``stage``, fields."""

    active = True

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


@dataclass
class PutPathTrace:
    """One recorded trace: its events (in ``seq`` order) and what the run answered.

    ``results`` are the store's ``PutMessageResult`` of each put (:func:`record_put_path`),
    ``frames`` the request frames sent and ``responses`` the broker's answers
    (:func:`record_send`); ``final_positions`` is ``store.positions()`` once everything was
    committed and flushed; ``config`` the store configuration's overrides.
    """

    events: list[dict]
    title: str = "put path"
    subtitle: str = ""
    results: list = field(default_factory=list)
    frames: list[bytes] = field(default_factory=list)
    responses: list = field(default_factory=list)
    final_positions: list[dict] | None = None
    config: dict = field(default_factory=dict)

    def stages(self) -> list[str]:
        return [e["stage"] for e in self.events]

    def by_stage(self, stage: str) -> list[dict]:
        return [e for e in self.events if e["stage"] == stage]


# -- the wire ---------------------------------------------------------------------------------
