"""Dispatch and the read path against the stores real RocketMQ 4.9.8 wrote.

Done means, for every fixture with a full put list (basic, boundary, txn_delay,
flush_async, flush_sync, flush_tsp):

(a) ``rmqstore dump FIXTURE/store --json | rmqstore load TMP --like FIXTURE`` -- load shuts
    the store down cleanly, which dispatches everything -- leaves consume-queue files
    identical byte for byte to RocketMQ's (the same paths, the same bytes), and index files
    whose contents equal RocketMQ's byte for byte, matched in name order (names are the
    wall-clock time of creation, so they differ);
(b) through the read path, on the reloaded store *and* on the fixture opened read-only:
    every manifest ``consumeQueues`` entry comes back from ``get_message`` (offset 0 on,
    following ``next_begin_offset``) at exactly its commitlog offset, size and tags code,
    with RocketMQ's min/max offsets; every manifest ``queries`` entry comes back from
    ``query_message`` with the same offsets in the same order; every msgId the store
    reported finds its record through ``look_message_by_offset`` and
    ``view_message_by_id``;
(c) GetMessageStatus: the offset cases on a small store written by our engine, and
    prepared/rolled-back transaction records never appear in a pull.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FIXTURES, PUT_FIXTURES, files_under, manifest, pipe_dump_load, run_cli

from rmqstore import open_store
from rmqstore.common.config import BrokerRole, StoreConfig
from rmqstore.format.crc import crc32
from rmqstore.engine.dispatch import tags_code_of
from rmqstore.format.message import Message
from rmqstore.format.properties import string_to_properties
from rmqstore.engine.reading import (GetMessageStatus, get_message, get_max_offset_in_queue, get_min_offset_in_queue,
                                     look_message_by_offset, message_keys, query_message, view_message_by_id)
from rmqstore.format.record import Address, create_message_id
from rmqstore.store import MessageStore
from rmqstore.format.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE,
                                     TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)

NAMES = PUT_FIXTURES  # basic, boundary, txn_delay, flush_async, flush_sync, flush_tsp
WHICH = ("reloaded", "original")
READ_CASES = [(n, w) for n in NAMES for w in WHICH]
READ_IDS = [f"{n}-{w}" for n, w in READ_CASES]
#: RocketMQ's queryMessage over all time; the harness recorded no window (its answers are all
#: within the stores' lifetime), and maxNum is capped by maxMsgsNumBatch (64) anyway
QUERY_MAX, QUERY_BEGIN, QUERY_END = 64, 0, 2**63 - 1
_DELAY_LEVELS = StoreConfig().delay_level_table()


def dump_and_load(name: str, target: Path) -> None:
    code, out, err = run_cli(["dump", FIXTURES / name / "store", "--json"])
    assert code == 0 and err == "", err
    code, _, err = run_cli(["load", target, "--like", FIXTURES / name], out.encode("utf-8"))
    assert code == 0, err


@pytest.fixture(scope="module")
def reloaded(tmp_path_factory):
    """``reloaded(name)``: the store ``dump | load`` rebuilt from fixture ``name`` (built once)."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            target = tmp_path_factory.mktemp(f"reloaded-{name}") / "store"
            dump_and_load(name, target)
            built[name] = target
        return built[name]

    return get


# -- (a) dispatch writes RocketMQ's bytes --------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_consume_queue_files_identical(name, reloaded):
    ours, theirs = reloaded(name) / "consumequeue", FIXTURES / name / "store" / "consumequeue"
    paths = files_under(theirs)
    assert paths, "the fixture has consume queues"
    assert files_under(ours) == paths
    for rel in paths:
        assert (ours / rel).read_bytes() == (theirs / rel).read_bytes(), rel


@pytest.mark.parametrize("name", NAMES)
def test_index_files_identical(name, reloaded):
    ours, theirs = reloaded(name) / "index", FIXTURES / name / "store" / "index"
    our_names, their_names = files_under(ours), files_under(theirs)
    assert their_names and len(our_names) == len(their_names)
    for a, b in zip(our_names, their_names):
        assert len(a) == 17 and a.isdigit()  # yyyyMMddHHmmssSSS
        assert (ours / a).read_bytes() == (theirs / b).read_bytes(), (a, b)


def test_dump_load_as_a_pipe(tmp_path):
    """The done-means command line, literally: two processes and a pipe (fixture ``basic``)."""
    target = tmp_path / "piped"
    pipe_dump_load("basic", target)
    theirs = FIXTURES / "basic" / "store"
    assert files_under(target / "consumequeue") == files_under(theirs / "consumequeue")
    for rel in files_under(theirs / "consumequeue"):
        assert (target / "consumequeue" / rel).read_bytes() == (theirs / "consumequeue" / rel).read_bytes()
    for a, b in zip(files_under(target / "index"), files_under(theirs / "index"), strict=True):
        assert (target / "index" / a).read_bytes() == (theirs / "index" / b).read_bytes()


# -- (b) the read path on both stores ---------------------------------------------------------------

def open_case(name: str, which: str, reloaded):
    return open_store(reloaded(name) if which == "reloaded" else FIXTURES / name)


def pull_all(store, topic: str, queue_id: int, max_count: int = 100_000):
    """Every message of a queue: get_message from its min offset, following next_begin_offset."""
    offset = get_min_offset_in_queue(store, topic, queue_id)
    records, units, statuses = [], [], []
    for _ in range(10_000):
        r = get_message(store, "test-group", topic, queue_id, offset, max_count)
        statuses.append(r.status)
        if r.status is not GetMessageStatus.FOUND:
            return records, units, r
        assert r.next_begin_offset > offset
        assert r.units[0].queue_offset == offset
        records.extend(r.messages)
        units.extend(r.units)
        offset = r.next_begin_offset
    raise AssertionError(f"no end after {len(statuses)} pulls")


def assert_record_matches_unit(rec, unit, topic, queue_id):
    assert rec.physical_offset == unit.commit_log_offset
    assert rec.total_size == unit.size
    assert rec.queue_offset == unit.queue_offset
    assert (rec.topic, rec.queue_id) == (topic, queue_id)
    assert crc32(rec.body) == rec.body_crc
    props = string_to_properties(rec.properties)
    assert tags_code_of(rec.topic, props, rec.store_timestamp, _DELAY_LEVELS) == unit.tags_code


@pytest.mark.parametrize("name,which", READ_CASES, ids=READ_IDS)
def test_every_consume_queue_entry_comes_back(name, which, reloaded):
    m = manifest(name)
    store = open_case(name, which, reloaded)
    try:
        listed = {(q["topic"], q["queueId"]) for q in m["consumeQueues"]}
        assert set(store.consume_queue_table) <= listed  # no queue the real store did not have
        total = 0
        for q in m["consumeQueues"]:
            topic, qid = q["topic"], q["queueId"]
            assert get_min_offset_in_queue(store, topic, qid) == q["minOffsetInQueue"]
            assert get_max_offset_in_queue(store, topic, qid) == q["maxOffsetInQueue"]
            records, units, last = pull_all(store, topic, qid)
            assert [list(u) for u in units] == q["entries"], (topic, qid)
            for rec, unit in zip(records, units):
                assert_record_matches_unit(rec, unit, topic, qid)
            assert (last.min_offset, last.max_offset) == (q["minOffsetInQueue"], q["maxOffsetInQueue"])
            if q["maxOffsetInQueue"] == 0:
                # RocketMQ made these queues by looking them up (no files); we never create one on a read
                assert last.status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
                assert last.next_begin_offset == 0
            else:
                assert last.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
                assert last.next_begin_offset == q["maxOffsetInQueue"]
            total += len(records)
        assert total == sum(len(q["entries"]) for q in m["consumeQueues"]) > 0
    finally:
        store.close()


@pytest.mark.parametrize("name,which", READ_CASES, ids=READ_IDS)
def test_every_query_comes_back(name, which, reloaded):
    m = manifest(name)
    assert m["queries"]
    store = open_case(name, which, reloaded)
    try:
        for q in m["queries"]:
            r = query_message(store, q["topic"], q["key"], QUERY_MAX, QUERY_BEGIN, QUERY_END)
            assert r.phy_offsets == q["phyOffsets"], q
            assert r.index_last_update_phyoffset == q["indexLastUpdatePhyoffset"], q
            assert r.index_last_update_timestamp == q["indexLastUpdateTimestamp"], q
            assert r.buffer_total_size == sum(rec.total_size for rec in r.messages)
            # no hash collisions in these stores: checking the keys changes nothing
            checked = query_message(store, q["topic"], q["key"], QUERY_MAX, QUERY_BEGIN, QUERY_END, verify_keys=True)
            assert checked.phy_offsets == q["phyOffsets"]
            for rec in checked.messages:
                assert rec.topic == q["topic"] and q["key"] in message_keys(rec)
    finally:
        store.close()


def stored_ids(name: str) -> list[tuple[int, int, str]]:
    """``(offset, size, msgId)`` of every record the store reported an id for."""
    m = manifest(name)
    out = [(p["wroteOffset"], p["wroteBytes"], p["msgId"]) for p in m["puts"]
           if p["status"] == "PUT_OK" and p.get("appendStatus") == "PUT_OK"]
    out += [(r["commitLogOffset"], r["storeSize"], r["msgId"]) for r in m["recordsNotWrittenByAnyPut"]
            if "msgId" in r]
    return out


@pytest.mark.parametrize("name,which", READ_CASES, ids=READ_IDS)
def test_message_ids_find_their_records(name, which, reloaded):
    ids = stored_ids(name)
    assert ids
    store = open_case(name, which, reloaded)
    try:
        for offset, size, msg_id in ids:
            rec = look_message_by_offset(store, offset)
            assert rec is not None, offset
            assert (rec.physical_offset, rec.total_size) == (offset, size)
            assert create_message_id(rec.store_host, rec.physical_offset) == msg_id
            assert view_message_by_id(store, msg_id) == rec
            assert view_message_by_id(store, msg_id.lower()) == rec
            # the same offset under another store host is not this record
            other = create_message_id(Address(bytes([10, 9, 8, 7]), rec.store_host.port + 1), offset)
            assert view_message_by_id(store, other) is None
            assert view_message_by_id(store, other, check_host=False) == rec
        for p in manifest(name)["puts"]:
            if p["status"] == "PUT_OK" and p.get("appendStatus") == "PUT_OK":
                rec = look_message_by_offset(store, p["wroteOffset"])
                assert (rec.topic, rec.queue_id, rec.body.hex(), rec.properties, rec.store_timestamp) == \
                       (p["topic"], p["queueId"], p["body"], p["properties"] or "", p["storeTimestamp"])
    finally:
        store.close()


@pytest.mark.parametrize("which", WHICH)
def test_prepared_and_rolled_back_never_pulled_fixture(which, reloaded):
    m = manifest("txn_delay")
    hidden = {p["wroteOffset"] for p in m["puts"] if p["status"] == "PUT_OK"
              and p["sysFlag"] & TRANSACTION_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)}
    assert len(hidden) == 4  # three PREPARED, one ROLLBACK
    store = open_case("txn_delay", which, reloaded)
    try:
        pulled = []
        for topic, qid in list(store.consume_queue_table):
            records, _, _ = pull_all(store, topic, qid)
            pulled.extend(records)
        assert pulled
        assert all(r.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) for r in pulled)
        assert hidden.isdisjoint(r.physical_offset for r in pulled)
        for offset in hidden:  # they are in the commitlog all the same
            assert look_message_by_offset(store, offset).physical_offset == offset
    finally:
        store.close()


# -- (c) statuses on a small store of ours ------------------------------------------------------------

SMALL = dict(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 8, max_hash_slot_num=16,
             max_index_num=64)


def put(store, topic="T", queue_id=0, body=b"m", sys_flag=0, **props):
    props = "\x02".join(f"{k}\x01{v}" for k, v in props.items())
    r = store.put_message(Message(topic=topic, queue_id=queue_id, body=body, properties=props, sys_flag=sys_flag,
                                  born_host="10.0.0.1:1234"))
    assert r.ok, r
    return r.append_result


@pytest.fixture
def small_store(tmp_path):
    store = MessageStore(tmp_path / "small", StoreConfig(**SMALL))
    store.start()
    try:
        for i in range(20):
            put(store, body=b"message-%d" % i, TAGS="t%d" % (i % 2), KEYS="k%d" % i)
        assert store.wait_dispatched()
        yield store
    finally:
        store.shutdown()


def test_status_found_and_overflow(small_store):
    r = get_message(small_store, "g", "T", 0, 0, 5)
    assert r.status is GetMessageStatus.FOUND and r.message_count == 5 and r.next_begin_offset == 5
    assert (r.min_offset, r.max_offset) == (0, 20)

    r = get_message(small_store, "g", "T", 0, 20, 5)  # offset == max: wait here
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert r.next_begin_offset == 20 and r.messages == []

    r = get_message(small_store, "g", "T", 0, 27, 5)  # past max: back to max
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert r.next_begin_offset == 20 and (r.min_offset, r.max_offset) == (0, 20)


def test_status_offset_too_small_after_min_offset_correction(small_store):
    cq = small_store.consume_queue_table[("T", 0)]
    third = get_message(small_store, "g", "T", 0, 3, 1).messages[0]
    cq.correct_min_offset(third.physical_offset)  # as after the first commitlog bytes were deleted
    assert get_min_offset_in_queue(small_store, "T", 0) == 3

    r = get_message(small_store, "g", "T", 0, 1, 5)
    assert r.status is GetMessageStatus.OFFSET_TOO_SMALL
    assert r.next_begin_offset == 3 and r.min_offset == 3 and r.messages == []

    r = get_message(small_store, "g", "T", 0, r.next_begin_offset, 5)
    assert r.status is GetMessageStatus.FOUND and r.messages[0] == third


def test_status_no_matched_logic_queue_and_no_message_in_queue(small_store):
    r = get_message(small_store, "g", "NoSuchTopic", 0, 4, 5)
    assert r.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert r.next_begin_offset == 0 and (r.min_offset, r.max_offset) == (0, 0)
    r = get_message(small_store, "g", "T", 3, 0, 5)  # a queue of a known topic that never got a message
    assert r.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert ("NoSuchTopic", 0) not in small_store.consume_queue_table  # a read creates nothing

    small_store.find_consume_queue("Empty", 0)  # a queue that exists but holds nothing
    r = get_message(small_store, "g", "Empty", 0, 4, 5)
    assert r.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert r.next_begin_offset == 0 and r.max_offset == 0


def test_slave_keeps_the_offset(small_store, tmp_path):
    small_store.shutdown()
    config = replace(StoreConfig(**SMALL), broker_role=BrokerRole.SLAVE)
    store = open_store(small_store.root, config=config)
    try:
        for offset, status in ((27, GetMessageStatus.OFFSET_OVERFLOW_BADLY),
                               (20, GetMessageStatus.OFFSET_OVERFLOW_ONE)):
            r = get_message(store, "g", "T", 0, offset, 5)
            assert r.status is status and r.next_begin_offset == offset
        r = get_message(store, "g", "Nope", 0, 9, 5)
        assert r.next_begin_offset == 9
    finally:
        store.close()


def test_prepared_and_rolled_back_never_pulled(tmp_path):
    store = MessageStore(tmp_path / "txn", StoreConfig(**SMALL))
    store.start()
    try:
        kinds = [TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE,
                 TRANSACTION_ROLLBACK_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_NOT_TYPE]
        offsets = [put(store, topic="Tx", body=b"tx-%d" % i, sys_flag=k, KEYS="tx%d" % i).wrote_offset
                   for i, k in enumerate(kinds)]
        assert store.wait_dispatched()
        records, units, last = pull_all(store, "Tx", 0)
        visible = [o for o, k in zip(offsets, kinds) if k in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)]
        assert [r.physical_offset for r in records] == visible
        assert [u.queue_offset for u in units] == [0, 1, 2]
        assert last.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and last.max_offset == 3
        # the index has the prepared one (RocketMQ indexes PREPARED, not ROLLBACK)
        assert query_message(store, "Tx", "tx1", 10, 0, 2**63 - 1).phy_offsets == [offsets[1]]
        assert query_message(store, "Tx", "tx3", 10, 0, 2**63 - 1).phy_offsets == []
    finally:
        store.shutdown()
