"""A file whose allocation a kill interrupted: every reader leaves it out with one warning.

RocketMQ creates a segment file and then sizes it (``RandomAccessFile`` + ``setLength``), so
a kill in between leaves a 0-byte file after the last segment of a commitlog or consume-queue
folder (a full disk can leave one too).  Nothing was ever in it.  Done means, on a copy of a
store RocketMQ wrote with such a file added:

* ``open_store`` (read-only), ``rmqstore inspect`` and ``rmqstore msg`` open it, leave the
  file out and say so with the warning ``rmqstore verify`` gives (one rule words it), and
  read every message the store holds without it;
* ``rmqstore verify`` reports that warning and no error (exit 0);
* the same file anywhere but at the end of its folder is still damage (refused, named).
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from conftest import FIXTURES, run_cli

from rmqstore.common.errors import StoreError
from rmqstore.store import open_store
from rmqstore.files.store_sizes import interrupted_allocation_note

SEGMENT = 65536  # the fixtures' commitlog segment size


@pytest.fixture
def store(tmp_path):
    """A copy of the ``basic`` fixture (small files: copied whole)."""
    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "basic" / "store", root)
    return root


def _empty_after_last(folder):
    """A 0-byte file named as the segment after the last one of ``folder``."""
    names = sorted(p.name for p in folder.iterdir())
    size = (folder / names[-1]).stat().st_size
    path = folder / f"{int(names[-1]) + size:020d}"
    path.touch()
    return path, size


def _messages(root) -> list[tuple[str, int, int, bytes]]:
    st = open_store(root, read_only=True)
    try:
        out = []
        for (topic, qid) in sorted(st.consume_queue_table):
            offset = 0
            while True:
                got = st.get_message("g", topic, qid, offset, 32)
                if not got.messages:
                    break
                out += [(topic, qid, m.queue_offset, bytes(m.body)) for m in got.messages]
                offset = got.next_begin_offset
        return out
    finally:
        st.close()


@pytest.mark.parametrize("where", ["commitlog", "consume queue"])
def test_read_only_open_leaves_out_an_interrupted_allocation_with_a_warning(store, where, caplog):
    want = _messages(store)
    folder = store / "commitlog" if where == "commitlog" else store / "consumequeue" / "TopicA" / "0"
    empty, size = _empty_after_last(folder)
    with caplog.at_level(logging.WARNING):
        assert _messages(store) == want
    note = interrupted_allocation_note(0, size)
    warned = [r.getMessage() for r in caplog.records if str(empty) in r.getMessage()]
    assert warned and all(note in m for m in warned), [r.getMessage() for r in caplog.records]
    assert empty.exists() and empty.stat().st_size == 0  # read-only: nothing deleted


def test_inspect_msg_and_verify_give_the_same_warning_and_exit_0(store):
    code, out, err = run_cli(["inspect", store, "--json"])
    before = json.loads(out)["commitlog"]
    empty, size = _empty_after_last(store / "commitlog")
    note = interrupted_allocation_note(0, size)
    rel = f"commitlog/{empty.name}"

    code, out, err = run_cli(["verify", store, "--json"])
    assert code == 0, out + err
    problems = json.loads(out)["problems"]
    assert [(p["severity"], p["kind"], p["path"]) for p in problems] == [("warning", "interrupted_allocation", rel)]
    assert note in problems[0]["message"]

    code, out, err = run_cli(["inspect", store, "--json"])
    assert code == 0, err
    info = json.loads(out)
    assert [i for i in info["issues"] if rel in i] and all(note in i for i in info["issues"] if rel in i), info["issues"]
    assert info["commitlog"]["maxOffset"] == before["maxOffset"]
    assert [s["inStore"] for s in info["commitlog"]["segments"]] == [True] * len(before["segments"]) + [False]

    code, out, err = run_cli(["msg", store, "--offset", "0", "--json"])
    assert code == 0, err
    assert json.loads(out)["topic"]
    assert note in err  # the warning, once


def test_an_empty_file_before_the_last_segment_is_still_refused(store):
    """Not at the end: a segment that lost its bytes, not an allocation (the log has a hole)."""
    folder = store / "commitlog"
    last = sorted(folder.iterdir())[-1]
    last.rename(folder / f"{int(last.name) + SEGMENT:020d}")
    (folder / last.name).touch()  # 0 bytes where the last segment was, a full segment after it
    with pytest.raises(StoreError, match="different sizes"):
        open_store(store, read_only=True)
    code, out, err = run_cli(["verify", store, "--json"])
    assert code == 1
    assert any(p["severity"] == "error" and p["path"] == f"commitlog/{last.name}"
               for p in json.loads(out)["problems"])
