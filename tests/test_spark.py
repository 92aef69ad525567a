"""The Spark commitlog source equals `rmqstore dump` on every fixture, whatever the split."""

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from conftest import FIXTURES  # noqa: E402
from rmqstore.dumpfmt import record_to_json  # noqa: E402
from rmqstore.scan import CommitLogScan  # noqa: E402

STORES = [FIXTURES / n / "store" for n in ("basic", "boundary", "txn_delay", "flush_tsp", "crash")]


def dump_rows(store):
    rows = {}
    for offset, rec in CommitLogScan(store):
        j = record_to_json(offset, rec)
        if j["type"] == "message":
            rows[(str(store), offset)] = j
    return rows


@pytest.mark.parametrize("split", [7001, 1 << 27], ids=["mid-segment-splits", "whole-segments"])
def test_rows_equal_dump_on_every_fixture(spark, split):
    df = (spark.read.format("rmqstore.commitlog").option("splitSize", split)
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
        assert bytes(r["body"]).hex() == j["body"]
        assert r["properties_raw"] == j["properties"]
    assert len(got) == 600 + 16 + 24 + 450 + 300
