"""Fed the same puts, write the same bytes.

Every fixture that lists its puts is replayed through our put path -- NOT in replay mode:
the store decides queue offsets, physical offsets and the delay rewrite itself; only the
clock is injected so that each put gets the store timestamp RocketMQ recorded for it.
Then every ``PutMessageResult`` must equal RocketMQ's (status, wroteOffset, wroteBytes,
msgId, logicsOffset), every stored record must carry RocketMQ's stored fields (the
delay-rewritten properties string in HashMap order included), and the commitlog files must
be byte-identical to RocketMQ's -- except for the bytes after a blank record's 8-byte
header, where RocketMQ may leave stale bytes (``flush_tsp``) and we must leave zeros.

Documented differences (``rmqstore.engine.commit_log.DIFFERENCES``): ``boundary`` seq 12 -- a
record larger than a whole file -- is refused with MESSAGE_ILLEGAL (RocketMQ says PUT_OK,
stores nothing and blanks two files), so our later ``boundary`` records sit at other
offsets; they are compared by content, not by offset.

Records the store wrote on its own (``txn_delay``: delay messages delivered back by the
ScheduleMessageService) are fed as replay puts (store timestamp and queue offset given) at
their place in commitlog order, so the whole file can match.
"""

from __future__ import annotations

import os
import time

import pytest

from conftest import commitlog_files, manifest, walk_file
from rmqstore import Message, MessageStore, PutMessageStatus, StoreConfig
from rmqstore.engine.commit_log import DIFFERENCES
from rmqstore.format.record import Address, BlankRecord, MessageRecord, create_message_id, decode_record

REPLAY_FIXTURES = ("basic", "boundary", "txn_delay", "flush_async", "flush_sync", "flush_tsp")

#: boundary: the put RocketMQ reports PUT_OK without storing anything (a record > a file)
OVERSIZE_SEQ = 12
#: boundary: results up to this seq are at RocketMQ's offsets; later ones are not
LAST_SAME_OFFSET_SEQ = 11


class PerPutClock:
    """The store's clock: answers the value set for the put in progress.

    The put path reads the clock inside the put lock (once per append attempt); the
    page-cache-busy check reads it too.  Answering one fixed value per put makes every
    read agree, however many reads there are.
    """

    def __init__(self):
        self.value = 0
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.value


def put_body(p: dict) -> bytes:
    if "bodyOmitted" in p:  # only the over-size body is left out of the manifest; its content never matters
        assert p["status"] != "PUT_OK"
        return bytes(p["bodyLen"])
    body = bytes.fromhex(p["body"])
    assert len(body) == p["bodyLen"]
    return body


def message_for_put(p: dict) -> Message:
    """What the producer handed RocketMQ's store (the ``input*`` fields of the manifest)."""
    return Message(topic=p["inputTopic"], queue_id=p["inputQueueId"], sys_flag=p["inputSysFlag"],
                   properties=p["inputProperties"] or "", body=put_body(p), flag=p["flag"],
                   born_timestamp=p["bornTimestamp"], born_host=p["bornHost"],
                   reconsume_times=p["reconsumeTimes"],
                   prepared_transaction_offset=p["preparedTransactionOffset"])


def message_for_record(r: dict) -> Message:
    """A record the store wrote by itself, as a replay put (keeps timestamp and queue offset)."""
    return Message(topic=r["topic"], queue_id=r["queueId"], sys_flag=r["sysFlag"],
                   properties=r["propertiesRaw"] or "", body=bytes.fromhex(r["body"]), flag=r["flag"],
                   born_timestamp=r["bornTimestamp"], born_host=r["bornHost"], store_host=r["storeHost"],
                   reconsume_times=r["reconsumeTimes"],
                   prepared_transaction_offset=r["preparedTransactionOffset"],
                   store_timestamp=r["storeTimestamp"], queue_offset=r["queueOffset"])


class Replay:
    """One fixture replayed into a fresh store (run once per module, shared by the tests)."""

    def __init__(self, name: str, root):
        self.name = name
        self.m = manifest(name)
        self.root = str(root)
        self.store_host = self.m["puts"][0]["storeHost"]
        self.config = StoreConfig.from_manifest(self.m["config"], store_host=self.store_host)
        self.clock = PerPutClock()
        self.results: dict[int, object] = {}  # seq -> PutMessageResult
        self.extra_results: list[tuple[dict, object]] = []  # (recordNotWrittenByAnyPut, result)
        self.files_before_shutdown: list[str] = []
        self.run()

    def _put(self, msg: Message, store_timestamp: int):
        self.clock.value = store_timestamp
        if msg.store_timestamp is not None:  # a record the store wrote by itself: replayed as recorded
            return self.store.replay_message(msg)
        return self.store.put_message(msg)

    def run(self) -> None:
        extras = sorted(self.m.get("recordsNotWrittenByAnyPut") or [], key=lambda r: r["commitLogOffset"])
        extras = [r for r in extras if r.get("magic", "").lower() == "0xdaa320a7"]
        self.store = MessageStore(self.root, self.config, clock=self.clock)
        self.store.start()
        try:
            for p in self.m["puts"]:
                if p["status"] == "PUT_OK":
                    # records RocketMQ wrote on its own before this put go first
                    while extras and extras[0]["commitLogOffset"] < p["wroteOffset"]:
                        r = extras.pop(0)
                        self.extra_results.append((r, self._put(message_for_record(r), r["storeTimestamp"])))
                self.results[p["seq"]] = self._put(message_for_put(p), p["storeTimestamp"])
            for r in extras:
                self.extra_results.append((r, self._put(message_for_record(r), r["storeTimestamp"])))
            self.files_before_shutdown = self._list_after_pre_allocation()
        finally:
            self.store.shutdown()

    def _list_after_pre_allocation(self) -> list[str]:
        """The commitlog listing once the allocate service made the file after the last one."""
        folder = os.path.join(self.root, "commitlog")
        last = self.store.commit_log.mapped_file_queue.get_last_mapped_file()
        if last is not None and last.file_from_offset > 0:  # a rollover asked for next and next-next
            nxt = os.path.join(folder, f"{last.file_from_offset + last.file_size:020d}")
            deadline = time.monotonic() + 5
            while not os.path.exists(nxt) and time.monotonic() < deadline:
                time.sleep(0.005)
        return sorted(os.listdir(folder))

    def same_offsets(self, seq: int) -> bool:
        """Whether our result for ``seq`` is expected at RocketMQ's offset."""
        return not (self.name == "boundary" and seq > LAST_SAME_OFFSET_SEQ)

    def our_file(self, offset: int) -> bytes:
        with open(os.path.join(self.root, "commitlog", f"{offset:020d}"), "rb") as f:
            return f.read()

    def our_record(self, phys: int) -> MessageRecord:
        size = self.config.mapped_file_size_commit_log
        data = self.our_file(phys - phys % size)
        rec = decode_record(data, phys % size, check_crc=True)
        assert isinstance(rec, MessageRecord)
        return rec


_RUNS: dict[str, Replay] = {}


def _replayed(name: str, tmp_path_factory) -> Replay:
    if name not in _RUNS:
        _RUNS[name] = Replay(name, tmp_path_factory.mktemp(f"replay_{name}"))
    return _RUNS[name]


@pytest.fixture(scope="module", params=REPLAY_FIXTURES)
def replay(request, tmp_path_factory) -> Replay:
    return _replayed(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def boundary(tmp_path_factory) -> Replay:
    return _replayed("boundary", tmp_path_factory)


@pytest.fixture(scope="module")
def txn_delay(tmp_path_factory) -> Replay:
    return _replayed("txn_delay", tmp_path_factory)


def fixture_record(name: str, phys: int) -> MessageRecord:
    size = manifest(name)["config"]["mappedFileSizeCommitLog"]
    files = dict(commitlog_files(name))
    rec = decode_record(files[phys - phys % size], phys % size, check_crc=True)
    assert isinstance(rec, MessageRecord)
    return rec


def without_offset(rec: MessageRecord) -> MessageRecord:
    return rec._replace(physical_offset=None)


# -- results ---------------------------------------------------------------------------

def test_every_status_matches(replay):
    for p in replay.m["puts"]:
        r = replay.results[p["seq"]]
        if replay.name == "boundary" and p["seq"] == OVERSIZE_SEQ:
            assert "oversize" in DIFFERENCES
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL, r
            continue
        assert r.status.name == p["status"], (p["seq"], p.get("note"), r)
        if not r.ok:
            assert r.message, f"seq {p['seq']}: a refusal must say why"
            assert r.append_result is None or r.append_result.wrote_bytes == 0


def test_every_put_ok_result_matches(replay):
    host = Address.parse(replay.store_host)
    checked = 0
    for p in replay.m["puts"]:
        r = replay.results[p["seq"]]
        if p["status"] != "PUT_OK" or not r.ok:
            continue
        ar = r.append_result
        assert ar.status.name == "PUT_OK"
        assert ar.wrote_bytes == p["wroteBytes"], p["seq"]
        assert ar.logics_offset == p["logicsOffset"], p["seq"]
        assert ar.msg_num == p["msgNum"] == 1
        assert ar.store_timestamp == p["resultStoreTimestamp"], p["seq"]
        if replay.same_offsets(p["seq"]):
            assert ar.wrote_offset == p["wroteOffset"], p["seq"]
            assert ar.msg_id == p["msgId"], p["seq"]
        else:
            assert ar.msg_id == create_message_id(host, ar.wrote_offset)
        checked += 1
    assert checked == sum(1 for p in replay.m["puts"] if p["status"] == "PUT_OK") - (replay.name == "boundary")


def test_records_written_by_the_schedule_service_land_where_rocketmq_put_them(replay):
    expected = [r for r in replay.m.get("recordsNotWrittenByAnyPut") or []
                if r.get("magic", "").lower() == "0xdaa320a7"]
    assert len(replay.extra_results) == len(expected)
    if replay.name == "txn_delay":
        assert len(expected) == 4
    for r, res in replay.extra_results:
        assert res.ok, res
        assert res.append_result.wrote_offset == r["commitLogOffset"]
        assert res.append_result.wrote_bytes == r["storeSize"]
        assert res.append_result.msg_id == r["msgId"]
        assert res.append_result.logics_offset == r["queueOffset"]


def test_boundary_oversize_is_refused_and_names_the_size(boundary):
    replay = boundary
    p = replay.m["puts"][OVERSIZE_SEQ]
    r = replay.results[OVERSIZE_SEQ]
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    record_len = (91 + p["bodyLen"] + len(p["inputTopic"].encode()) + len(p["inputProperties"].encode()))
    assert str(record_len) in r.message, r.message
    assert str(replay.config.mapped_file_size_commit_log) in r.message, r.message
    # the next put goes right after seq 11 in the same file, not into a fresh one
    after = replay.results[OVERSIZE_SEQ + 1].append_result
    seq11 = replay.m["puts"][LAST_SAME_OFFSET_SEQ]
    assert after.wrote_offset == seq11["wroteOffset"] + seq11["wroteBytes"]
    # queue offsets agree with RocketMQ's even so (its oversize put did not advance the queue)
    assert after.logics_offset == replay.m["puts"][OVERSIZE_SEQ + 1]["logicsOffset"]


# -- records ---------------------------------------------------------------------------

def test_stored_records_carry_rocketmq_fields(replay):
    host = Address.parse(replay.store_host)
    for p in replay.m["puts"]:
        r = replay.results[p["seq"]]
        if not r.ok:
            continue
        rec = replay.our_record(r.append_result.wrote_offset)
        assert rec.total_size == p["wroteBytes"]
        assert rec.topic == p["topic"], p["seq"]
        assert rec.queue_id == p["queueId"], p["seq"]
        assert rec.properties == (p["properties"] or ""), (p["seq"], p.get("note"))
        assert rec.sys_flag == p["sysFlag"]
        assert rec.flag == p["flag"]
        assert rec.body_crc == p["bodyCRC"]
        assert rec.body == bytes.fromhex(p["body"])
        assert rec.born_timestamp == p["bornTimestamp"]
        assert rec.store_timestamp == p["storeTimestamp"]
        assert rec.born_host == Address.parse(p["bornHost"])
        assert rec.store_host == host
        assert rec.reconsume_times == p["reconsumeTimes"]
        assert rec.prepared_transaction_offset == p["preparedTransactionOffset"]
        assert rec.queue_offset == p["logicsOffset"]
        assert rec.physical_offset == r.append_result.wrote_offset
        if replay.same_offsets(p["seq"]):
            assert rec == fixture_record(replay.name, p["wroteOffset"])
        else:
            assert without_offset(rec) == without_offset(fixture_record(replay.name, p["wroteOffset"]))


def test_delay_rewrite_matches_hashmap_order(txn_delay):
    replay = txn_delay
    rewritten = [p for p in replay.m["puts"] if p["topic"] == "SCHEDULE_TOPIC_XXXX"]
    assert len(rewritten) == 7
    for p in rewritten:
        rec = replay.our_record(replay.results[p["seq"]].append_result.wrote_offset)
        assert rec.topic == "SCHEDULE_TOPIC_XXXX"
        assert rec.queue_id == p["queueId"]
        assert rec.properties == p["properties"], p["note"]
    # DELAY=19 is above the maximum: clamped to 18, queue 17
    p19 = next(p for p in rewritten if p["note"] == "DELAY=19")
    rec = replay.our_record(replay.results[p19["seq"]].append_result.wrote_offset)
    assert rec.queue_id == 17 and "DELAY\x0118\x02" in rec.properties
    # DELAY=0 and PREPARED+DELAY are not rewritten
    for p in replay.m["puts"]:
        if p["note"] in ("DELAY=0", "store-level raw sysFlag PREPARED+DELAY3"):
            rec = replay.our_record(replay.results[p["seq"]].append_result.wrote_offset)
            assert rec.topic == p["inputTopic"] and rec.properties == p["inputProperties"]


# -- files -----------------------------------------------------------------------------

def blank_tail(data: bytes) -> int | None:
    """Where the bytes after a blank record's 8-byte header start (None without a blank)."""
    for pos, rec in walk_file(data):
        if isinstance(rec, BlankRecord):
            return pos + 8
    return None


def assert_same_bytes(ours: bytes, theirs: bytes, what: str) -> None:
    if ours == theirs:
        return
    first = next(i for i in range(min(len(ours), len(theirs))) if ours[i] != theirs[i])
    raise AssertionError(f"{what}: first difference at byte {first}: ours {ours[first:first + 16].hex()} "
                         f"theirs {theirs[first:first + 16].hex()}")


def test_commitlog_files_are_byte_identical(replay):
    theirs = commitlog_files(replay.name)
    ours = sorted(os.listdir(os.path.join(replay.root, "commitlog")))
    size = replay.config.mapped_file_size_commit_log
    if replay.name == "boundary":
        # RocketMQ blanked the rest of file 3 and all of file 4 for its oversize put; we did not
        expected = [f"{off:020d}" for off, _ in theirs][:4]
        assert ours == expected
        cut = replay.m["puts"][LAST_SAME_OFFSET_SEQ]
        cut = cut["wroteOffset"] + cut["wroteBytes"]
        for off, data in theirs:
            if off + size <= cut:
                tail = blank_tail(data)
                mine = replay.our_file(off)
                if tail is None:
                    assert_same_bytes(mine, data, f"boundary file {off}")
                else:
                    assert_same_bytes(mine[:tail], data[:tail], f"boundary file {off}")
                    assert not any(mine[tail:])
        mine = replay.our_file(cut - cut % size)
        assert_same_bytes(mine[:cut % size], dict(theirs)[cut - cut % size][:cut % size], "boundary file 3")
        # after the cut: our records, back to back, then zeros
        pos = cut % size
        seqs = [p["seq"] for p in replay.m["puts"] if p["seq"] > OVERSIZE_SEQ and p["status"] == "PUT_OK"]
        for seq in seqs:
            rec = decode_record(mine, pos, check_crc=True)
            assert rec.physical_offset == cut - cut % size + pos == replay.results[seq].append_result.wrote_offset
            pos += rec.total_size
        assert not any(mine[pos:])
        return
    assert ours == [f"{off:020d}" for off, _ in theirs], "same files, and no pre-allocated file left behind"
    masked = 0
    for off, data in theirs:
        mine = replay.our_file(off)
        assert len(mine) == len(data) == size
        tail = blank_tail(data)
        if tail is None:
            assert_same_bytes(mine, data, f"{replay.name} file {off}")
            continue
        assert_same_bytes(mine[:tail], data[:tail], f"{replay.name} file {off}")
        assert not any(mine[tail:]), f"{replay.name} file {off}: bytes after our blank header must be zeros"
        masked += any(data[tail:])
    if replay.name == "flush_tsp":
        assert masked > 0, "flush_tsp has stale bytes after some blank headers (docs/formats.md, blank record)"
    else:
        assert masked == 0


def test_pre_allocated_file_existed_while_running(replay):
    """The next-next file was pre-created while running and removed by the clean shutdown."""
    ours = sorted(os.listdir(os.path.join(replay.root, "commitlog")))
    if len(ours) > 1:  # a rollover happened, so the file after the last one was asked for
        last = int(ours[-1])
        nxt = f"{last + replay.config.mapped_file_size_commit_log:020d}"
        assert nxt in replay.files_before_shutdown
        assert nxt not in ours


def test_max_offset_after_replay(replay):
    size = replay.config.mapped_file_size_commit_log
    ours = sorted(os.listdir(os.path.join(replay.root, "commitlog")))
    last = int(ours[-1])
    data = replay.our_file(last)
    end = last
    for pos, rec in walk_file(data, last):
        end = pos + rec.total_size
    if replay.name != "boundary":
        assert end == replay.m["maxPhyOffset"]
    assert replay.store.get_max_phy_offset() == end
    assert end - last <= size
