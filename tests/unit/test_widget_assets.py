"""Development mode of the views' front-end files (rmqstore/widgets/_assets.py): with
ANYWIDGET_HMR=1 in a checkout, a view's ES module is re-inlined when a file it is built from
changes; otherwise it is the plain inlined string."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("anywidget")

from rmqstore.widgets import _assets  # noqa: E402


@pytest.fixture
def assets_dir(tmp_path, monkeypatch):
    (tmp_path / "_util.js").write_text('export function tag() { return "one"; }\n')
    (tmp_path / "view.js").write_text('import { tag } from "./_util.js";\nexport default { render() { tag(); } };\n')
    monkeypatch.setattr(_assets, "HERE", tmp_path)
    return tmp_path


def test_installed_or_without_hmr_the_module_is_a_plain_inlined_string(assets_dir, monkeypatch):
    monkeypatch.delenv("ANYWIDGET_HMR", raising=False)
    assert not _assets.live_reload()
    text = _assets.esm("view.js")
    assert isinstance(text, str) and 'return "one"' in text and "import" not in text
    monkeypatch.setenv("ANYWIDGET_HMR", "1")
    monkeypatch.setattr(_assets, "HERE", assets_dir / "site-packages")
    assert not _assets.live_reload()


def test_in_a_checkout_with_hmr_an_edit_of_a_sibling_reaches_the_module(assets_dir, monkeypatch):
    from anywidget._file_contents import VirtualFileContents

    monkeypatch.setenv("ANYWIDGET_HMR", "1")
    assert _assets.live_reload()
    live = _assets.esm("view.js")
    assert isinstance(live, VirtualFileContents) and 'return "one"' in str(live)
    pushed = []
    live.changed.connect(pushed.append)
    time.sleep(0.05)
    (assets_dir / "_util.js").write_text('export function tag() { return "two"; }\n')
    deadline = time.monotonic() + 5
    while not pushed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pushed and 'return "two"' in pushed[-1] and 'return "two"' in str(live)
    assert "import" not in str(live)  # still inlined: a Blob module cannot resolve ./_util.js
