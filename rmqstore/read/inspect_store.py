"""What a store looks like, at a glance: :func:`inspect`, and message look-ups for ``rmqstore msg``.

:func:`inspect` takes a store opened read-only (:func:`rmqstore.store.open_store`) and
returns a JSON-ready ``dict``:

* ``commitlog.segments`` -- every commitlog segment on disk (also those the read-only open
  left out, such as a pre-allocated file after the end of the log), with its size, the
  positions the store recovered for it (wrote/committed/flushed/read; "recovered" because
  a read-only open computes them from the data, as RocketMQ's recovery does), how many
  records it holds, their store-time range, and how it ends: an END_OF_FILE blank (where,
  how long, and how many non-zero bytes its tail holds -- RocketMQ's transient store pool
  leaves stale bytes there), unwritten space, or bytes that do not decode -- as
  :func:`rmqstore.format.walk.step` decides it.  Bodies are neither copied nor CRC-checked:
  cheap even for 1 GiB files;
  ``rmqstore verify`` is the full check.
* ``topics`` -- every consume queue with its min/max queue offsets and the end of the last
  message it knows;
* ``index`` -- every index file's header, ``checkpoint`` (:func:`read_checkpoint`), the
  ``abort`` flag, the ``lock`` file (and the process holding it, if any), the free space of
  the file system;
* ``live`` -- the live process holding the store's lock (pid, whether it is this process, its
  command line), or None.  A running store keeps its abort file and makes its next commitlog
  file ahead (``madeAhead``): on a live store those are a running store's, not an unclean
  shutdown's and not leftovers, and ``health`` says it is live;
* ``strays`` -- entries of the store folders that are not store files (never read, never
  deleted; see :func:`rmqstore.files.store_dir.list_store_files`);
* ``leftOut`` -- files the read-only open left out: allocations a kill interrupted at the end
  of a commitlog or consume-queue folder (:func:`rmqstore.files.store_sizes.interrupted_allocations`);
* ``health`` -- one line: ``"OK"`` or what looks wrong (``issues`` lists each).

Nothing is written; files are opened read-only, a bounded number at a time
(:mod:`rmqstore.files.read_maps`).  The system refusing a file (an ``OSError``: the open-file limit,
a permission) is raised, never made an issue of the store.
"""

from __future__ import annotations

import datetime
import mmap
import os
import struct
from typing import Callable

from ..files.checkpoint import read_checkpoint
from ..format.crc import crc32
from ..format.dumpfmt import record_to_json
from ..common.errors import CorruptRecordError, LayoutError, RmqStoreError, StoreError
from ..engine.index_file import index_capacity
from ..format.layout import store_timestamp_position
from ..format.properties import string_to_properties
from ..engine.reading import NoRecordAt, decode_record_at, record_keys  # (record_keys re-exported)
from ..format.record import MessageRecord, decode_message_id
from ..files.store_dir import count_nonzero, data_extents, list_store_files
from ..files.store_lock import lock_holder, process_command
from ..files.store_paths import abort_path, checkpoint_path, commitlog_dir, index_dir, lock_path
from ..format.sysflag import describe, gets_queue_unit
from ..format.walk import End, walk_segment
from .verify import rules

__all__ = ["inspect", "iso_time", "live_text", "MessageNotFoundError", "read_message_at", "find_by_msg_id", "find_by_key",
           "message_info", "record_keys"]

_I64 = struct.Struct(">q")
#: RocketMQ's disk thresholds (MessageStoreConfig / DefaultMessageStore.CleanCommitLogService)
DISK_MAX_USED_SPACE_RATIO = 0.75  # diskMaxUsedSpaceRatio = 75: files are deleted early above it
DISK_WARNING_RATIO = 0.90  # diskSpaceWarningLevelRatio: the store stops accepting writes above it


class MessageNotFoundError(StoreError):
    """No message where (or under what) it was looked for; the message says why."""


def iso_time(millis) -> str | None:
    """A store timestamp (ms since the epoch) as ISO 8601 UTC, e.g. ``2026-11-22T03:50:32.528Z``."""
    if not isinstance(millis, int) or millis <= 0:
        return None
    try:
        dt = datetime.datetime.fromtimestamp(millis / 1000, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


# -- segments ----------------------------------------------------------------------------------------

def _probe_segment(path: str, size: int) -> dict:
    """Walk the records of one commitlog file: records, time range, how it ends."""
    out: dict = {"records": 0, "transactionHalves": 0, "firstStoreTimestamp": None, "lastStoreTimestamp": None,
                 "dataEnd": 0, "end": None, "blank": None}
    if size == 0:
        out["end"] = "empty file"
        return out
    fd = os.open(path, os.O_RDONLY)  # (an OSError is the system refusing the run: raised, not a finding)
    try:
        buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    except ValueError as exc:  # (shorter than listed: it changed under us)
        os.close(fd)
        out["end"] = f"unreadable: {exc}"
        return out
    except BaseException:
        os.close(fd)
        raise
    try:
        _probe_records(buf, size, out, data_extents(fd, size))
    finally:
        buf.close()
        os.close(fd)
    return out


def _probe_records(buf, size: int, out: dict, extents=None) -> None:
    """Walk one segment (:func:`rmqstore.format.walk.walk_segment`, lenient) and describe how it ends
    (``extents``: the file's data, :func:`rmqstore.files.store_dir.data_extents`; holes are not read)."""
    def on_record(pos, s):
        ts = _I64.unpack_from(buf, pos + store_timestamp_position(s.sys_flag))[0]
        if out["firstStoreTimestamp"] is None:
            out["firstStoreTimestamp"] = ts
        out["lastStoreTimestamp"] = ts
        out["transactionHalves"] += not gets_queue_unit(s.sys_flag)

    end = walk_segment(buf, on_record=on_record)
    pos = end.pos
    out["records"] = end.records
    out["dataEnd"] = pos
    if end.kind is End.UNWRITTEN:
        out["end"] = "unwritten"
        nz = count_nonzero(buf, pos, size, extents)
        if nz:
            out["nonZeroAfterEnd"] = nz
    elif end.kind is End.BLANK:
        out["blank"] = {"pos": pos, "declaredSize": end.last.size, "reachesFileEnd": end.last.blank_fills,
                        "tailNonZeroBytes": count_nonzero(buf, min(pos + 8, size), size, extents)}
        out["end"] = "blank"
        out["dataEnd"] = size
    elif end.kind is End.OUT_OF_BYTES:
        out["end"] = "file end without a blank"
    else:
        out["end"] = f"undecodable at position {pos}"


def _segments(files, mapped_files, progress) -> list[dict]:
    mapped = {mf.file_from_offset: mf for mf in mapped_files}
    total = sum(f.size for f in files)
    done = 0
    out = []
    for f in files:
        path, name, size = f.path, f.name, f.size
        seg = {"file": name, "offset": f.offset, "size": size, "inStore": f.offset in mapped}
        mf = mapped.get(f.offset)
        if mf is not None:
            seg.update({"wrotePosition": mf.wrote_position, "committedPosition": mf.committed_position,
                        "flushedPosition": mf.flushed_position, "readPosition": mf.read_position,
                        "isFull": mf.is_full()})
        probe = _probe_segment(path, size)
        seg.update(probe)
        seg["firstStoreTime"] = iso_time(probe["firstStoreTimestamp"])
        seg["lastStoreTime"] = iso_time(probe["lastStoreTimestamp"])
        out.append(seg)
        done += size
        if progress is not None:
            progress(done, total)
    return out


# -- other parts ---------------------------------------------------------------------------------------

def _topics(store) -> list[dict]:
    by_topic: dict[str, list] = {}
    for (topic, qid), cq in sorted(store.consume_queue_table.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        by_topic.setdefault(topic, []).append({
            "queueId": qid, "minOffset": lo, "maxOffset": hi, "messages": max(hi - lo, 0),
            "files": len(cq.mapped_file_queue.mapped_files), "lastPhyOffset": cq.max_physic_offset})
    return [{"topic": t, "queues": qs, "messages": sum(q["messages"] for q in qs)} for t, qs in by_topic.items()]


def _index(store) -> list[dict]:
    out = []
    for f in store.index_service.index_files:
        h = f.header()
        h["beginTime"] = iso_time(h["beginTimestamp"])
        h["endTime"] = iso_time(h["endTimestamp"])
        h["entries"] = max(h["indexCount"] - 1, 0)
        h["capacity"] = index_capacity(f.index_num)
        out.append(h)
    return out


def _checkpoint(root: str) -> dict:
    path = checkpoint_path(root)
    try:
        cp = read_checkpoint(path)
    except RmqStoreError as exc:
        return {"exists": os.path.lexists(path), "error": str(exc)}
    if cp is None:
        return {"exists": False}
    out: dict = {"exists": True, "size": os.path.getsize(path)}
    for name in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp"):
        value = getattr(cp, name)
        camel = "".join(w.capitalize() if i else w for i, w in enumerate(name.split("_")))
        out[camel] = value
        out[camel.replace("Timestamp", "Time")] = iso_time(value)
    min_ts = max(min(cp.physic_msg_timestamp, cp.logics_msg_timestamp) - 3000, 0)
    out["minTimestamp"] = min_ts  # StoreCheckpoint#getMinTimestamp: where abnormal recovery starts
    out["minTimestampIndex"] = min(min_ts, cp.index_msg_timestamp)
    return out


def _lock(root: str) -> dict:
    path = lock_path(root)
    if not os.path.lexists(path):
        return {"exists": False}
    out: dict = {"exists": True}
    try:
        out["size"] = os.path.getsize(path)
        if out["size"] <= 64 and os.path.isfile(path):
            with open(path, "rb") as f:
                out["content"] = f.read().decode("latin-1")
    except OSError as exc:
        out["error"] = exc.strerror
    out["heldByPid"] = lock_holder(root)
    return out


def _live(root: str) -> dict | None:
    """The live process holding the store's lock (:func:`rmqstore.files.store_lock.lock_holder`), or None."""
    pid = lock_holder(root)
    if pid is None:
        return None
    return {"pid": pid, "thisProcess": pid == os.getpid(), "command": process_command(pid)}


def live_text(live: dict) -> str:
    """``this process (PID)`` or ``process PID (its command)``: who holds a live store's lock."""
    if live["thisProcess"]:
        return f"this process ({live['pid']})"
    return f"process {live['pid']}" + (f" ({live['command']})" if live.get("command") else "")


def _strays(store) -> list[str]:
    """Entries of the commitlog, consume-queue and index folders that are not store files (relative paths)."""
    folders = [(commitlog_dir(store.root), "segment"), (index_dir(store.root), "index")]
    folders += [(cq.mapped_file_queue.store_path, "segment") for cq in store.consume_queue_table.values()]
    return sorted(os.path.relpath(s.path, store.root).replace(os.sep, "/")
                  for d, kind in folders for s in list_store_files(d, kind).strays)


def _left_out(store) -> list[dict]:
    """The files the read-only open left out (allocations a kill interrupted), relative paths."""
    queues = [store.commit_log.mapped_file_queue] + [cq.mapped_file_queue for cq in store.consume_queue_table.values()]
    return [{"path": os.path.relpath(f.path, store.root).replace(os.sep, "/"), "size": f.size,
             "expected": q.mapped_file_size} for q in queues for f in q.left_out]


def _disk(root: str) -> dict:
    try:
        st = os.statvfs(root)
    except OSError as exc:
        return {"error": exc.strerror}
    total = st.f_blocks * st.f_frsize
    free = st.f_bfree * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    used_ratio = (total - free) / total if total else 0.0
    return {"total": total, "free": free, "available": avail, "usedRatio": round(used_ratio, 4)}


# -- inspect --------------------------------------------------------------------------------------------

def inspect(store, progress: Callable[[int, int], None] | None = None) -> dict:
    """Everything a person wants to see first about a store (see the module doc)."""
    root = store.root
    cfg = store.config
    queue = store.commit_log.mapped_file_queue
    segments = _segments(list_store_files(commitlog_dir(root)).files, queue.mapped_files, progress)
    topics = _topics(store)
    index = _index(store)
    min_off = queue.get_min_offset() if queue.mapped_files else (segments[0]["offset"] if segments else 0)
    max_off = queue.get_max_offset()
    dispatched = max((q["lastPhyOffset"] for t in topics for q in t["queues"]), default=-1)
    out = {
        "root": os.path.abspath(root),
        "config": {"commitLogFileSize": cfg.mapped_file_size_commit_log,
                   "consumeQueueFileSize": cfg.mapped_file_size_consume_queue,
                   "indexHashSlots": cfg.max_hash_slot_num, "indexEntries": cfg.max_index_num,
                   "indexCapacity": index_capacity(cfg.max_index_num)},
        "commitlog": {"minOffset": min_off, "maxOffset": max_off, "files": len(segments),
                      "bytesOnDisk": sum(s["size"] for s in segments), "segments": segments,
                      "messages": sum(s["records"] for s in segments),
                      "transactionHalves": sum(s["transactionHalves"] for s in segments)},
        "topics": topics,
        "consumeQueues": {"queues": sum(len(t["queues"]) for t in topics),
                          "messages": sum(t["messages"] for t in topics),
                          "dispatchedUpTo": dispatched if dispatched >= 0 else None},
        "index": index,
        "checkpoint": _checkpoint(root),
        "abort": os.path.exists(abort_path(root)),
        "lock": _lock(root),
        "live": _live(root),
        "disk": _disk(root),
        "strays": _strays(store),
        "leftOut": _left_out(store),
    }
    out["madeAhead"] = _made_ahead(out)
    issues = _issues(out, max_off)
    out["issues"] = issues
    out["health"] = "OK" if not issues else "; ".join(issues)
    if out["live"] is not None:  # (not an issue: a running store)
        live = out["live"]
        out["health"] += f" (live: {'this process' if live['thisProcess'] else 'process'} {live['pid']} holds the lock)"
    return out


def _made_ahead(info: dict) -> list[str]:
    """Commitlog files after the end of the log, all zeros: made ahead of need (RocketMQ's allocate
    service), by the running store or by one that stopped without shutting down."""
    return [s["file"] for s in info["commitlog"]["segments"] if not s["inStore"] and s["records"] == 0
            and s["end"] == "unwritten" and not s.get("nonZeroAfterEnd") and s["dataEnd"] == 0
            and f"commitlog/{s['file']}" not in {f["path"] for f in info["leftOut"]}]


def _issues(info: dict, max_off: int) -> list[str]:  # noqa: C901 -- a flat list of independent checks
    """What looks wrong; a fault verify also finds is worded by its rule (:mod:`rmqstore.read.verify.rules`)."""
    issues: list[str] = []

    def say(*problems):  # faults verify also finds, in its words
        issues.extend(rules.summary_line(p) for p in problems if p is not None)

    live = info["live"] is not None  # a running store keeps its abort file and makes files ahead
    if info["abort"] and not live:
        say(rules.unclean_shutdown())
    segs = info["commitlog"]["segments"]
    strays = rules.strays_summary(info["strays"])
    if strays:
        issues.append(strays)
    left_out = info["leftOut"]
    say(*[rules.interrupted_allocation(f["path"], f["size"], f["expected"]) for f in left_out[:3]])
    segs = [s for s in segs if f"commitlog/{s['file']}" not in {f["path"] for f in left_out}]
    size = info["config"]["commitLogFileSize"]
    say(*[rules.segment_size(f"commitlog/{s['file']}", s["size"], size) for s in segs if s["size"] != size][:3])
    for prev, seg in zip(segs, segs[1:]):
        gap = rules.segment_gap(f"commitlog/{seg['file']}", seg["offset"], prev["offset"] + size, size)
        if gap:
            say(gap[0])
            break
    after_end = [s for s in segs if not s["inStore"]]
    empty = info["madeAhead"]
    if not live:
        say(*[rules.preallocated_segment(f"commitlog/{name}") for name in empty[:3]])
    beyond = [s["file"] for s in after_end if s["file"] not in empty]
    if beyond:
        issues.append(f"commitlog file(s) with data after the end the store reads ({', '.join(beyond[:3])})")
    for s in segs:
        rel, pos = f"commitlog/{s['file']}", s["dataEnd"]
        if s["end"] and s["end"].startswith("undecodable"):
            say(rules.undecodable_record(rel, pos, s["offset"] + pos, "the header's total size or magic code is not "
                                         "a record's"))
        elif s["end"] == "file end without a blank":
            say(rules.no_blank(rel, pos, s["size"] - pos))
        elif s["blank"] is not None:
            say(rules.blank_size(rel, s["blank"]["pos"], s["blank"]["declaredSize"], s["size"]))
    data_end = max((s["offset"] + s["dataEnd"] for s in segs if s["inStore"]), default=0)
    if segs and data_end > max_off:
        issues.append(f"the store reads the log up to {max_off}, but records reach {data_end} (a record that fails "
                      "its CRC or offset check ends the log there)")
    dispatched = info["consumeQueues"]["dispatchedUpTo"]
    if dispatched is not None and dispatched < max_off:
        issues.append(f"consume queues are {max_off - dispatched} bytes behind the commitlog (dispatched up to "
                      f"{dispatched} of {max_off})")
    elif dispatched is None and max_off > (info["commitlog"]["minOffset"] or 0) and any(s["records"] for s in segs):
        issues.append("no consume queues: nothing was dispatched")
    if info["index"]:
        last = info["index"][-1]
        if last["endPhyOffset"] > max_off:
            issues.append(f"the index points up to {last['endPhyOffset']}, past the end of the log ({max_off})")
    cp = info["checkpoint"]
    say(rules.checkpoint_unreadable(cp["error"]) if cp.get("error") else
        rules.checkpoint_size(cp.get("size")) if cp.get("exists") else None)
    disk = info["disk"]
    if disk.get("usedRatio", 0) >= DISK_WARNING_RATIO:
        issues.append(f"disk {disk['usedRatio']:.0%} full: RocketMQ stops accepting messages above "
                      f"{DISK_WARNING_RATIO:.0%}")
    elif disk.get("usedRatio", 0) >= DISK_MAX_USED_SPACE_RATIO:
        issues.append(f"disk {disk['usedRatio']:.0%} full: above {DISK_MAX_USED_SPACE_RATIO:.0%} RocketMQ deletes "
                      "commitlog files before their reserved time")
    return issues


# -- message look-ups -------------------------------------------------------------------------------------

def read_message_at(store, offset: int) -> MessageRecord:
    """The message record starting at physical ``offset``; MessageNotFoundError otherwise (one inside a
    record names the record that holds it)."""
    from .log_browser import LogBrowser

    queue = store.commit_log.mapped_file_queue
    if type(offset) is not int:
        raise MessageNotFoundError(f"an offset is an integer, got {offset!r}")
    try:
        rec = decode_record_at(store, offset)
    except NoRecordAt as exc:
        if exc.why == "past_end":
            raise MessageNotFoundError(f"offset {offset} is past the end of the log ({queue.get_max_offset()})") \
                from None
        lo = queue.get_min_offset() if queue.mapped_files else 0
        raise MessageNotFoundError(f"offset {offset} is outside the commitlog [{max(lo, 0)}, {queue.get_max_offset()})") \
            from None
    except CorruptRecordError as exc:
        pos = offset - store.commit_log.mapped_file_queue.find_mapped_file_by_offset(offset).file_from_offset
        reason = LogBrowser(store).inside_which_record(offset) or str(exc).replace(f" (at offset {pos})", "")
        raise MessageNotFoundError(f"no record starts at offset {offset}: {reason}") from None
    if not isinstance(rec, MessageRecord):
        raise MessageNotFoundError(f"offset {offset} holds an END_OF_FILE blank record, not a message")
    if rec.physical_offset != offset:
        reason = LogBrowser(store).inside_which_record(offset) or f"the bytes there say {rec.physical_offset}"
        raise MessageNotFoundError(f"no record starts at offset {offset}: {reason}")
    return rec



def find_by_msg_id(store, msg_id: str) -> tuple[int, MessageRecord]:
    """The message of an offset msgId (store host + physical offset); LayoutError for a malformed id."""
    host, offset = decode_message_id(msg_id.strip().upper() if isinstance(msg_id, str) else msg_id)
    rec = read_message_at(store, offset)
    if rec.store_host != host:
        raise MessageNotFoundError(f"offset {offset} holds a message stored by {rec.store_host}, but the msgId "
                                   f"names {host}: the msgId belongs to another broker")
    return offset, rec


def find_by_key(store, key: str, topic: str | None = None, max_num: int = 64) -> list[tuple[int, MessageRecord]]:
    """Messages indexed under ``key`` (KEYS token or UNIQ_KEY) in ``topic`` (default: every topic with a
    consume queue), oldest first.  Index hash collisions are filtered out."""
    topics = [topic] if topic is not None else sorted({t for t, _ in store.consume_queue_table})
    found: dict[int, MessageRecord] = {}
    for t in topics:
        offsets, _, _ = store.index_service.query_offset(t, key, max_num, 0, 2**63 - 1)
        for off in offsets:
            if off in found:
                continue
            try:
                rec = read_message_at(store, off)
            except MessageNotFoundError:
                continue
            if rec.topic == t and key in record_keys(string_to_properties(rec.properties)):
                found[off] = rec
    return sorted(found.items())


def _file_and_position(store, offset: int) -> tuple[str, int]:
    mf = store.commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
    if mf is None:
        return "?", offset
    return f"commitlog/{os.path.basename(mf.file_name)}", offset - mf.file_from_offset


def message_info(store, offset: int, rec: MessageRecord, *, include_body: bool = True) -> dict:
    """A JSON-ready description of one message: the dump fields plus where it lies, readable times,
    the properties split, the CRC verdict and the consume-queue unit that points at it."""
    out = record_to_json(offset, rec, include_body=include_body)
    file, pos = _file_and_position(store, offset)
    props = string_to_properties(rec.properties)
    computed = crc32(rec.body)
    if gets_queue_unit(rec.sys_flag):
        cq = store.consume_queue_table.get((rec.topic, rec.queue_id))
        unit = cq.get_unit(rec.queue_offset) if cq is not None else None
        cq_info = {"queueOffset": rec.queue_offset, "unit": list(unit) if unit else None,
                   "pointsHere": bool(unit and unit[0] == offset)}
    else:
        cq_info = {"queueOffset": None, "unit": None, "pointsHere": False,
                   "note": "prepared and rolled-back transaction records are not dispatched"}
    out.update({
        "file": file, "position": pos,
        "born_time": iso_time(rec.born_timestamp), "store_time": iso_time(rec.store_timestamp),
        "body_crc_computed": computed, "crc_ok": computed == rec.body_crc,
        "sys_flag_names": describe(rec.sys_flag),
        "properties_map": dict(props),
        "keys": record_keys(props),
        "consume_queue": cq_info,
    })
    return out


def parse_offset(text: str) -> int:
    try:
        value = int(text, 0)
    except (TypeError, ValueError):
        raise LayoutError(f"not an offset: {text!r}") from None
    if value < 0:
        raise LayoutError(f"an offset is not negative, got {value}")
    return value
