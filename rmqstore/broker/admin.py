"""What an operator changes on a broker: topics, subscription groups, the broker's configuration.

These are the requests ``mqadmin`` (and the RocketMQ Dashboard) send for ``updateTopic``,
``deleteTopic``, ``updateSubGroup``, ``deleteSubGroup``, ``getBrokerConfig`` and
``updateBrokerConfig`` -- RocketMQ 4.9.8's ``AdminBrokerProcessor``, the part that edits tables:

* UPDATE_AND_CREATE_TOPIC (17) puts a topic config from the header (queue counts, permission,
  filter type, system flag -- never the ``order`` flag, which 4.9.8 keeps in the name server's KV
  config), persists ``config/topics.json`` and re-registers with the name servers at once
  (``TopicConfigManager.on_change``).  DELETE_TOPIC_IN_BROKER (215) removes the
  config and the topic's consume queues (files and next queue offsets); the consumer offsets of
  groups stay, as in 4.9.8, and the route on the name servers is the admin's to delete
  (DELETE_TOPIC_IN_NAMESRV).  Neither touches a system topic (``TopicValidator.isSystemTopic``).
* UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) takes a SubscriptionGroupConfig as JSON body,
  DELETE_SUBSCRIPTIONGROUP (207) removes one (and the group's offsets when ``removeOffset``).
* GET_ALL_TOPIC_CONFIG (21) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) answer the tables as
  their files hold them (fastjson, not pretty).
* GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25) read and change the configuration as one
  table of properties, persisted in the broker's broker.conf: :mod:`rmqstore.broker.broker_properties`.

A slave refuses every change with 4.9.8's remark: its tables come from its master.
"""

from __future__ import annotations

import asyncio
import logging

from ..common.config import BrokerRole
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .broker_properties import BrokerProperties
from .groups import SubscriptionGroupConfig
from .headers import BodyError, Header, HeaderError, json_body
from .topics import TopicConfig, validate_topic

__all__ = ["AdminBrokerProcessor", "TOPIC_FILTER_TYPES", "DIFFERENCES"]

log = logging.getLogger(__name__)

#: where the admin requests deliberately differ from Apache RocketMQ 4.9.8
DIFFERENCES = {
    "delete_topic_queues": "DELETE_TOPIC_IN_BROKER destroys the consume queues of the topic deleted. 4.9.8's "
                           "cleanUnusedTopic destroys those of every topic missing from the topic table (but "
                           "SCHEDULE_TOPIC_XXXX and RMQ_SYS_TRANS_OP_HALF_TOPIC) -- with a half message parked before "
                           "the transaction check first listed RMQ_SYS_TRANS_HALF_TOPIC, or a topics.json that lost "
                           "entries, that sweeps queues nobody asked to delete.",
    "config_order": "topics.json, subscriptionGroup.json, the broker.conf UPDATE_BROKER_CONFIG rewrites and the "
                    "GET_BROKER_CONFIG text list their entries sorted by name; 4.9.8 writes them in the order of its "
                    "hash maps. Each entry is the same text.",
    "config_keys_unused": "GET_BROKER_CONFIG answers every 4.9.8 key; the ones rmqstore does not use (thread pools, "
                          "file deletion, DLedger...) show 4.9.8's default, or broker.conf's value, and an update of "
                          "one is kept, answered and persisted but changes nothing. rmqstore's own keys "
                          "(maxConnections, serverFrameTimeoutSeconds, ...) are answered beside them; rocketmqHome is "
                          "not (there is no RocketMQ home).",
    "broker_properties_path": "Started without a broker.conf, UPDATE_BROKER_CONFIG persists to "
                              "<store>/config/broker.properties; 4.9.8 writes ~/store/config/broker.properties -- the "
                              "same file for a store in 4.9.8's default place, and a broker never writes outside its "
                              "store and its broker.conf.",
}

#: TopicFilterType's names
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")

_SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


class AdminBrokerProcessor:
    def __init__(self, broker):
        self.broker = broker
        self.properties = BrokerProperties(broker)

    def register(self, server) -> None:
        server.register(RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic)
        server.register(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic)
        server.register(RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config)
        server.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_and_create_subscription_group)
        server.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group)
        server.register(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_group)
        server.register(RequestCode.GET_BROKER_CONFIG, self.get_broker_config)
        server.register(RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config)

    def _refused(self, req: RemotingCommand, topic: str | None = None) -> RemotingCommand | None:
        """The refusal of a change on a slave (``validateSlave``), or of a topic that is not valid or a
        system topic; None when the change may go ahead."""
        if self.broker.store_config.broker_role is BrokerRole.SLAVE:
            return req.response(ResponseCode.SYSTEM_ERROR, _SLAVE_REMARK)
        if topic is None:
            return None
        remark = validate_topic(topic)
        if remark is None and self.broker.topics.is_system_topic(topic):
            remark = f"The topic[{topic}] is conflict with system topic."
        return None if remark is None else req.response(ResponseCode.SYSTEM_ERROR, remark)

    # -- topics ---------------------------------------------------------------------------------
    def update_and_create_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        topic = h.str("topic")
        log.info("updateAndCreateTopic called by %s", conn.remote_addr_text)
        refusal = self._refused(req, topic)
        if refusal is not None:
            return refusal
        filter_type = h.str("topicFilterType")
        if filter_type not in TOPIC_FILTER_TYPES:
            raise HeaderError(f"topicFilterType {filter_type[:40]!r} is none of {', '.join(TOPIC_FILTER_TYPES)}")
        config = TopicConfig(topic, h.int("readQueueNums", bits=32), h.int("writeQueueNums", bits=32),
                             h.int("perm", bits=32), filter_type, h.int("topicSysFlag", 0, bits=32))
        self.broker.topics.put(config)
        return req.response(ResponseCode.SUCCESS)

    async def delete_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = Header(req.ext_fields).str("topic")
        log.info("deleteTopic called by %s", conn.remote_addr_text)
        refusal = self._refused(req, topic)
        if refusal is not None:
            return refusal
        self.broker.topics.delete(topic)
        # off the loop: it waits for a dispatch pass under way to finish
        await asyncio.get_running_loop().run_in_executor(None, self.broker.store.destroy_topic_queues, topic)
        return req.response(ResponseCode.SUCCESS)

    def get_all_topic_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self.broker.topics.encode().encode("utf-8"))

    # -- subscription groups --------------------------------------------------------------------
    def update_and_create_subscription_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        refusal = self._refused(req)
        if refusal is not None:
            return refusal
        log.info("updateAndCreateSubscriptionGroup called by %s", conn.remote_addr_text)
        try:
            config = SubscriptionGroupConfig.from_json(json_body(req.body, "subscription group"))
        except ValueError as exc:
            raise BodyError(f"the subscription group body: {exc}") from None
        self.broker.groups.put(config)
        return req.response(ResponseCode.SUCCESS)

    def delete_subscription_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        refusal = self._refused(req)
        if refusal is not None:
            return refusal
        h = Header(req.ext_fields)
        group = h.str("groupName")
        log.info("deleteSubscriptionGroup called by %s", conn.remote_addr_text)
        self.broker.groups.delete(group)
        if h.bool("removeOffset"):
            self.broker.offsets.remove_offset(group)
        return req.response(ResponseCode.SUCCESS)

    def get_all_subscription_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self.broker.groups.encode().encode("utf-8"))

    # -- the broker's configuration -------------------------------------------------------------
    def get_broker_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, ext_fields={"version": self.properties.version_json()},
                            body=self.properties.text().encode("utf-8"))

    def update_broker_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        log.info("updateBrokerConfig called by %s", conn.remote_addr_text)
        if req.body:
            try:
                text = req.body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BodyError(f"the broker config body is not UTF-8: {exc}") from None
            refusal = self.properties.update(text)
            if refusal is not None:
                return req.response(ResponseCode.NO_PERMISSION, refusal)
        return req.response(ResponseCode.SUCCESS)
