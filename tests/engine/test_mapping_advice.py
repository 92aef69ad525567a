"""How the store's writable mappings are advised to the kernel (``rmqstore.files.mapped_file.advise_random``).

The first write into a fresh read-ahead window of a file mapping faults the whole window in
(``read_ahead_kb``: 8 MiB on these machines, milliseconds with the GIL held by the writer), so the
consume queues and index files, written a unit or an entry at a time and read a few at a time, are
mapped ``MADV_RANDOM``: a fault brings in one page.  The commitlog keeps read-ahead (pulls read it in
order).  Linux shows the advice in ``/proc/self/smaps`` (``VmFlags: ... rr``).
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from rmqstore import Message, MessageStore, StoreConfig

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


def _vm_flags() -> dict[str, set[str]]:
    """{mapped file path: its VmFlags} of this process's file mappings."""
    flags, current = {}, None
    with open("/proc/self/smaps", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and "-" in fields[0] and fields[5].startswith("/"):
                current = fields[5]
            elif fields and fields[0] == "VmFlags:" and current is not None:
                flags[current] = set(fields[1:])
                current = None
    return flags


def test_consume_queues_and_index_files_are_mapped_random_the_commitlog_is_not(tmp_path):
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
                      max_hash_slot_num=1000, max_index_num=4000)
    with MessageStore(tmp_path / "s", cfg) as store:
        assert store.put_message(Message("AdviceTopic", b"x", queue_id=0, properties="KEYS\x01k")).ok
        root = os.path.realpath(tmp_path / "s")
        deadline = time.monotonic() + 20  # the dispatch thread maps the queue's and the index's files
        while not any("/index/" in p for p in _vm_flags() if p.startswith(root)) and time.monotonic() < deadline:
            time.sleep(0.05)
        mine = {p[len(root):]: f for p, f in _vm_flags().items() if p.startswith(root)}
    kinds = {"commitlog": [], "consumequeue": [], "index": []}
    for path, flags in mine.items():
        kind = path.split("/")[1]
        if kind in kinds:
            kinds[kind].append("rr" in flags)
    assert kinds["consumequeue"] and all(kinds["consumequeue"]), mine
    assert kinds["index"] and all(kinds["index"]), mine
    assert kinds["commitlog"] and not any(kinds["commitlog"]), mine
