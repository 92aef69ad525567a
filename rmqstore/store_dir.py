"""What a store directory says about itself: which files are its segments, and their sizes.

RocketMQ keeps no description of a store next to it: the segment sizes live in the
broker's configuration, and the files are found by listing folders.  This module is the
one place that lists a store folder (:func:`list_store_files`) and reads sizes off the
files:

* commitlog segment size -- every file in ``commitlog/`` has it;
* consume-queue file size -- every file in ``consumequeue/<topic>/<queue>/`` has it;
* index slots and entries -- an index file is ``40 + 4*slots + 20*entries`` bytes, which
  alone is ambiguous; RocketMQ's defaults keep ``entries == 4 * slots`` (5,000,000 and
  20,000,000), so we assume that ratio and say so when the size does not fit it.

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
import stat
from dataclasses import dataclass, replace

from .config import StoreConfig
from .errors import CorruptRecordError, StoreError
from .record import decode_record

__all__ = ["infer_config", "resolve_store_root", "commitlog_segment_size", "consume_queue_file_size",
           "index_dimensions", "list_store_files", "FolderListing", "StoreFile", "StrayFile", "UnusableFile",
           "parse_file_name", "grid_problem", "data_extents", "holds_record", "MAX_FILE_SIZE", "MAX_OFFSET"]

#: the largest file RocketMQ maps (``MappedFile.fileSize`` and the configured sizes are ``int``)
MAX_FILE_SIZE = 2**31 - 1
#: the largest offset a log can reach (offsets are ``long``)
MAX_OFFSET = 2**63 - 1
_NAME_DIGITS = {"segment": 20, "index": 17}


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


def parse_file_name(name: str, kind: str = "segment") -> int | None:
    """The number a store file's name spells, or None when ``name`` is not one (see the module doc)."""
    if len(name) != _NAME_DIGITS[kind] or not name.isascii() or not name.isdigit():
        return None
    return int(name)


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
    digits = _NAME_DIGITS[kind]
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
    d = os.path.join(root, "commitlog")
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
    from .consume_queue import consume_queue_dir, consume_queue_ids  # it imports this module

    for topic, qid in consume_queue_ids(root):
        files = list_store_files(consume_queue_dir(root, topic, qid)).check().files
        if files:
            size = files[0].size
            if size < 20:
                raise StoreError(f"{files[0].path}: a consume-queue file of {size} bytes holds no 20-byte unit")
            return size
    return None


def index_dimensions(root: str) -> tuple[int, int] | None:
    """``(max_hash_slot_num, max_index_num)`` from the index files' size (entries = 4 x slots)."""
    d = os.path.join(root, "index")
    sizes = {f.size for f in list_store_files(d, "index").check().files}
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
