"""rmqstore.admin's body parsers against what a Java 4.9.8 name server and broker sent (tests/fixtures/admin, recorded
by tests/interop/record_admin_bodies.py; see its README.md), and against the fastjson text quirks on their own:
unquoted integer map keys, MessageQueue objects as map keys, text that only looks like them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rmqstore.admin import bodies
from rmqstore.admin.stored import MessageView
from rmqstore.broker.message_queue import MessageQueue

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "admin"
RECORDED = json.loads((FIXTURES / "responses.json").read_text(encoding="utf-8"))
RUN = RECORDED["run"]


def body(name: str) -> bytes:
    return (FIXTURES / f"{name}.body").read_bytes()


# -- fastjson text ---------------------------------------------------------------------------------------------

def test_object_keys_become_message_queues():
    text = '{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:5,{"brokerName":"b","queueId":0,"topic":"T"}:7}}'
    assert bodies.parse_fastjson(text) == {"offsetTable": {MessageQueue("T", "b", 3): 5, MessageQueue("T", "b", 0): 7}}


def test_unquoted_integer_keys_parse_as_the_quoted_ones():
    assert bodies.parse_fastjson('{"brokerAddrs":{0:"a:1",-1:"b:2"}}') == {"brokerAddrs": {"0": "a:1", "-1": "b:2"}}
    assert bodies.parse_fastjson(body("route_fastjson")) == bodies.parse_fastjson(body("route_standard"))


def test_objects_that_are_values_stay_values():
    text = '{"a":[{"x":1},{"y":{"z":2}}],"s":"}:{\\"k\\":1}:","n":{}}'
    assert bodies.parse_fastjson(text) == {"a": [{"x": 1}, {"y": {"z": 2}}], "s": '}:{"k":1}:', "n": {}}


@pytest.mark.parametrize("text", ['{"a":', '{{"brokerName":"b","queueId":0,"topic":"T"}:}', '}{', '{"a":1}}', "",
                                  '{{"queueId":0}:1}', b"\xff\xfe"])
def test_text_that_is_no_body_is_refused_with_a_value_error(text):
    with pytest.raises(ValueError):
        bodies.parse_fastjson(text)


# -- the name server's answers ---------------------------------------------------------------------------------

def test_cluster_info():
    info = bodies.decode_cluster_info(body("cluster_info"))
    (broker,) = info.brokers
    assert (broker.cluster, broker.broker_name, broker.broker_id, broker.address) == (
        "DefaultCluster", "broker-a", 0, RUN["broker"])
    assert info.clusters == {"DefaultCluster": ["broker-a"]}
    assert info.master_addresses("DefaultCluster") == [RUN["broker"]] and info.master_addresses("Other") == []


def test_topic_list():
    topics = bodies.decode_topic_list(body("topic_list")).topics
    assert {"AdminT", "AdminDelay", "AdminbClientT", "%RETRY%CG_admin", "TBW102"} <= set(topics)
    assert topics == json.loads(body("topic_list"))["topicList"]  # the name server's order


@pytest.mark.parametrize("name", ["route_fastjson", "route_standard"])
def test_topic_route_in_both_forms(name):
    route = bodies.decode_topic_route("AdminT", body(name))
    (broker,) = route.brokers
    assert (broker.cluster, broker.broker_name, broker.broker_addrs) == ("DefaultCluster", "broker-a",
                                                                         {0: RUN["broker"]})
    (queues,) = route.queues
    assert (queues.broker_name, queues.read_queue_nums, queues.write_queue_nums, queues.perm) == ("broker-a", 4, 4, 6)
    assert route.broker_addresses() == [RUN["broker"]] and route.order_topic_conf is None


# -- the broker's answers --------------------------------------------------------------------------------------

def test_topic_stats_per_queue_in_queue_order():
    queues = bodies.decode_topic_stats(body("topic_stats"))
    # AdminTraffic: message i to queue i % 4 for 10 messages, then 3 more to queues 0, 1, 2
    assert [(q.topic, q.broker_name, q.queue_id, q.min_offset, q.max_offset) for q in queues] == [
        ("AdminT", "broker-a", 0, 0, 4), ("AdminT", "broker-a", 1, 0, 4), ("AdminT", "broker-a", 2, 0, 3),
        ("AdminT", "broker-a", 3, 0, 2)]
    stamps = {int(q): int(t) for q, t in re.findall(rb'"queueId":(\d),"topic":"AdminT"}:\{"lastUpdateTimestamp":(\d+)',
                                                    body("topic_stats"))}
    assert {q.queue_id: q.last_update_timestamp for q in queues} == stamps


def test_consume_stats_lag_per_queue():
    progress = bodies.decode_consume_stats("CG_admin", body("consume_stats"))
    rows = {(q.topic, q.queue_id): (q.broker_offset, q.consumer_offset, q.lag) for q in progress.queues}
    assert rows == {("AdminT", 0): (4, 3, 1), ("AdminT", 1): (4, 3, 1), ("AdminT", 2): (3, 2, 1),
                    ("AdminT", 3): (2, 2, 0), ("%RETRY%CG_admin", 0): (0, 0, 0)}
    assert progress.diff_total == 3 and progress.group == "CG_admin"
    assert progress.consume_tps == float(re.search(rb'"consumeTps":([-0-9.E]+)', body("consume_stats"))[1])
    retry = next(q for q in progress.queues if q.topic.startswith("%RETRY%"))
    assert retry.last_timestamp == 0 and all(q.last_timestamp > 0 for q in progress.queues if q.consumer_offset)
    assert [(q.topic, q.queue_id) for q in progress.queues] == sorted((q.topic, q.queue_id) for q in progress.queues)


def test_broker_consume_stats_of_every_group():
    stats = bodies.decode_consume_stats_list(body("broker_consume_stats"))
    assert stats.address == RUN["broker"] and stats.total_diff == 3
    assert stats.groups["CG_admin"].diff_total == 3 and stats.groups["CG_adminb"].diff_total == 0
    assert {q.topic for q in stats.groups["CG_adminb"].queues} == {"AdminbClientT", "%RETRY%CG_adminb"}
    assert stats.groups["TOOLS_CONSUMER"].queues == []  # a group with no offsets is listed, empty
    assert sum(q.consumer_offset for q in stats.groups["CG_adminb"].queues) == 10


def test_consumer_connection():
    cc = bodies.decode_consumer_connection("CG_adminb", body("consumer_connection"))
    (conn,) = cc.connections
    assert conn.client_id.endswith("@java") and (conn.language, conn.version, conn.version_desc) == (
        "JAVA", 409, "V4_9_8")
    assert re.fullmatch(r"127\.0\.0\.1:\d+", conn.client_addr)
    subs = {s.topic: s for s in cc.subscriptions}
    assert subs["AdminbClientT"].sub_string == "TagA || TagB" and subs["AdminbClientT"].tags_set == ("TagA", "TagB")
    assert subs["%RETRY%CG_adminb"].sub_string == "*"
    assert (cc.consume_type, cc.message_model, cc.consume_from_where) == ("CONSUME_PASSIVELY", "CLUSTERING",
                                                                           "CONSUME_FROM_FIRST_OFFSET")


def test_producer_connection():
    pc = bodies.decode_producer_connection("PG_adminb", body("producer_connection"))
    assert [(c.language, c.version_desc) for c in pc.connections] == [("JAVA", "V4_9_8")]


def test_runtime_info_with_typed_figures():
    info = bodies.decode_runtime_info(RUN["broker"], body("runtime_info"))
    table = json.loads(body("runtime_info"))["table"]
    assert info.table == table
    assert info.version_desc == "V4_9_8" and info.commit_log_max_offset == int(table["commitLogMaxOffset"]) > 0
    assert info.put_tps == float(table["putTps"].split()[0])
    assert info.get_transferred_tps == float(table["getTransferedTps"].split()[0])
    assert info.msg_put_total_today_now == int(table["msgPutTotalTodayNow"]) and info.boot_timestamp > 0


def test_broker_config_properties():
    config = bodies.decode_broker_config(RUN["broker"], body("broker_config"),
                                         RECORDED["responses"]["broker_config"]["response"]["extFields"])
    assert config.properties["brokerName"] == "broker-a" and config.properties["autoCreateTopicEnable"] == "true"
    assert config.store_path_root_dir.endswith("/broker/store") and config.data_version["counter"] == 0
    assert len(config.properties) == body("broker_config").decode().count("\n")


def test_topic_configs():
    topics = bodies.decode_topic_configs(RUN["broker"], body("topic_config"))
    admin_t = topics.topics["AdminT"]
    assert (admin_t.read_queue_nums, admin_t.write_queue_nums, admin_t.perm, admin_t.order) == (4, 4, 6, False)
    assert topics.topics["TBW102"].perm == 7 and topics.data_version["counter"] == 5


def test_subscription_groups():
    groups = bodies.decode_subscription_groups(RUN["broker"], body("subscription_groups"))
    assert {"CG_admin", "CG_adminb", "TOOLS_CONSUMER"} <= set(groups.groups)
    g = groups.groups["CG_admin"]
    assert (g.retry_max_times, g.retry_queue_nums, g.consume_enable, g.which_broker_when_consume_slowly) == (
        16, 1, True, 1)


def test_group_list_and_reset_offsets():
    assert bodies.decode_group_list(body("consume_by_who")) == ["CG_admin"]
    assert bodies.decode_reset_offsets(body("reset_offset")) == {("broker-a", q): 0 for q in range(4)}


def test_view_message_is_the_first_message_of_the_traffic():
    (msg,) = bodies.decode_messages(body("view_message"))
    assert isinstance(msg, MessageView)
    assert msg.offset_msg_id == RUN["first_offset_msg_id"] and msg.commit_log_offset == 0
    assert (msg.topic, msg.tags, msg.keys, msg.queue_id, msg.queue_offset, msg.body) == (
        "AdminT", "tagA", "key0", 0, 0, b"admin 0")
    assert msg.msg_id == msg.properties["UNIQ_KEY"] != msg.offset_msg_id
    assert msg.store_host == RUN["broker"] and msg.store_timestamp >= msg.born_timestamp > 0


def test_query_message_by_key():
    (msg,) = bodies.decode_messages(body("query_message"))
    assert (msg.keys, msg.queue_id, msg.queue_offset, msg.body) == ("key3", 3, 0, b"admin 3")


def test_a_truncated_record_is_refused():
    with pytest.raises(ValueError, match="record"):
        bodies.decode_messages(body("view_message")[:-5])


@pytest.mark.parametrize("decode, text", [
    (bodies.decode_cluster_info, '{"brokerAddrTable":{"b":{"brokerAddrs":{"x":"a:1"},"brokerName":"b"}}}'),
    (bodies.decode_topic_list, '{"topicList":"T"}'),
    (bodies.decode_topic_stats, '{"offsetTable":{"T":{"minOffset":0}}}'),
    (bodies.decode_group_list, '[1, 2]'),
    (bodies.decode_reset_offsets, '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"x"}}'),
])
def test_a_body_of_the_wrong_shape_is_a_value_error_naming_what(decode, text):
    with pytest.raises(ValueError) as info:
        decode(text.encode())
    assert str(info.value)


# -- the package's faces ----------------------------------------------------------------------------------------

def test_the_blocking_admin_offers_every_call_of_the_async_one():
    import inspect

    from rmqstore.admin import Admin, AsyncAdmin
    from rmqstore.admin.client import AdminClient

    core = {name for name, _ in inspect.getmembers(AdminClient, inspect.iscoroutinefunction)}
    calls = {name for name, f in inspect.getmembers(AsyncAdmin, inspect.iscoroutinefunction)
             if not name.startswith("_") and name not in core}
    offered = {name for name in dir(Admin) if callable(getattr(Admin, name, None)) and not name.startswith("_")}
    assert calls <= offered, calls - offered
    assert inspect.signature(Admin.topic_status).parameters.keys() == {"self", "topic"}
    assert Admin.consumer_progress.__doc__ == AsyncAdmin.consumer_progress.__doc__


def test_results_are_tables_without_pandas_until_asked(monkeypatch):
    import subprocess
    import sys

    code = ("import sys; from rmqstore.admin import bodies; "
            f"bodies.decode_topic_stats(open({str(FIXTURES / 'topic_stats.body')!r}, 'rb').read()); "
            "import rmqstore.admin; assert 'pandas' not in sys.modules, 'pandas was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    stats = bodies.decode_topic_stats(body("topic_stats"))
    from rmqstore.admin import TopicStatus

    frame = TopicStatus("AdminT", stats).to_pandas()
    assert list(frame["queue_id"]) == [0, 1, 2, 3] and list(frame.columns) == list(TopicStatus.columns)
