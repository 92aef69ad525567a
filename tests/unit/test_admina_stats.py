"""The broker's statistics core (rmqstore.broker.stats, store_stats, stats_service) on a fake clock, against RocketMQ 4.9.8's formulas.

Every expected number is worked out by hand from StatsItem / StoreStatsService / BrokerStatsManager as 4.9.8
computes it (the comments show the arithmetic); tests/interop/test_admina_statsitem.py replays the real Java
StatsItem's samples through ours as well.
"""

from __future__ import annotations

import math
import threading

import pytest

from rmqstore.broker import stats
from rmqstore.broker.javatext import human_readable_byte_count, java_double, java_fixed
from rmqstore.broker import store_stats
from rmqstore.broker.stats import (BROKER_GET_NUMS, BROKER_PUT_NUMS, DAY, GROUP_GET_LATENCY, GROUP_GET_NUMS,
                                   GROUP_GET_SIZE, HOUR, MINUTE, QUEUE_GET_NUMS, QUEUE_PUT_NUMS, SNDBCK_PUT_NUMS,
                                   TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BrokerStatsManager, StatsItem, StatsItemSet,
                                   StatsSnapshot)
from rmqstore.broker.stats_service import StatsSampler
from rmqstore.broker.store_stats import BrokerDailyTotals, StoreStatsService

S = 1000  # ms


# -- StatsItem ------------------------------------------------------------------------------------------------

def test_a_new_item_reads_zero_in_every_window():
    item = StatsItem(TOPIC_PUT_NUMS, "T")
    item.add(5, 1)
    for window in (MINUTE, HOUR, DAY):
        assert item.snapshot(window) == StatsSnapshot(0, 0.0, 0.0, 0)


def test_the_first_sample_stands_on_a_zero_one_period_earlier():
    """samplingInSeconds: an empty list gets (now - 10 s, 0, 0) first, so one sample already gives a rate."""
    item = StatsItem(TOPIC_PUT_NUMS, "T")
    item.add(30, 3)
    item.sample(MINUTE, 100 * S)
    # [(90 s, 0, 0), (100 s, 3, 30)]: sum 30, tps 30 * 1000 / 10000, avgpt 30 / 3
    assert item.snapshot(MINUTE) == StatsSnapshot(30, 3.0, 10.0, 3)
    assert item.snapshot(HOUR) == StatsSnapshot(0, 0.0, 0.0, 0)


def test_the_minute_window_keeps_seven_samples():
    item = StatsItem(TOPIC_PUT_NUMS, "T")
    for k in range(7):  # samples at 0..60 s, 10 added before each: values 10, 20, ... 70
        item.add(10, 1)
        item.sample(MINUTE, k * 10 * S)
    # 8 snapshots were due (the zero at -10 s and 7 samples): the zero went, first is (0 s, 1, 10)
    assert [c.timestamp for c in item.window(MINUTE)] == [k * 10 * S for k in range(7)]
    # sum 70 - 10, over 60 s; 6 calls in between
    assert item.snapshot(MINUTE) == StatsSnapshot(60, 1.0, 10.0, 6)
    item.sample(MINUTE, 70 * S)  # nothing added: the window slides to (10 s, 2, 20) .. (70 s, 7, 70)
    assert item.snapshot(MINUTE) == StatsSnapshot(50, 50 * 1000 / 60000, 10.0, 5)


def test_the_hour_and_day_windows():
    item = StatsItem(GROUP_GET_NUMS, "T@g")
    item.add(600, 2)
    item.sample(HOUR, 0)
    assert item.snapshot(HOUR) == StatsSnapshot(600, 1.0, 300.0, 2)  # 600 over the 600 s before the first
    for k in range(1, 8):
        item.sample(HOUR, k * 600 * S)
    assert len(item.window(HOUR)) == 7 and item.window(HOUR)[0].timestamp == 600 * S
    assert item.snapshot(HOUR) == StatsSnapshot(0, 0.0, 0.0, 0)
    for k in range(30):
        item.sample(DAY, k * 3600 * S)
    assert len(item.window(DAY)) == 25
    assert item.snapshot(DAY).sum == 0


def test_avgpt_is_zero_when_no_call_was_counted():
    """BROKER_PUT_NUMS adds value only (incBrokerPutNums): avgpt stays 0 however many messages."""
    item = StatsItem(BROKER_PUT_NUMS, "DefaultCluster")
    item.add(7, 0)
    item.sample(MINUTE, 10 * S)
    assert item.snapshot(MINUTE) == StatsSnapshot(7, 0.7, 0.0, 0)


def test_a_window_of_no_time_has_no_rate():
    """4.9.8 divides by zero there (Infinity); a window whose ends are one instant has rate 0 here. Sampling
    alone never makes one (the first sample stands on a zero a period earlier): a clock set back could."""
    item = StatsItem(TOPIC_PUT_NUMS, "T")
    item.window(MINUTE)[:] = [stats.CallSnapshot(10 * S, 0, 0), stats.CallSnapshot(10 * S, 1, 5)]
    assert item.snapshot(MINUTE) == StatsSnapshot(5, 0.0, 5.0, 1)


def test_items_count_from_every_thread():
    item = StatsItem(TOPIC_PUT_NUMS, "T")

    def add():
        for _ in range(20000):
            item.add(2, 1)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    item.sample(MINUTE, 10 * S)
    assert item.snapshot(MINUTE).sum == 160000 and item.snapshot(MINUTE).times == 80000


# -- StatsItemSet and BrokerStatsManager -------------------------------------------------------------------------

def test_an_item_set_deletes_by_prefix_infix_and_suffix():
    items = StatsItemSet(GROUP_GET_NUMS)
    for key in ("T@g", "T@h", "U@g", "0@T@g", "TT@g"):
        items.add_value(key, 1, 1)
    items.del_value_by_prefix_key("T", "@")
    assert sorted(items.keys()) == ["0@T@g", "TT@g", "U@g"]
    items.del_value_by_infix_key("T", "@")
    assert sorted(items.keys()) == ["TT@g", "U@g"]
    items.del_value_by_suffix_key("g", "@")
    assert items.keys() == []


def test_a_send_counts_topic_size_and_broker():
    m = BrokerStatsManager("DefaultCluster")
    m.count_sent("T", 2, msg_num=3, wrote_bytes=600)  # a batch of 3: one call
    m.count_sent("T", 1, msg_num=1, wrote_bytes=200)
    m.sample(MINUTE, 10 * S)
    assert m.get_stats_item(TOPIC_PUT_NUMS, "T").snapshot(MINUTE) == StatsSnapshot(4, 0.4, 2.0, 2)
    assert m.get_stats_item(TOPIC_PUT_SIZE, "T").snapshot(MINUTE) == StatsSnapshot(800, 80.0, 400.0, 2)
    assert m.get_stats_item(BROKER_PUT_NUMS, "DefaultCluster").snapshot(MINUTE).sum == 4
    assert m.get_stats_item(QUEUE_PUT_NUMS, "T@2") is None  # queue puts are counted for the schedule topic only


def test_a_delayed_send_counts_under_the_schedule_topic_and_its_queue():
    m = BrokerStatsManager("C")
    m.count_sent(stats.SCHEDULE_TOPIC, 2, msg_num=1, wrote_bytes=250)
    m.sample(MINUTE, 10 * S)
    assert m.get_stats_item(TOPIC_PUT_NUMS, stats.SCHEDULE_TOPIC).snapshot(MINUTE).sum == 1
    assert m.get_stats_item(QUEUE_PUT_NUMS, stats.SCHEDULE_TOPIC + "@2").snapshot(MINUTE).sum == 1


def test_a_pull_counts_group_size_broker_and_latency():
    m = BrokerStatsManager("C")
    m.count_pulled("g", "T", 3, message_count=5, total_size=1000, latency_ms=7)
    m.sample(MINUTE, 10 * S)
    assert m.get_stats_item(GROUP_GET_NUMS, "T@g").snapshot(MINUTE) == StatsSnapshot(5, 0.5, 5.0, 1)
    assert m.get_stats_item(GROUP_GET_SIZE, "T@g").snapshot(MINUTE).sum == 1000
    assert m.get_stats_item(BROKER_GET_NUMS, "C").snapshot(MINUTE).sum == 5
    # enableDetailStat (true by default): the latency key is queueId@topic@group
    assert m.get_stats_item(GROUP_GET_LATENCY, "3@T@g").snapshot(MINUTE) == StatsSnapshot(7, 0.7, 7.0, 1)
    assert m.tps_group_get_nums("g", "T") == 0.5
    assert m.tps_group_get_nums("g", "other") == 0.0


def test_without_detail_stats_the_latency_key_has_no_queue():
    m = BrokerStatsManager("C", enable_queue_stat=False)
    m.count_pulled("g", "T", 3, message_count=1, total_size=10, latency_ms=2)
    assert m.get_stats_item(GROUP_GET_LATENCY, "T@g") is not None
    assert m.get_stats_item(QUEUE_GET_NUMS, "T@3@g") is None


def test_a_send_back_counts_the_original_topic_and_a_delayed_copy():
    m = BrokerStatsManager("C")
    m.count_sent_back("g", "T", stored_topic=stats.SCHEDULE_TOPIC, queue_id=2, wrote_bytes=300)
    m.count_sent_back("g", "T", stored_topic="%DLQ%g", queue_id=0, wrote_bytes=300)
    m.sample(MINUTE, 10 * S)
    assert m.get_stats_item(SNDBCK_PUT_NUMS, "T@g").snapshot(MINUTE).sum == 2
    assert m.get_stats_item(TOPIC_PUT_NUMS, stats.SCHEDULE_TOPIC).snapshot(MINUTE).sum == 1  # the delayed one only
    assert m.get_stats_item(TOPIC_PUT_NUMS, "%DLQ%g") is None
    assert m.get_stats_item(BROKER_PUT_NUMS, "C") is None  # a send-back is not a broker put in 4.9.8


def test_a_delivered_delayed_message_counts_as_a_schedule_get_and_a_put():
    m = BrokerStatsManager("C")
    m.count_delivered(3, "T", msg_num=1, wrote_bytes=200)
    m.sample(MINUTE, 10 * S)
    assert m.get_stats_item(GROUP_GET_NUMS, stats.SCHEDULE_TOPIC + "@SCHEDULE_CONSUMER").snapshot(MINUTE).sum == 1
    assert m.get_stats_item(QUEUE_GET_NUMS, stats.SCHEDULE_TOPIC + "@2@SCHEDULE_CONSUMER") is not None
    assert m.get_stats_item(TOPIC_PUT_NUMS, "T").snapshot(MINUTE).sum == 1
    assert m.get_stats_item(BROKER_PUT_NUMS, "C").snapshot(MINUTE).sum == 1


def test_deleting_a_topic_or_a_group_drops_their_items():
    m = BrokerStatsManager("C")
    m.count_sent("T", 0, 1, 10)
    m.count_pulled("g", "T", 0, 1, 10, 1)
    m.count_pulled("g", "U", 0, 1, 10, 1)
    m.on_topic_deleted("T")
    assert m.get_stats_item(TOPIC_PUT_NUMS, "T") is None and m.get_stats_item(GROUP_GET_NUMS, "T@g") is None
    assert m.get_stats_item(GROUP_GET_LATENCY, "0@T@g") is None
    assert m.get_stats_item(GROUP_GET_NUMS, "U@g") is not None
    m.on_group_deleted("g")
    assert m.get_stats_item(GROUP_GET_NUMS, "U@g") is None and m.get_stats_item(GROUP_GET_LATENCY, "0@U@g") is None


def test_unknown_names_and_keys_are_none():
    m = BrokerStatsManager("C")
    assert m.get_stats_item("NO_SUCH_STATS", "x") is None
    assert m.get_stats_item(TOPIC_PUT_NUMS, "never") is None
    # the sets 4.9.8 creates but never counts into are there, empty
    assert {"GROUP_GET_FROM_DISK_NUMS", "COMMERCIAL_SEND_TIMES"} <= set(m.names())


# -- the sampling schedule --------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self, now: int):
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_the_sampler_samples_each_window_at_its_rate_from_its_start():
    clock = FakeClock(1_000_000 * S)
    m = BrokerStatsManager("C")
    sampler = StatsSampler(m, None, None, clock)
    start = clock.now
    m.count_sent("T", 0, 1, 100)
    for ms in range(0, 75 * S, 500):  # ticks every half second for 75 s
        clock.now = start + ms
        sampler.tick()
    item = m.get_stats_item(TOPIC_PUT_NUMS, "T")
    assert [c.timestamp - start for c in item.window(MINUTE)] == [k * 10 * S for k in range(1, 8)]
    assert [c.timestamp - start for c in item.window(HOUR)] == [-600 * S, 0]
    assert [c.timestamp - start for c in item.window(DAY)] == [-3600 * S, 0]
    assert sampler.next_due() == start + 80 * S  # no store sampling here: the next 10 s round


def test_the_sampler_runs_a_missed_round_once():
    clock = FakeClock(0)
    m = BrokerStatsManager("C")
    m.count_sent("T", 0, 1, 100)
    sampler = StatsSampler(m, None, None, clock)
    sampler.tick()
    clock.now = 35 * S  # three rounds late (a stopped machine): one sample now, the next due at 40 s
    sampler.tick()
    assert [c.timestamp for c in m.get_stats_item(TOPIC_PUT_NUMS, "T").window(MINUTE)] == [-10 * S, 0, 35 * S]
    assert sampler.next_due() == 40 * S


def test_the_sampler_thread_starts_and_stops():
    m = BrokerStatsManager("C")
    m.count_sent("T", 0, 1, 100)
    sampler = StatsSampler(m, None, None)
    sampler.start()
    try:
        deadline = stats.wall_clock_ms() + 30 * S
        while m.get_stats_item(TOPIC_PUT_NUMS, "T").snapshot(MINUTE).sum == 0:
            assert stats.wall_clock_ms() < deadline, "the sampler thread never sampled"
            threading.Event().wait(0.05)
    finally:
        sampler.stop()
    assert not sampler.running


# -- the store's figures (StoreStatsService) --------------------------------------------------------------------

def puts(times=0, size=0, failed=0, time_max=0.0, dist=(0,) * 7):
    return lambda: {"putMessageTimesTotal": times, "putMessageSizeTotal": size, "putMessageFailedTimes": failed,
                    "putMessageEntireTimeMax": time_max, "putMessageDistributeTime": list(dist)}


def test_store_rates_need_enough_seconds_of_samples():
    figures = {"n": 0}
    s = StoreStatsService(lambda: puts(times=figures["n"])(), boot_ms=0)
    for sec in range(12):  # one put a second, sampled each second
        figures["n"] = sec
        s.sample(sec * S)
    info = s.runtime_info(12 * S)
    # 12 samples: the 10 s rate is (11 - 1) / 10 s; 60 s and 600 s need 61 and 601 samples: empty
    assert info["putTps"] == "1.0  "
    assert info["getFoundTps"] == "0.0  " and info["getTransferedTps"] == "0.0  "
    assert info["getTotalTps"] == "0.0 0.0 0.0"  # always three numbers (found + miss, 0 when too few)


def test_store_get_figures():
    s = StoreStatsService(puts(), boot_ms=0)
    s.sample(0)
    for _ in range(4):
        s.count_get(found=True, transferred=8, elapsed_ms=3)
    s.count_get(found=False, transferred=0, elapsed_ms=12)
    for sec in range(1, 11):
        s.sample(sec * S)
    info = s.runtime_info(10 * S)
    assert info["getFoundTps"] == "0.4  " and info["getMissTps"] == "0.1  "
    assert info["getTransferedTps"] == "3.2  " and info["getTotalTps"] == "0.5 0.0 0.0"
    assert info["getMessageEntireTimeMax"] == "12"
    assert s.get_message_transfered_msg_count == 32


def test_store_put_figures_and_the_runtime_text():
    s = StoreStatsService(puts(times=3, size=661, failed=1, time_max=50.7), boot_ms=1_000)
    s.sample(2 * S)
    info = s.runtime_info(1_000 + ((2 * 24 + 3) * 3600 + 4 * 60 + 5) * S)
    assert info["bootTimestamp"] == "1000"
    assert info["runtime"] == "[ 2 days, 3 hours, 4 minutes, 5 seconds ]"
    assert info["putMessageTimesTotal"] == "3" and info["putMessageSizeTotal"] == "661"
    assert info["putMessageFailedTimes"] == "1" and info["putMessageEntireTimeMax"] == "50"
    assert info["putMessageAverageSize"] == "220.33333333333334"  # Java's Double.toString of 661 / 3.0
    assert info["dispatchMaxBuffer"] == "0"
    # before the first minute's rotation 4.9.8 has no last window: String.valueOf(null), and 0 percentiles
    assert info["putMessageDistributeTime"] == "null"
    assert info["putLatency99"] == "0.00" and info["putLatency999"] == "0.00"


def test_no_put_at_all_reads_one_put():
    """getRuntimeInfo: ``if (0 == totalTimes) totalTimes = 1L`` -- before the average, and in the table too."""
    info = StoreStatsService(puts(), boot_ms=0).runtime_info(0)
    assert info["putMessageTimesTotal"] == "1" and info["putMessageAverageSize"] == "0.0"


def test_the_last_minutes_latency_distribution():
    dist = [0] * 7
    s = StoreStatsService(lambda: puts(times=sum(dist), dist=dist)(), boot_ms=0)
    s.sample(0)
    dist[1] = 98  # 98 puts within 10 ms, 2 within 10-50 ms
    dist[2] = 2
    s.sample(60 * S)
    s.sample(60 * S + 1)  # printTps: a minute since the start -> the window rotates
    info = s.runtime_info(61 * S)
    assert info["putMessageDistributeTime"] == ("[<=0ms]:0 [0~10ms]:98 [10~50ms]:2 [50~100ms]:0 [100~200ms]:0 "
                                                "[200~500ms]:0 [500ms~]:0 ")
    # findPutMessageEntireTimePX over the buckets <=0, <=10, <=50, ...: index 99 of 100 falls in (10, 50] at
    # 1 of 2: 10 + 40 * 1 / 2; index 99.9 -> 99 as well (a long)
    assert info["putLatency99"] == "30.00" and info["putLatency999"] == "30.00"
    dist[1] = 100  # two more, in the next minute
    s.sample(121 * S + 2)
    info = s.runtime_info(122 * S)
    assert info["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:2 [10~50ms]:0 ")
    assert info["putLatency99"] == "5.00"  # index 1 of 2 in (0, 10]: 0 + (10 - 0) * 1 / 2


def test_daily_totals_move_at_each_morning():
    daily = BrokerDailyTotals()
    daily.record(put_total=10, get_total=4)
    daily.record(put_total=25, get_total=9)
    assert (daily.put_yesterday_morning, daily.put_today_morning) == (10, 25)
    assert (daily.get_yesterday_morning, daily.get_today_morning) == (4, 9)


def test_the_sampler_records_the_daily_totals_at_local_midnight():
    clock = FakeClock(0)
    store = StoreStatsService(puts(times=5), boot_ms=0)
    daily = BrokerDailyTotals()
    sampler = StatsSampler(BrokerStatsManager("C"), store, daily, clock)
    sampler.tick()
    midnight = store_stats.next_morning_ms(clock.now)
    assert midnight > clock.now
    clock.now = midnight - 1
    sampler.tick()
    assert daily.put_today_morning == 0
    clock.now = midnight
    sampler.tick()
    assert daily.put_today_morning == 5


# -- how Java prints numbers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [
    (0.0, "0.0"), (1.0, "1.0"), (0.25, "0.25"), (220.33333333333334, "220.33333333333334"), (-2.5, "-2.5"),
    (0.001, "0.001"), (0.0001, "1.0E-4"), (1.0e7, "1.0E7"), (9999999.0, "9999999.0"), (12345678.9, "1.23456789E7"),
    (1.0 / 3, "0.3333333333333333"), (1e100, "1.0E100"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
    (math.nan, "NaN"), (0.28, "0.28"), (100.0, "100.0"), (123456.0, "123456.0"),
])
def test_java_double(value, text):
    assert java_double(value) == text


@pytest.mark.parametrize("value, digits, text", [
    (0.25, 1, "0.3"), (0.35, 1, "0.3"), (2.5, 0, "3"), (1.005, 2, "1.00"), (0.0, 2, "0.00"), (73.349, 1, "73.3"),
])
def test_java_fixed_rounds_half_up_on_the_exact_value(value, digits, text):
    """String.format("%.Nf"): HALF_UP on the double's exact decimal value (0.35 is 0.34999...)."""
    assert java_fixed(value, digits) == text


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (270582939648, "252.0 GiB"),
    (1 << 40, "1.0 TiB"), (5 * 1024 ** 3 + 1, "5.0 GiB"),
])
def test_human_readable_byte_count(n, text):
    assert human_readable_byte_count(n) == text
