"""The name server role: which broker serves which topic (GET_ROUTEINFO_BY_TOPIC, 105).

A RocketMQ client knows only name server addresses.  Before it sends to or pulls from a
topic it asks a name server for the topic's route: the brokers (name, cluster, address by
broker id, 0 being the master) and, per broker, the topic's read and write queue counts
and permission.  It then talks to the brokers directly.  An unknown topic is answered
TOPIC_NOT_EXIST (17); a producer then asks for the route of the default topic TBW102 and
sends there, and the broker creates the topic from it (auto-create).

Here the name server learns its routes from :class:`BrokerRegistration` objects: the
embedded name server of ``rmqstore broker`` reads the broker's live topic table, so every
topic the broker has is routed to it at once (retry topics included, created at a
consumer's heartbeat).  The route body is TopicRouteData as fastjson writes it: sorted keys,
the broker-id map with unquoted integer keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..remoting import Connection, RemotingCommand, RemotingServer, RequestCode, ResponseCode
from .headers import Header
from .jsonfmt import dumps

__all__ = ["BrokerRegistration", "NameServer", "route_data"]


@dataclass
class BrokerRegistration:
    """One broker as a name server sees it; ``topics`` is its live TopicConfigManager."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    topics: object


def route_data(topic: str, registrations: list[BrokerRegistration]) -> dict | None:
    """TopicRouteData of ``topic`` over the given brokers, or None when none serves it."""
    queue_datas, broker_datas = [], []
    for reg in registrations:
        config = reg.topics.select(topic)
        if config is None:
            continue
        queue_datas.append({"brokerName": reg.broker_name, "perm": config.perm,
                            "readQueueNums": config.read_queue_nums, "topicSysFlag": config.topic_sys_flag,
                            "writeQueueNums": config.write_queue_nums})
        broker_datas.append({"brokerAddrs": {reg.broker_id: reg.address}, "brokerName": reg.broker_name,
                             "cluster": reg.cluster})
    if not queue_datas:
        return None
    return {"brokerDatas": broker_datas, "filterServerTable": {}, "queueDatas": queue_datas}


class NameServer:
    """The processors of a name server on its own listening socket."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9876, limits=None):
        self.server = RemotingServer(host, port, limits)
        self.registrations: list[BrokerRegistration] = []
        self.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route_info)

    def add_broker(self, registration: BrokerRegistration) -> None:
        self.registrations.append(registration)

    def get_route_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = Header(req.ext_fields).str("topic")
        route = route_data(topic, self.registrations)
        if route is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}")
        return req.response(ResponseCode.SUCCESS, body=dumps(route).encode("utf-8"))

    async def start(self) -> None:
        await self.server.start()

    async def stop(self) -> None:
        await self.server.stop()

    @property
    def address(self) -> str:
        return self.server.address
