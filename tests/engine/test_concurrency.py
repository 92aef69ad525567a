"""Many writers at once: one log, back to back, every answer true.

Several threads put at the same time -- singles, batches and PREPARED messages over a few
topics and queues, with small files so that rollovers happen under contention -- under
async flush, sync flush and the transient store pool, with the reentrant lock and with
the spin lock.  Afterwards the commitlog must read as one clean log: every record decodes
with a good CRC at its own physical offset, each record starts where the previous one
ended, blanks run to the ends of files, queue offsets are unique and gapless per queue,
and every ``PutMessageResult`` says exactly where its message is on disk.
"""

from __future__ import annotations

import os
import random
import sys
import threading
from collections import defaultdict

import pytest

from rmqstore import BatchItem, Message, MessageBatch, MessageStore, StoreConfig
from rmqstore.engine.commit_log import PutMessageSpinLock
from rmqstore.common.config import FlushDiskType
from rmqstore.format.record import Address, BlankRecord, MessageRecord, create_message_id, decode_record
from rmqstore.format.sysflag import TRANSACTION_PREPARED_TYPE

FILE_SIZE = 64 * 1024
STORE_HOST = "198.51.100.7:10911"
TOPICS = ("CcA", "CcB", "CcC")
QUEUES = 3


@pytest.fixture(autouse=True)
def eager_thread_switches():
    """Switch threads far more often than the default 5 ms, so writers really interleave."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def walk(root) -> list[tuple[int, object]]:
    """Every record of the log in order, checking that it is back to back."""
    folder = os.path.join(str(root), "commitlog")
    names = sorted(n for n in os.listdir(folder) if n.isdigit())
    out = []
    expected = 0
    ended = False
    for name in names:
        base = int(name)
        if ended:  # while a store runs, the allocate service keeps the next file ready
            with open(os.path.join(folder, name), "rb") as f:
                assert not any(f.read()), f"{name} follows the end of the log but is not empty"
            assert name == names[-1], "at most one file is made ahead"
            continue
        assert base == expected, f"file {name} does not start where the log ended ({expected})"
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        assert len(data) == FILE_SIZE
        pos = 0
        while pos + 8 <= FILE_SIZE and any(data[pos:pos + 8]):
            rec = decode_record(data, pos, check_crc=True)
            out.append((base + pos, rec))
            if isinstance(rec, BlankRecord):
                assert pos + rec.total_size == FILE_SIZE, f"{name}: blank at {pos} does not reach the end"
                assert not any(data[pos + 8:])
                pos = FILE_SIZE
                break
            assert rec.physical_offset == base + pos, f"{name}@{pos}: record says {rec.physical_offset}"
            pos += rec.total_size
        expected = base + pos
        if pos < FILE_SIZE:
            assert not any(data[pos:]), f"{name}: bytes after the end of the log"
            ended = True
    return out


class Writer(threading.Thread):
    def __init__(self, store: MessageStore, wid: int, n: int, start_gate: threading.Barrier,
                 with_batches: bool = True):
        super().__init__(daemon=True)
        self.store = store
        self.wid = wid
        self.n = n
        self.gate = start_gate
        self.rng = random.Random(wid)
        self.with_batches = with_batches
        self.done: list[tuple[list[bytes], int, object]] = []  # (bodies, sys_flag, result)
        self.error: BaseException | None = None

    def body(self, i: int, j: int = 0) -> bytes:
        tag = b"w%d-%d-%d|" % (self.wid, i, j)
        return tag + bytes([self.rng.randrange(256)]) * self.rng.choice((0, 10, 300, 1500, 4000))

    def run(self):
        try:
            self.gate.wait()
            for i in range(self.n):
                topic = self.rng.choice(TOPICS)
                qid = self.rng.randrange(QUEUES)
                kind = self.rng.random()
                if self.with_batches and kind < 0.15:
                    bodies = [self.body(i, j) for j in range(self.rng.randint(2, 5))]
                    r = self.store.put_messages(MessageBatch(topic=topic, queue_id=qid,
                                                             items=[BatchItem(b) for b in bodies],
                                                             properties="CLUSTER\x01c"))
                    self.done.append((bodies, 0, r))
                else:
                    sys_flag = TRANSACTION_PREPARED_TYPE if kind > 0.93 else 0
                    b = self.body(i)
                    r = self.store.put_message(Message(topic=topic, queue_id=qid, body=b, sys_flag=sys_flag,
                                                       properties=f"KEYS\x01{self.wid}-{i}",
                                                       born_timestamp=i, born_host="192.0.2.2:5555"))
                    self.done.append(([b], sys_flag, r))
        except BaseException as exc:  # reported by the test
            self.error = exc


def run_writers(store: MessageStore, threads: int, per_thread: int, with_batches: bool = True):
    gate = threading.Barrier(threads)
    writers = [Writer(store, w, per_thread, gate, with_batches) for w in range(threads)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=120)
        assert not w.is_alive(), "a writer hung"
        assert w.error is None, repr(w.error)
    return writers


def check_log_against_results(root, writers) -> None:
    host = Address.parse(STORE_HOST)
    log = walk(root)
    by_body = {}
    for off, rec in log:
        if isinstance(rec, MessageRecord):
            assert rec.body not in by_body, "a message was written twice"
            by_body[rec.body] = (off, rec)
    written = 0
    for w in writers:
        for bodies, sys_flag, r in w.done:
            assert r.ok, r
            ar = r.append_result
            assert ar.msg_num == len(bodies)
            recs = [by_body[b] for b in bodies]
            written += len(bodies)
            assert ar.wrote_offset == recs[0][0]
            assert ar.wrote_bytes == sum(rec.total_size for _, rec in recs)
            assert ar.msg_id == ",".join(create_message_id(host, off) for off, _ in recs)
            assert all(rec.store_timestamp == ar.store_timestamp for _, rec in recs)
            for k, (off, rec) in enumerate(recs):
                assert off == recs[0][0] + sum(x.total_size for _, x in recs[:k]), "a batch is contiguous"
                assert off // FILE_SIZE == recs[0][0] // FILE_SIZE, "a batch never spans files"
                if sys_flag == TRANSACTION_PREPARED_TYPE:
                    assert rec.queue_offset == 0 and ar.logics_offset == 0
                else:
                    assert rec.queue_offset == ar.logics_offset + k
    assert written == len(by_body), "every record on disk belongs to a put"
    # queue offsets: unique and gapless per queue (PREPARED ones do not count)
    per_queue = defaultdict(list)
    for _, rec in log:
        if isinstance(rec, MessageRecord) and rec.sys_flag & 0xC != TRANSACTION_PREPARED_TYPE:
            per_queue[rec.topic, rec.queue_id].append(rec.queue_offset)
    for key, offsets in per_queue.items():
        assert offsets == list(range(len(offsets))), f"queue {key}: offsets out of order or with gaps"


MODES = {
    "async": dict(),
    "sync": dict(flush_disk_type=FlushDiskType.SYNC_FLUSH),
    "async+tsp": dict(transient_store_pool_enable=True, transient_store_pool_size=3,
                      commit_interval_commit_log=5, flush_interval_commit_log=20),
    "async+tsp, pool runs dry": dict(transient_store_pool_enable=True, transient_store_pool_size=1,
                                     commit_interval_commit_log=200),
    "async, spin lock": dict(use_reentrant_lock_when_put_message=False),
    "sync, spin lock": dict(flush_disk_type=FlushDiskType.SYNC_FLUSH, use_reentrant_lock_when_put_message=False),
    "async+tsp, spin lock": dict(transient_store_pool_enable=True, transient_store_pool_size=3,
                                 use_reentrant_lock_when_put_message=False, commit_interval_commit_log=5),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("threads", [4, 8])
def test_concurrent_writers_make_one_clean_log(tmp_path, mode, threads):
    cfg = StoreConfig(mapped_file_size_commit_log=FILE_SIZE, store_host=STORE_HOST, **MODES[mode])
    store = MessageStore(tmp_path, cfg)
    store.start()
    if "spin" in mode:
        assert isinstance(store.commit_log.put_message_lock, PutMessageSpinLock)
    try:
        writers = run_writers(store, threads, per_thread=120 if threads == 4 else 60)
        total = sum(len(b) for w in writers for b, _, _ in w.done)
        snap = store.stats.snapshot()
        assert snap["putMessageTimesTotal"] == total and snap["putMessageFailedTimes"] == 0
    finally:
        store.shutdown()
    assert store.get_max_phy_offset() > 2 * FILE_SIZE, "the run should roll over files"
    check_log_against_results(tmp_path, writers)
    for mf in store.commit_log.mapped_file_queue.mapped_files:
        assert mf.flushed_position == mf.wrote_position


def test_results_match_the_log_while_still_running(tmp_path):
    """Without the pool, readers see bytes at once: check before shutdown too."""
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE_SIZE, store_host=STORE_HOST))
    store.start()
    try:
        writers = run_writers(store, 6, 80)
        check_log_against_results(tmp_path, writers)
    finally:
        store.shutdown()


def test_spin_lock_excludes():
    lock = PutMessageSpinLock()
    inside = [0]
    peak = [0]
    counter = [0]

    def work():
        for _ in range(2000):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
                v = counter[0]
                counter[0] = v + 1
                inside[0] -= 1

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert peak[0] == 1
    assert counter[0] == 6 * 2000
    assert lock.acquire() is True
    lock.release()


def test_async_put_futures_from_many_threads(tmp_path):
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE_SIZE, store_host=STORE_HOST,
                                               flush_disk_type=FlushDiskType.SYNC_FLUSH))
    store.start()
    futures = [[] for _ in range(4)]

    def submit(k):
        for i in range(50):
            futures[k].append(store.async_put_message(Message(topic="Fut", queue_id=k, body=b"%d-%d" % (k, i))))

    try:
        ts = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        results = [[f.result(timeout=30) for f in fs] for fs in futures]
    finally:
        store.shutdown()
    for k, rs in enumerate(results):
        assert all(r.ok for r in rs)
        assert sorted(r.append_result.logics_offset for r in rs) == list(range(50))
    offsets = sorted(r.append_result.wrote_offset for rs in results for r in rs)
    assert len(set(offsets)) == 200
    log = [(off, rec) for off, rec in walk(tmp_path) if isinstance(rec, MessageRecord)]
    assert [off for off, _ in log] == offsets
