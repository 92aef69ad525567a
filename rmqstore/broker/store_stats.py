"""The store's figures in ``brokerStatus``: the part of RocketMQ 4.9.8's ``StoreStatsService`` our store does not
keep itself, and ``BrokerStats``' daily totals.

The store counts its puts (:class:`rmqstore.store.StoreStats`: totals by topic, sizes, failures, the longest
put, a latency histogram); :class:`StoreStatsService` reads those when it samples, counts the gets itself (each
pull's get: found or missed, messages transferred, the longest), and keeps 4.9.8's 1 s samples of the four
totals, 601 of them, from which it reads the 10 s, 1 min and 10 min rates (``putTps``, ``getTransferedTps``...:
a rate is empty text until there are samples enough for it, so a young broker prints ``0.0  ``).  Every minute
(4.9.8's ``printTps``) it closes a window of put latencies: ``putMessageDistributeTime`` and ``putLatency99``
show the last closed one, ``null`` and ``0.00`` before the first.  See :mod:`.stats` for the sampling itself
and :mod:`.stats_service` for the schedule.
"""

from __future__ import annotations

import datetime
import threading
from typing import Callable

from .javatext import java_double, java_fixed

__all__ = ["StoreStatsService", "BrokerDailyTotals", "next_morning_ms"]


# -- the store's figures ----------------------------------------------------------------------------------------

#: the store's put-latency buckets (rmqstore.store.StoreStats: upper bounds, ms) and their labels
_BUCKET_BOUNDS = (0, 10, 50, 100, 200, 500, 2 ** 63 - 1)
_BUCKET_LABELS = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~]")
_MAX_RECORDS_OF_SAMPLING = 600
_PRINT_TPS_INTERVAL_MS = 60_000
_RATE_SPANS = (10, 60, 600)


def _rate(samples: list[tuple[int, int]], span: int) -> float | None:
    """CallSnapshot.getTPS between the sample ``span`` before the last and the last; None when too few."""
    if len(samples) <= span:
        return None
    (t0, n0), (t1, n1) = samples[-(span + 1)], samples[-1]
    return (n1 - n0) / (t1 - t0) * 1000 if t1 > t0 else 0.0


def _rates_text(samples: list[tuple[int, int]]) -> str:
    """getPutTps() and its kin: the three rates, "" for each that has too few samples, space-separated."""
    return " ".join("" if r is None else java_double(r) for r in (_rate(samples, s) for s in _RATE_SPANS))


def _percentile(counts: list[int] | None, px: float) -> float:
    """findPutMessageEntireTimePX over a window's buckets (linear within the bucket the index falls in)."""
    if not counts:
        return 0.0
    index = int(sum(counts) * px)
    passed = 0
    for i, count in enumerate(counts):
        if index <= passed + count:
            relative = index - passed
            lower = _BUCKET_BOUNDS[i - 1] if i > 0 else 0
            upper = _BUCKET_BOUNDS[i]
            return lower + ((upper - lower) * relative / count if count else 0.0)
        passed += count
    return 0.0


def _format_runtime(ms: int) -> str:
    """``[ 0 days, 1 hours, 2 minutes, 3 seconds ]`` (a MessageFormat: thousands grouped)."""
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"[ {days:,} days, {hours:,} hours, {minutes:,} minutes, {rest // 1000:,} seconds ]"


class StoreStatsService:
    """The store figures of 4.9.8's ``StoreStatsService`` beyond the put counts the store keeps itself: the get
    counters, the 1 s samples the rates are read from, and the last minute's put-latency window.

    ``put_figures`` answers the store's put counters (:meth:`rmqstore.store.StoreStats.snapshot`).
    """

    def __init__(self, put_figures: Callable[[], dict], boot_ms: int):
        self.put_figures = put_figures
        self.boot_ms = boot_ms
        self._lock = threading.Lock()
        self.get_message_times_total_found = 0
        self.get_message_times_total_miss = 0
        self.get_message_transfered_msg_count = 0
        self.get_message_entire_time_max = 0
        self._samples: dict[str, list[tuple[int, int]]] = {k: [] for k in ("put", "found", "miss", "transfered")}
        self._last_print = boot_ms
        self._distribution_base = [0] * len(_BUCKET_BOUNDS)
        self._last_distribution: list[int] | None = None  # none before the first minute, as 4.9.8

    def count_get(self, found: bool, transferred: int, elapsed_ms: float) -> None:
        """One getMessage: found or missed, the messages it transferred, its time."""
        with self._lock:
            if found:
                self.get_message_times_total_found += 1
            else:
                self.get_message_times_total_miss += 1
            self.get_message_transfered_msg_count += transferred
            self.get_message_entire_time_max = max(self.get_message_entire_time_max, int(elapsed_ms))

    def sample(self, now: int) -> None:
        """One second's sampling (``sampling()``), then ``printTps()``'s minute rotation."""
        figures = self.put_figures()
        with self._lock:
            totals = {"put": figures["putMessageTimesTotal"], "found": self.get_message_times_total_found,
                      "miss": self.get_message_times_total_miss,
                      "transfered": self.get_message_transfered_msg_count}
            for name, total in totals.items():
                samples = self._samples[name]
                samples.append((now, total))
                if len(samples) > _MAX_RECORDS_OF_SAMPLING + 1:
                    del samples[0]
            if now > self._last_print + _PRINT_TPS_INTERVAL_MS:
                self._last_print = now
                current = list(figures["putMessageDistributeTime"])
                self._last_distribution = [c - b for c, b in zip(current, self._distribution_base)]
                self._distribution_base = current

    def rates(self, name: str) -> str:
        """``putTps`` (``put``), ``getFoundTps`` (``found``), ``getMissTps``, ``getTransferedTps``."""
        with self._lock:
            return _rates_text(list(self._samples[name]))

    def _total_rates(self) -> str:
        with self._lock:
            found, miss = list(self._samples["found"]), list(self._samples["miss"])
        return " ".join(java_double((_rate(found, s) or 0.0) + (_rate(miss, s) or 0.0)) for s in _RATE_SPANS)

    def _distribution_text(self) -> str:
        last = self._last_distribution
        if last is None:
            return "null"
        return "".join(f"{label}:{n} " for label, n in zip(_BUCKET_LABELS, last))

    def runtime_info(self, now: int) -> dict[str, str]:
        """``StoreStatsService.getRuntimeInfo()``: the store's part of ``brokerStatus``'s table."""
        figures = self.put_figures()
        times = figures["putMessageTimesTotal"] or 1  # 4.9.8 prints 1 for no put at all
        size = figures["putMessageSizeTotal"]
        return {
            "bootTimestamp": str(self.boot_ms),
            "runtime": _format_runtime(now - self.boot_ms),
            "putMessageEntireTimeMax": str(int(figures["putMessageEntireTimeMax"])),
            "putMessageTimesTotal": str(times),
            "putMessageFailedTimes": str(figures["putMessageFailedTimes"]),
            "putMessageSizeTotal": str(size),
            "putMessageDistributeTime": self._distribution_text(),
            "putMessageAverageSize": java_double(size / times),
            "dispatchMaxBuffer": "0",  # 4.9.8 declares it and never sets it
            "getMessageEntireTimeMax": str(self.get_message_entire_time_max),
            "putTps": self.rates("put"),
            "getFoundTps": self.rates("found"),
            "getMissTps": self.rates("miss"),
            "getTotalTps": self._total_rates(),
            "getTransferedTps": self.rates("transfered"),
            "putLatency99": java_fixed(_percentile(self._last_distribution, 0.99), 2),
            "putLatency999": java_fixed(_percentile(self._last_distribution, 0.999), 2),
        }


class BrokerDailyTotals:
    """4.9.8's ``BrokerStats``: the put and get totals at the last two local midnights."""

    def __init__(self):
        self.put_yesterday_morning = self.put_today_morning = 0
        self.get_yesterday_morning = self.get_today_morning = 0

    def record(self, put_total: int, get_total: int) -> None:
        self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, put_total
        self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, get_total


def next_morning_ms(now_ms: int) -> int:
    """UtilAll.computeNextMorningTimeMillis: the next local midnight after ``now_ms``."""
    today = datetime.datetime.fromtimestamp(now_ms / 1000).date()
    midnight = datetime.datetime.combine(today + datetime.timedelta(days=1), datetime.time())
    return int(midnight.timestamp() * 1000)
