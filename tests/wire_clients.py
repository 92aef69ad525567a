"""A producer and a slow consumer speaking RocketMQ's wire protocol, for tests that need traffic on any broker
(ours or the Java one): SEND_MESSAGE_V2 as the Java client sends it, PULL_MESSAGE and UPDATE_CONSUMER_OFFSET as a
pull consumer does.  Each runs on a loop thread of its own (:class:`rmqstore.broker.background.ServiceThread`).

    with WireClient(broker_address) as c:
        c.send("T", b"body", queue_id=0, keys="k1")
        consumer = SlowConsumer(c, "CG", "T", queues=[0, 1], delay=0.05).start()
        consumer.resume(); ...; consumer.stop()
"""

from __future__ import annotations

import threading
import time

from rmqstore.broker.background import ServiceThread
from rmqstore.format.properties import properties_to_string
from rmqstore.format.record import decode_record
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

__all__ = ["WireClient", "SlowConsumer"]


class _Connection:
    def __init__(self, address: str):
        self.address = address
        self.client: RemotingClient | None = None

    async def start(self) -> None:
        host, port = self.address.rsplit(":", 1)
        self.client = await RemotingClient().connect(host, int(port))

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()


class WireClient:
    """One connection to a broker, on a loop thread of its own."""

    def __init__(self, address: str, producer_group: str = "PG_wire"):
        self.connection = _Connection(address)
        self.thread = ServiceThread(self.connection, f"wire-{address}")
        self.producer_group = producer_group

    def invoke(self, code: int, ext: dict, body: bytes = b"", timeout: float = 10.0) -> RemotingCommand:
        request = RemotingCommand(code, {k: str(v) for k, v in ext.items()}, body, language="JAVA", version=409)
        return self.thread.call(self.connection.client.invoke(request, timeout), timeout + 5)

    def send(self, topic: str, body: bytes, queue_id: int = 0, keys: str | None = None) -> str:
        """A message put on ``topic``'s queue ``queue_id`` (waiting for the store); its offset msgId."""
        props = {"WAIT": "true"}
        if keys:
            props["KEYS"] = keys
        ext = {"a": self.producer_group, "b": topic, "c": "TBW102", "d": "4", "e": queue_id, "f": 0,
               "g": int(time.time() * 1000), "h": 0, "i": properties_to_string(props), "j": 0, "k": "false",
               "m": "false"}
        answer = self.invoke(RequestCode.SEND_MESSAGE_V2, ext, body)
        assert answer.code == ResponseCode.SUCCESS, f"send to {topic}/{queue_id}: {answer.code} {answer.remark}"
        return answer.ext_fields["msgId"]

    def pull(self, group: str, topic: str, queue_id: int, offset: int, max_nums: int = 1) -> tuple[list, int]:
        """Up to ``max_nums`` messages of a queue from ``offset``: (records, next offset)."""
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
               "maxMsgNums": max_nums, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
               "subscription": "*", "subVersion": 0, "expressionType": "TAG"}
        answer = self.invoke(RequestCode.PULL_MESSAGE, ext)
        next_offset = int(answer.ext_fields.get("nextBeginOffset", offset))
        if answer.code != ResponseCode.SUCCESS:
            return [], next_offset
        records, pos, body = [], 0, answer.body
        while pos < len(body):
            rec = decode_record(body, pos)
            records.append(rec)
            pos += rec.total_size
        return records, next_offset

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        answer = self.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                                                  "queueId": queue_id, "commitOffset": offset})
        assert answer.code == ResponseCode.SUCCESS, f"commit {group} {topic}/{queue_id}: {answer.remark}"

    def close(self) -> None:
        self.thread.stop()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SlowConsumer:
    """A pull consumer of ``group`` on ``topic``'s ``queues`` that takes one message at a time, waits ``delay``
    seconds over each, and commits the offset after it -- while :meth:`resume` d; :meth:`pause` holds it."""

    def __init__(self, client: WireClient, group: str, topic: str, queues, delay: float = 0.05):
        self.client, self.group, self.topic, self.queues, self.delay = client, group, topic, list(queues), delay
        self.offsets = {q: 0 for q in self.queues}
        self.consumed: list = []
        self._running = threading.Event()
        self._idle = threading.Event()  # set while paused, between passes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"slow-{group}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> "SlowConsumer":
        self._thread.start()
        return self

    def resume(self) -> None:
        self._running.set()

    def pause(self, timeout: float = 60) -> None:
        """Hold the consumer; returns once it is between two passes (its offsets committed)."""
        self._running.clear()
        self._idle.clear()
        if self._thread.is_alive() and not self._idle.wait(timeout):
            raise TimeoutError(f"{self.group}: the consumer did not pause in {timeout} s")

    @property
    def committed(self) -> int:
        return sum(self.offsets.values())

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._running.is_set():
                    self._idle.set()
                    time.sleep(0.02)
                    continue
                took = False
                for q in self.queues:
                    records, nxt = self.client.pull(self.group, self.topic, q, self.offsets[q])
                    if records:
                        took = True
                        time.sleep(self.delay)  # the work
                        self.consumed.extend(records)
                    if nxt != self.offsets[q]:
                        self.offsets[q] = nxt
                        self.client.commit(self.group, self.topic, q, nxt)
                if not took:
                    time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc
            self._idle.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
