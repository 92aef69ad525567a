"""Notebooks 07-09 print the internals they teach, and the values are right.

Each notebook runs once per session (``conftest.executed_notebook``); the expectations here
are computed independently: the same workload put in-process into a fresh store (notebook
07's writer), the RocketMQ fixture manifests, and the engine's own consume queues and
lookups over the stores in ``data/``.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from conftest import FIXTURES, NOTEBOOKS_DIR, executed_notebook, manifest, notebook_text, notebook_work_folder  # noqa: E402

from rmqstore import Address, Message, MessageStore, StoreConfig, create_message_id  # noqa: E402
from rmqstore.format.layout import message_length  # noqa: E402

ROOT = NOTEBOOKS_DIR.parent
SEG_07 = 8192


# -- 07: crash and recovery --------------------------------------------------------------------
def _writer_puts(tmp_path) -> list[tuple[int, int, str, int, int]]:
    """Notebook 07's writer workload put in-process: ``(offset, size, topic, queue id, queue offset)``."""
    cfg = StoreConfig(mapped_file_size_commit_log=SEG_07, mapped_file_size_consume_queue=20 * 64,
                      max_hash_slot_num=64, max_index_num=256, flush_disk_type="ASYNC_FLUSH",
                      store_host="198.51.100.7:10911", message_index_enable=False)
    out = []
    with MessageStore(tmp_path / "store", cfg) as store:
        for i in range(120):
            msg = Message(f"Crash{'AB'[i % 2]}", (b"order-%03d " % i) * (5 + i % 40), queue_id=i % 3,
                          properties=f"KEYS\x01k{i}\x02TAGS\x01T{i % 4}", born_host="192.0.2.60:46000",
                          born_timestamp=1_794_999_999_000 + i)
            r = store.put_message(msg).append_result
            out.append((r.wrote_offset, r.wrote_bytes, msg.topic, msg.queue_id, r.logics_offset))
    return out


def test_07_killed_writer_abort_checkpoint_and_verify(tmp_path):
    text = notebook_text("07_crash_and_recovery.ipynb")
    puts = _writer_puts(tmp_path)
    last_off, last_size = puts[-1][:2]
    assert "writer killed: exit code -9 (-9 = SIGKILL)" in text
    assert (f"120 acknowledged puts; the last one at offset {last_off}, {last_size} bytes, "
            f"so the log ends at {last_off + last_size}") in text
    assert "abort file present: True | size 0" in text
    # the writer's clock: one second per put from 1_795_000_000_000, so the last put is +120 s
    assert "checkpoint physic_msg_timestamp   1795000120000  2026-11-18T11:08:40.000Z" in text
    assert "checkpoint logics_msg_timestamp   1795000120000" in text
    assert "safe point (min of commitlog and queues - 3 s): 1795000117000" in text
    n_files = last_off // SEG_07 + 1
    assert f"  {n_files * SEG_07:020d}  all zeros: pre-allocated" in text
    # verify: the killed store is whole (two warnings), the power-cut copy is damaged
    assert "result          OK: no damage found (2 warnings)" in text
    assert "result          DAMAGED:" in text
    assert "exit code 1" in text and text.count("exit code 0") == 2
    # no raw log line on stderr (a read-only verify once logged recovery's "truncate dirty logic
    # files" warning, shown in pink, for a cut it does not make)
    stderr = [o["text"] for c in executed_notebook("07_crash_and_recovery.ipynb").cells
              for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert stderr == []


def test_07_power_cut_recovery_cuts_and_redispatches(tmp_path):
    text = notebook_text("07_crash_and_recovery.ipynb")
    puts = _writer_puts(tmp_path)
    last_off, last_size, last_topic, last_qid, last_qoff = puts[-1]
    end_file, end_pos = last_off - last_off % SEG_07, last_off % SEG_07
    assert f"torn: record at {last_off} ({last_topic} q{last_qid}, queue offset {last_qoff})" in text
    assert "last exit ok: False -> abnormal recovery" in text
    assert f"recovery found the end of the log at offset {last_off} ({end_file:020d} + {end_pos})" in text
    assert f"records cut off: 1 -> [({last_off}, '{last_topic}', {last_qid}, {last_qoff})]" in text
    assert "records kept: 119 of 120" in text
    # the walk starts at the newest file whose first record is no later than the safe point
    # (store time of put i is base + 1000 * (i + 1); safe point = put 116's time)
    first_put_of = {}
    for i, (off, *_rest) in enumerate(puts):
        first_put_of.setdefault(off // SEG_07, i)
    start = max(f for f, i in first_put_of.items() if i + 1 <= 117)
    assert "recover from this mapped file " in text and f"commitlog/{start * SEG_07:020d}\n" in text
    assert f"abnormal recovery will start its walk at {start * SEG_07:020d} (the newest file" in text
    # the index file is newer than the checkpoint's index timestamp (0): dropped, and rebuilt for
    # every record the log keeps (re-indexed from the first record to the walk's start, then the
    # walk's re-dispatch; the torn record excluded)
    assert "index entries: killed store 120 | power-cut copy after recovery 119" in text
    assert "key 'k0': killed store [0] | after recovery [0]" in text
    assert f"key 'k118': killed store [{puts[118][0]}] | after recovery [{puts[118][0]}]" in text
    lost = [(t, q, qo) for _, _, t, q, qo in puts[-3:-1]]
    assert f"units rebuilt by re-dispatch: {lost}" in text
    for t, q, qo in lost:
        assert f"lost page: unit {qo} of {t} q{q}" in text
    # every queue is whole again except the one that lost the cut record
    for (topic, qid) in {(p[2], p[3]) for p in puts}:
        n = sum(1 for p in puts if p[2:4] == (topic, qid))
        recovered = n - 1 if (topic, qid) == (last_topic, last_qid) else n
        on_disk = n - 1 if (topic, qid, n - 1) in lost else n
        assert f"{topic} q{qid}   {n:5d} {on_disk:7d} {recovered:9d}" in text
    assert f"next queue offset of ('{last_topic}', {last_qid}) is {last_qoff}" in text
    # the next put lands on the cut record's place and takes its queue offset
    size = message_length(0, last_size, len(last_topic), len("KEYS\x01after"))
    assert f"PutMessageResult(PUT_OK, offset={last_off}, bytes={size}, queue_offset={last_qoff})" in text
    assert "abort file present: False" in text
    assert "last exit ok: True -> normal recovery" in text
    assert f"normal recovery starts its walk at {(end_file // SEG_07 - 2) * SEG_07:020d}" in text
    assert "where the put after the recovery ended: True" in text


def test_07_rocketmq_crash_fixture_ends_where_rocketmq_did():
    text = notebook_text("07_crash_and_recovery.ipynb")
    m = manifest("crash")
    end = m["recovery"]["maxPhyOffsetAfterLoad"]
    assert end == m["childRun"]["maxPhyOffsetAtHalt"]
    assert f"RocketMQ's last put ended at {end}" in text
    assert f"our recovery ends the log at {end}\n" in text
    assert f"RocketMQ's recovery ended it at {end} (manifest); its recovered_store ends at {end}" in text
    assert "same end: True" in text
    kept = [f["file"] for f in m["recovery"]["positionsAfterLoad"]["files"]]
    assert f"commitlog files after recovery: {kept}" in text
    assert "equal RocketMQ's recovered_store byte for byte: True" in text
    cp = m["beforeRecovery"]["checkpointFile"]
    assert (f"checkpoint: {{'physic_msg_timestamp': {cp['physicMsgTimestamp']}, 'logics_msg_timestamp': "
            f"{cp['logicsMsgTimestamp']}, 'index_msg_timestamp': {cp['indexMsgTimestamp']}}}") in text
    assert (FIXTURES / "crash" / "store" / "abort").exists()  # the notebook worked on a copy


# -- 08: transactions, delay levels, batches -----------------------------------------------------
def test_08_transaction_types_and_their_units():
    from rmqstore.format.properties import java_string_hash

    text = notebook_text("08_transactions_delay_batches.ipynb")
    assert ("transaction types: {'TRANSACTION_NOT_TYPE': 0, 'TRANSACTION_PREPARED_TYPE': 4, "
            "'TRANSACTION_COMMIT_TYPE': 8, 'TRANSACTION_ROLLBACK_TYPE': 12}") in text
    # five records side by side from 0; sizes from the layout (topic TxnTopic, KEYS=<body> TAGS=T)
    offset, expected = 0, []
    for body, flag, qoff in ((b"plain", 0, 0), (b"half-1", 4, 0), (b"commit-1", 8, 1), (b"half-2", 4, 0),
                             (b"rollback-2", 12, 0)):
        size = message_length(flag, len(body), len("TxnTopic"), len(f"KEYS\x01{body.decode()}\x02TAGS\x01T"))
        expected.append((offset, size, flag, qoff))
        assert f"PutMessageResult(PUT_OK, offset={offset}, bytes={size}, queue_offset={qoff})" in text
        offset += size
    half1, half2 = expected[1][0], expected[3][0]
    assert f"sys_flag 0x08 TXN_COMMIT    prepared_txn_offset {half1:<5d} KEYS=commit-1" in text
    assert f"sys_flag 0x0c TXN_ROLLBACK  prepared_txn_offset {half2:<5d} KEYS=rollback-2" in text
    tags = java_string_hash("T")
    assert "  consume queue TxnTopic/0: 2 unit(s)" in text
    assert f"    unit 0: (offset 0, size {expected[0][1]}, tags code {tags})" in text
    assert f"    unit 1: (offset {expected[2][0]}, size {expected[2][1]}, tags code {tags})" in text


def test_08_delay_rewrite_and_batch():
    text = notebook_text("08_transactions_delay_batches.ipynb")
    # clock: +1000 ms per put from 1_795_000_000_000; the DELAY=3 put is the 6th, DELAY=19 the 7th
    t3, t19 = 1_795_000_006_000, 1_795_000_007_000
    assert f"stored on SCHEDULE_TOPIC_XXXX/2; REAL_TOPIC=DelayTopic REAL_QID=1 DELAY=3; store timestamp {t3}" in text
    assert f"stored on SCHEDULE_TOPIC_XXXX/17; REAL_TOPIC=DelayTopic REAL_QID=1 DELAY=18; store timestamp {t19}" in text
    assert "stored on DelayTopic/1; REAL_TOPIC=None REAL_QID=None DELAY=0" in text
    assert f"tags code {t3 + 10_000})" in text and f"tags code {t19 + 7_200_000})" in text
    # a PREPARED message with DELAY is not rewritten and gets no unit
    assert "DelayTopic           q1  queue_offset 0   sys_flag 0x04 TXN_PREPARED  prepared_txn_offset 0     " \
           "KEYS=prepared-delay TAGS=D DELAY=3" in text
    assert text.count("  consume queue DelayTopic/1: 1 unit(s)") == 2
    # the batch: five records of one size side by side, one put, consecutive queue offsets from 1
    size = message_length(0, len(b"item-0"), len("BatchTopic"), len("KEYS\x01batch-0\x02TAGS\x01B"))
    start = int(re.search(r"one put: wrote_offset (\d+), ", text).group(1))
    assert f"one put: wrote_offset {start}, wrote_bytes {5 * size}, msg_num 5, first queue offset 1" in text
    for k in range(5):
        assert (f"@{start + k * size:<5d} BatchTopic           q0  queue_offset {k + 1}   sys_flag 0x00 -             "
                f"prepared_txn_offset 0     KEYS=batch-{k} TAGS=B") in text
        assert f"    unit {k + 1}: (offset {start + k * size}, size {size}, tags code {ord('B')})" in text
    ids = [create_message_id(Address.parse("198.51.100.7:10911"), start + k * size) for k in range(5)]
    assert f"msg ids: {ids}" in text
    assert f"records end at {start + 5 * size} = wrote_offset + wrote_bytes: True" in text


def test_08_sample_store_counts_follow_make_samples():
    text = notebook_text("08_transactions_delay_batches.ipynb")
    # data/make_samples.py: 1500 puts; i % 97 == 5/6/7 -> PREPARED/COMMIT/ROLLBACK; else i % 131 == 9 -> DELAY
    kinds = ["PREPARED" if i % 97 == 5 else "COMMIT" if i % 97 == 6 else "ROLLBACK" if i % 97 == 7 else "NOT"
             for i in range(1500)]
    n = {k: kinds.count(k) for k in ("NOT", "PREPARED", "COMMIT", "ROLLBACK")}
    n["NOT"] += 8  # the batch
    assert f"{1500 + 8} records by transaction type: {{'TXN_COMMIT': {n['COMMIT']}, 'TXN_NOT': {n['NOT']}, " \
           f"'TXN_PREPARED': {n['PREPARED']}, 'TXN_ROLLBACK': {n['ROLLBACK']}}}" in text
    for k in ("NOT", "COMMIT"):
        assert f"  {k:9s} with a unit: {n[k]:5d}   without:   0" in text
    for k in ("PREPARED", "ROLLBACK"):
        assert f"  {k:9s} with a unit:     0   without: {n[k]:3d}" in text
    assert f"units in all consume queues: {n['NOT'] + n['COMMIT']}" in text
    delays = sum(1 for i in range(1500) if kinds[i] == "NOT" and i % 131 == 9)
    assert f"{delays} delay messages on SCHEDULE_TOPIC_XXXX:" in text
    assert "every queue id is DELAY - 1: True" in text
    assert "every tags code is store time + its level's delay: True" in text
    assert "the batch: 8 records on OrderTopic/0" in text
    assert "side by side: True | consecutive queue offsets: True | one store timestamp: True" in text


def test_08_rocketmq_txn_delay_units_match_the_manifest():
    text = notebook_text("08_transactions_delay_batches.ipynb")
    queues = {(q["topic"], q["queueId"]): q["entries"] for q in manifest("txn_delay")["consumeQueues"]}
    assert f"  consume queue TxnTopic/0: {len(queues[('TxnTopic', 0)])} unit(s)" in text
    for n, offset, size, tags in queues[("TxnTopic", 0)] + queues[("DelayTopic", 1)]:
        assert f"    unit {n}: (offset {offset}, size {size}, tags code {tags})" in text
    for (topic, qid), entries in queues.items():
        if topic == "SCHEDULE_TOPIC_XXXX":
            for n, offset, _size, tags in entries:
                assert f"SCHEDULE_TOPIC_XXXX/{qid:<2d} unit {n}: @{offset} " in text
                assert f"tags code {tags} = store time + " in text
    commit = next(p for p in manifest("txn_delay")["puts"] if p["topic"] == "TxnRealTopic")
    assert (f"@{commit['wroteOffset']}  TxnRealTopic         q1  queue_offset 0   sys_flag 0x08 TXN_COMMIT    "
            f"prepared_txn_offset {commit['preparedTransactionOffset']}") in text
    assert (f"prepared_transaction_offset {commit['preparedTransactionOffset']} -> the half message on "
            "RMQ_SYS_TRANS_HALF_TOPIC") in text


@pytest.fixture(scope="module")
def nb08_broker():
    """Notebook 08's text and the records of the broker store it kept (removed afterwards)."""
    import os
    import shutil

    from rmqstore import MessageRecord, open_store
    from rmqstore.read.scan import CommitLogScan

    text = notebook_text("08_transactions_delay_batches.ipynb")
    work = notebook_work_folder(text)
    root = os.path.join(work, "store")
    records = {off: rec for off, rec in CommitLogScan(root) if isinstance(rec, MessageRecord)}
    store = open_store(root)
    try:
        units = {key: [cq.get_unit(k) for k in range(cq.get_max_offset_in_queue())]
                 for key, cq in store.consume_queue_table.items()}
    finally:
        store.close()
    yield text, records, units, root
    shutil.rmtree(work, ignore_errors=True)


def test_08_broker_checks_an_unknown_transaction_and_applies_the_answer(nb08_broker):
    from rmqstore.format.properties import string_to_properties
    from rmqstore.format.sysflag import TRANSACTION_COMMIT_TYPE, transaction_value

    text, records, units, _ = nb08_broker
    assert "heartbeat: SUCCESS" in text
    half_at = int(re.search(r"half message: SUCCESS, stored at offset (\d+) on RMQ_SYS_TRANS_HALF_TOPIC/0 "
                            r"\(queue offset 0\), REAL_TOPIC=TxTopic", text).group(1))
    half = records[half_at]
    assert (half.topic, half.queue_id, half.queue_offset, half.body) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0,
                                                                         b"order 42: pay")
    assert string_to_properties(half.properties)["TRAN_MSG"] == "true" and transaction_value(half.sys_flag) == 0
    assert "END_TRANSACTION UNKNOWN sent; TxTopic/0 holds 0 message(s) for consumers" in text
    waited = int(re.search(r"CHECK_TRANSACTION_STATE \(39\) came (\d+) ms after the half message was born "
                           r"\(the check compares its bornTimestamp with the timeout, 300 ms\), oneway: True", text).group(1))
    assert waited >= 300
    # the check names the copy the check service put back at the end of the half queue
    copy_at = int(re.search(r"^  commitLogOffset\s+(\d+)$", text, re.M).group(1))
    copy = records[copy_at]
    assert copy.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and copy.queue_offset == 1 and copy.body == half.body
    assert string_to_properties(copy.properties)["TRANSACTION_CHECK_TIMES"] == "1"
    assert re.search(r"^  tranStateTableOffset\s+1$", text, re.M)
    assert re.search(rf"^  offsetMsgId\s+{create_message_id(copy.store_host, copy_at)}$", text, re.M)
    assert (f"check body: the record at {copy_at} on RMQ_SYS_TRANS_HALF_TOPIC (queue offset 1), body b'order 42: pay', "
            "TRANSACTION_CHECK_TIMES=1") in text
    # the producer's COMMIT: the message under its real topic, pointing back at the checked copy
    (tx_unit,) = units[("TxTopic", 0)]
    committed = records[tx_unit[0]]
    assert transaction_value(committed.sys_flag) == TRANSACTION_COMMIT_TYPE
    assert committed.prepared_transaction_offset == copy_at and committed.body == half.body
    assert (f"TxTopic/0 now: the record at {tx_unit[0]}, sys_flag 0x08 TXN_COMMIT, prepared_transaction_offset "
            f"{copy_at}, body b'order 42: pay'") in text
    assert f"half queue RMQ_SYS_TRANS_HALF_TOPIC/0: [({half_at}, '0'), ({copy_at}, '1')]" in text
    (op_unit,) = units[("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0)]
    assert records[op_unit[0]].body == b"1"  # the copy's half-queue offset is done
    assert f"op queue RMQ_SYS_TRANS_OP_HALF_TOPIC/0: [({op_unit[0]}, '1', 'd')]" in text
    assert "checks after three more rounds: 1" in text


def test_08_broker_delivers_delayed_messages_when_due(nb08_broker):
    from rmqstore.format.properties import string_to_properties

    text, records, units, root = nb08_broker
    assert "delay levels (ms) {1: 1000, 2: 2000, 3: 3000}" in text
    due = {}
    for level in (3, 1):
        m = re.search(rf"level {level}: SUCCESS, stored at (\d+) on SCHEDULE_TOPIC_XXXX/{level - 1}, due at tags code "
                      rf"(\d+) = store time \+ {level * 1000} ms", text)
        offset, tags = int(m.group(1)), int(m.group(2))
        rec = records[offset]
        assert (rec.topic, rec.queue_id) == ("SCHEDULE_TOPIC_XXXX", level - 1)
        assert string_to_properties(rec.properties)["REAL_TOPIC"] == "DelayTopic"
        assert units[("SCHEDULE_TOPIC_XXXX", level - 1)] == [(offset, rec.total_size, tags)]
        assert tags == rec.store_timestamp + level * 1000
        due[level] = (offset, tags)
    assert "DelayTopic/0 right after the sends: 0 message(s)" in text
    delivered = [records[u[0]] for u in units[("DelayTopic", 0)]]
    assert [r.body for r in delivered] == [b"delayed 1", b"delayed 3"]  # level 1 first, though sent second
    for k, rec in enumerate(delivered):
        level = int(string_to_properties(rec.properties)["DELAY"])
        sched, tags = due[level]
        assert rec.store_timestamp >= tags and rec.body == records[sched].body
        assert (f"DelayTopic/0 unit {k}: {rec.body!r} at {rec.physical_offset}, from SCHEDULE_TOPIC_XXXX record {sched}; "
                f"stored {rec.store_timestamp - tags} ms after it was due: True") in text
    assert "schedule service offsets (level -> next queue offset): {1: 1, 3: 1}" in text
    assert "'\"offsetTable\":{1:1,3:1}'" in text


# -- 09: inspecting a real store -----------------------------------------------------------------
BASIC = ROOT / "data" / "rocketmq_basic"


def _basic_manifest() -> dict:
    return json.loads((ROOT / "data" / "rocketmq_basic.manifest.json").read_text(encoding="utf-8"))


def test_09_positions_queues_and_lookups_match_the_manifest():
    text = notebook_text("09_inspecting_a_real_store.ipynb")
    m = _basic_manifest()
    lo, hi = m["minPhyOffset"], m["maxPhyOffset"]
    assert f"commitlog offsets {lo} .. {hi} (manifest: {lo} .. {hi})" in text
    for f in m["positions"][0]["files"]:
        w = f["wrotePosition"]
        assert f"  {f['file']}  wrote {w:>6}  read {w:>6}  full {f['isFull']!s:5}  | RocketMQ wrote {w:>6}  same: True" in text
    queues = [q for q in m["consumeQueues"] if q["maxOffsetInQueue"]]
    for q in queues:
        assert f"{q['queueId']:5d} {q['minOffsetInQueue']:4d} {q['maxOffsetInQueue']:4d}  | {q['maxOffsetInQueue']}" in text
    assert f"queues with messages: ours {len(queues)} | manifest {len(queues)}" in text
    put = m["puts"][5]
    assert f"by msgId : offset {put['wroteOffset']}, {put['topic']}/{put['queueId']} queue offset {put['logicsOffset']}" in text
    assert f"by key 'key-5': offsets [{put['wroteOffset']}]" in text
    assert f"by offset {put['wroteOffset']}: msgId {put['msgId']}, stored {put['storeTimestamp']}, born at {put['bornHost']}" in text
    assert f"by queue offset {put['logicsOffset']} of {put['topic']}/{put['queueId']}: GetMessageResult(status=FOUND, messages=3" in text
    for p in m["puts"]:
        if p["sysFlag"] & 1:
            assert f"offset {p['wroteOffset']}: sys_flag {p['sysFlag']:#x} ['COMPRESSED(ZLIB)']" in text


def test_09_cli_cross_check_and_nothing_written():
    text = notebook_text("09_inspecting_a_real_store.ipynb")
    m = _basic_manifest()
    n_queues = sum(1 for q in m["consumeQueues"] if q["maxOffsetInQueue"])
    n_topics = len({q["topic"] for q in m["consumeQueues"] if q["maxOffsetInQueue"]})
    n = len(m["puts"])  # (no transaction halves here: every message in the commitlog is in a queue)
    assert f"messages    {n} in the commitlog (verify's count), {n} in {n_queues} queue(s) of {n_topics} topic(s)\n" in text
    assert f"msgId          {m['puts'][5]['msgId']}" in text
    walk = m["commitLogWalk(store API)"]
    assert (f"{len(m['positions'][0]['files'])} file(s), {len(m['positions'][0]['files']) * 65536:,} bytes: "
            f"{walk['commitLogWalkMessages']} messages, {walk['commitLogWalkBlanks']} blanks") in text
    assert "result          OK: no damage found\n" in text
    assert text.count("exit code 0") == 3
    assert f"{len(m['puts'])} puts looked up by msgId: {len(m['puts'])} match, 0 differ" in text
    assert f"{len(m['queries'])} key queries: {len(m['queries'])} return RocketMQ's offsets" in text
    assert "files changed, created or removed: []" in text and "nothing was written: True" in text
    # and independently of the notebook's own snapshot: the files are still the bytes RocketMQ wrote
    files = m["afterShutdown"]["files"]
    assert sorted(str(p.relative_to(BASIC)) for p in BASIC.rglob("*") if p.is_file()) == sorted(f["path"] for f in files)
    for f in files:
        assert hashlib.sha256((BASIC / f["path"]).read_bytes()).hexdigest() == f["sha256"], f["path"]
