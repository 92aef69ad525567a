"""Commitlog scan throughput beside a raw read of the same files, in one run.

    python bench/scan.py                 # 64 segments of 4 MiB, ~250k records of 1 KiB
    python bench/scan.py --quick

Cases (each the median of --repeat runs over the same store, files in the page cache), the
compiled walk (rmqstore._native._cwalk) and the pure one (native=False) in the same run:
* raw read              -- read every segment file into memory, nothing else (the floor)
* lean walk + CRC       -- rmqstore.format.fastscan.walk_segment over each segment mapped read-only
                           (mmap, MAP_POPULATE): sizes, magic, offsets, body CRC
                           (native; native on two threads, a segment each, GIL released; pure)
* lean walk, no CRC     -- the same without CRC (native, pure)
* full decode + CRC     -- rmqstore.read.scan.CommitLogScan + CRC: every record decoded into fields
* verify                -- `rmqstore verify` of the store in a fresh process: time and peak RSS
                           (native, and RMQSTORE_PURE=1); --verify-store PATH verifies another
                           store instead (e.g. bench/data/spark_scan_store, 2.25 GiB)
Prints a table and writes JSON (bench/results/scan.json by default).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import BatchItem, MessageBatch, MessageStore, StoreConfig  # noqa: E402
from rmqstore.common import native  # noqa: E402
from rmqstore.format.crc import CRC_BACKEND, crc32  # noqa: E402
from rmqstore.format.fastscan import walk_segment  # noqa: E402
from rmqstore.read.scan import CommitLogScan, list_segments  # noqa: E402


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


def _lean_file(path: str, base: int, check_crc: bool, use_native: bool) -> int:
    """Walk one segment mapped read-only, as verify and recovery map theirs (no copy)."""
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), prot=mmap.PROT_READ)
    try:
        w = walk_segment(buf, base, check_crc=check_crc, native=use_native)
        assert not w.crc_failures
        return w.records
    finally:
        buf.close()


def lean(root: str, check_crc: bool, use_native: bool = True, threads: int = 1) -> tuple[int, int]:
    segs = list_segments(os.path.join(root, "commitlog"))
    if threads == 1:
        return sum(_lean_file(s.path, s.offset, check_crc, use_native) for s in segs), 0
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(lambda s: _lean_file(s.path, s.offset, check_crc, use_native), segs)), 0


# peak RSS from VmHWM: ru_maxrss of a child keeps its parent's size at the fork (Linux carries it over exec)
_VERIFY = """
import sys, time
from rmqstore.read.verify import verify
t0 = time.perf_counter()
report = verify(sys.argv[1])
dt = time.perf_counter() - t0
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")][0]
print(dt, hwm, report.records, report.ok)
"""


def verify_case(store: str, pure: bool) -> tuple[float, int, int]:
    """(seconds, peak RSS in KiB, records) of verifying ``store`` in a fresh process."""
    env = dict(os.environ, RMQSTORE_PURE="1" if pure else "0")
    out = subprocess.run([sys.executable, "-c", _VERIFY, store], env=env, check=True, capture_output=True, text=True,
                         cwd=os.path.join(os.path.dirname(__file__), ".."))
    dt, rss, records, ok = out.stdout.split()
    assert ok == "True", out.stdout
    return float(dt), int(rss), int(records)


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
    ap.add_argument("--verify-store", default=None, help="verify this store instead of the generated one")
    ap.add_argument("--no-pure-verify", action="store_true", help="skip the (slow) pure verify case")
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
                 ("lean walk + CRC, 2 threads", lambda: lean(root, True, threads=2)),
                 ("lean walk + CRC, pure", lambda: lean(root, True, use_native=False)),
                 ("lean walk, no CRC", lambda: lean(root, False)),
                 ("lean walk, no CRC, pure", lambda: lean(root, False, use_native=False)),
                 ("full decode + CRC", lambda: full_decode(root))]
        raw_read(root)  # warm the page cache
        print(f"store: {segments} segments x {seg_size >> 20} MiB, {count:,} records of 1 KiB, CRC backend {CRC_BACKEND}")
        print(f"path: {native.describe().splitlines()[0]}; load average {os.getloadavg()[0]:.2f}")
        print(f"{'case':28s} {'records/s':>12s} {'MB/s':>8s} {'vs raw':>7s}")
        rows = []
        raw_s = None
        size = segments * seg_size
        for name, fn in cases:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            raw_s = raw_s or med
            rps = count / med if name != "raw read" else None  # the raw read decodes no records
            shown = f"{rps:12,.0f}" if rps else f"{'-':>12s}"
            print(f"{name:28s} {shown} {size / med / 1e6:8,.0f} {raw_s / med:7.2f}", flush=True)
            rows.append({"case": name, "median_s": med, "runs_s": times, "records_per_s": rps,
                         "mb_per_s": size / med / 1e6, "speed_vs_raw": raw_s / med})
        vstore = args.verify_store or root
        for pure in (False,) if args.no_pure_verify else (False, True):
            dt, rss, records = verify_case(vstore, pure)
            name = "verify" + (", pure" if pure else "")
            print(f"{name:28s} {records / dt:12,.0f} {'':8s} {'':7s} {dt:.2f} s, peak RSS {rss / 1024:,.0f} MiB "
                  f"({records:,} records, {vstore})", flush=True)
            rows.append({"case": name, "store": vstore, "seconds": dt, "peak_rss_kib": rss, "records": records,
                         "records_per_s": records / dt})
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
