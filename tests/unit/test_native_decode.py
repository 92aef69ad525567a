"""The compiled decode to columns (rmqstore._native._cdecode) equals the pure one (walk.step + decode_record).

Every fixture segment, whole and with garbage spliced in (random bytes, flipped bits in a
record, a torn tail), and synthetic segments of every record shape the layout allows (V1
and V2, IPv4 and IPv6 hosts, non-ASCII topics and properties): the native columns equal the
pure decoder's records field by field, and both walks stop at the same position for the
same reason -- the one :func:`rmqstore.format.walk.step` gives there.  Garbage never crashes it.
"""

from __future__ import annotations

import mmap
import os
import random
import threading

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import FIXTURES, commitlog_files, compiled_module
from rmqstore.format.layout import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from rmqstore.format.record import Address, encode_message
from rmqstore.read.scan import RECORD_COLUMNS, CommitLogScan, RecordColumns, decode_columns
from rmqstore.format.walk import End, step

FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "store" / "commitlog").is_dir())
SEGMENTS = [(name, base, data) for name in FIXTURE_NAMES for base, data in commitlog_files(name)]
SEGMENT_IDS = [f"{name}-{base}" for name, base, _ in SEGMENTS]


def native_columns(buf, pos=0, base=0, *, limit=None, stop_at=None, crc=False, strict=False, max_records=None,
                   max_bytes=None, host=Address) -> RecordColumns:
    """The compiled decode, whatever RMQSTORE_PURE says."""
    d = compiled_module("_cdecode").decode(
        buf, pos, base, -1 if limit is None else limit, -1 if stop_at is None else stop_at, crc=crc, strict=strict,
        max_records=-1 if max_records is None else max_records, max_bytes=-1 if max_bytes is None else max_bytes,
        host=host)
    return RecordColumns(d["count"], d["end"], None if d["kind"] is None else End(d["kind"]), d["blank_size"], d)


def assert_same(buf, pos=0, base=0, **kw) -> RecordColumns:
    """Both paths over ``buf`` from ``pos``: same stop, same kind, same columns."""
    native = native_columns(buf, pos, base, **kw)
    pure = decode_columns(buf, pos, base, native=False, **kw)
    assert (native.count, native.end, native.kind, native.blank_size) == \
        (pure.count, pure.end, pure.kind, pure.blank_size)
    for name in RECORD_COLUMNS + ("position",):
        assert list(native.columns[name]) == list(pure.columns[name]), name
    assert native.columns["crc_ok"] == pure.columns["crc_ok"]
    if pure.kind is not None:  # the end is walk.step's own verdict at that position
        limit = kw.get("limit")
        assert step(buf, pure.end, base, limit, crc=kw.get("crc", False), strict=kw.get("strict", False)).end \
            is pure.kind
    return native


# -- every fixture segment ------------------------------------------------------------------------

@pytest.mark.parametrize("name,base,data", SEGMENTS, ids=SEGMENT_IDS)
@pytest.mark.parametrize("crc,strict", [(False, False), (True, False), (True, True)])
def test_every_fixture_segment_decodes_the_same(name, base, data, crc, strict):
    got = assert_same(data, 0, base, crc=crc, strict=strict)
    assert got.count > 0 or got.kind in (End.UNWRITTEN, End.BLANK)  # a segment of one blank: boundary
    if crc:
        assert set(got.columns["crc_ok"]) <= {1}  # RocketMQ wrote these: every body CRC is right


@pytest.mark.parametrize("name,base,data", SEGMENTS[:6], ids=SEGMENT_IDS[:6])
def test_every_record_boundary_is_a_start(name, base, data):
    """From each record's position the walk (capped at a few records) agrees, as does every stop_at."""
    positions = list(native_columns(data, 0, base).columns["position"])
    for p in positions[:: max(1, len(positions) // 25)]:
        assert_same(data, p, base, max_records=3)
        assert_same(data, 0, base, stop_at=p)
        assert_same(data, 0, base, limit=p + 50)


segment_index = st.integers(0, len(SEGMENTS) - 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segment_index, st.integers(0, 65536), st.binary(min_size=1, max_size=64), st.booleans(), st.booleans(),
       st.sampled_from(["overwrite", "insert", "flip"]))
@example(0, 0, b"\x00" * 8, False, False, "overwrite")  # unwritten at once
@example(0, 4, b"\xcb\xd4\x31\x94", False, False, "overwrite")  # a blank's magic in the first record
@example(0, 0, b"\x00\x00\x00\x10", False, False, "overwrite")  # a record of 16 bytes
@example(0, 200, b"\xff", True, True, "flip")  # a flipped body byte: strict stops, lenient goes on
def test_spliced_garbage_decodes_the_same(i, at, garbage, crc, strict, how):
    name, base, data = SEGMENTS[i]
    buf = bytearray(data)
    at = min(at, len(buf))
    if how == "overwrite":
        buf[at:at + len(garbage)] = garbage
        del buf[len(data):]
    elif how == "insert":
        buf[at:at] = garbage
    else:
        for k, g in enumerate(garbage[:4]):
            if at + k < len(buf):
                buf[at + k] ^= g
    assert_same(bytes(buf), 0, base, crc=crc, strict=strict)


# -- synthetic records of every shape -----------------------------------------------------------------

hosts = st.one_of(
    st.tuples(st.binary(min_size=4, max_size=4), st.integers(-2**31, 2**31 - 1)),
    st.tuples(st.binary(min_size=16, max_size=16), st.integers(-2**31, 2**31 - 1)))
records = st.builds(
    lambda born, store, body, topic, props, v2, qid, qoff, ts, crc_bad: encode_message(
        queue_id=qid, flag=qid ^ 5, queue_offset=qoff, physical_offset=qoff * 7, sys_flag=qid & 0xF,
        born_timestamp=ts, born_host=Address(*born), store_timestamp=ts + 1, store_host=Address(*store),
        reconsume_times=qid & 3, prepared_transaction_offset=-qoff, body=body, topic=topic, properties=props,
        magic_code=MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE, body_crc=12345 if crc_bad else None),
    hosts, hosts, st.binary(max_size=300), st.text(max_size=40).filter(lambda t: len(t.encode()) <= 127),
    st.text(max_size=60), st.booleans(), st.integers(-2**31, 2**31 - 1), st.integers(-2**40, 2**40),
    st.integers(-2**63, 2**63 - 2), st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(records, max_size=8), st.sampled_from([b"", b"\x00" * 16, b"\x00\x00\x00\x20\xcb\xd4\x31\x94",
                                                       b"\x01\x02\x03"]),
       st.booleans(), st.booleans(), st.integers(0, 400))
def test_every_record_shape_decodes_the_same(recs, tail, crc, strict, cut):
    data = b"".join(recs) + tail
    assert_same(data, 0, 0, crc=crc, strict=strict)
    assert_same(data, 0, 0, crc=crc, limit=max(len(data) - cut, 0))  # a torn tail: out of bytes
    assert_same(data, 0, 0, max_records=2, max_bytes=200)
    assert_same(data, 0, 0, host=lambda ip, port: str(Address(ip, port)))


# -- garbage never crashes ---------------------------------------------------------------------------------

@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=600), st.integers(-10, 700), st.integers(-1, 700), st.booleans(), st.booleans())
@example(b"\x00\x00\x00\x5b\xda\xa3\x20\xa7" + b"\xff" * 83, 0, -1, True, True)
@example(b"\x00\x00\x00\x5b\xda\xa3\x20\xab" + b"\x7f" * 83, 0, -1, False, False)
def test_random_bytes_never_crash_and_decode_the_same(data, pos, limit, crc, strict):
    assert_same(data, pos, 0, limit=None if limit < 0 else limit, crc=crc, strict=strict)


@settings(max_examples=300, deadline=None)
@given(records, st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), min_size=1, max_size=6))
def test_corrupted_fields_of_a_record_decode_the_same(rec, flips):
    buf = bytearray(rec + b"\x00" * 8)
    for at, value in flips:
        if at < len(buf):
            buf[at] = value
    assert_same(bytes(buf), crc=True)
    assert_same(bytes(buf), crc=True, strict=True)


def test_a_host_callable_that_raises_is_an_error_not_a_crash():
    _, base, data = SEGMENTS[0]

    def host(ip, port):
        raise ValueError("no hosts today")

    with pytest.raises(ValueError, match="no hosts today"):
        compiled_module("_cdecode").decode(data, 0, base, host=host)
    with pytest.raises(TypeError):
        compiled_module("_cdecode").decode(data, 0, base)


def test_the_c_magic_codes_are_the_layout_tables():
    """(Every other constant of every module: tests/unit/test_native_constants.py.)"""
    from rmqstore.format import layout
    from rmqstore.format.walk import MIN_RECORD_SIZE

    c = compiled_module("_cdecode").CONSTANTS
    assert {k: c[k] for k in ("MESSAGE_MAGIC_CODE", "MESSAGE_MAGIC_CODE_V2", "BLANK_MAGIC_CODE", "MIN_RECORD_SIZE")} \
        == {"MESSAGE_MAGIC_CODE": layout.MESSAGE_MAGIC_CODE, "MESSAGE_MAGIC_CODE_V2": layout.MESSAGE_MAGIC_CODE_V2,
            "BLANK_MAGIC_CODE": layout.BLANK_MAGIC_CODE, "MIN_RECORD_SIZE": MIN_RECORD_SIZE}


# -- joined columns (the Spark source's form) ------------------------------------------------------------------

@pytest.mark.parametrize("name,base,data", SEGMENTS[:8], ids=SEGMENT_IDS[:8])
def test_joined_columns_hold_the_same_values(name, base, data):
    from rmqstore.format.record import create_message_id

    mod = compiled_module("_cdecode")
    d = mod.decode(data, 0, base, host=Address, joined=True, crc=True)
    pure = decode_columns(data, 0, base, native=False)
    for field in ("body", "topic", "properties"):
        off = d[field + "_offsets"]
        values = [d[field][off[i]:off[i + 1]] for i in range(d["count"])]
        want = [v if isinstance(v, bytes) else v.encode() for v in pure.columns[field]]
        assert values == want, field
    off = d["msg_id_offsets"]
    ids = [d["msg_id"][off[i]:off[i + 1]].decode() for i in range(d["count"])]
    assert ids == [create_message_id(h, p) for h, p in zip(pure.columns["store_host"],
                                                            pure.columns["physical_offset"])]
    assert mod.decode(data, 0, base, host=Address, joined=True, bodies=False)["body"] is None


# -- the scan over a store, both paths -------------------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_commitlog_scan_is_the_same_on_both_paths(name):
    compiled_module("_cdecode")
    store = FIXTURES / name / "store"
    native, pure = CommitLogScan(store), CommitLogScan(store, native=False)
    assert list(native) == list(pure)
    assert (native.stop, native.records, native.messages, native.blanks) == \
        (pure.stop, pure.records, pure.messages, pure.blanks)
    nb = [(off, c.count, list(c.columns["physical_offset"]), c.columns["crc_ok"])
          for off, c in CommitLogScan(store).batches()]
    pb = [(off, c.count, list(c.columns["physical_offset"]), c.columns["crc_ok"])
          for off, c in CommitLogScan(store, native=False).batches()]
    assert nb == pb


def test_the_walk_runs_without_the_gil_and_holds_the_map(tmp_path):
    """Two threads decode a mapped segment at once; closing the map meanwhile is refused, not a crash."""
    _, base, data = SEGMENTS[0]
    path = tmp_path / "seg"
    path.write_bytes(data * 1)
    mod = compiled_module("_cdecode")
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    want = mod.decode(buf, 0, base, host=Address, crc=True)["count"]
    got = []
    threads = [threading.Thread(target=lambda: got.append(mod.decode(buf, 0, base, host=Address, crc=True)["count"]))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 4
    buf.close()
    with pytest.raises(ValueError):
        mod.decode(buf, 0, base, host=Address)
    os.remove(path)


def test_random_mutations_of_a_whole_segment():
    """A few hundred random byte writes anywhere in real segments (a seeded sweep beside Hypothesis)."""
    rng = random.Random(15)
    for name, base, data in SEGMENTS[::3]:
        for _ in range(20):
            buf = bytearray(data)
            for _ in range(rng.randrange(1, 20)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            assert_same(bytes(buf), 0, base, crc=True, strict=rng.random() < 0.5)
