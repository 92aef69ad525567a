"""A rate limit on repeated log lines: the first few of a kind per window, then a count.

A server facing a hostile or broken peer sees the same mistake thousands of times a
second; a log line (let alone a traceback) for each turns bad input into a disk-filling
attack (issue 20: 42 MB of log for 171k bad requests).  :class:`LogThrottle` keys each
line by its *kind* ("closing for bad bytes", "processor failed", ...): per kind, the first
``burst`` lines of a ``window`` go out as usual, the rest are only counted, and one
summary line -- "N more lines of this kind (kind) left out in the last W s" -- goes out
when the window is over (at the next line of any kind, or at :meth:`LogThrottle.flush`,
which a server calls when it stops).  Nothing is hidden: the shown lines plus the counts
are every event.

It holds no lock: one event loop calls it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["LogThrottle"]


@dataclass
class _Kind:
    started: float
    shown: int = 0
    left_out: int = 0
    level: int = logging.INFO


class LogThrottle:
    """``throttle(kind, level, msg, *args, exc_info=False)`` logs to ``logger`` unless ``burst`` lines of
    ``kind`` went out in the current ``window`` seconds; returns whether it logged."""

    def __init__(self, logger: logging.Logger, burst: int = 10, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic):
        if burst < 1 or window <= 0:
            raise ValueError(f"burst must be at least 1 and window positive, got {burst} and {window}")
        self.logger = logger
        self.burst = burst
        self.window = window
        self.clock = clock
        self._kinds: dict[str, _Kind] = {}

    def __call__(self, kind: str, level: int, msg: str, *args, exc_info: bool = False) -> bool:
        now = self.clock()
        self._close_windows(now)
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _Kind(now)
        state.level = max(state.level, level)
        if state.shown >= self.burst:
            state.left_out += 1
            return False
        state.shown += 1
        self.logger.log(level, msg, *args, exc_info=exc_info, stacklevel=2)
        return True

    def flush(self) -> None:
        """Write the summary of every kind with lines left out, now (a server that stops)."""
        self._close_windows(None)

    def _close_windows(self, now: float | None) -> None:
        """Summarise and forget the kinds whose window is over (all of them when ``now`` is None)."""
        for kind, state in list(self._kinds.items()):
            if now is not None and now - state.started < self.window:
                continue
            del self._kinds[kind]
            if state.left_out:
                elapsed = (self.clock() if now is None else now) - state.started
                self.logger.log(state.level, "%d more lines of this kind (%s) left out in the last %.0f s",
                                state.left_out, kind, elapsed)
