"""The rules of ``rmqstore verify`` on small hand-made facts: each one passes a sound input
and words a fault exactly; and the Spark driver reaches verify through public names only.

The rules are pure (:mod:`rmqstore.read.verify.rules`, ``queue_rules``, ``index_rules``): facts
in, :class:`~rmqstore.read.verify.report.Problem` out, no file opened.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqstore.format.crc import crc32
from rmqstore.engine.index import index_key_hash
from rmqstore.files.store_dir import FolderListing, StoreFile, StrayFile, UnusableFile
from rmqstore.format.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqstore.read.verify import ERROR, WARNING, Problem
from rmqstore.read.verify import index_rules as ir
from rmqstore.read.verify import queue_rules as qr
from rmqstore.read.verify import rules

REPO = Path(__file__).resolve().parents[2]
SEG = "commitlog/00000000000000001024"


def rec(phys: int = 1024, body: bytes = b"hello", crc: int | None = None):
    return SimpleNamespace(physical_offset=phys, body=body, body_crc=crc32(body) if crc is None else crc)


LOG = rules.LogMap([(0, "commitlog/00000000000000000000", 1024), (1024, SEG, 1024)],
                   [(1500, 2048, SEG, 476)])


# -- the store, its folders, the commitlog's files ---------------------------------------------------------

def test_store_wide_problems():
    assert rules.unclean_shutdown() == Problem(
        "unclean_shutdown", "abort", None, "unclean shutdown (abort file present): the last run did not stop cleanly; "
        "the next start runs RocketMQ's abnormal recovery (re-checks the log from the checkpoint, re-dispatches)",
        WARNING)
    assert rules.not_a_store() == Problem("not_a_store", "commitlog", None, "no commitlog/ directory: this is not a "
                                          "store (or its commitlog was removed)")


def test_listing_problems():
    rel = lambda p: p.replace("/s/", "")  # noqa: E731
    clean = FolderListing("/s/commitlog", (StoreFile("/s/commitlog/" + "0" * 20, "0" * 20, 0, 1024),))
    assert rules.listing_problems(clean, "a commitlog file", rel) == []
    bad = FolderListing("/s/commitlog", (), (StrayFile("/s/commitlog/x.bak", "x.bak", "?"),),
                        (UnusableFile("/s/commitlog/" + "9" * 20, "9" * 20, "name past", bad_name=True),
                         UnusableFile("/s/commitlog/" + "1" * 20, "1" * 20, "a dangling symlink")))
    assert rules.listing_problems(bad, "a commitlog file", rel) == [
        Problem("unexpected_file", "commitlog/x.bak", None, "not a commitlog file; not read, left alone", WARNING),
        Problem("file_name", "commitlog/" + "9" * 20, None, "name past; not examined"),
        Problem("unreadable_file", "commitlog/" + "1" * 20, None, "a dangling symlink; not examined")]
    assert rules.strays_summary([]) is None
    assert rules.strays_summary(["commitlog/x", "index/y"]) == (
        "2 entries in store folders not named like store files, not read and left alone (commitlog/x, index/y)")


def test_segment_size_and_start():
    assert rules.segment_size(SEG, 1024, 1024) is None
    assert rules.segment_size(SEG, 1000, 1024) == Problem(
        "file_size", SEG, None, "commitlog file is 1000 bytes; the other commitlog files of this store are 1024 bytes "
        "(truncated, or bytes appended?)")
    assert rules.log_start(SEG, 0) is None
    assert rules.log_start(SEG, 1024).kind == "log_start" and rules.log_start(SEG, 1024).severity == WARNING


def test_segment_gap():
    assert rules.segment_gap(SEG, 1024, 1024, 1024) == [] and rules.segment_gap(SEG, 1024, None, 1024) == []
    assert rules.segment_gap("commitlog/00000000000000003072", 3072, 1024, 1024) == [
        Problem("missing_segment", "commitlog/00000000000000001024", None, "commitlog file missing: offsets "
                "1024..2047 are gone (the next file present is 00000000000000003072)"),
        Problem("missing_segment", "commitlog/00000000000000002048", None, "commitlog file missing: offsets "
                "2048..3071 are gone (the next file present is 00000000000000003072)")]
    assert rules.segment_gap(SEG, 1024, 2048, 1024) == [
        Problem("overlapping_segment", SEG, None, "starts at 1024, before the previous file ends (2048)")]


def test_the_end_of_the_log():
    assert rules.log_hole(SEG, 8, 1032, [SEG + "x"]).message == (
        f"the log ends here at offset 1032 (8 zero bytes), but later file(s) hold data ({SEG}x); recovery would "
        "drop everything after this point")
    assert rules.preallocated_segment(SEG).message.startswith("pre-allocated empty commitlog file")
    assert rules.garbage_after_end(SEG, 8, 20) == Problem(
        "garbage_after_end", SEG, 20, "non-zero bytes at position 20, after the end of the log at position 8: left "
        "by a torn write or by a recovery that cut the log here (RocketMQ ignores and overwrites them)", WARNING)


# -- records ---------------------------------------------------------------------------------------------------

def test_blank_and_chain():
    assert rules.blank_size(SEG, 1000, 24, 1024) is None
    assert rules.blank_size(SEG, 1000, 20, 1024) == Problem(
        "blank_size", SEG, 1000, "END_OF_FILE blank at position 1000 declares 20 bytes, reaching 1020, but the file "
        "is 1024 bytes")
    assert rules.no_blank(SEG, 1023, 1) == Problem(
        "no_blank", SEG, 1023, "the file ends 1 byte after its last record, without an END_OF_FILE blank; a writer "
        "always leaves room for one (file cut short?)")


def test_record_problems():
    assert rules.record_problems(1024, SEG, 0, rec()) == []
    assert rules.record_problems(1024, SEG, 0, rec(phys=9, crc=1)) == [
        Problem("physical_offset", SEG, 0, "record at physical offset 1024 says it is at 9 (PHYSICALOFFSET field)"),
        Problem("body_crc", SEG, 0, f"body CRC of the record at physical offset 1024 is {crc32(b'hello')}, the "
                "record says 1: the body (5 bytes) is damaged")]


def test_recovery_ends_the_log_only_where_nothing_points():
    assert rules.recovery_ends_log(SEG, 0, 1024, rec(), abort=False, referenced=False) is None
    assert rules.recovery_ends_log(SEG, 0, 1024, rec(crc=1), abort=False, referenced=True) is None
    p = rules.recovery_ends_log(SEG, 0, 1024, rec(crc=1), abort=True, referenced=False)
    assert p == Problem("torn_tail", SEG, 0, "the record at physical offset 1024 fails recovery's check (its body CRC "
                        "does not match) and no consume-queue unit or index entry points at or past it: the end of the "
                        "log; the abort file says the writer died: recovery will end the log here", WARNING)


def test_recast_turns_only_an_undecodable_record_into_a_warning():
    p = rules.undecodable_record(SEG, 4, 1028, "bad magic")
    assert p.message == ("undecodable record at physical offset 1028: bad magic; the size chain breaks here and the "
                         "rest of this file cannot be read") and p.severity == ERROR
    torn = rules.recast(p, rules.TORN_TAIL)
    assert (torn.kind, torn.severity, torn.message) == ("torn_tail", WARNING, f"{p.message}; {rules.TORN_TAIL[1]}")
    other = rules.no_blank(SEG, 0, 3)
    assert rules.recast(other, rules.TORN_TAIL) is other


def test_queue_offsets_follow_each_other():
    line = rules.QueueOffsets()
    assert [line.step(1024 * i, SEG, 0, ("T", 0), i) for i in range(3)] == [None, None, None]
    assert line.step(5000, SEG, 100, ("T", 0), 7) == Problem(
        "queue_offset_gap", SEG, 120, "record at physical offset 5000 has queue offset 7 in T/0; the previous record "
        "of that queue makes 3 the next")
    assert line.step(6000, SEG, 0, ("T", 0), 8) is None  # the new line goes on


def test_log_short_and_log_map():
    assert rules.log_short([1500], 1100, 1024, lambda rel: True) is None
    assert rules.log_short([1500, 1600], 1100, 1024, lambda rel: rel == SEG) == Problem(
        "log_short", SEG, 476, "2 consume-queue unit(s)/index entr(ies) point at offsets 1500..1600, past the end of "
        "the commitlog's data (1100): this file was cut short or zeroed")
    assert LOG.where(1030) == f"{SEG}:6" and LOG.where(5000) == "offset 5000"
    assert LOG.unreadable_where(1600) == f", inside the unreadable part of {SEG} (from position 476)"


def test_checkpoint_problems():
    good = SimpleNamespace(physic_msg_timestamp=1000, logics_msg_timestamp=1000, index_msg_timestamp=1000)
    assert rules.checkpoint_problems(present=True, size=4096, value=good, records=1, max_store_ts=2000) == []
    assert rules.checkpoint_problems(present=False, records=0) == []
    assert rules.checkpoint_problems(present=False, records=1)[0].severity == WARNING
    assert rules.checkpoint_problems(present=True, size=10, error="short") == [
        Problem("checkpoint", "checkpoint", None, "the checkpoint file is 10 bytes; RocketMQ writes 4096"),
        Problem("checkpoint", "checkpoint", None, "cannot read the checkpoint: short")]
    assert rules.checkpoint_problems(present=True, size=4096, value=good, max_store_ts=999) == [
        Problem("checkpoint_ahead", "checkpoint", 0, "physicMsgTimestamp 1000 is after the newest record's store time "
                "999: records it counted as flushed are gone", WARNING)]


# -- consume queues ----------------------------------------------------------------------------------------------

CQ = "consumequeue/T/0"


def test_queue_files():
    assert qr.queue_file_size(f"{CQ}/{0:020d}", 100, 100) is None
    assert qr.queue_file_size(f"{CQ}/{0:020d}", 90, 100).message == (
        "consume-queue file is 90 bytes; the other consume-queue files of this store are 100 bytes")
    assert qr.queue_file_gap(CQ, f"{CQ}/{100:020d}", "T", 0, 100, 100, 100) == []
    assert qr.queue_file_gap(CQ, f"{CQ}/{200:020d}", "T", 0, 200, 100, 100) == [
        Problem("missing_cq_file", f"{CQ}/{100:020d}", None, "consume-queue file missing: units 5..9 of T/0 are gone "
                f"(the next file present is {200:020d})")]


def test_scan_units():
    sound = qr.scan_units("T", 0, [(f"{CQ}/{0:020d}", 0, [qr.PRE_BLANK, (0, 10, 1), (10, 20, 2)])])
    assert (sound.min, sound.horizon, sound.problems, sound.reported) == (1, 30, [], set())
    bad = qr.scan_units("T", 0, [(f"{CQ}/{0:020d}", 0, [(50, 10, 1), (0, 0, 0), (40, 5, 1)])])
    assert bad.problems == [
        Problem("invalid_unit", f"{CQ}/{0:020d}", 20, "empty (never written) unit inside the queue: unit 1 of T/0 is "
                "(offset 0, size 0, tags 0); recovery stops the queue here"),
        Problem("unit_order", f"{CQ}/{0:020d}", 40, "unit 2 of T/0 points at offset 40, not after the previous "
                "unit's 50")]
    assert bad.reported == {1}


def test_unit_vs_record():
    args = (f"{CQ}/{0:020d}", 20, 1, "T", 0)
    assert qr.unit_vs_record(*args, (1024, 100, 7), 100, 7, 1024, SEG, 0, False) == []
    assert qr.unit_vs_record(*args, (1024, 100, -(2**31) - 5), 100, 7, 1024, SEG, 0, True) == []  # an ext address
    assert qr.unit_vs_record(*args, (1024, 99, 8), 100, 7, 1024, SEG, 0, False) == [
        Problem("unit_mismatch", f"{CQ}/{0:020d}", 20, f"unit 1 of T/0 says size 99; the record at 1024 ({SEG}:0) is "
                "100 bytes"),
        Problem("unit_mismatch", f"{CQ}/{0:020d}", 32, f"unit 1 of T/0 has tags code 8; the record at 1024 ({SEG}:0) "
                "gives 7")]


def test_stray_unit_verdicts():
    args = (f"{CQ}/{0:020d}", 20, 1, "T", 0)
    kw = dict(log_start=1024, data_end=2048, log=LOG)
    assert qr.stray_unit(*args, (10, 5, 0), target=None, **kw).expired
    past = qr.stray_unit(*args, (4096, 5, 0), target=None, **kw)
    assert past.past_end and past.problems[0].message == ("unit 1 of T/0 points at offset 4096, past the end of the "
                                                          "commitlog's data (2048)")
    inside = qr.stray_unit(*args, (1600, 5, 0), target=None, **kw)
    assert inside.problems[0].message.endswith(f"inside the unreadable part of {SEG} (from position 476)")
    damaged = qr.stray_unit(*args, (1024, 5, 0), target=(SEG, 0, ("U", 3, 9), 0, False), **kw)
    assert (damaged.pointed, damaged.blamed, damaged.reported) == (True, True, True)
    assert damaged.problems == [Problem("record_header", SEG, 0, "record at 1024 says it is U/3 queue offset 9, but "
                                        "unit 1 of T/0 points at it and no unit of U/3 does: its topic/queue id/queue "
                                        "offset fields are damaged")]
    stray = qr.stray_unit(*args, (1024, 5, 0), target=(SEG, 0, ("U", 3, 9), 0, True), **kw)
    assert not stray.blamed and stray.problems[0].kind == "unit_mismatch"
    prepared = qr.stray_unit(*args, (1024, 5, 0), target=(SEG, 0, ("T", 0, 1), TRANSACTION_PREPARED_TYPE, False), **kw)
    assert prepared.problems[0].offset == 36 and "prepared/rolled-back transaction" in prepared.problems[0].message


def test_records_without_units():
    first = (1024, SEG, 0, ("T", 0), 5)
    assert qr.unbacked_problems({}, None, bounds={}, exists=bool, horizon=0, cq_size=100, where=LOG.where) == []
    assert qr.unbacked_problems({f"{CQ}/{100:020d}": (2, 5, 6, first)}, (3, 1030), bounds={("T", 0): (0, 10)},
                                exists=lambda rel: False, horizon=1028, cq_size=100, where=LOG.where) == [
        Problem("record_without_unit", f"{CQ}/{100:020d}", None, f"2 record(s) of T/0 (queue offsets 5..6, first at "
                f"1024, {SEG}:0) have no unit (this file is missing): the consume-queue file that holds these units is "
                "missing or short, yet later records were dispatched (up to 1028); consumers cannot see them"),
        Problem("undispatched", SEG, None, "3 record(s) from offset 1030 on have no consume-queue unit yet (the "
                "furthest any queue reaches is 1028); the next start dispatches them", WARNING)]
    assert qr.unit_points_elsewhere(1024, SEG, 0, ("T", 0), 5, f"{CQ}/{100:020d}", 0, 999).kind == "record_header"
    assert qr.expired_units(0, 0) is None and qr.expired_units(2, 1024).severity == WARNING


# -- index ---------------------------------------------------------------------------------------------------------

SLOTS, NUM = 4, 8
IDX = "index/20260101000000000"


def index_facts(entries, count=None, slot_count=None, begin_phy=100, end_phy=300):
    header = SimpleNamespace(begin_timestamp=1_000_000, end_timestamp=1_005_000, begin_phy_offset=begin_phy,
                             end_phy_offset=end_phy, hash_slot_count=slot_count, index_count=count or len(entries))
    return ir.IndexFileFacts.of(IDX, header)


def sound_index():
    """Two entries: hashes 5 and 9 (slot 1), chained 2 -> 1."""
    entries = [(0, 0, 0, 0), (5, 100, 1, 0), (9, 300, 2, 1)]
    return entries, [0, 2, 0, 0]


def test_check_index_file():
    size = 40 + 4 * SLOTS + 20 * NUM
    entries, slots = sound_index()
    ok = ir.check_index_file(index_facts(entries, slot_count=1), size, SLOTS, NUM, entries, slots)
    assert (ok.problems, ok.usable) == ([], 3)
    broken = [(0, 0, 0, 0), (5, 100, 1, 0), (10, 50, -1, 1)]
    bad = ir.check_index_file(index_facts(broken, slot_count=2), size, SLOTS, NUM, broken, [0, 1, 0, 0])
    base = 40 + 4 * SLOTS
    assert bad.problems == [
        Problem("index_chain", IDX, base + 40 + 16, "entry 2 (slot 2) links to entry 1 of slot 1"),
        Problem("index_entry", IDX, base + 40 + 12, "entry 2 has a negative time difference -1"),
        Problem("index_entry", IDX, base + 40 + 4, "entry 2 points at offset 50, outside the file's [100, 300]"),
        Problem("index_order", IDX, base + 40 + 4, "entry 2 points at offset 50, before the previous entry's 100"),
        Problem("index_header", IDX, 32, "hashSlotCount is 2 but 1 slots are in use"),
        Problem("index_chain", IDX, base + 40, "1 entry is not reachable from any slot (first: entry 2); key lookups "
                "cannot find them")]
    assert ir.entry_count(3, size, SLOTS, NUM) == 3 and ir.entry_count(0, size, SLOTS, NUM) == 1


def test_index_file_size_and_order():
    size = 40 + 4 * SLOTS + 20 * NUM
    assert ir.index_file_size(IDX, size, SLOTS, NUM, False) is None
    assert ir.index_file_size(IDX, 10, SLOTS, NUM, True).severity == WARNING
    assert ir.index_file_size(IDX, 10, SLOTS, NUM, False).message == (
        f"index file is 10 bytes; with {SLOTS} slots and {NUM} entries (the other index files' size) it is {size} bytes")
    a, b = index_facts([0, 0, 0]), index_facts([0, 0, 0], begin_phy=200)
    later = index_facts([0, 0, 0], begin_phy=300, end_phy=400)
    assert ir.index_file_order(b, None) is None and ir.index_file_order(later, a) is None
    assert ir.index_file_order(b, a) == Problem("index_order", IDX, 16, "begins at offset 200, before the previous "
                                                "index file 20260101000000000 ends (300)")


def test_record_index():
    ix = index_facts([0, 0, 0])
    ix.usable = 3
    index = ir.IndexMap([ix], SLOTS)
    h = index_key_hash("T#k1")
    kw = dict(has_index=True, cq_horizon=1000)
    assert ir.record_index(index, 200, SEG, 0, "T", 0, 1_000_500, {"k1"}, [(0, 1, h, 0)], **kw) == ([], False)
    found, _ = ir.record_index(index, 200, SEG, 0, "T", 0, 1_000_500, {"k1", "k2"}, [(0, 1, h + 100, 0)], **kw)
    assert found == [
        Problem("index_entry", IDX, index.entry_pos(1), f"entry 1 has key hash {h + 100}, but the record it points at "
                f"(T at 200, {SEG}:0) has keys k1, k2, none hashing to it"),
        Problem("index_missing_key", IDX, None, f"the record at 200 ({SEG}:0, topic T) has no index entry for key(s) "
                "k1, k2; a key lookup will not find it")]
    found, _ = ir.record_index(index, 200, SEG, 0, "T", TRANSACTION_ROLLBACK_TYPE, 0, {"k1"}, [(0, 1, h, 0)], **kw)
    assert found[0].message.endswith("rolled-back records are not indexed")
    assert ir.record_index(index, 500, SEG, 0, "T", 0, 0, {"k1"}, None, **kw) == ([], True)  # past the index
    assert ir.time_ok(1000, 0, 1999) and not ir.time_ok(1000, 1, 1999)


def test_unresolved_entries_and_unindexed_records():
    ix = index_facts([0, 0, 0])
    ix.usable = 3
    index = ir.IndexMap([ix], SLOTS)
    assert ir.unresolved_entry(index, 10, 0, 1, log_start=1024, data_end=2048, log=LOG).expired
    past = ir.unresolved_entry(index, 4096, 0, 1, log_start=1024, data_end=2048, log=LOG)
    assert past.past_end and past.problems == [Problem("index_entry", IDX, index.entry_pos(1), "entry 1 points at "
                                                       "offset 4096, past the end of the commitlog's data (2048)")]
    assert ir.expired_entries(1, 1024).message == ("1 index entry points before the start of the commitlog (1024); "
                                                   "their messages expired")
    assert ir.unindexed_problems(index, [], interrupted=None, abort=False, cq_horizon=0) == []
    after = ir.unindexed_problems(index, [(400, SEG, 0)], interrupted=None, abort=True, cq_horizon=500)
    assert after == [Problem("index_missing_key", IDX, None, f"1 dispatched record(s) with keys from offset 400 "
                             f"({SEG}:0) on, after the index's last entry (300), have no index entry for their keys "
                             "(their consume-queue units exist, up to 500); a key lookup will not find them; the next "
                             "start indexes them again", WARNING)]


# -- the Spark driver uses public names only ------------------------------------------------------------------------

def test_spark_driver_imports_no_private_name_from_verify():
    tree = ast.parse((REPO / "rmqstore" / "spark" / "verify.py").read_text())
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 2 and (node.module or "").startswith("read.verify"):
            imported += [(node.module, a.name) for a in node.names]
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rmqstore.read.verify"):
            imported += [(node.module, a.name) for a in node.names]
    assert imported, "the Spark driver imports from rmqstore.read.verify"
    private = [(m, n) for m, n in imported if n.startswith("_") or any(part.startswith("_") for part in m.split("."))]
    assert private == []
    # and what it imports is what those modules export
    import importlib
    for module, name in imported:
        mod = importlib.import_module(f"rmqstore.{module}")
        assert name in getattr(mod, "__all__", ()) or isinstance(getattr(mod, name, None), type(ast)), (module, name)


def test_every_verify_module_declares_all_and_stays_small():
    for path in (REPO / "rmqstore" / "read" / "verify").glob("*.py"):
        tree = ast.parse(path.read_text())
        assert any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets)
                   for n in tree.body), path.name
        assert len(path.read_text().splitlines()) <= 520, path.name


@pytest.mark.parametrize("module", ["rules", "queue_rules", "index_rules"])
def test_rules_open_no_file(module):
    tree = ast.parse((REPO / "rmqstore" / "read" / "verify" / f"{module}.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imports = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert not ({"open", "os", "mmap"} & (names | imports)), module


# -- sizes: one inference, in store_dir ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["basic", "flush_tsp", "crash"])
def test_verify_guesses_the_sizes_open_store_infers(name):
    from conftest import FIXTURES

    from rmqstore.files.store_sizes import StoreSizes, guess_sizes, infer_config

    root = str(FIXTURES / name / "store")
    assert guess_sizes(root) == StoreSizes.of(infer_config(root))


def test_guessed_sizes_follow_the_most_common_file(tmp_path):
    from rmqstore.files.store_sizes import guess_sizes, most_common_size

    assert most_common_size([3, 5, 5]) == 5 and most_common_size([3, 5], first=3) == 3
    assert most_common_size([30, 40], prefer=lambda s: s % 20 == 0) == 40 and most_common_size([]) is None
    for qid, size in (("0", 40), ("1", 40), ("2", 33)):
        (tmp_path / "consumequeue" / "T" / qid).mkdir(parents=True)
        (tmp_path / "consumequeue" / "T" / qid / ("0" * 20)).write_bytes(bytes(size))
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / ("2" * 17)).write_bytes(bytes(40 + 84 * 3))
    sizes = guess_sizes(str(tmp_path))
    assert (sizes.commitlog, sizes.consume_queue, sizes.slots, sizes.entries) == (None, 40, 3, 12)
