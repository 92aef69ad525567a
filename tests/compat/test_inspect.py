"""``rmqstore inspect``, ``msg`` and ``verify`` on every store RocketMQ 4.9.8 wrote.

Done means, for every fixture store (and both halves of ``crash``):

(a) every command runs and exits as documented: inspect 0; msg 0 when found, 1 when not,
    2 for usage errors; verify 0 on every fixture -- including ``crash/store``, whose abort
    file and pre-allocated next commitlog file are *warnings* (RocketMQ's start repairs
    both; the fixture has no torn tail: the killed writer's last record is whole), so its
    report lists exactly those two warnings and no error;
(b) no command changes the store: the set of paths, the sha256 of every file and the
    mtime of every file and directory are the same before and after (:func:`snapshot`);
(c) what the commands show agrees with the manifest: inspect's commitlog files, blanks and
    stale tail bytes with the harness's own scan, index headers, checkpoint values and
    consume-queue min/max with what RocketMQ reported; msg finds every stored put by its
    msgId and by its offset, and every key query returns RocketMQ's offsets;
(d) the human output renders both ways: plain aligned text when stdout is not a terminal,
    rich tables (and progress bars on stderr) when it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, PUT_FIXTURES, commitlog_records, manifest, run_cli, snapshot

from rmqstore.format.properties import string_to_properties
from rmqstore.format.record import BlankRecord
from rmqstore.read.inspect_store import find_by_key, find_by_msg_id, inspect, read_message_at
from rmqstore.store import open_store

#: (fixture, store folder) of every store written by RocketMQ
CASES = [(name, "store") for name in PUT_FIXTURES] + [("crash", "store"), ("crash", "recovered_store")]
CASE_IDS = [f"{n}/{s}" for n, s in CASES]


def store_dir(name: str, store: str) -> Path:
    return FIXTURES / name / store


def stored_puts(name: str) -> list[dict]:
    """Puts whose record is in the store (an oversize PUT_OK/END_OF_FILE put wrote nothing)."""
    m = manifest(name)
    puts = m["childRun"]["puts"] if name == "crash" else m["puts"]
    return [p for p in puts if p["status"] == "PUT_OK" and p.get("appendStatus") == "PUT_OK"]


def expected_state(name: str, store: str) -> dict:
    """The manifest's description of the files on disk of this store."""
    m = manifest(name)
    if name != "crash":
        return m["afterShutdown"]
    return m["beforeRecovery"] if store == "store" else m["afterRecoveryAndShutdown"]


@pytest.fixture(scope="module")
def snapshots():
    return {case: snapshot(store_dir(*case)) for case in CASES}


# -- inspect ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_inspect_runs_and_changes_nothing(name, store, snapshots):
    path = store_dir(name, store)
    code, out, err = run_cli(["inspect", path])
    assert code == 0, err
    assert err == ""
    assert out.startswith("store ") and "\nhealth " in out and "commitlog files" in out
    code, out, err = run_cli(["inspect", path, "--json"])
    assert code == 0, err
    info = json.loads(out)
    assert snapshot(path) == snapshots[(name, store)]
    if name == "crash" and store == "store":
        assert info["abort"] is True
        assert info["health"].startswith("unclean shutdown (abort file present)")
        assert "pre-allocated empty commitlog file" in info["health"]
    else:
        assert info["health"] == "OK", info["issues"]
        assert info["abort"] is False


@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_inspect_agrees_with_manifest(name, store):
    state = expected_state(name, store)
    with _opened(name, store) as st:
        info = inspect(st)
    segs = info["commitlog"]["segments"]
    scan = state["commitLogScan(harness-side)"]
    assert [s["file"] for s in segs] == [f["file"] for f in scan]
    for seg, f in zip(segs, scan):
        assert seg["size"] == f["size"]
        assert seg["records"] == f["records"], seg["file"]
        blank = f.get("blank")
        if blank:
            assert seg["end"] == "blank"
            assert seg["blank"]["pos"] == blank["pos"]
            assert seg["blank"]["declaredSize"] == blank["declaredSize"]
            assert seg["blank"]["tailNonZeroBytes"] == blank["tailNonZeroBytes"]
        else:
            assert seg["end"] == "unwritten"
    assert [i["file"] for i in info["index"]] == [h["file"] for h in state["indexFileHeaders"]]
    for got, want in zip(info["index"], state["indexFileHeaders"]):
        for k in ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount",
                  "indexCount"):
            assert got[k] == want[k], (got["file"], k)
    cp = state["checkpointFile"]
    for k in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        assert info["checkpoint"][k] == cp[k]
    assert info["abort"] == state["abortFileExists"]
    assert info["lock"]["exists"] and info["lock"]["content"] == "lock" and info["lock"]["heldByPid"] is None
    assert info["disk"]["total"] > 0
    if name != "crash":
        queues = {(q["topic"], q["queueId"]): q for q in manifest(name)["consumeQueues"]}
        got = {(t["topic"], q["queueId"]): q for t in info["topics"] for q in t["queues"]}
        assert set(got) <= set(queues)
        for key, q in queues.items():
            if key not in got:  # the manifest also lists queues that never got a unit (no files)
                assert q["maxOffsetInQueue"] == 0, key
                continue
            assert (got[key]["minOffset"], got[key]["maxOffset"]) == (q["minOffsetInQueue"], q["maxOffsetInQueue"])


class _opened:
    """``with _opened(name, store) as st``: a fixture store opened read-only, closed after."""

    def __init__(self, name, store):
        self.store = open_store(store_dir(name, store), read_only=True)

    def __enter__(self):
        return self.store

    def __exit__(self, *exc):
        self.store.close()


def _info(name, store) -> dict:
    with _opened(name, store) as st:
        return inspect(st)


@pytest.mark.parametrize("name", ["txn_delay", "basic"])
def test_inspect_says_which_message_count_is_which(name):
    """inspect and verify count messages on the same store differently, each rightly: verify every
    message record in the commitlog, inspect the messages its consume queues hold.  inspect names both,
    and the transaction halves (prepared, rolled back) that are the difference: RocketMQ gives them no
    queue unit."""
    from rmqstore.format.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

    messages = [r for _, r in commitlog_records(name) if not isinstance(r, BlankRecord)]
    halves = sum(r.sys_flag & TRANSACTION_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
                 for r in messages)
    assert (halves > 0) == (name == "txn_delay")
    info = _info(name, "store")
    assert info["commitlog"]["messages"] == len(messages)
    assert info["commitlog"]["transactionHalves"] == halves
    queued = info["consumeQueues"]["messages"]
    code, out, _ = run_cli(["inspect", store_dir(name, "store")])
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("messages"))
    want = f"{len(messages):,} in the commitlog (verify's count), {queued:,} in"
    assert want in line, line
    assert (f"; {halves:,} of those in the commitlog are transaction halves (prepared or rolled back), which no "
            "queue holds" in line) == bool(halves), line
    code, out, _ = run_cli(["verify", store_dir(name, "store")])
    assert f"{len(messages):,} messages" in out and f"{queued:,} units (the messages in queues" in out, out


def test_inspect_gives_the_index_files_capacity_as_its_table_does():
    """An index file of maxIndexNum entries holds maxIndexNum - 1 (RocketMQ never uses entry 0): the summary
    line says so, as the files' table does ("1,999 entries per file", not the setting's 2,000)."""
    info = _info("basic", "store")
    n = info["config"]["indexEntries"]
    assert info["config"]["indexCapacity"] == n - 1 and all(i["capacity"] == n - 1 for i in info["index"])
    code, out, _ = run_cli(["inspect", store_dir("basic", "store")])
    line = next(ln for ln in out.splitlines() if ln.startswith("index "))
    assert f"{n - 1:,} entries per file (maxIndexNum {n:,}: entry 0 is never used)" in line, line
    assert f"/{n - 1:,} " in out


# -- msg ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_msg_finds_every_put_by_msg_id_and_offset(name, store):
    """All puts through the library (one open store); a sample through the CLI."""
    puts = stored_puts(name)
    with _opened(name, store) as st:
        for p in puts:
            offset, rec = find_by_msg_id(st, p["msgId"])
            assert offset == p["wroteOffset"] and rec.topic == p["topic"] and rec.queue_id == p["queueId"]
            assert rec.total_size == p["wroteBytes"] and rec.properties == (p["properties"] or "")
            assert read_message_at(st, p["wroteOffset"]) == rec
    path = store_dir(name, store)
    before = snapshot(path)
    for p in puts[::max(1, len(puts) // 6)] + puts[-1:]:
        code, out, err = run_cli(["msg", path, p["msgId"], "--json"])
        assert code == 0, err
        (info,) = [json.loads(line) for line in out.splitlines()]
        assert (info["offset"], info["msg_id"], info["topic"]) == (p["wroteOffset"], p["msgId"], p["topic"])
        assert info["crc_ok"] is True and info["body_crc"] == p["bodyCRC"] and info["body"] == p["body"]
        assert info["born_host"] == p["bornHost"] and info["store_host"] == p["storeHost"]
        # prepared and rolled-back transaction records get no unit
        assert info["consume_queue"]["pointsHere"] is (p["sysFlag"] & 0xC in (0x0, 0x8))
        code, out2, err = run_cli(["msg", path, "--offset", p["wroteOffset"], "--json"])
        assert code == 0 and json.loads(out2) == info
        code, text, err = run_cli(["msg", path, p["msgId"]])
        assert code == 0 and err == ""
        assert f"msgId          {p['msgId']}" in text and "ok" in text
    assert snapshot(path) == before


@pytest.mark.parametrize("name", [n for n in PUT_FIXTURES if manifest(n)["queries"]])
def test_msg_by_key_matches_rocketmq_queries(name):
    path = store_dir(name, "store")
    before = snapshot(path)
    for q in manifest(name)["queries"]:
        code, out, err = run_cli(["msg", path, "--key", q["key"], "--topic", q["topic"], "--json", "--no-body"])
        got = sorted(json.loads(line)["offset"] for line in out.splitlines())
        assert got == sorted(q["phyOffsets"]), q
        assert code == (0 if q["phyOffsets"] else 1), err
        if not q["phyOffsets"]:
            assert err.startswith("rmqstore: not found:")
    assert snapshot(path) == before


def test_msg_by_key_without_topic_and_by_uniq_key():
    with _opened("basic", "store") as st:
        everywhere = find_by_key(st, "order-7")
    want = [off for off, r in commitlog_records("basic") if not isinstance(r, BlankRecord)
            and "order-7" in string_to_properties(r.properties).get("KEYS", "").split(" ")]
    assert [o for o, _ in everywhere] == want
    for q in manifest("basic")["queries"]:  # the ones RocketMQ answered are among them
        if q["key"] == "order-7":
            assert set(q["phyOffsets"]) <= set(want)
    # a client UNIQ_KEY given where a msgId goes is found through the index
    q = manifest("basic")["queries"][0]
    code, out, err = run_cli(["msg", store_dir("basic", "store"), q["key"], "--json"])
    assert code == 0, err
    assert [json.loads(line)["offset"] for line in out.splitlines()] == q["phyOffsets"]


@pytest.mark.parametrize("argv,code,text", [
    (["C633640700002A9F0000000000000001"], 1, "not found: msgId"),
    (["--offset", "1"], 1, "not found: no record starts at offset 1"),
    (["--offset", "99999999"], 1, "not found: offset 99999999"),
    (["--key", "no-such-key"], 1, "not found: no message has key"),
    (["not-hex"], 2, "error: a msgId has 32"),
    ([], 2, "error: give exactly one of"),
    (["--key", "k", "--offset", "0"], 2, "error: give exactly one of"),
    (["--offset", "0", "--topic", "T"], 2, "error: --topic goes with --key"),
    (["--offset", "-5"], 2, "error: --offset"),
    (["--offset", "x"], 2, "error: --offset"),
])
def test_msg_not_found_and_usage_errors(argv, code, text):
    got, out, err = run_cli(["msg", store_dir("basic", "store"), *argv])
    assert got == code, err
    assert text in err and out == ""


def test_msg_offset_inside_a_record_names_the_record_that_holds_it():
    """An offset inside a record is answered as the inspector answers it: which record holds that byte
    (its start, size and topic) and the command that shows it -- not the bytes there read as a header
    ("bad magic code")."""
    records = [(o, r) for o, r in commitlog_records("basic") if not isinstance(r, BlankRecord)]
    (start, rec), (after, _) = records[3], records[4]
    inside = start + rec.total_size // 2
    store = store_dir("basic", "store")
    code, out, err = run_cli(["msg", store, "--offset", str(inside)])
    assert code == 1 and out == ""
    assert "magic" not in err, err
    assert (f"no record starts at offset {inside}: it is inside the message at offset {start} "
            f"({rec.total_size} bytes, topic {rec.topic})") in err, err
    assert f"--offset {start}" in err, err
    code, out, _ = run_cli(["msg", store, "--offset", str(start), "--json"])
    assert code == 0 and json.loads(out)["offset"] == start and after == start + rec.total_size
    blank = next(o for o, r in commitlog_records("basic") if isinstance(r, BlankRecord))
    code, _, err = run_cli(["msg", store, "--offset", str(blank + 5)])
    assert code == 1 and f"inside the END_OF_FILE blank record at offset {blank}" in err, err


# -- verify -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,store", CASES, ids=CASE_IDS)
def test_verify_clean_on_every_fixture(name, store, snapshots):
    path = store_dir(name, store)
    code, out, err = run_cli(["verify", path, "--json"])
    assert code == 0, out
    report = json.loads(out)
    assert report["ok"] is True and report["errors"] == 0
    records = commitlog_records(name, store)
    blanks = sum(1 for _, r in records if isinstance(r, BlankRecord))
    assert (report["checked"]["records"], report["checked"]["blanks"]) == (len(records) - blanks, blanks)
    assert report["checked"]["units"] == sum(q["maxOffset"] - q["minOffset"] for t in _info(name, store)["topics"]
                                             for q in t["queues"])
    kinds = sorted(p["kind"] for p in report["problems"])
    if name == "crash" and store == "store":
        # the writer died: abort left behind and the next file pre-allocated -- warnings, not damage
        assert kinds == ["preallocated_segment", "unclean_shutdown"]
        assert all(p["severity"] == "warning" for p in report["problems"])
    else:
        assert kinds == []
    code, out, err = run_cli(["verify", path])
    assert code == 0 and "result          OK: no damage found" in out
    assert snapshot(path) == snapshots[(name, store)]


def test_verify_usage_errors(tmp_path):
    code, out, err = run_cli(["verify", tmp_path / "nope"])
    assert code == 2 and "no such store directory" in err
    code, out, err = run_cli(["verify", tmp_path])
    assert code == 2 and "not a store" in err
    code, out, err = run_cli(["inspect", tmp_path])
    assert code == 2 and "not a store" in err
    code, out, err = run_cli(["msg", tmp_path, "--offset", "0"])
    assert code == 2 and "not a store" in err


# -- rendering ----------------------------------------------------------------------------------------

def test_terminal_rendering_uses_rich_tables_and_progress():
    path = store_dir("basic", "store")
    before = snapshot(path)
    code, out, err = run_cli(["inspect", path], tty=True)
    assert code == 0
    assert "commitlog files" in out and "\u2503" in out or "\u2502" in out  # rich box drawing
    code, out, err = run_cli(["verify", path], tty=True)
    assert code == 0 and "OK: no damage found" in out
    code, out, err = run_cli(["msg", path, "--key", "order-7", "--topic", "TopicA"], tty=True)
    assert code == 0 and "8 messages found" in out and "TopicA" in out
    assert snapshot(path) == before


def test_plain_output_is_aligned():
    code, out, err = run_cli(["inspect", store_dir("boundary", "store")])
    lines = out.splitlines()
    start = lines.index("commitlog files") + 1
    header, rows = lines[start], lines[start + 1:start + 7]
    col = header.index("records") + len("records")
    assert all(r[:col].rstrip()[-1].isdigit() for r in rows)  # right-aligned numbers end in one column


# -- what a newcomer tripped on ------------------------------------------------------------------

def _cli(argv):
    from conftest import run_cli

    return run_cli(argv)


def test_a_mistyped_option_shows_the_commands_own_usage(capsys):
    code, _, _ = _cli(["inspect", "--jsn", FIXTURES / "basic" / "store"])
    err = capsys.readouterr().err  # argparse writes usage errors to sys.stderr
    assert code == 2
    assert "usage: rmqstore inspect" in err and "unrecognized arguments: --jsn" in err, err


def test_inspect_msg_and_verify_accept_the_commitlog_folder_as_dump_does():
    store = FIXTURES / "basic" / "store"
    for command in (["inspect"], ["verify"], ["msg", "--offset", "0"]):
        code, out, err = _cli([*command, store / "commitlog"])
        code_root, out_root, _ = _cli([*command, store])

        def steady(text):  # (the free space of the disk moves between two runs)
            return [ln for ln in text.splitlines() if not ln.startswith("disk ")]

        assert (code, steady(out)) == (code_root, steady(out_root)), (command, err)


def test_positions_print_with_thousands_separators():
    import re

    _, out, _ = _cli(["inspect", FIXTURES / "basic" / "store"])
    table = out.split("commitlog files", 1)[1].split("\n\n", 1)[0]
    assert "blank@" in table
    assert not re.search(r"(?<![\d,])\d{4,}(?![\d,])", "\n".join(ln.split("  ", 1)[1] for ln in table.splitlines()[2:])), table


def test_a_message_with_no_born_time_says_so(tmp_path):
    from rmqstore import Message, MessageStore, StoreConfig

    with MessageStore(tmp_path / "s", StoreConfig(mapped_file_size_commit_log=64 * 1024,
                                                  mapped_file_size_consume_queue=600, max_hash_slot_num=8,
                                                  max_index_num=32)) as store:
        offset = store.put_message(Message("T", b"x", born_timestamp=0)).append_result.wrote_offset
    code, out, err = _cli(["msg", tmp_path / "s", "--offset", offset])
    assert code == 0, err
    born = next(ln for ln in out.splitlines() if ln.startswith("born"))
    assert "not set (0)" in born and "1970" not in born, born


def test_dump_help_says_the_body_is_hex(capsys):
    code, _, _ = _cli(["dump", "--help"])
    assert code == 0 and "hex" in capsys.readouterr().out


@pytest.mark.parametrize("columns", ["100", "140"])
def test_plain_tables_fold_long_text_to_the_width(monkeypatch, columns):
    """Plain output (a pipe, a notebook) folds the free-text column of a table so each line fits the
    width (``COLUMNS``, else 120): a notebook folds a longer line at its own edge, and every column
    after the text then lands on the next line (notebook 07's verify table did)."""
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = _cli(["verify", FIXTURES / "crash" / "store"])
    assert code == 0
    table = out.split("problems\n", 1)[1].splitlines()
    assert max(len(ln) for ln in table) <= int(columns), table
    header = table[0].split()
    assert header == ["where", "what", "kind"]
    kinds = [ln.split()[-1] for ln in table[1:] if ln.startswith("WARNING")]
    assert kinds == ["unclean_shutdown", "preallocated_segment"], table
    # the folded text reads back whole
    what_at, kind_at = table[0].index("what"), table[0].index("kind")
    text = " ".join(ln[what_at:kind_at].strip() for ln in table[1:])
    assert "unclean shutdown (abort file present): the last run did not stop cleanly; the next start runs" in text
