"""``rmqstore spark ...`` -- the Spark pipelines on the command line, locally or under spark-submit.

    rmqstore spark stats STORE... [--json] [--bucket-ms N] [--master URL]
    rmqstore spark export STORE... --out DIR [--no-body] [--partition-by COL,...] [--overwrite]
    rmqstore spark verify STORE... [--json]            # exit 1 when any store is damaged
    rmqstore spark rebuild STORE --out DIR             # consume queues and index from the commitlog

Which Spark.  The hard part of a Spark command line is not building a session but *not*
building one when somebody else already has:

1. a SparkSession already active in this process (a notebook, a test, a program calling
   :func:`run`) is used as it is and left running;
2. under ``spark-submit`` the driver's Python is started by Spark's launcher, which passes
   the cluster settings (``--master``, ``--py-files``, ``--conf``) through the JVM it
   starts and marks the environment with ``PYSPARK_GATEWAY_PORT``; then the builder is
   given no master so that spark-submit's choice stands -- forcing ``local[*]`` there
   would silently run a cluster job on the driver machine;
3. otherwise (a plain ``rmqstore spark ...``) a session is built on ``--master``, by
   default ``local[*]``: every core of this machine, no setup beyond the install -- and
   stopped again at the end.

An explicit ``--master`` always wins.  Whatever the session, the ``rmqstore.*`` data sources
are registered on it (:func:`rmqstore.spark.register`).

Run as a script this module is the spark-submit entry point (``spark-submit --master yarn
.../rmqstore/spark/cli.py stats /data/store``): :func:`main` is ``rmqstore spark`` with the
same arguments.  ``docs/spark.md`` has the cluster recipe.  Everything pyspark is imported
only when a subcommand runs, so ``rmqstore --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

__all__ = ["add_spark_parser", "run", "main", "spark_session", "DEFAULT_MASTER", "SUBCOMMANDS"]

DEFAULT_MASTER = "local[*]"
#: the subcommands and their one-line help
SUBCOMMANDS = {
    "stats": "per topic/queue messages, bytes, sizes, size histogram, store-latency percentiles; "
             "throughput series",
    "export": "every message record to Parquet files",
    "verify": "the checks of `rmqstore verify` on Spark (read-only); exit 1 when damage is found",
    "rebuild": "write consume queues and index for a store from its commitlog alone",
}


def add_spark_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``spark`` and its subcommands to ``rmqstore``'s subparsers."""
    p = subparsers.add_parser("spark", help="Spark pipelines over stores: " + ", ".join(SUBCOMMANDS),
                              description="Spark pipelines over one or more stores (read-only, except "
                                          "what export and rebuild write under --out).")
    sub = p.add_subparsers(dest="spark_command", metavar="PIPELINE", required=True)
    for name, text in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("stores", metavar="STORE", nargs="+" if name != "rebuild" else 1,
                        help="store root (holding commitlog/)")
        sp.add_argument("--master", metavar="URL",
                        help=f"Spark master (default {DEFAULT_MASTER}, or spark-submit's when run under it)")
        sp.add_argument("--split-size", type=int, metavar="BYTES",
                        help="bytes of a segment per Spark task (default: the source's)")
        _ARGUMENTS[name](sp)
    p.set_defaults(run_command=lambda args, io: run(args, io.stdout, io.stderr))
    return p


def _stats_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object: queues, histogram, throughput")
    p.add_argument("--bucket-ms", type=int, default=1000, metavar="MS",
                   help="throughput bucket width in milliseconds of store_timestamp (default 1000)")


def _export_arguments(p) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the Parquet files (must not exist)")
    p.add_argument("--no-body", action="store_true", help="leave message bodies out (null)")
    p.add_argument("--partition-by", metavar="COL,...", help="Hive-style folders by these columns, e.g. topic")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")


def _verify_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per store, one a line")


def _rebuild_arguments(p) -> None:
    p.add_argument("--out", required=True, metavar="DIR",
                   help="where to write consumequeue/ and index/ (outside the store)")


_ARGUMENTS = {"stats": _stats_arguments, "export": _export_arguments, "verify": _verify_arguments,
              "rebuild": _rebuild_arguments}


# -- the session --------------------------------------------------------------------------------------------

def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(master: str | None = None, app_name: str = "rmqstore"):
    """``(session, owned)``: the active session, else a new one (see the module doc); ``owned``
    says whether the caller should stop it."""
    from pyspark.sql import SparkSession

    from .commitlog_source import register

    from .session import local_session

    session = SparkSession.getActiveSession()
    owned = session is None  # one SparkContext per process: an active one is used whatever `master` says
    if owned and (master or not _under_spark_submit()):
        return local_session(master or DEFAULT_MASTER, app_name), owned
    if owned:  # under spark-submit: the cluster's settings, untouched
        session = SparkSession.builder.appName(app_name).getOrCreate()
    register(session)
    return session, owned


# -- running ------------------------------------------------------------------------------------------------

def run(args: argparse.Namespace, stdout, stderr) -> int:
    """Run the ``rmqstore spark`` subcommand in ``args``; the exit code (0 ok, 1 damage found)."""
    from ..commands.terminal import CliError, Streams

    io = Streams(None, stdout, stderr)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CliError("rmqstore spark needs PySpark: pip install 'rmqstore[spark]'") from None
    for store in args.stores:
        if not os.path.isdir(store):
            raise CliError(f"{store}: no such store directory")
    session, owned = spark_session(args.master)
    try:
        return _RUNNERS[args.spark_command](session, args, io)
    finally:
        if owned:
            session.stop()


class _SparkProgress:
    """A rich spinner on stderr (when it is a terminal) counting the Spark tasks finished so far,
    polled from the SparkContext's status tracker twice a second."""

    def __init__(self, io, spark, what: str):
        from ..commands.terminal import progress_bar

        self.bar = progress_bar(io, f"spark {what}", None, unit="tasks done")
        self.tracker = spark.sparkContext.statusTracker()
        self.done: dict[int, int] = {}  # stage id -> tasks completed (as last seen)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="rmqstore-spark-progress", daemon=True)

    def __enter__(self):
        self.bar.__enter__()
        if self.bar.shown:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        self.bar.__exit__(*exc)

    def poll_once(self) -> int:
        for sid in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                self.done[sid] = max(self.done.get(sid, 0), info.numCompletedTasks)
        total = sum(self.done.values())
        self.bar.update(total)
        return total

    def _poll(self) -> None:
        while not self.stop.wait(0.5):
            try:
                self.poll_once()
            except Exception:  # the context is stopping: progress is not worth an error
                return




def _stats(spark, args, io) -> int:
    from ..commands.terminal import Out, json_out
    from .stats import commitlog_frame, stats

    df = commitlog_frame(spark, args.stores, body=False, split_size=args.split_size).persist()
    try:
        with _SparkProgress(io, spark, "stats"):
            result = stats(df, bucket_ms=args.bucket_ms).to_dict()
    finally:
        df.unpersist()
    if args.json:
        json_out(io, result)
    else:
        out = Out(io)
        out.kv([("spark", f"master {spark.sparkContext.master}, {df.rdd.getNumPartitions()} partition(s) "
                          f"over {len(args.stores)} store(s)")])
        _print_stats(out, result)
    return 0


def _print_stats(out, result: dict) -> None:
    queues = result["queues"]
    rows = [[q["store"], q["topic"], q["queue_id"], _n(q["messages"]), _n(q["bytes"]), q["min_size"],
             f"{q['avg_size']:.0f}", q["max_size"], q["latency_p50"], q["latency_p90"], q["latency_p99"],
             q["latency_max"], q["crc_errors"]] for q in queues]
    out.table(["store", "topic", "queue", "messages", "bytes", "min", "avg", "max", "p50 ms", "p90 ms", "p99 ms",
               "max ms", "bad CRC"], rows, title=f"{len(queues)} queue(s); sizes are record bytes, latency is "
                                                 f"store minus born timestamp", right=tuple(range(2, 13)))
    buckets = {}
    for h in result["histogram"]:
        buckets[h["bucket"]] = buckets.get(h["bucket"], 0) + h["messages"]
    out.table(["record size", "messages"], [[f"{1 << k} .. {(1 << (k + 1)) - 1}", _n(n)]
                                            for k, n in sorted(buckets.items())],
              title="size histogram, all queues (log2 buckets)", right=(1,))
    series = result["throughput"]
    if series:
        peak = max(series, key=lambda r: r["messages"])
        out.kv([("buckets", f"{len(series)} of {result['bucket_ms']} ms"),
                ("peak", f"{_n(peak['messages'])} messages, {_n(peak['bytes'])} bytes in the bucket at "
                         f"{peak['bucket_start']} ({peak['store']})")], title="throughput")


def _n(value) -> str:
    return f"{value:,}"


def _export(spark, args, io) -> int:
    from ..commands.terminal import Out
    from .export import export

    with _SparkProgress(io, spark, "export"):
        result = export(spark, args.stores, args.out, body=not args.no_body, partition_by=args.partition_by,
                        split_size=args.split_size, mode="overwrite" if args.overwrite else "error")
    Out(io).kv([("out", result.path), ("files", len(result.files)), ("rows", _n(result.rows)),
                 ("bytes", _n(result.bytes))], title="exported to Parquet")
    return 0


def _verify(spark, args, io) -> int:
    from ..commands.terminal import Out, json_out
    from ..commands.verify import print_verify
    from .verify import verify

    with _SparkProgress(io, spark, "verify"):
        reports = verify(spark, list(args.stores))
    out = Out(io)
    for report in reports:
        if args.json:
            json_out(io, report.to_dict(), indent=None)
        else:
            print_verify(out, report)
    return 0 if all(r.ok for r in reports) else 1


def _rebuild(spark, args, io) -> int:
    from ..commands.terminal import Out
    from .rebuild import rebuild

    kwargs = {} if args.split_size is None else {"split_size": args.split_size}
    with _SparkProgress(io, spark, "rebuild"):
        result = rebuild(spark, args.stores[0], args.out, **kwargs)
    Out(io).kv([("out", result.out_dir), ("records", _n(result.records)),
                 ("consume queue", f"{_n(result.units)} units in {len(result.consume_queue_files)} files"),
                 ("index", f"{_n(result.index_entries)} entries in {len(result.index_files)} files")],
                title="rebuilt")
    return 0


_RUNNERS = {"stats": _stats, "export": _export, "verify": _verify, "rebuild": _rebuild}


def main(argv=None) -> int:
    """``rmqstore spark ARGS`` -- the entry point for ``spark-submit .../rmqstore/spark/cli.py ARGS``: the
    same parser and error handling as ``rmqstore``, with only ``spark`` in it (:mod:`rmqstore.cli`
    imports this module, never the other way)."""
    from rmqstore.commands.terminal import PROG, run_command_line, streams
    from rmqstore.spark.cli import add_spark_parser  # the package's module, also when this file is __main__

    parser = argparse.ArgumentParser(prog=PROG, description="Apache RocketMQ's commitlog store, in Python.")
    add_spark_parser(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return run_command_line(parser, ["spark", *(sys.argv[1:] if argv is None else argv)], streams())


if __name__ == "__main__":
    # run as a file (spark-submit): this folder is sys.path[0]; keep its modules from shadowing others
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.exit(main())
