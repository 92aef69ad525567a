"""A cold broker's first sends against a warm broker's (issue 20, finding 6).

Each round starts ``rmqstore broker`` in a subprocess on a fresh store with RocketMQ's default
1 GiB commitlog segments (ASYNC_FLUSH, loopback, ephemeral ports) and times, with the real
client (``rocketmq`` 0.4.4, the official C++ client, one producer per process):

* **cold**: a new producer's first ``--sends`` sync sends, the first of them made as soon as
  the broker says it listens (the producer process is started and waiting before the broker);
* then ``--warmup`` more sends from the same producer (not timed);
* **warm**: another new producer's first ``--sends`` sync sends to the now warm broker --
  the same client-side first-send work (route lookup, connection), a broker that has
  its file and its topic.

Then the broker is stopped (SIGTERM: a clean shutdown), the messages its store holds are
counted against the sends that answered OK (a client that timed out and sent again stores a
message twice), and the store is deleted.  Two 1 GiB files are reserved while a broker runs
(the file in use and the one made ahead); one broker runs at a time.

``--tree NAME=PATH`` (repeatable) runs the broker from another checkout (its ``rmqstore``
package, compiled extensions included), e.g. the code before a fix; rounds alternate
between the trees, and their order flips every round.  Per round: p50, p99 (linear
interpolation between the two closest ranks, so one stalled send among 100 moves it), max
and the first send; the table shows medians over the rounds, and the target: cold p99
within 2x of warm p99.

    python bench/cold_start.py                                   # about a minute a round
    python bench/cold_start.py --rounds 5 --tree before=/tmp/before
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BODY = b"0123456789abcdef" * 64  # 1 KiB (no NUL: the C client takes bodies as C strings)
TOPIC = "ColdTopic"


def p99(samples: list[float]) -> float:
    """The 99th percentile, interpolated between the two closest ranks (numpy's default)."""
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def summary(lat_ms: list[float]) -> dict:
    return {"p50_ms": statistics.median(lat_ms), "p99_ms": p99(lat_ms), "max_ms": max(lat_ms),
            "first_ms": lat_ms[0]}


# -- the producer, in a process of its own (the C++ client is not safe with several in one process) ---------

def _producer(group: str, namesrv_q, go, n: int, warmup: int, out) -> None:
    import rocketmq.client as rc

    namesrv = namesrv_q.get(timeout=300)
    p = rc.Producer(group)
    p.set_namesrv_addr(namesrv)
    p.start()
    lat, ok = [], 0
    try:
        m = rc.Message(TOPIC)
        m.set_body(BODY)
        m.set_keys("k")
        go.wait(300)
        for i in range(n + warmup):
            a = time.perf_counter()
            try:
                ok += p.send_sync(m).status == rc.SendStatus.OK
            except Exception as exc:  # a send the client gave up on: counted, timed
                print(f"{group}: send {i} failed: {exc}", file=sys.stderr)
            if i < n:
                lat.append((time.perf_counter() - a) * 1000)
    finally:
        p.shutdown()
        out.put({"lat_ms": lat, "ok": ok})


class Producer:
    """A producer process, started and waiting; :meth:`run` gives it the name server and lets it send."""

    def __init__(self, ctx, group: str, n: int, warmup: int = 0):
        self.namesrv, self.go, self.out = ctx.Queue(), ctx.Event(), ctx.Queue()
        self.proc = ctx.Process(target=_producer, args=(group, self.namesrv, self.go, n, warmup, self.out))
        self.proc.start()

    def run(self, namesrv: str) -> dict:
        self.namesrv.put(namesrv)
        self.go.set()
        result = self.out.get(timeout=600)
        self.proc.join(60)
        return result


# -- the broker ----------------------------------------------------------------------------------------

class Broker:
    """``rmqstore broker`` from the checkout at ``tree`` on a fresh store with the default segment size."""

    def __init__(self, tree: str, parent: str, extra_conf: list[str], topic_exists: bool = False):
        self.dir = tempfile.mkdtemp(prefix="rmqbench-cold-", dir=parent)
        self.tree = tree
        if topic_exists:  # the topic in config/topics.json (as an operator makes it), the store still empty
            self._run_in_tree(
                "import sys\nfrom rmqstore.broker.config import BrokerConfig\n"
                "from rmqstore.broker.topics import PERM_READ, PERM_WRITE, TopicConfig, TopicConfigManager\n"
                "m = TopicConfigManager(sys.argv[1], BrokerConfig(broker_name='cold'))\n"
                f"m.put(TopicConfig({TOPIC!r}, 4, 4, PERM_READ | PERM_WRITE))\nm.persist()\n")
        conf = os.path.join(self.dir, "broker.conf")
        with open(conf, "w") as f:
            f.write(f"brokerName=cold\nflushDiskType=ASYNC_FLUSH\nstorePathRootDir={self.dir}/store\n")
            f.write("".join(line + "\n" for line in extra_conf))
        self.proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "broker", "--config", conf,
                                      "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tree,
                                     env=dict(os.environ, PYTHONPATH=tree))
        line = ""
        while not line.startswith("name server listening on "):  # (after the broker's and the HA port's)
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the broker from {tree} did not start (exit {self.proc.wait(60)})")
        self.namesrv = line.split("listening on ")[1].strip()

    def stop_and_count(self) -> int:
        """Stop the broker cleanly; the messages of TOPIC its store holds."""
        self.proc.terminate()
        self.proc.wait(120)
        out = self._run_in_tree(
            "import sys\nfrom rmqstore import open_store\ns = open_store(sys.argv[1])\n"
            f"print(sum(max(0, s.get_max_offset_in_queue({TOPIC!r}, q)) for q in range(16)))\ns.close()\n")
        return int(out.strip() or -1)

    def _run_in_tree(self, code: str) -> str:
        """``code`` run by the tree's rmqstore with the store's root as its argument; its output."""
        r = subprocess.run([sys.executable, "-c", code, os.path.join(self.dir, "store")], capture_output=True,
                           text=True, cwd=self.tree, env=dict(os.environ, PYTHONPATH=self.tree), timeout=120)
        if r.returncode:
            raise RuntimeError(f"{code!r} failed in {self.tree}: {r.stderr[-2000:]}")
        return r.stdout

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def one_round(ctx, tree: str, n: int, warmup: int, parent: str, tag: str, extra_conf: list[str],
              topic_exists: bool) -> dict:
    load_before = os.getloadavg()[0]
    cold = Producer(ctx, f"PG_cold_{tag}", n, warmup)
    warm = Producer(ctx, f"PG_warm_{tag}", n)
    time.sleep(2)  # both producers imported and waiting (the C++ client loads in about a second)
    broker = Broker(tree, parent, extra_conf, topic_exists)
    try:
        cold_result = cold.run(broker.namesrv)
        warm_result = warm.run(broker.namesrv)
        stored = broker.stop_and_count()
    finally:
        if broker.proc.poll() is None:
            broker.proc.kill()
        broker.remove()
    acked = cold_result["ok"] + warm_result["ok"]
    return {"cold": summary(cold_result["lat_ms"]), "warm": summary(warm_result["lat_ms"]),
            "cold_lat_ms": cold_result["lat_ms"], "warm_lat_ms": warm_result["lat_ms"],
            "sent": n + warmup + n, "acked": acked, "stored": stored, "stored_twice": max(0, stored - acked),
            "load_1min": [load_before, os.getloadavg()[0]]}


def _median(rounds: list[dict], side: str, key: str) -> float:
    return statistics.median(r[side][key] for r in rounds)


def report(by_tree: dict[str, list[dict]]) -> dict:
    print(f"{'tree':10} {'side':5} {'p50 ms':>8} {'p99 ms':>9} {'max ms':>9} {'first ms':>9}   (medians over rounds)")
    table = {}
    for name, rounds in by_tree.items():
        row: dict = {"rounds": len(rounds)}
        for side in ("cold", "warm"):
            row[side] = {k: _median(rounds, side, k) for k in ("p50_ms", "p99_ms", "max_ms", "first_ms")}
            m = row[side]
            print(f"{name:10} {side:5} {m['p50_ms']:8.2f} {m['p99_ms']:9.2f} {m['max_ms']:9.2f} {m['first_ms']:9.2f}")
        ratios = [r["cold"]["p99_ms"] / r["warm"]["p99_ms"] for r in rounds]
        row["cold_p99_over_warm_p99"] = statistics.median(ratios)
        row["ratio_per_round"] = ratios
        # every round's sends together (rounds x sends samples): a tail less at the mercy of one sample
        row["pooled_p99_ms"] = {side: p99([x for r in rounds for x in r[f"{side}_lat_ms"]]) for side in ("cold", "warm")}
        row["stored_twice"] = sum(r["stored_twice"] for r in rounds)
        row["met"] = row["cold_p99_over_warm_p99"] <= 2.0
        pooled = row["pooled_p99_ms"]
        print(f"{name:10} pooled over the rounds: cold p99 {pooled['cold']:.2f} ms, warm p99 {pooled['warm']:.2f} ms")
        print(f"{name:10} cold p99 / warm p99: {row['cold_p99_over_warm_p99']:.2f} (rounds: "
              f"{', '.join(f'{x:.2f}' for x in ratios)}) -> target <= 2: {'met' if row['met'] else 'MISSED'}; "
              f"messages stored twice: {row['stored_twice']}")
        table[name] = row
    return table


def parse_tree(spec: str) -> tuple[str, str, list[str]]:
    """``NAME=PATH`` or ``NAME=PATH;KEY=VALUE;...`` (broker.conf lines for that tree's brokers only)."""
    name, _, rest = spec.partition("=")
    path, *conf = rest.split(";")
    return name, path, conf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sends", type=int, default=100, help="sends timed per producer (cold, warm)")
    ap.add_argument("--warmup", type=int, default=3000, help="untimed sends between the cold and the warm ones")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH[;KEY=VALUE...]",
                    help="a checkout to run the broker from, with broker.conf lines of its own (repeatable); "
                         "default: this one, named 'this'")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a line added to every broker's broker.conf (repeatable)")
    ap.add_argument("--topic-exists", action="store_true",
                    help="the topic is made before the broker starts (config/topics.json): the first send "
                         "does not create it")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the stores go (2 GiB free needed)")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "cold_start.json"))
    args = ap.parse_args()
    trees = [parse_tree(t) for t in args.tree] or [("this", os.path.dirname(HERE), [])]
    ctx = multiprocessing.get_context("spawn")
    by_tree: dict[str, list[dict]] = {name: [] for name, _, _ in trees}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    for r in range(args.rounds):
        for name, path, conf in trees if r % 2 == 0 else trees[::-1]:
            result = one_round(ctx, os.path.abspath(path), args.sends, args.warmup, args.dir, f"{name}_{r}",
                               args.conf + conf, args.topic_exists)
            by_tree[name].append(result)
            print(f"round {r} {name}: cold p99 {result['cold']['p99_ms']:.2f} ms (first {result['cold']['first_ms']:.1f})"
                  f", warm p99 {result['warm']['p99_ms']:.2f} ms, stored {result['stored']} of {result['sent']} sent "
                  f"({result['acked']} OK), load {result['load_1min'][0]:.2f}", flush=True)
    table = report(by_tree)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"started": started, "cpus": os.cpu_count(), "sends": args.sends, "warmup": args.warmup,
                   "trees": {name: [path, conf] for name, path, conf in trees}, "conf": args.conf,
                   "topic_exists": args.topic_exists, "results": table, "rounds": by_tree}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
