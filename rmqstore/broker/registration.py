"""A broker registering with separate name servers (RocketMQ's ``BrokerOuterAPI.registerBrokerAll``).

With ``namesrvAddr`` set (``host:port;host:port``), the broker sends REGISTER_BROKER (103)
to each name server at start and every 30 s: its name, cluster, id and address in the
header, its topic table as the body (RegisterBrokerBody: the topics.json content and no
filter servers; CRC-32 of the body in ``bodyCrc32``).  A name server drops a broker it has
not heard from for 120 s, so a broker that dies leaves the routes by itself; one that
stops cleanly sends UNREGISTER_BROKER (104) first.  A name server that cannot be reached
is tried again at the next round.

The registration also carries the broker's HA address (``haServerAddr``: where a master
serves slaves), and the name server answers a slave with its master's HA address and
broker address (RegisterBrokerResponseHeader).  As RocketMQ's ``doRegisterBrokerAll`` does,
only the first answer counts; a SLAVE started without ``haMasterAddress``
(``updateMasterHAServerAddrPeriodically``) hands that HA address to its store, which
connects to it -- and moves to a new one when a later registration answers another.
A slave configured with ``haMasterAddress`` keeps it whatever the name server says.

The embedded name server (``rmqstore broker`` without ``--no-namesrv``) is registered with
in the same rounds, in-process: its registration holds the broker's live topic table, so a
topic is routed the moment it exists, and each round puts the registration back whatever
happened to it meanwhile.  A name server trusts what it is told -- anyone may send it
UNREGISTER_BROKER with this broker's identity, or REGISTER_BROKER from a connection of its own
and then close it -- so a route lost by any means comes back within one period, on the
embedded name server as on the separate ones.  The period is ``registerNameServerPeriod``
(30 s), used clamped to 10-60 s as RocketMQ does; a program (a test, a notebook) may pass
another.
"""

from __future__ import annotations

import asyncio
import logging

from ..format.crc import crc32
from ..remoting import RemotingClient, RemotingCommand, RequestCode
from ..remoting.codes import MQVersion
from .namesrv.register_body import encode_register_body, parse_data_version
from .tasks import BackgroundTask

__all__ = ["NamesrvRegistration", "REGISTER_PERIOD", "clamped_register_period"]

log = logging.getLogger(__name__)

REGISTER_PERIOD = 30.0  # registerNameServerPeriod's default, seconds


def clamped_register_period(period_ms: int) -> float:
    """Seconds between registration rounds for a ``registerNameServerPeriod`` of ``period_ms``:
    RocketMQ keeps it within 10 s and 60 s whatever the configuration says."""
    return max(10_000, min(int(period_ms), 60_000)) / 1000.0


class NamesrvRegistration:
    """``registerBrokerAll`` every ``period`` seconds: with the name servers at ``addresses``
    (``namesrvAddr``, ``;``-separated) over the network and with ``embedded`` (a
    :class:`~rmqstore.broker.namesrv.NameServer` in this process, or None) directly."""

    def __init__(self, broker, addresses: str, period: float = REGISTER_PERIOD, embedded=None,
                 compressed: bool = False):
        self.broker = broker
        self.compressed = compressed  # compressedRegister: the body deflated (see namesrv.register_body)
        self.addresses = [a.strip() for a in addresses.split(";") if a.strip()]
        self.period = period
        self.embedded = embedded
        self.clients: dict[str, RemotingClient] = {}
        self._task = BackgroundTask()
        self._soon: set[asyncio.Task] = set()
        #: the master's addresses the name server last answered (masterAddr, haServerAddr); None before
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None

    def _header(self) -> dict:
        bc = self.broker.config
        return {"brokerName": bc.broker_name, "brokerAddr": bc.broker_addr, "clusterName": bc.broker_cluster_name,
                "brokerId": bc.broker_id}

    @staticmethod
    def _request(code: int, ext: dict, body: bytes = b"") -> RemotingCommand:
        """A request as a 4.9.8 broker sends it: a name server reads a RegisterBrokerBody only from a
        sender of 3.0.11 or later (an older one's body is the bare topic table)."""
        req = RemotingCommand(code, ext, body)
        req.version = MQVersion.V4_9_8
        return req

    def _body(self) -> bytes:
        topics = self.broker.topics
        return encode_register_body(topics.data_version, topics.table, self.compressed)

    async def _client(self, address: str) -> RemotingClient:
        client = self.clients.get(address)
        if client is None or client.connection.closed.is_set():
            host, _, port = address.rpartition(":")
            client = await RemotingClient().connect(host, int(port))
            self.clients[address] = client
        return client

    def register_embedded(self) -> None:
        """(Re-)register with the embedded name server, in-process: the topic table as it is now."""
        if self.embedded is not None:
            bc, topics = self.broker.config, self.broker.topics
            self.embedded.register_broker_in_process(bc.broker_cluster_name, bc.broker_addr, bc.broker_name,
                                                     bc.broker_id, self.broker.ha_server_addr,
                                                     parse_data_version(topics.data_version), dict(topics.table))

    async def register_all(self) -> int:
        """Register with every name server once; returns how many separate ones accepted."""
        self.register_embedded()
        if not self.addresses:
            return 0
        body = self._body()
        ext = dict(self._header(), haServerAddr=self.broker.ha_server_addr, compressed=str(self.compressed).lower(),
                   bodyCrc32=crc32(body))
        answers = []
        for address in self.addresses:
            try:
                client = await self._client(address)
                r = await client.invoke(self._request(RequestCode.REGISTER_BROKER, dict(ext), body))
                if r.code == 0:
                    answers.append(r.ext_fields)
                else:
                    log.warning("name server %s refused the registration: %s", address, r.remark)
            except (OSError, asyncio.TimeoutError, ValueError) as exc:
                log.warning("registering with name server %s failed: %s", address, exc)
        if answers:
            self._take_answer(answers[0])
        return len(answers)

    def _take_answer(self, fields: dict) -> None:
        """The first name server's RegisterBrokerResponseHeader: the master's addresses, for a slave."""
        self.master_addr = fields.get("masterAddr") or None
        ha_addr = fields.get("haServerAddr") or None
        self.master_ha_addr = ha_addr
        if ha_addr and self.broker.learns_ha_master:
            self.broker.store.update_ha_master_address(ha_addr)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self.register_all()

    def register_soon(self) -> None:
        """A topic was created or changed: the embedded name server learns it now, in-process; the separate
        ones at once too, not at the next round (``registerIncrementBrokerData``)."""
        self.register_embedded()
        if not self.addresses:
            return
        task = asyncio.get_running_loop().create_task(self.register_all())
        self._soon.add(task)
        task.add_done_callback(self._soon.discard)

    async def start(self) -> None:
        await self.register_all()
        self.broker.topics.on_change = self.register_soon
        self._task.start(self._run())

    async def stop(self) -> None:
        self.broker.topics.on_change = None
        await self._task.stop()
        await asyncio.gather(*self._soon, return_exceptions=True)
        for address, client in list(self.clients.items()):
            try:
                if not client.connection.closed.is_set():
                    await client.invoke(self._request(RequestCode.UNREGISTER_BROKER, self._header()), 3.0)
            except (OSError, asyncio.TimeoutError) as exc:
                log.warning("unregistering from name server %s failed: %s", address, exc)
            await client.close()
        self.clients.clear()
