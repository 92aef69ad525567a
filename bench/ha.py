"""Replication throughput: SYNC_MASTER and ASYNC_MASTER beside ASYNC_FLUSH without replication.

One invocation measures, with 1 and 8 put threads, single 1 KiB puts into:

* ``ASYNC_FLUSH`` -- an ASYNC_MASTER with no HA service (no replication at all);
* ``ASYNC_MASTER`` -- the same with a slave replicating (the put never waits for it);
* ``SYNC_MASTER`` -- every put waits until the slave acknowledged it (group transfer).

The slave runs in its own process (as it would on its own machine), connected over
loopback.  For SYNC_MASTER the replica wait of every put is timed on its own (from the
request to the answer) and reported as p50/p99.  Prints a table and writes JSON.

    python bench/ha.py                       # writes bench/results/ha.json
    python bench/ha.py --count 2000          # smaller, for a smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import BrokerRole, Message, MessageStore, StoreConfig  # noqa: E402

from put import BODY, PROPS, run_threads  # noqa: E402  (bench/put.py)

FILE_SIZE = 64 * 1024 * 1024
CASES = ("ASYNC_FLUSH", "ASYNC_MASTER", "SYNC_MASTER")


def run_slave(root: str, master: str) -> None:
    """``--slave`` mode: replicate until stdin closes."""
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=FILE_SIZE, broker_role=BrokerRole.SLAVE,
                                           ha_master_address=master, ha_reconnect_interval=100))
    store.start()
    print("S", flush=True)
    sys.stdin.read()
    store.shutdown()


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def measure(case: str, threads: int, count: int) -> dict:
    root = tempfile.mkdtemp(prefix="rmqbench-ha-")
    role = {"ASYNC_FLUSH": BrokerRole.ASYNC_MASTER, "ASYNC_MASTER": BrokerRole.ASYNC_MASTER,
            "SYNC_MASTER": BrokerRole.SYNC_MASTER}[case]
    replicated = case != "ASYNC_FLUSH"
    master = MessageStore(os.path.join(root, "m"), StoreConfig(
        mapped_file_size_commit_log=FILE_SIZE, broker_role=role, ha_enable=replicated, ha_listen_port=0))
    master.start()
    slave = None
    waits: list[float] = []
    if replicated:
        slave = subprocess.Popen([sys.executable, __file__, "--slave", os.path.join(root, "s"),
                                  master.ha_service.listen_address], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert slave.stdout.readline().strip() == "S"
        deadline = time.monotonic() + 10
        while not master.ha_service.positions()["slaves"] or \
                master.ha_service.positions()["slaves"][0]["pushed"] < 0:
            assert time.monotonic() < deadline, "the slave did not connect"
            time.sleep(0.01)
        timed = master.put_path.replica_status

        def timing(replica, tr):  # the replica wait alone, per put
            t0 = time.perf_counter()
            status = timed(replica, tr)
            if not isinstance(replica, type(status)):
                waits.append((time.perf_counter() - t0) * 1000)
            return status

        master.put_path.replica_status = timing
    per_thread = count // threads
    msgs = [Message(topic="BenchTopic", queue_id=i % 8, body=BODY, properties=PROPS) for i in range(per_thread)]
    elapsed, failures = run_threads(master.put_message, [msgs] * threads)
    caught_up = None
    if replicated:
        t1 = time.perf_counter()
        while master.ha_service.push2_slave_max_offset < master.get_max_phy_offset():
            time.sleep(0.005)
        caught_up = (time.perf_counter() - t1) * 1000
        slave.stdin.close()  # the slave goes first, so it does not see its master vanish
        slave.wait(timeout=60)
        slave.stdout.close()
    master.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return {"case": case, "threads": threads, "puts": per_thread * threads, "seconds": elapsed,
            "puts_per_s": per_thread * threads / elapsed, "failures": len(failures),
            "replica_wait_p50_ms": _percentile(waits, 0.5) if waits else None,
            "replica_wait_p99_ms": _percentile(waits, 0.99) if waits else None,
            "slave_caught_up_after_ms": caught_up}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=20000, help="puts per case")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--case", action="append", choices=CASES, help="only these cases (default: all)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "ha.json"))
    ap.add_argument("--slave", nargs=2, metavar=("ROOT", "MASTER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.slave:
        run_slave(*args.slave)
        return 0
    rows = []
    before = os.getloadavg()
    print(f"load average {before[0]:.2f} {before[1]:.2f} {before[2]:.2f} before", flush=True)
    for case in args.case or CASES:
        for threads in (1, 8):
            runs = [measure(case, threads, args.count) for _ in range(args.repeat)]
            best = sorted(runs, key=lambda r: r["puts_per_s"])[len(runs) // 2]
            best["runs_puts_per_s"] = [r["puts_per_s"] for r in runs]
            rows.append(best)
            p50, p99 = best["replica_wait_p50_ms"], best["replica_wait_p99_ms"]
            print(f"{case:<13} {threads} thr  {best['puts_per_s']:>9,.0f} puts/s  failures {best['failures']}"
                  + (f"  replica wait p50 {p50:.2f} ms p99 {p99:.2f} ms" if p50 is not None else ""), flush=True)
    load = os.getloadavg()
    out = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": load,
                       "loadavg_before": before},
           "count": args.count, "repeat": args.repeat, "rows": rows}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after; wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
