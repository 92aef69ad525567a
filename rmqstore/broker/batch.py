"""The body of SEND_BATCH_MESSAGE (320): many messages of one topic, as ``MessageDecoder.encodeMessages`` writes them.

Each inner message is one entry of :data:`BATCH_ITEM_FIELDS` -- total size, a magic code
and body CRC the 4.9.8 client leaves 0, the flag, the body and the properties -- and the
entries follow each other with nothing in between.  The broker cuts them apart here and
hands the store a :class:`~rmqstore.format.message.MessageBatch`; the store writes them as
consecutive records with consecutive queue offsets, and the response names every record
(comma-joined msgIds).
"""

from __future__ import annotations

import struct

from ..common.errors import RmqStoreError
from ..format.layout import Field
from ..format.message import BatchItem

__all__ = ["BATCH_ITEM_FIELDS", "BatchBodyError", "decode_batch_body", "encode_batch_body"]

BATCH_ITEM_FIELDS: tuple[Field, ...] = (
    Field("total_size", "i32", "TOTALSIZE", "Size of this entry, this field included."),
    Field("magic_code", "i32", "MAGICCODE", "0 from the 4.9.8 client (not checked)."),
    Field("body_crc", "i32", "BODYCRC", "0 from the 4.9.8 client (the store computes the CRC)."),
    Field("flag", "i32", "FLAG", "The producer's flag of this message."),
    Field("body", "blob32", "BODY", "Body length, then the body."),
    Field("properties", "str16", "PROPERTIES", "Properties length (short), then name\\x01value\\x02... (UTF-8)."),
)

_HEAD = struct.Struct(">iiiii")  # total size, magic, crc, flag, body length
_I16 = struct.Struct(">h")


class BatchBodyError(RmqStoreError, ValueError):
    """A batch body whose entries do not add up."""


def decode_batch_body(data: bytes) -> list[BatchItem]:
    items: list[BatchItem] = []
    pos, n = 0, len(data)
    while pos < n:
        if pos + _HEAD.size > n:
            raise BatchBodyError(f"batch entry {len(items)} at byte {pos}: {n - pos} bytes left, "
                                 f"{_HEAD.size} needed for its header")
        total, _magic, _crc, flag, body_len = _HEAD.unpack_from(data, pos)
        body_start = pos + _HEAD.size
        if body_len < 0 or body_start + body_len + 2 > n:
            raise BatchBodyError(f"batch entry {len(items)} at byte {pos}: body length {body_len} runs past the end")
        props_len = _I16.unpack_from(data, body_start + body_len)[0]
        props_start = body_start + body_len + 2
        end = props_start + props_len
        if props_len < 0 or end > n:
            raise BatchBodyError(f"batch entry {len(items)} at byte {pos}: properties length {props_len} "
                                 f"runs past the end")
        if total != end - pos:
            raise BatchBodyError(f"batch entry {len(items)} at byte {pos}: total size {total}, "
                                 f"but its fields take {end - pos}")
        try:
            props = data[props_start:end].decode("utf-8")
        except UnicodeDecodeError:
            raise BatchBodyError(f"batch entry {len(items)}: properties are not UTF-8") from None
        items.append(BatchItem(bytes(data[body_start:body_start + body_len]), props, flag))
        pos = end
    if not items:
        raise BatchBodyError("the batch body holds no message")
    return items


def encode_batch_body(items) -> bytes:
    """The body a Java producer sends for these ``(body, properties, flag)`` items."""
    out = bytearray()
    for it in items:
        it = it if isinstance(it, BatchItem) else BatchItem(*it)
        props = it.properties.encode("utf-8")
        total = _HEAD.size + len(it.body) + 2 + len(props)
        out += _HEAD.pack(total, 0, 0, it.flag, len(it.body)) + it.body + _I16.pack(len(props)) + props
    return bytes(out)
