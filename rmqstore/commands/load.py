"""``rmqstore load STORE``: JSON lines of a dump on stdin, written into a store byte for byte.

The sizes of the new store (segment, consume-queue file, index slots and entries) come
from ``--like OTHER``, from explicit options, or -- with ``--append`` -- from the store's
own files (:func:`rmqstore.files.store_sizes.infer_config`); the records are replayed by
:class:`rmqstore.read.replay.Loader`, which checks that each lands where it was recorded.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace

from ..common.config import BrokerRole, FlushDiskType, StoreConfig
from ..format.dumpfmt import DumpFormatError
from ..common.errors import RmqStoreError
from ..read.replay import Loader
from ..read.scan import find_commitlog_dir, list_segments
from ..files.store_sizes import infer_config
from ..files.store_paths import COMMITLOG_DIR
from .terminal import PROG, EXIT_OK, CliError, Command, Streams, positive_int, progress_bar

__all__ = ["COMMAND"]


def _load_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE", help="store root to write (created if missing)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--commitlog-file-size", type=positive_int, metavar="N",
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
    root = os.path.dirname(commitlog) if os.path.basename(commitlog) == COMMITLOG_DIR else None
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


def _load(args: argparse.Namespace, io: Streams) -> int:
    from ..store import MessageStore

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
    loader = Loader(store, args.renumber, args.repair,
                     warn=lambda text: io.stderr.write(f"{PROG}: warning: {text}\n"),
                     report=lambda text: io.stdout.write(text + "\n"))
    try:
        with progress_bar(io, "load", None, unit="records") as progress:
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


COMMAND = Command("write JSON-lines records from stdin into a store, byte for byte", _load_arguments, _load)
