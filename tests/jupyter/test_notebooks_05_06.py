"""Notebooks 05 (flushing) and 06 (consume queues and the index) print what the engine says.

Each check recomputes, with the engine, what the notebook derived by hand (a consume-queue
unit cut from raw bytes, a key lookup walked slot by slot, a msgId split into host and
offset) and looks for the exact line in the executed notebook's output.  Flushing is
timing-dependent, so notebook 05 is checked for its invariants and structure, not speeds.
"""

from __future__ import annotations

import ast
import re

import pytest

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from conftest import NOTEBOOKS_DIR, notebook_text  # noqa: E402

from rmqstore import open_store  # noqa: E402
from rmqstore.engine.index import index_key_hash  # noqa: E402
from rmqstore.format.layout import CONSUME_QUEUE_UNIT  # noqa: E402
from rmqstore.format.properties import java_string_hash  # noqa: E402
from rmqstore.engine.reading import TagFilter  # noqa: E402
from rmqstore.format.record import create_message_id  # noqa: E402

SAMPLE = NOTEBOOKS_DIR.parent / "data" / "sample_store"
NB05 = "05_flushing.ipynb"
NB06 = "06_consume_queues_and_index.ipynb"


@pytest.fixture(scope="module")
def sample():
    store = open_store(SAMPLE)
    yield store
    store.close()


# -- 06: consume queues and the index ------------------------------------------------------------

def test_06_hand_decoded_units_are_the_engines(sample):
    text = notebook_text(NB06)
    units = sample.get_message("g", "PaymentTopic", 0, 0, 5).units
    assert len(units) == 5
    for u in units:
        raw = CONSUME_QUEUE_UNIT.pack(u.commit_log_offset, u.size, u.tags_code).hex()
        assert (f"PaymentTopic q0 unit {u.queue_offset}: bytes {raw}  -> offset {u.commit_log_offset}, "
                f"size {u.size}, tags code {u.tags_code}") in text
        rec = sample.look_message_by_offset(u.commit_log_offset)
        assert (f"unit {u.queue_offset} -> {u.commit_log_offset - u.commit_log_offset % 65536:020d} + "
                f"{u.commit_log_offset % 65536:5d}: PaymentTopic q0 queue_offset {u.queue_offset}, "
                f"physical_offset {u.commit_log_offset}, total_size {rec.total_size}") in text
    assert text.count("record agrees with the unit: True") == 5
    assert "hand-decoded units == engine units: True" in text
    assert (f"PaymentTopic q0: min offset 0, max offset {sample.get_max_offset_in_queue('PaymentTopic', 0)}"
            in text)


def test_06_unit_files_and_pulls(sample):
    text = notebook_text(NB06)
    cq = sample.consume_queue_table[("AuditTopic", 0)]
    for n in (0, 299, 300, 350):
        unit = tuple(cq.get_units(n, 1)[0][1:])
        name = f"{n * 20 - n * 20 % 6000:020d}"
        assert f"unit {n:3d}: logical byte {n * 20:5d} -> file {name} position {n * 20 % 6000:4d}: {unit}  engine: True" \
            in text
    assert "AuditTopic q0 files: ['00000000000000000000', '00000000000000006000']" in text
    top = sample.get_max_offset_in_queue("AuditTopic", 0)
    assert f"the pull at {top} says OFFSET_OVERFLOW_ONE (next_begin_offset {top}, max_offset {top})" in text
    assert "every message of the queue read once: True" in text
    res = sample.get_message("g", "AuditTopic", 0, 290, 32)
    assert res.message_count == 10 and res.next_begin_offset == 300  # a pull stops at the end of a file
    assert "offset  290: FOUND                 10 messages, next_begin_offset 300" in text
    assert f"offset 1000: OFFSET_OVERFLOW_BADLY  0 messages, next_begin_offset {top}" in text
    assert "unknown queue: NO_MATCHED_LOGIC_QUEUE" in text


def test_06_tag_filter(sample):
    text = notebook_text(NB06)
    res = sample.get_message("g", "AuditTopic", 0, 0, 8, TagFilter("Tag1 || Tag3"))
    assert res.message_count == 8
    assert all(u.tags_code in (java_string_hash("Tag1"), java_string_hash("Tag3")) for u in res.units)
    assert f"units looked at: {res.next_begin_offset}, messages returned: 8" in text
    assert f"offsets returned:           {[m.physical_offset for m in res.messages]}" in text
    assert "filter by hand == get_message: True" in text
    assert "TAGS of the returned messages: ['Tag1', 'Tag3']" in text


def test_06_key_lookup_by_hand_equals_query_message(sample):
    text = notebook_text(NB06)
    key_hash = index_key_hash("OrderTopic#order-7")
    assert f"key hash {key_hash}, slot {key_hash} % 500 = {key_hash % 500}," in text
    assert "== rmqstore's java_string_hash: True" in text
    offsets = sample.query_message("OrderTopic", "order-7", 64, 0, 2**63 - 1).phy_offsets
    assert len(offsets) == 11
    assert f"by hand: {offsets}" in text
    assert "hand walk == query_message: True" in text
    assert "every record found carries the key: True" in text
    # the chain walk printed every match, and each match is an index entry for that key
    entries = {(phy, h) for f in sample.index_service.index_files for _, h, phy, _, _ in f.entries()}
    matches = [int(m) for m in re.findall(r"key_hash +\d+ offset +(\d+) time_diff \d+ prev +\d+  MATCH", text)]
    assert sorted(matches) == offsets and all((m, key_hash) in entries for m in matches)
    first = min(sample.index_service.index_files, key=lambda f: f.file_name)
    window = (first.begin_timestamp + 1000, first.begin_timestamp + 2000)
    in_window = sample.query_message("OrderTopic", "order-7", 64, *window).phy_offsets
    assert in_window and in_window != offsets
    assert f"window {window}: by hand {in_window}" in text
    assert "hand walk == query_message in the window: True" in text
    used = sum(f.index_count - 1 for f in sample.index_service.index_files)
    assert f"entries reached by walking every chain: {used} == entries used: {used}" in text
    assert "inspector lookup offsets == query_message: True" in text


def test_06_raw_slot_and_entry(sample):
    text = notebook_text(NB06)
    slot = index_key_hash("OrderTopic#order-7") % 500
    newest = max(sample.index_service.index_files, key=lambda f: f.file_name)
    # the slot names the newest entry whose hash falls in it
    head, h, phy, diff, prev = max(e for e in newest.entries() if e[1] % 500 == slot)
    assert (f"{newest.file_name}: slot {slot} at byte {40 + slot * 4}: {head.to_bytes(4, 'big').hex(' ')} "
            f"-> entry {head}") in text
    assert f"entry {head} at byte {40 + 500 * 4 + head * 20}: " in text
    for name, value in (("key_hash", h), ("phy_offset", phy), ("time_diff", diff), ("prev_index", prev)):
        assert re.search(rf"  {name} +bytes +\d+\.\.\d+ += {value}\n", text), name


def test_06_msg_id_lookup(sample):
    text = notebook_text(NB06)
    offsets = sample.query_message("OrderTopic", "order-7", 64, 0, 2**63 - 1).phy_offsets
    rec = sample.look_message_by_offset(offsets[3])
    msg_id = create_message_id(rec.store_host, rec.physical_offset)
    assert sample.view_message_by_id(msg_id) == rec
    assert f"msgId {msg_id} = " in text
    assert (f"store host {rec.store_host}, commitlog offset {rec.physical_offset} -> file "
            f"{rec.physical_offset - rec.physical_offset % 65536:020d} + {rec.physical_offset % 65536}") in text
    assert f"the record there: {rec.total_size} bytes; view_message_by_id finds offset {rec.physical_offset}, " \
           f"the same record: True" in text
    assert "the same offset named by another host: None" in text


# -- 05: flushing ----------------------------------------------------------------------------------

def test_05_player_summaries_keep_each_modes_promise():
    from rmqstore.widgets.put_path_player import demo_messages

    text = notebook_text(NB05)
    n = len(demo_messages())
    assert f"SYNC_FLUSH: {n} puts, flush.request ['group_commit']" in text
    assert f"flushes by ['GroupCommitService'], commits none, group-commit swaps {n} with [1] request(s) each" in text
    assert f"puts answered after their bytes were flushed: {n} of {n}" in text  # the sync player
    assert f"ASYNC_FLUSH: {n} puts, flush.request ['async_wakeup']" in text
    assert f"TRANSIENT_STORE_POOL: {n} puts, flush.request ['commit_wakeup']" in text
    assert "flushes by ['FlushRealTimeService'], commits none, group-commit swaps 0" in text
    assert "flushes by ['FlushRealTimeService'], commits yes, group-commit swaps 0" in text
    answered = [int(m) for m in re.findall(rf"puts answered after their bytes were flushed: (\d+) of {n}\n", text)]
    assert len(answered) == 3 and answered[0] == n and all(0 <= a <= n for a in answered)
    # after settling every mode has flushed (and, with the pool, committed) all it wrote
    finals = re.findall(r"final positions \(file, wrote, committed, flushed\): (\[.*\])", text)
    assert len(finals) == 3
    for mode, line in zip(("sync", "async", "pool"), finals):
        for _, wrote, committed, flushed in ast.literal_eval(line):
            assert flushed == wrote and committed == (wrote if mode == "pool" else 0), (mode, line)


def test_05_sync_and_async_position_invariants():
    text = notebook_text(NB05)
    assert "200 sync puts, all PUT_OK and flushed >= end of record for every sync put: True" in text
    served, flushes = map(int, re.search(r"group commit: (\d+) requests served by (\d+) flushes", text).groups())
    assert served == 200 and 1 <= flushes <= 200
    assert "wrote > flushed straight after the puts: True" in text
    assert "first pass caught up: True" in text
    assert "fewer than 4 pages, so the flush waits: True" in text
    assert "4+ pages caught up: True" in text
    assert "the thorough pass flushed the last page: True" in text
    # 8 puts of 500-byte records, then 8 more, then 40: wrote moves by exactly those records
    assert "straight after 8 puts:                       wrote  4,000  flushed      0" in text
    assert "8 more puts, 1.2 s later:                    wrote  8,000  flushed  4,000  pages by the rule 1" in text
    assert "40 more puts (4+ pages):                     wrote 28,000" in text


def test_05_measured_table_and_group_sizes():
    text = notebook_text(NB05)
    rows = re.findall(r"^(SYNC_FLUSH|ASYNC_FLUSH|ASYNC \+ pool) +(\d+) +(\d+) +(\d+) +([\d.]+) +([\d.]+) +(\d+) / (\d+)"
                      r" +(\S+) +(\S+)$", text, re.M)
    assert [(r[0], int(r[1])) for r in rows] == [(m, t) for m in ("SYNC_FLUSH", "ASYNC_FLUSH", "ASYNC + pool")
                                                 for t in (1, 4)]
    for mode, threads, puts, per_s, median, p99, flushed, total, commits, per_commit in rows:
        assert int(puts) == int(total) == 400 and int(per_s) > 0 and 0 < float(median) <= float(p99)
        if mode == "SYNC_FLUSH":
            assert int(flushed) == 400 and 1 <= int(commits) <= 400
            assert float(per_commit) == pytest.approx(400 / int(commits), abs=0.01)
        else:
            assert commits == per_commit == "-"
    assert "every put PUT_OK: True" in text
    assert "every sync put answered flushed: True" in text
    assert "sync group commits serve at least one request each: True" in text
    groups = int(re.search(r"(\d+) group commits; requests in all groups: 400 == puts: 400", text).group(1))
    sizes = ast.literal_eval(re.search(r"group sizes: (\{.*\})", text).group(1))
    assert sum(sizes.values()) == groups and sum(k * v for k, v in sizes.items()) == 400
    assert min(sizes) >= 1 and max(sizes) <= 8
    assert "no group larger than the 8 writers (each waits for its own request): True" in text
    assert "every group has >= 1 request: True" in text
    assert "temporary stores removed" in text
