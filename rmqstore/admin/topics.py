"""The cluster, its topics and its brokers: what mqadmin's clusterList, topicList, topicRoute, topicStatus,
updateTopic, deleteTopic, brokerStatus and getBrokerConfig ask (RocketMQ 4.9.8's ``DefaultMQAdminExtImpl``).

A topic's figures live on the brokers, so a call about a topic first asks a name server for its route and then
every broker of the route at once (``asyncio.gather``); a change goes to one broker (``broker_addr``) or to every
master of a cluster (``cluster``), as mqadmin's ``-b`` and ``-c``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..broker.namesrv.routes import FLAG_UNIT, FLAG_UNIT_SUB
from ..broker.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, PERM_READ, PERM_WRITE, TopicConfig
from ..common.errors import AdminError
from ..remoting import RequestCode
from . import bodies
from .client import AdminClient
from .results import BrokerConsumeStats, ClusterInfo, QueueOffsets, TopicList, TopicRoute, TopicStatus, queue_order
from .stored import BrokerConfig, BrokerRuntimeInfo, SubscriptionGroups, TopicConfigs

__all__ = ["TopicOps", "Applied", "ORDER_TOPIC_CONFIG", "topic_sys_flag"]

R = RequestCode
#: the name servers' KV namespace of ordered topics (``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``)
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def topic_sys_flag(unit: bool, has_unit_sub: bool) -> int:
    """``TopicSysFlag.buildSysFlag``."""
    return (FLAG_UNIT if unit else 0) | (FLAG_UNIT_SUB if has_unit_sub else 0)


@dataclass
class Applied:
    """What a change did: the brokers and name servers it was applied to, and the config it sent (if any)."""

    brokers: list[str]
    name_servers: list[str] = field(default_factory=list)
    config: Any = None
    order_conf: str | None = None  # an ordered topic's conf put on the name servers ("broker-a:8;broker-b:8")


class TopicOps(AdminClient):
    """The cluster, topics and brokers (a part of :class:`~rmqstore.admin.AsyncAdmin`)."""

    # -- the name servers ---------------------------------------------------------------------------------------
    async def cluster_list(self) -> ClusterInfo:
        """Every broker the name server knows (``examineBrokerClusterInfo``)."""
        address, answer = await self.ask_namesrv(R.GET_BROKER_CLUSTER_INFO)
        return self.decode(address, R.GET_BROKER_CLUSTER_INFO, bodies.decode_cluster_info, answer.body)

    async def topic_list(self) -> TopicList:
        """Every topic a name server routes (``fetchAllTopicList``)."""
        address, answer = await self.ask_namesrv(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return self.decode(address, R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, bodies.decode_topic_list, answer.body)

    async def topic_route(self, topic: str) -> TopicRoute:
        """Where a topic's queues are (``examineTopicRouteInfo``); an unknown topic is refused TOPIC_NOT_EXIST."""
        address, answer = await self.ask_namesrv(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return self.decode(address, R.GET_ROUTEINFO_BY_TOPIC, bodies.decode_topic_route, topic, answer.body)

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups consuming a topic -- online, or with offsets of it -- as the first broker of its route knows
        them (``queryTopicConsumeByWho``)."""
        addresses = (await self.topic_route(topic)).broker_addresses()
        if not addresses:
            return []
        answer = await self.request(addresses[0], R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        return self.decode(addresses[0], R.QUERY_TOPIC_CONSUME_BY_WHO, bodies.decode_group_list, answer.body)

    async def masters(self, cluster: str) -> list[str]:
        """The master addresses of a cluster; AdminError when the cluster has none."""
        masters = (await self.cluster_list()).master_addresses(cluster)
        if not masters:
            raise AdminError(f"cluster {cluster!r} has no master broker on {';'.join(self.name_servers)}")
        return masters

    async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        if (broker_addr is None) == (cluster is None):
            raise ValueError("name either broker_addr (mqadmin -b) or cluster (mqadmin -c)")
        return [broker_addr] if broker_addr is not None else await self.masters(cluster)

    # -- topics ---------------------------------------------------------------------------------------------------
    async def topic_stats(self, broker_addr: str, topic: str) -> list[QueueOffsets]:
        """One broker's queues of a topic (GET_TOPIC_STATS_INFO)."""
        answer = await self.request(broker_addr, R.GET_TOPIC_STATS_INFO, {"topic": topic})
        return self.decode(broker_addr, R.GET_TOPIC_STATS_INFO, bodies.decode_topic_stats, answer.body)

    async def topic_status(self, topic: str) -> TopicStatus:
        """Every queue of a topic on every broker of its route (``examineTopicStats``)."""
        route = await self.topic_route(topic)
        per_broker = await asyncio.gather(*(self.topic_stats(a, topic) for a in route.broker_addresses()))
        queues = sorted((q for qs in per_broker for q in qs), key=queue_order)
        if not queues:
            raise AdminError(f"topic {topic!r}: no broker of its route has stats of it")
        return TopicStatus(topic, queues)

    async def update_topic(self, topic: str, *, broker_addr: str | None = None, cluster: str | None = None,
                           read_queue_nums: int = 8, write_queue_nums: int = 8, perm: int = PERM_READ | PERM_WRITE,
                           order: bool = False, unit: bool = False, has_unit_sub: bool = False) -> Applied:
        """Create or change a topic on a broker or on every master of a cluster (``updateTopic``); an ordered topic's
        queue layout is put on the name servers too (``createOrUpdateOrderConf``)."""
        targets = await self._targets(broker_addr, cluster)
        config = TopicConfig(topic, int(read_queue_nums), int(write_queue_nums), int(perm), "SINGLE_TAG",
                             topic_sys_flag(unit, has_unit_sub), bool(order))
        header = {"topic": topic, "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC, "readQueueNums": config.read_queue_nums,
                  "writeQueueNums": config.write_queue_nums, "perm": config.perm,
                  "topicFilterType": config.topic_filter_type, "topicSysFlag": config.topic_sys_flag,
                  "order": config.order}
        for address in targets:
            await self.request(address, R.UPDATE_AND_CREATE_TOPIC, header)
        applied = Applied(targets, config=config)
        if order:
            applied.order_conf = await self._order_conf(topic, config.write_queue_nums, broker_addr, cluster)
            applied.name_servers = await self._put_kv(ORDER_TOPIC_CONFIG, topic, applied.order_conf)
        return applied

    async def _order_conf(self, topic: str, queues: int, broker_addr: str | None, cluster: str | None) -> str:
        info = await self.cluster_list()
        if cluster is not None:
            names = sorted(set(info.clusters.get(cluster, [])))
            return ";".join(f"{name}:{queues}" for name in names)
        name = info.broker_name_of(broker_addr or "")
        if name is None:
            raise AdminError(f"{broker_addr} is not a broker the name servers know")
        entries: dict[str, str] = {}
        address, answer = await self.ask_namesrv(R.GET_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": topic},
                                                 ok=(0, 22))  # QUERY_NOT_FOUND: none yet
        for entry in filter(None, answer.ext_fields.get("value", "").split(";")):
            entries[entry.split(":")[0]] = entry
        entries[name] = f"{name}:{queues}"
        return ";".join(entries.values())

    async def _put_kv(self, namespace: str, key: str, value: str) -> list[str]:
        for address in self.name_servers:
            await self.request(address, R.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})
        return list(self.name_servers)

    async def delete_topic(self, topic: str, cluster: str) -> Applied:
        """Delete a topic from every master of a cluster, then from every name server (``deleteTopic``)."""
        masters = await self.masters(cluster)
        for address in masters:
            await self.request(address, R.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        for address in self.name_servers:
            await self.request(address, R.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})
        return Applied(masters, list(self.name_servers))

    # -- brokers --------------------------------------------------------------------------------------------------
    async def broker_status(self, broker_addr: str) -> BrokerRuntimeInfo:
        """A broker's runtime figures (``brokerStatus``: GET_BROKER_RUNTIME_INFO)."""
        answer = await self.request(broker_addr, R.GET_BROKER_RUNTIME_INFO)
        return self.decode(broker_addr, R.GET_BROKER_RUNTIME_INFO, bodies.decode_runtime_info, broker_addr,
                           answer.body)

    async def get_broker_config(self, broker_addr: str) -> BrokerConfig:
        """A broker's configuration (``getBrokerConfig``)."""
        answer = await self.request(broker_addr, R.GET_BROKER_CONFIG)
        return self.decode(broker_addr, R.GET_BROKER_CONFIG, bodies.decode_broker_config, broker_addr, answer.body,
                           answer.ext_fields)

    async def update_broker_config(self, broker_addr: str, properties: dict[str, Any]) -> Applied:
        """Change a broker's configuration keys (``updateBrokerConfig``: ``key=value`` lines)."""
        text = "".join(f"{k}={v}\n" for k, v in properties.items() if v is not None)
        await self.request(broker_addr, R.UPDATE_BROKER_CONFIG, body=text.encode("utf-8"))
        return Applied([broker_addr], config=dict(properties))

    async def topic_configs(self, broker_addr: str) -> TopicConfigs:
        """A broker's topic table (GET_ALL_TOPIC_CONFIG)."""
        answer = await self.request(broker_addr, R.GET_ALL_TOPIC_CONFIG)
        return self.decode(broker_addr, R.GET_ALL_TOPIC_CONFIG, bodies.decode_topic_configs, broker_addr, answer.body)

    async def subscription_groups(self, broker_addr: str) -> SubscriptionGroups:
        """A broker's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
        answer = await self.request(broker_addr, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return self.decode(broker_addr, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, bodies.decode_subscription_groups,
                           broker_addr, answer.body)

    async def broker_consume_stats(self, broker_addr: str, order_only: bool = False) -> BrokerConsumeStats:
        """Every group's queues on one broker, in one answer (GET_BROKER_CONSUME_STATS)."""
        answer = await self.request(broker_addr, R.GET_BROKER_CONSUME_STATS, {"isOrder": order_only},
                                    timeout=self.timeout * 3)
        return self.decode(broker_addr, R.GET_BROKER_CONSUME_STATS, bodies.decode_consume_stats_list, answer.body)

