"""``rmqstore msg STORE MSGID | --key KEY [--topic T] | --offset N``: one message, shown readably (read-only)."""

from __future__ import annotations

import argparse

from .terminal import PROG, EXIT_INCOMPLETE, EXIT_OK, CliError, Command, Out, Streams, json_out, num, \
    open_read_only, show_time

__all__ = ["COMMAND"]


def _msg_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (or a fixture folder holding store/)")
    p.add_argument("msg_id", metavar="MSGID", nargs="?",
                   help="offset msgId (store host + commitlog offset, 32 or 56 hex digits); a client UNIQ_KEY "
                        "is looked up in the index when no record has that msgId")
    p.add_argument("--key", help="find messages by key (a KEYS token or the UNIQ_KEY), through the index")
    p.add_argument("--topic", help="with --key: only this topic (default: every topic with a consume queue)")
    p.add_argument("--offset", help="the commitlog (physical) offset of the record")
    p.add_argument("--max", type=_max_results, default=64, metavar="N",
                   help="with --key: at most N messages per topic (default 64)")
    p.add_argument("--json", action="store_true", help="JSON lines, one object per message (machine output)")
    p.add_argument("--no-body", action="store_true", help="leave the body out")


def _max_results(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _msg(args: argparse.Namespace, io: Streams) -> int:  # noqa: C901 -- one branch per way of naming a message (offset, id, key, queue)
    from ..common.errors import LayoutError
    from ..read.inspect_store import (MessageNotFoundError, find_by_key, find_by_msg_id, message_info, parse_offset,
                                read_message_at)

    given = [x for x in (args.msg_id is not None, args.key is not None, args.offset is not None) if x]
    if len(given) != 1:
        raise CliError("give exactly one of MSGID, --key KEY or --offset N")
    if args.topic is not None and args.key is None:
        raise CliError("--topic goes with --key")
    offset = None
    if args.offset is not None:
        try:
            offset = parse_offset(args.offset)
        except LayoutError as exc:
            raise CliError(f"--offset: {exc}") from None
    if args.msg_id is not None:
        from ..format.record import decode_message_id

        try:
            decode_message_id(args.msg_id.strip().upper())
        except LayoutError as exc:
            raise CliError(f"{exc} (use --key for a message key)") from None
    store = open_read_only(args.store, io)
    try:
        found: list = []
        why = ""
        how = ""
        try:
            if offset is not None:
                found = [(offset, read_message_at(store, offset))]
                how = f"offset {offset}"
            elif args.key is not None:
                found = find_by_key(store, args.key, args.topic, args.max)
                how = f"key {args.key!r}" + (f" in topic {args.topic!r}" if args.topic is not None else "")
                if not found:
                    why = f"no message has key {args.key!r}" + (
                        f" in topic {args.topic!r}" if args.topic is not None else " in any topic")
            else:
                msg_id = args.msg_id.strip().upper()
                try:
                    found = [find_by_msg_id(store, msg_id)]
                    how = f"msgId {msg_id}"
                except MessageNotFoundError as exc:
                    by_uniq = [(o, r) for o, r in find_by_key(store, msg_id, None, args.max)
                               if r.properties and f"UNIQ_KEY\x01{msg_id}" in r.properties]
                    if not by_uniq:
                        raise MessageNotFoundError(f"msgId {msg_id}: {exc}; no message has it as UNIQ_KEY "
                                                   "either") from None
                    found = by_uniq
                    how = f"UNIQ_KEY {msg_id}"
        except MessageNotFoundError as exc:
            why = str(exc)
        infos = [message_info(store, o, r, include_body=not args.no_body) for o, r in found]
    finally:
        store.close()
    if not infos:
        io.stderr.write(f"{PROG}: not found: {why}\n")
        return EXIT_INCOMPLETE
    if args.json:
        for info in infos:
            json_out(io, info, indent=None)
        return EXIT_OK
    out = Out(io)
    if len(infos) > 1:
        out.line(f"{len(infos)} messages found by {how}")
    for info in infos:
        _print_message(out, info, show_body=not args.no_body)
    return EXIT_OK


def _body_preview(info: dict, limit: int = 160) -> str:
    body = bytes.fromhex(info["body"]) if "body" in info else None
    n = info.get("body_length", len(body) if body is not None else 0)
    if body is None:
        return f"{n} bytes (not shown)"
    if not body:
        return "0 bytes"
    head = f"{len(body)} bytes"
    if info["sys_flag"] & 0x1:  # COMPRESSED_FLAG: show what the consumer gets
        import zlib

        try:
            plain = zlib.decompress(body)
        except zlib.error:
            head += ", compressed (does not inflate)"
        else:
            head += f", zlib-compressed from {len(plain)} bytes"
            body = plain
    try:
        text = body.decode("utf-8")
        printable = all(c.isprintable() or c in "\n\t" for c in text)
    except UnicodeDecodeError:
        printable = False
    if printable:
        shown = text[:limit].replace("\n", "\\n").replace("\t", "\\t")
        return f"{head}: {shown!r}" + (" ..." if len(text) > limit else "")
    shown = body[:limit // 2].hex(" ")
    return f"{head}, hex: {shown}" + (" ..." if len(body) > limit // 2 else "")


def _print_message(out: Out, info: dict, show_body: bool = True) -> None:
    names = ", ".join(info["sys_flag_names"]) or "-"
    crc = (f"{info['body_crc']} ok" if info["crc_ok"]
           else f"BAD: stored {info['body_crc']}, body gives {info['body_crc_computed']}")
    props = info["properties_map"]
    prop_text = "\n".join(f"{k} = {v}" for k, v in props.items()) if props else "-"
    cq = info["consume_queue"]
    if cq.get("note"):
        cq_text = cq["note"]
    elif cq["unit"] is None:
        cq_text = f"no unit at queue offset {cq['queueOffset']}"
    elif cq["pointsHere"]:
        cq_text = f"unit {cq['queueOffset']} points here (size {cq['unit'][1]}, tags code {cq['unit'][2]})"
    else:
        cq_text = f"unit {cq['queueOffset']} points at offset {cq['unit'][0]}, not here"
    rows = [
        ("msgId", info["msg_id"]),
        ("where", f"{info['file']} position {num(info['position'])} (commitlog offset {num(info['offset'])}), "
                  f"{num(info['total_size'])} bytes"),
        ("topic", info["topic"]),
        ("queue", f"{info['queue_id']}, queue offset {info['queue_offset']}"),
        ("keys", ", ".join(info["keys"]) or "-"),
        ("tags", props.get("TAGS", "-")),
        ("born", f"{show_time(info['born_time'], info['born_timestamp'])} from {info['born_host']}"),
        ("stored", f"{show_time(info['store_time'], info['store_timestamp'])} on {info['store_host']}"),
        ("flag", info["flag"]),
        ("sysFlag", f"{info['sys_flag']:#x} ({names})"),
        ("reconsume", info["reconsume_times"]),
        ("prepared txn", info["prepared_transaction_offset"]),
        ("body CRC", crc),
    ]
    if show_body:
        rows.append(("body", _body_preview(info)))
    rows += [("properties", prop_text), ("consume queue", cq_text)]
    if info.get("version", 1) != 1:
        rows.insert(2, ("record", f"version {info['version']} (RocketMQ 5.x)"))
    out.kv(rows, title=f"message at offset {info['offset']}")


COMMAND = Command("show one message by msgId, key or commitlog offset (read-only)", _msg_arguments, _msg)
