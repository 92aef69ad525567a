"""StoreInspector: one view over a store directory -- segments, queues, records, lookups.

Opening never reads the whole store (:func:`rmqstore.fast_open.open_fast` finds the end of
the log from the consume queues and a short walk).  Where a record is and where a segment
ends is :func:`rmqstore.walk.step`'s call; the browser only pages.  Records are shown a page at a time:
a page starts at a record boundary and is decoded record by record until it is full, so
browsing a store of millions of messages decodes only what is on screen.

Navigation, all by physical offset:

* first / next: from the start of the log, and from where the previous page ended;
* previous / last: the records that end where the current page (or the log) starts --
  found from the nearest known record boundary (a segment start, or the last record a
  consume queue points at before that place) and a hop over record sizes;
* a segment bar: the page at that segment's start (every segment starts with a record);
* lookup: an offset msgId (store host + port + physical offset), a physical offset (the
  record holding it), or a key (``key`` in every topic, or ``topic#key``) through the index
  files -- via :mod:`rmqstore.reading` when it is there.

Live, the browser asks the kernel for pages, records and lookups with anywidget custom
messages.  For a static page (:func:`rmqstore.widgets.to_html`) the first
``embed_pages`` pages and their records' bytes are part of the state; lookups then search
those records only.
"""

from __future__ import annotations

import logging
import os
import re
import time

import anywidget
import traitlets as t

from rmqstore.errors import CorruptRecordError, LayoutError
from rmqstore.fast_open import boundary_hint, open_fast
from rmqstore.layout import BLANK_MAGIC_CODE
from rmqstore.properties import KEYS, TAGS, UNIQ_KEY, string_to_properties
from rmqstore.reading import check_open
from rmqstore.store_paths import offset_to_file_name
from rmqstore.record import BlankRecord, MessageRecord, create_message_id, decode_message_id
from rmqstore import record as _record
from rmqstore.walk import End, step

from ._assets import css, esm
from ._common import FIELD_TABLE, fmt_ms, i64
from .record_view import store_record_details
from .segment_view import segment_rows, _pack

try:  # the read path (another module of the engine); the inspector works without it
    from rmqstore import reading as _reading
except ImportError:  # pragma: no cover - depends on the checkout
    _reading = None

__all__ = ["StoreInspector", "LogBrowser"]

log = logging.getLogger(__name__)

_MAX_HOPS = 2_000_000


def _body_preview(body: bytes, n: int = 40) -> str:
    head = body[:n]
    try:
        text = head.decode("utf-8")
        if all(c.isprintable() for c in text):
            return text + ("…" if len(body) > n else "")
    except UnicodeDecodeError:
        pass
    return head[:16].hex(" ") + ("…" if len(body) > 16 else "")


class LogBrowser:
    """Pages of a store's commitlog by physical offset, decoding only the records asked for.

    ``records_read`` counts record headers read or records decoded (tests use it to check
    that nothing reads the whole log).
    """

    def __init__(self, store):
        self.store = store
        self.queue = store.commit_log.mapped_file_queue
        self.size = self.queue.mapped_file_size
        self.records_read = 0
        self.decode = _record.decode_record  # looked up at call time: tests may count calls

    # -- where things are --------------------------------------------------------------
    @property
    def files(self):
        return self.queue.mapped_files

    @property
    def min_offset(self) -> int:
        files = self.files
        return files[0].file_from_offset if files else 0

    @property
    def end(self) -> int:
        """End of the readable log."""
        return self.queue.get_max_offset() if self.files else 0

    def _file_at(self, offset: int):
        return self.queue.find_mapped_file_by_offset(offset)

    def _next_file_start(self, mf) -> int | None:
        nxt = mf.file_from_offset + self.size
        return nxt if nxt < self.end and self._file_at(nxt) is not None else None

    # -- one record --------------------------------------------------------------------
    def _decode_at(self, offset: int):
        """``(mapped file, record)`` at ``offset``; record None at the end of the log.

        A blank comes back as a :class:`BlankRecord`; bytes that are neither a record nor
        the end of the readable log raise :class:`CorruptRecordError` (the step's reason).
        """
        mf = self._file_at(offset)
        if mf is None:
            return None, None
        pos = offset - mf.file_from_offset
        readable = mf.read_position
        if not mf.hold():  # hold: a running store may be deleting the file
            return mf, None
        try:
            s = step(mf.mapped, pos, mf.file_from_offset, readable)
            if s.end is End.OUT_OF_BYTES:
                return mf, None
            self.records_read += 1
            if s.end is End.BLANK:
                return mf, BlankRecord(s.size, BLANK_MAGIC_CODE)
            if s.end is not None:
                raise CorruptRecordError(s.reason, pos)
            rec = self.decode(mf.mapped, pos, limit=readable)
        finally:
            mf.release()
        return mf, rec

    def summary(self, offset: int, rec) -> dict:
        """One row of the record table."""
        name = offset_to_file_name(offset - offset % self.size)
        if not isinstance(rec, MessageRecord):
            return {"offset": i64(offset), "size": rec.total_size, "kind": "blank", "file": name,
                    "topic": "", "queue_id": -1, "queue_offset": "", "store_time": "", "store_timestamp": "",
                    "born_host": "", "keys": "", "tags": "", "msg_id": "", "body": "",
                    "note": f"END_OF_FILE: {rec.total_size:,} unused bytes"}
        props = string_to_properties(rec.properties)
        keys = " ".join(k for k in [props.get(UNIQ_KEY, "")] + (props.get(KEYS) or "").split(" ") if k)
        from rmqstore.sysflag import describe

        return {"offset": i64(offset), "size": rec.total_size, "kind": "message", "file": name,
                "topic": rec.topic, "queue_id": rec.queue_id, "queue_offset": i64(rec.queue_offset),
                "store_time": fmt_ms(rec.store_timestamp), "store_timestamp": i64(rec.store_timestamp),
                "born_host": str(rec.born_host), "keys": keys, "tags": props.get(TAGS, ""),
                "msg_id": create_message_id(rec.store_host, rec.physical_offset), "body": _body_preview(rec.body),
                "note": " ".join(describe(rec.sys_flag)) + ("" if rec.physical_offset == offset
                                                             else f" physical offset field says {rec.physical_offset}")}

    # -- pages -------------------------------------------------------------------------
    def page(self, start: int | None = None, count: int = 50, *, stop: int | None = None) -> dict:
        """Up to ``count`` records from the record boundary ``start`` (default: the first).

        Returns ``{"start", "rows", "next"}`` -- ``next`` is where the following page starts
        (None at the end of the log).  ``stop`` ends the page before that offset.
        """
        offset = self.min_offset if start is None else int(start)
        end = self.end if stop is None else min(stop, self.end)
        rows = []
        while len(rows) < count and offset < end:
            try:
                mf, rec = self._decode_at(offset)
            except CorruptRecordError as exc:
                rows.append({"offset": i64(offset), "size": 0, "kind": "corrupt", "note": str(exc),
                             "file": offset_to_file_name(offset - offset % self.size)})
                offset = None
                break
            if rec is None:
                offset = None
                break
            rows.append(self.summary(offset, rec))
            if rec.magic_code == BLANK_MAGIC_CODE:
                offset = self._next_file_start(mf)
                if offset is None:
                    break
            else:
                offset += rec.total_size
        nxt = offset if offset is not None and offset < self.end else None
        return {"start": i64(self.min_offset if start is None else int(start)), "rows": rows,
                "next": i64(nxt) if nxt is not None else None}

    def _hop(self, start: int, until: int) -> list[int]:
        """Record starts in ``[start, until)`` from the boundary ``start``, nothing decoded (a blank's
        start included; a position that is neither a record nor a blank is the last one)."""
        out = []
        offset = start
        hops = 0
        while offset < until and hops < _MAX_HOPS:
            mf = self._file_at(offset)
            if mf is None:
                break
            pos = offset - mf.file_from_offset
            if pos + 8 > mf.read_position or not mf.hold():
                break
            try:
                s = step(mf.mapped, pos, mf.file_from_offset, mf.read_position)
            finally:
                mf.release()
            self.records_read += 1
            hops += 1
            out.append(offset)
            if s.end is End.BLANK:
                nxt = self._next_file_start(mf)
                if nxt is None:
                    break
                offset = nxt
            elif s.end is None:
                offset += s.size
            else:
                break
        return out

    def boundary_at_or_before(self, target: int) -> int:
        """A record start at or before ``target``: the nearest of its segment's start and what
        the consume queues know (checked to really be a record there)."""
        target = max(self.min_offset, min(target, max(self.min_offset, self.end - 1)))
        mf = self._file_at(target)
        floor = mf.file_from_offset if mf is not None else self.min_offset
        hint = boundary_hint(self.store, target + 1, floor=floor)
        if hint is not None:
            try:
                _mf, rec = self._decode_at(hint)
                if isinstance(rec, MessageRecord) and rec.physical_offset == hint:
                    return hint
            except CorruptRecordError:
                pass
        return floor

    def record_containing(self, offset: int) -> int | None:
        """The start of the record that holds byte ``offset`` (None past the end of the log)."""
        if offset < self.min_offset or offset >= self.end:
            return None
        b = self.boundary_at_or_before(offset)
        mf = self._file_at(offset)
        starts = self._hop(b, offset + 1)
        starts = [s for s in starts if s <= offset]
        if not starts:
            return None
        last = starts[-1]
        return last if mf is None or last >= mf.file_from_offset else mf.file_from_offset

    def page_before(self, end: int | None, count: int = 50) -> dict:
        """The ``count`` records that end where ``end`` starts (default: the end of the log)."""
        end = self.end if end is None else min(int(end), self.end)
        if end <= self.min_offset:  # nothing before the start of the log
            return {"start": i64(self.min_offset), "rows": [],
                    "next": i64(self.min_offset) if self.min_offset < self.end else None}
        span = max(4096, count * 512)
        starts: list[int] = []
        while True:
            b = self.boundary_at_or_before(max(self.min_offset, end - span))
            starts = self._hop(b, end)
            if len(starts) >= count or b <= self.min_offset:
                break
            span *= 4
        first = starts[-count] if len(starts) >= count else (starts[0] if starts else self.min_offset)
        return self.page(first, count, stop=end)

    # -- lookups -----------------------------------------------------------------------
    def lookup(self, query: str, max_results: int = 32) -> dict:
        """Find records by msgId, physical offset or key; ``{"query", "how", "rows", "message"}``."""
        q = (query or "").strip()
        if not q:
            return {"query": q, "how": "", "rows": [], "message": "type a msgId, an offset or a key"}
        if re.fullmatch(r"[0-9A-Fa-f]{32}|[0-9A-Fa-f]{56}", q):
            try:
                host, offset = decode_message_id(q.upper())
            except LayoutError as exc:
                return {"query": q, "how": "msgId", "rows": [], "message": str(exc)}
            rows, message = self._rows_at([offset], exact=True)
            if rows and rows[0]["kind"] == "message" and rows[0]["msg_id"] != q.upper():
                message = f"the record at {offset:,} was stored by another host than {host}"
            return {"query": q, "how": "msgId", "rows": rows,
                    "message": f"msgId: store host {host}, offset {offset:,}" + (f"; {message}" if message else "")}
        num = q.replace(",", "").replace("_", "")
        if re.fullmatch(r"\d+|0[xX][0-9A-Fa-f]+", num):
            offset = int(num, 0)
            start = self.record_containing(offset)
            if start is None:
                return {"query": q, "how": "offset", "rows": [],
                        "message": f"offset {offset:,} is outside the log [{self.min_offset:,}, {self.end:,})"}
            rows, message = self._rows_at([start], exact=True)
            note = "" if start == offset else f" (inside the record at {start:,})"
            return {"query": q, "how": "offset", "rows": rows,
                    "message": f"offset {offset:,}{note}" + (f"; {message}" if message else "")}
        topic, sep, key = q.partition("#")
        topics = [topic] if sep else sorted({t_ for t_, _ in self.store.consume_queue_table})
        if not sep:
            key = q
        offsets = []
        for tp in topics[:1000]:
            offsets += self._query_key(tp, key, max_results)
        offsets = sorted(set(offsets))[:max_results]
        rows, message = self._rows_at(offsets, exact=True)
        where = f"topic {topic}" if sep else f"{len(topics)} topic(s)"
        return {"query": q, "how": "key", "rows": rows,
                "message": f"key {key!r} in {where}: {len(rows)} record(s) via the index"
                           + (f"; {message}" if message else "")}

    def _query_key(self, topic: str, key: str, max_num: int) -> list[int]:
        if _reading is not None and hasattr(_reading, "query_message"):
            res = _reading.query_message(self.store, topic, key, max_num, 0, 2**63 - 1, verify_keys=True)
            return [m.physical_offset for m in res.messages]
        offsets, _, _ = self.store.index_service.query_offset(topic, key, max_num, 0, 2**63 - 1)
        return offsets

    def _rows_at(self, offsets, exact: bool = True) -> tuple[list[dict], str]:
        rows = []
        problems = []
        for off in offsets:
            try:
                _mf, rec = self._decode_at(off)
            except CorruptRecordError as exc:
                problems.append(f"{off:,}: {exc}")
                continue
            if rec is None:
                problems.append(f"nothing readable at {off:,}")
                continue
            if exact and isinstance(rec, MessageRecord) and rec.physical_offset != off:
                problems.append(f"the record at {off:,} says it sits at {rec.physical_offset:,}")
            rows.append(self.summary(off, rec))
        return rows, "; ".join(problems)

    # -- queues ------------------------------------------------------------------------
    def queues(self) -> list[dict]:
        out = []
        for (topic, qid), cq in sorted(self.store.consume_queue_table.items()):
            lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            out.append({"topic": topic, "queue_id": qid, "min": i64(lo), "max": i64(hi), "count": i64(max(0, hi - lo)),
                        "files": len(cq.mapped_file_queue.mapped_files),
                        "max_physic_offset": i64(cq.max_physic_offset)})
        return out

    def queue_page(self, topic: str, queue_id: int, start: int = 0, count: int = 50) -> dict:
        """Records of one queue from queue offset ``start`` (its consume-queue units, then the records)."""
        cq = self.store.consume_queue_table.get((topic, int(queue_id)))
        if cq is None:
            return {"start": "0", "rows": [], "next": None, "message": f"no queue {topic}/{queue_id}"}
        start = max(int(start), cq.get_min_offset_in_queue())
        units = cq.get_units(start, count)
        rows, message = self._rows_at([u[1] for u in units])
        nxt = units[-1][0] + 1 if units else None
        if nxt is not None and nxt >= cq.get_max_offset_in_queue():
            nxt = None
        return {"start": i64(start), "rows": rows, "next": i64(nxt) if nxt is not None else None,
                "message": message}

    def approx_messages(self) -> int:
        return sum(max(0, cq.get_max_offset_in_queue() - cq.get_min_offset_in_queue())
                   for cq in self.store.consume_queue_table.values())


class StoreInspector(anywidget.AnyWidget):
    """Segments, topics/queues, a paged record browser and lookups over one store."""

    _esm = esm("store_inspector.js")
    _css = css("store_inspector.css")

    title = t.Unicode("").tag(sync=True)
    root = t.Unicode("").tag(sync=True)
    summary = t.Dict().tag(sync=True)
    # the segments, in SegmentView's state layout (the JS draws them with SegmentView's code)
    seg_rows = t.Int(0).tag(sync=True)
    seg_files = t.Bytes(b"").tag(sync=True)
    seg_positions = t.Bytes(b"").tag(sync=True)
    seg_groups = t.List().tag(sync=True)
    seg_summary = t.Dict().tag(sync=True)
    seg_updates = t.Int(0).tag(sync=True)
    queues = t.List().tag(sync=True)
    page_size = t.Int(50).tag(sync=True)
    page = t.Dict().tag(sync=True)
    embedded_pages = t.List().tag(sync=True)
    embedded_details = t.List().tag(sync=True)
    embedded_bytes = t.Bytes(b"").tag(sync=True)
    selected = t.Unicode("").tag(sync=True)
    field_table = t.List().tag(sync=True)

    def __init__(self, store=None, *, owns_store: bool = False, page_size: int = 50, embed_pages: int = 2,
                 embed_bytes: int = 2 * 1024 * 1024, title: str = "", open_info: dict | None = None, **kwargs):
        super().__init__(field_table=FIELD_TABLE, page_size=page_size, **kwargs)
        self.store = store
        self._owns_store = owns_store
        self.open_info = dict(open_info or {})
        self.browser = LogBrowser(store)
        self.embed_pages = embed_pages
        self.embed_bytes = embed_bytes
        self.title = title or os.path.basename(str(store.root).rstrip("/")) or str(store.root)
        self.root = str(store.root)
        self.on_msg(self._on_msg)
        self.refresh()

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_path(cls, path, *, page_size: int = 50, embed_pages: int = 2, config=None, title: str = "",
             **kwargs) -> "StoreInspector":
        """Open the store at ``path`` read-only without reading every record (closed by ``close()``)."""
        store, info = open_fast(path, config)
        try:
            return cls(store, owns_store=True, page_size=page_size, embed_pages=embed_pages, title=title,
                       open_info=info, **kwargs)
        except BaseException:
            store.close()
            raise

    @classmethod
    def from_store(cls, store, *, page_size: int = 50, embed_pages: int = 2, title: str = "",
                   **kwargs) -> "StoreInspector":
        """Inspect an already open store (a running one, or one from ``open_store``); not closed here."""
        return cls(store, page_size=page_size, embed_pages=embed_pages, title=title, **kwargs)

    def refresh(self) -> None:
        """Re-read segments, queues and the first page(s)."""
        b = self.browser
        groups, rows, seg_summary = segment_rows(self.store, blanks=64 * 1024 * 1024)
        files, positions = _pack(rows)
        pages = []
        start = None
        for _ in range(max(1, self.embed_pages)):
            p = b.page(start, self.page_size)
            pages.append(p)
            if p["next"] is None:
                break
            start = int(p["next"])
        details, blob = [], bytearray()
        for p in pages[: self.embed_pages]:
            for row in p["rows"]:
                if row["kind"] == "corrupt" or len(blob) + row["size"] > self.embed_bytes:
                    continue
                d = store_record_details(self.store, int(row["offset"]))
                data = d.pop("data")
                d["data_range"] = [len(blob), len(blob) + len(data)]
                blob += data
                details.append(d)
        index_files = list(getattr(self.store.index_service, "index_files", []))
        summary = {
            "segments": seg_summary.get("segments", 0), "file_size": b.size,
            "min_offset": i64(b.min_offset), "end": i64(b.end),
            "messages_in_queues": i64(b.approx_messages()), "queues": len(self.store.consume_queue_table),
            "topics": len({tp for tp, _ in self.store.consume_queue_table}),
            "index_files": len(index_files),
            "index_entries": i64(sum(max(0, getattr(f, "index_count", 1) - 1) for f in index_files)),
            "open": {k: v for k, v in self.open_info.items() if k in ("source", "walked_records", "seconds", "end")},
            "reading": _reading is not None,
        }
        with self.hold_sync():
            self.seg_groups = groups
            self.seg_files = files
            self.seg_positions = positions
            self.seg_rows = len(rows)
            self.seg_summary = seg_summary
            self.seg_updates = self.seg_updates + 1
            self.queues = b.queues()
            self.embedded_pages = [dict(p, mode="log") for p in pages]
            self.embedded_details = details
            self.embedded_bytes = bytes(blob)
            self.page = dict(pages[0], mode="log")
            self.summary = summary

    # -- Python API (what the browser asks for) ---------------------------------------------
    # every read first checks the store is still open: a closed store's files are unmapped,
    # and an empty page or "0 record(s)" would be a wrong answer (the browser shows the error)
    def records(self, start: int | None = None, count: int | None = None) -> dict:
        check_open(self.store)
        return self.browser.page(start, count or self.page_size)

    def records_before(self, end: int | None = None, count: int | None = None) -> dict:
        check_open(self.store)
        return self.browser.page_before(end, count or self.page_size)

    def lookup(self, query: str) -> dict:
        check_open(self.store)
        return self.browser.lookup(query)

    def record(self, offset: int) -> dict:
        check_open(self.store)
        return store_record_details(self.store, int(offset))

    def close(self) -> None:
        if getattr(self, "_owns_store", False) and self.store is not None:
            try:
                self.store.close()
            finally:
                self._owns_store = False
        super().close()

    # -- custom messages -------------------------------------------------------------------
    def _on_msg(self, _widget, content, buffers) -> None:
        if not isinstance(content, dict) or "kind" not in content:
            return
        rid = content.get("id")
        t0 = time.perf_counter()
        try:
            reply, out_buffers = self._answer(content)
        except Exception as exc:  # noqa: BLE001 - the browser shows what went wrong
            log.debug("inspector request failed", exc_info=True)
            reply, out_buffers = {"error": f"{type(exc).__name__}: {exc}"}, []
        reply.update(id=rid, kind=content["kind"], ms=round((time.perf_counter() - t0) * 1000, 2))
        self.send(reply, out_buffers)

    def _answer(self, c: dict) -> tuple[dict, list]:
        check_open(self.store)
        kind = c["kind"]
        count = max(1, min(int(c.get("count") or self.page_size), 1000))
        if kind == "page":
            start = c.get("start")
            return {"page": dict(self.browser.page(int(start) if start not in (None, "") else None, count),
                                 mode="log")}, []
        if kind == "page_before":
            end = c.get("end")
            return {"page": dict(self.browser.page_before(int(end) if end not in (None, "") else None, count),
                                 mode="log")}, []
        if kind == "queue_page":
            p = self.browser.queue_page(c["topic"], int(c["queue_id"]), int(c.get("start") or 0), count)
            return {"page": dict(p, mode="queue", topic=c["topic"], queue_id=int(c["queue_id"]))}, []
        if kind == "lookup":
            return {"lookup": self.browser.lookup(str(c.get("query", "")))}, []
        if kind == "record":
            d = self.record(int(c["offset"]))
            data = d.pop("data")
            return {"record": d}, [data]
        return {"error": f"unknown request {kind!r}"}, []
