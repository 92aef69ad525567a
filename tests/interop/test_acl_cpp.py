"""The C++ client (PyPI ``rocketmq``) with session credentials against the Java 4.9.8 broker with ACL and against
ours, under the same plain_acl.yml: the same sends pass, the same are refused with the same code and remark."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("rocketmq.client")

from broker_support import NamesrvThread  # noqa: E402
from test_broker_acl import ACL_EXCEPTION, RULES, acl_broker_thread  # noqa: E402
from test_broker_acl_cpp import KEYS, CppClientLog, _send  # noqa: E402

CASES = [
    ("right_keys", KEYS, "topicB"),
    ("wrong_secret", ("RocketMQ", "wrongwrong", "ALIYUN"), "topicB"),
    ("no_credentials", None, "topicB"),
    ("denied_topic", KEYS, "topicA"),
]
_REMARK = re.compile(r"processSendResponse error remark:(" + re.escape(ACL_EXCEPTION) + r".*?)"
                     r"(?:, org\.apache\.rocketmq\.acl\.[\w.$]+\([\w.]+:\d+\))?, error code:(\d+)")


def _answers(namesrv: str) -> dict[str, tuple]:
    """Per case: ("sent",) or ("refused", the first code and remark the client logged)."""
    out = {}
    for name, credentials, topic in CASES:
        log = CppClientLog()
        ok, detail = _send(namesrv, f"PG_{name}", credentials, topic, name)
        found = _REMARK.search(log.text())
        out[name] = ("sent",) if ok else ("refused", found and (found.group(2), found.group(1)), detail[:60])
    return out


def test_cpp_client_gets_from_our_broker_what_it_gets_from_the_java_broker(rmq_java, tmp_path):
    with NamesrvThread() as namesrv, \
            rmq_java.java_broker(tmp_path / "java", {"aclEnable": "true", "namesrvAddr": namesrv.address},
                                 plain_acl=RULES.format(white="10.10.103.*")):
        java = _answers(namesrv.address)
    (tmp_path / "ours").mkdir()
    with acl_broker_thread(tmp_path / "ours") as bt:
        ours = _answers(bt.namesrv)
    assert java["right_keys"] == ("sent",), java
    assert java["wrong_secret"][1] == ("1", ACL_EXCEPTION + "Check signature failed for accessKey=RocketMQ"), java
    assert ours == java
