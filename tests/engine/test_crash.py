"""Kill -9 a writer again and again; after every kill the store must come back whole.

A writer process (tests/crash_writer.py: SYNC_FLUSH, 64 KiB commitlog segments, tiny
consume-queue and index files, bodies of random sizes, some batches, some PREPARED
messages) puts messages and prints each acknowledged put.  The test SIGKILLs it at a
seeded random moment -- often mid-put, sometimes mid-rollover, sometimes while the writer
is still recovering from the previous kill -- and then recovers the store in-process
(abnormal recovery: the abort file is there) and checks:

* every acknowledged put of every round so far is present, decodes with a correct CRC,
  and holds the body, topic, queue, keys and queue offset that were put;
* the log ends at a record boundary: walking it from the first file reaches exactly the
  recovered end, every record CRC-checked (a record the kill tore is gone entirely);
* the consume queues agree with the log: every unit points at a record of its queue
  with its queue offset, every record has its unit, no unit points past the end; the
  next queue offsets equal the queues' ends; index entries point at records with their keys;
* every acknowledged put is found by its own key (``store.query_message``), and
  ``rmqstore.read.verify`` finds no damage.

Then the next round writes into the same store and is killed again.  Every fifth round
the test shuts the store down cleanly after checking, so the next writer recovers normally.
The writer runs with SYNC_FLUSH, ASYNC_FLUSH or the transient store pool (the default tier
runs a few rounds of each, the ``slow`` tier 45 rounds per store).

Process death loses nothing that reached the page cache, so "acknowledged" here means
"written" -- except with the transient store pool, where a put is acknowledged once it is
in the pool's buffer, and the puts not yet committed to the file die with the process (as
in RocketMQ): those must be the last ones.  A power cut is another matter (see
rmqstore.engine.recovery).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from crash_writer import MODES, crash_config, expected_records
from test_recovery import check_acked, check_store

from rmqstore.engine.index import index_key_hash
from rmqstore.store import MessageStore
from rmqstore.read.verify import verify

WRITER = Path(__file__).resolve().parents[1] / "crash_writer.py"


def _kill_round(root, seed: int, round_no: int, rng: random.Random, flush: str) -> tuple[list[str], str]:
    """Start a writer, SIGKILL it at a random moment; its complete stdout lines and when it died."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root), "--seed", str(seed), "--round", str(round_no),
                             "--flush", flush], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: list[str] = []
    started = threading.Event()

    def read():
        buf = b""
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for line in complete:
                lines.append(line.decode())
                if line.startswith(b"S "):
                    started.set()
        # a partial last line (the kill landed mid-write) is not an acknowledgement

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if rng.random() < 0.2:
        when = "startup"  # anywhere from interpreter start to the end of recovery
        time.sleep(rng.uniform(0.0, 0.35))
    else:
        when = "writing"
        assert started.wait(30), "writer did not start"
        # an async writer puts ~4x faster: shorter rounds keep the store (and the checks) small
        time.sleep(rng.uniform(0.0, 0.25 if flush == "SYNC_FLUSH" else 0.08))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(10)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, f"writer exited by itself ({proc.returncode}): {lines[-3:]}"
    return lines, when


def unfindable_keys(store, records: dict, lines, seed: int, query=lambda line: True) -> list[str]:
    """The acknowledged puts not findable by their own key (``r<round>-<i>[-<j>]``).

    Every put's index entry -- its key's hash and its offset -- must be in an index file
    (one pass over the entries checks them all); the puts ``query`` picks are also looked
    up through ``store.query_message``, which walks the slot chains.  The search window is
    the record's store time +- 2 s, so a query reads only the index files around it (the
    index keeps seconds since a file's begin timestamp).
    """
    indexed = {(h, off) for f in store.index_service.index_files for _, h, off, _, _ in f.entries()}
    out = []
    for line in lines:
        _, rnd, i, j, offset, _msg_id, topic, _qid, _qo = line.split()
        rec = records[int(offset)]
        key = expected_records(seed, int(rnd), int(i))[int(j)][3].split()[0]
        if (index_key_hash(f"{topic}#{key}"), rec.physical_offset) not in indexed:
            out.append(f"{line} (no index entry for its key at its offset)")
            continue
        if not query(line):
            continue
        found = store.query_message(topic, key, 32, rec.store_timestamp - 2000, rec.store_timestamp + 2000)
        if rec.physical_offset not in [m.physical_offset for m in found.messages]:
            # the same query without a time window tells a lost entry from a time-window miss
            anytime = store.query_message(topic, key, 32, 0, 2 ** 62).messages
            out.append(f"{line} (stored {rec.store_timestamp}; without a time window: "
                       f"{[m.physical_offset for m in anytime]})")
    return out


def _lost_in_pool(lines, end: int) -> list[str]:
    """Acknowledged puts at or after the recovered end: with the transient store pool, puts are
    acknowledged once in the pool's buffer; those not yet committed to the file die with the
    process (as in RocketMQ).  Every earlier one must be there."""
    return [line for line in lines if int(line.split()[4]) >= end]


def crash_loop(root, seed: int, rounds: int, clean_every: int = 5, flush: str = "SYNC_FLUSH",
               query_every: int = 1) -> dict:
    """Kill, recover, check (the records, every acknowledged put and its key, ``verify``); again.

    Every acknowledged key is checked every round; ``query_every`` > 1 looks up only the
    latest round's keys and every n-th earlier one through ``query_message`` (the rest by
    their index entry), which keeps a long loop linear in its puts.
    """
    rng = random.Random(seed)
    acked_lines: list[str] = []
    stats = {"kills": 0, "acked": 0, "killed_at_startup": 0, "abnormal": 0, "normal": 0, "torn_tail": 0,
             "kept_unacked": 0, "lost_in_pool": 0}
    for round_no in range(rounds):
        lines, when = _kill_round(root, seed, round_no, rng, flush)
        stats["kills"] += 1
        stats["killed_at_startup"] += when == "startup"
        acked_lines += [line for line in lines if line.startswith("A ")]
        assert not any(line.startswith("X ") for line in lines), [x for x in lines if x.startswith("X ")]
        if not os.path.isdir(os.path.join(root, "commitlog")):
            continue  # killed before the store existed
        store = MessageStore(root, crash_config(flush))
        store.load()
        stats["normal" if store.last_exit_ok else "abnormal"] += 1
        try:
            files = store.commit_log.mapped_file_queue.mapped_files
            if files:  # (none: a kill interrupted the creation of the first segment)
                last = files[-1]
                end = last.wrote_position
                stats["torn_tail"] += end + 8 <= last.file_size and last.mapped[end:end + 8] != bytes(8)
            if flush == "TRANSIENT_STORE_POOL":
                lost = _lost_in_pool(acked_lines, store.get_max_phy_offset())
                stats["lost_in_pool"] += len(lost)
                acked_lines = [line for line in acked_lines if line not in set(lost)]
            records = check_store(store)
            stats["acked"] = check_acked(records, acked_lines, seed)
            stats["kept_unacked"] = len(records) - stats["acked"]  # written, killed before the answer
            latest = {line for line in lines if line.startswith("A ")}
            lost = unfindable_keys(store, records, acked_lines, seed,
                                   query=lambda line: line in latest or zlib.crc32(line.encode()) % query_every == 0)
            assert lost == [], (f"round {round_no}: keys not found: {lost[:5]}; index files (last 3): "
                                f"{[f.header() for f in store.index_service.index_files[-3:]]}")
            report = verify(store)
            assert report.ok, f"round {round_no}: {[str(p) for p in report.errors][:5]}"
        except BaseException:
            store.close()
            raise
        if round_no % clean_every == clean_every - 1:
            store.start()
            store.shutdown()
            assert not os.path.exists(os.path.join(root, "abort"))
        else:
            store.close()
    return stats


@pytest.mark.parametrize("flush,seed,rounds", [("SYNC_FLUSH", 20240601, 15), ("ASYNC_FLUSH", 20240602, 10),
                                              ("TRANSIENT_STORE_POOL", 20240603, 10)])
def test_kill_minus_nine_in_every_flush_mode(tmp_path, flush, seed, rounds):
    """A few kill -9 rounds per mode: after each, every acknowledged put is there (with the pool:
    every one the pool had committed), findable by its key, and ``verify`` finds no damage."""
    stats = crash_loop(tmp_path / "store", seed=seed, rounds=rounds, flush=flush)
    print(flush, stats)
    assert stats["kills"] == rounds
    assert stats["abnormal"] >= rounds // 2 and stats["acked"] > 100 * rounds // 5, stats


@pytest.mark.slow
@pytest.mark.parametrize("seed,flush", [(1, "SYNC_FLUSH"), (2, "SYNC_FLUSH"), (3, "ASYNC_FLUSH"),
                                        (4, "ASYNC_FLUSH"), (5, "TRANSIENT_STORE_POOL"),
                                        (6, "TRANSIENT_STORE_POOL")])
def test_kill_minus_nine_many_times(tmp_path, seed, flush):
    """6 stores x 30 kills = 180 kills; with ASYNC_FLUSH the writer never waits, so kills land inside puts."""
    assert flush in MODES
    stats = crash_loop(tmp_path / "store", seed=seed, rounds=30, flush=flush, query_every=15)
    print(flush, stats)
    assert stats["kills"] == 30 and stats["abnormal"] >= 16 and stats["acked"] > 3000, stats
