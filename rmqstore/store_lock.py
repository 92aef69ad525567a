"""One writer per store directory: ``<root>/lock`` and this process's registry of writers.

A writable store takes ``<root>/lock`` as RocketMQ does: a POSIX record lock on its first
byte (the lock Java's ``FileLock`` takes), which keeps every other process out.  A POSIX
lock belongs to the process, though: a second writable
:class:`~rmqstore.store.MessageStore` on the same directory in this process would take it
again and succeed.  So each writable root is also registered in this process, under its real
path and its (device, inode) -- a symlink, another spelling or a bind mount of the same
directory is the same store.  The registry is asked first, then the file; either refusal is a
:class:`~rmqstore.errors.StoreStateError` raised before anything in the directory is touched.
An existing lock file keeps its content; closing the descriptor drops the lock.

:class:`StoreLock` is one store root's lock, which :class:`~rmqstore.store.MessageStore` holds
(``load`` takes it, ``shutdown``/``close`` release it).
"""

from __future__ import annotations

import os
import threading

from .errors import StoreStateError
from .store_paths import lock_path

__all__ = ["StoreLock"]


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

    def release(self, store: "StoreLock", keys) -> None:
        with self._lock:
            for key in keys:
                if self._held.get(key) is store:
                    del self._held[key]


_WRITERS = _WritersRegistry()


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
