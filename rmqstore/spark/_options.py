"""Reading the options every ``rmqstore.*`` Spark source shares.

A source is given its stores as ``.load(PATH)`` (Spark passes it as the ``path`` option)
or as ``.option("paths", "A,B")`` for several.  Every source reads them here, so they all
accept the same spellings and refuse a missing path with the same
:class:`~rmqstore.common.errors.StoreError`.
"""

from __future__ import annotations

from ..common.errors import StoreError

__all__ = ["source_paths"]


def source_paths(options, fmt: str) -> list[str]:
    """The store paths of ``.load(PATH)`` or ``.option("paths", "A,B")`` (``fmt`` names the source)."""
    raw = options.get("paths") or options.get("path")
    if not raw:
        raise StoreError(f"{fmt} needs a store path: .load(PATH) or .option('paths', 'A,B')")
    paths = [p for p in raw.split(",") if p]
    if not paths:
        raise StoreError(f"{fmt}: no store path in {raw!r}")
    return paths
