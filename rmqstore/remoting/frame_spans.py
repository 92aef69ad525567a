"""A frame's bytes, field by field: the spans a view (``FrameView``, the put-path player) colours.

:func:`frame_field_spans` names the spans of one frame as :data:`~.frame.FRAME_FIELDS` declares them;
with ``expand_header=True`` :func:`header_field_spans` splits the header into its members -- in a JSON
header each ``"name":value`` pair, found with the JSON decoder itself (so a span is exactly the bytes
the decoder read), in a binary header each field of :data:`~.frame.BINARY_HEADER_FIELDS` -- and one
``extFields.<key>`` span per custom-header entry.  The codec is :mod:`.frame`; this module only reads
positions, and raises :class:`~.frame.RemotingFrameError` on bytes that are no frame.
"""

from __future__ import annotations

import json
import struct

from ..format.layout import KIND_SIZES, Field
from .codes import SerializeType
from .frame import BINARY_HEADER_FIELDS, FRAME_FIELDS, FRAME_PREFIX, RemotingFrameError, decode_header

__all__ = ["frame_field_spans", "header_field_spans"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def frame_field_spans(frame: bytes, *, expand_header: bool = False) -> list[tuple[str, int, int, Field]]:
    """Byte spans ``(name, start, end, field)`` of one frame, as :data:`FRAME_FIELDS` names them.

    With ``expand_header`` the header span is replaced by :func:`header_field_spans` (its
    members one by one: ``code`` ... ``remark``, ``extFields`` and one ``extFields.<key>``
    per custom-header entry); a JSON header's punctuation between members is in no span.
    """
    if len(frame) < 8:
        raise RemotingFrameError("a frame has at least 8 bytes")
    length, meta = FRAME_PREFIX.unpack_from(frame, 0)
    header_end = min(8 + (meta & 0xFFFFFF), len(frame))
    ends = (4, 8, header_end, min(4 + length, len(frame)))
    spans, start = [], 0
    for f, end in zip(FRAME_FIELDS, ends):
        if f.name == "header" and expand_header:
            spans += header_field_spans((meta >> 24) & 0xFF, bytes(frame[start:end]), start)
        else:
            spans.append((f.name, start, end, f))
        start = end
    return spans


_HEADER_FIELD_BY_JAVA = {f.java: f for f in BINARY_HEADER_FIELDS}
_JSON_ONLY = Field("serializeTypeCurrentRPC", "json", "serializeTypeCurrentRPC",
                   "The header's encoding again, as text (a JSON header only).")
_JSON = json.JSONDecoder()


def _ext_field(key: str) -> Field:
    return Field(f"extFields.{key}", "str", key, f"Custom header field {key!r} (a string, as Java keeps them).")


def header_field_spans(serialize_type: int, header: bytes, base: int = 0) -> list[tuple[str, int, int, Field]]:
    """Byte spans of a header's members (``base`` is where the header starts in the frame).

    Names are :data:`BINARY_HEADER_FIELDS`' Java names (``code``, ``language``, ...,
    ``extFields``) and ``extFields.<key>`` for each custom-header entry; raises
    :class:`RemotingFrameError` when the header does not parse.
    """
    decode_header(serialize_type, header)  # the same checks as the codec: a bad header is refused here too
    if serialize_type == SerializeType.ROCKETMQ:
        return [(n, base + s, base + e, f) for n, s, e, f in _binary_spans(header)]
    text = header.decode("utf-8")
    at = _byte_positions(text)
    spans = []
    for key, start, colon, end, value in _json_members(text, 0):
        if key == "extFields" and isinstance(value, dict):
            brace = text.index("{", colon)
            spans.append(("extFields", base + at(start), base + at(brace + 1), _HEADER_FIELD_BY_JAVA["extFields"]))
            for k, s, _, e, _ in _json_members(text, brace):
                spans.append((f"extFields.{k}", base + at(s), base + at(e), _ext_field(k)))
        else:
            f = _HEADER_FIELD_BY_JAVA.get(key) or (_JSON_ONLY if key == _JSON_ONLY.java else
                                                   Field(key, "json", key, "A header member RocketMQ ignores."))
            spans.append((f.java, base + at(start), base + at(end), f))
    return spans


def _byte_positions(text: str):
    """Character index -> UTF-8 byte index of ``text``."""
    if text.isascii():
        return lambda i: i
    return lambda i: len(text[:i].encode("utf-8"))


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _json_members(text: str, i: int) -> list[tuple[str, int, int, int, object]]:
    """``(key, start, colon, end, value)`` of each member of the JSON object whose ``{`` is at ``i``."""
    out: list[tuple[str, int, int, int, object]] = []
    i = _skip_ws(text, i) + 1
    while True:
        i = _skip_ws(text, i)
        if i >= len(text) or text[i] == "}":
            return out
        key, j = _JSON.raw_decode(text, i)
        colon = _skip_ws(text, j)
        value, end = _JSON.raw_decode(text, _skip_ws(text, colon + 1))
        out.append((key, i, colon, end, value))
        i = _skip_ws(text, end)
        if i < len(text) and text[i] == ",":
            i += 1


def _binary_spans(header: bytes) -> list[tuple[str, int, int, Field]]:
    spans, pos = [], 0
    for f in BINARY_HEADER_FIELDS:
        if f.kind in KIND_SIZES:
            size = KIND_SIZES[f.kind][1]
        else:
            size = 4 + _I32.unpack_from(header, pos)[0]
        if f.kind != "map32":
            spans.append((f.java, pos, pos + size, f))
            pos += size
            continue
        spans.append((f.java, pos, pos + 4, f))
        p, end = pos + 4, pos + size
        while p < end:
            k_len = _I16.unpack_from(header, p)[0]
            key = header[p + 2:p + 2 + k_len].decode("utf-8")
            v_len = _I32.unpack_from(header, p + 2 + k_len)[0]
            stop = p + 2 + k_len + 4 + v_len
            spans.append((f"extFields.{key}", p, stop, _ext_field(key)))
            p = stop
        pos = end
    return spans
