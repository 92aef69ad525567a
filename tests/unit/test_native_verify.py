"""Verify's bulk pass (rmqstore.read.verify.bulk) gives the pure rules' report, line for line.

The bulk pass skips the per-record rules for the records it can prove silent (CRC and
PHYSICALOFFSET hold, their consume-queue units are the files' bytes); these tests run
verify both ways -- the bulk pass on (the compiled modules, whatever RMQSTORE_PURE says) and
``native=False`` (the pure rules on every record) -- over every fixture and over damaged
copies, and compare every fault line, the counts, the suppressed counts and the exit status.
The copies drop their index folder unless told otherwise: with an index the bulk pass stands
aside (each record's keys are checked by the rules), which one test pins too.
"""

from __future__ import annotations

import os
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import ALL_FIXTURES, FIXTURES, commitlog_files, compiled_module, copy_store, walk_file
from rmqstore.common import native
from rmqstore.format.crc import crc32
from rmqstore.format.record import BlankRecord
from rmqstore.read.verify import DETAIL_CAP, verify
from rmqstore.read.verify import bulk, logwalk

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def compiled_path(run_bytes: int = bulk.RUN_BYTES):
    """The bulk pass's modules for this block, even under RMQSTORE_PURE=1, parsing ``run_bytes`` of log
    at most at a time (small: many runs a segment, records across their limits); yields the bulk-pass
    call count."""
    compiled_module("_cdispatch")
    compiled_module("_cdecode")
    real = native.module
    calls = [0]
    walk = logwalk.walk_segment_bulk

    def counted(*args):
        calls[0] += 1
        return walk(*args)

    with mock.patch.object(native, "module", lambda name, switch=True: native.compiled(name)
                           if switch is not False else real(name, switch)), \
            mock.patch.object(logwalk, "walk_segment_bulk", counted), \
            mock.patch.object(bulk, "RUN_BYTES", run_bytes):
        yield calls


def lines(report) -> tuple:
    return [str(p) for p in report.problems], report.to_dict(), report.summary(), report.ok


def both(root: Path, cap: float = DETAIL_CAP, run_bytes: int = bulk.RUN_BYTES) -> tuple[tuple, tuple, int]:
    with compiled_path(run_bytes) as calls:
        fast = verify(root, native=True, max_problems_per_kind=cap)
    pure = verify(root, native=False, max_problems_per_kind=cap)
    return lines(fast), lines(pure), calls[0]


def records(name: str) -> list[tuple[str, int, object]]:
    """(commitlog rel, position, record) of every message record of a fixture."""
    out = []
    for base, data in commitlog_files(name, "store"):
        for phys, rec in walk_file(data, base):
            if not isinstance(rec, BlankRecord):
                out.append((f"commitlog/{base:020d}", phys - base, rec))
    return out


def queue_files(name: str) -> list[tuple[str, int]]:
    """(rel, size) of every consume-queue file of a fixture."""
    root = FIXTURES / name / "store"
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size)
                  for p in (root / "consumequeue").rglob("*") if p.is_file())


@pytest.mark.parametrize("run_bytes", [bulk.RUN_BYTES, 2048, 91])
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_fixture_gives_the_same_report(name, run_bytes, tmp_path):
    root = copy_store(name, str(tmp_path), drop_index=True)
    fast, pure, calls = both(root, run_bytes=run_bytes)
    assert fast == pure
    assert calls > 0  # the bulk pass ran
    assert fast[1]["checked"]["records"] == len(records(name))


@pytest.mark.parametrize("name", ["basic", "txn_delay"])
def test_with_an_index_the_rules_check_every_record(name, tmp_path):
    root = copy_store(name, str(tmp_path))
    fast, pure, calls = both(root)
    assert fast == pure
    assert calls == 0  # keys against the index: the pure walk


def _flip(path: Path, at: int, mask: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        if not b:  # an earlier fault cut the file short of it
            return
        f.seek(at)
        f.write(bytes([b[0] ^ mask]))


def _zero(path: Path, at: int, n: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes(n))


@st.composite
def damage(draw, name: str):
    """(fixture, description, apply(root)) of one fault in a copy of fixture ``name``."""
    kind = draw(st.sampled_from(["body", "body_crc", "header", "log_byte", "unit", "missing_unit", "cut_queue",
                                 "torn_tail", "cut_log"]))
    mask = draw(st.integers(1, 255))
    recs = records(name)
    rel, pos, rec = draw(st.sampled_from(recs))
    if kind == "body_crc":
        return name, f"BODYCRC of {rel}:{pos} ^ {mask:#x}", lambda root: _flip(root / rel, pos + 8, mask)
    if kind == "body":
        at = pos + rec.total_size - 1 - draw(st.integers(0, rec.total_size - 92))
        return name, f"byte {at} of {rel} ^ {mask:#x}", lambda root: _flip(root / rel, at, mask)
    if kind == "header":
        at = pos + draw(st.integers(0, 87))
        return name, f"header byte {at} of {rel} ^ {mask:#x}", lambda root: _flip(root / rel, at, mask)
    if kind == "log_byte":
        at = draw(st.integers(0, pos + rec.total_size - 1))
        return name, f"byte {at} of {rel} ^ {mask:#x}", lambda root: _flip(root / rel, at, mask)
    if kind in ("torn_tail", "cut_log"):
        rel, pos, rec = recs[-1] if kind == "torn_tail" else (rel, pos, rec)
        cut = pos + draw(st.integers(1, rec.total_size - 1))
        if kind == "cut_log":
            return name, f"{rel} cut at {cut}", lambda root: os.truncate(root / rel, cut)
        end = pos + rec.total_size

        def torn(root, rel=rel, pos=pos, end=end, cut=cut):  # the last record again, half written
            with open(root / rel, "r+b") as f:
                f.seek(pos)
                head = f.read(cut - pos)
                f.seek(end)
                f.write(head)
        return name, f"half a record after {rel}:{end}", torn
    files = queue_files(name)
    qrel, size = draw(st.sampled_from(files))
    n = draw(st.integers(0, max(size // 20 - 1, 0)))
    if kind == "unit":
        at = n * 20 + draw(st.integers(0, 19))
        return name, f"byte {at} of {qrel} ^ {mask:#x}", lambda root: _flip(root / qrel, at, mask)
    if kind == "missing_unit":
        return name, f"unit {n} of {qrel} zeroed", lambda root: _zero(root / qrel, n * 20, 20)
    return name, f"{qrel} cut to {n} units", lambda root: os.truncate(root / qrel, n * 20)


@SETTINGS
@given(faults=st.sampled_from(ALL_FIXTURES).flatmap(lambda name: st.lists(damage(name), min_size=1, max_size=3)),
       cap=st.sampled_from([1, 2, DETAIL_CAP]), run_bytes=st.sampled_from([bulk.RUN_BYTES, 4096, 700]))
@example(faults=[("basic", "BODYCRC of the first record", lambda root: _flip(root / "commitlog/00000000000000000000",
                                                                            8, 1))], cap=DETAIL_CAP, run_bytes=bulk.RUN_BYTES)
@example(faults=[("basic", "first unit zeroed", lambda root: _zero(
    root / queue_files("basic")[0][0], 0, 20))], cap=DETAIL_CAP, run_bytes=bulk.RUN_BYTES)
@example(faults=[("crash", "last written commitlog file cut", lambda root: os.truncate(
    root / records("crash")[-1][0], records("crash")[-1][1] + 50))], cap=1, run_bytes=700)
def test_damaged_copies_give_the_same_report(faults, cap, run_bytes):
    name = faults[0][0]
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_store(name, tmp, drop_index=True)
        for _, _what, apply in faults:
            apply(root)
        fast, pure, _calls = both(root, cap, run_bytes)
        assert fast == pure, [what for _, what, _ in faults]


# -- record_facts, the compiled helper, against the decoded records --------------------------------

@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_record_facts_of_every_fixture_segment(name):
    cdecode = compiled_module("_cdecode")
    for base, data in commitlog_files(name, "store"):
        recs = [(phys, rec) for phys, rec in walk_file(data, base) if not isinstance(rec, BlankRecord)]
        end = recs[-1][0] - base + recs[-1][1].total_size if recs else 0
        count, stop, starts, max_ts, flagged = cdecode.record_facts(data, base, 0, end)
        assert (count, stop) == (len(recs), end)
        assert list(struct.unpack(f"={count}q", starts)) == [phys for phys, _ in recs]
        assert max_ts == max((rec.store_timestamp for _, rec in recs), default=None)
        assert flagged is None


@given(body=st.binary(max_size=64), stored=st.integers(-2**31, 2**31 - 1), phys_delta=st.sampled_from([0, 0, 1, -7]))
@example(body=b"", stored=0, phys_delta=0)
@example(body=b"", stored=5, phys_delta=0)
def test_record_facts_flags_what_the_rules_flag(body, stored, phys_delta):
    cdecode = compiled_module("_cdecode")
    rec = records("basic")[0][2]
    base = 4096
    raw = bytearray((FIXTURES / "basic/store/commitlog/00000000000000000000").read_bytes()[:rec.total_size])
    # rebuild the first record (IPv4 hosts: BODYLENGTH at 84) with another body, CRC and PHYSICALOFFSET
    head, tail = raw[:84], raw[88 + len(rec.body):]
    data = head + struct.pack(">i", len(body)) + body + tail
    struct.pack_into(">i", data, 0, len(data))
    struct.pack_into(">i", data, 8, stored)
    struct.pack_into(">q", data, 28, base + phys_delta)
    count, stop, _starts, _ts, flagged = cdecode.record_facts(bytes(data) * 2, base, 0, 2 * len(data))
    if crc32(body) != stored or phys_delta != 0:  # it stops at the first record
        assert (count, stop, flagged) == (0, 0, 0)
    else:  # the copy after it lies elsewhere than its PHYSICALOFFSET says
        assert (count, stop, flagged) == (1, len(data), len(data))


@given(garbage=st.binary(max_size=600), start=st.integers(-5, 700), end=st.integers(-5, 700))
def test_record_facts_never_reads_past_its_end(garbage, start, end):
    cdecode = compiled_module("_cdecode")
    count, stop, starts, _ts, flagged = cdecode.record_facts(garbage, 0, start, end)
    assert len(starts) == 8 * count
    assert count == 0 or start <= stop <= min(end, len(garbage))
    assert flagged is None or flagged == stop


# -- unit_run: the consume-queue recovery loops of verify's read-only open ---------------------------

def _pure_unit_run(buf: bytes, end: int, limit: int):
    stop, last = 0, None
    for pos in range(0, min(end, len(buf)) - 19, 20):
        offset, size, _tags = struct.unpack_from(">qiq", buf, pos)
        if offset < 0 or size <= 0 or offset >= limit:
            break
        stop, last = pos + 20, (offset, size)
    return stop, last


_UNITS = st.lists(st.tuples(st.integers(-3, 2**63 - 1) | st.integers(0, 5000), st.integers(-2, 2**31 - 1),
                            st.integers(-2**63, 2**63 - 1)), max_size=20)


@given(units=_UNITS, tail=st.binary(max_size=25), end=st.integers(-1, 600),
       limit=st.integers(0, 2**63 - 1) | st.integers(0, 6000))
@example(units=[(2**63 - 2, 2**31 - 1, 0)], tail=b"", end=600, limit=2**63 - 1)
@example(units=[(0, 0, 0)], tail=b"", end=20, limit=1)
def test_unit_run_is_the_recovery_loop(units, tail, end, limit):
    cdecode = compiled_module("_cdecode")
    buf = b"".join(struct.pack(">qiq", *u) for u in units) + tail
    assert cdecode.unit_run(buf, end, limit) == _pure_unit_run(buf, end, limit)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_read_only_open_recovers_the_same_queues_both_ways(name, tmp_path):
    """The consume queues a read-only open (verify's prepare) recovers, cut at a record in the middle
    of the log (truncate_dirty_logic_files) and not: the same positions with unit_run compiled and pure."""
    from rmqstore.store import open_store

    compiled_module("_cdecode")
    root = copy_store(name, str(tmp_path))
    rel, pos, rec = records(name)[len(records(name)) // 2]
    _flip(root / rel, pos + 8, 1)  # a bad CRC: recovery ends the log there and cuts the queues

    def queues(force_pure: bool):
        with mock.patch.object(native, "module", lambda n, s=True: None if force_pure else native.compiled(n)):
            store = open_store(root, read_only=True)
        try:
            return {key: (cq.max_physic_offset, [(mf.file_from_offset, mf.wrote_position)
                                                 for mf in cq.mapped_file_queue.mapped_files])
                    for key, cq in store.consume_queue_table.items()}
        finally:
            store.close()

    assert queues(False) == queues(True)


def test_a_store_asking_for_the_pure_path_recovers_its_queues_in_python(tmp_path):
    """``StoreConfig(native=False)`` reaches the consume queues' recovery too (their unit scan)."""
    import dataclasses

    from rmqstore.store import open_store
    from rmqstore.files.store_sizes import infer_config

    root = copy_store("basic", str(tmp_path))
    sizes = infer_config(root)
    real = native.module
    for use_native in (False, True):
        asked = []
        with mock.patch.object(native, "module", lambda n, s=True: asked.append((n, s)) or real(n, s)):
            store = open_store(root, read_only=True, config=dataclasses.replace(sizes, native=use_native))
        try:
            assert store.consume_queue_table
        finally:
            store.close()
        assert ("_cdecode", use_native) in asked and ("_cdecode", not use_native) not in asked


@pytest.mark.parametrize("name", ["basic", "txn_delay"])
def test_every_record_damaged_gives_the_same_report(name, tmp_path):
    """Every record's body CRC wrong (a log the rules see record by record): the same report, each
    record counted once."""
    root = copy_store(name, str(tmp_path), drop_index=True)
    recs = records(name)
    for rel, pos, _rec in recs:
        _flip(root / rel, pos + 8, 0x40)
    fast, pure, calls = both(root, cap=5)
    assert fast == pure
    assert calls > 0
    assert fast[1]["checked"]["records"] == len(recs)
    assert not fast[3]
