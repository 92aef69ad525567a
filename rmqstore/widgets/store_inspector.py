"""StoreInspector: one view over a store directory -- segments, queues, records, lookups.

Opening never reads the whole store (:func:`rmqstore.read.fast_open.open_fast` finds the end of
the log from the consume queues and a short walk).  The paging, the hops backwards and the
lookups (msgId, physical offset, key) are the engine's :class:`rmqstore.read.log_browser.LogBrowser`
(re-exported here); this module only holds the view: its traits, the first pages embedded for
a static page, and the answers to the browser's requests.

Live, the browser asks the kernel for pages, records and lookups with anywidget custom
messages.  For a static page (:func:`rmqstore.widgets.to_html`) the first
``embed_pages`` pages and their records' bytes are part of the state; lookups then search
those records only.
"""

from __future__ import annotations

import logging
import os
import time

import anywidget
import traitlets as t

from rmqstore.read.fast_open import open_fast
from rmqstore.read.log_browser import LogBrowser
from rmqstore.engine.reading import check_open

from ._assets import css, esm
from ._common import FIELD_TABLE, i64
from .record_view import store_record_details
from .segment_view import segment_rows, pack_state

__all__ = ["StoreInspector", "LogBrowser"]

log = logging.getLogger(__name__)


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
        files, positions = pack_state(rows)
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
            "reading": True,  # the read path is part of the engine
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
