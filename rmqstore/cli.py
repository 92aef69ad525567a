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
    :meth:`MessageStore.replay_message` (recorded store timestamp, hosts and body CRC are
    kept; a recorded queue offset must be the queue's next one).  A record whose recorded
    body CRC does not match its body is copied as it is, CRC and all, with a warning on
    stderr: a copy never vouches for a damaged body.  ``--repair`` writes the body's CRC
    instead and prints each change on stdout.  A ``blank`` line makes the store fill the
    rest of the current segment with a blank record.  Every record must land at its recorded physical offset
    -- otherwise load stops with an error -- unless ``--renumber`` lets the store assign
    offsets (physical and queue offsets; blank lines are then skipped, the store writes
    its own, and prepared-transaction offsets that point at a loaded record follow it).
    The sizes come from ``--like OTHER``: every size of OTHER's files -- commitlog
    segments, consume-queue files, index slots and entries (read off an index file's
    header, slot table and entry chains, :func:`rmqstore.store_dir.index_dimensions`) --
    so the copy opens in a broker configured like the original; OTHER may also be a
    fixture folder with ``store/`` and ``manifest.json`` (whose flush settings are used
    too).  Or from ``--commitlog-file-size``, ``--consume-queue-file-size``,
    ``--max-hash-slot-num`` and ``--max-index-num``, which with ``--like`` stand in for
    what OTHER has no file of (or whose index files hold no key) and must agree with
    what its files show.  The store always uses ASYNC_FLUSH as an ASYNC_MASTER and is shut down cleanly,
    also after an error.  A non-empty target is refused unless ``--append``.

``rmqstore inspect STORE [--json]``
    The store at a glance (:mod:`rmqstore.inspect_store`): commitlog files with their
    positions and how each ends, topics and queues with min/max offsets, index headers,
    checkpoint, abort and lock files, free disk space, and a one-line health verdict.

``rmqstore msg STORE MSGID`` / ``--key KEY [--topic T]`` / ``--offset N``
    One message (or every message with that key), fields shown readably: ISO times,
    ``ip:port`` hosts, properties one per line, body CRC ok/bad, the consume-queue unit
    that points at it.  ``--json`` writes JSON lines.  Exit 1 when nothing is found.

``rmqstore verify STORE [--json]``
    Checks every record, unit and index entry against each other
    (:mod:`rmqstore.verify`).  Exit 0 when no damage is found (warnings, such as an abort
    file, allowed), 1 when damage is found, 2 for usage errors.  A store too damaged to
    open is still examined.

``rmqstore site [--out DIR] [--notebooks PATH ...] [--no-execute]``
    Executes every notebook and writes a static HTML site (default ``site/``): one page per
    notebook with its views working without a kernel, and an ``index.html``
    (:mod:`rmqstore.widgets.site`).

inspect, msg and verify open the store with ``open_store(read_only=True)`` and close it;
they never write.  Human output uses rich tables when stdout is a terminal and plain
aligned text otherwise.

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
from typing import Any, Callable, TextIO

from .config import BrokerRole, FlushDiskType, StoreConfig
from .dumpfmt import DumpFormatError, blank_from_json, json_to_message, record_to_json
from .crc import crc32
from .errors import RmqStoreError
from .progress import ProgressBar, isatty
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

    stdin: Any
    stdout: TextIO
    stderr: TextIO

    @property
    def stderr_is_tty(self) -> bool:
        return isatty(self.stderr)

    @property
    def stdout_is_tty(self) -> bool:
        return isatty(self.stdout)


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Streams], int]


# -- progress -----------------------------------------------------------------------------

def _progress(io: Streams, description: str, total: int | None = None, unit: str = "bytes") -> ProgressBar:
    """A transient bar on stderr when it is a terminal; otherwise nothing."""
    return ProgressBar(io.stderr, description, total, unit, enabled=io.stderr_is_tty)


# -- dump -----------------------------------------------------------------------------------

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
    with _progress(io, "dump", scan.total_bytes) as progress:
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
                      help="take every file size from OTHER's files: commitlog segments, consume-queue files, "
                           "index slots and entries (read off the index files' header, slot table and entry "
                           "chains); OTHER may also be a fixture folder with store/ and manifest.json, whose "
                           "sizes and flush settings are used")
    p.add_argument("--consume-queue-file-size", type=_count, metavar="N",
                   help="consume-queue file size in bytes (with --like: only when OTHER has no consume-queue file, "
                        "or to agree with its files)")
    p.add_argument("--max-hash-slot-num", type=_count, metavar="N",
                   help="hash slots per index file (with --like: when OTHER's index files do not tell, or to "
                        "agree with them)")
    p.add_argument("--max-index-num", type=_count, metavar="N",
                   help="entries per index file (with --like: when OTHER's index files do not tell, or to agree "
                        "with them)")
    p.add_argument("--append", action="store_true", help="allow loading into a store that is not empty")
    p.add_argument("--renumber", action="store_true",
                   help="let the store assign physical and queue offsets instead of requiring every record "
                        "to land where it was recorded (blank lines are skipped)")
    p.add_argument("--repair", action="store_true",
                   help="write a record whose recorded body CRC does not match its body with the CRC of its "
                        "body, and print each such change (without it the copy keeps the recorded CRC and a "
                        "warning names the record)")


def _positive_int(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 8:
        raise argparse.ArgumentTypeError(f"a segment must be larger than 8 bytes, got {value}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _explicit_sizes(args: argparse.Namespace) -> dict:
    """The sizes given on the command line, as StoreConfig fields."""
    given = {"mapped_file_size_consume_queue": args.consume_queue_file_size,
             "max_hash_slot_num": args.max_hash_slot_num, "max_index_num": args.max_index_num}
    return {k: v for k, v in given.items() if v is not None}


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


def _config_like(path: str, explicit: dict) -> StoreConfig:
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
        for name, value in explicit.items():
            if getattr(config, name) != value:
                raise CliError(f"--like {path}: the manifest says {name} {getattr(config, name)}, not {value}")
        return config
    size = _segment_size_of(path)  # a commitlog directory, or a store root
    commitlog = find_commitlog_dir(path)
    root = os.path.dirname(commitlog) if os.path.basename(commitlog) == "commitlog" else None
    if root is None:  # a bare commitlog directory: nothing else to copy sizes from
        return StoreConfig(mapped_file_size_commit_log=size, **explicit)
    try:
        return infer_config(root, cq_file_size=explicit.get("mapped_file_size_consume_queue"),
                            max_hash_slot_num=explicit.get("max_hash_slot_num"),
                            max_index_num=explicit.get("max_index_num"), strict=True)
    except RmqStoreError as exc:
        raise CliError(f"--like {path}: {exc} (--consume-queue-file-size, --max-hash-slot-num, "
                       f"--max-index-num)") from None


def _load_config(args: argparse.Namespace) -> StoreConfig:
    explicit = _explicit_sizes(args)
    if args.like:
        config = _config_like(args.like, explicit)
    elif args.commitlog_file_size:
        config = StoreConfig(mapped_file_size_commit_log=args.commitlog_file_size, **explicit)
    elif args.append and os.path.isdir(args.store) and _has_segments(args.store):
        try:
            config = infer_config(args.store, cq_file_size=explicit.get("mapped_file_size_consume_queue"),
                                  max_hash_slot_num=explicit.get("max_hash_slot_num"),
                                  max_index_num=explicit.get("max_index_num"))
        except RmqStoreError as exc:
            raise CliError(str(exc)) from None
    else:
        config = StoreConfig(**explicit)
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
        recorded_crc = msg.body_crc
        body_crc = crc32(msg.body)
        if recorded_crc != body_crc and self.repair:
            msg.body_crc = body_crc
        result = self.store.replay_message(msg)
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
        if recorded_crc != body_crc:
            where = f"line {lineno}: the record at offset {offset}" + (
                f" (written at {ar.wrote_offset})" if ar.wrote_offset != offset else "")
            if self.repair:
                self.repaired += 1
                self.report(f"repaired: {where}: body CRC {recorded_crc} -> {body_crc}")
            else:
                self.warn(f"{where} has a bad body CRC (recorded {recorded_crc}, its body gives {body_crc}); "
                          f"copied as recorded (--repair writes the body's CRC)")


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
    loader = _Loader(store, args.renumber, args.repair,
                     warn=lambda text: io.stderr.write(f"{PROG}: warning: {text}\n"),
                     report=lambda text: io.stdout.write(text + "\n"))
    try:
        with _progress(io, "load", None, unit="records") as progress:
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


# -- human output: rich on a terminal, aligned plain text otherwise ----------------------------------

class _Out:
    """Key/value blocks and tables: rich when stdout is a terminal, plain aligned text when not."""

    def __init__(self, io: Streams):
        self.io = io
        self.console = None
        if io.stdout_is_tty:
            try:
                from rich.console import Console
            except ImportError:  # pragma: no cover - rich is a dependency
                pass
            else:
                self.console = Console(file=io.stdout, highlight=False, soft_wrap=False)
        self._first = True

    def _gap(self) -> None:
        if not self._first:
            self.io.stdout.write("\n") if self.console is None else self.console.print()
        self._first = False

    def kv(self, rows, title: str | None = None) -> None:
        """Label/value lines; a value may span several lines."""
        rows = [(str(k), "" if v is None else str(v)) for k, v in rows]
        self._gap()
        if self.console is not None:
            from rich.table import Table
            from rich.text import Text

            t = Table.grid(padding=(0, 2))
            t.add_column(style="bold", no_wrap=True)
            t.add_column()
            if title:
                self.console.print(Text(title, style="bold underline"))
            for k, v in rows:
                t.add_row(Text(k), Text(v))
            self.console.print(t)
            return
        out = self.io.stdout
        if title:
            out.write(title + "\n")
        width = max((len(k) for k, _ in rows), default=0)
        for k, v in rows:
            lines = v.split("\n") or [""]
            out.write(f"{k.ljust(width)}  {lines[0]}".rstrip() + "\n")
            for more in lines[1:]:
                out.write(f"{'':{width}}  {more}".rstrip() + "\n")

    def table(self, headers, rows, title: str | None = None, right=(), wrap=()) -> None:
        """A table; columns whose index is in ``right`` are right-aligned (numbers); on a terminal
        only the columns in ``wrap`` fold long text, the others keep each value on one line."""
        rows = [["" if c is None else str(c) for c in r] for r in rows]
        self._gap()
        if self.console is not None:
            from rich.table import Table
            from rich.text import Text

            t = Table(title=title, title_justify="left", title_style="bold underline", header_style="bold")
            for i, h in enumerate(headers):
                widest = max([len(h)] + [len(r[i]) for r in rows])
                t.add_column(h, justify="right" if i in right else "left", no_wrap=i not in wrap,
                             overflow="fold" if i in wrap else "ellipsis", ratio=1 if i in wrap else None,
                             min_width=None if i in wrap else min(widest, 40))
            for r in rows:
                t.add_row(*[Text(c) for c in r])
            self.console.print(t)
            return
        out = self.io.stdout
        if title:
            out.write(title + "\n")
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

        def fmt(cells):
            parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)]
            return "  ".join(parts).rstrip() + "\n"

        out.write(fmt(headers))
        for r in rows:
            out.write(fmt(r))

    def line(self, text: str, style: str | None = None) -> None:
        if self.console is not None:
            from rich.text import Text

            self.console.print(Text(text, style=style or ""))
        else:
            self.io.stdout.write(text + "\n")


def _json_out(io: Streams, obj, indent: int | None = 2) -> None:
    io.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=True) + "\n")
    io.stdout.flush()


def _num(n) -> str:
    return f"{n:,}" if isinstance(n, int) else ("-" if n is None else str(n))


def _when(iso: str | None, millis: int) -> str:
    """A record's time as ISO text; 0 is a time never set (a producer that sent none), not 1970."""
    if not millis:
        return "not set (0)"
    return iso or str(millis)


def _elide(text: str, width: int = 48) -> str:
    """A long name shortened in the middle for a table (JSON output keeps it whole)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return f"{text[:keep - keep // 3]}\u2026{text[-(keep // 3):]}"


def _open_read_only(path: str):
    """open_store(read_only=True) with the CLI's error wording."""
    from .store import open_store
    from .store_dir import resolve_store_root

    try:
        root = resolve_store_root(path)
    except RmqStoreError as exc:
        raise CliError(str(exc)) from None
    if not os.path.isdir(os.path.join(root, "commitlog")):
        raise CliError(f"{root}: not a store (no commitlog/ directory)")
    try:
        return open_store(root, read_only=True)
    except RmqStoreError as exc:
        raise CliError(f"cannot open {root} read-only: {exc} (rmqstore verify {path} examines a damaged store)") \
            from None


# -- inspect -----------------------------------------------------------------------------------------

def _inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (or a fixture folder holding store/)")
    p.add_argument("--json", action="store_true", help="one JSON object (machine output)")


def _inspect(args: argparse.Namespace, io: Streams) -> int:
    from .inspect_store import inspect

    store = _open_read_only(args.store)
    try:
        with _progress(io, "inspect") as progress:
            info = inspect(store, progress=progress.update)
    finally:
        store.close()
    if args.json:
        _json_out(io, info)
        return EXIT_OK
    _print_inspect(_Out(io), info)
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
        text = f"blank@{_num(blank['pos'])} ({_num(blank['declaredSize'])} B"
        if blank["tailNonZeroBytes"]:
            text += f", {_num(blank['tailNonZeroBytes'])} stale bytes"
        if not blank["reachesFileEnd"]:
            text += ", short"
        return text + ")"
    if end == "unwritten":
        text = f"unwritten@{_num(seg['dataEnd'])}"
        if seg.get("nonZeroAfterEnd"):
            text += f" (+{_num(seg['nonZeroAfterEnd'])} non-zero)"
        return text if seg["inStore"] or seg["records"] else "empty (pre-allocated)"
    return end


def _print_inspect(out: _Out, info: dict) -> None:
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
        ("commitlog", f"offsets {_num(cl['minOffset'])} .. {_num(cl['maxOffset'])} in {cl['files']} file(s) of "
                      f"{_num(cfg['commitLogFileSize'])} bytes"),
        ("messages", f"{_num(cq['messages'])} in {cq['queues']} queue(s) of {len(info['topics'])} topic(s)"),
        ("dispatched", "-" if cq["dispatchedUpTo"] is None else f"up to offset {_num(cq['dispatchedUpTo'])}"),
        ("index", f"{len(info['index'])} file(s), {_num(sum(i['entries'] for i in info['index']))} entries "
                  f"({_num(cfg['indexHashSlots'])} slots, {_num(cfg['indexEntries'])} entries per file)"),
        ("checkpoint", cp_text),
        ("abort", "present: the last run did not shut down cleanly" if info["abort"] else "absent (clean shutdown)"),
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
            pos = _num(w) if w == c == f else f"{_num(w)}/{_num(c)}/{_num(f)}"
        stored = "-" if not seg["firstStoreTime"] else f"{when(seg['firstStoreTime'])} .. {when(seg['lastStoreTime'])}"
        rows.append([seg["file"], _num(seg["size"]), _num(seg["records"]), pos, _segment_end(seg), stored])
    out.table(["file", "size", "records", "position", "ends with", "stored" + (f" ({day})" if day else "")],
              rows, title="commitlog files", right=(1, 2, 3), wrap=(4, 5))
    rows = []
    for t in info["topics"]:
        for q in t["queues"]:
            rows.append([_elide(t["topic"]), q["queueId"], _num(q["minOffset"]), _num(q["maxOffset"]), _num(q["messages"]),
                         q["files"], _num(q["lastPhyOffset"])])
    if rows:
        out.table(["topic", "queue", "min", "max", "messages", "files", "last offset"], rows,
                  title="topics and queues", right=(1, 2, 3, 4, 5, 6), wrap=(0,))
    rows = [[i["file"], f"{_num(i['entries'])}/{_num(i['capacity'])}", _num(i["hashSlotCount"]),
             f"{_num(i['beginPhyOffset'])} .. {_num(i['endPhyOffset'])}",
             f"{when(i['beginTime']) if i['beginTime'] else '-'} .. {when(i['endTime']) if i['endTime'] else '-'}"]
            for i in info["index"]]
    if rows:
        out.table(["file", "entries", "slots used", "offsets", "stored" + (f" ({day})" if day else "")], rows,
                  title="index files", right=(1, 2), wrap=(3, 4))
    if info["issues"]:
        out.kv([(f"{i}.", issue) for i, issue in enumerate(info["issues"], 1)], title="what looks wrong")


# -- msg -------------------------------------------------------------------------------------------

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


def _msg(args: argparse.Namespace, io: Streams) -> int:
    from .errors import LayoutError
    from .inspect_store import (MessageNotFoundError, find_by_key, find_by_msg_id, message_info, parse_offset,
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
        from .record import decode_message_id

        try:
            decode_message_id(args.msg_id.strip().upper())
        except LayoutError as exc:
            raise CliError(f"{exc} (use --key for a message key)") from None
    store = _open_read_only(args.store)
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
            _json_out(io, info, indent=None)
        return EXIT_OK
    out = _Out(io)
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


def _print_message(out: _Out, info: dict, show_body: bool = True) -> None:
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
        ("where", f"{info['file']} position {_num(info['position'])} (commitlog offset {_num(info['offset'])}), "
                  f"{_num(info['total_size'])} bytes"),
        ("topic", info["topic"]),
        ("queue", f"{info['queue_id']}, queue offset {info['queue_offset']}"),
        ("keys", ", ".join(info["keys"]) or "-"),
        ("tags", props.get("TAGS", "-")),
        ("born", f"{_when(info['born_time'], info['born_timestamp'])} from {info['born_host']}"),
        ("stored", f"{_when(info['store_time'], info['store_timestamp'])} on {info['store_host']}"),
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


# -- verify ------------------------------------------------------------------------------------------

def _verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root (or a fixture folder holding store/)")
    p.add_argument("--json", action="store_true", help="one JSON object (machine output)")


def _verify(args: argparse.Namespace, io: Streams) -> int:
    from .store import open_store
    from .store_dir import resolve_store_root
    from .verify import verify

    try:
        root = resolve_store_root(args.store)
    except RmqStoreError as exc:
        raise CliError(str(exc)) from None
    if not os.path.isdir(os.path.join(root, "commitlog")):
        raise CliError(f"{root}: not a store (no commitlog/ directory)")
    try:
        store = open_store(root, read_only=True)
    except RmqStoreError:
        store = None  # too damaged to open: verify examines the files and says why
    try:
        with _progress(io, "verify", 1) as progress:
            report = verify(store if store is not None else root, progress=progress.update)
    finally:
        if store is not None:
            store.close()
    if args.json:
        _json_out(io, report.to_dict())
    else:
        _print_verify(_Out(io), report)
    return EXIT_OK if report.ok else EXIT_INCOMPLETE


def _print_verify(out: _Out, report) -> None:
    r = report
    out.kv([
        ("store", os.path.abspath(r.root)),
        ("commitlog", f"{r.segments} file(s), {_num(r.commitlog_bytes)} bytes: {_num(r.records)} messages, "
                      f"{_num(r.blanks)} blanks (data {_num(r.log_start)} .. {_num(r.log_end)})"),
        ("consume queues", f"{r.queues} queue(s), {_num(r.units)} units"),
        ("index", f"{r.index_files} file(s), {_num(r.entries)} entries"),
        ("result", r.summary()),
    ])
    if r.problems:
        rows = [[p.severity.upper(), p.where, p.message, p.kind] for p in r.problems]
        out.table(["", "where", "what", "kind"], rows, title="problems", wrap=(2,))
    if r.suppressed:
        out.line("not listed: " + ", ".join(f"{n} more {k}" for k, n in sorted(r.suppressed.items())))


# -- site ---------------------------------------------------------------------------------------

def _site_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="site", help="output directory (default: site/)")
    p.add_argument("--notebooks", nargs="+", metavar="PATH",
                   help="a directory of notebooks or notebook files, in order (default: notebooks/)")
    p.add_argument("--no-execute", action="store_true", help="export the saved outputs without running")
    p.add_argument("--timeout", type=_positive_int, default=600, help="seconds per cell (default: 600)")


def _site(args: argparse.Namespace, io: Streams) -> int:
    from rmqstore.widgets.site import build_site  # Jupyter imports only for this command

    site = build_site(args.out, args.notebooks, execute=not args.no_execute, timeout=args.timeout,
                      progress=io.stderr_is_tty)
    for page in site.pages:
        io.stdout.write(f"{page.html_path}  {page.title}  ({page.seconds:.1f} s)\n")
    io.stdout.write(f"{site.index}\n")
    return EXIT_OK


# -- the command table -----------------------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "dump": Command("write every commitlog record as JSON lines (read-only)", _dump_arguments, _dump),
    "load": Command("write JSON-lines records from stdin into a store, byte for byte", _load_arguments, _load),
    "inspect": Command("show a store at a glance: files, positions, queues, index, checkpoint, health (read-only)",
                       _inspect_arguments, _inspect),
    "msg": Command("show one message by msgId, key or commitlog offset (read-only)", _msg_arguments, _msg),
    "verify": Command("check every commitlog record, consume-queue unit and index entry (read-only); "
                      "exit 1 when damage is found", _verify_arguments, _verify),
    "site": Command("build the documentation site: every notebook executed, its views working with no kernel",
                    _site_arguments, _site),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Apache RocketMQ's commitlog store, in Python.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_run=cmd.run, _parser=p)
    from .spark.cli import add_spark_parser  # imports no pyspark until `rmqstore spark` runs

    add_spark_parser(sub)
    from .broker.cli import add_broker_parser  # asyncio and the broker load only when it runs

    add_broker_parser(sub)
    return parser


def main(argv=None, *, stdin=None, stdout=None, stderr=None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 incomplete dump, 2 error)."""
    io = Streams(stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin),
                 stdout if stdout is not None else sys.stdout,
                 stderr if stderr is not None else sys.stderr)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # the command's own usage names the mistake, not the top-level one
            getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
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
