"""Facts of RocketMQ's on-disk layouts, checked against the layout tables (docs/formats.md)."""

import pytest

from rmqstore.format import layout
from rmqstore.format.layout import (
    BLANK_MAGIC_CODE,
    BLANK_RECORD,
    CHECKPOINT,
    CONSUME_QUEUE_UNIT,
    INDEX_ENTRY,
    INDEX_HEADER,
    INDEX_SLOT,
    MESSAGE_FIELDS,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POSITION,
    QUEUE_OFFSET_POSITION,
    SYSFLAG_POSITION,
    layout_markdown,
    message_field_spans,
    message_header_struct,
    message_length,
    store_timestamp_position,
)
from rmqstore.format.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

V4 = 0
BORN6 = BORNHOST_V6_FLAG
STORE6 = STOREHOSTADDRESS_V6_FLAG
BOTH6 = BORN6 | STORE6


def test_magic_codes():
    assert MESSAGE_MAGIC_CODE == -626843481 and MESSAGE_MAGIC_CODE & 0xFFFFFFFF == 0xDAA320A7
    assert MESSAGE_MAGIC_CODE_V2 == -626843477 and MESSAGE_MAGIC_CODE_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert BLANK_MAGIC_CODE == -875286124 and BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194


@pytest.mark.parametrize("body, topic, props", [(0, 0, 0), (1, 1, 1), (100, 127, 32767), (64000, 6, 120)])
def test_message_length_ipv4(body, topic, props):
    # CommitLog#calMsgLength: 91 fixed bytes with two IPv4 hosts
    assert message_length(V4, body, topic, props) == 91 + body + topic + props


@pytest.mark.parametrize("sys_flag, extra", [(V4, 0), (BORN6, 12), (STORE6, 12), (BOTH6, 24)])
def test_message_length_ipv6_hosts(sys_flag, extra):
    assert message_length(sys_flag, 10, 5, 7) == 91 + 22 + extra
    # other sysFlag bits do not change the layout
    assert message_length(sys_flag | 0x301 | 0xC | 0x80, 10, 5, 7) == 91 + 22 + extra


def test_message_length_v2_topic_prefix():
    assert message_length(V4, 10, 300, 7, topic_length_size=2) == 92 + 10 + 300 + 7


def test_fixed_message_positions():
    assert QUEUE_OFFSET_POSITION == 20
    assert PHYSICAL_OFFSET_POSITION == 28
    assert SYSFLAG_POSITION == 36
    assert store_timestamp_position(V4) == 56
    assert store_timestamp_position(STORE6) == 56  # only the born host comes before it
    assert store_timestamp_position(BORN6) == 68
    assert store_timestamp_position(BOTH6) == 68


@pytest.mark.parametrize("born_v6, store_v6, size", [
    (False, False, 88), (True, False, 100), (False, True, 100), (True, True, 112)])
def test_header_struct_ends_at_body(born_v6, store_v6, size):
    # the fixed prefix runs up to and including the body length (body bytes start at 88 for IPv4)
    assert message_header_struct(born_v6, store_v6).size == size


def test_field_spans_v4_offsets():
    spans = {name: (start, end) for name, start, end, _ in message_field_spans(V4, 3, 4, 5)}
    assert spans["total_size"] == (0, 4)
    assert spans["magic_code"] == (4, 8)
    assert spans["body_crc"] == (8, 12)
    assert spans["queue_id"] == (12, 16)
    assert spans["flag"] == (16, 20)
    assert spans["queue_offset"] == (20, 28)
    assert spans["physical_offset"] == (28, 36)
    assert spans["sys_flag"] == (36, 40)
    assert spans["born_timestamp"] == (40, 48)
    assert spans["born_host"] == (48, 56)
    assert spans["store_timestamp"] == (56, 64)
    assert spans["store_host"] == (64, 72)
    assert spans["reconsume_times"] == (72, 76)
    assert spans["prepared_transaction_offset"] == (76, 84)
    assert spans["body_length"] == (84, 88)
    assert spans["body"] == (88, 91)
    assert spans["topic_length"] == (91, 92)
    assert spans["topic"] == (92, 96)
    assert spans["properties_length"] == (96, 98)
    assert spans["properties"] == (98, 103)
    assert message_length(V4, 3, 4, 5) == 103


def test_field_spans_ipv6_and_base():
    spans = {name: (start, end) for name, start, end, _ in message_field_spans(BOTH6, 0, 1, 0, base=1000)}
    assert spans["born_host"] == (1048, 1068)
    assert spans["store_timestamp"] == (1068, 1076)
    assert spans["store_host"] == (1076, 1096)
    assert spans["body_length"] == (1108, 1112)
    assert spans["topic"] == (1113, 1114)
    assert spans["properties"] == (1116, 1116)
    assert message_length(BOTH6, 0, 1, 0) == 116


@pytest.mark.parametrize("fixed, size", [
    (BLANK_RECORD, 8), (CONSUME_QUEUE_UNIT, 20), (INDEX_HEADER, 40), (INDEX_SLOT, 4),
    (INDEX_ENTRY, 20), (CHECKPOINT, 24)])
def test_fixed_layout_sizes(fixed, size):
    assert fixed.size == size
    assert fixed.struct.size == size
    assert sum(f.fixed_size for f in fixed.fields) == size
    spans = fixed.spans()
    assert spans[0][1] == 0 and spans[-1][2] == size
    assert all(a[2] == b[1] for a, b in zip(spans, spans[1:]))


def test_fixed_layout_offsets():
    assert layout.END_FILE_MIN_BLANK_LENGTH == BLANK_RECORD.size == 8
    assert CONSUME_QUEUE_UNIT.offsets == {"commit_log_offset": 0, "size": 8, "tags_code": 12}
    assert INDEX_HEADER.offsets == {"begin_timestamp": 0, "end_timestamp": 8, "begin_phy_offset": 16,
                                    "end_phy_offset": 24, "hash_slot_count": 32, "index_count": 36}
    assert INDEX_ENTRY.offsets == {"key_hash": 0, "phy_offset": 4, "time_diff": 12, "prev_index": 16}
    assert CHECKPOINT.offsets == {"physic_msg_timestamp": 0, "logics_msg_timestamp": 8,
                                  "index_msg_timestamp": 16}
    assert layout.CHECKPOINT_FILE_SIZE == layout.OS_PAGE_SIZE == 4096


def test_fixed_layout_pack_is_big_endian():
    raw = CONSUME_QUEUE_UNIT.pack(0x0102030405060708, 0x0A0B0C0D, -1)
    assert raw == bytes.fromhex("0102030405060708" "0a0b0c0d" "ffffffffffffffff")
    unit = CONSUME_QUEUE_UNIT.unpack_from(b"xx" + raw, 2)
    assert unit == (0x0102030405060708, 0x0A0B0C0D, -1)
    assert unit.tags_code == -1
    assert BLANK_RECORD.pack(8, BLANK_MAGIC_CODE) == bytes.fromhex("00000008cbd43194")


def test_message_fields_order():
    assert [f.java for f in MESSAGE_FIELDS] == [
        "TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "FLAG", "QUEUEOFFSET", "PHYSICALOFFSET",
        "SYSFLAG", "BORNTIMESTAMP", "BORNHOST", "STORETIMESTAMP", "STOREHOSTADDRESS",
        "RECONSUMETIMES", "PREPARED TRANSACTION OFFSET", "BODY", "TOPIC", "PROPERTIES"]


@pytest.mark.parametrize("fixed", [None, BLANK_RECORD, CONSUME_QUEUE_UNIT, INDEX_HEADER, INDEX_SLOT,
                                   INDEX_ENTRY, CHECKPOINT])
def test_layout_markdown_lists_every_field(fixed):
    md = layout_markdown(fixed)
    lines = md.splitlines()
    fields = MESSAGE_FIELDS if fixed is None else fixed.fields
    assert lines[0].startswith("| field |")
    assert len(lines) == 2 + len(fields)
    for line, f in zip(lines[2:], fields):
        assert line.startswith(f"| `{f.name}` | {f.java} |")


def test_layout_markdown_sizes_of_message():
    rows = {line.split("|")[1].strip(" `"): line.split("|")[3].strip()
            for line in layout_markdown().splitlines()[2:]}
    assert rows["total_size"] == "4"
    assert rows["queue_offset"] == "8"
    assert rows["born_host"] == "8 / 20"
    assert rows["body"] == "4 + n"
    assert rows["topic"] == "1 (V2: 2) + n"
    assert rows["properties"] == "2 + n"


def test_field_structs_come_from_the_tables():
    """Readers that patch or read one field take its struct from the table, not a format of their own."""
    from rmqstore.format.layout import RECORD_HEAD, message_field_position, message_fields_struct

    assert RECORD_HEAD.struct.format == BLANK_RECORD.struct.format == ">ii"
    assert [f.name for f in RECORD_HEAD.fields] == ["total_size", "magic_code"]
    assert CONSUME_QUEUE_UNIT.struct.format == ">qiq"
    assert message_fields_struct("queue_offset", "physical_offset").format == ">qq"
    assert message_fields_struct("sys_flag").format == ">i"
    assert [message_field_position(n) for n in ("body_crc", "queue_id", "flag", "queue_offset", "born_timestamp")] \
        == [8, 12, 16, 20, 40]
    assert message_field_position("store_timestamp", 0x10) == 68  # after an IPv6 born host
    assert [INDEX_HEADER.field_struct(f.name).format for f in INDEX_HEADER.fields] == [">q"] * 4 + [">i"] * 2
    for names in [("queue_id", "sys_flag"), ("born_host", "store_timestamp"), ("nope",)]:
        with pytest.raises((ValueError, KeyError)):
            message_fields_struct(*names)
