"""Clients of the broker: heartbeats, consumer groups and their subscriptions.

A RocketMQ client announces itself with HEART_BEAT (34) every 30 s: its client id, the
producer groups it sends for and, per consumer group, its subscriptions (topic, tag
expression, tag hash codes, version).  The broker keeps that per connection: the
subscriptions are what a PULL_MESSAGE without an inline subscription is filtered by, the
list of a group's client ids is what each consumer divides the queues by (rebalance,
GET_CONSUMER_LIST_BY_GROUP), and a producer's connection is where a transaction check
would be sent.  When a group's membership changes, its other members are told
(NOTIFY_CONSUMER_IDS_CHANGED, oneway) so they rebalance at once.  A closed connection
takes its client out of every group (RocketMQ's ClientHousekeepingService).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .headers import Header
from .jsonfmt import dumps, loads
from .topics import PERM_READ, PERM_WRITE, retry_topic

__all__ = ["SubscriptionData", "ConsumerGroupInfo", "ClientManager"]

log = logging.getLogger(__name__)


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = "*"
    tags_set: frozenset = frozenset()
    code_set: frozenset = frozenset()
    sub_version: int = 0
    expression_type: str = "TAG"

    @classmethod
    def from_json(cls, d: dict) -> "SubscriptionData":
        return cls(str(d["topic"]), str(d.get("subString") or "*"), frozenset(d.get("tagsSet") or ()),
                   frozenset(int(c) for c in d.get("codeSet") or ()), int(d.get("subVersion") or 0),
                   str(d.get("expressionType") or "TAG"))


@dataclass
class ConsumerGroupInfo:
    group: str
    connections: dict[str, Connection] = field(default_factory=dict)  # client id -> connection
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    last_update: float = 0.0


class ClientManager:
    """Producer and consumer groups as the heartbeats describe them."""

    def __init__(self, topics, groups):
        self.topics = topics
        self.groups = groups
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[str, Connection]] = {}

    def register(self, server) -> None:
        server.register(RequestCode.HEART_BEAT, self.heart_beat)
        server.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        server.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list)

    # -- processors -----------------------------------------------------------------------------
    def heart_beat(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        data = loads(req.body.decode("utf-8")) if req.body else {}
        if not isinstance(data, dict):
            raise ValueError("the heartbeat body is not a JSON object")
        client_id = str(data.get("clientID", ""))
        conn.attributes["client_id"] = client_id
        for cd in data.get("consumerDataSet") or ():
            group = str(cd["groupName"])
            config = self.groups.find(group)
            if config is not None:
                self.topics.create_system_topic(retry_topic(group), config.retry_queue_nums, PERM_READ | PERM_WRITE)
            subs = {s.topic: s for s in (SubscriptionData.from_json(d) for d in cd.get("subscriptionDataSet") or ())}
            self._register_consumer(group, client_id, conn, subs, cd)
        for pd in data.get("producerDataSet") or ():
            self.producers.setdefault(str(pd["groupName"]), {})[client_id] = conn
        return req.response(ResponseCode.SUCCESS)

    def _register_consumer(self, group, client_id, conn, subs, cd) -> None:
        info = self.consumers.get(group)
        if info is None:
            info = self.consumers[group] = ConsumerGroupInfo(group)
        info.message_model = str(cd.get("messageModel") or "CLUSTERING")
        info.consume_from_where = str(cd.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET")
        info.last_update = time.monotonic()
        changed = info.connections.get(client_id) is not conn
        info.connections[client_id] = conn
        for topic, sub in subs.items():
            old = info.subscriptions.get(topic)
            if old is None or sub.sub_version > old.sub_version:
                info.subscriptions[topic] = sub
        config = self.groups.table.get(group)
        if changed and (config is None or config.notify_consumer_ids_changed_enable):
            self._notify_ids_changed(info)

    def unregister_client(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        client_id = h.str("clientID")
        group = h.str("consumerGroup", "")
        producer_group = h.str("producerGroup", "")
        if producer_group:
            self.producers.get(producer_group, {}).pop(client_id, None)
        if group:
            self._remove_consumer(group, client_id)
        return req.response(ResponseCode.SUCCESS)

    def get_consumer_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = Header(req.ext_fields).str("consumerGroup")
        info = self.consumers.get(group)
        if info is None or not info.connections:
            return req.response(ResponseCode.SYSTEM_ERROR, "no consumer for this group, " + group)
        return req.response(ResponseCode.SUCCESS, body=dumps({"consumerIdList": sorted(info.connections)}).encode())

    # -- membership -----------------------------------------------------------------------------
    def _remove_consumer(self, group: str, client_id: str) -> None:
        info = self.consumers.get(group)
        if info is not None and info.connections.pop(client_id, None) is not None:
            if not info.connections:
                del self.consumers[group]
            else:
                self._notify_ids_changed(info)

    def connection_closed(self, conn: Connection) -> None:
        for group, info in list(self.consumers.items()):
            for client_id, c in list(info.connections.items()):
                if c is conn:
                    self._remove_consumer(group, client_id)
        for clients in self.producers.values():
            for client_id, c in list(clients.items()):
                if c is conn:
                    del clients[client_id]

    def _notify_ids_changed(self, info: ConsumerGroupInfo) -> None:
        for conn in list(info.connections.values()):
            conn.send(RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": info.group},
                                      flag=2))

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumers.get(group)
        return None if info is None else info.subscriptions.get(topic)
