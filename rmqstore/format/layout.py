"""Every on-disk layout of the store, declared once.

RocketMQ spells its commitlog record out four times: in ``calMsgLength``, in the
encoder, in the decoder and in ``checkMessageAndReturnSize``.  Each copy can drift from
the others.  Here each layout is a table of :class:`Field` rows -- name, kind, RocketMQ's
own name, meaning -- and everything else is *derived* from the table: the ``struct``
formats, the encoders and decoders in :mod:`rmqstore.format.record`, record sizes, the byte
spans that the widgets colour, and the Markdown tables in the docs.

Two kinds of layout exist:

* :class:`FixedLayout` -- every field has a fixed size (blank record, consume-queue unit,
  index header/entry, checkpoint).  One ``struct.Struct`` covers the whole thing.
* the message record -- mostly fixed, but the two hosts are 8 or 20 bytes (IPv4/IPv6,
  chosen by bits of ``sys_flag``), and body, topic and properties are length-prefixed.
  The fixed prefix (everything up to and including the body length) is again one
  ``struct.Struct`` per host combination; the variable tail follows it.

The 5.x "V2" record (magic ``0xDAA320AB``) differs from V1 in one place only: the topic
length prefix is a 2-byte short instead of a signed byte.  The table marks that field's
kind as ``str8`` and :func:`topic_kind` swaps it by magic.

All integers are big-endian and signed, as ``java.nio.ByteBuffer`` writes them.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

__all__ = [
    "Field",
    "FixedLayout",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "BLANK_MAGIC_CODE",
    "END_FILE_MIN_BLANK_LENGTH",
    "MESSAGE_FIELDS",
    "BLANK_RECORD",
    "CONSUME_QUEUE_UNIT",
    "INDEX_HEADER",
    "INDEX_SLOT",
    "INDEX_ENTRY",
    "CHECKPOINT",
    "CHECKPOINT_FILE_SIZE",
    "OS_PAGE_SIZE",
    "host_size",
    "topic_kind",
    "message_header_struct",
    "message_length",
    "message_field_spans",
    "store_timestamp_position",
    "QUEUE_OFFSET_POSITION",
    "PHYSICAL_OFFSET_POSITION",
    "SYSFLAG_POSITION",
    "RECORD_HEAD",
    "message_field_position",
    "message_fields_struct",
    "layout_markdown",
    "KIND_SIZES",
    "LENGTH_LIMITS",
    "INT_RANGES",
    "MAX_TOPIC_BYTES_V1",
    "MAX_TOPIC_BYTES_V2",
    "MAX_PROPERTIES_BYTES",
    "MAX_QUEUE_ID",
    "field_problem",
]

# -- magic codes (CommitLog.java / MessageDecoder.java) ------------------------------
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7, 4.x records (V1)
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, 5.x records with 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, END_OF_FILE filler
END_FILE_MIN_BLANK_LENGTH = 4 + 4  # a record must leave room for a blank header

OS_PAGE_SIZE = 4096  # MappedFile.OS_PAGE_SIZE
CHECKPOINT_FILE_SIZE = OS_PAGE_SIZE

# sysFlag bits that change the layout (MessageSysFlag.java)
_BORNHOST_V6_FLAG = 0x10
_STOREHOST_V6_FLAG = 0x20

#: kind -> (struct code, size) for the fixed-size kinds
KIND_SIZES = {"i8": ("b", 1), "i16": ("h", 2), "i32": ("i", 4), "i64": ("q", 8)}


@dataclass(frozen=True)
class Field:
    """One row of a layout table.

    ``kind`` is one of ``i8 i16 i32 i64`` (fixed, signed, big-endian), ``host``
    (IP bytes + 4-byte port; 8 or 20 bytes), ``blob32`` (4-byte length + bytes),
    ``str8`` / ``str16`` (1- or 2-byte length + UTF-8).
    """

    name: str
    kind: str
    java: str
    doc: str

    @property
    def fixed_size(self) -> int | None:
        code = KIND_SIZES.get(self.kind)
        return code[1] if code else None


class FixedLayout:
    """A layout whose fields all have fixed sizes; one ``struct.Struct`` covers it."""

    def __init__(self, name: str, fields: tuple[Field, ...], doc: str = ""):
        self.name = name
        self.doc = doc
        self.fields = fields
        self.struct = struct.Struct(">" + "".join(KIND_SIZES[f.kind][0] for f in fields))
        self.size = self.struct.size
        self.tuple_type: Any = cast(Any, namedtuple(name, [f.name for f in fields]))  # fields from a table
        offsets, pos = {}, 0
        for f in fields:
            offsets[f.name] = pos
            pos += f.fixed_size
        self.offsets = offsets
        self._field_structs = {f.name: struct.Struct(">" + KIND_SIZES[f.kind][0]) for f in fields}

    def field_struct(self, name: str) -> struct.Struct:
        """The ``struct.Struct`` of one field (to read or patch it alone, at ``offsets[name]``)."""
        return self._field_structs[name]

    def pack(self, *values) -> bytes:
        return self.struct.pack(*values)

    def pack_into(self, buf, offset: int, *values) -> None:
        self.struct.pack_into(buf, offset, *values)

    def unpack_from(self, buf, offset: int = 0):
        return self.tuple_type._make(self.struct.unpack_from(buf, offset))

    def spans(self, base: int = 0) -> list[tuple[Field, int, int]]:
        return [(f, base + self.offsets[f.name], base + self.offsets[f.name] + f.fixed_size)
                for f in self.fields]

    def __repr__(self) -> str:
        return f"FixedLayout({self.name!r}, size={self.size})"


# -- the commitlog message record (CommitLog.MessageExtEncoder#encode, calMsgLength) ----
MESSAGE_FIELDS: tuple[Field, ...] = (
    Field("total_size", "i32", "TOTALSIZE", "Length of the whole record, this field included."),
    Field("magic_code", "i32", "MAGICCODE", "0xDAA320A7 for a 4.x record, 0xDAA320AB for a 5.x V2 record."),
    Field("body_crc", "i32", "BODYCRC", "CRC-32 of the body bytes as stored, sign bit cleared."),
    Field("queue_id", "i32", "QUEUEID", "Queue of the topic this message belongs to."),
    Field("flag", "i32", "FLAG", "The producer's own flag, stored untouched."),
    Field("queue_offset", "i64", "QUEUEOFFSET", "Position in the consume queue (a count of units, not bytes)."),
    Field("physical_offset", "i64", "PHYSICALOFFSET", "Commitlog offset of this very record."),
    Field("sys_flag", "i32", "SYSFLAG", "Compression, transaction type, IPv6 host and batch bits."),
    Field("born_timestamp", "i64", "BORNTIMESTAMP", "When the producer created the message (ms since the epoch)."),
    Field("born_host", "host", "BORNHOST", "Producer address: IPv4 (4 bytes) or IPv6 (16 bytes), then the port as an int."),
    Field("store_timestamp", "i64", "STORETIMESTAMP", "When the store appended it, taken inside the put lock."),
    Field("store_host", "host", "STOREHOSTADDRESS", "Broker address, encoded like the born host."),
    Field("reconsume_times", "i32", "RECONSUMETIMES", "How often the message was redelivered to a consumer."),
    Field("prepared_transaction_offset", "i64", "PREPARED TRANSACTION OFFSET",
          "For a transaction commit/rollback: the offset of the prepared (half) message."),
    Field("body", "blob32", "BODY", "Body length as an int, then the body bytes (compressed if sys_flag says so)."),
    Field("topic", "str8", "TOPIC", "Topic length (1 signed byte in V1, 2-byte short in V2), then UTF-8 topic."),
    Field("properties", "str16", "PROPERTIES", "Properties length as a short, then name\\x01value\\x02... in UTF-8."),
)

_FIELD_INDEX = {f.name: i for i, f in enumerate(MESSAGE_FIELDS)}
_FIELD_KINDS = {f.name: f.kind for f in MESSAGE_FIELDS}
_LENGTH_CODE = {"blob32": "i", "str8": "b", "str16": "h"}
_LENGTH_SIZE = {"blob32": 4, "str8": 1, "str16": 2}

# -- the limits the table implies: one place for each (the C modules export theirs, checked equal) --
#: kind -> (min, max) of the layout's signed integer kinds
INT_RANGES = {kind: (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) for kind, (_, size) in KIND_SIZES.items()}
#: the most bytes a length-prefixed kind holds: its prefix is a signed Java integer
LENGTH_LIMITS = {kind: INT_RANGES["i" + str(8 * size)][1] for kind, size in _LENGTH_SIZE.items()}
#: the V1 topic length is one *signed* byte: 127 UTF-8 bytes (RocketMQ's topic validator allows 127 characters)
MAX_TOPIC_BYTES_V1 = LENGTH_LIMITS[_FIELD_KINDS["topic"]]
#: a V2 (5.x) record's topic length is a short
MAX_TOPIC_BYTES_V2 = LENGTH_LIMITS["str16"]
#: the properties length is a short: 32767 UTF-8 bytes (``Short.MAX_VALUE``, which ``checkMessage`` also
#: holds the properties string's characters to)
MAX_PROPERTIES_BYTES = LENGTH_LIMITS[_FIELD_KINDS["properties"]]
#: the largest queue id the record holds
MAX_QUEUE_ID = INT_RANGES[_FIELD_KINDS["queue_id"]][1]


def field_problem(name: str, value) -> str | None:
    """Why ``value`` cannot go into the record's integer field ``name`` (its layout width), or None."""
    if type(value) is not int:
        return f"{name} must be an int, got {type(value).__name__}"
    kind = _FIELD_KINDS[name]
    lo, hi = INT_RANGES[kind]
    if not lo <= value <= hi:
        return f"{name} = {value} does not fit in the record's {kind} field ({lo} .. {hi})"
    return None


def host_size(sys_flag: int, which: str) -> int:
    """8 for an IPv4 host, 20 for an IPv6 host (``which`` is ``born_host``/``store_host``)."""
    bit = _BORNHOST_V6_FLAG if which == "born_host" else _STOREHOST_V6_FLAG
    return 20 if sys_flag & bit else 8


def topic_kind(magic_code: int) -> str:
    """The kind of the topic field: ``str8`` for V1 records, ``str16`` for V2."""
    return "str16" if magic_code == MESSAGE_MAGIC_CODE_V2 else "str8"


def _fixed_code(field: Field, born_v6: bool, store_v6: bool) -> str:
    if field.kind == "host":
        v6 = born_v6 if field.name == "born_host" else store_v6
        return ("16s" if v6 else "4s") + "i"
    return KIND_SIZES[field.kind][0]


@lru_cache(maxsize=None)
def message_header_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    """``struct.Struct`` of the fixed prefix: every field up to the body, plus its length.

    Host fields unpack as two values (ip bytes, port); the last value is the body length.
    """
    code = ">"
    for f in MESSAGE_FIELDS:
        if f.kind == "blob32":
            code += _LENGTH_CODE[f.kind]
            break
        code += _fixed_code(f, born_v6, store_v6)
    return struct.Struct(code)


def message_length(sys_flag: int, body_len: int, topic_len: int, properties_len: int,
                   topic_length_size: int = 1) -> int:
    """Total record size (RocketMQ's ``calMsgLength``), derived from the table."""
    size = 0
    lengths = {"body": body_len, "topic": topic_len, "properties": properties_len}
    for f in MESSAGE_FIELDS:
        if f.kind == "host":
            size += host_size(sys_flag, f.name)
        elif f.kind in _LENGTH_SIZE:
            prefix = topic_length_size if f.name == "topic" else _LENGTH_SIZE[f.kind]
            size += prefix + lengths[f.name]
        else:
            size += f.fixed_size
    return size


def message_field_spans(sys_flag: int, body_len: int, topic_len: int, properties_len: int,
                        topic_length_size: int = 1, base: int = 0
                        ) -> list[tuple[str, int, int, Field]]:
    """Byte spans ``(name, start, end, field)`` of every part of one record.

    Length-prefixed fields yield two spans: ``<name>_length`` and ``<name>``.  This is
    what the RecordView colours and what the docs list.
    """
    spans = []
    pos = base
    lengths = {"body": body_len, "topic": topic_len, "properties": properties_len}
    for f in MESSAGE_FIELDS:
        if f.kind == "host":
            n = host_size(sys_flag, f.name)
            spans.append((f.name, pos, pos + n, f))
            pos += n
        elif f.kind in _LENGTH_SIZE:
            prefix = topic_length_size if f.name == "topic" else _LENGTH_SIZE[f.kind]
            spans.append((f.name + "_length", pos, pos + prefix, f))
            pos += prefix
            spans.append((f.name, pos, pos + lengths[f.name], f))
            pos += lengths[f.name]
        else:
            spans.append((f.name, pos, pos + f.fixed_size, f))
            pos += f.fixed_size
    return spans


def _fixed_position(name: str, sys_flag: int = 0) -> int:
    pos = 0
    for f in MESSAGE_FIELDS:
        if f.name == name:
            return pos
        pos += host_size(sys_flag, f.name) if f.kind == "host" else f.fixed_size
    raise KeyError(name)


def message_field_position(name: str, sys_flag: int = 0) -> int:
    """Where field ``name`` of the message record starts (fields after a host move with ``sys_flag``)."""
    return _fixed_position(name, sys_flag)


def message_fields_struct(*names: str) -> struct.Struct:
    """One ``struct.Struct`` over adjacent fixed-size fields of the message record, in order
    (queue offset and physical offset, patched together by the put path)."""
    fields = [MESSAGE_FIELDS[_FIELD_INDEX[n]] for n in names]
    if any(f.kind not in KIND_SIZES for f in fields) or \
            [_FIELD_INDEX[n] for n in names] != list(range(_FIELD_INDEX[names[0]], _FIELD_INDEX[names[0]] + len(names))):
        raise ValueError(f"not adjacent fixed-size fields of the message record: {names}")
    return struct.Struct(">" + "".join(KIND_SIZES[f.kind][0] for f in fields))


#: positions that the put path patches inside the lock (MessageDecoder's named positions)
QUEUE_OFFSET_POSITION = _fixed_position("queue_offset")  # 20
PHYSICAL_OFFSET_POSITION = _fixed_position("physical_offset")  # 28
SYSFLAG_POSITION = _fixed_position("sys_flag")  # 36


def store_timestamp_position(sys_flag: int) -> int:
    """56 with an IPv4 born host, 68 with an IPv6 one."""
    return _fixed_position("store_timestamp", sys_flag)


# -- fixed layouts ---------------------------------------------------------------------
BLANK_RECORD = FixedLayout("BlankRecord", (
    Field("total_size", "i32", "maxBlank", "Bytes from here to the end of the file."),
    Field("magic_code", "i32", "BLANK_MAGIC_CODE", "0xCBD43194: the rest of this file is unused."),
), "The END_OF_FILE filler written when the next record does not fit.")

RECORD_HEAD = FixedLayout("RecordHead", MESSAGE_FIELDS[:2],
                          "The 8 bytes every record starts with, a message or a blank: its size and magic code.")

CONSUME_QUEUE_UNIT = FixedLayout("ConsumeQueueUnit", (
    Field("commit_log_offset", "i64", "offset", "Physical offset of the message in the commitlog."),
    Field("size", "i32", "size", "Size of the commitlog record."),
    Field("tags_code", "i64", "tagsCode", "Java hashCode of TAGS (or the delivery time for delay topics)."),
), "One 20-byte unit of consumequeue/<topic>/<queueId>/<file>.")

INDEX_HEADER = FixedLayout("IndexHeader", (
    Field("begin_timestamp", "i64", "beginTimestamp", "Store timestamp of the first indexed message."),
    Field("end_timestamp", "i64", "endTimestamp", "Store timestamp of the last indexed message."),
    Field("begin_phy_offset", "i64", "beginPhyOffset", "Commitlog offset of the first indexed message."),
    Field("end_phy_offset", "i64", "endPhyOffset", "Commitlog offset of the last indexed message."),
    Field("hash_slot_count", "i32", "hashSlotCount", "Number of slots that hold at least one entry."),
    Field("index_count", "i32", "indexCount", "Next free entry number (starts at 1)."),
), "The 40-byte header of an index file.")

INDEX_SLOT = FixedLayout("IndexSlot", (
    Field("index", "i32", "slotValue", "Number of the newest entry of this slot's chain (0 = empty)."),
), "One 4-byte hash slot.")

INDEX_ENTRY = FixedLayout("IndexEntry", (
    Field("key_hash", "i32", "keyHash", "abs(hashCode of 'topic#key')."),
    Field("phy_offset", "i64", "phyOffset", "Commitlog offset of the message."),
    Field("time_diff", "i32", "timeDiff", "Seconds since the header's begin timestamp."),
    Field("prev_index", "i32", "prevIndex", "Previous entry of the same slot (0 = end of chain)."),
), "One 20-byte index entry.")

CHECKPOINT = FixedLayout("StoreCheckpoint", (
    Field("physic_msg_timestamp", "i64", "physicMsgTimestamp", "Store time of the last flushed commitlog message."),
    Field("logics_msg_timestamp", "i64", "logicsMsgTimestamp", "Store time of the last flushed consume-queue unit."),
    Field("index_msg_timestamp", "i64", "indexMsgTimestamp", "Store time of the last flushed index entry."),
), "The first 24 bytes of the 4096-byte checkpoint file.")


def layout_markdown(layout: FixedLayout | None = None) -> str:
    """A Markdown table of a layout (the message record when ``layout`` is None)."""
    rows = ["| field | RocketMQ | size | meaning |", "|---|---|---|---|"]
    fields = MESSAGE_FIELDS if layout is None else layout.fields
    for f in fields:
        if f.kind == "host":
            size = "8 / 20"
        elif f.kind in _LENGTH_SIZE:
            size = f"{_LENGTH_SIZE[f.kind]} + n" if f.name != "topic" else "1 (V2: 2) + n"
        else:
            size = str(f.fixed_size)
        rows.append(f"| `{f.name}` | {f.java} | {size} | {f.doc} |")
    return "\n".join(rows)
