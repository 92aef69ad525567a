"""Any split of a segment into byte ranges yields exactly the records of a whole sequential read."""

import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.format.fastscan import walk_segment
from rmqstore.format.ranges import find_record_start, read_range, read_segment, split_ranges
from rmqstore.read.scan import CommitLogScan

SEG = 65536


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    """Segments written by our engine: random body sizes, blanks at every file end."""
    root = tmp_path_factory.mktemp("ranges")
    rng = random.Random(7)
    with MessageStore(root, StoreConfig(mapped_file_size_commit_log=SEG)) as store:
        for i in range(400):
            body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 10, 300, 1500, 5000])))
            assert store.put_message(Message("RangeTopic", body, queue_id=i % 3, properties=f"KEYS\x01k{i}",
                                             born_host="192.0.2.1:1")).ok
    files = sorted((root / "commitlog").iterdir())
    return [(int(p.name), p.read_bytes()) for p in files]


def offsets(read):
    return [(s.offset, s.total_size) for s in read.records]


def test_sequential_read_equals_the_scan_on_every_fixture():
    for name in ("basic", "boundary", "txn_delay", "flush_tsp"):
        root = FIXTURES / name / "store"
        expected = [(o, r.total_size) for o, r in CommitLogScan(root) if hasattr(r, "topic")]
        got = []
        for p in sorted((root / "commitlog").iterdir()):
            read = read_segment(p.read_bytes(), int(p.name))
            assert not read.damaged, (name, p.name, read.damaged)
            got += offsets(read)
        assert got == expected, name


def test_stale_records_after_a_blank_are_not_records():
    """flush_tsp's blank tails hold whole records of an earlier file: their offsets give them away."""
    root = FIXTURES / "flush_tsp" / "store" / "commitlog"
    for p in sorted(root.iterdir()):
        buf = p.read_bytes()
        read = read_segment(buf, int(p.name))
        tail_start = (read.records[-1].offset - int(p.name) + read.records[-1].total_size) if read.records else 0
        assert find_record_start(buf, int(p.name), tail_start + 1) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)
def test_any_split_yields_the_sequential_records(segments, data):
    if data is None:  # pinned: the first segment in 7 ranges, no damage
        base, buf = segments[0]
        cuts = [s for s, _ in split_ranges(len(buf), 7)][1:]
        damage = []
    else:
        base, buf = segments[data.draw(st.integers(0, len(segments) - 1))]
        cuts = sorted(set(data.draw(st.lists(st.integers(1, len(buf) - 1), max_size=12))))
        damage = data.draw(st.lists(st.tuples(st.integers(0, len(buf) - 1), st.integers(1, 3000),
                                              st.integers(0, 2**32 - 1)), max_size=5))
    raw = bytearray(buf)
    for at, n, seed in damage:  # corrupted regions: overwrite with noise (drawn, so a failure replays)
        raw[at:at + n] = random.Random(seed).randbytes(min(n, len(raw) - at))
    buf = bytes(raw)
    whole = read_segment(buf, base)
    bounds = [0] + cuts + [len(buf)]
    parts = []
    for s, e in zip(bounds, bounds[1:]):
        parts += offsets(read_range(buf, base, s, e))
    assert parts == offsets(whole)
    if not damage:
        assert not whole.damaged and whole.records  # an undamaged segment reads clean


def test_a_damaged_physical_offset_field_is_damage_in_every_split(segments):
    """Pinned from a CI draw: noise over a record's PHYSICALOFFSET field only (its body CRC
    still right).  A range starting before it cannot take it for a record start, so the
    sequential read must not take it for a record either -- both call it damage."""
    base, buf = segments[0]
    before = read_segment(buf, base).records
    prev, victim, after = before[2], before[3], before[4]
    raw = bytearray(buf)
    raw[victim.offset - base + 28] ^= 0x01  # the top byte of the eight-byte field
    raw = bytes(raw)
    whole = read_segment(raw, base)
    assert victim.offset not in [r.offset for r in whole.records]
    assert whole.damaged[0] == (victim.offset, after.offset)
    assert offsets(whole) == [(r.offset, r.total_size) for r in before if r is not victim]
    for cut in sorted({*range(prev.offset - base + 1, after.offset - base + 2, 13),
                       victim.offset - base, victim.offset - base + 1, after.offset - base}):
        parts = offsets(read_range(raw, base, 0, cut)) + offsets(read_range(raw, base, cut, len(raw)))
        assert parts == offsets(whole), cut


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cuts_at_record_starts_one_byte_ranges_and_damage_across_a_cut(segments, data):
    """The edges of the bounded read: a range ending exactly where a record starts (or one
    byte either side), ranges of a single byte, and damage that straddles a range's end."""
    base, buf = segments[data.draw(st.integers(0, len(segments) - 1))]
    starts = [s.offset - base for s in read_segment(buf, base).records]
    picked = data.draw(st.lists(st.sampled_from(starts[1:]), min_size=1, max_size=8))
    cuts = set()
    for s in picked:
        cuts.update(c for c in (s - 1, s, s + 1, s + 2) if 0 < c < len(buf))  # 1-byte ranges around a start
    raw = bytearray(buf)
    if data.draw(st.booleans()):  # damage from just before a cut to just after it
        at = data.draw(st.sampled_from(sorted(cuts)))
        lo, hi = max(0, at - data.draw(st.integers(1, 200))), min(len(raw), at + data.draw(st.integers(1, 200)))
        raw[lo:hi] = random.Random(data.draw(st.integers(0, 2**32 - 1))).randbytes(hi - lo)
    buf = bytes(raw)
    bounds = [0] + sorted(cuts) + [len(buf)]
    parts = []
    for s, e in zip(bounds, bounds[1:]):
        parts += offsets(read_range(buf, base, s, e))
    assert parts == offsets(read_segment(buf, base))


def test_a_split_reads_each_record_about_once(segments, monkeypatch):
    """Bounded: the ranges of a split walk each record once, plus at most one record per
    range (the first start found at or past its end), not the rest of the segment each."""
    import rmqstore.format.ranges as ranges

    walked = []

    def counting_walk(*args, **kwargs):
        w = walk_segment(*args, **kwargs)
        walked.append(w.records)
        return w

    monkeypatch.setattr(ranges, "walk_segment", counting_walk)
    base, buf = segments[0]
    total = len(read_segment(buf, base).records)
    for parts in (2, 7, 40):
        walked.clear()
        got = []
        for s, e in split_ranges(len(buf), parts):
            got += read_range(buf, base, s, e).records
        assert len(got) == total
        # one-record walks come from find_record_start's candidate checks (one per range start)
        assert sum(walked) <= total + 2 * parts, (parts, sum(walked), total)
