"""A message a consumer could not consume goes back (CONSUMER_SEND_MSG_BACK, 36).

When a push consumer's listener fails, the client sends the broker the message's
commitlog offset and asks for it back later.  The broker reads the message there and
stores a copy under the group's retry topic ``%RETRY%group`` with reconsume times + 1,
the original topic in RETRY_TOPIC and the first message's id in ORIGIN_MESSAGE_ID; it
sets delay level ``3 + reconsume times`` (10 s, 30 s, 1 min ... with the default table)
unless the client named one, so the store parks it in the schedule topic and
:mod:`.schedule` delivers it to the retry topic when due -- which every push consumer of
the group subscribes to.  Once the message has been reconsumed ``maxReconsumeTimes``
times (the group's retryMaxTimes, 16 by default, from subscriptionGroup.json; the client's
own value when it sends one), or when the client asks
for delay level -1, it goes to the dead-letter topic ``%DLQ%group`` instead, at once
(DELAY set to 0, which the store reads as "no delay").
"""

from __future__ import annotations

import asyncio
import random

from ..format.message import Message
from ..format.properties import DELAY, WAIT, properties_to_string, string_to_properties
from ..format.record import create_message_id
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .headers import Header
from .results import response_of_put
from .topics import DLQ_GROUP_TOPIC_PREFIX, PERM_READ, PERM_WRITE, is_writeable, retry_topic

__all__ = ["SendMessageBackProcessor", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID"]

RETRY_TOPIC = "RETRY_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_NUMS_PER_GROUP = 1


class SendMessageBackProcessor:
    def __init__(self, broker):
        self.broker = broker

    def register(self, server) -> None:
        server.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.process)

    async def process(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        h = Header(req.ext_fields)
        group, offset = h.str("group"), h.int("offset")
        delay_level = h.int("delayLevel", 0, 32)
        group_config = broker.groups.find(group)
        if group_config is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        if group_config.retry_queue_nums <= 0:
            return req.response(ResponseCode.SUCCESS)
        max_times = h.int("maxReconsumeTimes", group_config.retry_max_times, 32)
        if not is_writeable(broker.config.broker_permission):
            return req.response(ResponseCode.NO_PERMISSION,
                                f"the broker[{broker.config.broker_ip1}] sending message is forbidden")
        record = broker.store.look_message_by_offset(offset)
        if record is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        props = string_to_properties(record.properties)
        props.setdefault(RETRY_TOPIC, record.topic)
        props[WAIT] = "false"
        if record.reconsume_times >= max_times or delay_level < 0:
            topic = DLQ_GROUP_TOPIC_PREFIX + group
            broker.topics.create_system_topic(topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ)
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            props[DELAY] = "0"  # setDelayTimeLevel(0): straight to the dead letters, no schedule
        else:
            topic = retry_topic(group)
            config = broker.topics.create_system_topic(topic, group_config.retry_queue_nums, PERM_WRITE | PERM_READ)
            queue_id = random.randrange(max(1, config.write_queue_nums))
            props[DELAY] = str(delay_level if delay_level > 0 else 3 + record.reconsume_times)
        if not props.get(ORIGIN_MESSAGE_ID):
            props[ORIGIN_MESSAGE_ID] = create_message_id(record.store_host, record.physical_offset)
        msg = Message(topic=topic, body=record.body, queue_id=queue_id, flag=record.flag,
                      properties=properties_to_string(props), sys_flag=record.sys_flag,
                      born_timestamp=record.born_timestamp, born_host=record.born_host,
                      reconsume_times=record.reconsume_times + 1)
        result = await asyncio.wrap_future(broker.store.async_put_message(msg))
        broker.stats.count_sent_back(broker.store, group, props[RETRY_TOPIC], msg, result)
        code, remark = response_of_put(result)
        return req.response(ResponseCode.SUCCESS if result.ok else code, remark)
