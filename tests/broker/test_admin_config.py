"""The broker's configuration by admin request: GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25), as
``mqadmin getBrokerConfig`` / ``updateBrokerConfig`` send them, against 4.9.8's Configuration: every key of its
four config classes answered, a change taken at once where the broker reads the value per request, persisted to
the broker.conf the broker started with (else ``<store>/config/broker.properties``), black-listed keys refused."""

from __future__ import annotations

import json
import os

import pytest

from broker_support import BrokerThread
from rmqstore.broker.config import load_broker_conf, parse_properties_text
from rmqstore.broker.config_defaults import rocketmq_defaults
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode
from test_broker_protocol import pull, send_v2

pytestmark = pytest.mark.timeout(120)


def get_config(bt: BrokerThread) -> tuple[dict, dict]:
    """(the properties answered, the data version in the header)."""
    r = bt.invoke(RemotingCommand(RequestCode.GET_BROKER_CONFIG))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return parse_properties_text(r.body.decode("utf-8")), json.loads(r.ext_fields["version"])


def update_config(bt: BrokerThread, **props: str) -> RemotingCommand:
    """UPDATE_BROKER_CONFIG: the body MixAll.properties2String writes, key=value lines."""
    body = "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")
    return bt.invoke(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=body))


def test_get_broker_config_answers_every_4_9_8_key_with_this_brokers_values(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        props, version = get_config(bt)
        assert version["counter"] == 0 and version["timestamp"] > 0
        machine = {"brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "brokerName": "broker-a",
                   "storePathRootDir": str(root)}
        assert set(rocketmq_defaults()) | set(machine) <= set(props)
        assert {k: props[k] for k in machine} == machine
        assert props["listenPort"] == str(bt.port)
        # keys rmqstore implements show its values, the others 4.9.8's defaults on this machine
        assert props["mappedFileSizeCommitLog"] == str(1 << 20)  # broker_support's small store
        assert props["flushDiskType"] == "ASYNC_FLUSH" and props["brokerRole"] == "ASYNC_MASTER"
        assert props["deleteWhen"] == "04" and props["enableDLegerCommitLog"] == "false"
        assert props["pullMessageThreadPoolNums"] == rocketmq_defaults()["pullMessageThreadPoolNums"]
        # and rmqstore's own keys beside them
        assert props["maxConnections"] == "1024" and props["serverFrameTimeoutSeconds"] == "30"
        assert "brokerConfigPath" not in props and "rocketmqHome" not in props
        assert "namesrvAddr" not in props and "haMasterAddress" not in props  # null in 4.9.8 until set


def test_update_broker_config_takes_effect_and_persists_in_the_brokers_conf(tmp_path):
    root, conf = tmp_path / "store", tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\n# a comment the rewrite does not keep\ndeleteWhen=03\n", encoding="utf-8")
    started_with, _, unused = load_broker_conf(conf.read_text(encoding="utf-8"))
    assert unused == ["deleteWhen"] and started_with.properties == {"deleteWhen": "03"}
    with BrokerThread(root, broker_config_path=str(conf), properties=started_with.properties) as bt:
        assert bt.invoke(send_v2("PermT", b"before")).code == ResponseCode.SUCCESS
        r = update_config(bt, brokerPermission="4")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        # read per request: the next send is refused
        r = bt.invoke(send_v2("PermT", b"after"))
        assert r.code == ResponseCode.NO_PERMISSION
        assert update_config(bt, autoCreateSubscriptionGroup="false", fileReservedTime="48").code == 0
        request = pull("PermT", 0, 0)
        request.ext_fields["consumerGroup"] = "BrandNewGroup"
        assert bt.invoke(request).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        props, version = get_config(bt)
        assert version["counter"] == 2
        assert (props["brokerPermission"], props["autoCreateSubscriptionGroup"]) == ("4", "false")
        assert props["fileReservedTime"] == "48"  # a 4.9.8 key rmqstore does not use: kept and shown all the same
        # 4.9.8 rewrites the whole configuration into the file the broker was started with
        saved = parse_properties_text(conf.read_text(encoding="utf-8"))
        assert saved == props
        assert saved["deleteWhen"] == "03"  # broker.conf's own value of a key rmqstore does not use
    broker_config, store_config, unknown = load_broker_conf(conf.read_text(encoding="utf-8"))
    assert (broker_config.broker_permission, broker_config.auto_create_subscription_group) == (4, False)
    assert broker_config.properties["fileReservedTime"] == "48"
    assert unknown == ["deleteWhen", "fileReservedTime"]  # 4.9.8's keys off their defaults: "not used"
    with BrokerThread(root, broker_config_path=str(conf), broker_permission=broker_config.broker_permission,
                      properties=broker_config.properties) as bt:
        props, _ = get_config(bt)
        assert (props["brokerPermission"], props["fileReservedTime"], props["deleteWhen"]) == ("4", "48", "03")


def test_update_broker_config_without_a_conf_persists_in_the_store(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        assert update_config(bt, longPollingEnable="false").code == ResponseCode.SUCCESS
        assert bt.broker.config.long_polling_enable is False
    saved = parse_properties_text((root / "config" / "broker.properties").read_text(encoding="utf-8"))
    assert saved["longPollingEnable"] == "false" and saved["brokerName"] == "broker-a"


def test_update_broker_config_refuses_the_black_list_and_ignores_what_4_9_8_ignores(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        for key in ("brokerConfigPath", "rocketmqHome", "configBlackList"):
            r = update_config(bt, **{key: "x", "brokerPermission": "2"})
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        assert bt.broker.config.broker_permission == 6
        # a key no config class has is not added; a value of the wrong type leaves the value as it was
        assert update_config(bt, noSuchKey="1", brokerPermission="many", shortPollingTimeMills="250").code == 0
        props, version = get_config(bt)
        assert "noSuchKey" not in props and props["brokerPermission"] == "6"
        assert props["shortPollingTimeMills"] == "250" and bt.broker.config.short_polling_time_mills == 250
        assert version["counter"] == 1
        # the black list is itself configuration: a key added to it is refused from then on
        assert update_config(bt, deleteWhen="05").code == ResponseCode.SUCCESS
    with BrokerThread(tmp_path / "store2", properties={"configBlackList": "configBlackList;brokerConfigPath;deleteWhen"}
                      ) as bt:
        r = update_config(bt, deleteWhen="05")
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")


def test_a_conf_of_every_key_at_its_default_warns_of_none(tmp_path):
    text = "".join(f"{k}={v}\n" for k, v in sorted(rocketmq_defaults().items()))
    broker_config, store_config, unknown = load_broker_conf(text + "checkCRCOnRecover=false\nmapedFileSizeCommitLog=4096\n")
    assert unknown == []
    assert store_config.check_crc_on_recover is False and store_config.mapped_file_size_commit_log == 4096


def test_the_cli_hands_its_conf_path_to_the_broker(tmp_path):
    import argparse
    from rmqstore.broker.cli import _configs

    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'store'}\n", encoding="utf-8")
    args = argparse.Namespace(config=str(conf), listen=None, namesrv=None, role=None, ha_master=None,
                              ha_listen=None, acl=None, store=None)
    root, broker_config, *_ = _configs(args)
    assert broker_config.broker_config_path == os.path.abspath(conf)


def test_a_conf_that_cannot_be_written_keeps_the_update_in_effect(tmp_path):
    """As 4.9.8's Configuration.persist: the failure is logged, the new value is in effect, the answer SUCCESS."""
    conf = tmp_path / "missing-folder" / "broker.conf"  # a file under a path that is a file: not writable
    (tmp_path / "missing-folder").write_text("not a folder", encoding="utf-8")
    with BrokerThread(tmp_path / "store", broker_config_path=str(conf)) as bt:
        r = update_config(bt, shortPollingTimeMills="300")
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        assert bt.broker.config.short_polling_time_mills == 300
