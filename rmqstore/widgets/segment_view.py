"""SegmentView: one bar per commitlog segment (and per consume-queue file, if asked).

Each bar shows the three positions of a mapped file -- ``wrote`` (appended), ``committed``
(copied from a transient-pool write buffer into the file; RocketMQ leaves it at 0 without
one) and ``flushed`` (known to be on disk) -- with their values, the blank END_OF_FILE
tail of a full segment, and the file name.

State (all synced, so the view also renders in a static page):

``rows``
    number of bars.
``files``
    Bytes: one little-endian int64 per bar, the file's start offset (its name).
``positions``
    Bytes: seven little-endian int32 per bar -- wrote, committed, flushed, file size,
    blank tail start (-1 none, -2 not computed), group index, flags (1 = has a write
    buffer, 2 = full).
``groups``
    ``[{"label", "kind"}]``: the commitlog, then consume queues (``topic/queueId``).
``summary``
    totals and the queue-wide marks (``flushed_where``, ``committed_where``, offsets as strings).

Binary columns keep 2,000 segments at ~72 KB of state; the front end draws only the rows
scrolled into view (all of them up to :data:`VIRTUALISE_ABOVE`) plus a canvas overview.

The blank tail of a full segment is found once per file and cached, by the core's walk
(:func:`rmqstore.format.walk.walk_segment`): from the last record the consume queues point at in
that file (:func:`rmqstore.read.fast_open.boundary_hint`) a few records reach the blank; without
consume queues the walk reads the file, at most :data:`BLANK_WALK_BUDGET` bytes per snapshot
with ``blanks="auto"`` (a store of 1 GiB segments and no consume queues shows "?" instead of
reading gigabytes).
"""

from __future__ import annotations

import os
import struct
import threading
import time
import weakref

import anywidget
import traitlets as t

from rmqstore.read.fast_open import boundary_hint
from rmqstore.format.walk import End, walk_segment

from ._assets import css, esm
from rmqstore.files.store_paths import offset_to_file_name

from ._common import i64
from ._live import LiveView

__all__ = ["SegmentView", "segment_rows", "VIRTUALISE_ABOVE", "BLANK_WALK_BUDGET", "pack_state"]

#: the front end renders every row up to this many, then only the visible ones
VIRTUALISE_ABOVE = 300
#: bytes of full segments ``blanks="auto"`` may walk per snapshot to find blank tails
BLANK_WALK_BUDGET = 256 * 1024 * 1024

BLANK_NONE = -1
BLANK_UNKNOWN = -2
FLAG_WRITE_BUFFER = 1
FLAG_FULL = 2

_blank_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_blank_lock = threading.Lock()


def _tail(mf, start: int) -> int | None:
    """The blank ending the file walked from record start ``start``: its position, BLANK_NONE when the
    file is filled to its last byte, None when the walk ends otherwise."""
    end = walk_segment(mf.mapped, mf.file_from_offset, start=start)
    if end.kind is End.BLANK:
        return end.pos
    return BLANK_NONE if end.kind is End.OUT_OF_BYTES and end.pos == len(mf.mapped) else None


def _blank_at(mf, budget: list[int], hint=None) -> int:
    """Start (relative) of the blank record of a full, readable file; cached per mapped file.

    ``hint(mf)`` may give a record start inside the file (the last dispatched record, from the
    consume queues): from there a few records reach the blank.  Otherwise the walk reads the
    file from its start, within ``budget`` bytes per snapshot.
    """
    with _blank_lock:
        hit = _blank_cache.get(mf)
    if hit is not None:
        return hit
    size = mf.file_size
    if mf.read_position != size or mf.mapped is None:
        return BLANK_NONE if mf.wrote_position < size else BLANK_UNKNOWN
    if not mf.hold():
        return BLANK_UNKNOWN
    try:
        result = None
        if hint is not None:
            start = hint(mf)
            if start is not None:
                result = _tail(mf, start - mf.file_from_offset)
        if result is None:
            if budget[0] < size:
                return BLANK_UNKNOWN
            budget[0] -= size
            result = _tail(mf, 0)
            result = BLANK_NONE if result is None else result
    finally:
        mf.release()
    with _blank_lock:
        _blank_cache[mf] = result
    return result


def _cq_hint(store):
    """A hint for :func:`_blank_at` from the consume queues (None when the store has none)."""
    if not getattr(store, "consume_queue_table", None):
        return None

    def hint(mf):
        return boundary_hint(store, mf.file_from_offset + mf.file_size, floor=mf.file_from_offset)

    return hint


def _queue_rows(queue, group: int, budget, blanks: bool, hint=None) -> list[tuple]:
    rows = []
    for mf in list(queue.mapped_files):
        # read in this order so that flushed <= committed/read <= wrote holds in the snapshot
        flushed = mf.flushed_position
        committed = mf.committed_position
        wrote = mf.wrote_position
        size = mf.file_size
        flags = (FLAG_WRITE_BUFFER if mf.write_buffer is not None else 0) | (FLAG_FULL if wrote >= size else 0)
        blank = _blank_at(mf, budget, hint) if blanks and wrote >= size else (BLANK_NONE if wrote < size else BLANK_UNKNOWN)
        rows.append((mf.file_from_offset, wrote, committed, flushed, size, blank, group, flags))
    return rows


def segment_rows(store, *, topic: str | None = None, queue_id: int | None = None, commitlog: bool = True,
                 blanks: bool | str = "auto") -> tuple[list[dict], list[tuple], dict]:
    """Groups, rows ``(from_offset, wrote, committed, flushed, size, blank_at, group, flags)`` and a summary.

    ``topic`` adds the consume-queue files of that topic (all its queues, or ``queue_id``).
    ``blanks``: ``True`` finds every full segment's blank (cached per file), ``False`` never
    looks, ``"auto"`` walks at most :data:`BLANK_WALK_BUDGET` bytes per call, an int at most
    that many.  The consume queues, when the store has them, point at the last record of each
    file, so most blanks are found with a few reads and no walk.
    """
    if blanks == "auto":
        budget = [BLANK_WALK_BUDGET]
    elif isinstance(blanks, int) and not isinstance(blanks, bool):
        budget = [blanks]
    else:
        budget = [1 << 62]
    walk = bool(blanks)
    groups, rows = [], []
    queue = store.commit_log.mapped_file_queue
    if commitlog:
        groups.append({"label": "commitlog", "kind": "commitlog", "file_size": queue.mapped_file_size})
        rows += _queue_rows(queue, 0, budget, walk, _cq_hint(store) if walk else None)
    if topic is not None:
        for (t_name, qid), cq in sorted(list(store.consume_queue_table.items()), key=lambda kv: kv[0][1]):
            if t_name != topic or (queue_id is not None and qid != queue_id):
                continue
            groups.append({"label": f"consumequeue/{t_name}/{qid}", "kind": "consumequeue",
                           "file_size": cq.mapped_file_size})
            rows += _queue_rows(cq.mapped_file_queue, len(groups) - 1, budget, False)
    summary = {
        "segments": sum(1 for r in rows if r[6] == 0) if commitlog else 0,
        "files": len(rows),
        "min_offset": i64(queue.get_min_offset()) if queue.mapped_files else "0",
        "max_offset": i64(queue.get_max_offset()),
        "max_wrote": i64(queue.get_max_wrote_position()),
        "flushed_where": i64(queue.flushed_where),
        "committed_where": i64(queue.committed_where),
        "file_size": queue.mapped_file_size,
        "root": str(getattr(store, "root", "")),
        "time": time.time(),
    }
    return groups, rows, summary


def pack_state(rows: list[tuple]) -> tuple[bytes, bytes]:
    """A view's segment rows as its two buffers (int64 file offsets, int32 positions): :func:`unpack_state`'s inverse."""
    files = struct.pack(f"<{len(rows)}q", *(r[0] for r in rows))
    flat = [v for r in rows for v in r[1:]]
    return files, struct.pack(f"<{len(flat)}i", *flat)


def unpack_state(files: bytes, positions: bytes) -> list[dict]:
    """The rows of a view's state as dicts (tests, tools): the inverse of the packing."""
    n = len(files) // 8
    offs = struct.unpack(f"<{n}q", files)
    vals = struct.unpack(f"<{n * 7}i", positions)
    out = []
    for i in range(n):
        wrote, committed, flushed, size, blank, group, flags = vals[i * 7:i * 7 + 7]
        out.append({"file": offset_to_file_name(offs[i]), "fileFromOffset": offs[i], "wrotePosition": wrote,
                    "committedPosition": committed, "flushedPosition": flushed, "size": size,
                    "blankAt": blank, "group": group, "hasWriteBuffer": bool(flags & FLAG_WRITE_BUFFER),
                    "isFull": bool(flags & FLAG_FULL)})
    return out


class SegmentView(LiveView, anywidget.AnyWidget):
    """Bars of the commitlog segments: wrote, committed and flushed positions, blank tails.

    ``SegmentView.from_store(store)`` takes a snapshot; ``view.attach(store)`` keeps it
    current from a background thread while puts run (``detach()`` or ``close()`` stops it).
    """

    _esm = esm("segment_view.js")
    _css = css("segment_view.css")

    title = t.Unicode("").tag(sync=True)
    rows = t.Int(0).tag(sync=True)
    files = t.Bytes(b"").tag(sync=True)
    positions = t.Bytes(b"").tag(sync=True)
    groups = t.List().tag(sync=True)
    summary = t.Dict().tag(sync=True)
    live = t.Bool(False).tag(sync=True)
    updates = t.Int(0).tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._source = None
        self._store = None

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_store(cls, store, *, topic: str | None = None, queue_id: int | None = None,
                   commitlog: bool = True, blanks: bool | str = "auto", title: str | None = None) -> "SegmentView":
        """A snapshot of ``store`` (a started :class:`~rmqstore.MessageStore` or one from ``open_store``)."""
        view = cls(title=title if title is not None else f"commitlog of {os.path.basename(str(store.root)) or store.root}")
        view._source = dict(topic=topic, queue_id=queue_id, commitlog=commitlog, blanks=blanks)
        view._store = store
        view._set_rows(*segment_rows(store, **view._source))
        return view

    @classmethod
    def from_positions(cls, positions: list[dict], *, file_size: int | None = None, title: str = "") -> "SegmentView":
        """From ``store.positions()``-style dicts (``fileFromOffset``, ``wrotePosition``, ...)."""
        rows = []
        for p in positions:
            size = p.get("size") or file_size
            if size is None:
                raise ValueError("positions need a 'size' per file or file_size=")
            wrote = p["wrotePosition"]
            flags = (FLAG_WRITE_BUFFER if p.get("hasWriteBuffer") else 0) | (FLAG_FULL if wrote >= size else 0)
            rows.append((p["fileFromOffset"], wrote, p.get("committedPosition", 0), p.get("flushedPosition", 0),
                         size, p.get("blankAt", BLANK_NONE if wrote < size else BLANK_UNKNOWN), 0, flags))
        size = file_size or (rows[0][4] if rows else 0)
        summary = {"segments": len(rows), "files": len(rows), "file_size": size,
                   "min_offset": i64(rows[0][0]) if rows else "0",
                   "max_offset": i64(rows[-1][0] + rows[-1][1]) if rows else "0", "time": time.time()}
        view = cls(title=title)
        view._set_rows([{"label": "commitlog", "kind": "commitlog", "file_size": size}], rows, summary)
        return view

    def _set_rows(self, groups, rows, summary) -> None:
        files, positions = pack_state(rows)
        with self.hold_sync():
            self.groups = groups
            self.files = files
            self.positions = positions
            self.rows = len(rows)
            self.summary = summary
            self.updates = self.updates + 1

    def segments(self) -> list[dict]:
        """The state as dicts (same keys as ``store.positions()`` plus size/blankAt/group)."""
        return unpack_state(self.files, self.positions)

    def refresh(self, store=None) -> bool:
        """Take a new snapshot (of ``store`` or the attached one); True if anything changed."""
        store = store if store is not None else self._store
        if store is None:
            raise ValueError("no store: pass one or attach() first")
        groups, rows, summary = segment_rows(store, **(self._source or {}))
        files, positions = pack_state(rows)
        if files == self.files and positions == self.positions and groups == self.groups:
            return False
        self._set_rows(groups, rows, summary)
        return True

    # -- live --------------------------------------------------------------------
    def attach(self, store, interval_ms: int = 200, **source) -> "SegmentView":
        """Follow ``store`` live: a background thread snapshots it every ``interval_ms``
        (at least 20) and sends a new state only when something moved.  Returns self."""
        self.detach()
        if source:
            self._source = {**(self._source or {}), **source}
        elif self._source is None:
            self._source = {}
        self._store = store
        gone = lambda: getattr(store, "shutdown_flag", False) and not getattr(store, "read_only", False)  # noqa: E731
        self._start_live(lambda: self.refresh(store), max(20, int(interval_ms)) / 1000.0, "SegmentView.attach", gone)
        return self

    @property
    def attached(self) -> bool:
        return self._live_running

    def detach(self, timeout: float = 5.0) -> None:
        """Stop following the store (takes one last snapshot if it is still open)."""
        self._stop_live(timeout)
