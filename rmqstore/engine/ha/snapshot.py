"""One snapshot of a master/slave pair: the numbers a replication view shows, as plain data.

Replication is offsets (:mod:`rmqstore.engine.ha`), so a pair's whole state fits in a few
numbers per side:

* each store's commitlog: ``wrote`` (appended), ``max_offset`` (readable: what a slave
  can be sent and a reader can read), ``flushed`` (known to be on disk) and
  ``dispatched`` (what the reput service has put into consume queues and the index);
* the master's :meth:`HAService.positions` -- per connected slave the offset it
  ``requested`` first, the offset ``pushed`` up to and the offset it ``acked`` -- and
  ``push2_slave_max_offset``, the highest ack, which is what SYNC_MASTER puts wait for;
* the SYNC_MASTER waits: puts ``waiting`` now, answers per status, the last outcome and
  how long it waited (:meth:`HAService.note_replica_outcome`);
* the slave's HA client: master address, connected or not, its last report.

:func:`replication_snapshot` reads them without locks, from whichever threads are
running, so the numbers of one snapshot can be a few microseconds apart; each one is a
value the store really had.  A store that was shut down says so (``running`` False) and
keeps its last positions.  Nothing here writes to a store.
"""

from __future__ import annotations

import time

__all__ = ["replication_snapshot", "store_side"]


def store_side(store) -> dict:
    """One store's role, commitlog positions and (for a master or slave) its HA state."""
    queue = store.commit_log.mapped_file_queue
    cfg = store.config
    running = not getattr(store, "read_only", False) and not store.shutdown_flag and not store.closed
    reput = getattr(store, "reput_message_service", None)
    side = {
        "root": str(store.root),
        "role": cfg.broker_role.value,
        "running": running,
        "file_size": cfg.mapped_file_size_commit_log,
        "min_offset": max(queue.get_min_offset(), 0),
        "wrote": queue.get_max_wrote_position(),
        "max_offset": store.get_max_phy_offset(),
        "flushed": queue.flushed_where,
        "dispatched": reput.reput_from_offset if reput is not None else None,
        "flush_disk_type": cfg.flush_disk_type.value,
    }
    ha = store.ha_service
    if ha is None:
        return side
    pos = ha.positions()
    if "client" in pos:  # a slave: its HA client
        side["client"] = pos["client"]
        return side
    side.update(listen=pos["listen"], push2_slave_max_offset=pos["push2_slave_max_offset"], slaves=pos["slaves"],
                waiting=ha.waiting_puts, outcomes=dict(ha.replica_outcomes), last_replica=ha.last_replica,
                sync_flush_timeout=cfg.sync_flush_timeout)
    return side


def replication_snapshot(master=None, slave=None) -> dict:
    """``{"time", "master", "slave"}``: :func:`store_side` of each (None for a side not given)."""
    return {"time": time.time(),
            "master": store_side(master) if master is not None else None,
            "slave": store_side(slave) if slave is not None else None}
