"""Spark commitlog scan beside the single-process decoder, on one generated store, in one run.

    python bench/spark_scan.py                    # 2.25 GiB store cached in bench/data/ (git-ignored)
    python bench/spark_scan.py --quick            # 256 MiB store, 1 repeat: a smoke run
    python bench/spark_scan.py --store /tmp/s --size-mib 4096 --repeat 5

The store.  Writing 2 GiB through the put path would take ~15 minutes here (~40k puts/s),
so :func:`generate_store` writes the segments directly -- but with the put path's own
bytes: every record is encoded by the engine's :class:`~rmqstore.engine.commit_log.MessageEncoder`
(what ``CommitLog.encode`` runs outside the put lock) and patched with queue offset,
physical offset and store timestamp at the positions ``do_append`` patches; a record that
does not fit with room for an 8-byte blank ends its segment with the END_OF_FILE blank,
as ``do_append`` does.  Consume-queue units (offset, size, Java hash of TAGS) are written
for every record, and a checkpoint, so ``rmqstore verify`` checks the store end to end
(``tests/unit/test_bench_generator.py`` does that on a small one).  Several topics and queues,
bodies of mixed sizes (16 B .. 16 KiB), TAGS/KEYS properties.

Cases (each the median of --repeat runs over the same store, files in the page cache), each
on the pure path and on the compiled fast path (``--paths``, default both) in the same run:
* decoder (pure): ``CommitLogScan(native=False)``, every record decoded into fields (body
  copied), body CRC checked with ``crc32`` -- the baseline of the "vs decoder" column;
* decoder (native): ``CommitLogScan.batches(crc=True)``, every field decoded into columns by
  ``rmqstore._native._cdecode`` (bodies as ``bytes``, topics/properties as ``str``), CRC checked in C --
  the baseline of the "vs native decoder" column; and the same decode iterated as records
  (``CommitLogScan``, one ``MessageRecord`` each, CRC by ``crc32``);
* lean walk: ``fastscan.walk_segment`` with CRC (sizes, offsets, CRC; no fields);
* Spark ``rmqstore.commitlog`` with ``local[1]`` and ``local[2]``, option ``native`` true and
  false: ``count()`` over all fields, ``groupBy(topic, queue_id).agg(count,
  sum(total_size))``, and the same with ``body=false``.  Each Spark case checks its answer
  against what the generator wrote.
Prints a table and writes JSON (bench/results/spark_scan.json by default).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import struct
import sys
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore.files.checkpoint import StoreCheckpoint  # noqa: E402
from rmqstore.engine.commit_log import MessageEncoder  # noqa: E402
from rmqstore.common.config import StoreConfig  # noqa: E402
from rmqstore.format.layout import (BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH, QUEUE_OFFSET_POSITION,  # noqa: E402
                                    store_timestamp_position)
from rmqstore.format.message import Message  # noqa: E402
from rmqstore.format.properties import java_string_hash  # noqa: E402
from rmqstore.format.record import Address, socket_address  # noqa: E402

__all__ = ["GeneratedStore", "generate_store", "main"]

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
TOPICS = ("OrderTopic", "PaymentTopic", "AuditTopic", "ClickStream")
QUEUES = 4
#: body sizes and their weights: mostly small, a tail of large ones
BODY_SIZES = ((16, 10), (128, 25), (512, 25), (1024, 20), (4096, 15), (16384, 5))
CQ_UNITS_PER_FILE = 300_000  # RocketMQ's default consume-queue file (6,000,000 bytes)
_UNIT = struct.Struct(">qiq")
_QO_PHY = struct.Struct(">qq")
_I64 = struct.Struct(">q")
_BLANK = struct.Struct(">ii")
_STORE_TS_POS = store_timestamp_position(0)


@dataclass
class GeneratedStore:
    """What :func:`generate_store` wrote (or found cached)."""

    root: str
    segment_size: int
    requested_bytes: int = 0  # the size asked for (records end at the first record past it)
    segments: int = 0
    records: int = 0
    record_bytes: int = 0  # sum of the records' total sizes
    per_queue: dict = field(default_factory=dict)  # "topic/queue" -> [records, bytes]

    def save(self) -> None:
        with open(os.path.join(self.root, "generated.json"), "w") as f:
            json.dump(self.__dict__, f, indent=1)

    @classmethod
    def load(cls, root: str) -> "GeneratedStore | None":
        try:
            with open(os.path.join(root, "generated.json")) as f:
                return cls(**json.load(f))
        except (OSError, ValueError, TypeError):
            return None


class _ConsumeQueues:
    """Consume-queue files written unit by unit, in RocketMQ's layout."""

    def __init__(self, root: str):
        self.root = root
        self.units: dict[tuple[str, int], bytearray] = {}

    def add(self, topic: str, queue_id: int, offset: int, size: int, tags_code: int) -> None:
        self.units.setdefault((topic, queue_id), bytearray()).extend(_UNIT.pack(offset, size, tags_code))

    def write(self) -> None:
        file_size = CQ_UNITS_PER_FILE * _UNIT.size
        for (topic, queue_id), data in self.units.items():
            d = os.path.join(self.root, "consumequeue", topic, str(queue_id))
            os.makedirs(d, exist_ok=True)
            for start in range(0, len(data), file_size):
                with open(os.path.join(d, f"{start:020d}"), "wb") as f:
                    f.write(data[start:start + file_size])
                    f.truncate(file_size)


def generate_store(root: str, total_bytes: int, segment_size: int = 1 << 30, *, seed: int = 6,
                   progress=None) -> GeneratedStore:
    """Write a store of about ``total_bytes`` of records in ``segment_size`` segments (see module doc)."""
    os.makedirs(os.path.join(root, "commitlog"), exist_ok=True)
    rng = random.Random(seed)
    pool = rng.randbytes(1 << 20)
    sizes = [s for s, w in BODY_SIZES for _ in range(w)]
    encoder = MessageEncoder(StoreConfig().max_message_size, Address.parse("10.0.0.9:10911"), socket_address)
    queues = _ConsumeQueues(root)
    tags_codes = {f"t{n}": java_string_hash(f"t{n}") for n in range(8)}
    next_queue_offset: dict = {}
    out = GeneratedStore(root, segment_size, total_bytes)
    store_ts = 1_790_000_000_000
    phys = 0
    f = None
    chunk = bytearray()
    pos = segment_size  # no segment open yet
    try:
        while phys < total_bytes or f is None:
            topic = TOPICS[rng.randrange(len(TOPICS))]
            queue_id = rng.randrange(QUEUES)
            n = sizes[rng.randrange(len(sizes))]
            at = rng.randrange(len(pool) - n)
            tag = f"t{rng.randrange(8)}"
            msg = Message(topic, pool[at:at + n], queue_id=queue_id, properties=f"TAGS\x01{tag}\x02KEYS\x01k{out.records}",
                          born_timestamp=store_ts - 3, born_host=f"192.0.2.{1 + queue_id}:5{queue_id:04d}")
            enc = encoder.encode(msg, topic, queue_id, msg.properties, 0)
            if enc.length + END_FILE_MIN_BLANK_LENGTH > segment_size - pos:
                if f is not None:  # the END_OF_FILE blank, then the next segment
                    chunk += _BLANK.pack(segment_size - pos, BLANK_MAGIC_CODE)
                    f.write(chunk)
                    f.close()
                    chunk.clear()
                    phys += segment_size - pos
                f = open(os.path.join(root, "commitlog", f"{phys:020d}"), "wb")
                f.truncate(segment_size)
                out.segments += 1
                pos = 0
            qo = next_queue_offset.get((topic, queue_id), 0)
            next_queue_offset[(topic, queue_id)] = qo + 1
            rec = bytearray(enc.data)
            _QO_PHY.pack_into(rec, QUEUE_OFFSET_POSITION, qo, phys)
            _I64.pack_into(rec, _STORE_TS_POS, store_ts)
            chunk += rec
            queues.add(topic, queue_id, phys, enc.length, tags_codes[tag])
            key = f"{topic}/{queue_id}"
            counts = out.per_queue.setdefault(key, [0, 0])
            counts[0] += 1
            counts[1] += enc.length
            out.records += 1
            out.record_bytes += enc.length
            phys += enc.length
            pos += enc.length
            if out.records % 7 == 0:  # a clock that advances 1 ms every 7 puts
                store_ts += 1
            if len(chunk) >= 8 << 20:
                f.write(chunk)
                chunk.clear()
                if progress:
                    progress(phys)
        f.write(chunk)
    finally:
        if f is not None:
            f.close()
    queues.write()
    cp = StoreCheckpoint(os.path.join(root, "checkpoint"))  # everything written counts as flushed
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = store_ts
    cp.shutdown()
    out.save()
    return out


# -- the measurement -------------------------------------------------------------------------------

def open_or_generate(root: str, size: int, segment_size: int) -> GeneratedStore:
    """The store cached at ``root`` when it was generated with these sizes, else a fresh one."""
    gen = GeneratedStore.load(root)
    if gen is not None and (gen.segment_size, gen.requested_bytes) == (segment_size, size):
        return gen
    if os.path.exists(root) and os.listdir(root) and gen is None:
        raise SystemExit(f"{root} exists and was not made by this script (no generated.json): refusing to "
                         "overwrite it; give another --store")
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    step = [0]

    def progress(done):
        if done >= step[0]:
            print(f"  generating: {done / size:6.1%} of {size / 2**30:.2f} GiB", flush=True)
            step[0] = done + (256 << 20)

    gen = generate_store(root, size, segment_size, progress=progress)
    print(f"  generated in {time.perf_counter() - t0:.0f} s", flush=True)
    return gen


def decoder_scan(gen: GeneratedStore, native: bool = False) -> tuple[int, int]:
    """CommitLogScan: every record decoded into fields (body copied), body CRC checked."""
    from rmqstore.format.crc import crc32
    from rmqstore.read.scan import CommitLogScan

    n = size = 0
    for _, rec in CommitLogScan(gen.root, native=native):
        if hasattr(rec, "body"):
            assert crc32(rec.body) == rec.body_crc
            n += 1
            size += rec.total_size
    return n, size


def column_decoder_scan(gen: GeneratedStore) -> tuple[int, int]:
    """CommitLogScan.batches: every field decoded into columns by rmqstore._native._cdecode, CRC checked in C."""
    from rmqstore.read.scan import CommitLogScan

    n = size = 0
    for _, chunk in CommitLogScan(gen.root).batches(crc=True):
        assert chunk.columns["crc_ok"].count(0) == 0
        n += chunk.count
        size += sum(chunk.columns["total_size"])
    return n, size


def lean_walk(gen: GeneratedStore) -> tuple[int, int]:
    """fastscan.walk_segment with CRC over each mapped segment (sizes, offsets, CRC; no fields)."""
    import mmap

    from rmqstore.format.fastscan import walk_segment
    from rmqstore.read.scan import list_segments

    n = size = 0
    for seg in list_segments(os.path.join(gen.root, "commitlog")):
        with open(seg.path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            w = walk_segment(buf, seg.offset)
            assert not w.crc_failures
            n += w.records
            size += w.bytes_in_records
        finally:
            buf.close()
    return n, size


def spark_session(cores: int):
    from pyspark.sql import SparkSession

    from rmqstore.spark import register

    spark = (SparkSession.builder.master(f"local[{cores}]").appName(f"rmqstore-bench-{cores}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def spark_cases(spark, gen: GeneratedStore, native: bool = True):
    """(name, function) of the Spark queries; each checks its answer against what was generated."""
    from pyspark.sql import functions as F

    def frame(body: str):
        return (spark.read.format("rmqstore.commitlog").option("body", body)
                .option("native", "true" if native else "false").load(gen.root))

    def count():
        n = frame("true").count()
        assert n == gen.records, (n, gen.records)
        return n, gen.record_bytes

    def group(body: str):
        rows = (frame(body).groupBy("topic", "queue_id")
                .agg(F.count("*").alias("n"), F.sum("total_size").alias("bytes")).collect())
        got = {f"{r['topic']}/{r['queue_id']}": [r["n"], r["bytes"]] for r in rows}
        assert got == gen.per_queue, "Spark's per-queue counts differ from what the generator wrote"
        return gen.records, gen.record_bytes

    return [("count() over all fields", count),
            ("groupBy(topic, queue_id).agg(count, sum(total_size))", lambda: group("true")),
            ("the same groupBy, body=false", lambda: group("false"))]


def measure(fn, repeat: int) -> tuple[list[float], int, int]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n, size = fn()
        times.append(time.perf_counter() - t0)
    return times, n, size


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=os.path.join(DATA_DIR, "spark_scan_store"),
                    help="where the generated store lives (cached there; default bench/data/, git-ignored)")
    ap.add_argument("--size-mib", type=int, default=2304, help="record bytes to generate (default 2304 = 2.25 GiB)")
    ap.add_argument("--segment-mib", type=int, default=1024, help="segment size (default 1024, RocketMQ's)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", default="1,2", help="Spark local[N] masters to measure (default 1,2)")
    ap.add_argument("--paths", default="native,pure", help="which decode paths to measure (default native,pure)")
    ap.add_argument("--quick", action="store_true", help="256 MiB in 64 MiB segments, 1 repeat")
    ap.add_argument("--delete-store", action="store_true", help="delete the generated store afterwards")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "spark_scan.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mib, args.segment_mib, args.repeat = 256, 64, 1
        if args.store == ap.get_default("store"):
            args.store = os.path.join(DATA_DIR, "spark_scan_quick")
    gen = open_or_generate(args.store, args.size_mib << 20, args.segment_mib << 20)
    print(f"store: {gen.root}: {gen.segments} segments x {gen.segment_size >> 20} MiB, {gen.records:,} records, "
          f"{gen.record_bytes / 2**30:.2f} GiB of records, {len(gen.per_queue)} queues; median of {args.repeat}",
          flush=True)
    from rmqstore.common import native as native_switch

    paths = [p for p in args.paths.split(",") if p]
    if "native" in paths and native_switch.module("_cdecode") is None:
        raise SystemExit("rmqstore._native._cdecode is not in use (not built, or RMQSTORE_PURE is set): "
                         "build it (python3 setup.py build_ext --inplace) or pass --paths pure")
    rows = []
    print(f"{'case':70s} {'cores':>5s} {'records/s':>11s} {'MB/s':>7s} {'vs decoder':>10s} {'vs native':>9s}",
          flush=True)
    bases: dict[str, float] = {}

    def record(name, cores, times, n, size, baseline=None):
        med = statistics.median(times)
        if baseline:
            bases[baseline] = med
        row = {"case": name, "cores": cores, "median_s": med, "runs_s": times, "records": n,
               "records_per_s": n / med, "mb_per_s": size / med / 1e6,
               "speed_vs_decoder": bases["pure"] / med if "pure" in bases else None,
               "speed_vs_native_decoder": bases["native"] / med if "native" in bases else None}
        rows.append(row)
        ratios = " ".join(f"{r:>{w}.2f}" if r is not None else " " * w for r, w in
                          ((row["speed_vs_decoder"], 10), (row["speed_vs_native_decoder"], 9)))
        print(f"{name:70s} {cores:>5d} {row['records_per_s']:11,.0f} {row['mb_per_s']:7,.0f} {ratios}", flush=True)

    lean_walk(gen)  # warm the page cache
    if "pure" in paths:
        record("single-process decoder (pure): CommitLogScan full decode + CRC", 1,
               *measure(lambda: decoder_scan(gen, native=False), args.repeat), baseline="pure")
    if "native" in paths:
        record("single-process decoder (native): CommitLogScan.batches, columns + CRC", 1,
               *measure(lambda: column_decoder_scan(gen), args.repeat), baseline="native")
        record("single-process decoder (native), as records: CommitLogScan + crc32", 1,
               *measure(lambda: decoder_scan(gen, native=True), args.repeat))
    record("single-process lean walk + CRC (fastscan.walk_segment)", 1, *measure(lambda: lean_walk(gen),
                                                                                  args.repeat))
    for cores in [int(c) for c in args.cores.split(",")]:
        spark = spark_session(cores)
        try:
            for path in paths:
                cases = spark_cases(spark, gen, native=path == "native")
                cases[0][1]()  # warm-up: start the Python workers, import numpy/pyarrow there
                for name, fn in cases:
                    record(f"Spark ({path}) {name}", cores, *measure(fn, args.repeat))
        finally:
            spark.stop()
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"store": {k: v for k, v in gen.__dict__.items() if k != "per_queue"},
                   "queues": len(gen.per_queue), "repeat": args.repeat, "cpu_count": os.cpu_count(),
                   "load_average": os.getloadavg(), "paths": paths, "rows": rows}, f, indent=1)
    print(f"wrote {args.json}")
    if args.delete_store:
        import shutil

        shutil.rmtree(gen.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
