"""A queue of a topic on a broker (RocketMQ's ``MessageQueue``): the key of many admin bodies' maps.

fastjson writes a ``Map<MessageQueue, Long>`` with the queue object itself as the key
(``{{"brokerName":"broker-a","queueId":0,"topic":"T"}:12}``); :func:`rmqstore.broker.jsonfmt.dumps`
does so for any key with a ``to_json()``, which is what :class:`MessageQueue` gives.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MessageQueue"]


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}
