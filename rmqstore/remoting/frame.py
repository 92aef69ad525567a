"""The remoting frame of RocketMQ 4.x, declared once, and its two header codecs.

Every request and response between a RocketMQ client, a name server and a broker is one
frame on a TCP stream::

    length (int32)  |  serialize type << 24 | header length (int32)  |  header  |  body

``length`` counts everything after itself.  The header is a *RemotingCommand* (code,
language, version, opaque, flag, remark, extFields) written either as JSON (serialize
type 0, what the Java and C++ clients send by default) or in RocketMQ's own binary form
(type 1, :data:`BINARY_HEADER_FIELDS`).  The body is whatever the code says (a message
body, a batch, JSON such as a heartbeat or a route).

Two ideas carry the protocol:

* **framing** -- a stream has no message boundaries, so the reader keeps a buffer and
  cuts a frame only when ``4 + length`` bytes are there (:class:`FrameDecoder`).  The
  length is checked before anything is buffered for it: at most :data:`MAX_FRAME_LENGTH`
  (16 MiB, Netty's ``FRAME_MAX_LENGTH`` in RocketMQ), so a peer that announces 2 GiB and
  sends nothing cannot make us reserve it.
* **opaque matching** -- requests are not answered in order (a long-polling pull may be
  answered after a later send), so each request carries a number, the *opaque*, and its
  response carries the same number; flag bit 0 says "response", bit 1 "oneway" (no
  response wanted).  :mod:`rmqstore.remoting.server` keeps the table of open requests.

The tables :data:`FRAME_FIELDS` and :data:`BINARY_HEADER_FIELDS` drive the codecs and
:mod:`.frame_spans`, which names a frame's bytes field by field for the views.
Bad bytes raise :class:`RemotingFrameError` (a :class:`~rmqstore.common.errors.RmqStoreError`)
and nothing else.

Two paths, one codec
--------------------
The ``pure_*`` functions here are the reference and the lesson: ``json.loads`` and ``struct``, read
top to bottom.  A broker decodes a header and encodes an answer for every request, so beside them
sits a compiled codec, ``rmqstore._native._cframe``, chosen as the store chooses its compiled
modules (:func:`rmqstore.common.native.module`; ``RMQSTORE_PURE=1`` turns it off).  Callers see one
interface -- :func:`decode_frame`, :func:`encode_frame`, :func:`decode_header`, :func:`encode_header`,
:meth:`RemotingCommand.response` and :class:`FrameDecoder` (whose loop over whole frames runs in C
too) -- and do not know which path runs.

The compiled codec answers what real clients send and a broker answers: JSON as fastjson, jsoncpp,
ali-ons and our own encoder write it, escapes and all, the binary header, responses.  Anything else
-- a float, a lone surrogate, a number out of range, bytes that are no header -- it hands to the pure
function with the same arguments, so an odd input is answered, or refused with the same
:class:`RemotingFrameError` and the same words, exactly as here: the compiled path may only be
faster, never different.  ``tests/unit/test_native_frame.py`` proves it on random commands and
headers, random and mutated bytes, and frames recorded from the Java, C++ and Node clients.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..common import native as _native
from ..common.errors import RmqStoreError
from ..format.layout import KIND_SIZES, Field
from .codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, LanguageCode, SerializeType

__all__ = [
    "FRAME_FIELDS", "FRAME_PREFIX", "BINARY_HEADER_FIELDS", "MAX_FRAME_LENGTH", "RemotingCommand", "RemotingFrameError",
    "FrameDecoder", "encode_frame", "decode_frame", "encode_header", "decode_header", "pure_encode_frame", "pure_decode_frame", "pure_encode_header", "pure_decode_header",
    "pure_response", "bind_compiled",
]

#: Netty's FRAME_MAX_LENGTH in RocketMQ: the length field plus what it counts
MAX_FRAME_LENGTH = 16 * 1024 * 1024
#: a header's language code -> its name (a code not listed reads as OTHER)
_LANGUAGE_NAMES = {code.value: code.name for code in LanguageCode}

FRAME_FIELDS: tuple[Field, ...] = (
    Field("length", "i32", "length", "Bytes after this field: 4 + header length + body length."),
    Field("header_meta", "i32", "serializeType << 24 | headerLength",
          "High byte: header encoding (0 JSON, 1 ROCKETMQ binary); low 3 bytes: header length."),
    Field("header", "bytes", "header", "The RemotingCommand: code, language, version, opaque, flag, remark, "
                                       "extFields."),
    Field("body", "bytes", "body", "Whatever the code carries (message body, batch, JSON); may be empty."),
)

BINARY_HEADER_FIELDS: tuple[Field, ...] = (
    Field("code", "i16", "code", "Request code (or, in a response, the response code)."),
    Field("language", "i8", "language", "LanguageCode of the sender (0 JAVA, 1 CPP, ...)."),
    Field("version", "i16", "version", "The sender's MQVersion ordinal."),
    Field("opaque", "i32", "opaque", "Request number; the response carries the same."),
    Field("flag", "i32", "flag", "Bit 0: response; bit 1: oneway."),
    Field("remark", "str32", "remark", "int32 length, then UTF-8 text (length 0: none)."),
    Field("ext_fields", "map32", "extFields", "int32 length, then per entry: int16 key length, key, "
                                              "int32 value length, value (UTF-8)."),
)

_I32 = struct.Struct(">i")
#: the frame's first two fields (length, serialize type and header length), packed
FRAME_PREFIX = struct.Struct(">" + "".join(KIND_SIZES[f.kind][0] for f in FRAME_FIELDS[:2]))
_BINARY_FIXED = struct.Struct(">" + "".join(KIND_SIZES[f.kind][0] for f in BINARY_HEADER_FIELDS
                                            if f.kind in KIND_SIZES))
_I16 = struct.Struct(">h")
_JSON_KEYS = {"code": "code", "language": "language", "version": "version", "opaque": "opaque",
              "flag": "flag", "remark": "remark"}


class RemotingFrameError(RmqStoreError, ValueError):
    """Bytes that are not a RocketMQ remoting frame (bad length, bad header).

    Raised by :meth:`FrameDecoder.feed`, ``commands`` holds the frames cut before the bad bytes
    (answer them, then close the stream); empty elsewhere.
    """

    commands: "Sequence[RemotingCommand]" = ()


@dataclass
class RemotingCommand:
    """One request or response (RocketMQ's ``RemotingCommand``).

    ``ext_fields`` holds the custom header, every value a string as Java keeps them.
    """

    code: int
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    opaque: int = 0
    flag: int = 0
    language: str = "JAVA"
    version: int = 0
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def response(self, code: int, remark: str | None = None, ext_fields: dict | None = None,
                 body: bytes = b"") -> "RemotingCommand":
        """The response to this request: same opaque, same serialize type, flag bit 0 set (see
        :func:`pure_response`; the compiled codec makes it where it is built)."""
        return _respond(self, code, remark, ext_fields, body)


def pure_response(request: RemotingCommand, code: int, remark: str | None = None, ext_fields: dict | None = None,
                  body: bytes = b"") -> RemotingCommand:
    """:meth:`RemotingCommand.response`, the reference: every ext value a string as Java keeps them, None dropped."""
    return RemotingCommand(code, {k: _ext_str(v) for k, v in (ext_fields or {}).items() if v is not None},
                           body, remark, request.opaque, RPC_TYPE_RESPONSE, "JAVA", request.version,
                           request.serialize_type)


def _ext_str(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


# -- headers ----------------------------------------------------------------------------------

def pure_encode_header(cmd: RemotingCommand) -> bytes:
    """The header bytes in ``cmd.serialize_type`` (the reference; callers use :func:`encode_header`)."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return _encode_binary(cmd)
    head = {"code": cmd.code, "extFields": cmd.ext_fields, "flag": cmd.flag, "language": cmd.language,
            "opaque": cmd.opaque, "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    if cmd.remark is not None:
        head["remark"] = cmd.remark
    return json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _encode_binary(cmd: RemotingCommand) -> bytes:
    try:
        lang = LanguageCode[cmd.language]
    except KeyError:
        lang = LanguageCode.OTHER
    remark = (cmd.remark or "").encode("utf-8")
    parts = [_BINARY_FIXED.pack(cmd.code, lang, cmd.version, cmd.opaque, cmd.flag), _I32.pack(len(remark)), remark]
    ext = bytearray()
    for key, value in cmd.ext_fields.items():
        k, v = key.encode("utf-8"), _ext_str(value).encode("utf-8")
        ext += _I16.pack(len(k)) + k + _I32.pack(len(v)) + v
    parts += [_I32.pack(len(ext)), bytes(ext)]
    return b"".join(parts)


def _as_int(name: str, value, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise RemotingFrameError(f"header field {name!r} must be an integer, got {value!r:.40}")
    try:
        number = int(value)
    except ValueError:
        raise RemotingFrameError(f"header field {name!r} must be an integer, got {value!r:.40}") from None
    if not -2**(bits - 1) <= number < 2**(bits - 1):
        raise RemotingFrameError(f"header field {name!r} = {number} does not fit {bits} bits")
    return number


def _decode_json(data: bytes) -> RemotingCommand:
    try:
        head = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemotingFrameError(f"the JSON header does not parse: {exc}") from None
    if not isinstance(head, dict):
        raise RemotingFrameError(f"the JSON header is a {type(head).__name__}, not an object")
    if "code" not in head:
        raise RemotingFrameError("the JSON header has no 'code'")
    ext = head.get("extFields") or {}
    if not isinstance(ext, dict):
        raise RemotingFrameError("the JSON header's 'extFields' is not an object")
    remark = head.get("remark")
    language = head.get("language", "JAVA")
    if isinstance(language, int) and not isinstance(language, bool) and language in _LANGUAGE_NAMES:
        language = _LANGUAGE_NAMES[language]
    return RemotingCommand(
        code=_as_int("code", head["code"], 32),
        ext_fields={str(k): _ext_str(v) for k, v in ext.items() if v is not None},
        remark=None if remark is None else _ext_str(remark),
        opaque=_as_int("opaque", head.get("opaque", 0), 32),
        flag=_as_int("flag", head.get("flag", 0), 32),
        language=language if isinstance(language, str) else "OTHER",
        version=_as_int("version", head.get("version", 0), 32),
        serialize_type=SerializeType.JSON)


def _take(data: bytes, pos: int, n: int, what: str) -> tuple[bytes, int]:
    if n < 0 or pos + n > len(data):
        raise RemotingFrameError(f"the binary header's {what} ({n} bytes at {pos}) runs past its end "
                                 f"({len(data)} bytes)")
    return data[pos:pos + n], pos + n


def _decode_binary(data: bytes) -> RemotingCommand:
    if len(data) < _BINARY_FIXED.size:
        raise RemotingFrameError(f"a binary header needs at least {_BINARY_FIXED.size} bytes, got {len(data)}")
    code, lang, version, opaque, flag = _BINARY_FIXED.unpack_from(data, 0)
    pos = _BINARY_FIXED.size
    raw, pos = _take(data, pos, 4, "remark length")
    remark_bytes, pos = _take(data, pos, _I32.unpack(raw)[0], "remark")
    raw, pos = _take(data, pos, 4, "extFields length")
    ext_bytes, pos = _take(data, pos, _I32.unpack(raw)[0], "extFields")
    if pos != len(data):
        raise RemotingFrameError(f"{len(data) - pos} bytes after the binary header's extFields")
    ext, p = {}, 0
    try:
        while p < len(ext_bytes):
            raw, p = _take(ext_bytes, p, 2, "key length")
            key, p = _take(ext_bytes, p, _I16.unpack(raw)[0], "key")
            raw, p = _take(ext_bytes, p, 4, "value length")
            value, p = _take(ext_bytes, p, _I32.unpack(raw)[0], "value")
            ext[key.decode("utf-8")] = value.decode("utf-8")
        remark = remark_bytes.decode("utf-8") if remark_bytes else None
    except UnicodeDecodeError as exc:
        raise RemotingFrameError(f"the binary header has text that is not UTF-8: {exc}") from None
    language = _LANGUAGE_NAMES.get(lang, "OTHER")
    return RemotingCommand(code, ext, b"", remark, opaque, flag, language, version, SerializeType.ROCKETMQ)


def pure_decode_header(serialize_type: int, data: bytes) -> RemotingCommand:
    """The header ``data`` in ``serialize_type`` (the reference; callers use :func:`decode_header`)."""
    if serialize_type == SerializeType.JSON:
        return _decode_json(data)
    if serialize_type == SerializeType.ROCKETMQ:
        return _decode_binary(data)
    raise RemotingFrameError(f"unknown serialize type {serialize_type} (0 JSON and 1 ROCKETMQ exist)")


# -- frames -----------------------------------------------------------------------------------

def pure_encode_frame(cmd: RemotingCommand) -> bytes:
    """The whole frame, length field included (the reference; callers use :func:`encode_frame`)."""
    header = pure_encode_header(cmd)
    body = cmd.body or b""
    length = 4 + len(header) + len(body)
    if length + 4 > MAX_FRAME_LENGTH or len(header) >= 1 << 24:
        raise RemotingFrameError(f"a frame of {length + 4} bytes exceeds the {MAX_FRAME_LENGTH}-byte limit")
    return b"".join((FRAME_PREFIX.pack(length, (int(cmd.serialize_type) << 24) | len(header)), header, body))


def check_length(length: int) -> None:
    """Refuse a length field before any byte is buffered for it."""
    if length < 4:
        raise RemotingFrameError(f"frame length {length} is smaller than the 4-byte header-length field")
    if length + 4 > MAX_FRAME_LENGTH:
        raise RemotingFrameError(f"frame length {length} exceeds the {MAX_FRAME_LENGTH}-byte limit")


def pure_decode_frame(data: bytes) -> RemotingCommand:
    """Decode the bytes after the length field (``4 + header + body``) (the reference; callers use
    :func:`decode_frame`)."""
    if len(data) < 4:
        raise RemotingFrameError(f"a frame needs at least 4 bytes after its length, got {len(data)}")
    meta = _I32.unpack_from(data, 0)[0]
    serialize_type, header_length = (meta >> 24) & 0xFF, meta & 0xFFFFFF
    if 4 + header_length > len(data):
        raise RemotingFrameError(f"header length {header_length} runs past the frame's {len(data)} bytes")
    cmd = pure_decode_header(serialize_type, bytes(data[4:4 + header_length]))
    cmd.body = bytes(data[4 + header_length:])
    return cmd


# -- the one interface: the compiled codec where it is built, else the reference ---------------

def bind_compiled(mod):
    """``mod`` (``rmqstore._native._cframe``, or None) bound to this module's command class, serialize
    types, language tables and pure codec -- what it builds, and what it falls back to.  Returns ``mod``.

    The module chosen below is bound at import; the equality tests bind the one
    :func:`rmqstore.common.native.compiled` gives them, whatever ``RMQSTORE_PURE`` says.
    """
    if mod is not None:
        mod.setup(RemotingCommand, SerializeType.JSON, SerializeType.ROCKETMQ, dict(_LANGUAGE_NAMES),
                  {name: int(code) for name, code in LanguageCode.__members__.items()}, LanguageCode.OTHER.name,
                  pure_decode_frame, pure_decode_header, pure_encode_frame, pure_encode_header, pure_response)
    return mod


_CFRAME = bind_compiled(_native.module("_cframe"))

#: the bytes after a frame's length field -> its command (raises :class:`RemotingFrameError`)
decode_frame: Callable[[bytes], RemotingCommand] = _CFRAME.decode_frame if _CFRAME else pure_decode_frame
#: a command -> its whole frame, length field included
encode_frame: Callable[[RemotingCommand], bytes] = _CFRAME.encode_frame if _CFRAME else pure_encode_frame
#: (serialize type, header bytes) -> a command with an empty body
decode_header: Callable[[int, bytes], RemotingCommand] = _CFRAME.decode_header if _CFRAME else pure_decode_header
#: a command -> its header bytes in ``cmd.serialize_type``
encode_header: Callable[[RemotingCommand], bytes] = _CFRAME.encode_header if _CFRAME else pure_encode_header
#: what :meth:`RemotingCommand.response` calls
_respond: Callable[..., RemotingCommand] = _CFRAME.response if _CFRAME else pure_response



class FrameDecoder:
    """Cuts frames out of a byte stream, holding at most one frame's bytes.

    ``feed(data)`` returns the complete frames' commands; a bad length or header raises
    :class:`RemotingFrameError` carrying the frames cut before the bad bytes in its ``commands``
    (so a valid request followed by garbage in one write is still answered), and the buffer is
    dropped: the stream cannot be resynchronised, close it once those are answered.  An optional
    ``recorder(cmd, frame)`` sees each decoded command with its frame's bytes (a view of the
    wire, e.g. :class:`~rmqstore.remoting.recorder.FrameRecorder`).
    """

    #: the compiled codec this decoder cuts and decodes with (None: the pure path); the codec chosen at import
    codec = _CFRAME

    def __init__(self, recorder: "Callable[[RemotingCommand, bytes], None] | None" = None):
        self._buf = bytearray()
        self.recorder = recorder  # called with each command and its whole frame (length field included)

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        self._buf += data
        out: list[RemotingCommand] = []
        try:
            self._cut(out)
        except RemotingFrameError as exc:
            self._buf.clear()
            exc.commands = out
            raise
        return out

    def _cut(self, out: list[RemotingCommand]) -> None:
        codec = self.codec
        while len(self._buf) >= 4:
            if codec is not None and self.recorder is None:
                # the compiled loop takes every whole frame it decodes by itself; the step below takes the
                # frame it stopped at (not whole yet, a bad length, or one for the pure codec)
                commands, used = codec.cut_frames(self._buf)
                if used:
                    out += commands
                    del self._buf[:used]
                    continue
            length = _I32.unpack_from(self._buf, 0)[0]
            check_length(length)
            if len(self._buf) < 4 + length:
                break
            frame = bytes(self._buf[:4 + length])
            del self._buf[:4 + length]
            cmd = (codec.decode_frame if codec is not None else pure_decode_frame)(frame[4:])
            if self.recorder is not None:
                self.recorder(cmd, frame)
            out.append(cmd)
