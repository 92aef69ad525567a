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
from .headers import Header, json_body
from .jsonfmt import dumps
from .topics import PERM_READ, PERM_WRITE, retry_topic

__all__ = ["SubscriptionData", "ConsumerGroupInfo", "ClientManager", "connection_info", "version_desc",
           "CURRENT_VERSION", "V3_0_7_SNAPSHOT", "V3_1_8_SNAPSHOT"]

log = logging.getLogger(__name__)

#: the version a request carries is an ordinal of RocketMQ's ``MQVersion.Version``: these the broker checks
V3_0_7_SNAPSHOT, V3_1_8_SNAPSHOT = 28, 62
#: V4_9_8: what this broker's own requests carry
CURRENT_VERSION = 409


def _version_names() -> list[str]:
    """``MQVersion.Version``'s names in order: 3.0.0's pre-releases, then each x.y.z's SNAPSHOT and release
    (3.0.1-3.0.15, 3.1.0-3.2.9, 3.3.1-3.9.9, 4.0.0-5.9.9), then HIGHER_VERSION."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"] + [f"V3_0_0_BETA{i}" for i in range(1, 6)]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, range(1, 16))] + [(3, minor, range(0 if minor < 3 else 1, 10)) for minor in range(1, 10)]
    releases += [(major, minor, range(10)) for major in (4, 5) for minor in range(10)]
    for major, minor, patches in releases:
        for patch in patches:
            names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    return names + ["HIGHER_VERSION"]


_VERSION_NAMES = _version_names()


def version_desc(version: int) -> str:
    """``MQVersion.getVersionDesc``: the name of a version number (the last name for any higher)."""
    return _VERSION_NAMES[min(max(version, 0), len(_VERSION_NAMES) - 1)]


@dataclass
class SubscriptionData:
    """One topic a consumer group subscribes to, as its heartbeat says (the sets in the order sent)."""

    topic: str
    sub_string: str = "*"
    tags_set: tuple = ()
    code_set: tuple = ()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @classmethod
    def from_json(cls, d: dict) -> "SubscriptionData":
        return cls(str(d["topic"]), str(d.get("subString") or "*"), tuple(str(t) for t in d.get("tagsSet") or ()),
                   tuple(int(c) for c in d.get("codeSet") or ()), int(d.get("subVersion") or 0),
                   str(d.get("expressionType") or "TAG"), d.get("classFilterMode") is True)

    def to_json(self) -> dict:
        """SubscriptionData's fastjson (filterClassSource is never serialized)."""
        return {"classFilterMode": self.class_filter_mode, "codeSet": list(self.code_set),
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": list(self.tags_set), "topic": self.topic}


@dataclass
class ConsumerGroupInfo:
    group: str
    connections: dict[str, Connection] = field(default_factory=dict)  # client id -> connection
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    last_update: float = 0.0

    def update_subscriptions(self, subs: dict[str, SubscriptionData]) -> None:
        """``updateSubscription``: a topic new to the group or with a newer version is taken, a topic the
        heartbeat no longer names is dropped."""
        for topic, sub in subs.items():
            old = self.subscriptions.get(topic)
            if old is None or sub.sub_version > old.sub_version:
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in subs]:
            log.warning("subscription changed, group: %s remove topic %s", self.group, topic)
            del self.subscriptions[topic]

    def connection_body(self) -> dict:
        """ConsumerConnection: the group's clients and what they subscribe to, how and from where."""
        return {"connectionSet": [connection_info(conn) for _, conn in sorted(self.connections.items())],
                "consumeFromWhere": self.consume_from_where, "consumeType": self.consume_type,
                "messageModel": self.message_model,
                "subscriptionTable": {t: s.to_json() for t, s in sorted(self.subscriptions.items())}}


def connection_info(conn: Connection) -> dict:
    """A client's Connection (the admin's view): its id, address, language and version, from its heartbeat."""
    attrs = conn.attributes
    return {"clientAddr": conn.remote_addr_text, "clientId": attrs.get("client_id", ""),
            "language": attrs.get("language", "JAVA"), "version": attrs.get("version", 0)}


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
        server.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.get_consumer_connection_list)
        server.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.get_producer_connection_list)

    # -- processors -----------------------------------------------------------------------------
    def heart_beat(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        data = json_body(req.body, "heartbeat") if req.body else {}
        client_id = str(data.get("clientID", ""))
        conn.attributes.update(client_id=client_id, language=req.language, version=req.version)
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
        info.consume_type = str(cd.get("consumeType") or "CONSUME_PASSIVELY")
        info.message_model = str(cd.get("messageModel") or "CLUSTERING")
        info.consume_from_where = str(cd.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET")
        info.last_update = time.monotonic()
        changed = info.connections.get(client_id) is not conn
        info.connections[client_id] = conn
        info.update_subscriptions(subs)
        config = self.groups.table.get(group)
        if changed and (config is None or config.notify_consumer_ids_changed_enable):
            self._notify_ids_changed(info)

    def unregister_client(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        client_id = h.str("clientID")
        group = h.str("consumerGroup", "")
        producer_group = h.str("producerGroup", "")
        if producer_group:
            clients = self.producers.get(producer_group, {})
            clients.pop(client_id, None)
            if not clients:  # unregisterProducer: the group goes with its last client (a closed one stays)
                self.producers.pop(producer_group, None)
        if group:
            self._remove_consumer(group, client_id)
        return req.response(ResponseCode.SUCCESS)

    def get_consumer_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = Header(req.ext_fields).str("consumerGroup")
        info = self.consumers.get(group)
        if info is None or not info.connections:
            return req.response(ResponseCode.SYSTEM_ERROR, "no consumer for this group, " + group)
        return req.response(ResponseCode.SUCCESS, body=dumps({"consumerIdList": sorted(info.connections)}).encode())

    def get_consumer_connection_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = Header(req.ext_fields).str("consumerGroup")
        info = self.consumers.get(group)
        if info is None:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return req.response(ResponseCode.SUCCESS, body=dumps(info.connection_body()).encode("utf-8"))

    def get_producer_connection_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = Header(req.ext_fields).str("producerGroup")
        clients = self.producers.get(group)
        if clients is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {"connectionSet": [connection_info(c) for _, c in sorted(clients.items())]}
        return req.response(ResponseCode.SUCCESS, body=dumps(body).encode("utf-8"))

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
