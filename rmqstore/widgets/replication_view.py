"""ReplicationView: a master and its slave side by side, and the offsets replication runs on.

Replication is offsets (:mod:`rmqstore.engine.ha`): the master pushes commitlog bytes from where
the slave's log ends, the slave appends them and reports its new end, and that report is
the ack a SYNC_MASTER put waits for.  The view shows, for each side, the commitlog's
``wrote`` / ``max_offset`` (readable) / ``flushed`` / ``dispatched`` positions on one
common scale; between them the master's connections (per slave the offset it requested
first, what was pushed, what it acknowledged) and ``push2SlaveMaxOffset``; under the
master the SYNC_MASTER waits -- puts waiting now, answers per status (PUT_OK,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE), the last outcome and how long it waited; under
the slave its HA client (connected, last report, reconnects).

The numbers come from :func:`rmqstore.engine.ha.replication_snapshot`; this class only carries
them in synced traits (``master``, ``slave``: plain dicts, offsets as decimal strings),
so a static page renders the same view with no kernel.

``ReplicationView.from_stores(master, slave)`` takes a snapshot; ``refresh()`` takes
another; ``watch(interval)`` keeps taking them from a background thread while puts run
(``stop()`` or ``close()`` ends it).  Either store may be None (a master alone; a slave
whose master is elsewhere), and a store that was shut down shows as stopped with its
last positions; ``refresh(slave=new_slave)`` follows a restarted one.
"""

from __future__ import annotations

import anywidget
import traitlets as t

from rmqstore.engine.ha import replication_snapshot

from ._assets import css, esm
from ._common import i64
from ._live import LiveView

__all__ = ["ReplicationView", "OFFSET_KEYS"]

#: the snapshot's 64-bit commitlog offsets: sent to JavaScript as decimal strings
OFFSET_KEYS = frozenset({"min_offset", "wrote", "max_offset", "flushed", "dispatched", "push2_slave_max_offset",
                         "requested", "pushed", "acked", "reported", "next_offset"})


def _for_js(value):
    """The snapshot with every offset as a decimal string (exact in JavaScript beyond 2**53)."""
    if isinstance(value, dict):
        return {k: (i64(v) if k in OFFSET_KEYS and isinstance(v, int) else _for_js(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_for_js(v) for v in value]
    return value


class ReplicationView(LiveView, anywidget.AnyWidget):
    """Master and slave side by side: positions, per-slave pushed/acked offsets, SYNC_MASTER waits."""

    _esm = esm("replication_view.js")
    _css = css("replication_view.css")

    title = t.Unicode("").tag(sync=True)
    master = t.Dict(allow_none=True, default_value=None).tag(sync=True)
    slave = t.Dict(allow_none=True, default_value=None).tag(sync=True)
    time = t.Float(0.0).tag(sync=True)
    live = t.Bool(False).tag(sync=True)
    updates = t.Int(0).tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._stores = (None, None)

    # -- snapshots -----------------------------------------------------------------
    @classmethod
    def from_snapshot(cls, snapshot: dict, title: str = "") -> "ReplicationView":
        """From a :func:`~rmqstore.engine.ha.replication_snapshot` dict."""
        view = cls(title=title)
        view._show(snapshot)
        return view

    @classmethod
    def from_stores(cls, master=None, slave=None, title: str = "master and slave") -> "ReplicationView":
        """A snapshot of a running pair (either may be None)."""
        view = cls(title=title)
        view._stores = (master, slave)
        view.refresh()
        return view

    def _show(self, snapshot: dict) -> bool:
        master, slave = _for_js(snapshot.get("master")), _for_js(snapshot.get("slave"))
        if master == self.master and slave == self.slave:
            return False
        with self.hold_sync():
            self.master = master
            self.slave = slave
            self.time = snapshot.get("time", 0.0)
            self.updates = self.updates + 1
        return True

    def refresh(self, master=None, slave=None) -> bool:
        """A new snapshot (``master``/``slave`` replace the stores followed); True if anything moved."""
        old_master, old_slave = self._stores
        self._stores = (master if master is not None else old_master, slave if slave is not None else old_slave)
        if self._stores == (None, None):
            raise ValueError("no store: pass a master and/or a slave")
        return self._show(replication_snapshot(*self._stores))

    # -- live ----------------------------------------------------------------------
    def watch(self, interval: float = 0.2, master=None, slave=None) -> "ReplicationView":
        """Refresh every ``interval`` seconds (at least 0.02) from a background thread until
        :meth:`stop`; a new state is sent only when a number moved.  Returns self."""
        self.stop()
        if master is not None or slave is not None:
            self.refresh(master, slave)
        self._start_live(self.refresh, max(0.02, float(interval)), "ReplicationView.watch")
        return self
