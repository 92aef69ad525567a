"""What every view shares: the field table with colours, offsets as strings, record details.

The colours and labels of record fields come from :data:`rmqstore.format.layout.MESSAGE_FIELDS`
(and :data:`~rmqstore.format.layout.BLANK_RECORD`) -- one colour per row of the table, by its
position in it -- so a field added to the layout shows up in every view without a second
copy of the table anywhere.

64-bit values (physical offsets, queue offsets, timestamps) travel to JavaScript as
decimal *strings*: a JS number is exact only up to 2**53, a commitlog offset is a Java
``long``.  The JS side turns them into ``BigInt`` where it computes with them.
"""

from __future__ import annotations

import struct

from rmqstore.format.crc import crc32
from rmqstore.common.errors import CorruptRecordError
from rmqstore.format.layout import BLANK_MAGIC_CODE, BLANK_RECORD, MESSAGE_FIELDS, MESSAGE_MAGIC_CODE_V2
from rmqstore.read.log_browser import fmt_ms, i64  # the rows' 64-bit strings and dates are the core's
from rmqstore.format.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from rmqstore.format.record import MessageRecord, create_message_id, decode_record, record_field_spans
from rmqstore.format.sysflag import describe as describe_sys_flag

__all__ = ["FIELD_TABLE", "field_colour", "i64", "record_details", "BLANK_SHOWN", "fmt_ms", "palette", "body_preview",
           "split_properties"]

#: bytes of a blank record's filler shown after its 8-byte header
BLANK_SHOWN = 56


def palette(n: int) -> list[str]:
    """``n`` distinct, readable background colours (evenly spaced hues, neighbours far apart)."""
    out = []
    step = 7 if n % 7 else 5  # co-prime with n: neighbours in the table get far-apart hues
    for i in range(n):
        hue = ((i * step) % n) * 360.0 / n + 10
        light = 80 if i % 2 == 0 else 70
        out.append(f"hsl({hue:.0f}, 70%, {light}%)")
    return out


_COLOURS = dict(zip((f.name for f in MESSAGE_FIELDS), palette(len(MESSAGE_FIELDS))))


def field_colour(name: str) -> str:
    """The colour of a layout field (``body_length`` takes ``body``'s); grey for the unknown."""
    base = name[:-7] if name.endswith("_length") and name[:-7] in _COLOURS else name
    return _COLOURS.get(base, "hsl(0, 0%, 85%)")


def _table() -> list[dict]:
    rows = []
    for f in MESSAGE_FIELDS:
        rows.append({"name": f.name, "java": f.java, "kind": f.kind, "doc": f.doc, "color": _COLOURS[f.name]})
        if f.kind in ("blob32", "str8", "str16"):
            rows.append({"name": f.name + "_length", "java": f.java + " length", "kind": "length",
                         "doc": f"Length prefix of {f.name}.", "color": _COLOURS[f.name], "of": f.name})
    for f in BLANK_RECORD.fields:
        if f.name not in _COLOURS:  # pragma: no cover - the blank record reuses message names
            rows.append({"name": f.name, "java": f.java, "kind": f.kind, "doc": f.doc,
                         "color": field_colour(f.name)})
    rows.append({"name": "blank_fill", "java": "(unused)", "kind": "fill",
                 "doc": "The rest of the file after a blank record's header: never read.",
                 "color": "hsl(0, 0%, 88%)"})
    return rows


#: every field (and length prefix) a view may colour: name, RocketMQ name, kind, doc, colour
FIELD_TABLE: list[dict] = _table()


def body_preview(body: bytes, limit: int = 64) -> str:
    head = body[:limit]
    more = f" ... ({len(body):,} bytes)" if len(body) > limit else f" ({len(body):,} bytes)"
    try:
        text = head.decode("utf-8")
        if all(c.isprintable() or c in "\t\n" for c in text):
            return repr(text)[1:-1] + more
    except UnicodeDecodeError:
        pass
    return head.hex(" ") + more


def split_properties(props: str) -> list[list[str]]:
    """Properties in stored order: ``[[name, value], ...]``."""
    out = []
    for item in props.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        out.append([name, value] if sep else [name, ""])
    return out


def _field_meta() -> dict[str, dict]:
    return {row["name"]: row for row in FIELD_TABLE}


_META = _field_meta()


def _row(name: str, value: str, raw: str = "", status: str = "", extra=None) -> dict:
    meta = _META.get(name, {})
    row = {"name": name, "java": meta.get("java", ""), "doc": meta.get("doc", ""), "value": value,
           "raw": raw, "status": status}
    if extra:
        row["extra"] = extra
    return row


def record_details(buf, pos: int = 0, physical_offset: int | None = None, *, limit: int | None = None) -> dict:
    """Everything a record view shows about the record at ``buf[pos:]``.

    Returns ``kind`` (``message``/``blank``/``corrupt``), the record's bytes (``data``; for a
    blank its header and :data:`BLANK_SHOWN` filler bytes), ``spans`` ``[[name, start, end]]``
    relative to the record start (from :func:`rmqstore.format.record.record_field_spans` /
    the blank layout), and ``rows`` of decoded values, one per span, in span order.
    ``physical_offset`` (default ``pos``) is where the record sits in the commitlog.
    """
    phys = pos if physical_offset is None else physical_offset
    end_of_buf = len(buf) if limit is None else min(limit, len(buf))
    try:
        rec = decode_record(buf, pos, limit=end_of_buf)
    except CorruptRecordError as exc:
        shown = bytes(buf[pos:min(end_of_buf, pos + 64)])
        return {"kind": "corrupt", "offset": i64(phys), "size": len(shown), "total_size": 0,
                "data": shown, "spans": [], "rows": [], "error": str(exc), "version": "", "msg_id": "",
                "summary": f"not a record: {exc}"}
    if rec.magic_code == BLANK_MAGIC_CODE:
        shown = min(rec.total_size, 8 + BLANK_SHOWN, end_of_buf - pos)
        data = bytes(buf[pos:pos + shown])
        spans = [[f.name, start, stop] for f, start, stop in BLANK_RECORD.spans(0)]
        rows = [_row("total_size", f"{rec.total_size:,} bytes to the end of the file", str(rec.total_size)),
                _row("magic_code", "0xCBD43194 (BLANK: END_OF_FILE)", str(rec.magic_code))]
        if shown > 8:
            spans.append(["blank_fill", 8, shown])
            zeros = not any(data[8:])
            rows.append(_row("blank_fill", f"{rec.total_size - 8:,} bytes never read "
                             f"({'zeros' if zeros else 'not all zeros'}; first {shown - 8} shown)"))
        return {"kind": "blank", "offset": i64(phys), "size": shown, "total_size": rec.total_size, "data": data,
                "spans": spans, "rows": rows, "version": "", "msg_id": "",
                "summary": f"blank record: {rec.total_size:,} unused bytes to the end of the file"}
    return _message_details(buf, pos, phys, rec)


def _message_details(buf, pos: int, phys: int, rec: MessageRecord) -> dict:
    data = bytes(buf[pos:pos + rec.total_size])
    spans = [[name, start, stop] for name, start, stop, _ in record_field_spans(rec, 0)]
    v2 = rec.magic_code == MESSAGE_MAGIC_CODE_V2
    crc = crc32(rec.body)
    lengths = {n: struct.unpack(">" + {1: "b", 2: "h", 4: "i"}[e - s], data[s:e])[0]
               for n, s, e in spans if n.endswith("_length")}
    values = {
        "total_size": (f"{rec.total_size:,} bytes", str(rec.total_size), ""),
        "magic_code": (f"0x{rec.magic_code & 0xFFFFFFFF:08X} ({'V2, 5.x' if v2 else 'V1, 4.x'})",
                       str(rec.magic_code), ""),
        "body_crc": (f"0x{rec.body_crc:08X} " + ("ok" if crc == rec.body_crc else f"bad: the body's CRC is 0x{crc:08X}"),
                     str(rec.body_crc), "ok" if crc == rec.body_crc else "bad"),
        "queue_id": (str(rec.queue_id), str(rec.queue_id), ""),
        "flag": (str(rec.flag), str(rec.flag), ""),
        "queue_offset": (f"{rec.queue_offset:,}", str(rec.queue_offset), ""),
        "physical_offset": (f"{rec.physical_offset:,}" + ("" if rec.physical_offset == phys
                                                           else f" (but the record sits at {phys:,})"),
                            str(rec.physical_offset), "" if rec.physical_offset == phys else "bad"),
        "sys_flag": (f"0x{rec.sys_flag & 0xFFFFFFFF:08X}" + (f" {' '.join(describe_sys_flag(rec.sys_flag))}"
                                                             if describe_sys_flag(rec.sys_flag) else ""),
                     str(rec.sys_flag), ""),
        "born_timestamp": (fmt_ms(rec.born_timestamp), str(rec.born_timestamp), ""),
        "born_host": (str(rec.born_host), rec.born_host.packed.hex(), ""),
        "store_timestamp": (fmt_ms(rec.store_timestamp), str(rec.store_timestamp), ""),
        "store_host": (str(rec.store_host), rec.store_host.packed.hex(), ""),
        "reconsume_times": (str(rec.reconsume_times), str(rec.reconsume_times), ""),
        "prepared_transaction_offset": (f"{rec.prepared_transaction_offset:,}",
                                        str(rec.prepared_transaction_offset), ""),
        "body": (body_preview(rec.body), "", ""),
        "topic": (rec.topic, "", ""),
        "properties": (f"{len(split_properties(rec.properties))} properties" if rec.properties else "(none)",
                       rec.properties, ""),
    }
    rows = []
    for name, _start, _stop in spans:
        if name in lengths:
            rows.append(_row(name, f"{lengths[name]:,}", str(lengths[name])))
            continue
        value, raw, status = values[name]
        extra = split_properties(rec.properties) if name == "properties" else None
        rows.append(_row(name, value, raw, status, extra))
    msg_id = create_message_id(rec.store_host, rec.physical_offset)
    return {"kind": "message", "offset": i64(phys), "size": rec.total_size, "total_size": rec.total_size,
            "data": data, "spans": spans, "rows": rows, "version": "V2" if v2 else "V1", "msg_id": msg_id,
            "crc_ok": crc == rec.body_crc,
            "summary": f"{rec.topic} / queue {rec.queue_id} / queue offset {rec.queue_offset:,}"}
