"""Bad input gets the right status and a message naming the problem -- and nothing else.

After every refused put a good one follows, and the commitlog must read as if the bad
one had never been tried: records back to back, each decoding with a good CRC, blanks
only where a record did not fit.  Also: store states that refuse puts, batches,
transactions, delay levels and the put statistics.
"""

from __future__ import annotations

import os

import pytest

from rmqstore import (BatchItem, BrokerRole, Message, MessageBatch, MessageStore, PutMessageStatus,
                      StoreConfig)
from rmqstore.engine.commit_log import DIFFERENCES, SCHEDULE_TOPIC
from rmqstore.common.config import FlushDiskType
from rmqstore.format.layout import BLANK_MAGIC_CODE
from rmqstore.format.properties import string_to_properties
from rmqstore.format.record import Address, BlankRecord, MessageRecord, create_message_id, decode_record
from rmqstore.format.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE,
                                     TRANSACTION_ROLLBACK_TYPE)

FILE_SIZE = 64 * 1024
STORE_HOST = "198.51.100.7:10911"
ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL


def walk_commitlog(root, file_size: int = FILE_SIZE):
    """Every record on disk as ``(offset, record)``; asserts the log is back to back.

    Each message record must sit at its own ``physical_offset`` and pass its CRC; a blank
    must run to the end of its file; the newest file ends in zeros.
    """
    folder = os.path.join(str(root), "commitlog")
    names = sorted(n for n in os.listdir(folder) if n.isdigit())
    out = []
    expected = int(names[0]) if names else 0
    for name in names:
        base = int(name)
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        assert len(data) == file_size
        if base != expected:  # only a pre-allocated, never used file may follow the end of the log
            assert base == expected - expected % file_size + file_size and not any(data), name
            continue
        pos = 0
        while pos + 8 <= file_size:
            if not any(data[pos:pos + 8]):
                assert not any(data[pos:]), f"{name}: bytes after the end of the log at {pos}"
                return out
            rec = decode_record(data, pos, check_crc=True)
            out.append((base + pos, rec))
            if isinstance(rec, BlankRecord):
                assert pos + rec.total_size == file_size, f"{name}: blank at {pos} does not end the file"
                assert not any(data[pos + 8:]), f"{name}: bytes after a blank header"
                pos = file_size
                break
            assert rec.physical_offset == base + pos
            pos += rec.total_size
        expected = base + pos
        if pos < file_size:
            assert not any(data[pos:])
            return out
    return out


def messages_on_disk(root, file_size: int = FILE_SIZE) -> list[MessageRecord]:
    return [r for _, r in walk_commitlog(root, file_size) if isinstance(r, MessageRecord)]


@pytest.fixture
def make_store(tmp_path):
    """Start stores in tmp_path subfolders; every one is shut down at the end."""
    stores = []

    def make(name="s", *, start=True, topic_queue_nums=None, clock=None, **cfg):
        cfg.setdefault("mapped_file_size_commit_log", FILE_SIZE)
        cfg.setdefault("store_host", STORE_HOST)
        store = MessageStore(tmp_path / name, StoreConfig(**cfg), topic_queue_nums=topic_queue_nums,
                             clock=clock)
        stores.append(store)
        if start:
            store.start()
        return store

    yield make
    for s in stores:
        s.shutdown()


@pytest.fixture
def store(make_store):
    return make_store(max_message_size=8000, topic_queue_nums={"Q4": 4})


def good(i: int = 0, topic: str = "Good", queue_id: int = 0, body: bytes | None = None) -> Message:
    return Message(topic=topic, queue_id=queue_id, body=body if body is not None else b"good-%d" % i,
                   properties=f"KEYS\x01k{i}\x02TAGS\x01t", born_timestamp=1_700_000_000_000 + i,
                   born_host="192.0.2.1:40000")


# -- refused messages ----------------------------------------------------------------------

BAD_MESSAGES = {
    # name: (message factory, status, words the message must contain)
    "topic of 128 chars": (lambda: Message(topic="T" * 128, body=b"x"), ILLEGAL, ["128"]),
    "topic with a space": (lambda: Message(topic="a b", body=b"x"), ILLEGAL, ["topic", "'a b'"]),
    "topic with a slash": (lambda: Message(topic="a/b", body=b"x"), ILLEGAL, ["topic", "'a/b'"]),
    "non-ASCII topic": (lambda: Message(topic="tópico", body=b"x"), ILLEGAL, ["topic", "tópico"]),
    "empty topic": (lambda: Message(topic="", body=b"x"), ILLEGAL, ["topic", "empty"]),
    "properties of 32768 chars": (lambda: Message(topic="Good", properties="k\x01" + "v" * 32766),
                                  ILLEGAL, ["properties", "32768"]),
    "properties of 20000 two-byte chars": (lambda: Message(topic="Good", properties="k\x01" + "é" * 19998),
                                           PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                                           ["properties", "39998", "UTF-8"]),
    "body over max_message_size": (lambda: Message(topic="Good", body=b"b" * 8001), ILLEGAL,
                                   ["body", "8001", "8000"]),
    "queue id -1": (lambda: Message(topic="Good", queue_id=-1, body=b"x"), ILLEGAL, ["queue id", "-1"]),
    "queue id = topic queue nums": (lambda: Message(topic="Q4", queue_id=4, body=b"x"), ILLEGAL,
                                    ["queue id", "4"]),
    "queue id far too large": (lambda: Message(topic="Good", queue_id=2**31, body=b"x"), ILLEGAL,
                               ["queue id"]),
    "body is a str": (lambda: Message(topic="Good", body="text"), ILLEGAL, ["body", "str"]),
    "topic is an int": (lambda: Message(topic=42, body=b"x"), ILLEGAL, ["topic", "int"]),
    "queue id is a str": (lambda: Message(topic="Good", queue_id="1", body=b"x"), ILLEGAL, ["queue id", "str"]),
    "not a Message": (lambda: {"topic": "Good", "body": b"x"}, ILLEGAL, ["Message", "dict"]),
    "None": (lambda: None, ILLEGAL, ["Message", "NoneType"]),
    "flag is a str": (lambda: Message(topic="Good", flag="1", body=b"x"), ILLEGAL, ["flag"]),
    "reconsume times out of int range": (lambda: Message(topic="Good", reconsume_times=2**31, body=b"x"),
                                         ILLEGAL, ["reconsume_times"]),
    "born host not an address": (lambda: Message(topic="Good", born_host="nowhere", body=b"x"), ILLEGAL,
                                 ["nowhere"]),
    # only replay (MessageStore.replay_message, rmqstore load) sets what the store decides
    "queue offset 10**7": (lambda: Message(topic="Good", body=b"x", queue_offset=10**7), ILLEGAL,
                           ["queue_offset", "replay"]),
    "queue offset -3": (lambda: Message(topic="Good", body=b"x", queue_offset=-3), ILLEGAL, ["queue_offset"]),
    "queue offset 2**63": (lambda: Message(topic="Good", body=b"x", queue_offset=2**63), ILLEGAL,
                           ["queue_offset"]),
    "store timestamp 'x'": (lambda: Message(topic="Good", body=b"x", store_timestamp="x"), ILLEGAL,
                            ["store_timestamp"]),
    "store timestamp 5": (lambda: Message(topic="Good", body=b"x", store_timestamp=5), ILLEGAL,
                          ["store_timestamp", "replay"]),
    "body CRC given": (lambda: Message(topic="Good", body=b"x", body_crc=5), ILLEGAL, ["body_crc", "replay"]),
    # every field against its width in the record
    "born timestamp 2**63": (lambda: Message(topic="Good", body=b"x", born_timestamp=2**63), ILLEGAL,
                             ["born_timestamp", str(2**63)]),
    "born timestamp 'x'": (lambda: Message(topic="Good", body=b"x", born_timestamp="x"), ILLEGAL,
                           ["born_timestamp", "str"]),
    "flag -2**31-1": (lambda: Message(topic="Good", body=b"x", flag=-2**31 - 1), ILLEGAL, ["flag"]),
    "sys flag 2**31": (lambda: Message(topic="Good", body=b"x", sys_flag=2**31), ILLEGAL, ["sys_flag"]),
    "prepared offset 2**63": (lambda: Message(topic="Good", body=b"x", prepared_transaction_offset=2**63),
                              ILLEGAL, ["prepared_transaction_offset"]),
    "lone surrogate in properties": (lambda: Message(topic="Good", body=b"x", properties="k\x01\ud800"),
                                     ILLEGAL, ["properties", "UTF-8"]),
    "born host port -1": (lambda: Message(topic="Good", body=b"x", born_host="192.0.2.1:-1"), ILLEGAL,
                          ["port", "-1"]),
    "store host port 70000": (lambda: Message(topic="Good", body=b"x", store_host="192.0.2.1:70000"), ILLEGAL,
                              ["port", "70000"]),
    "born host port 65536 as a tuple": (lambda: Message(topic="Good", body=b"x", born_host=("::1", 65536)),
                                        ILLEGAL, ["port", "65536"]),
}


@pytest.mark.parametrize("case", sorted(BAD_MESSAGES))
def test_bad_message_is_refused_and_later_puts_land_correctly(store, case):
    factory, status, words = BAD_MESSAGES[case]
    first = store.put_message(good(0))
    assert first.ok
    end_before = store.get_max_phy_offset()
    r = store.put_message(factory())
    assert r.status is status, (case, r)
    for w in words:
        assert w in r.message, (case, r.message)
    assert store.get_max_phy_offset() == end_before, "nothing written"
    assert store.put_message(good(1)).ok
    r2 = store.put_message(good(2))
    assert r2.ok
    recs = messages_on_disk(store.root)
    assert [r.body for r in recs] == [b"good-0", b"good-1", b"good-2"]
    assert [r.queue_offset for r in recs] == [0, 1, 2]
    assert recs[1].physical_offset == first.append_result.wrote_offset + first.append_result.wrote_bytes
    snap = store.stats.snapshot()
    assert snap["putMessageTimesTotal"] == 3
    assert snap["putMessageFailedTimes"] == 1
    assert snap["statusCounts"] == {"PUT_OK": 3, status.name: 1}


def test_bad_message_first_then_good(store):
    """A refusal before anything was written creates no file either."""
    assert store.put_message(Message(topic="a b", body=b"x")).status is ILLEGAL
    assert store.commit_log.mapped_file_queue.mapped_files == []
    r = store.put_message(good(0))
    assert r.ok and r.append_result.wrote_offset == 0 and r.append_result.logics_offset == 0


def test_limits_themselves_are_accepted(store):
    ok = [
        Message(topic="T" * 127, body=b"x"),
        Message(topic="%|aZ09_-", body=b"x"),
        Message(topic="Good", properties="k\x01" + "v" * 32765),  # 32767 chars and bytes
        Message(topic="Good", body=b"b" * 8000),
        Message(topic="Q4", queue_id=3, body=b"x"),
        Message(topic="Good", body=bytearray(b"ba")),
        Message(topic="Good", body=b""),
    ]
    for m in ok:
        r = store.put_message(m)
        assert r.ok, (m.topic[:20], r)
    recs = messages_on_disk(store.root)
    assert len(recs) == len(ok)
    assert recs[2].properties == ok[2].properties
    assert recs[5].body == b"ba" and recs[6].body == b"" and recs[6].body_crc == 0


def test_ports_at_the_limits_are_accepted(store):
    for host in ("192.0.2.1:0", "192.0.2.1:65535", "[2001:db8::1]:65535"):
        assert store.put_message(Message(topic="Good", body=b"x", born_host=host, store_host=host)).ok, host
    assert [str(r.born_host) for r in messages_on_disk(store.root)] == [
        "192.0.2.1:0", "192.0.2.1:65535", "[2001:db8::1]:65535"]


def test_store_root_that_is_a_file_is_a_store_error(tmp_path):
    from rmqstore.common.errors import StoreError

    path = tmp_path / "plain"
    path.write_bytes(b"not a store")
    with pytest.raises(StoreError, match="plain.*not a directory"):
        MessageStore(path, StoreConfig(mapped_file_size_commit_log=FILE_SIZE)).start()
    assert path.read_bytes() == b"not a store"


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_async_put_after_shutdown_is_service_not_available(make_store, flush):
    store = make_store(flush_disk_type=flush)
    assert store.async_put_message(good(0)).result(10).ok
    store.shutdown()
    for future in (store.async_put_message(good(1)),
                   store.async_put_messages(MessageBatch(topic="Good", items=[b"a"]))):
        r = future.result(10)
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "shut down" in r.message
    assert len(messages_on_disk(store.root)) == 1


def test_async_puts_racing_a_shutdown_all_get_an_answer(make_store):
    import threading

    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    futures, errors = [], []
    started = threading.Event()

    def producer():
        i = after = 0
        while True:
            try:
                futures.append(store.async_put_message(good(i)))
            except Exception as exc:  # noqa: BLE001 - what the test is about
                errors.append(exc)
                return
            i += 1
            started.set()
            if store.shutdown_flag and i > 50:
                after += 1  # a few puts made after the shutdown began: each must be refused
                if after > 3:
                    return

    t = threading.Thread(target=producer)
    t.start()
    started.wait(10)
    store.shutdown()
    t.join(30)
    assert not errors, errors
    statuses = {f.result(30).status for f in futures}
    assert statuses <= {PutMessageStatus.PUT_OK, PutMessageStatus.SERVICE_NOT_AVAILABLE}
    assert PutMessageStatus.SERVICE_NOT_AVAILABLE in statuses


# -- replay: only MessageStore.replay_message keeps recorded offsets and timestamps --------------------

def replayed(i: int, queue_offset, store_timestamp=1_700_000_000_500, **kw) -> Message:
    m = good(i)
    m.queue_offset = queue_offset
    m.store_timestamp = store_timestamp
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def test_replay_keeps_the_recorded_values(store):
    for i in range(3):
        r = store.replay_message(replayed(i, i, 1_700_000_000_000 - i))  # a clock stepping back is allowed
        assert r.ok, r
    r = store.replay_message(replayed(3, None))  # no queue offset: the store numbers it
    assert r.ok and r.append_result.logics_offset == 3
    prepared = replayed(4, 0, sys_flag=TRANSACTION_PREPARED_TYPE)
    assert store.replay_message(prepared).ok
    recs = messages_on_disk(store.root)
    assert [r.queue_offset for r in recs] == [0, 1, 2, 3, 0]
    assert [r.store_timestamp for r in recs[:3]] == [1_700_000_000_000 - i for i in range(3)]
    assert store.put_message(good(5)).append_result.logics_offset == 4


@pytest.mark.parametrize("queue_offset, sys_flag, words", [
    (1, 0, ["queue_offset 1", "next", "0"]),           # a gap
    (10**7, 0, ["queue_offset 10000000", "0"]),
    (-3, 0, ["queue_offset", "-3"]),
    (2**63, 0, ["queue_offset"]),
    ("1", 0, ["queue_offset", "str"]),
    (5, TRANSACTION_PREPARED_TYPE, ["queue_offset 5", "0"]),  # prepared records are stored with 0
])
def test_replay_with_an_inconsistent_queue_offset_is_refused(store, queue_offset, sys_flag, words):
    r = store.replay_message(replayed(0, queue_offset, sys_flag=sys_flag))
    assert r.status is ILLEGAL, r
    for w in words:
        assert w in r.message, r.message
    assert store.commit_log.mapped_file_queue.mapped_files == [] or store.get_max_phy_offset() == 0
    assert store.replay_message(replayed(1, 0)).ok
    assert [r.queue_offset for r in messages_on_disk(store.root)] == [0]


@pytest.mark.parametrize("store_timestamp, words", [
    (None, ["store_timestamp", "replay"]), (-1, ["store_timestamp", "-1"]), (2**63, ["store_timestamp"]),
    ("x", ["store_timestamp", "str"]), (1.5, ["store_timestamp", "float"]),
])
def test_replay_with_a_bad_store_timestamp_is_refused(store, store_timestamp, words):
    r = store.replay_message(replayed(0, 0, store_timestamp))
    assert r.status is ILLEGAL, r
    for w in words:
        assert w in r.message, r.message
    assert store.replay_message(replayed(1, 0)).ok


def test_replay_with_a_recorded_body_crc_keeps_it(store):
    bad_crc = replayed(0, 0, body_crc=12345)
    assert store.replay_message(bad_crc).ok
    assert store.replay_message(replayed(1, 1, body_crc=-5)).ok  # any 32-bit value a record may hold
    r = store.replay_message(replayed(2, 2, body_crc=2**31))
    assert r.status is ILLEGAL and "body_crc" in r.message
    data = open(os.path.join(store.root, "commitlog", f"{0:020d}"), "rb").read()
    first = decode_record(data, 0)
    assert first.body_crc == 12345
    assert decode_record(data, first.total_size).body_crc == -5


def test_topic_differences_are_documented():
    assert "topic_chars" in DIFFERENCES and "utf8_topic" in DIFFERENCES and "oversize" in DIFFERENCES
    assert "replay" in DIFFERENCES["decided_fields"]


def test_record_larger_than_a_file_writes_nothing(make_store):
    store = make_store()  # default max_message_size (4 MiB): only the file size stops it
    assert store.put_message(good(0)).ok
    mf = store.commit_log.mapped_file_queue.get_last_mapped_file()
    wrote = mf.wrote_position
    overhead = 91 + len("Good") + 0  # no properties below
    too_big = Message(topic="Good", body=b"z" * (FILE_SIZE - 8 - overhead + 1))  # msgLen + 8 == size + 1
    r = store.put_message(too_big)
    assert r.status is ILLEGAL
    assert str(FILE_SIZE - 8 + 1) in r.message and str(FILE_SIZE) in r.message, r.message
    assert mf.wrote_position == wrote, "no blank was written"
    assert len(store.commit_log.mapped_file_queue.mapped_files) == 1, "no file was started"
    r2 = store.put_message(good(1))
    assert r2.ok and r2.append_result.wrote_offset == wrote
    assert r2.append_result.logics_offset == 1
    # the largest record that fits a file: msgLen + 8 == file size, alone in a fresh file
    biggest = Message(topic="Good", body=b"y" * (FILE_SIZE - 8 - overhead))
    r3 = store.put_message(biggest)
    assert r3.ok and r3.append_result.wrote_offset == FILE_SIZE
    assert r3.append_result.wrote_bytes == FILE_SIZE - 8
    r4 = store.put_message(good(3))  # the 8 bytes left become a blank
    assert r4.ok and r4.append_result.wrote_offset == 2 * FILE_SIZE
    store.shutdown()
    walked = walk_commitlog(store.root)
    kinds = [(off, type(rec).__name__) for off, rec in walked]
    assert kinds == [(0, "MessageRecord"), (walked[1][0], "MessageRecord"), (walked[2][0], "BlankRecord"),
                     (FILE_SIZE, "MessageRecord"), (2 * FILE_SIZE - 8, "BlankRecord"),
                     (2 * FILE_SIZE, "MessageRecord")]
    assert walked[4][1] == BlankRecord(8, BLANK_MAGIC_CODE)


# -- store states ------------------------------------------------------------------------

def test_store_not_started_refuses(make_store):
    store = make_store(start=False)
    r = store.put_message(good())
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "not started" in r.message
    b = store.put_messages(MessageBatch(topic="Good", items=[b"a"]))
    assert b.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert not os.path.exists(os.path.join(store.root, "commitlog", f"{0:020d}"))


def test_store_shut_down_refuses(make_store):
    store = make_store()
    assert store.put_message(good()).ok
    store.shutdown()
    r = store.put_message(good(1))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "shut down" in r.message
    assert len(messages_on_disk(store.root)) == 1


def test_slave_refuses(make_store):
    store = make_store(broker_role=BrokerRole.SLAVE)
    r = store.put_message(good())
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "slave" in r.message
    assert store.put_messages(MessageBatch(topic="Good", items=[b"a"])).status is \
        PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_not_writeable_refuses_then_recovers(make_store):
    store = make_store()
    assert store.put_message(good(0)).ok
    store.writeable = False
    r = store.put_message(good(1))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "not writeable" in r.message
    store.writeable = True
    assert store.put_message(good(2)).append_result.logics_offset == 1
    assert [r.body for r in messages_on_disk(store.root)] == [b"good-0", b"good-2"]


def test_sync_master_without_slave(make_store):
    """SYNC_MASTER answers SLAVE_NOT_AVAILABLE (no replication yet); the message is still written."""
    store = make_store(broker_role=BrokerRole.SYNC_MASTER)
    r = store.put_message(good(0))
    assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and "slave" in r.message
    assert r.append_result is not None and r.append_result.wrote_offset == 0
    # a message that does not wait for its store is not held back by the slave
    nowait = Message(topic="Good", body=b"n", properties="WAIT\x01false")
    assert store.put_message(nowait).ok
    assert [r.queue_offset for r in messages_on_disk(store.root)] == [0, 1]
    b = store.put_messages(MessageBatch(topic="Good", items=[b"a", b"b"]))
    assert b.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and b.append_result.msg_num == 2


def test_page_cache_busy_then_free(make_store):
    """A put lock held longer than os_page_cache_busy_timeout_mills refuses puts with OS_PAGECACHE_BUSY."""
    now = [1_000_000]
    s = make_store(clock=lambda: now[0])
    assert s.put_message(good(0)).ok
    s.commit_log.begin_time_in_lock = now[0]  # as if a writer were stuck inside the lock
    now[0] += 1001
    r = s.put_message(good(1))
    assert r.status is PutMessageStatus.OS_PAGECACHE_BUSY and r.message
    s.commit_log.begin_time_in_lock = 0
    assert s.put_message(good(2)).append_result.logics_offset == 1


def test_failed_file_creation_does_not_wedge_the_store(make_store):
    """CREATE_MAPEDFILE_FAILED must not leave the put lock's begin time set (RocketMQ resets it)."""
    now = [5_000_000]
    s = make_store(clock=lambda: now[0], transient_store_pool_enable=True, transient_store_pool_size=0,
                   fast_fail_if_no_buffer_in_store_pool=True)
    r = s.put_message(good(0))
    assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED, r
    assert r.message
    now[0] += 10_000  # long after: no writer is inside the lock
    r = s.put_message(good(1))
    assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED, r


# -- batches ------------------------------------------------------------------------------

@pytest.mark.parametrize("sys_flag", [TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE,
                                      TRANSACTION_ROLLBACK_TYPE])
def test_batch_with_transaction_type_is_refused(store, sys_flag):
    r = store.put_messages(MessageBatch(topic="Good", items=[b"a", b"b"], sys_flag=sys_flag))
    assert r.status is ILLEGAL and "transaction" in r.message
    assert store.put_message(good(0)).append_result.wrote_offset == 0


def test_batch_with_delay_is_refused(store):
    r = store.put_messages(MessageBatch(topic="Good", items=[b"a"], properties="DELAY\x012"))
    assert r.status is ILLEGAL and "delay" in r.message
    assert store.put_message(good(0)).append_result.wrote_offset == 0


@pytest.mark.parametrize("batch, words", [
    (lambda: MessageBatch(topic="Good", items=[]), ["at least one"]),
    (lambda: MessageBatch(topic="a b", items=[b"a"]), ["topic"]),
    (lambda: MessageBatch(topic="Good", queue_id=-1, items=[b"a"]), ["queue id"]),
    (lambda: MessageBatch(topic="Good", items=[BatchItem("text")]), ["body", "str"]),
    (lambda: MessageBatch(topic="Good", items=[b"x" * 5000, b"y" * 5000]), ["8000"]),  # total over max
    (lambda: Message(topic="Good", body=b"x"), ["MessageBatch"]),
    (lambda: MessageBatch(topic="Good", items=[BatchItem(b"a", "k\x01\udc00")]), ["properties", "UTF-8"]),
    (lambda: MessageBatch(topic="Good", items=[b"a"], properties="k\x01\ud800"), ["properties", "UTF-8"]),
    (lambda: MessageBatch(topic="Good", items=[b"a"], born_host="192.0.2.1:70000"), ["port", "70000"]),
    (lambda: MessageBatch(topic="Good", items=[b"a"], born_timestamp=2**63), ["born_timestamp"]),
    (lambda: MessageBatch(topic="Good", items=[BatchItem(b"a", "", 2**31)]), ["flag"]),
    (lambda: MessageBatch(topic="Good", items=[b"a"], reconsume_times="1"), ["reconsume_times", "str"]),
])
def test_bad_batches_are_refused(store, batch, words):
    assert store.put_message(good(0)).ok
    r = store.put_messages(batch())
    assert r.status is ILLEGAL, r
    for w in words:
        assert w in r.message, r.message
    r2 = store.put_message(good(1))
    assert r2.append_result.logics_offset == 1
    assert len(messages_on_disk(store.root)) == 2


def test_batch_put(store):
    host = Address.parse(STORE_HOST)
    for i in range(2):
        assert store.put_message(good(i, topic="B", queue_id=1)).ok
    items = [BatchItem(b"one", "KEYS\x01a"), BatchItem(b"two", ""), BatchItem(b"three", "KEYS\x01c\x02", 7)]
    r = store.put_messages(MessageBatch(topic="B", queue_id=1, items=items, properties="WAIT\x01true\x02CLUSTER\x01C1",
                                        born_host="192.0.2.9:1234", born_timestamp=123))
    assert r.ok, r
    ar = r.append_result
    assert ar.msg_num == 3 and ar.logics_offset == 2
    recs = [rec for rec in messages_on_disk(store.root) if rec.body in (b"one", b"two", b"three")]
    assert [rec.queue_offset for rec in recs] == [2, 3, 4]
    assert ar.msg_id == ",".join(create_message_id(host, rec.physical_offset) for rec in recs)
    assert ar.wrote_offset == recs[0].physical_offset
    assert ar.wrote_bytes == sum(rec.total_size for rec in recs)
    # batch-level properties are appended to every inner message's own (docs/formats.md, Properties)
    assert [rec.properties for rec in recs] == ["KEYS\x01a\x02WAIT\x01true\x02CLUSTER\x01C1",
                                               "WAIT\x01true\x02CLUSTER\x01C1",
                                               "KEYS\x01c\x02WAIT\x01true\x02CLUSTER\x01C1"]
    assert [rec.flag for rec in recs] == [0, 0, 7]
    assert all(rec.topic == "B" and rec.queue_id == 1 and rec.born_timestamp == 123 for rec in recs)
    assert all(rec.store_timestamp == ar.store_timestamp for rec in recs)
    # the queue goes on after the batch
    assert store.put_message(good(9, topic="B", queue_id=1)).append_result.logics_offset == 5
    snap = store.stats.snapshot()
    assert snap["putMessageTimesTotal"] == 6 and snap["byTopic"] == {"B": 6}


def test_batch_never_spans_files(make_store):
    store = make_store()
    while store.get_max_phy_offset() < FILE_SIZE - 3000:
        assert store.put_message(Message(topic="Fill", body=b"f" * 1000)).ok
    before = store.get_max_phy_offset()
    items = [BatchItem(b"%05d" % i + b"." * 400) for i in range(10)]  # about 5 KB: does not fit
    r = store.put_messages(MessageBatch(topic="B", items=items))
    assert r.ok
    assert r.append_result.wrote_offset == FILE_SIZE, "the whole batch moved to the next file"
    walked = walk_commitlog(store.root)
    blank = [(off, rec) for off, rec in walked if isinstance(rec, BlankRecord)]
    assert blank == [(before, BlankRecord(FILE_SIZE - before, BLANK_MAGIC_CODE))]
    batch_recs = [(off, rec) for off, rec in walked if isinstance(rec, MessageRecord) and rec.topic == "B"]
    assert len(batch_recs) == 10 and all(FILE_SIZE <= off < 2 * FILE_SIZE for off, _ in batch_recs)
    # a batch bigger than a whole file is refused and writes nothing
    big = [BatchItem(b"x" * 3000) for _ in range(23)]  # 69 KB of records
    r2 = make_store("big").put_messages(MessageBatch(topic="B", items=big))
    assert r2.status is ILLEGAL and str(FILE_SIZE) in r2.message


# -- statistics ---------------------------------------------------------------------------

def test_stats_count_puts_and_failures(store):
    assert store.put_message(good(0, topic="A")).ok
    assert store.put_message(good(1, topic="A")).ok
    assert store.put_message(good(2, topic="C")).ok
    assert store.put_message(Message(topic="a b")).status is ILLEGAL
    assert store.put_message(Message(topic="Good", properties="k\x01" + "é" * 19998)).status is \
        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_messages(MessageBatch(topic="A", items=[b"1", b"2", b"3"])).ok
    snap = store.stats.snapshot()
    assert snap["putMessageTimesTotal"] == 6
    assert snap["byTopic"] == {"A": 5, "C": 1}
    assert snap["putMessageFailedTimes"] == 2
    assert snap["statusCounts"] == {"PUT_OK": 4, "MESSAGE_ILLEGAL": 1, "PROPERTIES_SIZE_EXCEEDED": 1}
    on_disk = sum(rec.total_size for rec in messages_on_disk(store.root))
    assert snap["putMessageSizeTotal"] == on_disk
    assert sum(snap["putMessageDistributeTime"]) == 6  # every put timed, failures included
    assert snap["putMessageEntireTimeMax"] >= 0


# -- transactions and delay levels -----------------------------------------------------------

def test_prepared_and_rollback_do_not_advance_the_queue(store):
    results = []
    for sys_flag in (0, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE, 0,
                     TRANSACTION_PREPARED_TYPE, 0):
        r = store.put_message(Message(topic="Txn", sys_flag=sys_flag, body=b"%d" % sys_flag))
        assert r.ok
        results.append(r.append_result.logics_offset)
    assert results == [0, 0, 1, 0, 2, 0, 3]
    recs = messages_on_disk(store.root)
    assert [rec.queue_offset for rec in recs] == results
    assert [rec.sys_flag & 0xC for rec in recs] == [0, 4, 8, 12, 0, 4, 0]


def test_delay_levels(store):
    cases = [("DELAY\x013", 2, "3"), ("DELAY\x0125", 17, "18"), ("DELAY\x0118", 17, "18"), ("DELAY\x011", 0, "1")]
    for i, (props, qid, level) in enumerate(cases):
        r = store.put_message(Message(topic="Late", queue_id=3, body=b"d%d" % i, properties="KEYS\x01k\x02" + props))
        assert r.ok
    recs = messages_on_disk(store.root)
    for (props, qid, level), rec in zip(cases, recs):
        assert rec.topic == SCHEDULE_TOPIC and rec.queue_id == qid
        pm = string_to_properties(rec.properties)
        assert pm["DELAY"] == level and pm["REAL_TOPIC"] == "Late" and pm["REAL_QID"] == "3"
        assert pm["KEYS"] == "k" and pm["WAIT"] == "true"
    assert [rec.queue_offset for rec in recs] == [0, 0, 1, 0], "the schedule topic's queues count by themselves"
    # not rewritten: level 0, a level that is no number, a PREPARED message, a replayed record
    plain = [Message(topic="Late", body=b"p0", properties="DELAY\x010"),
             Message(topic="Late", body=b"p1", properties="DELAY\x01soon"),
             Message(topic="Late", body=b"p2", properties="DELAY\x012", sys_flag=TRANSACTION_PREPARED_TYPE),
             Message(topic="Late", body=b"p3", properties="DELAY\x012", store_timestamp=99, queue_offset=2)]
    for m in plain:
        assert (store.replay_message if m.store_timestamp is not None else store.put_message)(m).ok
    recs = messages_on_disk(store.root)[len(cases):]
    assert [(rec.topic, rec.properties) for rec in recs] == [("Late", m.properties) for m in plain]
    assert recs[3].store_timestamp == 99 and recs[3].queue_offset == 2
    assert store.put_message(Message(topic="Late", body=b"after")).append_result.logics_offset == 3


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_wait_false_under_sync_flush_still_lands(make_store, flush):
    store = make_store(flush_disk_type=flush)
    for i in range(20):
        props = "WAIT\x01false" if i % 2 else ""
        assert store.put_message(Message(topic="W", body=b"w" * 500, properties=props)).ok
    store.shutdown()
    assert [rec.queue_offset for rec in messages_on_disk(store.root)] == list(range(20))


def test_commitlog_folder_that_cannot_be_made_is_create_mapedfile_failed(make_store):
    """A failure to create a file is an answer, not an exception; puts work again once it is fixed."""
    store = make_store(start=False)
    folder = os.path.join(store.root, "commitlog")
    os.makedirs(store.root)
    with open(folder, "w"):
        pass  # a plain file where the folder should be (from the start: a started store makes its first file)
    store.start()
    r = store.put_message(good(0))
    assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED and r.message
    assert store.put_messages(MessageBatch(topic="Good", items=[b"a"])).status is \
        PutMessageStatus.CREATE_MAPEDFILE_FAILED
    os.remove(folder)
    r = store.put_message(good(1))
    assert r.ok and r.append_result.wrote_offset == 0 and r.append_result.logics_offset == 0
    assert store.stats.snapshot()["statusCounts"] == {"CREATE_MAPEDFILE_FAILED": 2, "PUT_OK": 1}
