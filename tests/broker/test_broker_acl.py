"""The broker with RocketMQ 4.9.8's plain ACL (issue 20, finding 10): on the wire, from the command line,
and with the official C++ client (PyPI ``rocketmq``, session credentials).

Done means 2: right keys send and consume; a wrong secret, missing credentials, a topic the account
may not publish to and a non-white address are each refused with 4.9.8's code (SYSTEM_ERROR, an
AclException remark naming what was missing); a refused send stores nothing; ACL off installs
nothing.  The Java client and the Java broker: tests/interop/test_acl_java.py.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pytest

from broker_support import BrokerThread
from conftest import run_cli
from rmqstore.broker.acl import sign_request
from rmqstore.record import MessageRecord
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqstore.scan import scan_commitlog
from test_broker_protocol import pull, send_v2

pytestmark = pytest.mark.timeout(180)

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "

RULES = """\
globalWhiteRemoteAddresses:
  - {white}
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
"""


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


@pytest.fixture
def acl_broker(tmp_path):
    with BrokerThread(tmp_path / "store", acl_enable=True, acl_file=str(write_rules(tmp_path))) as bt:
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
    rules = write_rules(tmp_path)
    with BrokerThread(tmp_path / "store", acl_enable=True, acl_file=str(rules)) as bt:
        bt.broker.acl.manager.watch_interval = 0.0
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


# --- the C++ client (PyPI rocketmq 0.4.4): session credentials ------------------------------------------
rc = pytest.importorskip("rocketmq.client")
from rocketmq.exceptions import ProducerSendSyncFailed  # noqa: E402


class CppClientLog:
    """What the C++ client logged since it was made (``~/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.*``): it
    reports a refused send as "No route info" after its retries, and logs each broker answer's code and remark."""

    def __init__(self):
        self.pattern = os.path.join(os.path.expanduser("~"), "logs", "rocketmq-cpp",
                                    f"{os.getpid()}_rocketmq-cpp.log*")
        self.start = {p: os.path.getsize(p) for p in glob.glob(self.pattern)}

    def text(self) -> str:
        out = []
        for path in sorted(glob.glob(self.pattern)):
            with open(path, "rb") as f:
                f.seek(self.start.get(path, 0))
                out.append(f.read().decode("utf-8", "replace"))
        return "".join(out)


def _producer(namesrv: str, group: str, credentials: tuple | None):
    p = rc.Producer(group)
    p.set_namesrv_addr(namesrv)
    p.set_timeout(5000)
    if credentials:
        p.set_session_credentials(*credentials)
    p.start()
    return p


def _send(namesrv, group, credentials, topic, body):
    """(True, msg id) or (False, the client's error text)."""
    p = _producer(namesrv, group, credentials)
    try:
        m = rc.Message(topic)
        m.set_body(body)
        try:
            r = p.send_sync(m)
        except ProducerSendSyncFailed as exc:
            return False, str(exc)
        return r.status == rc.SendStatus.OK, r.msg_id
    finally:
        p.shutdown()


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


KEYS = ("RocketMQ", "12345678", "ALIYUN")


def test_cpp_client_right_keys_send_and_consume(acl_broker):
    sent = [_send(acl_broker.namesrv, "PG_cpp", KEYS, "topicB", f"cpp {i}") for i in range(5)]
    assert all(ok for ok, _ in sent), sent
    got = []
    consumer = rc.PushConsumer("groupB")
    consumer.set_namesrv_addr(acl_broker.namesrv)
    consumer.set_session_credentials(*KEYS)
    consumer.subscribe("topicB", lambda msg: got.append(msg.body))
    consumer.start()
    try:
        assert _wait_for(lambda: len(got) >= 5), got
    finally:
        consumer.shutdown()
    assert sorted(got) == [f"cpp {i}".encode() for i in range(5)]


@pytest.mark.parametrize("case, credentials, topic, remark", [
    ("wrong secret", ("RocketMQ", "wrongwrong", "ALIYUN"), "topicB", "Check signature failed for accessKey=RocketMQ"),
    # the C++ client without credentials still sends an empty AccessKey: 4.9.8 says the same as we do
    ("no credentials", None, "topicB", "No acl config for "),
    ("denied topic", KEYS, "topicA", "No default permission for topic:topicA"),
])
def test_cpp_client_refusals_carry_the_code_and_remark(acl_broker, case, credentials, topic, remark):
    log = CppClientLog()
    ok, error = _send(acl_broker.namesrv, "PG_cpp_refused", credentials, topic, case)
    assert not ok, error
    assert f"remark:{ACL_EXCEPTION}{remark}, error code:1" in log.text()
    root = acl_broker.broker.store_root
    acl_broker.stop()
    assert _records(root, topic) == []


def test_cpp_client_from_a_non_white_address_is_refused_and_from_a_white_one_passes(tmp_path):
    rules = write_rules(tmp_path)
    with BrokerThread(tmp_path / "store", acl_enable=True, acl_file=str(rules)) as bt:
        bt.broker.acl.manager.watch_interval = 0.0
        log = CppClientLog()
        ok, error = _send(bt.namesrv, "PG_cpp_white", None, "topicA", "from 127.0.0.1, not white")
        assert not ok and f"remark:{ACL_EXCEPTION}No acl config for , error code:1" in log.text(), error
        write_rules(tmp_path, white="127.0.0.1")
        os.utime(rules, ns=(time.time_ns() + 10**9,) * 2)
        ok, msg_id = _send(bt.namesrv, "PG_cpp_white", None, "topicA", "from 127.0.0.1, white")
        assert ok, msg_id
        root = bt.broker.store_root
    assert [r.body for r in _records(root, "topicA")] == [b"from 127.0.0.1, white"]
