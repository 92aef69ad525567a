"""Broker throughput and latency: real-client sends and pulls, and the Java client's benchmark against both brokers.

Starts ``rmqstore broker`` in a subprocess (64 MiB segments, ASYNC_FLUSH unless ``--flush``,
loopback, ephemeral ports) and measures, in one invocation:

* ``put_message`` in-process on a fresh store (the baseline: the store alone);
* sync sends from the real client (``rocketmq`` 0.4.4, the official C++ client): one
  producer, then several producers in processes; msgs/s and p50/p99 latency per send;
* the same sends at the protocol level (our asyncio client, SEND_MESSAGE_V2 frames as the
  Java client builds them), one request in flight: the broker's own cost per request;
* pulls: PULL_MESSAGE of 32 messages at the protocol level (p50/p99 per pull) and the
  real client's pull consumer draining the topic (msgs/s);
* where the time goes: the frame codec, the send processor's checks and message building,
  and the store put, timed in-process per message;
* **JBench** (issue 23): the distribution's ``tools/JBench.java`` (T threads of synchronous sends
  from the Java 4.9.8 client, 1 KiB body, tag and key) through its ``bin/rmq-java``, against the
  Java 4.9.8 broker (with a Java name server) and against ``rmqstore broker``, each broker fresh
  for each run, at ``--threads`` (1, 8, 32), the brokers taking turns within each round and the
  order reversed the next.  Per run: JBench's msgs/s, p50 and p99; the broker's CPU seconds per
  stored message (``/proc/PID/stat``, sampled with the topic's max offsets while JBench sends,
  its warm-up included) and peak RSS (``VmHWM``); the load average before it.  ``--before``
  adds the broker of another checkout (a 'before' of a speed change) to the same rounds.  The
  distribution is found as the interop tests find it (``$RMQ_JAVA_DIST``, else
  ``../shared/rocketmq-4.9.8``); without it (or java) the JBench cases are skipped with one line.

The C++ and Node clients against both brokers are bench/broker_clients.py's, built of this file's pieces
(:func:`fresh_broker`, :func:`sampled_case`, :func:`alternating_rounds`, :func:`jbench_table`).

Client cases run ``--repeat`` times, JBench ``--rounds`` times; the tables show medians, and
the JSON (``--json``, ``--jbench-json``) every run.

    python bench/broker.py                       # both; JBench 2 rounds x 3 thread counts x 2 brokers
    python bench/broker.py --only jbench --flush SYNC_FLUSH --threads 8 --seconds 10
    python bench/broker.py --quick               # a few seconds per case
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import Message, MessageStore, StoreConfig  # noqa: E402
from rmqstore.format.properties import properties_to_string  # noqa: E402
from rmqstore.remoting import (FrameDecoder, RemotingClient, RemotingCommand, RequestCode,  # noqa: E402
                               encode_frame)

BODY = b"0123456789abcdef" * 64  # 1 KiB (no NUL: the C client takes bodies as C strings)
SEGMENT = 64 << 20  # commitlog file size of both brokers


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000 if s else 0.0


def in_process_puts(n: int) -> dict:
    root = tempfile.mkdtemp(prefix="rmqbench-")
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=64 << 20))
    store.start()
    props = properties_to_string({"TAGS": "TagA", "KEYS": "k", "UNIQ_KEY": "7F0000013DBD5FFD2B276CF89D220000",
                                  "CLUSTER": "DefaultCluster"})
    lat = []
    try:
        store.put_message(Message("BenchTopic", BODY, 0, properties=props, born_timestamp=1))  # first file
        t0 = time.perf_counter()
        for i in range(n):
            a = time.perf_counter()
            store.put_message(Message("BenchTopic", BODY, i % 4, properties=props, born_timestamp=1))
            lat.append(time.perf_counter() - a)
        elapsed = time.perf_counter() - t0
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return {"msgs_per_s": n / elapsed, "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}


class BrokerProcess:
    """``rmqstore broker`` with its embedded name server, from this checkout or from ``code`` (another one's
    root: a 'before' run), in a subprocess of its own; ``env`` adds to its environment.  ``role`` is its
    brokerRole (default ASYNC_MASTER); with ``namesrv`` it starts no name server of its own and registers with
    that one (a slave beside its master).  ``port``, ``namesrv`` and ``ha_address`` (a master's, where its slaves
    connect; None for a slave) are read from its banner."""

    def __init__(self, flush: str = "ASYNC_FLUSH", code: str | None = None, env: dict[str, str] | None = None,
                 role: str | None = None, namesrv: str | None = None):
        self.dir = tempfile.mkdtemp(prefix="rmqbench-broker-")
        conf = os.path.join(self.dir, "broker.conf")
        with open(conf, "w") as f:
            f.write(f"mappedFileSizeCommitLog={SEGMENT}\nflushDiskType={flush}\nbrokerName=bench\n"
                    f"storePathRootDir={self.dir}/store\n" + (f"brokerRole={role}\n" if role else ""))
        env = dict(os.environ, **(env or {}), PYTHONPATH=code or os.path.join(os.path.dirname(__file__), ".."))
        names = ["--no-namesrv", "--namesrv", namesrv] if namesrv else ["--namesrv-listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "broker", "--config", conf,
                                      "--listen", "127.0.0.1:0", *names],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            banner = self._banner(last="replicating from" if role == "SLAVE" else
                                  "serving slaves on" if namesrv else "name server listening on ")
            self.port = int(banner[0].split("listening on 127.0.0.1:")[1].split(",")[0])
            self.namesrv = namesrv or banner[-1].split("listening on ")[1].strip()
            ha = [line for line in banner if " serving slaves on " in line]
            self.ha_address = ha[0].split(" serving slaves on ")[1].strip() if ha else None
        except BaseException:
            self.stop()  # no broker left running behind a failed start
            raise
        self.spy = _start_life_profile(self.proc.pid)

    def _banner(self, last: str) -> list[str]:
        """The lines it prints once it serves ("broker NAME listening on ...", a master's "ROLE serving slaves on
        ..." or a slave's "SLAVE replicating from ...", "name server listening on ..."), up to the one with
        ``last``."""
        lines: list[str] = []
        while not lines or last not in lines[-1]:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"rmqstore broker exited before it printed {last!r}: {lines}")
            lines.append(line)
        return lines

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)
        if getattr(self, "spy", None) is not None:
            spy, raw = self.spy
            self.spy = None
            print_profile(f"py-spy, rmqstore broker pid {self.proc.pid}, its whole life", _py_spy_summary(spy, raw))


#: a folder: every ``rmqstore broker`` a benchmark starts is sampled by py-spy for its whole life (GIL holders,
#: 250 Hz), and where its time went is printed when it stops -- the profile beside a target a run missed
PROFILE_ENV = "RMQBENCH_PYSPY"


def _start_life_profile(pid: int) -> tuple[subprocess.Popen, str] | None:
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        return None
    os.makedirs(folder, exist_ok=True)
    raw = os.path.join(folder, f"broker-{pid}.raw")
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--gil", "--rate", "250", "--format", "raw",
                            "--output", raw], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return spy, raw


def print_profile(title: str, prof: dict, top: int = 25) -> None:
    """A py-spy summary (:func:`_py_spy_summary`): each function's self and total share of the samples."""
    print(f"{title}: {prof['samples']} samples holding the GIL; self / total share")
    for (fn, own), (fn_t, total) in list(zip(prof["self"], prof["total"]))[:top]:
        print(f"  {own:6.1%} {fn[:70]:70}   {total:6.1%} {fn_t[:70]}")


def _producer_process(namesrv: str, topic: str, k: int, count: int, barrier, out, warmup: int = 1) -> None:
    """One producer in a process of its own (the C++ client is not safe with several in one process): ``warmup``
    sends (at least the route lookup and the connection), then ``count`` timed ones once every producer is ready."""
    import rocketmq.client as rc

    p = rc.Producer(f"PG_bench_{topic}_{k}")
    p.set_namesrv_addr(namesrv)
    p.start()
    lat = []
    try:
        m = rc.Message(topic)
        m.set_body(BODY)
        m.set_tags("TagA")
        m.set_keys("k")
        for _ in range(max(1, warmup)):  # route lookup and connection (and the broker's warm-up) outside the timing
            p.send_sync(m)
        barrier.wait()
        for _ in range(count):
            a = time.perf_counter()
            p.send_sync(m)
            lat.append(time.perf_counter() - a)
    finally:
        p.shutdown()
        out.put(lat)


def client_sends(namesrv: str, n: int, producers: int, topic: str, warmup: int = 0) -> dict:
    """``n`` sync sends of the C++ client from ``producers`` processes after ``warmup`` untimed ones (both split
    among them); msgs/s and p50/p99 per send."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(producers + 1, timeout=120), ctx.Queue()
    procs = [ctx.Process(target=_producer_process,
                         args=(namesrv, topic, k, n // producers, barrier, out, warmup // producers))
             for k in range(producers)]
    for proc in procs:
        proc.start()
    barrier.wait()
    t0 = time.perf_counter()
    lat = []
    for _ in procs:
        lat.extend(out.get(timeout=300))
    elapsed = time.perf_counter() - t0
    for proc in procs:
        proc.join(30)
    return {"msgs_per_s": len(lat) / elapsed, "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99)}


def send_v2(topic: str, i: int) -> RemotingCommand:
    props = properties_to_string({"TAGS": "TagA", "KEYS": "k", "WAIT": "true"})
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_proto", "b": topic, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}, BODY)


def protocol_sends_and_pulls(port: int, n: int) -> tuple[dict, dict]:
    async def main():
        client = await RemotingClient().connect("127.0.0.1", port)
        try:
            await client.invoke(send_v2("ProtoTopic", 0))
            lat = []
            t0 = time.perf_counter()
            for i in range(n):
                a = time.perf_counter()
                r = await client.invoke(send_v2("ProtoTopic", i))
                lat.append(time.perf_counter() - a)
                assert r.code == 0, r.remark
            sends = {"msgs_per_s": n / (time.perf_counter() - t0), "p50_ms": _pct(lat, 0.5),
                     "p99_ms": _pct(lat, 0.99)}
            await asyncio.sleep(0.5)  # dispatch
            plat, got = [], 0
            t0 = time.perf_counter()
            for q in range(4):
                offset = 0
                while True:
                    a = time.perf_counter()
                    r = await client.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, {
                        "consumerGroup": "CG_bench", "topic": "ProtoTopic", "queueId": str(q),
                        "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                        "expressionType": "TAG"}))
                    plat.append(time.perf_counter() - a)
                    if r.code != 0:
                        break
                    offset = int(r.ext_fields["nextBeginOffset"])
                    got += r.body.count(BODY)
            pulls = {"msgs_per_s": got / (time.perf_counter() - t0), "p50_ms": _pct(plat, 0.5),
                     "p99_ms": _pct(plat, 0.99), "messages": got}
            return sends, pulls
        finally:
            await client.close()
    return asyncio.run(main())


def client_pull(namesrv: str, topic: str) -> dict:
    import rocketmq.client as rc

    c = rc.PullConsumer(f"CG_bench_pull_{time.monotonic_ns()}")
    c.offset_table = {}
    c.set_namesrv_addr(namesrv)
    c.start()
    try:
        t0 = time.perf_counter()
        got = sum(1 for _ in c.pull(topic))
        return {"msgs_per_s": got / (time.perf_counter() - t0), "messages": got}
    finally:
        c.shutdown()


def layer_costs(n: int) -> dict:
    """Microseconds per message of each layer, in-process (no socket)."""
    frame = encode_frame(send_v2("LayerTopic", 1))
    t0 = time.perf_counter()
    for _ in range(n):
        FrameDecoder().feed(frame)
    decode_us = (time.perf_counter() - t0) / n * 1e6
    cmd = send_v2("LayerTopic", 1)
    t0 = time.perf_counter()
    for _ in range(n):
        encode_frame(cmd.response(0, None, {"msgId": "7F0000010000A36D0000000000000000", "queueId": 1,
                                             "queueOffset": 1}))
    encode_us = (time.perf_counter() - t0) / n * 1e6
    from rmqstore.broker.send import SendMessageProcessor
    from rmqstore.broker.headers import Header
    proc = SendMessageProcessor.__new__(SendMessageProcessor)

    class _B:  # the processor's view of a broker, enough for building the message
        class config:
            broker_cluster_name = "DefaultCluster"
    proc.broker = _B
    h = Header({"properties": cmd.ext_fields["i"]})
    t0 = time.perf_counter()
    for _ in range(n):
        Message("LayerTopic", cmd.body, 1, 0, proc._properties(h.str("properties"))[0], 0, 1, "127.0.0.1:5555")
    build_us = (time.perf_counter() - t0) / n * 1e6
    return {"frame_decode_us": decode_us, "response_encode_us": encode_us, "message_build_us": build_us,
            "send_answer_us": send_answer_cost(n)}


def send_answer_cost(n: int) -> float:
    """Microseconds per SEND_MESSAGE_V2 of the broker's send processor in-process, frame decoded: the checks, the
    inner message, the store's put (64 MiB files, ASYNC_FLUSH, the reput running) and the response -- all a send
    costs the broker but the frame codec and the event loop."""
    from types import SimpleNamespace

    from rmqstore.broker import Broker, BrokerConfig

    async def main() -> float:
        root = tempfile.mkdtemp(prefix="rmqbench-answer-")
        broker = Broker(root, BrokerConfig(broker_name="bench", listen_port=0),
                        StoreConfig(mapped_file_size_commit_log=SEGMENT), namesrv_listen=None)
        await broker.start()
        try:
            conn = SimpleNamespace(remote_address=("127.0.0.1", 5555), remote_addr_text="127.0.0.1:5555",
                                   attributes={})
            answer = broker.send_processor.answer
            reqs = [send_v2("AnswerTopic", i) for i in range(n)]
            assert answer(conn, reqs[0]).code == 0  # the topic made
            t0 = time.perf_counter()
            for req in reqs:
                answer(conn, req)
            return (time.perf_counter() - t0) / n * 1e6
        finally:
            await broker.stop()
            shutil.rmtree(root, ignore_errors=True)
    return asyncio.run(main())


# -- JBench: the Java client's producer benchmark against the Java broker and ours ----------------------------

#: what tools/JBench.java prints at the end of a run
JBENCH_RESULT = re.compile(r"RESULT threads=(\d+) tps=(\d+) ok=(\d+) fail=(\d+) p50_ms=(-?[\d.]+) p99_ms=(-?[\d.]+)")
#: the Java client's heap: JBench keeps 2,000,000 latencies (16 MB) per thread, 512 MB at 32 threads
JBENCH_CLIENT_HEAP = "-Xms256m -Xmx2g"
SAMPLE_PERIOD = 0.5  # seconds between two samples of a broker's CPU time and stored messages


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/PID/stat`` utime and stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class BrokerSampler:
    """Samples a broker's CPU time and the messages stored in a topic (the sum of its queues' max offsets,
    asked with GET_MAX_OFFSET, which both brokers answer) every :data:`SAMPLE_PERIOD` while JBench runs, in a
    thread of its own; :meth:`cpu_per_message` is CPU seconds over messages between the first sample with
    messages and the first with the final count (JBench's warm-up and measured seconds)."""

    def __init__(self, pid: int, address: str, topic: str, queues: int = 8):
        self.pid, self.topic, self.queues = pid, topic, queues
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.samples: list[tuple[float, float, int]] = []  # (time, cpu seconds, messages)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="broker-sampler", daemon=True)

    def __enter__(self) -> "BrokerSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _run(self) -> None:
        client = await RemotingClient().connect(self.host, self.port)
        try:
            while not self._stop.is_set():
                stored = 0
                for q in range(self.queues):
                    r = await client.invoke(RemotingCommand(RequestCode.GET_MAX_OFFSET,
                                                            {"topic": self.topic, "queueId": str(q)}), timeout=10)
                    stored += int(r.ext_fields.get("offset", 0)) if r.code == 0 else 0
                self.samples.append((time.monotonic(), proc_cpu_seconds(self.pid), stored))
                await asyncio.sleep(SAMPLE_PERIOD)
        finally:
            await client.close()

    def cpu_per_message(self) -> float:
        sent = [s for s in self.samples if s[2] > 0]
        if len(sent) < 2:
            return float("nan")
        last = next(s for s in sent if s[2] == sent[-1][2])
        first = sent[0]
        return (last[1] - first[1]) / (last[2] - first[2]) if last[2] > first[2] else float("nan")


def run_jbench(dist, namesrv: str, topic: str, threads: int, seconds: int, warmup: int) -> dict:
    """One run of tools/JBench.java through bin/rmq-java: its RESULT line as numbers."""
    out = dist.run_java(dist.root / "tools" / "JBench.java", namesrv, topic, threads, seconds, warmup,
                        timeout=seconds + warmup + 180, env=dist.env(RMQ_CLIENT_HEAP=JBENCH_CLIENT_HEAP))
    m = JBENCH_RESULT.search(out)
    if m is None:
        raise RuntimeError(f"JBench printed no RESULT line:\n{out}")
    return {"msgs_per_s": float(m[2]), "ok": int(m[3]), "fail": int(m[4]), "p50_ms": float(m[5]),
            "p99_ms": float(m[6])}


@dataclass
class Variant:
    """Which ``rmqstore broker`` a JBench run starts: another checkout's (``code``, its root) or this one, with
    ``env`` added to its environment."""

    code: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class RunningBroker:
    """A fresh broker of one run: where clients find it (its name server), its own address, its process."""

    namesrv: str
    address: str
    pid: int


@contextlib.contextmanager
def fresh_broker(dist, kind: str, flush: str, folder: Path, variant: "Variant | None" = None):
    """A fresh broker under ``folder`` for one run, yielding a :class:`RunningBroker`, stopped when the block ends:
    "java" (the 4.9.8 broker and a Java name server, fresh both, in process groups of their own) or "rmqstore"
    (``rmqstore broker`` with its embedded name server, as ``variant`` says); both with ``flush``, 64 MiB
    commitlog files (:data:`SEGMENT`), loopback.  ``pid`` is the broker's process (the JVM, or our Python)."""
    with contextlib.ExitStack() as stack:
        if kind == "java":
            procs: list[subprocess.Popen] = []
            namesrv = stack.enter_context(dist.java_namesrv(folder / "ns"))
            address = stack.enter_context(dist.java_broker(
                folder / "broker", {"namesrvAddr": namesrv, "flushDiskType": flush,
                                    "mappedFileSizeCommitLog": str(SEGMENT), "brokerName": "bench"},
                on_boot=procs.append))
            yield RunningBroker(namesrv, address, procs[0].pid)
        else:
            variant = variant or Variant()
            ours = BrokerProcess(flush, variant.code, variant.env)
            stack.callback(ours.stop)
            yield RunningBroker(ours.namesrv, f"127.0.0.1:{ours.port}", ours.proc.pid)


def turns(names: list[str], r: int) -> list[str]:
    """The brokers' order in round ``r``: as given, reversed the next round, and so on."""
    return list(names) if r % 2 == 0 else list(reversed(names))


def sampled_case(dist, broker: str, flush: str, topic: str, send: Callable[[str, str, int], dict],
                 variant: "Variant | None" = None) -> dict:
    """``send(name server, broker address, broker pid)`` (it sends to ``topic`` and returns its figures) against a
    :func:`fresh_broker`, with a :class:`BrokerSampler` running: its figures plus the broker's CPU per stored
    message, its peak RSS and the load average before the broker started."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix=f"bench-{broker}-") as tmp, \
            fresh_broker(dist, broker, flush, Path(tmp), variant) as running:
        with BrokerSampler(running.pid, running.address, topic) as sampler:
            result = send(running.namesrv, running.address, running.pid)
        result.update(cpu_us_per_msg=sampler.cpu_per_message() * 1e6, peak_rss_mib=proc_peak_rss_mib(running.pid),
                      load=load)
    return result


def jbench_case(dist, broker: str, flush: str, threads: int, seconds: int, warmup: int, topic: str,
                variant: "Variant | None" = None, profile: str | None = None) -> dict:
    """JBench at ``threads`` against a fresh broker ("java" or "rmqstore", :func:`fresh_broker`), sampled
    (:func:`sampled_case`).  With ``profile`` (a file), py-spy samples our broker during JBench's measured
    seconds (:func:`_start_py_spy`)."""
    def send(namesrv: str, address: str, pid: int) -> dict:
        spy = _start_py_spy(pid, profile, seconds, warmup) if profile and broker != "java" else None
        result = run_jbench(dist, namesrv, topic, threads, seconds, warmup)
        if spy is not None:
            result["profile"] = _py_spy_summary(spy, profile)
        return result
    return sampled_case(dist, broker, flush, topic, send, variant)


def run_line(res: dict) -> str:
    """One run as the rounds print it (its failures, when it had some)."""
    return (f"{res['msgs_per_s']:9,.0f} msgs/s p50 {res['p50_ms']:.3f} p99 {res['p99_ms']:.3f} ms, "
            f"{res['cpu_us_per_msg']:.1f} µs CPU/msg, RSS {res['peak_rss_mib']:.0f} MiB, load {res['load']:.2f}"
            + (f", {res['fail']} failed" if res.get("fail") else ""))


def alternating_rounds(brokers: list[str], cases: list, rounds: int, run: Callable[[int, Any, str], dict],
                       label: Callable[[Any], str] = str,
                       describe: Callable[[dict], str] = run_line) -> dict[str, dict[Any, list[dict]]]:
    """``run(round, case, broker)`` for every broker at every case, ``rounds`` times; within a round the brokers
    take turns at each case, in the opposite order the next round (java, ours / ours, java / ...).  Each run is
    printed as it ends (``label`` names its case, ``describe`` its figures); the runs per broker and case, in
    order."""
    runs: dict[str, dict[Any, list[dict]]] = {name: {c: [] for c in cases} for name in brokers}
    for r in range(rounds):
        for case in cases:
            for name in turns(brokers, r):
                res = run(r, case, name)
                runs[name][case].append(res)
                print(f"  round {r + 1} {name:>10} {label(case)}: {describe(res)}", flush=True)
    return runs


def jbench_rounds(dist, brokers: dict[str, "Variant | None"], flush: str, threads: list[int], seconds: int,
                  warmup: int, rounds: int, profile: str | None = None) -> dict[str, dict[int, list[dict]]]:
    """Every broker at every thread count, ``rounds`` times, the brokers alternating (:func:`alternating_rounds`)."""
    def run(r: int, t: int, name: str) -> dict:
        topic = f"JB_{flush[:4]}_{t}_{r}_{name.replace(' ', '_')[:20]}"
        kind = "java" if name == "java" else "rmqstore"
        return jbench_case(dist, kind, flush, t, seconds, warmup, topic, brokers[name], profile)
    return alternating_rounds(list(brokers), threads, rounds, run, lambda t: f"{t:3d} threads")


def jbench_table(runs: dict[str, dict], label: str = "threads") -> dict:
    """Medians per broker and case (a thread count, or what ``label`` names), and each broker's ratio to the Java
    broker's median msgs/s; printed as a table (each round's msgs/s listed, as bench/README quotes them)."""
    summary: dict = {}
    width = max([len(label)] + [len(str(c)) for by_case in runs.values() for c in by_case])
    print(f"{'broker':>12} {label:>{width}} {'msgs/s (rounds)':>26} {'median':>9} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'CPU µs/msg':>10} {'RSS MiB':>8} {'load':>5} {'/ java':>6}")
    for name, by_case in runs.items():
        for t, results in by_case.items():
            med = {k: statistics.median(x[k] for x in results) for k in results[0] if k != "profile"}
            java = runs.get("java", {}).get(t)
            java_med = statistics.median(x["msgs_per_s"] for x in java) if java else 0
            ratio = med["msgs_per_s"] / java_med if java_med else None  # none when the Java broker stored nothing
            med.update(rounds=[x["msgs_per_s"] for x in results], ratio_to_java=ratio)
            summary.setdefault(name, {})[t] = med
            rounds = " / ".join(f"{x:,.0f}" for x in med["rounds"])
            print(f"{name:>12} {t!s:>{width}} {rounds:>26} {med['msgs_per_s']:9,.0f} {med['p50_ms']:7.3f} "
                  f"{med['p99_ms']:7.3f} {med['cpu_us_per_msg']:10.1f} {med['peak_rss_mib']:8.0f} {med['load']:5.2f} "
                  f"{'' if ratio is None else f'{ratio:6.2f}'}")
    return summary


def add_jbench_arguments(ap: argparse.ArgumentParser, threads: str) -> None:
    """The JBench options (flush type, thread counts, seconds, warm-up, rounds); ``threads`` is the default."""
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                    help="flushDiskType of every broker")
    ap.add_argument("--threads", default=threads, help="JBench client thread counts")
    ap.add_argument("--seconds", type=int, default=10, help="JBench's measured seconds")
    ap.add_argument("--warmup", type=int, default=3, help="JBench's warm-up seconds")
    ap.add_argument("--rounds", type=int, default=2, help="JBench rounds, brokers alternating")


def find_java_dist(cases: str) -> Path | None:
    """The RocketMQ 4.9.8 distribution (as the interop tests find it), or None after one line saying ``cases``
    are skipped and why (no distribution, or no java)."""
    from tests.interop.rmqjava import find_dist

    root, why = find_dist()
    if root is None:
        print(f"{cases} skipped: {why}")
    return root


def java_dist(root: Path, work: str):
    """The distribution at ``root``, its files written under ``work``; the Java broker's heap is the
    distribution's own 1 GiB (the tests use 256 MiB) unless ``$RMQ_BROKER_HEAP`` says otherwise."""
    from tests.interop.rmqjava import JavaDist

    os.environ.setdefault("RMQ_BROKER_HEAP", "-Xms1g -Xmx1g")
    return JavaDist(root, Path(work))


def jbench_settings(args) -> tuple[Path | None, int, int, int, list[int]]:
    """The Java distribution (None, one line printed, when it or java is missing: the JBench cases are skipped),
    JBench's seconds, warm-up and rounds (``--quick``: 3 s after 1 s, one round) and its thread counts."""
    root = find_java_dist("JBench cases")
    seconds, warmup, rounds = (3, 1, 1) if args.quick else (args.seconds, args.warmup, args.rounds)
    return root, seconds, warmup, rounds, [int(t) for t in args.threads.split(",")]


def jbench(args) -> None:
    """The JBench cases: skipped with one line when the Java distribution (or java) is missing."""
    root, seconds, warmup, rounds, threads = jbench_settings(args)
    if root is None:
        return
    brokers: dict[str, Variant | None] = {"java": None, "rmqstore": None}
    if args.before:
        brokers["before"] = Variant(code=os.path.abspath(args.before))
    for spec in args.also:
        name, _, assignment = spec.partition(":")
        var, _, value = assignment.partition("=")
        brokers[name] = Variant(env={var: value})
    with tempfile.TemporaryDirectory(prefix="jbench-java-") as work:
        dist = java_dist(root, work)
        print(f"JBench ({args.flush}, {seconds} s after {warmup} s of warm-up, {rounds} rounds); "
              f"uptime: {uptime()}", flush=True)
        profile = os.path.join(work, "py-spy.raw") if args.profile else None
        runs = jbench_rounds(dist, brokers, args.flush, threads, seconds, warmup, rounds, profile)
    print(f"uptime: {uptime()}")
    summary = jbench_table(runs)
    profiled = [(b, t, r["profile"]) for b, d in runs.items() for t, rs in d.items() for r in rs if "profile" in r]
    if profiled:
        name, t, prof = profiled[-1]
        print_profile(f"py-spy, {name} at {t} threads", prof, top=30)
    path = args.jbench_json or os.path.join(os.path.dirname(__file__), "results",
                                            f"broker_jbench_{args.flush.split('_')[0].lower()}.json")
    write_jbench_json(path, {"flush": args.flush, "seconds": seconds, "warmup": warmup, "rounds": rounds,
                             "threads": threads, "brokers": {b: v and v.__dict__ for b, v in brokers.items()}},
                      summary, runs)


def write_jbench_json(path: str, settings: dict, summary: dict, runs: dict[str, dict[int, list[dict]]]) -> None:
    """``settings``, the medians of :func:`jbench_table` and every run of :func:`alternating_rounds` (by broker
    and thread count) as JSON into ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({**settings, "summary": {b: {str(t): v for t, v in d.items()} for b, d in summary.items()},
                   "runs": {b: {str(t): v for t, v in d.items()} for b, d in runs.items()}}, f, indent=2)


JVM_START = 4.0  # seconds from JBench's command to its first sends, about (javac of the source file, the JVM)


def _start_py_spy(pid: int, out: str, seconds: int, warmup: int) -> subprocess.Popen:
    """py-spy recording ``pid`` (raw collapsed stacks, GIL holders only, 250 Hz) into ``out`` for JBench's
    measured seconds (it starts after the JVM's start and the warm-up)."""
    return subprocess.Popen(["sh", "-c", f"sleep {JVM_START + warmup}; exec py-spy record --pid {pid} --gil "
                             f"--rate 250 --format raw --duration {max(1, seconds - 1)} --output {out}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _py_spy_summary(spy: subprocess.Popen, raw: str, top: int = 30) -> dict:
    """Where the GIL's time went: the share of samples per function, ``self`` (the sampled frame) and ``total``
    (anywhere on the stack), the ``top`` of each."""
    spy.wait(120)
    if not os.path.exists(raw):
        return {"samples": 0, "self": [], "total": [], "error": f"py-spy wrote nothing (exit {spy.returncode})"}
    own: dict[str, int] = {}
    anywhere: dict[str, int] = {}
    samples = 0
    with open(raw) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(count)
            samples += n
            frames = [re.sub(r":\d+\)$", ")", fr) for fr in stack.split(";")]
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for fr in set(frames):
                anywhere[fr] = anywhere.get(fr, 0) + n

    def share(table: dict[str, int]) -> list[tuple[str, float]]:
        return [(k, v / max(1, samples)) for k, v in sorted(table.items(), key=lambda kv: -kv[1])[:top]]
    return {"samples": samples, "self": share(own), "total": share(anywhere)}


def uptime() -> str:
    """What ``uptime`` prints: the clock and the load averages."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def client_cases(args) -> None:
    """The C++ client, protocol-level sends and pulls, and the layer costs (issue 12's cases)."""
    n = 500 if args.quick else 3000
    runs: dict[str, list[dict]] = {}
    for r in range(args.repeat):
        runs.setdefault("in-process put_message, 1 thread", []).append(in_process_puts(n))
        broker = BrokerProcess(args.flush)
        try:
            runs.setdefault("real client sync send, 1 producer", []).append(
                client_sends(broker.namesrv, n, 1, f"C1_{r}"))
            runs.setdefault("real client sync send, 4 producers", []).append(
                client_sends(broker.namesrv, n, 4, f"C4_{r}"))
            sends, pulls = protocol_sends_and_pulls(broker.port, n)
            runs.setdefault("protocol SEND_MESSAGE_V2, 1 in flight", []).append(sends)
            runs.setdefault("protocol PULL_MESSAGE x32", []).append(pulls)
            runs.setdefault("real client pull consumer", []).append(client_pull(broker.namesrv, f"C1_{r}"))
        finally:
            broker.stop()
    table = {}
    print(f"{'case':45} {'msgs/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for case, results in runs.items():
        med = {k: statistics.median(x[k] for x in results) for k in results[0]}
        table[case] = med
        print(f"{case:45} {med['msgs_per_s']:10,.0f} {med.get('p50_ms', float('nan')):8.3f} "
              f"{med.get('p99_ms', float('nan')):8.3f}")
    costs = layer_costs(5000)
    table["layer costs (us per message)"] = costs
    print("layer costs, µs per message:", ", ".join(f"{k} {v:.1f}" for k, v in costs.items()))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"n": n, "repeat": args.repeat, "results": table}, f, indent=2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts; JBench 3 s after 1 s of warm-up, 1 round")
    ap.add_argument("--only", choices=("clients", "jbench"), help="only these cases (default: both)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each client case")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "broker.json"))
    add_jbench_arguments(ap, threads="1,8,32")
    ap.add_argument("--before", metavar="CHECKOUT",
                    help="also run the rmqstore broker of another checkout (its root, extensions built) in the "
                         "same rounds, as 'before'")
    ap.add_argument("--also", action="append", default=[], metavar="NAME:VAR=VALUE",
                    help="also run this checkout's broker with VAR=VALUE in its environment, as NAME (repeatable; "
                         "e.g. 'asyncio loop:RMQSTORE_UVLOOP=0')")
    ap.add_argument("--profile", action="store_true",
                    help="py-spy (GIL holders) on our brokers during JBench's measured seconds: each run's JSON "
                         "gets the top functions, and the table's end prints the last run's")
    ap.add_argument("--jbench-json", help="default bench/results/broker_jbench_{async,sync}.json")
    args = ap.parse_args()
    if args.only != "jbench":
        client_cases(args)
    if args.only != "clients":
        jbench(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
