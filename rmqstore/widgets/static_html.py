"""Views as standalone HTML: no kernel, no CDN, the views' own code.

:func:`to_html` writes one page holding, inline, the widget state of the views (the Jupyter
widget-state JSON that ``ipywidgets.embed`` and nbclient produce: each anywidget model carries
its ``_esm`` and ``_css``; binary buffers are base64) and a small renderer (``_shim.js``)
that rebuilds each model with a shim of anywidget's model API and calls the view's real
``render``.  Nothing is fetched: the ESM is imported from a Blob URL.

:func:`export_notebook_html` executes a notebook with nbclient (``store_widget_state=True``),
converts it with nbconvert's ``lab`` HTML template minus every remote script (require.js,
the widget html-manager, MathJax, mermaid) and renders each widget output with the same
renderer from the notebook's saved widget state.
"""

from __future__ import annotations

import html as _html
import json
import os
from pathlib import Path

from typing import Callable

from ..common.errors import RmqStoreError
from ._assets import HERE

__all__ = ["to_html", "export_notebook_html", "execute_notebook", "NotebookExecutionError", "widget_state",
           "SHIM_JS", "STATE_MIME"]

#: ``on_cell(number, count)``: a code cell starts (see :func:`execute_notebook`)
CellHook = Callable[[int, int], None]

STATE_MIME = "application/vnd.jupyter.widget-state+json"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def _shim() -> str:
    return (HERE / "_shim.js").read_text(encoding="utf-8")


SHIM_JS = _shim()


def _script_json(obj) -> str:
    """JSON safe inside a <script> element (no '</', no '<!--')."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")


def _flatten(views) -> list:
    if isinstance(views, (list, tuple)):
        out = []
        for v in views:
            out += _flatten(v)
        return out
    return [views]


def _captured(state: dict) -> list:
    """The widgets shown in the ``Output`` widgets of ``state`` and not in it yet (an output holds a view of a widget
    by its id, which is no trait reference: ``dependency_state`` does not follow it)."""
    from ipywidgets.widgets.widget import _instances

    ids = {out.get("data", {}).get(VIEW_MIME, {}).get("model_id")
           for model in state.values() if model.get("model_name") == "OutputModel"
           for out in model.get("state", {}).get("outputs", [])}
    return [_instances[i] for i in sorted(i for i in ids if i and i not in state and i in _instances)]


def widget_state(views) -> dict:
    """The widget-state JSON (version 2.0) of ``views`` and every widget they reference or show in an Output."""
    from ipywidgets.embed import dependency_state

    state = dependency_state(_flatten(views), drop_defaults=False)
    more = _captured(state)
    while more:
        state.update(dependency_state(more, drop_defaults=False))
        more = _captured(state)
    return {"version_major": 2, "version_minor": 0, "state": state}


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ margin: 16px; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; background: #fff; }}
h1.rmq-page-title {{ font-size: 18px; font-weight: 600; margin: 0 0 12px; }}
.rmq-output {{ margin: 0 0 24px; }}
</style>
</head>
<body>
{heading}
{divs}
<script type="{mime}">{state}</script>
<script type="module">
{shim}
</script>
</body>
</html>
"""


def to_html(view_or_list, path=None, title: str = "rmqstore") -> "str | Path":
    """A standalone page rendering ``view_or_list`` (a view, an ipywidgets box, or a list).

    The page embeds every model's state (ESM and CSS included) and renders it with the
    views' own JavaScript and no kernel: the player plays, hovering highlights.  With
    ``path``, writes the page there and returns the path (a prompt echoes a short line,
    not a 40 KB page); without, returns the HTML.
    """
    views = _flatten(view_or_list)
    state = widget_state(views)
    divs = "\n".join(f'<div class="rmq-output" data-rmq-model-id="{_html.escape(v.model_id)}"></div>'
                     for v in views)
    heading = f'<h1 class="rmq-page-title">{_html.escape(title)}</h1>' if title else ""
    page = _PAGE.format(title=_html.escape(title or "rmqstore"), heading=heading, divs=divs, mime=STATE_MIME,
                        state=_script_json(state), shim=SHIM_JS)
    if path is not None:
        path = Path(path)
        path.write_text(page, encoding="utf-8")
        return path
    return page


# -- notebooks -----------------------------------------------------------------------------

_TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block data_widget_view scoped -%}
{%- set spec = output.data['application/vnd.jupyter.widget-view+json'] -%}
<div class="jupyter-widgets jp-OutputArea-output rmq-output {{ extra_class }}" data-rmq-model-id="{{ spec.model_id | escape_html }}"></div>
{%- endblock data_widget_view -%}
{% block footer_js %}
<script type="module">
{{ resources.rmq_shim }}
</script>
{% endblock footer_js %}
"""


def _exporter():
    import jinja2
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab",
                                   extra_loaders=[jinja2.DictLoader({"rmq_offline.html.j2": _TEMPLATE})])
    exporter.template_file = "rmq_offline.html.j2"
    return exporter


def export_notebook_html(ipynb_path, html_path, execute: bool = True, *, timeout: int = 600,
                         kernel_name: str = "python3", cwd=None, on_cell: CellHook | None = None) -> str:
    """Execute ``ipynb_path`` (unless ``execute=False``) and write it as offline HTML to ``html_path``.

    Widget outputs are rendered from the notebook's saved widget state (anywidget models
    carry their ``_esm``/``_css``) by the same renderer as :func:`to_html`; HBox/VBox
    children are laid out in a flex box.  No remote script is referenced.  ``on_cell``: as for
    :func:`execute_notebook`.  Returns the HTML.
    """
    import nbformat

    ipynb_path = Path(ipynb_path)
    nb = nbformat.read(ipynb_path, as_version=4)
    if execute:
        execute_notebook(nb, ipynb_path, cwd=cwd, timeout=timeout, kernel_name=kernel_name, on_cell=on_cell)
    exporter = _exporter()
    body, _ = exporter.from_notebook_node(nb, resources={"rmq_shim": SHIM_JS,
                                                         "metadata": {"name": ipynb_path.stem}})
    Path(html_path).write_text(body, encoding="utf-8")
    return body


class NotebookExecutionError(RmqStoreError):
    """A notebook's cell raised while it was executed; the message names the notebook and the cell."""


def execute_notebook(nb, ipynb_path, *, cwd=None, timeout: int = 600, kernel_name: str = "python3",
                     env: dict | None = None, on_cell: CellHook | None = None) -> None:
    """Run every cell of ``nb`` (read from ``ipynb_path``) in a fresh kernel, keeping widget state.

    The kernel talks to us over IPC sockets in a private temp folder, not TCP: both ends are
    on this machine, and a TCP kernel prints a warning about its unencrypted port at every
    start (one per notebook in a site build).  A cell that raises becomes a
    :class:`NotebookExecutionError` that names the notebook, the cell's number and first
    line, and the error -- a bare ``assert`` has no message of its own.  ``env``: the
    kernel's environment (default: this process's).  ``on_cell(number, count)`` is called as
    each code cell starts: its number among the ``count`` code cells, from 1 (a notebook can
    run for minutes: this is its progress).
    """
    import tempfile

    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    with tempfile.TemporaryDirectory(prefix="rmq-kernel-") as sockets:
        km = KernelManager(kernel_name=kernel_name, transport="ipc", ip=os.path.join(sockets, "kernel"))
        client = NotebookClient(nb, km=km, timeout=timeout, kernel_name=kernel_name, store_widget_state=True,
                                resources={"metadata": {"path": str(cwd or Path(ipynb_path).parent)}},
                                on_cell_start=None if on_cell is None else _cell_counter(nb, on_cell))
        try:
            client.execute(**({} if env is None else {"env": env}))
        except CellExecutionError as exc:
            raise NotebookExecutionError(_failed_cell(nb, ipynb_path, exc)) from exc
        finally:  # a kernel manager we made is ours to stop (nbclient stops only its own)
            if km.has_kernel:
                km.shutdown_kernel(now=False)


def _cell_counter(nb, on_cell: CellHook):
    """nbclient's ``on_cell_start`` hook (every cell, by index) as ``on_cell(number, count)`` over code cells."""
    numbers = {i: n for n, i in enumerate((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), 1)}

    def hook(cell, cell_index: int) -> None:
        if cell_index in numbers:
            on_cell(numbers[cell_index], len(numbers))
    return hook


def _failed_cell(nb, ipynb_path, exc) -> str:
    """What failed: the notebook, the first cell with an error output (its number and first line), the error."""
    for number, cell in enumerate(nb.cells, 1):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                lines = [ln for ln in cell.source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
                first = lines[0].strip() if lines else ""
                if len(lines) > 1:
                    first += " ..."
                error = f"{out.get('ename', 'Error')}: {out.get('evalue', '')}".rstrip(": ")
                return f"{ipynb_path}: executing the notebook failed: cell {number} (`{first}`) raised {error}"
    return f"{ipynb_path}: executing the notebook failed: {type(exc).__name__}"


def _main(argv=None) -> int:  # pragma: no cover - a convenience
    import argparse

    p = argparse.ArgumentParser(description="Execute a notebook and write offline HTML (widgets included).")
    p.add_argument("notebook")
    p.add_argument("html")
    p.add_argument("--no-execute", action="store_true")
    a = p.parse_args(argv)
    export_notebook_html(a.notebook, a.html, execute=not a.no_execute)
    print(os.path.abspath(a.html))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
