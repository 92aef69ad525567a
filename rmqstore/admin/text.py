"""What mqadmin prints for each result, so that ``rmqstore admin`` reads as mqadmin does.

Each command's output is a short list of blocks -- :class:`Grid` (a table: mqadmin's header names and Java format
strings, the row values), :class:`Pairs` (``key : value`` lines) and :class:`Lines` (text as it is) -- built here
from the results, pure functions of values.  :func:`render` writes them as mqadmin does, through :func:`jformat`, a
small ``String.format`` (flags ``-`` and ``0``, width, precision; ``%s``, ``%d``, ``%f``, ``%n``) so the format
strings read as RocketMQ's; the command line shows the same blocks as rich tables on a terminal
(:mod:`rmqstore.commands.admin`).  Times are local, as the JVM shows them.

Where mqadmin's order is a Java hash map's (the queues of a reset, a broker's configuration) we print sorted; where
it is a sorted one (brokerStatus's TreeMap, MessageQueue lists) we print the same.  The topic list, a consumer's
subscriptions and a message's properties follow Java's HashMap order, computed (:func:`~rmqstore.broker.namesrv.routes.java_hash_order`,
:class:`~rmqstore.format.properties.JavaHashMap`), as mqadmin prints them.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence, Union

from ..broker.namesrv.routes import java_hash_order
from ..broker.topics import PERM_INHERIT, PERM_READ, PERM_WRITE
from ..format.properties import JavaHashMap
from .results import (ClusterInfo, ConsumerConnection, ConsumerProgress, GroupsProgress, ProducerConnection,
                      ResetOffsets, TopicList, TopicRoute, TopicStatus)
from .stored import BrokerConfig, BrokerRuntimeInfo, QueryResult

__all__ = ["Grid", "Pairs", "Lines", "Block", "render", "jformat", "human_time", "fastjson_pretty", "perm_text",
           "topic_config_text", "sub_group_text", "cluster_list", "cluster_list_more", "topic_list",
           "topic_list_clusters", "topic_route", "topic_status", "update_topic", "delete_topic", "update_sub_group",
           "delete_sub_group", "consumer_progress", "all_consumer_progress", "consumer_connection",
           "producer_connection", "broker_status", "broker_config", "reset_offsets", "query_msg_by_id",
           "query_msg_by_key"]

_SPEC = re.compile(r"%(-)?(0)?(\d+)?(?:\.(\d+))?([sdfn%])")


def _java_str(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def jformat(fmt: str, *args: Any) -> str:
    """Java's ``String.format`` for what mqadmin uses: ``%[-][0][width][.precision](s|d|f)``, ``%n``, ``%%``."""
    values = iter(args)

    def one(m: re.Match) -> str:
        left, zero, width, precision, kind = m.groups()
        if kind == "n":
            return "\n"
        if kind == "%":
            return "%"
        value = next(values)
        if kind == "d":
            text = str(int(value))
        elif kind == "f":
            text = f"{float(value):.{int(precision) if precision else 6}f}"
        else:
            text = _java_str(value)
            text = text[:int(precision)] if precision else text
        w = int(width or 0)
        if left:
            return text.ljust(w)
        return text.rjust(w, "0") if zero and kind in "df" else text.rjust(w)
    return _SPEC.sub(one, fmt)


def human_time(millis: int, with_millis: bool = True) -> str:
    """``UtilAll.timeMillisToHumanString2`` (``yyyy-MM-dd HH:mm:ss,SSS``) or ``formatDate`` without milliseconds,
    local time."""
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000))
    return f"{text},{millis % 1000:03d}" if with_millis else text


def _front(text: str | None, size: int) -> str | None:
    """``UtilAll.frontStringAtLeast``: at most ``size`` characters."""
    return text[:size] if text is not None else None


def perm_text(perm: int) -> str:
    """``PermName.perm2String``: ``RW-``, ``R--``, ``RWX``..."""
    return "".join(c if perm & bit else "-" for c, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT)))


def fastjson_pretty(value: Any, indent: int = 0) -> str:
    """fastjson's ``toJSONString(value, prettyFormat)``: tabs, each member and list item on a line of its own --
    but the members of a map with integer keys on the map's line, its closing brace on the next."""
    pad, inner = "\t" * indent, "\t" * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        parts = []
        for i, (k, v) in enumerate(value.items()):
            sep = "," if i else ""
            text = fastjson_pretty(v, indent + 1)
            parts.append(f"{sep}{k}:{text}" if isinstance(k, int) else f"{sep}\n{inner}{json.dumps(k)}:{text}")
        return "{" + "".join(parts) + f"\n{pad}}}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        return "[" + ",".join(f"\n{inner}{fastjson_pretty(v, indent + 1)}" for v in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


# -- blocks ---------------------------------------------------------------------------------------------------------

@dataclass
class Grid:
    """A table: mqadmin's headers and format strings, and the rows' values."""

    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    header_format: str
    row_format: str
    right: tuple[int, ...] = ()  # columns a terminal shows right-aligned (numbers)

    def text(self) -> str:
        return jformat(self.header_format, *self.headers) + "".join(jformat(self.row_format, *r) for r in self.rows)


@dataclass
class Pairs:
    """``key : value`` lines (``%-32s: %s%n``, or the format given)."""

    pairs: list[tuple[str, Any]]
    line_format: str = "%-32s: %s%n"
    title: str | None = None

    def text(self) -> str:
        return "".join(jformat(self.line_format, k, v) for k, v in self.pairs)


@dataclass
class Lines:
    """Text as mqadmin prints it (newlines and all)."""

    content: str

    def text(self) -> str:
        return self.content


Block = Union[Grid, Pairs, Lines]


def render(blocks: Sequence[Block]) -> str:
    """The blocks as mqadmin prints them."""
    return "".join(b.text() for b in blocks)


# -- the cluster ------------------------------------------------------------------------------------------------------

def _first_figure(text: str | None) -> float:
    try:
        return float((text or "").split(" ")[0])
    except ValueError:
        return 0.0


def cluster_list(info: ClusterInfo, runtimes: dict[str, BrokerRuntimeInfo | None], now_ms: int) -> list[Block]:
    """``clusterList``: a row per broker with its version, rates and queues, page-cache wait, hours of messages
    kept (from ``earliestMessageTimeStamp``, as mqadmin computes it) and disk ratio."""
    fmt = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s%n"
    rows = []
    for b in info.brokers:
        rt = runtimes.get(b.address)
        t = rt.table if rt is not None else {}
        earliest, ratio = t.get("earliestMessageTimeStamp", ""), t.get("commitLogDiskRatio", "")
        hours = (now_ms - int(earliest)) / 1000.0 / 60.0 / 60.0 if earliest else 0.0
        rows.append([b.cluster, b.broker_name, b.broker_id, b.address, t.get("brokerVersionDesc", ""),
                     jformat("%9.2f(%s,%sms)", _first_figure(t.get("putTps")), t.get("sendThreadPoolQueueSize", ""),
                             t.get("sendThreadPoolQueueHeadWaitTimeMills", "")),
                     jformat("%9.2f(%s,%sms)", _first_figure(t.get("getTransferedTps")),
                             t.get("pullThreadPoolQueueSize", ""), t.get("pullThreadPoolQueueHeadWaitTimeMills", "")),
                     t.get("pageCacheLockTimeMills", ""), jformat("%2.2f", hours),
                     jformat("%.4f", float(ratio) if ratio else 0.0)])
    headers = ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
               "#PCWait(ms)", "#Hour", "#SPACE")
    return [Grid(headers, rows, fmt, fmt, right=(5, 6, 7, 8, 9))]


def cluster_list_more(info: ClusterInfo, runtimes: dict[str, BrokerRuntimeInfo | None]) -> list[Block]:
    """``clusterList -m``: messages in and out yesterday and today, per broker."""
    rows = []
    for b in info.brokers:
        rt = runtimes.get(b.address)
        t = rt.table if rt is not None else {}
        try:
            put = [int(t[k]) for k in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow")]
            get = [int(t[k]) for k in ("msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow")]
            totals = [put[1] - put[0], get[1] - get[0], put[2] - put[1], get[2] - get[1]]
        except (KeyError, ValueError):
            totals = [0, 0, 0, 0]
        rows.append([b.cluster, b.broker_name, *totals])
    return [Grid(("#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday",
                  "#OutTotalToday"), rows, "%-16s  %-32s %14s %14s %14s %14s%n", "%-16s  %-32s %14d %14d %14d %14d%n",
                 right=(2, 3, 4, 5))]


def topic_list(topics: TopicList) -> list[Block]:
    """``topicList``: mqadmin reads the names into a ``HashSet`` and prints the set, so in the set's order, whatever
    order the name server listed them in."""
    return [Grid(("#Topic",), [[t] for t in java_hash_order(topics.topics)], "", "%s%n")]


def topic_list_clusters(rows: list[tuple[str, str, str]]) -> list[Block]:
    """``topicList -c``: (cluster, topic, consumer group) rows."""
    fmt = "%-20s  %-64s  %-64s%n"
    return [Grid(("#Cluster Name", "#Topic", "#Consumer Group"), [[_front(c, 20), _front(t, 64), _front(g, 64)]
                                                                   for c, t, g in rows],
                 "%-20s  %-48s  %-48s%n", fmt)]


def topic_route(route: TopicRoute, as_list: bool = False) -> list[Block]:
    """``topicRoute``: the route as fastjson's pretty JSON, or (``-l``) a row per broker name and the totals."""
    if not as_list:
        data: dict[str, Any] = {"brokerDatas": [b.to_json() for b in route.brokers],
                                "filterServerTable": route.filter_servers}
        if route.order_topic_conf is not None:
            data["orderTopicConf"] = route.order_topic_conf
        data["queueDatas"] = [q.to_json() for q in route.queues]
        return [Lines(fastjson_pretty(data) + "\n")]
    fmt = "%-45s %-32s %-50s %-10s %-11s %-5s%n"
    queues = {q.broker_name: q for q in route.queues}
    rows = []
    for b in sorted(route.brokers, key=lambda b: b.broker_name):
        q = queues.get(b.broker_name)
        addrs = "{" + ", ".join(f"{i}={a}" for i, a in sorted(b.broker_addrs.items())) + "}"
        rows.append([b.cluster, b.broker_name, addrs, q.read_queue_nums if q else 0, q.write_queue_nums if q else 0,
                     q.perm if q else 0])
    totals = jformat(fmt, "Total:", len(queues), "", sum(q.read_queue_nums for q in queues.values()),
                     sum(q.write_queue_nums for q in queues.values()), "")
    headers = ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    return [Grid(headers, rows, fmt, fmt, right=(3, 4, 5)), Lines("-" * 158 + "\n" + totals)]


def topic_status(status: TopicStatus) -> list[Block]:
    rows = [[_front(q.broker_name, 32), q.queue_id, q.min_offset, q.max_offset,
             human_time(q.last_update_timestamp) if q.last_update_timestamp > 0 else ""] for q in status.queues]
    return [Grid(("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"), rows,
                 "%-32s  %-4s  %-20s  %-20s    %s%n", "%-32s  %-4d  %-20d  %-20d    %s%n", right=(1, 2, 3))]


# -- changes ------------------------------------------------------------------------------------------------------

def topic_config_text(c) -> str:
    """``TopicConfig.toString``."""
    return (f"TopicConfig [topicName={c.topic_name}, readQueueNums={c.read_queue_nums}, "
            f"writeQueueNums={c.write_queue_nums}, perm={perm_text(c.perm)}, topicFilterType={c.topic_filter_type}, "
            f"topicSysFlag={c.topic_sys_flag}, order={_java_str(c.order)}]")


def sub_group_text(g) -> str:
    """``SubscriptionGroupConfig.toString``."""
    return (f"SubscriptionGroupConfig [groupName={g.group_name}, consumeEnable={_java_str(g.consume_enable)}, "
            f"consumeFromMinEnable={_java_str(g.consume_from_min_enable)}, "
            f"consumeBroadcastEnable={_java_str(g.consume_broadcast_enable)}, retryQueueNums={g.retry_queue_nums}, "
            f"retryMaxTimes={g.retry_max_times}, brokerId={g.broker_id}, "
            f"whichBrokerWhenConsumeSlowly={g.which_broker_when_consume_slowly}, "
            f"notifyConsumerIdsChangedEnable={_java_str(g.notify_consumer_ids_changed_enable)}]")


def update_topic(applied, to_cluster: bool) -> list[Block]:
    created = "".join(f"create topic to {a} success.\n" for a in applied.brokers)
    order = ""
    if applied.order_conf is not None:
        order = (f"set cluster orderConf. isOrder=true, orderConf=[{applied.order_conf}]" if to_cluster else
                 f"set broker orderConf. isOrder=true, orderConf=[{applied.order_conf}]")
    text = created + order if to_cluster else order + created
    return [Lines(text + topic_config_text(applied.config) + "\n")]


def delete_topic(topic: str, cluster: str) -> list[Block]:
    return [Lines(f"delete topic [{topic}] from cluster [{cluster}] success.\n"
                  f"delete topic [{topic}] from NameServer success.\n")]


def update_sub_group(applied) -> list[Block]:
    created = "".join(f"create subscription group to {a} success.\n" for a in applied.brokers)
    return [Lines(created + sub_group_text(applied.config) + "\n")]


def delete_sub_group(group: str, applied, cluster: str | None) -> list[Block]:
    if cluster is None:
        return [Lines("".join(f"delete subscription group [{group}] from broker [{a}] success.\n"
                              for a in applied.brokers))]
    text = "".join(f"delete subscription group [{group}] from broker [{a}] in cluster [{cluster}] success.\n"
                   for a in applied.brokers)
    for topic in (f"%RETRY%{group}", f"%DLQ%{group}"):
        text += delete_topic(topic, cluster)[0].text()
    return [Lines(text)]


# -- groups -------------------------------------------------------------------------------------------------------

def consumer_progress(progress: ConsumerProgress, show_client_ip: bool = False) -> list[Block]:
    """``consumerProgress -g``: per queue offsets, lag and the time of the last message consumed; the rate and the
    total lag after."""
    rows = []
    for q in progress.queues:
        last = "N/A" if q.last_timestamp == 0 else human_time(q.last_timestamp, with_millis=False)
        ip = [q.client_ip or "N/A"] if show_client_ip else []
        rows.append([_front(q.topic, 64), _front(q.broker_name, 32), q.queue_id, q.broker_offset, q.consumer_offset,
                     *ip, q.lag, last])
    if show_client_ip:
        head, fmt = ("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s%n",
                     "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d  %s%n")
        headers: tuple = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP",
                          "#Diff", "#LastTime")
        right: tuple = (2, 3, 4, 6)
    else:
        head, fmt = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s%n", "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s%n"
        headers, right = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                          "#LastTime"), (2, 3, 4, 5)
    after = jformat("%n") + jformat("Consume TPS: %.2f%n", progress.consume_tps) + jformat("Diff Total: %d%n",
                                                                                          progress.diff_total)
    return [Grid(headers, rows, head, fmt, right=right), Lines(after)]


def all_consumer_progress(groups: GroupsProgress) -> list[Block]:
    """``consumerProgress``: a row per group with a retry topic."""
    rows = []
    for g in groups.groups:
        online = g.count > 0
        kind = ("PULL" if g.consume_type == "CONSUME_ACTIVELY" else "PUSH") if online else ""
        model = (g.message_model or "") if online and g.consume_type == "CONSUME_PASSIVELY" else ""
        rows.append([_front(g.group, 64), g.count, g.version_desc if online else "OFFLINE", kind, model,
                     int(g.consume_tps), g.diff_total])
    return [Grid(("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"), rows,
                 "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s%n", "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d%n",
                 right=(1, 5, 6))]


def consumer_connection(cc: ConsumerConnection) -> list[Block]:
    """``consumerConnection``: the clients, then the subscriptions (in the Java map's order), then how they
    consume."""
    fmt = "%-36s %-22s %-10s %s%n"
    clients = Grid(("#ClientId", "#ClientAddr", "#Language", "#Version"),
                   [[c.client_id, c.client_addr, c.language, c.version_desc] for c in cc.connections], fmt, fmt)
    subs = {s.topic: s for s in cc.subscriptions}
    table = Grid(("#Topic", "#SubExpression"), [[subs[t].topic, subs[t].sub_string] for t in java_hash_order(subs)],
                 "%-20s %s%n", "%-20s %s%n")
    return [clients, Lines("\nBelow is subscription:\n"), table,
            Lines(f"\nConsumeType: {cc.consume_type}\nMessageModel: {cc.message_model}\n"
                  f"ConsumeFromWhere: {cc.consume_from_where}\n")]


def producer_connection(pc: ProducerConnection) -> list[Block]:
    rows = [[i, c.client_id, c.client_addr, c.language, c.version_desc] for i, c in enumerate(pc.connections, 1)]
    return [Grid(("#", "#ClientId", "#ClientAddr", "#Language", "#Version"), rows, "",
                 "%04d  %-32s %-22s %-8s %s%n")]


# -- brokers ------------------------------------------------------------------------------------------------------

def broker_status(infos: list[BrokerRuntimeInfo], with_address: bool = False) -> list[Block]:
    """``brokerStatus``: every figure, sorted by name (``-c``: each line begins with the broker's address)."""
    if not with_address:
        return [Pairs(sorted(infos[0].table.items()) if infos else [], title=infos[0].address if infos else None)]
    pairs = [(info.address, k, v) for info in infos for k, v in sorted(info.table.items())]
    return [Grid(("#Broker", "#Key", "#Value"), pairs, "", "%-24s %-32s: %s%n")]


def broker_config(sections: list[tuple[str, BrokerConfig]]) -> list[Block]:
    """``getBrokerConfig``: per broker a title line and ``key = value`` lines (sorted; mqadmin's order is a hash
    table's)."""
    blocks: list[Block] = []
    for title, config in sections:
        blocks.append(Lines(f"============{title}============\n"))
        blocks.append(Pairs(sorted(config.properties.items()), "%-50s=  %s\n", title=title))
        blocks.append(Lines("\n"))
    return blocks


# -- offsets and messages -------------------------------------------------------------------------------------------

def reset_offsets(result: ResetOffsets, timestamp_text: str) -> list[Block]:
    """``resetOffsetByTime``: the offsets pushed to the online clients, or (none online) committed queue by queue."""
    force, when = _java_str(result.force), result.timestamp
    if result.pushed:
        head = (f"rollback consumer offset by specified group[{result.group}], topic[{result.topic}], force[{force}], "
                f"timestamp(string)[{timestamp_text}], timestamp(long)[{when}]\n")
        rows = [[_front(b, 32), q, o] for (b, q), o in sorted(result.offsets.items())]
        return [Lines(head), Grid(("#brokerName", "#queueId", "#offset"), rows, "%-40s  %-40s  %-40s%n",
                                  "%-40s  %-40d  %-40d%n", right=(1, 2))]
    head = (f"rollback consumer offset by specified consumerGroup[{result.group}], topic[{result.topic}], "
            f"force[{force}], timestamp(string)[{timestamp_text}], timestamp(long)[{when}]\n")
    rows = [[_front(r.broker_name, 32), r.queue_id, r.broker_offset, r.consumer_offset, r.timestamp_offset,
             r.rollback_offset] for r in sorted(result.rollback, key=lambda r: (r.broker_name, r.queue_id))]
    return [Lines(head), Grid(("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
                               "#rollbackOffset"), rows, "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s%n",
                              "%-20s  %-20d  %-20d  %-20d  %-20d  %-20d%n", right=(1, 2, 3, 4, 5))]


def _properties_text(props: dict[str, str]) -> str:
    """``HashMap.toString`` of a message's properties: ``{k=v, k=v}`` in Java's order."""
    keys = props.java_order() if isinstance(props, JavaHashMap) else list(props)
    return "{" + ", ".join(f"{k}={props[k]}" for k in keys) + "}"


def _body_preview(body: bytes, limit: int = 200) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"{len(body)} bytes, not UTF-8: {body[:limit // 2].hex()}{'...' if len(body) > limit // 2 else ''}"
    return text if len(text) <= limit else text[:limit] + f"... ({len(body)} bytes)"


def query_msg_by_id(result: QueryResult, body_paths: dict[str, str] | None = None) -> list[Block]:
    """``queryMsgById``: the message's fields, its body (or where it was written), then its tracks."""
    blocks: list[Block] = []
    for m in result.messages:
        pairs = [("OffsetID:", m.offset_msg_id), ("Topic:", m.topic), ("Tags:", f"[{_java_str(m.tags)}]"),
                 ("Keys:", f"[{_java_str(m.keys)}]"), ("Queue ID:", m.queue_id), ("Queue Offset:", m.queue_offset),
                 ("CommitLog Offset:", m.commit_log_offset), ("Reconsume Times:", m.reconsume_times),
                 ("Born Timestamp:", human_time(m.born_timestamp)), ("Store Timestamp:", human_time(m.store_timestamp)),
                 ("Born Host:", m.born_host), ("Store Host:", m.store_host), ("System Flag:", m.sys_flag),
                 ("Properties:", _properties_text(m.properties))]
        path = (body_paths or {}).get(m.offset_msg_id)
        pairs.append(("Message Body Path:", path) if path else ("Message Body:", _body_preview(m.body)))
        blocks.append(Pairs(pairs, "%-20s %s%n", title=m.offset_msg_id))
        tracks = result.tracks.get(m.offset_msg_id)
        if tracks is not None:
            lines = "".join(f"MessageTrack [consumerGroup={t.consumer_group}, trackType={t.track_type}, "
                            f"exceptionDesc={_java_str(t.exception_desc)}]\n" for t in tracks)
            blocks.append(Lines("\n\n" + (lines or "WARN: No Consumer\n")))
    return blocks


def query_msg_by_key(result: QueryResult) -> list[Block]:
    rows = [[m.msg_id, m.queue_id, m.queue_offset] for m in result.messages]
    return [Grid(("#Message ID", "#QID", "#Offset"), rows, "%-50s %4s %40s%n", "%-50s %4d %40d%n", right=(1, 2))]
