"""BrokerView against a running broker -- ours or the Java one: the same scenario and the same checks.

:func:`lag_scenario` makes a topic of two queues and a subscription group with rmqstore.admin, then runs a
producer (:class:`wire_clients.WireClient`) and a slow consumer (:class:`wire_clients.SlowConsumer`) while the
view watches: the lag rises while the producer outruns the consumer, falls as the consumer takes messages, rises
again, and falls to 0 once the consumer catches up -- each step checked in the view's synced traits against what
the broker's own figures and the consumer's committed offsets say.  :func:`check_open` clicks (as the browser
does: a custom message) on a consumer offset and checks the StoreInspector opened at that record.
:data:`DOM_JS` reads an exported page's DOM; :func:`check_static` compares it with the view's state;
:func:`render_static` renders a page in Debian's Chromium in a child process (where the browser tier's fixtures
are not at hand: its Playwright loop runs in this process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from rmqstore.admin import Admin
from rmqstore.widgets import BrokerView
from wire_clients import SlowConsumer, WireClient

__all__ = ["lag_scenario", "check_open", "check_static", "render_static", "DOM_JS", "wait_until", "CHROMIUM"]

CHROMIUM = os.environ.get("RMQ_CHROMIUM", "/usr/bin/chromium")
TOPIC, GROUP = "ViewLagT", "CG_view"


def wait_until(predicate, timeout: float = 60, message: str = "the condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {message}")
        time.sleep(0.05)


def group_lag(view: BrokerView, group: str = GROUP) -> int | None:
    rows = [r for r in view.progress if r["group"] == group]
    return sum(int(r["lag"]) for r in rows) if rows else None


def _check_rows(view: BrokerView, consumer: SlowConsumer, sent: dict[int, int]) -> None:
    """Per queue: the view's broker offset is what was sent there, its consumer offset what the consumer committed,
    its lag the difference; the topic's max offsets are the same."""
    rows = {r["queue_id"]: r for r in view.progress if r["group"] == GROUP and r["topic"] == TOPIC}
    assert {q: (r["broker_offset"], r["consumer_offset"], r["lag"]) for q, r in rows.items()} == \
        {q: (str(n), str(consumer.offsets[q]), str(n - consumer.offsets[q])) for q, n in sent.items()}
    queues = {r["queue_id"]: (r["min_offset"], r["max_offset"]) for r in view.queues if r["topic"] == TOPIC}
    assert queues == {q: ("0", str(n)) for q, n in sent.items()}


def lag_scenario(namesrv: str, broker_addr: str, *, title: str = "") -> tuple[BrokerView, dict]:
    """Run the scenario against the broker at ``broker_addr`` (routed by ``namesrv``); the view (stopped, its last
    state kept) and what was sent: ``{"sent": {queue: n}, "ids": [(queue, msgId, body)], "lags": [...]}``."""
    with Admin(namesrv, timeout=15) as admin:
        admin.update_topic(TOPIC, broker_addr=broker_addr, read_queue_nums=2, write_queue_nums=2)
        admin.update_sub_group(GROUP, broker_addr=broker_addr)
        wait_until(lambda: _routed(admin), 60, f"the name server to route {TOPIC}")
    client = WireClient(broker_addr)
    consumer = SlowConsumer(client, GROUP, TOPIC, [0, 1], delay=0.05).start()
    sent = {0: 0, 1: 0}
    ids: list = []

    def produce(n: int) -> None:
        for _ in range(n):
            q = len(ids) % 2
            body = f"view message {len(ids)}".encode()
            ids.append((q, client.send(TOPIC, body, q, keys=f"vk{len(ids)}"), body))
            sent[q] += 1

    view = None
    try:
        for q in (0, 1):
            client.commit(GROUP, TOPIC, q, 0)  # the group has offsets: the broker counts its lag from here
        view = BrokerView.connect(namesrv, topics=[TOPIC], groups=[GROUP], title=title, timeout=15)
        assert group_lag(view) == 0
        view.watch(0.2)
        seen: list[int] = []
        steps = []
        # 1. the producer outruns the (paused) consumer: the lag rises
        produce(12)
        steps.append(wait_until(lambda: group_lag(view) == 12 and 12, message="lag 12 in the view"))
        # 2. the consumer takes some, slowly: the lag falls, but not to 0
        consumer.resume()
        wait_until(lambda: consumer.committed >= 4, message="the consumer to take 4 messages")
        consumer.pause()
        left = 12 - consumer.committed
        assert 0 < left < 12
        steps.append(wait_until(lambda: group_lag(view) == left and left, message=f"lag {left} in the view"))
        # 3. the producer again, while the consumer runs: the lag rises above where it was
        consumer.resume()
        produce(16)
        consumer.pause()
        higher = sum(sent.values()) - consumer.committed
        assert higher > left, "the consumer kept up with the producer: it should be slower"
        steps.append(wait_until(lambda: group_lag(view) == higher and higher, message=f"lag {higher} in the view"))
        _check_rows(view, consumer, sent)
        # 4. the consumer catches up: 0
        consumer.resume()
        wait_until(lambda: consumer.committed == sum(sent.values()), 120, "the consumer to catch up")
        wait_until(lambda: group_lag(view) == 0, message="lag 0 in the view")
        steps.append(0)
        view.stop()
        assert not view.live and not view.watching
        _check_rows(view, consumer, sent)
        assert consumer.error is None, consumer.error
        seen = [int(s["lag"].get(GROUP, "-1")) for s in view.history]
        _in_order(steps, seen)
        _check_brokers(view, broker_addr)
    except BaseException:
        if view is not None:
            view.close()
        raise
    finally:
        consumer.stop()
        client.close()
    return view, {"sent": dict(sent), "ids": ids, "lags": seen, "steps": steps}


def _routed(admin: Admin) -> bool:
    try:
        return bool(admin.topic_route(TOPIC).queues)
    except Exception:  # noqa: BLE001 - not routed yet
        return False


def _in_order(steps: list[int], seen: list[int]) -> None:
    """``steps`` appear in the history's lag series in that order (with other samples between)."""
    i = 0
    for value in seen:
        if i < len(steps) and value == steps[i]:
            i += 1
    assert i == len(steps), f"the history's lag {seen} should pass through {steps} in order"


def _check_brokers(view: BrokerView, broker_addr: str) -> None:
    with Admin(view.namesrv, timeout=15) as admin:
        status = admin.broker_status(broker_addr)
        root = admin.get_broker_config(broker_addr).store_path_root_dir
    (row,) = [b for b in view.brokers if b["address"] == broker_addr]
    assert row["role"] == "MASTER" and row["version"] == status.version_desc == "V4_9_8"
    assert row["commit_log_max_offset"] == str(status.commit_log_max_offset) and int(row["commit_log_max_offset"]) > 0
    assert row["store_root"] == root and row["local"] is True
    # every sample has the broker's rates or says why not; only the first ones may lack them: the Java broker
    # refuses GET_BROKER_RUNTIME_INFO (NoSuchElementException) until its StoreStatsService has sampled once, in
    # its first second
    assert all((broker_addr in s["tps"]) != (broker_addr in s["down"]) for s in view.history)
    first = next(i for i, s in enumerate(view.history) if broker_addr in s["tps"])
    assert all(broker_addr in s["tps"] for s in view.history[first:]), [s["down"] for s in view.history]
    # the rates come from the broker's counters between samples: the producer's and the consumer's messages show
    rates = [s["tps"][broker_addr] for s in view.history[first + 1:]]
    assert max(r[0] for r in rates) > 0 and max(r[1] for r in rates) > 0, rates
    assert view.history[-1]["totals"][broker_addr] == [row["put_total"], row["get_total"]]
    assert int(row["put_total"]) >= 28  # the scenario's messages (the Java broker counts its own system puts too)
    assert 0 <= row["disk_ratio"] <= 1 and row["put_tps"] >= 0


def check_open(view: BrokerView, broker_name: str, facts: dict) -> None:
    """A click on queue 0's offset 2 (a custom message, as the browser sends it) opens the broker's store there:
    the first record shown is the third message sent to queue 0."""
    sent_to_0 = [(mid, body) for q, mid, body in facts["ids"] if q == 0]
    replies = []
    view.send = lambda content, buffers=None: replies.append(content)  # what the kernel would send the browser
    view._on_msg(view, {"kind": "open", "id": "o1", "broker_name": broker_name, "topic": TOPIC, "queue_id": "0",
                        "queue_offset": "2"}, [])
    assert view.opened["ok"], view.opened["message"]
    assert replies and replies[-1]["kind"] == "opened" and replies[-1]["ok"] and replies[-1]["id"] == "o1"
    inspector = view.inspector
    page = inspector.page
    assert page["mode"] == "queue" and page["topic"] == TOPIC and page["queue_id"] == 0 and page["start"] == "2"
    first = page["rows"][0]
    record = inspector.record(int(first["offset"]))
    assert record["msg_id"] == sent_to_0[2][0] and inspector.selected == first["offset"]
    assert len(page["rows"]) == len(sent_to_0) - 2
    # a broker that is not there: said, not raised
    view._on_msg(view, {"kind": "open", "broker_name": "no-such-broker", "topic": TOPIC, "queue_id": "0"}, [])
    assert not view.opened["ok"] and "no-such-broker" in view.opened["message"]


#: the exported page's DOM as the checks need it
DOM_JS = """() => {
  const all = (sel) => [...document.querySelectorAll(sel)];
  const attrs = (el) => Object.fromEntries([...el.attributes].filter((a) => a.name.startsWith("data-"))
    .map((a) => [a.name.slice(5), a.value]));
  return {
    root: all("[data-testid=broker-view]").map(attrs),
    brokers: all("[data-testid=broker-row]").map(attrs),
    queues: all("[data-testid=queue-row]").map(attrs),
    groups: all("[data-testid=group]").map(attrs),
    lags: all("[data-testid=lag-row]").map(attrs),
    sparks: all("[data-testid=sparkline]").map((el) => ({...attrs(el),
      drawn: el.querySelector("polyline") ? el.querySelector("polyline").getAttribute("points").split(" ").length : 0})),
    opens: all("[data-testid=open]").map(attrs),
  };
}"""

#: click the first clickable place; the text the view shows then
CLICK_JS = """() => {
  const el = document.querySelector("[data-testid=open]");
  if (!el) return null;
  el.click();
  const r = document.querySelector("[data-testid=open-result]");
  return { text: r.textContent, ok: r.getAttribute("data-ok") };
}"""


def check_static(dom: dict, view: BrokerView, clicked: dict | None) -> None:
    """The page shows the view's last snapshot and its history, exactly."""
    assert dom["root"] and dom["root"][0]["updates"] == str(view.updates)
    assert [(b["broker-name"], b["address"], b["role"], b["version"], b["max-offset"], b["local"])
            for b in dom["brokers"]] == [(b["broker_name"], b["address"], b["role"], b["version"],
                                          b["commit_log_max_offset"], "true" if b["local"] else "false")
                                         for b in view.brokers]
    assert [(q["topic"], q["queue"], q["min"], q["max"]) for q in dom["queues"]] == \
        [(q["topic"], str(q["queue_id"]), q["min_offset"], q["max_offset"]) for q in view.queues]
    assert [(r["group"], r["queue"], r["broker-offset"], r["consumer-offset"], r["lag"]) for r in dom["lags"]] == \
        [(r["group"], str(r["queue_id"]), r["broker_offset"], r["consumer_offset"], r["lag"]) for r in view.progress]
    assert {g["group"]: g["lag"] for g in dom["groups"]} == {GROUP: "0"}
    n = len(view.history)
    assert n >= 4, "the history holds the scenario's samples"
    for series in [f"lag:{GROUP}"] + [f"{k}:{b['address']}" for b in view.brokers for k in ("put", "get")]:
        (spark,) = [s for s in dom["sparks"] if s["series"] == series]
        assert (spark["points"], spark["drawn"]) == (str(n), n), series
    lag_spark = next(s for s in dom["sparks"] if s["series"] == f"lag:{GROUP}")
    assert lag_spark["last"] == view.history[-1]["lag"][GROUP] == "0"
    assert dom["opens"], "a local store's queues and offsets are clickable"
    assert clicked is not None and clicked["ok"] == "false" and "static page" in clicked["text"]


_RENDER = r"""
import json, sys
from playwright.sync_api import sync_playwright
url, chromium, dom_js, click_js = sys.argv[1:5]
with sync_playwright() as pw:
    b = pw.chromium.launch(executable_path=chromium, headless=True, args=["--headless=new", "--no-sandbox",
                           "--disable-gpu", "--no-first-run", "--disable-background-networking"])
    page = b.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route("**/*", lambda r: r.abort() if r.request.url.startswith(("http:", "https:")) else r.fallback())
    page.goto(url)
    page.wait_for_selector("[data-testid=broker-view]", timeout=30000)
    dom = page.evaluate(dom_js)
    clicked = page.evaluate(click_js)
    b.close()
print(json.dumps({"dom": dom, "clicked": clicked, "errors": errors}))
"""


def render_static(html_path) -> dict:
    """The page at ``html_path`` rendered by Chromium in a child process: ``{"dom", "clicked", "errors"}``."""
    pytest.importorskip("playwright")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    done = subprocess.run([sys.executable, "-c", _RENDER, f"file://{html_path}", CHROMIUM, DOM_JS, CLICK_JS],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
