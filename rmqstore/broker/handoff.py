"""Results from the store's threads to the broker's event loop, one wake-up a burst.

A put that waits (SYNC_FLUSH's group commit, a SYNC_MASTER's slave) is completed in the
service's thread, for a whole group of puts at once.  ``asyncio.wrap_future`` would hand each
result over with ``call_soon_threadsafe``, which writes a byte to the loop's self-pipe every
time: a flush that answers 32 sends made 32 writes and 32 reads of the pipe.  A
:class:`LoopHandoff` queues the results and wakes the loop once for everything queued before
it runs; the loop then completes their asyncio futures in one callback.  A waiter that went
away (its connection closed) only has its asyncio future cancelled: the put is not cancelled
(it was appended already) and still completes, unseen.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

__all__ = ["LoopHandoff"]


class LoopHandoff:
    """Delivers concurrent futures' results to ``loop`` as asyncio futures, one wake-up a burst."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[asyncio.Future, Future]] = []
        self.wakeups = 0  # how many times the loop was woken (a burst each)

    def wrap(self, future: Future) -> asyncio.Future:
        """An asyncio future (on :attr:`loop`, called there) with ``future``'s result or exception."""
        waiter = self.loop.create_future()
        future.add_done_callback(lambda done: self._ready_one(waiter, done))
        return waiter

    def _ready_one(self, waiter: asyncio.Future, done: Future) -> None:
        # in the thread that completed the future (or the loop's, when it was done already)
        with self._lock:
            self._ready.append((waiter, done))
            if len(self._ready) > 1:
                return  # a wake-up is on its way
        self.wakeups += 1
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _deliver(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for waiter, done in ready:
            if waiter.done():
                continue  # its waiter went away
            exc = done.exception() if not done.cancelled() else asyncio.CancelledError()
            if exc is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(done.result())
