"""What a store directory holds: which entries are its files, and their bytes.

RocketMQ keeps no description of a store next to it: the files are found by listing
folders.  This module is the one place that lists a store folder (:func:`list_store_files`);
the sizes the files show (segment sizes, index dimensions, :class:`StoreSizes`) are read off
them by :mod:`rmqstore.files.store_sizes`, which lists folders with this module (so this one never
imports it).

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
  the file (:class:`~rmqstore.common.errors.StoreError` from :meth:`FolderListing.check`), since
  a store missing one of its files must not be opened as if the file were not there: a
  dangling symlink, a symlink loop, a directory or other non-regular file, a file larger
  than RocketMQ can map (sizes are Java ``int``: at most 2**31 - 1 bytes), or a segment
  whose name offset lies past the largest offset a log can reach (Java ``long``; RocketMQ
  fails to start on such a name).  Symlinks to regular files are followed, as RocketMQ does.

What the system refuses a run (``EMFILE`` at the open-file limit, ``EACCES``, ``EIO``...) is not a
fact about the store: such an OSError is raised as it is, never turned into an unusable entry
or an empty folder (:func:`is_shape_error` tells the two apart).

Sparse files are normal (RocketMQ creates segments with ``setLength``); readers that scan
for non-zero bytes skip holes (:func:`data_extents`), so their time depends on the data
present, not on the size a file claims.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from dataclasses import dataclass

from ..common.errors import StoreError
from .store_paths import NAME_DIGITS, commitlog_dir, consume_queue_root, is_commitlog_dir, parse_file_name

__all__ = ["resolve_store_root", "list_store_files", "FolderListing", "StoreFile", "StrayFile", "UnusableFile",
           "parse_file_name", "grid_problem", "data_extents", "data_in", "first_nonzero", "count_nonzero",
           "file_is_all_zero", "MAX_FILE_SIZE", "MAX_OFFSET", "readable_store_files", "list_names", "queue_folders",
           "is_shape_error"]

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


#: the errors that say what a store's path *is* (a loop, not a folder, gone...), not what the system lets
#: this run do with it; any other OSError (EMFILE, EACCES, EIO, ENOMEM...) is an error of the run, raised
#: as it is and never reported as a fault of the store (:func:`is_shape_error`)
_SHAPE_ERRNOS = frozenset({errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG})


def is_shape_error(exc: OSError) -> bool:
    """Does ``exc`` tell what a store's path is (a fault of the store), rather than what the system
    refused this run (an error of the run: raise it)?"""
    return exc.errno in _SHAPE_ERRNOS


def _stat(path: str):
    """``(stat result, None)`` following symlinks, or ``(None, why the entry cannot be read)``; an
    error of the run (:func:`is_shape_error`) is raised."""
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
        if not is_shape_error(exc):
            raise
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
        if not is_shape_error(exc):
            raise  # (an error of the run: EMFILE, EACCES, EIO...)
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


def readable_store_files(directory, kind: str = "segment") -> FolderListing:
    """:func:`list_store_files`, with a folder that cannot be listed (a loop...) as an empty one."""
    try:
        return list_store_files(directory, kind)
    except StoreError:
        return FolderListing(os.fspath(directory))


def list_names(path) -> list[str]:
    """The names in folder ``path``, sorted; none when it is no folder (a damaged store's reader goes on).
    An error of the run (:func:`is_shape_error`) is raised."""
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        if not is_shape_error(exc):
            raise
        return []


def queue_folders(root: str):
    """Every directory two levels under ``consumequeue/`` (where consume-queue files are), whatever its name."""
    base = consume_queue_root(root)
    for topic in list_names(base):
        for qid in list_names(os.path.join(base, topic)):
            yield os.path.join(base, topic, qid)

