"""Recovery (rmqstore.engine.recovery) against RocketMQ 4.9.8's own recovery, clean stores and damaged ones.

* the ``crash`` fixture: the store a killed RocketMQ left, recovered by us, must end where
  RocketMQ's recovery ended and, after a clean shutdown, hold the same bytes as the
  ``recovered_store/`` RocketMQ wrote (index files: same contents, names are clock times);
* every clean fixture recovers normally to its recorded end and takes more puts after it;
* damaged stores, in the style of RocketMQ's own recovery tests: a writer process is killed
  (tiny segments), then the log is damaged -- a flipped body byte, a torn record, garbage
  after the end, lost pages -- and recovery must end at the last valid record, with the
  consume queues and the index agreeing with what is left.

The consistency checks (:func:`check_store` and friends) are shared with test_crash.py.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, copy_store, manifest, snapshot
from crash_writer import crash_config, expected_records

from rmqstore.engine import recovery
from rmqstore.common.config import StoreConfig
from rmqstore.engine.consume_queue import CQ_STORE_UNIT_SIZE
from rmqstore.engine.dispatch import tags_code_of
from rmqstore.common.errors import StoreError, StoreStateError
from rmqstore.engine.index import index_key_hash
from rmqstore.format.layout import BLANK_MAGIC_CODE
from rmqstore.format.message import Message
from rmqstore.format.properties import KEYS, UNIQ_KEY, string_to_properties
from rmqstore.format.record import BlankRecord, decode_record
from rmqstore.format.status import PutMessageStatus
from rmqstore.store import MessageStore, open_store
from rmqstore.format.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqstore.read.verify import verify
from rmqstore.format.walk import End

HERE = Path(__file__).resolve().parents[1]  # tests/, where the writer script lives
WRITER = HERE / "crash_writer.py"
CLEAN_FIXTURES = ("basic", "boundary", "txn_delay", "flush_async", "flush_sync", "flush_tsp")


# -- consistency checks (also used by test_crash.py) ------------------------------------------
def walk_log(store) -> dict:
    """Every message record between the store's min and max offset, CRC-checked: ``{offset: record}``.

    Fails unless the files follow each other, only the last is not full, and the walk of
    every file ends exactly at its read position (the log ends at a record boundary).
    """
    files = store.commit_log.mapped_file_queue.mapped_files
    records = {}
    for k, mf in enumerate(files):
        if k:
            assert mf.file_from_offset == files[k - 1].file_from_offset + mf.file_size, f"gap before {mf.file_name}"
        limit = mf.read_position
        assert limit == mf.file_size or k == len(files) - 1, f"{mf.file_name} is not full but not the last"
        pos = 0
        while pos < limit:
            rec = decode_record(mf.mapped, pos, check_crc=True, limit=mf.file_size)
            if isinstance(rec, BlankRecord):
                assert pos + rec.total_size == mf.file_size == limit, f"stray blank at {mf.file_from_offset + pos}"
                pos = limit
                break
            assert rec.physical_offset == mf.file_from_offset + pos
            records[rec.physical_offset] = rec
            pos += rec.total_size
        assert pos == limit, f"{mf.file_name}: the last record ends at {pos}, past the read position {limit}"
    assert (files[-1].file_from_offset + files[-1].read_position if files else 0) == store.get_max_phy_offset()
    return records


def _builds_cq(rec) -> bool:
    return rec.sys_flag & TRANSACTION_MASK not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


@functools.lru_cache(maxsize=1 << 20)
def _tags_code(topic: str, properties: str, store_timestamp: int, delay_table: tuple) -> int:
    return tags_code_of(topic, string_to_properties(properties), store_timestamp, dict(delay_table))


@functools.lru_cache(maxsize=1 << 20)
def _key_hashes(topic: str, properties: str) -> frozenset:
    props = string_to_properties(properties)
    keys = [k for k in (props.get(KEYS) or "").split(" ") if k]
    if props.get(UNIQ_KEY):
        keys.append(props[UNIQ_KEY])
    return frozenset(index_key_hash(f"{topic}#{k}") for k in keys)


def check_consume_queues(store, records: dict) -> None:
    """Every unit points at a record of its queue with its queue offset; every record has its unit."""
    delay_table = tuple(sorted(store.config.delay_level_table().items()))
    max_phy = store.get_max_phy_offset()
    expected: dict = {}
    for off, rec in records.items():
        if _builds_cq(rec):
            expected.setdefault((rec.topic, rec.queue_id), {})[rec.queue_offset] = off
    for key, cq in store.consume_queue_table.items():
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        units = {}
        for mf in cq.mapped_file_queue.mapped_files:
            for pos in range(0, mf.read_position, CQ_STORE_UNIT_SIZE):
                n = (mf.file_from_offset + pos) // CQ_STORE_UNIT_SIZE
                if n < lo:
                    continue
                offset, size, tags = cq.get_unit(n)
                assert offset < max_phy, f"{key} unit {n} points past the end ({offset} >= {max_phy})"
                rec = records.get(offset)
                assert rec is not None, f"{key} unit {n} points at {offset}, not a record start"
                assert (rec.topic, rec.queue_id, rec.queue_offset) == (key[0], key[1], n), (key, n, rec.queue_offset)
                assert size == rec.total_size
                assert tags == _tags_code(rec.topic, rec.properties, rec.store_timestamp, delay_table)
                units[n] = offset
        want = {n: o for n, o in expected.get(key, {}).items() if n >= lo}
        assert units == want, f"{key}: consume queue and commitlog disagree"
        if want:
            assert hi == max(want) + 1
        assert store.commit_log.topic_queue_table.get(key, 0) == hi
    for key, offs in expected.items():
        if key not in store.consume_queue_table:
            raise AssertionError(f"{key} has records but no consume queue")


def check_index(store, records: dict) -> list:
    """Entries below the end point at a record carrying that key; returns the entries at/after the end."""
    max_phy = store.get_max_phy_offset()
    past_end = []
    for f in store.index_service.index_files:
        for n, key_hash, phy, _time_diff, _prev in f.entries():
            if phy >= max_phy:
                past_end.append((f.file_name, n, phy))
                continue
            rec = records.get(phy)
            assert rec is not None, f"{f.file_name} entry {n} points at {phy}, not a record start"
            assert key_hash in _key_hashes(rec.topic, rec.properties), (f.file_name, n, phy)
    return past_end


def check_store(store, cut_offsets=()) -> dict:
    """walk_log + check_consume_queues + check_index; the records.

    Index entries at or after the end are allowed only for ``cut_offsets`` -- records
    recovery cut off.  RocketMQ leaves those entries in an index file that also holds
    earlier ones (after a clean stop it does not touch the index at all).
    """
    records = walk_log(store)
    check_consume_queues(store, records)
    stray = [e for e in check_index(store, records) if e[2] not in set(cut_offsets)]
    assert stray == [], f"index entries past the end: {stray[:5]}"
    return records


# -- helpers ---------------------------------------------------------------------------
def contents_under(root, sub) -> dict:
    """``{relative path: bytes}`` of every file under ``root/sub``."""
    base = Path(root) / sub
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def disk_records(root) -> list:
    """``(offset, record)`` of every message on disk, walking each file until a blank or bad bytes."""
    out = []
    cl = Path(root) / "commitlog"
    for p in sorted(cl.iterdir(), key=lambda p: int(p.name)):
        data = p.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            try:
                rec = decode_record(data, pos, check_crc=True)
            except Exception:
                break
            if isinstance(rec, BlankRecord):
                break
            out.append((int(p.name) + pos, rec))
            pos += rec.total_size
    return out


def patch_file(path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def segment_of(root, offset: int, seg_size: int) -> tuple[Path, int]:
    start = offset - offset % seg_size
    return Path(root) / "commitlog" / f"{start:020d}", offset - start


# -- (a) the crash fixture ---------------------------------------------------------------------
CRASH = FIXTURES / "crash"


@pytest.fixture
def crash_copy(tmp_path):
    return copy_store("crash", tmp_path)


def test_crash_fixture_recovery_positions_as_rocketmq(crash_copy):
    m = manifest("crash")
    rec = m["recovery"]
    store = MessageStore(crash_copy, StoreConfig.from_manifest(m["config"]))
    try:
        store.load()
        assert store.last_exit_ok is False
        after = rec["positionsAfterLoad"]
        assert store.positions() == after["files"]
        queue = store.commit_log.mapped_file_queue
        assert queue.flushed_where == after["queue.flushedWhere"]
        assert queue.committed_where == after["queue.committedWhere"]
        assert store.get_max_phy_offset() == rec["maxPhyOffsetAfterLoad"] == rec["maxPhyOffset"]
        assert store.get_min_phy_offset() == rec["minPhyOffset"]
        # the pre-allocated next file is gone, the newest index file (past the checkpoint) rebuilt
        assert sorted(os.listdir(Path(crash_copy) / "commitlog")) == [
            f["file"] for f in after["files"]]
        cp = rec["checkpointAsLoaded"]
        assert (store.checkpoint.physic_msg_timestamp, store.checkpoint.logics_msg_timestamp,
                store.checkpoint.index_msg_timestamp) == (cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"],
                                                          cp["indexMsgTimestamp"])
        assert store.checkpoint.get_min_timestamp() == cp["getMinTimestamp()"]
        assert store.checkpoint.get_min_timestamp_index() == cp["getMinTimestampIndex()"]
        # consume queues: every entry RocketMQ reported, nothing more
        for q in rec["consumeQueues"]:
            key = (q["topic"], q["queueId"])
            if not q["entries"]:
                assert key not in store.consume_queue_table or \
                    store.consume_queue_table[key].get_max_offset_in_queue() == 0
                continue
            cq = store.consume_queue_table[key]
            assert cq.get_min_offset_in_queue() == q["minOffsetInQueue"]
            assert cq.get_max_offset_in_queue() == q["maxOffsetInQueue"]
            assert cq.max_physic_offset == q["cq.getMaxPhysicOffset()"]
            assert [[n, *cq.get_unit(n)] for n in range(cq.get_max_offset_in_queue())] == q["entries"]
            assert store.commit_log.topic_queue_table[key] == q["maxOffsetInQueue"]
        records = check_store(store)
        # what RocketMQ could read back after its recovery
        for q in rec["readableViaGetMessage"]:
            if not q["messageCount"]:
                continue  # (the schedule service's empty queues exist only in RocketMQ's memory)
            cq = store.consume_queue_table[(q["topic"], q["queueId"])]
            offsets = [cq.get_unit(n)[0] for n in range(q["minOffsetInQueue"], q["maxOffsetInQueue"])]
            assert offsets == q["commitLogOffsets"]
            assert all(records[o].topic == q["topic"] for o in offsets)
        assert len(records) == rec["commitLogWalkStats"]["commitLogWalkMessages"]
        for query in rec["queriesAfterRecovery"]:
            found, last_ts, last_phy = store.index_service.query_offset(query["topic"], query["key"], 32, 0, 2**62)
            assert found == query["phyOffsets"]
            assert (last_ts, last_phy) == (query["indexLastUpdateTimestamp"], query["indexLastUpdatePhyoffset"])
    finally:
        store.close()
    assert os.path.exists(Path(crash_copy) / "abort")  # loaded, never started: the abort file stays


def test_crash_fixture_recovered_and_shut_down_equals_rocketmq_bytes(crash_copy):
    m = manifest("crash")
    store = MessageStore(crash_copy, StoreConfig.from_manifest(m["config"]))
    store.load()
    store.start()
    store.shutdown()
    ours, theirs = Path(crash_copy), CRASH / "recovered_store"
    assert not (ours / "abort").exists()
    assert contents_under(ours, "commitlog") == contents_under(theirs, "commitlog")
    assert contents_under(ours, "consumequeue") == contents_under(theirs, "consumequeue")
    assert (ours / "checkpoint").read_bytes() == (theirs / "checkpoint").read_bytes()
    assert (ours / "lock").read_bytes() == (theirs / "lock").read_bytes()
    # index files are named by the wall clock: compare contents; the untouched one keeps its name
    ours_index, theirs_index = contents_under(ours, "index"), contents_under(theirs, "index")
    assert sorted(ours_index.values()) == sorted(theirs_index.values())
    kept = [n for n in theirs_index if n in contents_under(CRASH / "store", "index")]
    assert kept and all(ours_index[n] == theirs_index[n] for n in kept)
    diff = m["fileDiff"]
    for path in diff["removedByRecovery"]:
        if not path.startswith("index/"):
            assert not (ours / path).exists(), path


def test_crash_fixture_read_only_finds_the_same_end_and_writes_nothing():
    root = CRASH / "store"
    before = snapshot(root)
    m = manifest("crash")
    store = open_store(root)
    try:
        assert store.last_exit_ok is False
        assert store.get_max_phy_offset() == m["recovery"]["maxPhyOffset"]
        # the read-only walk forgets the pre-allocated file but does not delete it
        assert [p["file"] for p in store.positions()] == [f["file"] for f in m["recovery"]["positionsAfterLoad"]["files"]]
        assert store.positions() == m["recovery"]["positionsAfterLoad"]["files"]
        walk_log(store)
    finally:
        store.close()
    assert snapshot(root) == before


@pytest.mark.parametrize("name", CLEAN_FIXTURES + ("crash",))
def test_read_only_open_leaves_every_fixture_untouched(name):
    for sub in ("store", "recovered_store"):
        root = FIXTURES / name / sub
        if not root.is_dir():
            continue
        before = snapshot(root)
        store = open_store(root)
        try:
            assert store.get_max_phy_offset() > 0
        finally:
            store.close()
        assert snapshot(root) == before, f"{name}/{sub} changed"


# -- (b) normal recovery of every clean fixture --------------------------------------------------
@pytest.mark.parametrize("name", CLEAN_FIXTURES)
def test_normal_recovery_of_clean_fixture_then_more_puts(name, tmp_path):
    m = manifest(name)
    root = copy_store(name, tmp_path)
    cfg = StoreConfig.from_manifest(m["config"], store_host="198.51.100.7:10911")
    store = MessageStore(root, cfg)
    store.load()
    assert store.last_exit_ok is True
    end = store.get_max_phy_offset()
    assert end == m["maxPhyOffset"]
    assert store.get_min_phy_offset() == m["minPhyOffset"]
    records = check_store(store)
    for q in m["consumeQueues"]:
        key = (q["topic"], q["queueId"])
        if key in store.consume_queue_table:
            assert store.consume_queue_table[key].get_max_offset_in_queue() == q["maxOffsetInQueue"]
            assert store.commit_log.topic_queue_table[key] == q["maxOffsetInQueue"]
    store.start()
    try:
        topic, qid = next(iter(sorted(store.commit_log.topic_queue_table)), ("AfterRecovery", 0))
        next_qo = store.commit_log.topic_queue_table.get((topic, qid), 0)
        results = [store.put_message(Message(topic, b"after recovery %d" % i, queue_id=qid,
                                             properties=f"KEYS\x01after-{i}"))
                   for i in range(5)]
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        offsets = [r.append_result.wrote_offset for r in results]
        assert offsets[0] >= end and offsets == sorted(offsets)
        if offsets[0] > end:  # it did not fit: the rest of the last file became a blank
            seg = cfg.mapped_file_size_commit_log
            assert offsets[0] % seg == 0 and end // seg == offsets[0] // seg - 1
        assert [r.append_result.logics_offset for r in results] == list(range(next_qo, next_qo + 5))
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    again = MessageStore(root, cfg)
    again.load()
    try:
        assert again.last_exit_ok is True
        after = check_store(again)
        assert {o: r for o, r in after.items() if o < end} == records
        assert [after[o].body for o in offsets] == [b"after recovery %d" % i for i in range(5)]
    finally:
        again.close()


# -- (c) damaged stores ----------------------------------------------------------------------------
def _run_writer_and_kill(root, *, seed: int, count: int, round_no: int = 0) -> list[str]:
    """Run crash_writer.py until READY (everything put and dispatched), then SIGKILL it; its lines."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root), "--seed", str(seed), "--count", str(count),
                             "--round", str(round_no)], stdout=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("READY"):
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert lines and lines[-1] == "READY", lines[-5:]
    return lines


@pytest.fixture(scope="module")
def killed_store(tmp_path_factory):
    """A store whose writer was killed after 300 acknowledged, dispatched puts (abort left behind)."""
    root = tmp_path_factory.mktemp("killed") / "store"
    _run_writer_and_kill(root, seed=7, count=300)
    assert (root / "abort").exists()
    return root


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory, killed_store):
    """The same store recovered and shut down cleanly (no abort file)."""
    root = copy_store(killed_store, tmp_path_factory.mktemp("clean"))
    store = MessageStore(root, crash_config())
    store.start()
    store.shutdown()
    assert not os.path.exists(os.path.join(root, "abort"))
    return Path(root)


def _prefix_bytes(root, end: int) -> bytes:
    """The commitlog's bytes below ``end``, file after file."""
    seg = crash_config().mapped_file_size_commit_log
    out = []
    for p in sorted((Path(root) / "commitlog").iterdir(), key=lambda p: int(p.name)):
        start = int(p.name)
        if start >= end:
            break
        out.append(p.read_bytes()[:min(seg, end - start)])
    return b"".join(out)


def _cq_tails_are_zero(store) -> None:
    """No consume-queue file holds a unit after its end (cut units were zeroed)."""
    for key, cq in store.consume_queue_table.items():
        files = cq.mapped_file_queue.mapped_files
        if files:
            last = files[-1]
            tail = last.mapped[last.wrote_position:]
            assert tail.count(0) == len(tail), f"{key}: stale units after the end of the queue"


def _reopen_put_and_check(root, end: int) -> None:
    """Start the recovered store, put more, shut down, recover normally: the new data follows ``end``."""
    store = MessageStore(root, crash_config())
    store.start()
    try:
        qo = store.commit_log.topic_queue_table.get(("CrashA", 0), 0)
        r = store.put_message(Message("CrashA", b"after the damage", queue_id=0, properties="KEYS\x01after"))
        assert r.status is PutMessageStatus.PUT_OK
        assert r.append_result.wrote_offset >= end and r.append_result.logics_offset == qo
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert store.last_exit_ok
        records = walk_log(store)
        check_consume_queues(store, records)
        assert records[r.append_result.wrote_offset].body == b"after the damage"
    finally:
        store.close()


def _last_records(root, n: int = 1):
    return disk_records(root)[-n:]


def _damage_case(tmp_path, source, damage):
    """Copy ``source``, ``damage(root) -> expected end``, recover read-only then for writing, check it all.

    * a read-only open finds the same end and changes nothing;
    * the writable recovery ends there, the consume queues and the index agree with the log
      (index entries past the end only for records that were cut), cut units are zeroed;
    * the bytes before the end are those that were there before;
    * the store takes more puts after the end and recovers normally afterwards.
    """
    root = copy_store(source, tmp_path)
    on_disk = [o for o, _ in disk_records(root)]
    expected_end = damage(root)
    prefix = _prefix_bytes(root, expected_end)
    before = snapshot(root)
    ro = open_store(root, config=crash_config())
    try:
        assert ro.get_max_phy_offset() == expected_end
    finally:
        ro.close()
    assert snapshot(root) == before, "a read-only open wrote"
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert store.get_max_phy_offset() == expected_end
        check_store(store, cut_offsets=[o for o in on_disk if o >= expected_end])
        _cq_tails_are_zero(store)
    finally:
        store.close()
    assert _prefix_bytes(root, expected_end) == prefix, "bytes before the damage changed"
    _reopen_put_and_check(root, expected_end)
    return root


def _body_position(rec) -> int:
    """Position of the body's first byte inside a record."""
    return rec.total_size - 2 - len(rec.properties.encode()) - 1 - len(rec.topic.encode()) - len(rec.body)


@pytest.mark.parametrize("which", ["killed", "clean"])
def test_flipped_body_byte_in_last_record_ends_the_log_before_it(tmp_path, killed_store, clean_store, which):
    seg = crash_config().mapped_file_size_commit_log

    def damage(root):
        offset, rec = next((o, r) for o, r in reversed(_last_records(root, 20)) if r.body)
        path, pos = segment_of(root, offset, seg)
        at = pos + _body_position(rec) + len(rec.body) // 2
        patch_file(path, at, bytes([path.read_bytes()[at] ^ 0x40]))
        return offset

    _damage_case(tmp_path, killed_store if which == "killed" else clean_store, damage)


@pytest.mark.parametrize("which", ["killed", "clean"])
def test_torn_last_record_is_cut(tmp_path, killed_store, clean_store, which):
    seg = crash_config().mapped_file_size_commit_log

    def damage(root):
        ((offset, rec),) = _last_records(root)
        path, pos = segment_of(root, offset, seg)
        half = pos + rec.total_size // 2
        patch_file(path, half, bytes(seg - half))  # the second half never reached the file
        return offset

    _damage_case(tmp_path, killed_store if which == "killed" else clean_store, damage)


def test_garbage_after_the_last_record_is_ignored(tmp_path, killed_store):
    seg = crash_config().mapped_file_size_commit_log

    def damage(root):
        ((offset, rec),) = _last_records(root)
        end = offset + rec.total_size
        path, pos = segment_of(root, end, seg)
        patch_file(path, pos, random.Random(3).randbytes(min(700, seg - pos)))
        return end

    _damage_case(tmp_path, killed_store, damage)


@pytest.mark.parametrize("which", ["killed", "clean"])
def test_lost_pages_cut_the_log_and_the_consume_queues_ahead_of_it(tmp_path, killed_store, clean_store, which):
    """The last records' bytes are zero (their pages never reached the disk) but their units exist."""
    seg = crash_config().mapped_file_size_commit_log

    def damage(root):
        last = _last_records(root, 12)
        offset = last[0][0]
        stop = min(offset - offset % seg + seg, last[-1][0] + last[-1][1].total_size)
        path, pos = segment_of(root, offset, seg)
        patch_file(path, pos, bytes(stop - offset))
        return offset

    _damage_case(tmp_path, killed_store if which == "killed" else clean_store, damage)


def test_unpatched_record_is_not_a_record(tmp_path, killed_store):
    """A record whose queue and physical offsets are still 0 (killed between copy and patch)."""
    seg = crash_config().mapped_file_size_commit_log

    def damage(root):
        ((offset, rec),) = _last_records(root)
        assert offset > 0
        path, pos = segment_of(root, offset, seg)
        patch_file(path, pos + 20, bytes(16))
        return offset

    _damage_case(tmp_path, killed_store, damage)


def test_short_segment_with_data_is_refused_untouched(tmp_path, killed_store):
    """A segment shorter than the configured size: RocketMQ refuses to load, and so do we."""
    root = copy_store(killed_store, tmp_path)
    seg = crash_config().mapped_file_size_commit_log
    ((offset, rec),) = _last_records(root)
    path, pos = segment_of(root, offset, seg)
    os.truncate(path, pos + rec.total_size // 2)
    before = snapshot(root)
    with pytest.raises(StoreError):
        MessageStore(root, crash_config()).load()
    assert snapshot(root) == before


def test_interrupted_preallocation_is_removed_after_a_crash(tmp_path, killed_store):
    """Empty files a kill left unsized (commitlog, consume queue) are removed, not fatal."""
    cfg = crash_config()
    root = Path(copy_store(killed_store, tmp_path))
    empty, cq_empty = _next_segment_names(root, cfg)
    empty.touch()
    cq_empty.touch()
    _load_check_close(root, cfg)
    assert not empty.exists() and not cq_empty.exists()


def _next_segment_names(root: Path, cfg, suffix: str = "") -> tuple[Path, Path]:
    """The names of the next commitlog file and the next file of consume queue CrashA/0."""
    last = int(sorted(os.listdir(root / "commitlog"))[-1])
    cq_dir = root / "consumequeue" / "CrashA" / "0"
    cq_last = int(sorted(os.listdir(cq_dir))[-1])
    return (root / "commitlog" / f"{last + cfg.mapped_file_size_commit_log:020d}{suffix}",
            cq_dir / f"{cq_last + cfg.mapped_file_size_consume_queue:020d}{suffix}")


def _load_check_close(root, cfg) -> None:
    store = MessageStore(root, cfg)
    store.load()
    try:
        check_store(store)
    finally:
        store.close()


def test_creation_leftovers_are_removed_by_a_writable_load_only(tmp_path, killed_store):
    """``<name>.<pid>.creating``: a kill between creating a segment's temp file and renaming it.
    A read-only open leaves them (and everything else) alone; a writable load deletes them."""
    cfg = crash_config()
    root = Path(copy_store(killed_store, tmp_path))
    names = sorted(os.listdir(root / "commitlog"))
    leftover, cq_leftover = _next_segment_names(root, cfg, ".4242.creating")
    for path, size in ((leftover, cfg.mapped_file_size_commit_log), (cq_leftover, cfg.mapped_file_size_consume_queue)):
        with open(path, "wb") as f:
            f.truncate(size)
    before = snapshot(root)
    open_store(root, config=cfg).close()
    assert snapshot(root) == before
    _load_check_close(root, cfg)
    assert not leftover.exists() and not cq_leftover.exists()
    assert set(os.listdir(root / "commitlog")) <= set(names)  # (recovery may drop a pre-allocated file)


_HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
print("held", flush=True)
time.sleep(600)
"""


def test_a_store_another_process_holds_is_refused_before_recovery_touches_it(tmp_path, killed_store):
    """The lock is taken before recovery writes: a writable open of a store another process
    holds (a live broker) raises and leaves every file as it was -- here a killed store with
    the temp file of an interrupted segment creation, which a writable load deletes."""
    cfg = crash_config()
    root = Path(copy_store(killed_store, tmp_path))
    ((offset, rec),) = _last_records(root)
    leftover = root / "commitlog" / f"{offset - offset % cfg.mapped_file_size_commit_log:020d}.99.creating"
    leftover.write_bytes(bytes(64))
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(root)
        with pytest.raises(StoreStateError, match="in use"):
            MessageStore(root, cfg).load()
        with pytest.raises(StoreStateError, match="in use"):
            with MessageStore(root, cfg):
                pass
        assert snapshot(root) == before
        ro = open_store(root, config=cfg)  # reading is still fine
        try:
            assert ro.get_max_phy_offset() == offset + rec.total_size
        finally:
            ro.close()
        assert snapshot(root) == before
    finally:
        holder.kill()
        holder.wait()
    store = MessageStore(root, cfg)  # the holder is gone: recovery runs, and the lock is ours
    store.load()
    try:
        check_store(store)
        assert store.get_max_phy_offset() == offset + rec.total_size
        assert not leftover.exists()
    finally:
        store.close()
    assert not store.lock.held  # close() let it go


def test_normal_recovery_reads_only_the_last_three_files(tmp_path, clean_store):
    """RocketMQ's rule: after a clean stop, damage older than the last three files goes unseen."""
    root = copy_store(clean_store, tmp_path)
    names = sorted(os.listdir(Path(root) / "commitlog"))
    assert len(names) > 4
    store = MessageStore(root, crash_config())
    store.load()
    end = store.get_max_phy_offset()
    store.close()
    patch_file(Path(root) / "commitlog" / names[0], 4, bytes(4))  # the first record's magic
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert store.last_exit_ok and store.get_max_phy_offset() == end
    finally:
        store.close()
    patch_file(Path(root) / "commitlog" / names[-3], 4, bytes(4))  # the same in the third-last file
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert store.get_max_phy_offset() == int(names[-3])
    finally:
        store.close()


def _first_timestamps(root) -> dict:
    out = {}
    for p in sorted((Path(root) / "commitlog").iterdir()):
        data = p.read_bytes()
        if data[:8] != bytes(8):
            out[p.name] = decode_record(data, 0).store_timestamp
    return out


@pytest.mark.parametrize("damaged", ["before_start_file", "start_file"])
def test_abnormal_recovery_starts_at_the_checkpoint_file(tmp_path, killed_store, damaged):
    """Start file: the newest whose first record is no later than the checkpoint minimum (min - 3 s)."""
    root = copy_store(killed_store, tmp_path)
    firsts = _first_timestamps(root)
    names = sorted(firsts)
    min_ts = firsts[names[-3]]
    # physic and logics say: flushed and dispatched up to min_ts + 3 s
    patch_file(Path(root) / "checkpoint", 0, struct.pack(">qqq", min_ts + 3000, min_ts + 3000, 0))
    start = max(n for n in names if firsts[n] <= min_ts)
    ro = open_store(root, config=crash_config())  # read-only: the checkpoint stays as written
    end = ro.get_max_phy_offset()
    matched = [os.path.basename(mf.file_name) for mf in ro.commit_log.mapped_file_queue.mapped_files
               if recovery.is_mapped_file_matched_recover(ro.config, ro.checkpoint, mf)]
    ro.close()
    assert matched[-1] == start and int(start) > 0
    victim = names[0] if damaged == "before_start_file" else start
    patch_file(Path(root) / "commitlog" / victim, 4, bytes(4))  # the first record's magic
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert store.last_exit_ok is False
        assert store.get_max_phy_offset() == (end if damaged == "before_start_file" else int(start))
    finally:
        store.close()


def test_no_valid_first_file_cuts_everything(tmp_path, killed_store):
    """No checkpoint (no file qualifies): the walk starts at the first file; its first record is bad."""
    root = copy_store(killed_store, tmp_path)
    (Path(root) / "checkpoint").unlink()
    names = sorted(os.listdir(Path(root) / "commitlog"))
    patch_file(Path(root) / "commitlog" / names[0], 4, bytes(4))
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert store.get_max_phy_offset() == int(names[0]) == 0
        assert [os.path.basename(mf.file_name) for mf in store.commit_log.mapped_file_queue.mapped_files] == [names[0]]
        assert all(cq.get_max_offset_in_queue() == 0 for cq in store.consume_queue_table.values())
        check_store(store)
    finally:
        store.close()
    assert sorted(os.listdir(Path(root) / "commitlog")) == [names[0]]


def test_no_commitlog_files_destroys_the_consume_queues(tmp_path, clean_store):
    root = copy_store(clean_store, tmp_path)
    for p in (Path(root) / "commitlog").iterdir():
        p.unlink()
    ro = open_store(root, config=crash_config())
    try:
        assert ro.get_max_phy_offset() == 0
        assert all(cq.get_max_offset_in_queue() == 0 for cq in ro.consume_queue_table.values())
    finally:
        ro.close()
    assert any(p.is_file() for p in (Path(root) / "consumequeue").rglob("*"))  # read-only: nothing deleted
    store = MessageStore(root, crash_config())
    store.load()
    store.close()
    assert not any(p.is_file() for p in (Path(root) / "consumequeue").rglob("*"))


_expected_records = functools.lru_cache(maxsize=None)(expected_records)  # rounds re-check every put


def check_acked(records: dict, lines, seed: int) -> int:
    """Every put a crash_writer.py line acknowledges is in ``records``, CRC-checked, as it was put.

    Returns how many records the lines acknowledged.
    """
    from rmqstore.format.record import create_message_id

    n = 0
    for line in lines:
        if not line.startswith("A "):
            continue
        _, rnd, i, j, offset, msg_id, topic, qid, qo = line.split()
        rec = records.get(int(offset))
        assert rec is not None, f"acknowledged put lost: {line}"
        want_topic, want_qid, body, keys, sys_flag = _expected_records(seed, int(rnd), int(i))[int(j)]
        assert (rec.topic, rec.queue_id, rec.body, rec.sys_flag & TRANSACTION_MASK) == \
            (want_topic, want_qid, body, sys_flag) == (topic, int(qid), body, sys_flag), line
        assert string_to_properties(rec.properties)[KEYS] == keys
        assert create_message_id(rec.store_host, rec.physical_offset) == msg_id
        if not sys_flag:
            assert rec.queue_offset == int(qo)
        n += 1
    return n


def test_recovery_keeps_every_acknowledged_put(tmp_path):
    """The killed writer's acknowledged puts are all there, with their bodies, after recovery."""
    root = tmp_path / "store"
    lines = _run_writer_and_kill(root, seed=11, count=120)
    store = MessageStore(root, crash_config())
    store.load()
    try:
        assert check_acked(check_store(store), lines, 11) >= 120
    finally:
        store.close()


def test_blank_magic_alone_ends_a_file():
    """check_record: a blank is recognised by its magic, whatever size it declares (as RocketMQ)."""
    buf = bytearray(64)
    struct.pack_into(">ii", buf, 8, 999999, BLANK_MAGIC_CODE)
    assert recovery.check_record(buf, 8, 0, True).end is End.BLANK
    assert recovery.check_record(buf, 0, 0, True).end is End.UNWRITTEN  # not a record: the log ends
    assert recovery.check_record(buf, 60, 0, True).end is End.OUT_OF_BYTES  # not a record: the log ends


def test_power_cut_store_recovered_and_shut_down_verifies_clean(tmp_path, killed_store):
    """A power cut lost part of one record's body (its page never reached the disk) while the
    records after it survived.  Recovery ends the log before that record and a clean shutdown
    follows; the bytes after the end stay (RocketMQ's rule).  verify must agree with the
    recovered store: no damage (garbage after the end, a warning), and no claim that a start
    would dispatch the records after the end -- the walk stops where recovery stopped."""
    root = copy_store(killed_store, tmp_path)
    seg = crash_config().mapped_file_size_commit_log
    tail = disk_records(root)[-6:]
    offset, rec = next((o, r) for o, r in tail[1:-2] if len(r.body) > 8)
    path, pos = segment_of(root, offset, seg)
    at = pos + _body_position(rec) + len(rec.body) // 2
    patch_file(path, at, bytes(min(4, len(rec.body) // 2)))
    store = MessageStore(root, crash_config())
    store.start()
    try:
        assert store.get_max_phy_offset() == offset
    finally:
        store.shutdown()
    report = verify(root, config=crash_config())
    assert report.ok, [str(p) for p in report.errors]
    assert not [p for p in report.problems if p.kind == "undispatched"], [str(p) for p in report.problems]
    assert [p.kind for p in report.warnings if p.where == f"{path.relative_to(root)}:{pos}"] == ["garbage_after_end"]
