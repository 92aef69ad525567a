"""The views' front-end files: ESM modules and style sheets beside the Python classes.

Each view has ``<view>.js`` and ``<view>.css`` next to ``<view>.py``.  A module may import
named exports of a sibling (``import { h, fmt } from "./_util.js";``) so shared code lives
once -- but an anywidget ESM is loaded from a single string (a Blob URL in the browser), and
a Blob module cannot resolve relative imports.  :func:`esm` therefore inlines each sibling
import as a scoped block::

    const { h, fmt } = (() => { <_util.js without its export keywords>; return { h, fmt }; })();

That is the whole "bundler": it accepts only the subset of module syntax the view files use
(``export function``/``export const``/``export class`` at the start of a line, one
``export default`` object, ``import {...} from "./x.js"`` lines); anything else is an error
at import time, not a surprise in the browser.

Style sheets name their dependencies with ``/* @import "./_util.css"; */`` comments (not
real ``@import``, which would be a request); :func:`css` inlines them once each.

Live reload in a development checkout.  anywidget reloads a view live when its ``_esm`` is a
``pathlib.Path`` -- but it then sends the file's text, as it would a string, so the browser
still loads it from a Blob URL and ``./_util.js`` still cannot be resolved: a path works only
for a module without sibling imports.  So the inliner stays, and development mode re-runs it:
with ``ANYWIDGET_HMR=1`` and the package in a checkout (an editable install; not under
site-packages), :func:`esm` and :func:`css` return an anywidget ``VirtualFileContents``
holding the inlined text, and a daemon thread re-inlines it when any file it was built from
changes (the folder's .js and .css mtimes, polled twice a second; no watchfiles needed).  anywidget pushes the new text
to every live view.  Otherwise they return the plain string, built once.  A static export
(:mod:`rmqstore.widgets.static_html`) takes a view's synced ``_esm`` -- always the inlined
text -- so a page written from a checkout and one from a wheel are the same.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

__all__ = ["esm", "css", "HERE", "live_reload"]

HERE = Path(__file__).resolve().parent

_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([A-Za-z0-9_]+\.js)";?\s*$', re.M)
_EXPORT_DECL = re.compile(r"^export\s+(?=(?:async\s+)?function\b|const\b|let\b|class\b)", re.M)
_EXPORT_DEFAULT = re.compile(r"^export\s+default\s+", re.M)
_OTHER_IMPORT = re.compile(r"^\s*import\s+[^(]", re.M)
_CSS_IMPORT = re.compile(r'/\*\s*@import\s+"\./([A-Za-z0-9_]+\.css)";?\s*\*/')


def _names(spec: str) -> list[str]:
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if " as " in part:
            raise ValueError(f"'import {{ x as y }}' is not supported by the inliner: {part!r}")
        out.append(part)
    return out


def _inline(name: str, stack: tuple[str, ...]) -> str:
    if name in stack:
        raise ValueError(f"import cycle: {' -> '.join(stack + (name,))}")
    src = (HERE / name).read_text(encoding="utf-8")

    def replace(m: re.Match) -> str:
        names = _names(m.group(1))
        dep = _inline(m.group(2), stack + (name,))
        dep = _EXPORT_DECL.sub("", dep)
        dep = _EXPORT_DEFAULT.sub("const __default__ = ", dep)
        return (f"const {{ {', '.join(names)} }} = (() => {{\n{dep}\n"
                f"return {{ {', '.join(names)} }};\n}})(); // inlined ./{m.group(2)}")

    out = _IMPORT.sub(replace, src)
    leftover = _OTHER_IMPORT.search(_IMPORT.sub("", src))
    if leftover:
        raise ValueError(f"{name}: only 'import {{...}} from \"./x.js\"' lines can be inlined: "
                         f"{src[leftover.start():leftover.start() + 60]!r}")
    return out


def live_reload() -> bool:
    """Whether views reload their front-end files live: ``ANYWIDGET_HMR=1`` and a checkout."""
    installed = {"site-packages", "dist-packages"} & set(HERE.parts)
    return os.environ.get("ANYWIDGET_HMR") == "1" and not installed


def _watched(build, name: str):
    """A ``VirtualFileContents`` of ``build(name)``, rebuilt whenever one of its sources changes."""
    try:  # anywidget's own live-contents type (what its %%vfile magic uses); not exported by name
        from anywidget._file_contents import VirtualFileContents
    except ImportError:  # another anywidget: no live reload, the text as built now
        return build(name)

    contents = VirtualFileContents(build(name))

    def stamps() -> list[tuple[str, float, int]]:  # every front-end file: a module may start importing any
        return [(p.name, p.stat().st_mtime, p.stat().st_size) for p in sorted([*HERE.glob("*.js"), *HERE.glob("*.css")])]

    def poll() -> None:
        seen = stamps()
        while True:
            time.sleep(0.5)
            now = stamps()
            if now != seen:
                seen = now
                try:
                    contents.contents = build(name)
                except (OSError, ValueError):  # a half-saved file: keep the last good text
                    pass

    threading.Thread(target=poll, name=f"rmqstore-assets-{name}", daemon=True).start()
    return contents


def esm(name: str):
    """The ES module ``name`` (a file beside this one) with its sibling imports inlined: a string,
    or in development (:func:`live_reload`) anywidget contents that follow the files."""
    return _watched(_esm_text, name) if live_reload() else _esm_text(name)


def css(name: str):
    """The style sheet ``name`` with its ``/* @import "./x.css"; */`` dependencies inlined once:
    a string, or in development (:func:`live_reload`) anywidget contents that follow the files."""
    return _watched(_css_text, name) if live_reload() else _css_text(name)


def _esm_text(name: str) -> str:
    return f"// rmqstore.widgets: {name}\n" + _inline(name, ())


def _css_text(name: str) -> str:
    seen: list[str] = []

    def load(n: str) -> str:
        if n in seen:
            return ""
        seen.append(n)
        text = (HERE / n).read_text(encoding="utf-8")
        return _CSS_IMPORT.sub(lambda m: load(m.group(1)), text)

    return load(name)
