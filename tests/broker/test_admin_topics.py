"""Topics by admin request: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21).

The requests carry the header fields ``mqadmin updateTopic`` / ``deleteTopic`` send (MQClientAPIImpl's
createTopic and deleteTopicInBroker); the answers, the routes and ``config/topics.json`` are checked as
4.9.8's AdminBrokerProcessor and TopicConfigManager leave them.
"""

from __future__ import annotations

import os
import time

import pytest

from broker_support import BrokerThread, NamesrvThread, config_json, invoke_at, small_store_config
from rmqstore.broker.jsonfmt import loads
from rmqstore.common.config import BrokerRole
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqstore.files.store_paths import TOPICS_JSON
from test_broker_protocol import send_v2

pytestmark = pytest.mark.timeout(120)


def create_topic(topic: str, read: int = 8, write: int = 8, perm: int = 6, sys_flag: int = 0,
                 order: bool = False) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC as mqadmin updateTopic sends it (CreateTopicRequestHeader)."""
    return RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read), "writeQueueNums": str(write),
        "perm": str(perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": str(sys_flag),
        "order": str(order).lower()})


def delete_topic(topic: str) -> RemotingCommand:
    return RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})


def route(bt: BrokerThread, namesrv: str, topic: str) -> RemotingCommand:
    return invoke_at(bt, namesrv, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def test_update_topic_creates_persists_and_routes_at_once(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        r = bt.invoke(create_topic("AdminT", read=4, write=6, perm=6, order=True))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        # the embedded name server routes it from the next request on
        answer = route(bt, bt.namesrv, "AdminT")
        assert answer.code == ResponseCode.SUCCESS
        queue = loads(answer.body.decode())["queueDatas"][0]
        assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (4, 6, 6)
        saved = config_json(root, TOPICS_JSON)["topicConfigTable"]["AdminT"]
        # 4.9.8 keeps a topic's order flag in the name server's KV config, never from this header: false here
        assert saved == {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                         "topicName": "AdminT", "topicSysFlag": 0, "writeQueueNums": 6}
        # an update replaces the config and counts a data version
        version = config_json(root, TOPICS_JSON)["dataVersion"]["counter"]
        assert bt.invoke(create_topic("AdminT", read=2, write=2, perm=4)).code == ResponseCode.SUCCESS
        after = config_json(root, TOPICS_JSON)
        assert after["topicConfigTable"]["AdminT"]["writeQueueNums"] == 2
        assert after["topicConfigTable"]["AdminT"]["perm"] == 4
        assert after["dataVersion"]["counter"] == version + 1
    with BrokerThread(root) as bt:
        config = bt.broker.topics.select("AdminT")
        assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (2, 2, 4)


def test_update_topic_refuses_what_4_9_8_refuses(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        for topic, remark in [("TBW102", "The topic[TBW102] is conflict with system topic."),
                              ("SCHEDULE_TOPIC_XXXX", "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic."),
                              ("rmq_sys_mine", "The topic[rmq_sys_mine] is conflict with system topic."),
                              ("bad topic", "The specified topic contains illegal characters, allowing only "
                                            "^[%|a-zA-Z0-9_-]+$"),
                              ("x" * 128, "The specified topic is longer than topic max length.")]:
            r = bt.invoke(create_topic(topic))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), topic
            r = bt.invoke(delete_topic(topic))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), topic
        assert bt.broker.topics.select("rmq_sys_mine") is None


def test_a_slave_refuses_topic_changes(tmp_path):
    config = small_store_config(broker_role=BrokerRole.SLAVE, ha_master_address="127.0.0.1:1")
    with BrokerThread(tmp_path / "store", store_config=config, broker_id=1) as bt:
        for request in (create_topic("SlaveT"), delete_topic("SlaveT")):
            r = bt.invoke(request)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "Can't modify topic or subscription group "
                                                                     "from slave broker, please execute it from "
                                                                     "master broker.")
        assert bt.broker.topics.select("SlaveT") is None


def test_update_topic_registers_with_separate_name_servers_at_once(tmp_path):
    with NamesrvThread() as ns, BrokerThread(tmp_path / "store", embedded_namesrv=False, namesrv_addr=ns.address,
                                             register_period=3600) as bt:
        assert route(bt, ns.address, "RegT").code == ResponseCode.TOPIC_NOT_EXIST
        assert bt.invoke(create_topic("RegT", read=3, write=3)).code == ResponseCode.SUCCESS
        end = time.monotonic() + 20
        while time.monotonic() < end:
            answer = route(bt, ns.address, "RegT")
            if answer.code == ResponseCode.SUCCESS:
                break
            time.sleep(0.05)
        assert answer.code == ResponseCode.SUCCESS, "the registration did not follow the new topic"
        assert loads(answer.body.decode())["queueDatas"][0]["writeQueueNums"] == 3


def test_get_all_topic_config_is_the_topics_json_content(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        bt.invoke(create_topic("AllT", read=2, write=2))
        r = bt.invoke(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG))
        assert r.code == ResponseCode.SUCCESS
        body = r.body.decode()
        assert "\n" not in body and body.startswith('{"dataVersion":{"counter":')  # fastjson, not pretty
        wrapper = loads(body)
        assert wrapper == config_json(root, TOPICS_JSON)
        assert wrapper["topicConfigTable"]["AllT"]["readQueueNums"] == 2


def _send(bt, topic, n):
    client = bt.client()
    try:
        for i in range(n):
            r = bt.call(client.invoke(send_v2(topic, f"m{i}".encode(), i % 2)))
            assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        bt.call(client.close())


def test_delete_topic_removes_config_and_consume_queues_keeps_offsets(tmp_path):
    """4.9.8's deleteTopic, the broker's part: the config goes (persisted), the topic's consume queues are
    destroyed with their files and next queue offsets (cleanUnusedTopic), a group's committed offsets stay.  The
    route is the name server's to drop (DELETE_TOPIC_IN_NAMESRV, the other half of mqadmin deleteTopic)."""
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        assert bt.invoke(create_topic("DelT", read=2, write=2)).code == ResponseCode.SUCCESS
        _send(bt, "DelT", 6)
        store = bt.broker.store
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("DelT", 0) == 3
        bt.broker.offsets.commit_offset("test", "G1", "DelT", 0, 2)
        bt.broker.offsets.persist()
        cq_dir = os.path.join(str(root), "consumequeue", "DelT")
        assert os.path.isdir(cq_dir)
        r = bt.invoke(delete_topic("DelT"))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert bt.broker.topics.select("DelT") is None
        assert "DelT" not in config_json(root, TOPICS_JSON)["topicConfigTable"]
        assert not os.path.exists(os.path.join(cq_dir, "0")) and not os.path.exists(os.path.join(cq_dir, "1"))
        assert store.get_max_offset_in_queue("DelT", 0) == 0
        assert bt.broker.offsets.query_offset("G1", "DelT", 0) == 2
        # deleting again: nothing to delete, still SUCCESS (4.9.8 logs a warning)
        assert bt.invoke(delete_topic("DelT")).code == ResponseCode.SUCCESS
        # created again, its queues start over at offset 0
        assert bt.invoke(create_topic("DelT", read=2, write=2)).code == ResponseCode.SUCCESS
        _send(bt, "DelT", 2)
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("DelT", 0) == 1
    with BrokerThread(root) as bt:
        assert bt.broker.store.get_max_offset_in_queue("DelT", 0) == 1
        assert bt.broker.store.get_max_offset_in_queue("DelT", 1) == 1


def test_the_system_topics_are_created_as_4_9_8_creates_them(tmp_path):
    """The cluster's and the broker's own topic: INHERIT, with READ and WRITE while clusterTopicEnable /
    brokerTopicEnable (TopicConfigManager's constructor) -- as the interop tier's topics.json comparison found."""
    with BrokerThread(tmp_path / "on") as bt:
        table = bt.broker.topics.table
        assert (table["DefaultCluster"].perm, table["DefaultCluster"].write_queue_nums) == (7, 16)
        assert (table["broker-a"].perm, table["broker-a"].write_queue_nums) == (7, 1)
    with BrokerThread(tmp_path / "off", cluster_topic_enable=False, broker_topic_enable=False) as bt:
        table = bt.broker.topics.table
        assert table["DefaultCluster"].perm == table["broker-a"].perm == 1
