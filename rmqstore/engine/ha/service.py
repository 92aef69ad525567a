"""HAService: the master's listening port, its slaves, and what they have acknowledged.

The service owns three things: the acceptor (a thread on the HA port that turns each
accepted socket into an :class:`~rmqstore.engine.ha.connection.HAConnection`), the
:class:`~rmqstore.engine.ha.transfer.GroupTransferService` that answers SYNC_MASTER puts, and,
on a slave, the :class:`~rmqstore.engine.ha.client.HAClient`.

``push2SlaveMaxOffset`` is the one number the put path needs: the highest offset any
slave has acknowledged.  It only grows.  ``is_slave_ok`` is RocketMQ's test before a
SYNC_MASTER put waits: at least one slave connected, and the put's end no more than
``ha_slave_fallbehind_max`` bytes ahead of that number; otherwise the put answers
SLAVE_NOT_AVAILABLE at once instead of waiting for a slave that cannot catch up in time.

The put path tells the service how each SYNC_MASTER wait ended
(:meth:`HAService.note_replica_outcome`): a count per status and the last outcome with
its wait, so views and tools see the waits without tracing every put.
"""

from __future__ import annotations

import logging
import socket
import threading

from ...common.config import BrokerRole
from ...common.errors import ListenError
from .client import HAClient
from .connection import HAConnection
from .transfer import GroupTransferService, ReplicaRequest, WaitNotifyObject

__all__ = ["HAService", "AcceptSocketService"]

log = logging.getLogger(__name__)


class AcceptSocketService:
    """Listens on the HA port and hands each slave to a new HAConnection."""

    def __init__(self, service, host: str, port: int):
        self.service = service
        self.host = host
        self.port = port
        self._sock: socket.socket | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def begin_accept(self) -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:  # (ha_listen_host/ha_listen_port)
            sock.close()
            raise ListenError(self.host, self.port, exc, "master", "cannot listen for slaves on") from None
        sock.listen(16)
        sock.settimeout(0.2)
        self.port = sock.getsockname()[1]  # the real port when 0 asked for an ephemeral one
        self._sock = sock

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="AcceptSocketService", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, addr = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if not self._stopped.is_set():
                    log.exception("AcceptSocketService: accept failed")
                    self._stopped.wait(0.1)
                continue
            log.info("HAService receives a new connection from %s", addr)
            try:
                conn = HAConnection(self.service, sock, addr)
            except OSError:
                log.exception("new HAConnection failed")
                sock.close()
                continue
            self.service.add_connection(conn)
            conn.start()

    def shutdown(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()


class HAService:
    """Replication of one store: master (acceptor + connections) or slave (client)."""

    def __init__(self, store):
        self.store = store
        cfg = store.config
        self.connections: list[HAConnection] = []
        self._conn_lock = threading.Lock()
        self._offset_lock = threading.Lock()
        self.push2_slave_max_offset = 0
        self._outcome_lock = threading.Lock()
        #: SYNC_MASTER puts answered, per status name (PUT_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)
        self.replica_outcomes: dict[str, int] = {}
        #: the last one: ``{"status", "waited_ms", "next_offset"}`` (None before the first)
        self.last_replica: dict | None = None
        self.wait_notify = WaitNotifyObject()
        self.group_transfer_service = GroupTransferService(self, lambda: store.commit_log.tracer)
        self.accept_service = None
        self.ha_client = None
        if cfg.broker_role is BrokerRole.SLAVE:
            self.ha_client = HAClient(store)
        else:
            self.accept_service = AcceptSocketService(self, cfg.ha_listen_host, cfg.ha_listen_port)

    # -- lifecycle -----------------------------------------------------------------
    def begin_accept(self) -> None:
        """Bind the HA port (raises ListenError, a StoreStateError, naming the port when it cannot)."""
        if self.accept_service is not None:
            self.accept_service.begin_accept()

    @property
    def listen_address(self) -> str | None:
        """``host:port`` slaves connect to (the real port when 0 was asked for)."""
        acc = self.accept_service
        return f"{acc.host}:{acc.port}" if acc is not None and acc._sock is not None else None

    def start(self) -> None:
        if self.accept_service is not None:
            if self.accept_service._sock is None:
                self.begin_accept()
            self.accept_service.start()
        self.group_transfer_service.start()
        if self.ha_client is not None:
            self.ha_client.start()

    def shutdown(self) -> None:
        if self.ha_client is not None:
            self.ha_client.shutdown()
        if self.accept_service is not None:
            self.accept_service.shutdown()
        self.destroy_connections()
        self.group_transfer_service.shutdown()

    # -- connections -----------------------------------------------------------------
    def add_connection(self, conn: HAConnection) -> None:
        with self._conn_lock:
            self.connections.append(conn)

    def remove_connection(self, conn: HAConnection) -> None:
        with self._conn_lock:
            if conn in self.connections:
                self.connections.remove(conn)

    def destroy_connections(self) -> None:
        with self._conn_lock:
            conns, self.connections = self.connections, []
        for c in conns:
            c.shutdown()

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    def update_master_address(self, address: str) -> None:
        if self.ha_client is not None:
            self.ha_client.update_master_address(address)

    # -- what the put path asks ------------------------------------------------------
    def is_slave_ok(self, master_put_where: int) -> bool:
        return (self.connection_count > 0 and master_put_where - self.push2_slave_max_offset
                < self.store.config.ha_slave_fallbehind_max)

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset``: raise push2SlaveMaxOffset (never lower it)."""
        if offset <= self.push2_slave_max_offset:
            return
        with self._offset_lock:
            if offset > self.push2_slave_max_offset:
                self.push2_slave_max_offset = offset
        self.group_transfer_service.notify_transfer_some()

    def submit(self, next_offset: int, timeout_ms: int, on_done=None) -> ReplicaRequest:
        """Queue a SYNC_MASTER put's wait and push its bytes now: from this thread where it can
        (:meth:`HAConnection.push_now`), else by waking the write threads.  ``on_done`` (an
        async put's) is called with the request when it is answered."""
        request = ReplicaRequest(next_offset, timeout_ms, on_done)
        self.group_transfer_service.put_request(request)
        pushed = True
        for conn in tuple(self.connections):
            pushed = conn.push_now() and pushed
        if not pushed:
            self.wait_notify.wakeup_all()
        return request

    def note_replica_outcome(self, status, waited_ms: float, next_offset: int | None) -> None:
        """How a SYNC_MASTER put's wait for its slave ended (``next_offset`` None: it did not wait)."""
        last = {"status": status.name, "waited_ms": waited_ms, "next_offset": next_offset}
        with self._outcome_lock:
            self.replica_outcomes[status.name] = self.replica_outcomes.get(status.name, 0) + 1
            self.last_replica = last

    @property
    def waiting_puts(self) -> int:
        """SYNC_MASTER puts waiting for a slave's ack right now."""
        return len(self.group_transfer_service.pending)

    def positions(self) -> dict:
        """Per slave the requested, pushed and acknowledged offsets; the slave side's own view."""
        with self._conn_lock:
            conns = [c.positions() for c in self.connections]
        out = {"role": self.store.config.broker_role.value, "listen": self.listen_address,
               "master_max_offset": self.store.get_max_phy_offset(),
               "push2_slave_max_offset": self.push2_slave_max_offset, "slaves": conns}
        if self.ha_client is not None:
            out["client"] = self.ha_client.positions()
        return out
