"""Which path runs: the compiled fast path, or the pure-Python reference.

The hard idea
-------------
rmqstore has two implementations of its hot loops and one behaviour.  The pure-Python
engine is the reference and the lesson -- the notebooks, the put-path trace and the
widgets read it -- and it is always there.  Beside it, optional C extension modules built
by the package's own build (``setup.py``, with the machine's C compiler; nothing is
fetched) do the same work with fewer Python calls and, where the work touches no Python
object, without the GIL:

``rmqstore._native._cwalk``
    the one segment walk with its body CRC (:mod:`rmqstore.format.walk`), and the CRC itself;
``rmqstore._native._cput``
    a record's encoding and its append under the put lock (:mod:`rmqstore.engine.commit_log`);
``rmqstore._native._cdispatch``
    the dispatch of a run of records into consume-queue units and index entries
    (:mod:`rmqstore.engine.dispatch`);
``rmqstore._native._cdecode``
    the full decode of a segment's records into columns (the dump scan, the Spark sources);
``rmqstore._native._cwait``
    the group commit's hand-off to the SYNC_FLUSH writers waiting for it, one wake-up for
    all of them without the GIL (:mod:`rmqstore.engine.flush`);
``rmqstore._native._cframe``
    the remoting frame and header codec: a request's JSON or binary header in, an answer's frame
    out (:mod:`rmqstore.remoting.frame`), handing whatever it does not handle exactly to the pure codec.

Like markupsafe's or PyYAML's speedups, each is optional: where it did not build (no
compiler, another platform) the pure path runs and nothing else changes.  Equality is
proven by tests, not assumed: the same inputs through both paths give the same bytes on
disk and the same results (``tests/unit/test_native_*.py``).

The switch
----------
``RMQSTORE_PURE=1`` in the environment forces the pure path for the whole process (read
once, at import).  A store can also ask for it alone: ``StoreConfig(native=False)``.  A
caller asks :func:`module` for an extension and gets ``None`` when the pure path must run;
that is the one place the decision is made.  :func:`describe` says which path is active
(``rmqstore --version`` prints it).
"""

from __future__ import annotations

import importlib
import os

__all__ = ["PURE_ENV", "MODULES", "forced_pure", "module", "compiled", "status", "describe", "active"]

#: the environment variable that forces the pure-Python path for the whole process
PURE_ENV = "RMQSTORE_PURE"

#: the compiled modules and what each speeds up
MODULES = {
    "_cwalk": "segment walk + CRC",
    "_cput": "record encode + append",
    "_cdispatch": "dispatch to consume queues + index",
    "_cdecode": "full record decode to columns",
    "_cwait": "group commit hand-off to waiting writers",
    "_cframe": "remoting frame + header codec",
}

_FORCED = os.environ.get(PURE_ENV, "").strip().lower() not in ("", "0", "false", "no")
_loaded: dict[str, object] = {}
_missing: dict[str, str] = {}


def forced_pure() -> bool:
    """True when ``RMQSTORE_PURE`` asks for the pure path (read once, at import)."""
    return _FORCED


def _import(name: str):
    if name in _loaded:
        return _loaded[name]
    if name in _missing:
        return None
    try:
        mod = importlib.import_module(f"rmqstore._native.{name}")
    except ImportError as exc:  # not built here: the pure path runs
        _missing[name] = str(exc)
        return None
    _loaded[name] = mod
    return mod


def module(name: str, native: bool | None = True):
    """The compiled module ``name`` (one of :data:`MODULES`), or None when the pure path must run.

    ``native`` is the caller's own switch (a store's ``StoreConfig.native``); False, or
    ``RMQSTORE_PURE`` set, gives None without importing anything.
    """
    if name not in MODULES:
        raise KeyError(f"no compiled module {name!r}; known: {', '.join(MODULES)}")
    if _FORCED or native is False:
        return None
    return _import(name)


def compiled(name: str):
    """The compiled module ``name`` whatever the switches say, or None where it is not built.

    For what must see both paths at once: the equality tests, and the notebook that runs
    the two side by side.  Everything else asks :func:`module`.
    """
    if name not in MODULES:
        raise KeyError(f"no compiled module {name!r}; known: {', '.join(MODULES)}")
    return _import(name)


def status() -> dict[str, str]:
    """Each compiled module's state: ``"compiled"``, ``"not built: <why>"`` or ``"off (RMQSTORE_PURE)"``."""
    out = {}
    for name in MODULES:
        if _FORCED:
            out[name] = f"off ({PURE_ENV})"
        elif _import(name) is not None:
            out[name] = "compiled"
        else:
            out[name] = f"not built: {_missing.get(name, '?')}"
    return out


def active() -> bool:
    """True when every compiled module is in use (the fast path is whole)."""
    return all(state == "compiled" for state in status().values())


def describe() -> str:
    """One line per path state, for ``rmqstore --version`` and the notebooks."""
    states = status()
    if _FORCED:
        head = f"pure Python ({PURE_ENV} is set)"
    elif all(s == "compiled" for s in states.values()):
        head = "compiled fast path"
    elif any(s == "compiled" for s in states.values()):
        head = "compiled fast path, in part"
    else:
        head = "pure Python (the compiled speedups are not built)"
    lines = [head]
    name_width = max(len(f"rmqstore._native.{name}") for name in MODULES)
    what_width = max(len(what) for what in MODULES.values())
    for name, what in MODULES.items():  # columns as wide as the longest entry, two spaces apart
        lines.append(f"  {'rmqstore._native.' + name:<{name_width}}  {what:<{what_width}}  {states[name]}")
    return "\n".join(lines)
