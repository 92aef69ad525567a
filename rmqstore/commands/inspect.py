"""``rmqstore inspect STORE [--json]``: the store at a glance (:mod:`rmqstore.read.inspect_store`), read-only."""

from __future__ import annotations

import argparse

from .terminal import EXIT_OK, Command, Out, Streams, elide, json_out, num, open_read_only, progress_bar

__all__ = ["COMMAND"]


def _inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (or a fixture folder holding store/)")
    p.add_argument("--json", action="store_true", help="one JSON object (machine output)")


def _inspect(args: argparse.Namespace, io: Streams) -> int:
    from ..read.inspect_store import inspect

    store = open_read_only(args.store, io)
    try:
        with progress_bar(io, "inspect") as progress:
            info = inspect(store, progress=progress.update)
    finally:
        store.close()
    if args.json:
        json_out(io, info)
        return EXIT_OK
    _print_inspect(Out(io), info)
    return EXIT_OK


def _time_format(times):
    """``(day, fmt)``: when every ISO time is on one day, the tables show only the time of day."""
    days = {t[:10] for t in times if t}
    if len(days) == 1:
        day = days.pop()
        return f"UTC, {day}", lambda t: t[11:-1]
    return "UTC", lambda t: t.replace("T", " ").rstrip("Z")


def _segment_end(seg: dict) -> str:
    end = seg.get("end") or "?"
    blank = seg.get("blank")
    if blank is not None:
        text = f"blank@{num(blank['pos'])} ({num(blank['declaredSize'])} B"
        if blank["tailNonZeroBytes"]:
            text += f", {num(blank['tailNonZeroBytes'])} stale bytes"
        if not blank["reachesFileEnd"]:
            text += ", short"
        return text + ")"
    if end == "unwritten":
        text = f"unwritten@{num(seg['dataEnd'])}"
        if seg.get("nonZeroAfterEnd"):
            text += f" (+{num(seg['nonZeroAfterEnd'])} non-zero)"
        return text if seg["inStore"] or seg["records"] else "empty (made ahead)"
    return end


def _messages_text(info: dict) -> str:
    """Both message counts, each named: the commitlog's records (what verify counts) and the queues' units,
    with the transaction halves that the queues never hold -- two numbers side by side otherwise look
    like a disagreement."""
    cl, cq = info["commitlog"], info["consumeQueues"]
    halves = cl["transactionHalves"]
    text = (f"{num(cl['messages'])} in the commitlog (verify's count), {num(cq['messages'])} in {cq['queues']} "
            f"queue(s) of {len(info['topics'])} topic(s)")
    if halves:
        text += (f"; {num(halves)} of those in the commitlog "
                 f"{'is a transaction half' if halves == 1 else 'are transaction halves'} (prepared or rolled "
                 "back), which no queue holds")
    return text


def _live_rows(info: dict) -> list[tuple[str, str]]:
    """The ``live`` and ``abort`` lines: a running store keeps its abort file and makes files ahead."""
    from ..read.inspect_store import live_text

    live = info.get("live")
    if live is None:
        return [("abort", "present: the last run did not shut down cleanly" if info["abort"]
                 else "absent (clean shutdown)")]
    ahead = info.get("madeAhead") or []
    text = (f"{live_text(live)} holds the store's lock: a running broker or writer; what is shown is the store at "
            "this moment")
    if ahead:
        text += f"; {', '.join(ahead)} made ahead by the running store (its next file)"
    who = f"this process, {live['pid']}" if live["thisProcess"] else f"process {live['pid']}"
    abort = f"present: kept by the running store ({who}), removed at its clean shutdown" if info["abort"] else "absent"
    return [("live", text), ("abort", abort)]


def _print_inspect(out: Out, info: dict) -> None:
    cl = info["commitlog"]
    cfg = info["config"]
    cq = info["consumeQueues"]
    cp = info["checkpoint"]
    lock = info["lock"]
    disk = info["disk"]
    if cp.get("exists") and not cp.get("error"):
        cp_text = (f"commitlog {cp['physicMsgTime'] or cp['physicMsgTimestamp']}\n"
                   f"queues    {cp['logicsMsgTime'] or cp['logicsMsgTimestamp']}\n"
                   f"index     {cp['indexMsgTime'] or cp['indexMsgTimestamp']}")
    else:
        cp_text = cp.get("error") or "none"
    if lock.get("exists"):
        lock_text = f"present ({lock.get('size', '?')} bytes{', ' + repr(lock['content']) if 'content' in lock else ''})"
        lock_text += f", held by pid {lock['heldByPid']}" if lock.get("heldByPid") else ", not held"
    else:
        lock_text = "absent"
    if "total" in disk:
        disk_text = (f"{disk['available'] / 2**30:,.1f} GiB free of {disk['total'] / 2**30:,.1f} GiB "
                     f"({disk['usedRatio']:.0%} used)")
    else:
        disk_text = disk.get("error", "?")
    out.kv([
        ("store", info["root"]),
        ("health", info["health"]),
        ("commitlog", f"offsets {num(cl['minOffset'])} .. {num(cl['maxOffset'])} in {cl['files']} file(s) of "
                      f"{num(cfg['commitLogFileSize'])} bytes"),
        ("messages", _messages_text(info)),
        ("dispatched", "-" if cq["dispatchedUpTo"] is None else f"up to offset {num(cq['dispatchedUpTo'])}"),
        ("index", f"{len(info['index'])} file(s), {num(sum(i['entries'] for i in info['index']))} entries "
                  f"({num(cfg['indexHashSlots'])} slots, {num(cfg['indexCapacity'])} entries per file (maxIndexNum "
                  f"{num(cfg['indexEntries'])}: entry 0 is never used))"),
        ("checkpoint", cp_text),
        *_live_rows(info),
        ("lock", lock_text),
        ("disk", disk_text),
    ])
    day, when = _time_format([t for seg in cl["segments"] for t in (seg["firstStoreTime"], seg["lastStoreTime"])]
                             + [t for i in info["index"] for t in (i["beginTime"], i["endTime"])])
    rows = []
    for seg in cl["segments"]:
        pos = "-"
        if "wrotePosition" in seg:
            w, c, f = seg["wrotePosition"], seg["committedPosition"], seg["flushedPosition"]
            pos = num(w) if w == c == f else f"{num(w)}/{num(c)}/{num(f)}"
        stored = "-" if not seg["firstStoreTime"] else f"{when(seg['firstStoreTime'])} .. {when(seg['lastStoreTime'])}"
        rows.append([seg["file"], num(seg["size"]), num(seg["records"]), pos, _segment_end(seg), stored])
    out.table(["file", "size", "records", "position", "ends with", "stored" + (f" ({day})" if day else "")],
              rows, title="commitlog files", right=(1, 2, 3), wrap=(4, 5))
    rows = []
    for t in info["topics"]:
        for q in t["queues"]:
            rows.append([elide(t["topic"]), q["queueId"], num(q["minOffset"]), num(q["maxOffset"]), num(q["messages"]),
                         q["files"], num(q["lastPhyOffset"])])
    if rows:
        out.table(["topic", "queue", "min", "max", "messages", "files", "last offset"], rows,
                  title="topics and queues", right=(1, 2, 3, 4, 5, 6), wrap=(0,))
    rows = [[i["file"], f"{num(i['entries'])}/{num(i['capacity'])}", num(i["hashSlotCount"]),
             f"{num(i['beginPhyOffset'])} .. {num(i['endPhyOffset'])}",
             f"{when(i['beginTime']) if i['beginTime'] else '-'} .. {when(i['endTime']) if i['endTime'] else '-'}"]
            for i in info["index"]]
    if rows:
        out.table(["file", "entries", "slots used", "offsets", "stored" + (f" ({day})" if day else "")], rows,
                  title="index files", right=(1, 2), wrap=(3, 4))
    if info["issues"]:
        out.kv([(f"{i}.", issue) for i, issue in enumerate(info["issues"], 1)], title="what looks wrong")


COMMAND = Command("show a store at a glance: files, positions, queues, index, checkpoint, health (read-only)",
                  _inspect_arguments, _inspect)
