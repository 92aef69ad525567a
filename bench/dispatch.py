"""Dispatch lag: how far the consume queues and the index trail the commitlog under sustained puts.

For ``--seconds`` (default 10) a writer appends messages as fast as it can (or at
``--rate``); a sampler records, every few milliseconds, the end of the log and the reput
service's position.  The lag at a moment is the time since the log reached the offset the
reput service has dispatched up to then (the age of the oldest record not dispatched yet).
The table shows the lag when the writer stops (``cq@end``: the messages not in a consume
queue yet, in milliseconds of puts; ``lag@end``: the sampler's), its maximum over the run,
the time to catch up afterwards, the puts' rate and the process's CPU use (above 1.0 core: the dispatch ran
beside the writer, off the GIL).  Each case runs on the compiled dispatch and on the pure
one (``StoreConfig(native=...)``) in the same invocation.

Two writers:

``fast``
    pre-encoded records (only the three fields the put lock decides -- queue offset,
    physical offset, store time -- and the UNIQ_KEY patched, as the compiled put path
    does) appended straight to the commitlog's mapped files, with blanks at file ends and
    new files from the allocate service: a put path at about the speed the compiled one
    reaches (450k msgs/s target), without its checks.  ``--rate`` paces it.
``put``
    the store's own batch put (``put_messages``, 32 messages a batch) from one thread --
    whatever that path does in this build.

    python bench/dispatch.py                       # both writers, 10 s each, compiled vs pure
    python bench/dispatch.py --seconds 3 --writer fast
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import BatchItem, MessageBatch, MessageStore, StoreConfig  # noqa: E402
from rmqstore.format.layout import BLANK_MAGIC_CODE  # noqa: E402
from rmqstore.format.record import Address, encode_message  # noqa: E402

FILE_SIZE = 64 * 1024 * 1024
QUEUES = 8
TOPIC = "BenchTopic"
UNIQ = "7F0000013DBD5FFD2B276CF800000000"
PROPS = f"TAGS\x01TagA\x02KEYS\x01order-1\x02UNIQ_KEY\x01{UNIQ}"
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


def make_store(root: str, native: bool) -> MessageStore:
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=FILE_SIZE, native=native))
    store.start()
    return store


try:  # the fast writer patches its records with numpy when it is there (a loop of pack_into otherwise)
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
_HEX = b"0123456789ABCDEF"


def _patch_numpy(buf: bytearray, n: int, size: int, first: int, phys: int, store_ts: int, next_qoff: list[int],
                 uniq_at: int) -> None:
    """Queue id, queue offset, physical offset, store time and the UNIQ_KEY's last 8 hex digits of n records."""
    def column(at: int, dtype: str):
        return np.ndarray((n,), dtype=dtype, buffer=buf, offset=at, strides=(size,))

    seq = np.arange(first, first + n, dtype=np.int64)
    queues = seq % QUEUES
    column(12, ">i4")[:] = queues
    base = np.array(next_qoff, dtype=np.int64)
    # the k-th record of queue q in this chunk gets next_qoff[q] + k
    column(20, ">i8")[:] = base[queues] + (seq - first) // QUEUES
    for q in range(QUEUES):
        next_qoff[q] += int(np.count_nonzero(queues == q))
    column(28, ">i8")[:] = phys + (seq - first) * size
    column(56, ">i8")[:] = store_ts
    digits = np.ndarray((n, 8), dtype=np.uint8, buffer=buf, offset=uniq_at, strides=(size, 1))
    shifts = np.arange(28, -4, -4, dtype=np.int64)
    digits[:] = np.frombuffer(_HEX, dtype=np.uint8)[(seq[:, None] >> shifts) & 0xF]


def fast_writer(store: MessageStore, body: bytes, seconds: float, rate: float | None) -> int:
    """Append pre-encoded records to the commitlog's mapped files for ``seconds``; how many."""
    template = encode_message(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0,
                              born_timestamp=1_700_000_000_000, born_host=Address.parse("10.0.0.1:5000"),
                              store_timestamp=0, store_host=Address.parse("127.0.0.1:10911"), reconsume_times=0,
                              prepared_transaction_offset=0, body=body, topic=TOPIC, properties=PROPS)
    size = len(template)
    uniq_at = template.rindex(UNIQ.encode()) + len(UNIQ) - 8
    queue = store.commit_log.mapped_file_queue
    next_qoff = [0] * QUEUES
    chunk = 256
    written = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    mf = queue.get_last_mapped_file(0)
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        if rate is not None and written > (now - t0) * rate:
            time.sleep(0.0005)
            continue
        left = mf.file_size - mf.wrote_position
        fit = (left - 8) // size if left >= size + 8 else 0
        if fit == 0:  # RocketMQ's END_OF_FILE blank, and on into the next file
            blank = bytearray(left)
            _I32.pack_into(blank, 0, left)
            _I32.pack_into(blank, 4, BLANK_MAGIC_CODE)
            mf.append_bytes(blank)
            mf = queue.get_last_mapped_file(mf.file_from_offset + mf.file_size)
            continue
        n = min(chunk, fit)
        buf = bytearray(template * n)
        phys = mf.file_from_offset + mf.wrote_position
        store_ts = time.time_ns() // 1_000_000
        if np is not None:
            _patch_numpy(buf, n, size, written, phys, store_ts, next_qoff, uniq_at)
        else:
            for i in range(n):
                at = i * size
                q = (written + i) % QUEUES
                _I32.pack_into(buf, at + 12, q)
                _I64.pack_into(buf, at + 20, next_qoff[q])
                next_qoff[q] += 1
                _I64.pack_into(buf, at + 28, phys + at)
                _I64.pack_into(buf, at + 56, store_ts)
                buf[uniq_at + at:uniq_at + at + 8] = b"%08X" % (written + i)
        mf.append_bytes(buf)
        written += n
        store.reput_message_service.wakeup()
    return written


def put_writer(store: MessageStore, body: bytes, seconds: float, rate: float | None) -> int:
    items = [BatchItem(body, PROPS) for _ in range(32)]
    batches = [MessageBatch(TOPIC, items, queue_id=q, born_host="10.0.0.1:5000",
                            born_timestamp=1_700_000_000_000) for q in range(QUEUES)]
    written = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    i = 0
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        if rate is not None and written > (now - t0) * rate:
            time.sleep(0.0005)
            continue
        r = store.put_messages(batches[i % QUEUES])
        if not r.ok:
            raise SystemExit(f"put_messages failed: {r}")
        written += 32
        i += 1
    return written


class Sampler(threading.Thread):
    """Every ``interval`` seconds: (time, end of the log, reput position)."""

    def __init__(self, store: MessageStore, interval: float = 0.002):
        super().__init__(daemon=True)
        self.store = store
        self.interval = interval
        self.samples: list[tuple[float, int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        log = self.store.commit_log
        reput = self.store.reput_message_service
        while not self.stop.is_set():
            self.samples.append((time.perf_counter(), log.get_max_offset(), reput.reput_from_offset))
            time.sleep(self.interval)

    def lags(self) -> list[tuple[float, float]]:
        """(time, lag in seconds) per sample: now minus when the log first reached the dispatched offset."""
        times = [s[0] for s in self.samples]
        ends = [s[1] for s in self.samples]
        out = []
        for t, _end, reput in self.samples:
            j = bisect.bisect_left(ends, reput)  # (the log's end only grows)
            out.append((t, 0.0 if j >= len(times) else max(t - times[j], 0.0)))
        return out


def run_case(writer, native: bool, seconds: float, rate: float | None, body: bytes, catch_up_s: float) -> dict:
    root = tempfile.mkdtemp(prefix="rmqbench-dispatch-")
    try:
        store = make_store(root, native)
        assert (store.reput_message_service.native is not None) == native, "the compiled dispatch is not built"
        sampler = Sampler(store)
        sampler.start()
        cpu0, t0 = os.times(), time.perf_counter()
        written = writer(store, body, seconds, rate)
        t_end = time.perf_counter()
        # the consume queues' own count when the writer stops: messages not in a queue yet
        units_at_end = sum(cq.get_max_offset_in_queue() for cq in list(store.consume_queue_table.values()))
        caught_up = store.wait_dispatched(timeout=catch_up_s)
        t_done = time.perf_counter()
        cpu1 = os.times()
        sampler.stop.set()
        sampler.join()
        lags = sampler.lags()
        during = [lag for t, lag in lags if t <= t_end]
        steady = sorted(lag for t, lag in lags if t0 + 1.0 <= t <= t_end)  # after the first second's file creations
        at_end = during[-1] if during else 0.0
        units = sum(cq.get_max_offset_in_queue() for cq in store.consume_queue_table.values())
        behind = store.reput_message_service.behind()
        store.shutdown()
        cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (t_done - t0)
        put_rate = written / (t_end - t0)
        return {"native": native, "written": written, "rate": put_rate, "lag_end_ms": at_end * 1000,
                "cq_behind_at_end": written - units_at_end,
                "cq_behind_at_end_ms": (written - units_at_end) / put_rate * 1000,
                "lag_max_ms": max(during, default=0.0) * 1000,
                "lag_max_after_1s_ms": (steady[-1] if steady else 0.0) * 1000,
                "lag_p99_after_1s_ms": (steady[int(len(steady) * 0.99)] if steady else 0.0) * 1000,
                "samples": len(lags), "catch_up_ms": (t_done - t_end) * 1000,
                "caught_up": caught_up, "behind_bytes_after_catch_up": behind, "cq_units": units, "cpu_cores": cpu}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--writer", choices=("fast", "put", "both"), default="both")
    ap.add_argument("--rate", type=float, default=None, help="messages/s to pace the writer at (default: full speed)")
    ap.add_argument("--body", type=int, default=256, help="body bytes (default 256: 10 s at 450k/s is ~2 GB of log)")
    ap.add_argument("--catch-up", type=float, default=30.0,
                    help="seconds to wait for dispatch to catch up after the puts (the pure path can need minutes)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "dispatch.json"))
    args = ap.parse_args(argv)
    body = bytes(range(256)) * (args.body // 256) + bytes(args.body % 256)
    writers = {"fast": fast_writer, "put": put_writer}
    chosen = ["fast", "put"] if args.writer == "both" else [args.writer]
    rows = []
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'writer':6s} {'dispatch':9s} {'msgs/s':>10s} {'cq@end ms':>10s} {'lag@end ms':>11s} {'lag max ms':>11s} "
          f"{'max >1s ms':>11s} {'p99 >1s ms':>11s} {'catch-up ms':>12s} {'cpu cores':>10s}")
    for name in chosen:
        for native in (True, False):
            r = run_case(writers[name], native, args.seconds, args.rate, body, args.catch_up)
            r["writer"] = name
            rows.append(r)
            print(f"{name:6s} {'compiled' if native else 'pure':9s} {r['rate']:10,.0f} {r['cq_behind_at_end_ms']:10.1f} "
                  f"{r['lag_end_ms']:11.1f} "
                  f"{r['lag_max_ms']:11.1f} {r['lag_max_after_1s_ms']:11.1f} {r['lag_p99_after_1s_ms']:11.1f} "
                  f"{r['catch_up_ms']:12.1f} {r['cpu_cores']:10.2f}"
                  f"{'' if r['caught_up'] else f'  (not caught up after {args.catch_up:.0f} s)'}", flush=True)
            if r["caught_up"] and r["cq_units"] != r["written"]:
                raise SystemExit(f"{r['cq_units']} consume-queue units for {r['written']} messages")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"python": sys.version, "cpus": os.cpu_count(), "seconds": args.seconds, "rate": args.rate,
                   "body_bytes": args.body, "load_avg": os.getloadavg(), "rows": rows}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
