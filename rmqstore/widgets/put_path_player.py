"""PutPathPlayer: step through a recorded put path -- what the engine really did, stage by stage.

A :class:`rmqstore.trace.RecordingTracer` attached to a store records one event per stage a
put meets (encode, lock, mapped file, do_append with the byte ranges of every field, wrote
position, unlock, group commit / async flush / commit, ...).  The player turns those events
into *steps*: each highlights its stage on a diagram of the put path, shows the bytes that
landed in the segment (coloured by field, from the layout table) and the three positions
of the file -- wrote, committed, flushed -- after the step.

The whole trace is synced state, and playing is done in JavaScript from that state, so the
player works in a static HTML page with no kernel (:func:`rmqstore.widgets.to_html`).

* :meth:`PutPathPlayer.record` runs a real store in a temporary directory with a tracer
  attached (``store.commit_log.tracer = tracer`` before ``start()``; the flush and commit
  services read it from the commitlog), puts the messages, waits until everything is
  flushed (and committed), snapshots ``store.positions()`` and returns a player.
* :meth:`PutPathPlayer.from_events` builds one from any recorded events.
* :meth:`PutPathPlayer.compare` records the same messages under SYNC_FLUSH, ASYNC_FLUSH and
  ASYNC_FLUSH with the transient store pool, and returns the three players side by side in
  an ``ipywidgets.HBox``.

How positions are replayed (:func:`replay`): each file's ``wrote`` moves with
``position.wrote`` / ``append.blank`` events, ``flushed`` with ``flush`` events, ``committed``
with ``commit`` events (without a write buffer RocketMQ never moves it: it stays 0), a
``mapped_file.*`` event introduces a file with the positions it had then.  Values only grow.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import time

import anywidget
import traitlets as t

from ._assets import css, esm
from ._common import FIELD_TABLE, i64

__all__ = ["PutPathPlayer", "build_steps", "replay", "BOXES", "DEMO_CONFIG", "MODES", "demo_messages"]

_SAFE = 2**53

#: the diagram: (box id, label, lane, stages); lane 0 is the put thread, lane 1 what follows
BOXES = [
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

#: defaults of :meth:`PutPathPlayer.record`: small files so a rollover shows, short intervals
#: so the background services act within the trace
DEMO_CONFIG = {
    "mapped_file_size_commit_log": 4096,
    "pre_fault_mapped_file": False,
    "flush_interval_commit_log": 50,
    "flush_commit_log_least_pages": 0,
    "commit_interval_commit_log": 50,
    "commit_commit_log_least_pages": 0,
    "message_index_enable": False,
}

#: the configurations :meth:`PutPathPlayer.compare` plays side by side
MODES = {
    "SYNC_FLUSH": {"flush_disk_type": "SYNC_FLUSH", "transient_store_pool_enable": False},
    "ASYNC_FLUSH": {"flush_disk_type": "ASYNC_FLUSH", "transient_store_pool_enable": False},
    "TRANSIENT_STORE_POOL": {"flush_disk_type": "ASYNC_FLUSH", "transient_store_pool_enable": True},
}


def demo_messages(n: int = 12):
    """``n`` messages of a few sizes (the 4 KiB demo segment rolls over after ~10)."""
    from rmqstore import Message

    sizes = [120, 300, 40, 700, 200, 520]
    return [Message("TopicDemo", bytes((i * 7 + k) % 26 + 97 for k in range(sizes[i % len(sizes)])), queue_id=i % 2,
                    properties=f"KEYS\x01order-{i}\x02TAGS\x01Tag{i % 3}", born_host="192.0.2.10:40000",
                    born_timestamp=1_795_000_000_000 + i)
            for i in range(n)]


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


def _describe_stage(e: dict) -> str:  # noqa: C901 -- one sentence per trace stage, a flat dispatch
    s = e["stage"]
    g = e.get

    def name(pos):
        return f"{pos['file']:020d}" if pos else "?"

    if s == "encode":
        if g("status") not in (None, "OK"):
            return f"encode refused the message: {g('status')} {g('message', '')}".strip()
        extra = " (delay rewrite to SCHEDULE_TOPIC_XXXX)" if g("delay_rewrite") else ""
        return f"encoded a {g('length', '?'):,}-byte record for {g('topic')}/{g('queue_id')} outside the lock{extra}"
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


def build_steps(events) -> tuple[list[dict], list[dict]]:
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
                                    if k not in ("seq", "t_ns", "thread", "stage", "records")})
        steps.append(step)
    file_rows = [{"from": i64(f), "name": f"{f:020d}", "size": table[f]["size"],
                  "write_buffer": bool(table[f]["write_buffer"])} for f in files]
    return file_rows, steps


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
    boxes = t.List().tag(sync=True)
    files = t.List().tag(sync=True)
    steps = t.List().tag(sync=True)
    field_table = t.List().tag(sync=True)
    step = t.Int(0).tag(sync=True)
    speed = t.Float(4.0).tag(sync=True)
    autoplay = t.Bool(False).tag(sync=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("field_table", FIELD_TABLE)
        kwargs.setdefault("boxes", BOXES)
        super().__init__(**kwargs)
        self.events: list[dict] = []
        self.results: list = []
        self.final_positions: list[dict] | None = None
        self.config: dict = {}

    @classmethod
    def from_events(cls, events, *, title: str = "put path", subtitle: str = "") -> "PutPathPlayer":
        """A player over recorded tracer events (``RecordingTracer.events``)."""
        events = [dict(e) for e in events]
        files, steps = build_steps(events)
        player = cls(title=title, subtitle=subtitle, files=files, steps=steps)
        player.events = sorted(events, key=lambda e: e.get("seq", 0))
        return player

    @classmethod
    def record(cls, config_kwargs: dict | None = None, messages=None, *, root=None, settle_timeout: float = 5.0,
               title: str | None = None, clock=None) -> "PutPathPlayer":
        """Run a real store with a tracer, put ``messages``, return a player of what happened.

        ``config_kwargs`` override :data:`DEMO_CONFIG` (a :class:`~rmqstore.StoreConfig`'s
        fields); ``messages`` are :class:`~rmqstore.Message`/:class:`~rmqstore.MessageBatch`
        objects, a count of demo messages, or None (12 demo messages).  The store lives in a
        temporary directory (removed afterwards) unless ``root`` is given.  After the puts the
        recorder waits (up to ``settle_timeout`` s) until every byte is committed and flushed,
        then snapshots ``store.positions()`` into :attr:`final_positions` before shutting
        down; :attr:`results` holds each put's ``PutMessageResult``.
        """
        from rmqstore import MessageBatch, MessageStore, StoreConfig
        from rmqstore.trace import RecordingTracer

        cfg_kwargs = {**DEMO_CONFIG, **(config_kwargs or {})}
        if messages is None:
            messages = demo_messages()
        elif isinstance(messages, int):
            messages = demo_messages(messages)
        messages = [copy.copy(m) for m in messages]
        tmp = root is None
        root = tempfile.mkdtemp(prefix="rmq-put-path-") if tmp else str(root)
        config = StoreConfig(**cfg_kwargs)
        store = MessageStore(root, config, **({"clock": clock} if clock else {}))
        tracer = RecordingTracer()
        holders = _tracer_holders(store)
        for obj in holders:
            obj.tracer = tracer
        results = []
        final = None
        try:
            store.start()
            for m in messages:
                results.append(store.put_messages(m) if isinstance(m, MessageBatch) else store.put_message(m))
            _settle(store, settle_timeout)
            final = store.positions()
        finally:
            for obj in _tracer_holders(store):
                obj.tracer = None
            try:
                store.shutdown()
            finally:
                if tmp:
                    shutil.rmtree(root, ignore_errors=True)
        mode = _mode_name(config)
        player = cls.from_events(tracer.events, title=title or mode,
                                 subtitle=f"{len(messages)} put(s), {config.mapped_file_size_commit_log:,}-byte files, "
                                          f"{mode}")
        player.results = results
        player.final_positions = final
        player.config = cfg_kwargs
        return player

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


def _tracer_holders(store) -> list:
    """Everything of a store that reads a ``tracer`` attribute (the flush services read the commitlog's)."""
    out = [store.commit_log]
    for name in ("allocate_service", "reput_message_service"):
        obj = getattr(store, name, None)
        if obj is not None and hasattr(obj, "tracer"):
            out.append(obj)
    if hasattr(store, "tracer"):
        out.append(store)
    return out


def _mode_name(config) -> str:
    name = config.flush_disk_type.value
    if config.is_transient_store_pool_enabled:
        name += " + transient store pool"
    return name


def _settle(store, timeout: float) -> bool:
    """Wait until everything written is committed (with a pool) and flushed; poke the services."""
    queue = store.commit_log.mapped_file_queue
    pool = store.transient_store_pool is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        target = queue.get_max_wrote_position()
        if queue.flushed_where >= target and (not pool or queue.committed_where >= target):
            if hasattr(store, "wait_dispatched"):
                store.wait_dispatched(max(0.0, deadline - time.monotonic()))
            time.sleep(0.02)  # let a service that just acted record its event
            return True
        for svc in (store.commit_service, store.flush_service, store.group_commit_service):
            if svc is not None:
                svc.wakeup()
        time.sleep(0.005)
    return False

