"""The bodies of the admin answers, read into :mod:`.results`: fastjson's text from a Java broker or ours.

A RocketMQ body is fastjson's text of a Java object, and fastjson writes two things strict JSON has not:

* integer map keys unquoted -- ``{"brokerAddrs":{0:"127.0.0.1:10911"}}`` in a route for a client older than
  4.9.4, in ``consumerOffset.json`` -- which :func:`rmqstore.broker.jsonfmt.loads` already reads;
* objects as map keys -- a ``Map<MessageQueue, ...>`` is written ``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``
  in TopicStatsTable, ConsumeStats, ConsumeStatsList and ResetOffsetBody.

:func:`parse_fastjson` turns the second into the first's terms: an object followed by a colon can only be a key, so
each such object's text becomes a string key (marked with a NUL no broker sends) before ``jsonfmt.loads`` parses the
whole, and the marked keys come back as :class:`~rmqstore.broker.message_queue.MessageQueue` s.  Finding them needs a
scan of the tokens (strings, braces, colons), not of the characters: one regular expression does it at C speed.

Each ``decode_*`` takes the body's bytes (and what the request said) and returns a result, or raises ``ValueError``
naming what is missing or of the wrong type -- never a ``KeyError`` from deep inside; the client turns that into an
:class:`~rmqstore.common.errors.AdminError` naming the request and the broker.  ``decode_messages`` reads stored records
(VIEW_MESSAGE_BY_ID, QUERY_MESSAGE) with the store's own codec, :func:`rmqstore.format.record.decode_record`.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any, Callable

from ..broker.clients import SubscriptionData
from ..broker.groups import SubscriptionGroupConfig
from ..broker.jsonfmt import loads
from ..broker.message_queue import MessageQueue
from ..broker.namesrv.routes import BrokerData, QueueData
from ..broker.topics import TopicConfig
from ..common.errors import CorruptRecordError, LayoutError
from ..format.properties import KEYS, TAGS, UNIQ_KEY, string_to_properties
from ..format.record import MessageRecord, create_message_id, decode_record
from ..format.sysflag import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB_TYPE
from .results import (BrokerAddress, BrokerConsumeStats, ClientConnection, ClusterInfo, ConsumerConnection,
                      ConsumerProgress, ProducerConnection, QueueOffsets, QueueProgress, TopicList, TopicRoute,
                      queue_order)
from .stored import BrokerConfig, BrokerRuntimeInfo, MessageView, SubscriptionGroups, TopicConfigs

__all__ = ["parse_fastjson", "decode_cluster_info", "decode_topic_list", "decode_topic_route", "decode_topic_stats",
           "decode_consume_stats", "decode_consume_stats_list", "decode_consumer_connection",
           "decode_producer_connection", "decode_runtime_info", "decode_broker_config", "decode_topic_configs",
           "decode_subscription_groups", "decode_group_list", "decode_reset_offsets", "decode_messages",
           "parse_java_properties"]

#: a string (escapes and all), a brace or a colon: the tokens that decide where an object key is
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}:]')
_FOLLOWED_BY_COLON = re.compile(r"\s*:")
#: the mark of an object key turned into a string (no broker puts a NUL into a key)
_OBJECT_KEY = "\x00"


def _object_key_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every object that is a map key, outermost ones only, in order."""
    opened: list[int] = []
    spans: list[tuple[int, int]] = []
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token == "{":
            opened.append(m.start())
        elif token == "}" and opened:
            start = opened.pop()
            if _FOLLOWED_BY_COLON.match(text, m.end()):
                while spans and spans[-1][0] > start:  # a key inside this key: it goes with it
                    spans.pop()
                spans.append((start, m.end()))
    return spans


def _restore_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): _restore_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_keys(v) for v in value]
    return value


def _key(key: str):
    if not key.startswith(_OBJECT_KEY):
        return key
    obj = parse_fastjson(key[1:])
    try:
        return MessageQueue(_str(obj, "topic"), _str(obj, "brokerName"), _int(obj, "queueId"))
    except ValueError as exc:
        raise ValueError(f"a map key is an object but not a MessageQueue: {exc}") from None


def parse_fastjson(body: bytes | str) -> Any:
    """fastjson's text parsed: unquoted integer keys as strings, MessageQueue keys as MessageQueues.  ValueError
    when it is not such text."""
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
    except UnicodeDecodeError as exc:
        raise ValueError(f"the body is not UTF-8 text: {exc}") from None
    parts, at = [], 0
    for start, end in _object_key_spans(text):
        parts += [text[at:start], json.dumps(_OBJECT_KEY + text[start:end])]
        at = end
    parts.append(text[at:])
    try:
        return _restore_keys(loads("".join(parts)))
    except RecursionError:
        raise ValueError("the body nests too deep") from None


# -- checked access -------------------------------------------------------------------------------------------

def _get(obj: Any, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if not isinstance(obj, dict):
        raise ValueError(f"expected an object holding {key!r}, got {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        if default is ...:
            raise ValueError(f"{key!r} is missing")
        return default
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise ValueError(f"{key!r} is {value!r:.60}, not {getattr(kind, '__name__', kind)}")
    return value


def _str(obj: Any, key: str, default: Any = ...) -> str:
    return _get(obj, key, str, default)


def _int(obj: Any, key: str, default: Any = ...) -> int:
    return _get(obj, key, int, default)


def _number(obj: Any, key: str, default: Any = ...) -> float:
    return float(_get(obj, key, (int, float), default))


def _object(body: bytes | str) -> dict:
    value = parse_fastjson(body)
    if not isinstance(value, dict):
        raise ValueError(f"the body is a {type(value).__name__}, not an object")
    return value


def _queue_table(obj: dict, key: str, row: Callable[[MessageQueue, Any], Any]) -> list:
    """The rows of a ``Map<MessageQueue, X>`` member, in MessageQueue's order (topic, broker name, queue id)."""
    table = _get(obj, key, dict, {})
    for mq in table:
        if not isinstance(mq, MessageQueue):
            raise ValueError(f"{key!r} is keyed by {mq!r:.60}, not by MessageQueue objects")
    return [row(mq, table[mq]) for mq in sorted(table, key=queue_order)]


# -- the name server ------------------------------------------------------------------------------------------

def _broker_data(d: Any) -> BrokerData:
    addrs = _get(d, "brokerAddrs", dict, {})
    try:
        by_id = {int(i): str(a) for i, a in addrs.items()}
    except ValueError:
        raise ValueError(f"brokerAddrs is keyed by {list(addrs)!r:.60}, not by broker ids") from None
    return BrokerData(_str(d, "cluster", ""), _str(d, "brokerName"), dict(sorted(by_id.items())))


def decode_cluster_info(body: bytes) -> ClusterInfo:
    obj = _object(body)
    clusters = {str(c): sorted(str(n) for n in names) for c, names in _get(obj, "clusterAddrTable", dict, {}).items()}
    cluster_of = {name: c for c, names in clusters.items() for name in names}
    brokers = []
    for name, d in _get(obj, "brokerAddrTable", dict, {}).items():
        data = _broker_data(d)
        cluster = data.cluster or cluster_of.get(name, "")
        brokers += [BrokerAddress(cluster, data.broker_name, i, a) for i, a in data.broker_addrs.items()]
    return ClusterInfo(sorted(brokers), dict(sorted(clusters.items())))


def decode_topic_list(body: bytes) -> TopicList:
    topics = _get(_object(body), "topicList", list)
    if not all(isinstance(t, str) for t in topics):
        raise ValueError("topicList holds something that is not a topic name")
    return TopicList(list(topics))


def decode_topic_route(topic: str, body: bytes) -> TopicRoute:
    obj = _object(body)
    queues = [QueueData(_str(q, "brokerName"), _int(q, "readQueueNums"), _int(q, "writeQueueNums"), _int(q, "perm"),
                        _int(q, "topicSysFlag", 0)) for q in _get(obj, "queueDatas", list, [])]
    brokers = [_broker_data(b) for b in _get(obj, "brokerDatas", list, [])]
    filters = {str(k): [str(a) for a in v] for k, v in _get(obj, "filterServerTable", dict, {}).items()}
    return TopicRoute(topic, brokers, queues, _str(obj, "orderTopicConf", None), filters)


# -- a broker's statistics ------------------------------------------------------------------------------------

def decode_topic_stats(body: bytes) -> list[QueueOffsets]:
    return _queue_table(_object(body), "offsetTable", lambda mq, o: QueueOffsets(
        mq.topic, mq.broker_name, mq.queue_id, _int(o, "minOffset"), _int(o, "maxOffset"),
        _int(o, "lastUpdateTimestamp", 0)))


def _consume_stats(group: str, obj: Any) -> ConsumerProgress:
    queues = _queue_table(obj, "offsetTable", lambda mq, o: QueueProgress(
        group, mq.topic, mq.broker_name, mq.queue_id, _int(o, "brokerOffset"), _int(o, "consumerOffset"),
        _int(o, "lastTimestamp", 0)))
    return ConsumerProgress(group, queues, _number(obj, "consumeTps", 0.0))


def decode_consume_stats(group: str, body: bytes) -> ConsumerProgress:
    return _consume_stats(group, _object(body))


def decode_consume_stats_list(body: bytes) -> BrokerConsumeStats:
    obj = _object(body)
    groups: dict[str, ConsumerProgress] = {}
    for entry in _get(obj, "consumeStatsList", list, []):
        for group, per_topic in _get({"entry": entry}, "entry", dict).items():
            merged = groups.setdefault(group, ConsumerProgress(group, [], 0.0))
            for stats in _get({"stats": per_topic}, "stats", list):
                one = _consume_stats(group, stats)
                merged.queues += one.queues
                merged.consume_tps += one.consume_tps
    for progress in groups.values():
        progress.queues.sort(key=queue_order)
    return BrokerConsumeStats(_str(obj, "brokerAddr", ""), groups, _int(obj, "totalDiff", 0))


def _connections(obj: dict) -> list[ClientConnection]:
    rows = [ClientConnection(_str(c, "clientId", ""), _str(c, "clientAddr", ""), _str(c, "language", ""),
                             _int(c, "version", 0)) for c in _get(obj, "connectionSet", list, [])]
    return sorted(rows, key=lambda c: (c.client_id, c.client_addr))


def decode_consumer_connection(group: str, body: bytes) -> ConsumerConnection:
    obj = _object(body)
    subs = []
    for topic, d in _get(obj, "subscriptionTable", dict, {}).items():
        try:
            subs.append(SubscriptionData.from_json(dict(d, topic=d.get("topic", topic))))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"the subscription of {topic!r:.60} does not parse: {exc}") from None
    return ConsumerConnection(group, _connections(obj), subs, _str(obj, "consumeType", ""),
                              _str(obj, "messageModel", ""), _str(obj, "consumeFromWhere", ""))


def decode_producer_connection(group: str, body: bytes) -> ProducerConnection:
    return ProducerConnection(group, _connections(_object(body)))


def decode_runtime_info(address: str, body: bytes) -> BrokerRuntimeInfo:
    table = _get(_object(body), "table", dict)
    return BrokerRuntimeInfo(address, {str(k): str(v) for k, v in table.items()})


def parse_java_properties(text: str) -> dict[str, str]:
    """``MixAll.string2Properties`` (``java.util.Properties.load``) for what a broker writes: ``key=value`` lines,
    ``#``/``!`` comments; a line without a separator is a key with an empty value."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"((?:[^=:\s\\]|\\.)+)\s*[=:\s]?\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def decode_broker_config(address: str, body: bytes, ext_fields: dict[str, str] | None = None) -> BrokerConfig:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the configuration is not UTF-8 text: {exc}") from None
    version = (ext_fields or {}).get("version")
    data_version = None
    if version:
        parsed = parse_fastjson(version)
        data_version = parsed if isinstance(parsed, dict) else None
    return BrokerConfig(address, parse_java_properties(text), data_version)


def _table(body: bytes, key: str, entry: Callable[[dict], Any]) -> tuple[dict, dict | None]:
    obj = _object(body)
    out = {}
    for name, d in _get(obj, key, dict, {}).items():
        try:
            out[str(name)] = entry(d)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{key} entry {name!r:.60} does not parse: {exc}") from None
    version = obj.get("dataVersion")
    return out, version if isinstance(version, dict) else None


def decode_topic_configs(address: str, body: bytes) -> TopicConfigs:
    topics, version = _table(body, "topicConfigTable", TopicConfig.from_json)
    return TopicConfigs(address, topics, version)


def decode_subscription_groups(address: str, body: bytes) -> SubscriptionGroups:
    groups, version = _table(body, "subscriptionGroupTable", SubscriptionGroupConfig.from_json)
    return SubscriptionGroups(address, groups, version)


def decode_group_list(body: bytes) -> list[str]:
    groups = _get(_object(body), "groupList", list)
    if not all(isinstance(g, str) for g in groups):
        raise ValueError("groupList holds something that is not a group name")
    return list(groups)


def decode_reset_offsets(body: bytes) -> dict[tuple[str, int], int]:
    rows = _queue_table(_object(body), "offsetTable", lambda mq, offset: (mq, offset))
    out = {}
    for mq, offset in rows:
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ValueError(f"the offset of {mq} is {offset!r:.60}, not a number")
        out[mq.broker_name, mq.queue_id] = offset
    return out


# -- stored messages ------------------------------------------------------------------------------------------

def _body_as_consumed(record: MessageRecord) -> bytes:
    """The body a consumer gets: a zlib-compressed body inflated (``MessageDecoder`` with deCompressBody)."""
    compressed = record.sys_flag & COMPRESSED_FLAG
    if compressed and record.sys_flag & COMPRESSION_TYPE_MASK in (0, COMPRESSION_ZLIB_TYPE):
        try:
            return zlib.decompress(record.body)
        except zlib.error:
            return record.body
    return record.body


def _message_view(record: MessageRecord) -> MessageView:
    props = string_to_properties(record.properties)
    offset_id = create_message_id(record.store_host, record.physical_offset)
    return MessageView(offset_id, props.get(UNIQ_KEY) or offset_id, record.topic, props.get(TAGS), props.get(KEYS),
                       record.queue_id, record.queue_offset, record.physical_offset, record.reconsume_times,
                       record.born_timestamp, record.store_timestamp, str(record.born_host), str(record.store_host),
                       record.sys_flag, props, _body_as_consumed(record), record.body_crc)


def decode_messages(body: bytes) -> list[MessageView]:
    """The stored records one after the other (``MessageDecoder.decodes``)."""
    out, pos = [], 0
    while pos < len(body):
        try:
            record = decode_record(body, pos)
        except (CorruptRecordError, LayoutError) as exc:
            raise ValueError(f"the message record at byte {pos} of the body does not decode: {exc}") from None
        if not isinstance(record, MessageRecord):
            raise ValueError(f"byte {pos} of the body holds a blank record, not a message")
        out.append(_message_view(record))
        pos += record.total_size
    return out
