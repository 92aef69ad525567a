"""What the admin tools ask a broker about its statistics and status (RocketMQ 4.9.8's ``AdminBrokerProcessor``,
the part behind ``mqadmin brokerStatus``, ``clusterList``, ``statsAll``, ``topicStatus``, ``consumerProgress``,
``brokerConsumeStats`` and the message track of ``queryMsgById``).

=============================== ==== =============================================================================
request                          code answer (the Java class the tool parses the body as)
=============================== ==== =============================================================================
GET_BROKER_RUNTIME_INFO           28 KVTable: :func:`.runtime_info.runtime_info`
VIEW_BROKER_STATS_DATA           315 BrokerStatsData: one key's minute, hour and day figures (:mod:`.stats`)
GET_TOPIC_STATS_INFO             202 TopicStatsTable: each write queue's min and max offset, last message's time
GET_CONSUME_STATS                208 ConsumeStats: each read queue's broker and consumer offsets, the time of the
                                     last message consumed, and the group's minute consume rate
GET_BROKER_CONSUME_STATS         317 ConsumeStatsList: ConsumeStats of every subscription group, topic by topic
QUERY_TOPIC_CONSUME_BY_WHO       300 GroupList: the groups online with a subscription to the topic, and the
                                     groups that committed an offset of it
=============================== ==== =============================================================================

Which topics a group is shown for follows 4.9.8: the topics it committed offsets of (or the one asked for),
less those an *online* group does not subscribe to; a topic the broker does not have is left out.  Maps keyed
by queue are fastjson's object-keyed maps (:class:`.message_queue.MessageQueue`); the order of the groups in a
list is sorted here (4.9.8's is a hash map's order).
"""

from __future__ import annotations

from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .headers import Header
from .jsonfmt import dumps
from .message_queue import MessageQueue
from .runtime_info import runtime_info
from .stats import DAY, HOUR, MINUTE

__all__ = ["AdminStatsProcessor", "message_store_timestamp", "DIFFERENCES"]

#: where the statistics and status answers deliberately differ from Apache RocketMQ 4.9.8
DIFFERENCES = {
    "put_latency_buckets": "putMessageDistributeTime shows the store's 7 put-latency buckets (<=0, 0-10, 10-50, "
                           "50-100, 100-200, 200-500 ms and [500ms~] for the rest) where 4.9.8 has 13, and "
                           "putLatency99/999 interpolate within those buckets (4.9.8: within ~70 finer ones).",
    "idle_queues": "sendThreadPoolQueueSize, pullThreadPoolQueueSize, queryThreadPoolQueueSize, EndTransactionQueueSize "
                   "and their head waits are 0: requests are served on the event loop as they come, not queued for "
                   "thread pools; pageCacheLockTimeMills is 0 (the put lock's hold is not timed).",
    "gets_counted": "getFoundTps, getMissTps, getTransferedTps and msgGetTotal* count the consumers' pulls; 4.9.8 also "
                    "counts the transaction check's reads of its half and op topics.",
    "first_second": "In the first second after start 4.9.8 answers GET_BROKER_RUNTIME_INFO with an error (no rate "
                    "sample yet); we answer with empty rates.",
    "zero_span": "A sampling window whose ends are the same instant (a clock set back) has rate 0; 4.9.8 divides by "
                 "zero (Infinity).",
    "group_order": "GET_BROKER_CONSUME_STATS lists the groups, and QUERY_TOPIC_CONSUME_BY_WHO names them, sorted; "
                   "4.9.8's order is its hash maps'.",
}


def message_store_timestamp(store, topic: str, queue_id: int, queue_offset: int) -> int:
    """DefaultMessageStore.getMessageStoreTimeStamp: the store time of the message at a queue offset, -1 if none."""
    result = store.get_message("", topic, queue_id, queue_offset, 1)
    return result.messages[0].store_timestamp if result.found else -1


def _snapshot_json(snapshot) -> dict:
    return {"avgpt": snapshot.avgpt, "sum": snapshot.sum, "tps": snapshot.tps}


def _ok(req: RemotingCommand, body) -> RemotingCommand:
    return req.response(ResponseCode.SUCCESS, body=dumps(body).encode("utf-8"))


class AdminStatsProcessor:
    def __init__(self, broker):
        self.broker = broker

    def register(self, server) -> None:
        server.register(RequestCode.GET_BROKER_RUNTIME_INFO, self.get_broker_runtime_info)
        server.register(RequestCode.VIEW_BROKER_STATS_DATA, self.view_broker_stats_data)
        server.register(RequestCode.GET_TOPIC_STATS_INFO, self.get_topic_stats_info)
        server.register(RequestCode.GET_CONSUME_STATS, self.get_consume_stats)
        server.register(RequestCode.GET_BROKER_CONSUME_STATS, self.get_broker_consume_stats)
        server.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.query_topic_consume_by_who)

    def _queue(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.broker.config.broker_name, queue_id)

    # -- the processors
    def get_broker_runtime_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, {"table": runtime_info(self.broker)})

    def view_broker_stats_data(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        name, key = h.str("statsName"), h.str("statsKey")
        item = self.broker.stats.manager.get_stats_item(name, key)
        if item is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        minute, hour, day = item.snapshot(MINUTE), item.snapshot(HOUR), item.snapshot(DAY)
        return _ok(req, {"statsDay": _snapshot_json(day), "statsHour": _snapshot_json(hour),
                         "statsMinute": _snapshot_json(minute)})

    def get_topic_stats_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = Header(req.ext_fields).str("topic")
        config = self.broker.topics.select(topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self.broker.store
        table = {}
        for queue_id in range(config.write_queue_nums):
            low = max(store.get_min_offset_in_queue(topic, queue_id), 0)
            high = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            last = message_store_timestamp(store, topic, queue_id, high - 1) if high > 0 else 0
            table[self._queue(topic, queue_id)] = {"lastUpdateTimestamp": last, "maxOffset": high, "minOffset": low}
        return _ok(req, {"offsetTable": table})

    def get_consume_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        group, topic = h.str("consumerGroup"), h.str("topic", "")
        topics = {topic} if topic.strip() else self.broker.offsets.which_topic_by_consumer(group)
        tps, table = 0.0, {}
        for t in sorted(topics):
            shown = self._consume_stats(group, t, read_queues=True)
            if shown is not None:
                tps += shown["consumeTps"]
                table.update(shown["offsetTable"])
        return _ok(req, {"consumeTps": tps, "offsetTable": table})

    def get_broker_consume_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        order_only = Header(req.ext_fields).bool("isOrder")
        listed, total_diff = [], 0
        for group in sorted(self.broker.groups.table):
            per_topic = []
            for topic in sorted(self.broker.offsets.which_topic_by_consumer(group)):
                config = self.broker.topics.select(topic)
                if config is None or (order_only and not config.order):
                    continue
                shown = self._consume_stats(group, topic, read_queues=False)
                if shown is not None:
                    total_diff += sum(w["brokerOffset"] - w["consumerOffset"] for w in shown["offsetTable"].values())
                    per_topic.append(shown)
            listed.append({group: per_topic})
        return _ok(req, {"brokerAddr": self.broker.config.broker_addr, "consumeStatsList": listed,
                         "totalDiff": total_diff})

    def query_topic_consume_by_who(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = Header(req.ext_fields).str("topic")
        online = {g for g, info in self.broker.clients.consumers.items() if topic in info.subscriptions}
        return _ok(req, {"groupList": sorted(online | self.broker.offsets.which_group_by_topic(topic))})

    # -- one group's view of one topic
    def _consume_stats(self, group: str, topic: str, read_queues: bool) -> dict | None:
        """ConsumeStats of ``group`` on ``topic`` over its read queues (GET_CONSUME_STATS) or its write queues
        (GET_BROKER_CONSUME_STATS, as 4.9.8); None when the topic is not shown: unknown here, or the group is
        online without a subscription to it."""
        config = self.broker.topics.select(topic)
        if config is None:
            return None
        info = self.broker.clients.consumers.get(group)
        if info is not None and info.subscriptions and topic not in info.subscriptions:
            return None
        store, offsets = self.broker.store, self.broker.offsets
        table = {}
        for queue_id in range(config.read_queue_nums if read_queues else config.write_queue_nums):
            broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            consumer_offset = max(offsets.query_offset(group, topic, queue_id), 0)
            last = message_store_timestamp(store, topic, queue_id, consumer_offset - 1) if consumer_offset else 0
            table[self._queue(topic, queue_id)] = {"brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                                                   "lastTimestamp": max(last, 0)}
        return {"consumeTps": self.broker.stats.manager.tps_group_get_nums(group, topic), "offsetTable": table}
