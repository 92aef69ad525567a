"""The broker asking its clients (RocketMQ's ``Broker2Client``): running info and offset resets.

A client's connection carries requests both ways (:mod:`rmqstore.remoting.server`), and the
broker uses that for what only the client knows or what the client must do:

* GET_CONSUMER_RUNNING_INFO (307, ``mqadmin consumerStatus`` and ``consumerConnection -s``):
  the admin names a group and a client id; the broker sends the admin's header and body to
  that client over the client's own connection and relays the client's answer -- the
  ConsumerRunningInfo the client builds -- as it is.  A client not online, or older than
  V3_1_8_SNAPSHOT, is refused; one that does not answer in 10 s gives CONSUME_MSG_TIMEOUT.
* INVOKE_BROKER_TO_RESET_OFFSET (222, ``mqadmin resetOffsetByTime``): per queue of the topic
  (its write queue count), the offset of the message stored at the timestamp (``-1``: the
  queue's end) -- forced, or only where it is below the group's committed offset -- pushed to
  every online client of the group with RESET_CONSUMER_CLIENT_OFFSET (220, oneway).  A running
  consumer drops what it holds, jumps there and commits the offsets back, which is how they are
  stored (4.9.8's broker never writes them itself).  The answer is the table; a C++ admin
  (``-c``: its request's language says CPP) gets the C++ client's list form pushed instead.
  A group with no client online is refused CONSUMER_NOT_ONLINE, on which mqadmin falls back to
  committing the offsets through UPDATE_CONSUMER_OFFSET itself.
"""

from __future__ import annotations

import asyncio
import logging

from ..remoting import Connection, RemotingCommand, RemotingTimeoutError, RequestCode, ResponseCode
from .clients import CURRENT_VERSION, V3_0_7_SNAPSHOT, V3_1_8_SNAPSHOT, version_desc
from .headers import Header
from .jsonfmt import dumps
from .message_queue import MessageQueue

__all__ = ["Broker2Client", "CALL_CLIENT_TIMEOUT", "DIFFERENCES"]

log = logging.getLogger(__name__)

#: seconds the broker waits for a client's answer (``callClient``'s 10000 ms)
CALL_CLIENT_TIMEOUT = 10.0

#: where the broker's requests to its clients deliberately differ from Apache RocketMQ 4.9.8
DIFFERENCES = {
    "consumer_status": "INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, GET_CONSUMER_STATUS_FROM_CLIENT to each client) "
                       "is not answered: no command of 4.9.8's mqadmin sends it (getConsumerStatus is not among "
                       "MQAdminStartup's commands; consumerStatus asks GET_CONSUMER_RUNNING_INFO).",
    "call_client_remarks": "A client that does not answer in time, or whose connection fails, is named in the "
                           "remark with our exception's text where 4.9.8 appends its Java stack frame.",
}


class Broker2Client:
    def __init__(self, broker):
        self.broker = broker
        self._pushes: set[asyncio.Task] = set()

    def register(self, server) -> None:
        server.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info)
        server.register(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset)

    # -- asking one consumer ----------------------------------------------------------------------
    async def get_consumer_running_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        return await self.call_consumer(req, h.str("consumerGroup"), h.str("clientId"))

    async def call_consumer(self, req: RemotingCommand, group: str, client_id: str) -> RemotingCommand:
        """``callConsumer``: the admin's request, header and body, asked of the client; its answer relayed."""
        info = self.broker.clients.consumers.get(group)
        client = None if info is None else info.connections.get(client_id)
        if client is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        version = client.attributes.get("version", 0)
        if version < V3_1_8_SNAPSHOT:
            return req.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> Version "
                                                           f"<{version_desc(version)}> too low to finish, please "
                                                           f"upgrade it to V3_1_8_SNAPSHOT")
        ask = RemotingCommand(req.code, dict(req.ext_fields), req.body, version=CURRENT_VERSION)
        try:
            answer = await client.invoke(ask, CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            return req.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                f"consumer <{group}> <{client_id}> Timeout: {type(exc).__name__}: {exc}")
        except (ConnectionError, OSError) as exc:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"invoke consumer <{group}> <{client_id}> Exception: {type(exc).__name__}: {exc}")
        return req.response(answer.code, answer.remark, answer.ext_fields, answer.body)

    # -- resetting a group's offsets --------------------------------------------------------------
    def reset_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        topic, group, timestamp, force = h.str("topic"), h.str("group"), h.int("timestamp"), h.bool("isForce")
        log.info("[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%d, isForce=%s",
                 conn.remote_addr_text, topic, group, timestamp, force)
        config = self.broker.topics.select(topic)
        if config is None:
            return req.response(ResponseCode.SYSTEM_ERROR, "[reset-offset] reset offset failed, no topic in this "
                                                           f"broker. topic={topic}")
        table = self._offsets_by_time(topic, group, config.write_queue_nums, timestamp, force)
        if table is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
        info = self.broker.clients.consumers.get(group)
        if info is None or not info.connections:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE, "Consumer not online, so can not reset offset, "
                                                                  f"Group: {group} Topic: {topic} "
                                                                  f"Timestamp: {timestamp}")
        for client in info.connections.values():
            version = client.attributes.get("version", 0)
            if version < V3_0_7_SNAPSHOT:
                return req.response(ResponseCode.SYSTEM_ERROR, "the client does not support this feature. "
                                                               f"version={version_desc(version)}")
        push = RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                               {"topic": topic, "group": group, "timestamp": str(timestamp), "isForce": "false"},
                               _reset_body(table, req.language == "CPP"), version=CURRENT_VERSION)
        for client_id, client in list(info.connections.items()):
            self._push(client, push, client_id, topic, group)
        return req.response(ResponseCode.SUCCESS, body=_reset_body(table, False))

    def _offsets_by_time(self, topic: str, group: str, queues: int, timestamp: int,
                         force: bool) -> dict[MessageQueue, int] | None:
        """Per queue, the offset the group resets to; None when a queue has no committed offset."""
        store, offsets = self.broker.store, self.broker.offsets
        table = {}
        for queue_id in range(queues):
            committed = offsets.query_offset(group, topic, queue_id)
            if committed == -1:
                return None
            if timestamp == -1:
                offset = store.get_max_offset_in_queue(topic, queue_id)
            else:
                offset = store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            offset = max(offset, 0)
            mq = MessageQueue(topic, self.broker.config.broker_name, queue_id)
            table[mq] = offset if force or offset < committed else committed
        return table

    def _push(self, client: Connection, push: RemotingCommand, client_id: str, topic: str, group: str) -> None:
        """One oneway RESET_CONSUMER_CLIENT_OFFSET (a copy: each send takes an opaque of its own)."""
        request = RemotingCommand(push.code, dict(push.ext_fields), push.body, version=push.version)

        async def send() -> None:
            try:
                await client.invoke_oneway(request)
                log.info("[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s", topic, group,
                         client_id)
            except (ConnectionError, OSError) as exc:
                log.error("[reset-offset] reset offset exception. topic=%s, group=%s ,error=%s", topic, group, exc)
        task = asyncio.get_running_loop().create_task(send())
        self._pushes.add(task)
        task.add_done_callback(self._pushes.discard)


def _reset_body(table: dict[MessageQueue, int], for_c: bool) -> bytes:
    """ResetOffsetBody (the map) or, for the C++ client, ResetOffsetBodyForC (a list of MessageQueueForC)."""
    if for_c:
        rows = [dict(mq.to_json(), offset=offset) for mq, offset in table.items()]
        return dumps({"offsetTable": [dict(sorted(r.items())) for r in rows]}).encode("utf-8")
    return dumps({"offsetTable": table}).encode("utf-8")
