"""Recovery: where does the log end, and do the derived files agree with it?

The problem
-----------
A store is three kinds of files.  The commitlog is the truth: every message, in the
order the put lock admitted it.  The consume queues and the index are *derived* from it
by dispatch, a little behind the writers.  While a store runs, none of them has an
"end" on disk: segment files are pre-allocated at full size and fill from the front, so
after a stop the only way to know where data ends is to read it.  And a stop can leave
every file at a different point: a torn record at the tail of the commitlog, consume
queues that lag behind it (dispatch had not caught up) or run ahead of it (their pages
reached the disk, the commitlog's did not), index files with entries for records that
are gone.

Recovery answers two questions -- where the commitlog ends, and what the derived files
must look like for that end -- and it answers them the way Apache RocketMQ 4.9.8 does
(``DefaultMessageStore#load``/``#recover``, ``CommitLog#recoverNormally`` /
``#recoverAbnormally``), because a store must come back the same whether RocketMQ or we
open it.

How a stop is recognised
------------------------
``start()`` creates an empty ``abort`` file; a clean ``shutdown()`` removes it after
everything is flushed and dispatched.  So at ``load()``:

* no ``abort``: the last run shut down cleanly.  Every file was flushed and every record
  dispatched, so only the newest part of the log can be doubtful.  **Normal recovery**
  validates the last three commitlog files only and dispatches nothing;
* ``abort`` present: the process died.  The consume queues may lag behind the log and
  the last index files may hold entries for records that recovery is about to drop.
  **Abnormal recovery** goes back to a point that the checkpoint proves was fully
  dispatched and dispatches every record again from there.

The order of ``load()``
-----------------------
1. map the commitlog files (all must have the configured size);
2. map the consume-queue files (no recovery yet);
3. open the checkpoint (three timestamps: last flushed commitlog record, last
   dispatched consume-queue unit, last full index file);
4. load the index files; after an abnormal stop every index file whose end timestamp is
   newer than the checkpoint's index timestamp is deleted -- it may hold entries for
   records the log is about to lose, and recovery rebuilds it (below);
5. recover every consume queue: from its third-last file, find the last valid unit
   (``offset >= 0 and size > 0``) and cut after it.  The largest "end of the last
   message" over all queues is remembered;
6. recover the commitlog, normally or abnormally (below);
7. rebuild the commitlog's topic-queue table (the next queue offset of every queue)
   from the consume queues, and move each queue's minimum to the first unit that points
   into the log that is left.

Validating a record
-------------------
Walking a file from position 0, a record is *valid* when its magic is the message magic,
every length inside it is consistent with its declared total size, and -- with
``check_crc_on_recover`` (the default) -- the CRC of a non-empty body matches: a *strict*
:func:`rmqstore.format.walk.step`, the one place that decides it.  A blank (``End.BLANK``)
sends the walk to the next file and is never part of the recovered end itself: if the
last file ends in a blank, the end is the blank's position.  Any other end (unwritten,
out of bytes, corrupt) ends the log.

Normal recovery
---------------
Start at the third-last file (or the first), validate forward across files, stop at the
first invalid record: that is the end.  Set the queue's flushed and committed marks
there, cut the files (the file holding the end gets its positions set, later files are
deleted), and if any consume queue reaches the end or beyond, cut every queue's units
at or past it.  Nothing is dispatched: a clean stop left the queues complete.

Abnormal recovery
-----------------
Choose the start file: the *newest* file whose first record is a message with a
non-zero store timestamp no later than the checkpoint's minimum timestamp
(``min(physic, logics) - 3 s``; with ``message_index_enable`` and
``message_index_safe`` the index timestamp is included too).  Every record before that
file was, by the checkpoint, both flushed and dispatched.  No file qualifies: start at
the first.  Cut every consume queue's units from that file's start on, validate forward
as above, and hand **every** valid record to dispatch again, which writes those units
afresh.  (RocketMQ keeps them and lets a queue skip a record that ends at or before the
last message it holds; but a kill inside a unit's write -- a 20-byte copy is two stores
-- leaves a unit whose offset and size are right and whose tags code is zero, which the
consume-queue recovery cannot tell from a good one.)  The index skips a record below its
newest file's end offset.  Then cut the commitlog and the consume queues at the end as in normal
recovery.  A start file whose first record is already invalid cuts the whole log back
to that file's start, and the queues with it.

Before the walk, with the index enabled, the records from the last entry of the index
files that survived the load up to the walk's start file are handed to the index alone
(:func:`reindex_before`): the deleted files held their keys, and the walk -- which starts
3 s before the last flush -- would not come back for them.  RocketMQ 4.9.8 skips this step
(unless ``messageIndexSafe`` moves its whole walk back) and loses those keys.

No commitlog files at all: both recoveries set the marks to 0 and delete every consume
queue (RocketMQ's ``destroyLogics``).

Read-only
---------
``MessageStore(read_only=True)`` runs the same steps with every write removed: no file
is created, truncated, zeroed or deleted, nothing is dispatched, the checkpoint is read
from the file instead of being mapped for writing.  What is left is positions in
memory -- the end of the log, the end of every queue -- and the cost stays that of a
normal recovery (three files) when the store was shut down cleanly.  After an abnormal
stop the read-only walk starts from the checkpoint's file and reads to the end, without
dispatching; the consume queues are reported as the files hold them (possibly behind
the log, never past it).

What recovery leaves alone
--------------------------
Bytes of the commitlog after the end stay on disk, as in RocketMQ: only positions move,
and later appends overwrite them.  That keeps a damaged log salvageable by hand (the
records after a flipped bit are still there), at a price RocketMQ pays too: should a new
record end exactly where an old valid record begins, and the writer die right then, the
next abnormal recovery walks on into the old records and dispatches them again.  A record
that the index already passed (below its newest file's end offset) is not indexed again --
RocketMQ's rule.  (Index entries past the end are *not* left alone, unlike RocketMQ: see
``DIFFERENCES["index_after_end"]``.)

Where we knowingly differ from RocketMQ 4.9.8
--------------------------------------------
See :data:`DIFFERENCES` (the table is :mod:`rmqstore.engine.recovery_differences`; the clean-up of
what a kill leaves in the folders before all this is :mod:`rmqstore.engine.recovery_leftovers`).  In
short: a record is also invalid when its stored physical
offset is not where it lies (our put path once copied a record before patching the offsets
in, so a kill in between left a body-CRC-valid record with offset 0); a V2 record
(RocketMQ 5) is readable, not the end of the log; units a consume queue loses in a cut
are zeroed instead of left behind (RocketMQ can read them back in after a later clean
restart); index files that start at or after the end are deleted, and entries past it
dropped from the others; segment files that a kill left at the wrong size *and empty*
(an interrupted pre-allocation) are removed after an abnormal stop instead of making the
store refuse to load; consume-queue units from the walk's start on are written again
(a kill can tear a unit); and after an abnormal stop the records between the index's last
surviving entry and the walk's start are indexed again.
"""

from __future__ import annotations

import logging
import mmap
import struct

from ..files.checkpoint import StoreCheckpoint, read_checkpoint
from .dispatch import Dispatcher, delay_table, dispatch_request, reput_segment_native
from ..format.layout import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, SYSFLAG_POSITION, store_timestamp_position
from ..common.native import module as native_module
from ..format.record import decode_record
from .recovery_differences import DIFFERENCES
from .recovery_leftovers import remove_creation_leftovers, remove_interrupted_allocations
from ..files.store_dir import file_is_all_zero  # (re-exported)
from ..files.store_paths import checkpoint_path
from ..format.walk import End, SegmentEnd, Step, step, walk_segment

__all__ = ["DIFFERENCES", "CheckpointSnapshot", "check_record", "open_checkpoint",
           "recover", "recover_consume_queues", "recover_normally", "recover_abnormally",
           "recover_topic_queue_table", "truncate_dirty_logic_files", "destroy_logics",
           "is_mapped_file_matched_recover", "remove_interrupted_allocations", "remove_creation_leftovers",
           "reindex_before", "file_is_all_zero"]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


# -- the checkpoint ----------------------------------------------------------------
class CheckpointSnapshot:
    """The checkpoint's values read from the file, for a store that must not write.

    Same attributes and minimum-timestamp rules as :class:`StoreCheckpoint`; all zero
    when the file does not exist (as a fresh RocketMQ checkpoint would read).
    """

    read_only = True

    def __init__(self, path: str):
        self.path = path
        values = read_checkpoint(path)
        self.physic_msg_timestamp = values.physic_msg_timestamp if values else 0
        self.logics_msg_timestamp = values.logics_msg_timestamp if values else 0
        self.index_msg_timestamp = values.index_msg_timestamp if values else 0

    get_min_timestamp = StoreCheckpoint.get_min_timestamp
    get_min_timestamp_index = StoreCheckpoint.get_min_timestamp_index

    def __repr__(self) -> str:
        return (f"CheckpointSnapshot(physic={self.physic_msg_timestamp}, logics={self.logics_msg_timestamp}, "
                f"index={self.index_msg_timestamp})")


def open_checkpoint(root: str, read_only: bool):
    """The checkpoint of the store at ``root``: mapped for writing (created if missing), or a read-only snapshot."""
    path = checkpoint_path(root)
    return CheckpointSnapshot(path) if read_only else StoreCheckpoint(path)


# -- validating records ------------------------------------------------------------
def check_record(buf, pos: int, file_from_offset: int, check_crc: bool, limit: int | None = None) -> Step:
    """``checkMessageAndReturnSize`` for recovery: the strict :func:`rmqstore.format.walk.step` (a record,
    ``End.BLANK`` -- on to the next file -- or another end, which ends the log)."""
    return step(buf, pos, file_from_offset, limit, crc=check_crc, strict=True)


def _walk(commit_log, dispatcher: Dispatcher, index: int, dispatch=None, until: int | None = None, *,
          bulk: bool = False) -> int:
    """Validate from the start of file ``index`` on; the physical offset where the log ends.

    ``dispatch`` (a callable) gets the dispatch request of every valid record; ``until``
    stops the walk at a record boundary at or after that offset (the offset is returned).
    ``bulk`` (``dispatch`` being the dispatcher's own :meth:`~Dispatcher.dispatch`): on the compiled path each
    file is walked first and its valid records then dispatched in bulk, as the reput service
    does (:func:`rmqstore.engine.dispatch.reput_segment_native`); the same records reach the same
    queues in the same order, and a dispatch that fails raises at the same record.
    """
    files = commit_log.mapped_file_queue.mapped_files
    config = dispatcher.config
    check_crc = config.check_crc_on_recover
    delay_levels = commit_log.delay_levels
    native = config.native and not commit_log.tracer.active  # a traced store shows the Python path
    cdispatch = native_module("_cdispatch", native) if bulk and dispatch is not None else None
    table = delay_table(delay_levels) if cdispatch is not None else None
    while True:
        mf = files[index]
        on_record = None
        if dispatch is not None and table is None:
            def on_record(pos, _s, buf=mf.mapped):
                dispatch(dispatch_request(decode_record(buf, pos), delay_levels))
        end = _walk_file(mf, None if until is None else until - mf.file_from_offset, on_record, check_crc,
                         native, release=dispatcher.read_only)
        if table is not None and end.pos > 0:
            _, _, failure = reput_segment_native(cdispatch, dispatcher, mf.mapped, mf.file_from_offset, 0, end.pos,
                                                 delay_levels, table)
            if failure is not None:
                raise failure
        if end.kind is not End.BLANK:
            if end.kind is not None:
                log.info("recover physics file end, %s pos=%d (%s)", mf.file_name, end.pos, end.reason)
            return mf.file_from_offset + end.pos
        if index + 1 >= len(files):
            log.info("recover physics file over, last mapped file %s", mf.file_name)
            return mf.file_from_offset + end.pos  # the blank itself is not part of the end
        index += 1


#: a read-only walk drops the pages it has read from memory every this many bytes (see _walk_file)
RELEASE_EVERY = 64 << 20


def _walk_file(mf, stop_at: int | None, on_record, check_crc: bool, native: bool, release: bool) -> SegmentEnd:
    """The strict walk of one file; ``release`` (a read-only store: verify, inspect) walks it in
    windows and drops each walked window's pages from the process (``MADV_DONTNEED`` on the
    read-only shared map: the bytes stay in the page cache), so a walk of a whole log does not
    hold the log in memory.  The windows end where ``stop_at`` would stop a walk, so the end is
    the one walk's."""
    buf = mf.mapped
    if not release or not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return walk_segment(buf, mf.file_from_offset, limit=mf.file_size, crc=check_crc, strict=True,
                            stop_at=stop_at, on_record=on_record, native=native)
    pos = records = 0
    while True:
        window = pos + RELEASE_EVERY if stop_at is None else min(stop_at, pos + RELEASE_EVERY)
        end = walk_segment(buf, mf.file_from_offset, start=pos, limit=mf.file_size, crc=check_crc, strict=True,
                           stop_at=window, on_record=on_record, native=native)
        records += end.records
        page = pos - pos % mmap.PAGESIZE
        if end.pos > page:
            buf.madvise(mmap.MADV_DONTNEED, page, min(end.pos, len(buf)) - page)
        if end.kind is not None or (stop_at is not None and stop_at <= end.pos < mf.file_size):
            return SegmentEnd(end.pos, end.kind, end.reason, records, end.last)
        pos = end.pos


# -- the commitlog ---------------------------------------------------------------------
def recover_normally(commit_log, dispatcher: Dispatcher, max_phy_offset_of_consume_queue: int = -1) -> int:
    """After a clean stop: validate the last three files, cut after the last valid record."""
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        return _no_commitlog(commit_log, dispatcher)
    end = _walk(commit_log, dispatcher, max(len(files) - 3, 0))
    _cut(commit_log, dispatcher, end, max_phy_offset_of_consume_queue)
    return end


def recover_abnormally(commit_log, dispatcher: Dispatcher, max_phy_offset_of_consume_queue: int = -1) -> int:
    """After a crash: re-dispatch from the checkpoint's file on, cut after the last valid record."""
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        return _no_commitlog(commit_log, dispatcher)
    index = len(files) - 1
    while index >= 0 and not is_mapped_file_matched_recover(dispatcher.config, dispatcher.checkpoint, files[index]):
        index -= 1
    if index < 0:
        index = 0
    else:
        log.info("recover from this mapped file %s", files[index].file_name)
    if not dispatcher.read_only:
        # the walk writes every consume-queue unit from its start on again: a kill inside a unit's
        # write (a 20-byte copy is two stores) left its offset and size with no tags code
        truncate_dirty_logic_files(dispatcher, files[index].file_from_offset)
        if dispatcher.config.message_index_enable:
            reindex_before(commit_log, dispatcher, files[index].file_from_offset)
    end = _walk(commit_log, dispatcher, index, dispatch=None if dispatcher.read_only else dispatcher.dispatch,
                bulk=True)
    _cut(commit_log, dispatcher, end, max_phy_offset_of_consume_queue)
    return end


def reindex_before(commit_log, dispatcher: Dispatcher, start: int) -> None:
    """Index again the records between the last surviving index entry and ``start`` (the walk's start).

    After an abnormal stop, loading the index deleted every index file newer than the
    checkpoint's index timestamp -- entries of records anywhere after the previous file's
    end, while the walk re-dispatches only from the checkpoint's commitlog file, 3 s
    before the last flush.  RocketMQ 4.9.8 leaves the records in between unfindable by key
    (unless ``messageIndexSafe`` moves its whole walk back).  Here they go to the index
    alone (the consume queues have them); the walk's start and the end of the log are
    decided as before, so an invalid record in this stretch stops the re-indexing with a
    warning and cuts nothing.
    """
    files = commit_log.mapped_file_queue.mapped_files
    index_service = dispatcher.index_service
    floor = max(index_service.indexed_up_to(), files[0].file_from_offset)
    if floor >= start:
        return
    log.info("the index ends at offset %d, the walk starts at %d: indexing the records in between", floor, start)
    reached = _walk(commit_log, dispatcher, _file_holding(files, floor), index_service.build_index, until=start)
    if reached < start:
        log.warning("re-indexing stopped at offset %d, before %d: records in between stay unfindable by key",
                    reached, start)


def _file_holding(files, offset: int) -> int:
    """The index of the file that holds ``offset`` (the first file for offsets before it)."""
    index = len(files) - 1
    while index > 0 and files[index].file_from_offset > offset:
        index -= 1
    return index


def is_mapped_file_matched_recover(config, checkpoint, mf) -> bool:
    """Does the file's first record predate what ``checkpoint`` proves flushed and dispatched?"""
    buf = mf.mapped
    if mf.file_size < SYSFLAG_POSITION + 4:
        return False
    if _I32.unpack_from(buf, 4)[0] not in _MAGICS:
        return False
    ts_pos = store_timestamp_position(_I32.unpack_from(buf, SYSFLAG_POSITION)[0])
    if ts_pos + 8 > mf.file_size:
        return False
    store_timestamp = _I64.unpack_from(buf, ts_pos)[0]
    if store_timestamp == 0:
        return False
    if config.message_index_enable and config.message_index_safe:
        return store_timestamp <= checkpoint.get_min_timestamp_index()
    return store_timestamp <= checkpoint.get_min_timestamp()


def _no_commitlog(commit_log, dispatcher: Dispatcher) -> int:
    if dispatcher.consume_queue_table:  # (a fresh store has neither)
        log.warning("the commitlog files are deleted, and delete the consume queue files")
    queue = commit_log.mapped_file_queue
    queue.flushed_where = queue.committed_where = 0
    destroy_logics(dispatcher)
    return 0


def _cut(commit_log, dispatcher: Dispatcher, end: int, max_phy_offset_of_consume_queue: int) -> None:
    queue = commit_log.mapped_file_queue
    read_only = dispatcher.read_only
    queue.flushed_where = queue.committed_where = end
    queue.truncate_dirty_files(end)
    if max_phy_offset_of_consume_queue >= end:
        # equal is the common case (the last unit ends where the log ends) and cuts nothing
        # (read-only, nothing is cut: an inspection reports it in its own words, not as a warning)
        log.log(logging.WARNING if max_phy_offset_of_consume_queue > end and not read_only else logging.INFO,
                "maxPhyOffsetOfConsumeQueue(%d) >= processOffset(%d), truncate dirty logic files",
                max_phy_offset_of_consume_queue, end)
        truncate_dirty_logic_files(dispatcher, end)
    if not read_only and dispatcher.config.message_index_enable:
        dispatcher.index_service.delete_files_after(end, lambda offset: _store_timestamp_at(commit_log, offset))


def _store_timestamp_at(commit_log, offset: int) -> int:
    """The store time of the (valid) record at ``offset``, below the end of the log."""
    files = commit_log.mapped_file_queue.mapped_files
    mf = files[_file_holding(files, offset)]
    return decode_record(mf.mapped, offset - mf.file_from_offset, limit=mf.file_size).store_timestamp


# -- the consume queues ------------------------------------------------------------------
def recover_consume_queues(dispatcher: Dispatcher) -> int:
    """Recover every consume queue; the largest end of a message any of them points at (-1: none)."""
    best = -1
    for cq in list(dispatcher.consume_queue_table.values()):
        cq.recover()
        best = max(best, cq.max_physic_offset)
    return best


def truncate_dirty_logic_files(dispatcher: Dispatcher, phy_offset: int) -> None:
    """Cut every consume queue's units at or past ``phy_offset``; zero the cut units on disk."""
    for cq in list(dispatcher.consume_queue_table.values()):
        queue = cq.mapped_file_queue
        old_end = queue.get_max_offset() if queue.mapped_files else 0
        cq.truncate_dirty_logic_files(phy_offset)
        if dispatcher.read_only or not queue.mapped_files:
            continue
        last = queue.mapped_files[-1]
        stale_to = min(old_end - last.file_from_offset, last.file_size)
        if stale_to > last.wrote_position:
            last.mapped[last.wrote_position:stale_to] = bytes(stale_to - last.wrote_position)
            last.mapped.flush()
            log.info("zeroed %d bytes of cut units in %s", stale_to - last.wrote_position, last.file_name)


def destroy_logics(dispatcher: Dispatcher) -> None:
    """Every consume queue is emptied: files deleted (read-only: only forgotten)."""
    for cq in list(dispatcher.consume_queue_table.values()):
        if dispatcher.read_only:
            cq.mapped_file_queue.shutdown()
            cq.mapped_file_queue.mapped_files = []
            cq.max_physic_offset = -1
            cq.min_logic_offset = 0
        else:
            cq.destroy()


def recover_topic_queue_table(commit_log, dispatcher: Dispatcher) -> None:
    """Next queue offset of every queue from the consume queues; queue minimums from the log's start."""
    min_phy_offset = commit_log.get_min_offset()
    table = {}
    for key, cq in list(dispatcher.consume_queue_table.items()):
        table[key] = cq.get_max_offset_in_queue()
        cq.correct_min_offset(min_phy_offset)
    with commit_log.put_message_lock:
        commit_log.topic_queue_table.clear()
        commit_log.topic_queue_table.update(table)


# -- the whole of it -----------------------------------------------------------------------
def recover(commit_log, dispatcher: Dispatcher, last_exit_ok: bool) -> int:
    """Consume queues, then the commitlog (normal or abnormal), then the topic-queue table.

    Returns where the commitlog ends.  Expects the commitlog, the consume queues, the
    checkpoint (``dispatcher.checkpoint``) and the index to be loaded (``MessageStore.load``
    does that).  The dispatcher says whether the store is read-only and how it is configured.
    """
    max_phy_offset_of_consume_queue = recover_consume_queues(dispatcher)
    if last_exit_ok:
        end = recover_normally(commit_log, dispatcher, max_phy_offset_of_consume_queue)
    else:
        end = recover_abnormally(commit_log, dispatcher, max_phy_offset_of_consume_queue)
    recover_topic_queue_table(commit_log, dispatcher)
    return end
