"""Broker throughput and latency: real-client sends and pulls next to in-process puts.

Starts ``rmqstore broker`` in a subprocess (64 MiB segments, ASYNC_FLUSH, loopback,
ephemeral ports) and measures, in one invocation:

* ``put_message`` in-process on a fresh store (the baseline: the store alone);
* sync sends from the real client (``rocketmq`` 0.4.4, the official C++ client): one
  producer, then several producers in threads; msgs/s and p50/p99 latency per send;
* the same sends at the protocol level (our asyncio client, SEND_MESSAGE_V2 frames as the
  Java client builds them), one request in flight: the broker's own cost per request;
* pulls: PULL_MESSAGE of 32 messages at the protocol level (p50/p99 per pull) and the
  real client's pull consumer draining the topic (msgs/s);
* where the time goes: the frame codec, the send processor's checks and message building,
  and the store put, timed in-process per message.

Each case runs ``--repeat`` times; the table shows medians.  ``--json PATH`` writes them.

    python bench/broker.py                # about a minute on 2 cores
    python bench/broker.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import Message, MessageStore, StoreConfig  # noqa: E402
from rmqstore.format.properties import properties_to_string  # noqa: E402
from rmqstore.remoting import (FrameDecoder, RemotingClient, RemotingCommand, RequestCode,  # noqa: E402
                               encode_frame)

BODY = b"0123456789abcdef" * 64  # 1 KiB (no NUL: the C client takes bodies as C strings)
CONF = "mappedFileSizeCommitLog=67108864\nflushDiskType=ASYNC_FLUSH\nbrokerName=bench\n"


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
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rmqbench-broker-")
        conf = os.path.join(self.dir, "broker.conf")
        with open(conf, "w") as f:
            f.write(CONF + f"storePathRootDir={self.dir}/store\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
        self.proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "broker", "--config", conf,
                                      "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        broker_line, ns_line = self.proc.stdout.readline(), self.proc.stdout.readline()
        while ns_line and not ns_line.startswith("name server listening on "):  # (the HA port's line first)
            ns_line = self.proc.stdout.readline()
        self.port = int(broker_line.split("listening on 127.0.0.1:")[1].split(",")[0])
        self.namesrv = ns_line.split("listening on ")[1].strip()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def _producer_process(namesrv: str, topic: str, k: int, count: int, barrier, out) -> None:
    """One producer in a process of its own (the C++ client is not safe with several in one process)."""
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
        p.send_sync(m)  # route lookup and connection outside the timing
        barrier.wait()
        for _ in range(count):
            a = time.perf_counter()
            p.send_sync(m)
            lat.append(time.perf_counter() - a)
    finally:
        p.shutdown()
        out.put(lat)


def client_sends(namesrv: str, n: int, producers: int, topic: str) -> dict:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(producers + 1, timeout=120), ctx.Queue()
    procs = [ctx.Process(target=_producer_process, args=(namesrv, topic, k, n // producers, barrier, out))
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


def _send_v2(topic: str, i: int) -> RemotingCommand:
    props = properties_to_string({"TAGS": "TagA", "KEYS": "k", "WAIT": "true"})
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_proto", "b": topic, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}, BODY)


def protocol_sends_and_pulls(port: int, n: int) -> tuple[dict, dict]:
    async def main():
        client = await RemotingClient().connect("127.0.0.1", port)
        try:
            await client.invoke(_send_v2("ProtoTopic", 0))
            lat = []
            t0 = time.perf_counter()
            for i in range(n):
                a = time.perf_counter()
                r = await client.invoke(_send_v2("ProtoTopic", i))
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
    frame = encode_frame(_send_v2("LayerTopic", 1))
    t0 = time.perf_counter()
    for _ in range(n):
        FrameDecoder().feed(frame)
    decode_us = (time.perf_counter() - t0) / n * 1e6
    cmd = _send_v2("LayerTopic", 1)
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
        text, wait = proc._properties(h.str("properties"))  # (the stored text, WAIT taken out)
        Message("LayerTopic", cmd.body, 1, 0, text, 0, 1, ("127.0.0.1", 5555), wait_in_map=wait)
    build_us = (time.perf_counter() - t0) / n * 1e6
    return {"frame_decode_us": decode_us, "response_encode_us": encode_us, "message_build_us": build_us}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "broker.json"))
    args = ap.parse_args()
    n = 500 if args.quick else 3000
    runs: dict[str, list[dict]] = {}
    for r in range(args.repeat):
        runs.setdefault("in-process put_message, 1 thread", []).append(in_process_puts(n))
        broker = BrokerProcess()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
