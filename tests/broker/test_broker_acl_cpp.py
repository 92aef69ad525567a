"""The broker's plain ACL with the official C++ client (PyPI ``rocketmq`` 0.4.4): its session credentials
(``set_session_credentials(access_key, secret_key, channel)``) sign as 4.9.8's broker checks -- AccessKey,
OnsChannel and the header fields, then the body.  Right keys send and consume; a wrong secret, no
credentials, a denied topic and a non-white address are refused with 4.9.8's code and remark.
"""

from __future__ import annotations

import glob
import os
import time

import pytest

rc = pytest.importorskip("rocketmq.client")

from rocketmq.exceptions import ProducerSendSyncFailed  # noqa: E402

from test_broker_acl import ACL_EXCEPTION, _records, acl_broker_thread, write_rules  # noqa: E402
from test_broker_client import _wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def acl_broker(tmp_path):
    with acl_broker_thread(tmp_path) as bt:
        yield bt


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
    rules = tmp_path / "plain_acl.yml"
    with acl_broker_thread(tmp_path) as bt:
        log = CppClientLog()
        ok, error = _send(bt.namesrv, "PG_cpp_white", None, "topicA", "from 127.0.0.1, not white")
        assert not ok and f"remark:{ACL_EXCEPTION}No acl config for , error code:1" in log.text(), error
        write_rules(tmp_path, white="127.0.0.1")
        os.utime(rules, ns=(time.time_ns() + 10**9,) * 2)
        ok, msg_id = _send(bt.namesrv, "PG_cpp_white", None, "topicA", "from 127.0.0.1, white")
        assert ok, msg_id
        root = bt.broker.store_root
    assert [r.body for r in _records(root, "topicA")] == [b"from 127.0.0.1, white"]
