"""The JSON form of a commitlog record -- what ``rmqstore dump --json`` writes, one object a line.

A pure module: no files, no clock.  Two functions, inverse to each other:

* :func:`record_to_json` turns a decoded record (``MessageRecord`` or ``BlankRecord``)
  found at a physical offset into a JSON-ready ``dict``;
* :func:`json_to_message` turns such a ``dict`` back into a
  :class:`~rmqstore.format.message.Message` in *replay* form (``store_timestamp``,
  ``queue_offset`` and ``body_crc`` set), so that ``rmqstore load`` writes the same record
  again, byte for byte.

Both walk :data:`rmqstore.format.layout.MESSAGE_FIELDS`; the per-kind conversions below are the
only knowledge added here.  A message object holds every field of the layout table under
its table name, plus::

    "type": "message", "offset": <where the record was found>,
    "msg_id": <offset msgId>, "crc_ok": <body CRC matches>, "version": 1 | 2

with ``body`` as lowercase hex and the hosts as ``"ip:port"`` (``"[v6]:port"``) strings.
A blank (END_OF_FILE) record is ``{"type": "blank", "offset", "total_size", "magic_code"}``.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields

from .crc import crc32
from ..common.errors import LayoutError
from .layout import BLANK_RECORD, KIND_SIZES, MESSAGE_FIELDS, MESSAGE_MAGIC_CODE_V2
from .message import Message
from .record import INT_RANGES, Address, BlankRecord, MessageRecord, create_message_id

__all__ = ["DumpFormatError", "record_to_json", "json_to_message", "MESSAGE_KEYS", "BLANK_KEYS",
           "REPLAY_FIELDS", "blank_from_json"]


class DumpFormatError(LayoutError):
    """A JSON object is not a valid dumped record (missing field, wrong type, bad value)."""


#: keys of a dumped message object, in output order
MESSAGE_KEYS = ("type", "offset", *(f.name for f in MESSAGE_FIELDS), "msg_id", "crc_ok", "version")
#: keys of a dumped blank object
BLANK_KEYS = ("type", "offset", *(f.name for f in BLANK_RECORD.fields))

_MESSAGE_ATTRS = {f.name for f in dataclass_fields(Message)}
#: layout fields that a replayed Message carries (the rest -- total size, magic, CRC,
#: physical offset -- are decided by the encoder and the put path)
REPLAY_FIELDS = tuple(f for f in MESSAGE_FIELDS if f.name in _MESSAGE_ATTRS)



def _to_json_value(kind: str, value):
    if kind == "host":
        return str(value)
    if kind == "blob32":
        return bytes(value).hex()
    return value


def record_to_json(physical_offset: int, record, *, include_body: bool = True) -> dict:
    """The JSON form of ``record`` found at ``physical_offset`` (see the module doc)."""
    if isinstance(record, BlankRecord):
        out = {"type": "blank", "offset": physical_offset}
        for f in BLANK_RECORD.fields:
            out[f.name] = getattr(record, f.name)
        return out
    if not isinstance(record, MessageRecord):
        raise TypeError(f"expected a MessageRecord or BlankRecord, got {type(record).__name__}")
    out = {"type": "message", "offset": physical_offset}
    for f in MESSAGE_FIELDS:
        if f.name == "body" and not include_body:
            continue
        out[f.name] = _to_json_value(f.kind, getattr(record, f.name))
    out["msg_id"] = create_message_id(record.store_host, record.physical_offset)
    out["crc_ok"] = crc32(record.body) == record.body_crc
    out["version"] = 2 if record.magic_code == MESSAGE_MAGIC_CODE_V2 else 1
    return out


def _require(obj: dict, name: str):
    try:
        return obj[name]
    except KeyError:
        raise DumpFormatError(f"missing field {name!r}") from None


def _int_field(obj: dict, name: str, kind: str = "i64") -> int:
    value = _require(obj, name)
    if type(value) is not int:
        raise DumpFormatError(f"field {name!r} must be an integer, got {type(value).__name__}")
    lo, hi = INT_RANGES[kind]
    if not lo <= value <= hi:
        raise DumpFormatError(f"field {name!r} = {value} does not fit in {kind}")
    return value


def _from_json_value(obj: dict, f):
    if f.kind in KIND_SIZES:
        return _int_field(obj, f.name, f.kind)
    value = _require(obj, f.name)
    if f.kind == "host":
        if not isinstance(value, str):
            raise DumpFormatError(f"field {f.name!r} must be an 'ip:port' string, got {type(value).__name__}")
        try:
            return Address.parse(value)
        except LayoutError as exc:
            raise DumpFormatError(f"field {f.name!r}: {exc}") from None
    if f.kind == "blob32":
        if not isinstance(value, str):
            raise DumpFormatError(f"field {f.name!r} must be a hex string, got {type(value).__name__}")
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise DumpFormatError(f"field {f.name!r} is not valid hex") from None
    # str8 / str16
    if not isinstance(value, str):
        raise DumpFormatError(f"field {f.name!r} must be a string, got {type(value).__name__}")
    return value


def json_to_message(obj: dict) -> Message:
    """A dumped message object back as a :class:`Message` in replay form.

    Keeps every field the record carries (topic, properties, timestamps, hosts, flags,
    queue offset, body CRC as recorded -- right or wrong, ...); the encoder recomputes the
    total size and the put path decides the physical offset.  Raises
    :class:`DumpFormatError` naming the first missing or malformed field.
    """
    if not isinstance(obj, dict):
        raise DumpFormatError(f"a record must be a JSON object, got {type(obj).__name__}")
    kind = obj.get("type", "message")
    if kind != "message":
        raise DumpFormatError(f"expected a record of type 'message', got {kind!r}")
    return Message(**{f.name: _from_json_value(obj, f) for f in REPLAY_FIELDS})


def blank_from_json(obj: dict) -> tuple[int, int]:
    """``(offset, total_size)`` of a dumped blank object, validated."""
    if not isinstance(obj, dict) or obj.get("type") != "blank":
        raise DumpFormatError("expected a record of type 'blank'")
    offset = _int_field(obj, "offset")
    total = _int_field(obj, "total_size", "i32")
    if total < 8:
        raise DumpFormatError(f"a blank record declares at least 8 bytes, got {total}")
    return offset, total
