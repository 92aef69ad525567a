"""How a send becomes a store put (RocketMQ's ``SendMessageProcessor``).

A SEND_MESSAGE (10) carries its header with long names, SEND_MESSAGE_V2 (310) the same
header with one-letter names (``a`` producer group ... ``n`` broker name, to keep frames
small), SEND_BATCH_MESSAGE (320) the V2 header and a batch body (:mod:`.batch`).  All three
go the same way:

1. **checks** (``msgCheck``): the broker may be written to, the topic name is valid and
   not a system topic no one may send to, the topic exists -- or is created from the
   default topic the producer names, if that topic may be inherited (auto-create) -- and
   the queue id is below the topic's queue count; a negative queue id picks a random
   writable queue.  A retry topic (``%RETRY%group``) whose message has been reconsumed
   ``maxReconsumeTimes`` times goes to the group's dead-letter topic ``%DLQ%group``.
2. **the inner message**: the header's properties plus CLUSTER (the broker's cluster), WAIT
   dropped from the stored text (9 bytes saved per message, as 4.9.8 does) but kept with the
   message (:attr:`Message.wait_in_map`: 4.9.8 keeps it in the properties map, so a delayed
   message's record has it back -- or has none, when the client sent none); born host is the
   connection's peer address, store host the broker's own.
3. **the put**: :meth:`MessageStore.async_put_message` -- the append happens at once; with
   SYNC_FLUSH (or SYNC_MASTER) the future is completed by the group commit (or the replica
   service) while the event loop serves other connections, no thread waiting per put; a put
   whose commitlog file the allocate service has not made yet (a cold broker's first, or files
   rolling faster than they are made) is appended on the store's put lane, never waited for
   on the loop (:mod:`rmqstore.engine.async_puts`).  A put whose future is done when the call
   returns (ASYNC_FLUSH, and every refusal) is answered at once (:meth:`SendMessageProcessor.answer`
   returns the response, and the connection writes it without a task); only a put still waiting
   for a flush or an ack is awaited -- and
   the store's :class:`PutMessageStatus` mapped to a response
   code, with msgId, queueId and queueOffset in the response header.  The body and properties
   limits (``maxMessageSize``, 32767 bytes of properties) are the store's to check, as in 4.9.8:
   its refusal (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED) becomes MESSAGE_ILLEGAL here.

With a ``tracer`` set (:mod:`rmqstore.common.trace`; off, the null tracer drops them), every check is an event
``send.check.<name>`` with its outcome (``status`` OK or the refusing response code, and the
remark), followed by ``send.message`` (the inner message as it goes to the store) and
``send.response``; :func:`rmqstore.broker.recording.record_send` puts them in one trace with the frame's
bytes before them and the store's stages after.
"""

from __future__ import annotations

import asyncio
import logging
import random
from concurrent.futures import Future
from typing import Awaitable

from ..common.errors import LayoutError
from ..common.trace import NULL_TRACER
from ..format.message import Message, MessageBatch
from ..format.message_id import Address
from ..format.properties import CLUSTER, WAIT, JavaHashMap, parse_properties, properties_to_string
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .batch import BatchBodyError, decode_batch_body
from .handoff import LoopHandoff
from .headers import Header
from .results import response_of_put
from .transaction import TRANSACTION_PREPARED, half_message
from .topics import (DLQ_GROUP_TOPIC_PREFIX, NOT_ALLOWED_SEND_TOPICS, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX,
                     is_writeable, validate_topic)

__all__ = ["SendMessageProcessor", "V2_FIELDS"]

log = logging.getLogger(__name__)

#: SendMessageRequestHeaderV2's one-letter names
V2_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
             "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
             "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName"}
#: _stored_order's answers by key sequence, at most _STORED_ORDERS_MAX of them (then computed each time)
_STORED_ORDERS: dict[tuple[str, ...], list[str]] = {}
_STORED_ORDERS_MAX = 1024
_BORN_HOST = "send.born_host"  # the connection attribute _born_host keeps
_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

class _Refused(Exception):
    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code = code
        self.remark = remark


def _name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


def _born_host(conn: Connection) -> Address | str:
    """The peer's address as the store's put takes it best: an :class:`Address`, made once per connection (the
    compiled put declines a plain ``(host, port)`` tuple, so every send took the pure put); its text if it is
    no IP address (the store words the refusal)."""
    host = conn.attributes.get(_BORN_HOST)
    if host is None:
        try:
            host = Address.parse(conn.remote_address)
        except LayoutError:
            host = conn.remote_addr_text
        conn.attributes[_BORN_HOST] = host
    return host


def _stored_order(keys: tuple[str, ...]) -> list[str]:
    """The order 4.9.8 writes a send's stored properties in, for the keys of the client's text (in their order,
    each once): a :class:`JavaHashMap`'s iteration order after those keys, CLUSTER put and WAIT removed.  It
    depends on the keys and their insertion order only, so it is computed once per key sequence (a producer's
    messages share one or a few)."""
    order = _STORED_ORDERS.get(keys)
    if order is None:
        probe = JavaHashMap()
        for key in keys:
            probe[key] = ""
        probe[CLUSTER] = ""
        probe.pop(WAIT, None)
        order = probe.java_order()
        if len(_STORED_ORDERS) < _STORED_ORDERS_MAX:
            _STORED_ORDERS[keys] = order
    return order


def _queues(config) -> dict:
    return {} if config is None else {"write_queue_nums": config.write_queue_nums,
                                      "read_queue_nums": config.read_queue_nums, "perm": config.perm}


class SendMessageProcessor:
    def __init__(self, broker):
        self.broker = broker
        #: a tracer (:mod:`rmqstore.common.trace`) seeing each check, the inner message and the response;
        #: off: the null tracer, whose ``event`` does nothing
        self.tracer = NULL_TRACER
        self._handoff: LoopHandoff | None = None  # the waiting puts' results to the loop (made on the loop)

    def register(self, server) -> None:
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            server.register(code, self.answer)

    async def process(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """The response to a send, awaited (a caller that wraps the processor: notebook 12)."""
        response = self.answer(conn, req)
        return response if isinstance(response, RemotingCommand) else await response

    def answer(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The response to a send at once when the store's put is done (a refusal, or an ASYNC_FLUSH put: the
        append is the whole put), so the connection answers it without a task; else an awaitable of it (the
        group commit's flush, a slave's ack), which the put's future completes from the service's thread."""
        ext = req.ext_fields
        if req.code != RequestCode.SEND_MESSAGE:
            ext = {V2_FIELDS.get(k, k): v for k, v in ext.items()}
        h = Header(ext)
        item: Message | MessageBatch
        try:
            topic, queue_id, config = self._check(conn, h, req)
            if req.code == RequestCode.SEND_BATCH_MESSAGE:
                item, future = self._put_batch(conn, req, h, topic, queue_id)
            else:
                item, future, queue_id = self._put_one(conn, req, h, topic, queue_id)
        except _Refused as refused:
            self.tracer.event("send.response", status="REFUSED", code=int(refused.code),
                              code_name=_name(refused.code), remark=refused.remark)
            return req.response(refused.code, refused.remark)
        if future.done():  # no hand-off through the loop (a wake-up as if from another thread)
            return self._sent(req, item, future.result(), queue_id)
        return self._sent_later(req, item, future, queue_id)

    async def _sent_later(self, req, item, future: Future, queue_id: int) -> RemotingCommand:
        loop = asyncio.get_running_loop()
        if self._handoff is None or self._handoff.loop is not loop:
            self._handoff = LoopHandoff(loop)
        return self._sent(req, item, await self._handoff.wrap(future), queue_id)

    def _sent(self, req, item, result, queue_id: int) -> RemotingCommand:
        self.broker.stats.count_sent(self.broker.store, item, result)
        return self._response(req, result, queue_id)

    # -- checks ----------------------------------------------------------------------------------
    def _step(self, stage: str, refusal: "_Refused | None", **fields) -> None:
        """One check's outcome: an event for the tracer, raised when it refuses."""
        self.tracer.event(stage, status="OK" if refusal is None else _name(refusal.code),
                          remark="" if refusal is None else refusal.remark, **fields)
        if refusal is not None:
            raise refusal

    def _check(self, conn: Connection, h: Header, req: RemotingCommand):
        bc = self.broker.config
        topics = self.broker.topics
        topic = h.str("topic")
        h.str("producerGroup")
        self._step("send.check.broker_permission", None if is_writeable(bc.broker_permission) else _Refused(
            ResponseCode.NO_PERMISSION, f"the broker[{bc.broker_ip1}] sending message is forbidden"),
            permission=bc.broker_permission)
        problem = validate_topic(topic)
        self._step("send.check.topic_name", _Refused(ResponseCode.SYSTEM_ERROR, problem) if problem else None,
                   topic=topic)
        self._step("send.check.system_topic", _Refused(
            ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
            if topic in NOT_ALLOWED_SEND_TOPICS else None, topic=topic, forbidden=len(NOT_ALLOWED_SEND_TOPICS))
        config = topics.select(topic)
        self.tracer.event("send.check.topic_config", status="OK" if config else "NOT_FOUND", remark="",
                          topic=topic, found=config is not None, **_queues(config))
        if config is None:
            default = h.str("defaultTopic", "")
            config = topics.create_in_send(topic, default, h.int("defaultTopicQueueNums", 4, 32))
            if config is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                config = topics.create_system_topic(topic, 1, 6)
            self._step("send.check.auto_create", None if config is not None else _Refused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ}"),
                topic=topic, default_topic=default, **_queues(config))
        queue_id = h.int("queueId", bits=32)
        limit = max(config.write_queue_nums, config.read_queue_nums)
        refusal = None
        if queue_id >= limit:
            refusal = _Refused(ResponseCode.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, {config} "
                                                          f"Producer: {conn.remote_addr_text}")
        elif queue_id < 0 and config.write_queue_nums <= 0:
            refusal = _Refused(ResponseCode.NO_PERMISSION, f"topic[{topic}] has no writable queue")
        self._step("send.check.queue_id", refusal, queue_id=queue_id, limit=limit)
        if queue_id < 0:
            queue_id = random.randrange(config.write_queue_nums)
            self.tracer.event("send.queue_picked", queue_id=queue_id, write_queue_nums=config.write_queue_nums)
        self._step("send.check.topic_permission", None if is_writeable(config.perm) else _Refused(
            ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"), perm=config.perm)
        return topic, queue_id, config

    def _retry_or_dlq(self, h: Header, topic: str, queue_id: int, req) -> tuple[str, int]:
        """``handleRetryAndDLQ``: a retry-topic message past its max reconsume times goes to %DLQ%group."""
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return topic, queue_id
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        config = self.broker.groups.find(group)
        if config is None:
            raise _Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        max_times = h.int("maxReconsumeTimes", config.retry_max_times, 32)
        times = h.int("reconsumeTimes", 0, 32)
        to_dlq = times >= max_times
        self.tracer.event("send.retry_or_dlq", topic=topic, reconsume_times=times, max_reconsume_times=max_times,
                          to=DLQ_GROUP_TOPIC_PREFIX + group if to_dlq else topic)
        if not to_dlq:
            return topic, queue_id
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        self.broker.topics.create_system_topic(dlq, 1, PERM_WRITE | PERM_READ)
        return dlq, 0

    # -- the inner message -----------------------------------------------------------------------
    def _properties(self, text: str) -> tuple[str, str | None, bool]:
        """The stored properties text, the WAIT value taken out of it (None: the client sent none), and whether
        it is a transaction's half message (TRAN_MSG true: read here, not parsed again from the stored text).

        4.9.8 parses the client's text into a HashMap, puts CLUSTER, removes WAIT and writes the map back in
        its iteration order; that order depends on the keys alone (:func:`_stored_order`), so the values go
        through a plain dict and the order is looked up."""
        props = parse_properties(text)
        keys = tuple(props)
        props[CLUSTER] = self.broker.config.broker_cluster_name
        wait = props.pop(WAIT, None)
        stored = properties_to_string({k: props[k] for k in _stored_order(keys)})
        return stored, wait, props.get(TRANSACTION_PREPARED) == "true"

    def _put_one(self, conn, req, h: Header, topic: str, queue_id: int) -> tuple[Message, Future, int]:
        props_text = h.str("properties", "")
        topic, queue_id = self._retry_or_dlq(h, topic, queue_id, req)
        properties, wait, half = self._properties(props_text)
        msg = Message(topic=topic, body=req.body, queue_id=queue_id, flag=h.int("flag", bits=32),
                      properties=properties, sys_flag=h.int("sysFlag", bits=32),
                      born_timestamp=h.int("bornTimestamp"), born_host=_born_host(conn),
                      reconsume_times=h.int("reconsumeTimes", 0, 32), wait_in_map=wait)
        if half:
            msg = half_message(msg)  # parked in the half topic until END_TRANSACTION (.transaction)
        self.tracer.event("send.message", topic=msg.topic, queue_id=msg.queue_id, body_size=len(msg.body),
                          properties_sent=props_text, properties=msg.properties, half=half,
                          born_host=conn.remote_address, sys_flag=msg.sys_flag)
        return msg, self.broker.store.async_put_message(msg), queue_id

    def _put_batch(self, conn, req, h: Header, topic: str, queue_id: int) -> tuple[MessageBatch, Future]:
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        try:
            items = decode_batch_body(req.body)
        except BatchBodyError as exc:
            raise _Refused(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
        batch = MessageBatch(topic=topic, items=items, queue_id=queue_id, sys_flag=h.int("sysFlag", bits=32),
                             properties=self._properties(h.str("properties", ""))[0],
                             born_timestamp=h.int("bornTimestamp"), born_host=_born_host(conn),
                             reconsume_times=h.int("reconsumeTimes", 0, 32))
        self.tracer.event("send.message", topic=topic, queue_id=queue_id, batch=len(items),
                          body_size=sum(len(i.body) for i in items), properties=batch.properties,
                          born_host=conn.remote_address)
        return batch, self.broker.store.async_put_messages(batch)

    def _response(self, req, result, queue_id: int) -> RemotingCommand:
        code, remark = response_of_put(result)
        ext = {"MSG_REGION": self.broker.config.region_id, "TRACE_ON": self.broker.config.trace_on}
        ar = result.append_result
        if ar is not None and ar.ok:
            ext.update(msgId=ar.msg_id, queueId=queue_id, queueOffset=ar.logics_offset)
        self.tracer.event("send.response", status=result.status.name, code=int(code),
                          code_name=_name(code), remark=remark or "", **{
                              k: v for k, v in ext.items() if k in ("msgId", "queueId", "queueOffset")})
        return req.response(code, remark, ext)
