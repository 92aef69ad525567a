"""``rmqstore dump STORE --json``: every commitlog record, blanks included, as JSON lines (read-only)."""

from __future__ import annotations

import argparse
import json

from ..format.dumpfmt import record_to_json
from ..read.scan import CommitLogScan
from .terminal import PROG, EXIT_INCOMPLETE, EXIT_OK, Command, Streams, progress_bar

__all__ = ["COMMAND"]


def _dump_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (holding commitlog/) or a commitlog directory")
    p.add_argument("--json", dest="format", action="store_const", const="json", default="json",
                   help="JSON lines, one object per record, blanks included (the default, and for now the "
                        "only format): the body is a lowercase hex string, hosts are \"ip:port\" strings")
    p.add_argument("--no-body", action="store_true", help="leave the body out (such a dump cannot be loaded)")


def _dump(args: argparse.Namespace, io: Streams) -> int:
    out = io.stdout
    include_body = not args.no_body
    dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
    scan = CommitLogScan(args.store)
    for stray in scan.strays:
        io.stderr.write(f"{PROG}: warning: {stray.path}: {stray.why}\n")
    with progress_bar(io, "dump", scan.total_bytes) as progress:
        scan.progress = progress.update
        lines = []
        for offset, record in scan:
            lines.append(dumps(record_to_json(offset, record, include_body=include_body)))
            if len(lines) >= 256:
                out.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            out.write("\n".join(lines) + "\n")
        out.flush()
    stop = scan.stop
    if io.stderr_is_tty:
        io.stderr.write(f"{PROG}: dumped {scan.records} records ({scan.messages} messages, {scan.blanks} blanks); "
                        f"log ends: {stop}\n")
    if not stop.clean:
        io.stderr.write(f"{PROG}: warning: the dump is incomplete: {stop}\n")
        return EXIT_INCOMPLETE
    return EXIT_OK


COMMAND = Command("write every commitlog record as JSON lines (read-only)", _dump_arguments, _dump)
