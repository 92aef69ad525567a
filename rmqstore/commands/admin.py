"""``rmqstore admin COMMAND ...``: RocketMQ's ``mqadmin`` in Python, for any RocketMQ 4.x cluster.

The commands and options are mqadmin's (``rmqstore admin clusterList -n 127.0.0.1:9876``, ``topicStatus -t T``,
``updateTopic -b ADDR -t T -r 4 -w 4``, ``consumerProgress -g G``, ...), and so is the output when stdout is not a
terminal (:mod:`rmqstore.admin.text`); on a terminal the same rows are rich tables; ``--json`` prints the result's
fields for machines.  The name server is ``-n`` (several: ``a:9876;b:9876``), else ``$NAMESRV_ADDR`` as mqadmin
reads it, else 127.0.0.1:9876 (``rmqstore broker``'s own).  ``--access-key``/``--secret-key`` (or
``$RMQSTORE_ACCESS_KEY``/``$RMQSTORE_SECRET_KEY``) sign every request for a broker with ACL on.

A refusal prints RocketMQ's code and remark as one error line (exit 2), a server that is down or silent names its
address (exit 2); ``queryMsgByKey`` finding nothing exits 1.  Each command is a table entry below: its options (the
letters mqadmin uses) and an async function that asks (:class:`rmqstore.admin.AsyncAdmin`) and returns the blocks
to show and the object ``--json`` prints.  The calls run on the admin's own loop thread (:class:`rmqstore.admin.Admin`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..admin import Admin, AsyncAdmin, text
from ..admin.results import json_value
from ..common.errors import AdminError
from .terminal import EXIT_INCOMPLETE, EXIT_OK, CliError, Command, Out, Streams, json_out

__all__ = ["COMMAND", "SUBCOMMANDS", "DEFAULT_NAMESRV"]

#: where the name server is when neither -n nor $NAMESRV_ADDR says (rmqstore broker's embedded one)
DEFAULT_NAMESRV = "127.0.0.1:9876"

Shown = tuple[list[text.Block], Any]  # what to show, what --json prints
Handler = Callable[[AsyncAdmin, argparse.Namespace], Awaitable[Shown]]


def java_bool(value: str) -> bool:
    """``Boolean.parseBoolean``: "true" in any case is true, anything else false."""
    return value.strip().lower() == "true"


@dataclass(frozen=True)
class Sub:
    """One mqadmin command: its description, options ``(flags, argparse keywords)``, whether ``-b``/``-c`` name
    its target (one of them required) and what it does."""

    help: str
    options: tuple[tuple[tuple[str, ...], dict], ...]
    run: Handler
    target: str | None = None  # "broker or cluster": -b ADDR | -c CLUSTER, one required


def opt(*flags: str, **kw) -> tuple[tuple[str, ...], dict]:
    return flags, kw


TOPIC = opt("-t", "--topic", required=True, help="topic name")
GROUP = opt("-g", "--group", required=True, help="group name")


# -- the commands ---------------------------------------------------------------------------------------------------

async def _runtimes(admin: AsyncAdmin, addresses: list[str]) -> dict:
    found = await asyncio.gather(*(admin.broker_status(a) for a in addresses), return_exceptions=True)
    for f in found:
        if isinstance(f, BaseException) and not isinstance(f, AdminError):
            raise f
    return {a: (None if isinstance(f, BaseException) else f) for a, f in zip(addresses, found)}


async def cluster_list(admin: AsyncAdmin, args) -> Shown:
    info = await admin.cluster_list()
    runtimes = await _runtimes(admin, info.addresses())
    blocks = (text.cluster_list_more(info, runtimes) if args.more_stats else
              text.cluster_list(info, runtimes, int(time.time() * 1000)))
    return blocks, dict(info.to_dict(), runtime={a: r.table if r else None for a, r in runtimes.items()})


async def topic_list(admin: AsyncAdmin, args) -> Shown:
    topics = await admin.topic_list()
    if not args.cluster_model:
        return text.topic_list(topics), topics.to_dict()
    info = await admin.cluster_list()
    shown = [t for t in topics.topics if not t.startswith(("%RETRY%", "%DLQ%"))]

    async def rows_of(topic: str) -> list[tuple[str, str, str]]:
        try:
            route, groups = await asyncio.gather(admin.topic_route(topic), admin.query_topic_consume_by_who(topic))
        except AdminError:
            return [("", topic, "")]
        name = route.brokers[0].broker_name if route.brokers else None
        cluster = next((c for c, names in info.clusters.items() if name in names), "")
        return [(cluster, topic, g) for g in (groups or [""])]
    rows = [r for rs in await asyncio.gather(*(rows_of(t) for t in shown)) for r in rs]
    return text.topic_list_clusters(rows), [{"cluster": c, "topic": t, "group": g} for c, t, g in rows]


async def topic_route(admin: AsyncAdmin, args) -> Shown:
    route = await admin.topic_route(args.topic.strip())
    return text.topic_route(route, args.list), route.to_dict()


async def topic_status(admin: AsyncAdmin, args) -> Shown:
    status = await admin.topic_status(args.topic.strip())
    return text.topic_status(status), status.to_dict()


async def update_topic(admin: AsyncAdmin, args) -> Shown:
    applied = await admin.update_topic(args.topic.strip(), broker_addr=args.broker_addr, cluster=args.cluster_name,
                                       read_queue_nums=args.read_queue_nums, write_queue_nums=args.write_queue_nums,
                                       perm=args.perm, order=args.order, unit=args.unit, has_unit_sub=args.has_unit_sub)
    return text.update_topic(applied, args.cluster_name is not None), json_value(applied)


async def delete_topic(admin: AsyncAdmin, args) -> Shown:
    applied = await admin.delete_topic(args.topic.strip(), args.cluster_name)
    return text.delete_topic(args.topic.strip(), args.cluster_name), json_value(applied)


async def update_sub_group(admin: AsyncAdmin, args) -> Shown:
    chosen = {k: getattr(args, k) for k in ("consume_enable", "consume_from_min_enable", "consume_broadcast_enable",
                                            "retry_queue_nums", "retry_max_times", "broker_id",
                                            "which_broker_when_consume_slowly", "notify_consumer_ids_changed_enable")
              if getattr(args, k) is not None}
    applied = await admin.update_sub_group(args.group.strip(), broker_addr=args.broker_addr, cluster=args.cluster_name,
                                           **chosen)
    return text.update_sub_group(applied), json_value(applied)


async def delete_sub_group(admin: AsyncAdmin, args) -> Shown:
    applied = await admin.delete_sub_group(args.group.strip(), broker_addr=args.broker_addr, cluster=args.cluster_name,
                                           remove_offset=bool(args.remove_offset))
    return text.delete_sub_group(args.group.strip(), applied, args.cluster_name), json_value(applied)


async def consumer_progress(admin: AsyncAdmin, args) -> Shown:
    if args.group is None:
        groups = await admin.all_consumer_progress()
        return text.all_consumer_progress(groups), groups.to_dict()
    show_ip = bool(args.show_client_ip)
    progress = await admin.consumer_progress(args.group.strip(), show_client_ip=show_ip)
    return text.consumer_progress(progress, show_ip), progress.to_dict()


async def consumer_connection(admin: AsyncAdmin, args) -> Shown:
    cc = await admin.consumer_connection(args.group.strip(), args.broker_addr)
    return text.consumer_connection(cc), cc.to_dict()


async def producer_connection(admin: AsyncAdmin, args) -> Shown:
    pc = await admin.producer_connection(args.group.strip(), args.topic.strip())
    return text.producer_connection(pc), pc.to_dict()


async def _addresses(admin: AsyncAdmin, args, masters_only: bool) -> list[str]:
    if args.broker_addr is not None:
        return [args.broker_addr]
    info = await admin.cluster_list()
    found = info.master_addresses(args.cluster_name) if masters_only else info.addresses(args.cluster_name)
    if not found:
        raise CliError(f"cluster {args.cluster_name!r} has no broker")
    return found


async def broker_status(admin: AsyncAdmin, args) -> Shown:
    infos = [await admin.broker_status(a) for a in await _addresses(admin, args, masters_only=False)]
    return text.broker_status(infos, args.broker_addr is None), [i.to_dict() for i in infos]


async def get_broker_config(admin: AsyncAdmin, args) -> Shown:
    if args.broker_addr is not None:
        sections = [(args.broker_addr, await admin.get_broker_config(args.broker_addr))]
    else:
        info = await admin.cluster_list()
        sections = []
        for b in info.brokers:
            if b.cluster != args.cluster_name:
                continue
            master = info.master_of(b.broker_name)
            title = f"Master: {b.address}" if b.is_master else f"My Master: {master}=====Slave: {b.address}"
            sections.append((title, await admin.get_broker_config(b.address)))
    return text.broker_config(sections), {title: c.properties for title, c in sections}


async def update_broker_config(admin: AsyncAdmin, args) -> Shown:
    done = []
    for address in await _addresses(admin, args, masters_only=False):
        await admin.update_broker_config(address, {args.key.strip(): args.value.strip()})
        done.append(address)
    return [text.Lines("".join(f"update broker config success, {a}\n" for a in done))], {"brokers": done}


async def reset_offset_by_time(admin: AsyncAdmin, args) -> Shown:
    force = True if args.force is None else java_bool(args.force)
    result = await admin.reset_offset_by_time(args.group.strip(), args.topic.strip(), args.timestamp.strip(),
                                              force=force, cplus=args.cplus)
    return text.reset_offsets(result, args.timestamp.strip()), result.to_dict()


async def query_msg_by_id(admin: AsyncAdmin, args) -> Shown:
    blocks: list[text.Block] = []
    found = []
    for msg_id in [i.strip() for i in args.msg_id.split(",") if i.strip()]:
        result = await admin.query_msg_by_id(msg_id)
        paths = _write_bodies(result, args.body_dir) if args.body_dir else None
        blocks += text.query_msg_by_id(result, paths)
        found.append(result.to_dict())
    return blocks, found


def _write_bodies(result, folder: str) -> dict[str, str]:
    """Each message's body in ``folder/<msgId>`` (as mqadmin writes /tmp/rocketmq/msgbodys/<msgId>)."""
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for m in result.messages:
        path = os.path.join(folder, m.msg_id)
        with open(path, "wb") as f:
            f.write(m.body)
        paths[m.offset_msg_id] = path
    return paths


async def query_msg_by_key(admin: AsyncAdmin, args) -> Shown:
    result = await admin.query_msg_by_key(args.topic.strip(), args.msg_key.strip())
    return text.query_msg_by_key(result), result.to_dict()


BROKER_OR_CLUSTER = "broker or cluster"
SUBCOMMANDS: dict[str, Sub] = {
    "clusterList": Sub("List all of clusters", (
        opt("-m", "--moreStats", dest="more_stats", action="store_true", help="Print more stats"),
        opt("-i", "--interval", type=float, help="print again every INTERVAL seconds, until interrupted")),
        cluster_list),
    "topicList": Sub("Fetch all topic list from name server", (
        opt("-c", "--clusterModel", dest="cluster_model", action="store_true",
            help="with each topic's cluster and consumer groups"),), topic_list),
    "topicRoute": Sub("Examine topic route info", (
        TOPIC, opt("-l", "--list", action="store_true", help="Use list format to print data")), topic_route),
    "topicStatus": Sub("Examine topic Status info", (TOPIC,), topic_status),
    "updateTopic": Sub("Update or create topic", (
        TOPIC, opt("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8, help="set read queue nums"),
        opt("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8, help="set write queue nums"),
        opt("-p", "--perm", type=int, default=6, help="set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"),
        opt("-o", "--order", type=java_bool, default=False, help="set topic's order(true|false)"),
        opt("-u", "--unit", type=java_bool, default=False, help="is unit topic (true|false)"),
        opt("-s", "--hasUnitSub", dest="has_unit_sub", type=java_bool, default=False,
            help="has unit sub (true|false)")), update_topic, BROKER_OR_CLUSTER),
    "deleteTopic": Sub("Delete topic from broker and NameServer.", (
        TOPIC, opt("-c", "--clusterName", dest="cluster_name", required=True,
                   help="delete topic from which cluster")), delete_topic),
    "updateSubGroup": Sub("Update or create subscription group", (
        GROUP, opt("-s", "--consumeEnable", dest="consume_enable", type=java_bool, help="consume enable"),
        opt("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=java_bool, help="from min offset"),
        opt("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=java_bool, help="broadcast"),
        opt("-q", "--retryQueueNums", dest="retry_queue_nums", type=int, help="retry queue nums"),
        opt("-r", "--retryMaxTimes", dest="retry_max_times", type=int, help="retry max times"),
        opt("-i", "--brokerId", dest="broker_id", type=int, help="consumer from which broker id"),
        opt("-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int,
            help="which broker id when consume slowly"),
        opt("-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed_enable", type=java_bool,
            help="notify consumerId changed")), update_sub_group, BROKER_OR_CLUSTER),
    "deleteSubGroup": Sub("Delete subscription group from broker.", (
        GROUP, opt("-r", "--removeOffset", dest="remove_offset", type=java_bool, help="remove offset")),
        delete_sub_group, BROKER_OR_CLUSTER),
    "consumerProgress": Sub("Query consumers's progress, speed", (
        opt("-g", "--groupName", dest="group", help="consumer group name (without: every group)"),
        opt("-s", "--showClientIP", dest="show_client_ip", type=java_bool, help="Show Client IP per Queue")),
        consumer_progress),
    "consumerConnection": Sub("Query consumer's socket connection, client version and subscription", (
        GROUP, opt("-b", "--brokerAddr", dest="broker_addr", help="broker address")), consumer_connection),
    "producerConnection": Sub("Query producer's socket connection and client version", (GROUP, TOPIC),
                              producer_connection),
    "brokerStatus": Sub("Fetch broker runtime status data", (), broker_status, BROKER_OR_CLUSTER),
    "getBrokerConfig": Sub("Get broker config by cluster or special broker!", (), get_broker_config,
                           BROKER_OR_CLUSTER),
    "updateBrokerConfig": Sub("Update broker's config", (
        opt("-k", "--key", required=True, help="config key"), opt("-v", "--value", required=True, help="config value")),
        update_broker_config, BROKER_OR_CLUSTER),
    "resetOffsetByTime": Sub("Reset consumer offset by timestamp(without client restart).", (
        GROUP, TOPIC, opt("-s", "--timestamp", required=True,
                          help="set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
        opt("-f", "--force", help="set the force rollback by timestamp switch[true|false]"),
        opt("-c", "--cplus", action="store_true", help="reset c++ client offset")), reset_offset_by_time),
    "queryMsgById": Sub("Query Message by Id", (
        opt("-i", "--msgId", dest="msg_id", required=True, help="Message Id (offset msgIds, comma-separated)"),
        opt("--body-dir", metavar="DIR", help="write each message's body to DIR/<msgId> (mqadmin writes "
                                              "/tmp/rocketmq/msgbodys); without it the body is shown")),
        query_msg_by_id),
    "queryMsgByKey": Sub("Query Message by Key", (
        TOPIC, opt("-k", "--msgKey", dest="msg_key", required=True, help="Message Key")), query_msg_by_key),
}


# -- parsing and running ----------------------------------------------------------------------------------------------

def _add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)
    for name, spec in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=spec.help, description=spec.help)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", help="Name server address list, eg: 192.168.0.1:9876;"
                       f"192.168.0.2:9876 (default: $NAMESRV_ADDR, else {DEFAULT_NAMESRV})")
        if spec.target:
            target = p.add_mutually_exclusive_group(required=True)
            target.add_argument("-b", "--brokerAddr", dest="broker_addr", help="which broker")
            target.add_argument("-c", "--clusterName", dest="cluster_name", help="which cluster (its masters)")
        for flags, kw in spec.options:
            p.add_argument(*flags, **kw)
        p.add_argument("--json", action="store_true", help="the result as JSON (machine output)")
        p.add_argument("--timeout", type=float, default=5.0, help="seconds a request may take (default 5)")
        p.add_argument("--access-key", default=os.environ.get("RMQSTORE_ACCESS_KEY"),
                       help="ACL access key (default $RMQSTORE_ACCESS_KEY)")
        p.add_argument("--secret-key", default=os.environ.get("RMQSTORE_SECRET_KEY"),
                       help="ACL secret key (default $RMQSTORE_SECRET_KEY)")
        p.set_defaults(admin_run=spec.run, command_parser=p)


def show(io: Streams, blocks: list[text.Block]) -> None:
    """mqadmin's text, or rich tables on a terminal."""
    out = Out(io)
    if out.console is None:
        rendered = text.render(blocks)
        io.stdout.write(rendered if not rendered or rendered.endswith("\n") else rendered + "\n")
        return
    for block in blocks:
        if isinstance(block, text.Grid):
            out.table([h.lstrip("#") for h in block.headers], [[str(c).strip() for c in row] for row in block.rows],
                      right=block.right)
        elif isinstance(block, text.Pairs):
            out.kv([(k.rstrip(":"), v) for k, v in block.pairs], title=block.title)
        elif block.text().strip():
            out.line(block.text().strip("\n"))


def _run(args: argparse.Namespace, io: Streams) -> int:
    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    if (args.access_key is None) != (args.secret_key is None):
        raise CliError("ACL needs both --access-key and --secret-key")
    try:
        admin = Admin(namesrv, timeout=args.timeout, access_key=args.access_key, secret_key=args.secret_key)
    except ValueError as exc:
        raise CliError(f"-n {namesrv!r}: {exc}") from None
    try:
        while True:
            blocks, data = admin.call(args.admin_run(admin.aio, args))
            if args.json:
                json_out(io, data)
            else:
                show(io, blocks)
            if args.admin_command == "queryMsgByKey" and not data["messages"]:
                io.stderr.write(f"rmqstore: no message with key {args.msg_key!r} in topic {args.topic!r}\n")
                return EXIT_INCOMPLETE
            if not getattr(args, "interval", None):
                return EXIT_OK
            io.stdout.flush()
            time.sleep(args.interval)
    finally:
        admin.close()


COMMAND = Command(help="RocketMQ's mqadmin in Python: clusterList, topicStatus, consumerProgress, updateTopic, ... "
                       "against any RocketMQ 4.x name server (-n)", add_arguments=_add_arguments, run=_run)
