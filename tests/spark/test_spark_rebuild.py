"""``rmqstore.spark.rebuild``: consume queues and index regenerated on Spark equal the engine's dispatch.

* Every put fixture: the rebuilt ``consumequeue/`` files are RocketMQ's files byte for byte (the
  same paths), and the index files' contents, in name order, are RocketMQ's -- which
  ``test_dispatch_fixtures`` proves is what our own dispatch writes.  Sizes come from the store's
  files, and those are the manifest's configured sizes.  The fixture is not written to.
* A store our engine writes in a temp dir with tiny files: several topics and queues, consume-queue
  rollover, index rollover with one message's keys split over two files, an exactly full last
  index file followed by a keyless message (the engine then creates an empty file), prepared /
  committed / rolled-back transactions, delay messages (SCHEDULE_TOPIC_XXXX, delivery-time tags
  codes): rebuilt files == what the engine's dispatch wrote, byte for byte.
* The ``crash`` fixture (no put list): a copy recovered and re-dispatched by the engine rebuilds to the
  same files; so does a log whose first segment was deleted (queues start with pre-blank filler), and
  a log with no index keys at all (one empty index file).
* Index file names follow the documented rule; a damaged log, a path that is not a store and an
  out_dir inside the store are refused with errors that say so.
"""

from __future__ import annotations

import os
import shutil
from datetime import timezone
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from conftest import FIXTURES, PUT_FIXTURES, files_under, manifest, snapshot  # noqa: E402

from rmqstore.common.config import StoreConfig  # noqa: E402
from rmqstore.common.errors import StoreError  # noqa: E402
from rmqstore.engine.index import index_file_name  # noqa: E402
from rmqstore.format.layout import INDEX_HEADER  # noqa: E402
from rmqstore.format.message import Message  # noqa: E402
from rmqstore.spark.rebuild import rebuild  # noqa: E402
from rmqstore.store import MessageStore  # noqa: E402
from rmqstore.files.store_sizes import infer_config  # noqa: E402
from rmqstore.format.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE,  # noqa: E402
                                     TRANSACTION_ROLLBACK_TYPE)


def assert_same_as_dispatch(ours: Path, theirs: Path, result) -> list[str]:
    """Consume-queue files identical (paths and bytes); index files identical in name order."""
    cq = files_under(theirs / "consumequeue")
    assert cq, "the store has consume queues"
    assert files_under(ours / "consumequeue") == cq == result.consume_queue_files
    for rel in cq:
        assert (ours / "consumequeue" / rel).read_bytes() == (theirs / "consumequeue" / rel).read_bytes(), rel
    their_index = files_under(theirs / "index")
    assert their_index and files_under(ours / "index") == result.index_files
    assert len(result.index_files) == len(their_index)
    for a, b in zip(result.index_files, their_index):
        assert (ours / "index" / a).read_bytes() == (theirs / "index" / b).read_bytes(), (a, b)
    return their_index


def assert_naming_rule(index_dir: Path, names: list[str]) -> None:
    """Name = first entry's store time (an empty file: the end time it starts from), strictly increasing."""
    prev = None
    assert names == sorted(names)
    for name in names:
        h = INDEX_HEADER.unpack_from((index_dir / name).read_bytes())
        ms = h.begin_timestamp if prev is None else max(h.begin_timestamp, prev + 1)
        assert name == index_file_name(ms, timezone.utc)
        prev = ms


@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_rebuild_equals_dispatch_on_fixture(spark, name, tmp_path):
    store = FIXTURES / name / "store"
    cfg = manifest(name)["config"]
    inferred = infer_config(str(store))  # what rebuild uses: the sizes the files show are the configured ones
    assert (inferred.mapped_file_size_consume_queue, inferred.max_hash_slot_num, inferred.max_index_num) == \
        (cfg["mappedFileSizeConsumeQueue"], cfg["maxHashSlotNum"], cfg["maxIndexNum"])
    before = snapshot(store)
    result = rebuild(spark, store, tmp_path / "out")
    assert snapshot(store) == before  # the input store is only read
    assert_same_as_dispatch(tmp_path / "out", store, result)
    assert_naming_rule(tmp_path / "out" / "index", result.index_files)
    assert result.units == sum(len(q["entries"]) for q in manifest(name)["consumeQueues"])


# -- a store of our engine with every dispatch rule in tiny files ------------------------------------

TINY = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 6, max_hash_slot_num=8,
                   max_index_num=10)
PER_FILE = TINY.max_index_num - 1


def _put(store, topic, i, queue_id=0, sys_flag=0, **props):
    r = store.put_message(Message(topic, b"body-%d" % i * (i % 5 + 1), queue_id=queue_id, sys_flag=sys_flag,
                                  properties=props, born_host="10.0.0.1:1234"))
    assert r.ok, r
    return r.append_result.wrote_offset


def _keys_of(props: dict, sys_flag: int) -> int:
    if sys_flag == TRANSACTION_ROLLBACK_TYPE:
        return 0
    return bool(props.get("UNIQ_KEY")) + sum(1 for k in props.get("KEYS", "").split(" ") if k)


@pytest.fixture(scope="module")
def engine_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine") / "store"
    store = MessageStore(root, TINY)
    store.start()
    entries = 0
    try:
        for i in range(90):
            props = {"TAGS": f"tag{i % 3}"} if i % 4 else {}
            if i % 3 == 0:
                props["KEYS"] = f"k{i}  k{i}b k{i}c"  # the double space is an empty token: skipped
            if i % 5 == 0:
                props["UNIQ_KEY"] = f"U{i:04d}"
            if i % 11 == 4:
                props["DELAY"] = str(i % 4 + 1)
            sys_flag = 0
            if i % 13 == 6:
                sys_flag = TRANSACTION_PREPARED_TYPE
            elif i % 13 == 7:
                sys_flag = TRANSACTION_COMMIT_TYPE
            elif i % 13 == 8:
                sys_flag = TRANSACTION_ROLLBACK_TYPE
            _put(store, ("TopicA", "TopicB", "T%C")[i % 3], i, queue_id=i % 4, sys_flag=sys_flag, **props)
            entries += _keys_of(props, sys_flag)
        # fill the last index file exactly, then a keyless message: the engine makes an empty next file
        need = -entries % PER_FILE
        _put(store, "TopicA", 1000, **({"KEYS": " ".join(f"fill{j}" for j in range(need))} if need else {}))
        entries += need
        _put(store, "TopicB", 1001)
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    assert entries % PER_FILE == 0
    index_files = files_under(root / "index")
    assert len(index_files) == entries // PER_FILE + 1  # the trailing empty file is there
    assert (root / "consumequeue" / "SCHEDULE_TOPIC_XXXX").is_dir()
    assert any(len(files_under(root / "consumequeue" / t / q)) > 1 for t in ("TopicA", "TopicB")
               for q in ("0", "1", "2", "3"))  # consume-queue rollover
    return root


@pytest.mark.parametrize("split", [1500, 1 << 26], ids=["mid-segment-splits", "whole-segments"])
def test_rebuild_equals_dispatch_on_engine_store(spark, engine_store, tmp_path, split):
    result = rebuild(spark, engine_store, tmp_path / "out", config=TINY, split_size=split)
    names = assert_same_as_dispatch(tmp_path / "out", engine_store, result)
    assert_naming_rule(tmp_path / "out" / "index", result.index_files)
    assert len(names) > 3 and result.index_entries == (len(names) - 1) * PER_FILE
    # the empty last file starts where its full predecessor ends
    last = INDEX_HEADER.unpack_from((tmp_path / "out" / "index" / result.index_files[-1]).read_bytes())
    prev = INDEX_HEADER.unpack_from((tmp_path / "out" / "index" / result.index_files[-2]).read_bytes())
    assert (last.begin_phy_offset, last.end_timestamp, last.index_count) == (prev.end_phy_offset, prev.end_timestamp, 0)


def test_damaged_log_is_refused(spark, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "boundary" / "store", store)
    first = sorted((store / "commitlog").iterdir())[0]
    data = bytearray(first.read_bytes())
    data[400] ^= 0xFF  # inside the second record's body (records of 278 bytes, body at +88): a CRC mismatch
    first.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged in segment 00000000000000000000"):
        rebuild(spark, store, tmp_path / "out")


def test_clear_errors(spark, tmp_path):
    with pytest.raises(StoreError, match="no such store directory"):
        rebuild(spark, tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="not a store"):
        rebuild(spark, tmp_path / "empty", tmp_path / "out")
    with pytest.raises(StoreError, match="inside the store"):
        rebuild(spark, FIXTURES / "basic", FIXTURES / "basic" / "store" / "rebuilt")
    (tmp_path / "full" / "index").mkdir(parents=True)
    (tmp_path / "full" / "index" / "x").write_bytes(b"")
    with pytest.raises(StoreError, match="already holds files"):
        rebuild(spark, FIXTURES / "basic", tmp_path / "full")
    assert not os.path.exists(FIXTURES / "basic" / "store" / "rebuilt")


def test_rebuild_after_the_first_segment_is_gone(spark, engine_store, tmp_path):
    """Old segments deleted (as RocketMQ's cleanup does), queues dispatched afresh from the log's new start:
    queues begin mid-file with pre-blank filler; the rebuild writes the same files as the engine's re-dispatch."""
    root = tmp_path / "store"
    shutil.copytree(engine_store, root)
    for sub in ("consumequeue", "index"):
        shutil.rmtree(root / sub)
    (root / "checkpoint").unlink()
    os.remove(sorted((root / "commitlog").iterdir())[0])
    store = MessageStore(root, TINY)  # loads, then dispatches the remaining log from its first byte
    store.start()
    try:
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    pre_blank = (0).to_bytes(8, "big") + (0x7FFFFFFF).to_bytes(4, "big") + bytes(8)
    first_units = [(root / "consumequeue" / rel).read_bytes()[:20] for rel in files_under(root / "consumequeue")]
    assert pre_blank in first_units  # some queue starts with filler
    result = rebuild(spark, root, tmp_path / "out", config=TINY)
    assert_same_as_dispatch(tmp_path / "out", root, result)


def test_rebuild_of_a_log_without_keys(spark, tmp_path):
    """No key to index (none given, or only on a rolled-back record): the engine still creates one empty file."""
    root = tmp_path / "store"
    store = MessageStore(root, TINY)
    store.start()
    try:
        for i in range(3):
            _put(store, "NoKeys", i, queue_id=i)
        _put(store, "NoKeys", 3, sys_flag=TRANSACTION_ROLLBACK_TYPE, KEYS="never indexed")
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    result = rebuild(spark, root, tmp_path / "out", config=TINY)
    assert_same_as_dispatch(tmp_path / "out", root, result)
    assert result.index_entries == 0 and len(result.index_files) == 1
    assert (tmp_path / "out" / "index" / result.index_files[0]).read_bytes().count(0) == \
        (tmp_path / "out" / "index" / result.index_files[0]).stat().st_size


def test_rebuild_of_the_crash_fixture_equals_the_engines_redispatch(spark, tmp_path):
    """``crash`` (RocketMQ killed mid-run) has no put list: recover a copy with the engine, let it dispatch
    the whole log afresh, and the rebuild of that log writes the same files."""
    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "crash" / "store", root)
    config = infer_config(str(root))
    for sub in ("consumequeue", "index"):
        shutil.rmtree(root / sub)
    store = MessageStore(root, config)
    store.start()
    try:
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    result = rebuild(spark, root, tmp_path / "out", config=config)
    assert_same_as_dispatch(tmp_path / "out", root, result)
    assert result.records == result.units > 0
