"""FrameView: one remoting frame's bytes, coloured field by field, and what they decode to.

A RocketMQ client talks to a broker in frames (:mod:`rmqstore.remoting.frame`): a length,
the serialize type and header length, the header (code, language, version, opaque, flag,
remark, extFields) and the body.  This view shows a frame's bytes in the same hex/ASCII
grid as :class:`~widgets.record_view.RecordView` (its JavaScript is reused): the spans come
from :func:`rmqstore.remoting.frame_field_spans` with the header expanded member by member,
labels and docs from :data:`~rmqstore.remoting.FRAME_FIELDS` and
:data:`~rmqstore.remoting.BINARY_HEADER_FIELDS` -- no second copy of the layout here.  A
SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE header's one-letter names (``a`` ... ``n``) are shown
with their meaning (:data:`rmqstore.broker.send.V2_FIELDS`, RocketMQ's
``SendMessageRequestHeaderV2``); the message properties are split into name/value rows.

State (all synced, so a static page renders it): ``data`` (Bytes: the frame, length field
included), ``spans`` (``[[name, start, end]]``), ``rows`` (one per span), ``field_table``
(colours), ``code``/``summary``/``error``, ``selected``.

DOM contract: root ``data-testid="frame-view"``; hex cells ``data-testid="byte"`` and decoded
rows ``data-testid="field"``, both with ``data-field="<span name>"`` (``length``,
``header_meta``, ``code`` ... ``extFields``, ``extFields.<key>``, ``body``; a JSON header's
punctuation has ``data-field=""``); class ``hl`` while a field is highlighted, as in RecordView.
"""

from __future__ import annotations

import traitlets as t

from rmqstore.broker.send import V2_FIELDS
from rmqstore.format.properties import PROPERTY_SEPARATOR
from rmqstore.remoting import (RemotingFrameError, RequestCode, ResponseCode, SerializeType, decode_frame,
                               frame_field_spans)
from rmqstore.remoting.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE

from ._assets import css, esm
from ._common import body_preview, palette, split_properties
from .record_view import FieldBytesView

__all__ = ["FrameView", "frame_details", "V2_CODES"]

#: request codes whose custom header uses SendMessageRequestHeaderV2's one-letter names
V2_CODES = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


def _code_name(code: int, is_response: bool) -> str:
    enum = ResponseCode if is_response else RequestCode
    try:
        return f"{code} {enum(code).name}"
    except ValueError:
        return str(code)


def _flag_text(flag: int) -> str:
    bits = ["response" if flag & RPC_TYPE_RESPONSE else "request"]
    if flag & RPC_ONEWAY:
        bits.append("oneway")
    return f"{flag} ({', '.join(bits)})"


def _values(frame: bytes, cmd) -> dict[str, tuple[str, object]]:
    """Decoded value (and extra rows) of each fixed span name."""
    header_len = len(frame) - 8 - len(cmd.body)
    st = SerializeType(cmd.serialize_type).name if cmd.serialize_type in (0, 1) else str(cmd.serialize_type)
    return {
        "length": (f"{int.from_bytes(frame[:4], 'big', signed=True):,} = 4 + header {header_len:,} + body {len(cmd.body):,}", None),
        "header_meta": (f"serialize type {cmd.serialize_type} ({st}), header length {header_len:,}", None),
        "header": ("(not decoded)", None),
        "code": (_code_name(cmd.code, cmd.is_response), None),
        "language": (str(cmd.language), None),
        "version": (str(cmd.version), None),
        "opaque": (str(cmd.opaque), None),
        "flag": (_flag_text(cmd.flag), None),
        "remark": (repr(cmd.remark) if cmd.remark else "(none)", None),
        "extFields": (f"{len(cmd.ext_fields)} entries", None),
        "serializeTypeCurrentRPC": (st, None),
        "body": (body_preview(cmd.body) if cmd.body else "(empty)", None),
    }


def _ext_row(key: str, value: str, v2: bool) -> tuple[str, str, object]:
    meaning = V2_FIELDS.get(key, "") if v2 else ""
    name = meaning or key
    shown = value.replace(PROPERTY_SEPARATOR, "␂").replace("\x01", "␁")
    extra = split_properties(value) if name == "properties" else None
    return (f"{meaning} = {shown}" if meaning else shown), (f"{key} ({meaning})" if meaning else key), extra


def frame_details(frame: bytes) -> dict:
    """Spans, decoded rows, colours and a summary of one frame (length field included).

    Bytes that are not a frame give the spans that can be found and ``error`` saying why.
    """
    frame = bytes(frame)
    out = {"data": frame, "spans": [], "rows": [], "field_table": [], "code": "", "summary": "", "error": ""}
    try:
        cmd = decode_frame(frame[4:])
        spans = frame_field_spans(frame, expand_header=True)
    except RemotingFrameError as exc:
        out["error"] = str(exc)
        try:
            spans, cmd = frame_field_spans(frame), None
        except RemotingFrameError:
            return out
    values = _values(frame, cmd) if cmd is not None else {}
    v2 = cmd is not None and not cmd.is_response and cmd.code in V2_CODES
    colours = palette(max(len(spans), 1))
    for i, (name, start, end, field) in enumerate(spans):
        out["spans"].append([name, start, end])
        java, doc, extra = field.java, field.doc, None
        if name.startswith("extFields."):
            key = name[len("extFields."):]
            value, java, extra = _ext_row(key, cmd.ext_fields.get(key, ""), v2)
        else:
            value, extra = values.get(name, ("", None))
        row = {"name": name, "java": java, "doc": doc, "value": value, "raw": "", "status": ""}
        if extra:
            row["extra"] = extra
        out["rows"].append(row)
        out["field_table"].append({"name": name, "java": java, "kind": field.kind, "doc": doc, "color": colours[i]})
    if cmd is not None:
        out["code"] = _code_name(cmd.code, cmd.is_response)
        kind = "response" if cmd.is_response else "request"
        out["summary"] = (f"{kind} {out['code']} from {cmd.language}, opaque {cmd.opaque}, "
                          f"{len(cmd.ext_fields)} extFields, {len(cmd.body):,}-byte body")
    return out


class FrameView(FieldBytesView):
    """A remoting frame's bytes as a hex/ASCII grid coloured by field, with its decoded values."""

    _esm = esm("frame_view.js")
    _css = css("frame_view.css")

    code = t.Unicode("").tag(sync=True)

    @classmethod
    def from_bytes(cls, frame: bytes, *, title: str = "") -> "FrameView":
        """The frame ``frame`` (as on the wire: the 4-byte length first)."""
        return cls(title=title, **frame_details(frame))

    def row(self, name: str) -> dict:
        return next(r for r in self.rows if r["name"] == name)
