"""Commitlog scan throughput beside a raw read of the same files, in one run.

    python bench/scan.py                 # 64 segments of 4 MiB, ~250k records of 1 KiB
    python bench/scan.py --quick

Cases (each the median of --repeat runs over the same store, files in the page cache):
* raw read        -- read every segment file into memory, nothing else (the floor)
* lean walk + CRC -- rmqstore.fastscan.walk_segment: sizes, magic, offsets, body CRC
* lean walk       -- the same without CRC
* full decode+CRC -- rmqstore.scan.CommitLogScan + CRC: every record decoded into fields
Prints a table and writes JSON (bench/results/scan.json by default).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import BatchItem, MessageBatch, MessageStore, StoreConfig  # noqa: E402
from rmqstore.crc import CRC_BACKEND, crc32  # noqa: E402
from rmqstore.fastscan import walk_segment  # noqa: E402
from rmqstore.scan import CommitLogScan, list_segments  # noqa: E402


def build_store(root: str, segments: int, segment_size: int) -> int:
    cfg = StoreConfig(mapped_file_size_commit_log=segment_size)
    body = bytes(range(256)) * 4
    items = [BatchItem(body, f"TAGS\x01t{i % 4}\x02KEYS\x01k{i}") for i in range(32)]
    with MessageStore(root, cfg) as store:
        i = 0
        while store.get_max_phy_offset() < segments * segment_size - 2 * 40_000:
            assert store.put_messages(MessageBatch("ScanTopic", items, queue_id=i % 4, born_host="10.0.0.1:5000")).ok
            i += 1
    return i * 32


def raw_read(root: str) -> tuple[int, int]:
    total = 0
    for seg in list_segments(os.path.join(root, "commitlog")):
        with open(seg.path, "rb") as f:
            total += len(f.read())
    return 0, total


def lean(root: str, check_crc: bool) -> tuple[int, int]:
    n = total = 0
    for seg in list_segments(os.path.join(root, "commitlog")):
        with open(seg.path, "rb") as f:
            buf = f.read()
        total += len(buf)
        w = walk_segment(buf, seg.offset, check_crc=check_crc)
        assert not w.crc_failures
        n += w.records
    return n, total


def full_decode(root: str) -> tuple[int, int]:
    n = 0
    for _, rec in CommitLogScan(root):
        if hasattr(rec, "body"):
            assert crc32(rec.body) == rec.body_crc
            n += 1
    return n, 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "scan.json"))
    args = ap.parse_args(argv)
    segments = 16 if args.quick else 64
    seg_size = 4 * 1024 * 1024
    repeat = args.repeat or (1 if args.quick else 5)
    root = tempfile.mkdtemp(prefix="rmqbench-scan-")
    try:
        count = build_store(root, segments, seg_size)
        cases = [("raw read", lambda: raw_read(root)),
                 ("lean walk + CRC", lambda: lean(root, True)),
                 ("lean walk, no CRC", lambda: lean(root, False)),
                 ("full decode + CRC", lambda: full_decode(root))]
        raw_read(root)  # warm the page cache
        print(f"store: {segments} segments x {seg_size >> 20} MiB, {count:,} records of 1 KiB, CRC backend {CRC_BACKEND}")
        print(f"{'case':22s} {'records/s':>12s} {'MB/s':>8s} {'vs raw':>7s}")
        rows = []
        raw_s = None
        size = segments * seg_size
        for name, fn in cases:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                n, _ = fn()
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            raw_s = raw_s or med
            rps = count / med if n else None  # the raw read decodes no records
            shown = f"{rps:12,.0f}" if rps else f"{'-':>12s}"
            print(f"{name:22s} {shown} {size / med / 1e6:8,.0f} {raw_s / med:7.2f}", flush=True)
            rows.append({"case": name, "median_s": med, "runs_s": times, "records_per_s": rps,
                         "mb_per_s": size / med / 1e6, "speed_vs_raw": raw_s / med})
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"segments": segments, "segment_size": seg_size, "records": count,
                       "crc_backend": CRC_BACKEND, "repeat": repeat, "rows": rows}, f, indent=1)
        print(f"wrote {args.json}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
