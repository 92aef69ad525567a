"""Orderly consumption's queue locks (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42) at the protocol level.

A queue is locked by one client id per consumer group (RocketMQ 4.9.8's ``RebalanceLockManager``);
the holder renews its lock by asking again, a lock not renewed for ``lockMaxLiveTime`` (60 s, short
here) may be taken by another client, and only the holder's unlock frees a queue.  A closed connection
frees nothing: as in 4.9.8, the lock lives until it expires, so a client whose connection dropped but
who still believes it holds the queue (its own lock lasts 30 s) is never consuming beside a newcomer.
The clients unlock themselves when they shut down (``unlockAll``), and the broker test of that is
the interop tier's (a Java consumer shut down and one killed: tests/interop/test_orderly_java.py).
"""

from __future__ import annotations

import time

import pytest

from broker_support import BrokerThread
from rmqstore.broker.jsonfmt import dumps, loads
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(90)

TOPIC = "OrderTopic"


def mq(queue_id: int, topic: str = TOPIC, broker: str = "broker-a") -> dict:
    return {"brokerName": broker, "queueId": queue_id, "topic": topic}


def _body(group: str, client_id: str, queues) -> bytes:
    """LockBatchRequestBody / UnlockBatchRequestBody as the Java client's fastjson writes them."""
    return dumps({"clientId": client_id, "consumerGroup": group, "mqSet": [mq(q) for q in queues]}).encode()


def lock(bt: BrokerThread, client, group: str, client_id: str, queues) -> set[int]:
    """The queue ids of ``queues`` the broker says ``client_id`` holds now."""
    req = RemotingCommand(RequestCode.LOCK_BATCH_MQ, {}, _body(group, client_id, queues), language="JAVA")
    r = bt.call(client.invoke(req))
    assert r.code == ResponseCode.SUCCESS, r.remark
    locked = loads(r.body.decode())["lockOKMQSet"]
    assert all(q["topic"] == TOPIC and q["brokerName"] == "broker-a" for q in locked), locked
    return {q["queueId"] for q in locked}


def unlock(bt: BrokerThread, client, group: str, client_id: str, queues) -> None:
    req = RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, {}, _body(group, client_id, queues), language="JAVA")
    r = bt.call(client.invoke(req))
    assert r.code == ResponseCode.SUCCESS and not r.body, (r.code, r.remark, r.body)


def heartbeat(bt: BrokerThread, client, group: str, client_id: str) -> None:
    """A consumer's HEART_BEAT: ``client_id`` joins ``group`` over this connection."""
    body = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False, "subscriptionDataSet": [{
            "topic": TOPIC, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
            "expressionType": "TAG", "classFilterMode": False}]}]}
    r = bt.call(client.invoke(RemotingCommand(RequestCode.HEART_BEAT, {}, dumps(body).encode(), language="JAVA")))
    assert r.code == ResponseCode.SUCCESS, r.remark


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        yield bt


@pytest.fixture
def clients(broker):
    a, b = broker.client(), broker.client()
    yield a, b
    for c in (a, b):
        broker.call(c.close())


def test_a_queue_is_locked_by_one_client_per_group(broker, clients):
    a, b = clients
    assert lock(broker, a, "G", "A", [0, 1]) == {0, 1}
    assert lock(broker, b, "G", "B", [1, 2]) == {2}            # 1 is A's
    assert lock(broker, b, "G2", "B", [0, 1]) == {0, 1}        # another group has its own table
    assert lock(broker, a, "G", "A", [0, 1, 2, 3]) == {0, 1, 3}  # renewed, 2 is B's, 3 was free
    assert lock(broker, a, "G", "A", []) == set()
    # the client id decides, not the connection: a client may lock over one connection and renew over another
    assert lock(broker, b, "G", "A", [0]) == {0}


def test_only_the_holder_unlocks(broker, clients):
    a, b = clients
    assert lock(broker, a, "G", "A", [0, 1]) == {0, 1}
    unlock(broker, b, "G", "B", [0, 1])                        # not B's: nothing happens
    assert lock(broker, b, "G", "B", [0, 1]) == set()
    unlock(broker, b, "G", "B", [5])                           # never locked
    unlock(broker, b, "NoSuchGroup", "B", [0])
    unlock(broker, a, "G", "A", [0])
    assert lock(broker, b, "G", "B", [0, 1]) == {0}
    assert lock(broker, a, "G", "A", [0, 1]) == {1}


def test_a_lock_not_renewed_for_its_live_time_is_taken_by_another(broker, clients):
    a, b = clients
    live = 1.0
    broker.broker.rebalance_locks.manager.lock_max_live_time = live
    assert lock(broker, a, "G", "A", [0, 1]) == {0, 1}
    renewed_until = time.monotonic() + 2.5 * live
    while time.monotonic() < renewed_until:                    # A renews 0 well within its live time; 1 ages
        assert lock(broker, a, "G", "A", [0]) == {0}
        assert lock(broker, b, "G", "B", [0]) == set()
        time.sleep(live / 5)
    assert lock(broker, b, "G", "B", [0, 1]) == {1}            # 1 expired: B's now, 0 still A's
    assert lock(broker, a, "G", "A", [0, 1]) == {0}


def test_a_closed_connection_keeps_its_locks_until_they_expire(broker, clients):
    a, b = clients
    live = 1.5
    broker.broker.rebalance_locks.manager.lock_max_live_time = live
    heartbeat(broker, a, "G", "A")
    assert broker.broker.clients.consumers["G"].connections.keys() == {"A"}
    assert lock(broker, a, "G", "A", [0, 1]) == {0, 1}
    locked_at = time.monotonic()
    broker.call(a.close())
    deadline = time.monotonic() + 30
    while "G" in broker.broker.clients.consumers or len(broker.broker.server.connections) > 1:  # the close was seen
        assert time.monotonic() < deadline
        time.sleep(0.05)
    got = lock(broker, b, "G", "B", [0, 1])
    assert got == set() or time.monotonic() - locked_at > live  # only a lock older than its live time moves
    while time.monotonic() - locked_at <= live + 0.2:
        time.sleep(0.05)
    assert lock(broker, b, "G", "B", [0, 1]) == {0, 1}


def test_a_body_that_is_not_a_lock_request_is_refused_naming_the_problem(broker, clients):
    a, _ = clients
    head = b'{"consumerGroup":"G","clientId":"A","mqSet":'
    for body, words in ((b"", "no body"), (b"{not json", "not JSON"), (b'{"consumerGroup":"G","mqSet":[]}', "clientId"),
                        (head + b'[{"topic":"T","brokerName":"b"}]}', "no queueId"),
                        (head + b'[{"topic":"T","brokerName":"b","queueId":"x"}]}', "queueId is not an integer"),
                        (head + b'{"topic":"T"}}', "mqSet is not a list")):
        r = broker.call(a.invoke(RemotingCommand(RequestCode.LOCK_BATCH_MQ, {}, body)))
        assert r.code == ResponseCode.SYSTEM_ERROR and words in r.remark, (body, r.remark)
    assert lock(broker, a, "G", "A", [0]) == {0}               # and the broker goes on
