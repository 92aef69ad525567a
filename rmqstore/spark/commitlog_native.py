"""The commitlog source's compiled path: a byte range decoded in C, straight into Arrow batches.

The pure path of ``rmqstore.commitlog`` walks a range with :func:`rmqstore.format.ranges.read_range`
(the lean walk, a Python step per record) and then gathers each column with numpy
(:func:`~rmqstore.spark.commitlog_source.records_to_batch`).  Here one call of the compiled
``rmqstore._native._cdecode`` does both for up to a batch of records: the strict walk with the body
CRC (the rule ``read_range`` applies, so a split reads each record once either way), and the
columns -- fixed fields as machine-order int arrays, body / topic / properties / msg_id as
one buffer each with int32 offsets, which Arrow wraps without copying again.  Python runs
per batch, not per record; only the hosts go through Python, once per distinct host.

The range rules are :func:`~rmqstore.format.ranges.read_range`'s, restated over batches: a range
that does not start at 0 finds its first record with
:func:`~rmqstore.format.ranges.find_record_start`; it emits the records that *start* before its
end; damage (a ``corrupt`` end) is skipped to the next record start, as the sequential read
resynchronises.  The Spark tests compare this path with the pure one row for row.
"""

from __future__ import annotations

import numpy as np

from ..format.layout import MESSAGE_MAGIC_CODE_V2
from ..format.ranges import find_record_start
from ..format.record import Address
from ._columns import arrow_schema

__all__ = ["native_batches", "host_text"]


def host_text(ip: bytes, port: int) -> str:
    """A host as the dump and the pure source render it (``str(Address)``)."""
    return str(Address(ip, port))


def native_batches(mod, buf, base: int, start: int, end: int, *, store: str, segment: str, with_body: bool,
                   schema_ddl: str, max_rows: int, max_bytes: int, properties_map):
    """Arrow batches of the records of ``buf`` (a segment at physical ``base``) starting in ``[start, end)``."""
    p = start if start == 0 else find_record_start(buf, base, start)
    while p is not None and p < end:
        d = mod.decode(buf, p, base, -1, end, crc=True, strict=True, max_records=max_rows, max_bytes=max_bytes,
                       host=host_text, joined=True, bodies=with_body)
        if d["count"]:
            yield columns_to_batch(d, base, store=store, segment=segment, with_body=with_body,
                                   schema_ddl=schema_ddl, properties_map=properties_map)
        kind, q = d["kind"], d["end"]
        if kind is None:
            if q >= end:  # the next range's first record
                return
            p = q  # a batch is full: go on
        elif kind == "corrupt":  # damage: resynchronise at the next record start
            p = find_record_start(buf, base, q + 1)
        else:  # the segment ends here
            return


def _ints(pa, raw, dtype):
    return pa.array(np.frombuffer(raw, dtype=dtype))


def _var(pa, typ, n, data, offsets):
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def columns_to_batch(d, base: int, *, store: str, segment: str, with_body: bool, schema_ddl: str, properties_map):
    """One Arrow batch (the source's schema) from the joined columns of one ``_cdecode.decode`` call."""
    import pyarrow as pa

    n = d["count"]
    magic = np.frombuffer(d["magic_code"], dtype=np.int32)
    columns = {
        "store": pa.repeat(pa.scalar(store, pa.string()), n),
        "segment": pa.repeat(pa.scalar(segment, pa.string()), n),
        "offset": pa.array(np.frombuffer(d["position"], dtype=np.int64) + base),
        "magic_code": pa.array(magic),
        "born_host": pa.array(d["born_host"], type=pa.string()),
        "store_host": pa.array(d["store_host"], type=pa.string()),
        "body": (_var(pa, pa.binary(), n, d["body"], d["body_offsets"]) if with_body
                 else pa.nulls(n, pa.binary())),
        "topic": _var(pa, pa.string(), n, d["topic"], d["topic_offsets"]),
        "properties_raw": _var(pa, pa.string(), n, d["properties"], d["properties_offsets"]),
        "msg_id": _var(pa, pa.string(), n, d["msg_id"], d["msg_id_offsets"]),
        "crc_ok": pa.array(np.frombuffer(d["crc_ok"], dtype=np.bool_)),
        "version": pa.array(np.where(magic == MESSAGE_MAGIC_CODE_V2, 2, 1).astype(np.int32)),
    }
    for name in ("total_size", "body_crc", "queue_id", "flag", "sys_flag", "reconsume_times"):
        columns[name] = _ints(pa, d[name], np.int32)
    for name in ("queue_offset", "physical_offset", "born_timestamp", "store_timestamp",
                 "prepared_transaction_offset"):
        columns[name] = _ints(pa, d[name], np.int64)
    columns["properties"] = properties_map(pa, columns["properties_raw"])
    schema = arrow_schema(schema_ddl)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
