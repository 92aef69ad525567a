"""Recording a put path end to end: a fresh traced store, or a fresh traced broker fed frames.

:mod:`rmqstore.common.trace` is the vocabulary (its stages) and the recorder the hooks call; this
module drives them.  :func:`record_put_path` puts messages into a fresh store with a tracer
attached and waits for the background services (flush, commit, dispatch) to act;
:func:`record_send` starts a broker over a fresh store, attaches one tracer to the wire,
the send processor and the store (:func:`trace_broker`), writes request frames to it over
loopback TCP -- built by :func:`send_frame` as a Java client builds them, or bytes recorded
from a real client -- and reads the answers.  Both return a
:class:`~rmqstore.common.trace.PutPathTrace`, which the PutPathPlayer widget plays.

The hard part is the wire: the connection's decoder cuts a frame and hands its bytes to a
tap (:func:`wire_events`), which names every field of it -- the header's members and each
extFields entry, the one-letter names of SEND_MESSAGE_V2 mapped to their long ones -- with
its byte span, before the processor sees the request; so the trace's order is the order
things happened.
"""

from __future__ import annotations

import contextlib
import copy
import shutil
import socket
import tempfile
import time

from ..common.trace import PutPathTrace, RecordingTracer

__all__ = ["record_put_path", "record_send", "send_frame", "trace_broker", "wire_events", "settle", "mode_name",
           "DEMO_CONFIG", "MODES", "demo_messages"]

#: defaults of :func:`record_put_path` and :func:`record_send`: small files so a rollover
#: shows, short intervals so the background services act within the trace
DEMO_CONFIG = {
    "mapped_file_size_commit_log": 4096,
    "pre_fault_mapped_file": False,
    "flush_interval_commit_log": 50,
    "flush_commit_log_least_pages": 0,
    "commit_interval_commit_log": 50,
    "commit_commit_log_least_pages": 0,
    "message_index_enable": False,
}

#: the flush configurations a put path is compared under
MODES = {
    "SYNC_FLUSH": {"flush_disk_type": "SYNC_FLUSH", "transient_store_pool_enable": False},
    "ASYNC_FLUSH": {"flush_disk_type": "ASYNC_FLUSH", "transient_store_pool_enable": False},
    "TRANSIENT_STORE_POOL": {"flush_disk_type": "ASYNC_FLUSH", "transient_store_pool_enable": True},
}

#: the request codes whose frames the wire tap traces
_SEND_CODES = (10, 310, 320)  # SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE


def wire_events(tracer, frame: bytes, cmd=None) -> None:
    """The events of one request frame (length field included), field by field, in byte order."""
    from .send import V2_FIELDS
    from ..format.properties import string_to_properties
    from ..remoting import RequestCode, SerializeType, decode_frame, frame_field_spans

    frame = bytes(frame)
    cmd = cmd if cmd is not None else decode_frame(frame[4:])
    v2 = cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
    serialize = SerializeType(cmd.serialize_type).name if cmd.serialize_type in (0, 1) else str(cmd.serialize_type)
    tracer.event("wire.frame", size=len(frame), code=cmd.code, code_name=_request_name(cmd.code),
                 opaque=cmd.opaque, language=cmd.language, serialize_type=serialize, data=frame)
    for name, start, end, _ in frame_field_spans(frame, expand_header=True):
        span = [start, end]
        if name == "length":
            tracer.event("wire.length", span=span, value=int.from_bytes(frame[:4], "big", signed=True))
        elif name == "header_meta":
            tracer.event("wire.header_meta", span=span, serialize_type=serialize,
                         header_length=int.from_bytes(frame[5:8], "big"))
        elif name == "body":
            tracer.event("wire.body", span=span, size=end - start)
        elif name.startswith("extFields."):
            key = name[len("extFields."):]
            long_name = V2_FIELDS.get(key, key) if v2 else key
            value = cmd.ext_fields.get(key, "")
            if long_name == "properties":
                tracer.event("wire.properties", span=span, key=key, name=long_name, value=value,
                             properties=string_to_properties(value))
            else:
                tracer.event("wire.ext_field", span=span, key=key, name=long_name, value=value)
        else:
            tracer.event("wire.header", span=span, field=name, value=_header_value(cmd, name))


def _request_name(code: int) -> str:
    from ..remoting import RequestCode

    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def _header_value(cmd, name: str):
    if name == "code":
        return f"{cmd.code} {_request_name(cmd.code)}"
    if name == "extFields":
        return f"{len(cmd.ext_fields)} entries"
    if name == "serializeTypeCurrentRPC":
        return "JSON"
    return getattr(cmd, name, None)


class _WireTap:
    """A connection decoder's recorder that turns each send request frame into wire events."""

    def __init__(self, tracer, chain=None, codes=_SEND_CODES):
        self.tracer = tracer
        self.chain = chain
        self.codes = set(codes)
        self.active = True

    def __call__(self, cmd, frame: bytes) -> None:
        if self.chain is not None:
            self.chain(cmd, frame)
        if self.active and not cmd.is_response and cmd.code in self.codes:
            wire_events(self.tracer, frame, cmd)


@contextlib.contextmanager
def trace_broker(broker, tracer):
    """Attach ``tracer`` to a started broker's wire, send processor and store; restore on exit.

    The wire tap is given to connections accepted from now on (a connection takes the
    server's ``frame_recorder`` when it is accepted); it keeps any recorder already set.
    """
    server, processor, store = broker.server, broker.send_processor, broker.store
    before = (server.frame_recorder, processor.tracer, store.tracer)
    tap = _WireTap(tracer, chain=before[0])
    server.frame_recorder, processor.tracer, store.tracer = tap, tracer, tracer
    try:
        yield tracer
    finally:
        tap.active = False
        server.frame_recorder, processor.tracer, store.tracer = before


def send_frame(topic: str = "TopicDemo", body: bytes = b"hello from the wire", *, queue_id: int = 0,
               properties: dict | None = None, producer_group: str = "PG_trace", code: int = 310,
               opaque: int = 1, born_timestamp: int = 1_795_000_000_000, serialize_type: int = 0) -> bytes:
    """A send request frame as RocketMQ's Java client writes it (SEND_MESSAGE_V2 by default).

    SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) name the header's fields ``a`` ... ``m``,
    SEND_MESSAGE (10) with their long names; ``serialize_type`` 0 is a JSON header, 1 RocketMQ's
    binary one.
    """
    from .send import V2_FIELDS
    from ..format.properties import properties_to_string
    from ..remoting import RemotingCommand, encode_frame

    props = {"KEYS": "order-0", "TAGS": "TagA", "WAIT": "true"} if properties is None else properties
    header = {"producerGroup": producer_group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
              "queueId": str(queue_id), "sysFlag": "0", "bornTimestamp": str(born_timestamp), "flag": "0",
              "properties": properties_to_string(props), "reconsumeTimes": "0", "unitMode": "false",
              "batch": str(code == 320).lower()}
    if code != 10:
        short = {long: letter for letter, long in V2_FIELDS.items()}
        header = {short[k]: v for k, v in header.items()}
    return encode_frame(RemotingCommand(code, header, bytes(body), opaque=opaque, language="JAVA", version=399,
                                        serialize_type=serialize_type))


# -- recording --------------------------------------------------------------------------------

def demo_messages(n: int = 12):
    """``n`` messages of a few sizes (the 4 KiB demo segment rolls over after ~10)."""
    from ..format.message import Message

    sizes = [120, 300, 40, 700, 200, 520]
    return [Message("TopicDemo", bytes((i * 7 + k) % 26 + 97 for k in range(sizes[i % len(sizes)])), queue_id=i % 2,
                    properties=f"KEYS\x01order-{i}\x02TAGS\x01Tag{i % 3}", born_host="192.0.2.10:40000",
                    born_timestamp=1_795_000_000_000 + i)
            for i in range(n)]


def mode_name(config) -> str:
    """``SYNC_FLUSH``, ``ASYNC_FLUSH`` or ``ASYNC_FLUSH + transient store pool``."""
    name = config.flush_disk_type.value
    if config.is_transient_store_pool_enabled:
        name += " + transient store pool"
    return name


def settle(store, timeout: float) -> bool:
    """Wait until everything written is committed (with a pool), flushed and dispatched; poke the services."""
    queue = store.commit_log.mapped_file_queue
    pool = store.transient_store_pool is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        target = queue.get_max_wrote_position()
        if queue.flushed_where >= target and (not pool or queue.committed_where >= target):
            store.wait_dispatched(max(0.0, deadline - time.monotonic()))
            time.sleep(0.02)  # let a service that just acted record its event
            return True
        for svc in (store.commit_service, store.flush_service, store.group_commit_service):
            if svc is not None:
                svc.wakeup()
        time.sleep(0.005)
    return False


@contextlib.contextmanager
def _scratch(root):
    """``root``, or a temporary directory removed afterwards."""
    if root is not None:
        yield str(root)
        return
    tmp = tempfile.mkdtemp(prefix="rmq-put-path-")
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def record_put_path(config_kwargs: dict | None = None, messages=None, *, root=None, settle_timeout: float = 5.0,
                    clock=None) -> PutPathTrace:
    """Run a real store with a tracer, put ``messages``, return the trace of what happened.

    ``config_kwargs`` override :data:`DEMO_CONFIG` (a :class:`~rmqstore.StoreConfig`'s
    fields); ``messages`` are :class:`~rmqstore.Message`/:class:`~rmqstore.MessageBatch`
    objects, a count of demo messages, or None (12 demo messages).  The store lives in a
    temporary directory (removed afterwards) unless ``root`` is given.  After the puts the
    recorder waits (up to ``settle_timeout`` s) until every byte is committed and flushed,
    then snapshots ``store.positions()`` before shutting down.
    """
    from ..common.config import StoreConfig
    from ..format.message import MessageBatch
    from ..store import MessageStore

    cfg_kwargs = {**DEMO_CONFIG, **(config_kwargs or {})}
    if messages is None:
        messages = demo_messages()
    elif isinstance(messages, int):
        messages = demo_messages(messages)
    messages = [copy.copy(m) for m in messages]
    config = StoreConfig(**cfg_kwargs)
    tracer = RecordingTracer()
    results, final = [], None
    with _scratch(root) as where:
        store = MessageStore(where, config, **({"clock": clock} if clock else {}))
        store.tracer = tracer  # the one attribute every service reads (see the module's docstring)
        try:
            store.start()
            for m in messages:
                results.append(store.put_messages(m) if isinstance(m, MessageBatch) else store.put_message(m))
            settle(store, settle_timeout)
            final = store.positions()
        finally:
            store.tracer = None
            store.shutdown()
    mode = mode_name(config)
    return PutPathTrace(sorted(tracer.events, key=lambda e: e["seq"]), title=mode,
                        subtitle=f"{len(messages)} put(s), {config.mapped_file_size_commit_log:,}-byte files, {mode}",
                        results=results, final_positions=final, config=cfg_kwargs)


def record_send(frames=None, config_kwargs: dict | None = None, *, broker_kwargs: dict | None = None, root=None,
                settle_timeout: float = 5.0, timeout: float = 10.0) -> PutPathTrace:
    """Send request frames to a real broker over loopback TCP; the trace from the wire to the disk.

    ``frames``: one frame (bytes, length field included, e.g. :func:`send_frame` or bytes
    recorded from a real client) or a list of them; None sends one :func:`send_frame`.  A
    broker (no name server) starts on an ephemeral loopback port over a store in ``root`` or
    a temporary directory (removed afterwards), ``config_kwargs`` overriding
    :data:`DEMO_CONFIG`; ``broker_kwargs`` are :class:`~rmqstore.broker.BrokerConfig` fields.
    Each frame is written to one client socket and its response read before the next.
    """
    from . import Broker, BrokerConfig
    from .background import ServiceThread
    from ..common.config import StoreConfig

    if frames is None:
        frames = [send_frame()]
    elif isinstance(frames, (bytes, bytearray, memoryview)):
        frames = [frames]
    frames = [bytes(f) for f in frames]
    cfg_kwargs = {**DEMO_CONFIG, "mapped_file_size_consume_queue": 20 * 1000, **(config_kwargs or {})}
    config = StoreConfig(**cfg_kwargs)
    tracer = RecordingTracer()
    responses, final = [], None
    with _scratch(root) as where:
        broker = Broker(where, BrokerConfig(**{"broker_name": "broker-trace", "listen_port": 0,
                                               **(broker_kwargs or {})}), config, listen_host="127.0.0.1")
        running = ServiceThread(broker, "broker-trace-loop")
        try:
            with trace_broker(broker, tracer):
                with socket.create_connection(("127.0.0.1", broker.server.port), timeout=timeout) as sock:
                    for frame in frames:
                        responses.append(_exchange(sock, frame))
                settle(broker.store, settle_timeout)
                final = broker.store.positions()
        finally:
            running.stop()
    mode = mode_name(config)
    return PutPathTrace(sorted(tracer.events, key=lambda e: e["seq"]), title=f"send through the broker ({mode})",
                        subtitle=f"{len(frames)} request frame(s) over TCP, "
                                 f"{config.mapped_file_size_commit_log:,}-byte files, {mode}",
                        frames=frames, responses=responses, final_positions=final, config=cfg_kwargs)


def _exchange(sock: socket.socket, frame: bytes):
    """Write one request frame, read frames until its response (same opaque) comes."""
    from ..remoting import FrameDecoder, decode_frame

    opaque = decode_frame(frame[4:]).opaque
    sock.sendall(frame)
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the connection before answering")
        for cmd in decoder.feed(data):
            if cmd.is_response and cmd.opaque == opaque:
                return cmd
