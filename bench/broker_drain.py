"""Pull and push consumers draining a topic of 1M messages: the Java 4.9.8 broker against ``rmqstore broker``.

Issue 23's fourth target ("pull and push consumers draining 1M messages: >= the Java broker").  Each run
starts a broker fresh (``broker.fresh_broker``: the Java 4.9.8 broker with a Java name server, heap 1 GiB,
or ``rmqstore broker`` with its embedded name server; both ``--flush`` (ASYNC_FLUSH), 64 MiB commitlog
files, loopback) and runs ``bench/java/Drain.java`` (the Java 4.9.8 client, through the distribution's
``bin/rmq-java``, as JBench is run) against it, which

1. **fills** a topic of ``--queues`` (8) queues with ``--messages`` (1,000,000) messages (1 KiB body, a tag
   and a key each, like JBench) from ``--fill-threads`` (4) threads sending batches of ``--batch`` (64)
   (``DefaultMQProducer.send`` of a list; a batch refused as busy is sent again), then waits until the queues' max offsets sum to the count (all
   dispatched).  The fill rate is reported but is not the measured thing;
2. **pull**: drains the topic with a ``DefaultMQPullConsumer`` (synchronous pulls of 32 messages at offsets
   the caller keeps, as RocketMQ's own PullConsumer example does; one thread per queue, from offset 0 to the
   queue's max offset);
3. **push**: drains it again with a ``DefaultMQPushConsumer`` of a new group (CONSUME_FROM_FIRST_OFFSET, its
   defaults otherwise: 32 messages a pull, 20 consume threads) whose listener counts.

A drain is timed by the client from its first PULL_MESSAGE request (an RPCHook sees it go out) to the moment
the count reaches the messages filled: msgs/s.  Before each phase the program waits for our go (on its stdin),
so the broker's CPU time (``/proc/PID/stat``) is read around each phase and its peak RSS (``VmHWM``) reset at
the phase's start (``/proc/PID/clear_refs``) and read at its end: CPU µs per drained message and the peak
RSS during each drain.  Before the drains the broker is left to settle until idle (``--settle``: the fill's
commitlog flush and dispatch behind it, at most 60 s), so neither drain pays for the fill.  The load average
is read before each run.  Rounds alternate the brokers (java, rmqstore / rmqstore, java / ...).  The client
drains in the order pull, push with its JIT warmed by the fill, the same for both brokers.

    python bench/broker_drain.py                      # 1M messages, 3 rounds x 2 brokers
    python bench/broker_drain.py --quick --json /tmp/broker_drain.json   # 20,000 messages, 1 round

The table shows each broker's medians and the ratio to the Java broker's; the JSON (``--json``, default
bench/results/broker_drain.json) every run.  Without the distribution (or java) the script prints one line
and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import broker as bench

HERE = Path(__file__).resolve().parent
DRAIN_JAVA = HERE / "java" / "Drain.java"
PHASES = ("fill", "pull", "push")
#: what Drain.java prints (see its header)
DONE = re.compile(r"DONE (\w+) messages=(\d+) seconds=([\d.]+)(?: not_ok=(\d+) busy=(\d+))?")
DISPATCHED = re.compile(r"DISPATCHED seconds=([\d.]+) offsets=([\d,]+)")
CLIENT_HEAP = "-Xms256m -Xmx1g"


def reset_peak_rss(pid: int) -> None:
    """Set the process's ``VmHWM`` to its present RSS (``clear_refs`` 5), so a later
    :func:`broker.proc_peak_rss_mib` is the peak since now."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def settle(pid: int, limit: float, busy: float = 0.05, window: float = 1.0) -> float:
    """Wait until the process used under ``busy`` of a core over ``window`` seconds (at most ``limit`` seconds);
    the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        cpu = bench.proc_cpu_seconds(pid)
        time.sleep(window)
        if bench.proc_cpu_seconds(pid) - cpu < busy * window:
            break
    return time.monotonic() - t0


class Phases:
    """Reads Drain.java's lines and marks the broker around each phase: on ``READY`` the broker's CPU seconds
    and a fresh peak RSS, then our go on its stdin; on ``DONE`` the phase's figures."""

    def __init__(self, proc: subprocess.Popen, pid: int, settle_limit: float):
        self.proc, self.pid, self.settle_limit = proc, pid, settle_limit
        self.results: dict[str, dict] = {}
        self.lines: list[str] = []
        self._cpu = 0.0

    def read(self) -> dict[str, dict]:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self.on_line(self.lines[-1])
        return self.results

    def on_line(self, line: str) -> None:
        if line.startswith("READY "):
            phase = line.split()[1]
            if phase != "fill":
                self.results[phase] = {"settle_s": settle(self.pid, self.settle_limit)}
            reset_peak_rss(self.pid)
            self._cpu = bench.proc_cpu_seconds(self.pid)
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        elif m := DONE.match(line):
            n, seconds = int(m[2]), float(m[3])
            result = self.results.setdefault(m[1], {})
            result.update(messages=n, seconds=seconds, msgs_per_s=n / seconds,
                          cpu_us_per_msg=(bench.proc_cpu_seconds(self.pid) - self._cpu) / n * 1e6,
                          peak_rss_mib=bench.proc_peak_rss_mib(self.pid))
            if m[4] is not None:  # the fill's sends answered other than SEND_OK, and refused as busy
                result.update(not_ok=int(m[4]), busy=int(m[5]))
        elif m := DISPATCHED.match(line):
            self.results["fill"].update(dispatch_wait_s=float(m[1]), queue_offsets=[int(x) for x in m[2].split(",")])


def run_drain(dist, running: bench.RunningBroker, topic: str, args) -> dict[str, dict]:
    """Drain.java against a running broker: each phase's figures (:class:`Phases`).  A failure, or a run past
    its time (the Java side's own limits and then some), raises with everything it printed."""
    cmd = dist.java_command(DRAIN_JAVA, running.namesrv, topic, args.messages, args.queues, args.fill_threads,
                            args.batch)
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=dist.env(RMQ_CLIENT_HEAP=CLIENT_HEAP), cwd=str(dist.workdir))
        watchdog = threading.Timer(600 + 3 * (120 + args.messages / 2000), proc.kill)
        watchdog.start()
        phases = Phases(proc, running.pid, args.settle)
        try:
            results = phases.read()
            proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0 or set(results) != set(PHASES):
            err.seek(0)
            raise RuntimeError(f"Drain.java exited {proc.returncode} with phases {sorted(results)}\n--- stdout\n"
                               + "\n".join(phases.lines) + f"\n--- stderr (end)\n{err.read()[-4000:]}")
    return results


def drain_case(dist, kind: str, topic: str, args) -> dict:
    """One run: a fresh broker of ``kind`` ("java" or "rmqstore"), filled and drained twice; the load average
    before it, and each phase's figures."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix=f"drain-{kind}-") as tmp, \
            bench.fresh_broker(dist, kind, args.flush, Path(tmp)) as running:
        return {"load": load, **run_drain(dist, running, topic, args)}


def drain_line(res: dict) -> str:
    """One run as the rounds print it: each phase's figures and the load."""
    return ", ".join(f"{p} {res[p]['msgs_per_s']:,.0f} msgs/s ({res[p]['cpu_us_per_msg']:.0f} µs CPU/msg, "
                     f"RSS {res[p]['peak_rss_mib']:.0f} MiB)" for p in PHASES) + f", load {res['load']:.2f}"


def drain_rounds(dist, args, rounds: int) -> dict[str, list[dict]]:
    """Both brokers, ``rounds`` times, taking turns (:func:`broker.alternating_rounds`); one line per run."""
    runs = bench.alternating_rounds(["java", "rmqstore"], ["drain"], rounds,
                                    lambda r, _case, kind: drain_case(dist, kind, f"DRAIN_{r}_{kind}", args),
                                    label=lambda case: case, describe=drain_line)
    return {kind: by_case["drain"] for kind, by_case in runs.items()}


def drain_table(runs: dict[str, list[dict]]) -> dict:
    """Medians per broker and phase, with each round's msgs/s and the ratio to the Java broker's median;
    printed as a table."""
    summary: dict = {}
    print(f"{'phase':>5} {'broker':>9} {'msgs/s (rounds)':>26} {'median':>9} {'CPU µs/msg':>10} {'RSS MiB':>8} "
          f"{'settle s':>8} {'load':>5} {'/ java':>6}")
    for phase in PHASES:
        for kind, results in runs.items():
            rows = [x[phase] for x in results]
            med = {k: statistics.median(x[k] for x in rows) for k in ("msgs_per_s", "seconds", "cpu_us_per_msg",
                                                                       "peak_rss_mib")}
            med.update(load=statistics.median(x["load"] for x in results), rounds=[x["msgs_per_s"] for x in rows])
            if phase != "fill":  # the drains wait for the broker to go idle first
                med["settle_s"] = statistics.median(x["settle_s"] for x in rows)
            java = statistics.median(x[phase]["msgs_per_s"] for x in runs["java"])
            med["ratio_to_java"] = med["msgs_per_s"] / java
            summary.setdefault(kind, {})[phase] = med
            rounds = " / ".join(f"{x:,.0f}" for x in med["rounds"])
            settled = f"{med['settle_s']:.1f}" if "settle_s" in med else "-"
            print(f"{phase:>5} {kind:>9} {rounds:>26} {med['msgs_per_s']:9,.0f} {med['cpu_us_per_msg']:10.1f} "
                  f"{med['peak_rss_mib']:8.0f} {settled:>8} {med['load']:5.2f} {med['ratio_to_java']:6.2f}")
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 messages, 1 round: a smoke run")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages filled and drained per run")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, brokers alternating")
    ap.add_argument("--queues", type=int, default=8, help="queues of the topic")
    ap.add_argument("--fill-threads", type=int, default=4, help="the filling producer's threads")
    ap.add_argument("--batch", type=int, default=64, help="messages per batch send while filling")
    ap.add_argument("--settle", type=float, default=60.0,
                    help="at most this many seconds before each drain for the broker to go idle")
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                    help="flushDiskType of both brokers")
    ap.add_argument("--json", default=str(HERE / "results" / "broker_drain.json"))
    args = ap.parse_args()
    if args.quick:
        args.messages, args.rounds = 20_000, 1
    root = bench.find_java_dist("the drain cases")
    if root is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="drain-java-") as work:
        dist = bench.java_dist(root, work)
        print(f"drain: {args.messages:,} messages, {args.queues} queues, {args.rounds} rounds ({args.flush}); "
              f"uptime: {bench.uptime()}", flush=True)
        runs = drain_rounds(dist, args, args.rounds)
    print(f"uptime: {bench.uptime()}")
    summary = drain_table(runs)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"messages": args.messages, "queues": args.queues, "fill_threads": args.fill_threads,
                   "batch": args.batch, "flush": args.flush, "rounds": args.rounds, "summary": summary,
                   "runs": runs}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
