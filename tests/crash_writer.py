"""A writer process for the crash tests: open a store, put messages, report every acknowledged put.

    python tests/crash_writer.py STORE_DIR --seed S --round R [--count N] [--flush MODE]

The store uses SYNC_FLUSH (``--flush ASYNC_FLUSH`` to put without waiting, ``--flush
TRANSIENT_STORE_POOL`` to put through the transient store pool) and tiny files (64 KiB
commitlog segments, 1 KiB consume-queue files, 60-entry index files) so that rollovers
of every kind happen every few dozen puts.
Opening it runs recovery -- abnormal when the previous writer was killed.

Every put that returns PUT_OK is printed on its own line and flushed at once, so a line
on stdout means "acknowledged":

    S <max physical offset after recovery>                       (once, after start)
    A <round> <i> <j> <offset> <msgId> <topic> <queueId> <queueOffset>
                                                                  (one per stored record)
    X <round> <i> <status>                                        (a put that failed)
    READY                                                         (--count N: all N put and dispatched)

Without ``--count`` it puts until it is killed; with ``--count N`` it puts N messages,
waits for dispatch, prints READY and sleeps until it is killed.  What message ``i`` of
round ``r`` holds is a pure function of (seed, round, i): :func:`message_for`; the tests
rebuild it to compare bodies.  Some puts are batches (j numbers the records of a batch),
some are PREPARED transaction messages (they get no consume-queue unit).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from rmqstore.common.config import StoreConfig  # noqa: E402
from rmqstore.format.message import BatchItem, Message, MessageBatch  # noqa: E402
from rmqstore.format.record import decode_message_id  # noqa: E402
from rmqstore.format.status import PutMessageStatus  # noqa: E402
from rmqstore.format.sysflag import TRANSACTION_PREPARED_TYPE  # noqa: E402

STORE_HOST = "198.51.100.7:10911"
TOPICS = ("CrashA", "CrashB", "CrashC")
QUEUES = 4


#: how the writer flushes: RocketMQ's two flush types, and async flush through the transient store pool
MODES = ("SYNC_FLUSH", "ASYNC_FLUSH", "TRANSIENT_STORE_POOL")


def crash_config(flush: str = "SYNC_FLUSH") -> StoreConfig:
    """Tiny files, synchronous flush by default: what the writer and the tests open the store with.

    ``flush`` is one of :data:`MODES`; ``TRANSIENT_STORE_POOL`` is ASYNC_FLUSH with the pool
    (puts land in off-heap buffers, committed to the file by the commit service).
    """
    pool = flush == "TRANSIENT_STORE_POOL"
    return StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=20 * 50,
                       max_hash_slot_num=16, max_index_num=60, flush_disk_type="ASYNC_FLUSH" if pool else flush,
                       transient_store_pool_enable=pool, store_host=STORE_HOST)


def _props(round_no: int, i: int, j: int | None = None) -> str:
    key = f"r{round_no}-{i}" if j is None else f"r{round_no}-{i}-{j}"
    return f"KEYS\x01{key} k{i % 7}\x02TAGS\x01T{i % 3}"


def message_for(seed: int, round_no: int, i: int):
    """Message ``i`` of round ``round_no``: a Message, or a MessageBatch (one put in ten)."""
    rng = random.Random(f"{seed}/{round_no}/{i}")
    topic = rng.choice(TOPICS)
    queue_id = rng.randrange(QUEUES)

    def body() -> bytes:
        size = rng.randrange(6000, 20000) if rng.random() < 0.05 else rng.randrange(0, 1500)
        return rng.randbytes(size)

    kind = rng.random()
    if kind < 0.1:
        items = [BatchItem(body(), _props(round_no, i, j)) for j in range(rng.randrange(2, 5))]
        return MessageBatch(topic, items, queue_id=queue_id, born_host="192.0.2.60:46000",
                            born_timestamp=1_700_000_000_000 + i)
    sys_flag = TRANSACTION_PREPARED_TYPE if kind < 0.15 else 0
    return Message(topic, body(), queue_id=queue_id, properties=_props(round_no, i), sys_flag=sys_flag,
                   born_host="192.0.2.60:46000", born_timestamp=1_700_000_000_000 + i)


def expected_records(seed: int, round_no: int, i: int) -> dict:
    """``j -> (topic, queue id, body, KEYS, sys_flag)`` of every record put ``i`` stores."""
    m = message_for(seed, round_no, i)
    if isinstance(m, MessageBatch):
        return {j: (m.topic, m.queue_id, it.body, f"r{round_no}-{i}-{j} k{i % 7}", 0)
                for j, it in enumerate(m.items)}
    return {0: (m.topic, m.queue_id, m.body, f"r{round_no}-{i} k{i % 7}", m.sys_flag)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--round", type=int, default=0)
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--flush", choices=MODES, default="SYNC_FLUSH",
                    help="ASYNC_FLUSH: no wait per put, so kills land inside puts far more often; "
                         "TRANSIENT_STORE_POOL: ASYNC_FLUSH through the transient store pool")
    args = ap.parse_args(argv)

    from rmqstore.store import MessageStore

    out = sys.stdout
    store = MessageStore(args.store, crash_config(args.flush))
    store.start()
    out.write(f"S {store.get_max_phy_offset()}\n")
    out.flush()
    i = 0
    while args.count is None or i < args.count:
        msg = message_for(args.seed, args.round, i)
        if isinstance(msg, MessageBatch):
            result = store.put_messages(msg)
        else:
            result = store.put_message(msg)
        if result.status is PutMessageStatus.PUT_OK:
            ar = result.append_result
            lines = []
            for j, msg_id in enumerate(ar.msg_id.split(",")):
                offset = decode_message_id(msg_id)[1]
                lines.append(f"A {args.round} {i} {j} {offset} {msg_id} {msg.topic} {msg.queue_id} "
                             f"{ar.logics_offset + j}\n")
            out.write("".join(lines))
        else:
            out.write(f"X {args.round} {i} {result.status.name}\n")
        out.flush()
        i += 1
    store.wait_dispatched()
    out.write("READY\n")
    out.flush()
    while True:  # wait for the kill
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
