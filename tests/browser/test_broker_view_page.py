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
