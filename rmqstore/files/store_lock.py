"""One writer per store directory: ``<root>/lock`` and this process's registry of writers.

A writable store takes ``<root>/lock`` as RocketMQ does: a POSIX record lock on its first
byte (the lock Java's ``FileLock`` takes), which keeps every other process out.  A POSIX
lock belongs to the process, though: a second writable
:class:`~rmqstore.store.MessageStore` on the same directory in this process would take it
again and succeed.  So each writable root is also registered in this process, under its real
path and its (device, inode) -- a symlink, another spelling or a bind mount of the same
directory is the same store.  The registry is asked first, then the file; either refusal is a
:class:`~rmqstore.common.errors.StoreStateError` raised before anything in the directory is touched.
An existing lock file keeps its content; closing the descriptor drops the lock.

:func:`lock_holder` is the reader's side: which process (if any) holds a store's lock, asked
without taking it -- so that a reader can tell a running store (its abort file and the file
made ahead are what a running store has) from one that crashed (the same files, nobody holding
the lock).

:class:`StoreLock` is one store root's lock, which :class:`~rmqstore.store.MessageStore` holds
(``load`` takes it, ``shutdown``/``close`` release it).
"""

from __future__ import annotations

import os
import struct
import threading

from ..common.errors import StoreStateError
from .store_paths import lock_path

__all__ = ["StoreLock", "lock_holder", "process_command"]


class _WritersRegistry:
    """The store roots this process has open for writing.

    The lock file's POSIX record lock keeps other processes out, but it belongs to the
    process: a second writable ``MessageStore`` on the same directory in this process
    would take it again silently.  So each writable root is registered here, under its
    real path and its (device, inode) -- a symlink, another spelling or a bind mount of
    the same directory is the same store.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict = {}  # key -> the MessageStore holding it

    def take(self, store: "StoreLock") -> tuple:
        """Register ``store.root`` (which must exist) for ``store`` or raise :class:`StoreStateError`."""
        st = os.stat(store.root)
        keys = (("path", os.path.realpath(store.root)), ("inode", st.st_dev, st.st_ino))
        with self._lock:
            for key in keys:
                holder = self._held.get(key)
                if holder is not None and holder is not store:
                    raise StoreStateError(
                        f"{store.root} is in use: it is already open for writing in this process"
                        + (f" (as {holder.root})" if holder.root != store.root else ""))
            for key in keys:
                self._held[key] = store
        return keys

    def holds(self, root: str) -> bool:
        """Is ``root`` open for writing in this process?"""
        try:
            st = os.stat(root)
        except OSError:
            return False
        with self._lock:
            return ("path", os.path.realpath(root)) in self._held or ("inode", st.st_dev, st.st_ino) in self._held

    def release(self, store: "StoreLock", keys) -> None:
        with self._lock:
            for key in keys:
                if self._held.get(key) is store:
                    del self._held[key]


_WRITERS = _WritersRegistry()


def _posix_lock_holder(path: str) -> int | None:
    """The pid of another process holding a POSIX lock on ``path``, or None.  Takes no lock (F_GETLK;
    a lock of this process is never reported by it)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock {short l_type; short l_whence; off_t l_start; off_t l_len; pid_t l_pid;}
        query = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
        try:
            result = fcntl.fcntl(fd, fcntl.F_GETLK, query + bytes(8))
        except OSError:
            return None
        if struct.unpack_from("h", result)[0] == fcntl.F_UNLCK:
            return None
        return struct.unpack_from("hhqqi", result)[4]
    finally:
        os.close(fd)


def lock_holder(root: str) -> int | None:
    """The pid of the live process that has the store at ``root`` open for writing: another process
    holding ``<root>/lock`` (as a running broker does, ours or RocketMQ's), or this process's own pid
    when a writable store of this process has it; None when nobody does.  Takes no lock, writes nothing."""
    if _WRITERS.holds(root):
        return os.getpid()
    path = lock_path(root)
    return _posix_lock_holder(path) if os.path.isfile(path) else None


def process_command(pid: int, limit: int = 120) -> str | None:
    """The command line of process ``pid`` (Linux ``/proc``), cut to ``limit`` characters; None if unknown."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    text = " ".join(" ".join(a.decode("utf-8", "replace").split()) for a in raw.split(b"\0") if a)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class StoreLock:
    """The lock of the writable store at ``root``: taken by :meth:`take`, let go by :meth:`release`."""

    def __init__(self, root: str):
        self.root = root
        self._fd: int | None = None  # <root>/lock, held from take() to release()
        self._keys: tuple = ()  # this root's entries in the in-process registry of writers

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> None:
        """Lock ``<root>/lock`` like RocketMQ (a POSIX record lock, which Java's FileLock also uses)."""
        import fcntl

        if self._fd is not None:
            return
        keys = _WRITERS.take(self)  # this process first: the POSIX lock would not see a second writer here
        try:
            fd = os.open(lock_path(self.root), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                os.close(fd)
                raise StoreStateError(f"{self.root} is in use: another process holds its lock file") from None
            if os.pread(fd, 4, 0) != b"lock":  # RocketMQ's content; an existing lock file stays untouched
                os.pwrite(fd, b"lock", 0)
        except BaseException:
            _WRITERS.release(self, keys)
            raise
        self._fd = fd
        self._keys = keys

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the POSIX lock
            _WRITERS.release(self, self._keys)
            self._keys = ()
