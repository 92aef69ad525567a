"""The documentation site: every teaching notebook executed, exported with its working views.

``rmqstore site`` (and :func:`build_site`) executes each ``notebooks/*.ipynb`` in file-name
order, exports it with :func:`rmqstore.widgets.export_notebook_html` and writes an
``index.html`` listing the pages by title (the notebook's first heading) and one-line
summary (the first sentence of the paragraph under it), with previous/next links between
pages.  The result is plain files: open ``index.html`` from any static server (or the file
system) with no kernel and no network, and the views work -- the player plays, hovering a
record field highlights its bytes -- because each page embeds the notebook's saved widget
state and renders it with the views' own ESM through the offline shim (``_shim.js``).

Why nbconvert with an index page, not Jupyter Book 2
----------------------------------------------------
Jupyter Book 2 is a front end to mystmd, a Node program whose HTML build downloads its site
theme on first use (no network here).  Worse, a notebook's widget outputs do not come back
to life in its pages: without a kernel they show "a Jupyter kernel connection is required"
(jupyter-book/mystmd issue 449, still open), and MyST's ``{anywidget}`` directive renders a
widget from an ESM *URL* written in the markdown, not from a notebook's saved widget state.
nbconvert's ``lab`` template, with every remote script removed and our shim added
(``static_html._TEMPLATE``), does render them, offline; what it lacks is only a table of
contents and navigation, which this module adds.  Nothing new to install: nbconvert, nbclient and mistune (nbconvert's own markdown
renderer, used here for the summaries) are already dependencies.

The hard part is *no network*.  Exported pages keep hyperlinks (``<a href="https://...">``
in the notebooks' prose is a link, not something the page needs), but any resource the page
would fetch -- a ``src``/``href`` of another element, a CSS ``url()`` or ``@import``, an ES
module import -- from another host fails the build (:class:`SiteError`), so a CDN reference
can never slip into the site unnoticed.
"""

from __future__ import annotations

import html as _html
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rmqstore.common.errors import RmqStoreError
from rmqstore.common.progress import ProgressBar

from ._assets import HERE
from .static_html import NotebookExecutionError, export_notebook_html

__all__ = ["build_site", "Site", "SitePage", "SiteError", "find_notebooks", "notebook_title",
           "remote_resources", "default_notebooks_dir"]


class SiteError(RmqStoreError):
    """The site cannot be built: no notebooks, a notebook that raised, a page that needs the network."""


@dataclass(frozen=True)
class SitePage:
    """One page of the site: ``notebooks/<name>.ipynb`` -> ``<out>/<name>.html``."""

    source: Path
    html_path: Path
    title: str
    summary_html: str
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.source.stem

    @property
    def href(self) -> str:
        return self.html_path.name


@dataclass
class Site:
    """What :func:`build_site` wrote: ``out/index.html`` and one page per notebook, in order."""

    out: Path
    pages: list[SitePage] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / "index.html"


# -- notebooks ------------------------------------------------------------------------------

def default_notebooks_dir() -> Path:
    """``./notebooks`` when it exists, else the ``notebooks/`` of this source checkout."""
    here = Path("notebooks")
    return here if here.is_dir() else HERE.parent / "notebooks"


def find_notebooks(notebooks=None) -> list[Path]:
    """The notebooks to publish: every ``*.ipynb`` of a directory in name order, or the given
    files in the given order (a mix of files and directories is allowed)."""
    if notebooks is None:
        notebooks = [default_notebooks_dir()]
    elif isinstance(notebooks, (str, Path)):
        notebooks = [notebooks]
    found: list[Path] = []
    for item in map(Path, notebooks):
        if item.is_dir():
            found += sorted(p for p in item.glob("*.ipynb") if not p.name.startswith("."))
        elif item.suffix == ".ipynb" and item.is_file():
            found.append(item)
        else:
            raise SiteError(f"{item}: not a notebook (.ipynb) or a directory of notebooks")
    if not found:
        raise SiteError(f"no notebooks (*.ipynb) in {', '.join(map(str, notebooks))}")
    names = [p.stem for p in found]
    if "index" in names:
        raise SiteError("a notebook named index.ipynb would overwrite the site's index.html; rename it")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SiteError(f"two notebooks would write the same page: {', '.join(twice)}")
    return found


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)(?:\s+#+)?\s*$")


def notebook_title(nb, fallback: str) -> tuple[str, str]:
    """``(title, summary markdown)``: the first markdown heading as plain text and the first
    sentence of the paragraph that follows it (``fallback`` and "" when there is no heading)."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            m = _HEADING.match(line)
            if m:
                title = _html.unescape(re.sub(r"<[^>]+>", "", _inline_markdown(m.group(1))))
                return title, _first_sentence(lines[i + 1:])
    return fallback, ""


def _first_sentence(lines: list[str]) -> str:
    paragraph = []
    for line in lines:
        if not line.strip():
            if paragraph:
                break
            continue
        if _HEADING.match(line):
            break
        paragraph.append(line.strip())
    text = " ".join(paragraph)
    m = re.match(r"(.+?[.!?])(?=\s|$)", text)
    return m.group(1) if m else text


def _inline_markdown(text: str) -> str:
    """One line of markdown as inline HTML (``**bold**``, ``*em*``, ```code```)."""
    import mistune

    out = mistune.html(text).strip()
    return re.sub(r"^<p>(.*)</p>$", r"\1", out, flags=re.S)


# -- offline check ----------------------------------------------------------------------------

_REMOTE = r"""(?:https?:)?//"""
_REMOTE_RESOURCE = [
    re.compile(r"""<(?!a[\s>])[a-zA-Z][\w-]*\b[^>]*?\s(?:src|href|data|poster|srcset)\s*=\s*["']?""" + _REMOTE, re.I),
    re.compile(r"""url\(\s*["']?""" + _REMOTE, re.I),
    re.compile(r"""@import\s+(?:url\()?\s*["']""" + _REMOTE, re.I),
    re.compile(r"""(?<![@\w.])import\s*(?:[\w*{}\s,]+\s+from\s*)?\(?\s*["']""" + _REMOTE),
]


def remote_resources(page: str) -> list[str]:
    """What ``page`` would fetch from another host (elements, CSS ``url()``/``@import``, ES
    imports), each as a short excerpt; hyperlinks (``<a href>``) are not resources."""
    found = []
    for pattern in _REMOTE_RESOURCE:
        for m in pattern.finditer(page):
            found.append(page[m.start():m.end() + 60].split("\n")[0])
    return found


# -- pages ------------------------------------------------------------------------------------

_NAV_CSS = """<style>
.rmq-site-nav { display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap;
  font: 14px system-ui, -apple-system, "Segoe UI", sans-serif; padding: 8px 16px; margin: 0 0 8px;
  border-bottom: 1px solid #d0d7de; background: #f6f8fa; }
.rmq-site-nav.rmq-bottom { border-bottom: 0; border-top: 1px solid #d0d7de; margin: 24px 0 0; }
.rmq-site-nav a { color: #0969da; text-decoration: none; }
.rmq-site-nav a:hover { text-decoration: underline; }
.rmq-site-nav .rmq-spacer { flex: 1; }
</style>
"""


def _nav(site_title: str, prev: SitePage | None, nxt: SitePage | None, where: str) -> str:
    def link(page, rel, text):
        if page is None:
            return f'<span class="rmq-nav-{rel}"></span>'
        return f'<a data-testid="nav-{rel}" rel="{rel}" href="{_html.escape(page.href)}">{text}</a>'

    return (f'<nav class="rmq-site-nav rmq-{where}" data-testid="site-nav-{where}">'
            f'<a data-testid="nav-index" href="index.html">{_html.escape(site_title)}</a>'
            f'{link(prev, "prev", "&larr; " + _html.escape(prev.title) if prev else "")}'
            f'<span class="rmq-spacer"></span>'
            f'{link(nxt, "next", _html.escape(nxt.title) + " &rarr;" if nxt else "")}</nav>')


def _add_navigation(body: str, page: SitePage, prev, nxt, site_title: str) -> str:
    """The exported page with its own title, the nav style, and nav bars at top and bottom."""
    title = f"{page.title} — {site_title}"
    body = re.sub(r"<title>.*?</title>", lambda _: f"<title>{_html.escape(title)}</title>", body, count=1,
                  flags=re.S)
    body = body.replace("</head>", _NAV_CSS + "</head>", 1)
    body = re.sub(r"(<body\b[^>]*>)", lambda m: m.group(1) + "\n" + _nav(site_title, prev, nxt, "top"), body,
                  count=1)
    head, sep, tail = body.rpartition("</body>")
    if not sep:
        raise SiteError(f"{page.html_path}: the exported page has no </body>")
    return head + _nav(site_title, prev, nxt, "bottom") + "\n" + sep + tail


_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ max-width: 860px; margin: 32px auto; padding: 0 16px; color: #1f2328; background: #fff;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }}
h1 {{ font-size: 28px; margin: 0 0 4px; }}
p.rmq-lead {{ color: #57606a; margin: 0 0 24px; }}
ol.rmq-toc {{ padding-left: 0; list-style: none; }}
ol.rmq-toc li {{ padding: 12px 0; border-top: 1px solid #d0d7de; }}
ol.rmq-toc a {{ font-size: 18px; font-weight: 600; color: #0969da; text-decoration: none; }}
ol.rmq-toc a:hover {{ text-decoration: underline; }}
.rmq-summary {{ margin: 4px 0 0; color: #1f2328; }}
.rmq-file {{ color: #57606a; font-size: 13px; }}
code {{ font-size: 90%; background: #f6f8fa; padding: 1px 4px; border-radius: 4px; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p class="rmq-lead">The teaching notebooks, executed, with their views working in the page (no kernel, no
network): play the put path, hover a record's bytes.</p>
<ol class="rmq-toc" data-testid="toc">
{items}
</ol>
</body>
</html>
"""


def _index_html(site_title: str, pages: list[SitePage]) -> str:
    items = "\n".join(
        f'<li data-testid="toc-entry" data-name="{_html.escape(p.name)}">'
        f'<a href="{_html.escape(p.href)}">{_html.escape(p.title)}</a> '
        f'<span class="rmq-file">{_html.escape(p.source.name)}</span>'
        f'<p class="rmq-summary" data-testid="toc-summary">{p.summary_html}</p></li>'
        for p in pages)
    return _INDEX.format(title=_html.escape(site_title), items=items)


# -- the build --------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _export(source: Path, target: Path, execute: bool, timeout: int, on_cell=None) -> str:
    try:
        return export_notebook_html(source, target, execute=execute, timeout=timeout, cwd=source.parent,
                                    on_cell=on_cell)
    except NotebookExecutionError as exc:  # a cell raised: the message names the notebook and the cell
        raise SiteError(str(exc)) from exc
    except Exception as exc:  # a dead kernel, a timeout ...
        lines = [ln for ln in _ANSI.sub("", str(exc)).splitlines() if ln.strip()]
        tail = lines[-1:] or [type(exc).__name__]
        raise SiteError(f"{source}: executing the notebook failed: {type(exc).__name__}: {tail[0]}") from exc


def build_site(out="site", notebooks=None, *, execute: bool = True, timeout: int = 600,
               title: str = "rmqstore notebooks", progress: bool | None = None,
               log: Callable[[str], None] | None = None) -> Site:
    """Execute and export ``notebooks`` (default: ``notebooks/``) into ``out`` with an index.

    ``notebooks`` is a directory (every ``*.ipynb`` in name order), a notebook, or a list of
    either.  Each notebook runs in its own kernel with its own folder as the working
    directory (``timeout`` seconds per cell); ``execute=False`` exports the saved outputs as
    they are.  ``progress`` shows a rich bar on stderr (default: when stderr is a terminal), which
    names the notebook and the cell running (one can take minutes); ``log`` is given a line as each
    notebook starts and as it is written (for a log that is no terminal).
    Raises :class:`SiteError` naming the notebook when one fails, and when a page would
    fetch anything from the network.  Returns the :class:`Site` written.
    """
    import nbformat

    sources = find_notebooks(notebooks)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SiteError(f"{out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)

    pages = []
    for source in sources:
        heading, summary = notebook_title(nbformat.read(source, as_version=4), source.stem)
        pages.append(SitePage(source, out / f"{source.stem}.html", heading, _inline_markdown(summary)))

    site = Site(out)
    with ProgressBar(sys.stderr, "site", len(pages), unit="steps", enabled=progress, transient=False) as bar:
        for i, page in enumerate(pages):
            doing = f"{'executing' if execute else 'exporting'} {page.source.name}"
            bar.step(doing)
            if log is not None:
                log(f"{doing} ({i + 1} of {len(pages)})")
            started = time.monotonic()
            body = _export(page.source, page.html_path, execute, timeout,
                           lambda n, count, doing=doing: bar.step(f"{doing}: cell {n} of {count}"))
            prev = pages[i - 1] if i else None
            nxt = pages[i + 1] if i + 1 < len(pages) else None
            body = _add_navigation(body, page, prev, nxt, title)
            _check_offline(page.html_path, body)
            page.html_path.write_text(body, encoding="utf-8")
            site.pages.append(SitePage(page.source, page.html_path, page.title, page.summary_html,
                                       time.monotonic() - started))
            bar.step(f"wrote {page.href}", advance=1)
            if log is not None:
                log(f"wrote {page.html_path} ({site.pages[-1].seconds:.1f} s)")
        index = _index_html(title, site.pages)
        _check_offline(site.index, index)
        site.index.write_text(index, encoding="utf-8")
    return site


def _check_offline(path: Path, page: str) -> None:
    remote = remote_resources(page)
    if remote:
        raise SiteError(f"{path}: the page would fetch from the network: {'; '.join(remote[:3])}")
