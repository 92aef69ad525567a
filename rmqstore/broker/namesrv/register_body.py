"""RegisterBrokerBody: what a broker's REGISTER_BROKER (103) carries, both ways and both forms.

The body is the broker's topic table with its data version and its filter servers.  4.9.8 writes it
in one of two forms, the header's ``compressed`` saying which:

* plain -- fastjson's JSON: ``{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":
  {"counter":N,"timestamp":T},"topicConfigTable":{name: TopicConfig}}}``;
* compressed (``compressedRegister=true``) -- a zlib (deflate) stream of big-endian int32-length-prefixed
  parts: the DataVersion's JSON, the topic count, each topic as ``TopicConfig.encode()``'s
  ``name read write perm filterType`` (no system flag, no order flag: they arrive as 0 and false),
  then the filter-server list's JSON.

A broker older than 3.0.11 sends the TopicConfigSerializeWrapper alone.  4.9.8 tells the two apart by
the request's ``version`` and reads a RegisterBrokerBody from a sender that sends no version (0) as an
empty table; here the JSON's shape decides, so such a registration is read whole.  A body the name server cannot read raises :class:`RegisterBodyError`
naming what was wrong; a request without a body registers an empty table with data version (0, 0), as
4.9.8 does.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import dataclass, field

from ..jsonfmt import dumps, loads
from ..topics import TopicConfig

__all__ = ["RegisterBody", "RegisterBodyError", "decode_register_body", "encode_register_body",
           "parse_data_version", "data_version_json"]

_INT = struct.Struct(">i")


class RegisterBodyError(ValueError):
    """A REGISTER_BROKER body that is not a RegisterBrokerBody."""


@dataclass
class RegisterBody:
    data_version: tuple[int, int]
    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    filter_servers: list[str] = field(default_factory=list)


def parse_data_version(value) -> tuple[int, int]:
    """(counter, timestamp) of a DataVersion's JSON; a missing one is a new DataVersion (now, 0)."""
    if not isinstance(value, dict):
        return 0, int(time.time() * 1000)
    try:
        return int(value.get("counter", 0)), int(value.get("timestamp", 0))
    except (TypeError, ValueError):
        raise RegisterBodyError(f"dataVersion {value!r} is not a DataVersion") from None


def data_version_json(version: tuple[int, int]) -> dict:
    return {"counter": version[0], "timestamp": version[1]}


def _wrapper(wrapper) -> tuple[tuple[int, int], dict[str, TopicConfig]]:
    if not isinstance(wrapper, dict):
        raise RegisterBodyError("topicConfigSerializeWrapper is not an object")
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise RegisterBodyError("topicConfigTable is not an object")
    configs = {}
    for name, value in table.items():
        try:
            config = TopicConfig.from_json(value)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RegisterBodyError(f"topic {name!r}: {exc!r}") from None
        configs[config.topic_name] = config
    return parse_data_version(wrapper.get("dataVersion")), configs


def _plain(body: bytes) -> RegisterBody:
    try:
        data = loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RegisterBodyError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RegisterBodyError("not a JSON object")
    wrapper = data.get("topicConfigSerializeWrapper") if "topicConfigSerializeWrapper" in data else data
    version, configs = _wrapper(wrapper or {})
    servers = data.get("filterServerList") or []
    return RegisterBody(version, configs, [str(s) for s in servers] if isinstance(servers, list) else [])


class _Parts:
    def __init__(self, raw: bytes):
        self.raw, self.pos = raw, 0

    def int32(self) -> int:
        if self.pos + 4 > len(self.raw):
            raise RegisterBodyError("compressed body ends inside a length")
        (n,) = _INT.unpack_from(self.raw, self.pos)
        self.pos += 4
        return n

    def text(self) -> str:
        n = self.int32()
        if n < 0 or self.pos + n > len(self.raw):
            raise RegisterBodyError(f"compressed body ends inside a part of {n} bytes")
        self.pos += n
        return self.raw[self.pos - n:self.pos].decode("utf-8", "replace")


def _topic_from_encoded(text: str) -> TopicConfig:
    parts = text.split(" ")
    if len(parts) != 5:
        raise RegisterBodyError(f"topic {text!r} is not 'name read write perm filterType'")
    try:
        return TopicConfig(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
    except ValueError:
        raise RegisterBodyError(f"topic {text!r} has a count or permission that is not a number") from None


def _compressed(body: bytes) -> RegisterBody:
    try:
        raw = zlib.decompress(body)
    except zlib.error as exc:
        raise RegisterBodyError(f"compressed, but not a deflate stream: {exc}") from None
    parts = _Parts(raw)
    try:
        version = parse_data_version(json.loads(parts.text()))
    except ValueError as exc:
        raise RegisterBodyError(f"compressed body's dataVersion: {exc}") from None
    configs = {}
    for _ in range(parts.int32()):
        config = _topic_from_encoded(parts.text())
        configs[config.topic_name] = config
    try:
        servers = json.loads(parts.text())
    except ValueError:
        servers = []  # 4.9.8 logs it and goes on without filter servers
    return RegisterBody(version, configs, [str(s) for s in servers] if isinstance(servers, list) else [])


def decode_register_body(body: bytes, compressed: bool) -> RegisterBody:
    """The RegisterBrokerBody of a REGISTER_BROKER request (see the module's text)."""
    if not body:
        return RegisterBody((0, 0))
    return _compressed(body) if compressed else _plain(body)


def encode_register_body(data_version: dict, configs: dict[str, TopicConfig], compressed: bool = False) -> bytes:
    """A broker's RegisterBrokerBody, in the form ``compressed`` asks for."""
    if not compressed:
        wrapper = {"dataVersion": data_version,
                   "topicConfigTable": {k: v.to_json() for k, v in sorted(configs.items())}}
        return dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper}).encode("utf-8")

    def part(text: str) -> bytes:
        data = text.encode("utf-8")
        return _INT.pack(len(data)) + data
    raw = [part(dumps(data_version)), _INT.pack(len(configs))]
    raw += [part(f"{c.topic_name} {c.read_queue_nums} {c.write_queue_nums} {c.perm} {c.topic_filter_type}")
            for _, c in sorted(configs.items())]
    raw.append(part("[]"))
    return zlib.compress(b"".join(raw), 9)
