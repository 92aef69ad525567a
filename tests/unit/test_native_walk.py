"""The compiled segment walk (``rmqstore._native._cwalk.walk``) is the pure walk: same ends, same records.

The property of tests/unit/test_walk.py, for the two paths: take a segment of a fixture store
(written by RocketMQ), splice garbage into it, and walk it both ways -- strict and lenient,
CRC on and off, from a record boundary, up to a readable limit, up to ``stop_at``.  The end
(position, kind, reason, the ending step) and every record (its position and every field of
its :class:`~rmqstore.format.walk.Step`) must be the same; so must the lean walk's statistics
(:func:`rmqstore.format.fastscan.walk_segment`: CRC failures, offset mismatches, spans).  And any
buffer at all -- random bytes behind a record head that looks right -- gives a result, the
pure one, never a crash.
"""

from __future__ import annotations

import struct
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import ALL_FIXTURES, FIXTURES, compiled_module
from rmqstore.common import native
from rmqstore.format import walk as walk_mod
from rmqstore.format.fastscan import walk_segment as lean_walk
from rmqstore.format.layout import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, PHYSICAL_OFFSET_POSITION
from rmqstore.format.record import Address, encode_message
from rmqstore.format.walk import End, step, walk_segment


@pytest.fixture(autouse=True)
def _built():
    compiled_module("_cwalk")


@lru_cache(maxsize=None)
def _segments() -> tuple[tuple[int, bytes], ...]:
    out = []
    for name in ALL_FIXTURES:
        d = FIXTURES / name / "store" / "commitlog"
        for p in sorted(d.iterdir(), key=lambda p: int(p.name)):
            out.append((int(p.name), p.read_bytes()))
    return tuple(out)


def _starts(buf: bytes) -> list[int]:
    starts, pos = [], 0
    while (s := step(buf, pos)).end is None:
        starts.append(pos)
        pos += s.size
    return starts + [pos]


def _mutate(buf: bytes, kind: str, at: int, data: bytes) -> bytes:
    at = max(0, min(at, len(buf)))
    if kind == "random":
        return buf[:at] + data[:len(buf) - at] + buf[at + len(data):]
    if kind == "truncate":
        return buf[:at]
    if kind == "zero_tail":
        return buf[:at] + bytes(len(buf) - at)
    if kind == "blank":
        return buf[:at] + struct.pack(">ii", len(buf) - at, BLANK_MAGIC_CODE)[:len(buf) - at] + buf[at + 8:]
    return buf


def _fields(s) -> tuple | None:
    return None if s is None else tuple(getattr(s, k) for k in type(s).__slots__)


def _walk(buf, base, native, **kw):
    """(end, records) of walk_segment: the end's every field, each record's position and step."""
    seen: list = []
    with_cb = walk_segment(buf, base, native=native, on_record=lambda p, s: seen.append((p, _fields(s))), **kw)
    plain = walk_segment(buf, base, native=native, **kw)
    ends = [(e.pos, e.kind, e.reason, e.records, _fields(e.last)) for e in (with_cb, plain)]
    assert ends[0] == ends[1]
    return ends[0], seen


def _lean(buf, base, native, **kw):
    w = lean_walk(buf, base, keep_spans=True, native=native, **kw)
    return (w.records, w.bytes_in_records, w.blank_at, w.end, w.kind, w.reason, w.crc_failures,
            w.offset_mismatches, w.spans, _fields(w.last))


def _check_same(buf: bytes, base: int, start: int = 0, limit: int | None = None, stop_at: int | None = None,
                chunk: int | None = None) -> None:
    """Both paths agree; ``chunk`` (bytes) makes the compiled walk under a callback go a few records at a time."""
    saved = walk_mod.CHUNK
    walk_mod.CHUNK = chunk or saved
    try:
        _check_options(buf, base, start, limit, stop_at)
    finally:
        walk_mod.CHUNK = saved


def _check_options(buf: bytes, base: int, start: int, limit: int | None, stop_at: int | None) -> None:
    for crc in (False, True):
        for strict in (False, True):
            kw = dict(start=start, limit=limit, stop_at=stop_at, crc=crc, strict=strict)
            assert _walk(buf, base, True, **kw) == _walk(buf, base, False, **kw), kw
            lkw = dict(start=start, end=limit, stop_at=stop_at, check_crc=crc, strict=strict)
            assert _lean(buf, base, True, **lkw) == _lean(buf, base, False, **lkw), lkw


MUTATIONS = ("none", "random", "truncate", "zero_tail", "blank")


def _ex(seg=0, kind="none", record=0, delta=0, data=b"\0", limit_cut=None, stop=None, from_record=0, chunk=None):
    return example(seg=seg, kind=kind, record=record, delta=delta, data=data, limit_cut=limit_cut, stop=stop,
                   from_record=from_record, chunk=chunk)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg=st.integers(0, len(_segments()) - 1), kind=st.sampled_from(MUTATIONS), record=st.integers(0, 10_000),
       delta=st.integers(-40, 300), data=st.binary(min_size=1, max_size=64),
       limit_cut=st.one_of(st.none(), st.integers(0, 2000)), stop=st.one_of(st.none(), st.integers(0, 70_000)),
       from_record=st.integers(0, 10_000), chunk=st.one_of(st.none(), st.integers(1, 3000)))
@_ex()  # a segment as RocketMQ wrote it: a blank ends it
@_ex(seg=len(_segments()) - 1)  # the newest segment: unwritten
@_ex(kind="truncate", record=5, delta=50)  # cut inside a record: corrupt
@_ex(kind="truncate", record=5, delta=3)  # 3 bytes after the last record: out of bytes
@_ex(kind="truncate", record=5, delta=0)  # cut at a boundary: the segment is full
@_ex(kind="random", record=2, delta=200, data=b"\xff")  # a body byte: only the CRC sees it
@_ex(kind="random", record=2, delta=PHYSICAL_OFFSET_POSITION + 7, data=b"\x01")  # the PHYSICALOFFSET field
@_ex(kind="random", record=2, delta=4, data=b"\x12\x34")  # the magic: corrupt
@_ex(limit_cut=100)  # a readable limit inside the data
@_ex(stop=300, from_record=1)  # stop_at
@_ex(chunk=1)  # the chunked walk under a callback, a record at a time
@_ex(stop=900, chunk=250)  # chunks and stop_at together
def test_the_compiled_walk_is_the_pure_walk_on_every_fixture_segment(seg, kind, record, delta, data, limit_cut,
                                                                      stop, from_record, chunk):
    base, buf = _segments()[seg]
    starts = _starts(buf)
    buf = _mutate(buf, kind, starts[record % len(starts)] + delta, data)
    start = starts[from_record % len(starts)]
    limit = None if limit_cut is None else max(len(buf) - limit_cut, 0)
    _check_same(buf, base, start, limit, stop, chunk)


# -- garbage: any bytes give the pure walk's answer, never a crash ----------------------------------------

def _record(**kw) -> bytes:
    args = dict(queue_id=1, flag=0, queue_offset=7, physical_offset=0, sys_flag=0, born_timestamp=1,
                born_host=Address.parse("10.0.0.1:1"), store_timestamp=2, store_host=Address.parse("10.0.0.2:2"),
                reconsume_times=0, prepared_transaction_offset=0, body=b"hello", topic="T", properties="a\x01b")
    args.update(kw)
    return encode_message(**args)


heads = st.builds(lambda total, magic, rest: struct.pack(">ii", total, magic) + rest,
                  st.one_of(st.integers(-2**31, 2**31 - 1), st.integers(0, 400)),
                  st.sampled_from([MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE, 0]),
                  st.binary(max_size=400))


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.one_of(heads, st.binary(max_size=64), st.builds(_record, body=st.binary(max_size=40),
                                                                           topic=st.text(max_size=8),
                                                                           properties=st.text(max_size=12),
                                                                           sys_flag=st.sampled_from([0, 16, 32, 48]))),
                       max_size=6),
       base=st.integers(0, 2**40), start=st.integers(0, 600), limit=st.one_of(st.none(), st.integers(0, 3000)),
       stop=st.one_of(st.none(), st.integers(0, 3000)), chunk=st.one_of(st.none(), st.integers(1, 600)))
@example(pieces=[b"\xed\xa0\x80"], base=0, start=0, limit=None, stop=None, chunk=None)
def test_any_garbage_gives_the_pure_answer(pieces, base, start, limit, stop, chunk):
    _check_same(b"".join(pieces), base, start, limit, stop, chunk)


@pytest.mark.parametrize("topic, props", [
    (b"T", b"\xed\xa0\x80"),  # a surrogate: not UTF-8 to Python
    (b"T", b"\xc0\x80"),  # an overlong NUL
    (b"T", b"\xf4\x90\x80\x80"),  # past U+10FFFF
    (b"T", b"\xe0\x9f\xbf"),  # an overlong 3-byte form
    (b"T", b"\xf0\x8f\xbf\xbf"),  # an overlong 4-byte form
    (b"\xff", b""),
    (b"T", "é中😀".encode()),  # good multi-byte text
    (b"T", b"abcdefgh\xe2\x82"),  # cut short after an ASCII run
])
def test_utf8_decisions_are_pythons(topic, props):
    rec = bytearray(_record(topic="T", properties=""))
    tail = bytes([len(topic)]) + topic + struct.pack(">h", len(props)) + props
    rec = rec[:-4] + tail  # replace topic length, "T" and the 2-byte properties length
    struct.pack_into(">i", rec, 0, len(rec))
    buf = bytes(rec) + bytes(8)
    pure = walk_segment(buf, native=False)
    try:
        topic.decode(), props.decode()
        ok = True
    except UnicodeDecodeError:
        ok = False
    assert pure.kind is (End.UNWRITTEN if ok else End.CORRUPT), pure
    assert ("UTF-8" in pure.reason) == (not ok)
    _check_same(buf, 0)


def test_the_module_walk_reports_kinds_by_number():
    c = compiled_module("_cwalk")
    rec = _record()
    pos, code, records, used, _size, fails, mism, spans = c.walk(rec + bytes(8), 0, 0, -1, -1, True, True, True, True)
    assert (pos, walk_mod.end_kind(code), records, used) == (len(rec), End.UNWRITTEN, 1, len(rec))
    assert fails == mism == b"" and len(spans) == 80


def test_native_false_runs_the_pure_loop(monkeypatch):
    calls = []
    monkeypatch.setattr(walk_mod, "step", lambda *a, **k: calls.append(a) or step(*a, **k))
    rec = _record()
    walk_segment(rec + bytes(8), native=False)
    assert len(calls) == 2  # the record and the end
    calls.clear()
    walk_segment(rec + bytes(8))
    if native.module("_cwalk") is None:  # RMQSTORE_PURE (CI's second run): the pure loop again
        assert len(calls) == 2
    else:
        assert len(calls) == 1  # the compiled walk; the pure step only words the end


def test_a_read_only_recovery_in_windows_ends_where_one_walk_does(monkeypatch):
    """Recovery of a read-only store walks in windows, dropping pages behind it; the end is the same."""
    from rmqstore.engine import recovery
    from rmqstore.store import open_store

    def ends():
        out = []
        for name in ALL_FIXTURES:
            store = open_store(FIXTURES / name / "store")
            try:
                out.append(store.commit_log.mapped_file_queue.get_max_offset())
            finally:
                store.close()
        return out

    whole = ends()
    monkeypatch.setattr(recovery, "RELEASE_EVERY", 333)
    assert ends() == whole
