"""Spark data sources over store files (Spark 4's Python Data Source API).

    from rmqstore.spark import register
    register(spark)
    df = spark.read.format("rmqstore.commitlog").load("/path/to/store")      # one row per record

Partitions are byte ranges of segments (option ``splitSize``, default 128 MiB): a task
that starts mid-segment finds the next record boundary itself (:mod:`rmqstore.ranges`),
so each record is read exactly once whatever the split.  Rows travel as Arrow batches.
Reading never writes to the store (read-only maps), so it is safe on a live broker's files.
"""

from .commitlog_source import COMMITLOG_SCHEMA, CommitLogDataSource, register

__all__ = ["CommitLogDataSource", "COMMITLOG_SCHEMA", "register"]
