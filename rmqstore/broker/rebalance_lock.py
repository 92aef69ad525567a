"""Queue locks for orderly consumption (RocketMQ 4.9.8's ``RebalanceLockManager``): LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42).

An orderly consumer (Java's ``MessageListenerOrderly``, the C++ client's orderly push consumer) must be
the only one consuming a queue, or two of them would process its messages side by side and out of
order.  Rebalancing alone cannot promise that: while the group's membership changes, two clients may
each believe a queue is theirs for a moment.  So before it pulls a queue an orderly client asks the
queue's broker for a lock, and only consumes while it holds one:

* the lock is per consumer group and queue, held by one **client id** (the client's ``ip@instance``,
  not its connection: a client reconnecting over a new connection is still the holder);
* the holder asks again every 20 s (``lockAll``), which renews it; a lock not renewed for
  ``lockMaxLiveTime`` (60 s; the JVM property ``rocketmq.broker.rebalance.lockMaxLiveTime`` in
  4.9.8, :attr:`RebalanceLockManager.lock_max_live_time` here) has expired and goes to the next
  client that asks;
* only the holder's UNLOCK_BATCH_MQ frees a queue.  A client gives its queues up when rebalancing
  takes them away and when it shuts down (``unlockAll``).

Nothing else frees a lock -- not the client's connection closing, not its UNREGISTER_CLIENT: 4.9.8's
``ClientHousekeepingService`` and ``ConsumerManager`` never touch the lock table.  That is what makes
the scheme safe: a client trusts its own lock for 30 s after its last successful renewal
(``rocketmq.client.rebalance.lockMaxLiveTime``), less than the broker's 60 s, so by the time the
broker hands a queue to another client, a holder that lost its connection (or was killed) has
stopped consuming it.  Freeing locks when a connection closes would let a newcomer start on a queue
while the old holder, alive behind a dropped connection, still works on it.

The answer to a lock request is the subset of the asked queues the client holds now
(``LockBatchResponseBody.lockOKMQSet``); an unlock is answered SUCCESS whatever it freed.  The
bodies are fastjson's JSON of ``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` (``consumerGroup``,
``clientId``, ``mqSet``: a list of ``{"brokerName", "queueId", "topic"}``), which the C++ client
writes with jsoncpp in the same shape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ..common.errors import RmqStoreError
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .jsonfmt import dumps, loads

__all__ = ["MessageQueue", "LockEntry", "RebalanceLockManager", "RebalanceLockProcessor", "LockBodyError",
           "REBALANCE_LOCK_MAX_LIVE_TIME"]

log = logging.getLogger(__name__)

#: seconds a lock lives without renewal (4.9.8: ``rocketmq.broker.rebalance.lockMaxLiveTime``, 60000 ms)
REBALANCE_LOCK_MAX_LIVE_TIME = 60.0


class LockBodyError(RmqStoreError, ValueError):
    """A LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body that is not a lock request."""


@dataclass(frozen=True, order=True)
class MessageQueue:
    """RocketMQ's ``MessageQueue``: a queue of a topic on a broker (ordered as Java's ``compareTo``)."""

    topic: str
    broker_name: str
    queue_id: int

    @classmethod
    def from_json(cls, d) -> "MessageQueue":
        if not isinstance(d, dict):
            raise LockBodyError(f"a message queue of mqSet is not an object: {str(d)[:60]!r}")
        for key in ("topic", "brokerName", "queueId"):
            if d.get(key) is None:
                raise LockBodyError(f"a message queue of mqSet has no {key}: {dumps(d)[:120]}")
        queue_id = d["queueId"]
        if isinstance(queue_id, bool) or not isinstance(queue_id, int):
            raise LockBodyError(f"a message queue's queueId is not an integer: {queue_id!r}")
        return cls(str(d["topic"]), str(d["brokerName"]), queue_id)

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


@dataclass
class LockEntry:
    """Who holds a queue, and when the lock was last taken or renewed (``time.monotonic()``)."""

    client_id: str
    last_update_timestamp: float


class RebalanceLockManager:
    """The lock table: consumer group -> message queue -> :class:`LockEntry`.

    Thread-safe (one lock around the table, as 4.9.8's ``ReentrantLock``): requests come in on the
    broker's event loop, and tests and tools may read it from anywhere.
    """

    def __init__(self, lock_max_live_time: float = REBALANCE_LOCK_MAX_LIVE_TIME, clock=time.monotonic):
        self.lock_max_live_time = lock_max_live_time
        self.clock = clock
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._lock = threading.Lock()

    def _expired(self, entry: LockEntry, now: float) -> bool:
        return now - entry.last_update_timestamp > self.lock_max_live_time

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """The queues of ``mqs`` that ``client_id`` holds once this returns: its own (renewed), free
        ones and expired ones (taken over); not those another client holds."""
        locked = set()
        with self._lock:
            now = self.clock()
            queues = self._table.setdefault(group, {})
            for mq in mqs:
                entry = queues.get(mq)
                if entry is None:
                    queues[mq] = LockEntry(client_id, now)
                    log.info("tryLockBatch, %s not locked, %s got it, group %s", mq, client_id, group)
                elif entry.client_id == client_id or self._expired(entry, now):
                    if entry.client_id != client_id:
                        log.warning("tryLockBatch, %s: the lock of %s expired, %s got it, group %s",
                                    mq, entry.client_id, client_id, group)
                    entry.client_id, entry.last_update_timestamp = client_id, now
                else:
                    log.warning("tryLockBatch, %s locked by %s, not %s, group %s", mq, entry.client_id,
                                client_id, group)
                    continue
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Free the queues of ``mqs`` that ``client_id`` holds (expired or not); leave the others alone."""
        with self._lock:
            queues = self._table.get(group)
            if queues is None:
                log.warning("unlockBatch, group %s has no locks (client %s)", group, client_id)
                return
            for mq in mqs:
                entry = queues.get(mq)
                if entry is None:
                    log.warning("unlockBatch, %s not locked, group %s, client %s", mq, group, client_id)
                elif entry.client_id != client_id:
                    log.warning("unlockBatch, %s locked by %s, not %s, group %s", mq, entry.client_id,
                                client_id, group)
                else:
                    del queues[mq]
                    log.info("unlockBatch, %s freed by %s, group %s", mq, client_id, group)

    def snapshot(self, group: str) -> dict[MessageQueue, LockEntry]:
        """A copy of ``group``'s lock entries, expired ones included (as 4.9.8 keeps them)."""
        with self._lock:
            return {mq: LockEntry(e.client_id, e.last_update_timestamp)
                    for mq, e in self._table.get(group, {}).items()}


def _request(body: bytes) -> tuple[str, str, list[MessageQueue]]:
    """(consumer group, client id, queues) of a ``LockBatchRequestBody`` / ``UnlockBatchRequestBody``."""
    if not body:
        raise LockBodyError("the request has no body (a LockBatchRequestBody is expected)")
    try:
        data = loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LockBodyError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LockBodyError("the body is not a JSON object")
    for key in ("consumerGroup", "clientId"):
        if not isinstance(data.get(key), str):
            raise LockBodyError(f"the body has no {key}")
    mqs = data.get("mqSet") or []
    if not isinstance(mqs, list):
        raise LockBodyError("the body's mqSet is not a list")
    return data["consumerGroup"], data["clientId"], [MessageQueue.from_json(d) for d in mqs]


class RebalanceLockProcessor:
    """LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (in 4.9.8's ``AdminBrokerProcessor``) over a :class:`RebalanceLockManager`."""

    def __init__(self, manager: RebalanceLockManager | None = None):
        self.manager = manager or RebalanceLockManager()

    def register(self, server) -> None:
        server.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        server.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)

    def lock_batch_mq(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs = _request(req.body)
        locked = self.manager.try_lock_batch(group, mqs, client_id)
        body = dumps({"lockOKMQSet": [mq.to_json() for mq in sorted(locked)]}).encode()
        return req.response(ResponseCode.SUCCESS, body=body)

    def unlock_batch_mq(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs = _request(req.body)
        self.manager.unlock_batch(group, mqs, client_id)
        return req.response(ResponseCode.SUCCESS)
