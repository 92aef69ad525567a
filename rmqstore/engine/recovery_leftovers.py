"""What a kill leaves behind in a store's folders, and its clean-up before recovery.

Recovery (:mod:`rmqstore.engine.recovery`) reads segments; it must not trip over files that are
not segments yet.  Two kinds of leftover come from a kill in the middle of creating a file:

* our own temp files: a segment is created as ``<name>.<pid>.creating``, sized, then renamed
  (:mod:`rmqstore.files.mapped_file`), so a kill in between leaves a temp file, never a short
  segment.  Only the lock holder creates segments, so with
  the lock held every such file is a leftover: :func:`remove_creation_leftovers` deletes them
  on every writable load;
* files that another writer (or an older one of ours) created and a kill left at the wrong
  size and all zeros at the tail of a commitlog or consume-queue folder:
  :func:`remove_interrupted_allocations` deletes them after an abnormal stop.  A wrong-sized
  file holding *any* byte is not touched: the load refuses it, naming it.

Index files are the index service's own business (``IndexService.load`` deletes an empty
misfit on every writable load).  A store opened read-only is never cleaned: both functions
then return an empty list.  Deletions are logged on recovery's logger.
"""

from __future__ import annotations

import logging
import os
import re

from .consume_queue import consume_queue_dir, consume_queue_ids
from ..files.store_dir import list_store_files
from ..files.store_sizes import interrupted_allocations
from ..files.store_paths import commitlog_dir

__all__ = ["remove_creation_leftovers", "remove_interrupted_allocations"]

log = logging.getLogger("rmqstore.engine.recovery")

#: the temp name of a segment being created (``rmqstore.files.file_space.create_sized``)
_CREATING = re.compile(r"\d{20}\.\d+\.creating")


def _trailing_empty_misfits(directory: str, size: int) -> list[str]:
    """Files at the end of a segment directory that have the wrong size and hold only zeros
    (:func:`rmqstore.files.store_sizes.interrupted_allocations`: what readers leave out)."""
    return [f.path for f in interrupted_allocations(list_store_files(directory).check().files, size)]


def _queue_dirs(root: str) -> list[str]:
    """The directory of every consume queue the store loads (``consume_queue_ids``)."""
    return [consume_queue_dir(root, topic, qid) for topic, qid in consume_queue_ids(root)]


def remove_creation_leftovers(root: str, read_only: bool) -> list[str]:
    """Delete ``<name>.<pid>.creating`` temp files of segment creations a kill interrupted.

    A segment is created under a temporary name and renamed once it has its size
    (:func:`rmqstore.files.file_space.create_sized`); a kill in between leaves the temp file,
    never a short segment.  Only the lock holder creates segments, so with the lock held
    (writable stores) every such file is a leftover.
    """
    if read_only:
        return []
    doomed = []
    for d in [commitlog_dir(root), *_queue_dirs(root)]:
        doomed += [stray.path for stray in list_store_files(d).check().strays
                   if _CREATING.fullmatch(stray.name) and os.path.isfile(stray.path)]
    for path in doomed:
        log.warning("deleting %s: the temp file of a segment creation that a crash interrupted", path)
        os.remove(path)
    return doomed


def remove_interrupted_allocations(root: str, config, read_only: bool) -> list[str]:
    """Delete empty files a kill left at the wrong size (writable stores, after an abnormal stop)."""
    if read_only:
        return []
    cfg = config
    doomed = _trailing_empty_misfits(commitlog_dir(root), cfg.mapped_file_size_commit_log)
    for qdir in _queue_dirs(root):
        doomed += _trailing_empty_misfits(qdir, cfg.mapped_file_size_consume_queue)
    # (index files: IndexService.load deletes an empty misfit on every writable load)
    for path in doomed:
        log.warning("deleting %s: wrong size and empty, a file whose creation a crash interrupted", path)
        os.remove(path)
    return doomed
