"""The put-path trace tells the truth: same offsets, same positions, every stage the put met."""

import pytest

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.record import decode_record
from rmqstore.trace import STAGES, RecordingTracer


def run(tmp_path, **cfg):
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=4096, **cfg))
    tracer = RecordingTracer()
    store.tracer = tracer
    store.start()
    results = [store.put_message(Message("TraceTopic", bytes([i]) * 900, queue_id=i % 2,
                                         properties=f"KEYS\x01k{i}\x02TAGS\x01t", born_host="192.0.2.1:1"))
               for i in range(9)]
    store.wait_dispatched()
    positions = store.positions()
    store.shutdown()  # commits what is still in write buffers
    files = {int(p.name): p.read_bytes() for p in (tmp_path / "commitlog").iterdir()}
    return tracer.events, results, positions, files


@pytest.mark.parametrize("cfg", [dict(flush_disk_type="SYNC_FLUSH"), dict(flush_disk_type="ASYNC_FLUSH"),
                                 dict(transient_store_pool_enable=True, commit_interval_commit_log=10)],
                         ids=["sync", "async", "tsp"])
def test_trace_matches_the_store(tmp_path, cfg):
    events, results, positions, files = run(tmp_path, **cfg)
    assert all(r.ok for r in results)
    appends = [e for e in events if e["stage"] == "append.record"]
    assert [(e["offset"], e["size"], e["queue_offset"]) for e in appends] == \
        [(r.append_result.wrote_offset, r.append_result.wrote_bytes, r.append_result.logics_offset) for r in results]
    for e in appends:  # field spans cover the record exactly, and the bytes are the record's
        rec = e["records"][0]
        assert rec["fields"][0][1] == e["offset"] and rec["fields"][-1][2] == e["offset"] + e["size"]
        assert all(a[2] == b[1] for a, b in zip(rec["fields"], rec["fields"][1:]))
        base = e["offset"] - e["offset"] % 4096
        decoded = decode_record(files[base], e["offset"] - base)
        assert decoded.physical_offset == e["offset"] and decoded.queue_offset == e["queue_offset"]
    # the wrote position after each append is where the next one starts (or a blank fills the file)
    wrote = [e for e in events if e["stage"] == "position.wrote"]
    for w, r in zip(wrote, results):
        ar = r.append_result
        assert w["after"]["file"] + w["after"]["wrote"] == ar.wrote_offset + ar.wrote_bytes
    blanks = [e for e in events if e["stage"] == "append.blank"]
    assert blanks and all(e["after"]["wrote"] == 4096 for e in blanks)
    assert len([e for e in events if e["stage"] == "append.retry"]) == len(blanks)
    # the last positions the trace saw for the last file agree with the store at the end of the puts
    last = positions[-1]
    assert wrote[-1]["after"]["file"] == last["fileFromOffset"] and wrote[-1]["after"]["wrote"] == last["wrotePosition"]
    seen = {e["stage"] for e in events}
    expected = set(STAGES) - {"mapped_file.created", "commit", "group_commit.swap", "group_commit.wake",
                              "ha.push", "replica.wake"}  # (replication: tests/test_ha.py)
    if cfg.get("flush_disk_type") == "SYNC_FLUSH":
        expected |= {"group_commit.swap", "group_commit.wake"}
    if cfg.get("transient_store_pool_enable"):
        expected.add("commit")
    assert expected <= seen, expected - seen
    cq = [e for e in events if e["stage"] == "dispatch.consume_queue"]
    assert sorted(e["unit"][0] for e in cq) == sorted(r.append_result.wrote_offset for r in results)


def test_no_tracer_no_events_and_same_bytes(tmp_path):
    traced = run(tmp_path / "a", flush_disk_type="SYNC_FLUSH")
    store = MessageStore(tmp_path / "b", StoreConfig(mapped_file_size_commit_log=4096, flush_disk_type="SYNC_FLUSH"))
    store.start()
    plain = [store.put_message(Message("TraceTopic", bytes([i]) * 900, queue_id=i % 2,
                                       properties=f"KEYS\x01k{i}\x02TAGS\x01t", born_host="192.0.2.1:1"))
             for i in range(9)]
    assert store.tracer is None
    store.shutdown()
    assert [(r.append_result.wrote_offset, r.append_result.logics_offset) for r in plain] == \
        [(r.append_result.wrote_offset, r.append_result.logics_offset) for r in traced[1]]
