"""PULL_MESSAGE (11) and long polling (RocketMQ's ``PullMessageProcessor`` and ``PullRequestHoldService``).

A pull names a queue and a queue offset; the broker answers with the raw commitlog
records found from there (the body is the records back to back, exactly as stored), the
next offset to ask for and the queue's min and max offsets.  The store's
:class:`~rmqstore.reading.GetMessageStatus` maps to four answers: FOUND (SUCCESS),
PULL_NOT_FOUND (nothing new), PULL_RETRY_IMMEDIATELY (messages there, none matched the
tags: ask again from ``nextBeginOffset``) and PULL_OFFSET_MOVED (the offset is outside the
queue: start again from ``nextBeginOffset``).  Tags are filtered by the tags hash code in
the consume queue, as the broker does; the client checks the tag string itself.

**Long polling.**  A consumer pulls all the time; when nothing is new, answering "not
found" at once would make it spin.  So a pull with the suspend flag that finds nothing is
*held*: its future waits in :class:`PullRequestHoldService` under its queue until either a
message arrives there or the pull's suspend timeout (15 s from the Java push consumer)
passes, and only then is the pull run again and answered.  Arrival is signalled by the
store's reput thread as it dispatches each consume-queue unit
(``MessageStore.message_arriving_listener``); the hold service hops onto the event loop
(``call_soon_threadsafe``) and wakes the waiting futures of that queue whose offset is now
below the max.  After registering a hold the max offset is read once more, so a message
dispatched between the pull's read and the registration cannot be missed.  A held pull
costs one future, no thread.

**Commit-offset piggyback.**  A push consumer sends its committed offset of the queue with
each pull (commit-offset flag); the broker stores it as if UPDATE_CONSUMER_OFFSET came.
"""

from __future__ import annotations

import asyncio
import logging

from ..reading import GetMessageStatus, TagFilter, read_message_bytes
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .headers import Header
from .topics import is_readable

__all__ = ["PullMessageProcessor", "PullRequestHoldService", "FLAG_COMMIT_OFFSET", "FLAG_SUSPEND",
           "FLAG_SUBSCRIPTION"]

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION, FLAG_CLASS_FILTER = 1, 2, 4, 8

_RETRY = {GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.NO_MATCHED_MESSAGE}
_NOT_FOUND = {GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.OFFSET_OVERFLOW_ONE}
_MOVED = {GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_TOO_SMALL}
_EMPTY_QUEUE = {GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE}


def _response_code(status: GetMessageStatus, requested_offset: int) -> int:
    if status is GetMessageStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in _RETRY:
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in _EMPTY_QUEUE:
        return ResponseCode.PULL_OFFSET_MOVED if requested_offset != 0 else ResponseCode.PULL_NOT_FOUND
    if status in _MOVED:
        return ResponseCode.PULL_OFFSET_MOVED
    return ResponseCode.PULL_NOT_FOUND


class PullRequestHoldService:
    """Held pulls per (topic, queue id), woken on arrival or timeout."""

    def __init__(self, broker):
        self.broker = broker
        self.loop: asyncio.AbstractEventLoop | None = None
        self.holds: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.broker.store.message_arriving_listener = self._arriving_from_thread

    def stop(self) -> None:
        if self.broker.store is not None:
            self.broker.store.message_arriving_listener = None
        for waiters in self.holds.values():
            for _, future in waiters:
                if not future.done():
                    future.set_result(False)
        self.holds.clear()

    def _arriving_from_thread(self, topic: str, queue_id: int, max_offset: int) -> None:
        if (topic, queue_id) in self.holds and self.loop is not None:  # a cheap read; the rest on the loop
            try:
                self.loop.call_soon_threadsafe(self.notify_arriving, topic, queue_id, max_offset)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

    def notify_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        waiters = self.holds.get((topic, queue_id))
        if not waiters:
            return
        keep = []
        for offset, future in waiters:
            if future.done():
                continue
            if offset < max_offset:
                future.set_result(True)
            else:
                keep.append((offset, future))
        if keep:
            self.holds[(topic, queue_id)] = keep
        else:
            self.holds.pop((topic, queue_id), None)

    async def hold(self, topic: str, queue_id: int, offset: int, timeout: float) -> bool:
        """Wait until the queue's max offset passes ``offset`` (True) or ``timeout`` (False)."""
        future = asyncio.get_running_loop().create_future()
        self.holds.setdefault((topic, queue_id), []).append((offset, future))
        if self.broker.store.get_max_offset_in_queue(topic, queue_id) > offset:
            future.set_result(True)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            waiters = self.holds.get((topic, queue_id))
            if waiters is not None:
                waiters[:] = [w for w in waiters if w[1] is not future]
                if not waiters:
                    self.holds.pop((topic, queue_id), None)


class PullMessageProcessor:
    def __init__(self, broker):
        self.broker = broker
        self.hold_service = PullRequestHoldService(broker)

    def register(self, server) -> None:
        server.register(RequestCode.PULL_MESSAGE, self.process)

    async def process(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        response, hold = self._pull(conn, req, allow_suspend=True)
        if hold is None:
            return response
        topic, queue_id, offset, timeout = hold
        await self.hold_service.hold(topic, queue_id, offset, timeout)
        response, _ = self._pull(conn, req, allow_suspend=False)
        return response

    def _pull(self, conn: Connection, req: RemotingCommand, allow_suspend: bool):
        broker = self.broker
        h = Header(req.ext_fields)
        group, topic = h.str("consumerGroup"), h.str("topic")
        queue_id, offset = h.int("queueId", bits=32), h.int("queueOffset")
        max_nums, sys_flag = h.int("maxMsgNums", bits=32), h.int("sysFlag", bits=32)
        commit_offset = h.int("commitOffset", 0)
        suspend_ms = h.int("suspendTimeoutMillis", 0)
        config = broker.topics.select(topic)
        if config is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"), None
        if not is_readable(config.perm):
            return req.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"), None
        if not 0 <= queue_id < config.read_queue_nums:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                f"[{config.read_queue_nums}] consumer:[{conn.remote_addr_text}]"), None
        if sys_flag & FLAG_SUBSCRIPTION:
            expression_type = h.str("expressionType", "TAG") or "TAG"
            if expression_type != "TAG":
                return req.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    f"expression type {expression_type} is not supported (TAG only)"), None
            message_filter = TagFilter(h.str("subscription", "*") or "*")
        else:
            sub = broker.clients.subscription(group, topic)
            if sub is None:
                return req.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                    "the consumer's subscription not exist"), None
            if sub.sub_version < h.int("subVersion", 0):
                return req.response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                    "the consumer's subscription not latest"), None
            message_filter = TagFilter(sub.sub_string)
        result = broker.store.get_message(group, topic, queue_id, offset, max(0, max_nums), message_filter)
        code = _response_code(result.status, offset)
        body = b""
        if code == ResponseCode.SUCCESS:
            parts = [read_message_bytes(broker.store, u.commit_log_offset, u.size) for u in result.units]
            if any(p is None for p in parts):  # a file went away between the read and now
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
            else:
                body = b"".join(parts)
        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET:
            broker.offsets.commit_offset(conn.remote_addr_text, group, topic, queue_id, commit_offset)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & FLAG_SUSPEND:
            timeout_ms = suspend_ms if broker.config.long_polling_enable else broker.config.short_polling_time_mills
            return None, (topic, queue_id, offset, max(0, timeout_ms) / 1000.0)
        ext = {"suggestWhichBrokerId": 0, "nextBeginOffset": result.next_begin_offset,
               "minOffset": result.min_offset, "maxOffset": result.max_offset}
        return req.response(code, None if code == ResponseCode.SUCCESS else result.status.name, ext, body), None


