"""The Spark commitlog source equals `rmqstore dump` on every fixture, whatever the split."""

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from conftest import FIXTURES  # noqa: E402
from rmqstore.format.dumpfmt import record_to_json  # noqa: E402
from rmqstore.format.properties import parse_properties  # noqa: E402
from rmqstore.read.scan import CommitLogScan  # noqa: E402

STORES = [FIXTURES / n / "store" for n in ("basic", "boundary", "txn_delay", "flush_tsp", "crash")]


def dump_rows(store):
    rows = {}
    for offset, rec in CommitLogScan(store):
        j = record_to_json(offset, rec)
        if j["type"] == "message":
            rows[(str(store), offset)] = j
    return rows


@pytest.mark.parametrize("split,body", [(7001, "true"), (1 << 27, "false")],
                         ids=["mid-segment-splits", "whole-segments-body=false"])
def test_rows_equal_dump_on_every_fixture(spark, split, body):
    df = (spark.read.format("rmqstore.commitlog").option("splitSize", split).option("body", body)
          .option("paths", ",".join(str(s) for s in STORES)).load())
    got = {(r["store"], r["offset"]): r for r in df.collect()}
    expected = {}
    for store in STORES:
        expected.update(dump_rows(store))
    assert set(got) == set(expected)  # every record exactly once, none invented
    for key, j in expected.items():
        r = got[key]
        for name in ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset",
                     "physical_offset", "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times",
                     "prepared_transaction_offset", "topic", "born_host", "store_host", "msg_id", "crc_ok"):
            assert r[name] == j[name], (key, name)
        assert (bytes(r["body"]).hex() == j["body"]) if body == "true" else r["body"] is None
        assert r["properties_raw"] == j["properties"]
        assert r["properties"] == parse_properties(j["properties"]) and r["version"] == j["version"]
    assert len(got) == 600 + 16 + 24 + 450 + 300


def _odd_segment():
    """Records the fixtures lack: IPv6 hosts, V2 magic, odd and repeated property names, empty bodies."""
    from rmqstore.format.layout import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
    from rmqstore.format.record import Address, encode_message

    props = ["", "TAGS\x01a\x02KEYS\x01k1 k2\x02", "\x01x\x02a\x01\x02k\x01v1\x02k\x01v2\x02b\x01c\x01d\x02ab",
             "UNIQ_KEY\x01\u00e9t\u00e9\x02", "k\x01v"]
    hosts = ["192.0.2.1:1", "[2001:db8::1]:10911", "10.0.0.1:-5", "[::1]:0"]
    buf, at = bytearray(), []
    for i in range(40):
        at.append(len(buf))
        buf += encode_message(queue_id=i % 5, flag=i, queue_offset=i * 3, physical_offset=1000 + len(buf),
                              sys_flag=0, born_timestamp=-i, born_host=Address.parse(hosts[i % 4]),
                              store_timestamp=2**40 + i, store_host=Address.parse(hosts[(i + 1) % 4]),
                              reconsume_times=i % 3, prepared_transaction_offset=2**62 - i,
                              body=bytes(range(i % 7 * 37 % 256)) * (i % 3), topic="T\u00fcpic%d" % (i % 6),
                              properties=props[i % 5],
                              magic_code=MESSAGE_MAGIC_CODE_V2 if i % 4 == 3 else MESSAGE_MAGIC_CODE)
    return bytes(buf), at


@pytest.mark.parametrize("with_body", [True, False], ids=["body", "body=false"])
def test_vectorised_batch_equals_the_record_decoder_on_odd_records(with_body):
    """records_to_batch (numpy gathers, Arrow compute) against decode_record + parse_properties,
    field by field, on records with IPv6 hosts, V2 magic and properties that parse_properties skips
    or overwrites (empty name, empty value, a repeated name, a trailing fragment)."""
    import numpy as np

    from rmqstore.format.properties import parse_properties
    from rmqstore.format.record import create_message_id, decode_record
    from rmqstore.spark.commitlog_source import records_to_batch

    buf, at = _odd_segment()
    base = 1000
    batch = records_to_batch(buf, base, np.array(at, dtype=np.int64) + base, np.array([True] * len(at)),
                             store="S", segment="seg", with_body=with_body)
    rows = batch.to_pylist()
    assert len(rows) == len(at)
    for pos, row in zip(at, rows):
        rec = decode_record(buf, pos)
        for name in ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
                     "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times",
                     "prepared_transaction_offset", "topic"):
            assert row[name] == getattr(rec, name), (pos, name)
        assert row["body"] == (rec.body if with_body else None)
        assert (row["born_host"], row["store_host"]) == (str(rec.born_host), str(rec.store_host))
        assert row["properties_raw"] == rec.properties
        assert row["properties"] == list(parse_properties(rec.properties).items())
        assert row["msg_id"] == create_message_id(rec.store_host, rec.physical_offset)
        assert (row["store"], row["segment"], row["offset"], row["crc_ok"]) == ("S", "seg", base + pos, True)
        assert row["version"] == (2 if rec.magic_code == -626843477 else 1)


def test_a_topic_that_is_not_utf8_names_its_record():
    import numpy as np

    from rmqstore.common.errors import CorruptRecordError
    from rmqstore.format.record import encode_message
    from rmqstore.spark.commitlog_source import records_to_batch

    good = encode_message(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=0,
                          born_host="1.2.3.4:5", store_timestamp=0, store_host="1.2.3.4:5", reconsume_times=0,
                          prepared_transaction_offset=0, body=b"x", topic="T", properties="")
    bad = encode_message(queue_id=0, flag=0, queue_offset=0, physical_offset=len(good), sys_flag=0, born_timestamp=0,
                         born_host="1.2.3.4:5", store_timestamp=0, store_host="1.2.3.4:5", reconsume_times=0,
                         prepared_transaction_offset=0, body=b"x", topic=b"\xff\xfe", properties="")
    with pytest.raises(CorruptRecordError, match=f"topic.*not UTF-8.*at offset {len(good)}"):
        records_to_batch(good + bad, 0, np.array([0, len(good)]), np.array([True, True]), store="S", segment="s")
