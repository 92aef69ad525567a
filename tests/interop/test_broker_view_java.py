"""BrokerView against RocketMQ 4.9.8's Java broker and name server (Done means 2 of issue 24): the lag scenario of
tests/broker_view_checks.py -- lag rising while the producer outruns a slow consumer and falling to 0 once it
catches up, in the view's traits -- a click opening the Java broker's store (on this machine) in a StoreInspector
at the consumer's offset, and the exported page in Chromium showing the last snapshot and the history.  One Java
name server and broker for the module."""

from __future__ import annotations

import contextlib

import pytest

from broker_view_checks import check_open, check_static, lag_scenario, render_static
from rmqstore.widgets import to_html

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def java_cluster(rmq_java, tmp_path_factory):
    base = tmp_path_factory.mktemp("broker-view-java")
    with contextlib.ExitStack() as stack:
        namesrv = stack.enter_context(rmq_java.java_namesrv(base / "ns"))
        broker = stack.enter_context(rmq_java.java_broker(base / "broker", {"namesrvAddr": namesrv,
                                                                            "brokerName": "broker-java"}))
        yield namesrv, broker, base


@pytest.fixture(scope="module")
def scenario(java_cluster):
    namesrv, broker, base = java_cluster
    view, facts = lag_scenario(namesrv, broker, title="java")
    yield view, facts, base
    view.close()


def test_lag_rises_and_falls_to_zero_on_the_java_broker(scenario):
    view, facts, _ = scenario
    assert facts["steps"][-1] == 0 and max(facts["lags"]) >= facts["steps"][2] > facts["steps"][1]
    assert [b["broker_name"] for b in view.brokers] == ["broker-java"]


def test_a_click_opens_the_java_brokers_store(scenario, java_cluster):
    view, facts, _ = scenario
    _, _, base = java_cluster
    check_open(view, "broker-java", facts)
    assert view.inspector.root == str(base / "broker" / "store")


def test_the_exported_page_shows_the_java_cluster(scenario):
    view, _, base = scenario
    path = to_html(view, base / "broker_view_java.html", title="java")
    shown = render_static(path)
    assert not shown["errors"], shown["errors"]
    check_static(shown["dom"], view, shown["clicked"])
