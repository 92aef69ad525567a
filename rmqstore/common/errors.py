"""The project's error types.

Every failure that bad input can cause surfaces as a subclass of :class:`RmqStoreError`,
so callers (and the fuzz tests) can rely on one ``except`` clause: garbage bytes never
escape as a bare ``IndexError`` or ``struct.error``.
"""

import errno

__all__ = [
    "RmqStoreError",
    "CorruptRecordError",
    "LayoutError",
    "StoreError",
    "StoreStateError",
    "AdminError",
    "AdminTimeoutError",
    "AdminConnectionError",
    "ListenError",
]


class RmqStoreError(Exception):
    """Base class of every error raised by rmqstore."""


class LayoutError(RmqStoreError, ValueError):
    """A value does not fit the on-disk layout (too long, out of range, wrong type)."""


class CorruptRecordError(RmqStoreError, ValueError):
    """Bytes that should hold a record do not (bad magic, impossible size, truncated).

    ``offset`` is the position (file-relative or physical, as the raiser says) where the
    problem was seen, or ``None`` when unknown.
    """

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message if offset is None else f"{message} (at offset {offset})")
        self.offset = offset


class StoreError(RmqStoreError):
    """A store directory cannot be used as asked (missing files, wrong sizes, ...)."""


class StoreStateError(StoreError):
    """The store is not in a state that allows the operation (shut down, read-only, ...)."""


class AdminError(RmqStoreError):
    """An admin request failed (:mod:`rmqstore.admin`): the server refused it -- ``code`` and ``remark`` are
    RocketMQ's response code and remark -- or its answer could not be read (``code`` is None).

    ``address`` is the server asked, ``request`` the request code sent (None when no single request failed).
    """

    def __init__(self, message: str, *, code: int | None = None, remark: str | None = None,
                 address: str | None = None, request: int | None = None):
        super().__init__(message)
        self.code = code
        self.remark = remark
        self.address = address
        self.request = request


class AdminTimeoutError(AdminError, TimeoutError):
    """An admin request got no answer in time."""


class AdminConnectionError(AdminError, ConnectionError):
    """The server of an admin request cannot be reached (refused, unreachable, or it closed the connection)."""


class ListenError(StoreStateError):
    """A server cannot listen on its address (taken by another process, not this machine's, a port
    below 1024).  ``host``, ``port`` and ``errno`` say which and why; ``role`` names the server for
    whoever can say how to move it (the command lines name their flags).  A StoreStateError because a
    master's HA port is part of its store's start."""

    def __init__(self, host: str, port: int, exc: OSError, role: str = "server", what: str = ""):
        self.host, self.port, self.errno, self.role = host, port, exc.errno, role
        self.reason = exc.strerror or str(exc)
        taken = " (another process listens there)" if exc.errno == errno.EADDRINUSE else ""
        super().__init__(f"{what or 'cannot listen on'} {host}:{port}: {self.reason}{taken}")
