"""One writer per store directory: a second writable open is refused before it touches anything.

The lock file's POSIX record lock keeps other *processes* out, but such a lock belongs to
the process: a second ``MessageStore`` on the same directory in the same process would take
it again without a word, and two writers would then overwrite each other's records.  So the
store also keeps an in-process registry of the roots open for writing (by real path and by
device and inode, so a symlink or a bind mount is the same directory).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading

import pytest

from rmqstore import Message, MessageStore, StoreConfig, open_store
from rmqstore.common.errors import StoreStateError

CFG = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=6000,
                  max_hash_slot_num=100, max_index_num=400)


def file_hashes(root) -> dict:
    """Every file's name and content hash (the running writer has dispatched and flushed first)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha1(f.read()).hexdigest()
    return out


def settle(store) -> None:
    assert store.wait_dispatched()
    for cq in store.consume_queue_table.values():
        cq.flush(0)


def put(store, i: int):
    return store.put_message(Message("T", b"m%d" % i, born_host="192.0.2.1:1"))


def test_second_writer_in_the_same_process_is_refused_untouched(tmp_path):
    root = tmp_path / "s"
    a = MessageStore(root, CFG)
    a.start()
    try:
        for i in range(3):
            assert put(a, i).ok
        settle(a)
        before = file_hashes(root)
        b = MessageStore(root, CFG)
        with pytest.raises(StoreStateError) as info:
            b.start()
        assert str(root) in str(info.value) and "in this process" in str(info.value)
        with pytest.raises(StoreStateError, match="in this process"):
            MessageStore(root, CFG).load()
        assert file_hashes(root) == before, "the refused open changed files"
        r = put(a, 3)  # the first writer is unharmed
        assert r.ok and r.append_result.logics_offset == 3
        ro = open_store(root, config=CFG)  # reading is still allowed
        ro.close()
    finally:
        a.shutdown()
    c = MessageStore(root, CFG)  # released by shutdown
    c.start()
    try:
        assert put(c, 4).append_result.logics_offset == 4
    finally:
        c.shutdown()


def test_another_name_for_the_same_directory_is_the_same_store(tmp_path):
    root = tmp_path / "s"
    link = tmp_path / "link"
    a = MessageStore(root, CFG)
    a.start()
    try:
        link.symlink_to(root, target_is_directory=True)
        for other in (link, str(root) + "/", tmp_path / "x" / ".." / "s"):
            if "x" in str(other):
                (tmp_path / "x").mkdir(exist_ok=True)
            with pytest.raises(StoreStateError, match="in this process"):
                MessageStore(other, CFG).start()
    finally:
        a.shutdown()


def test_bind_mount_is_the_same_directory(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    mnt = tmp_path / "m"
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(root), str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        a = MessageStore(root, CFG)
        a.start()
        try:
            with pytest.raises(StoreStateError, match="in this process"):
                MessageStore(mnt, CFG).start()
        finally:
            a.shutdown()
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_close_of_a_loaded_store_releases_it(tmp_path):
    root = tmp_path / "s"
    a = MessageStore(root, CFG)
    a.load()
    with pytest.raises(StoreStateError, match="in this process"):
        MessageStore(root, CFG).load()
    a.close()
    b = MessageStore(root, CFG)
    b.start()
    b.shutdown()


def test_a_failed_load_releases_it(tmp_path, monkeypatch):
    root = tmp_path / "s"
    a = MessageStore(root, CFG)
    monkeypatch.setattr(a, "_load", lambda: (_ for _ in ()).throw(OSError("disk said no")))
    with pytest.raises(OSError):
        a.load()
    b = MessageStore(root, CFG)
    b.start()
    b.shutdown()


def test_racing_writers_in_one_process_get_one_store(tmp_path):
    root = tmp_path / "s"
    stores = [MessageStore(root, CFG) for _ in range(6)]
    outcomes = []
    gate = threading.Barrier(len(stores))

    def go(s):
        gate.wait()
        try:
            s.start()
            outcomes.append(("ok", s))
        except StoreStateError as exc:
            outcomes.append(("refused", exc))

    threads = [threading.Thread(target=go, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [s for kind, s in outcomes if kind == "ok"]
    assert len(winners) == 1 and len(outcomes) == len(stores)
    winners[0].shutdown()


_HOLD = """
import sys
from rmqstore import MessageStore, StoreConfig
s = MessageStore(sys.argv[1], StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=6000,
                                          max_hash_slot_num=100, max_index_num=400))
s.start()
print("held", flush=True)
sys.stdin.readline()
s.shutdown()
"""


def test_a_store_another_process_writes_is_refused_untouched(tmp_path):
    root = tmp_path / "s"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = file_hashes(root)
        with pytest.raises(StoreStateError, match="another process"):
            MessageStore(root, CFG).start()
        assert file_hashes(root) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    s = MessageStore(root, CFG)
    s.start()
    s.shutdown()
