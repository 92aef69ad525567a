"""The compiled CRC-32 (rmqstore._native._cwalk.crc32) equals zlib's and crcmod's model, and the C
code's record positions equal the layout table's."""

import zlib

from hypothesis import example, given, strategies as st

from conftest import compiled_module
from rmqstore.format import layout
from rmqstore.format.crc import crc32_reference
from rmqstore.format.sysflag import BORNHOST_V6_FLAG


@given(st.binary(max_size=4096), st.integers(0, 2**32 - 1), st.integers(0, 15))
@example(b"", 0, 0)
@example(b"\x00" * 64, 0, 0)
@example(bytes(range(256)) * 4, 0, 0)
@example(b"\xff" * 1000, 0xFFFFFFFF, 3)
def test_crc32_equals_zlib_at_every_length_and_alignment(data, seed, skip):
    cwalk = compiled_module("_cwalk")
    view = memoryview(data)[min(skip, len(data)):]
    assert cwalk.crc32(view) == zlib.crc32(view)
    assert cwalk.crc32(view, seed) == zlib.crc32(view, seed)


@given(st.binary(min_size=1, max_size=2048))
def test_masked_crc_is_rocketmqs_body_crc(body):
    cwalk = compiled_module("_cwalk")
    assert cwalk.crc32(body) & 0x7FFFFFFF == crc32_reference(body)


def test_a_large_buffer_folds_like_zlib():
    cwalk = compiled_module("_cwalk")
    data = bytes(range(251)) * 40_000 + b"tail"  # ~10 MB: the GIL-free branch, every fold
    assert cwalk.crc32(data) == zlib.crc32(data)


def test_c_record_positions_are_the_layout_tables():
    pos = compiled_module("_cwalk").LAYOUT
    fields = {"TOTALSIZE": "total_size", "MAGICCODE": "magic_code", "BODYCRC": "body_crc", "QUEUEID": "queue_id",
              "FLAG": "flag", "QUEUEOFFSET": "queue_offset", "PHYSICALOFFSET": "physical_offset",
              "SYSFLAG": "sys_flag", "BORNTIMESTAMP": "born_timestamp", "BORNHOST": "born_host",
              "STORETIMESTAMP": "store_timestamp", "BODYLENGTH": "body"}  # body: where its length prefix is
    for c_name, name in fields.items():
        assert pos[c_name] == layout.message_field_position(name), c_name
    assert pos["STORETIMESTAMP_V6"] == layout.message_field_position("store_timestamp", BORNHOST_V6_FLAG)
