"""``rmqstore.spark.verify`` reports exactly what ``rmqstore.read.verify`` reports.

Equal means the whole report: counters (records, units, entries, log end...), the problems
with their severity, kind, path, offset and message, in the same order (the per-kind cap
keeps the first ones found, so the order decides which are listed), and the suppressed counts.  Checked on
every RocketMQ fixture, on stores written by our engine, and on damaged copies -- one fault
each, the faults of tests/compat/test_verify.py (each must actually be found: its expected kind
is in the report), plus a store with damage past the per-kind cap.  The stores of a group
go through one Spark call, as ``rmqstore spark verify A B ...`` would send them.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from conftest import ALL_FIXTURES, FIXTURES  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_verify import (copy_store, engine_store, faults, files_of, flip, messages_of, store_root,  # noqa: E402
                         units_of, write_torn_record)

import rmqstore.spark.verify as spark_verify_module  # noqa: E402
from rmqstore.spark.verify import verify as spark_verify  # noqa: E402
from rmqstore.format.sysflag import TRANSACTION_PREPARED_TYPE  # noqa: E402
from rmqstore.read.verify import verify  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def assert_same(expected, got, what: str) -> None:
    want, have = expected.to_dict(), got.to_dict()
    want_problems, have_problems = want.pop("problems"), have.pop("problems")
    assert have == want, what
    for kind in {p["kind"] for p in want_problems + have_problems}:
        assert [p for p in have_problems if p["kind"] == kind] == [p for p in want_problems if p["kind"] == kind], \
            f"{what}: {kind}"
    assert have_problems == want_problems, f"{what}: the same problems in another order"


# -- clean stores ------------------------------------------------------------------------------------

def clean_stores() -> list[Path]:
    roots = [FIXTURES / n / s for n in ALL_FIXTURES for s in ("store", "recovered_store") if (FIXTURES / n / s).is_dir()]
    return roots + [engine_store(), REPO / "data" / "sample_store"]


@pytest.mark.slow  # ~30-60 s on a loaded 2-core machine: the first Spark jobs start the Python workers
def test_equal_on_every_fixture_and_engine_stores(spark):
    roots = clean_stores()
    reports = spark_verify(spark, roots, split_size=7001)  # segments walked in ranges that cut records
    assert len(reports) == len(roots)
    for root, got in zip(roots, reports):
        expected = verify(root)
        assert_same(expected, got, str(root))
        assert got.records > 0 and got.root == expected.root


# -- damaged stores --------------------------------------------------------------------------------------

def _message(name: str, i: int, with_body: bool = False):
    msgs = [m for m in messages_of(name) if m[2].body or not with_body]
    return msgs[i]


def _flip_record(name, i, at, mask, with_body=False):
    rel, pos, _ = _message(name, i, with_body)
    return lambda root: flip(root / rel, pos + at, mask)


def _flip_topic_length(name, i):
    rel, pos, rec = _message(name, i)
    return lambda root: flip(root / rel, pos + 88 + len(rec.body), 0x01)  # IPv4 hosts: the body at 88


def _flip_unit(name, i, at, mask):
    rel, upos = units_of(name)[i]
    return lambda root: flip(root / rel, upos + at, mask)


def _unit_points_at_next(name, i):
    """Unit ``i`` takes the offset of the unit after it: it points at a record that has its own unit."""
    rel, upos = units_of(name)[i]

    def apply(root):
        with open(root / rel, "r+b") as f:
            f.seek(upos + 20)
            offset = f.read(8)
            f.seek(upos)
            f.write(offset)
    return apply


def _zero_unit(name, i):
    rel, upos = units_of(name)[i]

    def apply(root):
        with open(root / rel, "r+b") as f:
            f.seek(upos)
            f.write(bytes(20))
    return apply


def _index_entry(name: str, n: int, field: int, mask: int):
    """Flip a byte of index entry ``n`` of the first index file (field 0 hash, 4 offset, 12 time, 16 link)."""
    rel = files_of(name)["index"][0]
    slots = ((store_root(name) / rel).stat().st_size - 40) // 84
    return lambda root: flip(root / rel, 40 + 4 * slots + 20 * n + field + 3, mask)


def _index_slot(name: str):
    rel = files_of(name)["index"][0]
    data = (store_root(name) / rel).read_bytes()
    slots = (len(data) - 40) // 84
    s = next(s for s in range(slots) if struct.unpack_from(">i", data, 40 + 4 * s)[0])
    return lambda root: flip(root / rel, 40 + 4 * s + 3, 0x01)


def _remove(rel):
    return lambda root: (root / rel).unlink()


def _truncate(rel, size):
    return lambda root: os.truncate(root / rel, size)


def _append(rel, extra: bytes):
    def apply(root):
        with open(root / rel, "ab") as f:
            f.write(extra)
    return apply


def _garbage_after_end(name):
    rel, pos, rec = messages_of(name)[-1]
    return lambda root: flip(root / rel, pos + rec.total_size + 100, 0x5A)


def _torn_after_end(name):
    """Half a copy of the last record right after it (a torn write a recovery cut off)."""
    rel, pos, rec = messages_of(name)[-1]
    end = pos + rec.total_size
    seg_start = int(rel.rsplit("/", 1)[1])

    def apply(root):
        raw = (root / rel).read_bytes()[pos:end]
        write_torn_record(root / rel, end, seg_start + end, raw)
    return apply


def _many_bodies(name):
    """Flip a body byte of every second message: more body_crc problems than the cap lists."""
    def apply(root):
        for rel, pos, rec in messages_of(name)[::2]:
            if rec.body:
                flip(root / rel, pos + 88, 0x01)
    return apply


def _rolled_queue_first_file():
    later = next(r for r in files_of("engine")["consumequeue"] if r.endswith("/00000000000000001280"))
    return later.rsplit("/", 1)[0] + "/00000000000000000000"


#: id -> (store, apply(root), a kind the damage must produce)
FAULTS = {
    "body_crc": ("basic", _flip_record("basic", 10, 88, 0x20, with_body=True), "body_crc"),
    "size_chain": ("basic", _flip_record("basic", 12, 3, 0x04), "undecodable_record"),
    "physical_offset": ("flush_tsp", _flip_record("flush_tsp", 13, 35, 0x08), "physical_offset"),
    "queue_offset": ("basic", _flip_record("basic", 20, 27, 0x01), "record_header"),
    "queue_offset_far": ("engine", _flip_record("engine", 40, 26, 0x10), "queue_offset_gap"),
    "queue_id": ("engine", _flip_record("engine", 33, 15, 0x01), "record_header"),
    "topic_length": ("engine", _flip_topic_length("engine", 50), "undecodable_record"),
    "prepared_bit": ("engine", _flip_record("engine", 30, 39, TRANSACTION_PREPARED_TYPE), "record_header"),
    "unit_offset": ("basic", _flip_unit("basic", 5, 7, 0x40), "unit_target"),
    "unit_offset_other_record": ("engine", _unit_points_at_next("engine", 7), "unit_mismatch"),
    "unit_size": ("flush_tsp", _flip_unit("flush_tsp", 9, 11, 0x02), "unit_mismatch"),
    "unit_tags": ("engine", _flip_unit("engine", 11, 19, 0x02), "unit_mismatch"),
    "unit_zeroed": ("engine", _zero_unit("engine", 20), "invalid_unit"),
    "cq_file_missing": ("engine", _remove(_rolled_queue_first_file()), "record_without_unit"),
    "cq_file_appended": ("basic", _append(files_of("basic")["consumequeue"][0], b"\x01" * 7), "file_size"),
    "segment_missing": ("basic", _remove(files_of("basic")["commitlog"][1]), "missing_segment"),
    "first_segment_missing": ("basic", _remove(files_of("basic")["commitlog"][0]), "expired_refs"),
    "segment_truncated": ("flush_tsp", _truncate(files_of("flush_tsp")["commitlog"][1], 1000), "file_size"),
    "garbage_after_end": ("basic", _garbage_after_end("basic"), "garbage_after_end"),
    "torn_after_end": ("engine", _torn_after_end("engine"), "garbage_after_end"),
    "index_hash": ("engine", _index_entry("engine", 3, 0, 0x01), "index_entry"),
    "index_offset": ("engine", _index_entry("engine", 4, 4, 0x01), "index_entry"),
    "index_time": ("engine", _index_entry("engine", 5, 12, 0x04), "index_entry"),
    "index_link": ("engine", _index_entry("engine", 6, 16, 0x01), "index_chain"),
    "index_slot": ("engine", _index_slot("engine"), "index_slot"),
    "index_truncated": ("basic", _truncate(files_of("basic")["index"][0], 5000), "file_size"),
    "checkpoint_missing": ("engine", _remove("checkpoint"), "checkpoint"),
    "many_bodies": ("engine", _many_bodies("engine"), "body_crc"),
}


@pytest.fixture(scope="module")
def damaged(spark, tmp_path_factory):
    """Every fault applied to its own copy; all verified on Spark in one call."""
    roots = {}
    for fid, (name, apply, _) in FAULTS.items():
        root = copy_store(store_root(name), str(tmp_path_factory.mktemp(fid)))
        apply(root)
        roots[fid] = root
    reports = spark_verify(spark, list(roots.values()), split_size=4099)
    return {fid: (root, rep) for (fid, root), rep in zip(roots.items(), reports)}


@pytest.mark.slow  # the 28 copies go through one Spark call (~30 s on a loaded machine)
@pytest.mark.parametrize("fid", list(FAULTS))
def test_equal_on_damaged_store(damaged, fid):
    root, got = damaged[fid]
    expected = verify(root)
    assert FAULTS[fid][2] in {p.kind for p in expected.problems} | {k.split(":")[-1] for k in expected.suppressed}, \
        f"{fid}: the fault was not found: {sorted({p.kind for p in expected.problems})}"
    assert_same(expected, got, fid)


@pytest.mark.slow
@settings(max_examples=1, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(drawn=st.lists(faults(), min_size=8, max_size=8, unique_by=lambda f: f[1]))
def test_equal_on_random_faults(spark, drawn):
    """test_verify's random faults (body, header field, unit, truncation, appended bytes, removed file):
    eight different ones, fixed by ``derandomize``, through one Spark call."""
    with tempfile.TemporaryDirectory() as tmp:
        roots = []
        for i, (name, what, apply, rel, span) in enumerate(drawn):
            root = copy_store(store_root(name), os.path.join(tmp, str(i)))
            apply(root)
            roots.append((what, root))
        reports = spark_verify(spark, [root for _, root in roots])
        for (what, root), got in zip(roots, reports):
            expected = verify(root)
            assert not expected.ok, what
            assert_same(expected, got, what)


def test_cap_lists_the_same_problems(spark, tmp_path):
    root = copy_store(store_root("engine"), str(tmp_path))
    _many_bodies("engine")(root)
    (root / "consumequeue" / "Pay" / "1" / "00000000000000000000").unlink()
    expected = verify(root, max_problems_per_kind=3)
    got = spark_verify(spark, root, max_problems_per_kind=3)  # one path: one report
    assert expected.suppressed.get("body_crc", 0) > 10
    assert_same(expected, got, "cap 3")


def test_not_a_store_and_a_store_without_queues_or_index(spark, tmp_path):
    """Stores with parts missing: no commitlog (not a store), and a commitlog alone."""
    empty = tmp_path / "empty"
    empty.mkdir()
    bare = copy_store("basic", str(tmp_path / "bare"))
    for sub in ("consumequeue", "index"):
        for p in sorted((bare / sub).rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        (bare / sub).rmdir()
    got = spark_verify(spark, [empty, bare])
    for root, report in zip([empty, bare], got):
        assert_same(verify(root), report, str(root))
    assert "not_a_store" in {p.kind for p in got[0].problems} and got[1].records > 0 and got[1].units == 0


def test_damage_at_a_range_boundary_rewalks_the_segment(spark, tmp_path, monkeypatch):
    """A record with a bad body CRC right after a range boundary: the range cannot find it as a start
    (a start needs a good CRC), so its walk begins at the next record -- not where the walk before it
    stopped.  The segment is then walked whole, and the report still equals the sequential one."""
    rel, pos, rec = [m for m in messages_of("basic") if m[2].body and m[1] > 1000][5]
    root = copy_store("basic", str(tmp_path))
    flip(root / rel, pos + 88, 0x01)
    stitched = []
    real = spark_verify_module.stitch_ranges
    monkeypatch.setattr(spark_verify_module, "stitch_ranges", lambda ranges: stitched.append(real(ranges)) or stitched[-1])
    split = pos - 10  # the boundary falls just before the damaged record (inside the one before it)
    got = spark_verify(spark, root, split_size=split)
    assert None in stitched  # the fallback ran
    expected = verify(root)
    assert [p.kind for p in expected.errors] == ["body_crc"]
    assert_same(expected, got, "boundary")
