"""Group commit under SYNC_FLUSH: synchronous puts from threads, and async puts in flight.

The message is bench/put.py's (1 KiB body, TAGS/KEYS/UNIQ_KEY, 64 MiB segments).  Cases:

* ``put_message`` from 1 and 8 threads, SYNC_FLUSH;
* ``async_put_message`` from one thread keeping 64 puts in flight (the oldest future is
  waited on when 64 are outstanding), SYNC_FLUSH;
* for scale, ``put_message`` from 1 thread with ASYNC_FLUSH: the put path with no flush
  wait, the ceiling of the SYNC_FLUSH cases in the same run.

For every SYNC_FLUSH case the table also shows the group commit service's flushes per
second and requests answered per flush (``GroupCommitService.flushes`` /
``requests_served``).  Each case runs ``--repeat`` times in a fresh store; medians.

    python bench/group_commit.py             # writes bench/results/group_commit.json
    python bench/group_commit.py --quick     # smoke run
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.common import native  # noqa: E402

BODY = bytes(range(256)) * 4  # 1 KiB
PROPS = "TAGS\x01TagA\x02KEYS\x01order-1\x02UNIQ_KEY\x017F0000013DBD5FFD2B276CF89D220000"
FILE_SIZE = 64 * 1024 * 1024


def _messages(n: int, queue_id: int) -> list[Message]:
    return [Message("BenchTopic", BODY, queue_id=queue_id, properties=PROPS, born_host="10.0.0.1:5000",
                    born_timestamp=1_700_000_000_000) for _ in range(n)]


def _threads(store: MessageStore, threads: int, count: int) -> tuple[float, int]:
    per = count // threads
    work = [_messages(per, t % 8) for t in range(threads)]
    barrier = threading.Barrier(threads + 1)
    failed = [0]

    def worker(items):
        put = store.put_message
        barrier.wait()
        for m in items:
            if not put(m).ok:
                failed[0] += 1

    ts = [threading.Thread(target=worker, args=(w,)) for w in work]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, failed[0]


def _in_flight(store: MessageStore, window: int, count: int) -> tuple[float, int]:
    msgs = _messages(count, 0)
    failed = 0
    pending: collections.deque = collections.deque()
    put = store.async_put_message
    t0 = time.perf_counter()
    for m in msgs:
        pending.append(put(m))
        if len(pending) >= window:
            failed += not pending.popleft().result(30).ok
    while pending:
        failed += not pending.popleft().result(30).ok
    return time.perf_counter() - t0, failed


def run_case(flush: str, kind: str, n: int, count: int, fast: bool = True) -> dict:
    root = tempfile.mkdtemp(prefix="rmqbench-gc-")
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=FILE_SIZE, flush_disk_type=flush,
                                           native=fast))
    store.start()
    try:
        gc = store.group_commit_service
        f0, r0 = (gc.flushes, gc.requests_served) if gc is not None else (0, 0)
        dt, failed = _threads(store, n, count) if kind == "threads" else _in_flight(store, n, count)
        f1, r1 = (gc.flushes, gc.requests_served) if gc is not None else (0, 0)
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        raise SystemExit(f"{failed} puts failed ({flush}, {kind} {n})")
    done = count // n * n if kind == "threads" else count
    flushes = f1 - f0
    return {"msgs_per_s": done / dt, "flushes_per_s": flushes / dt,
            "requests_per_flush": (r1 - r0) / flushes if flushes else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small counts, one run each (smoke run)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per case (median reported; default 3)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "group_commit.json"))
    args = ap.parse_args(argv)
    scale = 0.1 if args.quick else 1.0
    repeat = args.repeat or (1 if args.quick else 3)
    n = int(40_000 * scale)
    cases = [
        ("put_message, ASYNC_FLUSH, 1 thread (ceiling)", "ASYNC_FLUSH", "threads", 1, n, None),
        ("put_message, SYNC_FLUSH, 1 thread", "SYNC_FLUSH", "threads", 1, n // 4, None),
        ("put_message, SYNC_FLUSH, 8 threads", "SYNC_FLUSH", "threads", 8, n, 17_000),
        ("async_put_message, SYNC_FLUSH, 64 in flight", "SYNC_FLUSH", "in_flight", 64, n, 50_000),
    ]
    path = "native" if native.module("_cput", True) is not None else "pure"
    print(f"{native.describe().splitlines()[0]}; each case on the compiled path (native) and on the pure one "
          f"(StoreConfig(native=False)), interleaved; load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'case':46s} {'native':>9s} {'pure':>9s} {'n/p':>5s} {'flush/s':>8s} {'req/flush':>9s} {'target':>8s}")
    rows = []
    for name, flush, kind, k, count, target in cases:
        runs: dict[str, list] = {"native": [], "pure": []}
        for _ in range(repeat):
            runs["native"].append(run_case(flush, kind, k, count, True))
            runs["pure"].append(run_case(flush, kind, k, count, False))
        med = {p: statistics.median(r["msgs_per_s"] for r in rs) for p, rs in runs.items()}
        fps = statistics.median(r["flushes_per_s"] for r in runs["native"])
        rpf = [r["requests_per_flush"] for r in runs["native"] if r["requests_per_flush"] is not None]
        rpf_med = statistics.median(rpf) if rpf else None
        met = "" if target is None else ("met" if med["native"] >= target else "MISSED")
        print(f"{name:46s} {med['native']:9,.0f} {med['pure']:9,.0f} {med['native'] / med['pure']:5.2f} {fps:8,.0f} "
              f"{(f'{rpf_med:.1f}' if rpf_med else '-'):>9s} {(f'{target:,}' if target else ''):>8s} {met}",
              flush=True)
        rows.append({"case": name, "flush": flush, "median": med["native"], "median_pure": med["pure"],
                     "runs": runs, "target": target, "flushes_per_s": fps, "requests_per_flush": rpf_med})
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"python": sys.version, "cpus": os.cpu_count(), "repeat": repeat, "path": path,
                   "file_size": FILE_SIZE, "body_bytes": len(BODY), "rows": rows}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
