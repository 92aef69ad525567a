"""Spark data sources over store files (Spark 4's Python Data Source API), and pipelines.

    from rmqstore.spark import register
    register(spark)
    df = spark.read.format("rmqstore.commitlog").load("/path/to/store")      # one row per record
    cq = spark.read.format("rmqstore.consumequeue").load("/path/to/store")   # one row per unit
    ix = spark.read.format("rmqstore.index").load("/path/to/store")          # one row per index entry

Commitlog partitions are byte ranges of segments (option ``splitSize``, default 128 MiB):
a task that starts mid-segment finds the next record boundary itself
(:mod:`rmqstore.format.ranges`), so each record is read exactly once whatever the split.
Consume-queue and index partitions are whole files.  Rows travel as Arrow batches.
Reading never writes to the store (read-only maps), so it is safe on a live broker's files.

Pipelines, each a module with a function of its name (and ``rmqstore spark ...`` on the
command line): :func:`rmqstore.spark.verify.verify` (the checks of ``rmqstore verify``, run
as Spark jobs, same report), :func:`rmqstore.spark.stats.stats` (per topic and queue:
counts, bytes, size histogram, store-latency percentiles, throughput series),
:func:`rmqstore.spark.rebuild.rebuild` (``consumequeue/`` and ``index/`` regenerated from the
commitlog, byte for byte what the engine's dispatch writes) and
:func:`rmqstore.spark.export.export` (records to Parquet).

Importing this package does not import PySpark (the ``rmqstore`` command line loads it for
``rmqstore spark`` only): the names below are loaded on first use.
"""

from importlib import import_module

__all__ = ["CommitLogDataSource", "COMMITLOG_SCHEMA", "ConsumeQueueDataSource", "CONSUME_QUEUE_SCHEMA",
           "IndexDataSource", "INDEX_SCHEMA", "register", "RebuildResult", "StoreStats", "ExportResult",
           "local_session"]

#: exported name -> the submodule that defines it (imported when the name is first used)
_LAZY = {
    "CommitLogDataSource": "commitlog_source", "COMMITLOG_SCHEMA": "commitlog_source",
    "ConsumeQueueDataSource": "consumequeue_source", "CONSUME_QUEUE_SCHEMA": "consumequeue_source",
    "IndexDataSource": "index_source", "INDEX_SCHEMA": "index_source",
    "RebuildResult": "rebuild", "StoreStats": "stats", "ExportResult": "export",
    "local_session": "session",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark) -> None:
    """Make ``rmqstore.commitlog``, ``rmqstore.consumequeue`` and ``rmqstore.index`` available to
    ``spark.read.format``."""
    for name in ("CommitLogDataSource", "ConsumeQueueDataSource", "IndexDataSource"):
        spark.dataSource.register(__getattr__(name))
