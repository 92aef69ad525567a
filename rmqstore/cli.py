"""``rmqstore`` -- the command line.

Subcommands live in :data:`COMMANDS` (name -> :class:`Command`); adding one means writing
an ``add_arguments(parser)`` and a ``run(args, io) -> exit code`` and registering them.

``rmqstore dump STORE --json``
    Every record of the commitlog, blanks included, as JSON lines on stdout (the format is
    :mod:`rmqstore.dumpfmt`).  Strictly read-only (:mod:`rmqstore.scan`).  Exit 0 when the
    log ends normally, 1 when it ends on an undecodable record or a gap between files
    (everything before is still written, a warning names where).

``rmqstore load STORE``
    Reads such JSON lines on stdin and writes every record again through
    :meth:`MessageStore.put_message` in replay form (recorded store timestamp, hosts and
    queue offset are kept).  A ``blank`` line makes the store fill the rest of the current
    segment with a blank record.  Every record must land at its recorded physical offset
    -- otherwise load stops with an error -- unless ``--renumber`` lets the store assign
    offsets (physical and queue offsets; blank lines are then skipped, the store writes
    its own, and prepared-transaction offsets that point at a loaded record follow it).
    The segment size comes from ``--commitlog-file-size`` or ``--like OTHER`` (a store, or
    a fixture folder with ``store/`` and ``manifest.json`` whose flush settings are used
    too).  The store always uses ASYNC_FLUSH as an ASYNC_MASTER and is shut down cleanly,
    also after an error.  A non-empty target is refused unless ``--append``.

Errors print one line, ``rmqstore: error: ...``, on stderr and exit 2.  Progress bars
(rich) appear on stderr only when it is a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import dataclass, replace
from typing import Callable

from .config import BrokerRole, FlushDiskType, StoreConfig
from .dumpfmt import DumpFormatError, blank_from_json, json_to_message, record_to_json
from .errors import RmqStoreError
from .store_dir import infer_config
from .scan import CommitLogScan, find_commitlog_dir, list_segments

__all__ = ["main", "COMMANDS", "Command", "CliError", "Streams"]

PROG = "rmqstore"
EXIT_OK, EXIT_INCOMPLETE, EXIT_ERROR = 0, 1, 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


@dataclass
class Streams:
    """The streams a command uses (injectable for tests). ``stdin`` may be binary or text."""

    stdin: object
    stdout: object
    stderr: object

    @property
    def stderr_is_tty(self) -> bool:
        isatty = getattr(self.stderr, "isatty", None)
        try:
            return bool(isatty and isatty())
        except (ValueError, OSError):
            return False


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Streams], int]


# -- progress -----------------------------------------------------------------------------

class _Progress:
    """A rich progress bar on stderr when it is a terminal; otherwise nothing."""

    def __init__(self, io: Streams, description: str, total: int | None = None, unit: str = "bytes"):
        self._bar = None
        self._task = None
        if not io.stderr_is_tty:
            return
        try:
            from rich.console import Console
            from rich.progress import (BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn)
        except ImportError:  # pragma: no cover - rich is a dependency
            return
        columns = [SpinnerColumn(), TextColumn("[bold]{task.description}")]
        if total is not None:
            columns.append(BarColumn())
        columns.append(DownloadColumn() if unit == "bytes" else TextColumn("{task.completed} " + unit))
        columns.append(TimeElapsedColumn())
        self._bar = Progress(*columns, console=Console(file=io.stderr), transient=True)
        self._task = self._bar.add_task(description, total=total)

    def __enter__(self):
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.stop()

    def update(self, completed: int, total: int | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, total=total)

    def log(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)


# -- dump -----------------------------------------------------------------------------------

def _dump_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (holding commitlog/) or a commitlog directory")
    p.add_argument("--json", dest="format", action="store_const", const="json", default="json",
                   help="JSON lines, one object per record, blanks included (the default, and for now the "
                        "only format)")
    p.add_argument("--no-body", action="store_true", help="leave the body out (such a dump cannot be loaded)")


def _dump(args: argparse.Namespace, io: Streams) -> int:
    out = io.stdout
    include_body = not args.no_body
    dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
    scan = CommitLogScan(args.store)
    with _Progress(io, "dump", scan.total_bytes) as progress:
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


# -- load -----------------------------------------------------------------------------------

def _load_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root to write (created if missing)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--commitlog-file-size", type=_positive_int, metavar="N",
                      help="segment size in bytes (default: RocketMQ's 1 GiB, or the size of the existing "
                           "segments with --append)")
    size.add_argument("--like", metavar="OTHER",
                      help="take the segment size from OTHER's commitlog files; OTHER may also be a fixture "
                           "folder with store/ and manifest.json, whose flush settings are used as well")
    p.add_argument("--append", action="store_true", help="allow loading into a store that is not empty")
    p.add_argument("--renumber", action="store_true",
                   help="let the store assign physical and queue offsets instead of requiring every record "
                        "to land where it was recorded (blank lines are skipped)")


def _positive_int(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 8:
        raise argparse.ArgumentTypeError(f"a segment must be larger than 8 bytes, got {value}")
    return value


def _segment_size_of(path: str) -> int:
    segments = list_segments(find_commitlog_dir(path))
    if not segments:
        raise CliError(f"{path} has no commitlog files to take the segment size from")
    sizes = {s.size for s in segments}
    if len(sizes) != 1:
        raise CliError(f"{path}: the commitlog files have different sizes {sorted(sizes)}")
    size = sizes.pop()
    if size <= 8:
        raise CliError(f"{path}: commitlog files of {size} bytes are not usable segments")
    return size


def _config_like(path: str) -> StoreConfig:
    if not os.path.isdir(path):
        raise CliError(f"--like {path}: no such directory")
    manifest_path = os.path.join(path, "manifest.json")
    if os.path.isfile(manifest_path) and os.path.isdir(os.path.join(path, "store")):
        try:
            with open(manifest_path, encoding="utf-8") as f:
                cfg = json.load(f)["config"]
            config = StoreConfig.from_manifest(cfg)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CliError(f"--like {path}: cannot read the manifest's config: {exc}") from None
        if list_segments(find_commitlog_dir(os.path.join(path, "store"))):
            size = _segment_size_of(os.path.join(path, "store"))
            if size != config.mapped_file_size_commit_log:
                raise CliError(f"--like {path}: the manifest says {config.mapped_file_size_commit_log}-byte "
                               f"segments but store/ holds {size}-byte files")
        return config
    return StoreConfig(mapped_file_size_commit_log=_segment_size_of(path))


def _load_config(args: argparse.Namespace) -> StoreConfig:
    if args.like:
        config = _config_like(args.like)
    elif args.commitlog_file_size:
        config = StoreConfig(mapped_file_size_commit_log=args.commitlog_file_size)
    elif args.append and os.path.isdir(args.store) and _has_segments(args.store):
        try:
            config = infer_config(args.store)
        except RmqStoreError as exc:
            raise CliError(str(exc)) from None
    else:
        config = StoreConfig()
    # load writes as a plain async master, whatever the source store did
    return replace(config, flush_disk_type=FlushDiskType.ASYNC_FLUSH, broker_role=BrokerRole.ASYNC_MASTER)


def _has_segments(path: str) -> bool:
    try:
        return bool(list_segments(find_commitlog_dir(path)))
    except RmqStoreError:
        return False


def _read_lines(stream):
    """Yield ``(line number, parsed object)`` of non-empty JSON lines."""
    for lineno, raw in enumerate(stream, 1):
        if isinstance(raw, (bytes, bytearray)):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CliError(f"line {lineno}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
        text = raw.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(f"line {lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise CliError(f"line {lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


class _Loader:
    """Replays dumped records into a started store, checking where each one lands."""

    def __init__(self, store, renumber: bool):
        self.store = store
        self.commit_log = store.commit_log
        self.segment_size = store.config.mapped_file_size_commit_log
        self.renumber = renumber
        self.messages = self.blanks = self.skipped_blanks = 0
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
            raise CliError(f"line {lineno}: blank record recorded at offset {offset}, but the store's write "
                           f"position is {here}")
        left = self.segment_size - offset % self.segment_size
        if total != left:
            raise CliError(f"line {lineno}: the blank record at offset {offset} declares {total} bytes, but "
                           f"{left} bytes are left in this {self.segment_size}-byte segment (was the dump "
                           f"taken from a store with another segment size? see --like / --commitlog-file-size)")
        result = self.commit_log.append_blank_at_current_position()
        if result is None:
            raise CliError(f"line {lineno}: could not create a commitlog file for the blank at offset {offset}")
        if result.wrote_offset != offset or result.wrote_bytes != total:
            raise CliError(f"line {lineno}: the blank recorded at offset {offset} ({total} bytes) was written at "
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
            raise CliError(f"line {lineno}: the record at offset {offset} is a version {version} record; this "
                           f"store writes version 1 (RocketMQ 4.9.8) records only (--renumber converts)")
        else:
            here = self.write_position()
            if offset != here:
                raise CliError(f"line {lineno}: record recorded at offset {offset}, but the store's write "
                               f"position is {here} (a record or blank before it is missing or out of order; "
                               f"--renumber lets the store choose)")
        result = self.store.put_message(msg)
        ar = result.append_result
        if not result.ok or ar is None:
            detail = f": {result.message}" if result.message else ""
            raise CliError(f"line {lineno}: the store refused the record recorded at offset {offset}: "
                           f"{result.status.name}{detail}")
        if self.renumber:
            self.moved[offset] = ar.wrote_offset
        else:
            if ar.wrote_offset != offset:
                raise CliError(f"line {lineno}: the record recorded at offset {offset} landed at {ar.wrote_offset} "
                               f"(it did not fit in the rest of the segment; is a blank line missing?)")
            total = obj.get("total_size")
            if type(total) is int and ar.wrote_bytes != total:
                raise CliError(f"line {lineno}: the record at offset {offset} was {total} bytes when dumped but "
                               f"{ar.wrote_bytes} bytes when written")
        self.messages += 1


def _load(args: argparse.Namespace, io: Streams) -> int:
    from .store import MessageStore

    root = args.store
    if os.path.exists(root) and not os.path.isdir(root):
        raise CliError(f"{root} exists and is not a directory")
    if os.path.isdir(root) and os.listdir(root) and not args.append:
        raise CliError(f"{root} is not empty; refusing to load into it (use --append to add to an existing store)")
    isatty = getattr(io.stdin, "isatty", None)
    if isatty is not None and isatty():
        raise CliError("load reads JSON lines on stdin; pipe a dump into it (rmqstore dump SRC | rmqstore load DST)")
    config = _load_config(args)
    store = MessageStore(root, config)
    store.start()
    loader = _Loader(store, args.renumber)
    try:
        with _Progress(io, "load", None, unit="records") as progress:
            for lineno, obj in _read_lines(io.stdin):
                kind = obj.get("type")
                try:
                    if kind == "message":
                        loader.message(lineno, obj)
                    elif kind == "blank":
                        loader.blank(lineno, obj)
                    elif kind is None:
                        raise DumpFormatError("missing field 'type'")
                    else:
                        raise DumpFormatError(f"unknown record type {kind!r} (expected 'message' or 'blank')")
                except DumpFormatError as exc:
                    raise CliError(f"line {lineno}: {exc}") from None
                if lineno % 256 == 0:
                    progress.update(loader.messages + loader.blanks)
    finally:
        store.shutdown()
    if io.stderr_is_tty:
        skipped = f", {loader.skipped_blanks} blank lines skipped" if loader.skipped_blanks else ""
        io.stderr.write(f"{PROG}: loaded {loader.messages} messages and {loader.blanks} blanks into {root}{skipped}; "
                        f"write position {loader.write_position()}\n")
    return EXIT_OK


# -- the command table -----------------------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "dump": Command("write every commitlog record as JSON lines (read-only)", _dump_arguments, _dump),
    "load": Command("write JSON-lines records from stdin into a store, byte for byte", _load_arguments, _load),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Apache RocketMQ's commitlog store, in Python.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv=None, *, stdin=None, stdout=None, stderr=None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 incomplete dump, 2 error)."""
    io = Streams(stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin),
                 stdout if stdout is not None else sys.stdout,
                 stderr if stderr is not None else sys.stderr)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the error
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return args._run(args, io)
    except CliError as exc:
        io.stderr.write(f"{PROG}: error: {exc}\n")
    except (RmqStoreError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):  # e.g. `rmqstore dump ... | head`
            _silence_stdout()
            return EXIT_OK
        text = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.filename else str(exc)
        io.stderr.write(f"{PROG}: error: {text}\n")
    except KeyboardInterrupt:
        io.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("RMQSTORE_DEBUG"):
            traceback.print_exc(file=io.stderr)
        io.stderr.write(f"{PROG}: internal error: {type(exc).__name__}: {exc} (set RMQSTORE_DEBUG=1 for a "
                        f"traceback)\n")
    return EXIT_ERROR


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
