"""BrokerView exported (Done means 2 of issue 24, the static half, our broker): after the lag scenario
(tests/broker_view_checks.py) the page written by to_html, with no kernel, shows in Chromium the last snapshot --
brokers, queues, per-queue lag -- and the whole history as sparklines; a click on a queue says a kernel is needed.
The same for the Java broker: tests/interop/test_broker_view_java.py."""

from __future__ import annotations

import pytest

from broker_support import BrokerThread
from broker_view_checks import CLICK_JS, DOM_JS, check_static, lag_scenario
from rmqstore.widgets import to_html

pytestmark = pytest.mark.timeout(300)


def test_exported_broker_view_keeps_the_last_snapshot_and_history(tmp_path, page, static_server, snap, page_errors,
                                                                 external_requests):
    with BrokerThread(tmp_path / "store") as bt:
        view, _facts = lag_scenario(bt.namesrv, f"127.0.0.1:{bt.port}", title="ours")
    try:
        to_html(view, tmp_path / "broker_view.html", title="broker view")
        page.goto(f"{static_server(tmp_path)}/broker_view.html")
        page.get_by_test_id("broker-view").wait_for()
        snap("rendered")
        dom = page.evaluate(DOM_JS)
        clicked = page.evaluate(CLICK_JS)
        check_static(dom, view, clicked)
    finally:
        view.close()
    assert not external_requests, external_requests
    assert not page_errors, page_errors


def test_a_store_opened_under_the_view_is_in_the_exported_page(tmp_path, page, static_server, page_errors):
    """``view.panel()`` exported after a click opened the store: the StoreInspector the Output area holds renders
    too, at the queue offset clicked (the offline shim renders an Output's captured widgets)."""
    from broker_view_checks import TOPIC

    with BrokerThread(tmp_path / "store") as bt:
        view, _facts = lag_scenario(bt.namesrv, f"127.0.0.1:{bt.port}", title="ours")
    try:
        inspector = view.open_store("broker-a", TOPIC, 1, 3)
        expected = [r["offset"] for r in inspector.page["rows"]]
        assert len(expected) == 14 - 3
        to_html(view.panel(), tmp_path / "panel.html", title="panel")
        page.goto(f"{static_server(tmp_path)}/panel.html")
        page.get_by_test_id("broker-view").wait_for()
        page.get_by_test_id("store-inspector").wait_for()
        rows = page.get_by_test_id("record-row")
        assert rows.evaluate_all("els => els.map(e => e.dataset.offset)") == expected
        assert page.get_by_test_id("record-view").count() == 1  # the first record of the page, selected
    finally:
        view.close()
    assert not page_errors, page_errors
