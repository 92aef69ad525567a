"""rmqstore.broker.stats and store_stats against RocketMQ 4.9.8's own StatsItem and StoreStatsService: the real classes are driven
by a script (tests/interop/java/StatsReplay.java) and print their figures with the timestamps their samples took;
ours replays the same script at those timestamps and must print the same text (sums, rates and averages in Java's
Double.toString, the store's rate strings with their empty places)."""

from __future__ import annotations

from .rmqjava import case_lines
from rmqstore.broker.javatext import java_double
from rmqstore.broker.stats import DAY, HOUR, MINUTE, StatsItem
from rmqstore.broker.store_stats import StoreStatsService

WINDOWS = {"minute": MINUTE, "hour": HOUR, "day": DAY}
GET_COUNTERS = {"found": "get_message_times_total_found", "miss": "get_message_times_total_miss",
                "transfer": "get_message_transfered_msg_count"}


def script() -> list[str]:
    ops = []
    for k in range(9):  # more minute samples than the window keeps, uneven values and calls
        ops += [f"add:{k * 3 + 1}:{k % 3}", "sleep:3", "minute"]
    ops += ["add:50:5", "hour", "sleep:2", "hour", "day", "sleep:2", "add:7:1", "day"]
    for k in range(13):  # enough seconds for the 10 s rates
        ops += [f"put:{k}", f"found:{k % 2}", "miss:1", f"transfer:{k * 3}", "sleep:2", "second"]
    return ops


def replay(ops: list[str], java: dict[str, str]) -> dict[str, str]:
    """Our figures after each sampling op, sampled at the timestamp the Java one took."""
    item = StatsItem("TOPIC_PUT_NUMS", "T")
    puts = [0]
    store = StoreStatsService(lambda: {"putMessageTimesTotal": puts[0], "putMessageSizeTotal": 0,
                                       "putMessageFailedTimes": 0, "putMessageEntireTimeMax": 0,
                                       "putMessageDistributeTime": [0] * 7}, boot_ms=0)
    ours = {}
    for i, op in enumerate(ops):
        kind, *args = op.split(":")
        if kind == "add":
            item.add(int(args[0]), int(args[1]))
        elif kind == "put":
            puts[0] += int(args[0])
        elif kind in GET_COUNTERS:  # the counters count_get moves, moved by N at once as the script does
            setattr(store, GET_COUNTERS[kind], getattr(store, GET_COUNTERS[kind]) + int(args[0]))
        elif kind in WINDOWS:
            ts = int(java[str(i)].split()[1][len("ts="):])
            item.sample(WINDOWS[kind], ts)
            s = item.snapshot(WINDOWS[kind])
            ours[str(i)] = f"{kind} ts={ts} {s.sum} {java_double(s.tps)} {java_double(s.avgpt)} {s.times}"
        elif kind == "second":
            ts = int(java[str(i)].split()[1][len("ts="):])
            store.sample(ts)
            info = store.runtime_info(ts)
            ours[str(i)] = f"second ts={ts} " + "|".join(
                f"{k}={info[k]}" for k in ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"))
    return ours


def test_our_stats_item_and_store_rates_are_rocketmqs(rmq_java):
    ops = script()
    java = case_lines(rmq_java.run_java("StatsReplay.java", *ops))
    assert len(java) == sum(op.split(":")[0] in ("minute", "hour", "day", "second") for op in ops), java
    last = java[str(len(ops) - 1)]
    assert "putTps=" in last and not last.split("putTps=")[1].startswith(" "), "the 10 s rate was never reached"
    ours = replay(ops, java)
    assert ours.keys() == java.keys()
    for i in java:
        assert same_figures(ours[i], java[i]), (i, ours[i], java[i])


def same_figures(ours: str, java: str) -> bool:
    """Equal text, but for one race of Java's own: the first snapshot of a window's list is stamped by a
    ``System.currentTimeMillis()`` call of its own, a window before the sample's (4.9.8's ``samplingInHour``), so
    when the clock ticks between the two the span is 1 ms longer than the printed timestamps say and the rate
    differs in the seventh digit (samplingInMinutes pre-fills the same way).  Such a row must agree in every other figure, and its rate must be the same
    sum over a span at most 1 ms apart."""
    if ours == java:
        return True
    o, j = ours.split(), java.split()
    if len(o) != 6 or o[0] not in WINDOWS or o[:3] + o[4:] != j[:3] + j[4:] or int(o[2]) == 0:
        return False
    span_o, span_j = (int(o[2]) * 1000 / float(o[3]), int(j[2]) * 1000 / float(j[3]))
    return abs(span_o - span_j) <= 1.0 + 1e-6
