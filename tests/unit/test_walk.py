"""One decision of how a segment ends: every walk of the log agrees with :mod:`rmqstore.format.walk`.

The property: take a segment of a fixture store (written by RocketMQ), splice garbage into
it -- random bytes, a truncation, a zeroed tail, a blank record -- and ask every walk of the
codebase where the segment ends and why.  Each must give the answer of
:func:`rmqstore.format.walk.walk_segment` with the same options (a *lenient* walk reads past bad
CRCs and PHYSICALOFFSET fields, a *strict* one ends there), and so every two walks with the
same options agree with each other.
"""

from __future__ import annotations

import os
import struct
import tempfile
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import ALL_FIXTURES, FIXTURES, walk_file
from rmqstore.engine import recovery
from rmqstore.common.config import StoreConfig
from rmqstore.engine.dispatch import reput_segment
from rmqstore.common.errors import CorruptRecordError
from rmqstore.read.fast_open import open_fast
from rmqstore.format.fastscan import walk_segment as lean_walk
from rmqstore.read.inspect_store import _probe_segment
from rmqstore.format.layout import BLANK_MAGIC_CODE, PHYSICAL_OFFSET_POSITION
from rmqstore.format.ranges import read_segment
from rmqstore.format.record import Address, encode_message
from rmqstore.read.scan import CommitLogScan
from rmqstore.spark.rebuild import _blank_at
from rmqstore.store import open_store
from rmqstore.files.store_sizes import StoreSizes
from rmqstore.files.store_paths import commitlog_dir, offset_to_file_name
from rmqstore.read.verify import Verifier
from rmqstore.read.verify.logwalk import RECOVERED_END
from rmqstore.format.walk import End, LogEnd, step, walk_segment

SEG = 65536


@lru_cache(maxsize=None)
def _segments() -> tuple[tuple[str, int, bytes], ...]:
    """``(fixture, base, bytes)`` of every commitlog segment of every fixture store."""
    out = []
    for name in ALL_FIXTURES:
        d = FIXTURES / name / "store" / "commitlog"
        for p in sorted(d.iterdir(), key=lambda p: int(p.name)):
            out.append((name, int(p.name), p.read_bytes()))
    return tuple(out)


def _record_starts(buf: bytes) -> list[int]:
    starts, pos = [], 0
    while True:
        s = step(buf, pos)
        if s.end is not None:
            return starts + [pos]
        starts.append(pos)
        pos += s.size


def _mutate(buf: bytes, kind: str, at: int, data: bytes) -> bytes:
    """``buf`` with garbage spliced in at ``at`` (each kind keeps the segment's other bytes)."""
    at = max(0, min(at, len(buf)))
    if kind == "random":
        return buf[:at] + data[:len(buf) - at] + buf[at + len(data):]
    if kind == "truncate":
        return buf[:max(at, 1)]  # (an empty file is no segment: scan calls it unreadable)
    if kind == "zero_tail":
        return buf[:at] + bytes(len(buf) - at)
    if kind == "blank":
        if at + 8 > len(buf):
            return buf
        return buf[:at] + struct.pack(">ii", len(buf) - at, BLANK_MAGIC_CODE) + buf[at + 8:]
    return buf


# -- every caller's answer: (physical offset where the segment ends, End) ------------------------------

def _reference(buf, base, *, crc, strict):
    """The pure walk's answer (the callers below run the compiled walk where it is built)."""
    e = walk_segment(buf, base, crc=crc, strict=strict, native=False)
    return base + e.pos, e.kind


def _by_fastscan(buf, base, _dir):
    w = lean_walk(buf, base, check_crc=True)
    return w.end, w.kind


def _by_dispatch(buf, base, _dir):
    dispatched = []
    end, count, failure = reput_segment(buf, base, 0, len(buf), dispatched.append, {})
    assert failure is None and count == len(dispatched) == end.records
    return base + end.pos, end.kind


def _by_scan(buf, base, d):
    scan = CommitLogScan(d)
    last = None
    for offset, rec in scan:
        last = (offset, rec)
    if scan.stop.kind is LogEnd.END_OF_FILES:  # the segment ended: in the blank it yielded, or full
        if last is not None and last[1].magic_code == BLANK_MAGIC_CODE:
            return last[0], End.BLANK
        return base + len(buf), End.OUT_OF_BYTES
    return scan.stop.offset, scan.stop.kind


def _by_inspect(buf, base, d):
    probe = _probe_segment(os.path.join(d, "commitlog", f"{base:020d}"), len(buf))
    end = probe["end"]
    if end == "unwritten":
        return base + probe["dataEnd"], End.UNWRITTEN
    if end == "blank":
        return base + probe["blank"]["pos"], End.BLANK
    if end == "file end without a blank":
        return base + probe["dataEnd"], End.OUT_OF_BYTES
    assert end.startswith("undecodable at position "), end
    return base + int(end.rsplit(" ", 1)[1]), End.CORRUPT


def _by_test_walk(buf, base, _dir):
    """tests/conftest.walk_file: no kind for a clean end, a raise for damage."""
    end = base
    try:
        for offset, rec in walk_file(buf, base):
            if rec.magic_code == BLANK_MAGIC_CODE:
                return offset, End.BLANK
            end = offset + rec.total_size
    except CorruptRecordError:
        return end, End.CORRUPT
    return end, step(buf, end - base, base).end


def _by_recovery(buf, base, d):
    """A read-only open recovers the one-segment store (CRCs on); recovery's check names the end.

    A truncated segment is no segment to a store (it refuses files of the wrong size): there
    recovery's check walks the buffer by itself, as recovery's loop does."""
    if len(buf) == SEG:
        store = open_store(d, config=StoreConfig(mapped_file_size_commit_log=SEG))
        try:
            end = store.commit_log.mapped_file_queue.get_max_offset()
        finally:
            store.close()
        return end, recovery.check_record(buf, end - base, base, True).end
    pos = 0
    while (found := recovery.check_record(buf, pos, base, True)).end is None:
        pos += found.size
    return base + pos, found.end


def _by_ranges(buf, base, _dir):
    return read_segment(buf, base).first_stop


def _by_open_fast(buf, base, d):
    if len(buf) != SEG:  # not a store's segment (see _by_recovery): the walk of a store has nothing to say
        return _reference(buf, base, crc=False, strict=True)
    store, info = open_fast(d, StoreConfig(mapped_file_size_commit_log=SEG))
    store.close()
    return info["end"], info["end_kind"]


def _by_verify(buf, base, d, *, recovered_end=False):
    """verify's walk of one segment; with ``recovered_end`` (verify's whole-store walk) it stops at a
    record recovery rejects -- the strict walk's end, since nothing here points past it."""
    v = Verifier(d, StoreSizes(commitlog=SEG))
    v.stop_at_recovered_end = recovered_end
    with v.stack:
        f = v.open(os.path.join(commitlog_dir(d), offset_to_file_name(base)))
        state, pos = v.walk_segment(base, f, SEG)
    return base + pos, End.CORRUPT if state == RECOVERED_END else state


def _by_verify_whole_store(buf, base, d):
    return _by_verify(buf, base, d, recovered_end=True)


LENIENT = (_by_fastscan, _by_dispatch, _by_scan, _by_inspect, _by_test_walk, _by_verify)
STRICT_CRC = (_by_recovery, _by_ranges, _by_verify_whole_store)
STRICT = (_by_open_fast,)


def _check_all_agree(buf: bytes, base: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "commitlog"))
        path = os.path.join(d, "commitlog", f"{base:020d}")
        with open(path, "wb") as f:
            f.write(buf)
        for callers, options in ((LENIENT, dict(crc=False, strict=False)), (STRICT_CRC, dict(crc=True, strict=True)),
                                 (STRICT, dict(crc=False, strict=True))):
            expected = _reference(buf, base, **options)
            for caller in callers:
                assert caller(buf, base, d) == expected, (caller.__name__, options)
        # the Spark rebuild trusts a blank that fills its segment, as the step says
        lenient_end, kind = _reference(buf, base, crc=False, strict=False)
        if lenient_end - base + 8 <= len(buf):
            fills = kind is End.BLANK and step(buf, lenient_end - base, base).blank_fills
            assert _blank_at(path, lenient_end - base, len(buf)) == fills


MUTATIONS = ("none", "random", "truncate", "zero_tail", "blank")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg=st.integers(0, len(_segments()) - 1), kind=st.sampled_from(MUTATIONS), record=st.integers(0, 10_000),
       delta=st.integers(-40, 300), data=st.binary(min_size=1, max_size=64))
@example(seg=0, kind="none", record=0, delta=0, data=b"\0")  # a segment as RocketMQ wrote it: a blank ends it
@example(seg=len(_segments()) - 1, kind="none", record=0, delta=0, data=b"\0")  # the newest: unwritten
@example(seg=0, kind="blank", record=3, delta=0, data=b"\0")  # a blank at a record boundary
@example(seg=0, kind="zero_tail", record=5, delta=0, data=b"\0")  # zeros at a boundary: unwritten
@example(seg=0, kind="truncate", record=5, delta=50, data=b"\0")  # cut inside a record: corrupt
@example(seg=0, kind="truncate", record=5, delta=3, data=b"\0")  # 3 bytes after the last record: out of bytes
@example(seg=0, kind="truncate", record=5, delta=0, data=b"\0")  # cut at a boundary: the segment is full
@example(seg=0, kind="random", record=2, delta=200, data=b"\xff")  # a body byte: only the CRC sees it
@example(seg=0, kind="random", record=2, delta=PHYSICAL_OFFSET_POSITION + 7, data=b"\x01")  # the offset field
@example(seg=0, kind="random", record=2, delta=4, data=b"\x12\x34")  # the magic: corrupt
def test_every_walk_ends_a_segment_where_the_step_does(seg, kind, record, delta, data):
    _name, base, buf = _segments()[seg]
    starts = _record_starts(buf)
    at = starts[record % len(starts)] + delta
    _check_all_agree(_mutate(buf, kind, at, data), base)


# -- the step on each end -------------------------------------------------------------------------

def _record(physical_offset: int = 0, body: bytes = b"hello", **kw) -> bytes:
    args = dict(queue_id=0, flag=0, queue_offset=0, physical_offset=physical_offset, sys_flag=0,
                born_timestamp=1, born_host=Address.parse("10.0.0.1:1"), store_timestamp=2,
                store_host=Address.parse("10.0.0.2:2"), reconsume_times=0, prepared_transaction_offset=0,
                body=body, topic="T", properties="")
    args.update(kw)
    return encode_message(**args)


def test_a_record_is_no_end():
    rec = _record()
    s = step(rec + bytes(16), 0, crc=True, strict=True)
    assert s.end is None and s.size == len(rec) and s.crc_ok is True


def test_blank_by_magic_whatever_size_it_declares():
    buf = bytearray(64)
    struct.pack_into(">ii", buf, 8, 56, BLANK_MAGIC_CODE)
    s = step(buf, 8)
    assert (s.end, s.size, s.blank_fills) == (End.BLANK, 56, True)
    struct.pack_into(">ii", buf, 8, 999, BLANK_MAGIC_CODE)
    s = step(buf, 8)
    assert (s.end, s.blank_fills) == (End.BLANK, False)


def test_eight_zero_bytes_are_unwritten():
    assert step(bytes(64), 0).end is End.UNWRITTEN
    assert step(bytes(8) + b"\1" * 8, 0).end is End.UNWRITTEN  # only the header counts


@pytest.mark.parametrize("left", [0, 1, 7])
def test_fewer_than_eight_bytes_are_out_of_bytes(left):
    rec = _record()
    s = step(rec + b"\1" * left, len(rec))
    assert s.end is End.OUT_OF_BYTES and ("full" in s.reason) == (left == 0)


def test_a_record_past_the_readable_limit_is_out_of_bytes_past_the_segment_corrupt():
    rec = _record()
    assert step(rec, 0, limit=len(rec) - 1).end is End.OUT_OF_BYTES  # the rest has not arrived yet
    assert step(rec[:-1], 0).end is End.CORRUPT  # the segment itself is too short


def _damaged(where: int, raw: bytes) -> bytes:
    rec = bytearray(_record(properties="abc"))
    rec[where % len(rec):where % len(rec) + len(raw)] = raw
    return bytes(rec) + bytes(8)


@pytest.mark.parametrize("where, raw, reason", [
    (4, b"\x12\x34\x56\x78", "bad magic"),
    (0, struct.pack(">i", 50), "shorter than any record"),
    (0, struct.pack(">i", 10**6), "remain"),
    (-5, struct.pack(">h", 9), "properties length"),
    (-1, b"\xff", "not UTF-8"),
])
def test_corrupt_says_why(where, raw, reason):
    s = step(_damaged(where if where >= 0 else len(_record(properties="abc")) + where, raw), 0)
    assert s.end is End.CORRUPT and reason in s.reason, s


def test_strict_ends_at_a_bad_crc_or_offset_lenient_reads_on():
    bad_crc = bytearray(_record())
    bad_crc[-7] ^= 1  # inside the body "hello" (a 1-byte topic and empty properties follow)
    assert step(bytes(bad_crc), 0, crc=True).end is None
    assert step(bytes(bad_crc), 0, crc=True).crc_ok is False
    assert step(bytes(bad_crc), 0, crc=True, strict=True).end is End.CORRUPT
    assert step(bytes(bad_crc), 0, strict=True).end is None  # no CRC asked for
    moved = _record(physical_offset=100)
    assert step(moved, 0).end is None
    assert step(moved, 0, base=100, strict=True).end is None
    s = step(moved, 0, strict=True)
    assert s.end is End.CORRUPT and "PHYSICALOFFSET" in s.reason


def test_an_empty_body_has_no_crc_to_fail():
    rec = bytearray(_record(body=b""))
    struct.pack_into(">i", rec, 8, 12345)
    assert step(bytes(rec), 0, crc=True, strict=True).end is None


def test_walk_segment_stops_at_stop_at_and_for_the_caller():
    a = _record(0)
    b = _record(len(a))
    buf = a + b + bytes(16)
    assert walk_segment(buf, stop_at=1).pos == len(a) and walk_segment(buf, stop_at=1).kind is None
    seen = []
    e = walk_segment(buf, on_record=lambda pos, s: seen.append(pos) or False)
    assert (e.pos, e.kind, seen) == (len(a), None, [0])
    e = walk_segment(buf, strict=True)
    assert (e.pos, e.kind, e.records) == (len(a) + len(b), End.UNWRITTEN, 2)


def test_end_values_are_their_words():
    assert [str(e) for e in End] == ["blank", "unwritten", "out_of_bytes", "corrupt"]
    assert End.UNWRITTEN == "unwritten"
