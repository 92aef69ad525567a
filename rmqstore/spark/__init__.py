"""Spark data sources over store files (Spark 4's Python Data Source API), and pipelines.

    from rmqstore.spark import register
    register(spark)
    df = spark.read.format("rmqstore.commitlog").load("/path/to/store")      # one row per record
    cq = spark.read.format("rmqstore.consumequeue").load("/path/to/store")   # one row per unit
    ix = spark.read.format("rmqstore.index").load("/path/to/store")          # one row per index entry

Commitlog partitions are byte ranges of segments (option ``splitSize``, default 128 MiB):
a task that starts mid-segment finds the next record boundary itself
(:mod:`rmqstore.ranges`), so each record is read exactly once whatever the split.
Consume-queue and index partitions are whole files.  Rows travel as Arrow batches.
Reading never writes to the store (read-only maps), so it is safe on a live broker's files.

Pipelines: :func:`rebuild` regenerates ``consumequeue/`` and ``index/`` from the commitlog,
byte for byte what the engine's dispatch writes.
"""

from .commitlog_source import COMMITLOG_SCHEMA, CommitLogDataSource
from .consumequeue_source import CONSUME_QUEUE_SCHEMA, ConsumeQueueDataSource
from .index_source import INDEX_SCHEMA, IndexDataSource
from .rebuild import RebuildResult, rebuild

__all__ = ["CommitLogDataSource", "COMMITLOG_SCHEMA", "ConsumeQueueDataSource", "CONSUME_QUEUE_SCHEMA",
           "IndexDataSource", "INDEX_SCHEMA", "register", "rebuild", "RebuildResult"]

_SOURCES = (CommitLogDataSource, ConsumeQueueDataSource, IndexDataSource)


def register(spark) -> None:
    """Make ``rmqstore.commitlog``, ``rmqstore.consumequeue`` and ``rmqstore.index`` available to
    ``spark.read.format``."""
    for source in _SOURCES:
        spark.dataSource.register(source)
