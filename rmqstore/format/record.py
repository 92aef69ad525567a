"""Encode and decode commitlog records -- a pure codec driven by :mod:`rmqstore.format.layout`.

Nothing here touches a file, a clock or a thread: functions take ``bytes``,
``bytearray``, ``memoryview`` or ``mmap`` objects and return values.  The engine, the
CLI, the widgets and the Spark readers all sit on top of this module.

The hard part of decoding is that the bytes may be anything: a torn write, a blank
tail, stale data from a reused buffer, a record of another version.  :func:`decode_record`
therefore checks every length against the buffer and the declared total size *before*
slicing, and turns every inconsistency into a :class:`~rmqstore.common.errors.CorruptRecordError`
naming the offset -- never an ``IndexError`` or ``struct.error``.

The hard part of encoding is speed: the put path encodes outside the put lock (like
RocketMQ's ``MessageExtEncoder``) and patches only the three values that the lock
decides -- queue offset, physical offset, store timestamp -- at positions the layout
table gives (:data:`~rmqstore.format.layout.QUEUE_OFFSET_POSITION` and friends).  There is one
Python encoder, the put path's (:class:`~rmqstore.format.message_encoder.MessageEncoder`):
:func:`encode_message` is that encoder given every value of a record.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from typing import Any, NamedTuple, cast

from .crc import crc32
from ..common.errors import CorruptRecordError, LayoutError
from .layout import (
    BLANK_MAGIC_CODE,
    BLANK_RECORD,
    INT_RANGES,
    MAX_TOPIC_BYTES_V1,
    MESSAGE_FIELDS,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_HEAD,
    SYSFLAG_POSITION,
    field_problem,
    message_field_spans,
    message_header_struct,
)
from .message_encoder import EncodedMessage, MessageEncoder
from .message_id import MAX_PORT, Address, create_message_id, decode_message_id, socket_address
from .sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

__all__ = [
    "Address",
    "MessageRecord",
    "BlankRecord",
    "encode_message",
    "decode_record",
    "decode_message",
    "record_field_spans",
    "create_message_id",
    "decode_message_id",
    "MAX_TOPIC_BYTES_V1",
    "MAX_PORT",
    "INT_RANGES",
    "field_problem",
    "socket_address",
]

#: the put path's encoder for each record version, given whole records (no size limit but the layout's)
_ENCODERS = {magic: MessageEncoder(2**31 - 1 - 64 * 1024, None, Address.parse, magic_code=magic)
             for magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)}


#: one decoded message record; field names come from the layout table
MessageRecord: Any = cast(Any, namedtuple("MessageRecord", [f.name for f in MESSAGE_FIELDS]))  # fields from a table
MessageRecord.__doc__ = "A decoded commitlog message record (fields as in layout.MESSAGE_FIELDS)."

BlankRecord = BLANK_RECORD.tuple_type

_STORE_V6 = STOREHOSTADDRESS_V6_FLAG
_BORN_V6 = BORNHOST_V6_FLAG
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_MAGIC = RECORD_HEAD.struct


def encode_message(*, queue_id: int, flag: int, queue_offset: int, physical_offset: int,
                   sys_flag: int, born_timestamp: int, born_host: Address,
                   store_timestamp: int, store_host: Address, reconsume_times: int,
                   prepared_transaction_offset: int, body: bytes, topic: str | bytes,
                   properties: str | bytes, body_crc: int | None = None,
                   magic_code: int = MESSAGE_MAGIC_CODE) -> bytes:
    """Encode one record with every value given. ``sys_flag``'s host bits are set from the hosts given.

    The put path's encoder (:class:`~rmqstore.format.message_encoder.MessageEncoder`), with the hosts
    parsed as the codec reads them (any 4-byte port) and the three values the put lock decides
    filled in where the put path fills them.  ``topic``/``properties`` may be given already
    UTF-8 encoded.  Raises :class:`LayoutError` when a value does not fit the layout.
    """
    encoder = _ENCODERS.get(magic_code)
    if encoder is None:
        raise LayoutError(f"unknown magic code {magic_code:#x}")
    values = _RecordValues(bytes(body), flag, sys_flag, born_timestamp, Address.parse(born_host),
                           Address.parse(store_host), reconsume_times, prepared_transaction_offset, body_crc)
    (topic_s, raw_topic), (props_s, raw_props) = _text(topic), _text(properties or "")
    enc = encoder.encode(values, topic_s, queue_id, props_s, sys_flag)
    if not isinstance(enc, EncodedMessage):
        raise LayoutError(enc.message)
    try:
        enc.place(queue_offset, physical_offset, store_timestamp)
    except struct.error as exc:
        raise LayoutError(f"a record field is out of range: {exc}") from exc
    if raw_topic is not None or raw_props is not None:
        _put_raw_text(enc.data, magic_code, len(values.body), raw_topic or topic_s.encode(),
                      raw_props if raw_props is not None else props_s.encode())
    return bytes(enc.data)


class _RecordValues(NamedTuple):
    """The fields :meth:`MessageEncoder.encode` reads of a message, as a record gives them."""

    body: bytes
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: Address
    store_host: Address
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int | None
    store_timestamp: None = None
    queue_offset: None = None


def _text(value: str | bytes) -> tuple[str, bytes | None]:
    """A topic or properties value for the encoder, and its bytes when they are not UTF-8: a record made
    for a test of damage may hold any bytes there, which the put path's encoder (given text) cannot
    write; it writes a placeholder as long, which :func:`_put_raw_text` then overwrites."""
    if isinstance(value, str):
        return value, None
    raw = bytes(value)
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return "?" * len(raw), raw


def _put_raw_text(data: bytearray, magic_code: int, body_len: int, topic: bytes, properties: bytes) -> None:
    """Write ``topic`` and ``properties`` over the encoded record's (placeholders of the same lengths)."""
    sys_flag = _I32.unpack_from(data, SYSFLAG_POSITION)[0]
    prefix = 2 if magic_code == MESSAGE_MAGIC_CODE_V2 else 1
    for name, start, end, _ in message_field_spans(sys_flag, body_len, len(topic), len(properties), prefix):
        if name in ("topic", "properties"):
            data[start:end] = topic if name == "topic" else properties


def decode_record(buf, pos: int = 0, *, check_crc: bool = False, limit: int | None = None):
    """Decode the record at ``buf[pos:]``: a :class:`MessageRecord` or a :class:`BlankRecord`.

    ``limit`` (default ``len(buf)``) is where readable bytes end.  Raises
    :class:`CorruptRecordError` (with ``offset=pos``) for anything that is not a whole,
    self-consistent record -- or, with ``check_crc``, a record whose body CRC is wrong.
    """
    end_of_buf = len(buf) if limit is None else min(limit, len(buf))
    if pos < 0 or pos + 8 > end_of_buf:
        raise CorruptRecordError("fewer than 8 bytes left: no record header", pos)
    total, magic = _MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        if total < 8 or pos + total > len(buf):
            raise CorruptRecordError(f"blank record declares {total} bytes", pos)
        return BlankRecord(total, magic)
    if magic == MESSAGE_MAGIC_CODE:
        topic_len_size = 1
    elif magic == MESSAGE_MAGIC_CODE_V2:
        topic_len_size = 2
    else:
        raise CorruptRecordError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", pos)
    return _decode_message(buf, pos, total, magic, topic_len_size, end_of_buf, check_crc)


def decode_message(buf, pos: int = 0, *, check_crc: bool = False) -> MessageRecord:
    """Like :func:`decode_record` but a blank record is an error too."""
    rec = decode_record(buf, pos, check_crc=check_crc)
    if not isinstance(rec, MessageRecord):
        raise CorruptRecordError("expected a message record, found an END_OF_FILE blank", pos)
    return rec


def _decode_message(buf, pos, total, magic, topic_len_size, end_of_buf, check_crc):
    end = pos + total
    if total < 8 or end > end_of_buf:
        raise CorruptRecordError(f"record declares {total} bytes but only {end_of_buf - pos} remain", pos)
    if total < 91:
        raise CorruptRecordError(f"record declares {total} bytes, shorter than any record", pos)
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    header = message_header_struct(bool(sys_flag & _BORN_V6), bool(sys_flag & _STORE_V6))
    if header.size + topic_len_size + 2 > total:
        raise CorruptRecordError(f"record declares {total} bytes, too short for its header", pos)
    (_, _, body_crc, queue_id, flag, queue_offset, physical_offset, _, born_ts, born_ip, born_port,
     store_ts, store_ip, store_port, reconsume, prepared, body_len) = header.unpack_from(buf, pos)
    p = pos + header.size
    if body_len < 0 or p + body_len + topic_len_size + 2 > end:
        raise CorruptRecordError(f"body length {body_len} overruns the record", pos)
    body = bytes(buf[p:p + body_len])
    p += body_len
    if topic_len_size == 1:
        topic_len = _I8.unpack_from(buf, p)[0]
    else:
        topic_len = _I16.unpack_from(buf, p)[0]
    p += topic_len_size
    if topic_len < 0 or p + topic_len + 2 > end:
        raise CorruptRecordError(f"topic length {topic_len} overruns the record", pos)
    topic_b = bytes(buf[p:p + topic_len])
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise CorruptRecordError(
            f"properties length {props_len} does not end the record at its declared size {total}", pos)
    props_b = bytes(buf[p:end])
    if check_crc and crc32(body) != body_crc:
        raise CorruptRecordError(f"body CRC mismatch: stored {body_crc}, computed {crc32(body)}", pos)
    try:
        topic = topic_b.decode("utf-8")
        properties = props_b.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"topic or properties are not UTF-8: {exc.reason}", pos) from None
    return MessageRecord(total, magic, body_crc, queue_id, flag, queue_offset, physical_offset,
                         sys_flag, born_ts, Address(born_ip, born_port), store_ts,
                         Address(store_ip, store_port), reconsume, prepared, body, topic, properties)


def record_field_spans(record: MessageRecord, base: int = 0):
    """Byte spans ``(name, start, end, field)`` of a decoded record (see layout)."""
    return message_field_spans(record.sys_flag, len(record.body), len(record.topic.encode("utf-8")),
                               len(record.properties.encode("utf-8")),
                               2 if record.magic_code == MESSAGE_MAGIC_CODE_V2 else 1, base)
