"""The views in a real browser: in JupyterLab with a kernel, exported to HTML, and from to_html.

(a) JupyterLab, started here on loopback, runs ``views.ipynb`` from its own UI (Run > Run
    All Cells); every view renders in the output area, hovering a RecordView field
    highlights its bytes, the PutPathPlayer steps and plays, and the positions it shows are
    the ones the raw trace events recorded (printed by the notebook itself).
(b) The same notebook through ``export_notebook_html`` (executed, widget state saved), opened
    from a static server with no kernel and no network: the same checks.
(c) ``to_html`` pages of each view, built here from the sample store, a traced engine run and a
    SYNC_MASTER/slave pair on loopback.

Expected values never come from the views' own state: segments from ``store.positions()``,
record spans from the codec, player positions from the tracer's events, replication offsets
from the stores and ``HAService.positions()``.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from functools import partial
from pathlib import Path

import pytest

from conftest import wait_until as shared_wait_until

from .browser_helpers import open_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NOTEBOOK = HERE / "views.ipynb"
SAMPLE = REPO / "data" / "sample_store"
DONE = "VIEWS-NOTEBOOK-DONE"
#: the position each moving stage owns (the others it leaves alone)
MOVES = {"position.wrote": "wrote", "append.blank": "wrote", "commit": "committed", "flush": "flushed"}
PLAYER_CONFIG = {"flush_disk_type": "ASYNC_FLUSH", "transient_store_pool_enable": True}


def widgets_module():
    """``rmqstore.widgets`` -- the views' module; the tier skips (never fails) while it is missing."""
    return pytest.importorskip("rmqstore.widgets", reason="rmqstore.widgets (the views) is not importable")


def need(name: str):
    mod = widgets_module()
    if not hasattr(mod, name):
        pytest.skip(f"rmqstore.widgets.{name} does not exist yet")
    return getattr(mod, name)


def has_inspector() -> bool:
    return hasattr(widgets_module(), "StoreInspector")


#: the suite's wait (conftest), polling the page less often
wait_until = partial(shared_wait_until, interval=0.05)


# ------------------------------------------------------------------------------ expectations

def printed(scope) -> dict:
    """The notebook's ``SEGMENTS``/``RECORD``/``PLAYER`` lines (Lab or exported page), parsed."""
    found = {}
    for text in scope.locator(".jp-OutputArea-output").all_text_contents():
        for line in text.splitlines():
            m = re.match(r"^(SEGMENTS|RECORD|PLAYER|INSPECTOR) ([\[{].*)$", line.strip())
            if m:
                found[m.group(1)] = json.loads(m.group(2))
    wanted = {"SEGMENTS", "RECORD", "PLAYER"} | ({"INSPECTOR"} if has_inspector() else set())
    missing = wanted - found.keys()
    assert not missing, f"the notebook's output lacks {sorted(missing)}"
    return found


def player_expectations(events) -> dict:
    """What the notebook prints for its player, computed from raw tracer events."""
    events = sorted(events, key=lambda e: e.get("seq", 0))
    checks = [[i, e["stage"], MOVES[e["stage"]], e["after"][MOVES[e["stage"]]], f"{e['after']['file']:020d}"]
              for i, e in enumerate(events) if e["stage"] in MOVES and e.get("after")]
    return {"steps": len(events), "stages": [e["stage"] for e in events], "checks": checks}


# ------------------------------------------------------------------------------ view checks

def check_segments(scope, expected, snap=None):
    """Every commitlog file is a bar whose data attributes are the store's positions."""
    view = scope.get_by_test_id("segment-view").first
    view.wait_for()
    bars = view.get_by_test_id("segment")
    wait_until(lambda: bars.count() >= len(expected), what=f"{len(expected)} segment bars")
    got = bars.evaluate_all(
        "els => els.map(e => [e.dataset.file, +e.dataset.wrote, +e.dataset.committed, +e.dataset.flushed])")
    assert got == expected
    if snap:
        snap("segment-view", view)


def record_highlight(view) -> dict:
    """field -> [bytes with class hl, bytes] over the view's byte cells."""
    return view.get_by_test_id("byte").evaluate_all("""els => {
        const out = {};
        for (const e of els) {
            const f = e.dataset.field;
            out[f] = out[f] || [0, 0];
            out[f][1] += 1;
            if (e.classList.contains('hl')) out[f][0] += 1;
        }
        return out;
    }""")


def check_record_hover(scope, record, snap=None):
    """Hovering a decoded row (or a byte) highlights exactly that field's bytes."""
    view = scope.locator("[data-testid='record-view']:not([data-testid='store-inspector'] *)").first
    view.wait_for()
    spans = {name: stop - start for name, start, stop in record["spans"]}
    counts = wait_until(lambda: (c := record_highlight(view)) and sum(n for _, n in c.values()) == sum(
        spans.values()) and c, what="every byte cell of the record")
    assert {f: n for f, (_, n) in counts.items()} == spans, "one byte cell per byte, tagged with its field"
    assert not any(h for h, _ in counts.values()), "nothing highlighted before hovering"
    assert sorted(view.get_by_test_id("field").evaluate_all("els => els.map(e => e.dataset.field)")) == sorted(spans)

    def only(name):
        c = record_highlight(view)
        return c.get(name) == [spans[name], spans[name]] and all(h == 0 for f, (h, _) in c.items() if f != name)

    view.locator("[data-testid='field'][data-field='queue_offset']").hover()
    wait_until(lambda: only("queue_offset"), what="the queue_offset bytes (and only they) highlighted "
                                                     "after hovering its decoded row")
    view.locator("[data-testid='byte'][data-field='topic']").nth(2).hover()
    wait_until(lambda: only("topic"), what="every topic byte highlighted after hovering one of them")
    if snap:
        snap("record-view-hover-topic", "viewport")
        assert only("topic"), "the screenshot shows the hovered state"
    view.page.mouse.move(1, 1)  # leave the view: the hover highlight goes away
    wait_until(lambda: not any(h for h, _ in record_highlight(view).values()), what="no highlight after leaving")


def player_state(player) -> dict:
    return player.evaluate("""root => {
        const t = id => root.querySelector(`[data-testid="${id}"]`);
        return {index: +t('step-index').textContent, stage: t('stage').textContent,
                wrote: +t('pos-wrote').textContent, committed: +t('pos-committed').textContent,
                flushed: +t('pos-flushed').textContent, file: t('positions').dataset.file};
    }""")


def check_play_and_pause(player) -> dict:
    """Play from the start at 32 steps/s: it advances on its own, pause stops it; the state paused at."""
    player.get_by_test_id("scrub").fill("0")
    wait_until(lambda: player_state(player)["index"] == 0, what="scrub to 0")
    player.get_by_test_id("speed").select_option("32")
    player.get_by_test_id("play").click()
    wait_until(lambda: player_state(player)["index"] >= 5, what="the player advancing after play")
    player.get_by_test_id("pause").click()
    paused_at = player_state(player)["index"]
    time.sleep(0.3)
    state = player_state(player)
    assert state["index"] == paused_at, "pause stops the player"
    return state


def check_player(scope, trace, snap=None):
    """Step forward, scrub to every step that moves a position, play and pause."""
    player = scope.get_by_test_id("put-path-player").first
    player.wait_for()
    steps, stages = trace["steps"], trace["stages"]
    assert player.get_by_test_id("scrub").get_attribute("max") == str(steps - 1)
    state = player_state(player)
    assert (state["index"], state["stage"]) == (0, stages[0])

    for k in (1, 2, 3):
        player.get_by_test_id("step-forward").click()
        state = wait_until(lambda: (s := player_state(player))["index"] == k and s, what=f"step {k}")
        assert state["stage"] == stages[k]
    player.get_by_test_id("step-back").click()
    wait_until(lambda: player_state(player)["index"] == 2, what="step back to 2")

    scrub = player.get_by_test_id("scrub")
    assert trace["checks"], "the trace moved no position"
    seen = set()
    for i, stage, key, value, file in trace["checks"]:
        scrub.fill(str(i))
        state = wait_until(lambda: (s := player_state(player))["index"] == i and s, what=f"scrub to {i}")
        assert (state["stage"], state["file"], state[key]) == (stage, file, value), f"step {i}: {state}"
        seen.add(key)
    assert seen >= {"wrote", "committed", "flushed"}, seen
    if snap:
        snap("put-path-player-scrubbed", player)

    state = check_play_and_pause(player)
    assert state["stage"] == stages[state["index"]]
    if snap:
        snap("put-path-player-played", player)


def check_inspector(scope, expected, snap=None):
    """Segments and record rows are listed; paging moves; lookups by offset and by msgId select
    the record (live: asked of the kernel; static: among the embedded pages)."""
    target = expected["INSPECTOR"]
    view = scope.get_by_test_id("store-inspector").first
    view.wait_for()
    bars = view.get_by_test_id("segment")
    wait_until(lambda: bars.count() >= len(expected["SEGMENTS"]), what="the inspector's segment bars")
    assert bars.evaluate_all("els => els.map(e => [e.dataset.file, +e.dataset.wrote, +e.dataset.committed, "
                             "+e.dataset.flushed])") == expected["SEGMENTS"]
    rows = view.get_by_test_id("record-row")
    wait_until(lambda: rows.count() > 0, what="record rows")
    assert rows.first.get_attribute("data-offset") == "0"
    # the records table fits the view's width: every column shows, the last one too (long keys and
    # bodies are cut short with an ellipsis, whole in the cell's title), no sideways scrolling
    fit = view.locator(".rmq-insp-records").evaluate(
        "t => { const w = t.parentElement, th = [...t.querySelectorAll('th')].pop(); "
        "return [t.scrollWidth, w.clientWidth, th.getBoundingClientRect().right, w.getBoundingClientRect().right]; }")
    assert fit[0] <= fit[1] and fit[2] <= fit[3], f"records table {fit[0]} px in a {fit[1]} px view: {fit}"
    cells = rows.first.locator("td").evaluate_all("tds => tds.map(td => [td.textContent, td.title])")
    assert all(title == text for text, title in cells[6:7]), cells  # keys: whole in the title
    first_page = rows.evaluate_all("els => els.map(e => e.dataset.offset)")
    view.get_by_test_id("page-next").click()
    wait_until(lambda: rows.count() and rows.first.get_attribute("data-offset") not in first_page,
               timeout=20, what="the next page of records")
    assert int(rows.first.get_attribute("data-offset")) > int(first_page[-1])
    view.get_by_test_id("page-first").click()
    wait_until(lambda: rows.count() and rows.first.get_attribute("data-offset") == "0", timeout=20,
               what="back to the first page")

    record_offset = view.get_by_test_id("record-view").get_by_test_id("record-offset")

    def shown():
        return record_offset.first.get_attribute("data-offset") if record_offset.count() else None

    for query in (str(target["offset"]), target["msg_id"]):
        view.get_by_test_id("page-first").click()
        wait_until(lambda: rows.count() and rows.first.get_attribute("data-offset") == "0", timeout=20,
                   what="the first page")
        rows.first.click()  # select another record first, so the lookup has to change the selection
        wait_until(lambda: shown() == "0", timeout=20, what="the clicked record (offset 0) shown")
        view.get_by_test_id("lookup").fill(query)
        view.get_by_test_id("lookup-go").click()
        wait_until(lambda: shown() == str(target["offset"]), timeout=20,
                   what=f"the record found by lookup {query!r}")
    if snap:
        snap("store-inspector-lookup", view)


def check_replication(scope, expected, snap=None):
    """Both stores' positions, the master's per-slave offsets and the SYNC_MASTER waits, as data attributes."""
    view = scope.get_by_test_id("replication-view").first
    view.wait_for()
    got = view.get_by_test_id("pos").evaluate_all(
        "els => els.map(e => [e.dataset.side, e.dataset.pos, e.dataset.value])")
    assert got == expected["positions"]
    sides = view.get_by_test_id("ha-side").evaluate_all(
        "els => els.map(e => [e.dataset.side, e.dataset.role, e.dataset.running])")
    assert sides == [["master", "SYNC_MASTER", "true"], ["slave", "SLAVE", "true"]]
    conns = view.get_by_test_id("ha-connection").evaluate_all(
        "els => els.map(e => [e.dataset.slave, e.dataset.requested, e.dataset.pushed, e.dataset.acked])")
    assert conns == expected["connections"]
    assert view.get_by_test_id("push2-slave-max").get_attribute("data-value") == expected["acked"]
    waits = view.get_by_test_id("replica-waits")
    assert waits.get_attribute("data-waiting") == "0"
    assert waits.get_attribute("data-last-status") == expected["last_status"]
    assert waits.get_attribute("data-last-next-offset") == expected["last_next_offset"]
    outcomes = dict(view.get_by_test_id("replica-outcome").evaluate_all(
        "els => els.map(e => [e.dataset.status, +e.dataset.count])"))
    assert {k: v for k, v in outcomes.items() if v} == expected["outcomes"]
    assert set(outcomes) >= {"PUT_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"}
    client = view.get_by_test_id("ha-client")
    assert client.get_attribute("data-connected") == "true"
    assert client.get_attribute("data-reported") == expected["reported"]
    if snap:
        snap("replication-view", view)


def check_all(scope, expected, snap):
    check_segments(scope, expected["SEGMENTS"], snap)
    check_record_hover(scope, expected["RECORD"], snap)
    check_player(scope, expected["PLAYER"], snap)
    if "INSPECTOR" in expected:
        check_inspector(scope, expected, snap)
    if "REPLICATION" in expected:
        check_replication(scope, expected["REPLICATION"], snap)


# ------------------------------------------------------------------------------ (a) JupyterLab

def test_views_in_jupyterlab(page, jupyterlab, snap, page_errors):
    widgets_module()
    shutil.copy(NOTEBOOK, jupyterlab.root_dir / NOTEBOOK.name)
    nb = open_notebook(page, jupyterlab, NOTEBOOK.name)
    nb.run_all_cells(timeout_ms=150_000, done_text=DONE)
    roots = ["segment-view", "record-view", "put-path-player"] + (["store-inspector"] if has_inspector() else [])
    for testid in roots:
        nb.wait_for_view(testid)
    snap("rendered")
    check_all(nb.panel, printed(nb.panel), snap)
    assert not page_errors, page_errors


# ------------------------------------------------------------------------------ (b) exported notebook

@pytest.fixture(scope="module")
def exported_notebook(tmp_path_factory):
    widgets = widgets_module()
    out = tmp_path_factory.mktemp("exported")
    started = time.monotonic()
    widgets.export_notebook_html(NOTEBOOK, out / "views.html", execute=True, timeout=180)
    print(f"export_notebook_html: {time.monotonic() - started:.1f} s -> {out / 'views.html'}")
    return out


def test_exported_notebook_without_kernel(page, exported_notebook, static_server, snap, page_errors,
                                          external_requests):
    html = (exported_notebook / "views.html").read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", html), "the page references the network"
    base = static_server(exported_notebook)
    page.goto(f"{base}/views.html")
    for testid in ("segment-view", "record-view", "put-path-player"):
        page.get_by_test_id(testid).first.wait_for()
    snap("rendered")
    check_all(page, printed(page), snap)
    assert not external_requests, external_requests
    assert not page_errors, page_errors


# ------------------------------------------------------------------------------ (c) to_html pages

def replication_page(widgets, out):
    """A ReplicationView of a real SYNC_MASTER and slave after some puts, and what it must show
    (from the stores' own positions and the puts' answers)."""
    from collections import Counter

    from rmqstore import BrokerRole, Message, MessageStore, StoreConfig

    common = dict(mapped_file_size_commit_log=16 * 1024, mapped_file_size_consume_queue=20 * 50,
                  pre_fault_mapped_file=False, ha_reconnect_interval=50)
    master = MessageStore(out / "ha-master", StoreConfig(broker_role=BrokerRole.SYNC_MASTER, ha_enable=True,
                                                          ha_listen_port=0, **common))
    master.start()
    slave = MessageStore(out / "ha-slave", StoreConfig(broker_role=BrokerRole.SLAVE, **common,
                                                        ha_master_address=master.ha_service.listen_address))
    try:
        slave.start()
        wait_until(lambda: master.ha_service.connection_count == 1 and slave.ha_service.ha_client.connected,
                   what="the slave to connect")
        results = [master.put_message(Message("HaView", b"v" * (50 + 97 * i % 700), queue_id=i % 2))
                   for i in range(40)]
        master.wait_dispatched()
        slave.wait_dispatched()
        view = widgets.ReplicationView.from_stores(master, slave, title="replication")
        expected = {"positions": [], "outcomes": dict(Counter(r.status.name for r in results))}
        for side, store in (("master", master), ("slave", slave)):
            queue = store.commit_log.mapped_file_queue
            for pos, value in (("wrote", queue.get_max_wrote_position()), ("max_offset", store.get_max_phy_offset()),
                               ("flushed", queue.flushed_where),
                               ("dispatched", store.reput_message_service.reput_from_offset)):
                expected["positions"].append([side, pos, str(value)])
        ha = master.ha_service.positions()
        expected["connections"] = [[c["slave"], str(c["requested"]), str(c["pushed"]), str(c["acked"])]
                                   for c in ha["slaves"]]
        expected["acked"] = str(ha["push2_slave_max_offset"])
        last = results[-1].append_result
        expected["last_status"] = results[-1].status.name
        expected["last_next_offset"] = str(last.wrote_offset + last.wrote_bytes)
        expected["reported"] = str(slave.ha_service.ha_client.current_reported_offset)
        assert expected["outcomes"] == {"PUT_OK": 40} and len(expected["connections"]) == 1
    finally:
        slave.shutdown()
        master.shutdown()
    return view, expected


@pytest.fixture(scope="module")
def standalone_pages(tmp_path_factory):
    """One to_html page per view (and one with all of them), plus what each must show."""
    widgets = widgets_module()
    from rmqstore import MessageRecord, open_store
    from rmqstore.format.record import create_message_id, record_field_spans
    from rmqstore.read.scan import CommitLogScan

    out = tmp_path_factory.mktemp("to_html")
    store = open_store(SAMPLE)
    try:
        offset, record = next((off, rec) for off, rec in CommitLogScan(SAMPLE)
                              if isinstance(rec, MessageRecord) and 0 < len(rec.body) <= 100)
        segment_view = widgets.SegmentView.from_store(store)
        record_view = widgets.RecordView.from_store(store, offset)
        expected = {
            "SEGMENTS": [[p["file"], p["wrotePosition"], p["committedPosition"], p["flushedPosition"]]
                         for p in store.positions()],
            "RECORD": {"offset": offset, "spans": [[n, a, b] for n, a, b, _ in record_field_spans(record)]},
        }
    finally:
        store.close()
    player = widgets.PutPathPlayer.record(PLAYER_CONFIG, 12)
    expected["PLAYER"] = player_expectations(player.events)
    pages = {"segment_view": segment_view, "record_view": record_view, "put_path_player": player}
    if hasattr(widgets, "StoreInspector"):
        pages["store_inspector"] = widgets.StoreInspector.from_path(SAMPLE)
        expected["INSPECTOR"] = {"offset": offset, "msg_id": create_message_id(record.store_host, offset)}
    if hasattr(widgets, "ReplicationView"):
        pages["replication_view"], expected["REPLICATION"] = replication_page(widgets, out)
    for name, view in pages.items():
        widgets.to_html(view, out / f"{name}.html", title=name)
    widgets.to_html(list(pages.values()), out / "all.html", title="all views")
    if hasattr(widgets.PutPathPlayer, "record_send"):  # the put path from the wire: a send through the broker
        from rmqstore.broker.recording import send_frame

        sender = widgets.PutPathPlayer.record_send(send_frame("WireViewTopic", b"from the wire"), PLAYER_CONFIG)
        expected["SEND_PLAYER"] = player_expectations(sender.trace.events)
        expected["WIRE"] = wire_expectations(sender.trace.events)
        widgets.to_html(sender, out / "send_player.html", title="send_player")
    return out, expected


@pytest.mark.parametrize("name", ["segment_view", "record_view", "put_path_player", "send_player",
                                  "store_inspector", "replication_view"])
def test_to_html_page(name, page, standalone_pages, static_server, snap, page_errors, external_requests):
    out, expected = standalone_pages
    if not (out / f"{name}.html").exists():
        pytest.skip(f"rmqstore.widgets has no {name} view yet")
    page.goto(f"{static_server(out)}/{name}.html")
    {"segment_view": lambda: check_segments(page, expected["SEGMENTS"], snap),
     "record_view": lambda: check_record_hover(page, expected["RECORD"], snap),
     "put_path_player": lambda: check_player(page, expected["PLAYER"], snap),
     "send_player": lambda: (check_wire(page, expected["WIRE"], snap), check_player(page, expected["SEND_PLAYER"])),
     "store_inspector": lambda: check_inspector(page, expected, snap),
     "replication_view": lambda: check_replication(page, expected["REPLICATION"], snap)}[name]()
    assert not external_requests, external_requests
    assert not page_errors, page_errors


def wire_expectations(events) -> dict:
    """The wire steps of a send trace, from the raw events: index, stage, field name, its bytes in hex."""
    events = sorted(events, key=lambda e: e.get("seq", 0))
    frame = next(e["data"] for e in events if e["stage"] == "wire.frame")
    out = []
    for i, e in enumerate(events):
        if e["stage"] in ("wire.header", "wire.ext_field", "wire.properties") and e.get("span"):
            name = e["field"] if e["stage"] == "wire.header" else f"extFields.{e['key']}"
            a, b = e["span"]
            out.append([i, e["stage"], name, frame[a:min(b, a + 48)].hex(" ").upper(), e.get("name", "")])
    return {"frame_size": len(frame), "fields": out}


def check_wire(scope, wire, snap=None):
    """The wire lane renders: its boxes, and each header member / extFields entry step shows its bytes."""
    player = scope.get_by_test_id("put-path-player").first
    player.wait_for()
    labels = player.locator("[data-lane='2'] [data-testid='stage-box']").all_text_contents()
    assert [t.rstrip("0123456789–") for t in labels] == ["frame", "header", "extFields", "body"]
    assert player.get_by_test_id("frame-span").count() > 10
    scrub = player.get_by_test_id("scrub")
    for i, stage, name, hexed, long_name in wire["fields"]:
        scrub.fill(str(i))
        wait_until(lambda: player_state(player)["index"] == i, what=f"scrub to {i}")
        assert player_state(player)["stage"] == stage
        field = player.get_by_test_id("frame-field")
        assert field.get_attribute("data-field") == name
        assert hexed in field.inner_text()
        assert player.locator("[data-testid='frame-span'].active").get_attribute("data-field") == name
        if name == "extFields.b":  # the topic, named with its long name
            assert long_name == "topic" and "(topic)" in player.get_by_test_id("step-text").inner_text()
            if snap:
                snap("send-player-topic", player)
    assert {"code", "extFields.b", "extFields.i"} <= {n for _, _, n, _, _ in wire["fields"]}
    scrub.fill("0")  # back to the first step, where check_player starts
    wait_until(lambda: player_state(player)["index"] == 0, what="scrub back to 0")


def test_to_html_all_views_on_one_page(page, standalone_pages, static_server, snap, page_errors,
                                       external_requests):
    out, expected = standalone_pages
    page.goto(f"{static_server(out)}/all.html")
    check_all(page, expected, snap)
    assert not external_requests, external_requests
    assert not page_errors, page_errors


#: the words (up to 24 characters) of each field value that the layout splits over two lines
_BROKEN_WORDS_JS = """els => els.flatMap(td => {
  const broken = [];
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (const m of n.data.matchAll(/\\S+/g)) {
      if (m[0].length > 24) continue;
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  return broken;
})"""


@pytest.mark.parametrize("width", [480, 640, 900, 1000, 1040, 1100, 1400])
def test_record_view_keeps_values_whole(width, page, standalone_pages, static_server, snap):
    """A narrow page wraps the field table's values between words, never inside a short one
    (``0xDAA320A`` / ``7`` on two lines reads as two values)."""
    out, _ = standalone_pages
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{static_server(out)}/record_view.html")
    values = page.locator(".rmq-rec-value, .rmq-rec-pv")
    wait_until(lambda: values.count() > 10, what="the record view's field values")
    broken = values.evaluate_all(_BROKEN_WORDS_JS)
    # ... and the table fits its panel: no value hidden past the right edge
    panel = page.locator(".rmq-rec-panel").first
    overflow = panel.evaluate("el => el.scrollWidth - el.clientWidth")
    if broken or overflow > 1:
        snap("values-broken")
    assert not broken, f"values split inside a word at {width} px: {broken}"
    assert overflow <= 1, f"the field table is {overflow} px wider than its panel at {width} px"


# ------------------------------------------------------------------------------ FrameView (to_html)

def _send_frame() -> bytes:
    """A SEND_MESSAGE_V2 request as the Java client sends it (one-letter header names, properties, body)."""
    from rmqstore.remoting import RemotingCommand, RequestCode, encode_frame

    ext = {"a": "PG_view", "b": "ViewTopic", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1795000000000",
           "h": "0", "i": "KEYS\x01k-1\x02TAGS\x01tagA\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"}
    return encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext, b"hello frame view", language="JAVA",
                                        opaque=7, version=399))


def test_frame_view_to_html_hover_highlights_a_field(page, static_server, tmp_path, page_errors,
                                                     external_requests):
    FrameView = need("FrameView")
    from rmqstore.remoting import frame_field_spans

    frame = _send_frame()
    widgets_module().to_html(FrameView.from_bytes(frame), tmp_path / "frame.html", title="frame")
    spans = {name: stop - start for name, start, stop, _ in frame_field_spans(frame, expand_header=True)}
    page.goto(f"{static_server(tmp_path)}/frame.html")
    view = page.locator("[data-testid='frame-view']").first
    view.wait_for()
    counts = wait_until(lambda: (c := record_highlight(view)) and sum(n for _, n in c.values()) == len(frame)
                        and c, what="one byte cell per frame byte")
    assert {f: n for f, (_, n) in counts.items() if f} == spans, "each span's bytes tagged with its field"
    assert counts[""][1] == len(frame) - sum(spans.values()), "only the JSON punctuation is in no field"
    assert not any(h for h, _ in counts.values()), "nothing highlighted before hovering"
    assert sorted(view.get_by_test_id("field").evaluate_all("els => els.map(e => e.dataset.field)")) == sorted(spans)
    assert "SEND_MESSAGE_V2" in view.get_by_test_id("record-kind").inner_text()

    def only(name):
        c = record_highlight(view)
        return c.get(name) == [spans[name], spans[name]] and all(h == 0 for f, (h, _) in c.items() if f != name)

    view.locator("[data-testid='field'][data-field='extFields.b']").hover()
    wait_until(lambda: only("extFields.b"), what="the topic entry's bytes highlighted after hovering its row")
    assert "topic = ViewTopic" in view.locator("[data-testid='field'][data-field='extFields.b']").inner_text()
    view.locator("[data-testid='byte'][data-field='body']").nth(3).hover()
    wait_until(lambda: only("body"), what="every body byte highlighted after hovering one of them")
    page.mouse.move(1, 1)
    wait_until(lambda: not any(h for h, _ in record_highlight(view).values()), what="no highlight after leaving")
    assert not external_requests, external_requests
    assert not page_errors, page_errors
