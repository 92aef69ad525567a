"""The broker with RocketMQ 4.9.8's plain ACL (issue 20, finding 10): on the wire, from the command line,
and (test_broker_acl_cpp.py) with the official C++ client (PyPI ``rocketmq``, session credentials).

Done means 2: right keys send and consume; a wrong secret, missing credentials, a topic the account
may not publish to and a non-white address are each refused with 4.9.8's code (SYSTEM_ERROR, an
AclException remark naming what was missing); a refused send stores nothing; ACL off installs
nothing.  The Java client and the Java broker: tests/interop/test_acl_java.py.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker_support import BrokerThread
from conftest import run_cli
from rmqstore.broker.acl import sign_request
from rmqstore.format.record import MessageRecord
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqstore.read.scan import scan_commitlog
from test_acl import SHIPPED
from test_broker_protocol import pull, send_v2

pytestmark = pytest.mark.timeout(180)

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "

# RocketMQ's shipped plain_acl.yml, with one global white address (10.10.103.* unless a test says)
RULES = SHIPPED.replace("  - 10.10.103.*\n  - 192.168.0.*\n", "  - {white}\n")
assert "{white}" in RULES


def write_rules(folder: Path, white: str = "10.10.103.*") -> Path:
    path = folder / "plain_acl.yml"
    path.write_text(RULES.format(white=white), encoding="utf-8")
    return path


def _records(root, topic: str) -> list[MessageRecord]:
    if not os.path.isdir(os.path.join(root, "commitlog")):  # nothing was ever stored
        return []
    return [r for _, r in scan_commitlog(root) if isinstance(r, MessageRecord) and r.topic == topic]


def _signed(cmd: RemotingCommand, secret: str = "12345678", access_key: str = "RocketMQ") -> RemotingCommand:
    sign_request(cmd, access_key, secret)
    return cmd


def acl_broker_thread(folder: Path, white: str = "10.10.103.*") -> BrokerThread:
    """A broker with ACL on, its rules in ``folder/plain_acl.yml`` (looked at again at every request)."""
    bt = BrokerThread(folder / "store", acl_enable=True, acl_file=str(write_rules(folder, white)))
    bt.broker.acl.manager.watch_interval = 0.0
    return bt


@pytest.fixture
def acl_broker(tmp_path):
    with acl_broker_thread(tmp_path) as bt:
        yield bt


# --- on the wire ----------------------------------------------------------------------------------
def test_acl_off_installs_no_hook_at_all(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        assert bt.broker.acl is None and bt.broker.server.rpc_hooks == []


def test_signed_requests_pass_and_refusals_name_what_was_missing(acl_broker):
    client = acl_broker.client()
    try:
        def ask(cmd):
            return acl_broker.call(client.invoke(cmd))

        ok = ask(_signed(send_v2("topicB", b"signed")))
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        for cmd, missing in [
            (_signed(send_v2("topicB", b"wrong secret"), secret="wrongwrong"),
             "Check signature failed for accessKey=RocketMQ"),
            (send_v2("topicB", b"no credentials"), "No accessKey is configured"),
            (_signed(send_v2("topicB", b"unknown key"), access_key="Nobody1"), "No acl config for Nobody1"),
            (_signed(send_v2("topicA", b"denied topic")), "No default permission for topic:topicA"),
            (_signed(send_v2("topicC", b"sub-only topic")), "No default permission for topic:topicC"),
            (_signed(send_v2("topicZ", b"default deny")), "No default permission for topic:topicZ"),
            (_signed(pull("topicC", 0, 0)), None),
        ]:
            answer = ask(cmd)
            if missing is None:
                assert answer.remark is None or ACL_EXCEPTION not in answer.remark
                continue
            assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, ACL_EXCEPTION + missing)
        denied_group = pull("topicC", 0, 0)
        denied_group.ext_fields["consumerGroup"] = "groupA"
        answer = ask(_signed(denied_group))
        assert answer.remark == ACL_EXCEPTION + "No default permission for group:groupA"
        create = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "NewTopic"})
        assert ask(_signed(create)).remark == \
            ACL_EXCEPTION + "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    finally:
        acl_broker.call(client.close())
    root = acl_broker.broker.store_root
    acl_broker.stop()
    assert [r.body for r in _records(root, "topicB")] == [b"signed"]  # a refused send stores nothing
    assert _records(root, "topicA") == [] and _records(root, "topicC") == [] and _records(root, "topicZ") == []


def test_a_batch_needs_pub_on_its_topic_unlike_4_9_8(acl_broker):
    from rmqstore.broker.batch import encode_batch_body
    client = acl_broker.client()
    try:
        batch = send_v2("topicA", encode_batch_body([(b"b0", "", 0)]), code=RequestCode.SEND_BATCH_MESSAGE)
        answer = acl_broker.call(client.invoke(_signed(batch)))
        assert answer.remark == ACL_EXCEPTION + "No default permission for topic:topicA"
    finally:
        acl_broker.call(client.close())


def test_the_name_server_has_no_acl(acl_broker):
    from rmqstore.remoting import RemotingClient
    host, port = acl_broker.namesrv.rsplit(":", 1)
    broker_client = acl_broker.client()
    client = acl_broker.call(RemotingClient().connect(host, int(port)))
    try:
        assert acl_broker.call(broker_client.invoke(_signed(send_v2("topicB", b"makes the topic")))).code == 0
        ask = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicB"})  # no credentials
        route = acl_broker.call(client.invoke(ask))
        assert route.code == ResponseCode.SUCCESS, route.remark
    finally:
        acl_broker.call(client.close())
        acl_broker.call(broker_client.close())


def test_a_white_address_needs_no_credentials_and_the_file_is_reloaded(tmp_path, caplog):
    rules = tmp_path / "plain_acl.yml"
    with acl_broker_thread(tmp_path) as bt:
        client = bt.client()
        try:
            answer = bt.call(client.invoke(send_v2("topicA", b"from a non-white address")))
            assert answer.remark == ACL_EXCEPTION + "No accessKey is configured"
            write_rules(tmp_path, white="127.0.0.*")
            os.utime(rules, ns=(time.time_ns() + 10**9,) * 2)
            answer = bt.call(client.invoke(send_v2("topicA", b"from a white address")))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            rules.write_text("accounts: [\n", encoding="utf-8")
            os.utime(rules, ns=(time.time_ns() + 2 * 10**9,) * 2)
            answer = bt.call(client.invoke(send_v2("topicA", b"old rules kept")))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        finally:
            bt.call(client.close())
    assert any(str(rules) in r.getMessage() and "keeping the rules" in r.getMessage() for r in caplog.records)


# --- the command line ------------------------------------------------------------------------------
def _conf(folder: Path, extra: str = "") -> Path:
    conf = folder / "broker.conf"
    conf.write_text(f"brokerName=broker-acl\nstorePathRootDir={folder / 'store'}\naclEnable=true\n{extra}")
    return conf


def test_the_cli_reads_plain_acl_yml_beside_broker_conf_or_acl_file(tmp_path):
    import argparse

    from rmqstore.broker.cli import _configs, add_broker_parser
    parser = argparse.ArgumentParser()
    add_broker_parser(parser.add_subparsers())
    conf = _conf(tmp_path)
    _, broker_config, *_ = _configs(parser.parse_args(["broker", "--config", str(conf)]))
    assert broker_config.acl_enable and broker_config.acl_file == str(tmp_path / "plain_acl.yml")
    other = tmp_path / "other.yml"
    _, broker_config, *_ = _configs(parser.parse_args(["broker", str(tmp_path / "s"), "--acl", str(other)]))
    assert broker_config.acl_enable and broker_config.acl_file == str(other)  # --acl turns ACL on
    _, broker_config, *_ = _configs(parser.parse_args(["broker", str(tmp_path / "s")]))
    assert not broker_config.acl_enable


@pytest.mark.parametrize("how", ["beside broker.conf", "--acl"])
def test_a_malformed_rules_file_stops_the_broker_naming_the_file_and_the_problem(tmp_path, how):
    rules = tmp_path / "plain_acl.yml"
    rules.write_text("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [topicA=PUBLISH]\n")
    argv = ["broker", "--config", _conf(tmp_path), "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"]
    if how == "--acl":
        argv = ["broker", tmp_path / "store", "--acl", rules, "--listen", "127.0.0.1:0", "--no-namesrv"]
    code, out, err = run_cli(argv)
    assert code != 0 and str(rules) in err and "PUBLISH" in err, err
    assert not (tmp_path / "store" / "commitlog").exists()  # refused before the store was touched


def test_acl_enabled_without_a_rules_file_is_an_error_naming_it(tmp_path):
    code, out, err = run_cli(["broker", "--config", _conf(tmp_path), "--listen", "127.0.0.1:0", "--no-namesrv"])
    assert code != 0 and str(tmp_path / "plain_acl.yml") in err, err
