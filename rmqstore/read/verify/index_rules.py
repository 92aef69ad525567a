"""The rules of the index: its files, their entry tables, and entries against records.

Pure functions from decoded facts (an index file's header, its slot values and entries as
``(key hash, phy offset, time diff, prev)``, records' keys and store times) to
:class:`~rmqstore.read.verify.report.Problem` objects; see :mod:`rmqstore.read.verify.rules` for
what is checked and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...engine.index import index_key_hash
from ...files.store_sizes import index_size
from ...format.sysflag import gets_index_entries
from .queue_rules import Verdict
from .report import ERROR, WARNING, Problem

__all__ = ["IndexFileFacts", "IndexMap", "IndexCheck", "sizeless_index_file", "index_file_size", "entry_count",
           "check_index_file", "index_file_order", "record_index", "unresolved_entry", "expired_entries",
           "unindexed_problems", "time_ok"]

_INT_MAX = 0x7FFFFFFF


@dataclass
class IndexFileFacts:
    """One index file as the cross checks see it: ``header`` an
    :data:`~rmqstore.format.layout.INDEX_HEADER` record, ``usable`` its entry count in use (entry 0 included)."""

    rel: str
    begin_ts: int
    end_ts: int
    begin_phy: int
    end_phy: int
    slot_count: int
    count: int
    usable: int = 0

    @classmethod
    def of(cls, rel: str, header, usable: int = 0) -> "IndexFileFacts":
        return cls(rel, header.begin_timestamp, header.end_timestamp, header.begin_phy_offset,
                   header.end_phy_offset, header.hash_slot_count, header.index_count, usable)


class IndexMap:
    """The store's index files in order (:class:`IndexFileFacts`) and their slot count."""

    def __init__(self, files, slots: int | None):
        self.files, self.slots = list(files), slots
        used = [ix for ix in self.files if ix.usable > 1]
        #: first file's begin offset, last file's end offset (None, None: no entry)
        self.range = (used[0].begin_phy, used[-1].end_phy) if used else (None, None)

    def entry_pos(self, n: int) -> int:
        return 40 + 4 * self.slots + n * 20

    def file_for(self, phys: int) -> IndexFileFacts:
        best = self.files[-1]
        for ix in self.files:
            if ix.usable > 1 and ix.begin_phy <= phys <= ix.end_phy:
                best = ix
        return best


def sizeless_index_file(rel: str, size: int) -> Problem:
    return Problem("file_size", rel, None, f"index file of {size} bytes: no index file of this store has a size of "
                   "40 + 4*slots + 20*(4*slots) bytes, so its layout cannot be told")


def index_file_size(rel: str, size: int, slots: int, entries: int, interrupted: bool) -> Problem | None:
    """An index file of the wrong size; ``interrupted``: the newest file, all zeros."""
    expected = index_size(slots, entries)
    if size == expected:
        return None
    return Problem("file_size", rel, None, f"index file is {size} bytes; with {slots} slots and {entries} entries "
                   f"(the other index files' size) it is {expected} bytes"
                   + ("; the newest file and all zeros: a creation a crash or a full disk interrupted (readers "
                      "skip it, a writable open deletes it)" if interrupted else ""),
                   WARNING if interrupted else ERROR)


def entry_count(index_count: int, size: int, slots: int, entries: int) -> int:
    """Entries (entry 0 included) of a file whose header says ``index_count``, as far as the file holds them."""
    count = min(max(index_count, 1), entries)
    base = 40 + 4 * slots
    return max(1, min(count, (size - base) // 20 if size > base else 1))


@dataclass
class IndexCheck:
    problems: list = field(default_factory=list)
    usable: int = 1


def check_index_file(ix: IndexFileFacts, size: int, slots: int, num: int, entries, slot_values) -> IndexCheck:  # noqa: C901 -- the header, slot and chain rules of one file, in the order verify reports them
    """One index file on its own.  ``entries[n]`` is entry ``n`` as (key hash, phy offset, time
    diff, prev) for ``n < entry_count(...)``; ``slot_values`` the slot table (empty when the file
    is shorter than it)."""
    rel, out = ix.rel, IndexCheck()
    p = out.problems
    # 0 is a file created but not flushed before its first key (RocketMQ's load reads it as 1;
    # were entries lost with it, the slot checks below find the slots pointing past the count)
    if not 0 <= ix.count <= num:
        p.append(Problem("index_header", rel, 36, f"indexCount {ix.count} is outside [0, {num}]"))
    if not 0 <= ix.slot_count <= slots:
        p.append(Problem("index_header", rel, 32, f"hashSlotCount {ix.slot_count} is outside [0, {slots}]"))
    base = 40 + 4 * slots
    count = out.usable = entry_count(ix.count, size, slots, num)
    if count > 1:
        if ix.begin_phy > ix.end_phy:
            p.append(Problem("index_header", rel, 16, f"beginPhyOffset {ix.begin_phy} is after endPhyOffset "
                             f"{ix.end_phy}"))
        if ix.begin_ts > ix.end_ts:
            p.append(Problem("index_header", rel, 0, f"beginTimestamp {ix.begin_ts} is after endTimestamp {ix.end_ts}"))
    hashes = [0] * count
    last_phy = None
    for n in range(1, count):
        pos = base + n * 20
        h, phy, td, prev = entries[n]
        hashes[n] = h
        if h < 0:
            p.append(Problem("index_entry", rel, pos, f"entry {n} has key hash {h}; key hashes are never negative"))
        if not 0 <= prev < n:
            p.append(Problem("index_chain", rel, pos + 16, f"entry {n} links to entry {prev}; a link goes to an older "
                             f"entry (0 <= link < {n})"))
        elif prev > 0 and slots and hashes[prev] % slots != h % slots:
            p.append(Problem("index_chain", rel, pos + 16, f"entry {n} (slot {h % slots}) links to entry {prev} of "
                             f"slot {hashes[prev] % slots}"))
        if td < 0:
            p.append(Problem("index_entry", rel, pos + 12, f"entry {n} has a negative time difference {td}"))
        if not ix.begin_phy <= phy <= ix.end_phy:
            p.append(Problem("index_entry", rel, pos + 4, f"entry {n} points at offset {phy}, outside the file's "
                             f"[{ix.begin_phy}, {ix.end_phy}]"))
        if last_phy is not None and phy < last_phy:
            p.append(Problem("index_order", rel, pos + 4, f"entry {n} points at offset {phy}, before the previous "
                             f"entry's {last_phy}"))
        last_phy = phy
    # slots: each points at the newest entry of its own chain; chains cover every entry once
    if not slots or size < base:
        return out
    used = 0
    seen = bytearray(count)
    for s, v in enumerate(slot_values):
        if v == 0:
            continue
        used += 1
        if not 0 < v < count:
            p.append(Problem("index_slot", rel, 40 + 4 * s, f"slot {s} points at entry {v}, outside [1, {count})"))
            continue
        if hashes[v] % slots != s:
            p.append(Problem("index_slot", rel, 40 + 4 * s, f"slot {s} points at entry {v}, whose key hash belongs "
                             f"to slot {hashes[v] % slots}"))
            continue
        n, steps = v, 0
        while n > 0 and not seen[n] and steps < count:
            seen[n] = 1
            steps += 1
            prev = entries[n][3]
            n = prev if 0 <= prev < n else 0
    if used != ix.slot_count:
        p.append(Problem("index_header", rel, 32, f"hashSlotCount is {ix.slot_count} but {used} slots are in use"))
    unreachable = [n for n in range(1, count) if not seen[n]]
    if unreachable:
        p.append(Problem("index_chain", rel, base + unreachable[0] * 20,
                         f"{len(unreachable)} entr{'ies are' if len(unreachable) > 1 else 'y is'} not reachable from "
                         f"any slot (first: entry {unreachable[0]}); key lookups cannot find them"))
    return out


def index_file_order(ix: IndexFileFacts, prev: IndexFileFacts | None) -> Problem | None:
    """Index files follow each other in log order (files with entries)."""
    if prev is None or ix.count <= 1 or prev.count <= 1 or ix.begin_phy >= prev.end_phy:
        return None
    return Problem("index_order", ix.rel, 16, f"begins at offset {ix.begin_phy}, before the previous index file "
                   f"{prev.rel.rsplit('/', 1)[-1]} ends ({prev.end_phy})")


def time_ok(begin_ts: int, td: int, store_ts: int) -> bool:
    """Whether an entry's time difference from its file's begin time fits a record's store time."""
    if td == 0:
        return store_ts < begin_ts + 1000
    if td == _INT_MAX:
        return store_ts >= begin_ts + td * 1000
    return begin_ts + td * 1000 <= store_ts < begin_ts + (td + 1) * 1000


def record_index(index: IndexMap, phys: int, rel: str, pos: int, topic: str, sys_flag: int, store_ts: int, keys,
                 entries, *, has_index: bool, cq_horizon: int) -> tuple[list[Problem], bool]:
    """The index entries pointing at one record (``entries`` as (file number, entry number, hash,
    time diff), or None) and the keys of it that have none.  ``has_index``: an index folder exists.
    Returns the problems, and True when the record is keyed, dispatched and outside every index
    file (reported per stretch by :func:`unindexed_problems`)."""
    out = []
    indexed = gets_index_entries(sys_flag)
    hashes = {index_key_hash(f"{topic}#{k}"): k for k in keys}
    for fnum, n, h, td in entries or ():
        ix = index.files[fnum]
        epos = index.entry_pos(n)
        if not indexed:
            out.append(Problem("index_entry", ix.rel, epos, f"entry {n} points at the rolled-back transaction record "
                               f"at {phys} ({rel}:{pos}); rolled-back records are not indexed"))
        elif h not in hashes:
            shown = ", ".join(sorted(keys)[:5]) or "none"
            out.append(Problem("index_entry", ix.rel, epos, f"entry {n} has key hash {h}, but the record it points at "
                               f"({topic} at {phys}, {rel}:{pos}) has keys {shown}, none hashing to it"))
        elif n > 1 and ix.begin_ts > 0 and not time_ok(ix.begin_ts, td, store_ts):
            out.append(Problem("index_entry", ix.rel, epos + 12, f"entry {n} says the record was stored {td} s after "
                               f"{ix.begin_ts}, but the record at {phys} ({rel}:{pos}) was stored at {store_ts}"))
    if not hashes or not indexed:
        return out, False
    lo, hi = index.range
    in_range = bool(index.files) and lo is not None and lo <= phys < hi
    if not in_range and not (has_index and phys < cq_horizon):
        return out, False  # not dispatched yet (the next start indexes it), or no index at all
    have = {h for _, _, h, _ in entries or ()}
    missing = [k for h, k in hashes.items() if h not in have]
    if not missing:
        return out, False
    if not in_range:
        return out, True  # dispatched, yet outside every index file: reported once
    out.append(Problem("index_missing_key", index.file_for(phys).rel, None, f"the record at {phys} ({rel}:{pos}, "
                       f"topic {topic}) has no index entry for key(s) {', '.join(sorted(missing)[:5])}; a key lookup "
                       "will not find it"))
    return out, False


def unresolved_entry(index: IndexMap, phy: int, fnum: int, n: int, *, log_start: int | None, data_end: int,
                     log) -> Verdict:
    """An index entry that points at no readable record: why (``log_start`` None: no segment)."""
    v = Verdict()
    if log_start is not None and phy < log_start:
        v.expired = True
        return v
    rel, epos = index.files[fnum].rel, index.entry_pos(n)
    if phy >= data_end:
        v.past_end = True
        v.problems.append(Problem("index_entry", rel, epos, f"entry {n} points at offset {phy}, past the end of the "
                                  f"commitlog's data ({data_end})"))
        return v
    v.problems.append(Problem("index_entry", rel, epos, f"entry {n} points at offset {phy}, which is not the start "
                              f"of a readable record{log.unreadable_where(phy)}"))
    return v


def expired_entries(count: int, log_start: int) -> Problem | None:
    if not count:
        return None
    return Problem("expired_refs", "index", None, f"{count} index entr{'ies point' if count > 1 else 'y points'} "
                   f"before the start of the commitlog ({log_start}); their messages expired", WARNING)


def unindexed_problems(index: IndexMap, unindexed, *, interrupted: str | None, abort: bool,
                       cq_horizon: int) -> list[Problem]:
    """Dispatched records with keys (``unindexed`` as (phys, rel, pos), in log order) before the
    index's first entry or after its last: lost to key lookups.

    Dispatch indexes a record together with its consume-queue unit, so every keyed record
    below the dispatch horizon needs entries.  Those after the last entry are what a crash
    recovery that dropped the newest index files (RocketMQ's) did not index again; with the
    abort file present, the next start (ours) indexes them again: a warning.
    """
    lo, hi = index.range
    before = [r for r in unindexed if lo is not None and r[0] < lo]
    after = [r for r in unindexed if lo is None or r[0] >= hi]
    last = index.files[-1].rel if index.files else "index"
    out = []
    for recs, is_after in ((before, False), (after, True)):
        if not recs:
            continue
        # records after the last entry belong in the next file: a skipped empty one lost them
        target = (interrupted or last) if is_after else last
        phys, rel, pos = recs[0]
        where = "with no index entries at all" if lo is None else (
            f"after the index's last entry ({hi})" if is_after else f"before the index's first entry ({lo})")
        soft = abort and is_after
        out.append(Problem("index_missing_key", target, None,
                           f"{len(recs)} dispatched record(s) with keys from offset {phys} ({rel}:{pos}) on, {where}, "
                           f"have no index entry for their keys (their consume-queue units exist, up to {cq_horizon}); "
                           "a key lookup will not find them" + ("; the next start indexes them again" if soft else ""),
                           WARNING if soft else ERROR))
    return out
