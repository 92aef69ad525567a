"""The compiled put (rmqstore._native._cput through rmqstore.engine.native_put) writes what the pure put writes.

Random workloads -- topics, queue ids, bodies, properties (non-ASCII, delay levels, lone
surrogates), transaction types, IPv4/IPv6 born and store hosts, batches, flags out of range,
files so small that END_OF_FILE blanks come often, refusals of every kind -- go through two
stores with the same fixed clock, one ``StoreConfig(native=False)`` and one native: the
commitlog files must be byte-identical, every result the same (status, message, offsets,
queue offsets, msgId, store timestamp, message count), the topic-queue tables and the put
statistics equal.  The fixtures' manifests replayed through the native put give RocketMQ's
bytes (tests/compat/test_put_replay.py's replay and comparisons).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import compiled_module
from rmqstore import BatchItem, Message, MessageBatch, MessageStore, StoreConfig
from rmqstore.common import native
from rmqstore.format.layout import (PHYSICAL_OFFSET_POSITION, QUEUE_OFFSET_POSITION, SYSFLAG_POSITION,
                                    message_field_position)
from rmqstore.format.record import Address
from rmqstore.format.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

CLOCK = 1_700_000_123_456

TOPICS = ["TopicA", "TopicB", "%RETRY%g1", "bad topic"]
HOSTS = ["10.0.0.1:5000", "192.0.2.7:40001", "010.0.0.1:5", "1.2.3.4:05", "[2001:db8::7]:6000", Address(bytes(range(16)), 7), "127.0.0.1:70000"]
STORE_HOSTS = [None, "[::1]:10911", "10.9.8.7:10911"]
PROPS = st.one_of(
    st.just(""),
    st.builds(lambda t, k: f"TAGS\x01{t}\x02KEYS\x01{k}\x02UNIQ_KEY\x017F00000100002A9F",
              st.text(alphabet="abcé漢", min_size=1, max_size=6), st.text(alphabet="xyz-1", min_size=1, max_size=8)),
    st.sampled_from(["DELAY\x013\x02TAGS\x01d", "DELAY\x0130", "WAIT\x01false", "TAGS\x01\ud800", "X\x01" + "p" * 400]),
)
INT32 = st.one_of(st.integers(-2**31, 2**31 - 1), st.just(2**31))

single = st.builds(
    lambda topic, body, qid, flag, props, tran, born, store_host, reconsume, prepared: (
        "single", Message(topic, body, queue_id=qid, flag=flag, properties=props, sys_flag=tran,
                          born_timestamp=1_600_000_000_000, born_host=born, store_host=store_host,
                          reconsume_times=reconsume, prepared_transaction_offset=prepared)),
    st.sampled_from(TOPICS), st.binary(max_size=300), st.integers(-1, 3), INT32, PROPS,
    st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC, 0x1 | 0x30]), st.sampled_from(HOSTS), st.sampled_from(STORE_HOSTS),
    st.integers(0, 3), st.integers(0, 2**40))

batch = st.builds(
    lambda topic, items, qid, props, tran, born, store_host: (
        "batch", MessageBatch(topic, items, queue_id=qid, properties=props, sys_flag=tran,
                              born_timestamp=1_600_000_000_001, born_host=born, store_host=store_host)),
    st.sampled_from(TOPICS),
    st.lists(st.builds(BatchItem, st.binary(max_size=120), st.sampled_from(["", "K\x01v", "K\x01v\x02", "é\x01ü"]),
                       INT32), min_size=0, max_size=6),
    st.integers(-1, 3), st.sampled_from(["", "WAIT\x01true", "CLUSTER\x01c1\x02", "DELAY\x012"]),
    st.sampled_from([0, 0, 0, 0x8]), st.sampled_from(HOSTS), st.sampled_from(STORE_HOSTS))

workloads = st.lists(st.one_of(single, single, batch), min_size=1, max_size=40)


def _store(root: str, native_on: bool, file_size: int, **config) -> MessageStore:
    cfg = StoreConfig(native=native_on, mapped_file_size_commit_log=file_size, max_message_size=600,
                      store_host="192.168.0.9:10911", max_msgs_num_batch=1, **config)
    store = MessageStore(root, cfg, clock=lambda: CLOCK)
    store.start()
    return store


def _result(r) -> tuple:
    ar = r.append_result
    where = None if ar is None else (ar.status, ar.wrote_offset, ar.wrote_bytes, ar.logics_offset, ar.msg_num,
                                     ar.msg_id, ar.store_timestamp, ar.store_host, ar.pagecache_rt)
    return r.status, r.message, where


def _files(root: str) -> dict[str, bytes]:
    """The commitlog files on disk (after a clean shutdown: committed, flushed, the pre-allocated one gone)."""
    folder = os.path.join(root, "commitlog")
    out: dict[str, bytes] = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def _stats(store: MessageStore) -> dict:
    snap = store.stats.snapshot()
    snap.pop("putMessageEntireTimeMax")
    snap.pop("putMessageDistributeTime")
    return snap


def _run_both(ops, file_size: int, **config):
    """The same puts through a pure store and a native one: (pure, native) results, files, tables, stats."""
    out = []
    for native_on in (False, True):
        with tempfile.TemporaryDirectory() as root:
            store = _store(root, native_on, file_size, **config)
            try:
                assert (store.put_path.putter is not None) is native_on
                results = [_result(store.put_message(item) if kind == "single" else store.put_messages(item))
                           for kind, item in ops]
            finally:
                store.shutdown()
            out.append((results, _files(root), dict(store.commit_log.topic_queue_table), _stats(store),
                         store.put_path.putter.counters()["ok"] if native_on else 0))
    return out


@pytest.fixture(autouse=True, scope="module")
def _built():
    compiled_module("_cput")
    if native.forced_pure():
        pytest.skip("RMQSTORE_PURE is set: the native put is off")


def test_positions_are_the_layout_tables():
    layout = compiled_module("_cput").LAYOUT
    pos = message_field_position
    v6 = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
    assert layout == {
        "TOTALSIZE": pos("total_size"), "MAGICCODE": pos("magic_code"), "BODYCRC": pos("body_crc"),
        "QUEUEID": pos("queue_id"), "FLAG": pos("flag"), "QUEUEOFFSET": QUEUE_OFFSET_POSITION,
        "PHYSICALOFFSET": PHYSICAL_OFFSET_POSITION, "SYSFLAG": SYSFLAG_POSITION,
        "BORNTIMESTAMP": pos("born_timestamp"), "BORNHOST": pos("born_host"),
        "STORETIMESTAMP": pos("store_timestamp"), "STORETIMESTAMP_V6": pos("store_timestamp", BORNHOST_V6_FLAG),
        "BODYLENGTH": pos("body"), "BODYLENGTH_V6": pos("body", v6)}


def _plain(i: int, topic: str = "TopicA", size: int = 200) -> tuple:
    return ("single", Message(topic, bytes([i % 256]) * size, queue_id=i % 2, properties="TAGS\x01t",
                              born_host="10.0.0.1:5000", born_timestamp=i))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=workloads, file_size=st.sampled_from([1024, 1536, 4096, 65536]))
@example(ops=[_plain(i) for i in range(12)], file_size=1024)  # END_OF_FILE blanks in the native put
@example(ops=[_plain(0), ("batch", MessageBatch("TopicA", [BatchItem(b"x" * 100, "K\x01v")] * 3,
                                                 properties="CLUSTER\x01c")),
              ("batch", MessageBatch("TopicA", [BatchItem(b"y" * 150, "")] * 4, queue_id=1))], file_size=1024)
@example(ops=[_plain(0), ("batch", MessageBatch("TopicA", [BatchItem(b"", "", 1), BatchItem(b"q", "é\x01ü", -7)],
                                                 born_host="192.0.2.1:40381"))], file_size=1024)  # item flags
@example(ops=[_plain(0), ("single", Message("TopicA", b"z", properties="DELAY\x012\x02T\x01x")), _plain(1),
              ("single", Message("TopicA", b"p", sys_flag=0x4)), _plain(2)], file_size=4096)
def test_native_and_pure_puts_write_the_same(ops, file_size):
    (pure, pure_files, pure_table, pure_stats, _), (fast, fast_files, fast_table, fast_stats, _) = \
        _run_both(ops, file_size)
    assert fast == pure
    assert fast_files.keys() == pure_files.keys()
    for name in pure_files:
        assert fast_files[name] == pure_files[name], name
    assert fast_table == pure_table
    assert fast_stats == pure_stats


def test_the_native_put_takes_the_common_case():
    ops = [_plain(i) for i in range(30)]
    ops += [("batch", MessageBatch("TopicA", [BatchItem(b"b" * 50, "K\x01v")] * 3, queue_id=1))] * 3
    (_, pure_files, _, _, _), (results, fast_files, _, _, native_ok) = _run_both(ops, 4096)
    assert all(r[0].name == "PUT_OK" for r in results)
    assert fast_files == pure_files
    # the first put of a topic takes the pure path, which checks the topic once; every other took the compiled put
    assert native_ok == len(ops) - 1


@pytest.mark.parametrize("config", [
    {"flush_disk_type": "SYNC_FLUSH"},  # the waits run in Python after the compiled append
    {"broker_role": "SYNC_MASTER"},  # no slave: SLAVE_NOT_AVAILABLE, as the pure path answers
    {"transient_store_pool_enable": True, "transient_store_pool_size": 3},  # appends go to a write buffer
    {"use_reentrant_lock_when_put_message": False},  # the spin lock
], ids=["sync_flush", "sync_master", "write_buffer", "spin_lock"])
def test_every_flush_mode_and_lock_gives_the_same(config):
    ops = [_plain(i, size=150) for i in range(20)]
    ops += [("batch", MessageBatch("TopicA", [BatchItem(b"b" * 40, "K\x01v")] * 3, queue_id=1))] * 3
    ops += [("single", Message("TopicA", b"w", properties="WAIT\x01false"))]
    (pure, pure_files, pure_table, pure_stats, _), (fast, fast_files, fast_table, fast_stats, native_ok) = \
        _run_both(ops, 2048, **config)
    assert fast == pure
    assert fast_files == pure_files
    assert (fast_table, fast_stats) == (pure_table, pure_stats)
    if "broker_role" not in config:
        assert all(r[0].name == "PUT_OK" for r in fast)
        assert native_ok == (0 if "flush_disk_type" in config else len(ops) - 1)  # (sync: counted in Python)


def test_a_file_that_cannot_be_made_is_answered_alike():
    """After an END_OF_FILE blank the next file cannot be made: CREATE_MAPEDFILE_FAILED carrying the blank,
    counted alike; once files can be made again the puts go on, alike."""
    out = []
    for native_on in (False, True):
        with tempfile.TemporaryDirectory() as root:
            store = _store(root, native_on, 1024)
            queue = store.commit_log.mapped_file_queue
            try:
                results = [_result(store.put_message(_plain(i)[1])) for i in range(3)]
                queue.read_only = True  # (no new file from here on)
                results += [_result(store.put_message(_plain(i)[1])) for i in range(3, 7)]
                queue.read_only = False
                results += [_result(store.put_message(_plain(i)[1])) for i in range(7, 10)]
            finally:
                store.shutdown()
            out.append((results, _files(root), _stats(store)))
    assert out[1] == out[0]
    statuses = [r[0].name for r in out[1][0]]
    assert "CREATE_MAPEDFILE_FAILED" in statuses and statuses[-1] == "PUT_OK"
    failed = next(r for r in out[1][0] if r[0].name == "CREATE_MAPEDFILE_FAILED")
    assert failed[2][0].name == "END_OF_FILE"  # the blank written before the failed file


def test_a_tracer_or_a_lock_held_too_long_sends_the_put_to_the_pure_path(tmp_path):
    store = _store(str(tmp_path), True, 65536)
    try:
        msg = _plain(1)[1]
        assert store.put_message(msg).ok  # (the pure path checks the topic)
        assert store.put_path.putter.put(msg) is not None
        store.commit_log.begin_time_in_lock = 1  # a writer inside the lock since 1970: page cache busy
        assert store.put_path.putter.put(msg) is None  # the pure path answers OS_PAGECACHE_BUSY
        assert store.put_message(msg).status.name == "OS_PAGECACHE_BUSY"
        store.commit_log.begin_time_in_lock = 0
        held, done = threading.Event(), threading.Event()

        def writer():  # another thread holds the put lock (the RLock lets its own thread in again)
            with store.commit_log.put_message_lock:
                held.set()
                done.wait(10)

        t = threading.Thread(target=writer)
        t.start()
        held.wait(10)
        answers = []
        waiter = threading.Thread(target=lambda: answers.append(store.put_path.putter.put(msg)))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and answers == []  # the compiled put waits for the lock, the GIL let go
        done.set()
        t.join()
        waiter.join(10)
        assert answers and answers[0] is not None and answers[0].ok  # ... and then puts, compiled
        events = []

        class Tracer:
            def event(self, stage, **fields):
                events.append(stage)

        store.tracer = Tracer()
        assert store.put_path.putter.put(msg) is None
        assert store.put_message(msg).ok and "encode" in events
        store.tracer = None
        assert store.put_message(msg).append_result.logics_offset == 4  # 0, 1, the waiter's 2, the traced 3
    finally:
        store.shutdown()
    assert store.put_path.putter.put(msg) is None  # shut down: the pure path refuses it


def test_fixtures_replayed_through_the_native_put_give_rocketmq_bytes(tmp_path):
    from test_put_replay import Replay, test_commitlog_files_are_byte_identical, test_every_put_ok_result_matches

    for name in ("basic", "txn_delay", "flush_async", "flush_tsp"):
        replay = Replay(name, tmp_path / name)
        assert replay.store.put_path.putter is not None
        assert replay.store.stats.native()["ok"] > 0, name
        test_every_put_ok_result_matches(replay)
        test_commitlog_files_are_byte_identical(replay)


def test_the_compiled_pre_fault_answers_as_mmap_madvise_and_lets_the_gil_go(tmp_path):
    """``_cput.pre_fault`` populates a fresh file's pages as ``MappedFile.pre_fault`` does, bytes unchanged,
    and other threads run meanwhile (``mmap.madvise`` holds the GIL for the whole 64 MiB)."""
    from rmqstore.files.mapped_file import MappedFile

    cput = compiled_module("_cput")
    size = 64 << 20
    pure_file = MappedFile(str(tmp_path / "00000000000000000000"), size)
    fast_file = MappedFile(str(tmp_path / f"{size:020d}"), size)
    try:
        expected = pure_file.pre_fault()
        ticks = []
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks.append(1)

        # a long switch interval: the counting thread gets the GIL only when the call lets it go
        interval = sys.getswitchinterval()
        sys.setswitchinterval(0.5)
        counter = threading.Thread(target=count)
        counter.start()
        try:
            time.sleep(0.01)
            before = len(ticks)
            got = fast_file.pre_fault(cput)
            during = len(ticks) - before
        finally:
            stop.set()
            counter.join()
            sys.setswitchinterval(interval)
        assert got is expected
        assert fast_file.mapped[:4096] == bytes(4096) and fast_file.mapped[size - 4096:] == bytes(4096)
        if got:  # the kernel populated 16,384 pages: the counting thread ran while it did
            assert during > 0
    finally:
        pure_file.destroy()
        fast_file.destroy()
    with pytest.raises(BufferError):
        cput.pre_fault(b"read-only bytes")
