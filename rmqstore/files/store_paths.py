"""Where everything of a store lives: every folder and file name, said once.

A RocketMQ store is a folder whose layout no file describes: the broker and the store
find their parts by name (``StorePathConfigHelper`` for the store, ``BrokerPathConfigHelper``
for the broker's JSON files).  This module is our one copy of those names, so that no
other module spells ``"commitlog"`` or ``"consumequeue"`` and a misspelling cannot make
one reader look in another folder than the writer::

    <root>/commitlog/<20-digit offset>              the log's segments
    <root>/consumequeue/<topic>/<queue id>/<20 digits>   each queue's files
    <root>/index/<yyyyMMddHHmmssSSS>                the index files (17 digits)
    <root>/checkpoint                               StoreCheckpoint (4 KiB)
    <root>/abort                                    present while a store runs: unclean shutdown
    <root>/lock                                     the file a running store holds locked
    <root>/config/topics.json, consumerOffset.json, subscriptionGroup.json, delayOffset.json

The file names are the other half: a segment (commitlog or consume queue) is named by
the offset of its first byte, exactly 20 ASCII digits (``UtilAll.offset2FileName``); an
index file by its creation time, exactly 17 ASCII digits.  Parsing is strict --
``str.isdigit`` alone is not the test, since ``'\\u0660'`` and ``'\\u00b2'`` are digits to it
(and ``int('\\u0660' * 20)`` is 0) -- and formatting is its inverse, so a name survives the
round trip ``parse(format(n)) == n`` for every offset a log can reach.

Only names live here; what a folder *holds* (which entries are store files, their sizes)
is :mod:`rmqstore.files.store_dir`.
"""

from __future__ import annotations

import datetime
import os

__all__ = ["COMMITLOG_DIR", "CONSUME_QUEUE_DIR", "INDEX_DIR", "CHECKPOINT_FILE", "ABORT_FILE", "LOCK_FILE",
           "CONFIG_DIR", "TOPICS_JSON", "CONSUMER_OFFSET_JSON", "SUBSCRIPTION_GROUP_JSON", "DELAY_OFFSET_JSON",
           "STORE_DIRS", "NAME_DIGITS", "commitlog_dir", "consume_queue_root", "consume_queue_dir",
           "consume_queue_ids", "index_dir", "checkpoint_path", "abort_path", "lock_path", "config_dir",
           "config_path", "offset_to_file_name", "index_file_name", "parse_file_name", "is_commitlog_dir"]

COMMITLOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"
CONFIG_DIR = "config"
TOPICS_JSON = "topics.json"
CONSUMER_OFFSET_JSON = "consumerOffset.json"
SUBSCRIPTION_GROUP_JSON = "subscriptionGroup.json"
DELAY_OFFSET_JSON = "delayOffset.json"

#: the folders of store files a reader lists, with the kind of names their files have
STORE_DIRS = ((COMMITLOG_DIR, "segment"), (CONSUME_QUEUE_DIR, "segment"), (INDEX_DIR, "index"))
#: how many ASCII digits name a file of each kind
NAME_DIGITS = {"segment": 20, "index": 17}


def commitlog_dir(root) -> str:
    return os.path.join(root, COMMITLOG_DIR)


def consume_queue_root(root) -> str:
    return os.path.join(root, CONSUME_QUEUE_DIR)


def consume_queue_dir(root, topic: str, queue_id: int) -> str:
    return os.path.join(root, CONSUME_QUEUE_DIR, topic, str(queue_id))


def index_dir(root) -> str:
    return os.path.join(root, INDEX_DIR)


def checkpoint_path(root) -> str:
    return os.path.join(root, CHECKPOINT_FILE)


def abort_path(root) -> str:
    return os.path.join(root, ABORT_FILE)


def lock_path(root) -> str:
    return os.path.join(root, LOCK_FILE)


def config_dir(root) -> str:
    return os.path.join(root, CONFIG_DIR)


def config_path(root, name: str) -> str:
    """``<root>/config/<name>``: one of the broker's JSON files (``TOPICS_JSON``, ...)."""
    return os.path.join(root, CONFIG_DIR, name)


def is_commitlog_dir(path) -> bool:
    """Whether ``path`` is named like a store's commitlog folder (its last component)."""
    return os.path.basename(os.path.normpath(os.fspath(path))) == COMMITLOG_DIR


def consume_queue_ids(root):
    """Yield ``(topic, queue_id)`` for every queue directory under ``<root>/consumequeue`` (sorted).

    Only names that are plain ASCII integers count as queue ids (``'²'.isdigit()`` is
    true in Python, so ``isdigit`` alone would let garbage through to ``int``).
    """
    base = consume_queue_root(root)
    if not os.path.isdir(base):
        return
    for topic in sorted(os.listdir(base)):
        tdir = os.path.join(base, topic)
        if not os.path.isdir(tdir):
            continue
        for qid in sorted(os.listdir(tdir)):
            if qid.isascii() and (qid.isdigit() or (qid[:1] == "-" and qid[1:].isdigit())):
                yield topic, int(qid)


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the 20-digit zero-padded offset."""
    return f"{offset:020d}"


def index_file_name(millis: int, tz=None) -> str:
    """``UtilAll.timeMillisToHumanString``: yyyyMMddHHmmssSSS in local time (or ``tz``)."""
    dt = datetime.datetime.fromtimestamp(millis / 1000.0, tz)
    return dt.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def parse_file_name(name: str, kind: str = "segment") -> int | None:
    """The number a store file's name spells, or None when ``name`` is not one (see the module doc)."""
    if len(name) != NAME_DIGITS[kind] or not name.isascii() or not name.isdigit():
        return None
    return int(name)
