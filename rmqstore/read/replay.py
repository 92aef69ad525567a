"""Replaying a dump: records written again, each where it was recorded.

A dump (:mod:`rmqstore.format.dumpfmt`) is the commitlog as JSON lines, blanks included.  The hard
part of loading it back is not writing records -- :meth:`MessageStore.replay_message` keeps
each record's store timestamp, hosts and body CRC -- but making sure the copy *is* the
original: the store chooses where a record lands (the next free byte, or the next segment
when it does not fit), so the loader never tells it where, it checks afterwards.

* A message must land at its recorded offset, with its recorded size; a blank must be
  written where the store's write position is, and must fill exactly what is left of the
  segment.  The first record that does not is an error naming its line: a record or blank
  missing before it, records out of order, or a dump taken from a store with another
  segment size.  So a loaded store has every record at the byte offset it had, and the
  same segment files.
* ``renumber`` gives that up: the store assigns physical and queue offsets, blank lines
  are skipped (the store writes its own), and a prepared-transaction offset that points
  at a loaded record follows that record to its new offset.
* A record whose recorded body CRC does not match its body is copied as it is -- a copy
  never vouches for a damaged body -- and ``warn`` names it; with ``repair`` the body's
  own CRC is written instead and ``report`` says so.

Errors are :class:`ReplayError` (an :class:`~rmqstore.common.errors.RmqStoreError`) naming the
line; bad lines themselves are :class:`~rmqstore.format.dumpfmt.DumpFormatError`.
"""

from __future__ import annotations

from ..format.crc import crc32
from ..format.dumpfmt import DumpFormatError, blank_from_json, json_to_message
from ..common.errors import RmqStoreError

__all__ = ["Loader", "ReplayError"]


class ReplayError(RmqStoreError):
    """A dumped record that cannot be written where it was recorded (the message names its line)."""


class Loader:
    """Replays dumped records into a started store, checking where each one lands.

    A record is written as recorded, its body CRC included: a copy of a damaged record is
    just as damaged (``warn`` names it), never vouched for with a fresh CRC -- unless
    ``repair``, which writes the body's CRC and hands each change to ``report``.
    """

    def __init__(self, store, renumber: bool, repair: bool = False, warn=None, report=None):
        self.store = store
        self.commit_log = store.commit_log
        self.segment_size = store.config.mapped_file_size_commit_log
        self.renumber = renumber
        self.repair = repair
        self.warn = warn or (lambda text: None)
        self.report = report or (lambda text: None)
        self.messages = self.blanks = self.skipped_blanks = self.repaired = 0
        self.moved: dict[int, int] = {}  # recorded offset -> new offset (with --renumber)

    def write_position(self) -> int:
        return self.commit_log.mapped_file_queue.get_max_wrote_position()

    def blank(self, lineno: int, obj: dict) -> None:
        offset, total = blank_from_json(obj)
        if self.renumber:
            self.skipped_blanks += 1
            return
        here = self.write_position()
        if offset != here:
            raise ReplayError(f"line {lineno}: blank record recorded at offset {offset}, but the store's write "
                           f"position is {here}")
        left = self.segment_size - offset % self.segment_size
        if total != left:
            raise ReplayError(f"line {lineno}: the blank record at offset {offset} declares {total} bytes, but "
                           f"{left} bytes are left in this {self.segment_size}-byte segment (was the dump "
                           f"taken from a store with another segment size? see --like / --commitlog-file-size)")
        result = self.commit_log.append_blank_at_current_position()
        if result is None:
            raise ReplayError(f"line {lineno}: could not create a commitlog file for the blank at offset {offset}")
        if result.wrote_offset != offset or result.wrote_bytes != total:
            raise ReplayError(f"line {lineno}: the blank recorded at offset {offset} ({total} bytes) was written at "
                           f"{result.wrote_offset} ({result.wrote_bytes} bytes)")
        self.blanks += 1

    def message(self, lineno: int, obj: dict) -> None:
        msg = json_to_message(obj)
        offset = obj.get("offset")
        if type(offset) is not int:
            raise DumpFormatError("missing field 'offset'" if offset is None else "field 'offset' must be an integer")
        version = obj.get("version", 1)
        if self.renumber:
            msg.queue_offset = None
            if msg.prepared_transaction_offset in self.moved:
                msg.prepared_transaction_offset = self.moved[msg.prepared_transaction_offset]
        elif version != 1:
            raise ReplayError(f"line {lineno}: the record at offset {offset} is a version {version} record; this "
                           f"store writes version 1 (RocketMQ 4.9.8) records only (--renumber converts)")
        else:
            here = self.write_position()
            if offset != here:
                raise ReplayError(f"line {lineno}: record recorded at offset {offset}, but the store's write "
                               f"position is {here} (a record or blank before it is missing or out of order; "
                               f"--renumber lets the store choose)")
        recorded_crc = msg.body_crc
        body_crc = crc32(msg.body)
        if recorded_crc != body_crc and self.repair:
            msg.body_crc = body_crc
        result = self.store.replay_message(msg)
        ar = result.append_result
        if not result.ok or ar is None:
            detail = f": {result.message}" if result.message else ""
            raise ReplayError(f"line {lineno}: the store refused the record recorded at offset {offset}: "
                           f"{result.status.name}{detail}")
        if self.renumber:
            self.moved[offset] = ar.wrote_offset
        else:
            if ar.wrote_offset != offset:
                raise ReplayError(f"line {lineno}: the record recorded at offset {offset} landed at {ar.wrote_offset} "
                               f"(it did not fit in the rest of the segment; is a blank line missing?)")
            total = obj.get("total_size")
            if type(total) is int and ar.wrote_bytes != total:
                raise ReplayError(f"line {lineno}: the record at offset {offset} was {total} bytes when dumped but "
                               f"{ar.wrote_bytes} bytes when written")
        self.messages += 1
        if recorded_crc != body_crc:
            where = f"line {lineno}: the record at offset {offset}" + (
                f" (written at {ar.wrote_offset})" if ar.wrote_offset != offset else "")
            if self.repair:
                self.repaired += 1
                self.report(f"repaired: {where}: body CRC {recorded_crc} -> {body_crc}")
            else:
                self.warn(f"{where} has a bad body CRC (recorded {recorded_crc}, its body gives {body_crc}); "
                          f"copied as recorded (--repair writes the body's CRC)")
