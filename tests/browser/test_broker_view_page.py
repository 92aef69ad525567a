"""BrokerView exported (Done means 2 of issue 24, the static half, our broker): after the lag scenario
(tests/broker_view_checks.py) the page written by to_html, with no kernel, shows in Chromium the last snapshot --
brokers, queues, per-queue lag -- and the whole history as sparklines; a click on a queue says a kernel is needed.
The same for the Java broker: tests/interop/test_broker_view_java.py.  In JupyterLab, with a kernel: a click on a
queue sends the kernel a custom message and the StoreInspector it opens shows under the view."""

from __future__ import annotations

import nbformat
import pytest

from broker_support import BrokerThread
from broker_view_checks import CLICK_JS, DOM_JS, check_static, lag_scenario
from rmqstore.widgets import to_html

from .browser_helpers import open_notebook

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


LAB_CELL = """
import os
from rmqstore import Message
from rmqstore.admin import Admin
from rmqstore.broker import Broker, BrokerConfig, ServiceThread
from rmqstore.common.config import StoreConfig
from rmqstore.widgets import BrokerView

config = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
                     max_hash_slot_num=1000, max_index_num=4000)
broker = Broker(os.path.abspath("bv-lab-store"), BrokerConfig(broker_name="broker-a", listen_port=0), config,
                namesrv_listen=("127.0.0.1", 0))
running = ServiceThread(broker, "broker-lab")
with Admin(broker.namesrv.address) as admin:
    admin.update_topic("LabT", broker_addr=broker.address, read_queue_nums=1, write_queue_nums=1)
for i in range(5):
    broker.store.put_message(Message("LabT", f"lab {i}".encode(), queue_id=0))
broker.store.wait_dispatched()
view = BrokerView.connect(broker.namesrv.address, topics=["LabT"], title="lab")
print("offsets", " ".join(r["offset"] for r in view.open_store("broker-a", "LabT", 0, show=False).page["rows"]))
view.panel()
"""


def test_a_click_in_jupyterlab_opens_the_store_under_the_view(page, jupyterlab, snap, page_errors):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(LAB_CELL)],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nbformat.write(nb, jupyterlab.root_dir / "broker_view_lab.ipynb")
    ui = open_notebook(page, jupyterlab, "broker_view_lab.ipynb")
    ui.run_all_cells(timeout_ms=150_000)
    view = ui.wait_for_view("broker-view")
    printed = next(t for t in ui.output_texts() if t.startswith("offsets"))
    offsets = printed.split()[1:]  # the queue's records, as the kernel's own inspector found them
    assert len(offsets) == 5
    assert ui.outputs().get_by_test_id("store-inspector").count() == 0
    view.locator("[data-testid=queue-row][data-topic=LabT] [data-testid=open]").click()
    inspector = ui.wait_for_view("store-inspector")
    rows = inspector.get_by_test_id("record-row")
    rows.nth(4).wait_for()
    assert rows.evaluate_all("els => els.map(e => e.dataset.offset)") == offsets
    result = view.get_by_test_id("open-result")
    page.wait_for_function("el => el.dataset.ok === 'true' && el.textContent.startsWith('opened')",
                           arg=result.element_handle())
    snap("opened")
    assert not page_errors, page_errors
