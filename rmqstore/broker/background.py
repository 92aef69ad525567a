"""A broker (or name server) on an event loop of its own thread, for notebooks and tests.

``ServiceThread(service)`` runs any object with ``start()``/``stop()`` coroutines (a
:class:`~rmqstore.broker.Broker`, a :class:`~rmqstore.broker.NameServer`) on a fresh
asyncio loop in a daemon thread, so the caller's thread -- a Jupyter cell, a test, a
RocketMQ client -- stays free.  ``call(coro)`` runs a coroutine on that loop and returns
its result; ``stop()`` stops the service (a broker shuts its store down cleanly) and the
loop.  Use it as a context manager so that it is stopped also when something fails.
"""

from __future__ import annotations

import asyncio
import threading

__all__ = ["ServiceThread"]


class ServiceThread:
    """A service with ``start()``/``stop()`` coroutines, run on an event loop in a thread of its own."""

    def __init__(self, service, name: str = "rmqstore-service"):
        self.service = service
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()
        try:
            self.call(service.start(), 30)
        except BaseException:
            self._stop_loop()
            raise

    def call(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.thread.is_alive():
            try:
                self.call(self.service.stop(), 60)
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
