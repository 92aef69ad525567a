"""ConsumeQueue: a per-queue index of 20-byte units pointing into the commitlog.

Consumers do not scan the commitlog.  For every message, dispatch appends one unit to
``consumequeue/<topic>/<queueId>/`` -- commitlog offset (8), record size (4), tags hash
code (8) -- so message number *n* of a queue is the unit at logical byte ``n * 20``.
A consumer that asks for offset *n* reads one unit, then one record: two reads, no search.

The files form a :class:`~rmqstore.files.mapped_file_queue.MappedFileQueue` of their own (named
by logical byte offset).  A queue whose first unit is not number 0 (its early files were
deleted, or it was rebuilt from a later point) starts with *pre-blank* units
``(0, Integer.MAX_VALUE, 0)`` up to the first real one, as RocketMQ's ``fillPreBlank``.

A unit is valid when ``offset >= 0 and size > 0``; recovery stops at the first other.
``max_physic_offset`` -- the end of the last message this queue knows -- lets dispatch
skip what a queue already holds, so re-dispatching after a crash is idempotent.

A unit whose file cannot be created (a full disk; the file's blocks are reserved when it
is created, :mod:`rmqstore.files.mapped_file`) is a StoreError naming the disk, not a False
that dispatch would log and skip: dispatch stops there (:mod:`rmqstore.engine.dispatch`).
"""

from __future__ import annotations

import contextlib
import logging
import os


from ..common import native
from ..common.errors import StoreError
from ..format.layout import CONSUME_QUEUE_UNIT
from ..files.mapped_file_queue import MappedFileQueue
from ..files.store_paths import consume_queue_dir, consume_queue_ids  # (re-exported: their home is store_paths)

__all__ = ["ConsumeQueue", "CQ_STORE_UNIT_SIZE", "consume_queue_dir", "consume_queue_ids", "iter_units"]

log = logging.getLogger(__name__)

CQ_STORE_UNIT_SIZE = CONSUME_QUEUE_UNIT.size  # 20
_UNIT = CONSUME_QUEUE_UNIT.struct
_PRE_BLANK = _UNIT.pack(0, 0x7FFFFFFF, 0)
_INT_MAX = 0x7FFFFFFF


def iter_units(buf, start: int = 0, end: int | None = None):
    """Yield ``(position, offset, size, tags_code)`` for each unit of a buffer (pure)."""
    end = len(buf) if end is None else end
    end -= (end - start) % CQ_STORE_UNIT_SIZE
    for pos in range(start, end, CQ_STORE_UNIT_SIZE):
        offset, size, tags = _UNIT.unpack_from(buf, pos)
        yield pos, offset, size, tags


def _unit_run(buf, end: int, phy_limit: int, use_native: bool = True):
    """(stop, (offset, size) of the unit before it, or None): the valid units pointing before ``phy_limit``
    at the start of ``buf[:end]`` -- compiled (``rmqstore._native._cdecode.unit_run``) where it is built and
    ``use_native`` (the store's ``StoreConfig.native``) does not ask for the pure path."""
    c = native.module("_cdecode", use_native)
    if c is not None:
        return c.unit_run(buf, end, phy_limit)
    stop, last = 0, None
    for pos, offset, size, _ in iter_units(buf, 0, min(end, len(buf))):
        if offset < 0 or size <= 0 or offset >= phy_limit:
            break
        stop, last = pos + CQ_STORE_UNIT_SIZE, (offset, size)
    return stop, last


_NO_LIMIT = (1 << 63) - 1


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, mapped_file_size: int, *,
                 read_only: bool = False, native: bool = True):
        self.topic = topic
        self.native = native  # False: recovery scans the units in Python (StoreConfig.native)
        self.queue_id = queue_id
        self.store_path = consume_queue_dir(root, topic, queue_id)
        self.mapped_file_size = mapped_file_size
        self.mapped_file_queue = MappedFileQueue(self.store_path, mapped_file_size, read_only=read_only,
                                                 random_access=True)
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    # -- load and recover ----------------------------------------------------------
    def load(self) -> bool:
        return self.mapped_file_queue.load()

    def recover(self) -> None:
        """Find the last valid unit (from the third-last file on) and cut what follows."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        index = max(len(files) - 3, 0)
        process_offset = files[index].file_from_offset
        pos_in_file = 0
        while True:
            mf = files[index]
            pos_in_file, last = _unit_run(mf.mapped, self.mapped_file_size, _NO_LIMIT, self.native)
            if last is not None:
                self.max_physic_offset = last[0] + last[1]
            process_offset = mf.file_from_offset
            if pos_in_file == self.mapped_file_size and index + 1 < len(files):
                index += 1
                continue
            break
        process_offset += pos_in_file
        self.mapped_file_queue.flushed_where = process_offset
        self.mapped_file_queue.committed_where = process_offset
        self.mapped_file_queue.truncate_dirty_files(process_offset)

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop units that point at or past ``phy_offset`` (the commitlog was cut there)."""
        queue = self.mapped_file_queue
        self.max_physic_offset = phy_offset
        while queue.mapped_files:
            mf = queue.mapped_files[-1]
            stop, last = _unit_run(mf.mapped, self.mapped_file_size, phy_offset, self.native)
            mf.set_positions(stop)
            if last is not None:
                self.max_physic_offset = last[0] + last[1]
            first = next(iter_units(mf.mapped, 0, min(self.mapped_file_size, len(mf.mapped))), None)
            if first is not None and first[1] < phy_offset:
                return  # the file keeps its units up to stop
            queue.delete_last_mapped_file()  # the whole file is dirty

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Set the first valid queue offset: the first unit pointing at or after ``phy_min_offset``."""
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return
        for pos, offset, _size, _ in iter_units(mf.mapped, 0, mf.read_position):
            if offset >= phy_min_offset:
                self.min_logic_offset = mf.file_from_offset + pos
                return

    # -- dispatch ------------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append the unit of queue offset ``cq_offset`` (RocketMQ's putMessagePositionInfo)."""
        if offset + size <= self.max_physic_offset:
            log.debug("maybe try to build consume queue repeatedly %d %d", self.max_physic_offset, offset)
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        queue = self.mapped_file_queue
        mf = queue.get_last_mapped_file(expect)
        if mf is None:  # no file to write to (a full disk): dispatch stops here, nothing is skipped
            raise StoreError(f"consume queue {self.topic}-{self.queue_id} cannot take queue offset {cq_offset}: "
                             f"{queue.create_error or 'no file to write to'}")
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            queue.flushed_where = queue.committed_where = expect
            self._fill_pre_blank(mf, expect)
            log.info("fill pre blank space %s %d", mf.file_name, expect)
        if cq_offset != 0:
            current = mf.wrote_position + mf.file_from_offset
            if expect < current:
                log.warning("build consume queue repeatedly, expect %d < current %d (%s-%d)",
                            expect, current, self.topic, self.queue_id)
                return True
            if expect != current:
                log.warning("[BUG] logic queue order maybe wrong, expect %d current %d (%s-%d)",
                            expect, current, self.topic, self.queue_id)
        self.max_physic_offset = offset + size
        return mf.append_bytes(_UNIT.pack(offset, size, tags_code))

    def bulk_room(self, first_cq_offset: int, first_end: int) -> int:
        """How many units, from queue offset ``first_cq_offset`` on, one write may append (the compiled dispatch).

        Units that follow each other (queue offsets one apart, ends growing) are appended by
        :meth:`put_message_position_info` one after the other at the end of the current file
        while it has room; that is what one write of them does too.  0 when the first unit
        must take the unit-by-unit path: a new file (created there, or refused: a full disk),
        a pre-blank fill, a repeated unit (it ends at or before ``max_physic_offset``), or a
        queue offset that is not the queue's next one.
        """
        if first_end <= self.max_physic_offset:
            return 0
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is None or mf.is_full():
            return 0
        if first_cq_offset * CQ_STORE_UNIT_SIZE != mf.file_from_offset + mf.wrote_position:
            return 0
        if mf.first_create_in_queue and first_cq_offset != 0 and mf.wrote_position == 0:
            return 0
        return (mf.file_size - mf.wrote_position) // CQ_STORE_UNIT_SIZE

    def append_units(self, units, last_end: int) -> None:
        """Append units :meth:`bulk_room` made room for; ``last_end`` is where the last one's message ends."""
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is None or not mf.append_bytes(units):
            raise StoreError(f"consume queue {self.topic}-{self.queue_id}: {len(units)} bytes of units do not fit "
                             "in its last file (bulk_room was not asked)")
        self.max_physic_offset = last_end

    def _fill_pre_blank(self, mf, until_where: int) -> None:
        for _ in range((until_where % self.mapped_file_size) // CQ_STORE_UNIT_SIZE):
            mf.append_bytes(_PRE_BLANK)

    # -- reads ---------------------------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def get_unit(self, cq_offset: int) -> tuple[int, int, int] | None:
        """``(commit_log_offset, size, tags_code)`` of queue offset ``cq_offset``, or None."""
        if cq_offset < self.get_min_offset_in_queue() or cq_offset >= self.get_max_offset_in_queue():
            return None
        pos = cq_offset * CQ_STORE_UNIT_SIZE
        mf = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return tuple(_UNIT.unpack_from(mf.mapped, pos - mf.file_from_offset))

    def get_units(self, start: int, max_count: int) -> list[tuple[int, int, int, int]]:
        """Up to ``max_count`` units ``(cq_offset, offset, size, tags)`` from ``start`` (one file at most)."""
        out: list[tuple[int, int, int, int]] = []
        if start < self.get_min_offset_in_queue():
            return out
        pos = start * CQ_STORE_UNIT_SIZE
        mf = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return out
        rel = pos - mf.file_from_offset
        end = min(mf.read_position, rel + max_count * CQ_STORE_UNIT_SIZE)
        for p, offset, size, tags in iter_units(mf.mapped, rel, end):
            out.append(((mf.file_from_offset + p) // CQ_STORE_UNIT_SIZE, offset, size, tags))
        return out

    def get_last_offset(self) -> int:
        """Commitlog offset of the end of the last message (-1 when empty)."""
        return self.max_physic_offset

    def flush(self, least_pages: int) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown()

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    def delete_files(self) -> None:
        """Destroy the queue and delete its files and its folder for good (a deleted topic's queue): a file
        a reader still maps is unlinked all the same, its map valid until the reader lets go."""
        files = [mf.file_name for mf in self.mapped_file_queue.mapped_files]
        self.destroy()
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                os.remove(name)
        with contextlib.suppress(OSError):
            os.rmdir(self.store_path)

    def __repr__(self) -> str:
        return (f"ConsumeQueue({self.topic!r}, {self.queue_id}, min={self.get_min_offset_in_queue()}, "
                f"max={self.get_max_offset_in_queue()})")
