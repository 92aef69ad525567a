"""``rmqstore.index``: one DataFrame row per index entry.

An index file is self-contained: its header says how many entries it holds (the entry
counter starts at 1, entry 0 is never used) and every entry is 20 bytes at a fixed place
after the hash slots.  So a file is a partition, and a task reads its file with the
engine's own :class:`~rmqstore.engine.index.IndexFile` mapped read-only -- the same entries the
store's lookups walk, including its guard against a damaged counter that would reach
past the file.

The file size alone does not say how many slots and entries an index file has (``40 +
4*slots + 20*entries``); :func:`rmqstore.files.store_sizes.index_dimensions` reads them off the
files' contents (falling back to RocketMQ's ratio ``entries = 4 * slots`` when no file
holds a key) unless options ``hashSlotNum`` and ``indexNum`` say otherwise.

Columns: ``store, file, entry`` (the entry's number), the fields of
:data:`~rmqstore.format.layout.INDEX_ENTRY` (``key_hash, phy_offset, time_diff, prev_index``),
``slot`` (``key_hash % hashSlotNum``: the slot whose chain holds the entry), then the
file's header, the fields of :data:`~rmqstore.format.layout.INDEX_HEADER`, repeated on every
row so a ``groupBy("file")`` needs no join.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..common.errors import StoreError
from ..engine.index import IndexFile, index_file_size
from ..format.layout import INDEX_ENTRY, INDEX_HEADER
from ..files.store_dir import list_store_files, resolve_store_root
from ..files.store_sizes import index_dimensions
from ..files.store_paths import index_dir
from ._columns import arrow_schema, layout_columns
from ._options import source_paths

__all__ = ["IndexDataSource", "INDEX_SCHEMA", "IndexPartition", "read_index_entries"]

INDEX_SCHEMA = ", ".join(["store string", "file string", "entry int", *layout_columns(INDEX_ENTRY.fields),
                          "slot int", *layout_columns(INDEX_HEADER.fields)])

_ENTRY_NAMES = [f.name for f in INDEX_ENTRY.fields]
_HEADER_NAMES = [f.name for f in INDEX_HEADER.fields]


@dataclass
class IndexPartition(InputPartition):
    store: str
    path: str
    hash_slot_num: int
    index_num: int


def _partitions(paths: list[str], dims: tuple[int, int] | None) -> list[IndexPartition]:
    parts = []
    for store in paths:
        root = resolve_store_root(store)
        found = dims or index_dimensions(root)
        if found is None:
            continue  # no index files: no rows
        slots, num = found
        expected = index_file_size(slots, num)
        for f in list_store_files(index_dir(root), "index").check().files:
            if f.size != expected:
                raise StoreError(f"{f.path} is {f.size} bytes; with {slots} slots and {num} entries "
                                 f"an index file is {expected} bytes (options hashSlotNum / indexNum)")
            parts.append(IndexPartition(store, f.path, slots, num))
    return parts


def read_index_entries(partition: IndexPartition) -> tuple[dict, list[tuple]]:
    """The header (a dict of INDEX_HEADER fields) and entries ``(number, *INDEX_ENTRY fields)`` of one file."""
    f = IndexFile(partition.path, partition.hash_slot_num, partition.index_num, read_only=True)
    try:
        header = INDEX_HEADER.unpack_from(f.buf)._asdict()
        return header, list(f.entries())
    finally:
        f.shutdown()


class IndexReader(DataSourceReader):
    def __init__(self, options):
        self.paths = source_paths(options, "rmqstore.index")
        slots, num = options.get("hashSlotNum"), options.get("indexNum")
        if (slots is None) != (num is None):
            raise StoreError("rmqstore.index: give both hashSlotNum and indexNum, or neither")
        self.dims = (int(slots), int(num)) if slots is not None else None

    def partitions(self):
        return _partitions(self.paths, self.dims)

    def read(self, partition: IndexPartition):
        import pyarrow as pa

        header, entries = read_index_entries(partition)
        if not entries:
            return
        n = len(entries)
        columns = list(zip(*entries))
        cols = {"store": [partition.store] * n, "file": [os.path.basename(partition.path)] * n,
                "entry": list(columns[0])}
        for i, name in enumerate(_ENTRY_NAMES, start=1):
            cols[name] = list(columns[i])
        cols["slot"] = [h % partition.hash_slot_num for h in cols["key_hash"]]
        for name in _HEADER_NAMES:
            cols[name] = [header[name]] * n
        yield pa.RecordBatch.from_pydict(cols, schema=arrow_schema(INDEX_SCHEMA))


class IndexDataSource(DataSource):
    """``spark.read.format("rmqstore.index").load(STORE)``"""

    @classmethod
    def name(cls):
        return "rmqstore.index"

    def schema(self):
        return INDEX_SCHEMA

    def reader(self, schema):
        return IndexReader(self.options)
