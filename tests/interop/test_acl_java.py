"""Plain ACL against the real RocketMQ 4.9.8 (issue 20, finding 10): the Java client's AclClientRPCHook
against our broker, our signature against the real AclUtils, and our broker's refusals against the
Java broker's for the same requests and the same plain_acl.yml."""

from __future__ import annotations

import re

from .rmqjava import case_lines
from test_acl import SIGNED
from test_broker_acl import ACL_EXCEPTION, RULES, acl_broker_thread

# the Java broker appends the stack frame that threw: ", org.apache.rocketmq.acl.plain.X.method(X.java:684)"
_JAVA_FRAME = re.compile(r", org\.apache\.rocketmq\.acl\.[\w.$]+\([\w.]+:\d+\)$")


def test_our_signature_is_the_real_acl_utils_one(rmq_java):
    args: list[str] = []
    for n, (secret, body, fields, _) in enumerate(SIGNED):
        args += [";"] if args else []
        args += [f"s{n}", secret, body.decode("utf-8") or "-", *(f"{k}={v}" for k, v in fields.items())]
    got = case_lines(rmq_java.run_java("AclSign.java", *args))
    assert got == {f"s{n}": expected for n, (*_, expected) in enumerate(SIGNED)}


def _case(name, namesrv, keys, op, topic, group, count=1):
    access_key, secret_key = keys or ("-", "-")
    return ",".join([name, namesrv, access_key, secret_key, op, topic, group, str(count)])


KEYS = ("RocketMQ", "12345678")


def test_java_client_with_acl_against_our_broker(rmq_java, tmp_path):
    """Right keys send and consume; a wrong secret, no credentials, a topic the account may not publish to and
    a non-white address are refused with 4.9.8's code and remark; the same credential-less send from a white
    address passes."""
    (tmp_path / "white").mkdir()
    with acl_broker_thread(tmp_path) as bt, acl_broker_thread(tmp_path / "white", white="127.0.0.1") as white:
        out = rmq_java.run_java("AclClient.java",
                                _case("right_keys", bt.namesrv, KEYS, "send", "topicB", "PG_java", 3),
                                _case("consume", bt.namesrv, KEYS, "consume", "topicB", "groupB", 3),
                                _case("wrong_secret", bt.namesrv, ("RocketMQ", "wrongwrong"), "send", "topicB", "PG_x"),
                                _case("no_credentials", bt.namesrv, None, "send", "topicB", "PG_y"),
                                _case("denied_topic", bt.namesrv, KEYS, "send", "topicA", "PG_z"),
                                _case("white_address", white.namesrv, None, "send", "topicA", "PG_w"),
                                timeout=300)
    got = case_lines(out)
    assert got["right_keys"] == "code=0 sent=3", out
    assert got["consume"] == "code=0 got=3 bodies=right_keys 0|right_keys 1|right_keys 2", out
    refused = f"code=1 remark={ACL_EXCEPTION}"
    assert got["wrong_secret"] == refused + "Check signature failed for accessKey=RocketMQ"
    # no credentials from 127.0.0.1, which is not among globalWhiteRemoteAddresses (10.10.103.*)
    assert got["no_credentials"] == refused + "No accessKey is configured"
    assert got["denied_topic"] == refused + "No default permission for topic:topicA"
    assert got["white_address"] == "code=0 sent=1", out


# name, accessKey, secretKey, AclWire kind, topic, group (see tests/interop/java/AclWire.java)
WIRE_CASES = [
    "right_keys,RocketMQ,12345678,send,topicB,groupB",
    "v1_send,RocketMQ,12345678,send1,topicB,groupB",
    "wrong_secret,RocketMQ,wrongwrong,send,topicB,groupB",
    "no_credentials,-,-,send,topicB,groupB",
    "unknown_key,Nobody1,12345678,send,topicB,groupB",
    "denied_topic,RocketMQ,12345678,send,topicA,groupB",
    "sub_only_topic,RocketMQ,12345678,send,topicC,groupB",
    "default_topic_perm,RocketMQ,12345678,send,topicZ,groupB",
    "retry_topic_of_denied_group,RocketMQ,12345678,send,%RETRY%groupA,groupA",
    "pull_allowed,RocketMQ,12345678,pull,topicC,groupC",
    "pull_denied_group,RocketMQ,12345678,pull,topicC,groupA",
    "pull_denied_topic,RocketMQ,12345678,pull,topicA,groupC",
    "heartbeat_allowed,RocketMQ,12345678,heartbeat,topicC,groupC",
    "heartbeat_denied_topic,RocketMQ,12345678,heartbeat,topicA,groupC",
    "heartbeat_denied_both,RocketMQ,12345678,heartbeat,topicA,groupA",
    "offset_denied_group,RocketMQ,12345678,offset,topicC,groupA",
    "consumers_denied_group,RocketMQ,12345678,consumers,topicC,groupA",
    "admin_code_not_admin,RocketMQ,12345678,createtopic,topicQ,groupC",
    "admin_code_admin,rocketmq2,12345678,createtopic,topicQ,groupC",
]


def _acl_answers(output: str) -> dict[str, str]:
    """Per case: the AclException remark without Java's stack frame, or "let in" for any other answer."""
    out = {}
    for name, rest in case_lines(output).items():
        code, _, remark = rest.partition(" remark=")
        if ACL_EXCEPTION in remark:
            out[name] = f"{code} {_JAVA_FRAME.sub('', remark)}"
        else:
            out[name] = "let in"
    return out


def test_our_broker_refuses_what_the_java_broker_refuses_with_the_same_code_and_message(rmq_java, tmp_path):
    rules = RULES.format(white="10.10.103.*")
    with rmq_java.java_broker(tmp_path / "java", {"aclEnable": "true", "autoCreateTopicEnable": "true"},
                              plain_acl=rules) as address:
        java = _acl_answers(rmq_java.run_java("AclWire.java", address, *WIRE_CASES))
    (tmp_path / "ours").mkdir()
    with acl_broker_thread(tmp_path / "ours") as bt:
        ours = _acl_answers(rmq_java.run_java("AclWire.java", f"127.0.0.1:{bt.port}", *WIRE_CASES))
    assert len(java) == len(WIRE_CASES) and java["right_keys"] == "let in"
    assert java["wrong_secret"] == f"code=1 {ACL_EXCEPTION}Check signature failed for accessKey=RocketMQ"
    assert ours == java
