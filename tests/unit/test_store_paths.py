"""The store's folder and file names, said once (rmqstore.files.store_paths).

* every path helper puts its part where RocketMQ's StorePathConfigHelper / BrokerPathConfigHelper
  do, checked against the fixture the real store wrote;
* segment and index file names round-trip (format then parse) and refuse what is not exactly
  20 (17) ASCII digits;
* no module but store_paths spells a store folder or file name in a path (an ast scan).
"""

from __future__ import annotations

import ast
import datetime
import os
from pathlib import Path

import pytest
from conftest import FIXTURES
from hypothesis import example, given
from hypothesis import strategies as st

from rmqstore.files import store_paths as sp
from rmqstore.files.store_dir import MAX_OFFSET, parse_file_name as store_dir_parse

PACKAGE = Path(__file__).resolve().parents[2] / "rmqstore"
BASIC = FIXTURES / "basic" / "store"


def test_the_real_store_has_its_parts_where_the_helpers_say():
    assert os.path.isdir(sp.commitlog_dir(BASIC))
    assert os.path.isdir(sp.index_dir(BASIC))
    assert os.path.getsize(sp.checkpoint_path(BASIC)) == 4096
    queues = list(sp.consume_queue_ids(BASIC))
    assert queues and all(os.path.isdir(sp.consume_queue_dir(BASIC, t, q)) for t, q in queues)
    assert {os.path.dirname(os.path.dirname(sp.consume_queue_dir(BASIC, t, q))) for t, q in queues} \
        == {sp.consume_queue_root(BASIC)}
    # every segment of the real store is named by the offset of its first byte
    names = sorted(os.listdir(sp.commitlog_dir(BASIC)))
    size = os.path.getsize(os.path.join(sp.commitlog_dir(BASIC), names[0]))
    assert [sp.parse_file_name(n) for n in names] == [i * size for i in range(len(names))]
    assert [sp.offset_to_file_name(i * size) for i in range(len(names))] == names


def test_file_paths_are_rocketmqs():
    root = os.path.join("data", "store")
    assert sp.abort_path(root) == os.path.join(root, "abort")
    assert sp.lock_path(root) == os.path.join(root, "lock")
    assert sp.checkpoint_path(root) == os.path.join(root, "checkpoint")
    assert sp.consume_queue_dir(root, "T", 3) == os.path.join(root, "consumequeue", "T", "3")
    assert sp.config_path(root, sp.TOPICS_JSON) == os.path.join(root, "config", "topics.json")
    assert sp.config_path(root, sp.CONSUMER_OFFSET_JSON) == os.path.join(root, "config", "consumerOffset.json")
    assert sp.config_path(root, sp.SUBSCRIPTION_GROUP_JSON) == os.path.join(root, "config", "subscriptionGroup.json")
    assert sp.config_path(root, sp.DELAY_OFFSET_JSON) == os.path.join(root, "config", "delayOffset.json")
    assert sp.is_commitlog_dir(os.path.join(root, "commitlog") + os.sep)
    assert not sp.is_commitlog_dir(os.path.join("commitlog", "x"))


def test_queue_ids_are_ascii_integers_only(tmp_path):
    for name in ("0", "12", "-1", "\u0661", "\u00b2", "x", "1a"):
        (tmp_path / "consumequeue" / "T" / name).mkdir(parents=True)
    (tmp_path / "consumequeue" / "file").write_bytes(b"")
    assert sorted(sp.consume_queue_ids(tmp_path)) == [("T", -1), ("T", 0), ("T", 12)]
    assert list(sp.consume_queue_ids(tmp_path / "missing")) == []


@given(st.integers(min_value=0, max_value=MAX_OFFSET))
@example(0)
@example(MAX_OFFSET)
@example(1 << 30)
def test_segment_names_round_trip(offset):
    name = sp.offset_to_file_name(offset)
    assert len(name) == 20 and sp.parse_file_name(name) == offset


@given(st.integers(min_value=0, max_value=253402300799999))  # up to 9999-12-31T23:59:59.999
@example(1700000000123)
def test_index_names_round_trip(millis):
    name = sp.index_file_name(millis, datetime.timezone.utc)
    assert len(name) == 17 and sp.parse_file_name(name, "index") is not None
    parsed = datetime.datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(tzinfo=datetime.timezone.utc)
    assert int(parsed.timestamp()) * 1000 + int(name[14:]) == millis


@pytest.mark.parametrize("name", ["", "0" * 19, "0" * 21, "\u0660" * 20, "\u00b2" + "0" * 19, "+" + "0" * 19,
                                  " " + "0" * 19, "0" * 19 + "\n", "-" + "0" * 19, "0x" + "0" * 18])
def test_names_that_are_not_20_ascii_digits_are_refused(name):
    assert sp.parse_file_name(name) is None
    assert store_dir_parse(name) is None  # the listing's parser is this one


def test_index_names_are_17_digits():
    assert sp.parse_file_name("20240101000000000", "index") == 20240101000000000
    assert sp.parse_file_name("20240101000000000") is None
    assert sp.parse_file_name("0" * 20, "index") is None


# -- nobody else spells the names -------------------------------------------------------------------

_NAMES = {sp.COMMITLOG_DIR, sp.CONSUME_QUEUE_DIR, sp.INDEX_DIR, sp.CHECKPOINT_FILE, sp.ABORT_FILE, sp.LOCK_FILE,
          sp.CONFIG_DIR, sp.TOPICS_JSON, sp.CONSUMER_OFFSET_JSON, sp.SUBSCRIPTION_GROUP_JSON, sp.DELAY_OFFSET_JSON}


def _spellings(tree: ast.AST):
    """``(line, text)`` of every place that builds or tests a store path with a literal name."""
    for node in ast.walk(tree):
        literals = []
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func.endswith("path.join") or func.endswith("joinpath") or func in ("Path", "pathlib.Path"):
                literals = node.args
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            literals = [node.right]
        elif isinstance(node, ast.Compare):
            literals = [node.left, *node.comparators]
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            if ast.unparse(node.format_spec).strip("f'\"") == "020d":  # a segment name formatted by hand
                yield node.lineno, ast.unparse(node)
        for lit in literals:
            if isinstance(lit, ast.Constant) and lit.value in _NAMES:
                if isinstance(node, ast.Compare) and lit.value not in (sp.COMMITLOG_DIR, sp.CONSUME_QUEUE_DIR):
                    continue  # "index" == ... compares kinds and keys, not paths
                yield node.lineno, ast.unparse(node)


def test_only_store_paths_spells_store_names():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "files/store_paths.py":
            continue
        hits = list(_spellings(ast.parse(path.read_text(encoding="utf-8"))))
        if hits:
            found[rel] = hits
    assert found == {}, "use rmqstore.files.store_paths instead of spelling these names:\n" + "\n".join(
        f"  rmqstore/{rel}:{line}: {text}" for rel, hits in found.items() for line, text in hits)


def test_the_scan_finds_what_it_looks_for():
    """The guard above can fail: it finds each way of spelling a name."""
    src = ("import os\nfrom pathlib import Path\n"
           "a = os.path.join(root, 'commitlog')\nb = Path(root) / 'lock'\nc = name == 'consumequeue'\n"
           "d = f'{offset:020d}'\ne = os.path.join(root, 'config', 'topics.json')\n"
           "ok = info['index']; ok2 = kind == 'index'\n")
    assert sorted({line for line, _ in _spellings(ast.parse(src))}) == [3, 4, 5, 6, 7]
