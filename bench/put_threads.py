"""Several writer threads against one: issue 15's "4 threads not slower than 1 thread".

``bench/put.py`` runs every configuration ``--repeat`` times in a row, so the 1-thread and
the 4-thread medians come from different minutes of a shared machine.  Here the thread
counts alternate -- 1, 4, 8, 1, 4, 8, ... -- each run in a fresh store with put.py's
message and 64 MiB files, ASYNC_FLUSH, dispatch running, on the compiled path; the table
shows each count's median, its runs, and its ratio to the 1-thread median of the same run.

    python bench/put_threads.py                 # 7 rounds (about a minute)
    python bench/put_threads.py --rounds 3      # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))

import put  # noqa: E402  (bench/put.py: the message, the store, the threads)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7, help="runs of each thread count, alternating")
    ap.add_argument("--count", type=int, default=200_000, help="puts a run (all threads together)")
    ap.add_argument("--threads", default="1,4,8", help="thread counts (the first is the reference)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "put_threads.json"))
    args = ap.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")]
    put.MODE.update(native=True, reput=True)
    load_before = os.getloadavg()
    runs: dict[int, list[float]] = {t: [] for t in counts}
    for _ in range(args.rounds):
        for t in counts:
            runs[t].append(put.run_single("ASYNC_FLUSH", t, args.count))
    load_after = os.getloadavg()
    med = {t: statistics.median(v) for t, v in runs.items()}
    ref = counts[0]
    print(f"single put, ASYNC_FLUSH, compiled path; {args.rounds} rounds alternating {args.threads} threads; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'threads':>7s} {'median msgs/s':>14s} {'vs ' + str(ref):>6s}  runs")
    for t in counts:
        print(f"{t:7d} {med[t]:14,.0f} {med[t] / med[ref]:6.2f}  " + " ".join(f"{r:,.0f}" for r in runs[t]))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"python": sys.version, "cpus": os.cpu_count(), "load": [load_before, load_after],
                   "rounds": args.rounds, "count": args.count,
                   "rows": [{"threads": t, "median": med[t], "ratio_to_first": med[t] / med[ref], "runs": runs[t]}
                            for t in counts]}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
