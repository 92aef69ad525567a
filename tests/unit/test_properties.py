"""Properties strings, Java's String.hashCode and java.util.HashMap iteration order.

Expected Java values below were computed by hand (the non-BMP one over its UTF-16 code
units, in the test) and cross-checked with Java 17 (``String.hashCode``, ``HashMap.keySet``).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import PUT_FIXTURES, commitlog_records, manifest
from rmqstore.format.properties import (
    DELAY,
    REAL_QID,
    REAL_TOPIC,
    TAGS,
    WAIT,
    JavaHashMap,
    java_string_hash,
    properties_to_string,
    string_to_properties,
)
from rmqstore.format.record import MessageRecord

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


# -- properties_to_string / string_to_properties ------------------------------------------

def java_string2message_properties(s):
    """MessageDecoder#string2messageProperties (4.9.8), transcribed index by index."""
    result = {}
    if s is None:
        return result
    length, index = len(s), 0
    while index < length:
        new_index = s.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv = s.find("\x01", index)  # Java searches the whole rest of the string
            if index < kv < new_index - 1:
                result[s[index:kv]] = s[kv + 1:new_index]
        index = new_index + 1
    return result


_key = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1,
               max_size=12)
_value = st.text(st.characters(blacklist_characters="\x02", blacklist_categories=("Cs",)), min_size=1,
                 max_size=20)


@settings(max_examples=300, deadline=None)
@given(props=st.dictionaries(_key, _value, max_size=15))
@example(props={})
@example(props={"a": "b"})
@example(props={"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "7F00000100002A9F0000000000000000"})
@example(props={"k": "v\x01w"})  # a value may hold \x01: only the first one separates
def test_properties_round_trip(props):
    s = properties_to_string(props)
    assert not s.endswith("\x02")
    assert s.count("\x02") == max(len(props) - 1, 0)
    parsed = string_to_properties(s)
    assert isinstance(parsed, JavaHashMap)
    assert dict(parsed) == props
    assert list(parsed) == list(props)  # a plain dict is written in its own order
    # and a JavaHashMap survives the trip in its Java order too
    again = properties_to_string(parsed)
    assert string_to_properties(again) == props
    expected = "\x02".join(f"{k}\x01{parsed[k]}" for k in parsed.java_order())
    assert again == expected


@settings(max_examples=500, deadline=None)
@given(s=st.text(st.sampled_from("ab\x01\x02"), max_size=24))
@example(s="a\x01b\x02\x01b\x02ab\x02a\x01\x02c\x01d")
def test_string_to_properties_matches_java_loop(s):
    assert dict(string_to_properties(s)) == java_string2message_properties(s)
    assert list(string_to_properties(s)) == list(java_string2message_properties(s))


def test_string_to_properties_rules():
    assert string_to_properties("") == {}
    assert string_to_properties(None) == {}
    # segments shorter than 3 characters are ignored, even "a\x01" and "\x01b"
    assert string_to_properties("ab\x02a\x01\x02\x01b\x02k\x01v") == {"k": "v"}
    # empty key or empty value: skipped
    assert string_to_properties("\x01value\x02key\x01\x02x\x01y") == {"x": "y"}
    # no separator at all: skipped
    assert string_to_properties("abc\x02d\x01e") == {"d": "e"}
    # the first \x01 splits, the rest belongs to the value
    assert string_to_properties("a\x01b\x01c") == {"a": "b\x01c"}
    # stray separators at either end
    assert string_to_properties("\x02a\x01b\x02") == {"a": "b"}
    # later duplicates overwrite, keeping the first position
    parsed = string_to_properties("a\x01x\x02b\x01y\x02a\x01z")
    assert parsed == {"a": "z", "b": "y"}
    assert list(parsed) == ["a", "b"]


def test_properties_to_string_rules():
    assert properties_to_string(None) == ""
    assert properties_to_string({}) == ""
    assert properties_to_string({"a": "1"}) == "a\x011"
    assert properties_to_string({"a": None, "b": "2", "c": "3"}) == "b\x012\x02c\x013"


# -- java_string_hash -----------------------------------------------------------------------

def test_java_string_hash_known_values():
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("hello") == 99162322
    # U+1D11E is two UTF-16 code units in Java: 0xD834 0xDD1E
    assert java_string_hash("\U0001D11E") == 0xD834 * 31 + 0xDD1E == 1772394
    assert java_string_hash("a\U0001D11Eb") == ((ord("a") * 31 + 0xD834) * 31 + 0xDD1E) * 31 + ord("b")
    assert java_string_hash("é日本") == 1058960
    assert java_string_hash("polygenelubricants") == -2**31  # overflow to Integer.MIN_VALUE
    assert java_string_hash("TopicA#key-1") == -1577233006  # index keys are hashed like this


def _reference_hash(s):
    """String.hashCode by its definition: s[0]*31^(n-1) + ... over UTF-16 code units, as an int."""
    raw = s.encode("utf-16-be")
    units = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]
    h = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(max_examples=300, deadline=None)
@given(s=st.text(max_size=40))
@example(s="\U0010FFFF\U00010000")
def test_java_string_hash_over_utf16(s):
    assert java_string_hash(s) == _reference_hash(s)
    assert -2**31 <= java_string_hash(s) < 2**31


# -- consume-queue tags codes of the fixtures --------------------------------------------------

def _delay_millis(level_spec: str) -> list[int]:
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    return [int(tok[:-1]) * units[tok[-1]] for tok in level_spec.split()]


@pytest.mark.parametrize("name", PUT_FIXTURES)
def test_consume_queue_tags_codes(name):
    m = manifest(name)
    by_offset = {off: rec for off, rec in commitlog_records(name) if isinstance(rec, MessageRecord)}
    delays = _delay_millis(m["config"]["messageDelayLevel"])
    checked = 0
    for cq in m["consumeQueues"]:
        for cq_offset, phy, size, tags_code in cq["entries"]:
            rec = by_offset[phy]
            assert (rec.topic, rec.queue_id, rec.queue_offset, rec.total_size) == \
                (cq["topic"], cq["queueId"], cq_offset, size)
            props = string_to_properties(rec.properties)
            if cq["topic"] == SCHEDULE_TOPIC:
                # ScheduleMessageService#computeDeliverTimestamp: storeTimestamp + delay of the level
                level = int(props[DELAY])
                assert level == cq["queueId"] + 1
                assert tags_code == rec.store_timestamp + delays[level - 1]
            else:
                assert tags_code == (java_string_hash(props[TAGS]) if TAGS in props else 0)
            checked += 1
    assert checked > 0


# -- java.util.HashMap iteration order ---------------------------------------------------------

def test_java_hash_map_bucket_order():
    m = JavaHashMap()
    for k in "qba":  # 'q' (0x71) and 'a' (0x61) share bucket 1 of 16, 'b' is in bucket 2
        m[k] = "1"
    assert m.java_order() == ["q", "a", "b"]
    assert properties_to_string(m) == "q\x011\x02a\x011\x02b\x011"


def test_java_hash_map_resize_at_threshold():
    keys = "p a b c d e f g h i j k".split()  # 'p' (0x70) is bucket 0 of 16 but 16 of 32
    m = JavaHashMap((k, "1") for k in keys)
    assert len(m) == 12 and m.java_order() == keys  # 12 entries: still 16 buckets
    m["l"] = "1"  # the 13th entry passes the 0.75 load factor: 32 buckets
    assert m.java_order() == list("abcdefghijkl") + ["p"]
    del m["c"], m["d"]  # removal never shrinks the table
    assert m.java_order() == list("abefghijkl") + ["p"]


def test_java_hash_map_remove_and_put_goes_to_bucket_tail():
    m = JavaHashMap()
    m["q"] = m["a"] = "1"
    assert m.java_order() == ["q", "a"]
    m["q"] = "2"  # overwrite keeps the position
    assert m.java_order() == ["q", "a"]
    del m["q"]
    m["q"] = "3"  # remove + put appends to the bucket
    assert m.java_order() == ["a", "q"]


def test_java_hash_map_long_bucket_resizes_below_64():
    # nine keys in bucket 5 of 16: HashMap#treeifyBin resizes a small table instead of
    # building a tree, so Java iterates them as 32 buckets (5 and 21) with only 9 entries
    keys = ["key6", "key18", "key29", "key90", "key106", "key117", "key128", "key139", "key205"]
    m = JavaHashMap()
    for k in keys[:8]:
        m[k] = "v"
    assert m.java_order() == keys[:8]
    m[keys[8]] = "v"
    assert m.java_order() == ["key6", "key90", "key106", "key117", "key128", "key139", "key205",
                              "key18", "key29"]


def _schedule_puts():
    return [p for p in manifest("txn_delay")["puts"]
            if p["topic"] == SCHEDULE_TOPIC and p["status"] == "PUT_OK"]


@pytest.mark.parametrize("put", _schedule_puts(), ids=lambda p: f"seq{p['seq']}")
def test_delay_rewrite_properties_order(put):
    """CommitLog#asyncPutMessage re-serialises the HashMap after adding REAL_TOPIC, REAL_QID.

    The map the store sees also holds WAIT=true: the broker (SendMessageProcessor, emulated
    by the fixture harness) removes WAIT from the properties *string* it hands to the store
    but puts it back into the map afterwards -- so WAIT is missing from ``inputProperties``
    and sits after DELAY (same bucket) in the stored string.
    """
    props = string_to_properties(put["inputProperties"])
    assert WAIT not in props
    props[WAIT] = "true"
    if int(props[DELAY]) > 18:
        props[DELAY] = "18"  # clamped to the maximum level, property rewritten
    props[REAL_TOPIC] = put["inputTopic"]
    props[REAL_QID] = str(put["inputQueueId"])
    stored = put["properties"]
    assert properties_to_string(props) == stored
    # the fixture does tell Java's order from insertion order
    assert properties_to_string(dict(props)) != stored


def test_delay_rewrite_fixture_has_schedule_puts():
    puts = _schedule_puts()
    assert len(puts) == 7
    assert any(string_to_properties(p["inputProperties"])[DELAY] == "19" for p in puts)


# -- the send processor's stored properties (issue 23: the order looked up, not rebuilt per send) --------------

_send_key = st.sampled_from(["WAIT", "CLUSTER", "TRAN_MSG", "KEYS", "TAGS", "UNIQ_KEY", "DELAY", "a", "Ab", "BB"]) | _key
_segment = st.tuples(_send_key, _value).map(lambda kv: f"{kv[0]}\x01{kv[1]}") | st.text(max_size=4)


@settings(max_examples=400, deadline=None)
@given(segments=st.lists(_segment, max_size=24), cluster=st.sampled_from(["DefaultCluster", "", "c"]))
@example(segments=["KEYS\x01k", "UNIQ_KEY\x01u", "WAIT\x01true", "TAGS\x01TagA"], cluster="DefaultCluster")
@example(segments=["TRAN_MSG\x01true", "WAIT\x01false", "CLUSTER\x01other"], cluster="")
def test_the_send_processors_stored_properties_are_4_9_8s(segments, cluster):
    """4.9.8's send path: parse the client's text into a HashMap, put CLUSTER, remove WAIT, write the map back;
    the processor's looked-up key order gives the same text, twice (the second from its cache)."""
    from types import SimpleNamespace

    from rmqstore.broker.send import SendMessageProcessor

    text = "\x02".join(segments)
    reference = string_to_properties(text)
    reference["CLUSTER"] = cluster
    wait = reference.pop(WAIT, None)
    expected = (properties_to_string(reference), wait, reference.get("TRAN_MSG") == "true")
    processor = SendMessageProcessor(SimpleNamespace(config=SimpleNamespace(broker_cluster_name=cluster)))
    assert processor._properties(text) == expected
    assert processor._properties(text) == expected
