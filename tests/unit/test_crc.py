"""The fast body CRC (zlib) against its definition (crcmod's crc-32) and RocketMQ's values."""

import zlib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import PUT_FIXTURES, manifest
from rmqstore.format.crc import crc32, crc32_reference


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=4096))
@example(data=b"")
@example(data=b"\x00")
@example(data=b"\xff" * 64)
@example(data=b"123456789")
def test_zlib_crc_equals_crcmod_reference(data):
    assert crc32(data) == crc32_reference(data)
    assert 0 <= crc32(data) <= 0x7FFFFFFF


@given(data=st.binary(max_size=256))
@settings(max_examples=100, deadline=None)
def test_crc_accepts_any_bytes_like(data):
    expected = crc32(data)
    assert crc32(bytearray(data)) == expected
    assert crc32(memoryview(data)) == expected
    assert crc32_reference(bytearray(data)) == expected


def test_known_values():
    assert crc32(b"") == 0  # UtilAll.crc32 of an empty body
    assert crc32_reference(b"") == 0
    # the CRC-32 check value of "123456789" is 0xCBF43926; RocketMQ clears the sign bit
    assert crc32_reference(b"123456789") == 0xCBF43926 & 0x7FFFFFFF
    assert crc32(b"123456789") == 0x4BF43926
    # a value whose raw CRC has the sign bit set really is masked (not a no-op mask)
    raw = zlib.crc32(b"123456789")
    assert raw & 0x80000000 and crc32(b"123456789") == raw - 0x80000000


def _sample_bodies():
    """A handful of bodies (and RocketMQ's bodyCRC) per fixture: shortest, longest, a compressed one."""
    out = []
    for name in PUT_FIXTURES:
        puts = [p for p in manifest(name)["puts"]
                if p["status"] == "PUT_OK" and p["appendStatus"] == "PUT_OK"]
        picks = {min(puts, key=lambda p: p["bodyLen"])["seq"], max(puts, key=lambda p: p["bodyLen"])["seq"],
                 puts[len(puts) // 2]["seq"]}
        picks |= {p["seq"] for p in puts if p["sysFlag"] & 1}  # zlib-compressed bodies
        out += [pytest.param(p["body"], p["bodyCRC"], id=f"{name}-{p['seq']}")
                for p in puts if p["seq"] in picks]
    return out


@pytest.mark.parametrize("body_hex, body_crc", _sample_bodies())
def test_manifest_body_crc(body_hex, body_crc):
    body = bytes.fromhex(body_hex)
    assert crc32(body) == body_crc
    assert crc32_reference(body) == body_crc


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_every_backend_equals_the_definition(data):
    """Whichever fast backend is in use (ISA-L or zlib), both give crcmod's CRC."""
    import rmqstore.format.crc as crc_module

    expected = crc32_reference(data)
    assert zlib.crc32(data) & 0x7FFFFFFF == expected
    assert crc_module.raw_crc32(data) & 0x7FFFFFFF == expected
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert isal_zlib.crc32(data) & 0x7FFFFFFF == expected
