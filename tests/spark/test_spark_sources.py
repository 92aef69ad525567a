"""The Spark sources ``rmqstore.consumequeue`` and ``rmqstore.index`` give what the engine's readers give.

On every fixture (RocketMQ 4.9.8's files): the consume-queue rows are exactly the units the
store opened read-only serves from each queue's [min, max) -- and, for the fixtures with a put
list, exactly RocketMQ's own ``consumeQueues`` answers in the manifest; the index rows are
exactly the entries of the engine's IndexFile of every file, header included.  A queue whose
first file starts with pre-blank filler has rows from its first real unit on.
"""

import os

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from conftest import ALL_FIXTURES, FIXTURES, PUT_FIXTURES, manifest  # noqa: E402

from rmqstore import open_store  # noqa: E402
from rmqstore.engine.consume_queue import ConsumeQueue  # noqa: E402
from rmqstore.common.errors import StoreError  # noqa: E402
from rmqstore.format.layout import INDEX_HEADER  # noqa: E402

STORES = {name: str(FIXTURES / name / "store") for name in ALL_FIXTURES}


def engine_units(path):
    """``{(store, topic, queue_id, queue_offset): (file, offset, size, tags)}`` through the engine's ConsumeQueue."""
    store = open_store(path)
    try:
        out = {}
        for (topic, qid), cq in store.consume_queue_table.items():
            for n in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
                mf = cq.mapped_file_queue.find_mapped_file_by_offset(n * 20)
                out[(str(path), topic, qid, n)] = (os.path.basename(mf.file_name), *cq.get_unit(n))
        return out
    finally:
        store.close()


def engine_entries(path):
    """``{(store, file, entry): (key_hash, phy, time_diff, prev, slot, header...)}`` through the engine's IndexFile."""
    store = open_store(path)
    try:
        out = {}
        for f in store.index_service.index_files:
            header = tuple(INDEX_HEADER.unpack_from(f.buf))
            for n, h, phy, td, prev in f.entries():
                out[(str(path), f.file_name, n)] = (h, phy, td, prev, h % f.hash_slot_num, *header)
        return out
    finally:
        store.close()


@pytest.fixture(scope="module")
def cq_rows(spark):
    df = spark.read.format("rmqstore.consumequeue").option("paths", ",".join(STORES.values())).load()
    return {(r.store, r.topic, r.queue_id, r.queue_offset): (r.file, r.commit_log_offset, r.size, r.tags_code)
            for r in df.collect()}


def test_consume_queue_rows_equal_the_engine_on_every_fixture(cq_rows):
    expected = {}
    for path in STORES.values():
        expected.update(engine_units(path))
    assert len(expected) > 1000
    assert cq_rows == expected


@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_consume_queue_rows_equal_rocketmq_answers(name, cq_rows):
    store = STORES[name]
    for q in manifest(name)["consumeQueues"]:
        got = sorted((k[3], v[1:]) for k, v in cq_rows.items() if k[:3] == (store, q["topic"], q["queueId"]))
        assert [n for n, _ in got] == list(range(q["minOffsetInQueue"], q["maxOffsetInQueue"]))
        assert [[n, *u] for n, u in got] == q["entries"], (q["topic"], q["queueId"])


def test_index_rows_equal_the_engine_on_every_fixture(spark):
    df = spark.read.format("rmqstore.index").option("paths", ",".join(STORES.values())).load()
    names = [f.name for f in INDEX_HEADER.fields]
    got = {(r.store, r.file, r.entry): (r.key_hash, r.phy_offset, r.time_diff, r.prev_index, r.slot,
                                        *(r[n] for n in names)) for r in df.collect()}
    expected = {}
    for path in STORES.values():
        expected.update(engine_entries(path))
    assert len(expected) > 1000
    assert got == expected
    # the header's count agrees with the rows: indexCount - 1 entries per file
    for (store, file, _), row in expected.items():
        assert row[-1] - 1 == sum(1 for k in expected if k[:2] == (store, file))


def test_leading_pre_blanks_are_not_rows(spark, tmp_path):
    """A queue whose first unit is number 13 (files of 10 units): 3 pre-blanks, then units 13..24."""
    root = tmp_path / "store"
    cq = ConsumeQueue(str(root), "T", 2, 200)
    for n in range(13, 25):
        assert cq.put_message_position_info(1000 + 100 * n, 90, n * 7, n)
    cq.shutdown()
    assert sorted(os.listdir(root / "consumequeue" / "T" / "2")) == ["00000000000000000200", "00000000000000000400"]
    rows = spark.read.format("rmqstore.consumequeue").load(str(root)).orderBy("queue_offset").collect()
    assert [(r.queue_offset, r.commit_log_offset, r.size, r.tags_code, r.file) for r in rows] == \
        [(n, 1000 + 100 * n, 90, n * 7, "%020d" % (200 if n < 20 else 400)) for n in range(13, 25)]


def test_not_a_store_is_a_clear_error(spark, tmp_path):
    with pytest.raises(Exception, match="no such store directory"):
        spark.read.format("rmqstore.index").load(str(tmp_path / "nope")).collect()
    from rmqstore.spark.commitlog_source import CommitLogReader
    from rmqstore.spark.consumequeue_source import ConsumeQueueReader
    from rmqstore.spark.index_source import IndexReader

    for reader, name in ((ConsumeQueueReader, "consumequeue"), (IndexReader, "index"), (CommitLogReader, "commitlog")):
        with pytest.raises(StoreError, match=f"rmqstore.{name} needs a store path"):
            reader({})
        with pytest.raises(StoreError, match=f"rmqstore.{name}: no store path in ','"):
            reader({"paths": ","})
    for bad in ("0", "-5", "lots"):
        with pytest.raises(StoreError, match=f"splitSize must be a positive number of bytes, got '{bad}'"):
            CommitLogReader({"path": str(tmp_path), "splitSize": bad})
