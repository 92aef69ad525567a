"""The listening end of the remoting layer: :class:`RemotingServer` binds, accepts, caps the connections.

Each accepted socket becomes a :class:`~rmqstore.remoting.server.Connection` (the reading,
answering and limits of one socket live there); this module holds what spans them: the
processors by code, the RPC hooks, the unsent budget they share, and the connection cap --
at the cap a newcomer is not refused: the oldest connection that never completed a frame is
evicted, else the one idle longest (one INFO line each), so connections that send nothing
cannot starve the ones that do (RocketMQ has no cap).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable

from ..common.errors import ListenError
from .budget import UnsentBudget
from .recorder import FrameRecorder
from .server import READ_CHUNK, Connection, Limits, Processor, RpcHook
from .throttle import LogThrottle

__all__ = ["RemotingServer"]

log = logging.getLogger("rmqstore.remoting.server")  # the lines the connections log too: one logger


class RemotingServer:
    """Accepts connections on ``host:port`` and hands requests to the processors by code."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, limits: Limits | None = None,
                 on_close: Callable[[Connection], None] | None = None):
        self.host = host
        self.port = port
        self.limits = limits or Limits()
        self.processors: dict[int, Processor] = {}
        self.default_processor: Processor | None = None
        self.connections: set[Connection] = set()
        self.on_close = on_close
        self.frame_recorder: FrameRecorder | None = None  # see FrameRecorder; off by default
        self.rpc_hooks: list[RpcHook] = []  # see RpcHook; run in order before every request's processor
        self.log_throttle = LogThrottle(log)  # lines about the peers' mistakes and our bugs, rate-limited
        self.budget = UnsentBudget(self.limits.unsent_budget, self.log_throttle)  # the answers not yet sent
        self._server: asyncio.AbstractServer | None = None
        self._sock: socket.socket | None = None
        #: what this server is to its owner ("broker", "name server"): named when it cannot listen
        self.role = "server"

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    def bind(self) -> int:
        """Bind the listening socket now (the port is known before :meth:`start` accepts); an address
        that cannot be had raises :class:`~rmqstore.common.errors.ListenError` naming it and :attr:`role`."""
        if self._sock is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self.port))
            except OSError as exc:
                sock.close()
                raise ListenError(self.host, self.port, exc, self.role) from None
            self._sock = sock
            self.port = sock.getsockname()[1]
        return self.port

    async def start(self) -> None:
        self.bind()
        self._server = await asyncio.start_server(self._accept, sock=self._sock, limit=READ_CHUNK)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _accept(self, reader, writer) -> None:
        if len(self.connections) >= self.limits.max_connections and not self._make_room(writer):
            writer.close()
            return
        conn = Connection(reader, writer, self.processors, self.limits, self.default_processor, self.frame_recorder,
                          self.rpc_hooks, self.log_throttle, accepted=True, budget=self.budget)
        self.connections.add(conn)
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)
            if self.on_close is not None:
                try:
                    self.on_close(conn)
                except Exception:
                    log.exception("connection close listener failed")

    def _make_room(self, writer: asyncio.StreamWriter) -> bool:
        """At the cap, evict for a newcomer: the oldest connection that never completed a frame, else the one
        idle longest.  False when there is none (a cap of 0)."""
        now = asyncio.get_running_loop().time()
        silent = [c for c in self.connections if not c.frames_received]
        if silent:
            victim = min(silent, key=lambda c: c.opened_at)
            why = f"never completed a frame, connected {now - victim.opened_at:.1f} s ago"
        elif self.connections:
            victim = min(self.connections, key=lambda c: c.last_active)
            why = f"idle for {now - victim.last_active:.1f} s"
        else:
            self.log_throttle("refusing", logging.WARNING, "refusing a connection: the cap is %d",
                              self.limits.max_connections)
            return False
        self.connections.discard(victim)
        newcomer = writer.get_extra_info("peername") or ("?", 0)
        self.log_throttle("evicting", logging.INFO, "%d connections (the cap): evicting %s (%s) for %s:%s",
                          self.limits.max_connections, victim.remote_addr_text, why, newcomer[0], newcomer[1])
        victim.evict()
        return True

    @property
    def unsent_bytes(self) -> int:
        """What the connections' transports hold unsent, as last measured (never below the truth)."""
        return self.budget.total

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.budget.close()
        await asyncio.gather(*(conn.close() for conn in list(self.connections)))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        elif self._sock is not None:
            self._sock.close()
        self._sock = None
        self.log_throttle.flush()
