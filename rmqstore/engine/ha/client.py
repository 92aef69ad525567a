"""HAClient: the slave's side -- connect, report, append exactly at the end, report again.

The slave keeps one number in mind: its own max commitlog offset.  It sends it when it
connects, after every append that moved it, and at least every
``ha_send_heartbeat_interval`` ms (RocketMQ's client sends its first report only after
that interval; ours at once, which a RocketMQ master takes the same way).  The master's
frames must start exactly there: a header whose offset is anything else -- a stale
push, a master that lost data, garbage -- closes the connection, and so does a
body size no frame can have.  An empty slave (max offset 0) takes whatever the master
starts with, which is the start of the master's last file.

Appends go through :meth:`MessageStore.append_to_commit_log` (RocketMQ's
``appendToCommitLog``): the bytes land in the commitlog under the put lock and the
reput service, woken, dispatches them into consume queues and the index exactly as it
does for a master's own puts -- a record cut in two by a transfer is dispatched when
its second half arrives.

No frame from the master for ``ha_housekeeping_interval`` closes the connection.  A
closed or refused connection is retried every ``ha_reconnect_interval`` ms (RocketMQ:
5 s, fixed); a restarted master is thus found again, and the slave resumes from its
own max offset.
"""

from __future__ import annotations

import logging
import socket
import time

from ...common.errors import StoreError
from ..flush import ServiceThread
from .frames import SLAVE_REPORT, TRANSFER_HEADER

__all__ = ["HAClient", "parse_address"]

log = logging.getLogger(__name__)

_HEADER = TRANSFER_HEADER.size
_unpack_header = TRANSFER_HEADER.struct.unpack_from
_pack_report = SLAVE_REPORT.struct.pack
#: RocketMQ's HAClient.READ_MAX_BUFFER_SIZE: no frame can be larger
MAX_FRAME_BODY = 4 * 1024 * 1024 - _HEADER


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets or bare) as a (host, port) pair; StoreError when it is not one."""
    host, sep, port = str(address).strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StoreError(f"HA master address {address!r} is not host:port")
    return host, int(port)


class HAClient(ServiceThread):
    """Replicates from the master at ``ha_master_address`` into the slave's store."""

    name = "HAClient"

    def __init__(self, store):
        super().__init__()
        self.store = store
        self.config = store.config
        self.master_address: str | None = self.config.ha_master_address or None
        self.sock: socket.socket | None = None
        self.current_reported_offset = 0
        self.connects = 0
        self.last_close_reason: str | None = None
        self._buf = bytearray()
        self._last_write = self._last_read = 0.0
        self._connected_to: str | None = None  # the address the open connection went to

    # -- lifecycle -----------------------------------------------------------------
    def shutdown(self) -> None:
        super().shutdown()
        self.close_master("the slave shuts down")

    def update_master_address(self, address: str | None) -> None:
        """A new master (from the name server, or a caller): safe from any thread.  A connection to
        the old one is shut down here, which wakes the loop, and closed by the loop's own thread."""
        if address != self.master_address:
            log.info("update master address, OLD: %s NEW: %s", self.master_address, address)
            self.master_address = address
            sock = self.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.wakeup()

    @property
    def connected(self) -> bool:
        return self.sock is not None

    def positions(self) -> dict:
        return {"master": self.master_address, "connected": self.connected, "connects": self.connects,
                "reported": self.current_reported_offset, "max_offset": self.store.get_max_phy_offset(),
                "last_close_reason": self.last_close_reason}

    # -- connection ------------------------------------------------------------------
    def connect_master(self) -> bool:
        if self.sock is not None:
            return True
        if not self.master_address:
            return False
        try:
            host, port = parse_address(self.master_address)
            sock = socket.create_connection((host, port), timeout=3)
        except (OSError, StoreError) as exc:
            log.info("HAClient: cannot connect to master %s: %s", self.master_address, exc)
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(min(1.0, self.config.ha_send_heartbeat_interval / 1000.0))
        self.sock = sock
        self._connected_to = host_port = self.master_address
        self.connects += 1
        self._buf.clear()
        self._last_read = time.monotonic()
        self.current_reported_offset = self.store.get_max_phy_offset()
        if not self.report(self.current_reported_offset):
            return False
        log.info("HAClient connected to master %s, reported %d", host_port,
                 self.current_reported_offset)
        return True

    def close_master(self, reason: str) -> None:
        sock, self.sock = self.sock, None
        if sock is None:
            return
        self.last_close_reason = reason
        quiet = self.is_stopped() or self.store.shutdown_flag  # our own shutdown is no news
        log.log(logging.INFO if quiet else logging.WARNING, "HAClient: connection to master %s closed: %s",
                self.master_address, reason)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        self._buf.clear()

    def report(self, offset: int) -> bool:
        try:
            self.sock.sendall(_pack_report(offset))
        except OSError as exc:
            self.close_master(f"report failed: {exc}")
            return False
        self._last_write = time.monotonic()
        return True

    def report_plus(self) -> bool:
        """Report the max offset if it moved since the last report (RocketMQ's reportSlaveMaxOffsetPlus)."""
        current = self.store.get_max_phy_offset()
        if current > self.current_reported_offset:
            self.current_reported_offset = current
            return self.report(current)
        return True

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        cfg = self.config
        while not self.is_stopped():
            try:
                if not self.connect_master():
                    self.wait_for_running(cfg.ha_reconnect_interval)
                    continue
                self._step()
            except Exception as exc:  # a bug must not kill replication for good
                log.exception("HAClient failed")
                self.close_master(f"error: {exc}")
                self._stop_event.wait(cfg.ha_reconnect_interval / 1000.0)
        self.close_master("the slave shuts down")

    def _moved(self) -> str | None:
        if self._connected_to != self.master_address:
            return "the master address changed"
        return None

    def _step(self) -> None:
        cfg = self.config
        moved = self._moved()
        if moved:
            self.close_master(moved)
            return
        now = time.monotonic()
        if now - self._last_write > cfg.ha_send_heartbeat_interval / 1000.0:
            if not self.report(self.current_reported_offset):
                return
        try:
            data = self.sock.recv(256 * 1024)
        except socket.timeout:
            data = None
        except OSError as exc:
            self.close_master(self._moved() or f"read failed: {exc}")
            return
        if data == b"":
            self.close_master(self._moved() or "the master closed the connection")
            return
        if data:
            self._last_read = time.monotonic()
            self._buf += data
            problem = self.dispatch_read_request()
            if problem:
                self.close_master(problem)
                return
        elif time.monotonic() - self._last_read > cfg.ha_housekeeping_interval / 1000.0:
            self.close_master(f"no frame from the master for {cfg.ha_housekeeping_interval} ms")

    def dispatch_read_request(self) -> str | None:
        """Append every complete frame in the buffer; answer why to close, or None."""
        buf = self._buf
        pos = 0
        problem = None
        while len(buf) - pos >= _HEADER:
            master_offset, size = _unpack_header(buf, pos)
            slave_max = self.store.get_max_phy_offset()
            if slave_max != 0 and slave_max != master_offset:
                problem = f"the master pushed offset {master_offset}, the slave's max offset is {slave_max}"
                break
            if not 0 <= size <= MAX_FRAME_BODY:
                problem = f"the master sent a frame of {size} bytes"
                break
            end = pos + _HEADER + size
            if len(buf) < end:
                break
            with memoryview(buf) as view, view[pos + _HEADER:end] as body:  # released before buf shrinks
                ok = self.store.append_to_commit_log(master_offset, body)
            if not ok:
                problem = ("the slave store is shutting down" if self.store.shutdown_flag
                           else f"appending {size} bytes at {master_offset} failed")
                break
            pos = end
            if not self.report_plus():
                return "report failed"
        del buf[:pos]
        return problem
