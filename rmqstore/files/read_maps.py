"""Read-only maps of a store's files, a bounded number at a time: map, read, unmap.

A read-only walk of a store -- ``rmqstore verify``, ``inspect``, ``msg``, a store opened
read-only -- may look at every one of its files, and a store may have any number of them.
Each mapping holds a file descriptor (CPython's ``mmap`` keeps a duplicate of the one it was
made from), and a process may hold only so many (``ulimit -n``: 1,024 is common, 256 is
not rare).  Holding every file mapped for the whole walk therefore fails on a large store
-- and fails as ``EMFILE`` on whichever file comes next, which a reader must not mistake
for a fault of that file.

So a :class:`ReadMap` is mapped when its bytes are asked for (:attr:`ReadMap.buf`) and may
be unmapped again to make room: at most :func:`map_budget` maps are open at once in the
process (a quarter of the open-file limit, at least :data:`MIN_MAPS`), and the next one
unmaps one not used lately (a clock: each map has a used bit, set on every use and cleared
as the hand passes).  A map somebody is still using is never unmapped: not while a buffer
of it is exported (a ``memoryview``, a slice being decoded -- ``mmap.close`` refuses), and
not while anything besides its :class:`ReadMap` holds the map object itself (a local
variable of a walk, a generator over its units): CPython's reference count says so, and
the map is taken out of its :class:`ReadMap` *before* the count is read, so a thread cannot
pick it up in between.  Only when every map is in use does a new one exceed the budget.

Nothing here writes; files are opened ``O_RDONLY`` and mapped ``ACCESS_READ``.  An error of
the system (``EMFILE``, ``EACCES``, ``EIO``...) is raised as the ``OSError`` it is: an error of
the run, never a verdict on the store.
"""

from __future__ import annotations

import logging
import mmap
import os
import resource
import sys
import threading

from .store_dir import data_extents

__all__ = ["ReadMap", "map_budget", "MIN_MAPS", "MAX_MAPS"]

log = logging.getLogger(__name__)

#: the fewest maps a process keeps open (a walk keeps a segment, a queue file and an index file at once)
MIN_MAPS = 8
#: the most (an address space of 1,024 GiB-sized segments is still far from a 64-bit one's end)
MAX_MAPS = 1024


def map_budget() -> int:
    """How many :class:`ReadMap` s may be mapped at once: a quarter of the open-file limit, within
    [:data:`MIN_MAPS`, :data:`MAX_MAPS`] (the other descriptors stay for sockets, logs, listings)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY:
        return MAX_MAPS
    return max(MIN_MAPS, min(MAX_MAPS, soft // 4))


class ReadMap:
    """One file, mapped read-only while it is used (see the module doc).

    ``buf`` is the mapping (``b""`` for an empty file), mapped again if it was unmapped; take it
    afresh for each piece of work rather than keeping it.  ``extents`` are the file's data regions
    (:func:`rmqstore.files.store_dir.data_extents`, None: all of it).  :meth:`close` unmaps it for good.
    """

    __slots__ = ("path", "size", "_extents", "_map", "_used", "_closed", "__weakref__")

    def __init__(self, path: str, size: int):
        self.path = path
        self.size = size
        self._extents: list[tuple[int, int]] | None = None if size else []
        self._map: mmap.mmap | None = None
        self._used = False
        self._closed = False

    @property
    def extents(self) -> list[tuple[int, int]] | None:
        """The file's data regions (None: the file system cannot tell, every byte counts as data)."""
        if self._extents is None:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                self._extents = data_extents(fd, self.size)
            finally:
                os.close(fd)
        return self._extents

    @property
    def buf(self):
        m = self._map
        if m is None:
            if not self.size:
                return b""
            m = _BUDGET.map(self)
        self._used = True
        return m

    @property
    def mapped(self) -> bool:
        return self._map is not None

    def close(self) -> None:
        """Unmap for good (a buffer still exported keeps the map until it is released)."""
        self._closed = True
        _BUDGET.forget(self)

    def _open(self) -> mmap.mmap:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            m = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
            if self._extents is None:
                self._extents = data_extents(fd, self.size)
            return m
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"ReadMap({self.path!r}, {self.size}, mapped={self._map is not None})"


class _Budget:
    """The maps open in this process, and the clock hand that picks one to unmap."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ring: list[ReadMap] = []
        self._hand = 0
        self._limit: int | None = None
        self._over_said = False

    @property
    def limit(self) -> int:
        if self._limit is None:
            self._limit = map_budget()
        return self._limit

    def map(self, rm: ReadMap) -> mmap.mmap:
        with self._lock:
            m = rm._map
            if m is not None:
                return m
            if rm._closed:
                raise ValueError(f"{rm.path}: the map was closed")
            while len(self._ring) >= self.limit and self._unmap_one():
                pass
            m = rm._open()
            rm._map = m
            self._ring.append(rm)
            return m

    def forget(self, rm: ReadMap) -> None:
        with self._lock:
            if rm._map is not None and self._unmap(rm):
                self._ring.remove(rm)

    def _unmap_one(self) -> bool:
        """Unmap the first map the hand finds neither used lately nor in use; False: every one is in use."""
        ring = self._ring
        for _ in range(2 * len(ring)):
            self._hand %= len(ring)
            rm = ring[self._hand]
            if rm._used:
                rm._used = False
                self._hand += 1
                continue
            if self._unmap(rm):
                del ring[self._hand]
                return True
            self._hand += 1
        if not self._over_said:
            self._over_said = True
            log.warning("all %d maps in use: mapping one more than the budget", len(ring))
        return False

    @staticmethod
    def _unmap(rm: ReadMap) -> bool:
        """Unmap ``rm`` unless its map is in use (see the module doc); True when it was unmapped."""
        m = rm._map
        rm._map = None  # first: a thread that reads it now maps anew (and waits for the lock)
        if sys.getrefcount(m) > 2:  # (``m`` here and getrefcount's argument): somebody holds it
            rm._map = m
            return False
        try:
            m.close()  # type: ignore[union-attr]
        except BufferError:  # a buffer of it is exported
            rm._map = m
            return False
        return True


_BUDGET = _Budget()
