"""Transactions: half messages, END_TRANSACTION (37) and the check service (CHECK_TRANSACTION_STATE, 39).

RocketMQ 4.x's transactional send is two-phase.  The producer first sends a *half*
message (property TRAN_MSG=true, its group in PGROUP): the broker stores it, not under its
topic, but under ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, the real topic and queue in
REAL_TOPIC/REAL_QID -- so no consumer can see it.  The producer then runs its local
transaction and sends END_TRANSACTION naming the half message (its commitlog offset and
its queue offset) with COMMIT, ROLLBACK or UNKNOWN:

* COMMIT: the half message is stored again under its real topic and queue, with the
  transaction type COMMIT and the half message's offset as prepared-transaction offset;
  consumers now see it;
* ROLLBACK: nothing is stored for consumers;
* either way an *op* message (tag ``d``, body = the half message's queue offset) is
  appended to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: the record that this half message is done;
* UNKNOWN: nothing -- the check service will ask.

**The check service** walks the half queue from its consume offset (kept for the group
``CID_RMQ_SYS_TRANS`` in consumerOffset.json, as RocketMQ does).  A half message with an op
is done; one younger than ``transactionTimeOut`` stops the walk (everything after it is
younger still); one checked ``transactionCheckMax`` times is given up (logged, stored to
TRANS_CHECK_MAX_TIME_TOPIC); any other is stored again at the end of the half queue with
its check count + 1 and a CHECK_TRANSACTION_STATE request goes, oneway, to a live
connection of its producer group with the message itself as body.  The producer answers
with END_TRANSACTION naming the new copy.
"""

from __future__ import annotations

import asyncio
import logging

from ..format.message import Message
from ..format.properties import REAL_QID, REAL_TOPIC, UNIQ_KEY, parse_properties, properties_to_string, \
    string_to_properties
from ..engine.reading import read_message_bytes
from ..format.record import create_message_id
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from ..format.sysflag import (TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE,
                              reset_transaction_value)
from .headers import Header
from .results import response_of_put
from .tasks import BackgroundTask
from .topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

__all__ = ["TransactionService", "half_message", "TRANSACTION_PREPARED", "PRODUCER_GROUP", "CHECK_TIMES",
           "SYS_TRANS_GROUP", "REMOVE_TAG"]

log = logging.getLogger(__name__)

TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
SYS_TRANS_GROUP = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"


def half_message(msg: Message) -> Message:
    """``parseHalfMessageInner``: the message parked in the half topic, queue 0."""
    props = string_to_properties(msg.properties)
    props[REAL_TOPIC] = msg.topic
    props[REAL_QID] = str(msg.queue_id)
    msg.properties = properties_to_string(props)
    msg._props_map = None
    msg.sys_flag = reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE)
    msg.topic, msg.queue_id = TRANS_HALF_TOPIC, 0
    return msg


class TransactionService:
    def __init__(self, broker):
        self.broker = broker
        self._task = BackgroundTask()

    def register(self, server) -> None:
        server.register(RequestCode.END_TRANSACTION, self.end_transaction)

    def start(self) -> None:
        self._task.start(self._run())

    async def stop(self) -> None:
        await self._task.stop()

    # -- END_TRANSACTION -------------------------------------------------------------------------
    async def end_transaction(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | None:
        h = Header(req.ext_fields)
        group = h.str("producerGroup")
        queue_offset, phy_offset = h.int("tranStateTableOffset"), h.int("commitLogOffset")
        kind = h.int("commitOrRollback", bits=32)
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # UNKNOWN (or anything else): wait for the check
        store = self.broker.store
        half = store.look_message_by_offset(phy_offset)
        if half is None:
            return req.response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        props = parse_properties(half.properties)
        problem = ("The producer group wrong" if props.get(PRODUCER_GROUP) != group
                   else "The transaction state table offset wrong" if half.queue_offset != queue_offset
                   else "The commit log offset wrong" if half.physical_offset != phy_offset else None)
        if problem:
            return req.response(ResponseCode.SYSTEM_ERROR, problem)
        if kind == TRANSACTION_COMMIT_TYPE:
            result = await asyncio.wrap_future(store.async_put_message(self._final_message(half, props)))
            if not result.ok:
                return req.response(*response_of_put(result))
        await self._put_op(half)
        return req.response(ResponseCode.SUCCESS)

    @staticmethod
    def _final_message(half, props) -> Message:
        """``endMessageTransaction``: the committed message under its real topic and queue."""
        return Message(topic=props[REAL_TOPIC], body=half.body, queue_id=int(props[REAL_QID]), flag=half.flag,
                       properties=half.properties,
                       sys_flag=reset_transaction_value(half.sys_flag, TRANSACTION_COMMIT_TYPE),
                       born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
                       reconsume_times=half.reconsume_times, prepared_transaction_offset=half.physical_offset)

    async def _put_op(self, half) -> None:
        """The op message that marks ``half`` done (tag d, body = its queue offset)."""
        host = self.broker.config.broker_addr
        op = Message(topic=TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), queue_id=half.queue_id,
                     properties={"TAGS": REMOVE_TAG, "WAIT": "true"},  # type: ignore[arg-type]  # a dict is serialised
                     born_timestamp=self.broker.store.clock(),
                     born_host=host, store_host=host)
        result = await asyncio.wrap_future(self.broker.store.async_put_message(op))
        if not result.ok:
            log.error("writing the op message of half message %d failed: %s", half.physical_offset, result)

    # -- the check service -----------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.transaction_check_interval / 1000.0)
            try:
                await self.check()
            except Exception:
                log.exception("transaction check failed")

    def _done_offsets(self, queue_id: int) -> set[int]:
        store = self.broker.store
        done, offset = set(), store.get_min_offset_in_queue(TRANS_OP_HALF_TOPIC, queue_id)
        end = store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, queue_id)
        while offset < end:
            result = store.get_message(SYS_TRANS_GROUP, TRANS_OP_HALF_TOPIC, queue_id, offset, 64)
            for record in result.messages:
                try:
                    done.add(int(record.body))
                except ValueError:
                    log.warning("op message at %d has a body that is not a queue offset", record.physical_offset)
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        return done

    async def check(self) -> int:
        """One pass over the half queue; returns how many checks were sent."""
        broker, store = self.broker, self.broker.store
        done = self._done_offsets(0)
        offset = max(broker.offsets.query_offset(SYS_TRANS_GROUP, TRANS_HALF_TOPIC, 0),
                     store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        end = store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        sent, now = 0, store.clock()
        while offset < end:
            result = store.get_message(SYS_TRANS_GROUP, TRANS_HALF_TOPIC, 0, offset, 1)
            if not result.messages:
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                continue
            half = result.messages[0]
            if half.queue_offset not in done:
                if now - half.born_timestamp < broker.config.transaction_time_out:
                    break  # this one and all after it are too young
                sent += await self._check_one(half)
            offset = half.queue_offset + 1
            broker.offsets.commit_offset("broker", SYS_TRANS_GROUP, TRANS_HALF_TOPIC, 0, offset)
        return sent

    async def _check_one(self, half) -> int:
        props = string_to_properties(half.properties)
        times = int(props.get(CHECK_TIMES, "0") or 0)
        store = self.broker.store
        if times >= self.broker.config.transaction_check_max:
            log.warning("half message %d checked %d times: given up", half.physical_offset, times)
            gave_up = Message(topic=TRANS_CHECK_MAX_TIME_TOPIC, body=half.body, properties=half.properties,
                              sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_host=half.born_host)
            await asyncio.wrap_future(store.async_put_message(gave_up))
            return 0
        props[CHECK_TIMES] = str(times + 1)
        again = Message(topic=TRANS_HALF_TOPIC, body=half.body, queue_id=0, flag=half.flag,
                        properties=properties_to_string(props), sys_flag=half.sys_flag,
                        born_timestamp=half.born_timestamp, born_host=half.born_host,
                        reconsume_times=half.reconsume_times)
        result = await asyncio.wrap_future(store.async_put_message(again))
        if not result.ok:
            log.error("putting half message %d back failed: %s", half.physical_offset, result)
            return 0
        ar = result.append_result  # the new copy is what gets checked from now on
        conn = self._producer_connection(props.get(PRODUCER_GROUP, ""))
        if conn is None:
            log.warning("no live producer of group %s to check half message %d", props.get(PRODUCER_GROUP),
                        ar.wrote_offset)
            return 0
        body = read_message_bytes(store, ar.wrote_offset, ar.wrote_bytes) or b""
        uniq = props.get(UNIQ_KEY) or ar.msg_id
        conn.send(RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, {
            "tranStateTableOffset": ar.logics_offset, "commitLogOffset": ar.wrote_offset, "msgId": uniq,
            "transactionId": uniq, "offsetMsgId": create_message_id(ar.store_host, ar.wrote_offset)},
            body, flag=2))
        return 1

    def _producer_connection(self, group: str) -> Connection | None:
        for conn in self.broker.clients.producers.get(group, {}).values():
            if not conn.closed.is_set():
                return conn
        return None
