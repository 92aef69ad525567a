"""A raw pull (``get_message(..., raw=True)``, what the broker's PULL_MESSAGE answers with): the records as
stored, undecoded, and otherwise the same answer as the decoding pull -- on RocketMQ's own stores and on
damaged ones."""

from __future__ import annotations

import shutil
import struct
from dataclasses import replace

import pytest
from conftest import FIXTURES, PUT_FIXTURES

from rmqstore import open_store
from rmqstore.common.config import StoreConfig
from rmqstore.engine.lookup import read_message_bytes
from rmqstore.engine.reading import GetMessageStatus, TagFilter, get_message
from rmqstore.format.record import decode_record

from test_read_path import TINY, make_store, put


def same_answer(store, topic: str, queue_id: int, offset: int, max_count: int, message_filter=None, **kw):
    """The raw pull and the decoding one from the same place: equal but for how the records come; the raw
    pull's buffers are the stored bytes of the decoding pull's records."""
    decoded = get_message(store, "g", topic, queue_id, offset, max_count, message_filter, **kw)
    raw = get_message(store, "g", topic, queue_id, offset, max_count, message_filter, raw=True, **kw)
    assert (raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset, raw.units, raw.buffer_total_size,
            raw.message_count) == (decoded.status, decoded.next_begin_offset, decoded.min_offset, decoded.max_offset,
                                   decoded.units, decoded.buffer_total_size, decoded.message_count)
    assert raw.messages == [] and len(raw.buffers) == len(decoded.messages)
    for data, rec, unit in zip(raw.buffers, decoded.messages, raw.units, strict=True):
        assert data == read_message_bytes(store, unit.commit_log_offset, unit.size)
        assert decode_record(data, 0) == rec
    return raw


@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_every_queue_of_rocketmqs_stores_pulls_the_same_raw(name):
    store = open_store(FIXTURES / name / "store")
    try:
        pulled = 0
        for (topic, queue_id), cq in sorted(store.consume_queue_table.items()):
            offset = cq.get_min_offset_in_queue()
            while True:
                r = same_answer(store, topic, queue_id, offset, 7)
                pulled += r.message_count
                if r.next_begin_offset == offset:
                    break
                offset = r.next_begin_offset
        assert pulled > 0
    finally:
        store.close()


def test_bad_units_are_skipped_as_the_decoding_pull_skips_them(tmp_path):
    s = make_store(tmp_path / "s")
    try:
        offsets = [put(s, body=bytes([65 + i]) * 300, TAGS="AB"[i % 2]).wrote_offset for i in range(8)]
        assert s.wait_dispatched()
    finally:
        s.shutdown()
    copy = tmp_path / "copy"
    shutil.copytree(s.root, copy)
    seg = TINY["mapped_file_size_commit_log"]
    path = copy / "commitlog" / f"{offsets[2] - offsets[2] % seg:020d}"
    data = bytearray(path.read_bytes())
    data[offsets[2] % seg + 90] ^= 0xFF  # a body byte of message 2: its CRC no longer holds
    path.write_bytes(bytes(data))
    cq_path = copy / "consumequeue" / "T" / "0" / f"{0:020d}"
    cq = bytearray(cq_path.read_bytes())
    struct.pack_into(">i", cq, 4 * 20 + 8, 77)  # unit 4's size is not its record's
    struct.pack_into(">q", cq, 5 * 20, offsets[5] + 4)  # unit 5 points inside its record
    cq_path.write_bytes(bytes(cq))

    ro = open_store(copy, config=replace(StoreConfig(**TINY), check_crc_on_recover=False))
    try:
        r = same_answer(ro, "T", 0, 0, 100)
        assert [u.queue_offset for u in r.units] == [0, 1, 2, 3, 6, 7]
        # a pull that checks CRCs, or a filter that reads the record, decodes (and says so by its messages)
        crc = get_message(ro, "g", "T", 0, 0, 100, raw=True, check_crc=True)
        assert [u.queue_offset for u in crc.units] == [0, 1, 3, 6, 7] and crc.buffers == []
        exact = get_message(ro, "g", "T", 0, 0, 100, TagFilter("A", exact=True), raw=True)
        assert [m.physical_offset for m in exact.messages] == [offsets[0], offsets[2], offsets[6]]
        assert exact.buffers == []
        same_answer(ro, "T", 0, 0, 100, TagFilter("B"))
    finally:
        ro.close()


def test_statuses_without_records_are_the_same(tmp_path):
    s = make_store(tmp_path / "s")
    try:
        for i in range(3):
            put(s, body=b"m%d" % i)
        assert s.wait_dispatched()
        for offset in (0, 2, 3, 9):
            same_answer(s, "T", 0, offset, 32)
        assert same_answer(s, "T", 0, 3, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        assert same_answer(s, "Nope", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        assert same_answer(s, "T", 0, 0, 32, TagFilter("Nope")).status is GetMessageStatus.NO_MATCHED_MESSAGE
    finally:
        s.shutdown()
