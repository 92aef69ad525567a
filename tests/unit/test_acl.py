"""RocketMQ 4.9.8's plain ACL, piece by piece (rmqstore.broker.acl): the signature, the address
patterns, the permissions and the request-code table, the plain_acl.yml loader, the validator
and the reload.  The broker with real clients is tests/broker/test_broker_acl.py and, against
the Java client and broker, tests/interop/test_acl_java.py."""

from __future__ import annotations

import logging
import os
import time

import pytest

from rmqstore.broker.acl import (ADMIN_CODES, AclConfigError, AclRefusal, Perm, PlainAccessValidator,
                                 PlainPermissionManager, cal_signature, check_permission, combine_request_content,
                                 java_hash_order, load_plain_acl, needed_resources, parse_perm,
                                 remote_address_strategy, sign_request)
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode

# --- the signature ------------------------------------------------------------------------------
# Reference values computed by the real AclUtils of RocketMQ 4.9.8:
#   rmq-java tests/interop/java/AclSign.java SECRET BODY KEY=VALUE...
# (tests/interop/test_acl_java.py recomputes them with the Java classes whenever the tier runs.)
SIGNED = [
    ("12345678", b"hello body", {"AccessKey": "RocketMQ", "a": "PG", "b": "TopicA", "c": "TBW102"},
     "zbhScnBc2ioIaX/FuDQQ9bQWu1w="),
    # keys in Java's String order (UTF-16 units: U+1D11E's surrogates sort before U+FF21), UTF-8 bytes
    ("sécret", "bödy".encode(), {"AccessKey": "RocketMQ", "zé": "ü", "Ａkey": "v1", "𝄞key": "v2", "key": "v3"},
     "0UZyNDYNZ9622248MCY3wqplAK0="),
]


@pytest.mark.parametrize("secret, body, fields, expected", SIGNED)
def test_signature_is_the_one_rocketmq_computes(secret, body, fields, expected):
    assert cal_signature(combine_request_content(fields, body), secret) == expected
    # the Signature field itself is never part of what is signed
    assert cal_signature(combine_request_content(dict(fields, Signature="x"), body), secret) == expected


def test_sign_request_is_what_acl_client_rpc_hook_adds():
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "TopicA", "c": "TBW102"}, b"hello body")
    sign_request(cmd, "RocketMQ", "12345678")
    assert cmd.ext_fields["AccessKey"] == "RocketMQ" and "SecurityToken" not in cmd.ext_fields
    assert cmd.ext_fields["Signature"] == "zbhScnBc2ioIaX/FuDQQ9bQWu1w="
    token = RemotingCommand(RequestCode.HEART_BEAT, {}, b"{}")
    sign_request(token, "RocketMQ", "12345678", security_token="tok")
    assert token.ext_fields["SecurityToken"] == "tok"
    assert token.ext_fields["Signature"] == cal_signature(b"RocketMQtok{}", "12345678")


# --- remote address patterns (RemoteAddressStrategyFactory) -------------------------------------------
MATCHES = [
    ("*", ["10.0.0.1", "::1"], []),
    ("*.*.*.*", ["10.0.0.1"], []),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "::1"]),
    ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1", "10.168.0.1"]),
    ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.1.0", "192.168.2.50"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.7.9"]),
    ("10.1-5.*.*", ["10.3.200.1"], ["10.6.0.1"]),
    ("192.168.1.{1,2,30}", ["192.168.1.1", "192.168.1.30"], ["192.168.1.3", "192.168.1.12"]),
    ("1.1.1.1,2.2.2.2", ["1.1.1.1", "2.2.2.2"], ["3.3.3.3"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
    ("1050:0000:0000:0000:0005:0600:300c:326b", ["1050::5:600:300c:326b"], ["1050::5:600:300c:326c"]),
    ("1050::0005:0600:300c:*", ["1050::5:600:300c:1", "1050:0:0:0:5:600:300c:ffff"], ["1050::5:600:300d:1"]),
    ("1050::0005:0600:300c:1-200", ["1050::5:600:300c:200"], ["1050::5:600:300c:201"]),
    ("1050::0005:0600:300c:{1,2}", ["1050::5:600:300c:2"], ["1050::5:600:300c:3"]),
    ("", [], ["127.0.0.1", "::1"]),
]


@pytest.mark.parametrize("pattern, matching, others", MATCHES)
def test_address_patterns_match_as_rocketmq_does(pattern, matching, others):
    strategy = remote_address_strategy(pattern)
    for host in matching:
        assert strategy.match(host), (pattern, host)
    for host in others:
        assert not strategy.match(host), (pattern, host)


def test_no_pattern_matches_nothing():
    assert not remote_address_strategy(None).match("127.0.0.1")


@pytest.mark.parametrize("pattern", ["192.168.1.300", "not-an-address", "192.168.*", "192.168.1.100-1",
                                     "192.168.1.-5", "192.168.1.{1,x}", "1.1.1.1, 2.2.2.2", "1.2.3.4.5",
                                     "1050::0005:0600:30*c:1"])
def test_bad_address_patterns_are_errors_naming_the_pattern(pattern):
    with pytest.raises(AclConfigError) as err:
        remote_address_strategy(pattern)
    assert pattern in str(err.value)


# --- permissions (Permission) --------------------------------------------------------------------
def test_parse_perm_and_check_permission():
    assert parse_perm("PUB") == Perm.PUB and parse_perm(" SUB ") == Perm.SUB
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == Perm.PUB | Perm.SUB
    assert parse_perm("DENY") == parse_perm(None) == Perm.DENY
    with pytest.raises(AclConfigError, match="PUBSUB"):
        parse_perm("PUBSUB")
    assert check_permission(Perm.PUB, Perm.PUB | Perm.SUB) and check_permission(Perm.SUB, Perm.SUB)
    assert not check_permission(Perm.PUB, Perm.SUB) and not check_permission(Perm.SUB, Perm.DENY)
    assert not check_permission(Perm.PUB, Perm.DENY | Perm.PUB)
    assert check_permission(Perm.ANY, Perm.SUB) and not check_permission(Perm.ANY, Perm.DENY)
    assert ADMIN_CODES == {17, 25, 215, 200, 207}


# --- the request-code table (PlainAccessValidator.parse) -----------------------------------------------
def _req(code, ext=None, body=b""):
    return RemotingCommand(int(code), dict(ext or {}), body)


def _hb(*groups):
    import json
    data = {"clientID": "c1", "producerDataSet": [{"groupName": "PG"}],
            "consumerDataSet": [{"groupName": g, "subscriptionDataSet": [{"topic": t} for t in topics]}
                                for g, topics in groups]}
    return json.dumps(data).encode()


TABLE = [
    (_req(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T1"}), {"T1": Perm.PUB}),
    (_req(RequestCode.SEND_MESSAGE_V2, {"a": "G1", "b": "%RETRY%G1"}), {"%RETRY%G1": Perm.SUB}),
    (_req(RequestCode.SEND_MESSAGE, {"producerGroup": "PG", "topic": "T1"}), {"T1": Perm.PUB}),
    # 4.9.8 reads "group" for a V1 retry send, which the header does not have: no resource to check
    (_req(RequestCode.SEND_MESSAGE, {"producerGroup": "G1", "topic": "%RETRY%G1"}), {}),
    # ours, not 4.9.8's (which checks no topic for a batch): a batch needs PUB like any send
    (_req(RequestCode.SEND_BATCH_MESSAGE, {"a": "PG", "b": "T1"}), {"T1": Perm.PUB}),
    (_req(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G1"}), {"%RETRY%G1": Perm.SUB}),
    (_req(RequestCode.PULL_MESSAGE, {"topic": "T1", "consumerGroup": "G1"}), {"T1": Perm.SUB, "%RETRY%G1": Perm.SUB}),
    (_req(RequestCode.QUERY_MESSAGE, {"topic": "T1"}), {"T1": Perm.SUB}),
    (_req(RequestCode.HEART_BEAT, body=_hb(("G1", ["T1", "T2"]), ("G2", ["T1"]))),
     {"%RETRY%G1": Perm.SUB, "T1": Perm.SUB, "T2": Perm.SUB, "%RETRY%G2": Perm.SUB}),
    (_req(RequestCode.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": "G1"}), {"%RETRY%G1": Perm.SUB}),
    (_req(RequestCode.UNREGISTER_CLIENT, {"clientID": "c1", "producerGroup": "PG"}), {}),
    (_req(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"}), {"%RETRY%G1": Perm.SUB}),
    (_req(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G1", "topic": "T1", "queueId": "0",
                                               "commitOffset": "5"}), {"%RETRY%G1": Perm.SUB, "T1": Perm.SUB}),
    (_req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}), {}),
    (_req(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T1"}), {}),
]


@pytest.mark.parametrize("cmd, expected", TABLE, ids=[f"{c.code}-{i}" for i, (c, _) in enumerate(TABLE)])
def test_the_permission_each_request_code_needs(cmd, expected):
    assert needed_resources(cmd) == expected


@pytest.mark.parametrize("cmd, message", [
    (_req(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}), "the custom field <consumerGroup> is null"),
    (_req(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G1", "topic": "T1"}),
     "the custom field <queueId> is null"),
    (_req(RequestCode.UNREGISTER_CLIENT, {}), "the custom field <clientID> is null"),
    (_req(RequestCode.HEART_BEAT, body=b"{not json"), "heartbeat body"),
])
def test_a_request_the_table_cannot_read_is_refused_saying_why(cmd, message):
    with pytest.raises(AclRefusal, match=message):
        needed_resources(cmd)


def test_resources_are_checked_in_java_hash_map_order():
    # orders printed by java.util.HashMap<String, Byte> (keySet after put of each, in this order)
    assert java_hash_order(["%RETRY%groupC", "topicA"]) == ["topicA", "%RETRY%groupC"]
    assert java_hash_order(["TopicTest", "%RETRY%please_rename_unique_group_name_4", "orders", "payments",
                            "%RETRY%cg1"]) == ["%RETRY%cg1", "%RETRY%please_rename_unique_group_name_4",
                                               "payments", "TopicTest", "orders"]
    many = [f"t{i}" for i in range(20)] + ["%RETRY%g"]
    assert java_hash_order(many) == ("t4 t5 t6 t7 t8 t9 %RETRY%g t10 t12 t11 t14 t13 t16 t15 t18 t17 t0 t1 t19 "
                                     "t2 t3").split()
    assert java_hash_order(["Aa", "BB"]) == ["Aa", "BB"] and java_hash_order(["BB", "Aa"]) == ["BB", "Aa"]


# --- plain_acl.yml (PlainPermissionManager.load) ----------------------------------------------------
# the file RocketMQ 4.9.8 ships in conf/plain_acl.yml
SHIPPED = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_file_loads(tmp_path):
    acl = load_plain_acl(_write(tmp_path / "plain_acl.yml", SHIPPED))
    assert [s.pattern for s in acl.global_white] == ["10.10.103.*", "192.168.0.*"]
    first, second = acl.accounts["RocketMQ"], acl.accounts["rocketmq2"]
    assert first.secret_key == "12345678" and not first.admin  # a YAML number is the text Java reads
    assert first.default_topic_perm == Perm.DENY and first.default_group_perm == Perm.SUB
    assert first.resource_perms == {"topicA": Perm.DENY, "topicB": Perm.PUB | Perm.SUB, "topicC": Perm.SUB,
                                    "%RETRY%groupA": Perm.DENY, "%RETRY%groupB": Perm.PUB | Perm.SUB,
                                    "%RETRY%groupC": Perm.SUB}
    assert not first.white.match("192.168.1.5") and second.white.match("192.168.1.5")
    assert second.admin and second.resource_perms == {} and second.default_topic_perm == Perm.DENY


def test_an_empty_file_has_no_rules(tmp_path):
    acl = load_plain_acl(_write(tmp_path / "plain_acl.yml", "# nothing yet\n"))
    assert acl.global_white == [] and acl.accounts == {}


@pytest.mark.parametrize("text, problem", [
    ("accounts: [\n", "does not parse"),
    ("- just\n- a list\n", "not a mapping"),
    ("accounts: RocketMQ\n", "accounts"),
    ("accounts:\n  - accessKey: RocketMQ\n", "secretKey"),
    ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "longer than 6"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", "longer than 6"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms:\n      - topicA\n",
     "topicA"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    groupPerms:\n      - g=PUBLISH\n", "PUBLISH"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: maybe\n", "admin"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 300.1.1.1\n",
     "300.1.1.1"),
    ("globalWhiteRemoteAddresses:\n  - 10.10.*\n", "10.10.*"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n  - accessKey: RocketMQ\n    secretKey: 87654321\n",
     "RocketMQ"),
])
def test_a_malformed_file_is_an_error_naming_the_file_and_the_problem(tmp_path, text, problem):
    path = _write(tmp_path / "plain_acl.yml", text)
    with pytest.raises(AclConfigError) as err:
        load_plain_acl(path)
    assert str(path) in str(err.value) and problem in str(err.value)


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(AclConfigError, match="plain_acl.yml"):
        load_plain_acl(tmp_path / "plain_acl.yml")


# --- the validator (PlainPermissionManager.validate), without a network -----------------------------
class _Conn:
    def __init__(self, host="127.0.0.1"):
        self.remote_address = (host, 40000)


def _signed(code, ext, body=b"", ak="RocketMQ", sk="12345678"):
    cmd = _req(code, ext, body)
    sign_request(cmd, ak, sk)
    return cmd


def _validator(tmp_path, text=SHIPPED, **kw):
    return PlainAccessValidator(PlainPermissionManager(_write(tmp_path / "plain_acl.yml", text), **kw))


def _refusal(validator, cmd, host="127.0.0.1"):
    answer = validator(_Conn(host), cmd)
    if answer is None:
        return None
    assert answer.code == ResponseCode.SYSTEM_ERROR and answer.is_response
    prefix = "org.apache.rocketmq.acl.common.AclException: "
    assert answer.remark.startswith(prefix)
    return answer.remark[len(prefix):]


SEND_B = {"a": "PG", "b": "topicB", "c": "TBW102"}


def test_the_validator_refuses_as_rocketmq_does(tmp_path):
    v = _validator(tmp_path)
    assert _refusal(v, _signed(310, SEND_B, b"x")) is None
    assert _refusal(v, _signed(310, SEND_B, b"x", sk="wrongwrong")) == "Check signature failed for accessKey=RocketMQ"
    tampered = _signed(310, SEND_B, b"x")
    tampered.body = b"y"
    assert _refusal(v, tampered) == "Check signature failed for accessKey=RocketMQ"
    assert _refusal(v, _req(310, SEND_B, b"x")) == "No accessKey is configured"
    for odd in ("sïgnature", ""):
        forged = _signed(310, SEND_B, b"x")
        forged.ext_fields["Signature"] = odd
        assert _refusal(v, forged) == "Check signature failed for accessKey=RocketMQ"
    unsigned = _signed(310, SEND_B, b"x")
    del unsigned.ext_fields["Signature"]
    assert _refusal(v, unsigned) == "Check signature failed for accessKey=RocketMQ"
    assert _refusal(v, _signed(310, SEND_B, ak="Nobody1")) == "No acl config for Nobody1"
    assert _refusal(v, _signed(310, dict(SEND_B, b="topicA"))) == "No default permission for topic:topicA"
    assert _refusal(v, _signed(310, dict(SEND_B, b="topicC"))) == "No default permission for topic:topicC"
    assert _refusal(v, _signed(310, dict(SEND_B, b="topicZ"))) == "No default permission for topic:topicZ"
    assert _refusal(v, _signed(11, {"topic": "topicC", "consumerGroup": "groupA"})) == \
        "No default permission for group:groupA"
    assert _refusal(v, _signed(11, {"topic": "topicC", "consumerGroup": "groupZ"})) is None  # defaultGroupPerm SUB
    assert _refusal(v, _signed(17, {"topic": "T"})) == \
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    # a global white address needs no credentials at all; an account's white address skips its checks
    assert _refusal(v, _req(310, dict(SEND_B, b="topicA")), host="192.168.0.7") is None
    assert _refusal(v, _signed(17, {"topic": "T"}, ak="rocketmq2", sk="wrongwrong"), host="192.168.1.9") is None
    assert _refusal(v, _signed(17, {"topic": "T"}, ak="rocketmq2", sk="wrongwrong")) == \
        "Check signature failed for accessKey=rocketmq2"
    assert _refusal(v, _signed(17, {"topic": "T"}, ak="rocketmq2")) is None  # admin


def test_the_trace_topic_is_always_writable_by_a_signed_request(tmp_path):
    v = _validator(tmp_path)
    assert _refusal(v, _signed(310, dict(SEND_B, b="RMQ_SYS_TRACE_TOPIC"))) is None


def test_an_ipv4_mapped_peer_is_its_ipv4_address(tmp_path):
    v = _validator(tmp_path)
    assert _refusal(v, _req(310, SEND_B), host="::ffff:192.168.0.7") is None


def test_the_unique_key_query_flag_is_left_out_of_the_signature_as_4_9_8_does(tmp_path):
    v = _validator(tmp_path, SHIPPED.replace("topicC=SUB", "topicC=SUB\n      - topicQ=SUB"))
    query = _req(RequestCode.QUERY_MESSAGE, {"topic": "topicQ", "key": "k", "maxNum": "32", "beginTimestamp": "0",
                                             "endTimestamp": "1"})
    sign_request(query, "RocketMQ", "12345678")
    assert _refusal(v, query) is None
    query.ext_fields["_UNIQUE_KEY_QUERY"] = "true"  # added by the Java client before its hook signs
    sign_request(query, "RocketMQ", "12345678")
    assert _refusal(v, query) == "Check signature failed for accessKey=RocketMQ"


# --- the reload (AclFileWatchService) ---------------------------------------------------------------
def _touch_later(path, text):
    """Rewrite ``path`` so that its stat changes even on a coarse clock."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def test_a_changed_file_is_reloaded_and_a_broken_one_keeps_the_old_rules(tmp_path, caplog):
    v = _validator(tmp_path, watch_interval=0.0)
    path = tmp_path / "plain_acl.yml"
    send_a = _signed(310, dict(SEND_B, b="topicA"))
    assert _refusal(v, send_a) == "No default permission for topic:topicA"
    _touch_later(path, SHIPPED.replace("topicA=DENY", "topicA=PUB"))
    assert _refusal(v, send_a) is None
    with caplog.at_level(logging.ERROR, logger="rmqstore.broker.acl"):
        _touch_later(path, SHIPPED.replace("topicA=DENY", "topicA=PUBLISH"))
        assert _refusal(v, send_a) is None  # the old rules stay
    assert any(str(path) in r.getMessage() and "PUBLISH" in r.getMessage() for r in caplog.records)
    caplog.clear()
    assert _refusal(v, send_a) is None and not caplog.records  # said once, not at every request
    _touch_later(path, SHIPPED)
    assert _refusal(v, send_a) == "No default permission for topic:topicA"


def test_the_file_is_looked_at_no_more_often_than_the_interval(tmp_path):
    v = _validator(tmp_path, watch_interval=3600.0)
    send_a = _signed(310, dict(SEND_B, b="topicA"))
    _touch_later(tmp_path / "plain_acl.yml", SHIPPED.replace("topicA=DENY", "topicA=PUB"))
    assert _refusal(v, send_a) == "No default permission for topic:topicA"
    v.manager.last_check = time.monotonic() - 3601
    assert _refusal(v, send_a) is None


def test_an_emptied_file_keeps_the_rules_but_a_file_declaring_no_accounts_is_taken(tmp_path, caplog):
    """4.9.8 skips a reload whose file holds no data (an editor between truncating and writing), but takes a
    file that says ``accounts: []``."""
    v = _validator(tmp_path, watch_interval=0.0)
    path = tmp_path / "plain_acl.yml"
    send_b = _signed(310, SEND_B)
    with caplog.at_level(logging.ERROR, logger="rmqstore.broker.acl"):
        _touch_later(path, "")
        assert _refusal(v, send_b) is None
    assert any("holds no rules" in r.getMessage() for r in caplog.records)
    _touch_later(path, "globalWhiteRemoteAddresses: []\naccounts: []\n")
    assert _refusal(v, send_b) == "No acl config for RocketMQ"
