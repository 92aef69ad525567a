"""``export``: every message record of one or more stores, as Parquet files any tool can read.

    from rmqstore.spark.export import export
    result = export(spark, ["/data/broker-a/store"], "/tmp/messages.parquet", partition_by=["topic"])
    pandas.read_parquet(result.path)

The rows are exactly those of the ``rmqstore.commitlog`` source -- one per message record,
blank records left out -- with its columns: ``store``, ``segment``, ``offset`` and every
field of the record layout (``body`` as binary, hosts as ``"ip:port"`` strings), the
properties both parsed (``properties``, a map) and as stored (``properties_raw``), the
offset ``msg_id``, ``crc_ok`` and ``version``.  That is the same information as
``rmqstore dump --json``'s message lines, typed instead of JSON-encoded, so a dump and an
export can be compared row for row (the test suite does).

``partition_by`` writes Hive-style folders (``topic=TopicA/...``); Parquet readers turn the
folder names back into a column (pyarrow as a dictionary-encoded string, pandas as a
category), so a partition column changes type on the way back.  With ``body=False`` the
``body`` column is null -- much smaller files when only the metadata matters.  The target
must not exist unless ``mode="overwrite"``.  Reading the stores never writes to them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

from ..common.errors import RmqStoreError
from .stats import commitlog_frame

__all__ = ["ExportResult", "export", "MODES", "OutputExistsError"]


class OutputExistsError(RmqStoreError, FileExistsError):
    """The export's folder exists and the mode says not to touch it (a FileExistsError to a program, the
    user's mistake -- exit 2 -- to the command line, not the system refusing the run)."""

#: Spark save modes accepted by :func:`export` (no "ignore": a silent no-op hides mistakes)
MODES = ("error", "overwrite", "append")


@dataclass(frozen=True)
class ExportResult:
    """Where the export went: the folder, its Parquet files and the rows they hold (from their footers)."""

    path: str
    files: tuple
    rows: int

    @property
    def bytes(self) -> int:
        return sum(os.path.getsize(f) for f in self.files)


def export(spark, paths: Iterable, out, *, body: bool = True, partition_by: Iterable[str] | str | None = None,
           split_size: int | None = None, mode: str = "error") -> ExportResult:
    """Write every message record of ``paths`` to Parquet under ``out``; see the module doc."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    out = os.path.abspath(os.fspath(out))
    if mode == "error" and os.path.exists(out):
        raise OutputExistsError(f"{out} already exists (export with mode='overwrite' to replace it)")
    columns = _partition_columns(partition_by)
    df = commitlog_frame(spark, paths, body=body, split_size=split_size)
    unknown = [c for c in columns if c not in df.columns]
    if unknown:
        raise ValueError(f"cannot partition by {unknown}: not columns of rmqstore.commitlog ({', '.join(df.columns)})")
    writer = df.write.mode("errorifexists" if mode == "error" else mode)
    if columns:
        writer = writer.partitionBy(*columns)
    writer.parquet(out)
    return _result(out)


def _partition_columns(partition_by) -> list[str]:
    if partition_by is None:
        return []
    if isinstance(partition_by, str):
        return [c.strip() for c in partition_by.split(",") if c.strip()]
    return list(partition_by)


def _result(out: str) -> ExportResult:
    import pyarrow.parquet as pq

    files = sorted(os.path.join(d, n) for d, _, names in os.walk(out) for n in names
                   if n.endswith(".parquet") and not n.startswith((".", "_")))
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return ExportResult(out, tuple(files), rows)
