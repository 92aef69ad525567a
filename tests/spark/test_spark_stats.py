"""Spark ``stats`` equals the same numbers computed in plain Python from ``CommitLogScan``."""

from collections import defaultdict

import pytest

pytest.importorskip("pyspark")
np = pytest.importorskip("numpy")

from conftest import FIXTURES  # noqa: E402
from rmqstore.format.crc import crc32  # noqa: E402
from rmqstore.format.record import MessageRecord  # noqa: E402
from rmqstore.read.scan import CommitLogScan  # noqa: E402
from rmqstore.spark.stats import PERCENTILES, commitlog_frame, stats  # noqa: E402

STORES = [str(FIXTURES / n / "store") for n in ("basic", "boundary", "txn_delay", "crash")]


def messages(stores=STORES):
    """``(store, record)`` of every message record, by the sequential scan."""
    return [(s, rec) for s in stores for _, rec in CommitLogScan(s) if isinstance(rec, MessageRecord)]


def by_queue(stores=STORES):
    groups = defaultdict(list)
    for store, rec in messages(stores):
        groups[(store, rec.topic, rec.queue_id)].append(rec)
    return groups


def nearest_rank(values, p):
    """The smallest value with at least ``p * n`` values at or below it."""
    return int(np.percentile(np.array(values, dtype=np.int64), p * 100, method="inverted_cdf"))


@pytest.fixture(scope="module")
def result(spark):
    return stats(spark, STORES).to_dict()  # test_spark.py shows the source is split-proof


def test_queue_rows_equal_the_sequential_scan(result):
    groups = by_queue()
    rows = {(r["store"], r["topic"], r["queue_id"]): r for r in result["queues"]}
    assert set(rows) == set(groups)
    assert sum(r["messages"] for r in rows.values()) == 600 + 16 + 24 + 300
    for key, recs in groups.items():
        r = rows[key]
        sizes = [x.total_size for x in recs]
        latency = [x.store_timestamp - x.born_timestamp for x in recs]
        assert r["messages"] == len(recs), key
        assert r["bytes"] == sum(sizes), key
        assert (r["min_size"], r["max_size"]) == (min(sizes), max(sizes)), key
        assert r["avg_size"] == pytest.approx(sum(sizes) / len(sizes), rel=1e-12), key
        assert r["crc_errors"] == sum(crc32(x.body) != x.body_crc for x in recs), key
        assert (r["min_queue_offset"], r["max_queue_offset"]) == (min(x.queue_offset for x in recs),
                                                                  max(x.queue_offset for x in recs)), key
        assert r["first_store_timestamp"] == min(x.store_timestamp for x in recs), key
        assert r["last_store_timestamp"] == max(x.store_timestamp for x in recs), key
        # every queue is far smaller than the accuracy (10,000): the percentiles are exact
        for name, p in PERCENTILES:
            assert r[f"latency_{name}"] == nearest_rank(latency, p), (key, name)
        assert r["latency_max"] == max(latency), key


def test_latencies_are_not_all_equal(result):
    # the comparison above means something only if the fixtures' latencies differ
    latency = {x.store_timestamp - x.born_timestamp for _, x in messages()}
    assert len(latency) > 3


def test_histogram_uses_exact_log2_buckets(result):
    expected = defaultdict(int)
    for store, rec in messages():
        expected[(store, rec.topic, rec.queue_id, rec.total_size.bit_length() - 1)] += 1
    got = {(r["store"], r["topic"], r["queue_id"], r["bucket"]): r for r in result["histogram"]}
    assert {k: r["messages"] for k, r in got.items()} == dict(expected)
    for (_, _, _, k), r in got.items():
        assert (r["bucket_low"], r["bucket_high"]) == (1 << k, 1 << (k + 1))
    assert len({k[3] for k in got}) > 5  # basic's bodies go from 0 B to 64000 B


def test_size_exactly_a_power_of_two_lands_in_its_own_bucket(spark):
    df = spark.createDataFrame([("s", "T", 0, size, True, 0, 0, 0) for size in (1023, 1024, 1025, 2048)],
                               "store string, topic string, queue_id int, total_size int, crc_ok boolean, "
                               "queue_offset bigint, store_timestamp bigint, born_timestamp bigint")
    got = {r["bucket"]: r["messages"] for r in stats(df).histogram.collect()}
    assert got == {9: 1, 10: 2, 11: 1}


@pytest.mark.parametrize("bucket_ms", [1000, 37])
def test_throughput_series_is_exact_and_has_no_holes(spark, result, bucket_ms):
    rows = result["throughput"] if bucket_ms == 1000 else stats(spark, STORES, bucket_ms=bucket_ms).throughput.collect()
    counts, sizes = defaultdict(int), defaultdict(int)
    for store, rec in messages():
        key = (store, rec.store_timestamp // bucket_ms * bucket_ms)
        counts[key] += 1
        sizes[key] += rec.total_size
    got = {(r["store"], r["bucket_start"]): (r["messages"], r["bytes"]) for r in rows}
    for store in STORES:
        starts = sorted(b for s, b in got if s == store)
        assert starts == list(range(starts[0], starts[-1] + bucket_ms, bucket_ms)), store
    assert {k: v for k, v in got.items() if v[0]} == {k: (counts[k], sizes[k]) for k in counts}
    assert all(v == (0, 0) for k, v in got.items() if k not in counts)


def test_percentiles_stay_within_the_documented_accuracy(spark):
    store = str(FIXTURES / "basic" / "store")
    accuracy = 20  # rank error at most n / 20
    values = sorted(x.store_timestamp - x.born_timestamp for _, x in messages([store]))
    df = commitlog_frame(spark, [store], body=False).selectExpr("store", "'all' AS topic", "0 AS queue_id",
                                                                "total_size", "crc_ok", "queue_offset",
                                                                "store_timestamp", "born_timestamp")
    (row,) = stats(df, accuracy=accuracy).queues.collect()
    n = len(values)
    for name, p in PERCENTILES:
        v = row[f"latency_{name}"]
        lowest = sum(x < v for x in values) + 1  # the ranks v holds in the sorted values
        highest = sum(x <= v for x in values)
        target = max(1, -(-int(p * n * 1000) // 1000))
        assert lowest <= target + n / accuracy and highest >= target - n / accuracy, (name, v, target)


def test_stats_accepts_a_frame_and_rejects_nonsense(spark):
    df = commitlog_frame(spark, STORES[1])
    assert stats(df).queues.count() == len(by_queue([STORES[1]]))
    with pytest.raises(ValueError, match="bucket_ms"):
        stats(df, bucket_ms=0)
    with pytest.raises(ValueError, match="paths"):
        stats(spark)
    with pytest.raises(ValueError, match="only for stats"):
        stats(df, STORES)
