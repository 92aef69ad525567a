"""Subscription groups by admin request: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), DELETE_SUBSCRIPTIONGROUP (207),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), with the bodies and headers ``mqadmin updateSubGroup`` / ``deleteSubGroup``
send, checked against 4.9.8's SubscriptionGroupManager and ConsumerOffsetManager.removeOffset."""

from __future__ import annotations

import pytest

from broker_support import BrokerThread, config_json, small_store_config
from rmqstore.broker.jsonfmt import dumps, loads
from rmqstore.common.config import BrokerRole
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqstore.files.store_paths import SUBSCRIPTION_GROUP_JSON
from test_broker_protocol import pull, send_v2

pytestmark = pytest.mark.timeout(120)

#: what `mqadmin updateSubGroup -g GroupA -r 5 -s false` sends: fastjson of its SubscriptionGroupConfig
GROUP_A = {"brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": False, "consumeFromMinEnable": False,
           "groupName": "GroupA", "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 5, "retryQueueNums": 1,
           "whichBrokerWhenConsumeSlowly": 1}


def update_group(config: dict) -> RemotingCommand:
    return RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=dumps(config).encode())


def delete_group(group: str, remove_offset: bool) -> RemotingCommand:
    return RemotingCommand(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                           {"groupName": group, "removeOffset": str(remove_offset).lower()})


def test_update_sub_group_persists_takes_effect_and_survives_a_restart(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        version = config_json(root, SUBSCRIPTION_GROUP_JSON)["dataVersion"]["counter"]
        r = bt.invoke(update_group(GROUP_A))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        saved = config_json(root, SUBSCRIPTION_GROUP_JSON)
        assert saved["subscriptionGroupTable"]["GroupA"] == GROUP_A
        assert saved["dataVersion"]["counter"] == version + 1
        # consumeEnable=false: the group's pulls are refused from now on
        assert bt.invoke(send_v2("GroupT", b"x")).code == ResponseCode.SUCCESS
        request = pull("GroupT", 0, 0)
        request.ext_fields["consumerGroup"] = "GroupA"
        r = bt.invoke(request)
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, GroupA")
        # GET_ALL_SUBSCRIPTIONGROUP_CONFIG: SubscriptionGroupWrapper, the file's content in fastjson's compact form
        r = bt.invoke(RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        assert r.code == ResponseCode.SUCCESS and "\n" not in r.body.decode()
        assert loads(r.body.decode()) == config_json(root, SUBSCRIPTION_GROUP_JSON)
        assert "TOOLS_CONSUMER" in loads(r.body.decode())["subscriptionGroupTable"]
    with BrokerThread(root) as bt:
        config = bt.broker.groups.table["GroupA"]
        assert (config.retry_max_times, config.consume_enable, config.consume_broadcast_enable) == (5, False, False)


def test_update_sub_group_refuses_a_body_that_is_no_group(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        for body in (b"", b"not json", b"[1,2]", dumps({"retryMaxTimes": 3}).encode(),
                     dumps(dict(GROUP_A, retryMaxTimes="many")).encode()):
            r = bt.invoke(RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body))
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark, body
        assert "GroupA" not in bt.broker.groups.table


def test_delete_sub_group_with_and_without_its_offsets(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        offsets = bt.broker.offsets
        for group in ("GroupA", "GroupB", "XGroupA"):
            assert bt.invoke(update_group(dict(GROUP_A, groupName=group))).code == ResponseCode.SUCCESS
            for topic in ("T1", "T2"):
                offsets.commit_offset("test", group, topic, 0, 7)
        r = bt.invoke(delete_group("GroupA", True))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert "GroupA" not in bt.broker.groups.table and "GroupA" not in config_json(root, SUBSCRIPTION_GROUP_JSON)["subscriptionGroupTable"]
        # removeOffset: every topic@GroupA goes, a group whose name merely contains it stays
        assert offsets.query_offset("GroupA", "T1", 0) == offsets.query_offset("GroupA", "T2", 0) == -1
        assert offsets.query_offset("XGroupA", "T1", 0) == 7
        assert bt.invoke(delete_group("GroupB", False)).code == ResponseCode.SUCCESS
        assert "GroupB" not in bt.broker.groups.table
        assert offsets.query_offset("GroupB", "T1", 0) == 7
        # nothing to delete is no error (4.9.8 logs a warning)
        assert bt.invoke(delete_group("Nobody", True)).code == ResponseCode.SUCCESS
    with BrokerThread(root) as bt:
        assert {"GroupA", "GroupB"}.isdisjoint(bt.broker.groups.table) and "XGroupA" in bt.broker.groups.table
        assert bt.broker.offsets.query_offset("GroupA", "T1", 0) == -1
        assert bt.broker.offsets.query_offset("GroupB", "T1", 0) == 7


def test_a_slave_refuses_group_changes(tmp_path):
    config = small_store_config(broker_role=BrokerRole.SLAVE, ha_master_address="127.0.0.1:1")
    with BrokerThread(tmp_path / "store", store_config=config, broker_id=1) as bt:
        for request in (update_group(GROUP_A), delete_group("TOOLS_CONSUMER", True)):
            r = bt.invoke(request)
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith("Can't modify topic or subscription")
        assert "GroupA" not in bt.broker.groups.table and "TOOLS_CONSUMER" in bt.broker.groups.table


def test_the_system_groups_are_4_9_8s(tmp_path):
    """SubscriptionGroupManager.init's seven groups, and no other (the interop tier's comparison found an eighth)."""
    with BrokerThread(tmp_path / "store") as bt:
        assert set(bt.broker.groups.table) == {"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP",
                                               "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION",
                                               "CID_ONSAPI_OWNER"}
