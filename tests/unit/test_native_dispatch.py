"""The compiled dispatch (``rmqstore._native._cdispatch``) writes what the pure dispatch writes.

The properties: the same commitlog bytes dispatched by a store on the compiled path and by
one on the pure path (``StoreConfig(native=False)``) give identical consume-queue files,
identical index file contents (files matched in name order: names are creation times),
the same end of the walk (position, kind, reason, records), the same checkpoint logics
time, the same last long-polling wake-up per queue, and the same stop at a record the
dispatchers cannot take.  The workloads are random: topics (non-ASCII, the schedule topic),
queues, tags and keys (non-ASCII, astral, several keys, stray spaces), UNIQ_KEY, delay
levels (plain and not: ``" 2"``, ``"٣"``, ``"1_0"``), transaction types, queue-offset gaps
and repeated physical offsets, V2 records and IPv6 hosts, tiny consume-queue and index
sizes (rollovers, full index files), and garbage after or inside the records.  And every
fixture's commitlog re-dispatched on the compiled path gives RocketMQ's consume queues and
index files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import ALL_FIXTURES, FIXTURES, compiled_module, files_under
from rmqstore.common.config import StoreConfig
from rmqstore.engine.dispatch import MAX_BATCH, delay_table, reput_segment, reput_segment_native
from rmqstore.common.errors import StoreError
from rmqstore.format.layout import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from rmqstore.format.properties import java_string_hash
from rmqstore.format.record import Address, encode_message
from rmqstore.store import MessageStore
from rmqstore.files.store_paths import offset_to_file_name
from rmqstore.format.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE,
                                     TRANSACTION_ROLLBACK_TYPE)

DELAYS = StoreConfig().delay_level_table()
TOPICS = ["TopicA", "Tö日本", "SCHEDULE_TOPIC_XXXX", "T-\U0001F600", "q" * 100]
V4 = Address(bytes([10, 0, 0, 1]), 5000)
V6 = Address(bytes(range(16)), 6000)

_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02 ")
word = st.text(_chars, min_size=0, max_size=8)
message = st.fixed_dictionaries({
    "topic": st.sampled_from(TOPICS),
    "queue_id": st.integers(0, 2),
    "tags": st.none() | word | st.sampled_from(["TagA", "é", "\U0001F600x", "a\x01b"]),
    "keys": st.none() | st.lists(word, max_size=3).map(" ".join) | st.sampled_from(["k1  k2 ", " ", "ключ 鍵"]),
    "uniq": st.none() | st.sampled_from(["", "7F0000013DBD5FFD2B276CF89D220000", "ü-1"]) | word,
    "delay": st.none() | st.sampled_from(["1", "3", "18", "19", "99", "0", "-2", "+4", " 2", "x", "٣", "1_0", "007",
                                          "99999999999999999999"]),
    "tx": st.sampled_from([TRANSACTION_NOT_TYPE] * 4 + [TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE,
                                                         TRANSACTION_ROLLBACK_TYPE]),
    "body": st.integers(0, 120),
    "v2": st.booleans(),
    "v6": st.booleans(),
    "ts_step": st.integers(-1500, 4000),  # store time may step back (a wall clock does)
    "gap": st.sampled_from([0] * 10 + [1, 3]),  # a queue offset skipped: the pure path's warning case
    "extra": st.sampled_from(["", "\x02", "\x02junk", "\x02\x01v", "\x02TAGS\x01", "\x02K\x01\x01"]),
})


def properties_of(m: dict) -> str:
    parts = []
    if m["tags"] is not None:
        parts.append(f"TAGS\x01{m['tags']}")
    if m["keys"] is not None:
        parts.append(f"KEYS\x01{m['keys']}")
    if m["uniq"] is not None:
        parts.append(f"UNIQ_KEY\x01{m['uniq']}")
    if m["delay"] is not None:
        parts.append(f"DELAY\x01{m['delay']}")
    return "\x02".join(parts) + m["extra"]


class Log:
    """Commitlog bytes for a list of messages, as a writer would lay them out (queue offsets per queue)."""

    def __init__(self, file_size: int | None = None):
        self.file_size = file_size
        self.files: list[bytearray] = [bytearray()]
        self.next_offset: dict[tuple[str, int], int] = {}
        self.ts = 1_700_000_000_000

    @property
    def offset(self) -> int:
        return (len(self.files) - 1) * (self.file_size or 0) + len(self.files[-1])

    def record(self, m: dict, physical_offset: int | None = None) -> bytes:
        key = (m["topic"], m["queue_id"])
        builds = m["tx"] in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
        queue_offset = self.next_offset.get(key, 0) + m["gap"] if builds else 0
        if builds:
            self.next_offset[key] = queue_offset + 1
        self.ts = max(self.ts + m["ts_step"], 0)
        return encode_message(
            queue_id=m["queue_id"], flag=0, queue_offset=queue_offset,
            physical_offset=self.offset if physical_offset is None else physical_offset, sys_flag=m["tx"],
            born_timestamp=self.ts - 5, born_host=V6 if m["v6"] else V4, store_timestamp=self.ts,
            store_host=V4 if m["v6"] else V6, reconsume_times=0, prepared_transaction_offset=0,
            body=bytes(m["body"]), topic=m["topic"], properties=properties_of(m),
            magic_code=MESSAGE_MAGIC_CODE_V2 if m["v2"] else MESSAGE_MAGIC_CODE)

    def add(self, m: dict, physical_offset: int | None = None) -> None:
        if self.file_size is not None:
            size = len(self.record(dict(m, gap=0, ts_step=0), 0))
            left = self.file_size - len(self.files[-1])
            if size + 8 > left:  # RocketMQ's rule: a blank fills the rest, the record goes to the next file
                self.files[-1] += left.to_bytes(4, "big") + BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)
                self.files[-1] += bytes(left - 8)
                self.files.append(bytearray())
        self.files[-1] += self.record(m, physical_offset)


def tiny_config(native: bool, cq_units: int, slots: int, entries: int) -> StoreConfig:
    return StoreConfig(native=native, mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * cq_units,
                       max_hash_slot_num=slots, max_index_num=entries)


def assert_same_derived_files(a: Path, b: Path) -> None:
    """Identical consume-queue files; identical index contents, files matched in name order."""
    cq = files_under(b / "consumequeue")
    assert files_under(a / "consumequeue") == cq
    for rel in cq:
        assert (a / "consumequeue" / rel).read_bytes() == (b / "consumequeue" / rel).read_bytes(), rel
    ia, ib = files_under(a / "index"), files_under(b / "index")
    assert len(ia) == len(ib)
    for x, y in zip(ia, ib):
        assert (a / "index" / x).read_bytes() == (b / "index" / y).read_bytes(), (x, y)


class Side:
    """A loaded (not started) store on one path, dispatching a buffer through reput_segment(_native)."""

    def __init__(self, root: Path, config: StoreConfig, cdispatch):
        self.root = root
        self.store = MessageStore(root, config)
        self.store.load()
        self.cdispatch = cdispatch
        self.wakeups: dict[tuple[str, int], int] = {}
        self.store.message_arriving_listener = lambda t, q, m: self.wakeups.__setitem__((t, q), m)

    def dispatch(self, buf, start: int, readable: int):
        store = self.store
        levels = store.commit_log.delay_levels
        if self.cdispatch is None:
            end, done, failure = reput_segment(buf, 0, start, readable, store.dispatcher.dispatch, levels)
        else:
            end, done, failure = reput_segment_native(self.cdispatch, store.dispatcher, buf, 0, start, readable,
                                                      levels, delay_table(levels))
        def words(text):
            return text.replace(str(self.root), "<root>")

        why = None if failure is None else words(str(failure))
        return (end.pos, end.kind, words(end.reason), end.records, done, why)

    def close(self):
        ts = self.store.checkpoint.logics_msg_timestamp
        self.store.close()
        return ts


def two_sides(tmp: Path, config_args: tuple, cd):
    native = Side(tmp / "native", tiny_config(True, *config_args), cd)
    pure = Side(tmp / "pure", tiny_config(False, *config_args), None)
    return native, pure


TAILS = ["", "zeros", "blank", "cut", "magic", "utf8", "short", "props"]


def tail_bytes(kind: str, log: Log, m: dict) -> bytes:
    rec = bytearray(log.record(m))
    if kind == "zeros":
        return bytes(64)
    if kind == "blank":
        return (500).to_bytes(4, "big") + BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)
    if kind == "cut":  # a record whose end has not arrived (readable ends inside it)
        return bytes(rec)
    if kind == "magic":
        rec[4:8] = b"\x12\x34\x56\x78"
    elif kind == "utf8":  # a topic byte that is not UTF-8
        rec[rec.index(m["topic"].encode()[:1], 88)] = 0xFF
    elif kind == "short":
        rec[0:4] = (50).to_bytes(4, "big")
    elif kind == "props":
        rec[0:4] = (len(rec) + 3).to_bytes(4, "big")
    return bytes(rec)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(msgs=st.lists(message, min_size=1, max_size=40), cq_units=st.integers(2, 9), slots=st.integers(1, 8),
       entries=st.integers(2, 12), tail=st.sampled_from(TAILS), repeat_at=st.none() | st.integers(0, 39))
@example(msgs=[dict(topic="TopicA", queue_id=0, tags="TagA", keys="k1 k2", uniq="U1", delay=None, tx=0, body=3,
                    v2=False, v6=False, ts_step=10, gap=0, extra="")] * 30,
         cq_units=4, slots=2, entries=5, tail="", repeat_at=None)
@example(msgs=[dict(topic="SCHEDULE_TOPIC_XXXX", queue_id=q, tags=None, keys=None, uniq=None, delay=d, tx=0,
                    body=0, v2=True, v6=True, ts_step=1000, gap=0, extra="")
               for q, d in ((0, "3"), (1, " 2"), (0, "٣"), (1, "19"), (0, "-2"), (2, "1_0"))],
         cq_units=9, slots=8, entries=12, tail="utf8", repeat_at=None)
def test_random_workloads_write_the_same_files(tmp_path_factory, msgs, cq_units, slots, entries, tail, repeat_at):
    cd = compiled_module("_cdispatch")
    log = Log()
    for i, m in enumerate(msgs):
        # a record whose PHYSICALOFFSET repeats an earlier one: the pure path's "built repeatedly" case
        log.add(m, physical_offset=0 if repeat_at == i and i > 0 else None)
    records_end = len(log.files[0])
    buf = bytearray(log.files[0] + tail_bytes(tail, log, msgs[-1]))
    readable = len(buf) - (7 if tail == "cut" else 0)
    buf += bytes(256)  # the segment goes on past the readable end
    tmp = tmp_path_factory.mktemp("workload")
    native, pure = two_sides(tmp, (cq_units, slots, entries), cd)
    try:
        got, want = native.dispatch(buf, 0, readable), pure.dispatch(buf, 0, readable)
        assert got == want
        assert got[0] >= records_end or got[1] is None
        assert native.wakeups == pure.wakeups
    finally:
        assert native.close() == pure.close()
    assert_same_derived_files(tmp / "native", tmp / "pure")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(msgs=st.lists(message, min_size=1, max_size=12), flips=st.lists(st.tuples(st.integers(0, 4000),
                                                                                  st.integers(0, 255)), max_size=6))
def test_garbage_inside_the_records(tmp_path_factory, msgs, flips):
    """Bytes changed anywhere in a run of records: the same end, the same files; no crash, no read past the end."""
    cd = compiled_module("_cdispatch")
    log = Log()
    for m in msgs:
        log.add(m)
    buf = bytearray(log.files[0])
    for at, value in flips:
        if at < len(buf):
            buf[at] = value
    tmp = tmp_path_factory.mktemp("garbage")
    native, pure = two_sides(tmp, (5, 3, 7), cd)
    try:
        assert native.dispatch(buf, 0, len(buf)) == pure.dispatch(buf, 0, len(buf))
    finally:
        assert native.close() == pure.close()
    assert_same_derived_files(tmp / "native", tmp / "pure")


def on_path(store: MessageStore, cd) -> MessageStore:
    """The store's reput service on the compiled path (``cd``) or the pure one (None), whatever
    RMQSTORE_PURE says: these tests compare the two (``native.compiled``)."""
    store.reput_message_service.native = cd
    return store


def run_store(root: Path, config: StoreConfig, log: Log, cd) -> MessageStore:
    """Write the log's files as a store's commitlog, then start the store (recovery and reput dispatch it)."""
    d = root / "commitlog"
    d.mkdir(parents=True)
    for i, data in enumerate(log.files):
        (d / offset_to_file_name(i * config.mapped_file_size_commit_log)).write_bytes(
            bytes(data) + bytes(config.mapped_file_size_commit_log - len(data)))
    store = on_path(MessageStore(root, config), cd)
    store.start()
    return store


def test_the_store_config_picks_the_path(tmp_path):
    from rmqstore.common import native

    compiled_module("_cdispatch")
    for flag in (True, False):
        store = MessageStore(tmp_path / str(flag), StoreConfig(native=flag))
        assert store.reput_message_service.native is native.module("_cdispatch", flag)
        assert (store.reput_message_service.native is None) == (not flag or native.forced_pure())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(msgs=st.lists(message.map(lambda m: dict(m, gap=0)), min_size=1, max_size=60), cq_units=st.integers(2, 9),
       slots=st.integers(1, 8), entries=st.integers(2, 12))
def test_store_start_dispatches_the_same(tmp_path_factory, msgs, cq_units, slots, entries):
    """Across commitlog files (blanks), through ReputMessageService on a started store."""
    cd = compiled_module("_cdispatch")
    log = Log(file_size=4096)
    for m in msgs:
        log.add(m)
    tmp = tmp_path_factory.mktemp("store")
    stores = {}
    for name, native in (("native", True), ("pure", False)):
        stores[name] = run_store(tmp / name, tiny_config(native, cq_units, slots, entries), log, cd if native else None)
    offsets = {name: s.reput_message_service.reput_from_offset for name, s in stores.items()}
    assert offsets["native"] == offsets["pure"] == log.offset
    for s in stores.values():
        s.shutdown()
    assert_same_derived_files(tmp / "native", tmp / "pure")


def test_live_native_store_matches_its_pure_redispatch(tmp_path):
    """A store written live on the compiled path, re-dispatched from its commitlog by the pure path: same files."""
    from rmqstore import Message

    cd = compiled_module("_cdispatch")
    live = tmp_path / "live"
    store = on_path(MessageStore(live, tiny_config(True, 7, 5, 9)), cd)
    store.start()
    try:
        for i in range(300):
            props = f"TAGS\x01t{i % 3}é\x02KEYS\x01k{i} ключ{i % 5}\x02UNIQ_KEY\x01U{i:08d}"
            if i % 7 == 0:
                props += f"\x02DELAY\x01{i % 4}"  # the store moves it to SCHEDULE_TOPIC_XXXX
            assert store.put_message(Message(topic=("TopicA", "TopicB", "Q%|x")[i % 3], queue_id=i % 3,
                                             body=b"y" * (i % 70),
                                             properties=props, born_host="10.0.0.1:1")).ok
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    again = tmp_path / "again"
    shutil.copytree(live / "commitlog", again / "commitlog")
    store = MessageStore(again, tiny_config(False, 7, 5, 9))
    store.start()
    store.shutdown()
    assert_same_derived_files(live, again)


def test_a_consume_queue_file_refused_stops_both_paths_at_the_same_record(tmp_path):
    cd = compiled_module("_cdispatch")
    log = Log()
    msgs = [dict(topic=TOPICS[i % 2], queue_id=0, tags="t", keys=f"k{i}", uniq=None, delay=None, tx=0, body=i,
                 v2=False, v6=False, ts_step=7, gap=0, extra="") for i in range(30)]
    for m in msgs:
        log.add(m)
    buf = bytes(log.files[0])
    half = 0
    for _ in range(6):  # the first six records
        half += int.from_bytes(buf[half:half + 4], "big")
    native, pure = two_sides(tmp_path, (4, 4, 50), cd)
    results = []
    try:
        for side in (native, pure):
            first = side.dispatch(buf, 0, half)
            cq = side.store.consume_queue_table[(TOPICS[0], 0)]
            cq.mapped_file_queue.read_only = True  # its next file cannot be created (as on a full disk)
            results.append((first, side.dispatch(buf, half, len(buf))))
    finally:
        assert native.close() == pure.close()
    assert results[0] == results[1]
    (_, second) = results[0]
    assert second[5] is not None and "cannot take queue offset 4" in second[5]
    assert second[1] is None and second[0] < len(buf)
    assert_same_derived_files(tmp_path / "native", tmp_path / "pure")


def test_an_index_file_refused_stops_both_paths_at_the_same_record(tmp_path):
    cd = compiled_module("_cdispatch")
    log = Log()
    for i in range(40):
        log.add(dict(topic="TopicA", queue_id=i % 2, tags=None, keys=f"a{i} b{i}", uniq=f"u{i}", delay=None, tx=0,
                     body=1, v2=False, v6=False, ts_step=1, gap=0, extra=""))
    buf = bytes(log.files[0])
    native, pure = two_sides(tmp_path, (50, 3, 10), cd)
    results = []
    try:
        for side in (native, pure):
            service = side.store.index_service
            create = service._create_file
            calls = []

            def refuse_third(create=create, calls=calls):
                calls.append(1)
                if len(calls) == 3:
                    raise StoreError("cannot create index file: no space (test)")
                return create()

            service._create_file = refuse_third
            results.append(side.dispatch(buf, 0, len(buf)))
    finally:
        assert native.close() == pure.close()
    assert results[0] == results[1]
    assert results[0][5] == "cannot create index file: no space (test)"
    assert_same_derived_files(tmp_path / "native", tmp_path / "pure")


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_redispatched_natively_gives_rocketmq_files(name, tmp_path):
    """Each fixture's commitlog, alone in a store, dispatched on start: RocketMQ's consume queues and index.

    (``crash``: the store RocketMQ recovered, whose index is the partial one its recovery
    left; there the compiled path is held to the pure one's index.)
    """
    cd = compiled_module("_cdispatch")
    m = json.loads((FIXTURES / name / "manifest.json").read_text(encoding="utf-8"))
    src = FIXTURES / name / ("recovered_store" if name == "crash" else "store")
    roots = {}
    for native in (True, False):
        root = tmp_path / ("native" if native else "pure")
        shutil.copytree(src / "commitlog", root / "commitlog")
        store = on_path(MessageStore(root, StoreConfig.from_manifest(m["config"], native=native)),
                        cd if native else None)
        store.start()
        store.shutdown()
        roots[native] = root
    assert_same_derived_files(roots[True], roots[False])
    theirs = files_under(src / "consumequeue")
    assert theirs and files_under(roots[True] / "consumequeue") == theirs
    for rel in theirs:
        assert (roots[True] / "consumequeue" / rel).read_bytes() == (src / "consumequeue" / rel).read_bytes(), rel
    if name != "crash":
        ours, rocketmq = files_under(roots[True] / "index"), files_under(src / "index")
        assert rocketmq and len(ours) == len(rocketmq)
        for a, b in zip(ours, rocketmq):
            assert (roots[True] / "index" / a).read_bytes() == (src / "index" / b).read_bytes(), (a, b)


@settings(max_examples=300, deadline=None)
@given(s=st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
@example(s="")
@example(s="\U0001F600")
@example(s="a" * 2000)
def test_java_hash_equals_the_pure_one(s):
    cd = compiled_module("_cdispatch")
    assert cd.java_hash(s.encode("utf-8")) == java_string_hash(s)


def test_bad_arguments_are_errors_not_crashes():
    cd = compiled_module("_cdispatch")
    log = Log()
    log.add(dict(topic="T", queue_id=0, tags=None, keys="k", uniq=None, delay=None, tx=0, body=1, v2=False, v6=False,
                 ts_step=1, gap=0, extra=""))
    buf = bytes(log.files[0])
    batch = cd.parse(buf, 0, len(buf), delay_table(DELAYS), MAX_BATCH, True)
    assert (batch.count, batch.stop, batch.stop_pos) == (1, cd.END, len(buf))
    with pytest.raises(ValueError):
        batch.write_index(1, bytearray(100), 16, 64, 0, 0, 0, 0, 0, 1)  # a buffer shorter than the file
    with pytest.raises(IndexError):
        batch.record_pos(2)
    with pytest.raises(ValueError):
        cd.parse(buf, -1, len(buf), (), MAX_BATCH, True)
    with pytest.raises(TypeError):
        batch.write_index(1, b"read-only" * 1000, 1, 1, 0, 0, 0, 0, 0, 1)
    assert cd.parse(buf, 5, len(buf) + 10**9, (), MAX_BATCH, True).count == 0  # garbage position: an END
    assert cd.parse(b"", 0, 0, (), 1, True).stop == cd.END


def test_the_compiled_path_takes_runs_in_bulk(tmp_path):
    """Only what a bulk write cannot take goes record by record: each queue's first unit (its first
    file) and the record that creates the first index file -- not the 300 records."""
    cd = compiled_module("_cdispatch")
    log = Log()
    for i in range(300):
        log.add(dict(topic="TopicA", queue_id=i % 3, tags=f"t{i % 4}", keys=f"k{i}", uniq=f"u{i}", delay=None, tx=0,
                     body=i % 20, v2=False, v6=False, ts_step=3, gap=0, extra=""))
    buf = bytes(log.files[0])
    native, pure = two_sides(tmp_path, (1000, 64, 1000), cd)
    calls = {"native": 0, "pure": 0}
    for name, side in (("native", native), ("pure", pure)):
        dispatch = side.store.dispatcher.dispatch

        def counted(req, name=name, dispatch=dispatch):
            calls[name] += 1
            dispatch(req)

        side.store.dispatcher.dispatch = counted
    try:
        assert native.dispatch(buf, 0, len(buf)) == pure.dispatch(buf, 0, len(buf))
    finally:
        assert native.close() == pure.close()
    assert calls == {"native": 3, "pure": 300}
    assert_same_derived_files(tmp_path / "native", tmp_path / "pure")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(msgs=st.lists(message.map(lambda m: dict(m, gap=0)), min_size=1, max_size=60), cq_units=st.integers(2, 9),
       slots=st.integers(1, 8), entries=st.integers(2, 12), tail=st.sampled_from(TAILS))
def test_abnormal_recovery_redispatches_the_same(tmp_path_factory, msgs, cq_units, slots, entries, tail):
    """A crash (the abort file left, no checkpoint): recovery walks the whole log and dispatches every
    valid record again -- in bulk on the compiled path, record by record on the pure one; same files."""
    from unittest import mock

    from rmqstore.common import native as native_mod
    from rmqstore.engine import recovery
    from rmqstore.files.store_paths import abort_path

    compiled_module("_cdispatch")
    log = Log(file_size=4096)
    for m in msgs:
        log.add(m)
    if tail:
        log.files[-1] += tail_bytes(tail, log, msgs[-1])[:4096 - len(log.files[-1])]
    tmp = tmp_path_factory.mktemp("crashed")
    ends = {}
    for name, native in (("native", True), ("pure", False)):
        config = tiny_config(native, cq_units, slots, entries)
        d = tmp / name / "commitlog"
        d.mkdir(parents=True)
        for i, data in enumerate(log.files):
            (d / offset_to_file_name(i * 4096)).write_bytes(bytes(data[:4096]) + bytes(4096 - len(data[:4096])))
        open(abort_path(str(tmp / name)), "wb").close()
        store = MessageStore(tmp / name, config)
        bulk = []
        with mock.patch.object(recovery, "reput_segment_native",
                               lambda *a: bulk.append(a[5]) or reput_segment_native(*a)):
            store.load()  # the abnormal recovery: its walk dispatched (nothing is started yet)
        if not native or native_mod.forced_pure():
            assert bulk == []
        else:  # the walk's valid bytes of each file, in bulk
            assert bulk and sum(bulk) >= store.commit_log.get_max_offset() - 4096 * (len(log.files) - 1)
        ends[name] = (store.commit_log.get_max_offset(),
                      sorted((k, cq.get_max_offset_in_queue()) for k, cq in store.consume_queue_table.items()))
        store.close()
    assert ends["native"] == ends["pure"]
    assert_same_derived_files(tmp / "native", tmp / "pure")
