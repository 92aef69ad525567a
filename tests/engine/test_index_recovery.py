"""The index after a crash: every record recovery keeps is findable by each of its keys.

After an abnormal stop, loading the index deletes every index file whose end timestamp
is newer than the checkpoint's index timestamp (it may hold entries for records the log
is about to lose), and recovery re-dispatches from a commitlog file the checkpoint proves
dispatched.  RocketMQ 4.9.8 takes that file from the commitlog and consume-queue
timestamps alone (``message_index_safe`` off, the default), so the records between the
last surviving index entry and that file lose their entries for good.  Here the walk
starts no later than the record after the last surviving index entry.

The crash images are made in-process: a started store is copied while it is idle (what a
kill -9 leaves: every write reached the page cache, the abort file is there).  A clock
that moves one second per put keeps the checkpoint's "3 s before" safe point far from
the start of the log.
"""

from __future__ import annotations

import os
import shutil

import pytest

from rmqstore.engine import recovery
from rmqstore.common.config import StoreConfig
from rmqstore.format.message import Message
from rmqstore.store import MessageStore
from rmqstore.read.verify import verify

BASE_TS = 1_795_000_000_000


def small_config(**overrides) -> StoreConfig:
    """8 KiB commitlog files (7 of our messages), 64-entry index files (63 keys: 31 1/2 messages)."""
    values = dict(mapped_file_size_commit_log=8192, mapped_file_size_consume_queue=20 * 64,
                  max_hash_slot_num=16, max_index_num=64, flush_disk_type="SYNC_FLUSH",
                  store_host="198.51.100.7:10911")
    values.update(overrides)
    return StoreConfig(**values)


def put_keyed(store, clock_now: list, count: int, first: int = 0) -> dict:
    """``count`` messages with two keys each, one second apart; ``{key: offset}``."""
    keys = {}
    for i in range(first, first + count):
        clock_now[0] += 1000
        msg = Message(f"Key{'AB'[i % 2]}", b"x" * (900 + i % 50), queue_id=i % 3,
                      properties=f"KEYS\x01a{i} b{i}\x02TAGS\x01T{i % 4}", born_host="192.0.2.60:46000",
                      born_timestamp=BASE_TS + i)
        r = store.put_message(msg)
        offset = r.append_result.wrote_offset
        keys[(msg.topic, f"a{i}")] = keys[(msg.topic, f"b{i}")] = offset
    store.wait_dispatched()
    return keys


def killed_image(store, dst) -> str:
    """The store's files as a kill -9 would leave them (the store must be idle)."""
    store.checkpoint.flush()
    shutil.copytree(store.root, dst, ignore=shutil.ignore_patterns("lock"))
    assert os.path.exists(os.path.join(dst, "abort"))
    return str(dst)


def unfindable(store, keys: dict) -> list:
    """The keys ``store.query_message`` does not find at their offset."""
    out = []
    for (topic, key), offset in keys.items():
        found = store.query_message(topic, key, 32, 0, 2 ** 62).messages
        if offset not in [m.physical_offset for m in found]:
            out.append((topic, key, offset))
    return out


def written_then_killed(tmp_path, count: int = 58, cfg=None):
    """A store with ``count`` keyed puts, killed (an image of it); its config and keys.

    58 puts of two keys fill one index file (63 entries) and 53 entries of a second one,
    which is newer than the index checkpoint; the checkpoint's commitlog file (3 s before
    the last put) holds the last 4 puts only.
    """
    cfg = cfg or small_config()
    clock_now = [BASE_TS]
    store = MessageStore(tmp_path / "live", cfg, clock=lambda: clock_now[0])
    store.start()
    try:
        keys = put_keyed(store, clock_now, count)
        root = killed_image(store, tmp_path / "killed")
    finally:
        store.shutdown()
    return root, cfg, keys


def test_every_key_is_findable_after_abnormal_recovery(tmp_path):
    root, cfg, keys = written_then_killed(tmp_path)
    store = MessageStore(root, cfg)
    store.load()
    try:
        assert store.last_exit_ok is False
        assert unfindable(store, keys) == []
    finally:
        store.close()
    report = verify(root, config=cfg)
    assert report.ok, report.problems[:5]


def test_every_key_is_findable_after_recovery_and_more_puts(tmp_path):
    root, cfg, keys = written_then_killed(tmp_path)
    clock_now = [BASE_TS + 10_000_000]
    store = MessageStore(root, cfg, clock=lambda: clock_now[0])
    store.start()
    try:
        keys.update(put_keyed(store, clock_now, 30, first=1000))
        assert unfindable(store, keys) == []
    finally:
        store.shutdown()
    report = verify(root, config=cfg)
    assert report.ok, report.problems[:5]


def test_recovery_reindexes_only_the_index_and_keeps_the_walk_start(tmp_path, caplog):
    """The stretch between the index's end and the walk's start goes to the index alone."""
    root, cfg, keys = written_then_killed(tmp_path)
    store = MessageStore(root, cfg)
    with caplog.at_level("INFO", logger="rmqstore.engine.recovery"):
        store.load()
    try:
        said = [r.getMessage() for r in caplog.records]
        walk = [m for m in said if m.startswith("recover from this mapped file")]
        assert len(walk) == 1 and walk[0].endswith(f"{57344:020d}"), said  # the checkpoint's file, as RocketMQ
        assert any(m.startswith("the index ends at offset ") for m in said), said
    finally:
        store.close()


def test_verify_reports_keys_a_rocketmq_style_recovery_lost(tmp_path, monkeypatch):
    """One index file, deleted at load (the index checkpoint is 0); recovered without re-indexing
    (RocketMQ 4.9.8) and shut down: the new index file starts at the walk's first record, and
    verify names the records before it."""
    root, cfg, keys = written_then_killed(tmp_path, count=25)
    monkeypatch.setattr(recovery, "reindex_before", lambda commit_log, dispatcher, start: None)
    store = MessageStore(root, cfg)
    store.start()
    try:
        lost = {offset for _, _, offset in unfindable(store, keys)}
        assert lost
    finally:
        store.shutdown()
    report = verify(root, config=cfg)
    missing = [p for p in report.errors if p.kind == "index_missing_key"]
    assert len(missing) == 1, report.problems
    assert f"{len(lost)} dispatched record(s) with keys from offset {min(lost)} " in missing[0].message
    assert "before the index's first entry" in missing[0].message


@pytest.mark.parametrize("abort", [True, False])
def test_verify_reports_dispatched_records_after_the_last_index_entry(tmp_path, abort):
    """The newest index file gone and nothing indexed since: an error, a warning while the abort
    file says the next start recovers (and indexes them again)."""
    root, cfg, keys = written_then_killed(tmp_path)
    newest = sorted(os.listdir(os.path.join(root, "index")))[-1]
    os.remove(os.path.join(root, "index", newest))
    if not abort:
        os.remove(os.path.join(root, "abort"))
    report = verify(root, config=cfg)
    missing = [p for p in report.problems if p.kind == "index_missing_key"]
    assert len(missing) == 1, report.problems
    assert missing[0].severity == ("warning" if abort else "error")
    assert "after the index's last entry" in missing[0].message
    assert report.ok is abort


# -- index files a kill left half-made ------------------------------------------------------------
def _newest_index_name(root) -> str:
    """A name after every index file of ``root`` (a later creation)."""
    return str(int(sorted(os.listdir(os.path.join(root, "index")))[-1]) + 1)


@pytest.mark.parametrize("abort", [True, False])
def test_a_zero_byte_index_file_is_skipped_by_readers_and_removed_by_recovery(tmp_path, abort, capsys):
    """A kill (or a full disk) between creating an index file and sizing it leaves 0 bytes:
    readers skip it with a warning, a writable load deletes it."""
    from rmqstore.cli import main as cli
    from rmqstore.store import open_store

    root, cfg, keys = written_then_killed(tmp_path)
    if not abort:
        store = MessageStore(root, cfg)
        store.start()
        store.shutdown()
    empty = os.path.join(root, "index", _newest_index_name(root))
    open(empty, "wb").close()
    (topic, key), offset = next(iter(keys.items()))
    ro = open_store(root)
    try:
        assert [m.physical_offset for m in ro.query_message(topic, key, 32, 0, 2 ** 62).messages] == [offset]
    finally:
        ro.close()
    assert cli(["inspect", root]) == 0
    assert cli(["msg", root, "--key", key, "--topic", topic]) == 0
    report = verify(root)
    assert report.ok, report.problems
    assert [p.kind for p in report.warnings if p.path.endswith(os.path.basename(empty))] == ["file_size"]
    capsys.readouterr()
    store = MessageStore(root, cfg)
    store.load()
    try:
        assert not os.path.exists(empty)
        assert unfindable(store, keys) == []
    finally:
        store.close()


def test_an_index_file_a_kill_left_without_its_header_continues_the_previous_one(tmp_path):
    """A kill between sizing a new index file and writing its header leaves a full-size file of
    zeros: begin offset 0.  Recovery must not fill it with entries of old records (an index file
    beginning before the previous one ends); it continues the previous file."""
    root, cfg, keys = written_then_killed(tmp_path)
    names = sorted(os.listdir(os.path.join(root, "index")))
    size = os.path.getsize(os.path.join(root, "index", names[-1]))
    with open(os.path.join(root, "index", _newest_index_name(root)), "wb") as f:
        f.truncate(size)
    store = MessageStore(root, cfg)
    store.load()
    try:
        assert unfindable(store, keys) == []
        files = store.index_service.index_files
        assert all(b.begin_phy_offset >= a.end_phy_offset for a, b in zip(files, files[1:])), \
            [f.header() for f in files]
    finally:
        store.close()
    report = verify(root, config=cfg)
    assert report.ok, report.problems


def test_a_power_cut_leaves_no_index_entry_past_the_end(tmp_path):
    """The commitlog lost its last pages, the full (flushed, checkpointed) index file did not: its
    entries for the lost records must go, or a key lookup answers with whatever record a later put
    stores at that offset."""
    from rmqstore.engine.index import IndexFile

    root, cfg, keys = written_then_killed(tmp_path)
    first = sorted(os.listdir(os.path.join(root, "index")))[0]
    ix = IndexFile(os.path.join(root, "index", first), cfg.max_hash_slot_num, cfg.max_index_num, read_only=True)
    cut_at = sorted({o for o in keys.values() if ix.begin_phy_offset < o < ix.end_phy_offset})[-3]
    ix.shutdown()
    seg = cfg.mapped_file_size_commit_log
    for name in sorted(os.listdir(os.path.join(root, "commitlog"))):  # every page from cut_at on is lost
        start = int(name)
        if start + seg > cut_at:
            with open(os.path.join(root, "commitlog", name), "r+b") as f:
                f.seek(max(cut_at - start, 0))
                f.write(bytes(seg - max(cut_at - start, 0)))
    clock_now = [BASE_TS + 10_000_000]
    store = MessageStore(root, cfg, clock=lambda: clock_now[0])
    store.start()
    try:
        assert store.get_max_phy_offset() == cut_at
        kept = {k: o for k, o in keys.items() if o < cut_at}
        assert unfindable(store, kept) == []
        past = [(f.file_name, phy) for f in store.index_service.index_files for _, _, phy, _, _ in f.entries()
                if phy >= cut_at]
        assert past == []
        kept.update(put_keyed(store, clock_now, 5, first=1000))  # new records where the lost ones were
        assert unfindable(store, kept) == []
        lost = [(t, k) for (t, k), o in keys.items() if o >= cut_at]
        assert all(store.query_message(t, k, 32, 0, 2 ** 62).messages == [] for t, k in lost)
    finally:
        store.shutdown()
    report = verify(root, config=cfg)
    assert report.ok, [str(p) for p in report.errors]


def test_the_first_entry_of_an_index_file_is_found_in_its_own_second(tmp_path):
    """An index file begins at the previous file's end time and takes the first entry's time as its
    begin; the first entry's time difference must be counted from that, not from the old begin
    (RocketMQ's order), or a key put long after the file was created is found only without a time
    range (the first put after a restart, or after a pause in keyed puts)."""
    cfg = small_config()
    clock_now = [BASE_TS]
    with MessageStore(tmp_path / "store", cfg, clock=lambda: clock_now[0]) as store:
        put_keyed(store, clock_now, 31)  # 62 keys
        for props in ("KEYS\x01single", ""):  # the 63rd fills the first file; a keyless put opens the next
            clock_now[0] += 1000
            assert store.put_message(Message("KeyA", b"x", queue_id=0, properties=props,
                                             born_host="192.0.2.60:46000")).ok
        assert store.wait_dispatched()
        assert [f.index_count for f in store.index_service.index_files] == [64, 1]
        clock_now[0] += 60_000
        keys = put_keyed(store, clock_now, 1, first=100)
        assert len(store.index_service.index_files) == 2
        for (topic, key), offset in keys.items():
            ts = store.look_message_by_offset(offset).store_timestamp
            found = store.query_message(topic, key, 32, ts - 1000, ts + 1000).messages
            assert [m.physical_offset for m in found] == [offset], (key, store.index_service.index_files[-1].header())


def test_a_put_a_kill_interrupted_after_its_slot_is_set_back(tmp_path):
    """put_key writes the entry, then the slot, then the header: a kill before the header leaves a
    slot pointing at an entry the count does not include, which the next put overwrites with a key
    of another slot -- the first slot's older keys would be lost.  Loading after a crash sets it back."""
    import struct

    from rmqstore.engine.index import IndexFile, index_key_hash

    path = str(tmp_path / "20261118110641000")
    f = IndexFile(path, 4, 32)
    keys = [f"T#k{i}" for i in range(8)]
    for i, key in enumerate(keys):
        assert f.put_key(key, 100 * i, BASE_TS + i)
    torn = "T#torn"
    slot = index_key_hash(torn) % 4
    n = f.index_count
    entry_pos = 40 + 4 * 4 + n * 20
    head = struct.unpack_from(">i", f.buf, 40 + 4 * slot)[0]
    struct.pack_into(">iqii", f.buf, entry_pos, index_key_hash(torn), 900, 0, head)  # the entry ...
    struct.pack_into(">i", f.buf, 40 + 4 * slot, n)  # ... and the slot; killed before the header
    assert f.repair_torn_put()
    assert struct.unpack_from(">i", f.buf, 40 + 4 * slot)[0] == head
    other = next(f"T#o{i}" for i in range(100) if index_key_hash(f"T#o{i}") % 4 != slot)
    assert f.put_key(other, 1000, BASE_TS + 9)
    for i, key in enumerate(keys + [other]):
        out = []
        f.select_phy_offset(key, 32, 0, 2 ** 62, out)
        assert (1000 if key == other else 100 * i) in out, key
    assert not f.repair_torn_put()
    f.shutdown()
