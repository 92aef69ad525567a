"""The client end of the remoting layer: one :class:`~rmqstore.remoting.server.Connection` dialled out.

The same connection class serves both ends (a server may send requests too: the broker asks
a producer CHECK_TRANSACTION_STATE over the producer's own connection); this module only
connects it and runs its read loop.  A client's connection owes the peer no first frame and
has no server-wide budget, only its own limits.
"""

from __future__ import annotations

import asyncio

from .codes import SerializeType
from .frame import RemotingCommand
from .server import READ_CHUNK, Connection, Limits, Processor

__all__ = ["RemotingClient"]


class RemotingClient:
    """A client connection (tests, a broker registering with a name server)."""

    def __init__(self, processors: dict[int, Processor] | None = None, limits: Limits | None = None):
        self.processors = dict(processors or {})
        self.limits = limits or Limits(idle_timeout=3600.0)
        self.connection: Connection | None = None
        self._task: asyncio.Task | None = None

    async def connect(self, host: str, port: int) -> "RemotingClient":
        reader, writer = await asyncio.open_connection(host, port, limit=READ_CHUNK)
        self.connection = Connection(reader, writer, self.processors, self.limits)
        self._task = asyncio.get_running_loop().create_task(self.connection.serve())
        return self

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0,
                     serialize_type: int = SerializeType.JSON) -> RemotingCommand:
        request.serialize_type = serialize_type
        return await self.connection.invoke(request, timeout)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        await self.connection.invoke_oneway(request)

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
