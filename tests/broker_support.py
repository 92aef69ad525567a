"""Test helpers for the broker: servers on their own event-loop threads, ephemeral loopback ports.

``BrokerThread(root)`` starts a :class:`rmqstore.broker.Broker` with an embedded name
server, both on 127.0.0.1 port 0, tiny store files; ``NamesrvThread()`` a standalone name
server.  ``.call(coro)`` runs a coroutine on the loop; ``.stop()`` stops the service (a
broker's store is shut down cleanly) and the loop.  Every test stops what it starts, also
when it fails (use them as context managers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures

from rmqstore.broker import Broker, BrokerConfig, NameServer
from rmqstore.broker.background import ServiceThread as _LoopThread
from rmqstore.common.config import StoreConfig
from rmqstore.broker.jsonfmt import loads
from rmqstore.remoting import Limits, RemotingClient
from rmqstore.files.store_paths import config_path

__all__ = ["BrokerThread", "NamesrvThread", "small_store_config", "run_async", "invoke_at", "config_json"]


def run_async(coro, timeout: float = 30):
    """Run ``coro`` to its end on a fresh event loop in a thread of its own and return its result.

    ``asyncio.run`` refuses to start where a loop already runs in the calling thread -- and the browser
    tier's Playwright (sync API) keeps one running in the main thread for the whole session, so a test
    that calls ``asyncio.run`` passes alone and fails in the full suite."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(coro, timeout)).result()


def small_store_config(**overrides) -> StoreConfig:
    kw = dict(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
              max_hash_slot_num=1000, max_index_num=4000)
    kw.update(overrides)
    return StoreConfig(**kw)


def config_json(root, name: str):
    """The parsed content of the store's ``config/<name>`` (topics.json, subscriptionGroup.json, ...)."""
    with open(config_path(str(root), name), encoding="utf-8") as f:
        return loads(f.read())


def invoke_at(thread: _LoopThread, address: str, request, timeout: float = 10.0):
    """The answer of the server at ``address`` to ``request``, over a connection of its own opened and closed on
    ``thread``'s loop."""
    host, port = address.rsplit(":", 1)

    async def ask():
        client = await RemotingClient().connect(host, int(port))
        try:
            return await client.invoke(request, timeout)
        finally:
            await client.close()
    return thread.call(ask())


class BrokerThread(_LoopThread):
    def __init__(self, root, *, limits: Limits | None = None, store_config: StoreConfig | None = None,
                 embedded_namesrv: bool = True, register_period: float | None = None, **broker_overrides):
        config = BrokerConfig(**dict({"broker_name": "broker-a", "listen_port": 0}, **broker_overrides))
        self.broker = Broker(str(root), config, store_config or small_store_config(),
                             namesrv_listen=("127.0.0.1", 0) if embedded_namesrv else None, limits=limits,
                             register_period=register_period)
        super().__init__(self.broker, "broker-loop")

    @property
    def namesrv(self) -> str:
        return self.broker.namesrv.address

    @property
    def port(self) -> int:
        return self.broker.server.port

    def client(self) -> RemotingClient:
        return self.call(RemotingClient().connect("127.0.0.1", self.port))

    def invoke(self, request, timeout: float = 10.0):
        """The broker's answer to ``request`` over a connection of its own."""
        return invoke_at(self, f"127.0.0.1:{self.port}", request, timeout)


class NamesrvThread(_LoopThread):
    def __init__(self, **kwargs):
        self.namesrv = NameServer("127.0.0.1", 0, **kwargs)
        super().__init__(self.namesrv, "namesrv-loop")

    @property
    def address(self) -> str:
        return self.namesrv.address
