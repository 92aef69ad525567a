"""``rmqstore.read.verify`` finds injected damage, and no reader leaks a raw exception on garbage.

Done means:

(a) one random fault injected into a copy of a RocketMQ-written store -- a flipped byte
    in a message body, in a record header field, or in a consume-queue unit; a file
    truncated; bytes appended to a file; a commitlog or consume-queue file removed -- makes
    :func:`verify` report at least one error whose location names the damaged file (and,
    for flipped bytes, a position inside the damaged record or unit), and ``rmqstore
    verify`` exit 1.  Faults that no copy of the data can reveal are not injected: header
    fields that nothing else repeats (FLAG, born time/host, store host, reconsume times,
    prepared offset, the sysFlag bits that change no layout) and removing the *first*
    commitlog file (indistinguishable from files that expired; verify notes it);
(b) on random garbage arranged like a store -- and on a real store with random bytes
    spliced into its files -- ``open_store``, ``inspect``, the message look-ups and
    ``verify`` raise nothing but :class:`~rmqstore.common.errors.RmqStoreError` subclasses
    (verify raises nothing at all: it reports), and the CLI never reports an internal
    error.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import struct
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import FIXTURES, commitlog_records, copy_store, run_cli, walk_file
from test_inspect import snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqstore.common.errors import RmqStoreError
from rmqstore.read.inspect_store import find_by_key, find_by_msg_id, inspect, read_message_at
from rmqstore.format.record import BlankRecord
from rmqstore.read.scan import scan_commitlog
from rmqstore.format.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from rmqstore.store import open_store
from rmqstore.read.verify import ERROR, verify

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: stores the faults are injected into (several files of every kind, so an odd size stands out):
#: two written by RocketMQ, and one written by our engine (``engine``, see :func:`engine_store`)
FAULT_STORES = ("basic", "flush_tsp", "engine")


@lru_cache(maxsize=None)
def engine_store() -> Path:
    """A store written by our own engine with tiny files: commitlog, consume-queue and index
    files all roll over; keys, tags, transactions, delay levels and a batch."""
    from rmqstore import BatchItem, Message, MessageBatch, MessageStore, StoreConfig
    from rmqstore.format.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

    root = Path(tempfile.mkdtemp(prefix="rmqstore-verify-engine-")) / "store"
    atexit.register(shutil.rmtree, root.parent, True)
    clock = iter(range(1_795_000_000_000, 1_795_000_000_000 + 10**9, 7))
    cfg = StoreConfig(mapped_file_size_commit_log=16 * 1024, mapped_file_size_consume_queue=20 * 64,
                      max_hash_slot_num=16, max_index_num=64, store_host="198.51.100.7:10911",
                      pre_fault_mapped_file=False)
    rng = random.Random(7)
    with MessageStore(root, cfg, clock=lambda: next(clock)) as store:
        for i in range(300):
            topic, queues = [("Orders", 3), ("Pay", 2), ("Audit", 1)][i % 3]
            props = f"KEYS\x01k-{i} shared-{i % 9}\x02TAGS\x01T{i % 4}\x02UNIQ_KEY\x01{i:032X}"
            msg = Message(topic, rng.randbytes(rng.choice([0, 10, 200, 900])), queue_id=i % queues,
                          properties=props, born_host=f"192.0.2.{1 + i % 9}:40000", born_timestamp=1_700_000_000_000 + i)
            if i % 41 == 5:
                msg.sys_flag = TRANSACTION_PREPARED_TYPE
            elif i % 41 == 6:
                msg.sys_flag = TRANSACTION_COMMIT_TYPE
            elif i % 41 == 7:
                msg.sys_flag = TRANSACTION_ROLLBACK_TYPE
            elif i % 53 == 9:
                msg.properties += f"\x02DELAY\x01{1 + i % 18}"
            assert store.put_message(msg).ok
        batch = MessageBatch("Orders", [BatchItem(f"b{k}".encode(), f"KEYS\x01batch-{k}") for k in range(5)],
                             queue_id=0, born_host="192.0.2.99:41000", born_timestamp=1_700_000_000_000)
        assert store.put_messages(batch).ok
        assert store.wait_dispatched()
    return root


def store_root(name: str) -> Path:
    return engine_store() if name == "engine" else FIXTURES / name / "store"


@lru_cache(maxsize=None)
def records_of(name: str):
    if name != "engine":
        return commitlog_records(name)
    out = []
    for p in sorted((store_root(name) / "commitlog").iterdir()):
        out.extend(walk_file(p.read_bytes(), int(p.name)))
    return tuple(out)


@lru_cache(maxsize=None)
def files_of(name: str) -> dict[str, tuple[str, ...]]:
    root = store_root(name)
    out = {}
    for kind in ("commitlog", "consumequeue", "index"):
        out[kind] = tuple(sorted(str(p.relative_to(root)).replace(os.sep, "/")
                                 for p in (root / kind).rglob("*") if p.is_file()))
    out["checkpoint"] = ("checkpoint",)
    return out


@lru_cache(maxsize=None)
def messages_of(name: str):
    """(file rel, position in file, record) of every message record."""
    size = (store_root(name) / "commitlog" / "00000000000000000000").stat().st_size
    return tuple((f"commitlog/{off - off % size:020d}", off % size, rec)
                 for off, rec in records_of(name) if not isinstance(rec, BlankRecord))


@lru_cache(maxsize=None)
def units_of(name: str):
    """(file rel, position) of every written consume-queue unit."""
    root = store_root(name)
    out = []
    for rel in files_of(name)["consumequeue"]:
        data = (root / rel).read_bytes()
        for pos in range(0, len(data) - 19, 20):
            if data[pos:pos + 20] != bytes(20):
                out.append((rel, pos))
    return tuple(out)


def header_spans(rec) -> list[tuple[str, int, int]]:
    """Record fields whose damage another copy of the data reveals: (name, start, end) in the record.

    A prepared or rolled-back transaction record gets no consume-queue unit, so nothing repeats
    its queue id or queue offset: damage to those two fields cannot be seen and is not injected.
    """
    body_len = len(rec.body)
    topic_len = len(rec.topic.encode("utf-8"))
    queued = rec.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
    queue_fields = [("queue_id", 12, 16), ("queue_offset", 20, 28)] if queued else []
    return [
        ("total_size", 0, 4), ("magic_code", 4, 8), ("body_crc", 8, 12), *queue_fields,
        ("physical_offset", 28, 36),
        ("body_length", 84, 88), ("topic_length", 88 + body_len, 89 + body_len),
        ("properties_length", 89 + body_len + topic_len, 91 + body_len + topic_len),
    ]


def flip(path: Path, pos: int, mask: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ mask]))


@st.composite
def faults(draw):
    """(fixture, description, apply(root), damaged file rel, (lo, hi) byte range or None)."""
    name = draw(st.sampled_from(FAULT_STORES))
    kind = draw(st.sampled_from(["body", "header", "unit", "truncate", "append", "missing"]))
    mask = draw(st.integers(1, 255))
    if kind == "body":
        rel, pos, rec = draw(st.sampled_from([m for m in messages_of(name) if m[2].body]))
        i = draw(st.integers(0, len(rec.body) - 1))
        at = pos + 88 + i  # IPv4 hosts in these fixtures: the body starts at 88
        return name, f"body byte {i} of the record at {rel}:{pos} ^ {mask:#x}", \
            lambda root: flip(root / rel, at, mask), rel, (pos, pos + rec.total_size)
    if kind == "header":
        rel, pos, rec = draw(st.sampled_from(messages_of(name)))
        spans = header_spans(rec) + [("sys_flag_v6_bits", 39, 40)]
        field, lo, hi = draw(st.sampled_from(spans))
        at = pos + draw(st.integers(lo, hi - 1))
        if field == "sys_flag_v6_bits":  # the host-size bits change the layout; the others change nothing checkable
            mask = draw(st.sampled_from([0x10, 0x20, 0x30]))
        return name, f"{field} of the record at {rel}:{pos} (byte {at}) ^ {mask:#x}", \
            lambda root: flip(root / rel, at, mask), rel, (pos, pos + rec.total_size)
    if kind == "unit":
        rel, upos = draw(st.sampled_from(units_of(name)))
        at = upos + draw(st.integers(0, 19))
        return name, f"byte {at} of unit at {rel}:{upos} ^ {mask:#x}", \
            lambda root: flip(root / rel, at, mask), rel, (upos, upos + 20)
    files = files_of(name)
    if kind == "missing":
        rel = draw(st.sampled_from(files["commitlog"][1:] + files["consumequeue"]))
        return name, f"{rel} removed", lambda root: (root / rel).unlink(), rel, None
    rel = draw(st.sampled_from(files["commitlog"] + files["consumequeue"] + files["index"] + files["checkpoint"]))
    size = (store_root(name) / rel).stat().st_size
    if kind == "truncate":
        new = draw(st.integers(0, size - 1))

        def cut(root, rel=rel, new=new):
            os.truncate(root / rel, new)
        return name, f"{rel} truncated to {new} bytes", cut, rel, None
    extra = draw(st.binary(min_size=1, max_size=64))

    def append(root, rel=rel, extra=extra):
        with open(root / rel, "ab") as f:
            f.write(extra)
    return name, f"{len(extra)} bytes appended to {rel}", append, rel, None


@SETTINGS
@given(fault=faults())
def test_verify_reports_one_injected_fault(fault):
    name, what, apply, rel, span = fault
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_store(store_root(name), tmp)
        assert verify(root).ok  # the copy is clean
        apply(root)
        report = verify(root)
        errors = [p for p in report.problems if p.severity == ERROR]
        assert not report.ok, f"{what}: no error reported"
        here = [p for p in errors if p.path == rel]
        assert here, f"{what}: no error names {rel}: {[str(p) for p in errors]}"
        if span is not None:
            lo, hi = span
            assert any(p.offset is not None and lo <= p.offset < hi for p in here), \
                f"{what}: no error inside [{lo}, {hi}) of {rel}: {[str(p) for p in here]}"


def test_engine_store_verifies_clean():
    root = engine_store()
    report = verify(root)
    assert report.ok and report.problems == [], [str(p) for p in report.problems]
    files = files_of("engine")
    assert len(files["commitlog"]) > 3 and len(files["index"]) > 3
    assert any(rel.endswith("/00000000000000001280") for rel in files["consumequeue"])  # a queue rolled over
    assert report.records == len(messages_of("engine")) and report.entries > 300


def test_verify_cli_exit_status_on_damage(tmp_path):
    root = copy_store(store_root("basic"), str(tmp_path))
    rel, pos, rec = messages_of("basic")[10]
    flip(root / rel, pos + 100, 0x01)
    code, out, err = run_cli(["verify", root])
    assert code == 1, err
    assert f"{rel}:{pos}" in out and "body_crc" in out
    code, out, err = run_cli(["verify", root, "--json"])
    assert code == 1 and '"ok": false' in out


def test_missing_first_commitlog_file_is_only_noted(tmp_path):
    root = copy_store(store_root("basic"), str(tmp_path))
    (root / "commitlog" / "00000000000000000000").unlink()
    report = verify(root)
    assert report.ok
    assert {p.kind for p in report.problems} == {"log_start", "expired_refs"}


def test_a_store_too_damaged_to_open_is_still_verified(tmp_path):
    root = copy_store(store_root("basic"), str(tmp_path))
    os.truncate(root / "commitlog" / "00000000000000131072", 1000)
    with pytest.raises(RmqStoreError):
        open_store(root)
    report = verify(root)
    kinds = {p.kind for p in report.errors}
    assert {"unopenable", "file_size"} <= kinds
    code, out, err = run_cli(["verify", root])
    assert code == 1 and "commitlog/00000000000000131072" in out
    code, out, err = run_cli(["inspect", root])
    assert code == 2 and "cannot open" in err and "rmqstore verify" in err


def write_torn_record(path: Path, pos: int, phys: int, record: bytes) -> None:
    """Write the first half of ``record`` at ``pos`` of segment ``path``, as a write torn by a
    crash leaves it: its header names its own position ``phys``; the rest never reached the file."""
    half = bytearray(record[:len(record) // 2])
    struct.pack_into(">q", half, 28, phys)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(half)


def test_torn_tail_is_a_warning_while_nothing_points_at_it(tmp_path):
    """The crash fixture with half a record written after its last one (a write torn by the crash).
    With the abort file present, recovery will cut it off: a warning.  After a clean shutdown the
    same bytes are what a recovery leaves (it cuts by position and zeroes nothing), so while no
    unit or index entry points at them they are a warning too; once a unit does, they are damage."""
    root = copy_store(store_root("crash"), str(tmp_path))
    last_off, last = [(o, r) for o, r in commitlog_records("crash") if not isinstance(r, BlankRecord)][-1]
    end = last_off + last.total_size
    seg = root / "commitlog" / f"{end - end % 65536:020d}"
    pos = end % 65536
    raw = (FIXTURES / "crash" / "store" / "commitlog" / seg.name).read_bytes()
    write_torn_record(seg, pos, end, raw[last_off % 65536:last_off % 65536 + last.total_size])
    report = verify(root)
    assert report.ok, [str(p) for p in report.errors]
    torn = [p for p in report.problems if p.kind == "torn_tail"]
    assert torn and torn[0].offset == pos and torn[0].path == f"commitlog/{seg.name}"
    (root / "abort").unlink()
    report = verify(root)
    assert report.ok, [str(p) for p in report.errors]
    assert [(p.kind, p.where) for p in report.problems if p.kind in ("torn_tail", "garbage_after_end",
                                                                       "undecodable_record")] == \
        [("garbage_after_end", f"commitlog/{seg.name}:{pos}")]
    # a unit of the record's queue that points at the torn bytes: a dispatched record was lost
    qdir = root / "consumequeue" / last.topic / str(last.queue_id)
    cq = max(qdir.iterdir(), key=lambda p: int(p.name))
    units = cq.read_bytes()
    free = next(i for i in range(0, len(units), 20) if units[i:i + 20] == bytes(20))
    with open(cq, "r+b") as f:
        f.seek(free)
        f.write(struct.pack(">qiq", end, last.total_size, 0))
    report = verify(root)
    assert ("undecodable_record", f"commitlog/{seg.name}:{pos}") in [(p.kind, p.where) for p in report.errors]


def test_a_blank_is_the_end_of_its_file_whatever_size_it_declares(tmp_path):
    """The walk's rule (RocketMQ's): a blank ends the file by its magic; verify says what is wrong
    with its size (blank_size) and reads on in the next file -- the chain does not break there."""
    size = (store_root("basic") / "commitlog" / "00000000000000000000").stat().st_size
    off = next(off for off, rec in records_of("basic") if isinstance(rec, BlankRecord))
    root = copy_store(store_root("basic"), str(tmp_path))
    seg = root / "commitlog" / "00000000000000000000"
    pos = off % size
    with open(seg, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">i", size - pos + 16))  # 16 bytes past the end of the file
    report = verify(root)
    assert [(p.kind, p.where) for p in report.errors] == [("blank_size", f"commitlog/{seg.name}:{pos}")]
    assert f"declares {size - pos + 16} bytes, reaching {size + 16}" in report.errors[0].message
    assert report.records == verify(store_root("basic")).records  # the next files are read as before


def test_a_damaged_last_record_that_units_point_at_is_an_error(tmp_path):
    """Where the log stops on bytes that units point at, they are a lost record, not leftovers."""
    for name in FAULT_STORES:
        rel, pos, rec = messages_of(name)[-1]
        with tempfile.TemporaryDirectory() as tmp:
            root = copy_store(store_root(name), tmp)
            flip(root / rel, pos + 3, 0x04)  # TOTALSIZE: the size chain breaks at the last record
            report = verify(root)
            assert ("undecodable_record", f"{rel}:{pos}") in [(p.kind, p.where) for p in report.errors], name
            assert not [p for p in report.problems if p.kind == "garbage_after_end"], name


def test_an_index_file_without_keys_is_not_damage_with_count_zero_or_one(tmp_path):
    """Keyless puts create an index file that gets no entry.  Its indexCount is written with the
    first key, so on disk it stays 0 (RocketMQ's load reads 0 as 1); a RocketMQ that flushes the
    header at shutdown leaves 1.  Neither is damage.  A count of 0 in a file whose slots point at
    entries is, and the slot check says so."""
    from rmqstore import Message, MessageStore, StoreConfig

    root = tmp_path / "store"
    cfg = StoreConfig(mapped_file_size_commit_log=16 * 1024, mapped_file_size_consume_queue=20 * 64,
                      max_hash_slot_num=16, max_index_num=64)
    with MessageStore(root, cfg) as store:
        for _ in range(3):
            assert store.put_message(Message("NoKeys", b"x" * 20, queue_id=0, born_host="192.0.2.1:1")).ok
        assert store.wait_dispatched()
    (ix,) = (root / "index").iterdir()
    assert struct.unpack_from(">i", ix.read_bytes(), 36)[0] == 0
    assert verify(root).problems == []
    with open(ix, "r+b") as f:
        f.seek(36)
        f.write(struct.pack(">i", 1))
    assert verify(root).problems == []
    keyed = copy_store(store_root("engine"), str(tmp_path / "engine"))
    first = keyed / files_of("engine")["index"][0]
    with open(first, "r+b") as f:
        f.seek(36)
        f.write(bytes(4))
    errors = verify(keyed).errors
    assert errors and {p.kind for p in errors} <= {"index_slot", "index_missing_key", "index_header", "index_chain"}, \
        [str(p) for p in errors]
    assert any(p.kind == "index_slot" and p.path == files_of("engine")["index"][0] for p in errors)


# -- fuzz: garbage never leaks a raw exception ----------------------------------------------------------

_NAMES = st.sampled_from(["00000000000000000000", "00000000000000000100", "00000000000000001000",
                          "00000000000000000007", "123", "abc", "\u0663", "\u00b2"])


@st.composite
def garbage_stores(draw):
    """A directory arranged like a store, every file random bytes (sometimes record-shaped)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    seg_size = draw(st.sampled_from([0, 7, 8, 100, 1000]))
    layout = {"commitlog": [], "consumequeue": [], "index": [], "checkpoint": None, "abort": draw(st.booleans())}
    for name in draw(st.lists(_NAMES, max_size=3, unique=True)):
        size = seg_size if draw(st.booleans()) else draw(st.integers(0, 1200))
        layout["commitlog"].append((name, size, draw(st.booleans())))
    for _ in range(draw(st.integers(0, 3))):
        topic = draw(st.sampled_from(["T", "SCHEDULE_TOPIC_XXXX", "x y"]))
        qid = draw(st.sampled_from(["0", "1", "-1", "\u00b2", "q"]))
        name = draw(_NAMES)
        size = draw(st.sampled_from([0, 7, 20, 40, 6000, 100]))
        layout["consumequeue"].append((topic, qid, name, size))
    for _ in range(draw(st.integers(0, 2))):
        layout["index"].append((draw(st.sampled_from(["20261122035032534", "x"])),
                                draw(st.sampled_from([0, 39, 40, 124, 208, 8440, 500]))))
    if draw(st.booleans()):
        layout["checkpoint"] = draw(st.sampled_from([0, 10, 24, 4096, 5000]))
    # directories where files belong, and files where directories belong
    layout["odd"] = draw(st.lists(st.sampled_from(["commitlog/00000000000000000200/", "index/20261122035032999/",
                                                   "consumequeue/F", "consumequeue/T/7",
                                                   "consumequeue/T/0/00000000000000006000/"]),
                                  max_size=2, unique=True))
    return seed, rng, layout


def _record_like(rng: random.Random, n: int) -> bytes:
    """Random bytes that often start like a record (a plausible size and a real magic code)."""
    out = bytearray(rng.randbytes(n))
    pos = 0
    while pos + 8 <= n and rng.random() < 0.7:
        total = rng.choice([rng.randrange(0, 400), 91, n - pos, 8])
        magic = rng.choice([0xDAA320A7, 0xCBD43194, 0xDAA320AB, rng.randrange(2**32)])
        struct.pack_into(">iI", out, pos, total if total < 2**31 else 0, magic)
        if rng.random() < 0.5 and pos + 36 <= n:
            struct.pack_into(">q", out, pos + 28, pos)  # a matching PHYSICALOFFSET
        pos += max(total, 8)
    return bytes(out)


def build(root: Path, rng: random.Random, layout: dict) -> None:
    (root / "commitlog").mkdir(parents=True)
    for name, size, shaped in layout["commitlog"]:
        (root / "commitlog" / name).write_bytes(_record_like(rng, size) if shaped else rng.randbytes(size))
    for topic, qid, name, size in layout["consumequeue"]:
        d = root / "consumequeue" / topic / qid
        d.mkdir(parents=True, exist_ok=True)
        data = bytearray(rng.randbytes(size))
        for pos in range(0, size - 19, 20):  # some units point at small offsets
            if rng.random() < 0.5:
                struct.pack_into(">qiq", data, pos, rng.randrange(0, 2000), rng.randrange(1, 500), 0)
        (d / name).write_bytes(bytes(data))
    if layout["index"]:
        (root / "index").mkdir()
    for name, size in layout["index"]:
        (root / "index" / name).write_bytes(rng.randbytes(size))
    if layout["checkpoint"] is not None:
        (root / "checkpoint").write_bytes(rng.randbytes(layout["checkpoint"]))
    if layout["abort"]:
        (root / "abort").write_bytes(b"")
    for odd in layout["odd"]:
        path = root / odd.rstrip("/")
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if odd.endswith("/"):
            path.mkdir()
        else:
            path.write_bytes(b"x")
    (root / "lock").write_bytes(b"lock")


def exercise(root: Path) -> None:
    """Every reader on ``root``: only RmqStoreError may come out (verify: nothing at all), and
    nothing on disk changes."""
    before = snapshot(root)
    try:
        _exercise(root)
    finally:
        assert snapshot(root) == before, "a reader changed the store"


def _exercise(root: Path) -> None:
    try:
        for _ in scan_commitlog(root):
            pass
    except RmqStoreError:
        pass
    report = verify(root)
    assert report.root
    try:
        store = open_store(root, read_only=True)
    except RmqStoreError:
        return
    try:
        info = inspect(store)
        assert info["health"]
        for off in (0, 8, 100, store.commit_log.get_max_offset()):
            try:
                read_message_at(store, off)
            except RmqStoreError:
                pass
        try:
            find_by_msg_id(store, "C633640700002A9F0000000000000000")
        except RmqStoreError:
            pass
        find_by_key(store, "k")
        verify(store)
    finally:
        store.close()


@SETTINGS
@given(case=garbage_stores())
def test_garbage_store_raises_only_store_errors(case):
    seed, rng, layout = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        build(root, rng, layout)
        exercise(root)


def _odd_name(rng: random.Random, name: str) -> str:
    """A name a store file may find itself under: Unicode digits (``str.isdigit`` says yes), one
    digit too few or too many, past the largest offset, off the size grid, far away, or plain junk."""
    n = len(name)
    number = int(name) if name.isdigit() else 0
    return rng.choice([
        "\u0660" * n, "\u00b2" * n, "\u0663" + name[1:], name[1:], "0" + name, "+" + name[1:], name + ".bak",
        "9" * n, f"{2**63 - 1:0{n}d}"[-n:], f"{number + 1:0{n}d}", f"{number + 20 * 10**8:0{n}d}",
        f"{number + 10**12 * 65536:0{n}d}"[-n:], "notes.txt",
    ])


def _mutate(rng: random.Random, root: Path, rel: str) -> None:
    """One fault in the file ``rel`` of ``root``: bytes, size, name, or what the entry is."""
    path = root / rel
    if not path.is_file() or path.is_symlink():
        return
    size = path.stat().st_size
    action = rng.random()
    if action < 0.35 and size:  # bytes
        pos = rng.randrange(size)
        chunk = rng.randbytes(rng.randrange(1, 64))
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(chunk[:size - pos])
    elif action < 0.45:  # truncated
        os.truncate(path, rng.randrange(size + 1))
    elif action < 0.52:  # extended, densely or sparsely (up to 1 TiB: holes)
        if rng.random() < 0.5:
            with open(path, "ab") as f:
                f.write(rng.randbytes(rng.randrange(1, 64)))
        else:
            os.truncate(path, rng.choice([size + 4096, 2**31 - 1, 2**31, 2**40]))
    elif action < 0.72:  # renamed, or a copy under another name
        target = path.with_name(_odd_name(rng, path.name))
        if not target.exists():
            (shutil.copyfile if rng.random() < 0.5 else os.rename)(path, target)
    elif action < 0.84:  # replaced by a symlink: a loop, dangling, or to another file
        os.remove(path)
        path.symlink_to(rng.choice([path.name, "nowhere/" + path.name, os.path.relpath(root / "checkpoint",
                                                                                      path.parent)]))
    elif action < 0.9:  # a directory where the file was
        os.remove(path)
        path.mkdir()
    else:  # a stray planted next to it
        (path.parent / _odd_name(rng, path.name)).write_bytes(rng.randbytes(rng.randrange(0, 2000)))


@SETTINGS
@given(name=st.sampled_from(["txn_delay", "boundary", "basic"]), seed=st.integers(0, 2**32 - 1),
       splices=st.integers(1, 4))
def test_spliced_fixture_raises_only_store_errors(name, seed, splices):
    """Real RocketMQ stores with faults in bytes, file sizes (truncated, extended, sparse up to
    1 TiB), file names (Unicode digits, wrong lengths, past the largest offset, off the grid)
    and entries (symlink loops, dangling symlinks, directories, strays): every reader raises
    nothing but RmqStoreError, changes nothing, and the commands exit 0, 1 or 2 with no
    internal error."""
    rng = random.Random(seed)
    files = [f for kind in ("commitlog", "consumequeue", "index", "checkpoint") for f in files_of(name)[kind]]
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_store(store_root(name), tmp)
        for _ in range(splices):
            _mutate(rng, root, rng.choice(files))
        exercise(root)
        for argv in (["verify", root], ["inspect", root], ["msg", root, "--offset", "0"], ["dump", root]):
            code, out, err = run_cli(argv)
            assert "internal error" not in err, (argv, err)
            assert code in (0, 1, 2)
