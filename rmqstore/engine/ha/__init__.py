"""Master and slave: RocketMQ 4.x HA replication, on RocketMQ 4.9.8's own wire.

The hard idea: **offsets are the whole protocol**.  Master and slave hold the same
commitlog -- the same bytes at the same offsets, blanks included -- so the only thing
they ever need to say is a number.  The slave says "my log ends at N"; the master sends
the bytes from N on, prefixed with N and their count.  There is no message framing, no
record parsing on the wire, no sequence number and no handshake: a record may be cut
between two transfers, and the slave does not care, because it appends bytes, not
messages, and only at its own end (:mod:`rmqstore.engine.ha.client`).

**Why the slave's report is the ack.**  The slave appends a transfer and then reports its
new max offset.  A report of N therefore proves that every byte before N is in the
slave's commitlog; it is at once the next request ("send from N") and the ack of all
before it.  A SYNC_MASTER put that ended at offset E waits until some slave has
reported at least E (:mod:`rmqstore.engine.ha.transfer`) -- one report answers every put that
ended before it, which is why the wait batches like group commit.  The report says
"appended", not "flushed": the slave's own flush policy decides when the bytes reach
its disk, exactly as in RocketMQ.

The pieces: :mod:`~rmqstore.engine.ha.frames` (the two frames, declared once),
:mod:`~rmqstore.engine.ha.service` (HAService: the port, the connections, push2SlaveMaxOffset),
:mod:`~rmqstore.engine.ha.connection` (one slave, as the master sees it),
:mod:`~rmqstore.engine.ha.transfer` (GroupTransferService, WaitNotifyObject),
:mod:`~rmqstore.engine.ha.client` (HAClient, the slave),
:mod:`~rmqstore.engine.ha.snapshot` (a pair's positions as plain data, for views and tools).

Pairing with Apache RocketMQ 4.9.8.  The frames are RocketMQ's own, so a real RocketMQ
slave replicates from our master and ours from a real master:

* a RocketMQ slave from our master -- the slave's ``broker.conf`` has
  ``brokerRole=SLAVE``, ``brokerId`` > 0 and ``haMasterAddress=<our host>:<our
  ha_listen_port>`` (or learns it from the name server, where the broker registers its
  HA address); our store runs with ``broker_role`` ASYNC_MASTER or SYNC_MASTER,
  ``ha_enable=True`` and ``ha_listen_host`` reachable from it.
* our slave from a RocketMQ master -- the master's ``broker.conf`` has
  ``brokerRole=SYNC_MASTER`` or ``ASYNC_MASTER`` and ``haListenPort`` (default
  listenPort + 1, 10912); our store runs with ``broker_role=SLAVE`` and
  ``ha_master_address=<master host>:<haListenPort>``.

Both sides must use the same ``mapped_file_size_commit_log`` (``mappedFileSizeCommitLog``):
a transfer never crosses a file, and an empty slave starts at the master's last file.
Only 4.x "master/slave" HA is spoken; 5.x's auto-switch HA (handshakes, epochs) and
DLedger are not.
"""

from .frames import SLAVE_REPORT, TRANSFER_HEADER, frames_markdown
from .client import HAClient, parse_address
from .connection import HAConnection
from .service import AcceptSocketService, HAService
from .snapshot import replication_snapshot, store_side
from .transfer import GroupTransferService, ReplicaRequest, WaitNotifyObject

__all__ = ["HAService", "HAConnection", "HAClient", "AcceptSocketService", "GroupTransferService",
           "ReplicaRequest", "WaitNotifyObject", "TRANSFER_HEADER", "SLAVE_REPORT", "frames_markdown",
           "parse_address", "replication_snapshot", "store_side"]
