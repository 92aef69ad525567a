"""Finding messages: mqadmin's queryMsgById (with its message track) and queryMsgByKey.

An *offset* msgId names the broker that stored the message and where in its commitlog: the message is asked of
that address directly (VIEW_MESSAGE_BY_ID), as ``MQAdminImpl.viewMessage`` does.  A key is looked up in the index of
every broker of the topic (QUERY_MESSAGE), and what comes back is filtered as ``MQAdminImpl.queryMessage`` filters
it: an index slot is a hash, so only messages of the topic whose keys hold the key are kept.

The *track* of a message says, per consumer group of its topic, whether the group has consumed it
(``messageTrackDetail``): groups offline are NOT_ONLINE, pull consumers PULL (their progress is theirs to say), push
consumers CONSUMED when their committed offset on the message's queue has passed it -- CONSUMED_BUT_FILTERED when
their subscription's tags leave it out -- else NOT_CONSUME_YET.
"""

from __future__ import annotations

import asyncio

from ..common.errors import AdminError, LayoutError
from ..format.properties import KEY_SEPARATOR
from ..format.record import decode_message_id
from ..remoting import RequestCode, ResponseCode
from . import bodies
from .groups import CONSUMER_NOT_ONLINE, GroupOps
from .results import ConsumerConnection
from .stored import MessageTrack, MessageView, QueryResult

__all__ = ["MessageOps", "TRACK_TYPES", "MAX_TIMESTAMP"]

R = RequestCode
#: ``TrackType``'s names
TRACK_TYPES = ("CONSUMED", "CONSUMED_BUT_FILTERED", "PULL", "NOT_CONSUME_YET", "NOT_ONLINE", "UNKNOWN")
#: Long.MAX_VALUE: the end of time for a key query
MAX_TIMESTAMP = 2**63 - 1


class MessageOps(GroupOps):
    """Messages by id and by key (a part of :class:`~rmqstore.admin.AsyncAdmin`)."""

    async def view_message(self, msg_id: str) -> MessageView:
        """The message an offset msgId names, from the broker the id names."""
        try:
            host, offset = decode_message_id(msg_id.strip())
        except LayoutError as exc:
            raise AdminError(f"{msg_id!r} is not an offset msgId: {exc}") from None
        address = str(host)
        answer = await self.request(address, R.VIEW_MESSAGE_BY_ID, {"offset": offset})
        messages = self.decode(address, R.VIEW_MESSAGE_BY_ID, bodies.decode_messages, answer.body)
        if len(messages) != 1:
            raise AdminError(f"VIEW_MESSAGE_BY_ID to {address}: {len(messages)} messages for one offset",
                             address=address, request=R.VIEW_MESSAGE_BY_ID)
        return messages[0]

    async def query_msg_by_id(self, msg_id: str, *, track: bool = True) -> QueryResult:
        """A message by its offset msgId (``queryMsgById``) and, with ``track``, its consumer groups' tracks."""
        message = await self.view_message(msg_id)
        tracks = {message.offset_msg_id: await self.message_track(message)} if track else {}
        return QueryResult([message], tracks=tracks)

    async def query_msg_by_key(self, topic: str, key: str, *, max_num: int = 64, begin: int = 0,
                               end: int = MAX_TIMESTAMP) -> QueryResult:
        """The messages of ``topic`` whose keys hold ``key``, stored between ``begin`` and ``end`` (ms), at most
        ``max_num`` a broker (``queryMsgByKey``); an empty result when there is none."""
        route = await self.topic_route(topic)
        header = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end,
                  "_UNIQUE_KEY_QUERY": False}

        async def ask(address: str):
            answer = await self.request(address, R.QUERY_MESSAGE, header, timeout=self.timeout * 3,
                                        ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if answer.code != ResponseCode.SUCCESS:
                return 0, []
            stamp = int(answer.ext_fields.get("indexLastUpdateTimestamp", "0") or 0)
            return stamp, self.decode(address, R.QUERY_MESSAGE, bodies.decode_messages, answer.body)

        found = await asyncio.gather(*(ask(a) for a in route.broker_addresses()))
        messages = [m for _, ms in found for m in ms
                    if m.topic == topic and key in (m.keys or "").split(KEY_SEPARATOR)]
        return QueryResult(messages, max((stamp for stamp, _ in found), default=0))

    # -- the track ------------------------------------------------------------------------------------------------
    async def message_track(self, message: MessageView) -> list[MessageTrack]:
        """Per consumer group of the message's topic, whether it has consumed the message (``messageTrackDetail``)."""
        groups = await self.query_topic_consume_by_who(message.topic)
        return [await self._track(message, group) for group in groups]

    async def _track(self, message: MessageView, group: str) -> MessageTrack:
        track = MessageTrack(group, "UNKNOWN")
        try:
            conn = await self.consumer_connection(group)
        except AdminError as exc:
            return _failed(track, exc)
        if conn.consume_type == "CONSUME_ACTIVELY":
            track.track_type = "PULL"
        elif conn.consume_type == "CONSUME_PASSIVELY":
            try:
                consumed = await self._consumed(message, group)
            except AdminError as exc:
                return _failed(track, exc)
            track.track_type = _consumed_type(message, conn) if consumed else "NOT_CONSUME_YET"
        return track

    async def _consumed(self, message: MessageView, group: str) -> bool:
        """``consumed``: the group's committed offset on the message's queue, on the broker that stored it, is past
        the message."""
        progress, info = await asyncio.gather(self.consumer_progress(group), self.cluster_list())
        for q in progress.queues:
            if q.topic == message.topic and q.queue_id == message.queue_id:
                master = info.master_of(q.broker_name)
                if master is not None and master == message.store_host and q.consumer_offset > message.queue_offset:
                    return True
        return False


def _consumed_type(message: MessageView, conn: ConsumerConnection) -> str:
    for sub in conn.subscriptions:
        if sub.topic == message.topic and sub.tags_set and "*" not in sub.tags_set \
                and message.tags not in sub.tags_set:
            return "CONSUMED_BUT_FILTERED"
    return "CONSUMED"


def _failed(track: MessageTrack, exc: AdminError) -> MessageTrack:
    """A group that could not be asked: NOT_ONLINE when it has no client online, with what was answered."""
    if exc.code == CONSUMER_NOT_ONLINE:
        track.track_type = "NOT_ONLINE"
    track.exception_desc = f"CODE:{exc.code} DESC:{exc.remark}" if exc.code is not None else str(exc)
    return track

