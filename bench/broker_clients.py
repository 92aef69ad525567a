"""The C++ and Node clients' sends against both brokers: RocketMQ 4.9.8's own and ``rmqstore broker`` (issue 23).

Issue 23's third target: "the PyPI client (4 producer processes) and ali-ons (32 in flight) at least as fast as
against the Java broker; in-flight sends never slower than one at a time".  Each case runs against the Java 4.9.8
broker (with a Java name server) and against ``rmqstore broker`` (its embedded name server), each broker fresh for
each run (``broker.fresh_broker``: 64 MiB commitlog files, ASYNC_FLUSH unless ``--flush``, loopback), the brokers
taking turns at each case and the order reversed the next round (``broker.alternating_rounds``).  The cases, every
send synchronous with a 1 KiB body, a tag and a key:

* ``C++, 1 producer`` / ``C++, 4 producers``: the PyPI client (``rocketmq`` 0.4.4, the official C++ client), one
  producer per process (``broker.client_sends``), ``--warmup`` untimed and ``--count`` timed sends split among
  them;
* ``ali-ons, 1 at a time`` / ``ali-ons, 32 in flight``: the Node client from npm (``bench/node/send_bench.js``),
  one producer awaiting each send, then keeping a window of 32 sends in flight; ``--warmup`` sends first, then
  ``--count`` timed ones.

Per run: msgs/s, p50 and p99 per send; the broker's CPU seconds per stored message and its peak RSS (``VmHWM``),
sampled as for JBench (``broker.sampled_case``); the load average before it.  The table shows medians per case
and broker with the ratio to the Java broker; then, per broker, whether sends in flight (4 producers, 32 in
flight) were at least as fast as one at a time.

ali-ons comes from ``$RMQ_NODE_MODULES`` (the folder where ``npm install ali-ons`` ran, as for
tests/fixtures/frames/record.py) or, unset, is installed once into ``~/.cache/rmqstore-bench/node``
(``--node-modules`` picks another folder).  Without node or npm, or when the install fails, the Node cases are
skipped with one line; without the ``rocketmq`` package the C++ cases are; without the Java distribution (or java;
found as the interop tests find it) only our broker runs, said in one line.

    python bench/broker_clients.py                 # 2 rounds x 4 cases x 2 brokers, 50,000 sends a run
    python bench/broker_clients.py --only node --rounds 4
    python bench/broker_clients.py --quick --json /tmp/broker_clients.json   # small counts, 1 round: the smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from broker import alternating_rounds, client_sends, find_java_dist, java_dist, jbench_table, sampled_case, uptime

from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

HERE = Path(__file__).resolve().parent
SEND_BENCH = HERE / "node" / "send_bench.js"
#: the ali-ons the bench installs when ``$RMQ_NODE_MODULES`` is not set (the version the frame fixtures recorded)
ALI_ONS = "ali-ons@3.12.0"
NODE_CACHE = Path.home() / ".cache" / "rmqstore-bench" / "node"
#: what send_bench.js prints at the end of a run
NODE_RESULT = re.compile(r"RESULT inflight=(\d+) ok=(\d+) fail=(\d+) msgs_per_s=([\d.]+) p50_ms=([\d.]+) "
                         r"p99_ms=([\d.]+)")


@dataclass(frozen=True)
class Case:
    """One client case: ``client`` "cpp" (``width`` producer processes) or "node" (``width`` sends in flight)."""

    name: str
    client: str
    width: int

    def __str__(self) -> str:
        return self.name


CASES = [Case("C++, 1 producer", "cpp", 1), Case("C++, 4 producers", "cpp", 4),
         Case("ali-ons, 1 at a time", "node", 1), Case("ali-ons, 32 in flight", "node", 32)]


def cpp_missing() -> str | None:
    """Why the C++ cases cannot run (the ``rocketmq`` package does not import), or None."""
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # an ImportError, or the OSError of a librocketmq that does not load
        return f"C++ cases skipped: the rocketmq package (pip install rocketmq==0.4.4) does not import: {exc}"
    return None


def ali_ons_modules(folder: Path | None) -> tuple[Path | None, str]:
    """(the ``node_modules`` folder holding ali-ons, "") or (None, why the Node cases are skipped).
    ``$RMQ_NODE_MODULES`` wins; else ``folder`` (default :data:`NODE_CACHE`), where ali-ons is installed with npm
    the first time."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return None, f"Node cases skipped: no {' or '.join(missing)} on PATH"
    explicit = os.environ.get("RMQ_NODE_MODULES")
    if explicit:
        modules = Path(explicit) / "node_modules"
        if (modules / "ali-ons" / "package.json").is_file():
            return modules, ""
        return None, f"Node cases skipped: RMQ_NODE_MODULES={explicit} holds no node_modules/ali-ons"
    folder = folder or NODE_CACHE
    modules = folder / "node_modules"
    if (modules / "ali-ons" / "package.json").is_file():
        return modules, ""
    folder.mkdir(parents=True, exist_ok=True)
    print(f"installing {ALI_ONS} into {folder} (once)", flush=True)
    try:
        done = subprocess.run(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", ALI_ONS],
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, f"Node cases skipped: npm install {ALI_ONS} ran out of its 600 s"
    if done.returncode != 0 or not (modules / "ali-ons" / "package.json").is_file():
        last = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        return None, f"Node cases skipped: npm install {ALI_ONS} into {folder} failed ({done.returncode}): {last}"
    return modules, ""


def node_sends(modules: Path, namesrv: str, topic: str, inflight: int, count: int, warmup: int) -> dict:
    """One run of send_bench.js: its RESULT line as numbers."""
    env = dict(os.environ, NODE_PATH=str(modules))
    cmd = ["node", str(SEND_BENCH), namesrv, topic, str(inflight), str(count), str(warmup)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120 + (count + warmup) / 50)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"send_bench.js ran out of time:\n{exc.stdout!r}\n{exc.stderr!r}") from None
    m = NODE_RESULT.search(done.stdout)
    if done.returncode != 0 or m is None:
        raise RuntimeError(f"send_bench.js exited {done.returncode} without a RESULT line:\n{done.stdout}\n"
                           f"{done.stderr}")
    return {"msgs_per_s": float(m[4]), "ok": int(m[2]), "fail": int(m[3]), "p50_ms": float(m[5]),
            "p99_ms": float(m[6])}


def create_topic(namesrv: str, address: str, topic: str, queues: int = 4, timeout: float = 30) -> None:
    """``topic`` made on the broker at ``address`` (UPDATE_AND_CREATE_TOPIC, ``queues`` read and write queues: what
    a client's auto-creation from TBW102 makes), then waited for until the name server routes it.  ali-ons does not
    auto-create a topic; the C++ client's topic is made the same way, so both clients meet the same topic."""
    async def main() -> None:
        host, port = address.rsplit(":", 1)
        client = await RemotingClient().connect(host, int(port))
        try:
            r = await client.invoke(RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
                "order": "false"}), timeout=10)
            if r.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"creating {topic} at {address}: code {r.code} {r.remark}")
        finally:
            await client.close()
        host, port = namesrv.rsplit(":", 1)
        client = await RemotingClient().connect(host, int(port))
        try:
            deadline = time.monotonic() + timeout
            while (await client.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                                       timeout=10)).code != ResponseCode.SUCCESS:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the name server {namesrv} did not route {topic} in {timeout} s")
                await asyncio.sleep(0.1)
        finally:
            await client.close()
    asyncio.run(main())


def client_case(dist, broker: str, flush: str, case: Case, topic: str, count: int, warmup: int,
                modules: Path | None) -> dict:
    """``case`` against a fresh ``broker`` ("java" or "rmqstore"), sampled, its topic made first."""
    def send(namesrv: str, address: str, pid: int) -> dict:
        create_topic(namesrv, address, topic)
        if case.client == "cpp":
            return client_sends(namesrv, count, case.width, topic, warmup)
        assert modules is not None
        return node_sends(modules, namesrv, topic, case.width, count, warmup)
    return sampled_case(dist, broker, flush, topic, send)


def in_flight_checks(summary: dict[str, dict[Case, dict]]) -> list[dict]:
    """Per broker and client: the median msgs/s with sends in flight against one at a time (the issue: never
    slower); printed."""
    checks = []
    for name, by_case in summary.items():
        for client in ("cpp", "node"):
            ran = sorted((c for c in by_case if c.client == client), key=lambda c: c.width)
            if len(ran) < 2:
                continue
            one, many = ran[0], ran[-1]
            ratio = by_case[many]["msgs_per_s"] / by_case[one]["msgs_per_s"]
            checks.append({"broker": name, "one": one.name, "in_flight": many.name, "ratio": ratio,
                           "holds": ratio >= 1.0})
            print(f"in flight never slower than one at a time, {name:>8}: {many.name} "
                  f"{by_case[many]['msgs_per_s']:,.0f} against {one.name} {by_case[one]['msgs_per_s']:,.0f} "
                  f"msgs/s = {ratio:.2f}x: {'holds' if ratio >= 1.0 else 'does NOT hold'}")
    return checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4,000 sends a run after 50 of warm-up, 1 round")
    ap.add_argument("--only", choices=("cpp", "node"), help="only this client's cases (default: both)")
    ap.add_argument("--count", type=int, default=50000, help="timed sends a run (split among the C++ producers)")
    ap.add_argument("--warmup", type=int, default=2000,
                    help="untimed sends before the timed ones (split among the C++ producers)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, brokers alternating")
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                    help="flushDiskType of both brokers")
    ap.add_argument("--node-modules", type=Path, help=f"where to install ali-ons (default {NODE_CACHE}); "
                    "$RMQ_NODE_MODULES, when set, names a folder where it was installed")
    ap.add_argument("--json", default=str(HERE / "results" / "broker_clients.json"))
    args = ap.parse_args()
    count, warmup, rounds = (4000, 50, 1) if args.quick else (args.count, args.warmup, args.rounds)

    cases, skipped = [c for c in CASES if args.only in (None, c.client)], []
    modules = None
    if any(c.client == "cpp" for c in cases) and (why := cpp_missing()):
        skipped.append(why)
        cases = [c for c in cases if c.client != "cpp"]
    if any(c.client == "node" for c in cases):
        modules, why = ali_ons_modules(args.node_modules)
        if modules is None:
            skipped.append(why)
            cases = [c for c in cases if c.client != "node"]
    for why in skipped:
        print(why)
    if not cases:
        return 0

    dist_root = find_java_dist("the Java broker's cases (rmqstore broker alone)")
    brokers = ["java", "rmqstore"] if dist_root is not None else ["rmqstore"]
    with tempfile.TemporaryDirectory(prefix="bench-clients-java-") as work:
        dist = java_dist(dist_root, work) if dist_root is not None else None
        print(f"clients ({args.flush}, {count:,} sends a run, {rounds} rounds); uptime: {uptime()}", flush=True)

        def run(r: int, case: Case, broker: str) -> dict:
            topic = f"CL_{case.client}_{case.width}_{r}_{broker}"
            return client_case(dist, broker, args.flush, case, topic, count, warmup, modules)
        runs = alternating_rounds(brokers, cases, rounds, run, lambda c: f"{c.name:>21}")
    print(f"uptime: {uptime()}")
    summary = jbench_table(runs, label="case")
    checks = in_flight_checks(summary)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"flush": args.flush, "count": count, "warmup": warmup, "rounds": rounds,
                   "cases": [asdict(c) for c in cases], "skipped": skipped, "in_flight": checks,
                   "summary": {b: {c.name: v for c, v in d.items()} for b, d in summary.items()},
                   "runs": {b: {c.name: v for c, v in d.items()} for b, d in runs.items()}}, f, indent=2)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
