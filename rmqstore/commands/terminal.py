"""What every ``rmqstore`` command shares: its streams, its errors and its human output.

A command is an ``add_arguments(parser)`` and a ``run(args, io) -> exit code``
(:class:`Command`).  It writes through :class:`Streams` (injectable, so tests hand in
``StringIO``), fails with :class:`CliError` (one line, exit 2) or any
:class:`~rmqstore.common.errors.RmqStoreError` (exit 2) -- an ``OSError`` is the system refusing the
run something (the open-file limit, a permission, an I/O error), exit 3, never a verdict on a
store -- and shows results with :class:`Out`: rich tables
when stdout is a terminal, plain aligned text otherwise (which is what tests and pipes
see).  :func:`run_command_line` is the one place that turns a parsed command line into an
exit code, for ``rmqstore`` (:mod:`rmqstore.cli`) and for ``rmqstore/spark/cli.py`` run
under spark-submit alike -- so neither has to import the other.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import shutil
import sys
import textwrap
import traceback
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from ..common.errors import RmqStoreError
from ..common.progress import ProgressBar, isatty
from ..files.store_paths import commitlog_dir

__all__ = ["PROG", "EXIT_OK", "EXIT_INCOMPLETE", "EXIT_ERROR", "EXIT_SYSTEM", "CliError", "Streams", "Command", "progress_bar",
           "Out", "json_out", "num", "show_time", "elide", "open_read_only", "positive_int", "streams",
           "run_command_line", "silence_stdout"]

PROG = "rmqstore"
EXIT_OK, EXIT_INCOMPLETE, EXIT_ERROR = 0, 1, 2
#: the system refused the run something (an OSError: the open-file limit, a permission, an I/O error)
EXIT_SYSTEM = 3


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


def progress_bar(io: Streams, description: str, total: int | None = None, unit: str = "bytes") -> ProgressBar:
    """A transient bar on stderr when it is a terminal; otherwise nothing."""
    return ProgressBar(io.stderr, description, total, unit, enabled=io.stderr_is_tty)


def positive_int(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 8:
        raise argparse.ArgumentTypeError(f"a segment must be larger than 8 bytes, got {value}")
    return value


# -- human output: rich on a terminal, aligned plain text otherwise ----------------------------------

def _plain_width() -> int:
    """The width plain output folds to: ``COLUMNS``, the terminal's, or 120 (a pipe, a notebook)."""
    return max(shutil.get_terminal_size((120, 24)).columns, 60)


def _plain_widths(headers, rows, wrap, limit: int) -> list[int]:
    """Column widths for plain text: each column as wide as its widest cell, except that the
    columns in ``wrap`` (long free text) narrow so a line fits in ``limit`` -- a notebook shows
    a longer line folded at its own edge, breaking every column after it."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    wrapped = [i for i in wrap if i < len(widths)]
    over = sum(widths) + 2 * (len(widths) - 1) - limit
    if not wrapped or over <= 0:
        return widths
    fixed = sum(w for i, w in enumerate(widths) if i not in wrapped) + 2 * (len(widths) - 1)
    share = max((limit - fixed) // len(wrapped), 24)
    return [min(w, share) if i in wrapped else w for i, w in enumerate(widths)]


class Out:
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
        widths = _plain_widths(headers, rows, wrap, _plain_width())

        def fmt(cells):
            folded = [textwrap.wrap(c, widths[i], break_on_hyphens=False) or [""] if i in wrap else [c]
                      for i, c in enumerate(cells)]
            lines = []
            for n in range(max(len(f) for f in folded)):
                parts = [(f[n] if n < len(f) else "") for f in folded]
                parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(parts)]
                lines.append("  ".join(parts).rstrip() + "\n")
            return "".join(lines)

        out.write(fmt(headers))
        for r in rows:
            out.write(fmt(r))

    def line(self, text: str, style: str | None = None) -> None:
        if self.console is not None:
            from rich.text import Text

            self.console.print(Text(text, style=style or ""))
        else:
            self.io.stdout.write(text + "\n")


def json_out(io: Streams, obj, indent: int | None = 2) -> None:
    io.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=True) + "\n")
    io.stdout.flush()


def num(n) -> str:
    return f"{n:,}" if isinstance(n, int) else ("-" if n is None else str(n))


def show_time(iso: str | None, millis: int) -> str:
    """A record's time as ISO text; 0 is a time never set (a producer that sent none), not 1970."""
    if not millis:
        return "not set (0)"
    return iso or str(millis)


def elide(text: str, width: int = 48) -> str:
    """A long name shortened in the middle for a table (JSON output keeps it whole)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return f"{text[:keep - keep // 3]}\u2026{text[-(keep // 3):]}"


def open_read_only(path: str, io: Streams | None = None):
    """open_store(read_only=True) with the CLI's error wording; what the open warns of (a file it left
    out, a stray) is written to ``io.stderr`` as ``rmqstore: warning: ...`` lines."""
    from ..store import open_store
    from ..files.store_dir import resolve_store_root

    try:
        root = resolve_store_root(path)
    except RmqStoreError as exc:
        raise CliError(str(exc)) from None
    if not os.path.isdir(commitlog_dir(root)):
        raise CliError(f"{root}: not a store (no commitlog/ directory)")
    try:
        with _warnings_to(io.stderr if io is not None else None):
            return open_store(root, read_only=True)
    except RmqStoreError as exc:
        raise CliError(f"cannot open {root} read-only: {exc} (rmqstore verify {path} examines a damaged store)") \
            from None


class _Warnings(logging.Handler):
    def __init__(self, stream):
        super().__init__(logging.WARNING)
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        self.stream.write(f"{PROG}: warning: {record.getMessage()}\n")


@contextlib.contextmanager
def _warnings_to(stream):
    """The library's warnings while the block runs, as ``rmqstore: warning:`` lines on ``stream`` (None:
    left to logging)."""
    if stream is None:
        yield
        return
    logger = logging.getLogger("rmqstore")
    handler = _Warnings(stream)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


# -- running ------------------------------------------------------------------------------------

def streams(stdin=None, stdout=None, stderr=None) -> Streams:
    """The process's streams (stdin binary when it can be), or the ones given."""
    return Streams(stdin if stdin is not None else getattr(sys.stdin, "buffer", sys.stdin),
                   stdout if stdout is not None else sys.stdout,
                   stderr if stderr is not None else sys.stderr)


def run_command_line(parser: argparse.ArgumentParser, argv, io: Streams) -> int:
    """Parse ``argv`` with ``parser`` and run the command it picks (``args.run_command(args, io)``): every
    error becomes one line on stderr and an exit code (see :mod:`rmqstore.cli`)."""
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # the command's own usage names the mistake, not the top-level one
            getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse already printed usage and the error
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return args.run_command(args, io)
    except CliError as exc:
        io.stderr.write(f"{PROG}: error: {exc}\n")
    except BrokenPipeError:  # e.g. `rmqstore dump ... | head`
        silence_stdout()
        return EXIT_OK
    except RmqStoreError as exc:  # ours, also where it is an OSError too (an export's folder that exists)
        io.stderr.write(f"{PROG}: error: {exc}\n")
        return EXIT_ERROR
    except OSError as exc:  # the system refused the run something: says nothing about the store
        io.stderr.write(f"{PROG}: error: {system_refusal(exc)}\n")
        return EXIT_SYSTEM
    except KeyboardInterrupt:
        io.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("RMQSTORE_DEBUG"):
            traceback.print_exc(file=io.stderr)
        io.stderr.write(f"{PROG}: internal error: {type(exc).__name__}: {exc} (set RMQSTORE_DEBUG=1 for a "
                        f"traceback)\n")
    return EXIT_ERROR


def system_refusal(exc: OSError) -> str:
    """One line for an OSError that stopped a run: what the system refused, on which file, and (at the
    open-file limit) what the limit is."""
    text = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc.strerror or exc)
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        try:
            import resource

            text += f" (this process may hold {resource.getrlimit(resource.RLIMIT_NOFILE)[0]} open; ulimit -n)"
        except (ImportError, OSError, ValueError):
            pass
    return f"the system refused the run: {text}; the run stopped, nothing is said about the store"


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
