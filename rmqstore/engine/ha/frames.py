"""The two frames of the HA wire, declared once as field tables.

RocketMQ 4.9.8's replication protocol has exactly two frames and no handshake, no
version, no magic.  Master to slave: a 12-byte header -- the commitlog offset the bytes
start at and how many bytes follow -- then that many bytes of commitlog, copied
verbatim from the master's files.  Slave to master: one 8-byte number, the slave's
max commitlog offset.  Everything is big-endian, as ``java.nio.ByteBuffer`` writes it.

The tables below are :class:`~rmqstore.format.layout.FixedLayout` rows like every on-disk
layout of the store; the code packs and parses through them, and
:func:`frames_markdown` renders them for the docs, so what the docs say is what the
wire carries.
"""

from __future__ import annotations

from ...format.layout import Field, FixedLayout, layout_markdown

__all__ = ["TRANSFER_HEADER", "SLAVE_REPORT", "frames_markdown"]

#: master -> slave (HAConnection.WriteSocketService): header, then ``body_size`` commitlog bytes
TRANSFER_HEADER = FixedLayout("HATransferHeader", (
    Field("physical_offset", "i64", "thisOffset / masterPhyOffset",
          "Commitlog offset of the first byte that follows; must equal the slave's max offset."),
    Field("body_size", "i32", "size / bodySize",
          "Commitlog bytes that follow (at most haTransferBatchSize, never across a file); 0 = heartbeat."),
), "Master to slave: this 12-byte header, then body_size bytes copied verbatim from the master's commitlog.")

#: slave -> master (HAClient.reportSlaveMaxOffset): the slave's max offset, which is also its ack
SLAVE_REPORT = FixedLayout("HASlaveReport", (
    Field("max_offset", "i64", "reportOffset / slaveAckOffset",
          "The slave's max commitlog offset: where the master must push from, and the ack of all before it."),
), "Slave to master: 8 bytes, sent on connect, after every append and at least every haSendHeartbeatInterval.")


def frames_markdown() -> str:
    """Both frames as Markdown tables (what the docs show)."""
    parts = []
    for layout in (TRANSFER_HEADER, SLAVE_REPORT):
        parts.append(f"**{layout.name}** ({layout.size} bytes) -- {layout.doc}\n\n{layout_markdown(layout)}")
    return "\n\n".join(parts)
