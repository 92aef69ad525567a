"""Connections, the server and the client of the remoting layer (asyncio).

One :class:`Connection` class serves both ends of a socket.  Its read loop cuts frames
(:class:`~rmqstore.remoting.frame.FrameDecoder`) and sorts each by its flag:

* a **response** completes the future of the request with the same opaque in the
  connection's table of open requests (:meth:`Connection.invoke`); a response nobody waits
  for any more (timed out) is dropped;
* a **request** goes to the processor registered for its code.  A processor that can answer
  at once returns its response (a send whose put is done, under ASYNC_FLUSH): the reader
  answers it without a task, and the answers to the requests cut from one read leave in one
  write (at most ``HELD_MAX`` bytes are held, and never while the reader waits) -- the Java
  client's threads share one connection, so a read often holds several sends.  A processor
  that cannot returns an awaitable (a coroutine), which runs in a task of its own, so a slow
  request (a long-polling pull) never holds up the next one on the same socket.
  The processor's response goes back with the request's opaque and serialize type; a
  oneway request gets none.  An unknown code is answered REQUEST_CODE_NOT_SUPPORTED with
  RocketMQ's remark, an exception inside a processor SYSTEM_ERROR with a remark naming
  it -- the connection and the server live on.  An :class:`~rmqstore.common.errors.RmqStoreError`
  (a header field missing or not a number: the peer's mistake, refused on purpose) is one
  log line; any other exception is a bug of ours and logs its traceback.

Either side can send requests (the broker asks a producer CHECK_TRANSACTION_STATE over
the producer's own connection), which is why the same class is the client.

**Limits** -- all per :class:`Limits`, so that no peer, however hostile, can take the server
down or lock other clients out:

* *bytes*: a frame is at most 16 MiB, checked from its length field before anything is
  buffered.  Bytes that are not a frame close the connection, as Netty's decoder does in
  RocketMQ (after a bad length there is no way back to a frame boundary) -- but the frames
  cut before them are answered first: the requests get ``close_linger`` seconds, and so does
  the flush of the answers before the socket is aborted;
* *work*: at most ``max_in_flight`` requests of a connection are processed at a time, their
  bodies at most ``max_in_flight_bytes`` (the reader waits; the peer's TCP window does the rest);
* *time*: an accepted connection owes its first whole frame ``first_frame_timeout`` (10 s)
  after connecting -- RocketMQ's clients connect when they have a request to send and send it
  at once, then heartbeat every 30 s -- and every frame must be whole ``frame_timeout`` (30 s)
  after its *first* byte, however the bytes trickle in.  Otherwise a connection may idle
  ``idle_timeout`` (RocketMQ's 120 s) since its last whole frame or since the peer last took
  some of our bytes.  A client's own connection owes no first frame.  One watchdog timer
  a connection keeps these deadlines (:meth:`Connection._watch`), not a timer per read;
* *connections*: a server (:mod:`.listener`) holds at most ``max_connections``.  At the cap a newcomer
  is not refused: the server evicts the oldest connection that never completed a frame, else the one
  idle longest (one INFO line each), so connections that send nothing cannot starve the ones
  that do.  RocketMQ has no cap;
* *memory*: answers the peer has not read yet wait in the connection's transport.  Above
  ``connection_unsent_high`` (4 MiB) a connection reads no further request until its
  transport is down to a quarter of that (the transport's own marks: ``drain`` waits for the
  same), and all connections together share ``unsent_budget`` (64 MiB): past it, the ones
  holding the most stop reading until the total is back under half
  (:mod:`rmqstore.remoting.budget`, which states the bound).  After dispatching a request the
  reader lets it answer before it checks for room again, so a burst of requests in one read
  cannot outrun the check.  :meth:`Connection.account_unsent` is the one place that measures.

Lines about the peers' mistakes and our own bugs go through the server's
:class:`~rmqstore.remoting.throttle.LogThrottle`: the first few of a kind per minute, then a
count.  ``server.frame_recorder`` (:mod:`rmqstore.remoting.recorder`, off by default) keeps the
last request frames of each code as received, for a view of the wire.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..common.errors import RmqStoreError
from .codes import RPC_ONEWAY, ResponseCode
from .frame import FrameDecoder, RemotingCommand, RemotingFrameError, encode_frame
from .recorder import FrameRecorder
from .budget import UnsentBudget
from .throttle import LogThrottle

__all__ = ["Limits", "Connection", "Processor", "RpcHook", "RemotingTimeoutError", "READ_CHUNK", "HELD_MAX"]

log = logging.getLogger(__name__)

#: a processor: (connection, request) -> response, None (no response), or an awaitable of either
Processor = Callable[["Connection", RemotingCommand], "RemotingCommand | None | Awaitable[RemotingCommand | None]"]

#: RocketMQ's ``RPCHook.doBeforeRequest``: sees every request before its processor; a response it returns
#: is the answer (a refusal) and the processor is not called; None lets the request through
RpcHook = Callable[["Connection", RemotingCommand], "RemotingCommand | None"]

#: bytes a connection reads at a time (also its stream reader's buffer limit)
READ_CHUNK = 64 * 1024
#: bytes of answers a reader holds for one write (:meth:`Connection._write_held`); a bigger answer goes at once
HELD_MAX = 64 * 1024


def _awaitable(result: Any) -> bool:
    """Whether a processor's result is still to be awaited (not an answer given at once)."""
    return asyncio.iscoroutine(result) or isinstance(result, asyncio.Future)


class _ReadLate(Exception):
    """A read's deadline passed (the watchdog's exception in the connection's reader; the message says why)."""


class RemotingTimeoutError(TimeoutError):
    """A request got no response in time."""


@dataclass
class Limits:
    max_connections: int = 1024  # at the cap a newcomer evicts a connection (see the module's essay)
    max_in_flight: int = 256
    max_in_flight_bytes: int = 64 * 1024 * 1024  # bodies of requests being processed, per connection
    idle_timeout: float = 120.0  # RocketMQ's serverChannelMaxIdleTimeSeconds
    close_linger: float = 5.0  # a closing connection's time to answer what it was asked and flush the answers
    first_frame_timeout: float = 10.0  # an accepted connection's first whole frame, from the connect
    frame_timeout: float = 30.0  # each frame, from its first byte to its last
    unsent_budget: int = 64 * 1024 * 1024  # answers written but not sent, all connections of a server together
    connection_unsent_high: int = 4 * 1024 * 1024  # one connection's; above it, it reads on at a quarter of it


def _send_small_frames_at_once(writer: asyncio.StreamWriter) -> None:
    """TCP_NODELAY on a connection's socket, as RocketMQ's Netty channels have it: with Nagle's algorithm
    a small frame written while another is unacknowledged waits for the peer's delayed ACK (up to 40 ms).
    asyncio sets it only on sockets whose protocol number says TCP; ours says so for both ends here."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # a socket that is already gone


class Connection:
    """One socket: frames in, frames out, requests both ways matched by opaque."""

    _opaques = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 processors: dict[int, Processor], limits: Limits, default_processor: Processor | None = None,
                 frame_recorder: FrameRecorder | None = None, rpc_hooks: list[RpcHook] | None = None,
                 log_throttle: LogThrottle | None = None, *, accepted: bool = False,
                 budget: UnsentBudget | None = None):
        self.frame_recorder = frame_recorder
        self.log_throttle = log_throttle or LogThrottle(log)  # the server's, shared by its connections
        self.rpc_hooks = rpc_hooks if rpc_hooks is not None else []  # the server's list, shared
        self.reader = reader
        self.writer = writer
        self.processors = processors
        self.default_processor = default_processor
        self.limits = limits
        _send_small_frames_at_once(writer)
        peer = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        self.remote_address: tuple[str, int] = (peer[0], peer[1])
        self.pending: dict[int, asyncio.Future] = {}
        self._slots = asyncio.Semaphore(limits.max_in_flight)
        self._in_flight_bytes = 0
        self._bytes_freed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self.closed = asyncio.Event()
        self.attributes: dict = {}  # what upper layers remember about the peer (client id, ...)
        self.accepted = accepted  # a server's end: its peer owes a first frame within first_frame_timeout
        self.opened_at = self.last_active = asyncio.get_running_loop().time()
        self.frames_received = 0  # whole frames, requests and responses
        self._frame_started: float | None = None  # when the first byte of the frame being received came
        self.budget = budget  # the server's account of unsent bytes (None: this connection's own limit only)
        self._watchdog: asyncio.TimerHandle | None = None  # the read deadline's one timer (_watch)
        self._reading = False  # serve waits in a read (the watchdog acts only then)
        self._held: list[bytes] = []  # answers given at once to the requests of the read being served
        self._held_size = 0  # ... their bytes (at most HELD_MAX)
        self.unsent = 0  # what the transport held when last measured (account_unsent)
        # the transport pauses writing (drain waits) above our own high-water mark, resumes at a quarter of it
        writer.transport.set_write_buffer_limits(high=limits.connection_unsent_high)

    @property
    def remote_addr_text(self) -> str:
        host, port = self.remote_address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    # -- reading ------------------------------------------------------------------------------
    async def serve(self) -> None:
        """Read frames until the peer goes away, a limit is hit or the bytes are bad."""
        decoder = FrameDecoder(self.frame_recorder)
        loop = asyncio.get_running_loop()
        try:
            while True:
                if (stuck := await self._wait_for_room()) is not None:
                    if stuck:
                        self.log_throttle("closing late", logging.INFO, "closing %s: %s", self.remote_addr_text, stuck)
                        self.writer.transport.abort()  # it reads nothing: no use waiting to flush
                    break
                self._watch(loop)
                self._reading = True
                try:
                    data = await self.reader.read(READ_CHUNK)
                except _ReadLate as late:
                    self.log_throttle("closing late", logging.INFO, "closing %s: %s", self.remote_addr_text, late)
                    break
                finally:
                    self._reading = False
                if not data:
                    break
                bad = None
                try:
                    commands = decoder.feed(data)
                except RemotingFrameError as exc:
                    commands, bad = list(exc.commands), exc
                self._note_frames(len(commands), decoder.buffered, loop.time())
                for cmd in commands:
                    if not cmd.is_response and await self._wait_for_room() is not None:
                        break  # the next read says why
                    await self._dispatch(cmd)
                self._write_held()  # the answers given at once to this read's requests, in one write
                if bad is not None:
                    self.log_throttle("closing for bad bytes", logging.WARNING, "closing %s for bad bytes: %s",
                                      self.remote_addr_text, bad)
                    await self._finish_requests()
                    break
        except (ConnectionError, OSError) as exc:
            self.log_throttle("connection error", logging.INFO, "connection %s: %s", self.remote_addr_text, exc)
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            await self.close()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Before a read: make sure the watchdog fires no later than the read's deadline (:meth:`_read_deadline`).
        One timer a connection, moved only when the deadline comes earlier than it is set for; one that fires
        early (the peer was active since) sets itself again -- no timer per read."""
        due = loop.time() + self._read_deadline(loop.time())[0]
        if self._watchdog is None or self._watchdog.when() > due:
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._watchdog = loop.call_at(due, self._on_watchdog, loop)

    def _on_watchdog(self, loop: asyncio.AbstractEventLoop) -> None:
        self._watchdog = None
        if not self._reading:
            return  # serve sets it again before its next read
        wait, why = self._read_deadline(loop.time())
        if wait > 0:
            self._watch(loop)
        else:
            self.reader.set_exception(_ReadLate(why))  # the read raises it; serve closes the connection

    async def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            future = self.pending.pop(cmd.opaque, None)
            if future is not None and not future.done():
                future.set_result(cmd)
            return
        size = len(cmd.body)
        if self._slots.locked() or self._in_flight_bytes + size > self.limits.max_in_flight_bytes:
            self._write_held()  # the answers already given go out before the reader waits
        while self._in_flight_bytes and self._in_flight_bytes + size > self.limits.max_in_flight_bytes:
            self._bytes_freed.clear()
            await self._bytes_freed.wait()
        await self._slots.acquire()
        self._in_flight_bytes += size
        result = self._start_processor(cmd)
        if not _awaitable(result):  # answered at once: no task, the answer leaves with the read's others
            self._task_done(None, size)
            self._answer(cmd, result, hold=True)
            return
        task = asyncio.get_running_loop().create_task(self._process(cmd, result))
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(t, size))
        self._write_held()
        await asyncio.sleep(0)  # let the request answer (when it can at once) before the next check for room

    async def _wait_for_room(self) -> str | None:
        """Until this connection may take another request (None): its transport holds at most
        ``connection_unsent_high`` and, while the server is over its unsent budget, no more than a peer that keeps
        up.  Else why to close: the peer took none of our bytes for ``idle_timeout`` seconds (taking some counts
        as activity), or "" when the connection is closing anyway."""
        loop = asyncio.get_running_loop()
        while True:
            if self.writer.transport.is_closing():
                return ""
            self.account_unsent()
            own = self.unsent > self.limits.connection_unsent_high
            if not own and (self.budget is None or self.budget.may_read(self)):
                return None
            wait = self.last_active + self.limits.idle_timeout - loop.time()
            if wait <= 0:
                return f"it took none of {self.unsent} unsent bytes for {self.limits.idle_timeout:g} s"
            self._write_held()  # held answers go out before the wait
            if own:
                try:
                    await asyncio.wait_for(self.writer.drain(), wait)  # the transport resumes at its low-water mark
                except asyncio.TimeoutError:
                    pass
            else:
                assert self.budget is not None
                await self.budget.wait_for_room(self, wait)

    def account_unsent(self) -> int:
        """The one place that measures this connection's unsent bytes -- what its transport has not written yet
        -- and reports them to the server's budget.  Fewer than last time: the peer is reading (activity)."""
        size = self.writer.transport.get_write_buffer_size()
        if size < self.unsent:
            self.last_active = asyncio.get_running_loop().time()
        self.unsent = size
        if self.budget is not None:
            self.budget.account(self, size)
        return size

    def _read_deadline(self, now: float) -> tuple[float, str]:
        """(seconds left, why the connection closes when they run out) for the next read: the first frame is
        due ``first_frame_timeout`` after an accepted connect, a begun frame ``frame_timeout`` after its first
        byte (a peer trickling bytes cannot stretch it), and otherwise the peer may idle ``idle_timeout``."""
        limits = self.limits
        if self._frame_started is not None:
            due = self._frame_started + limits.frame_timeout
            why = f"a frame unfinished {limits.frame_timeout:g} s after its first byte"
        else:
            due = self.last_active + limits.idle_timeout
            why = f"idle for {limits.idle_timeout:g} s"
        if self.accepted and not self.frames_received and self.opened_at + limits.first_frame_timeout < due:
            due = self.opened_at + limits.first_frame_timeout
            why = f"no whole frame {limits.first_frame_timeout:g} s after connecting"
        return due - now, why

    def _note_frames(self, frames: int, buffered: int, now: float) -> None:
        """Frames completed and the bytes of a begun one after a read (the clocks of :meth:`_read_deadline`)."""
        if frames:
            self.frames_received += frames
            self.last_active = now
        if not buffered:
            self._frame_started = None
        elif frames or self._frame_started is None:
            self._frame_started = now  # a new frame began in this read

    def evict(self) -> None:
        """Close at once, sending nothing more (a newcomer needs the slot); :meth:`serve` then ends as usual."""
        self.writer.transport.abort()
        if self.budget is not None:
            self.budget.wake(self)  # if it waits for room, it stops waiting

    async def _finish_requests(self) -> None:
        """Let the requests being processed answer (at most ``close_linger`` seconds): the peer's frames
        before its bad bytes get their responses before the connection closes."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.limits.close_linger)

    def _task_done(self, task: asyncio.Task | None, size: int) -> None:
        self._tasks.discard(task)
        self._slots.release()
        self._in_flight_bytes -= size
        self._bytes_freed.set()

    async def _process(self, cmd: RemotingCommand, pending: Awaitable) -> None:
        if self._answer(cmd, await self._finish_processor(cmd, pending)):
            try:
                await self.writer.drain()  # a peer that does not read holds its own slots, not our memory
            except (ConnectionError, OSError):
                pass

    def _answer(self, cmd: RemotingCommand, response: RemotingCommand | None, hold: bool = False) -> bool:
        """Send the processor's response to ``cmd`` (none to a oneway request) with the request's opaque and
        serialize type; with ``hold``, kept for the read's one write (:meth:`_write_held`).  Whether one went."""
        if response is None or cmd.is_oneway:
            return False
        response.opaque = cmd.opaque
        response.serialize_type = cmd.serialize_type
        return self.send(response, hold)

    async def run_processor(self, cmd: RemotingCommand) -> RemotingCommand | None:
        """The processor's response to ``cmd`` (errors turned into error responses); an RPC hook's
        refusal instead, when one refuses."""
        result = self._start_processor(cmd)
        return await self._finish_processor(cmd, result) if _awaitable(result) else result

    def _start_processor(self, cmd: RemotingCommand) -> Any:
        """Run the RPC hooks and call the processor: its response (or None), or an awaitable of it when it
        cannot answer at once; an exception becomes its error response (:meth:`_failed`)."""
        processor = self.processors.get(cmd.code, self.default_processor)
        try:
            for hook in self.rpc_hooks:
                refusal = hook(self, cmd)
                if refusal is not None:
                    return refusal
            if processor is None:
                return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
            return processor(self, cmd)
        except Exception as exc:
            return self._failed(cmd, exc)

    async def _finish_processor(self, cmd: RemotingCommand, pending: Awaitable) -> RemotingCommand | None:
        try:
            return await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._failed(cmd, exc)

    def _failed(self, cmd: RemotingCommand, exc: Exception) -> RemotingCommand:
        """The answer to a request whose processor raised ``exc``: SYSTEM_ERROR naming it.  An
        :class:`RmqStoreError` is a refusal on purpose (a header's values): one line, no traceback; any other
        is a bug of ours: answer, never crash, and show where it happened."""
        if isinstance(exc, RmqStoreError):
            self.log_throttle("request answered SYSTEM_ERROR", logging.WARNING,
                              "request %s from %s answered SYSTEM_ERROR: %s: %s", cmd.code, self.remote_addr_text,
                              type(exc).__name__, exc)
        else:
            self.log_throttle("processor failed", logging.ERROR, "processing request %s from %s failed", cmd.code,
                              self.remote_addr_text, exc_info=True)  # called in the except block
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    # -- writing ------------------------------------------------------------------------------
    def send(self, cmd: RemotingCommand, hold: bool = False) -> bool:
        """Queue one frame (with ``hold``, for the reader's next :meth:`_write_held`); False when the connection is
        closed or the frame cannot be encoded."""
        if self.closed.is_set() or self.writer.is_closing():
            return False
        try:
            frame = encode_frame(cmd)
        except RemotingFrameError as exc:
            self.log_throttle("response not encodable", logging.ERROR, "cannot send to %s: %s",
                              self.remote_addr_text, exc)
            if cmd.is_response:
                self.send(RemotingCommand(ResponseCode.SYSTEM_ERROR, remark=str(exc), opaque=cmd.opaque,
                                          flag=cmd.flag, serialize_type=cmd.serialize_type), hold)
            return False
        if hold and self._held_size + len(frame) <= HELD_MAX:
            self._held.append(frame)
            self._held_size += len(frame)
            return True
        self._write_held()  # in order, before a big one
        self.writer.write(frame)
        self.account_unsent()
        return True

    def _write_held(self) -> None:
        """Write the answers the reader held (:meth:`_dispatch`: those given at once) in one go.  The reader
        calls it after each read's requests and before it waits for anything, so an answer is never held while
        the loop runs other work."""
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held.clear()
            self._held_size = 0
            if not (self.closed.is_set() or self.writer.is_closing()):
                self.writer.write(data)
            self.account_unsent()

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a request and wait for the response with its opaque."""
        request.opaque = next(self._opaques) & 0x7FFFFFFF
        future = asyncio.get_running_loop().create_future()
        self.pending[request.opaque] = future
        if not self.send(request):
            self.pending.pop(request.opaque, None)
            raise ConnectionError(f"connection to {self.remote_addr_text} is closed")
        await self.writer.drain()
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise RemotingTimeoutError(f"no response to {request.code} from {self.remote_addr_text} "
                                       f"in {timeout} s") from None
        finally:
            self.pending.pop(request.opaque, None)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        request.opaque = next(self._opaques) & 0x7FFFFFFF
        request.flag |= RPC_ONEWAY
        if not self.send(request):
            raise ConnectionError(f"connection to {self.remote_addr_text} is closed")
        await self.writer.drain()

    async def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError(f"connection to {self.remote_addr_text} closed"))
        self.pending.clear()
        for task in list(self._tasks):
            task.cancel()
        self.writer.close()  # sends what is buffered first ...
        try:
            await asyncio.wait_for(self.writer.wait_closed(), self.limits.close_linger)
        except asyncio.TimeoutError:
            self.writer.transport.abort()  # ... unless the peer does not read it
        except (ConnectionError, OSError):
            pass
        self.account_unsent()  # closed: nothing held any more
