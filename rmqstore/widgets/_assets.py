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
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

__all__ = ["esm", "css", "HERE"]

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


@lru_cache(maxsize=None)
def esm(name: str) -> str:
    """The ES module ``name`` (a file beside this one) with its sibling imports inlined."""
    return f"// rmqstore.widgets: {name}\n" + _inline(name, ())


@lru_cache(maxsize=None)
def css(name: str) -> str:
    """The style sheet ``name`` with its ``/* @import "./x.css"; */`` dependencies inlined once."""
    seen: list[str] = []

    def load(n: str) -> str:
        if n in seen:
            return ""
        seen.append(n)
        text = (HERE / n).read_text(encoding="utf-8")
        return _CSS_IMPORT.sub(lambda m: load(m.group(1)), text)

    return load(name)
