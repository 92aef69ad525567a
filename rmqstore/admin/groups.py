"""Consumer and producer groups: what mqadmin's updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection and resetOffsetByTime ask (RocketMQ 4.9.8's ``DefaultMQAdminExtImpl``).

A consumer group is found through its retry topic, ``%RETRY%<group>``: every broker the group consumes from has it,
so the group's progress is the union of what those brokers answer.  Resetting a group's offsets asks each broker of
the topic to push the new offsets to the group's online clients (INVOKE_BROKER_TO_RESET_OFFSET); when the group has
none online, the offsets are committed directly, queue by queue, as mqadmin falls back to
(``ResetOffsetByTimeOldCommand``): the offset at the time, committed where it is below the group's (or always, with
``force``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from ..broker.jsonfmt import dumps
from ..broker.message_queue import MessageQueue
from ..broker.topics import DLQ_GROUP_TOPIC_PREFIX, retry_topic
from ..common.errors import AdminError
from ..remoting import RequestCode, ResponseCode
from . import bodies
from .client import LANGUAGE
from ..broker.groups import SubscriptionGroupConfig
from .results import (ConsumerConnection, ConsumerProgress, GroupProgress, GroupsProgress, ProducerConnection,
                      QueueProgress, ResetOffsets, RollbackStats, queue_order, select_broker_addr)
from .topics import Applied, TopicOps

__all__ = ["GroupOps", "parse_timestamp", "NOT_CONSUMED", "CONSUMER_NOT_ONLINE"]

R = RequestCode
CONSUMER_NOT_ONLINE = ResponseCode.CONSUMER_NOT_ONLINE
#: the remark of a group whose brokers hold no offsets of it (``examineConsumeStats``)
NOT_CONSUMED = ("Not found the consumer group consume stats, because return offset table is empty, maybe the "
                "consumer not consume any message")
#: how many groups ``all_consumer_progress`` asks about at a time
GROUPS_AT_ONCE = 16


def parse_timestamp(value: Any) -> int:
    """A reset's time as RocketMQ takes it: ``"now"`` (-1: the end of each queue), milliseconds since the epoch
    (an int or its digits), ``"yyyy-MM-dd#HH:mm:ss:SSS"`` in local time (mqadmin's form), or a datetime."""
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text == "now":
        return -1
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(dt.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{value!r} is no time: give now, milliseconds since the epoch, or "
                         f"yyyy-MM-dd#HH:mm:ss:SSS") from None


class GroupOps(TopicOps):
    """Consumer and producer groups (a part of :class:`~rmqstore.admin.AsyncAdmin`)."""

    # -- subscription groups --------------------------------------------------------------------------------------
    async def update_sub_group(self, group: str, *, broker_addr: str | None = None, cluster: str | None = None,
                               consume_enable: bool = True, consume_from_min_enable: bool = False,
                               consume_broadcast_enable: bool = False, retry_queue_nums: int = 1,
                               retry_max_times: int = 16, broker_id: int = 0, which_broker_when_consume_slowly: int = 1,
                               notify_consumer_ids_changed_enable: bool = True) -> Applied:
        """Create or change a subscription group (``updateSubGroup``; the defaults are mqadmin's)."""
        targets = await self._targets(broker_addr, cluster)
        config = SubscriptionGroupConfig(group, consume_enable, consume_from_min_enable, consume_broadcast_enable,
                                         int(retry_queue_nums), int(retry_max_times), int(broker_id),
                                         int(which_broker_when_consume_slowly), notify_consumer_ids_changed_enable)
        body = dumps(config.to_json()).encode("utf-8")
        for address in targets:
            await self.request(address, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        return Applied(targets, config=config)

    async def delete_sub_group(self, group: str, *, broker_addr: str | None = None, cluster: str | None = None,
                               remove_offset: bool = False) -> Applied:
        """Delete a subscription group (``deleteSubGroup``); from a whole cluster, its retry and dead-letter topics
        go too, as mqadmin deletes them."""
        targets = await self._targets(broker_addr, cluster)
        for address in targets:
            await self.request(address, R.DELETE_SUBSCRIPTIONGROUP, {"groupName": group, "removeOffset": remove_offset})
        applied = Applied(targets)
        if cluster is not None:
            for topic in (retry_topic(group), DLQ_GROUP_TOPIC_PREFIX + group):
                applied.name_servers = (await self.delete_topic(topic, cluster)).name_servers
        return applied

    # -- progress -------------------------------------------------------------------------------------------------
    async def consume_stats(self, broker_addr: str, group: str, topic: str | None = None) -> ConsumerProgress:
        """One broker's view of a group (GET_CONSUME_STATS)."""
        answer = await self.request(broker_addr, R.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic},
                                    timeout=self.timeout * 3)
        return self.decode(broker_addr, R.GET_CONSUME_STATS, bodies.decode_consume_stats, group, answer.body)

    async def consumer_progress(self, group: str, *, topic: str | None = None,
                                show_client_ip: bool = False) -> ConsumerProgress:
        """A group's offsets and lag on every queue it consumes (``consumerProgress -g``); with ``show_client_ip``,
        which client holds each queue (``-s true``: asked of each online client, through its broker)."""
        route = await self.topic_route(retry_topic(group))
        per_broker = await asyncio.gather(*(self.consume_stats(a, group, topic) for a in route.broker_addresses()))
        queues = sorted((q for p in per_broker for q in p.queues), key=queue_order)
        if not queues:
            raise AdminError(f"consumer group {group!r}: {NOT_CONSUMED}", code=CONSUMER_NOT_ONLINE,
                             remark=NOT_CONSUMED)
        progress = ConsumerProgress(group, queues, sum(p.consume_tps for p in per_broker))
        if show_client_ip:
            holders = await self._queue_holders(group)
            for q in progress.queues:
                q.client_ip = holders.get(MessageQueue(q.topic, q.broker_name, q.queue_id))
        return progress

    async def _queue_holders(self, group: str) -> dict[MessageQueue, str]:
        """Which client's IP holds each queue, from the clients' running info; empty when that cannot be had (as
        mqadmin shows N/A then)."""
        try:
            clients = (await self.consumer_connection(group)).connections
            route = await self.topic_route(retry_topic(group))
        except AdminError:
            return {}
        holders: dict[MessageQueue, str] = {}
        for client in clients:
            for address in route.broker_addresses()[:1]:
                try:
                    answer = await self.request(address, R.GET_CONSUMER_RUNNING_INFO,
                                                {"consumerGroup": group, "clientId": client.client_id,
                                                 "jstackEnable": False}, timeout=self.timeout * 3)
                    table = bodies.parse_fastjson(answer.body).get("mqTable") or {}
                except (AdminError, ValueError, AttributeError):
                    continue
                holders.update({mq: client.client_id.split("@")[0] for mq in table if isinstance(mq, MessageQueue)})
        return holders

    async def all_consumer_progress(self) -> GroupsProgress:
        """Every group the name server has a retry topic of: clients online, version, type, rate and total lag
        (``consumerProgress`` without ``-g``); a group that cannot be asked shows what could be had."""
        topics = (await self.topic_list()).topics
        groups = [t[len(retry_topic("")):] for t in topics if t.startswith(retry_topic(""))]
        slots = asyncio.Semaphore(GROUPS_AT_ONCE)

        async def one(group: str) -> GroupProgress:
            async with slots:
                stats, conn = await asyncio.gather(self.consumer_progress(group), self.consumer_connection(group),
                                                   return_exceptions=True)
            for result in (stats, conn):
                if isinstance(result, BaseException) and not isinstance(result, AdminError):
                    raise result
            row = GroupProgress(group, 0, None, None, None, 0.0, 0)
            if isinstance(stats, ConsumerProgress):
                row.consume_tps, row.diff_total = stats.consume_tps, stats.diff_total
            if isinstance(conn, ConsumerConnection):
                row.count, row.version = len(conn.connections), conn.min_version()
                row.consume_type, row.message_model = conn.consume_type, conn.message_model
            return row
        return GroupsProgress(list(await asyncio.gather(*(one(g) for g in groups))))

    # -- connections ----------------------------------------------------------------------------------------------
    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """A group's clients online and their subscriptions (``consumerConnection``), from one broker of the group
        (or the one named)."""
        if broker_addr is None:
            addresses = (await self.topic_route(retry_topic(group))).broker_addresses()
            if not addresses:
                raise AdminError(f"consumer group {group!r}: its retry topic has no broker", code=CONSUMER_NOT_ONLINE)
            broker_addr = addresses[0]
        answer = await self.request(broker_addr, R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        conn = self.decode(broker_addr, R.GET_CONSUMER_CONNECTION_LIST, bodies.decode_consumer_connection, group,
                           answer.body)
        if not conn.connections:
            raise AdminError(f"consumer group {group!r}: Not found the consumer group connection",
                             code=CONSUMER_NOT_ONLINE, address=broker_addr, request=R.GET_CONSUMER_CONNECTION_LIST)
        return conn

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """A producer group's clients connected to a broker of ``topic`` (``producerConnection``)."""
        addresses = (await self.topic_route(topic)).broker_addresses()
        if not addresses:
            raise AdminError(f"topic {topic!r} has no broker")
        answer = await self.request(addresses[0], R.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
        conn = self.decode(addresses[0], R.GET_PRODUCER_CONNECTION_LIST, bodies.decode_producer_connection, group,
                           answer.body)
        if not conn.connections:
            raise AdminError(f"producer group {group!r}: Not found the producer group connection",
                             address=addresses[0], request=R.GET_PRODUCER_CONNECTION_LIST)
        return conn

    # -- resetting offsets ----------------------------------------------------------------------------------------
    async def reset_offset_by_time(self, group: str, topic: str, timestamp: Any, *, force: bool = True,
                                   cplus: bool = False) -> ResetOffsets:
        """Move a group's offsets of a topic to the messages stored at ``timestamp`` (see :func:`parse_timestamp`),
        without restarting its clients (``resetOffsetByTime``; ``cplus``: for C++ clients, mqadmin's ``-c``)."""
        when = parse_timestamp(timestamp)
        route = await self.topic_route(topic)
        offsets: dict[tuple[str, int], int] = {}
        header = {"topic": topic, "group": group, "timestamp": when, "isForce": force}
        for address in route.broker_addresses():
            answer = await self.request(address, R.INVOKE_BROKER_TO_RESET_OFFSET, header,
                                        ok=(ResponseCode.SUCCESS, CONSUMER_NOT_ONLINE),
                                        language="CPP" if cplus else LANGUAGE)
            if answer.code == CONSUMER_NOT_ONLINE:
                return await self._commit_offsets_by_time(group, topic, when, force, route)
            if answer.body:
                offsets.update(self.decode(address, R.INVOKE_BROKER_TO_RESET_OFFSET, bodies.decode_reset_offsets,
                                           answer.body))
        return ResetOffsets(group, topic, when, force, offsets)

    async def _commit_offsets_by_time(self, group: str, topic: str, when: int, force: bool, route) -> ResetOffsets:
        """``resetOffsetByTimestampOld``: per queue of the topic, the offset at ``when`` committed directly."""
        read_queues = {q.broker_name: q.read_queue_nums for q in route.queues}
        rollback: list[RollbackStats] = []
        for broker in route.brokers:
            address = select_broker_addr(broker)
            if address is None:
                continue
            mine = [q for q in (await self.consume_stats(address, group)).queues if q.topic == topic]
            if not mine:  # never consumed: from the queue's start
                stats = {q.queue_id: q for q in await self.topic_stats(address, topic)}
                mine = [QueueProgress(group, topic, broker.broker_name, i, stats[i].max_offset, stats[i].min_offset, 0)
                        for i in range(read_queues.get(broker.broker_name, 0)) if i in stats]
            for queue in mine:
                rollback.append(await self._rollback(address, queue, when, force))
        offsets = {(r.broker_name, r.queue_id): r.rollback_offset for r in rollback}
        return ResetOffsets(group, topic, when, force, offsets, pushed=False, rollback=rollback)

    async def _rollback(self, address: str, queue: QueueProgress, when: int, force: bool) -> RollbackStats:
        where = {"topic": queue.topic, "queueId": queue.queue_id}
        if when == -1:
            answer = await self.request(address, R.GET_MAX_OFFSET, where)
        else:
            answer = await self.request(address, R.SEARCH_OFFSET_BY_TIMESTAMP, dict(where, timestamp=when))
        try:
            offset = int(answer.ext_fields["offset"])
        except (KeyError, ValueError):
            raise AdminError(f"{address} answered no offset for {queue.topic} queue {queue.queue_id}",
                             address=address) from None
        stats = RollbackStats(queue.broker_name, queue.queue_id, queue.broker_offset, queue.consumer_offset, offset,
                              queue.consumer_offset)
        if force or offset <= queue.consumer_offset:
            stats.rollback_offset = offset
            await self.request(address, R.UPDATE_CONSUMER_OFFSET, dict(where, consumerGroup=queue.group,
                                                                       commitOffset=offset, bname=queue.broker_name))
        return stats
