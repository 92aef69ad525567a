"""The comparison kit the mqadmin tests share (tests/interop/mqadmin_support.py): masks hide only what they name,
a masked value must keep its form, and a difference is reported as a diff.  No Java needed."""

from __future__ import annotations

import pytest

from .mqadmin_support import (IDS, RATES, TIMES, Mask, MaskError, Side, addresses, assert_same, column, normalize,
                              value_of)

JAVA = Side("java", "127.0.0.1:9876", "127.0.0.1:10911")
OURS = Side("ours", "127.0.0.1:40001", "127.0.0.1:40002")


def test_times_ids_and_rates():
    text = "Born: 2026-11-27 02:41:28,369 at 2026-11-27 02:41:28 id FD000000000000000000000000000002382C1DBD16A6"
    assert TIMES.apply(text) == "Born: <time> at <time> id FD000000000000000000000000000002382C1DBD16A6"
    assert IDS.apply(text).endswith("id <id>")
    assert RATES.apply("0.00(0,0ms) 1.50(0,0ms) Consume TPS: 0.25 10.00 3") == \
        "0.00(0,0ms) <rate>(0,0ms) Consume TPS: <rate> <rate> 3"


def test_addresses_also_inside_offset_msg_ids():
    # 127.0.0.1:10911 -> 7F000001 00002A9F, then the 8-byte commitlog offset
    text = "Store Host: 127.0.0.1:10911 OffsetID: 7F00000100002A9F0000000000000000 ns 127.0.0.1:9876"
    assert addresses(JAVA, OURS).apply(text) == "Store Host: <broker> OffsetID: <msgId> ns <namesrv>"


def test_a_masked_value_must_keep_its_form():
    mask = value_of("bootTimestamp", r"\d{13}")
    assert mask.apply("bootTimestamp    : 1795747279008\nruntime : x") == "bootTimestamp    : <bootTimestamp>\nruntime : x"
    with pytest.raises(MaskError, match="bootTimestamp = 'null'"):
        mask.apply("bootTimestamp : null")
    rows = column("DefaultCluster", 2, r"\d+\.\d\d", "hours")
    assert rows.apply("DefaultCluster  b  12.50  x\nother 1 2 3") == "DefaultCluster b <hours> x\nother 1 2 3"
    with pytest.raises(MaskError):
        rows.apply("DefaultCluster b")  # a row without the column
    with pytest.raises(ValueError):
        column("x", 0, ".*", "two words")


def test_only_what_is_masked_may_differ():
    assert assert_same("a  b   <x>\n", "a b <x>", Mask()) == "a b <x>"
    assert normalize("x   y  \nz") == "x y\nz"
    with pytest.raises(AssertionError, match=r"(?s)-putMessageTimesTotal : 15.*\+putMessageTimesTotal : 14"):
        assert_same("putMessageTimesTotal : 15", "putMessageTimesTotal : 14", TIMES)
