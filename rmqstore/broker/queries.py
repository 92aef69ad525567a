"""Offset requests a consumer makes (RocketMQ's ``ConsumerManageProcessor`` and the admin offset queries).

QUERY_CONSUMER_OFFSET (14) answers the offset a group committed for a queue; a group that
never committed gets 0 when the queue still starts at 0 (a new group reads from the
beginning of a young queue), else QUERY_NOT_FOUND and the client falls back to its
consume-from-where.  UPDATE_CONSUMER_OFFSET (15, often oneway) stores one.
GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) and SEARCH_OFFSET_BY_TIMESTAMP (29) read the
consume queue through the store.  VIEW_MESSAGE_BY_ID (33, by commitlog offset, which an
offset msgId holds) and QUERY_MESSAGE (12, by key through the index) are what admin tools
use to find a message; their bodies are the records exactly as stored.  All values are
read through :mod:`rmqstore.engine.reading`.
"""

from __future__ import annotations

from ..engine.reading import read_message_bytes
from ..remoting import Connection, RemotingCommand, RequestCode, ResponseCode
from .headers import Header

__all__ = ["OffsetQueries"]


class OffsetQueries:
    def __init__(self, broker):
        self.broker = broker

    def register(self, server) -> None:
        server.register(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        server.register(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        server.register(RequestCode.GET_MAX_OFFSET, self.get_max_offset)
        server.register(RequestCode.GET_MIN_OFFSET, self.get_min_offset)
        server.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp)
        server.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id)
        server.register(RequestCode.QUERY_MESSAGE, self.query_message)

    def query_consumer_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        group, topic, queue_id = h.str("consumerGroup"), h.str("topic"), h.int("queueId", bits=32)
        offset = self.broker.offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return req.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})
        if self.broker.store.get_min_offset_in_queue(topic, queue_id) <= 0:
            return req.response(ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return req.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer "
                                                          "boot first")

    def update_consumer_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        self.broker.offsets.commit_offset(conn.remote_addr_text, h.str("consumerGroup"), h.str("topic"),
                                          h.int("queueId", bits=32), h.int("commitOffset"))
        return req.response(ResponseCode.SUCCESS)

    def get_max_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        offset = self.broker.store.get_max_offset_in_queue(h.str("topic"), h.int("queueId", bits=32))
        return req.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def get_min_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        offset = self.broker.store.get_min_offset_in_queue(h.str("topic"), h.int("queueId", bits=32))
        return req.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def search_offset_by_timestamp(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        offset = self.broker.store.get_offset_in_queue_by_time(h.str("topic"), h.int("queueId", bits=32),
                                                               h.int("timestamp"))
        return req.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def view_message_by_id(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        offset = Header(req.ext_fields).int("offset")
        store = self.broker.store
        record = store.look_message_by_offset(offset)
        data = read_message_bytes(store, offset, record.total_size) if record is not None else None
        if data is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return req.response(ResponseCode.SUCCESS, body=data)

    def query_message(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        store = self.broker.store
        result = store.query_message(h.str("topic"), h.str("key"), h.int("maxNum", bits=32),
                                     h.int("beginTimestamp"), h.int("endTimestamp"))
        parts = [read_message_bytes(store, m.physical_offset, m.total_size) for m in result.messages]
        body = b"".join(p for p in parts if p is not None)
        ext = {"indexLastUpdateTimestamp": result.index_last_update_timestamp,
               "indexLastUpdatePhyoffset": result.index_last_update_phyoffset}
        if not body:
            return req.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                ext)
        return req.response(ResponseCode.SUCCESS, ext_fields=ext, body=body)
