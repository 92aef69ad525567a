"""PULL_MESSAGE (11) and long polling (RocketMQ's ``PullMessageProcessor`` and ``PullRequestHoldService``).

A pull names a queue and a queue offset; the broker answers with the raw commitlog
records found from there (the body is the records back to back, exactly as stored), the
next offset to ask for and the queue's min and max offsets.  The store's
:class:`~rmqstore.engine.reading.GetMessageStatus` maps to four answers: FOUND (SUCCESS),
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
import time
from dataclasses import dataclass

from ..engine.reading import GetMessageStatus, TagFilter
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
        await self.hold_service.hold(*hold)
        response, _ = self._pull(conn, req, allow_suspend=False)
        return response

    def _pull(self, conn: Connection, req: RemotingCommand, allow_suspend: bool):
        """(response, None), or (None, hold arguments) when the pull is to be held."""
        started = time.perf_counter()
        p = _PullRequest.of(Header(req.ext_fields))
        refusal = self._check(conn, p)
        if refusal is not None:
            return req.response(*refusal), None
        message_filter = self._message_filter(p)
        if not isinstance(message_filter, TagFilter):
            return req.response(*message_filter), None
        broker = self.broker
        result = broker.store.get_message(p.group, p.topic, p.queue_id, p.offset, max(0, p.max_nums),
                                          message_filter, raw=True)
        code, body = self._body(result, p.offset)
        broker.stats.count_pull(p.group, p.topic, p.queue_id, result, code == ResponseCode.SUCCESS, started)
        if allow_suspend and p.sys_flag & FLAG_COMMIT_OFFSET:
            broker.offsets.commit_offset(conn.remote_addr_text, p.group, p.topic, p.queue_id, p.commit_offset)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and p.sys_flag & FLAG_SUSPEND:
            cfg = broker.config
            timeout_ms = p.suspend_ms if cfg.long_polling_enable else cfg.short_polling_time_mills
            return None, (p.topic, p.queue_id, p.offset, max(0, timeout_ms) / 1000.0)
        ext = {"suggestWhichBrokerId": 0, "nextBeginOffset": result.next_begin_offset,
               "minOffset": result.min_offset, "maxOffset": result.max_offset}
        return req.response(code, None if code == ResponseCode.SUCCESS else result.status.name, ext, body), None

    def _check(self, conn: Connection, p: "_PullRequest") -> tuple[int, str] | None:
        group = self.broker.groups.find(p.group)
        if group is None:
            return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{p.group}] does not exist"
        if not group.consume_enable:
            return ResponseCode.NO_PERMISSION, f"subscription group no permission, {p.group}"
        config = self.broker.topics.select(p.topic)
        if config is None:
            return ResponseCode.TOPIC_NOT_EXIST, f"topic[{p.topic}] not exist, apply first please!"
        if not is_readable(config.perm):
            return ResponseCode.NO_PERMISSION, f"the topic[{p.topic}] pulling message is forbidden"
        if not 0 <= p.queue_id < config.read_queue_nums:
            return ResponseCode.SYSTEM_ERROR, (f"queueId[{p.queue_id}] is illegal, topic:[{p.topic}] topicConfig."
                                               f"readQueueNums:[{config.read_queue_nums}] consumer:"
                                               f"[{conn.remote_addr_text}]")
        return None

    def _message_filter(self, p: "_PullRequest") -> TagFilter | tuple[int, str]:
        """The pull's tag filter: from the request (subscription flag) or from the group's heartbeat."""
        if p.sys_flag & FLAG_SUBSCRIPTION:
            if p.expression_type != "TAG":
                return ResponseCode.SUBSCRIPTION_PARSE_FAILED, (f"expression type {p.expression_type} is not "
                                                                f"supported (TAG only)")
            return TagFilter(p.subscription)
        sub = self.broker.clients.subscription(p.group, p.topic)
        if sub is None:
            return ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist"
        if sub.sub_version < p.sub_version:
            return ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
        return TagFilter(sub.sub_string)

    def _body(self, result, offset: int) -> tuple[int, bytes]:
        """The response code and, when found, the records back to back as stored."""
        code = _response_code(result.status, offset)
        if code != ResponseCode.SUCCESS:
            return code, b""
        return code, b"".join(result.buffers)  # a raw pull's records, copied out of the file as it read them


@dataclass
class _PullRequest:
    """PullMessageRequestHeader's fields."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_nums: int
    sys_flag: int
    commit_offset: int
    suspend_ms: int
    subscription: str
    sub_version: int
    expression_type: str

    @classmethod
    def of(cls, h: Header) -> "_PullRequest":
        return cls(h.str("consumerGroup"), h.str("topic"), h.int("queueId", bits=32), h.int("queueOffset"),
                   h.int("maxMsgNums", bits=32), h.int("sysFlag", bits=32), h.int("commitOffset", 0),
                   h.int("suspendTimeoutMillis", 0), h.str("subscription", "*") or "*", h.int("subVersion", 0),
                   h.str("expressionType", "TAG") or "TAG")
