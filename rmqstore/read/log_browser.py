"""The log browser: a store's commitlog a page at a time, and lookups by msgId, offset or key.

A store of millions of messages is browsed without reading it whole.  A page starts at a record
boundary and is decoded record by record until it is full, so only what is asked for is read
(``records_read`` counts it).  Where a record is and where a segment ends is
:func:`rmqstore.format.walk.step`'s call -- the same step recovery and reput take; the browser only pages.

The hard part is going *backwards*: a record's size is in its own header, so the record that ends
where a page starts cannot be found from that place.  The browser finds the nearest known
record boundary at or before it -- the start of its segment (every segment starts with a
record), or a nearer physical offset a consume queue points at
(:func:`rmqstore.read.fast_open.boundary_hint`), checked to really hold a record that says it sits
there -- and hops forward over record sizes, reading headers only, until it reaches the place.
The same hop answers "which record holds byte N".

Lookups take what a person types: a 32- or 56-hex-digit offset msgId (store host, port and
physical offset), a physical offset (decimal, ``0x`` hex, ``,`` or ``_`` separators), or a key
-- ``key`` in every topic or ``topic#key`` -- through the index files by
:func:`rmqstore.engine.reading.query_message`, keys verified against the records.

Rows are plain dicts ready for JSON: 64-bit values (offsets, timestamps) are decimal *strings*
(:func:`i64`), because a JavaScript number is exact only up to 2**53 and a commitlog offset is
a Java ``long``.  The store inspector widget (:mod:`rmqstore.widgets.store_inspector`) is a
thin view over this class.
"""

from __future__ import annotations

import datetime as _dt
import re

from rmqstore.format import record as _record
from rmqstore.common.errors import CorruptRecordError, LayoutError
from rmqstore.read.fast_open import boundary_hint
from rmqstore.format.layout import BLANK_MAGIC_CODE
from rmqstore.format.properties import KEYS, TAGS, UNIQ_KEY, string_to_properties
from rmqstore.engine.reading import query_message
from rmqstore.format.record import BlankRecord, MessageRecord, create_message_id, decode_message_id
from rmqstore.files.store_paths import offset_to_file_name
from rmqstore.format.sysflag import describe
from rmqstore.format.walk import End, step

__all__ = ["LogBrowser", "i64", "fmt_ms"]

_MAX_HOPS = 2_000_000


def i64(value: int) -> str:
    """A 64-bit integer for JavaScript: a decimal string (exact beyond 2**53)."""
    return str(int(value))


def fmt_ms(ms: int) -> str:
    """Milliseconds since the epoch as an ISO date in UTC, or why not."""
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ms} (not a date)"
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


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
        rows: list[dict] = []
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

    def inside_which_record(self, offset: int) -> str | None:
        """Which record holds byte ``offset`` when no record starts there, in words with the offset that
        shows it; None when ``offset`` starts a record or the hop finds none (a damaged stretch)."""
        try:
            start = self.record_containing(offset)
            rec = self._decode_at(start)[1] if start is not None and start != offset else None
        except CorruptRecordError:
            return None
        if rec is None or not start < offset < start + rec.total_size:
            return None
        if not isinstance(rec, MessageRecord):
            return (f"it is inside the END_OF_FILE blank record at offset {start} ({rec.total_size} bytes, the "
                    "unused end of its file), which holds no message")
        return (f"it is inside the message at offset {start} ({rec.total_size} bytes, topic {rec.topic}); "
                f"--offset {start} shows it")

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
        res = query_message(self.store, topic, key, max_num, 0, 2**63 - 1, verify_keys=True)
        return [m.physical_offset for m in res.messages]

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
