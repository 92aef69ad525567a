"""What verify reports: :class:`Problem` (one finding) and :class:`VerifyReport` (one store).

Every problem has a ``kind`` from :data:`KINDS`, a place (a file relative to the store
root and a byte position in it, or None) and a message; the messages are worded in one
place, :mod:`rmqstore.read.verify.rules`.  ``error`` is damage, ``warning`` a state a RocketMQ
start repairs or that is normal after a crash.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["Problem", "VerifyReport", "KINDS", "ERROR", "WARNING", "DETAIL_CAP"]

ERROR = "error"
WARNING = "warning"

#: every problem kind, with what it means
KINDS = {
    # the store as a whole
    "not_a_store": "the directory holds no commitlog/ directory",
    "unopenable": "open_store refused the store (the message says why)",
    "unclean_shutdown": "the abort file is present and no process holds the lock: the last run did not shut down "
                        "cleanly",
    "live_store": "a live process holds the store's lock (a running broker or writer): the abort file and a commitlog "
                  "file made ahead are what a running store has",
    "unreadable_file": "an entry where a store file belongs is no file of the store (a directory, a dangling "
                       "symlink, a loop, too large to map); the system refusing to open or map a file is an "
                       "error of the run, not a problem of the store",
    "unexpected_file": "a file or directory that is not part of a store layout",
    # commitlog
    "file_size": "a file's size differs from the size its kind of file has in this store",
    "file_name": "a file's name cannot place it (not a multiple of the file size, or past the largest offset)",
    "missing_segment": "a commitlog file is missing between two others",
    "overlapping_segment": "a commitlog file starts before the previous one ends",
    "undecodable_record": "bytes where a record must start do not decode",
    "torn_tail": "the last record of the log does not decode, after a crash (recovery cuts it off)",
    "blank_size": "an END_OF_FILE blank does not reach the end of its file",
    "no_blank": "a file ends without an END_OF_FILE blank (cut short?)",
    "physical_offset": "a record's PHYSICALOFFSET field differs from where it lies",
    "body_crc": "a record's body does not match its BODYCRC",
    "queue_offset_gap": "queue offsets of one queue are not consecutive in log order",
    "log_hole": "the log ends (zeros) but a later file holds data",
    "garbage_after_end": "non-zero bytes after the end of the log in its last file",
    "preallocated_segment": "an all-zero commitlog file after the end of the log",
    "interrupted_allocation": "an empty (or short, all-zero) file after the last segment of a commitlog or "
                              "consume-queue folder: a creation a kill interrupted",
    "log_start": "the commitlog does not start at offset 0 (expired or missing first files)",
    "log_short": "consume queues or the index point past the end of the commitlog",
    "record_header": "a record's topic/queue/queue offset/type disagree with the unit pointing at it",
    # consume queues
    "missing_cq_file": "a consume-queue file is missing",
    "invalid_unit": "a consume-queue unit before the queue's end is not valid",
    "unit_order": "consume-queue units do not point at increasing offsets",
    "unit_target": "a unit does not point at the start of a readable record",
    "unit_mismatch": "a unit disagrees with the record it points at (queue, size, tags)",
    "record_without_unit": "a dispatched record has no consume-queue unit",
    "undispatched": "records after the dispatch horizon have no unit yet (a start re-dispatches them)",
    "expired_refs": "units or index entries point before the start of the commitlog",
    # index
    "index_header": "an index file's header is inconsistent",
    "index_slot": "an index slot does not point at an entry of its own slot",
    "index_chain": "an index entry's chain link is broken",
    "index_entry": "an index entry disagrees with the record it points at",
    "index_order": "index entries or files are not in log order",
    "index_missing_key": "an indexed record has no entry for one of its keys",
    # checkpoint
    "checkpoint": "the checkpoint file is missing, unreadable or of the wrong size",
    "checkpoint_ahead": "the checkpoint names a time after the newest record",
}

#: problems of one kind listed in a report; more are counted in ``suppressed``
DETAIL_CAP = 100


@dataclass(frozen=True)
class Problem:
    """One finding: ``kind`` (see :data:`KINDS`), where (``path`` relative to the store root,
    ``offset`` a byte position in that file or None), what (``message``) and how bad."""

    kind: str
    path: str
    offset: int | None
    message: str
    severity: str = ERROR

    @property
    def where(self) -> str:
        return self.path if self.offset is None else f"{self.path}:{self.offset}"

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message} [{self.kind}]"


@dataclass
class VerifyReport:
    """What was checked and what was found."""

    root: str
    segments: int = 0
    commitlog_bytes: int = 0
    log_start: int = 0
    log_end: int = 0
    records: int = 0
    blanks: int = 0
    queues: int = 0
    units: int = 0
    index_files: int = 0
    entries: int = 0
    abort: bool = False
    #: the pid of the live process holding the store's lock while it was read (None: nobody)
    live: int | None = None
    problems: list[Problem] = field(default_factory=list)
    suppressed: dict[str, int] = field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity != ERROR]

    @property
    def suppressed_errors(self) -> int:
        return sum(n for k, n in self.suppressed.items() if not k.startswith("warning:"))

    @property
    def ok(self) -> bool:
        """True when no damage was found (warnings allowed)."""
        return not self.errors and not self.suppressed_errors

    def summary(self) -> str:
        if self.ok:
            w = len(self.warnings)
            return "OK: no damage found" + (f" ({w} warning{'s' * (w != 1)})" if w else "")
        n = len(self.errors) + self.suppressed_errors
        return f"DAMAGED: {n} problem{'s' * (n != 1)} found"

    def to_dict(self) -> dict:
        return {
            "root": self.root, "ok": self.ok, "summary": self.summary(),
            "checked": {"segments": self.segments, "commitlogBytes": self.commitlog_bytes,
                        "logStart": self.log_start, "logEnd": self.log_end, "records": self.records,
                        "blanks": self.blanks, "queues": self.queues, "units": self.units,
                        "indexFiles": self.index_files, "entries": self.entries},
            "abort": self.abort,
            "live": self.live,
            "errors": len(self.errors) + self.suppressed_errors,
            "warnings": len(self.warnings) + sum(n for k, n in self.suppressed.items() if k.startswith("warning:")),
            "problems": [p.to_dict() for p in self.problems],
            "suppressed": dict(self.suppressed),
        }
