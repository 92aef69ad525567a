"""The blocking face of the admin client, for notebooks and scripts: :class:`Admin`.

Every call of :class:`~rmqstore.admin.AsyncAdmin` is here as a plain method that blocks until the answer is in.
The coroutines run on an event loop of the admin's own, in a daemon thread
(:class:`~rmqstore.broker.background.ServiceThread`), never on the caller's -- which is what makes it work in
Jupyter, whose kernel already runs a loop in the main thread: ``asyncio.run`` refuses to start there and
``loop.run_until_complete`` cannot nest, but handing a coroutine to another thread's loop and waiting for its
future works from any thread, loop or not.  The loop thread also keeps the connections between calls, so a view
polling every few seconds reuses its sockets.  A call interrupted by the caller (Ctrl-C, a notebook's stop button)
cancels its coroutine on the loop instead of leaving it running.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Iterable

from ..broker.background import ServiceThread
from .client import DEFAULT_TIMEOUT
from .messages import MessageOps
from .snapshot import SnapshotOps

__all__ = ["Admin", "AsyncAdmin", "BLOCKING_API"]


class AsyncAdmin(SnapshotOps, MessageOps):
    """The admin client on the caller's own event loop: every call is a coroutine (``await admin.topic_status(t)``);
    ``await admin.close()`` when done.  See :mod:`rmqstore.admin`."""


#: the calls :class:`Admin` offers, each AsyncAdmin's coroutine of the same name
BLOCKING_API = (
    "cluster_list", "topic_list", "topic_route", "topic_status", "topic_stats", "update_topic", "delete_topic",
    "masters", "query_topic_consume_by_who", "broker_status", "get_broker_config", "update_broker_config", "topic_configs", "subscription_groups",
    "broker_consume_stats", "consume_stats", "update_sub_group", "delete_sub_group", "consumer_progress",
    "all_consumer_progress", "consumer_connection", "producer_connection", "reset_offset_by_time", "view_message",
    "query_msg_by_id", "query_msg_by_key", "message_track", "snapshot",
)


class Admin:
    """A RocketMQ 4.x admin client that blocks: ``Admin("127.0.0.1:9876").topic_status("T")``.

    ``namesrv`` is one name server or several (``"a:9876;b:9876"``); ``timeout`` the seconds a request may take;
    ``access_key``/``secret_key`` (and ``security_token``) sign every request for a broker with ACL on.  Use it as
    a context manager, or call :meth:`close`.
    """

    def __init__(self, namesrv: str | Iterable[str], *, timeout: float = DEFAULT_TIMEOUT,
                 access_key: str | None = None, secret_key: str | None = None, security_token: str | None = None):
        self.aio = AsyncAdmin(namesrv, timeout=timeout, access_key=access_key, secret_key=secret_key,
                              security_token=security_token)
        self._thread = ServiceThread(self.aio, "rmqstore-admin")

    @property
    def name_servers(self) -> list[str]:
        return self.aio.name_servers

    def call(self, coro) -> Any:
        """Run a coroutine of :attr:`aio` on the admin's loop and return its result (cancelled if the wait is
        interrupted)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._thread.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        """Close the connections and stop the loop thread."""
        self._thread.stop()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:  # only reached for names that are not calls (typing sees Any)
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")


def _blocking(name: str):
    coroutine = getattr(AsyncAdmin, name)

    @functools.wraps(coroutine)
    def call(self: Admin, *args, **kwargs):
        return self.call(getattr(self.aio, name)(*args, **kwargs))
    call.__signature__ = inspect.signature(coroutine)  # type: ignore[attr-defined]
    return call


for _name in BLOCKING_API:
    setattr(Admin, _name, _blocking(_name))
