"""The documentation site in Chromium: built here, served from loopback, no kernel, no network.

``build_site`` builds every notebook of ``notebooks/`` into a temp folder -- the whole site,
as ``rmqstore site`` makes it -- from the notebooks the suite executes anyway (the session
cache of ``tests/conftest.py``, saved and exported with ``execute=False``, so no notebook
runs twice; ``tests/jupyter/test_site_build.py`` covers the executing build).  A static server on
127.0.0.1 serves it.  The index lists the pages; following its links and every page's
prev/next links walks the whole site; on each page the views render and respond -- the
player steps, scrubs and plays, hovering a record field highlights exactly its bytes -- and
what they show is checked against what the notebook itself printed when it ran (the record's
byte spans from the codec, the tracer's events with their positions, ``store.positions()``),
never against the views' own state.  No page may throw or try to reach another host.
"""

from __future__ import annotations

import re
import time

import pytest

from .test_views import (REPO, check_play_and_pause, check_record_hover, player_state, wait_until,
                         widgets_module)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    widgets_module()
    import nbformat
    from conftest import executed_notebook
    from rmqstore.widgets.site import build_site

    executed = tmp_path_factory.mktemp("executed")
    for name in NOTEBOOKS:
        nbformat.write(executed_notebook(f"{name}.ipynb"), executed / f"{name}.ipynb")
    out = tmp_path_factory.mktemp("site")
    started = time.monotonic()
    built = build_site(out, executed, execute=False, progress=False)
    print(f"build_site over {len(NOTEBOOKS)} executed notebooks: {time.monotonic() - started:.1f} s -> {out}")
    return built


@pytest.fixture
def served(site, static_server):
    return static_server(site.out)


def outputs_text(page) -> str:
    return "\n".join(page.locator(".jp-OutputArea-output").all_text_contents())


def open_page(page, url: str, heading: str):
    page.goto(url)
    page.locator("h1", has_text=heading).first.wait_for()


def clean(page_errors, external_requests):
    assert not external_requests, external_requests
    assert not page_errors, page_errors


# ------------------------------------------------------------------------------ index and links

def test_index_lists_every_page_and_links_walk_the_site(page, site, served, snap, page_errors,
                                                        external_requests):
    page.goto(f"{served}/index.html")
    entries = page.get_by_test_id("toc-entry")
    assert entries.evaluate_all("els => els.map(e => e.dataset.name)") == NOTEBOOKS
    titles = [p.title for p in site.pages]
    assert entries.locator("a").all_text_contents() == titles
    assert titles[0] == "1 · A tour of a RocketMQ store"
    summaries = page.get_by_test_id("toc-summary").all_text_contents()
    assert all(s.strip() for s in summaries), summaries
    assert "one log, the commitlog" in summaries[0]
    snap("index")

    # index -> first page, then next, next, ... to the last page, and prev back again
    entries.first.locator("a").click()
    page.wait_for_url(f"{served}/{NOTEBOOKS[0]}.html")
    for i, name in enumerate(NOTEBOOKS):
        assert page.url == f"{served}/{name}.html"
        assert page.locator("h1").first.text_content().strip().rstrip("¶").strip() == titles[i]
        assert page.title() == f"{titles[i]} — rmqstore notebooks"
        top = page.get_by_test_id("site-nav-top")
        assert top.get_by_test_id("nav-prev").count() == (1 if i else 0)
        assert top.get_by_test_id("nav-next").count() == (1 if i + 1 < len(NOTEBOOKS) else 0)
        if i + 1 < len(NOTEBOOKS):
            top.get_by_test_id("nav-next").click()
            page.wait_for_url(f"{served}/{NOTEBOOKS[i + 1]}.html")
    page.get_by_test_id("site-nav-bottom").get_by_test_id("nav-prev").click()
    page.wait_for_url(f"{served}/{NOTEBOOKS[-2]}.html")
    page.get_by_test_id("site-nav-top").get_by_test_id("nav-index").click()
    page.wait_for_url(f"{served}/index.html")
    entries.first.wait_for()
    clean(page_errors, external_requests)


def test_tour_page_shows_its_output_without_kernel(page, site, served, page_errors, external_requests):
    open_page(page, f"{served}/01_tour.html", site.pages[0].title)
    text = outputs_text(page)
    assert re.search(r"^\d+ messages, \d+ blank records; the walk ended", text, re.M), text[:500]
    assert re.search(r"^00000000000000000000  starts at offset +0  size 65,536 bytes$", text, re.M), text[:1000]
    chart = page.locator(".jp-OutputArea-output img[src^='data:image/png']").first
    chart.wait_for()
    assert chart.evaluate("img => img.complete && img.naturalWidth > 0"), "the matplotlib chart is shown"
    clean(page_errors, external_requests)


def test_every_widget_output_renders(page, site, served, page_errors, external_requests):
    """On every page each widget output area gets its view (the shim leaves none empty)."""
    rendered = 0
    for built in site.pages:
        open_page(page, f"{served}/{built.href}", built.title)
        outputs = page.locator(".rmq-output")
        wait_until(lambda: outputs.evaluate_all("els => els.every(e => e.children.length > 0)"),
                   what=f"every widget output of {built.href} rendered")
        shown = outputs.evaluate_all("els => els.map(e => e.textContent)")
        assert not [t for t in shown if "needs a running kernel" in t], (built.href, shown)
        rendered += len(shown)
    assert rendered >= 3, "notebooks 02, 03 and 04 each show a view"
    clean(page_errors, external_requests)


# ------------------------------------------------------------------------------ the views

def printed_spans(text: str) -> list[list]:
    """The record's byte spans as notebook 02 printed them (``name start..end value``)."""
    block = text.split("decode_record says", 1)[1].split("the spans end at byte", 1)[0]
    spans = [[m.group(1), int(m.group(2)), int(m.group(3))]
             for m in re.finditer(r"^(\w+)\s+(\d+)\.\.(\d+)\s", block, re.M)]
    assert len(spans) >= 17, block
    return spans


def test_record_view_hover_highlights_bytes(page, site, served, snap, page_errors, external_requests):
    open_page(page, f"{served}/02_record_layout.html", site.pages[1].title)
    spans = printed_spans(outputs_text(page))
    view = page.get_by_test_id("record-view").first
    view.wait_for()
    view.scroll_into_view_if_needed()
    check_record_hover(page, {"spans": spans}, snap)
    clean(page_errors, external_requests)


_MOVE = re.compile(r"^\s*(\d+)\s+(position\.wrote|append\.blank|commit|flush)\s+\S+\s+file\s+(\d+): "
                   r"wrote\s+\d+ ->\s*(\d+), committed\s+\d+ ->\s*(\d+), flushed\s+\d+ ->\s*(\d+)", re.M)
#: the position each moving stage owns (the other two it leaves alone)
_OWNS = {"position.wrote": "wrote", "append.blank": "wrote", "commit": "committed", "flush": "flushed"}


def printed_trace(text: str) -> tuple[int, list[tuple]]:
    """Notebook 03's printed trace: the number of events and, for every printed event that
    moved a position, ``(step index, stage, file, position name, value after)``."""
    steps = int(re.search(r"^(\d+) events; results:", text, re.M).group(1))
    moves = []
    for m in _MOVE.finditer(text):
        seq, stage, file = int(m.group(1)), m.group(2), int(m.group(3))
        after = dict(zip(("wrote", "committed", "flushed"), map(int, m.group(4, 5, 6))))
        moves.append((seq - 1, stage, file, _OWNS[stage], after[_OWNS[stage]]))  # seq counts from 1
    return steps, sorted(set(moves))


def test_put_path_player_steps_scrubs_and_plays(page, site, served, snap, page_errors, external_requests):
    open_page(page, f"{served}/03_put_path.html", site.pages[2].title)
    steps, moves = printed_trace(outputs_text(page))
    assert {m[3] for m in moves} >= {"wrote", "flushed"}, moves
    player = page.get_by_test_id("put-path-player").first
    player.wait_for()
    player.scroll_into_view_if_needed()
    assert player.get_by_test_id("scrub").get_attribute("max") == str(steps - 1)
    assert player_state(player)["index"] == 0

    for k in (1, 2):
        player.get_by_test_id("step-forward").click()
        wait_until(lambda: player_state(player)["index"] == k, what=f"step {k} after step-forward")
    player.get_by_test_id("step-back").click()
    wait_until(lambda: player_state(player)["index"] == 1, what="step 1 after step-back")

    scrub = player.get_by_test_id("scrub")
    for index, stage, file, key, value in moves:
        scrub.fill(str(index))
        state = wait_until(lambda: (s := player_state(player))["index"] == index and s, what=f"scrub to {index}")
        assert (state["stage"], int(state["file"]), state[key]) == (stage, file, value), (index, state)
    snap("player-scrubbed", player)

    check_play_and_pause(player)
    snap("player-played", player)
    clean(page_errors, external_requests)


def test_segment_view_shows_the_printed_positions(page, site, served, snap, page_errors, external_requests):
    open_page(page, f"{served}/04_mapped_files.html", site.pages[3].title)
    text = outputs_text(page)
    block = text.split("after put 5:", 1)[1].split("on disk:", 1)[0]
    expected = [[f, int(w)] for f, w in re.findall(r"^\s*(\d{20})\s+wrote\s+(\d+)", block, re.M)]
    assert len(expected) == 2, block
    view = page.get_by_test_id("segment-view").first
    view.wait_for()
    bars = view.get_by_test_id("segment")
    wait_until(lambda: bars.count() == len(expected), what=f"{len(expected)} segment bars")
    assert bars.evaluate_all("els => els.map(e => [e.dataset.file, +e.dataset.wrote])") == expected
    snap("segment-view", view)
    clean(page_errors, external_requests)
