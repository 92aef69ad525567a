"""``rmqstore.consumequeue``: one DataFrame row per consume-queue unit.

A consume queue is a chain of fixed-size files of 20-byte units, so a file is a natural
partition: unit *n* of a queue sits at logical byte ``n * 20``, a file named ``F`` holds
units ``F / 20`` on, and a task needs nothing but its own file to number its units.

What is *not* local to a file is where the queue's valid units begin and end.  RocketMQ
decides that once per queue, when it loads the store:

* the end -- ``ConsumeQueue#recover`` walks from the third-last file and stops at the
  first unit that is not ``offset >= 0 and size > 0`` (the unwritten zeros after the
  last unit, or damage); everything after it does not exist for readers;
* the beginning -- ``correctMinOffset``: the first unit that points at or after the
  commitlog's first byte (units of deleted segments are gone).

The driver therefore asks the engine's own :class:`~rmqstore.engine.consume_queue.ConsumeQueue`
(mapped read-only, so recovery only moves positions in memory) for each queue's
``[min, max)`` and hands every task a file *and* the slice of it that lies in that range;
the task then reads units with the engine's :func:`~rmqstore.engine.consume_queue.iter_units`.
Rules are not derived a second time here.

Leading *pre-blank* units ``(0, Integer.MAX_VALUE, 0)`` -- RocketMQ's ``fillPreBlank``
filler when a queue's first file starts mid-file -- point at no message; they are not
rows (as ``rmqstore verify`` skips them).

Columns: ``store, topic, queue_id, file, queue_offset`` (the unit's number), then the
fields of :data:`~rmqstore.format.layout.CONSUME_QUEUE_UNIT` (``commit_log_offset, size,
tags_code``).  Rows travel as Arrow batches; files are mapped read-only.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..engine.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue, consume_queue_ids, iter_units
from ..common.errors import StoreError
from ..format.layout import CONSUME_QUEUE_UNIT
from ..read.scan import find_commitlog_dir, list_segments
from ..files.store_dir import resolve_store_root
from ..files.store_sizes import consume_queue_file_size
from ._columns import arrow_schema, layout_columns
from ._options import source_paths

__all__ = ["ConsumeQueueDataSource", "CONSUME_QUEUE_SCHEMA", "ConsumeQueuePartition",
           "PRE_BLANK_UNIT"]

#: ``fillPreBlank``'s filler unit
PRE_BLANK_UNIT = (0, 0x7FFFFFFF, 0)

CONSUME_QUEUE_SCHEMA = ", ".join(["store string", "topic string", "queue_id int", "file string",
                                  "queue_offset bigint", *layout_columns(CONSUME_QUEUE_UNIT.fields)])


@dataclass
class ConsumeQueuePartition(InputPartition):
    store: str
    topic: str
    queue_id: int
    path: str
    file_from_offset: int
    start: int  # first byte of this file inside the queue's [min, max)
    end: int  # end of that slice in this file
    queue_first: bool  # the slice starts at the queue's min offset (pre-blanks may lead)


def commitlog_min_offset(root: str) -> int:
    """Offset of the first commitlog byte still on disk (0 without a commitlog)."""
    try:
        segments = list_segments(find_commitlog_dir(root))
    except StoreError:
        return 0
    return segments[0].offset if segments else 0


def queue_partitions(store: str, root: str, topic: str, queue_id: int, file_size: int, phy_min: int
                     ) -> list[ConsumeQueuePartition]:
    """One partition per file of one queue, each with its slice of the engine's ``[min, max)``."""
    cq = ConsumeQueue(root, topic, queue_id, file_size, read_only=True)
    try:
        cq.load()
        cq.recover()
        cq.correct_min_offset(phy_min)
        lo, hi = cq.min_logic_offset, cq.mapped_file_queue.get_max_offset()
        parts = []
        for mf in cq.mapped_file_queue.mapped_files:
            start = max(lo, mf.file_from_offset) - mf.file_from_offset
            end = min(hi, mf.file_from_offset + file_size) - mf.file_from_offset
            if start < end:
                parts.append(ConsumeQueuePartition(store, topic, queue_id, mf.file_name, mf.file_from_offset,
                                                   start, end, mf.file_from_offset + start == lo))
        return parts
    finally:
        cq.shutdown()


def _partitions(paths: list[str], file_size: int | None) -> list[ConsumeQueuePartition]:
    parts = []
    for store in paths:
        root = resolve_store_root(store)
        size = file_size or consume_queue_file_size(root)
        if size is None:
            continue  # no consume-queue files: no rows
        phy_min = commitlog_min_offset(root)
        for topic, qid in consume_queue_ids(root):
            parts.extend(queue_partitions(store, root, topic, qid, size, phy_min))
    return parts


def read_units(partition: ConsumeQueuePartition):
    """``(queue_offset, commit_log_offset, size, tags_code)`` of the valid units of one partition."""
    with open(partition.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return []
        buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        try:
            out = []
            leading = partition.queue_first
            for pos, offset, length, tags in iter_units(buf, partition.start, min(partition.end, size)):
                if leading and (offset, length, tags) == PRE_BLANK_UNIT:
                    continue
                leading = False
                out.append(((partition.file_from_offset + pos) // CQ_STORE_UNIT_SIZE, offset, length, tags))
            return out
        finally:
            buf.close()


class ConsumeQueueReader(DataSourceReader):
    def __init__(self, options):
        self.paths = source_paths(options, "rmqstore.consumequeue")
        self.file_size = int(options["fileSize"]) if options.get("fileSize") else None

    def partitions(self):
        return _partitions(self.paths, self.file_size)

    def read(self, partition: ConsumeQueuePartition):
        import pyarrow as pa

        units = read_units(partition)
        if not units:
            return
        n = len(units)
        qo, off, size, tags = (list(c) for c in zip(*units))
        cols = {"store": [partition.store] * n, "topic": [partition.topic] * n, "queue_id": [partition.queue_id] * n,
                "file": [os.path.basename(partition.path)] * n, "queue_offset": qo, "commit_log_offset": off,
                "size": size, "tags_code": tags}
        yield pa.RecordBatch.from_pydict(cols, schema=arrow_schema(CONSUME_QUEUE_SCHEMA))


class ConsumeQueueDataSource(DataSource):
    """``spark.read.format("rmqstore.consumequeue").load(STORE)`` (option ``fileSize`` overrides the
    consume-queue file size read off the files)."""

    @classmethod
    def name(cls):
        return "rmqstore.consumequeue"

    def schema(self):
        return CONSUME_QUEUE_SCHEMA

    def reader(self, schema):
        return ConsumeQueueReader(self.options)
