"""``rmqstore verify STORE [--json]``: every record, unit and index entry checked (:mod:`rmqstore.read.verify`).

:func:`print_verify` shows a report; ``rmqstore spark verify`` prints its reports with it too.
"""

from __future__ import annotations

import argparse
import os

from ..common.errors import RmqStoreError
from ..files.store_paths import commitlog_dir
from .terminal import EXIT_INCOMPLETE, EXIT_OK, CliError, Command, Out, Streams, json_out, num, progress_bar

__all__ = ["COMMAND", "print_verify"]


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (or a fixture folder holding store/)")
    p.add_argument("--json", action="store_true", help="one JSON object (machine output)")


def _verify(args: argparse.Namespace, io: Streams) -> int:
    from ..store import open_store
    from ..files.store_dir import resolve_store_root
    from ..read.verify import verify

    try:
        root = resolve_store_root(args.store)
    except RmqStoreError as exc:
        raise CliError(str(exc)) from None
    if not os.path.isdir(commitlog_dir(root)):
        raise CliError(f"{root}: not a store (no commitlog/ directory)")
    try:
        store = open_store(root, read_only=True)
    except RmqStoreError:
        store = None  # too damaged to open: verify examines the files and says why
    try:
        with progress_bar(io, "verify", 1) as progress:
            report = verify(store if store is not None else root, progress=progress.update)
    finally:
        if store is not None:
            store.close()
    if args.json:
        json_out(io, report.to_dict())
    else:
        print_verify(Out(io), report)
    return EXIT_OK if report.ok else EXIT_INCOMPLETE


def print_verify(out: Out, report) -> None:
    r = report
    out.kv([
        ("store", os.path.abspath(r.root)),
        ("commitlog", f"{r.segments} file(s), {num(r.commitlog_bytes)} bytes: {num(r.records)} messages, "
                      f"{num(r.blanks)} blanks (data {num(r.log_start)} .. {num(r.log_end)})"),
        ("consume queues", f"{r.queues} queue(s), {num(r.units)} units (the messages in queues, inspect's count)"),
        ("index", f"{r.index_files} file(s), {num(r.entries)} entries"),
        ("result", r.summary()),
    ])
    if r.problems:
        rows = [[p.severity.upper(), p.where, p.message, p.kind] for p in r.problems]
        out.table(["", "where", "what", "kind"], rows, title="problems", wrap=(2,))
    if r.suppressed:
        out.line("not listed: " + ", ".join(f"{n} more {k}" for k, n in sorted(r.suppressed.items())))


COMMAND = Command("check every commitlog record, consume-queue unit and index entry (read-only); "
                  "exit 1 when damage is found", _verify_arguments, _verify)
