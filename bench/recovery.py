"""Recovery time after a crash, for stores of 16, 32 and 64 segments.

    python bench/recovery.py            # 1 MiB segments, ~1 KiB messages
    python bench/recovery.py --quick

Each store is written with a clock that advances 10 ms per put, so store timestamps
spread over minutes as in a real broker; it is shut down cleanly and then marked as
crashed (an ``abort`` file is put back), so ``load()`` runs RocketMQ's abnormal recovery:
it starts at the newest segment whose first message is older than the checkpoint and
re-validates (and re-dispatches) only from there.  The time must stay flat as the number
of segments already flushed grows.  Normal recovery (no abort: the last three files) is
timed too, and a full lean scan of the same store for scale.  Each is timed on the
compiled fast path and on the pure one (``StoreConfig(native=False)``, the scan's
``native=False``) in the same run.
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
from rmqstore.format.fastscan import walk_segment  # noqa: E402
from rmqstore.read.scan import list_segments  # noqa: E402

SEGMENT = 1 << 20


class StepClock:
    def __init__(self):
        self.now = 1_795_000_000_000

    def __call__(self):
        self.now += 10
        return self.now


def config(native: bool = True) -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=60_000,
                       max_hash_slot_num=5000, max_index_num=20_000, native=native)


def build(root: str, segments: int) -> None:
    body = bytes(range(256)) * 4
    items = [BatchItem(body, f"TAGS\x01t{i}\x02KEYS\x01k{i}") for i in range(8)]
    with MessageStore(root, config(), clock=StepClock()) as store:
        i = 0
        while store.get_max_phy_offset() < segments * SEGMENT - 20_000:
            assert store.put_messages(MessageBatch("RecTopic", items, queue_id=i % 4, born_host="10.0.0.1:1")).ok
            i += 1


def time_load(root: str, crashed: bool, native: bool = True) -> float:
    if crashed:
        open(os.path.join(root, "abort"), "wb").close()
    t0 = time.perf_counter()
    store = MessageStore(root, config(native))
    store.load()
    dt = time.perf_counter() - t0
    store.close()
    if crashed:
        os.remove(os.path.join(root, "abort"))
    return dt


def time_verify_scan(root: str, native: bool = True) -> float:
    t0 = time.perf_counter()
    for seg in list_segments(os.path.join(root, "commitlog")):
        with open(seg.path, "rb") as f:
            walk_segment(f.read(), seg.offset, native=native)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "recovery.json"))
    args = ap.parse_args(argv)
    sizes = [8, 16] if args.quick else [16, 32, 64]
    repeat = args.repeat or (1 if args.quick else 5)
    rows = []
    print(f"{'segments':>8s} {'abnormal (s)':>13s} {'pure':>7s} {'normal (s)':>11s} {'pure':>7s} "
          f"{'full scan (s)':>14s} {'pure':>7s}")
    for n in sizes:
        root = tempfile.mkdtemp(prefix="rmqbench-rec-")
        try:
            build(root, n)
            t = {}
            for native in (True, False):
                t["ab", native] = statistics.median(time_load(root, True, native) for _ in range(repeat))
                t["no", native] = statistics.median(time_load(root, False, native) for _ in range(repeat))
                t["sc", native] = statistics.median(time_verify_scan(root, native) for _ in range(repeat))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{n:8d} {t['ab', True]:13.3f} {t['ab', False]:7.3f} {t['no', True]:11.3f} {t['no', False]:7.3f} "
              f"{t['sc', True]:14.3f} {t['sc', False]:7.3f}", flush=True)
        rows.append({"segments": n, "abnormal_recovery_s": t["ab", True], "normal_recovery_s": t["no", True],
                     "full_scan_s": t["sc", True], "abnormal_recovery_pure_s": t["ab", False],
                     "normal_recovery_pure_s": t["no", False], "full_scan_pure_s": t["sc", False]})
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"segment_size": SEGMENT, "repeat": repeat, "rows": rows}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
