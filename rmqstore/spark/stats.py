"""``stats``: what a store holds, per topic and queue, computed by Spark over the commitlog.

    from rmqstore.spark.stats import stats
    result = stats(spark, ["/data/broker-a/store", "/data/broker-b/store"])
    result.queues.show()          # per (store, topic, queue_id)
    result.histogram.show()       # record sizes in log2 buckets
    result.throughput.show()      # messages and bytes per time bucket of store_timestamp

The input is the ``rmqstore.commitlog`` DataFrame (one row per message record; blank records
are not rows), so the work is spread over byte-range partitions of the segments.  Each of
the three results is its own Spark job over that input: ``persist()`` the input first to
read the store once (``rmqstore spark stats`` does).  The results are small DataFrames:

``queues``
    one row per ``(store, topic, queue_id)``: ``messages``, ``bytes`` (sum of the records'
    ``total_size``: what the queue costs in the commitlog), ``min_size`` /
    ``avg_size`` / ``max_size`` (record ``total_size``), ``crc_errors`` (records whose body
    does not match its CRC), the first and last ``queue_offset`` and ``store_timestamp``,
    and the *store latency* -- ``store_timestamp - born_timestamp`` in milliseconds, the
    time from the producer stamping the message to the broker writing it (clock skew
    between the two hosts included, so it can be negative) -- as ``latency_p50``,
    ``latency_p90``, ``latency_p99`` and ``latency_max``.

``histogram``
    one row per ``(store, topic, queue_id, bucket)`` with at least one record: bucket ``k``
    holds the records with ``2**k <= total_size < 2**(k+1)`` (``bucket_low`` /
    ``bucket_high`` spell it out).  ``k`` is computed exactly in integers -- the length of
    the size's binary string minus one -- not with a floating-point ``log2``, which can
    land on the wrong side of a power of two.

``throughput``
    one row per ``(store, bucket_start)``, ``bucket_start`` being ``store_timestamp``
    rounded down to a multiple of ``bucket_ms``: ``messages`` and ``bytes`` stored in that
    bucket.  Every bucket from a store's first to its last appears, the empty ones with 0,
    so the series plots as a time axis without holes being hidden.  (Each store's non-empty
    buckets are gathered in one row on the way: choose ``bucket_ms`` so that a store spans
    thousands or millions of buckets, not billions.)

The percentiles: Spark's ``percentile_approx`` (a Greenwald-Khanna quantile summary).  With
``accuracy = A`` (default 10,000) the value returned for percentage ``p`` over ``n``
values is an element whose rank is within ``n / A`` of the exact rank ``ceil(p * n)`` --
the *nearest-rank* percentile, the smallest value with at least ``p * n`` values at or
below it (numpy's ``method="inverted_cdf"``).  A queue of fewer than ``A`` messages thus
gets the exact nearest-rank value; a queue of 10 million at the default accuracy is off by
at most 1,000 ranks.  ``latency_max`` is always exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

__all__ = ["StoreStats", "stats", "commitlog_frame", "DEFAULT_BUCKET_MS", "DEFAULT_ACCURACY", "PERCENTILES",
           "QUEUE_KEY"]

#: the width of a throughput bucket, in milliseconds of store_timestamp
DEFAULT_BUCKET_MS = 1000
#: ``percentile_approx``'s accuracy: rank error at most n / accuracy
DEFAULT_ACCURACY = 10_000
#: the latency percentiles of the ``queues`` result, as (column suffix, percentage)
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
#: what one row of ``queues`` is about
QUEUE_KEY = ("store", "topic", "queue_id")


@dataclass(frozen=True)
class StoreStats:
    """The three results of :func:`stats` (lazy DataFrames: nothing runs until one is used)."""

    queues: object
    histogram: object
    throughput: object
    bucket_ms: int
    accuracy: int

    def to_dict(self) -> dict:
        """Every row of the three results as plain Python (collects them: they are small)."""
        return {"bucket_ms": self.bucket_ms, "accuracy": self.accuracy,
                "queues": _rows(self.queues), "histogram": _rows(self.histogram),
                "throughput": _rows(self.throughput)}


def _rows(df) -> list[dict]:
    return [r.asDict() for r in df.collect()]


def commitlog_frame(spark, paths: Iterable, *, body: bool = True, split_size: int | None = None):
    """The ``rmqstore.commitlog`` DataFrame over ``paths`` (stores; ``body=False`` leaves bodies out)."""
    paths = [str(p) for p in ([paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__")
                              else paths)]
    if not paths:
        raise ValueError("no store paths given")
    bad = [p for p in paths if "," in p]
    if bad:
        raise ValueError(f"store paths cannot contain ',' (the source's path separator): {bad}")
    reader = spark.read.format("rmqstore.commitlog").option("paths", ",".join(paths))
    if not body:
        reader = reader.option("body", "false")
    if split_size is not None:
        reader = reader.option("splitSize", str(int(split_size)))
    return reader.load()


def stats(df_or_spark, paths: Iterable | None = None, *, bucket_ms: int = DEFAULT_BUCKET_MS,
          accuracy: int = DEFAULT_ACCURACY, split_size: int | None = None) -> StoreStats:
    """Per-queue counts, sizes, size histogram and latency percentiles, and a throughput series.

    ``df_or_spark`` is either a DataFrame of the ``rmqstore.commitlog`` source or a
    SparkSession, in which case ``paths`` (one store or several) are read with it, bodies left
    out (no result needs them).
    """
    if bucket_ms <= 0:
        raise ValueError(f"bucket_ms must be a positive number of milliseconds, got {bucket_ms}")
    if accuracy <= 0:
        raise ValueError(f"accuracy must be positive, got {accuracy}")
    if hasattr(df_or_spark, "read") and hasattr(df_or_spark, "sparkContext"):
        if paths is None:
            raise ValueError("stats(spark, paths): give the store paths to read")
        df = commitlog_frame(df_or_spark, paths, body=False, split_size=split_size)
    else:
        if paths is not None:
            raise ValueError("stats(df): paths are only for stats(spark, paths)")
        df = df_or_spark
    return StoreStats(_queues(df, accuracy), _histogram(df), _throughput(df, bucket_ms), bucket_ms, accuracy)


def _queues(df, accuracy: int):
    from pyspark.sql import functions as F

    latency = (F.col("store_timestamp") - F.col("born_timestamp")).alias("latency")
    df = df.select(*QUEUE_KEY, "total_size", "crc_ok", "queue_offset", "store_timestamp", latency)
    pct = F.percentile_approx("latency", F.array(*[F.lit(p) for _, p in PERCENTILES]), accuracy)
    agg = df.groupBy(*QUEUE_KEY).agg(
        F.count(F.lit(1)).alias("messages"),
        F.sum("total_size").alias("bytes"),
        F.min("total_size").alias("min_size"),
        F.avg("total_size").alias("avg_size"),
        F.max("total_size").alias("max_size"),
        F.sum(F.when(F.col("crc_ok"), 0).otherwise(1)).alias("crc_errors"),
        F.min("queue_offset").alias("min_queue_offset"),
        F.max("queue_offset").alias("max_queue_offset"),
        F.min("store_timestamp").alias("first_store_timestamp"),
        F.max("store_timestamp").alias("last_store_timestamp"),
        pct.alias("_pct"),
        F.max("latency").alias("latency_max"))
    cols = [c for c in agg.columns if c not in ("_pct", "latency_max")]
    cols += [F.col("_pct")[i].alias(f"latency_{name}") for i, (name, _) in enumerate(PERCENTILES)]
    return agg.select(*cols, "latency_max").orderBy(*QUEUE_KEY)


def _histogram(df):
    from pyspark.sql import functions as F

    bucket = (F.length(F.bin(F.col("total_size"))) - 1).alias("bucket")
    counts = df.select(*QUEUE_KEY, bucket).groupBy(*QUEUE_KEY, "bucket").agg(F.count(F.lit(1)).alias("messages"))
    return (counts.select(*QUEUE_KEY, "bucket", F.expr("shiftleft(1L, bucket)").alias("bucket_low"),
                          F.expr("shiftleft(1L, bucket + 1)").alias("bucket_high"), "messages")
            .orderBy(*QUEUE_KEY, "bucket"))


def _throughput(df, bucket_ms: int):
    from pyspark.sql import functions as F

    start = (F.floor(F.col("store_timestamp") / F.lit(bucket_ms)) * F.lit(bucket_ms)).cast("bigint")
    counts = (df.select("store", start.alias("bucket_start"), "total_size")
              .groupBy("store", "bucket_start")
              .agg(F.count(F.lit(1)).alias("messages"), F.sum("total_size").alias("bytes")))
    # one pass: each store's buckets gathered into a map, then every bucket from first to last
    per_store = counts.groupBy("store").agg(
        F.min("bucket_start").alias("lo"), F.max("bucket_start").alias("hi"),
        F.map_from_entries(F.collect_list(F.struct("bucket_start", F.struct("messages", "bytes")))).alias("m"))
    every = per_store.select("store", "m", F.explode(F.sequence("lo", "hi", F.lit(bucket_ms).cast("bigint")))
                             .alias("bucket_start"))
    hit = F.element_at("m", F.col("bucket_start"))
    return (every.select("store", "bucket_start", F.coalesce(hit["messages"], F.lit(0)).cast("bigint").alias("messages"),
                         F.coalesce(hit["bytes"], F.lit(0)).cast("bigint").alias("bytes"))
            .orderBy("store", "bucket_start"))
