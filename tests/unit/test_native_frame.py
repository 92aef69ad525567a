"""The compiled frame codec (rmqstore._native._cframe) answers exactly as the pure one (rmqstore.remoting.frame).

"Exactly": the same bytes out of an encode, the same command out of a decode -- equal fields of the
same types in the same attribute order -- and, for bytes that are no frame, the same exception type
with the same words.  Proven on Hypothesis-generated commands and headers (JSON written by our encoder,
by json.dumps with other spacing and escaping, with odd values, duplicate keys and members RocketMQ
ignores), on random bytes and mutated frames, on pinned examples of every fall-back the C code takes,
and on frames recorded from real clients (tests/fixtures/frames/).  Where the compiled codec is meant
to answer by itself (the plain commands a broker and real clients exchange) the tests also check it
did not quietly hand the work to the pure path (its counters).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from conftest import compiled_module
from rmqstore.remoting import frame
from rmqstore.remoting.codes import LanguageCode, SerializeType
from rmqstore.remoting.frame import (FrameDecoder, RemotingCommand, RemotingFrameError, pure_decode_frame,
                                     pure_decode_header, pure_encode_frame, pure_encode_header, pure_response)

@pytest.fixture(scope="module")
def C():
    return frame.bind_compiled(compiled_module("_cframe"))


def outcome(fn, *args):
    """What a call gives: ("ok", the value as comparable data) or ("raised", type, words)."""
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001 -- the point is to compare whatever either path raises
        return ("raised", type(exc), str(exc))
    if isinstance(value, RemotingCommand):
        return ("ok", type(value), [(k, type(v), v) for k, v in vars(value).items()])
    return ("ok", type(value), value)


def same(c_fn, pure_fn, *args):
    got, want = outcome(c_fn, *args), outcome(pure_fn, *args)
    assert got == want
    return want


FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"


class Handled:
    """Asserts the compiled codec answered by itself (no fall-back) inside the ``with``."""

    def __init__(self, C, decode=True, encode=True):
        self.C, self.check = C, (decode, encode)

    def __enter__(self):
        self.before = self.C.counters()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            after = self.C.counters()
            if self.check[0]:
                assert after["decode_fallbacks"] == self.before["decode_fallbacks"], "a decode fell back"
            if self.check[1]:
                assert after["encode_fallbacks"] == self.before["encode_fallbacks"], "an encode fell back"


def assert_same_frame(C, data: bytes):
    """Both paths on the bytes after a length field: decode_frame, and decode_header on its header."""
    result = same(C.decode_frame, pure_decode_frame, data)
    if len(data) >= 4:
        meta = struct.unpack_from(">i", data)[0]
        header = bytes(data[4:4 + (meta & 0xFFFFFF)])
        for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ, (meta >> 24) & 0xFF):
            same(C.decode_header, pure_decode_header, serialize_type, header)
    return result


def assert_same_encode(C, cmd: RemotingCommand):
    same(C.encode_header, pure_encode_header, cmd)
    result = same(C.encode_frame, pure_encode_frame, cmd)
    if result[0] == "ok":
        assert_same_frame(C, result[2][4:])
    return result


# -- strategies ----------------------------------------------------------------------------------

# text as Java strings hold it: any code point but a lone surrogate (those cannot be UTF-8)
_text = st.text(max_size=24)
_odd_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=8) | st.sampled_from(
    ["", "\"", "\\", "\x00", "\x7f", "\u2028", "é", "日本", "\U0001F600", "a\"b\\c\n\r\t\b\f\x01\x1f"])
_str = _text | _odd_text
_ext = st.dictionaries(_str, _str, max_size=8)
_language = st.sampled_from([c.name for c in LanguageCode] + ["", "RUST", "java"]) | _str

plain_commands = st.builds(
    RemotingCommand,
    code=st.integers(-2**15, 2**15 - 1),
    ext_fields=_ext,
    body=st.binary(max_size=64),
    remark=st.none() | _str,
    opaque=st.integers(-2**31, 2**31 - 1),
    flag=st.integers(-2**31, 2**31 - 1),
    language=_language,
    version=st.integers(-2**15, 2**15 - 1),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))

_anything = st.none() | st.booleans() | st.integers() | st.floats() | _str | st.binary(max_size=4) | \
    st.lists(st.integers(), max_size=2) | st.dictionaries(_str, st.integers() | st.none(), max_size=2)
odd_commands = st.builds(
    RemotingCommand,
    code=st.integers(-2**40, 2**40) | _anything,
    ext_fields=_ext | st.dictionaries(_str | st.integers() | st.none(), _anything, max_size=4) | _anything,
    body=st.binary(max_size=16) | st.none() | st.just(bytearray(b"ba")) | st.just(memoryview(b"mv")) | _str,
    remark=st.none() | _str | _anything | st.text(st.characters(), max_size=4),
    opaque=st.integers(-2**40, 2**40) | _anything,
    flag=st.integers(-3, 3) | _anything,
    language=_language | _anything | st.text(st.characters(), max_size=4),
    version=st.integers(-2**17, 2**17) | _anything,
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ, 0, 1, 2, True, -1, "1", None]))


# -- encode then decode --------------------------------------------------------------------------

@settings(max_examples=400)
@given(plain_commands)
@example(RemotingCommand(310, {"a": "PG", "i": "KEYS\x01k1\x02WAIT\x01true\x02"}, b"body", None, 7, 0, "JAVA", 409))
@example(RemotingCommand(0, {"msgId": "7F00000100002A9F0000000000000000", "queueId": "0"}, b"", None, 7, 1, "JAVA",
                         409, SerializeType.ROCKETMQ))
@example(RemotingCommand(-1, {}, b"", "", 0, 0, "", 0))
@example(RemotingCommand(1, {"\U0001F600": "\u2028\"\\"}, b"", "\x00", 0, 0, "RUST", 0, SerializeType.ROCKETMQ))
def test_plain_commands_encode_and_decode_the_same_on_both_paths_and_the_compiled_one_needs_no_help(C, cmd):
    with Handled(C):
        frame_bytes = C.encode_frame(cmd)
        decoded = C.decode_frame(frame_bytes[4:])
    assert frame_bytes == pure_encode_frame(cmd)
    assert C.encode_header(cmd) == pure_encode_header(cmd)
    assert_same_frame(C, frame_bytes[4:])
    assert decoded == pure_decode_frame(frame_bytes[4:])


@settings(max_examples=400)
@given(odd_commands)
@example(RemotingCommand(True, {}))  # bool: json writes true, struct packs 1
@example(RemotingCommand(1, {"k": 1}))  # a non-str value: json writes 1, the binary encoder str()s it
@example(RemotingCommand(1, {1: "v"}))  # a non-str key: json writes "1"
@example(RemotingCommand(1, {}, remark="\ud800"))  # a lone surrogate: UnicodeEncodeError on both
@example(RemotingCommand(2**31, {}, serialize_type=SerializeType.ROCKETMQ))  # struct.error on both
@example(RemotingCommand(1, {}, body=memoryview(b"mv")))
@example(RemotingCommand(1, {}, serialize_type=2))  # a JSON header, the type byte 2
@example(RemotingCommand(1, {}, remark=0, serialize_type=SerializeType.ROCKETMQ))  # `remark or ""`
def test_any_command_encodes_the_same_or_fails_the_same(C, cmd):
    assert_same_encode(C, cmd)


def test_the_largest_frames_are_refused_alike(C):
    cmd = RemotingCommand(10, {"k": "v"})
    room = frame.MAX_FRAME_LENGTH - 8 - len(pure_encode_header(cmd))
    for size in (room - 1, room, room + 1):
        cmd.body = b"x" * size
        same(C.encode_frame, pure_encode_frame, cmd)
    long_header = RemotingCommand(10, {"k": "v" * (1 << 24)})
    same(C.encode_header, pure_encode_header, long_header)
    same(C.encode_frame, pure_encode_frame, long_header)


@settings(max_examples=200)
@given(st.builds(RemotingCommand, code=st.integers(0, 400), opaque=st.integers(0, 2**31 - 1), version=st.integers(0, 500),
                 serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])),
       st.integers(-2**15, 2**15 - 1), st.none() | _str,
       st.dictionaries(_str, _str | st.integers() | st.booleans() | st.none(), max_size=6), st.binary(max_size=32))
def test_a_response_made_by_response_is_encoded_by_the_compiled_path_alone(C, request, code, remark, ext, body):
    """The broker's answer: RemotingCommand.response() makes every ext value a str, so C needs no help."""
    answer = request.response(code, remark, ext, body)
    with Handled(C, decode=False):
        got = C.encode_frame(answer)
    assert got == pure_encode_frame(answer)


# -- JSON headers not written by us --------------------------------------------------------------

_json_scalar = st.none() | st.booleans() | st.integers() | st.floats() | st.text(st.characters(), max_size=6) | _str
_json_value = st.recursive(_json_scalar, lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(_str, inner, max_size=3), max_leaves=6)
_int32ish = st.integers(-2**31, 2**31 - 1) | st.sampled_from([2**31, -2**31 - 1, 10**18, 10**19, -0]) | \
    st.integers(0, 999).map(str) | _json_value
_members = st.one_of(
    st.tuples(st.just("code"), _int32ish),
    st.tuples(st.sampled_from(["opaque", "flag", "version"]), _int32ish),
    st.tuples(st.just("language"), _language | st.integers(-3, 15) | _json_value),
    st.tuples(st.just("remark"), st.none() | _str | _json_value),
    st.tuples(st.just("extFields"),
              st.dictionaries(_str, _str | st.none() | st.integers() | st.booleans() | _json_value, max_size=6) |
              _json_value),
    st.tuples(st.sampled_from(["serializeTypeCurrentRPC", "extra", "Code", "\U0001F600", "co\\u0064e"]),
              _json_value))
_ws = st.sampled_from(["", " ", "\n", "\t ", "\r\n  "])


@st.composite
def json_headers(draw) -> bytes:
    """A JSON object with those members, in any order, maybe twice, escaped and spaced in any JSON way."""
    members = draw(st.lists(_members, max_size=9))
    if draw(st.booleans()):
        members.insert(draw(st.integers(0, len(members))), ("code", draw(st.integers(-2**31, 2**31 - 1))))
    ascii_only, w = draw(st.booleans()), draw(_ws)
    parts = []
    for key, value in members:
        name = key if key == "co\\u0064e" else json.dumps(key, ensure_ascii=ascii_only)[1:-1]
        parts.append(f'{w}"{name}"{w}:{w}{json.dumps(value, ensure_ascii=ascii_only)}{w}')
    text = draw(_ws) + "{" + ",".join(parts) + "}" + draw(_ws)
    return text.encode("utf-8", "surrogatepass")


def _frame_of(header: bytes, serialize_type: int = 0, body: bytes = b"") -> bytes:
    return struct.pack(">i", serialize_type << 24 | len(header)) + header + body


@settings(max_examples=600)
@given(json_headers(), st.binary(max_size=8))
@example(b'{"code":310,"extFields":{"a":"PG","i":"KEYS\\u0001k\\u0002"},"flag":0,"language":"JAVA","opaque":1,'
         b'"serializeTypeCurrentRPC":"JSON","version":409}', b"body")
@example(b'{"code":1,"extFields":{"k":"\\ud83d\\ude00"}}', b"")  # a surrogate pair: one character
@example(b'{"code":1,"remark":"\\ud800x"}', b"")  # a lone surrogate kept as one
@example(b'{"code":1,"extra":"\\udc00","language":"GO"}', b"")  # ... in a member we skip
@example(b'{"code":1,"extFields":{"a":"x","b":"y","a":null,"a":"z"}}', b"")  # first place, last value
@example(b'{"code":1,"extFields":{"a":"x","a":null}}', b"")
@example(b'{"code":1,"extFields":{"n":-0,"t":true,"f":false,"i":123456789012345678}}', b"")
@example(b'{"code":1,"extFields":{"i":1234567890123456789}}', b"")  # 19 digits: handed over
@example(b'{"code":1,"extFields":{"f":1.5,"e":1e3}}', b"")
@example(b'{"code":1,"extFields":null}', b"")
@example(b'{"code":1,"extFields":[]}', b"")
@example(b'{"code":1,"extFields":""}', b"")
@example(b'{"code":1,"extFields":0}', b"")
@example(b'{"code":1,"extFields":[1]}', b"")
@example(b'{"code":1,"extFields":{"a":"1"},"extFields":null}', b"")
@example(b'{"code":1,"language":1}', b"")
@example(b'{"code":1,"language":99}', b"")
@example(b'{"code":1,"language":null}', b"")
@example(b'{"code":1,"language":true}', b"")
@example(b'{"code":1,"remark":null}', b"")
@example(b'{"code":1,"remark":5}', b"")
@example(b'{"code":"12"}', b"")
@example(b'{"code":" 12 "}', b"")
@example(b'{"code":1.0}', b"")
@example(b'{"code":true}', b"")
@example(b'{"code":2147483648}', b"")
@example(b'{"code":-2147483648,"opaque":2147483647}', b"")
@example(b'{"code":-0}', b"")
@example(b'{"code":01}', b"")
@example(b'{"code":NaN}', b"")
@example(b'{"code":-Infinity}', b"")
@example(b'{"code":1,}', b"")
@example(b'{"code":1 "flag":2}', b"")
@example(b'{}', b"")
@example(b'[]', b"")
@example(b'', b"")
@example(b'{"code":1}x', b"")
@example(b'{"code":1}  \n', b"")
@example(b'\xef\xbb\xbf{"code":1}', b"")  # a BOM
@example(b'{"code":1,"remark":"\xe9"}', b"")  # Latin-1, not UTF-8
@example(b'{"code":1,"remark":"\xed\xa0\x80"}', b"")  # an encoded surrogate
@example(b'{"code":1,"remark":"a\x01b"}', b"")  # a raw control character
@example(b'{"code":1,"remark":"\\x"}', b"")
@example(b'{"code":1,"remark":"\\u12"}', b"")
@example(b'{"code":1,"remark":"\\u00E9\\/"}', b"")
@example(b'{"code":1,"x":' + b"[" * 70 + b"]" * 70 + b"}", b"")
@example(b'{"code":1,"x":' + b"[" * 2000 + b"]" * 2000 + b"}", b"")
@example(b'{"code":1,"x":{"a":[1,true,null,"s",{"b":{}}]}}', b"")
@example(b'{"\\u0063ode":7}', b"")
def test_any_json_header_decodes_the_same_or_fails_the_same(C, header, body):
    assert_same_frame(C, _frame_of(header, 0, body))


# -- garbage ----------------------------------------------------------------------------------------

def _mutated(cmd: RemotingCommand, at: int, junk: bytes) -> bytes:
    data = pure_encode_frame(cmd)[4:]
    return data[:at] + junk + data[at + len(junk):]


@settings(max_examples=600)
@given(st.binary(max_size=300) | st.builds(_mutated, plain_commands, st.integers(0, 80), st.binary(min_size=1, max_size=6)))
@example(b"")
@example(b"\x00\x00\x00")
@example(b"\x00\x00\x00\x00")  # a JSON header of no bytes
@example(b"\x01\x00\x00\x00")  # a binary header of no bytes
@example(b"\x02\x00\x00\x00")  # serialize type 2
@example(b"\xff\x00\x00\x05{}{}{")
@example(b"\x00\x00\x00\x10{\"code\":1}")  # the header runs past the frame
@example(b"\x01\x00\x00\x11" + struct.pack(">hbhii", 1, 0, 0, 0, 0) + struct.pack(">i", -1))
@example(b"\x01\x00\x00\x15" + struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 3))
@example(b"\x01\x00\x00\x1c" + struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">ih", 7, -1) + b"abcde")
@example(b"\x01\x00\x00\x1b" + struct.pack(">hbhiii", 1, 0, 0, 0, 0, 2) + b"\xc3\x28" + struct.pack(">i", 0))
@example(b"\x01\x00\x00\x19" + struct.pack(">hbhiii", 1, 100, 0, 0, 0, 0) + struct.pack(">i", 0) + b"tail")
def test_fuzz_random_bytes_give_the_same_command_or_the_same_error(C, data):
    result = assert_same_frame(C, data)
    assert result[0] == "ok" or result[1] is RemotingFrameError


def _stream_outcome(codec, stream: bytes, cuts: list[int]):
    """What a FrameDecoder on ``codec`` (None: the pure path) makes of ``stream`` fed in pieces of ``cuts``."""
    decoder, seen, pos = FrameDecoder(), [], 0
    decoder.codec = codec
    try:
        for n in cuts + [len(stream)]:
            seen += decoder.feed(stream[pos:pos + n])
            pos += n
        return ("ok", [outcome(lambda c=c: c) for c in seen], decoder.buffered)
    except RemotingFrameError as exc:
        return ("raised", [outcome(lambda c=c: c) for c in seen + list(exc.commands)], str(exc))


@settings(max_examples=300)
@given(st.lists(plain_commands | odd_commands.filter(lambda c: outcome(pure_encode_frame, c)[0] == "ok"), max_size=4),
       st.binary(max_size=40), st.lists(st.integers(1, 60), max_size=10), st.booleans())
def test_a_frame_decoder_cuts_the_same_commands_and_raises_the_same_on_both_paths(C, commands, junk, cuts, odd_json):
    """The stream reader on either path: same commands, same error, same commands cut before the error --
    with frames the compiled loop hands to the pure step (a float in a header) among the others."""
    frames = [pure_encode_frame(c) for c in commands]
    if odd_json and frames:
        frames.insert(len(frames) // 2, struct.pack(">ii", 4 + 23, 23) + b'{"code":1,"x":1.5e3   }')
    stream = b"".join(frames) + junk
    assert _stream_outcome(C, stream, cuts) == _stream_outcome(None, stream, cuts)


# -- the answer to a request ------------------------------------------------------------------------

_ext_values = _str | st.integers() | st.booleans() | st.none()


@settings(max_examples=300)
@given(plain_commands, st.integers(-2**15, 2**15 - 1) | _anything, st.none() | _str | _anything,
       st.none() | st.dictionaries(_str, _ext_values, max_size=6) | st.dictionaries(_str | st.integers(), _anything,
                                                                                  max_size=3) | _anything,
       st.binary(max_size=16) | _anything)
@example(RemotingCommand(10), 0, None, {"a": SerializeType.JSON, "b": 1.5, "c": [1]}, b"")  # str() of each
@example(RemotingCommand(10), 0, None, {"a": None, "b": True, "c": 2**70}, b"")
@example(RemotingCommand(10), 0, None, [], b"")
def test_a_response_is_made_the_same_on_both_paths(C, request, code, remark, ext, body):
    same(lambda *a: C.response(*a), pure_response, request, code, remark, ext, body)


@settings(max_examples=200)
@given(plain_commands, st.integers(-2**15, 2**15 - 1), st.none() | _str,
       st.none() | st.dictionaries(_str, _ext_values, max_size=6), st.binary(max_size=16))
def test_a_response_of_plain_values_is_made_by_the_compiled_path_alone(C, request, code, remark, ext, body):
    with Handled(C, decode=False):
        got = C.response(request, code, remark, ext, body)
    assert outcome(lambda: got) == outcome(pure_response, request, code, remark, ext, body)


# -- the one interface ------------------------------------------------------------------------------

def test_callers_get_the_compiled_codec_unless_the_pure_path_is_forced():
    from rmqstore.common import native

    mod = native.module("_cframe")
    want = mod.decode_frame if mod is not None else pure_decode_frame
    assert frame.decode_frame is want
    assert frame.encode_frame is (mod.encode_frame if mod is not None else pure_encode_frame)
    assert frame.decode_header is (mod.decode_header if mod is not None else pure_decode_header)
    assert frame.encode_header is (mod.encode_header if mod is not None else pure_encode_header)
    assert frame._respond is (mod.response if mod is not None else pure_response)
    assert FrameDecoder.codec is mod


def test_the_pure_path_is_the_one_when_rmqstore_pure_is_set():
    import subprocess
    import sys

    code = ("from rmqstore.remoting import frame; "
            "print(frame.decode_frame is frame.pure_decode_frame, frame.encode_frame is frame.pure_encode_frame)")
    for pure, want in (("1", "True True"), ("", None)):
        env = {**__import__("os").environ, "RMQSTORE_PURE": pure}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        if want:
            assert out.stdout.strip() == want
        elif frame._CFRAME is not None:
            assert out.stdout.strip() == "False False"


# -- real client traffic ----------------------------------------------------------------------------

def _recorded() -> list[tuple[str, bytes]]:
    """Every recorded frame (length field cut off) of every client, as (client, bytes)."""
    out = []
    for path in sorted(FRAMES.glob("*.frames")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            (length,) = struct.unpack_from(">i", data, pos)
            out.append((path.stem, data[pos + 4:pos + 4 + length]))
            pos += 4 + length
    return out


RECORDED = _recorded()


def test_frames_were_recorded_from_real_clients():
    clients = {client for client, _ in RECORDED}
    assert {"java", "java_rocketmq", "cpp", "node"} <= clients, f"recorded clients: {sorted(clients)}"
    types = {(client, pure_decode_frame(data).serialize_type) for client, data in RECORDED}
    assert ("java_rocketmq", SerializeType.ROCKETMQ) in types and ("java", SerializeType.JSON) in types
    assert len(RECORDED) >= 120


@pytest.mark.parametrize("client", sorted({client for client, _ in RECORDED}))
def test_every_recorded_client_frame_decodes_the_same_and_so_do_its_encodes(C, client):
    """Each frame on both paths (the compiled one alone, no fall-back), the command encoded again and the broker's
    answer to it (a response with a msgId) encoded on both paths."""
    frames = [data for who, data in RECORDED if who == client]
    with Handled(C):
        commands = [C.decode_frame(data) for data in frames]
    for data, cmd in zip(frames, commands):
        assert outcome(lambda: cmd) == outcome(pure_decode_frame, data)
        assert_same_frame(C, data)
        answer = cmd.response(0, None, {"msgId": "7F000001" * 4, "queueId": cmd.ext_fields.get("e", "0")}, b"")
        with Handled(C, decode=False):
            encoded = [C.encode_frame(answer), C.encode_frame(cmd)]
        assert encoded == [pure_encode_frame(answer), pure_encode_frame(cmd)]


@pytest.mark.parametrize("client", ["java", "java_rocketmq"])
def test_the_java_clients_frames_are_written_again_byte_for_byte_on_both_paths(C, client):
    """Our encoder writes a header as the Java client's fastjson (and its binary writer) does: every recorded
    Java frame, decoded and encoded again, is the same bytes on either path."""
    frames = [data for who, data in RECORDED if who == client]
    assert frames
    for data in frames:
        cmd = pure_decode_frame(data)
        assert C.encode_frame(cmd)[4:] == pure_encode_frame(cmd)[4:] == data


@pytest.mark.parametrize("client", sorted({client for client, _ in RECORDED}))
def test_a_recorded_stream_is_cut_into_the_same_commands_on_both_paths(C, client):
    stream = (FRAMES / f"{client}.frames").read_bytes()
    with Handled(C):
        got = _stream_outcome(C, stream, [1000, 1, 7])
    assert got == _stream_outcome(None, stream, [1000, 1, 7])
    assert got[0] == "ok" and len(got[1]) == sum(who == client for who, _ in RECORDED) and got[2] == 0


_JSON_BYTES = b'{}[]":,\\u0123456789abcdefE.-+ntrl \x00\x80\xc3\xa9\xed\xf0'


@st.composite
def mutated_client_frames(draw) -> bytes:
    """A recorded frame with a few bytes replaced, inserted or cut (JSON's own characters more often)."""
    data = bytearray(draw(st.sampled_from([d for _, d in RECORDED])))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        piece = draw(st.binary(min_size=1, max_size=3) | st.lists(st.sampled_from(_JSON_BYTES), min_size=1,
                                                                  max_size=3).map(bytes))
        how = draw(st.sampled_from(["replace", "insert", "cut"]))
        if how == "replace":
            data[at:at + len(piece)] = piece
        elif how == "insert":
            data[at:at] = piece
        else:
            del data[at:at + len(piece)]
    return bytes(data)


@settings(max_examples=500)
@given(mutated_client_frames())
def test_fuzz_mutated_client_frames_give_the_same_command_or_the_same_error(C, data):
    assert_same_frame(C, data)
