"""``rmqstore.commitlog``: one DataFrame row per commitlog message record.

A task reads one byte range of one segment: :func:`rmqstore.format.ranges.read_range` finds the
records that start in it (the lean walk: sizes, offsets, CRC), and :func:`records_to_batch`
turns them into an Arrow batch *column by column*, not record by record.  Decoding each
record into Python objects (``decode_record``, ``str(Address)``, ``parse_properties``)
costs ~60 us a record; Spark then converts those objects back into Arrow.  Instead:

* every fixed field is one numpy gather: the record starts are an ``int64`` array, a
  field at a fixed position is ``u8[starts + position + arange(width)]`` viewed as a
  big-endian int.  Positions after the born host depend on the host sizes (IPv4 8 bytes,
  IPv6 20), so they are arrays too (``sys_flag`` bits, gathered first);
* body, topic and properties are contiguous in no buffer, so their bytes are joined
  from ``memoryview`` slices (one C-level copy each) and wrapped as Arrow binary/string
  arrays with computed offsets -- no Python ``bytes``/``str`` per record.  Topic and
  properties are validated as UTF-8 by Arrow; a record that is not raises
  :class:`~rmqstore.common.errors.CorruptRecordError` naming its offset, as ``decode_record`` does;
* hosts are few: the 8-byte IPv4 host values are made unique with numpy, each unique one
  is formatted once (``str(Address)``) and the column is a ``take``; IPv6 hosts (rare)
  are formatted one by one;
* msgId is the store host and the physical offset in upper-case hex: a lookup table over
  the gathered bytes;
* the properties map is built with Arrow compute (split on ``\\x02``, then on the first
  ``\\x01``), keeping :func:`~rmqstore.format.properties.parse_properties`' rules: a pair with
  an empty name or value is skipped, a repeated name keeps its first position and its
  last value (rows with repeats, which Arrow cannot express cheaply, are parsed in Python).

Every value equals ``rmqstore dump``'s (``tests/spark/test_spark.py`` checks each field on
every fixture).  Batches hold at most ``BATCH_ROWS`` rows / ``BATCH_BYTES`` record bytes.

That is the pure path.  Where the compiled ``rmqstore._native._cdecode`` is built (and neither
``RMQSTORE_PURE`` nor the option ``native=false`` asks for the pure path), a task decodes its
range in C straight into the batches' buffers instead (:mod:`rmqstore.spark.commitlog_native`).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

import numpy as np
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..common import native as _native_switch
from ..common.errors import CorruptRecordError, StoreError
from ..format.layout import (MESSAGE_FIELDS, MESSAGE_MAGIC_CODE_V2, PHYSICAL_OFFSET_POSITION, SYSFLAG_POSITION,
                             message_field_position)
from ..format.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, parse_properties
from ..format.ranges import read_range
from ..format.record import Address
from ..read.scan import find_commitlog_dir, list_segments
from ..format.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from ._columns import arrow_schema, layout_columns
from .commitlog_native import native_batches
from ._options import source_paths

__all__ = ["CommitLogDataSource", "COMMITLOG_SCHEMA", "register", "CommitLogPartition", "records_to_batch"]

#: where the fixed fields before the born host start (the same for every record)
_AT = {name: message_field_position(name) for name in ("body_crc", "queue_id", "flag", "queue_offset", "born_timestamp")}

#: every field of the layout table (hosts as "ip:port"), plus what the dump adds
COMMITLOG_SCHEMA = ", ".join(
    ["store string", "segment string", "offset bigint"]
    + layout_columns(f for f in MESSAGE_FIELDS if f.name != "properties")
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
        self.paths = source_paths(options, "rmqstore.commitlog")
        raw_split = options.get("splitSize", str(DEFAULT_SPLIT))
        try:
            self.split = int(raw_split)
        except (TypeError, ValueError):
            self.split = 0
        if self.split <= 0:
            raise StoreError(f"rmqstore.commitlog: splitSize must be a positive number of bytes, got {raw_split!r}")
        self.with_body = options.get("body", "true").lower() != "false"
        #: option native=false: the pure path (RMQSTORE_PURE=1 in the workers' environment does the same)
        self.native = options.get("native", "true").lower() != "false"

    def partitions(self):
        return _partitions(self.paths, self.split)

    def read(self, partition: CommitLogPartition):
        with open(partition.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return
            buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
            try:
                mod = _native_switch.module("_cdecode", self.native)
                if mod is not None:
                    yield from native_batches(mod, buf, partition.base, partition.start, partition.end,
                                              store=partition.store, segment=os.path.basename(partition.path),
                                              with_body=self.with_body, schema_ddl=COMMITLOG_SCHEMA,
                                              max_rows=BATCH_ROWS, max_bytes=NATIVE_BATCH_BYTES,
                                              properties_map=_properties_map)
                    return
                spans = read_range(buf, partition.base, partition.start, partition.end).records
                n = len(spans)
                offsets = np.fromiter((s.offset for s in spans), dtype=np.int64, count=n)
                crc_ok = np.fromiter((bool(s.crc_ok) for s in spans), dtype=bool, count=n)
                sizes = np.fromiter((s.total_size for s in spans), dtype=np.int64, count=n)
                seg = os.path.basename(partition.path)
                for a, b in _chunks(sizes):
                    yield records_to_batch(buf, partition.base, offsets[a:b], crc_ok[a:b], store=partition.store,
                                           segment=seg, with_body=self.with_body)
            finally:
                buf.close()


BATCH_ROWS = 65536
BATCH_BYTES = 64 * 1024 * 1024
#: the compiled path's batches are smaller: each is a fresh buffer per column, and buffers of a few MiB
#: are reused by the allocator where 64 MiB ones are mapped and unmapped (page faults) every time
NATIVE_BATCH_BYTES = 8 * 1024 * 1024


def _chunks(sizes):
    """``(first, end)`` row ranges of at most BATCH_ROWS rows and about BATCH_BYTES record bytes."""
    ends = np.cumsum(sizes)
    first = 0
    while first < len(sizes):
        done = ends[first - 1] if first else 0
        end = min(int(np.searchsorted(ends, done + BATCH_BYTES, side="right")), first + BATCH_ROWS, len(sizes))
        end = max(end, first + 1)
        yield first, end
        first = end


# -- column building --------------------------------------------------------------------------------

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def _be(u8, pos, width: int):
    """The big-endian signed ints of ``width`` bytes at each position of ``pos``."""
    if width == 1:
        return u8[pos].view(np.int8)
    return u8[pos[:, None] + np.arange(width)].view(f">i{width}").ravel()


def _joined(buf, starts, lengths):
    """Bytes ``buf[s:s+n]`` of every row joined, and Arrow offsets (int32) into them."""
    mv = memoryview(buf)
    try:
        data = b"".join([mv[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist())])
    finally:
        mv.release()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return data, offsets


def _gathered(u8, starts, lengths):
    """The same as :func:`_joined` with numpy index arithmetic (for short values: topic, properties)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    idx = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
    return u8[idx].tobytes(), offsets.astype(np.int32)


def _var_array(pa, typ, buf, starts, lengths, where, u8=None, records=None):
    """A binary/string Arrow array of ``buf[s:s+n]`` per row; with ``u8``, gathered by numpy.

    A string value that is not UTF-8 raises CorruptRecordError naming its record's
    physical offset (from ``records``)."""
    data, offsets = _joined(buf, starts, lengths) if u8 is None else _gathered(u8, starts, lengths)
    arr = pa.Array.from_buffers(typ, len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if typ == pa.string():
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            _raise_not_utf8(buf, starts, lengths, where, records)
            raise
    return arr


def _raise_not_utf8(buf, starts, lengths, where, records):
    """Raise CorruptRecordError for the first value that is not UTF-8 (the slow path)."""
    for s, n, record in zip(starts.tolist(), lengths.tolist(), records.tolist()):
        try:
            bytes(buf[s:s + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"{where} of the record is not UTF-8: {exc.reason}", record) from None


def _host_column(pa, u8, pos, v6, ports):
    """``"ip:port"`` / ``"[v6]:port"`` strings of the hosts at ``pos`` (v6: row is an IPv6 host)."""
    out = np.empty(len(pos), dtype=object)
    v4 = ~v6
    if v4.any():
        raw = u8[pos[v4][:, None] + np.arange(8)].copy().view(np.uint64).ravel()
        uniq, inverse = np.unique(raw, return_inverse=True)
        names = np.array([str(Address(bytes(k.tobytes()[:4]), int.from_bytes(k.tobytes()[4:], "big", signed=True)))
                          for k in uniq], dtype=object)
        out[v4] = names[inverse.ravel()]
    for i in np.flatnonzero(v6).tolist():
        out[i] = str(Address(u8[pos[i]:pos[i] + 16].tobytes(), int(ports[i])))
    return pa.array(out, type=pa.string())


def _msg_id_column(pa, u8, store_pos, store_v6, phys_pos):
    """Offset msgIds: store IP + port + physical offset field, upper-case hex."""
    n = len(store_pos)
    width = np.where(store_v6, 20, 8)
    idx_len = width + 8
    # the raw id bytes of every row, concatenated: host bytes then the 8 physical-offset bytes
    row_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(idx_len, out=row_start[1:])
    k = np.arange(row_start[-1]) - np.repeat(row_start[:-1], idx_len)
    rows = np.repeat(np.arange(n), idx_len)
    host_w = width[rows]
    src = np.where(k < host_w, store_pos[rows] + k, phys_pos[rows] + (k - host_w))
    raw = u8[src]
    hexed = np.empty(2 * len(raw), dtype=np.uint8)
    hexed[0::2] = _HEX[raw >> 4]
    hexed[1::2] = _HEX[raw & 15]
    offsets = (2 * row_start).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(hexed)])


def _properties_map(pa, props):
    """``map<string,string>`` with :func:`parse_properties`' rules (see the module doc)."""
    import pyarrow.compute as pc

    n = len(props)
    segs = pc.split_pattern(props, PROPERTY_SEPARATOR)
    flat = pc.list_flatten(segs)
    parents = pc.list_parent_indices(segs)
    pairs = pc.split_pattern(flat, NAME_VALUE_SEPARATOR, max_splits=1)
    two = pc.equal(pc.list_value_length(pairs), 2)
    pairs, parents = pairs.filter(two), parents.filter(two)
    keys = pc.list_element(pairs, 0)
    values = pc.list_element(pairs, 1)
    ok = pc.and_(pc.greater(pc.utf8_length(keys), 0), pc.greater(pc.utf8_length(values), 0))
    keys, values, parents = keys.filter(ok), values.filter(ok), parents.filter(ok).to_numpy()
    counts = np.bincount(parents, minlength=n) if len(parents) else np.zeros(n, dtype=np.int64)
    groups = pa.table({"p": parents, "k": keys}).group_by(["p", "k"]).aggregate([]).num_rows
    if groups != len(parents):  # a repeated name in some row: those rows the dict way
        return pa.array([list(parse_properties(s).items()) for s in props.to_pylist()],
                        type=pa.map_(pa.string(), pa.string()))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), keys, values)


def records_to_batch(buf, base: int, offset, crc_ok, *, store: str, segment: str, with_body: bool = True):
    """One Arrow batch (schema :data:`COMMITLOG_SCHEMA`) of the message records of ``buf`` at ``offset``.

    ``offset`` (int64 array) are physical offsets of whole, structurally checked records
    (the spans :func:`~rmqstore.format.ranges.read_range` yields), ``crc_ok`` (bool array) their
    CRC verdicts; ``base`` is the physical offset of ``buf[0]``.
    """
    import pyarrow as pa

    n = len(offset)
    u8 = np.frombuffer(buf, dtype=np.uint8)
    at = offset - base
    total = _be(u8, at, 4)
    magic = _be(u8, at + 4, 4)
    sys_flag = _be(u8, at + SYSFLAG_POSITION, 4)
    born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
    born_at = at + 48
    born_ip = np.where(born_v6, 16, 4)
    store_ts_at = born_at + born_ip + 4
    store_at = store_ts_at + 8
    store_ip = np.where(store_v6, 16, 4)
    reconsume_at = store_at + store_ip + 4
    body_len = _be(u8, reconsume_at + 12, 4).astype(np.int64)
    body_at = reconsume_at + 16
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    topic_len_at = body_at + body_len
    # the walk checked that 2 + 2 bytes follow the body in every record (V1 too)
    topic_len = np.where(v2, _be(u8, topic_len_at, 2), _be(u8, topic_len_at, 1)).astype(np.int64)
    topic_at = topic_len_at + np.where(v2, 2, 1)
    props_len = _be(u8, topic_at + topic_len, 2).astype(np.int64)
    props_at = topic_at + topic_len + 2
    columns = {
        "store": pa.repeat(pa.scalar(store, pa.string()), n),
        "segment": pa.repeat(pa.scalar(segment, pa.string()), n),
        "offset": pa.array(offset),
        "total_size": pa.array(total.astype(np.int32)),
        "magic_code": pa.array(magic.astype(np.int32)),
        "body_crc": pa.array(_be(u8, at + _AT["body_crc"], 4).astype(np.int32)),
        "queue_id": pa.array(_be(u8, at + _AT["queue_id"], 4).astype(np.int32)),
        "flag": pa.array(_be(u8, at + _AT["flag"], 4).astype(np.int32)),
        "queue_offset": pa.array(_be(u8, at + _AT["queue_offset"], 8).astype(np.int64)),
        "physical_offset": pa.array(_be(u8, at + PHYSICAL_OFFSET_POSITION, 8).astype(np.int64)),
        "sys_flag": pa.array(sys_flag.astype(np.int32)),
        "born_timestamp": pa.array(_be(u8, at + _AT["born_timestamp"], 8).astype(np.int64)),
        "born_host": _host_column(pa, u8, born_at, born_v6, _be(u8, born_at + born_ip, 4)),
        "store_timestamp": pa.array(_be(u8, store_ts_at, 8).astype(np.int64)),
        "store_host": _host_column(pa, u8, store_at, store_v6, _be(u8, store_at + store_ip, 4)),
        "reconsume_times": pa.array(_be(u8, reconsume_at, 4).astype(np.int32)),
        "prepared_transaction_offset": pa.array(_be(u8, reconsume_at + 4, 8).astype(np.int64)),
        "body": (_var_array(pa, pa.binary(), buf, body_at, body_len, "body") if with_body
                 else pa.nulls(n, pa.binary())),
        "topic": _var_array(pa, pa.string(), buf, topic_at, topic_len, "topic", u8, offset),
    }
    props = _var_array(pa, pa.string(), buf, props_at, props_len, "properties", u8, offset)
    columns["properties"] = _properties_map(pa, props)
    columns["properties_raw"] = props
    columns["msg_id"] = _msg_id_column(pa, u8, store_at, store_v6, at + PHYSICAL_OFFSET_POSITION)
    columns["crc_ok"] = pa.array(crc_ok)
    columns["version"] = pa.array(np.where(v2, 2, 1).astype(np.int32))
    schema = arrow_schema(COMMITLOG_SCHEMA)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


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
