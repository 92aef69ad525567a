"""The Jupyter views' state, checked against the engine (no browser: see tests/browser for the DOM).

Each view's synced state must say what the store says: SegmentView's positions are
``store.positions()``, RecordView's spans tile the record exactly and its values are
``decode_record``'s, the PutPathPlayer's trace agrees with the put results and the final
positions, the StoreInspector pages through a full scan's records without reading the
store, and the static HTML carries the views' own code and state.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import time
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

from rmqstore import Message, MessageBatch, MessageStore, StoreConfig, BatchItem  # noqa: E402
from rmqstore.format.crc import crc32  # noqa: E402
from rmqstore.format.layout import BLANK_MAGIC_CODE, MESSAGE_FIELDS, MESSAGE_MAGIC_CODE_V2  # noqa: E402
from rmqstore.format.record import (Address, MessageRecord, create_message_id, decode_record,  # noqa: E402
                                    encode_message, record_field_spans)
from rmqstore.read.scan import CommitLogScan  # noqa: E402
from rmqstore.store import open_store  # noqa: E402

import rmqstore.widgets as W  # noqa: E402
from rmqstore.widgets._common import FIELD_TABLE  # noqa: E402
from rmqstore.widgets.static_html import SHIM_JS  # noqa: E402
from rmqstore.widgets.put_path_player import MODES, replay  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_store"
FIXTURES = ROOT / "tests" / "fixtures"


def _positions_core(p: dict) -> tuple:
    return (p["file"], p["fileFromOffset"], p["wrotePosition"], p["committedPosition"], p["flushedPosition"],
            p["isFull"], p["hasWriteBuffer"])


def _put_some(store, n: int, body=b"x" * 200, topic="TopicW", queues=2):
    results = []
    for i in range(n):
        results.append(store.put_message(Message(topic, body[: 20 + (i * 37) % len(body)], queue_id=i % queues,
                                                 properties=f"KEYS\x01k-{i}\x02TAGS\x01T{i % 3}")))
    return results


@pytest.fixture
def small_store(tmp_path):
    cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 50,
                      pre_fault_mapped_file=False, flush_disk_type="SYNC_FLUSH")
    store = MessageStore(tmp_path / "store", cfg)
    store.start()
    yield store
    store.shutdown()


# -- SegmentView ---------------------------------------------------------------------------------

def test_segment_view_state_equals_store_positions(small_store):
    _put_some(small_store, 60)
    small_store.wait_dispatched()
    view = W.SegmentView.from_store(small_store)
    state = view.segments()
    assert [_positions_core(p) for p in state] == [_positions_core(p) for p in small_store.positions()]
    assert view.rows == len(small_store.positions()) > 2
    assert view.summary["max_offset"] == str(small_store.get_max_phy_offset())
    # blank tails: where a full scan finds the END_OF_FILE records
    blanks = {off: r for off, r in CommitLogScan(small_store.root) if r.magic_code == BLANK_MAGIC_CODE}
    for row in state:
        if row["isFull"]:
            start = row["fileFromOffset"] + row["blankAt"]
            assert start in blanks and start + blanks[start].total_size == row["fileFromOffset"] + row["size"]
        else:
            assert row["blankAt"] == -1


def test_segment_view_of_a_read_only_store_and_consume_queues(small_store, tmp_path):
    _put_some(small_store, 40)
    small_store.wait_dispatched()
    small_store.shutdown()
    store = open_store(small_store.root)
    try:
        view = W.SegmentView.from_store(store, topic="TopicW")
        labels = [g["label"] for g in view.groups]
        assert labels == ["commitlog", "consumequeue/TopicW/0", "consumequeue/TopicW/1"]
        rows = view.segments()
        cl = [r for r in rows if r["group"] == 0]
        assert [_positions_core(p) for p in cl] == [_positions_core(p) for p in store.positions()]
        cq_rows = [r for r in rows if r["group"] > 0]
        for r in cq_rows:
            cq = store.consume_queue_table[("TopicW", r["group"] - 1)]
            mf = next(m for m in cq.mapped_file_queue.mapped_files if m.file_from_offset == r["fileFromOffset"])
            assert r["wrotePosition"] == mf.wrote_position
        assert sum(r["wrotePosition"] for r in cq_rows) == 40 * 20
    finally:
        store.close()


def test_segment_view_attach_follows_puts_and_stops(small_store):
    view = W.SegmentView.from_store(small_store)
    seen = []
    view.observe(lambda ch: seen.append(ch["new"]), names="updates")
    view.attach(small_store, interval_ms=20)
    assert view.attached and view.live
    for _ in range(6):
        _put_some(small_store, 8)
        time.sleep(0.05)
    view.detach()
    assert not view.attached and not view.live
    assert len(seen) >= 2, "the view should have been updated while puts ran"
    assert [_positions_core(p) for p in view.segments()] == [_positions_core(p) for p in small_store.positions()]
    # close() stops a running follower too
    view.attach(small_store, interval_ms=20)
    thread = view._live_thread
    view.close()
    assert not thread.alive and not view.attached


def test_segment_view_2000_segments_stays_small():
    size = 1 << 30
    positions = [{"fileFromOffset": i * size, "wrotePosition": size if i < 1999 else 1234,
                  "committedPosition": 0, "flushedPosition": size if i < 1998 else 0, "size": size,
                  "blankAt": size - 17} for i in range(2000)]
    t0 = time.perf_counter()
    view = W.SegmentView.from_positions(positions)
    built = time.perf_counter() - t0
    state = W.static_html.widget_state(view)["state"][view.model_id]
    size_json = len(json.dumps(state))
    assert built < 1.0
    assert size_json < 150_000, size_json  # binary columns: ~36 bytes a segment, base64'd
    rows = view.segments()
    assert rows[-1]["fileFromOffset"] == 1999 * size > 2**40
    assert rows[-1]["wrotePosition"] == 1234 and rows[-2]["flushedPosition"] == 0


# -- RecordView ----------------------------------------------------------------------------------

def _check_record_view(view, buf, pos, phys):
    rec = decode_record(buf, pos)
    data = bytes(view.data)
    spans = view.spans
    if isinstance(rec, MessageRecord):
        assert data == bytes(buf[pos:pos + rec.total_size])
        expected = [[n, s, e] for n, s, e, _ in record_field_spans(rec, 0)]
        assert spans == expected
        # the spans tile the record exactly
        assert spans[0][1] == 0 and spans[-1][2] == rec.total_size
        assert all(a[2] == b[1] for a, b in zip(spans, spans[1:]))
        rows = {r["name"]: r for r in view.rows}
        assert [r["name"] for r in view.rows] == [s[0] for s in spans]
        for f in MESSAGE_FIELDS:
            value = getattr(rec, f.name)
            row = rows[f.name]
            if f.kind in ("i8", "i16", "i32", "i64"):
                assert int(row["raw"]) == value, f.name
            elif f.kind == "host":
                assert row["value"] == str(value) and row["raw"] == value.packed.hex()
            elif f.name == "properties":
                assert row["raw"] == value
            elif f.name == "topic":
                assert row["value"] == value
        assert rows["body_length"]["raw"] == str(len(rec.body))
        assert rows["body_crc"]["status"] == ("ok" if crc32(rec.body) == rec.body_crc else "bad")
        assert view.msg_id == create_message_id(rec.store_host, rec.physical_offset)
        assert view.version == ("V2" if rec.magic_code == MESSAGE_MAGIC_CODE_V2 else "V1")
        assert view.kind == "message"
    else:
        assert view.kind == "blank"
        assert spans[:2] == [["total_size", 0, 4], ["magic_code", 4, 8]]
        assert int(view.rows[0]["raw"]) == rec.total_size
    assert view.offset == str(phys)
    names = {row["name"] for row in FIELD_TABLE}
    assert {s[0] for s in spans} <= names, "every span name has a colour in the field table"


def test_record_view_from_store_matches_decode_record():
    store = open_store(SAMPLE)
    try:
        records = list(CommitLogScan(SAMPLE))
        picked = records[:40] + [r for r in records if r[1].magic_code == BLANK_MAGIC_CODE][:3] + records[-3:]
        for off, _rec in picked:
            view = W.RecordView.from_store(store, off)
            mf = store.commit_log.mapped_file_queue.find_mapped_file_by_offset(off)
            _check_record_view(view, mf.mapped, off - mf.file_from_offset, off)
    finally:
        store.close()


def test_record_view_v2_ipv6_bad_crc_and_from_bytes():
    v6 = Address.parse("[2001:db8::7]:10911")
    born6 = Address.parse("[fe80::1]:40001")
    buf = encode_message(queue_id=3, flag=7, queue_offset=5, physical_offset=2**40 + 8, sys_flag=0,
                         born_timestamp=1_795_000_000_000, born_host=born6, store_timestamp=1_795_000_000_123,
                         store_host=v6, reconsume_times=1, prepared_transaction_offset=0, body=b"hello",
                         topic="T" * 200, properties="KEYS\x01a b\x02TAGS\x01x", magic_code=MESSAGE_MAGIC_CODE_V2)
    view = W.RecordView.from_bytes(buf, offset=2**40 + 8)
    _check_record_view(view, buf, 0, 2**40 + 8)
    rows = {r["name"]: r for r in view.rows}
    assert rows["store_host"]["value"] == "[2001:db8::7]:10911"
    assert rows["born_timestamp"]["value"] == "2026-11-18 11:06:40.000 UTC"
    assert rows["properties"]["extra"] == [["KEYS", "a b"], ["TAGS", "x"]]
    assert view.offset == str(2**40 + 8)  # beyond 2**53-safe territory: sent as a string
    # a record placed 16 bytes into a buffer, with a wrong CRC
    bad = bytearray(buf)
    struct.pack_into(">i", bad, 8, (crc32(b"hello") + 1) & 0x7FFFFFFF)
    view = W.RecordView.from_bytes(b"\0" * 16 + bytes(bad), offset=99, pos=16)
    rows = {r["name"]: r for r in view.rows}
    assert rows["body_crc"]["status"] == "bad" and "bad" in rows["body_crc"]["value"]
    assert rows["physical_offset"]["status"] == "bad"  # the record says 2**40+8, it sits at 99
    # not a record at all
    view = W.RecordView.from_bytes(b"\x01" * 40)
    assert view.kind == "corrupt" and view.error


def test_record_view_of_rocketmq_fixture_records():
    store = open_store(FIXTURES / "basic")
    try:
        records = list(CommitLogScan(FIXTURES / "basic" / "store"))
        assert records
        for off, _rec in records[::37]:
            view = W.RecordView.from_store(store, off)
            mf = store.commit_log.mapped_file_queue.find_mapped_file_by_offset(off)
            _check_record_view(view, mf.mapped, off - mf.file_from_offset, off)
    finally:
        store.close()


# -- PutPathPlayer -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(MODES))
def test_put_path_trace_matches_what_the_store_did(mode):
    msgs = [Message("TopicP", bytes(range(97, 97 + 20)) * (1 + i % 9), queue_id=i % 3,
                    properties=f"KEYS\x01p{i}") for i in range(14)]
    msgs.append(MessageBatch("TopicP", [BatchItem(b"b" * 50, "KEYS\x01b1"), BatchItem(b"c" * 60, "")], queue_id=1))
    player = W.PutPathPlayer.record(MODES[mode], msgs)
    assert all(r.ok for r in player.results), player.results
    appended = set(player.appended_offsets())
    for r in player.results:
        ar = r.append_result
        assert ar.wrote_offset in appended, f"put at {ar.wrote_offset} has no append.record step"
    # batch: each record of the batch appears
    assert len(player.appended_offsets()) == len(msgs) - 1 + 2
    # replaying the trace ends where the store ended
    final = {p["fileFromOffset"]: p for p in player.final_positions}
    table = player.positions_at()
    assert set(table) == set(final)
    for f, p in final.items():
        assert (table[f]["wrote"], table[f]["committed"], table[f]["flushed"]) == \
               (p["wrotePosition"], p["committedPosition"], p["flushedPosition"]), (mode, f)
    # the last step shows the last file's positions
    last = player.steps[-1]
    last_file = int(player.files[last["file"]]["from"])
    assert last["pos"] == [table[last_file]["wrote"], table[last_file]["committed"], table[last_file]["flushed"]]
    stages = set(player.stages())
    assert {"encode", "lock.acquire", "append.record", "position.wrote", "lock.release", "flush"} <= stages
    assert ("group_commit.wake" in stages) == (mode == "SYNC_FLUSH")
    assert ("commit" in stages) == (mode == "TRANSIENT_STORE_POOL")
    boxes = {s["box"] for s in player.steps}
    assert {"encode", "lock", "mapped_file", "do_append", "wrote", "unlock"} <= boxes
    # every field range of an append lies inside its file, within the appended record
    for s in player.steps:
        if s["stage"] == "append.record":
            size = player.files[s["file"]]["size"]
            assert all(0 <= a <= b <= size for _, a, b in s["bytes"])
            assert s["bytes"][0][0] == "total_size"


def test_put_path_player_from_events_and_positions_never_go_back():
    player = W.PutPathPlayer.record({"flush_disk_type": "SYNC_FLUSH"}, 14)
    again = W.PutPathPlayer.from_events(player.events)
    assert again.steps == player.steps and again.files == player.files
    last = {}
    for s in player.steps:
        if "set" in s:
            f = s["set"][0]
            prev = last.get(f, [0, 0, 0])
            assert all(a >= b for a, b in zip(s["set"][1:], prev))
            last[f] = s["set"][1:]
    assert any(s["stage"] == "append.blank" for s in player.steps), "14 demo messages roll a 4 KiB file"
    assert replay(player.events) == player.positions_at()
    # everything synced is JSON (no int beyond 2**53 sneaks through as a number)
    json.dumps(player.steps)


def test_compare_gives_three_players_in_an_hbox():
    import ipywidgets

    box = W.PutPathPlayer.compare(messages=6)
    assert isinstance(box, ipywidgets.HBox)
    assert [p.title for p in box.players] == list(MODES)
    assert all(isinstance(c, W.PutPathPlayer) for c in box.children)


# -- static HTML ---------------------------------------------------------------------------------

def _embedded_state(page: str) -> dict:
    m = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', page, re.S)
    assert m, "no widget state in the page"
    return json.loads(m.group(1))


def test_to_html_embeds_esm_css_and_state(tmp_path):
    store = open_store(SAMPLE)
    try:
        seg = W.SegmentView.from_store(store)
        rec = W.RecordView.from_store(store, 0)
    finally:
        store.close()
    player = W.PutPathPlayer.record(None, 4)
    path = tmp_path / "views.html"
    written = W.to_html([seg, rec, player], path, title="views")
    assert written == path  # the path, not the 40 KB page a prompt would echo
    page = path.read_text(encoding="utf-8")
    assert page == W.to_html([seg, rec, player], title="views")  # without a path: the same HTML
    state = _embedded_state(page)["state"]
    for view in (seg, rec, player):
        model = state[view.model_id]
        assert model["model_module"] == "anywidget"
        assert model["state"]["_esm"] == view._esm and "export default" in view._esm
        assert model["state"]["_css"] == view._css
        assert f'data-rmq-model-id="{view.model_id}"' in page
    buffers = {tuple(b["path"]): base64.b64decode(b["data"]) for b in state[seg.model_id]["buffers"]}
    assert buffers[("positions",)] == seg.positions and buffers[("files",)] == seg.files
    rec_buffers = {tuple(b["path"]): base64.b64decode(b["data"]) for b in state[rec.model_id]["buffers"]}
    assert rec_buffers[("data",)] == rec.data
    assert state[player.model_id]["state"]["steps"] == player.steps
    # offline: the shim is inline and nothing is loaded from elsewhere
    assert "rmq_static" in page and "URL.createObjectURL" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "</script>" not in json.dumps(state).replace("<\\/", "")  # nothing can close the state early


def test_to_html_of_an_hbox_includes_its_children():
    box = W.PutPathPlayer.compare(messages=3, modes=("SYNC_FLUSH", "ASYNC_FLUSH"))
    state = _embedded_state(W.to_html(box))["state"]
    assert state[box.model_id]["model_name"] == "HBoxModel"
    for p in box.players:
        assert p.model_id in state and f"IPY_MODEL_{p.model_id}" in state[box.model_id]["state"]["children"]


# -- StoreInspector ------------------------------------------------------------------------------

def _scan(path):
    return [(off, rec) for off, rec in CommitLogScan(path)]


@pytest.mark.parametrize("name", ["sample", "basic", "flush_tsp", "boundary", "txn_delay", "crash"])
def test_inspector_pages_through_a_full_scan_in_order(name):
    path = SAMPLE if name == "sample" else FIXTURES / name
    scan = _scan(path if name == "sample" else path / "store")
    insp = W.StoreInspector.from_path(path, page_size=37, embed_pages=1)
    try:
        assert insp.browser.end == max(off + r.total_size for off, r in scan if r.magic_code != BLANK_MAGIC_CODE) \
            or insp.browser.end == scan[-1][0] + scan[-1][1].total_size
        rows, start, pages = [], None, 0
        while True:
            before = insp.browser.records_read
            page = insp.records(start)
            assert insp.browser.records_read - before <= 37, "a page decodes only its own records"
            rows += page["rows"]
            pages += 1
            if page["next"] is None:
                break
            start = int(page["next"])
        assert [int(r["offset"]) for r in rows] == [off for off, _ in scan]
        assert [r["kind"] for r in rows] == ["blank" if rec.magic_code == BLANK_MAGIC_CODE else "message"
                                            for _, rec in scan]
        for r, (off, rec) in zip(rows, scan):
            assert r["size"] == rec.total_size
            if isinstance(rec, MessageRecord):
                assert (r["topic"], r["queue_id"], r["queue_offset"]) == (rec.topic, rec.queue_id, str(rec.queue_offset))
                assert r["msg_id"] == create_message_id(rec.store_host, off)
        # backwards: the page before the end is the scan's tail, the page before that precedes it
        last = insp.records_before(None)
        assert [int(r["offset"]) for r in last["rows"]] == [off for off, _ in scan[-37:]]
        prev = insp.records_before(int(last["start"]))
        assert [int(r["offset"]) for r in prev["rows"]] == [off for off, _ in scan[-74:-37]]
        # any byte of a record leads to that record
        for off, rec in scan[:: max(1, len(scan) // 25)]:
            assert insp.browser.record_containing(off + rec.total_size // 2) == off
    finally:
        insp.close()


def test_inspector_opens_a_big_store_without_reading_it(tmp_path):
    cfg = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=20 * 4096,
                      pre_fault_mapped_file=False, message_index_enable=False)
    with MessageStore(tmp_path / "big", cfg) as store:
        for b in range(400):
            items = [BatchItem(b"m%05d" % (b * 50 + k), "") for k in range(50)]
            assert store.put_messages(MessageBatch(f"T{b % 4}", items, queue_id=b % 3)).ok
        store.wait_dispatched()
    t0 = time.perf_counter()
    insp = W.StoreInspector.from_path(tmp_path / "big", page_size=50, embed_pages=2)
    opened = time.perf_counter() - t0
    try:
        total = 20_000
        assert insp.summary["messages_in_queues"] == str(total)
        assert insp.summary["segments"] > 20
        assert insp.open_info["source"] == "consume_queue" and insp.open_info["walked_records"] <= 2
        assert insp.browser.records_read <= 2 * 50 + 10, insp.browser.records_read
        assert opened < 5.0
        # the last page and a lookup by offset stay local too
        n = insp.browser.records_read
        last = insp.records_before(None)
        assert last["next"] is None and len(last["rows"]) == 50
        mid = insp.lookup(str(insp.browser.end // 2))
        assert len(mid["rows"]) == 1
        assert insp.browser.records_read - n < 2_000, "paging backwards hops a few records, not the log"
        assert int(last["rows"][-1]["offset"]) + last["rows"][-1]["size"] == insp.browser.end
    finally:
        insp.close()


def test_inspector_lookups_by_msg_id_offset_and_key():
    insp = W.StoreInspector.from_path(FIXTURES / "basic")
    try:
        scan = [(o, r) for o, r in _scan(FIXTURES / "basic" / "store") if isinstance(r, MessageRecord)]
        off, rec = scan[123]
        res = insp.lookup(create_message_id(rec.store_host, off))
        assert res["how"] == "msgId" and [int(r["offset"]) for r in res["rows"]] == [off]
        res = insp.lookup(f"{off + 7:,}")
        assert res["how"] == "offset" and [int(r["offset"]) for r in res["rows"]] == [off]
        assert insp.lookup(str(10**12))["rows"] == []
        from rmqstore.format.properties import string_to_properties

        key = next(k for k in (string_to_properties(rec.properties).get("KEYS") or "").split(" ") if k)
        expected = sorted(o for o, r in scan
                          if key in (string_to_properties(r.properties).get("KEYS") or "").split(" ")
                          and r.topic == rec.topic)
        res = insp.lookup(f"{rec.topic}#{key}")
        assert res["how"] == "key"
        assert [int(r["offset"]) for r in res["rows"]] == expected[:32]
        assert {int(r["offset"]) for r in insp.lookup(key)["rows"]} >= set(expected[:32])
    finally:
        insp.close()


def test_inspector_answers_custom_messages_and_embeds_first_pages(monkeypatch):
    insp = W.StoreInspector.from_path(SAMPLE, page_size=20, embed_pages=2)
    sent = []
    monkeypatch.setattr(insp, "send", lambda content, buffers=None: sent.append((content, buffers)))
    try:
        first = insp.page
        assert insp.embedded_pages[0]["rows"] == first["rows"] and len(insp.embedded_pages) == 2
        # embedded record bytes: every embedded row's record, sliced from one buffer
        blob = insp.embedded_bytes
        with open(SAMPLE / "commitlog" / "00000000000000000000", "rb") as f:
            seg0 = f.read()
        for d in insp.embedded_details:
            a, b = d["data_range"]
            off = int(d["offset"])
            assert blob[a:b] == seg0[off:off + d["size"]]
        insp._on_msg(insp, {"kind": "page", "start": first["next"], "count": 20, "id": "a"}, [])
        reply, buffers = sent[-1]
        assert reply["id"] == "a" and reply["page"]["rows"] == insp.embedded_pages[1]["rows"]
        insp._on_msg(insp, {"kind": "record", "offset": first["rows"][3]["offset"], "id": "b"}, [])
        reply, buffers = sent[-1]
        off = int(first["rows"][3]["offset"])
        assert reply["record"]["offset"] == str(off) and bytes(buffers[0]) == seg0[off:off + reply["record"]["size"]]
        insp._on_msg(insp, {"kind": "page_before", "end": first["next"], "count": 20, "id": "c"}, [])
        assert sent[-1][0]["page"]["rows"] == first["rows"]
        insp._on_msg(insp, {"kind": "lookup", "query": first["rows"][5]["msg_id"], "id": "d"}, [])
        assert sent[-1][0]["lookup"]["rows"][0]["offset"] == first["rows"][5]["offset"]
        insp._on_msg(insp, {"kind": "record", "offset": "999999999999", "id": "e"}, [])
        assert "error" in sent[-1][0] and sent[-1][0]["id"] == "e"
    finally:
        insp.close()


def test_inspector_of_a_running_store(small_store):
    _put_some(small_store, 30)
    small_store.wait_dispatched()
    insp = W.StoreInspector.from_store(small_store, page_size=10)
    rows = insp.records()["rows"]
    assert [int(r["offset"]) for r in rows] == [off for off, _ in _scan(small_store.root)][:10]
    assert {q["topic"] for q in insp.queues} == {"TopicW"}
    qp = insp.browser.queue_page("TopicW", 1, 0, 5)
    assert [r["queue_offset"] for r in qp["rows"]] == ["0", "1", "2", "3", "4"]
    insp.close()
    assert not small_store.shutdown_flag  # not ours to close


def test_fast_open_finds_the_same_end_as_open_store():
    from rmqstore.read.fast_open import open_fast

    for path in [SAMPLE] + [FIXTURES / n for n in ("basic", "boundary", "txn_delay", "flush_async", "flush_sync",
                                                   "flush_tsp", "crash")]:
        fast, info = open_fast(path)
        full = open_store(path)
        try:
            assert info["end"] == full.get_max_phy_offset(), path
            assert [_positions_core(p) for p in fast.positions()] == [_positions_core(p) for p in full.positions()]
            assert {k: (q.get_min_offset_in_queue(), q.get_max_offset_in_queue(), q.max_physic_offset)
                    for k, q in fast.consume_queue_table.items()} == \
                   {k: (q.get_min_offset_in_queue(), q.get_max_offset_in_queue(), q.max_physic_offset)
                    for k, q in full.consume_queue_table.items()}
        finally:
            fast.close()
            full.close()


# -- notebooks to offline HTML -------------------------------------------------------------------

def test_export_notebook_html_renders_widgets_from_saved_state(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("nbconvert")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Widgets offline\nSome $x^2$ math that stays text."),
        nbformat.v4.new_code_cell(f"import rmqstore.widgets as W\nfrom rmqstore import open_store\n"
                                  f"store = open_store({str(SAMPLE)!r})"),
        nbformat.v4.new_code_cell("W.SegmentView.from_store(store)"),
        nbformat.v4.new_code_cell("W.RecordView.from_store(store, 0)"),
        nbformat.v4.new_code_cell("W.PutPathPlayer.compare(messages=3, modes=('SYNC_FLUSH', 'ASYNC_FLUSH'))"),
        nbformat.v4.new_code_cell("print('done')"),
    ]
    src = tmp_path / "small.ipynb"
    nbformat.write(nb, src)
    out = tmp_path / "small.html"
    page = W.export_notebook_html(src, out, timeout=120)
    assert out.read_text(encoding="utf-8") == page
    views = re.findall(r'data-rmq-model-id="([0-9a-f]+)"', page)
    assert len(views) == 3, views
    state = _embedded_state(page)["state"]
    kinds = {state[v]["model_name"] for v in views}
    assert kinds == {"AnyModel", "HBoxModel"}
    anys = [m for m in state.values() if m["model_module"] == "anywidget"]
    assert len(anys) == 4  # segment view, record view, two players
    assert all("export default" in m["state"]["_esm"] and m["state"]["_css"] for m in anys)
    box = next(state[v] for v in views if state[v]["model_name"] == "HBoxModel")
    assert all(ref[len("IPY_MODEL_"):] in state for ref in box["state"]["children"])
    # the shim renders them; nothing remote is referenced (no require.js, html-manager, MathJax, CDN)
    assert "rmq_static" in page and "done" in page
    assert not re.search(r"""<script[^>]+src\s*=\s*["'](https?:)?//""", page)
    assert "html-manager" not in page and "require.min.js" not in page and "mathjax@" not in page.lower()
    # no widget output left as nbconvert's JSON (the shim names the type: it renders an Output's widgets)
    assert "application/vnd.jupyter.widget-view+json" not in page.replace(SHIM_JS, "")


def test_offsets_beyond_2_53_stay_exact():
    big = 2**62 + 12345
    seg = W.SegmentView.from_positions([{"fileFromOffset": big - 12345, "wrotePosition": 10, "size": 1 << 20}])
    assert seg.segments()[0]["fileFromOffset"] == big - 12345 and seg.segments()[0]["file"] == f"{big - 12345:020d}"
    assert seg.summary["max_offset"] == str(big - 12345 + 10)
    buf = encode_message(queue_id=0, flag=0, queue_offset=2**60 + 1, physical_offset=big, sys_flag=0, born_timestamp=1,
                         born_host="10.0.0.1:1", store_timestamp=2, store_host="10.0.0.2:2", reconsume_times=0,
                         prepared_transaction_offset=2**61 + 7, body=b"", topic="T", properties="")
    rec = W.RecordView.from_bytes(buf, offset=big)
    rows = {r["name"]: r for r in rec.rows}
    assert rec.offset == str(big) and rows["physical_offset"]["raw"] == str(big)
    assert rows["queue_offset"]["raw"] == str(2**60 + 1)
    assert rows["prepared_transaction_offset"]["raw"] == str(2**61 + 7)
    json.dumps(rec.rows)  # all strings: nothing for JSON.parse to round


def test_inspector_of_a_closed_store_says_so():
    """After its store is closed, the inspector's reads raise (the browser shows the message)
    instead of answering '0 record(s) via the index' or an empty page."""
    from rmqstore import open_store
    from rmqstore.common.errors import StoreStateError
    from rmqstore.widgets import StoreInspector

    store = open_store(SAMPLE)
    view = StoreInspector.from_store(store)
    assert "13 record(s) via the index" in view.lookup("OrderTopic#order-3")["message"]
    store.close()
    for read in (lambda: view.lookup("OrderTopic#order-3"), lambda: view.records(0), lambda: view.record(0),
                 lambda: view.lookup("0"), lambda: view.records_before(None)):
        with pytest.raises(StoreStateError, match="closed"):
            read()
    replies = []
    view.send = lambda content, buffers=None: replies.append(content)
    view._on_msg(view, {"kind": "lookup", "query": "OrderTopic#order-3", "id": 1}, [])
    assert "closed" in replies[-1]["error"], replies


# -- ReplicationView -----------------------------------------------------------------------------

@pytest.fixture
def ha_pair(tmp_path):
    """A SYNC_MASTER on an ephemeral loopback port and a slave replicating from it."""
    from rmqstore import BrokerRole

    common = dict(mapped_file_size_commit_log=8192, mapped_file_size_consume_queue=20 * 50,
                  pre_fault_mapped_file=False, ha_reconnect_interval=50, sync_flush_timeout=300)
    master = MessageStore(tmp_path / "master", StoreConfig(broker_role=BrokerRole.SYNC_MASTER, ha_enable=True,
                                                           ha_listen_port=0, **common))
    master.start()
    slave = MessageStore(tmp_path / "slave", StoreConfig(broker_role=BrokerRole.SLAVE,
                                                         ha_master_address=master.ha_service.listen_address,
                                                         **common))
    slave.start()
    deadline = time.monotonic() + 10
    while not (master.ha_service.connection_count and slave.ha_service.ha_client.connected):
        assert time.monotonic() < deadline, "the slave did not connect"
        time.sleep(0.005)
    yield master, slave
    slave.shutdown()
    master.shutdown()


def _side_offsets(store) -> dict:
    q = store.commit_log.mapped_file_queue
    return {"wrote": str(q.get_max_wrote_position()), "max_offset": str(store.get_max_phy_offset()),
            "flushed": str(q.flushed_where), "dispatched": str(store.reput_message_service.reput_from_offset)}


def test_replication_view_holds_the_pairs_offsets_and_waits(ha_pair):
    from collections import Counter

    master, slave = ha_pair
    results = _put_some(master, 40)
    assert all(r.status.name == "PUT_OK" for r in results)
    master.wait_dispatched()
    slave.wait_dispatched()
    view = W.ReplicationView.from_stores(master, slave)
    for side, store in (("master", master), ("slave", slave)):
        state = getattr(view, side)
        assert {k: state[k] for k in ("wrote", "max_offset", "flushed", "dispatched")} == _side_offsets(store), side
        assert state["role"] == store.config.broker_role.value and state["running"]
    end = results[-1].append_result.wrote_offset + results[-1].append_result.wrote_bytes
    assert view.master["max_offset"] == view.slave["max_offset"] == str(end)
    (conn,) = master.ha_service.positions()["slaves"]
    assert view.master["slaves"] == [{k: (str(v) if k != "slave" else v) for k, v in conn.items()}]
    assert view.master["slaves"][0]["acked"] == view.master["push2_slave_max_offset"] == str(end)
    assert view.slave["client"]["connected"] and view.slave["client"]["reported"] == str(end)
    assert view.master["outcomes"] == dict(Counter(r.status.name for r in results)) == {"PUT_OK": 40}
    assert view.master["last_replica"]["status"] == "PUT_OK" and view.master["last_replica"]["next_offset"] == str(end)
    assert view.master["waiting"] == 0

    # the slave goes away: SYNC_MASTER puts answer SLAVE_NOT_AVAILABLE, and the view says so
    slave.shutdown()
    deadline = time.monotonic() + 10
    while master.ha_service.connection_count:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    more = _put_some(master, 3)
    assert [r.status.name for r in more] == ["SLAVE_NOT_AVAILABLE"] * 3
    assert view.refresh()
    assert view.master["outcomes"] == {"PUT_OK": 40, "SLAVE_NOT_AVAILABLE": 3}
    assert view.master["last_replica"]["status"] == "SLAVE_NOT_AVAILABLE"
    assert view.master["last_replica"]["next_offset"] is None  # answered at once: it did not wait
    assert view.master["slaves"] == [] and not view.slave["running"] and not view.slave["client"]["connected"]
    assert view.slave["max_offset"] == str(end)  # the stopped slave keeps its last positions
    assert view.master["max_offset"] == str(master.get_max_phy_offset()) != str(end)
    assert not view.refresh()  # nothing moved: no new state sent


def test_replication_view_watch_follows_puts_and_stops(ha_pair):
    master, slave = ha_pair
    view = W.ReplicationView.from_stores(master, slave)
    seen = []
    view.observe(lambda ch: seen.append(ch["new"]), names="updates")
    view.watch(0.02)
    assert view.watching and view.live
    for _ in range(5):
        _put_some(master, 5)
        time.sleep(0.05)
    view.stop()
    assert not view.watching and not view.live
    assert len(seen) >= 2, "the view should have been updated while puts ran"
    assert view.slave["max_offset"] == view.master["max_offset"] == str(master.get_max_phy_offset())
    assert view.master["outcomes"] == {"PUT_OK": 25}
    view.watch(0.02)
    thread = view._live_thread
    view.close()
    assert not thread.alive


def test_replication_view_offsets_beyond_2_53_stay_exact():
    big = 2 ** 60 + 7
    side = {"role": "SYNC_MASTER", "running": True, "min_offset": big - 100, "wrote": big, "max_offset": big,
            "flushed": big - 1, "dispatched": big, "slaves": [{"slave": "x:1", "requested": 0, "pushed": big,
                                                              "acked": big - 3}],
            "push2_slave_max_offset": big - 3, "waiting": 2, "outcomes": {"PUT_OK": 5}, "sync_flush_timeout": 5000,
            "last_replica": {"status": "PUT_OK", "waited_ms": 0.5, "next_offset": big}}
    view = W.ReplicationView.from_snapshot({"master": side, "slave": None, "time": 1.0})
    assert view.master["wrote"] == str(big) and view.master["slaves"][0]["acked"] == str(big - 3)
    assert view.master["last_replica"]["next_offset"] == str(big) and view.master["waiting"] == 2
    assert view.slave is None
    assert str(big) in W.to_html(view)


# -- FrameView -----------------------------------------------------------------------------------

def _real_send_frame(tmp_path) -> tuple[bytes, dict]:
    """The request frame a real RocketMQ producer (the C++ client) sent, kept by the broker's recorder."""
    rc = pytest.importorskip("rocketmq.client")
    from broker_support import BrokerThread
    from rmqstore.remoting import FrameRecorder, RequestCode

    with BrokerThread(tmp_path / "store") as bt:
        recorder = FrameRecorder(per_code=2)
        bt.broker.server.frame_recorder = recorder
        p = rc.Producer("PG_frame_view")
        p.set_namesrv_addr(bt.namesrv)
        p.start()
        try:
            m = rc.Message("FrameTopic")
            m.set_keys("frame-key")
            m.set_tags("frameTag")
            m.set_body("frame body")
            assert p.send_sync(m).status == rc.SendStatus.OK
        finally:
            p.shutdown()
        codes = recorder.codes
        frame = recorder.last(RequestCode.SEND_MESSAGE_V2) or recorder.last(RequestCode.SEND_MESSAGE)
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC not in codes  # the broker's recorder sees the broker's requests
    return frame, {"codes": codes}


def test_frame_view_of_a_real_producers_frame(tmp_path):
    from rmqstore.format.properties import string_to_properties
    from rmqstore.remoting import decode_frame, frame_field_spans

    frame, _ = _real_send_frame(tmp_path)
    cmd = decode_frame(frame[4:])
    view = W.FrameView.from_bytes(frame)
    assert bytes(view.data) == frame and view.error == ""
    spans = [[n, a, b] for n, a, b, _ in frame_field_spans(frame, expand_header=True)]
    assert view.spans == spans and [r["name"] for r in view.rows] == [s[0] for s in spans]
    assert {r["name"] for r in view.field_table} == {s[0] for s in spans}
    # spans are in order, do not overlap, and cover the length, header and body whole
    ends = [(a, b) for _, a, b in spans]
    assert all(b0 <= a1 for (_, b0), (a1, _) in zip(ends, ends[1:])) and ends[0] == (0, 4) and ends[-1][1] == len(frame)
    assert frame[view.span_map()["body"][0]:] == cmd.body == b"frame body"
    assert view.code == f"{cmd.code} {'SEND_MESSAGE_V2' if cmd.code == 310 else 'SEND_MESSAGE'}"
    assert view.row("language")["value"] == "CPP" and view.row("opaque")["value"] == str(cmd.opaque)
    # every custom-header entry has its row, its bytes hold its value, the properties are split
    for key, value in cmd.ext_fields.items():
        a, b = view.span_map()[f"extFields.{key}"]
        assert json.loads(b"{" + frame[a:b] + b"}")[key] in (value, int(value) if value.lstrip("-").isdigit() else value)
    props = [r for r in view.rows if r["name"].startswith("extFields.") and r.get("extra")]
    assert len(props) == 1 and dict(props[0]["extra"]) == string_to_properties(cmd.ext_fields[
        "properties" if "properties" in cmd.ext_fields else "i"])
    assert dict(props[0]["extra"])["KEYS"] == "frame-key"


def test_frame_view_names_send_message_v2_fields_and_binary_headers():
    from rmqstore.broker.send import V2_FIELDS
    from rmqstore.remoting import RemotingCommand, RequestCode, SerializeType, encode_frame

    ext = {"a": "PG", "b": "T", "e": "2", "i": "KEYS\x01k\x02", "l": "16", "m": "false"}
    for st in (SerializeType.JSON, SerializeType.ROCKETMQ):
        frame = encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext, b"xy", remark="r", opaque=5,
                                             serialize_type=st))
        view = W.FrameView.from_bytes(frame)
        for key, value in ext.items():
            row = view.row(f"extFields.{key}")
            assert row["java"] == f"{key} ({V2_FIELDS[key]})"
            assert row["value"].startswith(f"{V2_FIELDS[key]} = ")
        assert view.row("extFields.l")["value"] == "maxReconsumeTimes = 16"
        assert view.row("remark")["value"] == "'r'" and view.row("body")["value"].startswith("xy")
        assert view.row("header_meta")["value"].startswith(f"serialize type {int(st)}")
        if st == SerializeType.ROCKETMQ:  # binary: every header byte is in a span
            covered = sum(b - a for _, a, b in view.spans)
            assert covered == len(frame)
    # the long names of SEND_MESSAGE are shown as they are
    frame = encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE, {"a": "x", "topic": "T"}))
    assert W.FrameView.from_bytes(frame).row("extFields.a")["java"] == "a"
    bad = W.FrameView.from_bytes(b"\x00\x00\x00\x10\x00\x00\x00\x05{oops")
    assert bad.error and [s[0] for s in bad.spans] == ["length", "header_meta", "header", "body"]
    assert W.FrameView.from_bytes(b"\x00\x01").error
