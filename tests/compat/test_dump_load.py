"""``rmqstore dump`` and ``rmqstore load`` against the stores real RocketMQ 4.9.8 wrote.

Done means, for every fixture store (and both halves of ``crash``):

(a) the dump reproduces the manifest field for field -- every put the store accepted and
    wrote, every record the store wrote on its own -- with every CRC checked, and holds
    exactly as many records as RocketMQ's own walk found, at the offsets the harness's
    independent scan lists;
(b) ``dump | load --like FIXTURE`` writes commitlog files identical byte for byte to the
    fixture's, except the bytes after a blank record's 8-byte header: RocketMQ leaves them
    unspecified (stale pool bytes in ``flush_tsp``), we write zeros -- both are checked;
(c) bad input to load fails with exit code 2 and one line naming the input line;
(d) dump never changes a byte, a name or an mtime in the store it reads.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import FIXTURES, PUT_FIXTURES, manifest, pipe_dump_load, run_cli

from rmqstore.format.record import Address
from rmqstore.read.scan import CommitLogScan


#: (fixture, store folder) of every store written by RocketMQ
CASES = [(name, "store") for name in PUT_FIXTURES] + [("crash", "store"), ("crash", "recovered_store")]
CASE_IDS = [f"{n}/{s}" for n, s in CASES]


@lru_cache(maxsize=None)
def dump_text(name: str, store: str) -> str:
    code, out, err = run_cli(["dump", FIXTURES / name / store, "--json"])
    assert code == 0 and err == "", err
    return out


def dump_records(name: str, store: str) -> list[dict]:
    return [json.loads(line) for line in dump_text(name, store).splitlines()]


def accepted_puts(name: str) -> list[dict]:
    """Puts the store accepted *and* wrote (an oversize PUT_OK/END_OF_FILE put wrote nothing)."""
    m = manifest(name)
    puts = m["childRun"]["puts"] if name == "crash" else m["puts"]
    return [p for p in puts if p["status"] == "PUT_OK" and p.get("appendStatus") == "PUT_OK"]


def harness_scan(name: str, store: str) -> list[dict]:
    m = manifest(name)
    if name != "crash":
        return m["afterShutdown"]["commitLogScan(harness-side)"]
    key = "beforeRecovery" if store == "store" else "afterRecoveryAndShutdown"
    return m[key]["commitLogScan(harness-side)"]


# -- (a) the dump reproduces the manifest ------------------------------------------------------

@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_dump_matches_manifest(name, store):
    records = dump_records(name, store)
    by_offset = {r["offset"]: r for r in records}
    assert len(by_offset) == len(records)

    # every record decodes, sits where it says it does, and has a good CRC
    for r in records:
        if r["type"] == "message":
            assert r["crc_ok"] is True, r["offset"]
            assert r["physical_offset"] == r["offset"]
            assert r["version"] == 1
        else:
            assert r["type"] == "blank"
            assert set(r) == {"type", "offset", "total_size", "magic_code"}
            assert r["magic_code"] == -875286124

    # as many records as RocketMQ's own walk found
    m = manifest(name)
    walk = m.get("commitLogWalk(store API)") or m.get("recovery", {}).get("commitLogWalkStats")
    n_messages = sum(r["type"] == "message" for r in records)
    if name != "crash" or store == "recovered_store":
        assert n_messages == walk["commitLogWalkMessages"]
        assert len(records) - n_messages == walk["commitLogWalkBlanks"]
    if name == "crash":
        assert len(records) == m["recovery"]["commitLogWalkRecords"]  # every put survived the halt

    # at the offsets the harness's own scan lists, blanks included
    expected_offsets = []
    for f in harness_scan(name, store):
        base = int(f["file"])
        expected_offsets += [base + pos for pos, _ in f["recordList[pos,totalSize]"]]
        if f.get("blank"):
            expected_offsets.append(base + f["blank"]["pos"])
            assert by_offset[base + f["blank"]["pos"]]["total_size"] == f["blank"]["declaredSize"]
    assert [r["offset"] for r in records] == expected_offsets

    # every accepted put, field for field
    puts = accepted_puts(name)
    assert puts
    for p in puts:
        r = by_offset[p["wroteOffset"]]
        where = f"seq {p['seq']} at {p['wroteOffset']}"
        assert r["type"] == "message", where
        assert r["topic"] == p["topic"], where
        assert r["queue_id"] == p["queueId"], where
        assert r["flag"] == p["flag"], where
        assert r["sys_flag"] == p["sysFlag"], where
        assert r["body_crc"] == p["bodyCRC"], where
        assert not p.get("bodyOmitted"), where
        assert r["body"] == p["body"], where
        # a null properties string is stored with length 0 (boundary seq 19)
        assert r["properties"] == (p["properties"] if p["properties"] is not None else ""), where
        assert r["born_timestamp"] == p["bornTimestamp"], where
        assert r["store_timestamp"] == p["storeTimestamp"], where
        assert r["born_host"] == p["bornHost"], where
        assert r["store_host"] == p["storeHost"], where
        assert Address.parse(r["born_host"]).packed.hex() == p["bornHostBytes"], where
        assert Address.parse(r["store_host"]).packed.hex() == p["storeHostBytes"], where
        assert r["reconsume_times"] == p["reconsumeTimes"], where
        assert r["prepared_transaction_offset"] == p["preparedTransactionOffset"], where
        assert r["queue_offset"] == p["logicsOffset"], where
        assert r["msg_id"] == p["msgId"], where
        assert r["total_size"] == p["wroteBytes"], where
        assert r["physical_offset"] == p["wroteOffset"], where

    # records the store wrote on its own (delay messages delivered back, ...)
    extra = [x for x in m.get("recordsNotWrittenByAnyPut", []) if x.get("magic") == "0xdaa320a7"]
    for x in extra:
        r = by_offset[x["commitLogOffset"]]
        assert r["type"] == "message"
        assert (r["topic"], r["queue_id"], r["queue_offset"]) == (x["topic"], x["queueId"], x["queueOffset"])
        assert (r["body"], r["body_crc"], r["properties"]) == (x["body"], x["bodyCRC"], x["propertiesRaw"])
        assert (r["store_timestamp"], r["born_timestamp"]) == (x["storeTimestamp"], x["bornTimestamp"])
        assert (r["total_size"], r["msg_id"], r["sys_flag"]) == (x["storeSize"], x["msgId"], x["sysFlag"])
    # every message record is accounted for by a put or by the store itself
    assert n_messages == len(puts) + len(extra)


def test_scan_stops_where_the_log_ends():
    """crash/store: the walk ends at the never-written space and leaves the pre-allocated file alone."""
    scan = CommitLogScan(FIXTURES / "crash" / "store")
    assert sum(1 for _ in scan) == 303
    assert scan.stop.kind == "unwritten" and scan.stop.clean
    assert scan.stop.offset == manifest("crash")["childRun"]["maxPhyOffsetAtHalt"] == 214363
    assert scan.stop.segments_not_read == 1
    scan = CommitLogScan(FIXTURES / "basic" / "store")
    list(scan)
    assert scan.stop.offset == manifest("basic")["maxPhyOffset"]


def test_no_body(tmp_path):
    code, out, err = run_cli(["dump", FIXTURES / "txn_delay" / "store", "--json", "--no-body"])
    assert code == 0
    first = json.loads(out.splitlines()[0])
    assert "body" not in first and first["crc_ok"] is True
    code, _, err = run_cli(["load", tmp_path / "nobody", "--commitlog-file-size", 65536], out.encode())
    _assert_one_error_line(code, err, "line 1", "'body'")


# -- (b) dump | load writes the same bytes -----------------------------------------------------

def _load_into(tmp_path, name, store):
    target = tmp_path / "loaded"
    code, out, err = run_cli(["load", target, "--like", FIXTURES / name], dump_text(name, store).encode())
    assert (code, err) == (0, ""), err
    return target


@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_dump_load_is_byte_exact(tmp_path, name, store):
    records = dump_records(name, store)
    target = _load_into(tmp_path, name, store)
    ours = {p.name: p.read_bytes() for p in (target / "commitlog").iterdir()}
    theirs = {p.name: p.read_bytes() for p in (FIXTURES / name / store / "commitlog").iterdir()}
    size = manifest(name)["config"]["mappedFileSizeCommitLog"]

    # Which files must exist: those that hold at least one record.  crash/store also has the
    # next file RocketMQ's AllocateMappedFileService pre-created before the halt: all zeros,
    # holding no record, and removed by any clean shutdown (it is gone in recovered_store/).
    # A clean load does not leave such a file behind, so equality there means: the same
    # files holding records, and every other fixture file is all zeros.
    holding = {f"{(r['offset'] // size) * size:020d}" for r in records}
    assert set(ours) == holding
    for fname in set(theirs) - holding:
        assert name == "crash" and store == "store", fname
        assert theirs[fname].count(0) == len(theirs[fname]), f"{fname} is not an unused pre-allocated file"
    if not (name == "crash" and store == "store"):
        assert set(ours) == set(theirs)

    # blank tails: RocketMQ leaves them unspecified, we write zeros
    tails: dict[str, list[tuple[int, int]]] = {}
    for r in records:
        if r["type"] == "blank":
            pos = r["offset"] % size
            tails.setdefault(f"{r['offset'] - pos:020d}", []).append((pos + 8, pos + r["total_size"]))
    stale = 0
    for fname in sorted(holding):
        mine, ref = bytearray(ours[fname]), bytearray(theirs[fname])
        assert len(mine) == len(ref) == size, fname
        for start, end in tails.get(fname, []):
            assert mine[start:end].count(0) == end - start, f"{fname}: blank tail [{start},{end}) is not zeroed"
            stale += ref[start:end].count(0) != end - start
            mine[start:end] = ref[start:end] = bytes(end - start)
        if mine != ref:
            first = next(i for i, (a, b) in enumerate(zip(mine, ref)) if a != b)
            pytest.fail(f"{fname}: first differing byte at position {first} (offset {int(fname) + first})")
    if name == "flush_tsp":
        assert stale == 4  # the masking is needed: 4 files carry stale pool bytes (docs/formats.md, blank record)
    else:
        assert stale == 0


def test_append_in_two_halves(tmp_path):
    """load --append continues a loaded store; the result is the same as one load."""
    lines = dump_text("basic", "store").splitlines(keepends=True)
    half = len(lines) // 2
    target = tmp_path / "two"
    like = FIXTURES / "basic"
    assert run_cli(["load", target, "--like", like], "".join(lines[:half]).encode())[0] == 0
    code, _, err = run_cli(["load", target, "--like", like], "".join(lines[half:]).encode())
    assert code == 2 and "not empty" in err and "--append" in err
    code, _, err = run_cli(["load", target, "--append"], "".join(lines[half:]).encode())
    assert (code, err) == (0, "")
    for p in (FIXTURES / "basic" / "store" / "commitlog").iterdir():
        assert (target / "commitlog" / p.name).read_bytes() == p.read_bytes(), p.name


def test_renumber(tmp_path):
    """Without a record, offsets no longer match: refused, unless --renumber."""
    lines = dump_text("txn_delay", "store").splitlines(keepends=True)
    del lines[3]
    data = "".join(lines).encode()
    code, _, err = run_cli(["load", tmp_path / "a", "--like", FIXTURES / "txn_delay"], data)
    assert code == 2 and "line 4" in err and "offset 910" in err and "write position is 681" in err
    code, _, err = run_cli(["load", tmp_path / "b", "--like", FIXTURES / "txn_delay", "--renumber"], data)
    assert (code, err) == (0, "")
    records = [json.loads(x) for x in run_cli(["dump", tmp_path / "b"])[1].splitlines()]
    assert len(records) == 23 and all(r["crc_ok"] for r in records)
    # the COMMIT record that pointed at the half message at 910 (now at 681) follows it
    commit = next(r for r in records if r["sys_flag"] == 12)
    assert commit["prepared_transaction_offset"] == 681


def test_cli_as_a_pipe(tmp_path):
    """``python -m rmqstore.cli dump ... | python -m rmqstore.cli load ...``"""
    target = tmp_path / "piped"
    pipe_dump_load("boundary", target)
    for p in (FIXTURES / "boundary" / "store" / "commitlog").iterdir():
        assert (target / "commitlog" / p.name).read_bytes() == p.read_bytes(), p.name


# -- a copy keeps damage as recorded; --repair says what it changes ---------------------------

def _damaged_copy(tmp_path) -> tuple[Path, dict]:
    """basic's commitlog with one body byte of its last record flipped (its CRC now wrong)."""
    import shutil

    root = tmp_path / "damaged"
    shutil.copytree(FIXTURES / "basic" / "store" / "commitlog", root / "commitlog")
    last = [r for r in dump_records("basic", "store") if r["type"] == "message"][-1]
    size = manifest("basic")["config"]["mappedFileSizeCommitLog"]
    seg = root / "commitlog" / f"{last['offset'] - last['offset'] % size:020d}"
    data = bytearray(seg.read_bytes())
    body_at = last["offset"] % size + last["total_size"] - len(last["body"]) // 2 - 1 - len(
        last["topic"].encode()) - 2 - len(last["properties"].encode())
    assert data[body_at:body_at + len(last["body"]) // 2].hex() == last["body"]
    data[body_at] ^= 0xFF
    seg.write_bytes(bytes(data))
    return root, last


def _commitlog(root: Path) -> dict:
    return {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()}


def test_load_copies_a_bad_body_crc_byte_for_byte(tmp_path):
    src, last = _damaged_copy(tmp_path)
    code, out, err = run_cli(["dump", src, "--json"])
    assert code == 0
    dumped = [json.loads(x) for x in out.splitlines()]
    assert [r["offset"] for r in dumped if r.get("crc_ok") is False] == [last["offset"]]
    target = tmp_path / "copy"
    code, out, err = run_cli(["load", target, "--like", FIXTURES / "basic"], out.encode())
    assert code == 0, err
    assert _commitlog(target) == _commitlog(src), "the copy must keep the recorded (bad) CRC"
    assert err.count("\n") == 1 and "warning" in err and str(last["offset"]) in err and "--repair" in err
    recopied = [json.loads(x) for x in run_cli(["dump", target])[1].splitlines()]
    assert recopied == dumped


def test_load_repair_recomputes_and_says_so(tmp_path):
    from rmqstore.format.crc import crc32

    src, last = _damaged_copy(tmp_path)
    text = run_cli(["dump", src, "--json"])[1]
    target = tmp_path / "repaired"
    code, out, err = run_cli(["load", target, "--like", FIXTURES / "basic", "--repair"], text.encode())
    assert (code, err) == (0, ""), err
    lineno, damaged = next((i, json.loads(x)) for i, x in enumerate(text.splitlines(), 1)
                           if json.loads(x).get("crc_ok") is False)
    new_crc = crc32(bytes.fromhex(damaged["body"]))
    assert new_crc != last["body_crc"] == damaged["body_crc"]
    assert out.splitlines() == [f"repaired: line {lineno}: the record at offset {last['offset']}: "
                                f"body CRC {last['body_crc']} -> {new_crc}"]
    ours, theirs = _commitlog(target), _commitlog(src)
    assert ours.keys() == theirs.keys()
    diffs = [(name, i) for name in ours for i, (a, b) in enumerate(zip(ours[name], theirs[name])) if a != b]
    size = manifest("basic")["config"]["mappedFileSizeCommitLog"]
    crc_at = last["offset"] % size + 8
    assert {n for n, _ in diffs} == {f"{last['offset'] - last['offset'] % size:020d}"}
    assert all(crc_at <= i < crc_at + 4 for _, i in diffs)
    assert all(json.loads(x)["crc_ok"] for x in run_cli(["dump", target])[1].splitlines()
               if json.loads(x)["type"] == "message")
    # nothing to repair: --repair changes nothing and says nothing
    code, out, err = run_cli(["load", tmp_path / "clean", "--like", FIXTURES / "basic", "--repair"],
                             dump_text("basic", "store").encode())
    assert (code, out, err) == (0, "", "")


def test_load_rejects_a_missing_body_crc(tmp_path):
    lines = dump_text("txn_delay", "store").splitlines(keepends=True)[:4]
    obj = json.loads(lines[1])
    del obj["body_crc"]
    lines[1] = json.dumps(obj) + "\n"
    code, _, err = _bad_load(tmp_path, lines)
    _assert_one_error_line(code, err, "line 2", "'body_crc'")


# -- load --like copies every size of the original -------------------------------------------

def _sizes(root: Path) -> dict:
    """Every file's size by path; index files (named by the time they were made) as one sorted list."""
    out = {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")
           if p.is_file() and p.parent.name not in ("config", "index") and p.name not in ("lock", "abort")}
    out["index/*"] = sorted(p.stat().st_size for p in (root / "index").iterdir())
    return out


@pytest.mark.parametrize("like", ["fixture", "store"])
def test_load_like_copies_every_file_size(tmp_path, like):
    original = FIXTURES / "basic" / "store"
    target = tmp_path / "copy"
    code, _, err = run_cli(["load", target, "--like", original.parent if like == "fixture" else original],
                           dump_text("basic", "store").encode())
    assert (code, err) == (0, ""), err
    ours, theirs = _sizes(target), _sizes(original)
    cq = {k: v for k, v in theirs.items() if k.startswith("consumequeue")}
    assert cq and set(cq.values()) == {6000}
    assert {k: v for k, v in ours.items() if k.startswith("consumequeue")} == cq
    assert ours["index/*"] == theirs["index/*"] == [8440] * 4
    assert ours == theirs


def test_index_dimensions_come_from_the_files():
    from rmqstore.files.store_sizes import index_dimensions, infer_config

    for name in ("basic", "boundary", "txn_delay", "flush_async", "crash"):
        assert index_dimensions(str(FIXTURES / name / "store")) == (100, 400), name
        cfg = infer_config(str(FIXTURES / name / "store"))
        assert (cfg.mapped_file_size_consume_queue, cfg.max_hash_slot_num, cfg.max_index_num) == (6000, 100, 400)


def _write_index_store(root: Path, slots: int, entries: int, keys: int):
    """A store whose index files were written with (slots, entries): ``keys`` messages with a key
    each, or (``keys == 0``) three messages with none."""
    from rmqstore import Message, MessageStore, StoreConfig

    cfg = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=600,
                      max_hash_slot_num=slots, max_index_num=entries)
    with MessageStore(root, cfg) as store:
        for i in range(keys or 3):
            props = f"KEYS\x01key-{i}\x02" if keys else ""
            assert store.put_message(Message("T", b"x", properties=props)).ok
        assert store.wait_dispatched()
    assert len(os.listdir(root / "index")) >= 1
    return cfg


@pytest.mark.parametrize("slots, entries, keys", [
    (100, 400, 30),     # RocketMQ's ratio, partly full
    (7, 1000, 50),      # another ratio, and a size that 40 + 84*n does not fit
    (500, 40, 100),     # more slots than entries; several files, the full ones decide
    (60, 300, 299),     # one entry short of full
])
def test_index_dimensions_other_ratios(tmp_path, slots, entries, keys):
    from rmqstore.files.store_sizes import index_dimensions

    _write_index_store(tmp_path / "s", slots, entries, keys)
    assert index_dimensions(str(tmp_path / "s")) == (slots, entries)


def test_index_dimensions_of_keyless_files_are_ambiguous(tmp_path):
    from rmqstore.common.errors import StoreError
    from rmqstore.files.store_sizes import index_dimensions

    _write_index_store(tmp_path / "s", 7, 1000, 0)
    with pytest.raises(StoreError, match="no index file holds a key.*max_hash_slot_num"):
        index_dimensions(str(tmp_path / "s"), strict=True)
    assert index_dimensions(str(tmp_path / "s"), slots=7) == (7, 1000)
    assert index_dimensions(str(tmp_path / "s"), entries=1000) == (7, 1000)
    with pytest.raises(StoreError, match="20068"):
        index_dimensions(str(tmp_path / "s"), slots=8, entries=1000)


def test_load_like_takes_explicit_index_sizes(tmp_path):
    src = tmp_path / "src"
    _write_index_store(src, 7, 1000, 0)
    text = run_cli(["dump", src])[1]
    code, _, err = run_cli(["load", tmp_path / "a", "--like", src], text.encode())
    assert code == 2 and "--max-hash-slot-num" in err and "--max-index-num" in err
    code, _, err = run_cli(["load", tmp_path / "b", "--like", src, "--max-hash-slot-num", "7",
                            "--max-index-num", "1000"], text.encode())
    assert (code, err) == (0, ""), err
    assert _sizes(tmp_path / "b") == _sizes(src)
    code, _, err = run_cli(["load", tmp_path / "c", "--like", src, "--max-hash-slot-num", "8",
                            "--max-index-num", "1000"], text.encode())
    assert code == 2 and "index" in err


def test_load_with_explicit_sizes_and_no_original(tmp_path):
    target = tmp_path / "t"
    code, _, err = run_cli(["load", target, "--commitlog-file-size", "65536", "--consume-queue-file-size", "6000",
                            "--max-hash-slot-num", "100", "--max-index-num", "400"],
                           dump_text("basic", "store").encode())
    assert (code, err) == (0, ""), err
    assert _sizes(target) == _sizes(FIXTURES / "basic" / "store")


# -- (c) bad input ----------------------------------------------------------------------------

def _bad_load(tmp_path, lines):
    return run_cli(["load", tmp_path / "bad", "--like", FIXTURES / "txn_delay"], "".join(lines).encode())


def _assert_one_error_line(code, err, *needles):
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rmqstore: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize("damage", ["truncated", "not_json", "array", "not_utf8"])
def test_load_rejects_malformed_json(tmp_path, damage):
    lines = dump_text("txn_delay", "store").splitlines(keepends=True)[:5]
    lines[2] = {"truncated": lines[2][:40] + "\n", "not_json": "hello\n", "array": "[1, 2]\n",
                "not_utf8": None}[damage]
    if damage == "not_utf8":
        data = "".join(lines[:2]).encode() + b'{"type": "\xff"}\n' + "".join(lines[3:]).encode()
        code, _, err = run_cli(["load", tmp_path / "bad", "--like", FIXTURES / "txn_delay"], data)
    else:
        code, _, err = _bad_load(tmp_path, lines)
    _assert_one_error_line(code, err, "line 3")


@pytest.mark.parametrize("field", ["store_timestamp", "topic", "born_host", "queue_offset", "type", "offset"])
def test_load_rejects_a_missing_field(tmp_path, field):
    lines = dump_text("txn_delay", "store").splitlines(keepends=True)[:4]
    obj = json.loads(lines[1])
    del obj[field]
    lines[1] = json.dumps(obj) + "\n"
    code, _, err = _bad_load(tmp_path, lines)
    _assert_one_error_line(code, err, "line 2", repr(field))


@pytest.mark.parametrize("field,value", [("body", "xyz"), ("born_host", "nowhere"), ("flag", "1"),
                                         ("queue_id", 2**31), ("topic", 5)])
def test_load_rejects_a_bad_value(tmp_path, field, value):
    lines = dump_text("txn_delay", "store").splitlines(keepends=True)[:4]
    obj = json.loads(lines[1])
    obj[field] = value
    lines[1] = json.dumps(obj) + "\n"
    code, _, err = _bad_load(tmp_path, lines)
    _assert_one_error_line(code, err, "line 2", repr(field))


def test_load_rejects_a_blank_in_the_wrong_place(tmp_path):
    lines = dump_text("basic", "store").splitlines(keepends=True)
    first_blank = next(i for i, x in enumerate(lines) if '"blank"' in x)
    code, _, err = run_cli(["load", tmp_path / "x", "--like", FIXTURES / "basic"],
                           "".join(lines[:first_blank - 1] + [lines[first_blank]]).encode())
    _assert_one_error_line(code, err, f"line {first_blank}", "blank record recorded at offset")
    # the wrong segment size: the blank does not reach the end of the segment
    code, _, err = run_cli(["load", tmp_path / "y", "--commitlog-file-size", 1 << 20],
                           "".join(lines[:first_blank + 1]).encode())
    _assert_one_error_line(code, err, f"line {first_blank + 1}", "segment size")


def test_load_refuses_a_non_empty_store(tmp_path):
    target = tmp_path / "full"
    target.mkdir()
    (target / "something").write_bytes(b"x")
    data = dump_text("txn_delay", "store").encode()
    code, _, err = run_cli(["load", target, "--like", FIXTURES / "txn_delay"], data)
    _assert_one_error_line(code, err, "not empty", "--append")
    assert sorted(p.name for p in target.iterdir()) == ["something"]


def test_cli_errors_are_one_line(tmp_path):
    code, _, err = run_cli(["dump", tmp_path / "missing"])
    _assert_one_error_line(code, err, "no such store directory")
    code, _, err = run_cli(["load", tmp_path / "t", "--like", tmp_path / "missing"], b"")
    _assert_one_error_line(code, err, "--like")


# -- (d) dump is read-only ----------------------------------------------------------------------

def _snapshot(root: Path) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            st = os.stat(os.path.join(dirpath, d))
            out[os.path.join(dirpath, d)] = ("dir", st.st_mtime_ns)
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                out[p] = (fh.read(), st.st_mtime_ns, st.st_size, st.st_mode)
    return out


@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_dump_does_not_touch_the_store(name, store):
    root = FIXTURES / name / store
    before = _snapshot(root)
    code, out, _ = run_cli(["dump", root, "--json"])
    assert code == 0 and out
    assert _snapshot(root) == before


# -- the command line's modules: one-way imports, small modules ---------------------------------------

_PACKAGE = Path(__file__).resolve().parents[2] / "rmqstore"


def _modules_after_import(module: str) -> set[str]:
    import subprocess
    import sys

    code = f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m.startswith('rmqstore')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=_PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_cli_and_spark_cli_do_not_import_each_other():
    """``rmqstore.cli`` adds ``rmqstore spark`` when its parser is built; ``rmqstore.spark.cli`` (the
    spark-submit entry point) never imports ``rmqstore.cli``: no cycle, in a fresh interpreter each."""
    after_cli = _modules_after_import("rmqstore.cli")
    assert "rmqstore.cli" in after_cli and "rmqstore.spark.cli" not in after_cli
    after_spark = _modules_after_import("rmqstore.spark.cli")
    assert "rmqstore.spark.cli" in after_spark and "rmqstore.cli" not in after_spark
    # and running the spark entry point's parser does not pull it in either
    import subprocess
    import sys

    code = ("import sys\nfrom rmqstore.spark.cli import main\ncode = main(['stats', '/no/such/store'])\n"
            "assert 'rmqstore.cli' not in sys.modules, 'rmqstore.cli imported'\nsys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=_PACKAGE.parent)
    assert proc.returncode == 2, proc.stderr
    assert "rmqstore: error:" in proc.stderr and "Traceback" not in proc.stderr


def test_command_line_modules_stay_small():
    for path in [_PACKAGE / "cli.py", _PACKAGE / "read" / "replay.py", *sorted((_PACKAGE / "commands").glob("*.py"))]:
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines < 500, f"{path.name}: {lines} lines"


def test_the_replay_engine_is_its_own_module():
    from rmqstore.read import replay
    from rmqstore.common.errors import RmqStoreError

    assert replay.__all__ == ["Loader", "ReplayError"] and issubclass(replay.ReplayError, RmqStoreError)
    assert not hasattr(__import__("rmqstore.cli").cli, "_Loader")
