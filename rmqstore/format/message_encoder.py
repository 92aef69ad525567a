"""The record encoder: a message (or a batch) to its record bytes, outside the put lock.

RocketMQ's ``MessageExtEncoder``.  Everything about a record that does not depend on where
it lands is decided here, before :class:`~rmqstore.engine.commit_log.CommitLog` takes its put
lock: the hosts (socket addresses, IPv4 or IPv6, and the sys-flag bits that say which), the
body CRC, the UTF-8 forms of topic and properties, every field packed into the header the
layout table declares (:func:`rmqstore.format.layout.message_header_struct`).  The three values
only the lock can decide -- queue offset, physical offset, store timestamp -- are left as
placeholders; :class:`EncodedMessage` and :class:`EncodedBatch` carry where they go.

This is also the third gate of a put (after the store's state and the message checks of
:mod:`rmqstore.engine.store_checks`): a body over ``max_message_size``, a topic of more UTF-8
bytes than the record's topic length holds, properties of more than its properties length holds, a string with no UTF-8 form, a host that is no
socket address or an integer that does not fit its slot each come back as a
:class:`~rmqstore.format.status.PutMessageResult` naming what was wrong -- never as bytes written.
A batch is encoded whole, as consecutive records, so it never spans two files.

It is the one Python record encoder: :func:`rmqstore.format.record.encode_message` (the codec's
encoder of a record with every value given, for tests, tools and notebooks) is this class
with the hosts only parsed, not held to socket ports, and the three placeholders filled in
(:meth:`EncodedMessage.place`, which the put path calls under its lock).  It reads a message's
fields by name (a :class:`~rmqstore.format.message.Message` or anything with the same attributes) and
imports nothing above the codec, so the codec can build on it.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from .crc import crc32
from .crc import raw_crc32 as _crc32
from ..common.errors import LayoutError
from .layout import (MAX_PROPERTIES_BYTES, MAX_TOPIC_BYTES_V1, MAX_TOPIC_BYTES_V2, MESSAGE_MAGIC_CODE,
                     MESSAGE_MAGIC_CODE_V2, QUEUE_OFFSET_POSITION, field_problem, message_fields_struct,
                     message_header_struct, store_timestamp_position)
from .status import PutMessageResult, PutMessageStatus
from .sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, gets_queue_unit

__all__ = ["MessageEncoder", "EncodedMessage", "EncodedBatch"]

_STORE_TS_POS_V4 = store_timestamp_position(0)
_STORE_TS_POS_V6 = store_timestamp_position(BORNHOST_V6_FLAG)
_QO_PHY = message_fields_struct("queue_offset", "physical_offset")  # patched together inside the put lock
_I64 = message_fields_struct("store_timestamp")
_NOT_V6 = ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)  # a sys flag without the hosts' bits (the hosts say them)


class EncodedMessage:
    """A record encoded outside the lock, with placeholders the lock fills in."""

    __slots__ = ("data", "length", "store_ts_pos", "topic_queue_key", "gets_unit", "store_host",
                 "store_timestamp", "queue_offset", "msg")

    def __init__(self, data, store_ts_pos, key, gets_unit, store_host, store_timestamp, queue_offset, msg):
        self.data = data
        self.length = len(data)
        self.store_ts_pos = store_ts_pos
        self.topic_queue_key = key
        #: a consume-queue unit, and so a queue offset of its own (:func:`rmqstore.format.sysflag.gets_queue_unit`)
        self.gets_unit = gets_unit
        self.store_host = store_host
        self.store_timestamp = store_timestamp
        self.queue_offset = queue_offset
        self.msg = msg

    def place(self, queue_offset: int, physical_offset: int, store_timestamp: int) -> None:
        """Fill in the three values only the put lock decides (``struct.error`` when one does not fit)."""
        data = self.data
        _QO_PHY.pack_into(data, QUEUE_OFFSET_POSITION, queue_offset, physical_offset)
        _I64.pack_into(data, self.store_ts_pos, store_timestamp)


class EncodedBatch:
    """A whole batch encoded as consecutive records (a batch never spans files)."""

    __slots__ = ("data", "length", "lengths", "store_ts_pos", "topic_queue_key", "store_host", "msg")

    #: a batch is never a replay: no recorded store time or queue offset (as a new message's, the lock decides)
    store_timestamp = None
    queue_offset = None

    def __init__(self, data, lengths, store_ts_pos, key, store_host, msg):
        self.data = data
        self.length = len(data)
        self.lengths = lengths
        self.store_ts_pos = store_ts_pos
        self.topic_queue_key = key
        self.store_host = store_host
        self.msg = msg


class MessageEncoder:
    """Encodes messages outside the lock (RocketMQ's ``MessageExtEncoder``).

    ``host`` turns a host a message gives into an :class:`~rmqstore.format.record.Address` or raises
    :class:`LayoutError` (the put path's is :func:`rmqstore.format.record.socket_address`: ports 0..65535);
    ``magic_code`` is the record version written (the put path writes 4.x records, V1).
    """

    def __init__(self, max_message_size: int, default_store_host: Any, host: Callable[[Any], Any], *,
                 magic_code: int = MESSAGE_MAGIC_CODE):
        if magic_code not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            raise LayoutError(f"unknown magic code {magic_code:#x}")
        self.max_message_size = max_message_size
        self.max_record_size = max_message_size + 64 * 1024
        self.default_store_host = default_store_host
        self.magic_code = magic_code
        self._host = host
        v2 = magic_code == MESSAGE_MAGIC_CODE_V2
        self._topic_length = (2, MAX_TOPIC_BYTES_V2) if v2 else (1, MAX_TOPIC_BYTES_V1)  # prefix size, limit
        #: host strings already parsed (the compiled put reads it too): str -> Address
        self.addr_cache: dict = {}
        self._topic_cache: dict = {}
        self._headers = {(b, st): message_header_struct(b, st) for b in (False, True) for st in (False, True)}

    def address(self, value):
        """A host of a put (``None``: the store's own) as an Address; LayoutError when ``host`` refuses it."""
        if value is None:
            return self.default_store_host
        try:
            return self.addr_cache[value]
        except (KeyError, TypeError):
            addr = self._host(value)
            if isinstance(value, str) and len(self.addr_cache) < 4096:
                self.addr_cache[value] = addr
            return addr

    def hosts(self, born_host, store_host) -> tuple:
        """A put's born and store hosts as Addresses (:meth:`address`), the cached ones without a call each."""
        cache = self.addr_cache
        try:
            return cache[born_host], (self.default_store_host if store_host is None else cache[store_host])
        except (KeyError, TypeError):  # (not cached yet, or no string)
            return self.address(born_host), self.address(store_host)

    def _topic_part(self, topic: str):
        """(length prefix + UTF-8 topic) for a topic, or None when it cannot be stored; cached."""
        try:
            return self._topic_cache[topic]
        except KeyError:
            topic_b = topic.encode("utf-8")
            size, limit = self._topic_length
            part = len(topic_b).to_bytes(size, "big") + topic_b if len(topic_b) <= limit else None
            if len(self._topic_cache) < 65536:
                self._topic_cache[topic] = part
            return part

    def encode(self, msg, topic: str, queue_id: int, properties: str, sys_flag: int) -> EncodedMessage | PutMessageResult:
        """``msg`` (a Message, or anything with its fields) as a record of ``topic``/``queue_id`` with
        ``properties`` and ``sys_flag`` (the put path's, after a delay rewrite), or the refusal."""
        body = msg.body
        try:
            born, store = self.hosts(msg.born_host, msg.store_host)
        except LayoutError as exc:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=f"bad host: {exc}")
        born_v6 = len(born.ip) == 16
        store_v6 = len(store.ip) == 16
        sys_flag &= _NOT_V6
        if born_v6:
            sys_flag |= BORNHOST_V6_FLAG
        if store_v6:
            sys_flag |= STOREHOSTADDRESS_V6_FLAG
        body_len = len(body)
        if body_len > self.max_message_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                f"message body is {body_len} bytes, over max_message_size {self.max_message_size}"))
        topic_part = self._topic_cache.get(topic) or self._topic_part(topic)  # (a cached one without a call)
        if topic_part is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                f"topic {topic[:40]!r}... is {len(topic.encode('utf-8'))} UTF-8 bytes; a record holds at "
                f"most {self._topic_length[1]}"))
        try:
            props_b = properties.encode("utf-8")
        except UnicodeEncodeError as exc:
            return _not_utf8("properties", exc)
        props_len = len(props_b)
        if props_len > MAX_PROPERTIES_BYTES:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, message=(
                f"properties are {props_len} UTF-8 bytes; a record holds at most {MAX_PROPERTIES_BYTES}"))
        header = self._headers[born_v6, store_v6]
        total = header.size + body_len + len(topic_part) + 2 + props_len
        if total > self.max_record_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                f"record is {total} bytes, over the limit {self.max_record_size}"))
        try:
            crc = _crc32(body) & 0x7FFFFFFF if msg.body_crc is None else msg.body_crc  # replay keeps the record's
            head = header.pack(total, self.magic_code, crc, queue_id, msg.flag, 0, 0,
                               sys_flag, msg.born_timestamp, born.ip, born.port, 0, store.ip, store.port,
                               msg.reconsume_times, msg.prepared_transaction_offset, body_len)
        except struct.error as exc:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=_field_problem(exc, (
                (name, getattr(msg, name)) for name in _PRODUCER_INT_FIELDS)))
        # (a bytearray: the put patches its offsets and store time in before copying it into the file)
        data = bytearray(b"").join((head, body, topic_part, props_len.to_bytes(2, "big"), props_b))
        return EncodedMessage(data, _STORE_TS_POS_V6 if born_v6 else _STORE_TS_POS_V4, (topic, queue_id),
                              gets_queue_unit(sys_flag), store, msg.store_timestamp, msg.queue_offset, msg)

    def encode_batch(self, batch) -> EncodedBatch | PutMessageResult:
        """A :class:`~rmqstore.format.message.MessageBatch` as consecutive V1 records, or the refusal."""
        try:
            born, store = self.hosts(batch.born_host, batch.store_host)
        except LayoutError as exc:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=f"bad host: {exc}")
        sys_flag = batch.sys_flag & _NOT_V6
        if len(born.ip) == 16:
            sys_flag |= BORNHOST_V6_FLAG
        if len(store.ip) == 16:
            sys_flag |= STOREHOSTADDRESS_V6_FLAG
        topic_b = batch.topic.encode("utf-8")
        if len(topic_b) > MAX_TOPIC_BYTES_V1:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                f"topic is {len(topic_b)} UTF-8 bytes; a record holds at most {MAX_TOPIC_BYTES_V1}"))
        header = message_header_struct(len(born.ip) == 16, len(store.ip) == 16)
        batch_props = batch.properties
        topic_part = bytes([len(topic_b)]) + topic_b
        fixed = header.size + len(topic_part) + 2
        data = bytearray()
        lengths: list[int] = []
        total_body = 0
        pack = header.pack
        for item in batch.items:
            body = item.body
            total_body += len(body)
            props = item.properties or ""
            if batch_props:
                if props and not props.endswith("\x02"):
                    props += "\x02"
                props += batch_props
            try:
                props_b = props.encode("utf-8")
            except UnicodeEncodeError as exc:
                return _not_utf8(f"batch item {len(lengths)}: properties", exc)
            if len(props_b) > MAX_PROPERTIES_BYTES:
                return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, message=(
                    f"batch item {len(lengths)}: properties are {len(props_b)} UTF-8 bytes; at most "
                    f"{MAX_PROPERTIES_BYTES}"))
            if len(body) > self.max_message_size:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                    f"batch item {len(lengths)}: body is {len(body)} bytes, over max_message_size"))
            total = fixed + len(body) + len(props_b)
            try:
                data += pack(total, MESSAGE_MAGIC_CODE, crc32(body), batch.queue_id, item.flag, 0, 0,
                             sys_flag, batch.born_timestamp, born.ip, born.port, 0, store.ip, store.port,
                             batch.reconsume_times, 0, len(body))
            except struct.error as exc:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=_field_problem(exc, (
                    ("flag", item.flag), ("sys_flag", sys_flag), ("born_timestamp", batch.born_timestamp),
                    ("reconsume_times", batch.reconsume_times))))
            data += body
            data += topic_part
            data += len(props_b).to_bytes(2, "big")
            data += props_b
            lengths.append(total)
        if total_body > self.max_message_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
                f"batch bodies total {total_body} bytes, over max_message_size {self.max_message_size}"))
        ts_pos = _STORE_TS_POS_V6 if sys_flag & BORNHOST_V6_FLAG else _STORE_TS_POS_V4
        return EncodedBatch(data, lengths, ts_pos, (batch.topic, batch.queue_id), store, batch)


#: the integer fields a producer gives (their widths are the layout's)
_PRODUCER_INT_FIELDS = ("flag", "sys_flag", "born_timestamp", "reconsume_times", "prepared_transaction_offset")


def _field_problem(exc, named_values) -> str:
    """Name the field that did not fit its slot in the record (``struct`` only says that one did not)."""
    for name, value in named_values:
        problem = field_problem(name, value)
        if problem:
            return problem
    return f"a record field is out of range: {exc}"


def _not_utf8(what: str, exc: UnicodeEncodeError) -> PutMessageResult:
    """A string with no UTF-8 form (a lone surrogate) refused, naming the character."""
    return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=(
        f"{what} cannot be stored as UTF-8: {exc.reason} at character {exc.start} "
        f"({exc.object[exc.start:exc.end]!r})"))
