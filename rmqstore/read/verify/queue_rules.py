"""The rules of consume queues: their files, their units, and units against records.

Pure functions from decoded facts (units as ``(offset, size, tags)``, records' queue fields)
to :class:`~rmqstore.read.verify.report.Problem` objects; see :mod:`rmqstore.read.verify.rules` for
what is checked and why, and for how blame is laid when a unit and a record disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...files.store_paths import CONSUME_QUEUE_DIR, offset_to_file_name
from ...format.sysflag import gets_queue_unit
from .report import WARNING, Problem

__all__ = ["CQ_UNIT", "PRE_BLANK", "EXT_ADDR_MAX", "UnitScan", "Verdict", "unit_place", "unit_file",
           "sizeless_queue_file", "odd_queue_folder_entry", "unplaced_queue_file", "queue_file_size", "queue_file_gap", "scan_units",
           "unit_vs_record", "stray_unit", "unit_points_elsewhere", "unbacked_problems", "expired_units"]

CQ_UNIT = 20
#: the unit RocketMQ writes before the first one of a queue that starts past offset 0
PRE_BLANK = (0, 0x7FFFFFFF, 0)
#: ConsumeQueueExt.MAX_ADDR: tags codes at or below are ext addresses
EXT_ADDR_MAX = -(2**31) - 1


@dataclass
class Verdict:
    """What one reference (a unit, an index entry) that matched no record comes to: problems,
    and what the reference tells the other checks."""

    problems: list = field(default_factory=list)
    expired: bool = False  # points before the start of the log
    past_end: bool = False  # points past the end of the log's data
    pointed: bool = False  # points at a readable record (no reverse check for it)
    blamed: bool = False  # that record's header was blamed
    reported: bool = False  # the unit's problem is reported


def unit_place(queue_rel: str, n: int, cq_size: int) -> tuple[str, int]:
    """The file (relative path) and position of unit ``n`` of the queue in folder ``queue_rel``."""
    pos = n * CQ_UNIT
    start = pos - pos % cq_size
    return f"{queue_rel}/{offset_to_file_name(start)}", pos - start


def unit_file(key: tuple[str, int], n: int, cq_size: int, queue_rel: str | None = None) -> str:
    """The consume-queue file that holds unit ``n`` of queue ``key`` (in ``queue_rel``, or where it belongs)."""
    return unit_place(queue_rel or f"{CONSUME_QUEUE_DIR}/{key[0]}/{key[1]}", n, cq_size)[0]


def odd_queue_folder_entry(rel: str, topic_level: bool) -> Problem:
    """An entry of ``consumequeue/`` (``topic_level``) or of a topic folder that is no queue's folder."""
    return Problem("unexpected_file", rel, None, "a file where a topic directory belongs" if topic_level else
                   "not a queue directory (a queue directory is named by its numeric queue id)", WARNING)


def sizeless_queue_file(rel: str) -> Problem:
    return Problem("file_size", rel, None, "the consume-queue file size of this store cannot be told (no file "
                   "holds whole 20-byte units)")


def unplaced_queue_file(rel: str, why: str) -> Problem:
    return Problem("file_name", rel, None, f"{why}; its units cannot be numbered, not examined")


def queue_file_size(rel: str, size: int, cq_size: int) -> Problem | None:
    if size == cq_size:
        return None
    return Problem("file_size", rel, None, f"consume-queue file is {size} bytes; the other consume-queue files of "
                   f"this store are {cq_size} bytes")


def queue_file_gap(queue_rel: str, rel: str, topic: str, qid: int, start: int, prev_end: int | None,
                   cq_size: int) -> list[Problem]:
    """A consume-queue file at ``start`` where the previous one ended at ``prev_end`` (None: the first)."""
    if prev_end is None or start == prev_end:
        return []
    if start < prev_end:
        return [Problem("file_name", rel, None, f"starts at {start}, before the previous file ends ({prev_end})")]
    name = rel.rsplit("/", 1)[-1]
    return [Problem("missing_cq_file", f"{queue_rel}/{offset_to_file_name(off)}", None, f"consume-queue file missing: units "
                    f"{off // CQ_UNIT}..{(off + cq_size) // CQ_UNIT - 1} of {topic}/{qid} are gone (the next file "
                    f"present is {name})") for off in range(prev_end, start, cq_size)[:10]]


@dataclass
class UnitScan:
    """A queue's units read in order: ``min`` (after leading pre-blanks), ``horizon`` (the end of
    the last valid unit's record, -1: none), problems, and the units they report."""

    min: int
    horizon: int = -1
    problems: list = field(default_factory=list)
    reported: set = field(default_factory=set)


def scan_units(topic: str, qid: int, files) -> UnitScan:
    """The units of one queue's files, in order: ``files`` as (rel, number of the file's first
    unit, units as (offset, size, tags)) -- the last file's up to its last written unit.  Leading
    pre-blank units are skipped; then every unit must be valid and point past the one before."""
    scan = UnitScan(files[0][1] if files else 0)
    first = True
    last_offset = None
    for rel, first_n, units in files:
        for i, (offset, size, tags) in enumerate(units):
            n = first_n + i
            if first and (offset, size, tags) == PRE_BLANK:
                scan.min = n + 1
                continue
            first = False
            if offset < 0 or size <= 0:
                what = "empty (never written) unit inside the queue" if (offset, size, tags) == (0, 0, 0) \
                    else "invalid unit"
                scan.problems.append(Problem("invalid_unit", rel, i * CQ_UNIT, f"{what}: unit {n} of {topic}/{qid} "
                                             f"is (offset {offset}, size {size}, tags {tags}); recovery stops the "
                                             "queue here"))
                scan.reported.add(n)
                continue
            if last_offset is not None and offset <= last_offset:
                scan.problems.append(Problem("unit_order", rel, i * CQ_UNIT, f"unit {n} of {topic}/{qid} points at "
                                             f"offset {offset}, not after the previous unit's {last_offset}"))
            last_offset = offset
            scan.horizon = offset + size
    return scan


def unit_vs_record(cq_rel: str, upos: int, n: int, topic: str, qid: int, unit, rec_size: int, want: int,
                   phys: int, rel: str, pos: int, cq_ext: bool) -> list[Problem]:
    """Unit ``n`` (at ``cq_rel:upos``) against the record it points at: its size and tags code
    (``want``; with ConsumeQueueExt, ext addresses are not compared)."""
    _, size, tags = unit
    out = []
    if size != rec_size:
        out.append(Problem("unit_mismatch", cq_rel, upos, f"unit {n} of {topic}/{qid} says size {size}; the record "
                           f"at {phys} ({rel}:{pos}) is {rec_size} bytes"))
    if (tags > EXT_ADDR_MAX or not cq_ext) and tags != want:
        out.append(Problem("unit_mismatch", cq_rel, upos + 12, f"unit {n} of {topic}/{qid} has tags code {tags}; "
                           f"the record at {phys} ({rel}:{pos}) gives {want}"))
    return out


def stray_unit(cq_rel: str, upos: int, n: int, topic: str, qid: int, unit, *, log_start: int | None,
               data_end: int, target, log) -> Verdict:
    """Unit ``n`` that matched no record: why.  ``log_start`` None when the log has no segment;
    ``target`` is the readable record at the unit's offset as (rel, pos, (topic, queue id, queue
    offset), sysFlag, backed by its own unit) or None; ``log`` a :class:`~rmqstore.read.verify.rules.LogMap`."""
    offset, size, _ = unit
    v = Verdict()
    if offset < 0 or size <= 0:
        return v  # reported as invalid_unit
    if log_start is not None and offset < log_start:
        v.expired = True
        return v
    if offset >= data_end:
        v.past_end = True
        v.problems.append(Problem("unit_target", cq_rel, upos, f"unit {n} of {topic}/{qid} points at offset {offset}, "
                                  f"past the end of the commitlog's data ({data_end})"))
        return v
    if target is None:
        v.problems.append(Problem("unit_target", cq_rel, upos, f"unit {n} of {topic}/{qid} points at offset {offset}, "
                                  f"which is not the start of a readable record{log.unreadable_where(offset)}"))
        return v
    rel, pos, claim, sys_flag, record_backed = target
    v.pointed = v.reported = True
    unit = gets_queue_unit(sys_flag)
    if claim == (topic, qid, n) and not unit:
        v.problems.append(Problem("record_header", rel, pos + 36, f"record at {offset} is of {topic}/{qid} queue "
                                  f"offset {n} and unit {n} points at it, but its sysFlag {sys_flag:#x} makes it a "
                                  "prepared/rolled-back transaction, which has no unit"))
        v.blamed = True
    elif record_backed or not unit:
        # the record is the unit of another position: this unit is the stray one
        v.problems.append(Problem("unit_mismatch", cq_rel, upos, f"unit {n} of {topic}/{qid} points at the record "
                                  f"at {offset} ({rel}:{pos}), which is {claim[0]}/{claim[1]} queue offset {claim[2]}"
                                  + (" and has its own unit" if record_backed else "")))
    else:
        v.problems.append(Problem("record_header", rel, pos, f"record at {offset} says it is {claim[0]}/{claim[1]} "
                                  f"queue offset {claim[2]}, but unit {n} of {topic}/{qid} points at it and no unit "
                                  f"of {claim[0]}/{claim[1]} does: its topic/queue id/queue offset fields are damaged"))
        v.blamed = True
    return v


def unit_points_elsewhere(phys: int, rel: str, pos: int, key: tuple[str, int], qo: int, cq_rel: str, upos: int,
                          unit_offset: int) -> Problem:
    """A record whose unit (``cq_rel:upos``) points at another offset, and no unit points at it."""
    return Problem("record_header", rel, pos, f"record at {phys} says it is {key[0]}/{key[1]} queue offset {qo}, but "
                   f"that unit ({cq_rel}:{upos}) points at {unit_offset} instead and no unit points at this record: "
                   "its topic/queue id/queue offset fields are damaged")


def unbacked_problems(missing: dict, undispatched, *, bounds: dict, exists, horizon: int, cq_size: int,
                      where) -> list[Problem]:
    """Records without a unit.  ``missing``: consume-queue file -> (records, lowest and highest
    queue offset, first record as (phys, rel, pos, key, qo)), in log order of the first record;
    ``undispatched``: (records, first offset) after the dispatch ``horizon``, or None;
    ``bounds``: queue -> (min, max); ``exists(rel)``: whether a file is there; ``where(phys)``:
    ``rel:pos`` of a log offset."""
    out = []
    for cq_rel, (count, qo_lo, qo_hi, first) in missing.items():
        phys, rel, pos, key, qo = first
        b = bounds.get(key)
        if b is None:
            why = f"no consume queue {key[0]}/{key[1]} exists (its files are missing)"
        elif b[0] <= qo < b[1]:
            why = "the consume-queue file that holds these units is missing or short"
        elif qo < b[0]:
            why = f"the queue starts at {b[0]}"
        else:
            why = f"the queue ends at {b[1]}"
        there = exists(cq_rel)
        out.append(Problem("record_without_unit", cq_rel, (qo * CQ_UNIT) % cq_size if there else None,
                           f"{count} record(s) of {key[0]}/{key[1]} (queue offsets {qo_lo}..{qo_hi}, first at {phys}, "
                           f"{rel}:{pos}) have no unit{'' if there else ' (this file is missing)'}: {why}, yet later "
                           f"records were dispatched (up to {horizon}); consumers cannot see them"))
    if undispatched:
        out.append(Problem("undispatched", where(undispatched[1]).split(":")[0], None,
                           f"{undispatched[0]} record(s) from offset {undispatched[1]} on have no consume-queue unit "
                           f"yet (the furthest any queue reaches is {max(horizon, 0)}); the next start dispatches them",
                           WARNING))
    return out


def expired_units(count: int, log_start: int) -> Problem | None:
    if not count:
        return None
    return Problem("expired_refs", "consumequeue", None, f"{count} consume-queue unit(s) point before the start of "
                   f"the commitlog ({log_start}); their messages expired", WARNING)
