"""Notebooks 05 (flushing) and 06 (consume queues and the index) print what the engine says.

Each check recomputes, with the engine, what the notebook derived by hand (a consume-queue
unit cut from raw bytes, a key lookup walked slot by slot, a msgId split into host and
offset) and looks for the exact line in the executed notebook's output.  Flushing is
timing-dependent, so notebook 05 is checked for its invariants and structure, not speeds.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from conftest import NOTEBOOKS_DIR, notebook_text  # noqa: E402

from rmqstore import open_store  # noqa: E402
from rmqstore.index import index_key_hash  # noqa: E402
from rmqstore.layout import CONSUME_QUEUE_UNIT  # noqa: E402
from rmqstore.properties import java_string_hash  # noqa: E402
from rmqstore.reading import TagFilter  # noqa: E402
from rmqstore.record import create_message_id  # noqa: E402

SAMPLE = NOTEBOOKS_DIR.parent / "data" / "sample_store"
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
