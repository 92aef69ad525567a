"""The browser tier's own machinery, proven with a tiny anywidget defined here (a counter).

If these fail, the harness is broken (Chromium, Playwright, JupyterLab, anywidget's lab
extension); if only test_views.py fails, the views are.
"""

from __future__ import annotations

import textwrap

import pytest

from .browser_helpers import open_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

COUNTER_CELL = textwrap.dedent('''\
    import anywidget, ipywidgets, traitlets

    class Counter(anywidget.AnyWidget):
        _esm = """
        function render({ model, el }) {
          const b = document.createElement("button");
          b.dataset.testid = "counter";
          const show = () => { b.textContent = `count is ${model.get("value")}`; };
          b.addEventListener("click", () => { model.set("value", model.get("value") + 1); model.save_changes(); });
          model.on("change:value", show);
          show();
          el.appendChild(b);
        }
        export default { render };
        """
        value = traitlets.Int(0).tag(sync=True)

    counter = Counter()
    echo = ipywidgets.Label("python saw 0")
    counter.observe(lambda change: setattr(echo, "value", f"python saw {change['new']}"), "value")
    display(counter, echo)
    ''')


def write_notebook(path, sources):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nbformat.write(nb, str(path))


def test_static_server_page_and_offline_guard(page, static_server, tmp_path, external_requests, page_errors):
    (tmp_path / "app.js").write_text(textwrap.dedent("""\
        export function mount(el) {
          const b = document.createElement("button");
          b.dataset.testid = "counter"; b.textContent = "count is 0";
          let n = 0;
          b.addEventListener("click", () => { b.textContent = `count is ${++n}`; });
          el.appendChild(b);
        }
        """))
    (tmp_path / "index.html").write_text(textwrap.dedent("""\
        <!doctype html><meta charset="utf-8"><title>harness</title>
        <div id="root"></div>
        <img src="https://example.invalid/pixel.png" alt="">
        <script type="module">import { mount } from "./app.js"; mount(document.getElementById("root"));</script>
        """))
    base = static_server(tmp_path)
    page.goto(f"{base}/index.html")
    button = page.get_by_test_id("counter")
    for _ in range(3):
        button.click()
    assert button.text_content() == "count is 3"
    assert any("example.invalid" in url for url in external_requests), external_requests
    assert not page_errors


def test_anywidget_counter_in_jupyterlab(page, jupyterlab, snap, page_errors):
    write_notebook(jupyterlab.root_dir / "harness_counter.ipynb",
                   [COUNTER_CELL, "print('HARNESS' + '-DONE')"])
    nb = open_notebook(page, jupyterlab, "harness_counter.ipynb")
    nb.run_all_cells(done_text="HARNESS-DONE")
    button = nb.wait_for_view("counter")
    assert button.text_content() == "count is 0"
    for _ in range(3):
        button.click()
    nb.panel.get_by_text("count is 3").wait_for()
    # the kernel saw every click: its observer updated a second widget
    nb.panel.get_by_text("python saw 3").wait_for()
    snap("after-clicks")
    assert not page_errors
