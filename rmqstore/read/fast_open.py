"""Open a store read-only in milliseconds: find where the log ends without reading every record.

:func:`rmqstore.store.open_store` recovers like a broker: it decodes (and CRC-checks) every
record of every segment to find the end of the log -- right for a tool that must not trust
the files, far too slow for a browser of a store with millions of messages.  The inspector
only needs *an* end of log to page towards, so :func:`open_fast` finds it from what the
store already knows:

1. consume queues: the valid units of each queue form a prefix of its files, so a binary
   search over the last file finds the last unit; the largest (offset + size) over all
   queues is the end of the last dispatched record;
2. the index files' headers (``end_phy_offset``);
3. from the furthest of those that really is a record start, the walk of recovery
   (:func:`rmqstore.format.walk.walk_segment`, strict but without CRCs, nothing decoded) over the
   few records written after the last dispatch -- on after an END_OF_FILE blank into the
   next segment, as recovery goes on -- to the real end;
4. with no consume queue at all, that walk from the start of the last segment that holds data.

The result is an ordinary read-only :class:`~rmqstore.store.MessageStore` (files mapped
read-only, positions set to the end found, later empty files left out) that the read path
(:mod:`rmqstore.engine.reading`) and the widgets use as usual.  Nothing is created, truncated,
locked or written.  What it does not do is check the records in between, or body CRCs:
``rmqstore verify`` (or ``open_store``) does that.

:func:`boundary_hint` (the last dispatched record before an offset, from the consume
queues) is the other shortcut the views use to find a record start without a walk.
"""

from __future__ import annotations

import time

from ..engine.consume_queue import consume_queue_ids
from ..format.layout import CONSUME_QUEUE_UNIT
from ..files.store_dir import resolve_store_root
from ..format.walk import End, step, walk_segment

__all__ = ["open_fast", "FastOpenInfo", "boundary_hint", "cq_last_before"]

_UNIT = CONSUME_QUEUE_UNIT.struct
_UNIT_SIZE = CONSUME_QUEUE_UNIT.size


class FastOpenInfo(dict):
    """How the end of the log was found: ``end``, ``source``, ``walked_records``, ``seconds``..."""


def _valid_unit(buf, pos: int) -> tuple[int, int] | None:
    offset, size, _tags = _UNIT.unpack_from(buf, pos)
    return (offset, size) if offset >= 0 and size > 0 else None


def _recover_queue_fast(cq) -> None:
    """ConsumeQueue.recover without the linear walk: binary search the valid prefix of the last file."""
    queue = cq.mapped_file_queue
    files = queue.mapped_files
    if not files:
        return
    size = cq.mapped_file_size
    units_per_file = size // _UNIT_SIZE
    # the last file whose first unit is valid
    index = len(files) - 1
    while index > 0 and _valid_unit(files[index].mapped, 0) is None:
        index -= 1
    mf = files[index]
    lo, hi = 0, units_per_file  # invariant: units [0, lo) valid, [hi, end) not
    if _valid_unit(mf.mapped, 0) is None:
        hi = 0
    else:
        lo = 1
        while lo < hi:
            mid = (lo + hi) // 2
            if _valid_unit(mf.mapped, mid * _UNIT_SIZE) is not None:
                lo = mid + 1
            else:
                hi = mid
    count = lo
    end = mf.file_from_offset + count * _UNIT_SIZE
    if count:
        offset, usize = _valid_unit(mf.mapped, (count - 1) * _UNIT_SIZE)
        cq.max_physic_offset = offset + usize
    queue.flushed_where = queue.committed_where = end
    queue.truncate_dirty_files(end)


def _load_queues(store) -> None:
    for topic, qid in consume_queue_ids(store.root):
        cq = store.find_consume_queue(topic, qid)
        cq.load()
        _recover_queue_fast(cq)


def _is_record_start(files, size: int, offset: int) -> bool:
    mf = _file_at(files, size, offset)
    return mf is not None and step(mf.mapped, offset - mf.file_from_offset, mf.file_from_offset,
                                   strict=True).end is None


def _file_at(files, size: int, offset: int):
    if not files or offset < files[0].file_from_offset:
        return None
    i = (offset - files[0].file_from_offset) // size
    if 0 <= i < len(files) and files[i].file_from_offset <= offset < files[i].file_from_offset + size:
        return files[i]
    for mf in files:
        if mf.file_from_offset <= offset < mf.file_from_offset + size:
            return mf
    return None


def _walk_to_end(files, size: int, start: int, info: dict) -> int:
    """From a record boundary, walk to where the log ends (recovery's rule, no CRCs); returns that offset."""
    mf = _file_at(files, size, start)
    if mf is None:
        return start
    i = files.index(mf)
    pos = start - mf.file_from_offset
    while True:
        end = walk_segment(mf.mapped, mf.file_from_offset, start=pos, limit=size, strict=True)
        info["walked_records"] += end.records
        nxt = i + 1
        # only a blank sends the walk on, into a next file that starts where this one ends
        if end.kind is not End.BLANK or nxt >= len(files) or files[nxt].file_from_offset != mf.file_from_offset + size:
            info["end_kind"] = end.kind
            return mf.file_from_offset + end.pos
        i, mf, pos = nxt, files[nxt], 0


def open_fast(path, config=None):  # noqa: C901 -- the opening steps in order, each a short guard
    """A read-only store over ``path`` whose end of log is found without a full scan.

    Returns ``(store, info)``; ``info`` says how the end was found.  ``close()`` the store.
    """
    from ..store import MessageStore
    from ..files.store_sizes import infer_config

    t0 = time.perf_counter()
    root = resolve_store_root(path)
    config = config or infer_config(root)
    store = MessageStore(root, config, read_only=True)
    info = FastOpenInfo(walked_records=0, candidates={}, source="")
    try:
        store.commit_log.load()
        store.index_service.load()
        _load_queues(store)
        queue = store.commit_log.mapped_file_queue
        files = queue.mapped_files
        size = config.mapped_file_size_commit_log
        if not files:
            end = 0
            info["source"] = "no commitlog files"
            info["end_kind"] = None
        else:
            candidates = {}
            cq_end = max((cq.max_physic_offset for cq in store.consume_queue_table.values()), default=-1)
            # the start of the last dispatched record: the unit behind cq_end
            starts = []
            for cq in store.consume_queue_table.values():
                mfq = cq.mapped_file_queue
                if mfq.mapped_files and mfq.flushed_where > mfq.mapped_files[0].file_from_offset:
                    last = mfq.find_mapped_file_by_offset(mfq.flushed_where - _UNIT_SIZE)
                    if last is not None:
                        unit = _valid_unit(last.mapped, mfq.flushed_where - _UNIT_SIZE - last.file_from_offset)
                        if unit is not None:
                            starts.append(unit)
            if starts:
                candidates["consume_queue"] = max(o for o, _ in starts)
            for f in store.index_service.index_files:
                try:
                    end_phy = f.end_phy_offset
                except Exception:  # noqa: BLE001 - a bad header is just no candidate
                    continue
                if end_phy > 0:
                    candidates["index"] = max(candidates.get("index", 0), end_phy)
            info["candidates"] = {k: str(v) for k, v in candidates.items()}
            start, source = None, ""
            for name, offset in sorted(candidates.items(), key=lambda kv: -kv[1]):
                if _is_record_start(files, size, offset):
                    start, source = offset, name
                    break
            if start is None:
                # the last file that holds data (a written file starts with a record)
                k = len(files) - 1
                while k > 0 and step(files[k].mapped, 0).end is End.UNWRITTEN:
                    k -= 1
                start, source = files[k].file_from_offset, "last segment walk"
            end = _walk_to_end(files, size, start, info)
            if cq_end > end:  # pragma: no cover - queues claim more than the log holds
                info["warning"] = f"consume queues point up to {cq_end}, the log ends at {end}"
            info["source"] = source
        queue.flushed_where = queue.committed_where = end
        queue.truncate_dirty_files(end)
        info["end"] = end
        info["seconds"] = time.perf_counter() - t0
        return store, info
    except BaseException:
        store.close()
        raise


# -- record boundaries from consume queues ----------------------------------------------------

_INT_MAX = 0x7FFFFFFF


def cq_last_before(cq, limit: int) -> tuple[int, int] | None:
    """``(offset, size)`` of the queue's last unit whose record starts before ``limit`` (or None).

    Units of one queue point at increasing commitlog offsets, so this is a binary search
    over the queue's readable units (pre-blank filler units are skipped).
    """
    mfq = cq.mapped_file_queue
    files = mfq.mapped_files
    if not files:
        return None
    fsize = cq.mapped_file_size
    first = files[0].file_from_offset
    lo = max(first, cq.min_logic_offset) // _UNIT_SIZE
    last = files[-1]
    hi = (last.file_from_offset + last.read_position) // _UNIT_SIZE  # exclusive

    def unit(idx):
        logical = idx * _UNIT_SIZE
        k = (logical - first) // fsize
        if not 0 <= k < len(files):
            return None
        mf = files[k]
        pos = logical - mf.file_from_offset
        if pos + _UNIT_SIZE > mf.read_position:
            return None
        offset, size, _ = _UNIT.unpack_from(mf.mapped, pos)
        return offset, size

    best = None
    while lo < hi:
        mid = (lo + hi) // 2
        u = unit(mid)
        if u is None:
            hi = mid
            continue
        if u[0] < limit:
            if u[1] != _INT_MAX and u[1] > 0:
                best = u
            lo = mid + 1
        else:
            hi = mid
    return best


def boundary_hint(store, limit: int, *, floor: int = 0, max_queues: int = 5000) -> int | None:
    """The start of the last dispatched record that starts in ``[floor, limit)``, from the consume queues."""
    best = None
    for n, cq in enumerate(list(store.consume_queue_table.values())):
        if n >= max_queues:
            break
        u = cq_last_before(cq, limit)
        if u is not None and u[0] >= floor and (best is None or u[0] > best):
            best = u[0]
    return best
