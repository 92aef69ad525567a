"""What a store directory says about itself: its sizes, read from the files, never written.

RocketMQ keeps no description of a store next to it: the segment sizes live in the
broker's configuration.  To open a store we were not told about (a fixture, a copy of a
production broker's store), we read the sizes off the files:

* commitlog segment size -- every file in ``commitlog/`` has it;
* consume-queue file size -- every file in ``consumequeue/<topic>/<queue>/`` has it;
* index slots and entries -- an index file is ``40 + 4*slots + 20*entries`` bytes, which
  alone is ambiguous; RocketMQ's defaults keep ``entries == 4 * slots`` (5,000,000 and
  20,000,000), so we assume that ratio and say so when the size does not fit it.
"""

from __future__ import annotations

import os
from dataclasses import replace

from .config import StoreConfig
from .errors import StoreError

__all__ = ["infer_config", "resolve_store_root", "commitlog_segment_size", "consume_queue_file_size", "index_dimensions"]


def resolve_store_root(path) -> str:
    """The store root of ``path``: itself, or ``path/store`` for a fixture folder (a fixture: <name>/store)."""
    root = os.fspath(path)
    if os.path.isdir(os.path.join(root, "store", "commitlog")) and not os.path.isdir(os.path.join(root, "commitlog")):
        root = os.path.join(root, "store")
    if not os.path.exists(root):
        raise StoreError(f"{root}: no such store directory")
    if not os.path.isdir(root):
        raise StoreError(f"{root}: not a directory")
    return root


def _digit_files(path: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(path) if n.isdigit() and os.path.isfile(os.path.join(path, n)))
    except (FileNotFoundError, NotADirectoryError):
        return []


def commitlog_segment_size(root: str) -> int | None:
    """The size shared by every commitlog file, None when there are none."""
    d = os.path.join(root, "commitlog")
    sizes = {os.path.getsize(os.path.join(d, n)) for n in _digit_files(d)}
    if not sizes:
        return None
    if len(sizes) > 1:
        raise StoreError(f"{d}: commitlog files have different sizes {sorted(sizes)}")
    size = sizes.pop()
    if size <= 8:
        raise StoreError(f"{d}: commitlog files of {size} bytes cannot hold a record")
    return size


def consume_queue_file_size(root: str) -> int | None:
    """The size of consume-queue files (the first queue directory that has any)."""
    base = os.path.join(root, "consumequeue")
    if not os.path.isdir(base):
        return None
    for topic in sorted(os.listdir(base)):
        tdir = os.path.join(base, topic)
        if not os.path.isdir(tdir):
            continue
        for qid in sorted(os.listdir(tdir)):
            files = _digit_files(os.path.join(tdir, qid))
            if files:
                size = os.path.getsize(os.path.join(tdir, qid, files[0]))
                if size < 20:
                    raise StoreError(f"{os.path.join(tdir, qid, files[0])}: a consume-queue file of {size} bytes "
                                     "holds no 20-byte unit")
                return size
    return None


def index_dimensions(root: str) -> tuple[int, int] | None:
    """``(max_hash_slot_num, max_index_num)`` from the index files' size (entries = 4 x slots)."""
    d = os.path.join(root, "index")
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return None
    sizes = {os.path.getsize(os.path.join(d, n)) for n in names if os.path.isfile(os.path.join(d, n))}
    if len(sizes) > 1 and 0 in sizes:
        # a kill or a full disk between creating an index file and sizing it: the index
        # reader skips such a file with a warning (IndexService.load)
        sizes.discard(0)
    if not sizes:
        return None
    if len(sizes) > 1:
        raise StoreError(f"{d}: index files have different sizes {sorted(sizes)}")
    size = sizes.pop()
    if size < 40 or (size - 40) % 84:
        raise StoreError(f"{d}: index files of {size} bytes do not fit 40 + 4*slots + 20*(4*slots); "
                         "give the store's max_hash_slot_num and max_index_num explicitly")
    slots = (size - 40) // 84
    if slots < 1:
        raise StoreError(f"{d}: index files of {size} bytes hold no hash slot")
    return slots, 4 * slots


def infer_config(root: str, base: StoreConfig | None = None) -> StoreConfig:
    """``base`` (default: RocketMQ's defaults) with the sizes this store's files show."""
    config = base or StoreConfig()
    changes = {}
    size = commitlog_segment_size(root)
    if size is not None:
        changes["mapped_file_size_commit_log"] = size
    cq = consume_queue_file_size(root)
    if cq is not None:
        changes["mapped_file_size_consume_queue"] = cq
    dims = index_dimensions(root)
    if dims is not None:
        changes["max_hash_slot_num"], changes["max_index_num"] = dims
    return replace(config, **changes) if changes else config
