"""The layers of docs/architecture.md, checked on the source: a lower layer never imports a higher
one, and no module imports another module's private (``_name``) names.

The layer table below is the document's, module by module. A module that is in no layer fails
the test: decide where it belongs, add it here and to docs/architecture.md. Known violations are
listed with their reason in ``ALLOWED_UPWARD`` and ``ALLOWED_PRIVATE``; the lists only shrink --
an entry that no longer happens fails the test too, so it is removed when its cause is fixed.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rmqstore"

#: (layer name, module patterns), lowest first; fnmatch patterns over dotted module names.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("layout/codec", (
        "rmqstore.layout", "rmqstore.errors", "rmqstore.config", "rmqstore.crc", "rmqstore.sysflag",
        "rmqstore.properties", "rmqstore.record", "rmqstore.message_id", "rmqstore.message_encoder", "rmqstore.message", "rmqstore.status",
        "rmqstore.dumpfmt", "rmqstore.walk", "rmqstore.fastscan", "rmqstore.ranges",
        "rmqstore.trace", "rmqstore.progress", "rmqstore.native",
    )),
    ("files", (
        "rmqstore.mapped_file", "rmqstore.mapped_file_queue", "rmqstore.store_dir", "rmqstore.store_paths",
        "rmqstore.store_sizes", "rmqstore.read_maps", "rmqstore.file_space",
    )),
    ("engine services", (
        "rmqstore.commit_log", "rmqstore.flush", "rmqstore.allocate",
        "rmqstore.consume_queue", "rmqstore.index", "rmqstore.index_file", "rmqstore.dispatch",
        "rmqstore.checkpoint", "rmqstore.recovery", "rmqstore.recovery_leftovers", "rmqstore.recovery_differences",
        "rmqstore.ha", "rmqstore.ha.*",
    )),
    # reading.py is the store's read path (lookup.py its lookups): MessageStore's get_message and friends
    # delegate to it
    # fast_open opens a MessageStore without walking the whole log: an opening mode of the store
    # store_checks, store_put, store_lock: parts MessageStore holds (composed, not inherited), split along
    # RocketMQ's lines
    ("store", ("rmqstore.store", "rmqstore.store_checks", "rmqstore.store_put", "rmqstore.async_puts",
               "rmqstore.store_lock", "rmqstore.reading", "rmqstore.lookup", "rmqstore", "rmqstore.fast_open",
               "rmqstore.native_put")),
    ("scan/inspect/verify", (
        "rmqstore.scan", "rmqstore.inspect_store", "rmqstore.verify", "rmqstore.verify.*",
        "rmqstore.replay", "rmqstore.log_browser",
    )),
    # recording drives a traced store or broker end to end (it starts a broker): on the broker's layer
    ("broker/remoting", ("rmqstore.broker", "rmqstore.broker.*", "rmqstore.remoting", "rmqstore.remoting.*",
                         "rmqstore.recording")),
    # the admin client reads the broker's value types (TopicConfig, MessageQueue, fastjson, the ACL signature); a layer
    # of its own above the broker so the broker never imports its client, below the views that poll it
    ("admin client", ("rmqstore.admin", "rmqstore.admin.*")),
    ("spark/widgets", ("rmqstore.spark", "rmqstore.spark.*", "rmqstore.widgets", "rmqstore.widgets.*")),
    ("cli", ("rmqstore.cli", "rmqstore.commands", "rmqstore.commands.*", "rmqstore.broker.cli",
             "rmqstore.spark.cli")),
]

#: (importer, imported) pairs that go down-to-up today, each with why and what removes it
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

#: (importer, imported module, private name) triples imported today, each with why
ALLOWED_PRIVATE: dict[tuple[str, str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = source_modules()


def layer_of(module: str) -> int | None:
    """Index of the highest layer naming ``module`` (a name can sit in a package's pattern and be singled
    out higher up, as ``rmqstore.spark.cli`` is)."""
    found = None
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            found = i
    return found


def imports_of(module: str, path: Path):
    """``(imported module, name or None)`` for every rmqstore import in ``path``, lazy ones included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "rmqstore":
                    yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "rmqstore":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub, None) if sub in MODULES else (target, alias.name)


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in MODULES if layer_of(m) is None)
    assert not unplaced, (f"modules in no layer: {unplaced}; place each in LAYERS of tests/unit/test_layers.py "
                          f"and in docs/architecture.md")


def test_every_layer_pattern_names_a_module():
    """The table names only what is in the tree (a module moved or removed leaves no stale row)."""
    stale = sorted(p for _, patterns in LAYERS for p in patterns
                   if not any(fnmatch.fnmatchcase(m, p) for m in MODULES))
    assert not stale, f"layer patterns matching no module: {stale}"


def upward_imports() -> set[tuple[str, str]]:
    found = set()
    for module, path in MODULES.items():
        own = layer_of(module)
        for target, _ in imports_of(module, path):
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                found.add((module, target))
    return found


def private_imports() -> set[tuple[str, str, str]]:
    found = set()
    for module, path in MODULES.items():
        for target, name in imports_of(module, path):
            if name and name.startswith("_") and not name.startswith("__") and target != module:
                found.add((module, target, name))
    return found


def describe(pairs) -> str:
    return "\n".join(" -> ".join(p) for p in sorted(pairs))


def test_no_lower_layer_imports_a_higher_one():
    upward = upward_imports()
    new = upward - ALLOWED_UPWARD.keys()
    assert not new, ("a lower layer imports a higher one (see docs/architecture.md); move the code down or "
                     "the import up:\n" + "\n".join(
                         f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})" for a, b in sorted(new)))
    gone = ALLOWED_UPWARD.keys() - upward
    assert not gone, f"fixed, so remove from ALLOWED_UPWARD:\n{describe(gone)}"


def test_no_private_names_across_modules():
    private = private_imports()
    new = private - ALLOWED_PRIVATE.keys()
    assert not new, ("a module imports another's private name; make the name public (and list it in "
                     "__all__) or keep the code in one module:\n" + describe(new))
    gone = ALLOWED_PRIVATE.keys() - private
    assert not gone, f"fixed, so remove from ALLOWED_PRIVATE:\n{describe(gone)}"


#: private names every object of a kind offers (namedtuple's API), not reach-through
PUBLIC_UNDERSCORE = frozenset({"_make", "_asdict", "_replace", "_fields"})


def names_defined_in(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and attributes, imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def reach_through(path: Path) -> set[str]:
    """``receiver._name`` reads in ``path`` where ``_name`` is not this module's own: another object's
    private attribute or method, used at runtime (an object's own -- ``self``/``cls`` -- is its business)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own = names_defined_in(tree)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own or name in PUBLIC_UNDERSCORE:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.add(ast.unparse(node))
    return found


#: (module, expression) reach-throughs there are today, each with why
ALLOWED_REACH: dict[tuple[str, str], str] = {}


def test_no_module_reaches_into_another_objects_private_names():
    """The layer check reads imports; this one reads attribute use, where runtime dependencies hide
    (``store._submit_flush`` from another module is a call up into the store nobody declared)."""
    reach = {(module, expr) for module, path in MODULES.items() for expr in reach_through(path)}
    new = reach - ALLOWED_REACH.keys()
    assert not new, ("a module uses another object's private name; give the object a public method or "
                     "attribute, or pass what is needed in:\n" + describe(new))
    gone = ALLOWED_REACH.keys() - reach
    assert not gone, f"fixed, so remove from ALLOWED_REACH:\n{describe(gone)}"


def test_the_reach_through_check_sees_it(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("class A:\n    def f(self, store, row):\n        self._mine = store._theirs(row._asdict())\n"
                      "        return self._mine, self.other._hidden\n")
    assert reach_through(sample) == {"store._theirs", "self.other._hidden"}


def test_the_checks_see_real_imports():
    """The walker resolves relative and lazy imports: pinned facts of today's tree."""
    store = dict(imports_of("rmqstore.store", MODULES["rmqstore.store"]))
    assert "rmqstore.commit_log" in store and "rmqstore.recovery" in store  # `from . import recovery`
    assert layer_of("rmqstore.spark.cli") == len(LAYERS) - 1 and layer_of("rmqstore.spark.rebuild") < layer_of(
        "rmqstore.spark.cli")
    assert layer_of("rmqstore.layout") == 0 and layer_of("rmqstore.nonexistent_module") is None
    assert ("rmqstore.store", "open_store") in imports_of("rmqstore.verify.local",
                                                         MODULES["rmqstore.verify.local"])  # a lazy import counts


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules in ``graph`` (module -> modules it imports):
    each group is a circle of imports, lazy or for the type checker only, which one-way layers cannot hold."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circle():
    graph = {m: {t for t, _ in imports_of(m, p) if t != m and t in MODULES} for m, p in MODULES.items()}
    circles = import_circles(graph)
    assert not circles, "modules that import each other (put what both need in one, below the other):\n" + "\n".join(
        " <-> ".join(c) for c in circles)


def test_the_circle_check_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert import_circles(graph) == [["a", "b", "c"], ["d", "e"]]



#: the longest a module may be (issue 14, Done means 2): past it a module holds more than one job
MAX_MODULE_LINES = 500


def module_lines() -> dict[str, int]:
    return {m: p.read_text(encoding="utf-8").count("\n") for m, p in MODULES.items()}


def test_every_module_is_under_the_size_limit():
    long = {m: n for m, n in module_lines().items() if n >= MAX_MODULE_LINES}
    assert not long, (f"modules of {MAX_MODULE_LINES} lines or more: {long}; split each along its jobs "
                      f"(see docs/architecture.md), one job a module")


# -- each rule once: no inline masks or literal limits outside their owner (issue 22, Done means 2) ----------

#: module -> what it alone may spell: the transaction rules (sysflag), the record's limits (layout)
RULE_OWNERS = {"rmqstore.sysflag": "transaction", "rmqstore.layout": "limits"}
_TX = {"TRANSACTION_MASK", "TRANSACTION_NOT_TYPE", "TRANSACTION_PREPARED_TYPE", "TRANSACTION_COMMIT_TYPE",
       "TRANSACTION_ROLLBACK_TYPE"}
_LIMITS = {2**15 - 1, 2**7 - 1}  # the properties / V2 topic length (a short), the V1 topic length (a byte)


def _name(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


_ARITHMETIC = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.Pow: int.__pow__,
               ast.LShift: int.__lshift__}


def _value(node):
    """The int an expression spells with literals only (``2**15 - 1``, ``0x7FFF``, ``(1 << 7) - 1``), else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _value(node.left), _value(node.right)
        if left is not None and right is not None and abs(right) < 64:
            return _ARITHMETIC[type(node.op)](left, right)
    return None


def inline_rules(tree) -> list[tuple[int, str]]:
    """``(line, what)`` of each place that decides a transaction rule or spells a record limit inline."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd) and (
                _name(node.left) == "TRANSACTION_MASK" or _name(node.right) == "TRANSACTION_MASK"
                or _value(node.right) == 0xC):
            found.append((node.lineno, "transaction: sys_flag masked inline (sysflag.transaction_value or a rule)"))
        elif isinstance(node, (ast.Tuple, ast.Set, ast.List)) and \
                {"TRANSACTION_NOT_TYPE", "TRANSACTION_COMMIT_TYPE"} <= {_name(e) for e in node.elts}:
            found.append((node.lineno, "transaction: the queue-unit rule inline (sysflag.gets_queue_unit)"))
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) and \
                "TRANSACTION_ROLLBACK_TYPE" in {_name(n) for n in [node.left, *node.comparators]}:
            found.append((node.lineno, "transaction: the index rule inline (sysflag.gets_index_entries)"))
        elif isinstance(node, ast.Compare) and any(_value(n) in _LIMITS for n in [node.left, *node.comparators]):
            found.append((node.lineno, "limits: a record limit compared as a literal (rmqstore.layout)"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _value(node.value) in _LIMITS:
            found.append((node.lineno, "limits: a record limit defined as a literal (rmqstore.layout)"))
    return found


def python_rule_copies() -> list[str]:
    out = []
    for module, path in MODULES.items():
        owned = RULE_OWNERS.get(module)
        for line, what in inline_rules(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not what.startswith(str(owned)):
                out.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    return out


#: the C spellings record.h alone may hold (the modules export them; tests/unit/test_native_constants.py)
_C_RULES = [(re.compile(r"&\s*(0x0*[cC]|12)\b"), "a transaction mask inline (record.h's rmq_gets_* rules)"),
            (re.compile(r"\b(32767|0x7[fF]{3})\b"), "a record limit as a literal (record.h)"),
            (re.compile(r"[<>]=?\s*127\b|\b127\s*[<>]|#define\s+\w+\s+127\b"), "a record limit as a literal (record.h)"),
            (re.compile(r"#define\s+\w*(TX|TRAN)\w*\s"), "a transaction type defined outside record.h")]


def c_rule_copies() -> list[str]:
    out = []
    for path in sorted((PACKAGE / "_native").glob("*.[ch]")):
        if path.name == "record.h":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out += [f"{path.relative_to(ROOT)}:{n}: {what}" for rx, what in _C_RULES if rx.search(line)]
    return out


def test_each_rule_is_spelled_by_its_owner_only():
    copies = python_rule_copies() + c_rule_copies()
    assert not copies, "a rule or limit written outside its owner; use the owner's name:\n" + "\n".join(copies)


def test_the_rule_check_sees_inline_copies():
    """The checker finds what it is meant to (pinned on small sources, not on the tree)."""
    src = ("a = f & TRANSACTION_MASK\nb = x & 0xC\nc = t in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)\n"
           "d = t == TRANSACTION_ROLLBACK_TYPE\ne = n > 32767\nf = len(s) <= 127\nMAX = 2**15 - 1\n"
           "ok = (f & 0x10, n > 128, '127.0.0.1', t == TRANSACTION_COMMIT_TYPE)\n")
    assert sorted(line for line, _ in inline_rules(ast.parse(src))) == [1, 2, 3, 4, 5, 6, 7]
    assert _C_RULES[0][0].search("x & 0xC)") and not _C_RULES[0][0].search("x & 0xCB")
