"""Notebook 15 ("Operating a broker", issue 24 Done means 3) prints what the broker holds: each printed value is
checked against the store the notebook wrote (its commitlog and the offsets the broker persisted at its stop) and
against the BrokerView state saved in the executed notebook -- never against the notebook's own printing alone."""

from __future__ import annotations

import os
import re
import shutil

import pytest

pytest.importorskip("nbclient")
pytest.importorskip("rocketmq.client")

from conftest import executed_notebook, notebook_text, notebook_work_folder  # noqa: E402
from rmqstore.broker.jsonfmt import loads  # noqa: E402
from rmqstore.format.properties import string_to_properties  # noqa: E402
from rmqstore.format.record import MessageRecord  # noqa: E402
from rmqstore.read.scan import scan_commitlog  # noqa: E402

pytestmark = pytest.mark.timeout(600)

NB = "15_operating_a_broker.ipynb"


@pytest.fixture(scope="module")
def nb15():
    text = notebook_text(NB)
    work = notebook_work_folder(text)
    store = os.path.join(work, "store")
    orders = [(off, rec) for off, rec in scan_commitlog(store) if isinstance(rec, MessageRecord)
              and rec.topic == "Orders"]
    yield text, store, orders
    shutil.rmtree(work, ignore_errors=True)


def _keys(rec) -> str:
    return string_to_properties(rec.properties).get("KEYS", "")


def test_the_producer_sent_300_orders_and_the_slow_consumer_took_each_once(nb15):
    text, _, orders = nb15
    assert sorted(_keys(r) for _, r in orders) == sorted(f"order-{i}" for i in range(300))
    assert "topic Orders: 4 queues on broker-a" in text
    assert {r.queue_id for _, r in orders} == {0, 1, 2, 3}
    assert "consumed 300 messages, each once: True" in text
    m = re.search(r"the group's lag at its highest: (\d+); now: (\d+)", text)
    assert m and 0 < int(m.group(1)) <= 300 and m.group(2) == "0", text[-3000:]


def test_the_reset_moved_each_queue_to_the_second_batch(nb15):
    text, store, orders = nb15
    assert "lag after the reset: 100 = the second batch: True" in text
    assert "told online clients: False" in text  # the consumer had stopped: committed directly
    with open(os.path.join(store, "config", "consumerOffset.json"), encoding="utf-8") as f:
        saved = {int(q): o for q, o in loads(f.read())["offsetTable"]["Orders@OrderProcessors"].items()}
    second = {}
    for _, r in orders:  # per queue, the queue offset of the second batch's first message
        if int(_keys(r).split("-")[1]) >= 200:
            second[r.queue_id] = min(second.get(r.queue_id, r.queue_offset), r.queue_offset)
    assert saved == second


def test_the_key_leads_to_the_record_and_the_inspector_opens_there(nb15):
    text, _, orders = nb15
    m = re.search(r"order-250: msgId (\w+), queue (\d+), queue offset (\d+), commitlog offset (\d+), body 'order 250'",
                  text)
    assert m, text[-3000:]
    (off, rec), = [(o, r) for o, r in orders if _keys(r) == "order-250"]
    assert (int(m.group(2)), int(m.group(3)), int(m.group(4))) == (rec.queue_id, rec.queue_offset, off)
    assert rec.body == b"order 250"
    assert (f"inspector at Orders/{rec.queue_id} from queue offset {rec.queue_offset}: first record at {off} = "
            "the key's record: True") in text


def test_the_broker_view_saved_the_lag_history():
    nb = executed_notebook(NB)
    states = [m["state"] for m in nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()]
    (view,) = [s for s in states if "history" in s and "progress" in s]
    lags = [int(s["lag"].get("OrderProcessors", "0")) for s in view["history"]]
    assert max(lags) > 0 and lags[-1] == 100  # the last snapshot: after the reset
    assert sum(int(q["lag"]) for q in view["progress"]) == 100
    assert any(s.get("selected") and s.get("page", {}).get("mode") == "queue" for s in states)  # the inspector
