"""``rmqstore.commitlog``: one DataFrame row per commitlog message record."""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..layout import MESSAGE_FIELDS
from ..properties import parse_properties
from ..ranges import read_range
from ..record import create_message_id, decode_record
from ..scan import find_commitlog_dir, list_segments

__all__ = ["CommitLogDataSource", "COMMITLOG_SCHEMA", "register", "CommitLogPartition"]

_SPARK_TYPES = {"i8": "int", "i16": "int", "i32": "int", "i64": "bigint", "host": "string",
                "blob32": "binary", "str8": "string", "str16": "string"}

#: every field of the layout table (hosts as "ip:port"), plus what the dump adds
COMMITLOG_SCHEMA = ", ".join(
    ["store string", "segment string", "offset bigint"]
    + [f"{f.name} {_SPARK_TYPES[f.kind]}" for f in MESSAGE_FIELDS if f.name != "properties"]
    + ["properties map<string,string>", "properties_raw string", "msg_id string", "crc_ok boolean",
       "version int"])

_FIELD_NAMES = [f.name for f in MESSAGE_FIELDS if f.name != "properties"]
DEFAULT_SPLIT = 128 * 1024 * 1024


@dataclass
class CommitLogPartition(InputPartition):
    store: str
    path: str
    base: int
    start: int
    end: int


def _partitions(paths, split: int):
    parts = []
    for store in paths:
        for seg in list_segments(find_commitlog_dir(store)):
            for start in range(0, max(seg.size, 1), split):
                parts.append(CommitLogPartition(store, seg.path, seg.offset, start, min(start + split, seg.size)))
    return parts


class CommitLogReader(DataSourceReader):
    def __init__(self, options):
        raw = options.get("paths") or options.get("path")
        if not raw:
            raise ValueError("rmqstore.commitlog needs a store path: .load(PATH) or .option('paths', 'A,B')")
        self.paths = [p for p in (raw.split(",") if "," in raw else [raw]) if p]
        self.split = int(options.get("splitSize", DEFAULT_SPLIT))
        self.with_body = options.get("body", "true").lower() != "false"

    def partitions(self):
        return _partitions(self.paths, self.split)

    def read(self, partition: CommitLogPartition):
        import pyarrow as pa

        with open(partition.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return
            buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
            try:
                spans = read_range(buf, partition.base, partition.start, partition.end).records
                cols = {name: [] for name in ["store", "segment", "offset", *_FIELD_NAMES, "properties",
                                              "properties_raw", "msg_id", "crc_ok", "version"]}
                seg = os.path.basename(partition.path)
                for span in spans:
                    rec = decode_record(buf, span.offset - partition.base)
                    cols["store"].append(partition.store)
                    cols["segment"].append(seg)
                    cols["offset"].append(span.offset)
                    for name in _FIELD_NAMES:
                        value = getattr(rec, name)
                        if name in ("born_host", "store_host"):
                            value = str(value)
                        elif name == "body" and not self.with_body:
                            value = None
                        cols[name].append(value)
                    cols["properties"].append(list(parse_properties(rec.properties).items()))
                    cols["properties_raw"].append(rec.properties)
                    cols["msg_id"].append(create_message_id(rec.store_host, rec.physical_offset))
                    cols["crc_ok"].append(bool(span.crc_ok))
                    cols["version"].append(2 if rec.magic_code == -626843477 else 1)
            finally:
                buf.close()
        if spans:
            yield pa.RecordBatch.from_pydict(cols, schema=_arrow_schema())


def _arrow_schema():
    import pyarrow as pa

    types = {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string(), "binary": pa.binary(),
             "boolean": pa.bool_(), "map<string,string>": pa.map_(pa.string(), pa.string())}
    fields = []
    for part in COMMITLOG_SCHEMA.split(", "):
        name, typ = part.split(" ", 1)
        fields.append(pa.field(name, types[typ]))
    return pa.schema(fields)


class CommitLogDataSource(DataSource):
    """``spark.read.format("rmqstore.commitlog").load(STORE)``"""

    @classmethod
    def name(cls):
        return "rmqstore.commitlog"

    def schema(self):
        return COMMITLOG_SCHEMA

    def reader(self, schema):
        return CommitLogReader(self.options)


def register(spark) -> None:
    """Make ``rmqstore.commitlog`` available to ``spark.read.format``."""
    spark.dataSource.register(CommitLogDataSource)
