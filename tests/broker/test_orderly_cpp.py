"""The C++ client's orderly push consumer (PyPI ``rocketmq`` 0.4.4: ``PushConsumer(group, orderly=True)``).

The C++ client locks each queue it is given (LOCK_BATCH_MQ) before it pulls it, renews the locks every
20 s, consumes a queue's messages one at a time in queue order, and unlocks them (UNLOCK_BATCH_MQ) when
it shuts down.  Without the locks it consumed nothing: it spun on lock attempts (seen: this test ran out
of its 120 s with nothing consumed before rmqstore.broker.rebalance_lock).
"""

from __future__ import annotations

import threading
import time

import pytest

rc = pytest.importorskip("rocketmq.client")

from broker_support import BrokerThread  # noqa: E402
from test_broker_protocol import send_v2  # noqa: E402

pytestmark = pytest.mark.timeout(180)

PER_QUEUE = 25


def test_cpp_orderly_consumer_gets_each_queue_in_order_and_unlocks_at_shutdown(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        client = bt.client()
        try:
            for n in range(PER_QUEUE):
                for q in range(4):
                    r = bt.call(client.invoke(send_v2("CppOrderT", f"q{q}-{n}".encode(), q)))
                    assert r.code == 0, r.remark
        finally:
            bt.call(client.close())
        got: list[tuple[int, int, bytes]] = []
        guard = threading.Lock()
        consumer = rc.PushConsumer("CG_cpp_orderly", orderly=True)
        consumer.set_namesrv_addr(bt.namesrv)

        def on_message(msg):
            with guard:
                got.append((msg.queue_id, msg.queue_offset, msg.body))

        consumer.subscribe("CppOrderT", on_message)
        consumer.start()
        try:
            deadline = time.monotonic() + 120
            while len(got) < 4 * PER_QUEUE and time.monotonic() < deadline:
                time.sleep(0.1)
            locked = {mq.queue_id: e.client_id for mq, e in bt.broker.rebalance_locks.manager.snapshot(
                "CG_cpp_orderly").items()}
        finally:
            consumer.shutdown()
        per_queue: dict[int, list[int]] = {}
        for q, offset, body in got:
            assert body == f"q{q}-{offset}".encode()
            per_queue.setdefault(q, []).append(offset)
        assert per_queue == {q: list(range(PER_QUEUE)) for q in range(4)}  # each once, in queue order
        assert sorted(locked) == [0, 1, 2, 3] and len(set(locked.values())) == 1, locked  # one client holds all
        # unlocked at shutdown -- all but the first queue: the client's unlockAll builds each broker's list
        # with push_back only for the second queue on (rocketmq-client-cpp 2.x, Rebalance::unlockAll), so
        # that one stays locked until it expires, on any broker
        left = bt.broker.rebalance_locks.manager.snapshot("CG_cpp_orderly")
        assert [mq.queue_id for mq in left] == [0], left
