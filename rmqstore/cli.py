"""``rmqstore`` -- the command line.

Subcommands live in :data:`COMMANDS` (name -> :class:`Command`); adding one means writing
an ``add_arguments(parser)`` and a ``run(args, io) -> exit code`` in a module of
:mod:`rmqstore.commands` and registering its ``COMMAND`` here.  What the commands share
(streams, errors, rich or plain output, the exit-code handling) is
:mod:`rmqstore.commands.terminal`; the replay engine behind ``load`` is
:mod:`rmqstore.read.replay`.  ``rmqstore spark`` and ``rmqstore broker`` are added from their
packages when the parser is built; they import nothing from this module.

``rmqstore dump STORE --json``
    Every record of the commitlog, blanks included, as JSON lines on stdout (the format is
    :mod:`rmqstore.format.dumpfmt`).  Strictly read-only (:mod:`rmqstore.read.scan`).  Exit 0 when the
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
    header, slot table and entry chains, :func:`rmqstore.files.store_sizes.index_dimensions`) --
    so the copy opens in a broker configured like the original; OTHER may also be a
    fixture folder with ``store/`` and ``manifest.json`` (whose flush settings are used
    too).  Or from ``--commitlog-file-size``, ``--consume-queue-file-size``,
    ``--max-hash-slot-num`` and ``--max-index-num``, which with ``--like`` stand in for
    what OTHER has no file of (or whose index files hold no key) and must agree with
    what its files show.  The store always uses ASYNC_FLUSH as an ASYNC_MASTER and is shut down cleanly,
    also after an error.  A non-empty target is refused unless ``--append``.

``rmqstore inspect STORE [--json]``
    The store at a glance (:mod:`rmqstore.read.inspect_store`): commitlog files with their
    positions and how each ends, topics and queues with min/max offsets, index headers,
    checkpoint, abort and lock files, free disk space, and a one-line health verdict.

``rmqstore msg STORE MSGID`` / ``--key KEY [--topic T]`` / ``--offset N``
    One message (or every message with that key), fields shown readably: ISO times,
    ``ip:port`` hosts, properties one per line, body CRC ok/bad, the consume-queue unit
    that points at it.  ``--json`` writes JSON lines.  Exit 1 when nothing is found.

``rmqstore verify STORE [--json]``
    Checks every record, unit and index entry against each other
    (:mod:`rmqstore.read.verify`).  Exit 0 when no damage is found (warnings, such as an abort
    file, allowed), 1 when damage is found, 2 for usage errors, 3 when the system refused the
    run something (the open-file limit, a permission, an I/O error: nothing is said about the
    store).  A store too damaged to open is still examined.  Files are mapped a bounded number
    at a time (:mod:`rmqstore.files.read_maps`), so any store is walked under ``ulimit -n 256``.

``rmqstore admin COMMAND [-n NAMESRV] ...``
    RocketMQ's ``mqadmin`` in Python for any RocketMQ 4.x cluster (:mod:`rmqstore.commands.admin`, on
    :mod:`rmqstore.admin`): the same command names and options (``clusterList``, ``topicStatus -t``,
    ``consumerProgress -g``, ``updateTopic -b/-c``, ...), mqadmin's output, ``--json``.

``rmqstore site [--out DIR] [--notebooks PATH ...] [--no-execute]``
    Executes every notebook and writes a static HTML site (default ``site/``): one page per
    notebook with its views working without a kernel, and an ``index.html``
    (:mod:`rmqstore.widgets.site`).

inspect, msg and verify open the store with ``open_store(read_only=True)`` and close it;
they never write.  Human output uses rich tables when stdout is a terminal and plain
aligned text otherwise.

Errors print one line, ``rmqstore: error: ...``, on stderr and exit 2 (3 when the system
refused the run something: an ``OSError``).  Progress bars
(rich) appear on stderr only when it is a terminal.
"""

from __future__ import annotations

import argparse
import sys

from .commands import admin, dump, inspect, load, msg, site, verify
from .commands.terminal import (EXIT_ERROR, EXIT_INCOMPLETE, EXIT_OK, EXIT_SYSTEM, PROG, CliError, Command,
                                Streams, run_command_line, streams)

__all__ = ["main", "build_parser", "COMMANDS", "Command", "CliError", "Streams", "PROG", "EXIT_OK",
           "EXIT_INCOMPLETE", "EXIT_ERROR", "EXIT_SYSTEM"]

COMMANDS: dict[str, Command] = {
    "dump": dump.COMMAND,
    "load": load.COMMAND,
    "inspect": inspect.COMMAND,
    "msg": msg.COMMAND,
    "verify": verify.COMMAND,
    "site": site.COMMAND,
    "admin": admin.COMMAND,
}


class _VersionAction(argparse.Action):
    """``--version``: the package version and the active path (rmqstore.common.native), then exit."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__
        from .common import native

        sys.stdout.write(f"rmqstore {__version__}\n{native.describe()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Apache RocketMQ's commitlog store, in Python.")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version and which path runs (compiled fast path or pure Python)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(run_command=cmd.run, command_parser=p)
    from .spark.cli import add_spark_parser  # imports no pyspark until `rmqstore spark` runs

    add_spark_parser(sub)
    from .broker.cli import add_broker_parser  # asyncio and the broker load only when it runs

    add_broker_parser(sub)
    return parser


def main(argv=None, *, stdin=None, stdout=None, stderr=None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 incomplete dump, 2 error)."""
    return run_command_line(build_parser(), argv, streams(stdin, stdout, stderr))


if __name__ == "__main__":
    sys.exit(main())
