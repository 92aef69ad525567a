"""Put-path throughput: single and batch puts, async and sync flush, 1..N threads.

Prints a table and writes JSON (``--json PATH``).  Every configuration runs ``--repeat``
times in a fresh store, through the compiled put (``native``) and through the pure-Python
one (``StoreConfig(native=False)``), in the same run; the table shows the medians, their
ratio, and a raw baseline measured in the same run: the same records, pre-encoded, appended
to a buffered file (the cost of the bytes alone, with no store logic).  The ASYNC_FLUSH cases
run a second time with the reput service paused ("reput paused": dispatch to the consume
queues and the index stopped, so the put path has the GIL to itself).  The last two columns
are the writer threads' own CPU time per message (``time.thread_time``), which a machine
shared with other work inflates far less than the wall-clock rates.

    python bench/put.py                      # full run (about 2-4 minutes on 2 cores)
    python bench/put.py --quick              # smaller counts, for a smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import BatchItem, Message, MessageBatch, MessageStore, StoreConfig  # noqa: E402
from rmqstore.format.record import Address, encode_message  # noqa: E402

BODY = bytes(range(256)) * 4  # 1 KiB
PROPS = "TAGS\x01TagA\x02KEYS\x01order-1\x02UNIQ_KEY\x017F0000013DBD5FFD2B276CF89D220000"
FILE_SIZE = 64 * 1024 * 1024


def make_store(root: str, flush: str, native: bool = True, reput: bool = True) -> MessageStore:
    cfg = StoreConfig(mapped_file_size_commit_log=FILE_SIZE, flush_disk_type=flush, native=native)
    store = MessageStore(root, cfg)
    store.start()
    if not reput:
        # paused: do_reput answers at once while a failure is set (and shutdown does not wait for it)
        store.reput_message_service.failure = "paused by bench/put.py"
    return store


def run_threads(put, work: list[list]) -> tuple[float, list]:
    """One thread per work list calling ``put`` on each item: seconds from the start barrier
    to the last put, and the results that were not PUT_OK."""
    barrier = threading.Barrier(len(work) + 1)
    failures = []
    cpu = []

    def worker(items):
        barrier.wait()
        c0 = time.thread_time()
        for item in items:
            r = put(item)
            if r.status.name != "PUT_OK":
                failures.append(r)
        cpu.append(time.thread_time() - c0)

    threads = [threading.Thread(target=worker, args=(w,)) for w in work]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    MODE["cpu_share"] = sum(cpu) / dt  # the writers' CPU seconds per second: what the load left them
    return dt, failures


#: the path and the reput service of the runs being made (set by main for each column)
MODE: dict = {"native": True, "reput": True, "cpu_share": 1.0}


def _timed(flush: str, work: list[list], put_name: str) -> float:
    """Run one thread per work list against a fresh store; seconds from start barrier to last put."""
    root = tempfile.mkdtemp(prefix="rmqbench-")
    store = make_store(root, flush, MODE["native"], MODE["reput"])
    dt, failures = run_threads(getattr(store, put_name), work)
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    if failures:
        raise SystemExit(f"{len(failures)} {put_name} calls failed, first: {failures[0]}")
    return dt


def run_single(flush: str, threads: int, count: int) -> float:
    per_thread = count // threads
    work = [[Message("BenchTopic", BODY, queue_id=t % 8, properties=PROPS, born_host="10.0.0.1:5000",
                     born_timestamp=1_700_000_000_000) for _ in range(per_thread)] for t in range(threads)]
    return per_thread * threads / _timed(flush, work, "put_message")


def run_batch(flush: str, threads: int, count: int, batch_size: int) -> float:
    per_thread = count // threads // batch_size
    items = [BatchItem(BODY, PROPS) for _ in range(batch_size)]
    work = [[MessageBatch("BenchTopic", items, queue_id=t % 8, born_host="10.0.0.1:5000",
                          born_timestamp=1_700_000_000_000) for _ in range(per_thread)] for t in range(threads)]
    return per_thread * threads * batch_size / _timed(flush, work, "put_messages")


def run_raw(count: int) -> float:
    """Pre-encoded records appended to a buffered file: the floor of any put path."""
    rec = encode_message(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0,
                         born_timestamp=1_700_000_000_000, born_host=Address.parse("10.0.0.1:5000"),
                         store_timestamp=0, store_host=Address.parse("127.0.0.1:10911"), reconsume_times=0,
                         prepared_transaction_offset=0, body=BODY, topic="BenchTopic", properties=PROPS)
    records = [rec] * count
    fd, path = tempfile.mkstemp(prefix="rmqbench-raw-")
    os.close(fd)
    t0 = time.perf_counter()
    with open(path, "wb", buffering=1 << 20) as f:
        write = f.write
        for r in records:
            write(r)
    dt = time.perf_counter() - t0
    os.remove(path)
    return count / dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per configuration (median reported)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "put.json"))
    args = ap.parse_args(argv)
    scale = 0.1 if args.quick else 1.0
    repeat = args.repeat or (1 if args.quick else 5)
    n_async = int(200_000 * scale)
    n_sync = int(60_000 * scale)
    n_batch = int(640_000 * scale)
    cases = [
        ("raw buffered append (baseline)", lambda: run_raw(n_batch), None),
        ("single put, ASYNC_FLUSH, 1 thread", lambda: run_single("ASYNC_FLUSH", 1, n_async), 450_000),
        ("single put, ASYNC_FLUSH, 4 threads", lambda: run_single("ASYNC_FLUSH", 4, n_async), None),
        ("single put, SYNC_FLUSH, 1 thread", lambda: run_single("SYNC_FLUSH", 1, n_sync // 4), None),
        ("single put, SYNC_FLUSH, 4 threads", lambda: run_single("SYNC_FLUSH", 4, n_sync), None),
        ("single put, SYNC_FLUSH, 8 threads", lambda: run_single("SYNC_FLUSH", 8, n_sync), 17_000),
        ("batch put x32, ASYNC_FLUSH, 1 thread", lambda: run_batch("ASYNC_FLUSH", 1, n_batch, 32), 1_000_000),
        ("batch put x32, ASYNC_FLUSH, 4 threads", lambda: run_batch("ASYNC_FLUSH", 4, n_batch, 32), None),
        ("batch put x32, SYNC_FLUSH, 1 thread", lambda: run_batch("SYNC_FLUSH", 1, n_batch // 4, 32), None),
        ("batch put x32, SYNC_FLUSH, 4 threads", lambda: run_batch("SYNC_FLUSH", 4, n_batch // 4, 32), None),
    ]
    rows = []
    raw_median = None
    print(f"{'case':50s} {'native':>11s} {'pure':>10s} {'n/p':>6s} {'vs raw':>7s} {'target':>10s} {'':6s} "
          f"{'cpu us/msg native, pure':>14s}")
    for name, fn, target in cases:
        if raw_median is None:
            values = [fn() for _ in range(repeat)]
            raw_median = statistics.median(values)
            print(f"{name:50s} {raw_median:11,.0f}", flush=True)
            rows.append({"case": name, "median": raw_median, "runs": values})
            continue
        for reput in ((True, False) if "ASYNC" in name else (True,)):
            MODE["reput"] = reput
            label = name if reput else f"{name}, reput paused"
            runs: dict[str, list] = {}
            cpu: dict[str, list] = {}
            for native in (True, False):
                MODE["native"] = native
                key = "native" if native else "pure"
                runs[key], cpu[key] = [], []
                for _ in range(repeat):
                    rate = fn()
                    runs[key].append(rate)
                    cpu[key].append(MODE["cpu_share"] / rate * 1e6)  # the writers' CPU us per message
            med = {k: statistics.median(v) for k, v in runs.items()}
            cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
            met = "" if target is None else ("met" if med["native"] >= target else "MISSED")
            print(f"{label:50s} {med['native']:11,.0f} {med['pure']:10,.0f} {med['native'] / med['pure']:6.2f} "
                  f"{med['native'] / raw_median:7.2f} {(f'{target:,}' if target else ''):>10s} {met:6s} "
                  f"{cpu_med['native']:6.2f} {cpu_med['pure']:6.2f}", flush=True)
            rows.append({"case": label, "median": med["native"], "pure_median": med["pure"],
                         "runs": runs["native"], "pure_runs": runs["pure"], "native_to_pure": med["native"] / med["pure"],
                         "ratio_to_raw": med["native"] / raw_median, "target": target,
                         "cpu_us_per_msg": cpu_med["native"], "pure_cpu_us_per_msg": cpu_med["pure"]})
    MODE.update(native=True, reput=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"python": sys.version, "cpus": os.cpu_count(), "load": os.getloadavg(), "repeat": repeat,
                   "file_size": FILE_SIZE,
                   "body_bytes": len(BODY), "rows": rows}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
