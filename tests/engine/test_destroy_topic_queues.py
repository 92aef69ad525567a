"""A deleted topic's consume queues destroyed while the store runs (``MessageStore.destroy_topic_queues``, the
store's half of the admin's DELETE_TOPIC_IN_BROKER): files and next queue offsets gone, the topic starting over
at offset 0 -- also while messages of that very topic are being put and dispatched, which must neither fail a
dispatch pass (a failed pass makes the store refuse puts) nor disturb any other topic's queue.  (The deleted
topic's own queue is then a mix of what was put before and after, as with 4.9.8: deleting a topic that is being
written to is the admin's mistake.)"""

from __future__ import annotations

import logging
import os
import threading

from rmqstore import Message, MessageStore, StoreConfig
from test_concurrency import eager_thread_switches  # noqa: F401 -- autouse: writers and the dispatch interleave


def _config() -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 4096,
                       max_hash_slot_num=100, max_index_num=400)


def test_destroyed_queues_start_over_at_zero(tmp_path):
    with MessageStore(str(tmp_path), _config()) as store:
        for i in range(6):
            store.put_message(Message(topic="Gone", body=b"x", queue_id=i % 2))
        assert store.wait_dispatched()
        assert store.destroy_topic_queues("Gone") == [0, 1]
        assert not os.path.exists(os.path.join(str(tmp_path), "consumequeue", "Gone"))
        assert store.get_max_offset_in_queue("Gone", 0) == 0
        r = store.put_message(Message(topic="Gone", body=b"y", queue_id=0))
        assert r.ok and r.append_result.logics_offset == 0


def test_destroying_while_the_topic_is_put_and_dispatched(tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    stop = threading.Event()
    refused: list = []
    with MessageStore(str(tmp_path), _config()) as store:
        def put() -> None:
            n = 0
            while not stop.is_set() and n < 20_000:
                for topic in ("Gone", "Kept"):
                    r = store.put_message(Message(topic=topic, body=b"%d" % n, queue_id=0))
                    if not r.ok:
                        refused.append(r)
                        return
                n += 1

        writer = threading.Thread(target=put)
        writer.start()
        try:
            for _ in range(200):
                store.destroy_topic_queues("Gone")
                if not writer.is_alive():
                    break
        finally:
            stop.set()
            writer.join()
        assert refused == [] and store.wait_dispatched()
        assert store.not_writeable_reason == "" and store.reput_message_service.failure is None
        kept = store.find_consume_queue("Kept", 0)
        units = [kept.get_unit(q) for q in range(kept.get_max_offset_in_queue())]
        assert all(u is not None for u in units) and len(units) > 0
    assert [r.getMessage() for r in caplog.records] == []
