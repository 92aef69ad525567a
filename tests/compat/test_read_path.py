"""The read path (rmqstore.engine.reading) on stores written by our engine.

Tiny segments (4 KiB commitlog files, 8-unit consume-queue files) so that every read
crosses file boundaries; an injected clock where store times matter.  The last tests read
while writers are running: a reader must never see half a record.
"""

from __future__ import annotations

import random
import shutil
import struct
import threading
import time
from dataclasses import replace

import pytest

from rmqstore import open_store
from rmqstore.common.config import StoreConfig
from rmqstore.format.crc import crc32
from rmqstore.common.errors import LayoutError, StoreStateError
from rmqstore.format.message import Message
from rmqstore.format.properties import java_string_hash
from rmqstore.engine.reading import (ConsumeQueueUnit, GetMessageStatus, TagFilter, TransferLimits,
                                     get_commit_log_offset_in_queue, get_message, get_max_offset_in_queue,
                                     get_min_offset_in_queue, get_offset_in_queue_by_time, look_message_by_offset,
                                     message_keys, pickup_store_timestamp, query_message, view_message_by_id)
from rmqstore.format.record import Address, create_message_id
from rmqstore.store import MessageStore

TINY = dict(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 8, max_hash_slot_num=16,
            max_index_num=64)
T0 = 1_600_000_000_000  # store clock of the clocked stores (2020): before any file's mtime
EVER = (0, 2**63 - 1)


class StepClock:
    """A store clock the test sets by hand (``clock.now = ...``)."""

    def __init__(self, start: int = T0):
        self.now = start

    def __call__(self) -> int:
        return self.now


def props(**kv) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items())


def put(store, topic="T", queue_id=0, body=b"x", sys_flag=0, **kv):
    r = store.put_message(Message(topic=topic, queue_id=queue_id, body=body, properties=props(**kv),
                                  sys_flag=sys_flag, born_host="10.0.0.1:1234"))
    assert r.ok, r
    return r.append_result


def make_store(path, clock=None, **overrides) -> MessageStore:
    store = MessageStore(path, StoreConfig(**{**TINY, **overrides}), clock=clock)
    store.start()
    return store


@pytest.fixture
def store(tmp_path):
    """30 messages on T/0 (~10 per commitlog file, 8 per consume-queue file), tags alternating A/B."""
    s = make_store(tmp_path / "s")
    try:
        s.offsets = [put(s, body=bytes([65 + i % 26]) * 300, TAGS="AB"[i % 2], KEYS=f"k{i} all z{i}").wrote_offset
                     for i in range(30)]
        assert s.wait_dispatched()
        yield s
    finally:
        s.shutdown()


def check(rec, unit=None):
    assert crc32(rec.body) == rec.body_crc
    if unit is not None:
        assert (rec.physical_offset, rec.total_size, rec.queue_offset) == \
               (unit.commit_log_offset, unit.size, unit.queue_offset)


# -- get_message -----------------------------------------------------------------------------------

def test_one_pull_reads_one_consume_queue_file(store):
    assert len(store.commit_log.mapped_file_queue.mapped_files) >= 3
    assert len(store.consume_queue_table[("T", 0)].mapped_file_queue.mapped_files) == 4
    offset, seen, calls = 0, [], []
    while True:
        r = get_message(store, "g", "T", 0, offset, 1000)
        if r.status is not GetMessageStatus.FOUND:
            break
        calls.append((offset, r.next_begin_offset))
        for rec, unit in zip(r.messages, r.units, strict=True):
            check(rec, unit)
        seen.extend(r.messages)
        offset = r.next_begin_offset
    assert calls == [(0, 8), (8, 16), (16, 24), (24, 30)]  # each call stops at the end of a unit file
    assert [m.physical_offset for m in seen] == store.offsets
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 30
    assert r.suggest_pulling_from_slave is False


def test_max_count_and_transfer_limits(store):
    r = get_message(store, "g", "T", 0, 1, 3)
    assert r.message_count == 3 and r.next_begin_offset == 4
    assert [u.queue_offset for u in r.units] == [1, 2, 3]
    assert r.buffer_total_size == sum(m.total_size for m in r.messages)

    two = TransferLimits(max_transfer_count_on_message_in_memory=2)
    r = get_message(store, "g", "T", 0, 0, 1000, limits=two)
    assert r.message_count == 2 and r.next_begin_offset == 2

    size = r.messages[0].total_size
    tight = TransferLimits(max_transfer_bytes_on_message_in_memory=size * 2 + 10)
    r = get_message(store, "g", "T", 0, 0, 1000, limits=tight)
    assert r.message_count == 2  # a third would pass the byte limit

    nothing = TransferLimits(max_transfer_bytes_on_message_in_memory=1)
    r = get_message(store, "g", "T", 0, 0, 1000, limits=nothing)
    assert r.message_count == 1  # the first message always goes, whatever its size

    # "in disk" when further than the in-memory share of RAM from the end: the smaller limits
    on_disk = TransferLimits(access_message_in_memory_max_ratio=0, max_transfer_count_on_message_in_disk=3)
    r = get_message(store, "g", "T", 0, 0, 1000, limits=on_disk)
    assert r.message_count == 3 and r.suggest_pulling_from_slave is True


def test_tag_filter_and_hash_collisions(tmp_path):
    assert java_string_hash("Aa") == java_string_hash("BB")
    s = make_store(tmp_path / "f")
    try:
        tags = ["Aa", "BB", "C", "Aa", "C", "C"]
        offsets = [put(s, body=b"%d" % i, TAGS=t).wrote_offset for i, t in enumerate(tags)]
        assert s.wait_dispatched()

        r = get_message(s, "g", "T", 0, 0, 100, TagFilter("Aa"))
        # like RocketMQ's broker: the consume-queue stage compares hash codes, so BB comes too
        assert [m.physical_offset for m in r.messages] == [offsets[0], offsets[1], offsets[3]]
        assert r.next_begin_offset == 6
        r = get_message(s, "g", "T", 0, 0, 100, TagFilter("Aa", exact=True))
        assert [m.physical_offset for m in r.messages] == [offsets[0], offsets[3]]
        r = get_message(s, "g", "T", 0, 0, 100, TagFilter("C || BB"))
        assert len(r.messages) == 6  # BB's code is Aa's
        r = get_message(s, "g", "T", 0, 0, 100, TagFilter("*"))
        assert len(r.messages) == 6

        r = get_message(s, "g", "T", 0, 0, 100, lambda code: code == java_string_hash("C"))
        assert [m.physical_offset for m in r.messages] == [offsets[2], offsets[4], offsets[5]]
        # units skipped by the filter count towards next_begin_offset
        r = get_message(s, "g", "T", 0, 0, 100, TagFilter("Nope"))
        assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset == 6
        assert r.messages == []
        # the batch is full at the first unit after the message taken: that unit is read next time
        r = get_message(s, "g", "T", 0, 0, 1, TagFilter("C"))
        assert [m.physical_offset for m in r.messages] == [offsets[2]] and r.next_begin_offset == 3
    finally:
        s.shutdown()


def test_bad_units_are_skipped(store, tmp_path):
    store.shutdown()
    copy = tmp_path / "copy"
    shutil.copytree(store.root, copy)
    # flip a body byte of message 2; give unit 4 a wrong size
    second = store.offsets[2]
    seg = 4096
    path = copy / "commitlog" / f"{second - second % seg:020d}"
    data = bytearray(path.read_bytes())
    data[second % seg + 90] ^= 0xFF
    path.write_bytes(bytes(data))
    cq_path = copy / "consumequeue" / "T" / "0" / f"{0:020d}"
    cq = bytearray(cq_path.read_bytes())
    struct.pack_into(">i", cq, 4 * 20 + 8, 77)
    cq_path.write_bytes(bytes(cq))

    # recovery must not stop at the bad CRC: this is about what a pull does with such a record
    ro = open_store(copy, config=replace(StoreConfig(**TINY), check_crc_on_recover=False))
    try:
        r = get_message(ro, "g", "T", 0, 0, 100)
        assert [u.queue_offset for u in r.units] == [0, 1, 2, 3, 5, 6, 7]  # unit 4 is not its record
        assert crc32(r.messages[2].body) != r.messages[2].body_crc  # RocketMQ does not check CRCs here
        r = get_message(ro, "g", "T", 0, 0, 100, check_crc=True)
        assert [u.queue_offset for u in r.units] == [0, 1, 3, 5, 6, 7]
        assert r.next_begin_offset == 8
        r = get_message(ro, "g", "T", 0, 4, 1)
        assert r.status is GetMessageStatus.FOUND and r.units[0].queue_offset == 5 and r.next_begin_offset == 6
    finally:
        ro.close()


def test_offset_found_null_and_message_was_removing(store):
    store.shutdown()
    ro = open_store(store.root)
    try:
        cq = ro.consume_queue_table[("T", 0)]
        # the unit file of offsets 8..15 is gone (but min offset still says 0)
        files = cq.mapped_file_queue.mapped_files
        gone = files[1]
        cq.mapped_file_queue.mapped_files = [files[0]] + files[2:]
        r = get_message(ro, "g", "T", 0, 9, 100)
        assert r.status is GetMessageStatus.OFFSET_FOUND_NULL
        assert r.next_begin_offset == 16 and r.messages == []
        cq.mapped_file_queue.mapped_files = files
        assert gone in files

        # every commitlog file is gone: the units point at nothing
        log_files = ro.commit_log.mapped_file_queue.mapped_files
        ro.commit_log.mapped_file_queue.mapped_files = []
        r = get_message(ro, "g", "T", 0, 2, 100)
        assert r.status is GetMessageStatus.MESSAGE_WAS_REMOVING
        assert r.next_begin_offset == 8 and r.messages == []
        # only the first file is gone: units 8..15 point into it and the next one; the rest is found
        ro.commit_log.mapped_file_queue.mapped_files = log_files[1:]
        first_end = log_files[1].file_from_offset
        assert store.offsets[8] < first_end < store.offsets[15]
        r = get_message(ro, "g", "T", 0, 8, 100)
        assert r.status is GetMessageStatus.FOUND and r.next_begin_offset == 16
        assert [m.physical_offset for m in r.messages] == [o for o in store.offsets[8:16] if o >= first_end]
        ro.commit_log.mapped_file_queue.mapped_files = log_files
    finally:
        ro.close()


def test_shut_down_store_refuses_pulls(tmp_path):
    s = make_store(tmp_path / "down")
    put(s)
    assert s.wait_dispatched()
    s.shutdown()
    with pytest.raises(StoreStateError):
        get_message(s, "g", "T", 0, 0, 1)


# -- queue offsets, by time -------------------------------------------------------------------------

def test_queue_offsets_and_commit_log_offset(store):
    assert get_min_offset_in_queue(store, "T", 0) == 0
    assert get_max_offset_in_queue(store, "T", 0) == 30
    assert get_max_offset_in_queue(store, "Nope", 0) == 0 and get_min_offset_in_queue(store, "Nope", 0) == 0
    for n in (0, 7, 8, 29):
        assert get_commit_log_offset_in_queue(store, "T", 0, n) == store.offsets[n]
    assert get_commit_log_offset_in_queue(store, "T", 0, 30) == 0
    assert get_commit_log_offset_in_queue(store, "Nope", 0, 0) == 0


@pytest.fixture
def clocked(tmp_path):
    """12 messages on T/0 stored at T0, T0+1000, ... (one consume-queue file)."""
    clock = StepClock()
    s = make_store(tmp_path / "c", clock=clock, mapped_file_size_consume_queue=20 * 64)
    try:
        for i in range(12):
            clock.now = T0 + i * 1000
            put(s, body=b"%d" % i, KEYS=f"k{i} same")
        assert s.wait_dispatched()
        yield s
    finally:
        s.shutdown()


def test_offset_by_time_binary_search(clocked):
    f = lambda ts: get_offset_in_queue_by_time(clocked, "T", 0, ts)  # noqa: E731
    assert [f(T0 + i * 1000) for i in range(12)] == list(range(12))  # exact hits
    assert f(T0 + 3400) == 3 and f(T0 + 3600) == 4
    assert f(T0 + 3500) == 3  # a tie goes to the earlier one
    assert f(T0 - 10_000) == 0 and f(T0 + 99_000) == 11
    assert get_offset_in_queue_by_time(clocked, "Nope", 0, T0) == 0
    off = get_commit_log_offset_in_queue(clocked, "T", 0, 5)
    assert pickup_store_timestamp(clocked, off, look_message_by_offset(clocked, off).total_size) == T0 + 5000
    assert pickup_store_timestamp(clocked, clocked.get_max_phy_offset(), 100) == -1


def test_offset_by_time_picks_the_file_by_mtime(tmp_path):
    clock = StepClock()
    s = make_store(tmp_path / "m", clock=clock)
    try:
        for i in range(20):  # 3 consume-queue files of 8 units
            clock.now = T0 + i * 1000
            put(s, body=b"%d" % i)
        assert s.wait_dispatched()
        # every file was modified after T0+12000, so RocketMQ's rule searches the first file only
        assert get_offset_in_queue_by_time(s, "T", 0, T0 + 12_000) == 7
        assert get_offset_in_queue_by_time(s, "T", 0, T0 + 12_000, file_by_mtime=False) == 12
        assert get_offset_in_queue_by_time(s, "T", 0, T0 + 99_000, file_by_mtime=False) == 19
        assert get_offset_in_queue_by_time(s, "T", 0, T0 + 3_000, file_by_mtime=False) == 3
    finally:
        s.shutdown()


# -- by offset and id -------------------------------------------------------------------------------

def test_look_message_by_offset(store):
    for o in store.offsets:
        rec = look_message_by_offset(store, o)
        check(rec)
        assert rec.physical_offset == o
    assert look_message_by_offset(store, store.offsets[3], look_message_by_offset(store, store.offsets[3]).total_size)
    assert look_message_by_offset(store, store.offsets[3] + 1) is None  # inside a record
    assert look_message_by_offset(store, store.offsets[3] + 20) is None
    assert look_message_by_offset(store, -5) is None
    assert look_message_by_offset(store, store.get_max_phy_offset()) is None  # not written yet
    assert look_message_by_offset(store, 10**12) is None
    # where file 0 ends with a blank record
    last_in_first = max(o for o in store.offsets if o < 4096)
    blank_at = last_in_first + look_message_by_offset(store, last_in_first).total_size
    assert blank_at < 4096 and look_message_by_offset(store, blank_at) is None
    assert look_message_by_offset(store, store.offsets[3], 100) is None  # a size that is not the record's


def test_view_message_by_id(store):
    rec = look_message_by_offset(store, store.offsets[5])
    msg_id = create_message_id(rec.store_host, rec.physical_offset)
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    assert view_message_by_id(store, msg_id) == rec
    assert store.view_message_by_id(msg_id) == rec
    other = create_message_id(Address(b"\x0a\x00\x00\x09", rec.store_host.port), rec.physical_offset)
    assert view_message_by_id(store, other) is None
    assert view_message_by_id(store, other, check_host=False) == rec
    assert view_message_by_id(store, create_message_id(rec.store_host, rec.physical_offset + 1)) is None
    v6 = create_message_id(Address(bytes(15) + b"\x01", 10911), rec.physical_offset)
    assert len(v6) == 56 and view_message_by_id(store, v6) is None
    for bad in ("", "XYZ", "00" * 15, "G" * 32):
        with pytest.raises(LayoutError):
            view_message_by_id(store, bad)


# -- by key -----------------------------------------------------------------------------------------

def test_query_message_by_key(store):
    r = query_message(store, "T", "k7", 10, *EVER)
    assert r.phy_offsets == [store.offsets[7]]
    assert r.index_last_update_phyoffset == store.offsets[-1]
    assert r.index_last_update_timestamp == look_message_by_offset(store, store.offsets[-1]).store_timestamp
    assert query_message(store, "T", "nope", 10, *EVER).phy_offsets == []
    assert query_message(store, "Other", "k7", 10, *EVER).phy_offsets == []
    # many hits across index files (64 entries each): the newest ones, returned in log order
    r = query_message(store, "T", "all", 10, *EVER)
    assert r.phy_offsets == store.offsets[-10:]
    assert store.query_message("T", "all", 100, *EVER).phy_offsets == store.offsets
    assert len(store.index_service.index_files) > 1


def test_query_message_cap_and_time_window(clocked):
    cfg = clocked.config
    assert query_message(clocked, "T", "same", 100, *EVER).phy_offsets == \
        [get_commit_log_offset_in_queue(clocked, "T", 0, n) for n in range(12)]
    clocked.config = replace(cfg, max_msgs_num_batch=5)
    try:  # IndexService caps maxNum at maxMsgsNumBatch: the five newest
        assert query_message(clocked, "T", "same", 100, *EVER).phy_offsets == \
            [get_commit_log_offset_in_queue(clocked, "T", 0, n) for n in range(7, 12)]
    finally:
        clocked.config = cfg
    r = query_message(clocked, "T", "same", 100, T0 + 3000, T0 + 6000)
    assert [look_message_by_offset(clocked, o).store_timestamp for o in r.phy_offsets] == \
        [T0 + 3000, T0 + 4000, T0 + 5000, T0 + 6000]
    assert query_message(clocked, "T", "k2", 100, T0 + 3000, T0 + 6000).phy_offsets == []
    assert query_message(clocked, "T", "k2", 100, T0 + 2000, T0 + 2000).messages[0].body == b"2"


def test_query_message_hash_collisions(tmp_path):
    assert java_string_hash("T#Aa") == java_string_hash("T#BB")
    s = make_store(tmp_path / "h")
    try:
        a = put(s, body=b"a", KEYS="Aa").wrote_offset
        b = put(s, body=b"b", KEYS="BB").wrote_offset
        assert s.wait_dispatched()
        # RocketMQ returns what the hash finds, without looking at the record's keys
        assert query_message(s, "T", "Aa", 10, *EVER).phy_offsets == [a, b]
        assert query_message(s, "T", "Aa", 10, *EVER, verify_keys=True).phy_offsets == [a]
        assert query_message(s, "T", "BB", 10, *EVER, verify_keys=True).phy_offsets == [b]
        assert message_keys(look_message_by_offset(s, a)) == {"Aa"}
    finally:
        s.shutdown()


def test_store_methods_delegate(store):
    assert store.get_message("g", "T", 0, 0, 2).message_count == 2
    assert store.look_message_by_offset(store.offsets[1]).physical_offset == store.offsets[1]
    assert store.get_max_offset_in_queue("T", 0) == 30 and store.get_min_offset_in_queue("T", 0) == 0
    assert store.get_commit_log_offset_in_queue("T", 0, 4) == store.offsets[4]
    assert store.query_message("T", "k3", 5, *EVER).phy_offsets == [store.offsets[3]]
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    unit = store.get_message("g", "T", 0, 3, 1).units[0]
    assert isinstance(unit, ConsumeQueueUnit) and unit.commit_log_offset == store.offsets[3]


# -- reads while writers run --------------------------------------------------------------------------

@pytest.mark.parametrize("tsp", [False, True], ids=["mmap", "transient-store-pool"])
def test_reads_while_writing_never_see_half_records(tmp_path, tsp):  # noqa: C901 -- one scenario, step by step
    s = make_store(tmp_path / "w", mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=20 * 50,
                   max_hash_slot_num=64, max_index_num=256, transient_store_pool_enable=tsp,
                   commit_interval_commit_log=5, flush_interval_commit_log=5)
    writers, per_writer, queues = 4, 250, 2
    done = threading.Event()
    errors: list[str] = []
    pulled: dict[int, list] = {q: [] for q in range(queues)}
    scans = [0]

    def fail(text):
        errors.append(text)

    def write(w):
        rnd = random.Random(w)
        for i in range(per_writer):
            put(s, topic="C", queue_id=w % queues, body=rnd.randbytes(rnd.randint(0, 700)), KEYS=f"w{w}-{i} any")

    def pull_and_keep():
        offsets = {q: 0 for q in range(queues)}
        while True:
            finished = done.is_set()
            for q in range(queues):
                r = get_message(s, "g", "C", q, offsets[q], 64)
                for rec, unit in zip(r.messages, r.units, strict=True):
                    if crc32(rec.body) != rec.body_crc or rec.physical_offset != unit.commit_log_offset:
                        fail(f"bad record at {unit}")
                    pulled[q].append((unit.queue_offset, rec.physical_offset))
                offsets[q] = r.next_begin_offset
            if finished and all(offsets[q] == get_max_offset_in_queue(s, "C", q) for q in range(queues)):
                return

    def scan():
        cl = s.commit_log
        while not done.is_set():
            offset, end = max(cl.get_min_offset(), 0), s.get_max_phy_offset()
            while offset < end:
                rec = look_message_by_offset(s, offset, check_crc=True)
                if rec is None:
                    mf = cl.mapped_file_queue.find_mapped_file_by_offset(offset)
                    if mf is None or offset - mf.file_from_offset >= mf.read_position:
                        break  # a full file whose tail is not committed yet (transient store pool)
                    # below a file's read position only a blank (END_OF_FILE) record is not a message
                    if struct.unpack_from(">i", mf.mapped, offset - mf.file_from_offset + 4)[0] != -875286124:
                        fail(f"no record at {offset} below the read position of its file")
                        return
                    offset = cl.roll_next_file(offset)
                    continue
                offset += rec.total_size
            scans[0] += 1
            time.sleep(0.001)

    def query():
        while not done.is_set():
            for rec in query_message(s, "C", "any", 64, *EVER).messages:
                if crc32(rec.body) != rec.body_crc or rec.topic != "C":
                    fail(f"bad query result at {rec.physical_offset}")
            time.sleep(0.001)

    readers = [threading.Thread(target=pull_and_keep), threading.Thread(target=scan), threading.Thread(target=query)]
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    try:
        for t in readers + threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        queue = s.commit_log.mapped_file_queue
        deadline = time.monotonic() + 30
        while s.get_max_phy_offset() < queue.get_max_wrote_position():  # the pool's commit may lag
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert s.wait_dispatched()
        done.set()
        for t in readers:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in readers + threads)
        assert errors == []
        assert scans[0] > 0
        for q in range(queues):
            assert [qo for qo, _ in pulled[q]] == list(range(writers // queues * per_writer))
        everything = sorted(o for q in range(queues) for _, o in pulled[q])
        assert len(everything) == writers * per_writer == len(set(everything))
        final = query_message(s, "C", "w3-249", 10, *EVER)
        assert len(final.messages) == 1 and message_keys(final.messages[0]) == {"w3-249", "any"}
    finally:
        done.set()
        s.shutdown()


def test_a_closed_store_says_so():
    """Reads of a closed store raise StoreStateError naming it; they used to answer 'nothing found'
    (notebook 06's inspector showed '0 record(s) via the index' after its store was closed)."""
    from conftest import FIXTURES
    from rmqstore.common.errors import StoreStateError

    store = open_store(FIXTURES / "basic" / "store")
    assert store.query_message("TopicTest", "KEY0", 32, 0, 2**63 - 1) is not None
    store.close()
    reads = {
        "query_message": lambda: store.query_message("TopicTest", "KEY0", 32, 0, 2**63 - 1),
        "look_message_by_offset": lambda: store.look_message_by_offset(0),
        "view_message_by_id": lambda: store.view_message_by_id("0" * 32),
        "get_message": lambda: store.get_message("g", "TopicTest", 0, 0, 32),
        "get_max_offset_in_queue": lambda: store.get_max_offset_in_queue("TopicTest", 0),
        "get_min_offset_in_queue": lambda: store.get_min_offset_in_queue("TopicTest", 0),
        "get_offset_in_queue_by_time": lambda: store.get_offset_in_queue_by_time("TopicTest", 0, 0),
    }
    for name, read in reads.items():
        with pytest.raises(StoreStateError, match="closed"):
            read()
    store.close()  # closing twice is harmless


def test_a_shut_down_store_says_so(tmp_path):
    from rmqstore import Message, MessageStore, StoreConfig
    from rmqstore.common.errors import StoreStateError

    store = MessageStore(tmp_path / "s", StoreConfig(mapped_file_size_commit_log=64 * 1024))
    store.start()
    result = store.put_message(Message("T", b"x", properties="KEYS\x01k"))
    store.wait_dispatched()
    assert store.look_message_by_offset(result.append_result.wrote_offset) is not None
    store.shutdown()
    with pytest.raises(StoreStateError, match="closed"):
        store.look_message_by_offset(result.append_result.wrote_offset)
    with pytest.raises(StoreStateError, match="closed"):
        store.query_message("T", "k", 32, 0, 2**63 - 1)
