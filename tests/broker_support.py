"""Test helpers for the broker: a broker on its own event-loop thread, ephemeral loopback ports.

``BrokerThread(root)`` starts a :class:`rmqstore.broker.Broker` with an embedded name
server, both on 127.0.0.1 port 0, tiny store files; ``.call(coro)`` runs a coroutine on its
loop; ``.stop()`` stops the broker (store shut down cleanly) and the loop.  Every test
stops what it starts, also when it fails (use it as a context manager).
"""

from __future__ import annotations

import asyncio
import threading

from rmqstore.broker import Broker, BrokerConfig
from rmqstore.config import StoreConfig
from rmqstore.remoting import Limits, RemotingClient

__all__ = ["BrokerThread", "small_store_config"]


def small_store_config(**overrides) -> StoreConfig:
    kw = dict(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
              max_hash_slot_num=1000, max_index_num=4000)
    kw.update(overrides)
    return StoreConfig(**kw)


class BrokerThread:
    def __init__(self, root, *, limits: Limits | None = None, store_config: StoreConfig | None = None,
                 **broker_overrides):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="broker-loop", daemon=True)
        config = BrokerConfig(**dict({"broker_name": "broker-a", "listen_port": 0}, **broker_overrides))
        self.broker = Broker(str(root), config, store_config or small_store_config(),
                             namesrv_listen=("127.0.0.1", 0), limits=limits)
        self.thread.start()
        try:
            self.call(self.broker.start(), 30)
        except BaseException:
            self._stop_loop()
            raise

    @property
    def namesrv(self) -> str:
        return self.broker.namesrv.address

    @property
    def port(self) -> int:
        return self.broker.server.port

    def call(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def client(self) -> RemotingClient:
        return self.call(RemotingClient().connect("127.0.0.1", self.port))

    def stop(self) -> None:
        if self.thread.is_alive():
            try:
                self.call(self.broker.stop(), 60)
            finally:
                self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
