"""JBench against a SYNC_MASTER + slave pair: the Java 4.9.8 pair beside ``rmqstore broker``'s (issue 23).

Issue 23's second target: "with a SYNC_MASTER + slave pair (both on this machine): >= 1.0x the Java pair".
Every send is answered only once the slave has acknowledged its bytes, so a run measures the broker, the
replication round trip and the slave together.  Each run starts its pair fresh, both brokers on this machine,
loopback, 64 MiB commitlog files (``broker.SEGMENT``), ``--flush`` (ASYNC_FLUSH unless told) on both:

* **java**: a Java 4.9.8 name server, a master (``brokerRole=SYNC_MASTER``, ``brokerId=0``) and a slave
  (``brokerRole=SLAVE``, ``brokerId=1``, the same ``brokerName``, a store and ports of its own), started with
  ``tests/interop/rmqjava.py``'s ``JavaDist`` helpers (heap 1 GiB each, the distribution's); the slave learns the
  master's HA address (``brokerIP2`` = 127.0.0.1, listen port + 1) from the name server's answer to its
  registration, as 4.9.8 does without ``haMasterAddress``;
* **rmqstore**: ``rmqstore broker --role SYNC_MASTER`` with its embedded name server, and ``rmqstore broker
  --role SLAVE --no-namesrv --namesrv <the master's>``, which learns the HA address the same way.

Before JBench starts, a probe send (SEND_MESSAGE_V2 to the master, the WAIT property set) is repeated until the
master answers SUCCESS: a SYNC_MASTER with no slave connected answers SLAVE_NOT_AVAILABLE, so that answer means
the slave replicates.  Then the distribution's ``tools/JBench.java`` runs as in ``bench/broker.py`` (T threads of
synchronous sends from the Java client, 1 KiB body, tag and key; ``broker.run_jbench``) at each ``--threads``,
the pairs taking turns in each round and the order reversed the next (``broker.alternating_rounds``).  Per run:
JBench's msgs/s, p50, p99 and failed sends (any status but SEND_OK, e.g. FLUSH_SLAVE_TIMEOUT); the master's and
the slave's CPU seconds per stored message and peak RSS (``broker.BrokerSampler``, ``VmHWM``); the load
average before it; how long the slave took to be replicating; and, after JBench, both brokers' commitlog max
offsets (GET_BROKER_RUNTIME_INFO), asked until the slave's reaches the master's (or 30 s pass): the slave's lag
in bytes is printed with every run.  Without the Java distribution (or java) it prints one line and stops.

    python bench/broker_pair.py                              # 2 rounds x 8,32 threads x 2 pairs
                                                             # -> bench/results/broker_pair_async.json
    python bench/broker_pair.py --threads 1,8,32 --rounds 3 --seconds 10 --warmup 3
    python bench/broker_pair.py --quick --json /tmp/pair.json     # a smoke run: 3 s a case, 1 round
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from broker import (SEGMENT, BrokerProcess, BrokerSampler, add_jbench_arguments, alternating_rounds,  # noqa: E402
                    java_dist, jbench_settings, jbench_table, proc_peak_rss_mib, run_jbench, run_line, send_v2, uptime,
                    write_jbench_json)
from rmqstore.admin.bodies import decode_runtime_info  # noqa: E402
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode  # noqa: E402

PROBE_TOPIC = "JB_PAIR_PROBE"
REPLICATING_TIMEOUT = 60.0  # seconds for a fresh slave to be replicating (its registration, the HA connection)
CATCH_UP_TIMEOUT = 30.0  # seconds for the slave's commitlog to reach the master's after JBench
POLL = 0.2  # seconds between two probes, and between two looks at the offsets


@dataclass
class Server:
    """One broker of a pair: its process (for CPU time and RSS) and its address."""

    pid: int
    address: str


@dataclass
class Pair:
    """A running SYNC_MASTER and its slave, and the name server both registered with (JBench's)."""

    namesrv: str
    master: Server
    slave: Server


def java_pair(stack: contextlib.ExitStack, dist, folder: Path, flush: str) -> Pair:
    """A Java 4.9.8 name server, SYNC_MASTER and SLAVE, fresh under ``folder``, stopped when ``stack`` closes."""
    procs: list = []
    namesrv = stack.enter_context(dist.java_namesrv(folder / "ns"))
    conf = {"namesrvAddr": namesrv, "flushDiskType": flush, "mappedFileSizeCommitLog": str(SEGMENT),
            "brokerName": "bench", "brokerIP2": "127.0.0.1"}  # brokerIP2: the HA address it registers
    master = stack.enter_context(dist.java_broker(folder / "master", dict(conf, brokerRole="SYNC_MASTER",
                                                                          brokerId="0"), on_boot=procs.append))
    slave = stack.enter_context(dist.java_broker(folder / "slave", dict(conf, brokerRole="SLAVE", brokerId="1"),
                                                 on_boot=procs.append))
    return Pair(namesrv, Server(procs[0].pid, master), Server(procs[1].pid, slave))


def our_pair(stack: contextlib.ExitStack, flush: str) -> Pair:
    """``rmqstore broker`` as SYNC_MASTER (with its embedded name server) and as SLAVE registering with that name
    server, fresh, stopped when ``stack`` closes."""
    master = BrokerProcess(flush, role="SYNC_MASTER")
    stack.callback(master.stop)
    slave = BrokerProcess(flush, role="SLAVE", namesrv=master.namesrv)
    stack.callback(slave.stop)
    return Pair(master.namesrv, Server(master.proc.pid, f"127.0.0.1:{master.port}"),
                Server(slave.proc.pid, f"127.0.0.1:{slave.port}"))


async def _connect(address: str) -> RemotingClient:
    host, port = address.rsplit(":", 1)
    return await RemotingClient().connect(host, int(port))


async def until_replicating(master: str) -> dict:
    """Probe sends to ``master`` until one is answered SUCCESS (the slave acknowledged it); how long that took and
    the answers before it, by response code.  Raises after :data:`REPLICATING_TIMEOUT`."""
    client = await _connect(master)
    try:
        t0 = time.monotonic()
        refused: dict[int, int] = {}
        while True:
            r = await client.invoke(send_v2(PROBE_TOPIC, 0), timeout=10)
            if r.code == 0:
                return {"replicating_after_s": time.monotonic() - t0, "probes_refused": sum(refused.values())}
            refused[r.code] = refused.get(r.code, 0) + 1
            if time.monotonic() - t0 > REPLICATING_TIMEOUT:
                raise RuntimeError(f"the master {master} answered no probe SUCCESS in {REPLICATING_TIMEOUT:.0f} s "
                                   f"(answers by code: {refused}; the last: {r.code} {r.remark})")
            await asyncio.sleep(POLL)
    finally:
        await client.close()


async def _commitlog_max_offset(client: RemotingClient, address: str) -> int | None:
    r = await client.invoke(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=10)
    return decode_runtime_info(address, r.body).commit_log_max_offset if r.code == 0 else None


async def caught_up(pair: Pair) -> dict:
    """Both brokers' commitlog max offsets, asked until the slave's reaches the master's (or
    :data:`CATCH_UP_TIMEOUT` passes): the last answers, the slave's lag in bytes and the seconds it took."""
    master, slave = await _connect(pair.master.address), await _connect(pair.slave.address)
    try:
        t0 = time.monotonic()
        while True:
            m = await _commitlog_max_offset(master, pair.master.address)
            s = await _commitlog_max_offset(slave, pair.slave.address)
            if (m is not None and s is not None and s >= m) or time.monotonic() - t0 > CATCH_UP_TIMEOUT:
                break
            await asyncio.sleep(POLL)
        nan = float("nan")  # a broker that never answered
        lag = m - s if m is not None and s is not None else nan
        return {"master_max_offset": nan if m is None else m, "slave_max_offset": nan if s is None else s,
                "slave_lag_bytes": lag,
                "catch_up_s": time.monotonic() - t0}
    finally:
        await master.close()
        await slave.close()


def pair_case(dist, kind: str, flush: str, threads: int, seconds: int, warmup: int, topic: str) -> dict:
    """JBench at ``threads`` against a fresh pair, "java" or "rmqstore", once its slave replicates: JBench's figures,
    the master's and the slave's CPU per stored message and peak RSS, the load before it, and the offsets after."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix=f"jbench-pair-{kind}-") as tmp, contextlib.ExitStack() as stack:
        pair = java_pair(stack, dist, Path(tmp), flush) if kind == "java" else our_pair(stack, flush)
        replicating = asyncio.run(until_replicating(pair.master.address))
        with BrokerSampler(pair.master.pid, pair.master.address, topic) as on_master, \
                BrokerSampler(pair.slave.pid, pair.slave.address, topic) as on_slave:
            result = run_jbench(dist, pair.namesrv, topic, threads, seconds, warmup)
        result.update(cpu_us_per_msg=on_master.cpu_per_message() * 1e6,
                      peak_rss_mib=proc_peak_rss_mib(pair.master.pid),
                      slave_cpu_us_per_msg=on_slave.cpu_per_message() * 1e6,
                      slave_peak_rss_mib=proc_peak_rss_mib(pair.slave.pid), load=load, **replicating,
                      **asyncio.run(caught_up(pair)))
    return result


def pair_line(res: dict) -> str:
    """One run as the rounds print it: :func:`broker.run_line` (the master's CPU and RSS), then the pair's own."""
    return (f"{run_line(res)}; fail {res['fail']}; slave {res['slave_cpu_us_per_msg']:.1f} µs CPU/msg, "
            f"RSS {res['slave_peak_rss_mib']:.0f} MiB, at {res['slave_max_offset']} of the master's "
            f"{res['master_max_offset']} (lag {res['slave_lag_bytes']} B after {res['catch_up_s']:.1f} s); "
            f"replicating {res['replicating_after_s']:.1f} s after start ({res['probes_refused']} probes refused)")


def replication_table(runs: dict[str, dict[int, list[dict]]]) -> None:
    """What only a pair has, per pair and thread count: failed sends (every run's), the slave's median CPU per
    message and RSS, its largest lag after a run, and the median wait until it replicated."""
    print(f"{'pair':>12} {'threads':>7} {'fails (rounds)':>16} {'slave CPU µs/msg':>16} {'slave RSS MiB':>13} "
          f"{'max lag B':>9} {'replicating s':>13}")
    for name, by_threads in runs.items():
        for t, results in by_threads.items():
            fails = " / ".join(str(x["fail"]) for x in results)
            print(f"{name:>12} {t:7d} {fails:>16} "
                  f"{statistics.median(x['slave_cpu_us_per_msg'] for x in results):16.1f} "
                  f"{statistics.median(x['slave_peak_rss_mib'] for x in results):13.0f} "
                  f"{max(x['slave_lag_bytes'] for x in results):9} "
                  f"{statistics.median(x['replicating_after_s'] for x in results):13.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="JBench 3 s after 1 s of warm-up, 1 round (a smoke run)")
    add_jbench_arguments(ap, threads="8,32")
    ap.add_argument("--json", help="default bench/results/broker_pair_{async,sync}.json")
    args = ap.parse_args()
    root, seconds, warmup, rounds, threads = jbench_settings(args)
    if root is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="jbench-pair-java-") as work:
        dist = java_dist(root, work)
        print(f"JBench against SYNC_MASTER + SLAVE pairs ({args.flush}, {seconds} s after {warmup} s of warm-up, "
              f"{rounds} rounds); uptime: {uptime()}", flush=True)

        def run(r: int, t: int, name: str) -> dict:
            return pair_case(dist, name, args.flush, t, seconds, warmup, f"JBP_{args.flush[:4]}_{t}_{r}_{name}")
        runs = alternating_rounds(["java", "rmqstore"], threads, rounds, run, lambda t: f"{t:3d} threads", pair_line)
    print(f"uptime: {uptime()}")
    summary = jbench_table(runs)
    replication_table(runs)
    path = args.json or os.path.join(os.path.dirname(__file__), "results",
                                     f"broker_pair_{args.flush.split('_')[0].lower()}.json")
    write_jbench_json(path, {"flush": args.flush, "seconds": seconds, "warmup": warmup, "rounds": rounds,
                             "threads": threads, "pairs": "SYNC_MASTER + SLAVE"}, summary, runs)
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
