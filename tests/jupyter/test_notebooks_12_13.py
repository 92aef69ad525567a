"""Notebooks 12 and 13 (the broker with real RocketMQ clients) print what the store holds.

Each notebook runs once per session (``conftest.executed_notebook``) and keeps its scratch
store in the folder the suite names (it prints ``work folder: ...``); the expectations here
come from that store, read back by the engine (commitlog scan, consume queues, offsets file),
and from the remoting and broker tables -- never from the notebook's own printing alone.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

pytest.importorskip("nbclient")
pytest.importorskip("rocketmq.client")

from conftest import notebook_text, notebook_work_folder  # noqa: E402
from rmqstore.broker.jsonfmt import loads  # noqa: E402
from rmqstore.broker.send import V2_FIELDS  # noqa: E402
from rmqstore.format.properties import string_to_properties  # noqa: E402
from rmqstore.format.record import MessageRecord, create_message_id  # noqa: E402
from rmqstore.read.scan import scan_commitlog  # noqa: E402

pytestmark = pytest.mark.timeout(600)

NB12 = "12_from_a_producers_frame_to_the_commitlog.ipynb"
NB13 = "13_consumers_pull_offsets_retries_dlq.ipynb"


def _run(name):
    text = notebook_text(name)
    work = notebook_work_folder(text)
    store = os.path.join(work, "store")
    records = {off: rec for off, rec in scan_commitlog(store) if isinstance(rec, MessageRecord)}
    return text, store, records, work


@pytest.fixture(scope="module")
def nb12():
    text, store, records, work = _run(NB12)
    yield text, store, records
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def nb13():
    text, store, records, work = _run(NB13)
    yield text, store, records
    shutil.rmtree(work, ignore_errors=True)


# -- 12 ----------------------------------------------------------------------------------------

def test_12_what_the_producer_was_told_is_what_the_store_holds(nb12):
    text, _, records = nb12
    sent = re.findall(r"^sent order-(\d) tag (\w+) delay level (\d): status OK, UNIQ_KEY (\w+), queue offset (\d+)$",
                      text, re.M)
    assert len(sent) == 3
    for i, tag, level, uniq, queue_offset in sent:
        (rec,) = [r for r in records.values() if string_to_properties(r.properties).get("KEYS") == f"order-{i}"]
        props = string_to_properties(rec.properties)
        assert props["UNIQ_KEY"] == uniq and props["TAGS"] == tag and rec.queue_offset == int(queue_offset)
        assert rec.topic == ("SCHEDULE_TOPIC_XXXX" if level != "0" else "OrderTopic")
        assert rec.body == f"order {i}: 2 coffees".encode() and props["CLUSTER"] == "DefaultCluster"
        # WAIT=true is dropped from what is stored -- except when the delay rewrite re-serializes the
        # properties from the map, where 4.9.8 keeps it (CommitLog.putMessage)
        assert ("WAIT" in props) == (level != "0")


def test_12_the_frame_table_matches_the_record_it_became(nb12):
    text, _, records = nb12
    rows = dict(re.findall(r"^(\S+)\s+(\d+-\d+)\s", text, re.M))
    first = next(r for r in records.values() if r.body == b"order 0: 2 coffees")
    total = int(re.search(r"JSON header, (\d+) bytes", text).group(1))
    length = int(re.search(r"^length\s+0-3\s+[0-9a-f ]+ = (\d+)$", text, re.M).group(1))
    header = int(re.search(r"header length (\d+)$", text, re.M).group(1))
    assert length == total - 4 and rows["length"] == "0-3" and rows["header_meta"] == "4-7"
    body_start, body_last = map(int, rows["body"].split("-"))
    assert body_last == total - 1 and body_last - body_start + 1 == len(first.body) == total - 8 - header
    # the header's members, each where the remoting layer's spans put it, carry the record's values
    for name in ("code", "extFields", "flag", "language", "opaque", "remark", "version", "extFields.topic",
                 "extFields.producerGroup", "extFields.bornTimestamp", "extFields.properties"):
        assert name in rows, name
    assert re.search(rf'^extFields.bornTimestamp\s+\S+\s+"bornTimestamp":"{first.born_timestamp}"$', text, re.M)
    assert re.search(r'^extFields.topic\s+\S+\s+"topic":"OrderTopic"$', text, re.M)
    assert re.search(r'^code\s+\S+\s+"code":10$', text, re.M) and '"language":"CPP"' in text
    # spans are in order and inside the frame
    starts = [int(v.split("-")[0]) for v in rows.values()]
    assert starts == sorted(starts) and max(int(v.split("-")[1]) for v in rows.values()) == total - 1


def test_12_send_message_v2_letters_and_checks(nb12):
    text, _, _ = nb12
    letters = dict(re.findall(r"^([a-n]) = (\w+)\s", text, re.M))
    assert letters and all(V2_FIELDS[k] == v for k, v in letters.items())
    assert set(letters) >= set("abcdefghijkm")
    assert re.search(r"^b = topic\s+'OrderTopic'$", text, re.M) and re.search(r"^a = producerGroup\s+'PG_nb12'$",
                                                                            text, re.M)
    m = re.search(r"SEND_MESSAGE (\d+) bytes, SEND_MESSAGE_V2 (\d+) bytes", text)
    assert int(m.group(2)) < int(m.group(1))
    checks = re.findall(r"check .* (ok|REFUSED)$", text, re.M)  # (a widget's text/plain ends without a newline)
    assert checks == ["ok"] * 7


def test_12_the_msg_id_names_the_records_offset(nb12):
    text, _, records = nb12
    msg_id = re.search(r"^broker's answer: code 0, msgId (\w+),", text, re.M).group(1)
    offset = int(re.search(r"^msgId decoded: store host \S+, physical offset (\d+)$", text, re.M).group(1))
    rec = records[offset]
    assert rec.body == b"order 0: 2 coffees" and rec.topic == "OrderTopic"
    assert create_message_id(rec.store_host, offset) == msg_id
    assert f"msgId of the record: {msg_id}" in text
    assert (f"record at {offset}: topic OrderTopic, queue {rec.queue_id}, queue offset {rec.queue_offset}, "
            f"{rec.total_size} bytes") in text
    delayed_at = int(re.search(r"order-2 at (\d+): topic SCHEDULE_TOPIC_XXXX, queue 1, DELAY 2, "
                               r"REAL_TOPIC OrderTopic", text, re.M).group(1))
    assert records[delayed_at].topic == "SCHEDULE_TOPIC_XXXX" and records[delayed_at].queue_id == 1
    assert "SendResult.msg_id: True" in text and "abort file left: False" in text


# -- 13 ----------------------------------------------------------------------------------------

def test_13_pulled_and_pushed_every_message_once_as_stored(nb13):
    text, _, records = nb13
    pay = [r for r in records.values() if r.topic == "PayTopic"]
    stored = sorted((r.queue_id, r.queue_offset, r.body.decode()) for r in pay)
    pulled = sorted((int(q), int(o), b) for q, o, b in re.findall(r"^pulled queue (\d+) offset (\d+): (.+)$",
                                                                    text, re.M))
    assert pulled == stored and len(stored) == 8
    counts = {}
    for q, _, _ in stored:
        counts[q] = counts.get(q, 0) + 1
    assert f"PayTopic queue max offsets: {counts} total 8" in text
    assert text.count(": False") == text.count("abort file left: False") == 1
    assert text.count(": True") == 6  # pull 2, push 2, committed offsets, ORIGIN_MESSAGE_ID


def test_13_committed_offsets_are_in_consumer_offset_json(nb13):
    text, store, records = nb13
    with open(os.path.join(store, "config", "consumerOffset.json"), encoding="utf-8") as f:
        saved = loads(f.read())["offsetTable"]
    expected = {int(q): o for q, o in saved["PayTopic@CG_push"].items()}
    assert f"consumerOffset.json PayTopic@CG_push: {dict(sorted(expected.items()))}" in text
    per_queue = {}
    for r in records.values():
        if r.topic == "PayTopic":
            per_queue[r.queue_id] = max(per_queue.get(r.queue_id, 0), r.queue_offset + 1)
    assert expected == per_queue


def test_13_retries_then_the_dead_letter_queue(nb13):
    text, _, records = nb13
    times = [int(t) for t in re.findall(r"^delivered to the listener: topic FailTopic, reconsumeTimes (\d+), "
                                        r"body 'poison'$", text, re.M)]
    assert times == [0, 1, 2]
    retries = sorted((r.physical_offset, r.reconsume_times) for r in records.values() if r.topic == "%RETRY%CG_fail")
    printed = [(int(o), int(t)) for t, o in re.findall(r"^%RETRY%CG_fail\s+reconsumeTimes (\d+)  offset (\d+)$",
                                                       text, re.M)]
    assert printed == retries and [t for _, t in retries] == [1, 2]
    (dead,) = [r for r in records.values() if r.topic == "%DLQ%CG_fail"]
    (original,) = [r for r in records.values() if r.topic == "FailTopic"]
    assert f"%DLQ%CG_fail              reconsumeTimes 3  offset {dead.physical_offset}  body b'poison'" in text
    origin = string_to_properties(dead.properties)["ORIGIN_MESSAGE_ID"]
    assert origin == create_message_id(original.store_host, original.physical_offset)
    assert f"ORIGIN_MESSAGE_ID {origin}" in text and "abort file left: False" in text
    assert "fails on purpose" not in text  # the listener's planned failures do not clutter the page


def test_13_the_live_segment_view_followed_the_broker_to_the_end(nb13):
    text, _, records = nb13
    end = max(r.physical_offset + r.total_size for r in records.values())
    m = re.search(r"^live view: wrote (\d+), flushed (\d+); the store's commitlog ends at (\d+)$", text, re.M)
    assert m and int(m.group(1)) == int(m.group(3)) == end and int(m.group(2)) <= end
    assert int(re.search(r"^live view: (\d+) states sent", text, re.M).group(1)) > 1  # it moved while clients worked
    # the bar is worth looking at: what the notebook writes fills a good part of its segment (3 KB in a
    # 1 MiB segment drew a one-pixel sliver)
    m = re.search(r"^live view: the segment is (\d+) bytes, (\d+)% of it written$", text, re.M)
    assert m and int(m.group(2)) >= 10 and int(m.group(2)) == 100 * end // int(m.group(1)), m and m.group(0)
