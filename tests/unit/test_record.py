"""The commitlog record codec against RocketMQ's own stores, and by property and fuzz tests."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import PUT_FIXTURES, commitlog_files, commitlog_records, manifest, walk_file
from rmqstore.format.crc import crc32
from rmqstore.common.errors import CorruptRecordError, LayoutError, RmqStoreError
from rmqstore.format.layout import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POSITION,
    QUEUE_OFFSET_POSITION,
    SYSFLAG_POSITION,
    message_length,
    store_timestamp_position,
)
from rmqstore.format.properties import properties_to_string
from rmqstore.format.record import (
    Address,
    BlankRecord,
    MessageRecord,
    create_message_id,
    decode_message,
    decode_message_id,
    decode_record,
    encode_message,
    record_field_spans,
)
from rmqstore.format.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

#: (fixture, store folder, where its manifest keeps the harness-side commitlog scan)
STORES = [(n, "store", "afterShutdown") for n in PUT_FIXTURES] + [
    ("crash", "store", "beforeRecovery"), ("crash", "recovered_store", "afterRecoveryAndShutdown")]
STORE_IDS = [f"{n}/{s}" for n, s, _ in STORES]

INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
V6_BITS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def _ok_puts(name):
    return [p for p in manifest(name)["puts"] if p["status"] == "PUT_OK" and p["appendStatus"] == "PUT_OK"]


def _record_bytes(name, store, phy):
    for base, data in commitlog_files(name, store):
        if base <= phy < base + len(data):
            return data, phy - base
    raise KeyError(phy)


def _encode_again(rec: MessageRecord) -> bytes:
    return encode_message(
        queue_id=rec.queue_id, flag=rec.flag, queue_offset=rec.queue_offset,
        physical_offset=rec.physical_offset, sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
        born_host=rec.born_host, store_timestamp=rec.store_timestamp, store_host=rec.store_host,
        reconsume_times=rec.reconsume_times, prepared_transaction_offset=rec.prepared_transaction_offset,
        body=rec.body, topic=rec.topic, properties=rec.properties, body_crc=rec.body_crc,
        magic_code=rec.magic_code)


# -- (1) every put of RocketMQ's stores decodes to what the manifest says -----------------------

@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_manifest_puts_decode(name):
    puts = _ok_puts(name)
    assert len(puts) == manifest(name)["putsVerifiedAgainstStoredRecords"] > 0
    for p in puts:
        data, pos = _record_bytes(name, "store", p["wroteOffset"])
        rec = decode_record(data, pos, check_crc=True)
        assert isinstance(rec, MessageRecord), p["seq"]
        got = dict(
            topic=rec.topic, queueId=rec.queue_id, flag=rec.flag, sysFlag=rec.sys_flag, bodyCRC=rec.body_crc,
            body=rec.body.hex(), bodyLen=len(rec.body), properties=rec.properties,
            bornTimestamp=rec.born_timestamp, storeTimestamp=rec.store_timestamp,
            bornHost=str(rec.born_host), bornHostBytes=rec.born_host.packed.hex(),
            storeHost=str(rec.store_host), storeHostBytes=rec.store_host.packed.hex(),
            reconsumeTimes=rec.reconsume_times, preparedTransactionOffset=rec.prepared_transaction_offset,
            logicsOffset=rec.queue_offset, wroteBytes=rec.total_size, wroteOffset=rec.physical_offset,
            msgId=create_message_id(rec.store_host, rec.physical_offset))
        want = {k: p[k] for k in got}
        if want["properties"] is None:
            want["properties"] = ""
        assert got == want, f"{name} seq {p['seq']}"
        assert rec.magic_code == MESSAGE_MAGIC_CODE
        assert decode_message(data, pos, check_crc=True) == rec


@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_end_of_file_puts_point_at_a_whole_file_blank(name):
    # a message larger than a file: PUT_OK / END_OF_FILE, the new file is one blank (boundary seq 12)
    size = manifest(name)["config"]["mappedFileSizeCommitLog"]
    for p in manifest(name)["puts"]:
        if p["status"] == "PUT_OK" and p["appendStatus"] == "END_OF_FILE":
            data, pos = _record_bytes(name, "store", p["wroteOffset"])
            assert decode_record(data, pos) == (p["wroteBytes"], BLANK_MAGIC_CODE) == (size - pos, BLANK_MAGIC_CODE)
            with pytest.raises(CorruptRecordError):
                decode_message(data, pos)


def test_store_written_records_of_txn_delay():
    # records the ScheduleMessageService wrote (delivery of delayed messages): not in 'puts'
    extra = manifest("txn_delay")["recordsNotWrittenByAnyPut"]
    assert extra
    for r in extra:
        data, pos = _record_bytes("txn_delay", "store", r["commitLogOffset"])
        rec = decode_message(data, pos, check_crc=True)
        assert (rec.topic, rec.queue_id, rec.queue_offset, rec.total_size, rec.store_timestamp,
                rec.properties, rec.body.hex(), str(rec.born_host)) == \
            (r["topic"], r["queueId"], r["queueOffset"], r["storeSize"], r["storeTimestamp"],
             r["propertiesRaw"], r["body"], r["bornHost"])
        assert create_message_id(rec.store_host, rec.physical_offset) == r["msgId"]


# -- (2) re-encoding gives the stored bytes -----------------------------------------------------

@pytest.mark.parametrize("name, store", [(n, s) for n, s, _ in STORES], ids=STORE_IDS)
def test_reencode_every_record_exactly(name, store):
    files = dict(commitlog_files(name, store))
    messages = 0
    for phy, rec in commitlog_records(name, store):
        if isinstance(rec, BlankRecord):
            continue
        base = phy - phy % len(files[min(files)])
        raw = files[base][phy - base:phy - base + rec.total_size]
        assert rec.physical_offset == phy
        assert _encode_again(rec) == raw, phy
        # and with the CRC left to the encoder
        assert encode_message(**{**_encode_kwargs(rec), "body_crc": None}) == raw, phy
        messages += 1
    assert messages > 0


def _encode_kwargs(rec):
    kw = rec._asdict()
    del kw["total_size"]
    return kw


# -- (3) blank records reach the end of their file ------------------------------------------------

@pytest.mark.parametrize("name, store, scan_key", STORES, ids=STORE_IDS)
def test_blanks_reach_end_of_file(name, store, scan_key):
    files = commitlog_files(name, store)
    per_file = [list(walk_file(data, base)) for base, data in files]
    for i, ((base, data), recs) in enumerate(zip(files, per_file)):
        blanks = [(phy, r) for phy, r in recs if isinstance(r, BlankRecord)]
        assert len(blanks) <= 1 and all(isinstance(r, MessageRecord) for _, r in recs[:len(recs) - len(blanks)])
        if blanks:
            phy, blank = blanks[0]
            assert recs[-1][1] is blank
            assert blank.magic_code == BLANK_MAGIC_CODE
            assert phy - base + blank.total_size == len(data), f"file {base}"
        if any(per_file[i + 1:]):  # a file that is followed by data was closed with a blank
            assert blanks, f"file {base} is followed by data but has no blank"
    assert sum(isinstance(r, BlankRecord) for recs in per_file for _, r in recs) > 0 or name == "txn_delay"


@pytest.mark.parametrize("name, store, scan_key", STORES, ids=STORE_IDS)
def test_walk_agrees_with_harness_scan(name, store, scan_key):
    scan = manifest(name)[scan_key]["commitLogScan(harness-side)"]
    files = commitlog_files(name, store)
    assert [f"{base:020d}" for base, _ in files] == [s["file"] for s in scan]
    for (base, data), s in zip(files, scan):
        recs = list(walk_file(data, base))
        msgs = [(phy - base, r.total_size) for phy, r in recs if isinstance(r, MessageRecord)]
        assert msgs == [tuple(x) for x in s["recordList[pos,totalSize]"]]
        assert len(msgs) == s["records"] and len(data) == s["size"]
        if "blank" in s:
            phy, blank = recs[-1]
            assert isinstance(blank, BlankRecord)
            assert (phy - base, blank.total_size) == (s["blank"]["pos"], s["blank"]["declaredSize"])
            tail = data[phy - base + 8:]
            assert sum(b != 0 for b in tail) == s["blank"]["tailNonZeroBytes"]  # flush_tsp: stale bytes
        else:
            end = int(re.fullmatch(r"zero@(\d+).*", s["end"]).group(1))
            assert sum(r.total_size for _, r in recs) == end
            assert not any(data[end:])


# -- (4) round-trip property ----------------------------------------------------------------------

def _fit(text: str, limit: int) -> str:
    while len(text.encode("utf-8")) > limit:
        text = text[:-1]
    return text


_ipv4 = st.binary(min_size=4, max_size=4)
_ipv6 = st.binary(min_size=16, max_size=16)
_hosts = st.builds(Address, st.one_of(_ipv4, _ipv6), INT32)
_prop_key = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1,
                    max_size=10)
_properties = st.one_of(
    st.text(max_size=200),
    st.dictionaries(_prop_key, _prop_key, max_size=8).map(properties_to_string))


@st.composite
def messages(draw):
    magic = draw(st.sampled_from([MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2]))
    if magic == MESSAGE_MAGIC_CODE:
        topic = _fit(draw(st.text(max_size=130)), 127)
    else:
        topic = _fit(draw(st.text(max_size=400)), 32767)
    return dict(
        queue_id=draw(INT32), flag=draw(INT32), queue_offset=draw(INT64), physical_offset=draw(INT64),
        sys_flag=draw(INT32), born_timestamp=draw(INT64), born_host=draw(_hosts),
        store_timestamp=draw(INT64), store_host=draw(_hosts), reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64), body=draw(st.binary(max_size=1024)), topic=topic,
        properties=draw(_properties), magic_code=magic)


def _fields(**overrides):
    base = dict(queue_id=3, flag=1, queue_offset=42, physical_offset=65536, sys_flag=0,
                born_timestamp=1700000000000, born_host=Address(bytes([192, 0, 2, 2]), 40001),
                store_timestamp=1795319432538, store_host=Address(bytes([198, 51, 100, 7]), 10911),
                reconsume_times=0, prepared_transaction_offset=0, body=b"hello", topic="TopicA",
                properties="KEYS\x01k\x02TAGS\x01TagA", magic_code=MESSAGE_MAGIC_CODE)
    base.update(overrides)
    return base


_V6_A = Address(bytes.fromhex("20010db8000000000000000000000001"), 40001)
_V6_B = Address(bytes.fromhex("fe800000000000000000000000000abc"), 10911)


def _is_v4_mapped(addr: Address) -> bool:
    return len(addr.ip) == 16 and addr.ip[:12] == bytes(10) + b"\xff\xff"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=messages(), as_text=st.booleans(), junk=st.binary(max_size=16))
@example(fields=_fields(body=b""), as_text=False, junk=b"")
@example(fields=_fields(topic="T" * 127), as_text=False, junk=b"")
@example(fields=_fields(topic="é" * 63 + "x"), as_text=True, junk=b"\0")
@example(fields=_fields(born_host=_V6_A, store_host=_V6_B, sys_flag=0x301), as_text=True, junk=b"")
@example(fields=_fields(born_host=_V6_A, sys_flag=V6_BITS), as_text=False, junk=b"")  # stale v6 bit cleared
@example(fields=_fields(magic_code=MESSAGE_MAGIC_CODE_V2, topic="t" * 300), as_text=False, junk=b"")
@example(fields=_fields(properties="", body=b"\0" * 1000), as_text=False, junk=b"\xda\xa3\x20\xa7")
def test_encode_decode_round_trip(fields, as_text, junk):
    kwargs = dict(fields)
    born, store = fields["born_host"], fields["store_host"]
    if as_text:
        for key in ("born_host", "store_host"):
            if fields[key].port >= 0 and not _is_v4_mapped(fields[key]):
                kwargs[key] = str(fields[key])
    raw = encode_message(**kwargs)

    v2 = fields["magic_code"] == MESSAGE_MAGIC_CODE_V2
    topic_b = fields["topic"].encode("utf-8")
    props_b = fields["properties"].encode("utf-8")
    sys_flag = (fields["sys_flag"] & ~V6_BITS) | (BORNHOST_V6_FLAG if len(born.ip) == 16 else 0) \
        | (STOREHOSTADDRESS_V6_FLAG if len(store.ip) == 16 else 0)
    total = message_length(sys_flag, len(fields["body"]), len(topic_b), len(props_b), 2 if v2 else 1)
    assert len(raw) == total
    expected = MessageRecord(
        total_size=total, magic_code=fields["magic_code"], body_crc=crc32(fields["body"]),
        queue_id=fields["queue_id"], flag=fields["flag"], queue_offset=fields["queue_offset"],
        physical_offset=fields["physical_offset"], sys_flag=sys_flag, born_timestamp=fields["born_timestamp"],
        born_host=born, store_timestamp=fields["store_timestamp"], store_host=store,
        reconsume_times=fields["reconsume_times"],
        prepared_transaction_offset=fields["prepared_transaction_offset"], body=fields["body"],
        topic=fields["topic"], properties=fields["properties"])
    assert decode_record(raw, check_crc=True) == expected

    # inside a bigger buffer, at an offset, with bytes after the limit
    buf = bytearray(junk + raw + b"\xff" * 9)
    start = len(junk)
    assert decode_record(buf, start, check_crc=True, limit=start + total) == expected
    assert decode_record(memoryview(bytes(buf)), start) == expected
    with pytest.raises(CorruptRecordError):
        decode_record(buf, start, limit=start + total - 1)

    # the patch positions of the put path hold what they should
    assert struct.unpack_from(">q", raw, QUEUE_OFFSET_POSITION)[0] == fields["queue_offset"]
    assert struct.unpack_from(">q", raw, PHYSICAL_OFFSET_POSITION)[0] == fields["physical_offset"]
    assert struct.unpack_from(">i", raw, SYSFLAG_POSITION)[0] == sys_flag
    assert struct.unpack_from(">q", raw, store_timestamp_position(sys_flag))[0] == fields["store_timestamp"]

    # field spans cover the record exactly, contiguously, and hold the field's bytes
    spans = record_field_spans(expected, base=start)
    assert spans[0][1] == start and spans[-1][2] == start + total
    assert all(a[2] == b[1] for a, b in zip(spans, spans[1:]))
    assert all(s <= e for _, s, e, _ in spans)
    values = expected._asdict()
    lengths = {"body": len(fields["body"]), "topic": len(topic_b), "properties": len(props_b)}
    contents = {"body": fields["body"], "topic": topic_b, "properties": props_b}
    for name, s, e, field in spans:
        chunk = bytes(buf[s:e])
        if name.endswith("_length"):
            assert int.from_bytes(chunk, "big", signed=True) == lengths[name[:-7]], name
            assert len(chunk) == {"body": 4, "topic": 2 if v2 else 1, "properties": 2}[name[:-7]]
        elif name in contents:
            assert chunk == contents[name], name
        elif field.kind == "host":
            assert chunk == values[name].ip + struct.pack(">i", values[name].port), name
        else:
            assert int.from_bytes(chunk, "big", signed=True) == values[name], name


@settings(max_examples=200, deadline=None)
@given(addr=_hosts.filter(lambda a: a.port >= 0))
@example(addr=Address(bytes(10) + b"\xff\xff" + bytes([192, 0, 2, 55]), 119))
def test_address_text_round_trip(addr):
    parsed = Address.parse(str(addr))
    if _is_v4_mapped(addr):  # Java's InetAddress turns ::ffff:a.b.c.d into an Inet4Address
        assert parsed == Address(addr.ip[12:], addr.port)
    else:
        assert parsed == addr
    assert Address.parse((addr.host, addr.port)) == parsed


def test_address_text_forms():
    assert Address.parse("192.0.2.2:40001") == Address(bytes([192, 0, 2, 2]), 40001)
    assert str(Address.parse("[2001:db8::1]:80")) == "[2001:db8::1]:80"
    assert Address.parse("[::ffff:192.0.2.55]:5") == Address(bytes([192, 0, 2, 55]), 5)
    assert Address.parse(("10.0.0.1", "7")) == Address(bytes([10, 0, 0, 1]), 7)


# -- (5) fuzz: bad bytes raise RmqStoreError, never anything else --------------------------------

def _decode_or_none(buf, pos, **kw):
    """decode_record, where only RmqStoreError may escape; a success must be self-consistent."""
    try:
        rec = decode_record(buf, pos, **kw)
    except RmqStoreError:
        return None
    limit = kw.get("limit")
    end = len(buf) if limit is None else min(limit, len(buf))
    assert 0 <= pos
    if isinstance(rec, BlankRecord):
        assert rec.magic_code == BLANK_MAGIC_CODE and rec.total_size >= 8
        assert pos + rec.total_size <= len(buf)
    else:
        assert isinstance(rec, MessageRecord)
        assert pos + rec.total_size <= end
        # whatever the decoder accepts, the encoder writes back byte for byte
        assert _encode_again(rec) == bytes(buf[pos:pos + rec.total_size])
        if kw.get("check_crc"):
            assert crc32(rec.body) == rec.body_crc
    return rec


@settings(max_examples=500, deadline=None)
@given(buf=st.binary(max_size=300), pos=st.integers(-4, 310), limit=st.none() | st.integers(-4, 400),
       check_crc=st.booleans())
@example(buf=b"\0" * 4, pos=0, limit=100, check_crc=False)  # a limit past the buffer's end
@example(buf=b"\0" * 8, pos=0, limit=None, check_crc=False)
def test_fuzz_arbitrary_bytes(buf, pos, limit, check_crc):
    _decode_or_none(buf, pos, limit=limit, check_crc=check_crc)


@settings(max_examples=500, deadline=None)
@given(total=st.integers(-2**31, 2**31 - 1) | st.integers(0, 300),
       magic=st.sampled_from([MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE]),
       rest=st.binary(max_size=300), limit=st.none() | st.integers(0, 320), check_crc=st.booleans())
@example(total=91, magic=MESSAGE_MAGIC_CODE, rest=bytes(83), limit=None, check_crc=True)
@example(total=91, magic=MESSAGE_MAGIC_CODE, rest=b"", limit=91, check_crc=False)  # limit past the end
@example(total=120, magic=MESSAGE_MAGIC_CODE, rest=b"\0" * 28 + b"\0\0\0\x30" + bytes(80), limit=None,
         check_crc=False)
@example(total=8, magic=BLANK_MAGIC_CODE, rest=b"", limit=None, check_crc=False)
@example(total=9, magic=BLANK_MAGIC_CODE, rest=b"", limit=None, check_crc=False)
def test_fuzz_planted_magic(total, magic, rest, limit, check_crc):
    buf = struct.pack(">ii", total, magic) + rest
    _decode_or_none(buf, 0, limit=limit, check_crc=check_crc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=messages(), flips=st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), max_size=4),
       cut=st.none() | st.integers(0, 2**20), field_pick=st.integers(0, 100), field_bytes=st.binary(),
       check_crc=st.booleans())
@example(fields=_fields(), flips=[(5, 0)], cut=None, field_pick=0, field_bytes=b"", check_crc=True)  # bad magic
@example(fields=_fields(topic="é"), flips=[(94, 0xFF)], cut=None, field_pick=0, field_bytes=b"", check_crc=False)
def test_fuzz_mutated_record(fields, flips, cut, field_pick, field_bytes, check_crc):
    raw = bytearray(encode_message(**fields))
    rec = decode_record(bytes(raw))
    # overwrite one whole field (length prefixes included) with random bytes of its size
    spans = record_field_spans(rec)
    name, s, e, _ = spans[field_pick % len(spans)]
    if e > s and field_bytes:
        raw[s:e] = (field_bytes * (e - s))[:e - s]
    for i, b in flips:
        raw[i % len(raw)] = b
    if cut is not None:
        raw = raw[:cut % (len(raw) + 1)]
    _decode_or_none(bytes(raw), 0, check_crc=check_crc)
    _decode_or_none(raw, 0)  # bytearray too


@pytest.mark.parametrize("length", [0, 1, 7, 8, 20, 36, 40, 87, 88, 90, 91])
def test_truncated_records_raise_corrupt(length):
    raw = encode_message(**_fields())
    with pytest.raises(CorruptRecordError):
        decode_record(raw[:length])
    with pytest.raises(CorruptRecordError):
        decode_record(raw, 0, limit=len(raw) - 1)


def test_bad_crc_is_detected_only_when_asked():
    raw = bytearray(encode_message(**_fields(body=b"payload")))
    raw[88] ^= 0x01  # first body byte
    assert decode_record(bytes(raw)).body == b"qayload"
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_record(bytes(raw), check_crc=True)


def test_bad_magic_and_invalid_utf8_raise_corrupt():
    raw = bytearray(encode_message(**_fields(topic="ab")))
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_record(bytes(raw[:4]) + b"\x12\x34\x56\x78" + bytes(raw[8:]))
    raw[88 + 5 + 1] = 0xFF  # topic byte after the 5-byte body and its 1-byte length
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_record(bytes(raw))


_FILE_CHOICES = [(n, s) for n, s, _ in STORES]


@settings(max_examples=400, deadline=None)
@given(which=st.sampled_from(_FILE_CHOICES), file_pick=st.integers(0, 20), pos=st.integers(0, 65535),
       limit=st.none() | st.integers(0, 65536), check_crc=st.booleans())
def test_fuzz_random_positions_in_fixture_files(which, file_pick, pos, limit, check_crc):
    files = commitlog_files(*which)
    base, data = files[file_pick % len(files)]
    _decode_or_none(data, pos % len(data), limit=limit, check_crc=check_crc)


# -- (6) encode_message rejects what does not fit -----------------------------------------------------

def test_v1_topic_of_128_utf8_bytes_is_rejected():
    for topic in ("T" * 128, "é" * 64, "日" * 42 + "xy"):
        assert len(topic.encode("utf-8")) == 128
        with pytest.raises(LayoutError, match=r"topic.*128"):
            encode_message(**_fields(topic=topic))
        # a V2 record has a 2-byte topic length and holds it
        raw = encode_message(**_fields(topic=topic, magic_code=MESSAGE_MAGIC_CODE_V2))
        assert decode_record(raw).topic == topic
    # 127 bytes still fit a V1 record (fixture basic stores a 127-character topic)
    assert decode_record(encode_message(**_fields(topic="é" * 63 + "x"))).topic == "é" * 63 + "x"


def test_properties_over_32767_bytes_are_rejected():
    ok = "p" * 32767
    assert decode_record(encode_message(**_fields(properties=ok))).properties == ok
    for props in ("p" * 32768, "é" * 16384, "KEYS\x01k\x02pad\x01" + "é" * 20000):
        with pytest.raises(LayoutError, match="properties"):
            encode_message(**_fields(properties=props))


@pytest.mark.parametrize("host", [
    "192.0.2.1:2147483648", "192.0.2.1:-2147483649", ("192.0.2.1", 2**31), "[::1]:99999999999",
    Address(bytes(4), 2**31)])
def test_port_out_of_range_is_rejected(host):
    with pytest.raises(LayoutError):
        encode_message(**_fields(born_host=host))
    with pytest.raises(LayoutError):
        encode_message(**_fields(store_host=host))


@pytest.mark.parametrize("host", [
    "999.0.2.1:80", "not-an-ip:80", "192.0.2.1", "192.0.2.1:", "192.0.2.1:http", "[::1:80", "1.2.3:4",
    "", 12345, None, ("192.0.2.1",), ("192.0.2.1", 1, 2), (b"\x01\x02\x03", 5)])
def test_bad_host_is_rejected(host):
    with pytest.raises(LayoutError):
        encode_message(**_fields(store_host=host))


@pytest.mark.parametrize("override", [
    dict(queue_id=2**31), dict(flag=-2**31 - 1), dict(queue_offset=2**63), dict(physical_offset=-2**63 - 1),
    dict(sys_flag=2**31), dict(born_timestamp=2**63), dict(reconsume_times=2**31),
    dict(prepared_transaction_offset=2**63), dict(body_crc=2**31), dict(magic_code=BLANK_MAGIC_CODE),
    dict(magic_code=0)])
def test_out_of_range_fields_are_rejected(override):
    with pytest.raises(LayoutError):
        encode_message(**_fields(**override))


# -- (7) msgId -----------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(addr=_hosts, offset=INT64)
@example(addr=Address(bytes([198, 51, 100, 7]), 10911), offset=217)
@example(addr=_V6_A, offset=0)
def test_message_id_round_trip(addr, offset):
    msg_id = create_message_id(addr, offset)
    assert len(msg_id) == (32 if len(addr.ip) == 4 else 56)
    assert re.fullmatch(r"[0-9A-F]+", msg_id)
    assert decode_message_id(msg_id) == (addr, offset)
    assert decode_message_id(msg_id.lower()) == (addr, offset)


def test_message_id_known_value():
    assert create_message_id(Address(bytes([198, 51, 100, 7]), 10911), 217) == "C633640700002A9F00000000000000D9"
    v6 = create_message_id(Address(bytes.fromhex("20010db8" + "00" * 11 + "01"), 10911), 0x0102)
    assert v6 == "20010DB8000000000000000000000001" "00002A9F" "0000000000000102"


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60) | st.text(st.sampled_from("0123456789abcdefABCDEF \t\n"), min_size=32,
                                                max_size=32))
@example(text=" " * 30 + "ab")
@example(text="C6 33 64 07 00 00 2A 9F 00 00 00")
@example(text="C633640700002A9F00000000000000D")
@example(text="G633640700002A9F00000000000000D9")
@example(text="C633640700002A9F00000000000000D9" + "00")
def test_message_id_garbage(text):
    try:
        addr, offset = decode_message_id(text)
    except LayoutError:
        return
    assert create_message_id(addr, offset) == text.upper()


@pytest.mark.parametrize("garbage", [None, b"C633640700002A9F00000000000000D9", 12, "", "xyz", " " * 32])
def test_message_id_garbage_raises_layout_error(garbage):
    with pytest.raises(LayoutError):
        decode_message_id(garbage)


@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_every_manifest_msg_id_decodes(name):
    m = manifest(name)
    seen = 0
    for p in m["puts"]:
        if p.get("msgId"):
            addr, offset = decode_message_id(p["msgId"])
            assert str(addr) == p["storeHost"] and addr.packed.hex() == p["storeHostBytes"]
            assert offset == p["wroteOffset"]
            seen += 1
    for r in m["recordsNotWrittenByAnyPut"]:
        addr, offset = decode_message_id(r["msgId"])
        assert (str(addr), offset) == (r["storeHost"], r["commitLogOffset"])
        seen += 1
    assert seen >= len(_ok_puts(name))
