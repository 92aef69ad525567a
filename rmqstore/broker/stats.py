"""The broker's statistics: RocketMQ 4.9.8's ``BrokerStatsManager``, ``StatsItem`` and ``StoreStatsService``.

What ``mqadmin statsAll``, ``consumerProgress`` (its TPS), ``brokerStatus`` and ``clusterList`` print is
computed here, the way 4.9.8 computes it, so the same traffic gives the same figures.

**Counters and snapshots.**  A :class:`StatsItem` (one key of one statistic, e.g. ``TOPIC_PUT_NUMS`` of
topic ``T``) is two running counters: ``value`` (messages, bytes, milliseconds) and ``times`` (calls).
Nothing is computed when they move.  A sampler copies them, with the time, into three lists: every
10 s into the *minute* list (7 kept: one minute), every 10 min into the *hour* list (7 kept) and every
hour into the *day* list (25 kept).  A figure is the difference between a list's last and first
snapshots: ``sum`` = value difference, ``tps`` = sum per second of the time between them, ``avgpt``
= sum per call.  An empty list gets, before its first real sample, a zero snapshot one period earlier,
so a key's first sample already has a rate: 30 messages counted before a key's first 10 s sample read
``sum 30, tps 3.0``.  So a minute "sum" is what came in the last 10 to 60 s (it depends on where the
samples fall), and it is 0 until the first sample after the traffic -- exactly as on a Java broker,
which is why the interop tests wait a sampling round before they look.

**The schedule** (:mod:`.stats_service`).  :class:`~.stats_service.StatsSampler` runs the rounds at fixed rates from its start (4.9.8's
``scheduleAtFixedRate`` with no initial delay), every key of every set sampled in the same round; a
round missed (a stopped machine) runs once, late, and the next keeps the grid.  Beside the three
windows it runs the store's 1 s sampling (:class:`~.store_stats.StoreStatsService`: put, found, miss and transferred
totals, 601 kept, from which ``putTps`` and ``getTransferedTps`` read 10 s, 1 min and 10 min rates)
and, at local midnight, the daily totals (:class:`~.store_stats.BrokerDailyTotals`:
``msgPutTotalTodayMorning``...).
The clock is injected (milliseconds, wall time as 4.9.8's ``System.currentTimeMillis()``): tests drive
:meth:`~.stats_service.StatsSampler.tick` with a fake one and need not wait.

**Where things are counted** (4.9.8's places, one call each): a send the store appended
(:meth:`BrokerStatsManager.count_sent`, from :mod:`.send`), under the topic the store keeps it in (a
delayed message counts under ``SCHEDULE_TOPIC_XXXX``, which is what 4.9.8's ``msg.getTopic()`` says after
the put); a pull that found messages (:meth:`~.stats_service.BrokerStatistics.count_pull`, from :mod:`.pull`; every pull's
get also counts as found or missed in the store figures); a consumer's send-back (:meth:`count_sent_back`,
:mod:`.retry`); a delayed message delivered (:meth:`count_delivered`, :mod:`.schedule`).  The put totals
(``putMessageTimesTotal``, sizes, failures, latencies) are the store's own (:class:`rmqstore.store.StoreStats`),
read when sampled.  ``GROUP_GET_FROM_DISK_*``, ``BROKER_GET_FROM_DISK_*`` and ``COMMERCIAL_*`` exist and stay
empty, as in a stock 4.9.8 broker (only plugins count into them).

**Threads.**  Counting happens on the broker's event loop, sampling on the sampler's thread, reading
on the loop: every item and every set has a lock; the numbers handed out are copies.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

from .topics import SCHEDULE_TOPIC

__all__ = [
    "QUEUE_PUT_NUMS", "QUEUE_PUT_SIZE", "QUEUE_GET_NUMS", "QUEUE_GET_SIZE", "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE",
    "GROUP_GET_NUMS", "GROUP_GET_SIZE", "GROUP_GET_LATENCY", "SNDBCK_PUT_NUMS", "BROKER_PUT_NUMS", "BROKER_GET_NUMS",
    "SCHEDULE_TOPIC", "SCHEDULE_CONSUMER_GROUP", "Window", "MINUTE", "HOUR", "DAY", "WINDOWS", "CallSnapshot", "StatsSnapshot",
    "StatsItem", "StatsItemSet", "BrokerStatsManager", "compute_stats_data", "wall_clock_ms",
]

QUEUE_PUT_NUMS, QUEUE_PUT_SIZE = "QUEUE_PUT_NUMS", "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS, QUEUE_GET_SIZE = "QUEUE_GET_NUMS", "QUEUE_GET_SIZE"
TOPIC_PUT_NUMS, TOPIC_PUT_SIZE = "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"
GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY = "GROUP_GET_NUMS", "GROUP_GET_SIZE", "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS = "SNDBCK_PUT_NUMS", "BROKER_PUT_NUMS", "BROKER_GET_NUMS"
_QUEUE_SETS = (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE)
#: the sets every 4.9.8 broker has (BrokerStatsManager's constructor); the last eight are never counted into
_SETS = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY, SNDBCK_PUT_NUMS,
         BROKER_PUT_NUMS, BROKER_GET_NUMS, "GROUP_GET_FROM_DISK_NUMS", "GROUP_GET_FROM_DISK_SIZE",
         "BROKER_GET_FROM_DISK_NUMS", "BROKER_GET_FROM_DISK_SIZE", "COMMERCIAL_SEND_TIMES", "COMMERCIAL_RCV_TIMES",
         "COMMERCIAL_SEND_SIZE", "COMMERCIAL_RCV_SIZE", "COMMERCIAL_RCV_EPOLLS", "COMMERCIAL_SNDBCK_TIMES",
         "COMMERCIAL_PERM_FAILURES")
#: MixAll.SCHEDULE_CONSUMER_GROUP: the group delayed deliveries are counted as gets of
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"
_SEP = "@"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# -- one statistic of one key -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """A sampling list: sampled every ``period_ms``, ``keep`` snapshots kept."""

    name: str
    period_ms: int
    keep: int


MINUTE = Window("minute", 10_000, 7)
HOUR = Window("hour", 600_000, 7)
DAY = Window("day", 3_600_000, 25)
WINDOWS = (MINUTE, HOUR, DAY)


class CallSnapshot(NamedTuple):
    timestamp: int
    times: int
    value: int


@dataclass(frozen=True)
class StatsSnapshot:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


def compute_stats_data(snapshots: list[CallSnapshot]) -> StatsSnapshot:
    """StatsItem.computeStatsData: the difference between the list's ends."""
    if not snapshots:
        return StatsSnapshot()
    first, last = snapshots[0], snapshots[-1]
    total = last.value - first.value
    span = last.timestamp - first.timestamp
    calls = last.times - first.times
    return StatsSnapshot(total, total * 1000.0 / span if span > 0 else 0.0,
                         total / calls if calls > 0 else 0.0, calls)


class StatsItem:
    """Counters of one key, and their minute, hour and day snapshot lists."""

    def __init__(self, name: str, key: str):
        self.name = name
        self.key = key
        self._lock = threading.Lock()
        self._value = 0
        self._times = 0
        self._lists: dict[Window, list[CallSnapshot]] = {w: [] for w in WINDOWS}

    @property
    def value(self) -> int:
        return self._value

    @property
    def times(self) -> int:
        return self._times

    def add(self, value: int, times: int) -> None:
        with self._lock:
            self._value += value
            self._times += times

    def sample(self, window: Window, now: int) -> None:
        """samplingInSeconds / InMinutes / InHour: snapshot the counters into ``window``'s list."""
        with self._lock:
            snapshots = self._lists[window]
            if not snapshots:
                snapshots.append(CallSnapshot(now - window.period_ms, 0, 0))
            snapshots.append(CallSnapshot(now, self._times, self._value))
            if len(snapshots) > window.keep:
                del snapshots[0]

    def window(self, window: Window) -> list[CallSnapshot]:
        """The list itself (for tests and inspection)."""
        return self._lists[window]

    def snapshot(self, window: Window) -> StatsSnapshot:
        """getStatsDataInMinute / InHour / InDay."""
        with self._lock:
            return compute_stats_data(list(self._lists[window]))


class StatsItemSet:
    """One statistic's items by key (``StatsItemSet``)."""

    def __init__(self, name: str):
        self.name = name
        self._items: dict[str, StatsItem] = {}
        self._lock = threading.Lock()

    def get_and_create_item(self, key: str) -> StatsItem:
        item = self._items.get(key)
        if item is None:
            with self._lock:
                item = self._items.setdefault(key, StatsItem(self.name, key))
        return item

    def add_value(self, key: str, value: int, times: int) -> None:
        self.get_and_create_item(key).add(value, times)

    def get(self, key: str) -> StatsItem | None:
        return self._items.get(key)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def sample(self, window: Window, now: int) -> None:
        with self._lock:
            items = list(self._items.values())
        for item in items:
            item.sample(window, now)

    def _delete_where(self, matches: Callable[[str], bool]) -> None:
        with self._lock:
            for key in [k for k in self._items if matches(k)]:
                del self._items[key]

    def del_value(self, key: str) -> None:
        self._delete_where(lambda k: k == key)

    def del_value_by_prefix_key(self, key: str, separator: str) -> None:
        self._delete_where(lambda k: k.startswith(key + separator))

    def del_value_by_infix_key(self, key: str, separator: str) -> None:
        self._delete_where(lambda k: separator + key + separator in k)

    def del_value_by_suffix_key(self, key: str, separator: str) -> None:
        self._delete_where(lambda k: k.endswith(separator + key))


# -- the broker's statistics ------------------------------------------------------------------------------------

class BrokerStatsManager:
    """4.9.8's sets, their keys (``topic``, ``topic@group``, ``topic@queueId``, ``queueId@topic@group``...) and
    the counting each place of the broker does."""

    def __init__(self, cluster_name: str, enable_queue_stat: bool = True):
        self.cluster_name = cluster_name
        self.enable_queue_stat = enable_queue_stat
        names = (_QUEUE_SETS if enable_queue_stat else ()) + _SETS
        self.sets: dict[str, StatsItemSet] = {name: StatsItemSet(name) for name in names}

    def names(self) -> list[str]:
        return list(self.sets)

    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        items = self.sets.get(name)
        return items.get(key) if items is not None else None

    def sample(self, window: Window, now: int) -> None:
        for items in self.sets.values():
            items.sample(window, now)

    def _add(self, name: str, key: str, value: int, times: int) -> None:
        items = self.sets.get(name)
        if items is not None:  # the queue sets exist with enableDetailStat only
            items.add_value(key, value, times)

    # -- 4.9.8's inc* methods
    def inc_topic_put_nums(self, topic: str, num: int = 1, times: int = 1) -> None:
        self._add(TOPIC_PUT_NUMS, topic, num, times)

    def inc_topic_put_size(self, topic: str, size: int) -> None:
        self._add(TOPIC_PUT_SIZE, topic, size, 1)

    def inc_queue_put(self, topic: str, queue_id: int, num: int, size: int) -> None:
        """incQueuePutNums(topic, queueId, num, 1) and incQueuePutSize."""
        self._add(QUEUE_PUT_NUMS, f"{topic}{_SEP}{queue_id}", num, 1)
        self._add(QUEUE_PUT_SIZE, f"{topic}{_SEP}{queue_id}", size, 1)

    def inc_group_get(self, group: str, topic: str, num: int, size: int) -> None:
        """incGroupGetNums and incGroupGetSize."""
        self._add(GROUP_GET_NUMS, f"{topic}{_SEP}{group}", num, 1)
        self._add(GROUP_GET_SIZE, f"{topic}{_SEP}{group}", size, 1)

    def inc_queue_get(self, group: str, topic: str, queue_id: int, num: int, size: int) -> None:
        self._add(QUEUE_GET_NUMS, f"{topic}{_SEP}{queue_id}{_SEP}{group}", num, 1)
        self._add(QUEUE_GET_SIZE, f"{topic}{_SEP}{queue_id}{_SEP}{group}", size, 1)

    def inc_group_get_latency(self, group: str, topic: str, queue_id: int, ms: int) -> None:
        key = (f"{queue_id}{_SEP}{topic}{_SEP}{group}" if self.enable_queue_stat else f"{topic}{_SEP}{group}")
        self._add(GROUP_GET_LATENCY, key, ms, 1)

    def inc_broker_put_nums(self, num: int) -> None:
        self._add(BROKER_PUT_NUMS, self.cluster_name, num, 0)  # the value only, as 4.9.8

    def inc_broker_get_nums(self, num: int) -> None:
        self._add(BROKER_GET_NUMS, self.cluster_name, num, 0)

    def inc_send_back_nums(self, group: str, topic: str) -> None:
        self._add(SNDBCK_PUT_NUMS, f"{topic}{_SEP}{group}", 1, 1)

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """The minute rate of messages ``group`` pulled from ``topic`` (a ConsumeStats' consumeTps)."""
        item = self.get_stats_item(GROUP_GET_NUMS, f"{topic}{_SEP}{group}")
        return item.snapshot(MINUTE).tps if item is not None else 0.0

    # -- what each place of the broker counts
    def count_sent(self, topic: str, queue_id: int, msg_num: int, wrote_bytes: int) -> None:
        """A send the store appended (SendMessageProcessor's ``sendOK``), under the topic and queue the store
        keeps it in."""
        if topic == SCHEDULE_TOPIC:
            self.inc_queue_put(topic, queue_id, msg_num, wrote_bytes)
        self.inc_topic_put_nums(topic, msg_num, 1)
        self.inc_topic_put_size(topic, wrote_bytes)
        self.inc_broker_put_nums(msg_num)

    def count_pulled(self, group: str, topic: str, queue_id: int, message_count: int, total_size: int,
                     latency_ms: int) -> None:
        """A pull answered with messages (PullMessageProcessor's SUCCESS)."""
        self.inc_group_get(group, topic, message_count, total_size)
        self.inc_broker_get_nums(message_count)
        self.inc_group_get_latency(group, topic, queue_id, latency_ms)

    def count_sent_back(self, group: str, back_topic: str, stored_topic: str, queue_id: int,
                        wrote_bytes: int) -> None:
        """A consumer's send-back put (``asyncConsumerSendMsgBack``'s PUT_OK): the original topic's send-back
        count; a copy the store parked for later is also a put of the schedule topic."""
        if stored_topic == SCHEDULE_TOPIC:
            self.inc_topic_put_nums(stored_topic)
            self.inc_topic_put_size(stored_topic, wrote_bytes)
            self.inc_queue_put(stored_topic, queue_id, 1, wrote_bytes)
        self.inc_send_back_nums(group, back_topic)

    def count_delivered(self, level: int, topic: str, msg_num: int, wrote_bytes: int) -> None:
        """A delayed message put back under its topic (ScheduleMessageService's onSuccess)."""
        self.inc_queue_get(SCHEDULE_CONSUMER_GROUP, SCHEDULE_TOPIC, level - 1, msg_num, wrote_bytes)
        self.inc_group_get(SCHEDULE_CONSUMER_GROUP, SCHEDULE_TOPIC, msg_num, wrote_bytes)
        self.inc_topic_put_nums(topic, msg_num, 1)
        self.inc_topic_put_size(topic, wrote_bytes)
        self.inc_broker_put_nums(msg_num)

    # -- deletions (AdminBrokerProcessor's deleteTopic / deleteSubscriptionGroup)
    def on_topic_deleted(self, topic: str) -> None:
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sets[name].del_value(topic)
        for name in (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE,
                     SNDBCK_PUT_NUMS):
            if name in self.sets:
                self.sets[name].del_value_by_prefix_key(topic, _SEP)
        self.sets[GROUP_GET_LATENCY].del_value_by_infix_key(topic, _SEP)

    def on_group_deleted(self, group: str) -> None:
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE, SNDBCK_PUT_NUMS,
                     GROUP_GET_LATENCY):
            if name in self.sets:
                self.sets[name].del_value_by_suffix_key(group, _SEP)
