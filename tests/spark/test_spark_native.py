"""The commitlog source's compiled path (rmqstore._native._cdecode into Arrow) equals its pure path row for row.

Without Spark first (cheap): the batches of a byte range, native against ``read_range`` +
``records_to_batch``, on every fixture segment cut into ranges, with damage spliced in (the
resynchronisation), and on records the fixtures lack (IPv6, V2, odd properties).  Then one
Spark scan of the fixtures with ``native=false`` against the default, row for row.
"""

import random

import pytest

pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")
pytest.importorskip("pyspark")

from conftest import FIXTURES, commitlog_files, compiled_module  # noqa: E402
from rmqstore.format.ranges import read_range, split_ranges  # noqa: E402
from rmqstore.spark.commitlog_native import native_batches  # noqa: E402
from rmqstore.spark.commitlog_source import (BATCH_BYTES, BATCH_ROWS, COMMITLOG_SCHEMA,  # noqa: E402
                                             _properties_map, records_to_batch)

NAMES = ("basic", "boundary", "txn_delay", "flush_tsp", "crash")


def pure_rows(buf, base, start, end, with_body):
    spans = read_range(buf, base, start, end).records
    if not spans:
        return []
    offsets = np.array([s.offset for s in spans], dtype=np.int64)
    crc_ok = np.array([bool(s.crc_ok) for s in spans])
    return records_to_batch(buf, base, offsets, crc_ok, store="S", segment="seg", with_body=with_body).to_pylist()


def native_rows(buf, base, start, end, with_body, max_rows=BATCH_ROWS):
    rows = []
    for batch in native_batches(compiled_module("_cdecode"), buf, base, start, end, store="S", segment="seg",
                                with_body=with_body, schema_ddl=COMMITLOG_SCHEMA, max_rows=max_rows,
                                max_bytes=BATCH_BYTES, properties_map=_properties_map):
        rows.extend(batch.to_pylist())
    return rows


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("parts", [1, 3, 7])
def test_every_range_of_every_fixture_segment(name, parts):
    for base, data in commitlog_files(name):
        for start, end in split_ranges(len(data), parts):
            want = pure_rows(data, base, start, end, True)
            assert native_rows(data, base, start, end, True, max_rows=5) == want
        assert native_rows(data, base, 0, len(data), False) == pure_rows(data, base, 0, len(data), False)


def test_damage_is_skipped_to_the_next_record_as_the_pure_read_does():
    rng = random.Random(15)
    for name in NAMES[:3]:
        for base, data in commitlog_files(name)[:3]:
            for _ in range(8):
                buf = bytearray(data)
                for _ in range(rng.randrange(1, 6)):
                    at = rng.randrange(len(buf))
                    buf[at:at + 4] = rng.randbytes(4)
                buf = bytes(buf[:len(data)])
                for start, end in split_ranges(len(buf), rng.choice([1, 2, 5])):
                    assert native_rows(buf, base, start, end, True, max_rows=7) == \
                        pure_rows(buf, base, start, end, True)


def test_odd_records_ipv6_v2_and_repeated_property_names():
    from test_spark import _odd_segment

    buf, _ = _odd_segment()
    base = 1000
    assert native_rows(buf, base, 0, len(buf), True) == pure_rows(buf, base, 0, len(buf), True)


def test_a_spark_scan_native_and_pure_agree_row_for_row(spark):
    compiled_module("_cdecode")
    paths = ",".join(str(FIXTURES / n / "store") for n in NAMES)

    def rows(native):
        df = (spark.read.format("rmqstore.commitlog").option("splitSize", 20000).option("native", native)
              .option("paths", paths).load())
        return sorted((r.asDict() for r in df.collect()), key=lambda r: (r["store"], r["offset"]))

    native, pure = rows("true"), rows("false")
    assert len(native) == 600 + 16 + 24 + 450 + 300
    assert native == pure
