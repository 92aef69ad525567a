"""The Spark scan benchmark's store generator writes a valid store: the put path's own bytes.

bench/spark_scan.py writes segments directly (the put path is too slow for 2 GiB).  If it
wrote anything else than the put path would, the benchmark would measure garbage; here a
small store of two 1 MiB segments must pass ``rmqstore verify``, scan to exactly what the
generator says it wrote, and equal -- byte for byte, commitlog and consume queues -- the
same records replayed through a real MessageStore's put path.
"""

import importlib.util
import os
import sys
from collections import Counter

import pytest

from conftest import REPO, run_cli
from rmqstore import MessageStore, StoreConfig
from rmqstore.format.dumpfmt import json_to_message, record_to_json
from rmqstore.format.record import BlankRecord
from rmqstore.read.scan import CommitLogScan

SEG = 1 << 20


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_spark_scan", REPO / "bench" / "spark_scan.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen") / "store"
    return _bench_module().generate_store(str(root), SEG + SEG // 2, SEG)


def test_the_generated_store_verifies_and_scans_to_what_was_written(generated):
    code, out, err = run_cli(["verify", generated.root])
    assert code == 0, out + err
    assert "OK: no damage found" in out and "WARNING" not in out
    messages, blanks, per_queue = 0, 0, Counter()
    for _, rec in CommitLogScan(generated.root):
        if isinstance(rec, BlankRecord):
            blanks += 1
            continue
        messages += 1
        per_queue[f"{rec.topic}/{rec.queue_id}"] += 1
    assert (generated.segments, blanks) == (2, 1)  # two segments: the first ends in a blank
    assert messages == generated.records > 500
    assert dict(per_queue) == {k: v[0] for k, v in generated.per_queue.items()}
    assert len(per_queue) == 16  # 4 topics x 4 queues
    sizes = Counter(len(rec.body) for _, rec in CommitLogScan(generated.root) if hasattr(rec, "body"))
    assert len(sizes) == 6  # every body size of the mix occurs


def test_the_generated_bytes_are_the_put_paths(generated, tmp_path):
    """Replay every record through MessageStore.replay_message (recorded store time and queue offset,
    blanks where they were): the commitlog and consume-queue files come out identical."""
    config = StoreConfig(mapped_file_size_commit_log=SEG, max_hash_slot_num=500, max_index_num=2000,
                         store_host="10.0.0.9:10911")
    with MessageStore(str(tmp_path), config) as store:
        for offset, rec in CommitLogScan(generated.root):
            if isinstance(rec, BlankRecord):
                assert store.commit_log.append_blank_at_current_position().wrote_offset == offset
            else:
                result = store.replay_message(json_to_message(record_to_json(offset, rec)))
                assert result.ok and result.append_result.wrote_offset == offset
    for sub in ("commitlog", *(os.path.join("consumequeue", k) for k in generated.per_queue)):
        mine, theirs = os.path.join(generated.root, sub), os.path.join(tmp_path, sub)
        names = sorted(os.listdir(mine))
        assert names and names == sorted(os.listdir(theirs))[:len(names)], sub
        for name in names:
            with open(os.path.join(mine, name), "rb") as a, open(os.path.join(theirs, name), "rb") as b:
                assert a.read() == b.read(), (sub, name)
