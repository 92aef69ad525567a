"""PutPathPlayer: step through a recorded put path -- what the engine really did, stage by stage.

A trace (:mod:`rmqstore.common.trace`) records one event per stage a put meets: with a send through
the broker, first the request frame's bytes field by field and the send processor's checks,
then the store's stages (encode, lock, mapped file, do_append with the byte ranges of every
field, wrote position, unlock, group commit / async flush / commit, ...).  The player turns
those events into *steps*: each highlights its stage on a diagram of the path, shows the
bytes it is about -- the frame's field, or the record's fields that landed in the segment
(coloured from the layout tables) -- and the three positions of the file (wrote, committed,
flushed) after the step.

This module only adapts a trace to synced traits: the steps (JSON), the request frames'
bytes (``frame``, a binary buffer) and their field spans; playing is done in JavaScript from
that state, so the player works in a static HTML page with no kernel
(:func:`rmqstore.widgets.to_html`).  Recording is the core's (:mod:`rmqstore.broker.recording`):

* :meth:`PutPathPlayer.record` -- :func:`rmqstore.broker.recording.record_put_path` (puts into a fresh
  traced store) then :meth:`from_trace`;
* :meth:`PutPathPlayer.record_send` -- :func:`rmqstore.broker.recording.record_send` (request frames
  to a fresh traced broker over TCP), the trace starting at the wire;
* :meth:`PutPathPlayer.from_events` / :meth:`from_trace` -- a player of any recorded events;
* :meth:`PutPathPlayer.compare` -- the same messages under SYNC_FLUSH, ASYNC_FLUSH and
  ASYNC_FLUSH with the transient store pool, side by side in an ``ipywidgets.HBox``.

How positions are replayed (:func:`replay`): each file's ``wrote`` moves with
``position.wrote`` / ``append.blank`` events, ``flushed`` with ``flush`` events, ``committed``
with ``commit`` events (without a write buffer RocketMQ never moves it: it stays 0), a
``mapped_file.*`` event introduces a file with the positions it had then.  Values only grow.
"""

from __future__ import annotations

import anywidget
import traitlets as t

from rmqstore.files.store_paths import offset_to_file_name
from rmqstore.broker.recording import DEMO_CONFIG, MODES, demo_messages, record_put_path, record_send
from rmqstore.common.trace import SEND_STAGES, PutPathTrace

from ._assets import css, esm
from ._common import FIELD_TABLE, palette, i64

__all__ = ["PutPathPlayer", "build_steps", "build_frames", "replay", "BOXES", "LANES", "DEMO_CONFIG", "MODES", "demo_messages"]

_SAFE = 2**53

#: the diagram's rows, top to bottom; an optional lane is left out of a trace that has no step in it
LANES = [
    {"lane": 2, "label": "the wire: the request frame, field by field", "optional": True},
    {"lane": 3, "label": "the broker: SendMessageProcessor", "optional": True},
    {"lane": 0, "label": "put thread", "optional": False},
    {"lane": 1, "label": "after the lock", "optional": False},
]

#: the diagram: (box id, label, lane, stages); lanes as in :data:`LANES`
BOXES = [
    {"id": "frame", "label": "frame", "lane": 2, "stages": ["wire.frame", "wire.length", "wire.header_meta"],
     "doc": "the decoder cuts a frame once 4 + length bytes are there; then serialize type << 24 | header length"},
    {"id": "header", "label": "header", "lane": 2, "stages": ["wire.header"],
     "doc": "the RemotingCommand: code, language, version, opaque, flag, remark (JSON or ROCKETMQ binary)"},
    {"id": "ext_fields", "label": "extFields", "lane": 2, "stages": ["wire.ext_field", "wire.properties"],
     "doc": "the custom header; SEND_MESSAGE_V2 names its fields a..n (SendMessageRequestHeaderV2)"},
    {"id": "body", "label": "body", "lane": 2, "stages": ["wire.body"], "doc": "the message body, as sent"},
    {"id": "send_checks", "label": "send checks", "lane": 3,
     "stages": [s for s in SEND_STAGES if s not in ("send.message", "send.response")],
     "doc": "msgCheck: broker writable, topic name, system topic, topic config (or auto-create), queue id, "
            "topic writable; a retry topic past its max reconsume times goes to the DLQ"},
    {"id": "inner_message", "label": "inner message", "lane": 3, "stages": ["send.message"],
     "doc": "the message the store gets: properties + CLUSTER - WAIT, born host = the connection's peer"},
    {"id": "send_response", "label": "response", "lane": 3, "stages": ["send.response"],
     "doc": "the store's status mapped to a response code; msgId, queueId, queueOffset"},
    {"id": "checks", "label": "checks", "lane": 0, "stages": ["put.begin", "check.store_status", "check.message"],
     "doc": "store state (shut down, slave, not writeable, page cache busy), then the message"},
    {"id": "encode", "label": "encode", "lane": 0, "stages": ["encode"],
     "doc": "the record is encoded outside the lock; the lock only patches queue offset, physical offset, store time"},
    {"id": "lock", "label": "lock", "lane": 0, "stages": ["lock.acquire"], "doc": "the put lock serialises appends"},
    {"id": "mapped_file", "label": "mapped file", "lane": 0,
     "stages": ["mapped_file.found", "mapped_file.created", "mapped_file.allocated"],
     "doc": "the last file of the commitlog, or a new one (from the allocate service) when it is full"},
    {"id": "do_append", "label": "do_append", "lane": 0, "stages": ["append.record", "append.blank", "append.retry"],
     "doc": "bytes copied into the mapped file (or the write buffer); a record that does not fit leaves a blank"},
    {"id": "wrote", "label": "wrote position", "lane": 0, "stages": ["position.wrote"],
     "doc": "the file's wrote position moves past the record"},
    {"id": "unlock", "label": "unlock", "lane": 0, "stages": ["lock.release"], "doc": "the next put may append"},
    {"id": "flush_request", "label": "flush request", "lane": 1, "stages": ["flush.request"],
     "doc": "SYNC_FLUSH: a group-commit request to wait on; ASYNC: a wake-up of the flush (or commit) service"},
    {"id": "group_commit", "label": "group commit", "lane": 1, "stages": ["group_commit.swap", "group_commit.wake"],
     "flush_by": "GroupCommitService",
     "doc": "SYNC_FLUSH: swap the request lists, flush once for all of them, wake each waiting put"},
    {"id": "async_flush", "label": "async flush", "lane": 1, "stages": [], "flush_by": "FlushRealTimeService",
     "doc": "ASYNC_FLUSH: flush every flushIntervalCommitLog ms when enough pages are dirty"},
    {"id": "commit", "label": "commit", "lane": 1, "stages": ["commit"],
     "doc": "transient store pool: copy the write buffer into the file; only committed bytes are readable"},
    {"id": "result", "label": "replica / result", "lane": 1, "stages": ["replica", "put.end"],
     "doc": "wait for a slave if SYNC_MASTER, then answer the producer"},
    {"id": "dispatch", "label": "dispatch", "lane": 1, "stages": ["dispatch.consume_queue", "dispatch.index"],
     "doc": "the reput thread turns records into consume-queue units and index entries"},
]

_STAGE_BOX = {stage: b["id"] for b in BOXES for stage in b["stages"]}
_FLUSH_BOX = {b["flush_by"]: b["id"] for b in BOXES if "flush_by" in b}

# -- events -> steps ------------------------------------------------------------------------

def _jsonable(value):
    """Event fields for JavaScript: ints beyond 2**53 become strings, tuples lists."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return value if -_SAFE < value < _SAFE else str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _box_of(event: dict) -> str:
    stage = event["stage"]
    if stage == "flush":
        return _FLUSH_BOX.get(event.get("by", ""), "async_flush")
    return _STAGE_BOX.get(stage, "")


def _describe(e: dict) -> str:
    """One sentence about an event (a generic one if its fields are not the expected ones)."""
    try:
        return _describe_stage(e)
    except (KeyError, TypeError, ValueError, IndexError):
        extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("seq", "t_ns", "thread", "stage"))
        return f"{e.get('stage')}: {extra}" if extra else str(e.get("stage"))


def _describe_broker(e: dict) -> str | None:
    """A wire or send-processor stage in one sentence (None: not one of those)."""
    s, g = e["stage"], e.get
    if s == "wire.frame":
        return (f"the connection's decoder cut a {g('size', 0):,}-byte frame: {g('code_name')} ({g('code')}) "
                f"from {g('language')}, opaque {g('opaque')}, {g('serialize_type')} header")
    if s == "wire.length":
        return f"length {g('value'):,}: the bytes after this field (4 + header length + body length)"
    if s == "wire.header_meta":
        return f"serialize type {g('serialize_type')} in the high byte, header length {g('header_length'):,}"
    if s == "wire.header":
        return f"header member {g('field')} = {g('value')}"
    if s in ("wire.ext_field", "wire.properties"):
        named = f"extFields.{g('key')} ({g('name')})" if g("name") != g("key") else f"extFields.{g('key')}"
        if s == "wire.properties":
            props = ", ".join(f"{k}={v}" for k, v in (g("properties") or {}).items())
            return f"{named}: the message properties: {props}"
        return f"{named} = {g('value')}"
    if s == "wire.body":
        return f"the body: {g('size', 0):,} bytes"
    if s.startswith("send.check."):
        what = s[len("send.check."):].replace("_", " ")
        detail = ", ".join(f"{k}={v}" for k, v in e.items()
                           if k not in ("seq", "t_ns", "thread", "stage", "status", "remark"))
        outcome = "OK" if g("status") == "OK" else f"{g('status')} {g('remark', '')}".strip()
        return f"check {what} ({detail}): {outcome}"
    if s == "send.queue_picked":
        return f"queue id < 0: picked writable queue {g('queue_id')} of {g('write_queue_nums')}"
    if s == "send.retry_or_dlq":
        return (f"retry topic {g('topic')}: reconsumed {g('reconsume_times')} of {g('max_reconsume_times')} "
                f"times -> {g('to')}")
    if s == "send.message":
        half = " -- a half message, parked in RMQ_SYS_TRANS_HALF_TOPIC" if g("half") else ""
        return (f"the inner message for {g('topic')}/{g('queue_id')}: {g('body_size', 0):,}-byte body, properties "
                f"+ CLUSTER - WAIT, born host {g('born_host')}{half}")
    if s == "send.response":
        where = f": msgId {g('msgId')}, queue offset {g('queueOffset')}" if g("msgId") else ""
        remark = f" ({g('remark')})" if g("remark") else ""
        return f"answered {g('code_name')} ({g('code')}){remark}{where}"
    return None


def _describe_stage(e: dict) -> str:  # noqa: C901 -- one sentence per trace stage, a flat dispatch
    s = e["stage"]
    g = e.get
    said = _describe_broker(e)
    if said is not None:
        return said
    if s == "check.message":
        if g("status") not in (None, "OK"):
            return f"the store refused the message: {g('status')} {g('message', '')}".strip()
        return "the message passes the store's checks: topic, queue id, properties at most 32,767 characters"

    def name(pos):
        return offset_to_file_name(pos['file']) if pos else "?"

    if s == "encode":
        if g("status") not in (None, "OK"):
            return f"encode refused the message: {g('status')} {g('message', '')}".strip()
        extra = " (delay rewrite to SCHEDULE_TOPIC_XXXX)" if g("delay_rewrite") else ""
        return (f"encoded a {g('length', '?'):,}-byte record for {g('topic')}/{g('queue_id')} outside the lock "
                f"(body within max_message_size, properties within 32,767 bytes){extra}")
    if s == "lock.acquire":
        return f"took the put lock ({g('lock', '')})"
    if s == "mapped_file.found":
        p = g("positions")
        return f"appending to {name(p)} at wrote position {p['wrote']:,}" if p else "found the last mapped file"
    if s in ("mapped_file.allocated", "mapped_file.created"):
        p = g("positions")
        return f"new file {name(p)} ({p['size']:,} bytes) from the {g('by', 'put thread')}" if p else "a new file"
    if s == "append.record":
        recs = g("records") or []
        what = (f"{len(recs)} records" if len(recs) > 1 else
                f"{recs[0]['topic']}/{recs[0]['queue_id']} queue offset {recs[0]['queue_offset']:,}" if recs else "")
        return f"do_append wrote {g('size', 0):,} bytes at offset {g('offset', 0):,} into the {g('into', 'file')}: {what}"
    if s == "append.blank":
        return (f"the record does not fit: a blank END_OF_FILE record of {g('size', 0):,} bytes "
                f"at offset {g('offset', 0):,} fills the file")
    if s == "append.retry":
        return g("reason", "retry in the next file")
    if s == "position.wrote":
        b, a = g("before") or {}, g("after") or {}
        return f"wrote position of {name(a)}: {b.get('wrote', 0):,} -> {a.get('wrote', 0):,}"
    if s == "lock.release":
        return "released the put lock"
    if s == "group_commit.swap":
        reqs = g("requests") or []
        return f"group commit took {len(reqs)} request(s), up to offset {max(reqs):,}" if reqs else "group commit swap"
    if s == "group_commit.wake":
        return f"woke the put waiting for offset {g('next_offset', 0):,}: {g('status')}"
    if s == "flush":
        b, a = g("before") or {}, g("after") or {}
        return (f"{g('by', 'flush')} flushed {name(a)}: {b.get('flushed', 0):,} -> {a.get('flushed', 0):,} "
                f"(flushed to offset {g('flushed_where', 0):,})")
    if s == "commit":
        r = g("range")
        span = f" [{r[0]:,}, {r[1]:,})" if r else ""
        return f"CommitRealTimeService copied{span} from the write buffer into the file"
    extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("seq", "t_ns", "thread", "stage"))
    return f"{s}: {extra}" if extra else s


_OWNERS = {"position.wrote": ("wrote",), "append.blank": ("wrote",), "flush": ("flushed",),
           "commit": ("committed",)}


def replay(events, upto: int | None = None) -> dict[int, dict]:
    """File start offset -> ``{wrote, committed, flushed, size, write_buffer}`` after ``events[:upto]``."""
    table: dict[int, dict] = {}
    for e in events[:upto]:
        _apply(table, e)
    return table


def _apply(table: dict, e: dict) -> int | None:
    """Apply one event to the positions table; return the file it is about (or None)."""
    stage = e["stage"]
    if stage.startswith("mapped_file.") and e.get("positions"):
        p = e["positions"]
        if p["file"] not in table:
            table[p["file"]] = {k: p[k] for k in ("wrote", "committed", "flushed", "size", "write_buffer")}
        return p["file"]
    after = e.get("after")
    if not after:
        return None
    f = after["file"]
    row = table.setdefault(f, {k: after[k] for k in ("wrote", "committed", "flushed", "size", "write_buffer")})
    for key in _OWNERS.get(stage, ()):
        row[key] = max(row[key], after[key])
    return f


def build_steps(events) -> tuple[list[dict], list[dict]]:  # noqa: C901 -- one pass over the events, a case per lane
    """``(files, steps)`` of a trace: the files it touched and one step per event, in ``seq`` order.

    A step holds ``stage``, ``box`` (diagram box), ``thread``, ``t_us`` (since the first
    event), ``text``, ``file`` (index into ``files`` of the file it is about, or the last one
    written), ``pos`` (that file's wrote/committed/flushed after the step), ``set`` (the
    positions row of the file the event touched, for replaying every file), ``bytes``
    (``[name, start, end]`` ranges relative to the file: the fields of appended records, a
    blank, or the flushed/committed range), ``records`` and ``fields`` (the event's own values).
    """
    events = sorted(events, key=lambda e: e.get("seq", 0))
    t0 = events[0]["t_ns"] if events and "t_ns" in events[0] else 0
    frame_base, frame_end = 0, 0  # where the current request frame starts in the ``frame`` buffer
    table: dict[int, dict] = {}
    files: list[int] = []
    index: dict[int, int] = {}
    steps = []
    current = None

    def known(f):
        if f not in index:
            index[f] = len(files)
            files.append(f)

    for e in events:
        stage = e["stage"]
        touched = _apply(table, e)
        step = {"stage": stage, "box": _box_of(e), "thread": e.get("thread", ""),
                "t_us": round((e.get("t_ns", t0) - t0) / 1000.0, 1), "text": _describe(e)}
        ranges = []
        about = touched
        if stage == "wire.frame":
            frame_base, frame_end = frame_end, frame_end + len(e.get("data") or b"")
            step["frame_bytes"] = ["frame", frame_base, frame_end]
        elif stage.startswith("wire.") and e.get("span"):
            a, b = e["span"]
            step["frame_bytes"] = [_wire_name(e), frame_base + a, frame_base + b]
        if stage == "append.record":
            recs = e.get("records") or []
            for r in recs:
                base = _file_of(r["offset"], table)
                if base is None:
                    continue
                about = base
                ranges += [[name, start - base, stop - base] for name, start, stop in r["fields"]]
            step["records"] = [{"offset": i64(r["offset"]), "size": r["size"], "queue_offset": i64(r["queue_offset"]),
                                "topic": r["topic"], "queue_id": r["queue_id"]} for r in recs]
        elif stage == "append.blank" and e.get("after"):
            start = e["offset"] - e["after"]["file"]
            ranges = [["total_size", start, start + 4], ["magic_code", start + 4, start + 8],
                      ["blank_fill", start + 8, start + e["size"]]]
        elif stage == "flush" and e.get("before") and e.get("after"):
            ranges = [["flushed", e["before"]["flushed"], e["after"]["flushed"]]]
        elif stage == "commit" and e.get("before") and e.get("after"):
            ranges = [["committed", e["before"]["committed"], e["after"]["committed"]]]
        if about is not None:
            known(about)
            current = about
        if touched is not None:
            known(touched)
            row = table[touched]
            step["set"] = [index[touched], row["wrote"], row["committed"], row["flushed"]]
        if current is not None:
            row = table[current]
            step["file"] = index[current]
            step["pos"] = [row["wrote"], row["committed"], row["flushed"]]
        else:
            step["file"] = -1
            step["pos"] = [0, 0, 0]
        if ranges:
            step["bytes"] = ranges
        step["fields"] = _jsonable({k: v for k, v in e.items()
                                    if k not in ("seq", "t_ns", "thread", "stage", "records", "data")})
        steps.append(step)
    file_rows = [{"from": i64(f), "name": offset_to_file_name(f), "size": table[f]["size"],
                  "write_buffer": bool(table[f]["write_buffer"])} for f in files]
    return file_rows, steps


def _wire_name(e: dict) -> str:
    """The frame field a wire event is about, as :func:`rmqstore.remoting.frame_field_spans` names it."""
    stage = e["stage"]
    if stage in ("wire.ext_field", "wire.properties"):
        return f"extFields.{e.get('key')}"
    if stage == "wire.header":
        return str(e.get("field"))
    return stage[len("wire."):]


def build_frames(events) -> tuple[bytes, list[list]]:
    """``(data, spans)``: the request frames of a trace end to end, and ``[name, start, end, colour]``
    of each of their fields (positions in ``data``; colours as FrameView gives them)."""
    data, spans, fields = bytearray(), [], []
    for e in sorted(events, key=lambda e: e.get("seq", 0)):
        if e["stage"] == "wire.frame":
            _colour(spans, fields)
            fields = []
            base = len(data)
            data += e.get("data") or b""
        elif e["stage"].startswith("wire.") and e.get("span"):
            fields.append([_wire_name(e), base + e["span"][0], base + e["span"][1]])
    _colour(spans, fields)
    return bytes(data), spans


def _colour(out: list, fields: list) -> None:
    out += [f + [c] for f, c in zip(fields, palette(max(len(fields), 1)))]


def _file_of(offset: int, table: dict) -> int | None:
    for f, row in table.items():
        if f <= offset < f + row["size"]:
            return f
    return None


class PutPathPlayer(anywidget.AnyWidget):
    """Step-through animation of a recorded put path (plays in JavaScript, kernel or not)."""

    _esm = esm("put_path_player.js")
    _css = css("put_path_player.css")

    title = t.Unicode("").tag(sync=True)
    subtitle = t.Unicode("").tag(sync=True)
    lanes = t.List().tag(sync=True)
    boxes = t.List().tag(sync=True)
    files = t.List().tag(sync=True)
    steps = t.List().tag(sync=True)
    field_table = t.List().tag(sync=True)
    #: the trace's request frames end to end (a binary buffer), and their fields' spans and colours
    frame = t.Bytes(b"").tag(sync=True)
    frame_spans = t.List().tag(sync=True)
    step = t.Int(0).tag(sync=True)
    speed = t.Float(4.0).tag(sync=True)
    autoplay = t.Bool(False).tag(sync=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("field_table", FIELD_TABLE)
        kwargs.setdefault("boxes", BOXES)
        kwargs.setdefault("lanes", LANES)
        super().__init__(**kwargs)
        self.trace = PutPathTrace([])
        self.events: list[dict] = []

    @classmethod
    def from_events(cls, events, *, title: str = "put path", subtitle: str = "") -> "PutPathPlayer":
        """A player over recorded tracer events (``RecordingTracer.events``)."""
        return cls.from_trace(PutPathTrace([dict(e) for e in events], title=title, subtitle=subtitle))

    @classmethod
    def from_trace(cls, trace: PutPathTrace, *, title: str | None = None) -> "PutPathPlayer":
        """A player of a :class:`rmqstore.common.trace.PutPathTrace` (its events, title and subtitle)."""
        events = sorted(trace.events, key=lambda e: e.get("seq", 0))
        files, steps = build_steps(events)
        frame, spans = build_frames(events)
        used = {b["lane"] for b in BOXES if any(s["box"] == b["id"] for s in steps)}
        lanes = [lane for lane in LANES if not lane["optional"] or lane["lane"] in used]
        shown = {lane["lane"] for lane in lanes}
        player = cls(title=title or trace.title, subtitle=trace.subtitle, files=files, steps=steps, frame=frame,
                     frame_spans=spans, lanes=lanes, boxes=[b for b in BOXES if b["lane"] in shown])
        player.trace = trace
        player.events = events
        return player

    @classmethod
    def record(cls, config_kwargs: dict | None = None, messages=None, *, title: str | None = None,
               **record_kwargs) -> "PutPathPlayer":
        """Put ``messages`` into a fresh traced store and play the trace (:func:`rmqstore.broker.recording.record_put_path`)."""
        return cls.from_trace(record_put_path(config_kwargs, messages, **record_kwargs), title=title)

    @classmethod
    def record_send(cls, frames=None, config_kwargs: dict | None = None, *, title: str | None = None,
                    **record_kwargs) -> "PutPathPlayer":
        """Send request frames to a fresh traced broker and play the trace from the wire
        (:func:`rmqstore.broker.recording.record_send`)."""
        return cls.from_trace(record_send(frames, config_kwargs, **record_kwargs), title=title)

    @property
    def results(self) -> list:
        """The store's ``PutMessageResult`` of each put (a recorded store trace)."""
        return self.trace.results

    @property
    def final_positions(self) -> list[dict] | None:
        return self.trace.final_positions

    @property
    def config(self) -> dict:
        return self.trace.config

    @classmethod
    def compare(cls, messages=None, config_kwargs: dict | None = None, modes=tuple(MODES), **record_kwargs):
        """The same messages recorded under each mode, side by side in an ``ipywidgets.HBox``.

        ``modes`` are keys of :data:`MODES` (SYNC_FLUSH, ASYNC_FLUSH, TRANSIENT_STORE_POOL).
        The box's ``players`` attribute lists the players.
        """
        import ipywidgets

        players = []
        for mode in modes:
            kw = {**(config_kwargs or {}), **MODES[mode]}
            players.append(cls.record(kw, messages, title=mode, **record_kwargs))
        for p in players:
            p.layout = ipywidgets.Layout(flex="1 1 0", min_width="340px")
        box = ipywidgets.HBox(players, layout=ipywidgets.Layout(width="100%", flex_flow="row wrap",
                                                                 align_items="flex-start"))
        box.players = players
        return box

    # -- inspection (tests, notebooks) ------------------------------------------------------
    def positions_at(self, step: int | None = None) -> dict[int, dict]:
        """Positions of every file after step ``step`` (default: the last)."""
        upto = len(self.events) if step is None else step + 1
        return replay(self.events, upto)

    def appended_offsets(self) -> list[int]:
        """Physical offsets of every record in the trace's append.record steps."""
        return [int(r["offset"]) for s in self.steps if s["stage"] == "append.record" for r in s.get("records", [])]

    def stages(self) -> list[str]:
        return [s["stage"] for s in self.steps]
