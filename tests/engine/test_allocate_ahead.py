"""The allocate service works ahead of the put path, and no async put waits for it (issue 20, finding 6).

* A store started for writing asks for the commitlog file its next put needs (and the one after)
  before any put comes, so a cold store's first put finds its file made.
* A put never waits for a pre-fault: the file is handed out once it exists and is mapped; its
  pages are faulted in afterwards, on the allocate service's thread, ahead of the writes.
* An async put (the broker's: its caller is the event loop) never waits for a file in its
  caller's thread: a put that needs a file not made yet goes on, in order, on the store's put
  lane, and so do the async puts after it until the lane is empty -- files can roll faster than
  the allocate service makes them.

File creation (and the pre-fault) are held by the tests for as long as they like; nothing is
timed, only what is answered while they are held (generous deadlines) and which thread did what.
"""

from __future__ import annotations

import os
import threading

import pytest

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.engine import allocate
from rmqstore.files.mapped_file import MappedFile
from rmqstore.format.status import PutMessageStatus

from conftest import wait_until

pytestmark = pytest.mark.timeout(120)

FILE = 64 * 1024
#: what a test waits for something that needs no file to be made (generous: a loaded machine)
PROMPT = 20.0
ALLOCATOR = "AllocateMappedFileService"


def names(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.isdigit())


def msg(i: int, size: int = 100) -> Message:
    return Message("Ahead", (b"%08d" % i) * (size // 8), born_host="192.0.2.1:1")


class Held:
    """File creation by the allocate service, held (for files from ``hold_from`` on) until ``release``."""

    def __init__(self, monkeypatch, hold_from: int = 0):
        self.release = threading.Event()
        self.threads: list[str] = []
        self.made: list[int] = []
        real = allocate.MappedFile

        def held_mapped_file(path, *args, **kwargs):
            self.threads.append(threading.current_thread().name)
            if int(os.path.basename(path)) >= hold_from:
                self.release.wait(60)
            mf = real(path, *args, **kwargs)
            self.made.append(mf.file_from_offset)
            return mf

        monkeypatch.setattr(allocate, "MappedFile", held_mapped_file)


def test_a_started_store_makes_the_file_its_next_put_needs_before_any_put(tmp_path, monkeypatch):
    held = Held(monkeypatch, hold_from=1 << 62)  # (nothing held: only watched)
    folder = tmp_path / "commitlog"
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE))
    store.start()
    try:
        wait_until(lambda: held.made == [0, FILE], PROMPT, what=lambda: f"no put yet, files made: {held.made}")
        assert names(folder) == [f"{0:020d}", f"{FILE:020d}"]
        r = store.put_message(msg(0))
        assert r.ok and r.append_result.wrote_offset == 0
        assert held.made == [0, FILE], "the put took the file made for it"
    finally:
        store.shutdown()
    assert names(folder) == [f"{0:020d}"], "the file made ahead and never used is removed at shutdown"
    # restarted with room left in its last file: the file after it is made ahead, and only that one
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE))
    store.start()
    try:
        wait_until(lambda: held.made == [0, FILE, FILE], PROMPT, what=lambda: held.made)
        assert store.put_message(msg(1)).append_result.wrote_offset == r.append_result.wrote_bytes
    finally:
        store.shutdown()
    assert set(held.threads) == {ALLOCATOR}


def test_a_put_does_not_wait_for_the_pre_fault_of_its_file(tmp_path, monkeypatch):
    release = threading.Event()
    faults: list[tuple[str, str]] = []
    real = MappedFile.pre_fault

    def held_pre_fault(self, *args, **kwargs):
        faults.append((os.path.basename(self.file_name), threading.current_thread().name))
        release.wait(60)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MappedFile, "pre_fault", held_pre_fault)
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=FILE, allocate_wait_timeout_ms=60_000))
    store.start()
    answers: list = []
    try:
        putter = threading.Thread(target=lambda: answers.append(store.put_message(msg(0))))
        putter.start()
        putter.join(PROMPT)
        assert answers, "the put waited for its file's pre-fault"
        assert answers[0].ok and answers[0].append_result.wrote_offset == 0
        # the file is faulted in all the same, on the allocate service's thread
        wait_until(lambda: (f"{0:020d}", ALLOCATOR) in faults, PROMPT, what=lambda: faults)
        assert {thread for _, thread in faults} == {ALLOCATOR}
    finally:
        release.set()
        store.shutdown()


@pytest.mark.parametrize("flush, native", [("ASYNC_FLUSH", True), ("SYNC_FLUSH", True), ("ASYNC_FLUSH", False)])
def test_async_puts_never_wait_for_a_file_in_their_callers_thread(tmp_path, monkeypatch, flush, native):
    """Files roll faster than they are made: the caller goes on, the puts complete in order once they are.
    (``native``: the compiled append, or the pure one -- both decline a file that is not made yet.)"""
    held = Held(monkeypatch, hold_from=FILE)  # the first file is made at once, every later one held
    cfg = StoreConfig(mapped_file_size_commit_log=FILE, allocate_wait_timeout_ms=60_000, flush_disk_type=flush,
                      native=native)
    store = MessageStore(tmp_path, cfg)
    store.start()
    futures: list = []
    submitted = threading.Event()

    def submit():
        for i in range(1, 31):  # about six a file: five files
            futures.append(store.async_put_message(msg(i, 10_000)))
        submitted.set()

    try:
        assert store.put_message(msg(0, 10_000)).ok  # the first file: made at once
        caller = threading.Thread(target=submit, name="caller")
        caller.start()
        assert submitted.wait(PROMPT), (f"the caller waited for a commitlog file: {len(futures)} of 30 async "
                                        "puts were submitted")
        assert not all(f.done() for f in futures), "every put answered while no second file existed"
        held.release.set()
        results = [f.result(PROMPT) for f in futures]
    finally:
        held.release.set()
        store.shutdown()
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 30
    offsets = [r.append_result.wrote_offset for r in results]
    assert offsets == sorted(offsets), "the puts were appended in the order they were made"
    assert [r.append_result.logics_offset for r in results] == list(range(1, 31))
    assert offsets[-1] >= 4 * FILE
    assert set(held.threads) == {ALLOCATOR}, held.threads
