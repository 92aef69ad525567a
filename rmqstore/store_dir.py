"""What a store directory says about itself: which files are its segments, and their sizes.

RocketMQ keeps no description of a store next to it: the segment sizes live in the
broker's configuration, and the files are found by listing folders.  This module is the
one place that lists a store folder (:func:`list_store_files`) and reads sizes off the
files:

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

:func:`infer_config` reads the sizes strictly (files that disagree are refused: for opening
a store); :func:`guess_sizes` takes the most common size of each kind (for examining a
damaged store: ``rmqstore verify``).

Which entries of a folder are files of the store:

* commitlog and consume-queue files are named by the offset of their first byte, exactly
  20 ASCII digits (``UtilAll.offset2FileName``); index files by their creation time,
  exactly 17 ASCII digits (``yyyyMMddHHmmssSSS``).  ``str.isdigit`` is not the test:
  ``'\u0660'`` and ``'\u00b2'`` are digits to it (and ``int('\u0660' * 20)`` is 0).
* anything else is a *stray* (a copy under another name, an editor's backup, a note):
  listed so that callers can report it, and otherwise left alone -- never read as part
  of the store, never deleted.  RocketMQ loads every file of the folder, whatever its
  name, so a stray copy of a segment is loaded as one.
* an entry with a store file's name that cannot be one is *unusable* -- an error naming
  the file (:class:`~rmqstore.errors.StoreError` from :meth:`FolderListing.check`), since
  a store missing one of its files must not be opened as if the file were not there: a
  dangling symlink, a symlink loop, a directory or other non-regular file, a file larger
  than RocketMQ can map (sizes are Java ``int``: at most 2**31 - 1 bytes), or a segment
  whose name offset lies past the largest offset a log can reach (Java ``long``; RocketMQ
  fails to start on such a name).  Symlinks to regular files are followed, as RocketMQ does.

Sparse files are normal (RocketMQ creates segments with ``setLength``); readers that scan
for non-zero bytes skip holes (:func:`data_extents`), so their time depends on the data
present, not on the size a file claims.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import stat
from array import array
from collections import Counter
from dataclasses import dataclass, field, replace

from .config import StoreConfig
from .errors import CorruptRecordError, StoreError
from .layout import CONSUME_QUEUE_UNIT, INDEX_ENTRY, INDEX_HEADER, INDEX_SLOT
from .record import decode_record
from .store_paths import (NAME_DIGITS, commitlog_dir, consume_queue_dir, consume_queue_ids, consume_queue_root,
                          index_dir, is_commitlog_dir, parse_file_name)

__all__ = ["infer_config", "resolve_store_root", "commitlog_segment_size", "consume_queue_file_size",
           "index_dimensions", "list_store_files", "FolderListing", "StoreFile", "StrayFile", "UnusableFile",
           "parse_file_name", "grid_problem", "data_extents", "data_in", "first_nonzero", "count_nonzero",
           "file_is_all_zero", "holds_record", "MAX_FILE_SIZE", "MAX_OFFSET",
           "index_file_dimensions", "index_size", "StoreSizes", "guess_sizes", "most_common_size",
           "readable_store_files", "list_names", "queue_folders", "default_index_dimensions"]

#: the largest file RocketMQ maps (``MappedFile.fileSize`` and the configured sizes are ``int``)
MAX_FILE_SIZE = 2**31 - 1
#: the largest offset a log can reach (offsets are ``long``)
MAX_OFFSET = 2**63 - 1


@dataclass(frozen=True)
class StoreFile:
    """A file of the store: its name, the number the name spells (a segment's start offset; an
    index file's creation time as yyyyMMddHHmmssSSS) and its size (a symlink's target's)."""

    path: str
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class StrayFile:
    """An entry whose name is not a store file's: reported, never used, never deleted."""

    path: str
    name: str
    why: str


@dataclass(frozen=True)
class UnusableFile:
    """An entry named like a store file that cannot be read as one; ``why`` says what it is, and
    ``bad_name`` is True when the name itself is the problem (an offset past :data:`MAX_OFFSET`)."""

    path: str
    name: str
    why: str
    bad_name: bool = False

    def error(self) -> StoreError:
        return StoreError(f"{self.path}: {self.why}")


@dataclass(frozen=True)
class FolderListing:
    """What one store folder holds: ``files`` (sorted by name), ``strays`` and ``unusable`` entries."""

    directory: str
    files: tuple[StoreFile, ...] = ()
    strays: tuple[StrayFile, ...] = ()
    unusable: tuple[UnusableFile, ...] = ()

    def check(self) -> "FolderListing":
        """``self``, or StoreError naming the first unusable entry."""
        if self.unusable:
            raise self.unusable[0].error()
        return self


def grid_problem(offset: int, file_size: int) -> str | None:
    """Why a segment named ``offset`` cannot be one of a row of ``file_size``-byte files, or None.

    Files are found by division (offset // file size), so a name must be a multiple of the
    size; RocketMQ's ``checkSelf`` only logs a misfit, and every later offset is then found
    in the wrong file.
    """
    if offset % file_size:
        return f"name {offset} is not a multiple of the file size {file_size}"
    if offset + file_size - 1 > MAX_OFFSET:
        return f"name {offset} puts the file's end past the largest offset a log can reach ({MAX_OFFSET})"
    return None


def _unusable_why(st) -> str | None:
    """Why an entry with a store file's name, ``st`` its stat result, cannot be one (None: it can)."""
    if st is None:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "a directory where a file of the store belongs"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a device, pipe or socket) where a file of the store belongs"
    if st.st_size > MAX_FILE_SIZE:
        return (f"{st.st_size} bytes, larger than any file RocketMQ maps ({MAX_FILE_SIZE} bytes); "
                "not a file of this store")
    return None


def _stat(path: str):
    """``(stat result, None)`` following symlinks, or ``(None, why the entry cannot be read)``."""
    try:
        return os.stat(path), None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "a symlink loop (the link leads back to itself)"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return None, f"a dangling symlink (it points at {target}, which does not exist)"
        if exc.errno == errno.ENOENT:
            return None, None  # gone while we looked: not there
        return None, f"cannot be read: {exc.strerror}"


def list_store_files(directory, kind: str = "segment") -> FolderListing:
    """Every entry of one store folder, sorted out (``kind``: ``segment`` for commitlog and
    consume-queue folders, ``index`` for ``index/``).  A missing folder lists nothing."""
    directory = os.fspath(directory)
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return FolderListing(directory)
    except OSError as exc:
        raise StoreError(f"{directory}: cannot list the folder: {exc.strerror}") from None
    digits = NAME_DIGITS[kind]
    files, strays, unusable = [], [], []
    for name in names:
        path = os.path.join(directory, name)
        number = parse_file_name(name, kind)
        if number is None:
            strays.append(StrayFile(path, name, f"not a file of the store (those are named by exactly {digits} "
                                                "ASCII digits); left alone"))
            continue
        if kind == "segment" and number > MAX_OFFSET:
            unusable.append(UnusableFile(path, name, f"name {number} is past the largest offset a log can reach "
                                                     f"({MAX_OFFSET})", bad_name=True))
            continue
        st, why = _stat(path)
        if why is None:
            why = _unusable_why(st)
        if why is not None:
            unusable.append(UnusableFile(path, name, why))
        elif st is not None:
            files.append(StoreFile(path, name, number, st.st_size))
    return FolderListing(directory, tuple(files), tuple(strays), tuple(unusable))


def data_extents(fd: int, size: int, cap: int = 4096) -> list[tuple[int, int]] | None:
    """The ``(start, end)`` regions of file ``fd`` (``size`` bytes) that are not holes, or None
    when the file system cannot tell (then every byte counts as data).

    Holes read as zeros; a scan for non-zero bytes visits only these regions, so its time
    depends on the data present, not on the size a sparse file claims.  After ``cap``
    regions the rest of the file counts as one region.
    """
    out: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            if len(out) >= cap:
                out.append((pos, size))
                break
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole from pos on
                    break
                raise
            if start >= size:
                break
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            out.append((start, end))
            pos = end
    except (OSError, AttributeError):
        return None
    return out


def data_in(start: int, end: int, extents) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` that hold data (``extents``: a file's data regions from
    :func:`data_extents`, None = all of it)."""
    if extents is None:
        return [(start, end)] if start < end else []
    return [(max(a, start), min(b, end)) for a, b in extents if a < end and b > start]


_SCAN_CHUNK = 1 << 20
_ZERO_CHUNK = bytes(_SCAN_CHUNK)


def first_nonzero(buf, start: int, end: int, extents=None) -> int | None:
    """Position of the first non-zero byte in ``buf[start:end]``, or None; holes (outside
    ``extents``) are skipped, and data is compared a MiB at a time."""
    for a, b in data_in(start, end, extents):
        pos = a
        while pos < b:
            n = min(_SCAN_CHUNK, b - pos)
            chunk = buf[pos:pos + n]
            if chunk != _ZERO_CHUNK[:n]:
                return pos + (n - len(chunk.lstrip(b"\0")))
            pos += n
    return None


def count_nonzero(buf, start: int, end: int, extents=None) -> int:
    """How many bytes of ``buf[start:end]`` are not zero (holes, outside ``extents``, are skipped)."""
    n = 0
    for a, b in data_in(start, end, extents):
        for pos in range(a, b, _SCAN_CHUNK):
            chunk = buf[pos:min(b, pos + _SCAN_CHUNK)]
            n += len(chunk) - chunk.count(0)
    return n


def file_is_all_zero(path: str) -> bool:
    """Every byte of the file is zero (also: it is empty).  Only the file's data is read: a
    sparse file costs what it holds, not the size it claims."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return True
        extents = data_extents(f.fileno(), size)
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf:
            return first_nonzero(buf, 0, size, extents) is None


def resolve_store_root(path) -> str:
    """The store root of ``path``: itself, ``path/store`` for a fixture folder (a fixture: <name>/store),
    or the store whose ``commitlog/`` folder ``path`` is (what ``rmqstore dump`` also accepts)."""
    root = os.fspath(path)
    if os.path.isdir(commitlog_dir(os.path.join(root, "store"))) and not os.path.isdir(commitlog_dir(root)):
        root = os.path.join(root, "store")
    elif is_commitlog_dir(root) and os.path.isdir(root) and not os.path.isdir(commitlog_dir(root)):
        root = os.path.dirname(os.path.normpath(root)) or "."
    if not os.path.exists(root):
        raise StoreError(f"{root}: no such store directory")
    if not os.path.isdir(root):
        raise StoreError(f"{root}: not a directory")
    return root


def holds_record(path: str, size: int) -> bool:
    """True when a commitlog file starts with a record that decodes (a blank too) or with 8 zero
    bytes (space never written): the file can tell the store's segment size."""
    if size < 8:
        return False
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf:
            if buf[:8] == bytes(8):
                return True
            try:
                decode_record(buf, 0)
            except CorruptRecordError:
                return False
            return True
    except (OSError, ValueError):
        return False


def commitlog_segment_size(root: str) -> int | None:
    """The size shared by every commitlog file, None when there are none.

    The size is only taken from files that hold a record (or unwritten space): a file of
    random bytes says nothing about the segment size, and a store made of such files alone
    is refused.
    """
    d = commitlog_dir(root)
    files = list_store_files(d).check().files
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


def consume_queue_file_size(root: str) -> int | None:
    """The size of consume-queue files (the first queue directory that has any)."""
    for topic, qid in consume_queue_ids(root):
        files = list_store_files(consume_queue_dir(root, topic, qid)).check().files
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


def readable_store_files(directory, kind: str = "segment") -> FolderListing:
    """:func:`list_store_files`, with a folder that cannot be listed as an empty one."""
    try:
        return list_store_files(directory, kind)
    except StoreError:
        return FolderListing(os.fspath(directory))


def list_names(path) -> list[str]:
    """The names in folder ``path``, sorted; none when it cannot be listed (a damaged store's reader goes on)."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def queue_folders(root: str):
    """Every directory two levels under ``consumequeue/`` (where consume-queue files are), whatever its name."""
    base = consume_queue_root(root)
    for topic in list_names(base):
        for qid in list_names(os.path.join(base, topic)):
            yield os.path.join(base, topic, qid)


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
