"""IndexFile: one index file, a hash table on disk for finding messages by key (RocketMQ's IndexFile).

An index file is a fixed-size hash table with chaining, laid out for appends only:

* a 40-byte header (begin/end store timestamps and physical offsets, the number of
  used slots, the next free entry number -- which starts at 1, entry 0 is never used);
* ``hash_slot_num`` 4-byte slots, each holding the number of the *newest* entry whose
  key hashes there (0 = empty);
* ``index_num`` 20-byte entries: key hash, physical offset, seconds since the header's
  begin timestamp, and the number of the previous entry of the same slot.

Adding a key writes one entry and overwrites one slot, so a lookup walks a chain from the
newest entry backwards and stops when times fall before the range asked for.  A file is
full when its entry counter reaches ``index_num``; the next file starts where it ended
(its begin offset/timestamp are the previous file's end values).  Files are named by the
wall-clock time of their creation (``yyyyMMddHHmmssSSS``).

Pages.  Index files are named by time, not offset, so they get a plain mapping, and no page
of one is touched before its block is reserved (a page with no block is a SIGBUS on a full
disk): the header and slots when the file is opened, the entries a few pages ahead of the
next put.  The files of a store, and what they mean together, are
:class:`rmqstore.engine.index.IndexService`'s.

Who writes the header.  Two writers, one layout (``INDEX_HEADER``): :meth:`IndexFile._write_header`
after each key the pure path puts (the whole 40 bytes in one write), and the compiled dispatch's
``Batch.write_index`` (``rmqstore/_native/cdispatch.c``), which writes a run's entries and slots
and then the same header once for the run -- the bytes the pure path leaves after that run's last
key (``tests/unit/test_native_dispatch.py`` compares the files).  :meth:`put_batch` takes the
counters the C writer reports back into the attributes, so the next pure put continues from them.
A new file's bounds alone (``_BOUNDS``) are written at its creation.
"""

from __future__ import annotations

import os
import struct

from ..common.errors import StoreError
from ..format.layout import INDEX_ENTRY, INDEX_HEADER, INDEX_SLOT, OS_PAGE_SIZE
from ..files.file_space import disk_problem, reserve_space, size_and_reserve
from ..files.mapped_file import advise_random
from ..format.properties import java_string_hash
from ..files.read_maps import ReadMap
from ..files.store_sizes import index_size

__all__ = ["IndexFile", "index_key_hash", "index_file_size", "index_capacity"]

_HEADER = INDEX_HEADER
_ENTRY = INDEX_ENTRY.struct
_I32 = INDEX_SLOT.struct
_SLOT = INDEX_SLOT.size  # 4
_INT_MAX = 0x7FFFFFFF
_HDR = INDEX_HEADER.offsets
#: the header's four bounds (begin/end time, begin/end offset), which an entry-less file's creation writes
_BOUNDS = struct.Struct(">" + "".join(INDEX_HEADER.field_struct(name).format.lstrip(">") for name in (
    "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset")))


def index_key_hash(key: str) -> int:
    """``IndexFile#indexKeyHashMethod``: abs of Java's hashCode, 0 when abs overflows."""
    h = abs(java_string_hash(key))
    return 0 if h > _INT_MAX else h


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return index_size(hash_slot_num, index_num)


def index_capacity(index_num: int) -> int:
    """The keys a file of ``index_num`` entries holds: ``index_num - 1``, entry 0 is never used (the
    counter starts at 1, and a slot holding 0 means an empty chain)."""
    return max(index_num - 1, 0)


class IndexFile:
    """One index file (RocketMQ's IndexFile + IndexHeader)."""

    def __init__(self, path: str, hash_slot_num: int, index_num: int, end_phy_offset: int = 0,
                 end_timestamp: int = 0, *, read_only: bool = False):
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = index_file_size(hash_slot_num, index_num)
        self.mapped_file = _IndexMappedFile(path, self.file_size, read_only, _HEADER.size + hash_slot_num * _SLOT)
        h = _HEADER.unpack_from(self.buf)
        self.begin_timestamp = h.begin_timestamp
        self.end_timestamp = h.end_timestamp
        self.begin_phy_offset = h.begin_phy_offset
        self.end_phy_offset = h.end_phy_offset
        self.hash_slot_count = h.hash_slot_count
        self.index_count = h.index_count if h.index_count > 0 else 1
        if not read_only:
            self.start_at(end_phy_offset, end_timestamp)

    def start_at(self, end_phy_offset: int, end_timestamp: int) -> None:
        """A new file's header: it begins (and, with no entry yet, ends) where the previous file ended."""
        if end_phy_offset > 0:
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            self.begin_timestamp = self.end_timestamp = end_timestamp
        if end_phy_offset > 0 or end_timestamp > 0:
            self._write_bounds()

    def has_entries(self) -> bool:
        return self.index_count > 1 or self.hash_slot_count > 0

    def continue_after(self, prev: "IndexFile") -> None:
        """Begin and end (no entry yet) where ``prev`` ends: the header a new file gets."""
        self.begin_where(prev.end_phy_offset, prev.end_timestamp)

    def begin_where(self, phy_offset: int, timestamp: int) -> None:
        """An entry-less file's header: it begins and ends at ``phy_offset`` and ``timestamp``."""
        self.begin_phy_offset = self.end_phy_offset = phy_offset
        self.begin_timestamp = self.end_timestamp = timestamp
        self._write_bounds()

    def begins_where(self, phy_offset: int, timestamp: int) -> bool:
        """Does the header begin and end at ``phy_offset`` and ``timestamp`` (an entry-less file's header)?"""
        return (self.begin_phy_offset, self.end_phy_offset, self.begin_timestamp, self.end_timestamp) == \
            (phy_offset, phy_offset, timestamp, timestamp)

    def _write_bounds(self) -> None:
        """The four bounds in one write; the counts stay as the file has them (0 in a new file, as
        RocketMQ's creation leaves them: it writes the counts with the first entry or a flush)."""
        _BOUNDS.pack_into(self.buf, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset)

    def _write_header(self) -> None:
        """The whole header in one write, from the attributes.  (Field by field, a kill between two
        fields left a begin time with no end time: ``verify`` then reports the file.)"""
        _HEADER.pack_into(self.buf, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)

    @property
    def buf(self):
        """The file's bytes (read-only files: mapped when asked for, :mod:`rmqstore.files.read_maps`)."""
        return self.mapped_file.mapped

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add one key; False when the file is full."""
        if self.index_count >= self.index_num:
            return False
        key_hash = index_key_hash(key)
        slot_pos = _HEADER.size + (key_hash % self.hash_slot_num) * _SLOT
        entry_pos = _HEADER.size + self.hash_slot_num * _SLOT + self.index_count * INDEX_ENTRY.size
        mf = self.mapped_file
        mf.reserve(entry_pos, INDEX_ENTRY.size, mf.RESERVE_AHEAD)  # (header and slots are reserved)
        buf = self.buf
        slot_value = _I32.unpack_from(buf, slot_pos)[0]
        if slot_value <= 0 or slot_value > self.index_count:
            slot_value = 0
        if self.begin_timestamp <= 0 or self.index_count <= 1:
            # the first entry becomes the file's begin (below): its difference is 0.  RocketMQ counts
            # it from the begin a new file inherits (the previous file's end), so a first key put
            # long after that carries a time seconds off and a lookup by time range misses it
            time_diff = 0
        else:
            time_diff = (store_timestamp - self.begin_timestamp) // 1000 if store_timestamp >= self.begin_timestamp \
                else -((self.begin_timestamp - store_timestamp) // 1000)
            time_diff = min(max(time_diff, 0), _INT_MAX)
        _ENTRY.pack_into(buf, entry_pos, key_hash, phy_offset, time_diff, slot_value)
        _I32.pack_into(buf, slot_pos, self.index_count)
        if self.index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self._write_header()  # (RocketMQ writes each field as it changes: the same bytes)
        return True

    def put_batch(self, batch, n: int) -> int:
        """Index the first ``n`` records of a compiled dispatch batch (:mod:`rmqstore.engine.dispatch`); how many.

        The compiled code writes what :meth:`put_key` writes for each key, record after
        record, and stops before the first record that finds the file full or whose keys do
        not all fit: the pure path takes that one (it fills this file and starts the next).
        The entry pages it may write are reserved first; a disk without room for them does
        no record here (0), and the pure path meets the full disk at the exact key.
        """
        if self.index_count >= self.index_num or self.mapped_file.read_only:
            return 0
        keys = min(batch.index_keys(n), self.index_num - self.index_count)
        if keys > 0:
            entry_pos = _HEADER.size + self.hash_slot_num * _SLOT + self.index_count * INDEX_ENTRY.size
            try:
                self.mapped_file.reserve(entry_pos, keys * INDEX_ENTRY.size, self.mapped_file.RESERVE_AHEAD)
            except StoreError:
                return 0
        done, written, *header = batch.write_index(
            n, self.buf, self.hash_slot_num, self.index_num, self.begin_timestamp, self.end_timestamp,
            self.begin_phy_offset, self.end_phy_offset, self.hash_slot_count, self.index_count)
        if written:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, self.index_count) = header
        return done

    def is_time_matched(self, begin: int, end: int) -> bool:
        return (begin < self.begin_timestamp and end > self.end_timestamp) or \
            (self.begin_timestamp <= begin <= self.end_timestamp) or \
            (self.begin_timestamp <= end <= self.end_timestamp)

    def select_phy_offset(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to ``out`` the offsets of entries for ``key`` stored in [begin, end], newest first."""
        key_hash = index_key_hash(key)
        slot_pos = _HEADER.size + (key_hash % self.hash_slot_num) * _SLOT
        buf = self.buf
        slot_value = _I32.unpack_from(buf, slot_pos)[0]
        if slot_value <= 0 or slot_value > self.index_count or slot_value >= self.index_num or self.index_count <= 1:
            return  # (entry numbers past index_num lie outside the file: a damaged header or slot)
        entries = _HEADER.size + self.hash_slot_num * _SLOT
        nxt = slot_value
        while len(out) < max_num:
            h, phy, time_diff, prev = _ENTRY.unpack_from(buf, entries + nxt * INDEX_ENTRY.size)
            if time_diff < 0:
                break
            time_read = self.begin_timestamp + time_diff * 1000
            if h == key_hash and begin <= time_read <= end:
                out.append(phy)
            # a chain runs from newer to older entries; a link forward (damage) would loop for ever
            if prev <= 0 or prev > self.index_count or prev >= self.index_num or prev >= nxt or time_read < begin:
                break
            nxt = prev

    def entries(self):
        """Every used entry ``(number, key_hash, phy_offset, time_diff, prev_index)``."""
        base = _HEADER.size + self.hash_slot_num * _SLOT
        buf = self.buf
        for n in range(1, min(self.index_count, self.index_num)):  # a damaged count cannot reach past the file
            yield (n, *_ENTRY.unpack_from(buf, base + n * INDEX_ENTRY.size))

    def truncate_entries(self, phy_offset: int, store_timestamp_at) -> int:
        """Drop the entries for records at or after ``phy_offset`` (entries are in log order); how many.

        Slots fall back along their chains to the newest entry that stays, the dropped
        entries are zeroed, and the header ends at the last entry kept (its store time from
        ``store_timestamp_at(offset)``: the entries keep whole seconds only).
        """
        entries = _HEADER.size + self.hash_slot_num * _SLOT
        count = min(self.index_count, self.index_num)
        keep = count
        while keep > 1 and _ENTRY.unpack_from(self.buf, entries + (keep - 1) * INDEX_ENTRY.size)[1] >= phy_offset:
            keep -= 1
        if keep == count:
            return 0
        used = self._fall_back_slots(keep)
        self.buf[entries + keep * INDEX_ENTRY.size:entries + count * INDEX_ENTRY.size] = \
            bytes((count - keep) * INDEX_ENTRY.size)
        self.index_count, self.hash_slot_count = keep, used
        if keep > 1:
            self.end_phy_offset = _ENTRY.unpack_from(self.buf, entries + (keep - 1) * INDEX_ENTRY.size)[1]
            self.end_timestamp = store_timestamp_at(self.end_phy_offset)
        self._write_header()
        self.flush()
        return count - keep

    def _fall_back_slots(self, keep: int) -> int:
        """Point every slot at its newest entry below ``keep``, along its chain; the slots in use."""
        import array

        slots = array.array("i", bytes(self.buf[_HEADER.size:_HEADER.size + _SLOT * self.hash_slot_num]))
        if slots.itemsize != 4:  # pragma: no cover (every platform Python runs on has 4-byte ints)
            raise StoreError("4-byte ints needed")
        slots.byteswap()  # (big-endian on disk)
        entries = _HEADER.size + self.hash_slot_num * _SLOT
        self.slots_changed = [n for n, v in enumerate(slots) if v >= keep]
        for slot in self.slots_changed:
            v = slots[slot]
            while v >= keep:
                link = _ENTRY.unpack_from(self.buf, entries + v * INDEX_ENTRY.size)[3]
                v = link if link < v else 0  # a chain links to older entries (a link forward: damage)
            _I32.pack_into(self.buf, _HEADER.size + slot * _SLOT, max(v, 0))
            slots[slot] = max(v, 0)
        return sum(1 for v in slots if v > 0)

    def repair_torn_put(self) -> bool:
        """A kill inside :meth:`put_key` after the slot was written and before the header: the slot
        points at the entry the header does not count (the next put overwrites it with another key).
        The slot goes back to the entry before it in its chain.  True when something was repaired."""
        used = self._fall_back_slots(min(self.index_count, self.index_num))
        if not self.slots_changed:
            return False
        self.hash_slot_count = used
        self._write_header()
        return True

    def flush(self) -> None:
        if not self.mapped_file.read_only:
            self.buf.flush()

    def shutdown(self) -> None:
        self.flush()
        self.mapped_file.close()

    def destroy(self) -> None:
        self.mapped_file.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def header(self) -> dict:
        return {"file": self.file_name, "size": self.file_size, "beginTimestamp": self.begin_timestamp,
                "endTimestamp": self.end_timestamp, "beginPhyOffset": self.begin_phy_offset,
                "endPhyOffset": self.end_phy_offset, "hashSlotCount": self.hash_slot_count,
                "indexCount": self.index_count}


def _open_reserved(path: str, size: int, head: int) -> int:
    """Open (or create) an index file for writing with its first ``head`` bytes reserved.

    A file that does not fit is a StoreError naming the disk (and a file this call
    created is removed again).
    """
    created = not os.path.exists(path)
    fd = -1
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size_and_reserve(fd, path, size, head)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
            if created:
                os.remove(path)
        raise StoreError(f"cannot {'create' if created else 'open'} index file {path}: "
                         f"{disk_problem(path, exc)}") from exc
    return fd


class _IndexMappedFile:
    """Index files are named by time, not offset, so they get a plain mapping.

    A page with no block behind it is a SIGBUS on a full disk when a mapping writes it
    (on tmpfs even when a reader reads it), so no page is touched before it is reserved.
    A writable file reserves the pages of its header and hash slots (``head`` bytes: the
    slots are read and written anywhere; the last of those pages, where the first entries
    go, whole -- :func:`rmqstore.files.file_space.size_and_reserve`) when it is opened; its
    entries, which fill the file in order, a few pages ahead of the next one (:meth:`reserve`).  Reserving a default-sized
    file (420 MB, 400 of them entries) whole would take that much disk for an index that
    may hold a few keys; readers never read past the entry count.
    """

    RESERVE_AHEAD = 16  # entry pages reserved past the one a put needs

    def __init__(self, path: str, size: int, read_only: bool, head: int = 0):
        import mmap

        self.path = path
        self.size = size
        self.read_only = read_only
        self.fd = -1
        self._map: mmap.mmap | None = None
        self._view: ReadMap | None = None
        if read_only:  # mapped while read, a bounded number at a time (rmqstore.files.read_maps)
            self._view = ReadMap(path, size)
        else:
            head = min(max(head, _HEADER.size), size)
            self.fd = _open_reserved(path, size, head)
            self._map = mmap.mmap(self.fd, size)
            advise_random(self._map)  # slots are written anywhere, entries a page at a time
            self.reserved = bytearray(-(-size // OS_PAGE_SIZE))  # 1 = the page has its block
            pages = -(-head // OS_PAGE_SIZE)
            self.reserved[:pages] = b"\x01" * pages

    def reserve(self, pos: int, length: int, ahead: int = 0) -> None:
        """Make sure the pages of ``[pos, pos+length)`` have blocks (StoreError naming the disk if not)."""
        marks = self.reserved
        first, last = pos // OS_PAGE_SIZE, (pos + length - 1) // OS_PAGE_SIZE
        if marks[first] and marks[last]:
            return
        start = first * OS_PAGE_SIZE
        for stop in dict.fromkeys((min(len(marks), last + 1 + ahead), last + 1)):  # ahead; else what is needed
            try:
                reserve_space(self.fd, self.path, min(stop * OS_PAGE_SIZE, self.size) - start, start)
                break
            except OSError as exc:
                if stop == last + 1:
                    raise StoreError(f"cannot write index file {self.path}: {disk_problem(self.path, exc)}") from exc
        marks[first:stop] = b"\x01" * (stop - first)

    @property
    def mapped(self):
        """The file's mapping (read-only: mapped when asked for, maybe unmapped between two reads)."""
        view = self._view
        return self._map if view is None else view.buf

    def close(self) -> None:
        if self._view is not None:
            self._view.close()
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                return
            os.close(self.fd)
            self._map = None
