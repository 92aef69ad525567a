"""A store file's space: sized, its pages reserved before anything is written through a mapping,
and bytes written whole.

A full disk.  A store through a mapping cannot report ENOSPC: a write (or, on tmpfs, even
a read) of a page that has no block yet kills the process with SIGBUS.  So no page of a
file the store writes through a mapping is written before every block under it is
reserved, and :func:`size_and_reserve` is the one place that sizes such a file and reserves
its blocks -- for segments (a new one in :func:`create_sized`, an existing sparse one,
as RocketMQ makes them, when opened for writing), index files (header and slots when
opened, entries ahead of need: :mod:`rmqstore.engine.index_file`) and the checkpoint
(:mod:`rmqstore.files.checkpoint`).  A disk without room is a :class:`~rmqstore.common.errors.StoreError`
whose message names the disk (:func:`disk_problem`), answered to the put as
CREATE_MAPEDFILE_FAILED.  The price: a new segment takes its whole size on disk at once, as
it will when it is full.

Reservations are whole pages (:func:`reserve_space`): a mapping writes pages, and a file
system's blocks can be smaller (1 KiB on a small ext4), so reserving only the bytes asked
for can leave the rest of a page a hole that the next write into that page needs a block
for.  Reserved space needs nothing more: ext4 and XFS hand it out as unwritten extents,
which a write through the mapping turns into data without allocating (checked on a full
1 KiB-block ext4: a 378-extent reserved file written page by page, in random order);
what did kill a store on a full ext4 was a page never reserved (the checkpoint, and an
index file's first page past 440 bytes of header and slots).
"""

from __future__ import annotations

import errno
import logging
import os

from ..common.errors import StoreError
from ..format.layout import OS_PAGE_SIZE

__all__ = ["create_sized", "disk_problem", "size_and_reserve", "reserve_space", "pwrite_fully"]

log = logging.getLogger(__name__)


def create_sized(path: str, size: int) -> int:
    """Create ``path`` with its full size reserved, in one visible step (temp name, size, rename).

    A crash between open and truncate would otherwise leave a short file that a later
    load refuses; with the rename, the name appears only once the file has its size.
    The blocks are reserved too (:func:`size_and_reserve`), so writing through the mapping
    can never meet a full disk: a file that does not fit is a :class:`StoreError` here,
    not a SIGBUS at the first write into it.
    """
    tmp = f"{path}.{os.getpid()}.creating"
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {disk_problem(path, exc)}") from exc
    try:
        size_and_reserve(fd, path, size)
        os.rename(tmp, path)
    except BaseException as exc:
        os.close(fd)
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise StoreError(f"cannot create {path}: {disk_problem(path, exc)}") from exc
        raise
    return fd


def disk_problem(path: str, exc: OSError) -> str:
    """``exc`` in words that name the disk ``path`` lies on (its mount point and free space)."""
    mount = _mount_point(path)
    try:
        st = os.statvfs(mount)
        free = f", {st.f_bavail * st.f_frsize} bytes free"
    except OSError:
        free = ""
    code = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else "error"
    return f"{exc.strerror or exc} ({code}) on the disk mounted at {mount}{free}"


def _mount_point(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def size_and_reserve(fd: int, path: str, size: int, reserve: int | None = None) -> None:
    """Give the open file ``fd`` at least ``size`` bytes and blocks under every page of its first
    ``reserve`` bytes (default: all of them), before anything is written through a mapping of it.

    The one place a file the store maps for writing is sized and reserved (see the module doc).
    A file with as many blocks as bytes (``st_blocks``: no hole) is left as it is.
    Raises OSError (ENOSPC, EDQUOT...) when the disk cannot hold them.
    """
    st = os.fstat(fd)
    if st.st_size < size:
        os.ftruncate(fd, size)
    if st.st_blocks * 512 < max(st.st_size, size):
        reserve_space(fd, path, size if reserve is None else min(reserve, size))


def reserve_space(fd: int, path: str, size: int, offset: int = 0) -> None:
    """Reserve the blocks of the whole pages that ``[offset, offset + size)`` touches, up to the
    file's end (``posix_fallocate``): a file's holes are a SIGBUS waiting for a full disk, for a
    writer's and (on tmpfs) for a reader's mapping alike.

    Raises OSError (ENOSPC, EDQUOT...) when the disk cannot hold them; filesystems that cannot
    reserve (EOPNOTSUPP, EINVAL) leave the file sparse as before.
    """
    end = min(-(-(offset + size) // OS_PAGE_SIZE) * OS_PAGE_SIZE, max(os.fstat(fd).st_size, offset + size))
    offset -= offset % OS_PAGE_SIZE
    if end <= offset:
        return
    try:
        os.posix_fallocate(fd, offset, end - offset)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            log.warning("%s: the file system cannot reserve space (%s); the file stays sparse",
                        path, exc.strerror)
            return
        raise


def pwrite_fully(fd: int, data: memoryview, offset: int) -> None:
    """``pwrite`` all of ``data`` at ``offset``, again after a short write; an error raises."""
    done = 0
    while done < len(data):
        n = os.pwrite(fd, data[done:], offset + done)
        if n <= 0:
            raise OSError(errno.EIO, f"pwrite wrote nothing at offset {offset + done}")
        done += n
