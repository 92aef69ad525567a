"""The sizes a store's files show: segment sizes, index dimensions, and what a reader needs of them.

RocketMQ keeps the sizes of a store's files in the broker's configuration, not next to the
files; opening or examining a store we were not told about means reading them off the
files (the folders are listed by :mod:`rmqstore.files.store_dir`):

* commitlog segment size -- every file in ``commitlog/`` has it;
* consume-queue file size -- every file in ``consumequeue/<topic>/<queue>/`` has it;
* index slots and entries -- an index file is ``40 + 4*slots + 20*entries`` bytes, which
  alone is ambiguous, so the contents decide (:func:`index_dimensions`).  The header says
  how many entries are in use (``indexCount - 1``), which commitlog offset the last one
  points at and how many slots are in use.  Where the last entry sits fixes where the
  entries start, so the slots; then every candidate is checked against the file: entry 0
  unused, the first and last entries pointing where the header says, every slot value an
  entry in use, as many slots in use as the header counts, and each slot's chain made of
  entries whose key hash falls in that slot.  A file with no key in it says nothing; when
  no file decides, explicit sizes are needed (``strict``), or -- for opening a store we were
  not told about -- RocketMQ's default ratio ``entries == 4 * slots`` is assumed.

What is not a segment: a kill (or a full disk) between creating a file and sizing it leaves
an empty file after the last segment of a commitlog or consume-queue folder (RocketMQ creates,
then sizes).  :func:`interrupted_allocations` is the one rule that finds them -- 0 bytes or a
size other than the folder's, nothing but zeros, nothing of the right size after them -- and
every reader uses it: the sizes here are read without them, a read-only open leaves them out
with the warning :func:`interrupted_allocation_note` words (``rmqstore verify`` reports the
same words, ``inspect`` and ``msg`` print them), and a writable open after the crash deletes
them (:mod:`rmqstore.engine.recovery_leftovers`).

:func:`infer_config` reads the sizes strictly (files that disagree are refused: for opening
a store); :func:`guess_sizes` takes the most common size of each kind (for examining a
damaged store: ``rmqstore verify``).  :class:`StoreSizes` is what a reader of the files
needs besides them.
"""

from __future__ import annotations

import mmap
import os
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Sequence

from ..common.config import StoreConfig
from ..common.errors import StoreError
from ..format.layout import CONSUME_QUEUE_UNIT, INDEX_ENTRY, INDEX_HEADER, INDEX_SLOT
from .store_dir import (StoreFile, file_is_all_zero, is_shape_error, list_store_files, queue_folders,
                        readable_store_files)
from .store_paths import commitlog_dir, consume_queue_dir, consume_queue_ids, consume_queue_root, index_dir
from ..format.walk import End, step

__all__ = ["infer_config", "commitlog_segment_size", "consume_queue_file_size", "index_dimensions", "holds_record",
           "index_file_dimensions", "index_size", "StoreSizes", "guess_sizes", "most_common_size",
           "default_index_dimensions", "interrupted_allocations", "interrupted_allocation_note"]


def holds_record(path: str, size: int) -> bool:
    """True when a commitlog file starts with a message record, a blank or 8 zero bytes (space
    never written) -- what :func:`rmqstore.format.walk.step` finds at position 0 is no damage: the file
    can tell the store's segment size."""
    if size < 8:
        return False
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf:
            return step(buf, 0).end in (None, End.BLANK, End.UNWRITTEN)
    except ValueError:  # (shorter than its listing said)
        return False
    except OSError as exc:
        if not is_shape_error(exc):
            raise  # an error of the run, not a fact about the file
        return False


def commitlog_segment_size(root: str) -> int | None:
    """The size shared by every commitlog file, None when there are none.

    The size is only taken from files that hold a record (or unwritten space): a file of
    random bytes says nothing about the segment size, and a store made of such files alone
    is refused.
    """
    d = commitlog_dir(root)
    files = _segments(d)
    sizes = {f.size for f in files}
    if not sizes:
        return None
    if len(sizes) > 1:
        raise StoreError(f"{d}: commitlog files have different sizes {sorted(sizes)}")
    size = sizes.pop()
    if size <= 8:
        raise StoreError(f"{d}: commitlog files of {size} bytes cannot hold a record")
    if not any(holds_record(f.path, size) for f in files):
        raise StoreError(f"{files[0].path}: {size} bytes that hold no record (neither a record that decodes nor "
                         f"unwritten space at position 0), so they do not tell the segment size: not a segment")
    return size


def interrupted_allocations(files: Sequence[StoreFile], size: int | None = None) -> list[StoreFile]:
    """The files at the end of a segment folder (``files``: its listing, in order) that are allocations a
    kill or a full disk interrupted: 0 bytes or not ``size`` bytes (the segment size; None: the first
    file's), and nothing but zeros.

    RocketMQ creates a file and then sizes it, so a kill in between leaves an empty file after the last
    segment; nothing was ever written to it.  Readers leave such files out with the warning
    :func:`interrupted_allocation_note` words, ``rmqstore verify`` reports that warning, and a writable
    open after the crash deletes them (:mod:`rmqstore.engine.recovery_leftovers`).  A file of another size
    that holds a byte, or one before a segment of the right size, is not one: it is damage, refused.
    """
    if size is None:
        size = files[0].size if files else None
    found: list[StoreFile] = []
    for f in reversed(files):
        if (f.size and f.size == size) or not file_is_all_zero(f.path):
            break
        found.append(f)
    return found[::-1]


def interrupted_allocation_note(size: int, expected: int | None) -> str:
    """What a reader says of a file :func:`interrupted_allocations` found (one wording for every reader)."""
    others = f" (a segment of this store is {expected} bytes)" if expected else ""
    return (f"{size} bytes of zeros after the last segment{others}: a file whose creation a kill or a full disk "
            "interrupted, never written; readers leave it out, a writable open after the crash deletes it")


def _segments(directory: str) -> list[StoreFile]:
    """The segments of a folder that tell its size: every file but the interrupted allocations at its end."""
    files = list(list_store_files(directory).check().files)
    return files[:len(files) - len(interrupted_allocations(files))]


def consume_queue_file_size(root: str) -> int | None:
    """The size of consume-queue files (the first queue directory that has any)."""
    for topic, qid in consume_queue_ids(root):
        files = _segments(consume_queue_dir(root, topic, qid))
        if files:
            size = files[0].size
            if size < CONSUME_QUEUE_UNIT.size:
                raise StoreError(f"{files[0].path}: a consume-queue file of {size} bytes holds no "
                                 f"{CONSUME_QUEUE_UNIT.size}-byte unit")
            return size
    return None


@dataclass(frozen=True)
class StoreSizes:
    """What a reader of the files needs besides the files: the commitlog segment size, the
    consume-queue file size, the index slots and entries (None: not told) and the delay
    levels that fix tags codes on ``SCHEDULE_TOPIC_XXXX`` (from the configuration)."""

    commitlog: int | None = None
    consume_queue: int | None = None
    slots: int | None = None
    entries: int | None = None
    delay_levels: dict = field(default_factory=dict)

    @classmethod
    def of(cls, config: StoreConfig) -> "StoreSizes":
        return cls(config.mapped_file_size_commit_log, config.mapped_file_size_consume_queue,
                   config.max_hash_slot_num, config.max_index_num, config.delay_level_table())


def most_common_size(sizes: list[int], prefer=None, first: int | None = None) -> int | None:
    """The most common of ``sizes`` (ties: one ``prefer`` accepts, then ``first``, then the largest)."""
    if not sizes:
        return None
    counts = Counter(sizes)
    best = max(counts.values())
    tied = [s for s, c in counts.items() if c == best]
    if prefer is not None and any(prefer(s) for s in tied):
        tied = [s for s in tied if prefer(s)]
    if first in tied:
        return first
    return max(tied)


def guess_sizes(root: str) -> StoreSizes:
    """The sizes the files show, tolerant of odd files (a damaged store's): the most common size
    of each kind.  The commitlog size is told only by files that hold a record
    (:func:`holds_record`); the consume-queue size prefers whole 20-byte units; index
    dimensions come from the most common size that RocketMQ's default ratio fits
    (:func:`default_index_dimensions`).  :func:`infer_config` is the strict counterpart."""
    seg = [f.size for f in readable_store_files(commitlog_dir(root)).files
           if f.size > 8 and holds_record(f.path, f.size)]
    cq = [f.size for qdir in queue_folders(root) for f in readable_store_files(qdir).files]
    idx = [f.size for f in readable_store_files(index_dir(root), "index").files]
    dims = default_index_dimensions(most_common_size([s for s in idx if default_index_dimensions(s)])
                                    or 0) or (None, None)
    return StoreSizes(most_common_size(seg, first=seg[0] if seg else None),
                      most_common_size(cq, prefer=lambda s: s > 0 and s % 20 == 0), *dims,
                      delay_levels=StoreConfig().delay_level_table())


_HEADER_SIZE = INDEX_HEADER.size  # 40
_ENTRY_SIZE = INDEX_ENTRY.size  # 20
_PHY_AT = INDEX_ENTRY.offsets["phy_offset"]
_SLOT_SIZE = INDEX_SLOT.size  # 4
_I64 = INDEX_ENTRY.field_struct("phy_offset")
_I32 = INDEX_SLOT.struct
#: one slot and the four entries RocketMQ's defaults give it (maxIndexNum == 4 * maxHashSlotNum)
_DEFAULT_SLOT_SHARE = _SLOT_SIZE + 4 * _ENTRY_SIZE  # 84
_NONZERO = re.compile(rb"[^\x00]")
_CHAINS_CHECKED = 4096  # slot chains walked per candidate (enough to tell; bounded for 5M-slot files)


def index_size(slots: int, entries: int) -> int:
    """The size of an index file with ``slots`` hash slots and ``entries`` entries."""
    return _HEADER_SIZE + _SLOT_SIZE * slots + _ENTRY_SIZE * entries


def _index_files(root: str) -> list[str]:
    d = index_dir(root)
    return [f.path for f in list_store_files(d, "index").check().files]


def index_file_dimensions(path: str) -> set[tuple[int, int]] | None:
    """The ``(slots, entries)`` an index file was written with, as far as its contents tell.

    None when the file holds no entry (its size is all there is); otherwise a set holding
    the reading consistent with the header, the slot table and the entry chains (see the
    module doc), or nothing when no reading is.
    """
    size = os.path.getsize(path)
    if size < _HEADER_SIZE + 4 + _ENTRY_SIZE:
        raise StoreError(f"{path}: an index file of {size} bytes holds no slot and no entry")
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            h = INDEX_HEADER.unpack_from(buf)
            used = h.index_count  # entries 1 .. used-1 are in use
            if used <= 1 or h.end_phy_offset == 0:
                return None  # no entry, or one whose offset (0) cannot be told from zero bytes
            full = size - index_size(0, used)  # a full file: entries == used, 4 * slots left over
            if full >= 4 and not full % 4 and _consistent(buf, h, full // 4):
                return {(full // 4, used)}
            # the last entry's phy_offset field is at 40 + 4*slots + 20*(used-1) + 4: wherever the
            # header's end offset appears there, the slots follow; the first consistent reading wins
            # (a wrong one fails the checks: the bytes around it are not entries where they must be)
            first = _HEADER_SIZE + _ENTRY_SIZE * (used - 1) + _PHY_AT + 4  # where it is with one slot
            needle = _I64.pack(h.end_phy_offset)
            at = buf.find(needle, first)
            while at != -1:
                slots, rest = divmod(at - first, 4)
                slots += 1
                entries, odd = divmod(size - index_size(slots, 0), _ENTRY_SIZE)
                if not rest and not odd and entries > used and _consistent(buf, h, slots):
                    return {(slots, entries)}
                at = buf.find(needle, at + 1)
            return set()


def _consistent(buf, h, slots: int) -> bool:
    """Whether the file reads as RocketMQ's IndexFile with ``slots`` hash slots (see the module doc).

    Cheap checks first: the entries the header names, then the slot table, then the chains.
    """
    used = h.index_count
    base = _HEADER_SIZE + _SLOT_SIZE * slots  # entry 0

    def entry(n):
        return INDEX_ENTRY.unpack_from(buf, base + n * _ENTRY_SIZE)

    def slot(n):
        return _I32.unpack_from(buf, _HEADER_SIZE + _SLOT_SIZE * n)[0]

    first, last = entry(1), entry(used - 1)
    if (any(buf[base:base + _ENTRY_SIZE]) or first.phy_offset != h.begin_phy_offset or first.prev_index
            or last.phy_offset != h.end_phy_offset or not 0 <= last.prev_index < used - 1 or last.key_hash < 0
            or slot(last.key_hash % slots) != used - 1):  # the newest entry heads its slot's chain
        return False
    after = base + used * _ENTRY_SIZE
    if after + _ENTRY_SIZE <= len(buf) and any(buf[after:after + _ENTRY_SIZE]):
        return False  # the entry after the last one in use was never written
    table = buf[_HEADER_SIZE:base]  # the slot table: big-endian int32s
    if len(table) // 4 - array("i", table).count(0) != h.hash_slot_count:
        return False  # the header counts the slots in use
    seen = set()
    walked = 0
    last_slot = -1
    for m in _NONZERO.finditer(table):  # the slots in use, in order (C-speed over an empty table)
        n_slot = m.start() // 4
        if n_slot == last_slot:  # another non-zero byte of the same slot
            continue
        last_slot = n_slot
        walked += 1
        if walked > _CHAINS_CHECKED:
            return True
        n = slot(n_slot)
        if not 0 < n < used:
            return False
        while n:
            e = entry(n)
            if n in seen or e.key_hash < 0 or e.key_hash % slots != n_slot or not 0 <= e.prev_index < n:
                return False
            seen.add(n)
            n = e.prev_index
    return len(seen) == used - 1  # every entry in use hangs in exactly one chain


def index_dimensions(root: str, *, slots: int | None = None, entries: int | None = None,
                     strict: bool = False) -> tuple[int, int] | None:
    """``(max_hash_slot_num, max_index_num)`` of the store's index files, read from their contents.

    ``slots``/``entries`` given explicitly must agree with the files (or, with no index
    file, are the answer; one of them alone is completed from the files' size).  None
    when there is no index file and nothing was given.  When no file decides (none holds
    a key), ``strict`` raises :class:`StoreError` asking for explicit sizes; otherwise
    RocketMQ's default ratio ``entries == 4 * slots`` is taken when the size fits it.
    """
    # a 0-byte file is an index file a kill or a full disk interrupted between creating and
    # sizing it: it holds nothing, and the index reader skips it with a warning (IndexService.load)
    paths = [p for p in _index_files(root) if os.path.getsize(p)]
    d = index_dir(root)
    if not paths:
        return (slots, entries) if slots is not None and entries is not None else None
    sizes = {os.path.getsize(p) for p in paths}
    if len(sizes) > 1:
        raise StoreError(f"{d}: index files have different sizes {sorted(sizes)}")
    size = sizes.pop()
    if size < index_size(1, 1):
        raise StoreError(f"{d}: index files of {size} bytes hold no hash slot and no entry")
    candidates = None
    # the fullest file first: most entries, least doubt
    for path in sorted(paths, key=lambda p: -_index_count(p)):
        told = index_file_dimensions(path)
        if told is None:
            continue
        candidates = told if candidates is None else candidates & told
        if len(candidates) <= 1:
            break
    if candidates is not None and not candidates:  # damaged: no reading fits
        if strict:
            raise StoreError(f"{d}: the index files do not read as written with one (slots, entries); "
                             "give max_hash_slot_num and max_index_num explicitly")
        candidates = None  # opening a damaged store to look at it: fall back to the size, as if keyless
    return _pick_dimensions(d, size, candidates, slots, entries, strict)


def _index_count(path: str) -> int:
    with open(path, "rb") as f:
        return INDEX_HEADER.unpack_from(f.read(_HEADER_SIZE)).index_count


def _pick_dimensions(d, size, candidates, slots, entries, strict) -> tuple[int, int]:
    """The one (slots, entries) the files' candidates (None: any that fits ``size``) and the explicit values allow."""
    if slots is not None and entries is not None:
        if index_size(slots, entries) != size:
            raise StoreError(f"{d}: index files are {size} bytes, but {slots} slots and {entries} entries make "
                             f"{index_size(slots, entries)}")
    elif slots is not None or entries is not None:
        rest = size - index_size(slots or 0, entries or 0)
        per = _ENTRY_SIZE if slots is not None else 4
        if rest <= 0 or rest % per:
            raise StoreError(f"{d}: index files of {size} bytes cannot have "
                             + (f"{slots} slots" if slots is not None else f"{entries} entries"))
        slots, entries = (slots, rest // per) if slots is not None else (rest // per, entries)
    if slots is not None:
        if candidates is not None and (slots, entries) not in candidates:
            told = ", ".join(f"{s} slots and {e} entries" for s, e in sorted(candidates))
            raise StoreError(f"{d}: the index files were written with {told}, not {slots} and {entries}")
        return slots, entries
    if candidates is not None and len(candidates) == 1:
        return next(iter(candidates))
    if strict:
        why = ("no index file holds a key" if candidates is None
               else f"{len(candidates)} (slots, entries) fit them")
        raise StoreError(f"{d}: cannot tell the index files' slots and entries ({size} bytes; {why}); "
                         "give max_hash_slot_num and max_index_num explicitly")
    if candidates is None and default_index_dimensions(size):
        return default_index_dimensions(size)
    raise StoreError(f"{d}: index files of {size} bytes do not tell their slots and entries; "
                     "give max_hash_slot_num and max_index_num explicitly")


def default_index_dimensions(size: int) -> tuple[int, int] | None:
    """``(slots, entries)`` of a ``size``-byte index file with RocketMQ's default ratio
    ``entries == 4 * slots``, or None when no such file has that size."""
    if size >= _HEADER_SIZE + _DEFAULT_SLOT_SHARE and not (size - _HEADER_SIZE) % _DEFAULT_SLOT_SHARE:
        n = (size - _HEADER_SIZE) // _DEFAULT_SLOT_SHARE  # (a slot and four entries)
        return n, 4 * n
    return None


def infer_config(root: str, base: StoreConfig | None = None, *, cq_file_size: int | None = None,
                 max_hash_slot_num: int | None = None, max_index_num: int | None = None,
                 strict: bool = False) -> StoreConfig:
    """``base`` (default: RocketMQ's defaults) with the sizes this store's files show.

    Sizes given explicitly must agree with the files and stand in for what the store has
    no file of; ``strict`` refuses to guess index sizes that no file decides (see
    :func:`index_dimensions`).
    """
    config = base or StoreConfig()
    changes: dict = {}
    size = commitlog_segment_size(root)
    if size is not None:
        changes["mapped_file_size_commit_log"] = size
    cq = consume_queue_file_size(root)
    if cq is not None and cq_file_size is not None and cq != cq_file_size:
        raise StoreError(f"{consume_queue_root(root)}: consume-queue files are {cq} bytes, "
                         f"not {cq_file_size}")
    cq = cq if cq is not None else cq_file_size
    if cq is not None:
        changes["mapped_file_size_consume_queue"] = cq
    dims = index_dimensions(root, slots=max_hash_slot_num, entries=max_index_num, strict=strict)
    if dims is not None:
        changes["max_hash_slot_num"], changes["max_index_num"] = dims
    else:  # no index file: what was given
        if max_hash_slot_num is not None:
            changes["max_hash_slot_num"] = max_hash_slot_num
        if max_index_num is not None:
            changes["max_index_num"] = max_index_num
    return replace(config, **changes) if changes else config
