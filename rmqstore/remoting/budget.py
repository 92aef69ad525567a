"""The server-wide budget for answers written but not yet sent.

A response the server writes goes to its connection's transport; what the kernel's socket
buffer does not take at once waits there, in our memory, until the peer reads.  A peer
that asks much and never reads would make that grow without end, and each connection's own
limit (:attr:`~rmqstore.remoting.server.Limits.connection_unsent_high`) only bounds it per
connection: a few hundred such peers still add up.  :class:`UnsentBudget` is the one
account of those bytes for the whole server:

* each connection reports what its transport holds (``get_write_buffer_size()``) through
  :meth:`UnsentBudget.account` -- after each write, while it waits for room, and when it
  closes (:meth:`~rmqstore.remoting.server.Connection.account_unsent`, the one place that
  measures).  A report can go stale only downwards (bytes leave a buffer between reports,
  they never enter it unseen), so the total is never below the truth;
* when the total passes ``budget``, the server is **over budget** until the total falls
  below ``low_water`` (half the budget).  Before calling it so, every holder is measured
  again (at most once per ``refresh_every``), so stale reports do not start it.  While over,
  a connection holding more than :data:`KEEPING_UP` bytes -- the ones holding the most: a
  peer that keeps up with its answers has next to nothing waiting here, the kernel's socket
  buffer takes them -- reads no further request (:meth:`may_read`); the others go on.  The
  holders are measured every ``refresh_every`` seconds while it lasts, and each stopped
  connection is woken as soon as it may read again.  One WARNING line says when it begins
  (the total, the budget, how many connections stopped, the heaviest) and one INFO line
  when it ends, through the server's log throttle: once per episode, never per request.

The bound, for processors that answer without waiting: a connection checks for room before
each request it dispatches and lets that request's answer be written (and accounted) before
the next check, so past the budget each connection can add at most one more answer -- and
one that held no more than :data:`KEEPING_UP` can get there first.  The accounted total stays
below ``budget + connections * (KEEPING_UP + largest frame)``; requests already waiting
inside a processor (a held long-polling pull) still answer, at most ``max_in_flight`` per
connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from .throttle import LogThrottle

__all__ = ["UnsentBudget", "UnsentHolder", "KEEPING_UP"]

#: past the budget, a connection holding more unsent bytes than this stops reading (asyncio's default
#: high-water mark of a transport: a peer that keeps up holds less)
KEEPING_UP = 64 * 1024


class UnsentHolder(Protocol):
    @property
    def remote_addr_text(self) -> str: ...

    def account_unsent(self) -> int:
        """Measure what the transport holds and report it with :meth:`UnsentBudget.account`."""
        ...


class UnsentBudget:
    """The accounted unsent bytes of a server's connections (``total``, ``peak``) and who may read."""

    def __init__(self, budget: int, log_throttle: LogThrottle, refresh_every: float = 0.05):
        if budget < 1:
            raise ValueError(f"the unsent budget must be positive, got {budget}")
        self.budget = budget
        self.low_water = budget // 2
        self.refresh_every = refresh_every
        self.log_throttle = log_throttle
        self.total = 0
        self.peak = 0  # the highest total ever accounted
        self.over_since: float | None = None  # loop time the episode began; None when within budget
        self._held: dict[UnsentHolder, int] = {}
        self._waiting: dict[UnsentHolder, asyncio.Event] = {}
        self._measuring = False
        self._measured_at = float("-inf")
        self._refresher: asyncio.Task | None = None

    def held(self, holder: UnsentHolder) -> int:
        return self._held.get(holder, 0)

    def account(self, holder: UnsentHolder, size: int) -> None:
        """``holder`` now holds ``size`` unsent bytes (0: nothing, or closed)."""
        old = self._held.pop(holder, 0)
        if size > 0:
            self._held[holder] = size
        self.total += size - old
        self.peak = max(self.peak, self.total)
        if size <= KEEPING_UP and holder in self._waiting:
            self._waiting[holder].set()  # it may read again, whether or not the episode goes on
        if not self._measuring:
            self._evaluate()

    def may_read(self, holder: UnsentHolder) -> bool:
        return self.over_since is None or self._held.get(holder, 0) <= KEEPING_UP

    async def wait_for_room(self, holder: UnsentHolder, timeout: float) -> None:
        """Until ``holder`` may read again or ``timeout`` seconds pass."""
        event = self._waiting.setdefault(holder, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            if self._waiting.get(holder) is event:
                del self._waiting[holder]

    def wake(self, holder: UnsentHolder) -> None:
        """Stop ``holder``'s :meth:`wait_for_room` now (it closes)."""
        event = self._waiting.get(holder)
        if event is not None:
            event.set()

    def close(self) -> None:
        """The server stops: no more measuring, every waiter released."""
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None
        for event in self._waiting.values():
            event.set()

    # -- the episode ----------------------------------------------------------------------------
    def _evaluate(self, measured: bool = False) -> None:
        if self.over_since is None:
            if self.total <= self.budget:
                return
            loop = asyncio.get_running_loop()
            if not measured and loop.time() - self._measured_at >= self.refresh_every:
                self._measure_all()  # reports can be stale: look again before calling it an episode
                return
            self._begin(loop)
        elif self.total < self.low_water:
            self._end()

    def _measure_all(self) -> None:
        self._measuring = True
        try:
            for holder in list(self._held):
                holder.account_unsent()
        finally:
            self._measuring = False
        self._measured_at = asyncio.get_running_loop().time()
        self._evaluate(measured=True)

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        self.over_since = loop.time()
        stopped = [(size, h) for h, size in self._held.items() if size > KEEPING_UP]
        heaviest = max(stopped, key=lambda item: item[0], default=(0, None))
        self.log_throttle("unsent budget", logging.WARNING,
                          "unsent answers hold %d bytes on %d connections, over the %d-byte budget: not reading from "
                          "the %d holding more than %d bytes (the most: %s, %d bytes) until below %d bytes",
                          self.total, len(self._held), self.budget, len(stopped), KEEPING_UP,
                          heaviest[1].remote_addr_text if heaviest[1] is not None else "-", heaviest[0],
                          self.low_water)
        self._refresher = loop.create_task(self._refresh())

    def _end(self) -> None:
        assert self.over_since is not None
        lasted = asyncio.get_running_loop().time() - self.over_since
        self.over_since = None
        if self._refresher is not None and self._refresher is not asyncio.current_task():
            self._refresher.cancel()
        self._refresher = None
        self.log_throttle("unsent budget", logging.INFO,
                          "unsent answers down to %d bytes, below %d: reading from every connection again after "
                          "%.1f s (peak %d bytes)", self.total, self.low_water, lasted, self.peak)
        for event in self._waiting.values():
            event.set()

    async def _refresh(self) -> None:
        while self.over_since is not None:
            await asyncio.sleep(self.refresh_every)
            self._measure_all()
