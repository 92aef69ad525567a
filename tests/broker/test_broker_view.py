"""BrokerView against our broker (Done means 2 of issue 24, the live half): a producer and a slow consumer run
while the view watches -- the lag in its traits rises, falls, rises and falls to 0, each step equal to the broker's
offsets and the consumer's commits (tests/broker_view_checks.py); a click on a consumer offset opens the store
there in a StoreInspector; the history is capped; a broker that is down is a row saying so.  The exported page in
Chromium: tests/browser/test_broker_view_page.py; the Java broker: tests/interop/test_broker_view_java.py."""

from __future__ import annotations

import pytest

from broker_support import BrokerThread
from broker_view_checks import GROUP, TOPIC, check_open, lag_scenario
from rmqstore.widgets import BrokerView
from rmqstore.widgets.broker_view import is_local_store

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        yield bt


def test_lag_rises_and_falls_to_zero_as_a_slow_consumer_runs(broker):
    view, facts = lag_scenario(broker.namesrv, f"127.0.0.1:{broker.port}", title="ours")
    try:
        assert facts["steps"][-1] == 0 and max(facts["lags"]) >= facts["steps"][2] > facts["steps"][1]
        (row,) = view.brokers
        assert row["commit_log_max_offset"] == str(broker.broker.store.get_max_phy_offset())
        assert row["store_root"] == str(broker.broker.store.root)
        check_open(view, "broker-a", facts)
    finally:
        view.close()
    assert view.inspector is None and not view.watching


def test_history_is_capped_and_refresh_adds_a_sample(broker):
    view = BrokerView.connect(broker.namesrv, history_limit=3)
    try:
        for _ in range(5):
            view.refresh()
        assert len(view.history) == 3 and view.updates == 6
        assert view.history[-1]["t"] == view.taken_at
    finally:
        view.close()


def test_a_store_elsewhere_is_not_opened(broker, tmp_path):
    view = BrokerView.connect(broker.namesrv)
    try:
        root = str(broker.broker.store.root)
        assert is_local_store(f"127.0.0.1:{broker.port}", root)
        assert not is_local_store("192.0.2.1:10911", root)  # TEST-NET: not this machine
        assert not is_local_store(f"127.0.0.1:{broker.port}", str(tmp_path / "nothing-here"))
        view.brokers = [dict(b, local=False) for b in view.brokers]
        with pytest.raises(ValueError, match="not on this machine"):
            view.open_store("broker-a", TOPIC, 0)
    finally:
        view.close()


def test_a_broker_that_is_down_is_a_row_saying_so(broker):
    from test_admin_ops import World, register_dead_broker

    w = World(broker)
    keeper = register_dead_broker(w, "127.0.0.1:1")
    try:
        view = BrokerView.connect(broker.namesrv, groups=[GROUP])
        try:
            down = [b for b in view.brokers if b["broker_name"] == "broker-dead"]
            assert down and down[0]["error"] and "127.0.0.1:1" in down[0]["error"] and not down[0]["local"]
            assert view.errors and [b["error"] for b in view.brokers if b["broker_name"] == "broker-a"] == [None]
            # the history's sample: rates for the live broker, the dead one's error instead of rates
            (sample,) = view.history
            assert sample["down"] == {"127.0.0.1:1": down[0]["error"]} and "127.0.0.1:1" not in sample["tps"]
            assert [a for a in sample["tps"] if a != "127.0.0.1:1"] == [b["address"] for b in view.brokers
                                                                         if b["broker_name"] == "broker-a"]
        finally:
            view.close()
    finally:
        broker.call(keeper.close())
        w.close()


def test_a_cluster_gone_is_said_in_the_view_and_the_last_snapshot_stays(tmp_path):
    from rmqstore.common.errors import AdminConnectionError

    bt = BrokerThread(tmp_path / "store")
    try:
        view = BrokerView.connect(bt.namesrv, timeout=5)
        brokers = view.brokers
    finally:
        bt.stop()
    try:
        with pytest.raises(AdminConnectionError):
            view.refresh()
        assert view.errors and "snapshot failed" in view.errors[0] and bt.namesrv in view.errors[0]
        assert view.brokers == brokers  # what was last seen stays shown
    finally:
        view.close()
