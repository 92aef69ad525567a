"""The statistics' schedule and what a broker holds of them (4.9.8's executors of ``BrokerStatsManager``,
``StoreStatsService`` and ``BrokerController``'s daily record).

:class:`StatsSampler` runs the rounds at fixed rates from its start, as ``scheduleAtFixedRate`` with no initial
delay: the minute, hour and day windows of every key (:mod:`.stats`), the store's second
(:mod:`.store_stats`) and the daily totals at local midnight.  A round missed (a stopped machine) runs once,
late, and the next keeps the grid.  The clock is injected: tests drive :meth:`StatsSampler.tick` with a fake
one; :meth:`StatsSampler.start` runs the rounds on a thread of its own.  :class:`BrokerStatistics` is the
broker's handle: the counting methods the processors call and the sampler's lifetime.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Callable

from ..format.status import PutMessageStatus
from .stats import WINDOWS, BrokerStatsManager, Window, wall_clock_ms
from .store_stats import BrokerDailyTotals, StoreStatsService, next_morning_ms

__all__ = ["StatsSampler", "BrokerStatistics", "SEND_OK"]

#: the put results a send answers as sent (SendMessageProcessor's ``sendOK``): the message was appended
SEND_OK = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                     PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})


class _Round:
    def __init__(self, period_ms: int, first_due: int, action: Callable[[int], None]):
        self.period_ms = period_ms
        self.due = first_due
        self.action = action

    def run_if_due(self, now: int) -> None:
        if now < self.due:
            return
        self.action(now)
        missed = (now - self.due) // self.period_ms
        self.due += (missed + 1) * self.period_ms


def _sample_window(manager: BrokerStatsManager, window: Window, now: int) -> None:
    manager.sample(window, now)


class StatsSampler:
    """The rounds at their fixed rates: the three windows of ``manager``, ``store``'s second (when given), the
    daily totals at local midnight (when ``daily`` is given).  :meth:`tick` runs what is due at ``clock()``;
    :meth:`start` runs it on a thread of its own until :meth:`stop`."""

    def __init__(self, manager: BrokerStatsManager, store: StoreStatsService | None,
                 daily: BrokerDailyTotals | None, clock: Callable[[], int] = wall_clock_ms):
        self.clock = clock
        start = clock()
        self.rounds = [_Round(w.period_ms, start, functools.partial(_sample_window, manager, w)) for w in WINDOWS]
        if store is not None:
            self.rounds.append(_Round(1000, start + 1000, store.sample))  # after its first wait, as 4.9.8
        if store is not None and daily is not None:
            def record(now: int) -> None:
                daily.record(store.put_figures()["putMessageTimesTotal"], store.get_message_transfered_msg_count)
            self.rounds.append(_Round(86_400_000, next_morning_ms(start), record))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> None:
        now = self.clock()
        for r in self.rounds:
            r.run_if_due(now)

    def next_due(self) -> int:
        return min(r.due for r in self.rounds)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="BrokerStatsThread", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(min(max(self.next_due() - self.clock(), 0), 1000) / 1000.0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


class BrokerStatistics:
    """What a broker holds: the manager (counted into from the start), and from :meth:`start` on the store's
    figures, the daily totals and the sampler thread."""

    def __init__(self, cluster_name: str, enable_queue_stat: bool = True,
                 clock: Callable[[], int] = wall_clock_ms):
        self.clock = clock
        self.manager = BrokerStatsManager(cluster_name, enable_queue_stat)
        self.daily = BrokerDailyTotals()
        self.store: StoreStatsService | None = None
        self.sampler: StatsSampler | None = None

    def start(self, put_figures: Callable[[], dict]) -> None:
        self.store = StoreStatsService(put_figures, self.clock())
        self.sampler = StatsSampler(self.manager, self.store, self.daily, self.clock)
        self.sampler.start()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def count_sent(self, store, item, result) -> None:
        """A producer's send (``item``: the Message or MessageBatch put) with its put ``result``."""
        if result.status in SEND_OK:
            topic, queue_id = store.commit_log.destination(item)
            ar = result.append_result
            self.manager.count_sent(topic, queue_id, ar.msg_num, ar.wrote_bytes)

    def count_sent_back(self, store, group: str, back_topic: str, msg, result) -> None:
        """A consumer's send-back of a message of ``back_topic``, put as ``msg`` with ``result``."""
        if result.ok:
            topic, queue_id = store.commit_log.destination(msg)
            self.manager.count_sent_back(group, back_topic, topic, queue_id, result.append_result.wrote_bytes)

    def count_delivered(self, level: int, msg, result) -> None:
        """A delayed message of ``level`` put back under its topic as ``msg`` with ``result``."""
        if result.ok:
            ar = result.append_result
            self.manager.count_delivered(level, msg.topic, ar.msg_num, ar.wrote_bytes)

    def count_pull(self, group: str, topic: str, queue_id: int, result, answered: bool, started: float) -> None:
        """One pull's get (every one: found or missed) and, when it was ``answered`` with messages, the group's
        counts; ``started`` is the pull's ``time.perf_counter()``."""
        elapsed_ms = (time.perf_counter() - started) * 1000
        if self.store is not None:
            self.store.count_get(result.found, result.message_count, elapsed_ms)
        if answered:
            self.manager.count_pulled(group, topic, queue_id, result.message_count, result.buffer_total_size,
                                      int(elapsed_ms))
