"""Notebook 14 runs the same puts and the same walk through both paths: it must find the same
bytes, say which path ran, and show both speeds."""

import re

import pytest

pytest.importorskip("nbclient")

from conftest import executed_notebook, notebook_text  # noqa: E402

from rmqstore.common import native  # noqa: E402

NB = "14_two_paths.ipynb"


def test_both_stores_hold_the_same_bytes():
    text = notebook_text(NB)
    m = re.search(r"(\d+) files, (\d+) identical, (\d+) different", text)
    assert m, text[-2000:]
    files, same, different = map(int, m.groups())
    assert files >= 20 and same == files and different == 0  # 1 MiB segments: several, plus queues and index
    assert "commitlog" in text and "consumequeue" in text and "index" in text


def test_it_says_which_path_ran():
    text = notebook_text(NB)
    assert native.describe().splitlines()[0] in text
    if native.forced_pure() or native.module("_cput") is None:
        assert "The compiled path is off here" in text
        assert "(both columns ran the pure path)" in text
    else:
        assert re.search(r"native / pure: puts x[\d.]+, walk x[\d.]+", text)


def test_it_shows_both_speeds_as_a_plot():
    text = notebook_text(NB)
    assert re.search(r"20,000 puts each: pure [\d,]+/s, native [\d,]+/s", text)
    assert re.search(r"20,000 records walked with CRC: pure [\d,]+/s, native [\d,]+/s", text)
    images = [o for c in executed_notebook(NB).cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1
