"""The put-path trace tells the truth: same offsets, same positions, every stage the put met."""

import pytest

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.format.record import decode_record
from rmqstore.common.trace import STAGES, RecordingTracer


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
                              "ha.push", "replica.wake"}  # (replication: tests/broker/test_ha.py)
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


# -- from the wire: a send through the broker ----------------------------------------------------

import json  # noqa: E402

from rmqstore.broker.send import V2_FIELDS  # noqa: E402
from rmqstore.format.properties import string_to_properties  # noqa: E402
from rmqstore.format.record import decode_message_id  # noqa: E402
from rmqstore.remoting import RequestCode, ResponseCode, decode_frame  # noqa: E402
from rmqstore.broker.recording import record_send, send_frame, trace_broker  # noqa: E402
from rmqstore.common.trace import SEND_STAGES, WIRE_STAGES  # noqa: E402

CHECKS = ["send.check.broker_permission", "send.check.topic_name", "send.check.system_topic",
          "send.check.topic_config", "send.check.auto_create", "send.check.queue_id", "send.check.topic_permission"]


def _layers(events):
    """The stage of each event reduced to its layer: wire, send or store (in trace order)."""
    return ["wire" if e["stage"] in WIRE_STAGES else "send" if e["stage"] in SEND_STAGES else "store"
            for e in events]


def test_a_send_traced_from_the_frame_to_the_commitlog(tmp_path):
    body = b"two coffees, no sugar"
    frame = send_frame("WireTopic", body, queue_id=1, properties={"KEYS": "order-7", "TAGS": "TagB", "WAIT": "true"})
    trace = record_send(frame, {"flush_disk_type": "SYNC_FLUSH"}, root=tmp_path / "store")
    events = trace.events
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    # one trace, three layers in order: every wire event, then the processor, then the store (the
    # processor answers once the store's put ended; the reput and flush threads may come later)
    layers = _layers(events)
    first_store = layers.index("store")
    assert set(layers[:layers.index("send")]) == {"wire"} and set(layers[layers.index("send"):first_store]) == {"send"}
    assert "wire" not in layers[first_store:]
    # the wire: field by field, in byte order, covering the frame but for the JSON punctuation
    (whole,) = trace.by_stage("wire.frame")
    assert whole["data"] == frame and whole["code_name"] == "SEND_MESSAGE_V2" and whole["serialize_type"] == "JSON"
    fields = [e for e in events if e["stage"] in WIRE_STAGES and e["stage"] != "wire.frame"]
    spans = [tuple(e["span"]) for e in fields]
    assert spans == sorted(spans) and spans[0] == (0, 4) and spans[-1] == (len(frame) - len(body), len(frame))
    assert fields[0]["value"] == len(frame) - 4
    assert trace.by_stage("wire.header_meta")[0]["header_length"] == len(frame) - 8 - len(body)
    sent = decode_frame(frame[4:]).ext_fields
    ext = [e for e in fields if e["stage"] in ("wire.ext_field", "wire.properties")]
    assert {e["key"]: e["name"] for e in ext} == {k: V2_FIELDS[k] for k in sent}  # a..m named with long names
    for e in ext:  # each entry's bytes are the JSON member "key":"value"
        a, b = e["span"]
        assert frame[a:b] == f'{json.dumps(e["key"])}:{json.dumps(sent[e["key"]])}'.encode()
    (props,) = trace.by_stage("wire.properties")
    assert props["key"] == "i" and props["properties"] == {"KEYS": "order-7", "TAGS": "TagB", "WAIT": "true"}
    assert frame[slice(*trace.by_stage("wire.body")[0]["span"])] == body
    # the checks, each with its outcome, in msgCheck's order
    assert [e["stage"] for e in events if e["stage"].startswith("send.check.")] == CHECKS
    outcome = {e["stage"]: e["status"] for e in events if e["stage"].startswith("send.check.")}
    assert outcome.pop("send.check.topic_config") == "NOT_FOUND"  # a new topic: auto-created from TBW102
    assert set(outcome.values()) == {"OK"}
    (inner,) = trace.by_stage("send.message")
    stored_props = string_to_properties(inner["properties"])
    assert "WAIT" not in stored_props and stored_props["CLUSTER"] == "DefaultCluster"
    # the store's stages as always, and the answer names the record they wrote
    stages = trace.stages()
    for stage in ("check.message", "encode", "append.record", "position.wrote", "group_commit.wake", "put.end",
                  "dispatch.consume_queue"):
        assert stage in stages, stage
    (append,) = trace.by_stage("append.record")
    (answer,) = trace.by_stage("send.response")
    assert answer["code"] == ResponseCode.SUCCESS and answer["queueId"] == 1
    assert decode_message_id(answer["msgId"])[1] == append["offset"] and answer["queueOffset"] == append["queue_offset"]
    (resp,) = trace.responses
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["msgId"] == answer["msgId"]
    record = decode_record((tmp_path / "store" / "commitlog" / f"{0:020d}").read_bytes(), append["offset"])
    assert (record.topic, record.queue_id, record.body) == ("WireTopic", 1, body)


def test_a_binary_header_and_send_message_with_long_names():
    frame = send_frame("LongNames", b"x" * 10, code=RequestCode.SEND_MESSAGE, serialize_type=1, opaque=99)
    trace = record_send(frame)
    (whole,) = trace.by_stage("wire.frame")
    assert (whole["code_name"], whole["serialize_type"], whole["opaque"]) == ("SEND_MESSAGE", "ROCKETMQ", 99)
    names = [e["field"] for e in trace.by_stage("wire.header")]
    assert names == ["code", "language", "version", "opaque", "flag", "remark", "extFields"]  # binary order
    ext = trace.by_stage("wire.ext_field") + trace.by_stage("wire.properties")
    assert all(e["key"] == e["name"] for e in ext) and "topic" in {e["key"] for e in ext}
    assert trace.responses[0].code == ResponseCode.SUCCESS and trace.responses[0].opaque == 99


def test_refusals_are_traced_where_they_happen():
    frames = [send_frame("SCHEDULE_TOPIC_XXXX", b"no", opaque=1),  # a system topic no one may send to
              send_frame("Wide", b"a", queue_id=9, opaque=2),  # queue id past the 4 queues of TBW102's copy
              send_frame("Big", b"b" * 300, opaque=3),  # the body over max_message_size: the store's check
              send_frame("Fine", b"c", opaque=4)]
    trace = record_send(frames, {"max_message_size": 256})
    codes = [r.code for r in trace.responses]
    assert codes == [ResponseCode.NO_PERMISSION, ResponseCode.SYSTEM_ERROR, ResponseCode.MESSAGE_ILLEGAL,
                     ResponseCode.SUCCESS]
    answers = trace.by_stage("send.response")
    assert [a["code"] for a in answers] == codes
    refused = [(e["stage"], e["status"]) for e in trace.events
               if e["stage"].startswith("send.check.") and e["status"] not in ("OK", "NOT_FOUND")]
    assert refused == [("send.check.system_topic", "NO_PERMISSION"), ("send.check.queue_id", "SYSTEM_ERROR")]
    encodes = trace.by_stage("encode")
    assert [e["status"] for e in encodes] == ["MESSAGE_ILLEGAL", "OK"]  # refused checks never reach the store
    assert "over max_message_size 256" in encodes[0]["message"]
    assert "over max_message_size 256" in answers[2]["remark"]
    assert len(trace.by_stage("put.begin")) == 2 and len(trace.by_stage("append.record")) == 1


def test_auto_create_off_refuses_a_new_topic():
    trace = record_send(send_frame("Unknown", b"?"), broker_kwargs={"auto_create_topic_enable": False})
    (auto,) = trace.by_stage("send.check.auto_create")
    assert auto["status"] == "TOPIC_NOT_EXIST" and "apply first" in auto["remark"]
    assert trace.responses[0].code == ResponseCode.TOPIC_NOT_EXIST and not trace.by_stage("put.begin")


def test_a_real_client_send_is_traced_from_its_frame(tmp_path):
    rc = pytest.importorskip("rocketmq.client")
    from broker_support import BrokerThread

    tracer = RecordingTracer()
    with BrokerThread(tmp_path / "store") as bt, trace_broker(bt.broker, tracer):
        producer = rc.Producer("PG_trace_real")
        producer.set_namesrv_addr(bt.namesrv)
        producer.start()
        try:
            m = rc.Message("RealTraceTopic")
            m.set_keys("real-1")
            m.set_body("from the C++ client")
            assert producer.send_sync(m).status == rc.SendStatus.OK
        finally:
            producer.shutdown()
        bt.broker.store.wait_dispatched()
    events = sorted(tracer.events, key=lambda e: e["seq"])
    (whole,) = [e for e in events if e["stage"] == "wire.frame"]
    assert whole["code_name"] == "SEND_MESSAGE" and whole["language"] == "CPP"
    ext = {e["key"]: e["value"] for e in events if e["stage"] == "wire.ext_field"}
    assert ext["topic"] == "RealTraceTopic" and ext["producerGroup"] == "PG_trace_real"
    (body,) = [e for e in events if e["stage"] == "wire.body"]
    assert whole["data"][body["span"][0]:body["span"][1]] == b"from the C++ client"
    (answer,) = [e for e in events if e["stage"] == "send.response"]
    (append,) = [e for e in events if e["stage"] == "append.record"]
    assert answer["code"] == 0 and decode_message_id(answer["msgId"])[1] == append["offset"]
    assert _layers(events).index("send") > max(i for i, x in enumerate(_layers(events)) if x == "wire")


def test_the_player_plays_a_send_trace():
    widgets = pytest.importorskip("rmqstore.widgets")
    frame = send_frame("PlayerTopic", b"played")
    player = widgets.PutPathPlayer.record_send(frame)
    assert player.frame == frame  # the bytes travel in a buffer, not in the steps
    assert [lane["lane"] for lane in player.lanes] == [2, 3, 0, 1]
    first = player.steps[0]
    assert first["stage"] == "wire.frame" and first["frame_bytes"] == ["frame", 0, len(frame)]
    topic = next(s for s in player.steps if s.get("frame_bytes", [""])[0] == "extFields.b")
    assert topic["text"] == "extFields.b (topic) = PlayerTopic" and topic["box"] == "ext_fields"
    assert all("data" not in s["fields"] for s in player.steps)
    spans = {(n, a, b) for n, a, b, _ in player.frame_spans}
    assert {tuple(s["frame_bytes"]) for s in player.steps if s.get("frame_bytes", ["frame"])[0] != "frame"} == spans
    store_only = widgets.PutPathPlayer.record(None, 2)
    assert [lane["lane"] for lane in store_only.lanes] == [0, 1] and store_only.frame == b""
