"""Make the sample stores in data/ (deterministic: fixed clock, hosts and bodies).

    python data/make_samples.py            # (re)writes data/sample_store and data/rocketmq_basic

* ``sample_store``  -- written by rmqstore's own put path: 3 topics, ~1,500 messages with
  bodies from 0 B to 3 KiB, 64 KiB segments (so END_OF_FILE blanks and rollovers show),
  6,000-byte consume-queue files and 500-slot / 2,000-entry index files (so they roll too),
  transaction prepared/commit/rollback records, delay-level messages and a batch.
* ``rocketmq_basic`` -- a copy of the ``basic`` store written by Apache RocketMQ 4.9.8
  (from tests/fixtures), for the notebook on inspecting a real store.
"""

from __future__ import annotations

import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from rmqstore import BatchItem, Message, MessageBatch, MessageStore, StoreConfig  # noqa: E402
from rmqstore.format.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE,  # noqa: E402
                                     TRANSACTION_ROLLBACK_TYPE)

SEGMENT = 64 * 1024
START_MS = 1_795_000_000_000  # 2026-11-17, fixed so the files are the same on every run


class StepClock:
    """A clock that only the script moves: 3 ms per put, still in between.

    The store's threads (dispatch names index files by the clock, flush stamps the
    checkpoint) read it at moments that vary from run to run; frozen between puts, and with
    each put dispatched before the next, every reading is the same on every run.
    """

    def __init__(self, start: int):
        self.now = start

    def step(self) -> None:
        self.now += 3

    def __call__(self) -> int:
        return self.now


def make_sample_store(root: str, count: int = 1500) -> None:
    if os.path.exists(root):
        shutil.rmtree(root)
    rng = random.Random(20261122)
    # small consume-queue and index files, as in the RocketMQ fixtures: the defaults
    # (6 MB per queue file, a 420 MB index file) would make the sample hundreds of MB
    cfg = StoreConfig(mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=300 * 20,
                      max_hash_slot_num=500, max_index_num=2000, store_host="198.51.100.7:10911",
                      pre_fault_mapped_file=False)
    topics = [("OrderTopic", 4), ("PaymentTopic", 2), ("AuditTopic", 1)]
    clock = StepClock(START_MS)
    with MessageStore(root, cfg, clock=clock) as store:
        for i in range(count):
            clock.step()
            topic, queues = topics[i % 3] if i % 7 else topics[0]
            size = rng.choice([0, 16, 100, 300, 1024, 3000])
            body = bytes(rng.randrange(32, 127) for _ in range(size))
            props = f"KEYS\x01order-{i % 50} item-{i}\x02TAGS\x01Tag{i % 4}\x02UNIQ_KEY\x01{i:032X}"
            born = f"192.0.2.{1 + i % 20}:{40000 + i % 100}"
            msg = Message(topic, body, queue_id=i % queues, properties=props, born_host=born,
                          born_timestamp=START_MS - 5 + i)
            if i % 97 == 5:
                msg.sys_flag = TRANSACTION_PREPARED_TYPE
            elif i % 97 == 6:
                msg.sys_flag = TRANSACTION_COMMIT_TYPE
            elif i % 97 == 7:
                msg.sys_flag = TRANSACTION_ROLLBACK_TYPE
            elif i % 131 == 9:
                msg.properties += f"\x02DELAY\x01{1 + i % 18}"
            result = store.put_message(msg)
            assert result.ok, result
            store.wait_dispatched()
        batch = MessageBatch("OrderTopic", [BatchItem(f"batch-{k}".encode(), f"KEYS\x01batch-{k}") for k in range(8)],
                             queue_id=0, born_host="192.0.2.99:41000", born_timestamp=START_MS)
        clock.step()
        assert store.put_messages(batch).ok
        store.wait_dispatched()
    os.remove(os.path.join(root, "lock"))  # no broker holds it; keep the sample clean


def copy_rocketmq_basic(dest: str) -> None:
    src = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "basic", "store")
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    shutil.copy(os.path.join(os.path.dirname(src), "manifest.json"), os.path.join(dest, "..", "rocketmq_basic.manifest.json"))


def main() -> None:
    make_sample_store(os.path.join(HERE, "sample_store"))
    copy_rocketmq_basic(os.path.join(HERE, "rocketmq_basic"))
    print("wrote", os.path.join(HERE, "sample_store"), "and", os.path.join(HERE, "rocketmq_basic"))


if __name__ == "__main__":
    main()
