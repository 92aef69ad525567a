"""``rmqstore site`` / ``build_site`` without a browser: pages, index, order, links, offline.

The browser tier (tests/browser/test_site.py) opens a built site in Chromium; here the files
themselves are checked: one page per notebook in order, the index's titles and summaries,
prev/next links, the notebooks really executed, failures named, nothing fetched remotely.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")

from conftest import NOTEBOOKS_DIR, run_cli  # noqa: E402
from rmqstore.widgets.site import SiteError, build_site, find_notebooks, notebook_title, remote_resources  # noqa: E402


def write_notebook(folder: Path, name: str, *cells) -> Path:
    """A notebook of ``("md", text)`` / ``("code", text)`` cells."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
                for kind, src in cells]
    path = folder / name
    nbformat.write(nb, path)
    return path


def links(page: str, rel: str) -> set[str]:
    return set(re.findall(rf'<a data-testid="nav-{rel}" rel="{rel}" href="([^"]+)"', page))


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """Three small notebooks (written out of name order), executed into a site."""
    src = tmp_path_factory.mktemp("notebooks")
    write_notebook(src, "b_second.ipynb", ("md", "Intro text before any heading.\n\n## Second *page* with `x < y`\n\n"
                                                  "Here the summary has `code.with.dots` in it. Not this."),
                   ("code", "print('second computed', sum(range(10)))"))
    write_notebook(src, "a_first.ipynb", ("md", "# First page\n\nA **bold** claim: it works! Then more."),
                   ("code", "import os\nprint('first computed', 6 * 7, os.path.basename(os.getcwd()))"))
    write_notebook(src, "c_third.ipynb", ("code", "print('third computed', 2 ** 10)"))
    out = tmp_path_factory.mktemp("site") / "out"
    site = build_site(out, src, progress=False)
    return src, out, site


def test_one_page_per_notebook_in_name_order(small_site):
    src, out, site = small_site
    assert [p.name for p in site.pages] == ["a_first", "b_second", "c_third"]
    assert sorted(p.name for p in out.iterdir()) == ["a_first.html", "b_second.html", "c_third.html", "index.html"]
    assert [p.title for p in site.pages] == ["First page", "Second page with x < y", "c_third"]


def test_pages_hold_the_executed_outputs(small_site):
    src, out, _ = small_site
    first = (out / "a_first.html").read_text(encoding="utf-8")
    # computed only by running the cell, in the notebook's own folder
    assert f"first computed 42 {src.name}" in first
    assert "second computed 45" in (out / "b_second.html").read_text(encoding="utf-8")
    assert "third computed 1024" in (out / "c_third.html").read_text(encoding="utf-8")
    assert "<title>First page — rmqstore notebooks</title>" in first


def test_index_lists_titles_and_one_sentence_summaries(small_site):
    _, out, _ = small_site
    index = (out / "index.html").read_text(encoding="utf-8")
    entries = re.findall(r'<li data-testid="toc-entry" data-name="([^"]+)"><a href="([^"]+)">(.*?)</a>.*?'
                         r'<p class="rmq-summary" data-testid="toc-summary">(.*?)</p></li>', index)
    assert entries == [
        ("a_first", "a_first.html", "First page", "A <strong>bold</strong> claim: it works!"),
        ("b_second", "b_second.html", "Second page with x &lt; y",
         "Here the summary has <code>code.with.dots</code> in it."),
        ("c_third", "c_third.html", "c_third", ""),
    ]


def test_prev_next_links_chain_the_pages(small_site):
    _, out, _ = small_site
    pages = {p.stem: p.read_text(encoding="utf-8") for p in out.glob("*.html") if p.stem != "index"}
    assert (links(pages["a_first"], "prev"), links(pages["a_first"], "next")) == (set(), {"b_second.html"})
    assert (links(pages["b_second"], "prev"), links(pages["b_second"], "next")) == ({"a_first.html"},
                                                                                    {"c_third.html"})
    assert (links(pages["c_third"], "prev"), links(pages["c_third"], "next")) == ({"b_second.html"}, set())
    for page in pages.values():  # a nav bar at the top and the bottom, each back to the index
        assert page.count('data-testid="nav-index" href="index.html"') == 2


def test_site_needs_no_network(small_site):
    _, out, _ = small_site
    for path in out.glob("*.html"):
        page = path.read_text(encoding="utf-8")
        assert remote_resources(page) == [], path
        assert not re.search(r"""<script[^>]+src\s*=\s*["'](?:https?:)?//""", page), path


def test_remote_resources_finds_fetches_but_not_links():
    page = """<a href="https://rocketmq.apache.org/docs">docs</a>
    <script src="https://cdn.example.org/require.js"></script>
    <link rel="stylesheet" href="//fonts.example.org/css">
    <img alt="x" src='http://example.org/a.png'>
    <style>@import "https://example.org/b.css"; .x { background: url(https://example.org/c.png) }</style>
    <script type="module">import { h } from "https://esm.sh/preact"; await import("https://esm.sh/d");</script>
    <img src="data:image/png;base64,AAAA"> <script src="local.js"></script>"""
    found = remote_resources(page)
    hosts = sorted({re.search(r"//([a-z.]+)", f).group(1) for f in found})
    assert hosts == ["cdn.example.org", "esm.sh", "example.org", "fonts.example.org"]
    assert len(found) == 7, found
    assert not any("rocketmq.apache.org" in f for f in found)


def test_a_page_that_fetches_fails_the_build(tmp_path):
    src = tmp_path / "nb"
    src.mkdir()
    write_notebook(src, "01_ok.ipynb", ("md", "# Fine\n\nSee [RocketMQ](https://rocketmq.apache.org)."))
    build_site(tmp_path / "ok", src, execute=False, progress=False)  # a hyperlink is fine
    write_notebook(src, "02_cdn.ipynb", ("md", '# CDN\n\n<img src="https://example.org/logo.png">'))
    with pytest.raises(SiteError, match=r"02_cdn\.html: the page would fetch from the network: .*example\.org"):
        build_site(tmp_path / "bad", src, execute=False, progress=False)


def test_a_failing_notebook_is_named(tmp_path):
    path = write_notebook(tmp_path, "broken.ipynb", ("md", "# Broken"),
                          ("code", "raise ValueError('the cell raised on purpose')"))
    with pytest.raises(SiteError, match=r"broken\.ipynb: executing the notebook failed: .*"
                                        r"ValueError: the cell raised on purpose"):
        build_site(tmp_path / "out", [path], progress=False)


def test_find_notebooks_order_and_errors(tmp_path):
    a = write_notebook(tmp_path, "a.ipynb", ("md", "# A"))
    b = write_notebook(tmp_path, "b.ipynb", ("md", "# B"))
    assert find_notebooks(tmp_path) == [a, b]
    assert find_notebooks([b, a]) == [b, a]  # given files keep the given order
    with pytest.raises(SiteError, match="not a notebook"):
        find_notebooks([tmp_path / "missing.ipynb"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SiteError, match="no notebooks"):
        find_notebooks(tmp_path / "empty")
    with pytest.raises(SiteError, match="same page: a"):
        find_notebooks([a, a])
    with pytest.raises(SiteError, match="index.ipynb would overwrite the site's index.html"):
        find_notebooks([a, write_notebook(tmp_path / "empty", "index.ipynb", ("md", "# I"))])
    # a closing run of '#' is not part of the heading; a '#' inside a word is
    title, _ = notebook_title(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## C# and F# ##")]), "x")
    assert title == "C# and F#"


def test_the_real_notebooks_titles_and_cli(tmp_path):
    """``rmqstore site --no-execute`` over the first two teaching notebooks (their saved state)."""
    wanted = [NOTEBOOKS_DIR / "01_tour.ipynb", NOTEBOOKS_DIR / "02_record_layout.ipynb"]
    code, out, err = run_cli(["site", "--out", tmp_path / "site", "--notebooks", *wanted, "--no-execute"])
    assert code == 0, err
    assert out.splitlines()[-1] == str(tmp_path / "site" / "index.html")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert '<a href="01_tour.html">1 · A tour of a RocketMQ store</a>' in index
    assert '<a href="02_record_layout.html">2 · The record layout, byte by byte</a>' in index
    assert "<strong>one log</strong>, the <em>commitlog</em>" in index
    assert links((tmp_path / "site" / "01_tour.html").read_text(encoding="utf-8"), "next") == {"02_record_layout.html"}

    code, out, err = run_cli(["site", "--out", tmp_path / "x", "--notebooks", tmp_path / "nothing-here"])
    assert code == 2 and "nothing-here: not a notebook (.ipynb) or a directory of notebooks" in err


def test_a_bare_assert_names_its_cell(tmp_path):
    """``assert x`` has no message: the error still says which cell, with its first line."""
    path = write_notebook(tmp_path, "asserts.ipynb", ("md", "# Asserts"), ("code", "x = 1"),
                          ("code", "# check the answer\nassert x == 2"))
    with pytest.raises(SiteError) as info:
        build_site(tmp_path / "out", [path], progress=False)
    message = str(info.value)
    assert "asserts.ipynb" in message and "cell 3" in message and "assert x == 2" in message, message
    assert "AssertionError" in message and "AssertionError: AssertionError" not in message, message


def test_the_build_prints_no_kernel_warnings(tmp_path):
    """Each notebook's kernel starts without its transport warning (one per notebook used to flood the log)."""
    import subprocess
    import sys

    write_notebook(tmp_path, "quiet.ipynb", ("md", "# Quiet"), ("code", "print('done', 1 + 1)"))
    proc = subprocess.run([sys.executable, "-m", "rmqstore.cli", "site", "--out", str(tmp_path / "out"),
                           "--notebooks", str(tmp_path / "quiet.ipynb")], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "done 2" in (tmp_path / "out" / "quiet.html").read_text(encoding="utf-8")
    assert "WARNING" not in proc.stderr and "without encryption" not in proc.stderr, proc.stderr
    # stderr is no terminal here (no bar): the build says what it runs as it goes, a line a notebook
    assert "rmqstore site: executing quiet.ipynb (1 of 1)\n" in proc.stderr, proc.stderr
    assert f"rmqstore site: wrote {tmp_path / 'out' / 'quiet.html'} (" in proc.stderr, proc.stderr
    assert not list(tmp_path.glob("kernel-ipc*")), "the kernel's sockets are left beside the notebook"


def test_the_bar_names_the_cell_running(tmp_path, monkeypatch):
    """A notebook can run for minutes: the bar says which of its code cells runs, not only which notebook."""
    import rmqstore.widgets.site as site_module

    said: list[str] = []

    class Recorder(site_module.ProgressBar):
        def step(self, description: str, advance: int = 0) -> None:
            said.append(description)

    monkeypatch.setattr(site_module, "ProgressBar", Recorder)
    path = write_notebook(tmp_path, "slow.ipynb", ("md", "# Slow"), ("code", "x = 1"), ("md", "between"),
                          ("code", "print(x + 1)"))
    build_site(tmp_path / "out", [path], progress=False)
    assert said == ["executing slow.ipynb", "executing slow.ipynb: cell 1 of 2", "executing slow.ipynb: cell 2 of 2",
                    "wrote slow.html"], said
