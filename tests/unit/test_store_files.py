"""Which files of a store folder are segments: one listing, and what every reader does with the rest.

Segment names are exactly 20 ASCII digits (commitlog and consume-queue files), index file
names exactly 17 (``yyyyMMddHHmmssSSS``).  Anything else in a store folder is a *stray*:
reported, never used, never deleted.  A file named like a segment that cannot be one (a
dangling symlink, a symlink loop, a directory, a file larger than RocketMQ can map, a name
past the largest offset a log can reach) is an error naming the file: ``open_store`` refuses
with :class:`~rmqstore.common.errors.StoreError`, ``verify`` reports it and examines the rest.
Memory and time of ``verify`` depend on the bytes present, not on the offsets names claim.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import random
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
from conftest import FIXTURES, commitlog_records, run_cli

from rmqstore import Message, MessageStore
from rmqstore.common.errors import RmqStoreError, StoreError
from rmqstore.format.record import MessageRecord
from rmqstore.store import open_store
from rmqstore.files.store_dir import count_nonzero, data_extents, file_is_all_zero, first_nonzero, list_store_files
from rmqstore.files.store_sizes import infer_config
from rmqstore.read.verify import ERROR, verify

UNICODE_ZEROS = "\u0660" * 20  # ARABIC-INDIC DIGIT ZERO: str.isdigit() says yes
SUPERSCRIPT_TWOS = "\u00b2" * 20
LOG_END = 471_540  # where the basic fixture's log ends
MESSAGES = 600


@pytest.fixture
def basic(tmp_path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "basic" / "store", root)
    return root


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _messages(root: Path) -> list[tuple[int, MessageRecord]]:
    return [(off, rec) for off, rec in commitlog_records("basic") if isinstance(rec, MessageRecord)]


def _assert_every_message_readable(root: Path) -> None:
    from rmqstore.read.inspect_store import read_message_at

    store = open_store(root, read_only=True)
    try:
        found = 0
        for off, rec in _messages(root):
            got = read_message_at(store, off)
            assert (got.topic, got.queue_id, got.queue_offset, got.body) == \
                (rec.topic, rec.queue_id, rec.queue_offset, rec.body)
            found += 1
        assert found == MESSAGES
    finally:
        store.close()


def _verify_bounded(root: Path):
    """``verify(root)``, asserting it took under 20 s and 64 MiB of Python allocations."""
    tracemalloc.start()
    began = time.monotonic()
    try:
        report = verify(root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - began < 20
    assert peak < 64 << 20, peak
    return report


# -- the listing --------------------------------------------------------------------------------------

def test_listing_takes_exactly_20_ascii_digits(basic):
    cl = basic / "commitlog"
    strays = [UNICODE_ZEROS, SUPERSCRIPT_TWOS, "0000000000000000000", "000000000000000000000",
              "+0000000000000065536", "0000000000000006_536", " 0000000000000065536", "notes.txt"]
    for name in strays:
        (cl / name).write_bytes(b"x")
    listing = list_store_files(cl)
    assert [f.offset for f in listing.files] == [i * 65536 for i in range(8)]
    assert sorted(s.name for s in listing.strays) == sorted(strays)
    assert not listing.unusable


def test_index_files_are_named_by_17_digits(basic):
    d = basic / "index"
    shutil.copy(d / "20261122035032534", d / ("\u0662" * 17))
    listing = list_store_files(d, kind="index")
    assert [f.name for f in listing.files] == sorted(n for n in os.listdir(d) if n.isascii())
    assert [s.name for s in listing.strays] == ["\u0662" * 17]


# -- finding 3: a stray copy of a segment ---------------------------------------------------------------

@pytest.mark.parametrize("stray", [UNICODE_ZEROS, SUPERSCRIPT_TWOS])
def test_stray_copy_of_a_segment_is_reported_and_not_used(basic, stray):
    shutil.copy(basic / "commitlog" / "00000000000000065536", basic / "commitlog" / stray)
    store = open_store(basic, read_only=True)
    try:
        assert store.commit_log.get_max_offset() == LOG_END
    finally:
        store.close()
    report = verify(basic)
    assert report.ok, [str(p) for p in report.errors]
    assert report.log_end == LOG_END
    assert any(p.kind == "unexpected_file" and p.path == f"commitlog/{stray}" for p in report.warnings)
    code, out, err = run_cli(["dump", basic, "--json"])
    assert code == 0, err
    assert sum('"blank"' not in line for line in out.splitlines()) == MESSAGES
    code, out, err = run_cli(["inspect", basic])
    assert code == 0, err
    assert "reads the log up to" not in out
    assert f"commitlog/{stray}" in out  # reported in the health line


def test_strays_in_every_store_folder_are_reported_and_kept(basic):
    strays = [basic / "consumequeue" / "TopicA" / "0" / UNICODE_ZEROS, basic / "index" / ("\u0662" * 17),
              basic / "commitlog" / "00000000000000065536.bak"]
    for p in strays:
        p.write_bytes(b"not a store file")
    from rmqstore.read.inspect_store import inspect

    store = open_store(basic, read_only=True)
    try:
        assert inspect(store)["strays"] == sorted(str(p.relative_to(basic)) for p in strays)
    finally:
        store.close()
    assert {p.path for p in verify(basic).warnings if p.kind == "unexpected_file"} == \
        {str(p.relative_to(basic)) for p in strays}
    store = open_store(basic, read_only=False)
    store.shutdown()
    assert all(p.read_bytes() == b"not a store file" for p in strays)
    _assert_every_message_readable(basic)


@pytest.mark.parametrize("name", [UNICODE_ZEROS, SUPERSCRIPT_TWOS])
def test_writable_open_with_a_stray_keeps_every_byte(basic, name):
    stray = basic / "commitlog" / name
    shutil.copy(basic / "commitlog" / "00000000000000065536", stray)
    before = {p.name: _digest(p) for p in (basic / "commitlog").iterdir()}
    store = open_store(basic, read_only=False)
    try:
        result = store.put_message(Message("TopicA", b"after the stray", queue_id=0))
        assert result.ok
        assert result.append_result.wrote_offset == LOG_END
    finally:
        store.shutdown()
    after = {p.name: _digest(p) for p in (basic / "commitlog").iterdir()}
    assert set(before) <= set(after), "a segment or the stray was deleted"
    assert after[name] == before[name]
    for other in before:
        if other not in (name, "00000000000000458752"):  # the last segment got the new message
            assert after[other] == before[other], other
    _assert_every_message_readable(basic)


# -- finding 8: names and files that cannot be segments -------------------------------------------------

@pytest.mark.parametrize("name", ["09223372036854775807", "99999999999999999999"])
def test_segment_name_past_the_largest_offset(basic, name):
    (basic / "commitlog" / "00000000000000458752").rename(basic / "commitlog" / name)
    with pytest.raises(StoreError, match=name):
        open_store(basic, read_only=True)
    report = verify(basic)
    assert not report.ok
    assert any(p.path == f"commitlog/{name}" for p in report.errors), [str(p) for p in report.errors]
    assert report.records > 0  # the other files were examined
    code, out, err = run_cli(["verify", basic])
    assert code == 1 and "internal error" not in err, err


@pytest.mark.parametrize("stray", [UNICODE_ZEROS, SUPERSCRIPT_TWOS])
def test_segment_renamed_to_unicode_digits(basic, stray):
    (basic / "commitlog" / "00000000000000458752").rename(basic / "commitlog" / stray)
    code, out, err = run_cli(["dump", basic, "--json"])
    assert code == 0 and "internal error" not in err, err  # the log is whole up to the missing last file
    assert stray in err  # the stray is reported
    assert out.count("\n") == len(commitlog_records("basic")) - sum(
        1 for off, _ in commitlog_records("basic") if off >= 458752)
    code, out, err = run_cli(["verify", basic])
    assert code == 1 and "internal error" not in err, err  # units point into the missing file
    assert stray in out


@pytest.mark.parametrize("name", ["00000000920191986844", "00000000002000000000"])
def test_consume_queue_renamed_far_away_costs_what_is_present(basic, name):
    qdir = basic / "consumequeue" / "TopicA" / "0"
    (qdir / "00000000000000006000").rename(qdir / name)
    report = _verify_bounded(basic)
    assert not report.ok
    assert any(p.path.startswith("consumequeue/TopicA/0/") for p in report.errors), [str(p) for p in report.errors]
    code, out, err = run_cli(["verify", basic])
    assert code == 1 and "internal error" not in err, err


def _dangling(root: Path) -> Path:
    p = root / "commitlog" / "00000000000000524288"
    p.symlink_to(root / "nowhere")
    return p


def _loop(root: Path) -> Path:
    p = root / "commitlog" / "00000000000000524288"
    p.symlink_to(p.name)
    return p


def _huge_sparse(root: Path) -> Path:
    p = root / "commitlog" / "00000000000000524288"
    with open(p, "wb") as f:
        f.truncate(1 << 40)
    return p


def _directory(root: Path) -> Path:
    p = root / "commitlog" / "00000000000000524288"
    p.mkdir()
    return p


@pytest.mark.parametrize("make", [_dangling, _loop, _huge_sparse, _directory])
def test_unusable_segment_is_an_error_naming_the_file(basic, make):
    path = make(basic)
    with pytest.raises(StoreError, match=path.name):
        open_store(basic, read_only=True)
    with pytest.raises(StoreError, match=path.name):
        open_store(basic, read_only=False)
    began = time.monotonic()
    report = verify(basic)
    assert time.monotonic() - began < 20
    assert any(p.path == f"commitlog/{path.name}" and p.severity == ERROR for p in report.problems), \
        [str(p) for p in report.problems]
    assert report.records == MESSAGES + 0  # everything else was examined
    code, out, err = run_cli(["verify", basic])
    assert code == 1 and "internal error" not in err, err
    for cmd in ("inspect", "dump"):
        code, out, err = run_cli([cmd, basic])
        assert "internal error" not in err and code in (1, 2), (cmd, code, err)
        assert path.name in err
    assert os.path.lexists(path)  # left alone


def test_writable_open_refuses_a_segment_name_off_the_grid(basic):
    last = basic / "commitlog" / "00000000000000458752"
    last.rename(basic / "commitlog" / "00000000000000458753")
    with pytest.raises(StoreError, match="00000000000000458753"):
        open_store(basic, read_only=False)
    assert sorted(os.listdir(basic / "commitlog"))[-1] == "00000000000000458753"


# -- finding 9: a commitlog file that holds no record ---------------------------------------------------

def test_random_file_alone_in_commitlog_is_damage_for_every_command(tmp_path):
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    data = random.Random(9).randbytes(1000)
    assert data[:8] != bytes(8)
    (root / "commitlog" / "00000000000000000000").write_bytes(data)
    report = verify(root)
    assert not report.ok
    assert any(p.path == "commitlog/00000000000000000000" for p in report.errors), [str(p) for p in report.problems]
    codes = {}
    for cmd in ("verify", "inspect", "dump"):
        code, out, err = run_cli([cmd, root])
        assert "internal error" not in err
        codes[cmd] = code
    assert codes["verify"] == 1 and codes["dump"] == 1 and codes["inspect"] != 0, codes
    with pytest.raises(RmqStoreError):
        open_store(root, read_only=True)


def test_refused_writable_open_deletes_nothing(basic):
    """The start-up clean-ups list through the same listing: a store that will be refused is not touched."""
    (basic / "abort").write_bytes(b"")
    misfit = basic / "commitlog" / "00000000000000524288"
    misfit.write_bytes(bytes(100))  # what an interrupted allocation leaves: deleted on a normal start
    creating = basic / "commitlog" / "00000000000000589824.123.creating"
    creating.write_bytes(b"")
    dangling = basic / "consumequeue" / "TopicA" / "0" / "00000000000000012000"
    dangling.symlink_to("nowhere")
    store = MessageStore(basic, infer_config(str(FIXTURES / "basic" / "store")))
    with pytest.raises(StoreError, match=dangling.name):
        store.load()
    store.close()
    assert misfit.exists() and creating.exists() and os.path.islink(dangling)


def test_sparse_consume_queue_costs_what_is_present(basic):
    """The last consume-queue file of a queue grown to 2**31 - 1 bytes of holes: verify reads the units
    written, not the size (the file's size is reported)."""
    last = basic / "consumequeue" / "TopicA" / "0" / "00000000000000006000"
    os.truncate(last, 2**31 - 1)
    report = _verify_bounded(basic)
    assert any(p.kind == "file_size" and p.path == "consumequeue/TopicA/0/00000000000000006000"
               for p in report.errors), [str(p) for p in report.errors]
    assert report.units == 600


# -- zero scans skip holes (store_dir.first_nonzero, count_nonzero, file_is_all_zero) -----------------

class _CountingBuffer:
    """A buffer that counts the bytes sliced out of it: what a scan really reads."""

    def __init__(self, buf):
        self.buf, self.read = buf, 0

    def __getitem__(self, key):
        chunk = self.buf[key]
        self.read += len(chunk)
        return chunk


def _sparse(path, size, data):
    """A ``size``-byte file of holes but for ``data`` (position -> bytes); never written densely."""
    with open(path, "wb") as f:
        for pos, b in data.items():
            f.seek(pos)
            f.write(b)
    os.truncate(path, size)
    fd = os.open(path, os.O_RDONLY)
    try:
        extents = data_extents(fd, size)
    finally:
        os.close(fd)
    if extents is None or sum(b - a for a, b in extents) > 1 << 22:
        pytest.skip("the file system does not report holes")
    return extents


def test_first_nonzero_skips_holes(tmp_path):
    size = 16 << 30  # 16 GiB claimed, a few pages held
    path = tmp_path / "sparse"
    extents = _sparse(path, size, {0: bytes(100), size - 4096 + 7: b"\x05\x00\x09"})
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
        buf = _CountingBuffer(m)
        assert first_nonzero(buf, 0, size, extents) == size - 4096 + 7
        assert buf.read <= sum(b - a for a, b in extents)  # the holes were never read
        assert first_nonzero(buf, 0, size - 4096, extents) is None
        assert first_nonzero(buf, size - 4096 + 8, size, extents) == size - 4096 + 9
        buf.read = 0
        assert count_nonzero(buf, 0, size, extents) == 2
        assert buf.read <= sum(b - a for a, b in extents)
    # the same answers when the file system is not asked (every byte counts as data), on a small buffer
    small = bytes(5000) + b"\x01" + bytes(10) + b"\x02"
    assert first_nonzero(small, 0, len(small)) == 5000
    assert first_nonzero(small, 5001, len(small)) == 5011
    assert first_nonzero(small, 0, 5000) is None
    assert count_nonzero(small, 0, len(small)) == 2 and count_nonzero(small, 5001, 5011) == 0


def test_file_is_all_zero_costs_what_the_file_holds(tmp_path):
    size = 64 << 30  # a dense scan of 64 GiB of zeros takes tens of seconds
    holes = tmp_path / "holes"
    _sparse(holes, size, {4096: bytes(4096)})
    tail = tmp_path / "tail"
    _sparse(tail, size, {size - 1: b"\x01"})
    start = time.monotonic()
    assert file_is_all_zero(str(holes))
    assert not file_is_all_zero(str(tail))
    assert time.monotonic() - start < 5
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert file_is_all_zero(str(empty))
    dense = tmp_path / "dense"
    dense.write_bytes(bytes(3 << 20) + b"\x00\x07")
    assert not file_is_all_zero(str(dense))
    dense.write_bytes(bytes(3 << 20))
    assert file_is_all_zero(str(dense))
