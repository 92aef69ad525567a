"""The rules of ``rmqstore verify``: every check, as a pure function from facts to problems.

A RocketMQ store holds one fact several times: a message's place in its queue is written
in the commitlog record (topic, queue id, queue offset), again in the consume-queue unit
that points at the record, and its keys once more in the index.  Nothing but the body is
protected by a checksum, so damage shows up as a *disagreement* between copies.  Verify
walks all of them and reports each disagreement as a
:class:`~rmqstore.read.verify.report.Problem` that names where (a file relative to the store
root, and a byte position in it) and what.

What is checked, and why:

store folders (:func:`rmqstore.files.store_dir.list_store_files`, the listing every reader uses)
    * only names of exactly 20 ASCII digits are segments (17 for index files); anything
      else is a stray, reported as a warning and never read; an entry with such a name
      that cannot be a file of the store (a dangling symlink, a symlink loop, a directory,
      a file over 2**31 - 1 bytes, a name past the largest offset) is an error and not read;
    * a segment whose name is not a multiple of the file size cannot be placed among the
      others: an error, and it is not read -- so what verify reads, and the memory and time
      it takes, follow the files present, never the offsets their names claim;

commitlog (``commitlog/<20-digit start offset>``)
    * files are contiguous: each is named by the offset where the previous one ended, all
      have the segment size -- RocketMQ maps a global offset to a file by division, so a
      missing or odd-sized file makes later offsets unreadable (``MappedFileQueue#doLoad``
      even refuses to start); the segment size is told by the files that hold a record, so
      a file of random bytes alone in ``commitlog/`` is damage, not a store;
    * the size chain: a file's first record is at position 0, each record starts where the
      previous one ended, and a file ends in an END_OF_FILE blank that reaches exactly its
      end -- the only way recovery and dispatch find records is by following sizes; a
      file that ends without a blank was cut short (a record always leaves room for one).
      Where and why a file's chain ends is :func:`rmqstore.format.walk.step`'s to say (a blank is
      an end by its magic, whatever size it declares: a wrong size is ``blank_size``);
    * every record decodes (magic, lengths consistent with the total size, UTF-8), its
      PHYSICALOFFSET field equals where it lies, and its body CRC matches -- recovery
      (``checkMessageAndReturnSize`` with ``checkCRCOnRecover``) truncates the log at the
      first record that fails any of these, so everything after it would be lost;
    * per queue, queue offsets in log order are consecutive (the put lock hands them out
      one by one);
    * after the end of the log (8 zero bytes) nothing but zeros follows; later files with
      data mean a hole, all-zero later files are pre-allocated (a warning).

consume queues (``consumequeue/<topic>/<queueId>/<20-digit logical offset>``)
    * file sizes and names as for the commitlog; units are valid (offset >= 0, size > 0)
      up to the last written one, leading pre-blank units aside;
    * every unit in [min, max) points at a record that decodes, whose topic, queue id and
      queue offset are this queue and this unit's number, whose size is the unit's size and
      whose tags code is the unit's (Java hash of TAGS, the delivery time on
      ``SCHEDULE_TOPIC_XXXX``; with ``consumequeue_ext/`` present, codes at or below
      ``Integer.MIN_VALUE - 1`` are ConsumeQueueExt addresses and not compared); units point at increasing offsets and never past the end
      of the commitlog;
    * the other way round: every dispatchable record (not a prepared or rolled-back
      transaction) below the *dispatch horizon* -- the end of the furthest record any queue
      knows -- has its unit.  Records after the horizon are not yet dispatched (a warning:
      the next start re-dispatches them); records before it without a unit are lost to
      consumers.

index (``index/<yyyyMMddHHmmssSSS>``)
    * file size fits the slot and entry counts; the header's counts are in range and its
      hash-slot count equals the number of used slots; begin <= end;
    * every entry's chain link points to an older entry of the same slot, every entry is
      reachable from its slot, every slot points at an entry of that slot;
    * every entry points at a record whose ``topic#key`` (each KEYS token, UNIQ_KEY) hashes
      to the entry's hash, and whose store time matches the entry's time difference;
      entries are in log order and files follow each other;
    * the other way round: every indexable record between the first file's begin offset
      and the last file's end offset has an entry for each of its keys, and so does every
      one below the dispatch horizon (dispatch indexes a record with its unit): keyed
      records outside every index file are reported once per stretch -- what a crash
      recovery that drops the newest index files (RocketMQ's) leaves unfindable by key;
    * the newest index file short and all zeros is an interrupted creation (a warning).

other files
    ``checkpoint`` must be the 4096-byte file whose first 24 bytes hold three timestamps;
    ``abort`` present means the last run did not shut down cleanly (a warning; see below) -- unless a
    live process holds the store's lock: a running store keeps its abort file and makes its next
    commitlog file ahead, and the report says it is live instead (``live_store``).

Blame.  When a unit and a record disagree, the side that disagrees with the rest is
blamed: a record whose queue fields are claimed by no unit while a unit points at it has a
damaged header (the problem names the commitlog file), a unit that points at a record
claimed by another unit is damaged (the problem names the consume-queue file).

Severity.  ``error`` is damage: a consumer or a recovery would lose or misread data.
``warning`` is a state a RocketMQ start repairs or that is normal after a crash: the abort
file, pre-allocated empty segments, records not yet dispatched, non-zero bytes after the
end of the log (left by a torn write or by RocketMQ's own truncation), a last record
that does not decode when the abort file says the writer died (a torn tail: recovery cuts
it off), and one that does not decode after a clean shutdown while no unit or index entry
points at or past it (the rest of a torn write a recovery cut off, after a shorter put).
A record that decodes but fails recovery's check (body CRC, PHYSICALOFFSET) while nothing
points at or past it is where recovery ends the log: the walk stops there with a warning
(what a power cut leaves after a recovery and a clean shutdown), and the records after it
are not "undispatched" -- no start dispatches them.
A first commitlog file that does not start at 0 is indistinguishable from expired files
and only noted.

One rule set, two drivers.  A rule takes facts already read and decoded -- a record, a
consume-queue unit, an index entry table, checkpoint values, a folder listing, where the
log's segments lie -- and returns :class:`~rmqstore.read.verify.report.Problem` objects; it
opens no file and keeps no state between calls (the one running state, the next queue
offset of each queue, is the small :class:`QueueOffsets` the caller feeds in log order).
Each fault is worded here and nowhere else.  The drivers read the files and call the
rules: :mod:`rmqstore.read.verify.local` walks a store in one process (``rmqstore verify``,
:func:`rmqstore.read.verify.verify`), :mod:`rmqstore.spark.verify` runs the data-sized work in
Spark tasks, and :mod:`rmqstore.read.inspect_store` words its health summary with the same
rules.  Because the words come from one place, the two verify drivers produce equal
reports, message for message.
"""

from __future__ import annotations

import bisect
from dataclasses import replace

from ...format.crc import crc32
from ...format.layout import CHECKPOINT_FILE_SIZE
from ...files.store_paths import COMMITLOG_DIR, offset_to_file_name
from ...files.store_sizes import interrupted_allocation_note
from .report import WARNING, Problem

__all__ = ["LogMap", "segment_rel", "QueueOffsets", "unclean_shutdown", "not_a_store", "unlistable_folder",
           "listing_problems", "unplaced_segment", "log_start", "sizeless_segment",
           "segment_size", "segment_gap", "log_hole", "zero_file_inside_log", "preallocated_segment", "live_store",
           "interrupted_allocation",
           "garbage_after_end", "no_blank", "undecodable_record", "blank_size", "recovery_ends_log",
           "record_problems", "recast", "TORN_TAIL", "LIVE_TAIL", "CUT_OFF_TAIL", "log_short", "checkpoint_problems",
           "checkpoint_size", "checkpoint_unreadable", "strays_summary", "summary_line"]


def segment_rel(start: int) -> str:
    """The relative path (as reports name files) of the commitlog segment that starts at ``start``."""
    return f"{COMMITLOG_DIR}/{offset_to_file_name(start)}"


class LogMap:
    """Where the log's segments lie, and which parts of them do not decode: ``segments`` as
    (start, rel, size) in order, ``corrupt`` as (phys start, phys end, rel, pos)."""

    def __init__(self, segments, corrupt=()):
        self.segments = list(segments)
        self.starts = [s[0] for s in self.segments]
        self.corrupt = list(corrupt)

    def where(self, phys: int) -> str:
        """``rel:pos`` of a log offset, or ``offset N`` outside every segment."""
        i = bisect.bisect_right(self.starts, phys) - 1
        if i >= 0:
            start, rel, size = self.segments[i]
            if phys - start < size:
                return f"{rel}:{phys - start}"
        return f"offset {phys}"

    def unreadable_where(self, offset: int) -> str:
        """Where an offset that is not a record start lies: in a damaged region, or in which file."""
        region = next((r for r in self.corrupt if r[0] <= offset < r[1]), None)
        return f", inside the unreadable part of {region[2]} (from position {region[3]})" if region \
            else f" ({self.where(offset)})"


# -- the store as a whole -------------------------------------------------------------------------------

def unclean_shutdown() -> Problem:
    return Problem("unclean_shutdown", "abort", None,
                   "unclean shutdown (abort file present): the last run did not stop cleanly; the next start "
                   "runs RocketMQ's abnormal recovery (re-checks the log from the checkpoint, re-dispatches)", WARNING)


def live_store(pid: int, command: str | None, this_process: bool) -> Problem:
    """The store is open for writing by a live process (:func:`rmqstore.files.store_lock.lock_holder`)."""
    who = f"this process ({pid})" if this_process else f"process {pid}" + (f" ({command})" if command else "")
    return Problem("live_store", "lock", None,
                   f"live: {who} holds the store's lock -- a running broker or writer; the abort file is the one a "
                   "running store keeps (removed at its clean shutdown), not a sign of a crash, and what is read is "
                   "the store at this moment (it changes while it runs)", WARNING)


def not_a_store() -> Problem:
    return Problem("not_a_store", "commitlog", None, "no commitlog/ directory: this is not a store (or its "
                   "commitlog was removed)")


def unlistable_folder(rel: str, why: str) -> Problem:
    return Problem("unreadable_file", rel, None, why)


def listing_problems(listing, what: str, rel) -> list[Problem]:
    """A store folder's strays (warnings, left alone) and entries that cannot be store files
    (errors); ``listing`` a :class:`~rmqstore.files.store_dir.FolderListing`, ``rel`` maps a path
    to the store-relative one, ``what`` names the files the folder holds."""
    out = [Problem("unexpected_file", rel(s.path), None, f"not {what}; not read, left alone", WARNING)
           for s in listing.strays]
    out += [Problem("file_name" if bad.bad_name else "unreadable_file", rel(bad.path), None, f"{bad.why}; not examined")
            for bad in listing.unusable]
    return out


def strays_summary(rels: list[str]) -> str | None:
    """One line for every stray of a store (the health summary of ``rmqstore inspect``)."""
    if not rels:
        return None
    return (f"{len(rels)} entr{'ies' if len(rels) > 1 else 'y'} in store folders not named like store files, "
            f"not read and left alone ({', '.join(rels[:3])})")


# -- commitlog files ------------------------------------------------------------------------------------

def unplaced_segment(rel: str, why: str) -> Problem:
    return Problem("file_name", rel, None, f"{why}; the file cannot be placed in the log, not examined")


def log_start(rel: str, start: int) -> Problem | None:
    if start == 0:
        return None
    return Problem("log_start", rel, None, f"the commitlog starts at offset {start}, not 0: earlier files were "
                   "deleted (expired, as RocketMQ does after fileReservedTime) or are missing", WARNING)


def sizeless_segment(rel: str, size: int) -> Problem:
    return Problem("file_size", rel, None, f"commitlog file of {size} bytes that holds no record (at position 0 "
                   "neither a record that decodes nor unwritten space), and no commitlog file that does tells the "
                   "segment size: not a segment")


def segment_size(rel: str, size: int, expected: int) -> Problem | None:
    if size == expected:
        return None
    return Problem("file_size", rel, None, f"commitlog file is {size} bytes; the other commitlog files of this "
                   f"store are {expected} bytes (truncated, or bytes appended?)")


def segment_gap(rel: str, start: int, expected: int | None, size: int) -> list[Problem]:
    """A segment at ``start`` where the previous one ended at ``expected`` (None: the first)."""
    if expected is None or start == expected:
        return []
    if start < expected:
        return [Problem("overlapping_segment", rel, None, f"starts at {start}, before the previous file ends "
                        f"({expected})")]
    return [Problem("missing_segment", segment_rel(off), None, f"commitlog file missing: offsets "
                    f"{off}..{off + size - 1} are gone (the next file present is {offset_to_file_name(start)})")
            for off in range(expected, start, size)[:10]]


def log_hole(rel: str, pos: int, phys: int, later: list[str]) -> Problem:
    return Problem("log_hole", rel, pos, f"the log ends here at offset {phys} (8 zero bytes), but later file(s) "
                   f"hold data ({', '.join(later)}); recovery would drop everything after this point")


def zero_file_inside_log(rel: str) -> Problem:
    return Problem("log_hole", rel, None, "all-zero commitlog file between files that hold data")


def preallocated_segment(rel: str, live: bool = False) -> Problem:
    """An all-zero commitlog file after the end of the log: made ahead of need by the running store
    (``live``), else left by a writer that stopped without shutting down."""
    if live:
        return Problem("preallocated_segment", rel, None, "the next commitlog file, made ahead by the running store "
                       "(all zeros): what a running broker has (its allocate service makes it before it is needed)",
                       WARNING)
    return Problem("preallocated_segment", rel, None, "pre-allocated empty commitlog file after the end of the log "
                   "(all zeros): left by a writer that did not shut down cleanly (recovery deletes it)", WARNING)


def interrupted_allocation(rel: str, size: int, expected: int | None) -> Problem:
    """A file :func:`rmqstore.files.store_sizes.interrupted_allocations` found, in the words every reader uses."""
    return Problem("interrupted_allocation", rel, None, interrupted_allocation_note(size, expected), WARNING)


def garbage_after_end(rel: str, pos: int, nz: int) -> Problem:
    return Problem("garbage_after_end", rel, nz, f"non-zero bytes at position {nz}, after the end of the log at "
                   f"position {pos}: left by a torn write or by a recovery that cut the log here (RocketMQ ignores "
                   "and overwrites them)", WARNING)


# -- records ------------------------------------------------------------------------------------------------

def no_blank(rel: str, pos: int, left: int) -> Problem:
    return Problem("no_blank", rel, pos, f"the file ends {left} byte{'s' * (left != 1)} after its last record, "
                   "without an END_OF_FILE blank; a writer always leaves room for one (file cut short?)")


def undecodable_record(rel: str, pos: int, phys: int, reason: str) -> Problem:
    return Problem("undecodable_record", rel, pos, f"undecodable record at physical offset {phys}: {reason}; the "
                   "size chain breaks here and the rest of this file cannot be read")


def blank_size(rel: str, pos: int, total: int, file_size: int) -> Problem | None:
    if pos + total == file_size:
        return None
    return Problem("blank_size", rel, pos, f"END_OF_FILE blank at position {pos} declares {total} bytes, reaching "
                   f"{pos + total}, but the file is {file_size} bytes")


def recovery_ends_log(rel: str, pos: int, phys: int, rec, abort: bool, referenced: bool) -> Problem | None:
    """A decodable record recovery rejects (body CRC, PHYSICALOFFSET) that nothing points at or past
    (``referenced`` False) is where recovery ends the log: the warning, or None when it is not.

    Recovery ends the log there (:func:`rmqstore.engine.recovery.check_record`) and leaves the
    bytes after it on disk, so after a power cut, a recovery and a clean shutdown such a
    record -- and the records after it that a lost page did not reach -- lie after the end:
    a warning, and not records a start would dispatch.  A unit or index entry at or past
    it means the store used what follows: then it is damage (the record's own checks).
    """
    crc_ok = not rec.body or crc32(rec.body) == rec.body_crc
    if (crc_ok and rec.physical_offset == phys) or referenced:
        return None
    why = "its body CRC does not match" if not crc_ok else \
        f"it says it is at {rec.physical_offset} (PHYSICALOFFSET field)"
    kind, state = ("torn_tail", "the abort file says the writer died: recovery will end the log here") \
        if abort else ("garbage_after_end", "a recovery ended the log here (RocketMQ ignores and overwrites these "
                       "bytes)")
    return Problem(kind, rel, pos, f"the record at physical offset {phys} fails recovery's check ({why}) and no "
                   f"consume-queue unit or index entry points at or past it: the end of the log; {state}", WARNING)


def record_problems(phys: int, rel: str, pos: int, rec) -> list[Problem]:
    """A decoded message record on its own: where it says it lies, and its body CRC."""
    out = []
    if rec.physical_offset != phys:
        out.append(Problem("physical_offset", rel, pos, f"record at physical offset {phys} says it is at "
                           f"{rec.physical_offset} (PHYSICALOFFSET field)"))
    crc = crc32(rec.body)
    if crc != rec.body_crc:
        out.append(Problem("body_crc", rel, pos, f"body CRC of the record at physical offset {phys} is {crc}, the "
                           f"record says {rec.body_crc}: the body ({len(rec.body)} bytes) is damaged"))
    return out


#: why an undecodable last record is a torn write (abort file present) / bytes a recovery cut off
TORN_TAIL = ("torn_tail", "it is the last record of the log and the abort file says the writer died: a torn "
             "write that recovery will cut off")
LIVE_TAIL = ("torn_tail", "it is the last record of the log and the store is live: a record being written while "
             "it was read")
CUT_OFF_TAIL = ("garbage_after_end", "it is where the log's last file stops and no consume-queue unit or index "
                "entry points at or past it: bytes a recovery cut off (a torn write), which RocketMQ ignores and "
                "overwrites")


def recast(p: Problem, kind_why: tuple[str, str]) -> Problem:
    """An undecodable record that turns out to be a state recovery handles: a warning (else ``p``)."""
    if p.kind != "undecodable_record":
        return p
    kind, why = kind_why
    return replace(p, kind=kind, severity=WARNING, message=f"{p.message}; {why}")


class QueueOffsets:
    """Queue offsets of one queue follow each other in log order: feed every dispatchable
    record, in log order, to :meth:`step`."""

    def __init__(self):
        self.next: dict[tuple[str, int], tuple[int, ...]] = {}

    def step(self, phys: int, rel: str, pos: int, key: tuple[str, int], qo: int) -> Problem | None:
        nxt = self.next.get(key)
        if nxt is not None and qo not in nxt:
            self.next[key] = (nxt[0] + 1, qo + 1)  # either the old line goes on, or a new one starts
            return Problem("queue_offset_gap", rel, pos + 20, f"record at physical offset {phys} has queue offset "
                           f"{qo} in {key[0]}/{key[1]}; the previous record of that queue makes {nxt[0]} the next")
        self.next[key] = (qo + 1,)
        return None


def log_short(past: list[int], data_end: int, segment_size: int | None, exists) -> Problem | None:
    """Several units/entries past the end of the log's data: the commitlog lost its tail.
    ``exists(rel)`` tells whether a commitlog file is there."""
    past = sorted(past)
    if len(past) < 2 or not segment_size:
        return None
    first = past[0]
    start = first - first % segment_size
    seg_path = segment_rel(start)
    there = exists(seg_path)
    return Problem("log_short", seg_path, first - start if there else None,
                   f"{len(past)} consume-queue unit(s)/index entr(ies) point at offsets {past[0]}..{past[-1]}, past "
                   f"the end of the commitlog's data ({data_end}): "
                   + ("this file was cut short or zeroed" if there else "this commitlog file is missing"))


def summary_line(p: Problem) -> str:
    """A problem as one line of a summary (``rmqstore inspect``'s health): its message, after
    the file it names (store-wide problems name no file: ``abort``, ``checkpoint``...)."""
    return f"{p.where}: {p.message}" if "/" in p.path else p.message


# -- checkpoint --------------------------------------------------------------------------------------------

def checkpoint_size(size: int) -> Problem | None:
    if size == CHECKPOINT_FILE_SIZE:
        return None
    return Problem("checkpoint", "checkpoint", None, f"the checkpoint file is {size} bytes; RocketMQ writes "
                   f"{CHECKPOINT_FILE_SIZE}")


def checkpoint_unreadable(error: str) -> Problem:
    return Problem("checkpoint", "checkpoint", None, f"cannot read the checkpoint: {error}")


def checkpoint_problems(*, present: bool, is_file: bool = True, size: int | None = None, value=None,
                        error: str | None = None, records: int = 0, max_store_ts: int = 0) -> list[Problem]:
    """The checkpoint file: ``present`` (lexists), a regular readable file of ``size`` bytes,
    its ``value`` (:class:`~rmqstore.files.checkpoint.Checkpoint`, None: nothing to read) or the
    ``error`` reading it; ``records`` and ``max_store_ts`` of the log walked."""
    if not present:
        return [Problem("checkpoint", "checkpoint", None, "no checkpoint file: a start cannot tell how far the "
                        "consume queues and the index were flushed", WARNING)] if records else []
    if size is None or not is_file:
        return [Problem("checkpoint", "checkpoint", None, "the checkpoint is not a readable file")]
    out = [p for p in [checkpoint_size(size)] if p is not None]
    if error is not None:
        return out + [checkpoint_unreadable(error)]
    if value is not None and max_store_ts and value.physic_msg_timestamp > max_store_ts:
        out.append(Problem("checkpoint_ahead", "checkpoint", 0, f"physicMsgTimestamp {value.physic_msg_timestamp} "
                           f"is after the newest record's store time {max_store_ts}: records it counted as flushed "
                           "are gone", WARNING))
    return out
