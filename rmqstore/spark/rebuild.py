"""``rebuild``: a store's consume queues and index files regenerated from its commitlog, on Spark.

Everything but the commitlog is derived data: the engine's dispatch (``ReputMessageService``)
walks the log once, in order, and hands every record to the consume queue and the index.
That walk is sequential only in appearance.  What it *computes* per record -- topic,
queue, size, tags code (the delivery time on ``SCHEDULE_TOPIC_XXXX``), the index keys --
depends on that record alone; only *where* the results land depends on order.  So:

1. **Decode in parallel.**  The ``rmqstore.commitlog`` source reads the log in byte-range
   partitions; a ``mapInArrow`` task turns each record into its dispatch facts with the
   engine's own :func:`~rmqstore.engine.dispatch.dispatch_request`.
2. **Check the log is whole** (driver, one small row per segment).  Dispatch stops at the
   first bytes that are not a record, so a rebuild of a log with a hole in it would differ
   from any real dispatch: every segment's records must run back to back from position 0
   and be followed by a blank (on to the next segment) or the end of the log.  A damaged
   log is refused with the offset where dispatch would stop (``rmqstore verify`` tells more).
3. **Consume queues: one queue per task.**  A queue's units are its records in log order;
   a task appends them with the engine's :class:`~rmqstore.engine.consume_queue.ConsumeQueue` --
   file size and naming, pre-blank filling, rollover are the engine's code, not a copy.
4. **Index: one file per task.**  An index file takes keys until it holds ``indexNum - 1``
   entries, then the next file starts.  So entry *j* of the whole log (keys numbered in log
   order, from a per-segment prefix sum) lands in file ``j // (indexNum - 1)``: file
   boundaries are known before any file is written, and every file is built in parallel
   with the engine's :class:`~rmqstore.engine.index.IndexFile`.  The one thing a file needs from
   its predecessor -- a new file starts with begin = end = the previous file's *last*
   entry's offset and store time -- is that entry, sent to both files.  The engine creates
   the next file at the next dispatched record, so a last file that is exactly full gets
   an empty successor when any record follows its last entry (and a log with messages
   but no keys gets one empty file).

Index file names.  RocketMQ names an index file by the wall-clock time of its creation
(``yyyyMMddHHmmssSSS``), which no rebuild can know.  Ours: the store timestamp of the
file's first entry (an empty file: the end timestamp it starts from; an index of no keys:
the first record's store time), formatted in ``tz`` (UTC by default), plus 1 ms when
needed so that names strictly increase in file order -- the order the engine loads them
in.  Contents, file by file in name order, are the engine's byte for byte.

Writes go only into ``out_dir`` (``consumequeue/`` and ``index/``, which must not hold
files yet); the input store is read through read-only maps.  Executors write ``out_dir``
directly, so on a cluster it must be a path every executor sees (it always is with
``local[*]``).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from datetime import timezone
from types import SimpleNamespace

from ..common.config import StoreConfig
from ..engine.consume_queue import ConsumeQueue
from ..engine.dispatch import dispatch_request
from ..common.errors import StoreError
from ..engine.index import IndexFile, index_file_name
from ..format.properties import KEY_SEPARATOR
from ..read.scan import find_commitlog_dir, list_segments
from ..files.store_dir import resolve_store_root
from ..files.store_sizes import infer_config
from ..files.store_paths import CONSUME_QUEUE_DIR, INDEX_DIR, consume_queue_root, index_dir as index_dir_of
from ..format.sysflag import gets_index_entries, gets_queue_unit
from ..format.walk import End, step
from ._columns import arrow_schema

__all__ = ["rebuild", "RebuildResult", "index_keys", "DISPATCH_SCHEMA", "DEFAULT_SPLIT"]

#: what a task computes per record (the dispatch request, plus the segment it lies in)
DISPATCH_SCHEMA = ("offset bigint, segment bigint, size int, topic string, queue_id int, queue_offset bigint, "
                   "store_timestamp bigint, tags_code bigint, cq boolean, keys array<string>")
_INPUT_COLUMNS = ["physical_offset", "segment", "total_size", "topic", "queue_id", "queue_offset", "sys_flag",
                  "store_timestamp", "prepared_transaction_offset", "properties_raw"]
DEFAULT_SPLIT = 64 * 1024 * 1024
_TEMP_PREFIX = ".rebuild-"


@dataclass
class RebuildResult:
    """What :func:`rebuild` wrote (paths relative to ``out_dir``) and read."""

    out_dir: str
    records: int = 0
    units: int = 0
    index_entries: int = 0
    consume_queue_files: list[str] = field(default_factory=list)
    index_files: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"rebuilt {self.out_dir}: {self.records} records -> {self.units} units in "
                f"{len(self.consume_queue_files)} consume-queue files, {self.index_entries} index entries in "
                f"{len(self.index_files)} index files")


def index_keys(req) -> list[str]:
    """The index keys of one dispatch request, in the order ``IndexService#buildIndex`` adds them:
    ``topic#UNIQ_KEY``, then ``topic#k`` for each non-empty space-separated KEYS token; none for a
    rolled-back transaction record."""
    if not gets_index_entries(req.sys_flag):
        return []
    keys = [f"{req.topic}#{req.uniq_key}"] if req.uniq_key else []
    if req.keys:
        keys += [f"{req.topic}#{k}" for k in req.keys.split(KEY_SEPARATOR) if k]
    return keys


# -- 1. dispatch facts, in tasks --------------------------------------------------------------------

def _dispatch_batches(delay_levels: dict[int, int]):
    def run(batches):
        import pyarrow as pa

        schema = arrow_schema(DISPATCH_SCHEMA)
        for batch in batches:
            cols = {name: [] for name in schema.names}
            for row in batch.to_pylist():
                rec = SimpleNamespace(**row, properties=row["properties_raw"])
                req = dispatch_request(rec, delay_levels)
                for name, value in (("offset", req.commit_log_offset), ("segment", row["segment"]),
                                    ("size", req.msg_size), ("topic", req.topic), ("queue_id", req.queue_id),
                                    ("queue_offset", req.consume_queue_offset),
                                    ("store_timestamp", req.store_timestamp), ("tags_code", req.tags_code),
                                    ("cq", gets_queue_unit(req.sys_flag)), ("keys", index_keys(req))):
                    cols[name].append(value)
            yield pa.RecordBatch.from_pydict(cols, schema=schema)
    return run


def _dispatch_frame(spark, root: str, config: StoreConfig, split: int):
    from pyspark.sql import functions as F

    src = (spark.read.format("rmqstore.commitlog").option("body", "false").option("splitSize", split).load(root)
           .withColumn("segment", F.col("segment").cast("bigint")).select(*_INPUT_COLUMNS))
    return src.mapInArrow(_dispatch_batches(config.delay_level_table()), DISPATCH_SCHEMA)


# -- 2. the log must be whole -------------------------------------------------------------------------

def _segment_summaries(dispatch) -> dict[int, SimpleNamespace]:
    from pyspark.sql import functions as F

    rows = dispatch.groupBy("segment").agg(
        F.min("offset").alias("first"), F.max(F.col("offset") + F.col("size")).alias("end"),
        F.sum("size").alias("bytes"), F.count("*").alias("records"), F.sum(F.size("keys")).alias("keys"),
        F.sum(F.col("cq").cast("int")).alias("units"), F.max("offset").alias("last"),
        F.min_by("store_timestamp", "offset").alias("first_ts")).collect()
    return {r.segment: SimpleNamespace(**r.asDict()) for r in rows}


def _blank_at(path: str, pos: int, size: int) -> bool:
    """Does a blank record at ``pos`` fill segment ``path`` to its end (:func:`rmqstore.format.walk.step`)?"""
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf:
            s = step(buf, pos)
            return s.end is End.BLANK and s.blank_fills


def _check_whole(root: str, summaries: dict[int, SimpleNamespace]) -> None:
    """Raise where dispatch would stop before the last record the source found."""
    segments = list_segments(find_commitlog_dir(root))
    last_record_segment = max(summaries, default=None)
    for seg in segments:
        if last_record_segment is None or seg.offset > last_record_segment:
            return
        s = summaries.get(seg.offset)
        if s is None:
            end = seg.offset  # a segment that is one blank (RocketMQ's over-large message) is skipped
        elif s.first != seg.offset or s.end - s.first != s.bytes:
            raise StoreError(f"{root}: the commitlog is damaged in segment {seg.name} (records do not run back to "
                             f"back from its start); dispatch would stop there -- see `rmqstore verify`")
        else:
            end = s.end
        if seg.offset < last_record_segment and not _blank_at(seg.path, end - seg.offset, seg.size):
            raise StoreError(f"{root}: the commitlog has records after offset {end}, where dispatch stops (no "
                             "blank record ends that segment); see `rmqstore verify`")


# -- 3. consume queues, one queue per task ---------------------------------------------------------

def _build_queues(out_dir: str, file_size: int):
    def run(batches):
        import pyarrow as pa

        out = {"topic": [], "queue_id": [], "units": []}
        cq = None
        try:
            for batch in batches:
                for r in batch.to_pylist():
                    if cq is None or (cq.topic, cq.queue_id) != (r["topic"], r["queue_id"]):
                        if cq is not None:
                            cq.shutdown()
                        cq = ConsumeQueue(out_dir, r["topic"], r["queue_id"], file_size)
                        out["topic"].append(r["topic"])
                        out["queue_id"].append(r["queue_id"])
                        out["units"].append(0)
                    if not cq.put_message_position_info(r["offset"], r["size"], r["tags_code"], r["queue_offset"]):
                        raise StoreError(f"rebuild: consume queue {r['topic']}-{r['queue_id']} could not take "
                                         f"queue offset {r['queue_offset']} (commitlog offset {r['offset']})")
                    out["units"][-1] += 1
        finally:
            if cq is not None:
                cq.shutdown()
        yield pa.RecordBatch.from_pydict(out, schema=arrow_schema("topic string, queue_id int, units bigint"))
    return run


def _rebuild_consume_queues(dispatch, out_dir: str, file_size: int) -> int:
    units = (dispatch.filter("cq").select("topic", "queue_id", "offset", "size", "tags_code", "queue_offset")
             .repartition("topic", "queue_id").sortWithinPartitions("topic", "queue_id", "offset")
             .mapInArrow(_build_queues(out_dir, file_size), "topic string, queue_id int, units bigint"))
    return sum(r.units for r in units.collect())


# -- 4. index files, one file per task --------------------------------------------------------------

_INDEX_OUT = "file_no bigint, entries bigint, first_ts bigint, last_offset bigint, last_ts bigint"


def _temp_index_path(index_dir: str, file_no: int) -> str:
    return os.path.join(index_dir, f"{_TEMP_PREFIX}{file_no:010d}")


def _build_index_files(index_dir: str, slots: int, num: int):
    """Task: rows sorted by (file, predecessor marker first, entry) -> one IndexFile per file."""
    def run(batches):
        import pyarrow as pa

        out = {name: [] for name in ("file_no", "entries", "first_ts", "last_offset", "last_ts")}
        f = None
        try:
            for batch in batches:
                for r in batch.to_pylist():
                    if not out["file_no"] or out["file_no"][-1] != r["file_no"]:
                        if f is not None:
                            f.shutdown()
                        path = _temp_index_path(index_dir, r["file_no"])
                        # file 0 starts empty; file k starts at file k-1's last entry (its marker row)
                        f = IndexFile(path, slots, num, r["offset"], r["store_timestamp"]) if r["is_prev"] \
                            else IndexFile(path, slots, num)
                        for name, value in (("file_no", r["file_no"]), ("entries", 0), ("first_ts", None),
                                            ("last_offset", 0), ("last_ts", 0)):
                            out[name].append(value)
                        if r["is_prev"]:
                            continue
                    if out["first_ts"][-1] is None:
                        out["first_ts"][-1] = r["store_timestamp"]
                    if not f.put_key(r["key"], r["offset"], r["store_timestamp"]):
                        raise StoreError(f"rebuild: index file {r['file_no']} is full before entry {r['entry']}")
                    out["entries"][-1] += 1
                    out["last_offset"][-1] = r["offset"]
                    out["last_ts"][-1] = r["store_timestamp"]
        finally:
            if f is not None:
                f.shutdown()
        yield pa.RecordBatch.from_pydict(out, schema=arrow_schema(_INDEX_OUT))
    return run


def _index_entries(spark, dispatch, summaries: dict[int, SimpleNamespace], per_file: int, files: int):
    """One row per index entry (its global number, file, key) plus the predecessor markers."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    base, bases = 0, []
    for seg in sorted(summaries):
        bases.append((seg, base))
        base += summaries[seg].keys
    seg_base = spark.createDataFrame(bases, "segment bigint, base bigint")
    before = Window.partitionBy("segment").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    entries = (dispatch.filter(F.size("keys") > 0).select("segment", "offset", "store_timestamp", "keys")
               .withColumn("before", F.coalesce(F.sum(F.size("keys")).over(before), F.lit(0)))
               .join(F.broadcast(seg_base), "segment")
               .select("offset", "store_timestamp", "base", "before", F.posexplode("keys").alias("pos", "key"))
               .withColumn("entry", F.col("base") + F.col("before") + F.col("pos"))
               .withColumn("file_no", F.floor(F.col("entry") / per_file).cast("bigint"))
               .select("file_no", "entry", "offset", "store_timestamp", "key", F.lit(False).alias("is_prev")))
    markers = (entries.filter((F.col("entry") + 1) % per_file == 0)
               .withColumn("file_no", F.col("file_no") + 1).withColumn("is_prev", F.lit(True))
               .filter(F.col("file_no") < files))
    return entries.unionByName(markers)


def _rebuild_index(spark, dispatch, summaries, out_dir: str, slots: int, num: int, tz) -> tuple[int, list[str]]:
    from pyspark.sql import functions as F

    per_file = num - 1
    if per_file < 1:
        raise StoreError(f"max_index_num {num}: an index file must hold at least one entry (entry 0 is unused)")
    if not summaries:
        return 0, []
    index_dir = index_dir_of(out_dir)
    os.makedirs(index_dir, exist_ok=True)
    total = sum(s.keys for s in summaries.values())
    files = -(-total // per_file)
    built = []
    if total:
        rows = (_index_entries(spark, dispatch, summaries, per_file, files)
                .repartition("file_no").sortWithinPartitions("file_no", F.desc("is_prev"), "entry")
                .mapInArrow(_build_index_files(index_dir, slots, num), _INDEX_OUT).collect())
        built = sorted(((r.file_no, r.first_ts, r.entries, r.last_offset, r.last_ts) for r in rows))
        if [b[0] for b in built] != list(range(files)) or sum(b[2] for b in built) != total:
            raise StoreError(f"rebuild: index files built {[b[0] for b in built]}, expected 0..{files - 1}")
    stamps = [b[1] for b in built]
    last_record = max(s.last for s in summaries.values())
    if not total:  # messages but no keys: the first dispatch still creates a file
        IndexFile(_temp_index_path(index_dir, 0), slots, num).shutdown()
        stamps.append(summaries[min(summaries)].first_ts)
    elif total % per_file == 0 and last_record > built[-1][3]:  # a record after the full file's last entry
        _, _, _, end_offset, end_ts = built[-1]
        IndexFile(_temp_index_path(index_dir, files), slots, num, end_offset, end_ts).shutdown()
        stamps.append(end_ts)
    names, prev = [], None
    for file_no, ts in enumerate(stamps):
        ms = ts if prev is None else max(ts, prev + 1)
        names.append(index_file_name(ms, tz))
        os.replace(_temp_index_path(index_dir, file_no), os.path.join(index_dir, names[-1]))
        prev = ms
    return total, names


# -- the pipeline ---------------------------------------------------------------------------------------

def _check_out_dir(root: str, out_dir: str) -> str:
    out = os.path.realpath(os.fspath(out_dir))
    real_root = os.path.realpath(root)
    if out == real_root or out.startswith(real_root + os.sep):
        raise StoreError(f"rebuild: out_dir {out_dir} is inside the store {root}; a rebuild never writes into "
                         "the store it reads")
    for sub in (CONSUME_QUEUE_DIR, INDEX_DIR):
        d = os.path.join(out, sub)
        if os.path.isdir(d) and os.listdir(d):
            raise StoreError(f"rebuild: {d} already holds files; give an out_dir without {sub}/ files")
    os.makedirs(out, exist_ok=True)
    return out


def _files_under(d: str) -> list[str]:
    if not os.path.isdir(d):
        return []
    return sorted(os.path.relpath(os.path.join(p, n), d) for p, _, names in os.walk(d) for n in names)


def rebuild(spark, store, out_dir, *, config: StoreConfig | None = None, split_size: int = DEFAULT_SPLIT,
            tz=timezone.utc) -> RebuildResult:
    """Write ``out_dir/consumequeue/`` and ``out_dir/index/`` for ``store``, from its commitlog alone.

    ``store`` is a store directory (or a fixture folder holding ``store/``).  Sizes -- consume-queue
    file size, index hash slots and entries, delay levels -- come from ``config``, by default from the
    store's own files (:func:`rmqstore.files.store_sizes.infer_config`).  The files equal, byte for byte, what
    the engine's dispatch writes for that log with that config; index file names follow the rule in
    the module docstring (``tz`` formats them).  Needs the ``rmqstore.commitlog`` source registered
    (:func:`rmqstore.spark.register`).  Raises :class:`~rmqstore.common.errors.StoreError` for a path that is
    not a store, an ``out_dir`` inside the store or already holding such files, and a damaged log.
    """
    root = resolve_store_root(store)
    find_commitlog_dir(root)  # "not a store" for anything without a commitlog
    config = config or infer_config(root)
    out = _check_out_dir(root, out_dir)
    dispatch = _dispatch_frame(spark, root, config, split_size).persist()
    try:
        summaries = _segment_summaries(dispatch)
        _check_whole(root, summaries)
        result = RebuildResult(out, records=sum(s.records for s in summaries.values()))
        result.units = _rebuild_consume_queues(dispatch, out, config.mapped_file_size_consume_queue) \
            if any(s.units for s in summaries.values()) else 0
        if config.message_index_enable:
            result.index_entries, result.index_files = _rebuild_index(
                spark, dispatch, summaries, out, config.max_hash_slot_num, config.max_index_num, tz)
    finally:
        dispatch.unpersist()
    result.consume_queue_files = _files_under(consume_queue_root(out))
    return result

