"""A full disk: the store answers, it never dies, and nothing it acknowledged is lost.

The stores live on a small disk mounted for the test, every test on two: an 8 MiB tmpfs and
an 8 MiB ext4 image, loop-mounted (root only: without the right to mount, the tests skip and
say so).  Writers and readers run in subprocesses (with ``-X faulthandler``), so a SIGBUS --
what a write through a mapping into a page without a block meets on a full disk -- fails the
test as exit code -7, with the Python stack of the write, instead of killing pytest.  How
full a disk is made is said as the room left (:func:`_fill`): the two hold different amounts.

What must hold in every flush mode (SYNC_FLUSH, ASYNC_FLUSH, the transient store pool):

* when no new segment fits, the put answers CREATE_MAPEDFILE_FAILED (or, once the store
  stopped taking puts, SERVICE_NOT_AVAILABLE) with a message naming the disk, and no put
  after that answers PUT_OK;
* the writer process lives on and shuts down cleanly;
* readers (a read-only open, ``rmqstore verify``) on the full disk do not die, and every
  put that answered PUT_OK is there, body for body, through the consume queues too;
* once space is freed, the store reopens and takes puts again.

A consume queue (dispatch thread) that meets the full disk first stops dispatch at that
record and makes the store not writeable; the next start dispatches what was missed.
Flush and commit errors (simulated in-process) stop further PUT_OK answers without
killing their threads.  Each kind of file the store writes through a mapping, opened as the
store opens it, takes every write it has room for on a disk full to its last block.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import pytest

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.files.mapped_file import MappedFile
from rmqstore.format.status import PutMessageStatus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DISK_SIZE = 8 << 20
BODY = 5000

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs and loop mounts are Linux only")


@pytest.fixture(params=["tmpfs", "ext4"])
def small_disk(request, tmp_path):
    """An 8 MiB disk at ``tmp_path/disk``, unmounted afterwards; skips (saying why) where mounting is refused.

    ``tmpfs``: pages have no block until written.  ``ext4``: an 8 MiB image (sparse) formatted
    and loop-mounted; space ``posix_fallocate`` reserved is an unwritten extent there, and a
    first write into it through a mapping can still need a block.
    """
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if request.param == "tmpfs":
        command = ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mnt)]
    else:
        command = ["mount", "-t", "ext4", "-o", "loop", str(_ext4_image(tmp_path / "ext4.img")), str(mnt)]
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("no mount command: cannot make a small disk to fill")
    if r.returncode != 0:
        pytest.skip(f"mounting {request.param} was refused ({(r.stderr or r.stdout).strip() or r.returncode}); "
                    "filling a disk needs root (and, for ext4, loop devices)")
    try:
        _skip_unless_it_reserves(mnt, request.param)
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)


def _ext4_image(image):
    """A sparse ``DISK_SIZE`` file formatted as ext4 (skips where mkfs.ext4 is missing or fails)."""
    with open(image, "wb") as f:
        f.truncate(DISK_SIZE)  # sparse: holes, never copied
    try:
        r = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("no mkfs.ext4: cannot make a small ext4 disk to fill")
    if r.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed ({(r.stderr or r.stdout).strip() or r.returncode})")
    return image


def _skip_unless_it_reserves(mnt, kind: str) -> None:
    probe = mnt / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT)
    try:
        os.posix_fallocate(fd, 0, 4096)
    except OSError as exc:
        pytest.skip(f"this kernel's {kind} cannot reserve space ({exc.strerror})")
    finally:
        os.close(fd)
        os.remove(probe)


# -- the programs run in subprocesses -------------------------------------------------------

_COMMON = """
import json, sys, time
from rmqstore import Message, MessageStore, StoreConfig, open_store
from rmqstore.common.errors import StoreError

def config(mode, sizes):
    cfg = dict(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20_000,
               max_hash_slot_num=1000, max_index_num=4000,
               flush_disk_type="SYNC_FLUSH" if mode == "sync" else "ASYNC_FLUSH",
               transient_store_pool_enable=mode == "pool", flush_interval_commit_log=20,
               commit_interval_commit_log=20)
    cfg.update(json.loads(sizes))
    global KEYS_PER_MESSAGE
    KEYS_PER_MESSAGE = cfg.pop("keys_per_message", 1)
    return StoreConfig(**cfg)

def keys(i):
    return " ".join(key(i * KEYS_PER_MESSAGE + j) for j in range(KEYS_PER_MESSAGE))

def body(i):
    return (b"%08d" % i) * 625  # 5000 bytes, different for every message

def key(i):
    return "k%08x" % (i * 2654435761 % 2**32)  # keys that hash far apart (spread over the slots)
"""

_WRITER = _COMMON + """
root, mode, sizes, queues, start, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \\
    int(sys.argv[5]), int(sys.argv[6])
pause = float(sys.argv[7]) if len(sys.argv) > 7 else 0  # let the dispatch thread keep up
store = MessageStore(root, config(mode, sizes))
try:
    store.start()
except StoreError as exc:  # (a clear refusal is an answer too; a signal is not)
    print(json.dumps({"open_error": str(exc)}))
    sys.exit(0)
acked, answers = [], []
for i in range(start, start + limit):
    r = store.put_message(Message("Full", body(i), queue_id=i % queues, properties="KEYS\\x01" + keys(i)))
    if r.ok:
        acked.append(i)
        if answers:
            answers.append(["PUT_OK", ""])
    else:
        answers.append([r.status.name, r.message])
        if len(answers) >= 20:
            break
    time.sleep(pause)
store.shutdown()
print(json.dumps({"acked": acked, "answers": answers, "writeable": store.writeable}))
"""

_READER = _COMMON + """
root, mode, sizes, queues = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
acked = json.loads(sys.stdin.read())
store = open_store(root, config=config(mode, sizes))   # read-only
seen = {}
for q in range(queues):
    offset = 0
    while True:
        got = store.get_message("g", "Full", q, offset, 64)
        if not got.messages:
            break
        for m in got.messages:
            seen[bytes(m.body[:8])] = bytes(m.body)
        offset = got.next_begin_offset
store.close()
bad = [i for i in acked if seen.get(b"%08d" % i) != body(i)]
print(json.dumps({"missing_or_wrong": bad, "found": len(seen)}))
"""

_RESUME = _COMMON + """
import os
root, mode, filler = sys.argv[1], sys.argv[2], sys.argv[3]
# one consume-queue file holds every put: the dispatch thread, running behind the writer, must not
# meet the full disk creating the next one (that stops puts until a reopen, tested further down)
store = MessageStore(root, config(mode, json.dumps({"mapped_file_size_consume_queue": 200_000})))
store.start()
# the queue's and the index's files are made by the first dispatch: before the disk fills, not while.
# (wait_dispatched alone is not enough with the pool: a put not yet committed is not readable, so nothing
# is behind for the reput until the commit thread runs -- the queue's unit says the dispatch happened)
assert store.put_message(Message("Full", body(0), queue_id=0)).ok
deadline = time.monotonic() + 30
while store.get_max_offset_in_queue("Full", 0) < 1:
    assert time.monotonic() < deadline, "the first put was not dispatched in 30 s"
    time.sleep(0.005)
i, answers = 1, []
while True:
    r = store.put_message(Message("Full", body(i), queue_id=0))
    i += 1
    if not r.ok:
        answers.append([r.status.name, r.message])
        break
os.remove(filler)  # space comes back while the store runs
answers += [[r.status.name, r.message] for r in (store.put_message(Message("Full", body(i + n), queue_id=0))
                                                 for n in range(3))]
store.shutdown()
print(json.dumps({"answers": answers}))
"""

_EVERY_PAGE = """
import json, os, sys
from rmqstore.files.checkpoint import StoreCheckpoint
from rmqstore.common.errors import StoreError
from rmqstore.engine.index_file import IndexFile
from rmqstore.files.mapped_file import MappedFile

root, filler, kind = sys.argv[1], sys.argv[2], sys.argv[3]
for d in ("commitlog", "consumequeue/T/0", "index"):
    os.makedirs(os.path.join(root, d))
sparse = os.path.join(root, "consumequeue/T/0", "0" * 20)
with open(sparse, "wb") as f:
    f.truncate(6000)  # an existing sparse file (RocketMQ makes its files so)
open_as_the_store_does = {
    "segment": lambda: MappedFile(os.path.join(root, "commitlog", "0" * 20), 65536),
    "sparse segment": lambda: MappedFile(sparse, 6000),
    "checkpoint": lambda: StoreCheckpoint(os.path.join(root, "checkpoint")),
    # 100 slots: header and slots end at byte 440, the first entries follow in the same page
    "index file": lambda: IndexFile(os.path.join(root, "index", "20260101000000000"), 100, 400)}
mapped = open_as_the_store_does[kind]()
# the disk full to its last block: any write that needs one fails from now on
with open(filler, "wb", buffering=0) as f:
    for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 10, 1):
        try:
            while True:
                f.write(b"f" * chunk)
        except OSError:
            pass
# every byte the store may write without asking for room first
keys, refused = 0, ""
if kind in ("segment", "sparse segment"):
    mapped.mapped[:] = b"\\1" * mapped.file_size
    mapped.flush(0)
elif kind == "checkpoint":
    mapped.physic_msg_timestamp = mapped.logics_msg_timestamp = mapped.index_msg_timestamp = 1
    mapped.flush()
else:
    try:
        while mapped.put_key(f"k{keys}", 1000 + keys, 1_800_000_000_000):
            keys += 1
    except StoreError as exc:  # room for the next entries could not be reserved: an answer
        refused = str(exc)
print(json.dumps({"keys": keys, "refused": refused}))
"""


_KEYS = _COMMON + """
root, mode, sizes = sys.argv[1], sys.argv[2], sys.argv[3]
store = open_store(root, config=config(mode, sizes))
missing = [i for i in json.loads(sys.stdin.read())
           if not store.query_message("Full", key(i * KEYS_PER_MESSAGE), 4, 0, 2**62).messages]
store.close()
print(json.dumps({"missing": missing}))
"""


def _fill(mnt, room: int):
    """A file that leaves ``room`` bytes of the disk free (the disks' free space differs: ext4 keeps
    a journal and inode tables); removing it gives its space back."""
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    size = st.f_bavail * st.f_frsize - room  # (ext4 keeps blocks back for itself: not available)
    assert size >= 1 << 20, f"the disk has {st.f_bavail * st.f_frsize} bytes free, too few to leave {room}"
    with open(filler, "wb") as f:
        f.write(b"f" * size)
        os.fsync(f.fileno())
    return filler


def _run(code: str, *args, stdin: str = "") -> dict:
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code, *map(str, args)], input=stdin, capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, f"exit {r.returncode} (-7 is SIGBUS)\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _verify(root) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "rmqstore.cli", "verify", str(root)], capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode in (0, 1), f"verify died: exit {r.returncode} (-7 is SIGBUS)\n{r.stderr[-3000:]}"
    return r


def _assert_full_disk_answers(out: dict, mnt, statuses) -> None:
    answers = out["answers"]
    assert answers, "the disk never filled: every put answered PUT_OK"
    first_status, first_message = answers[0]
    assert first_status in statuses, answers[0]
    assert "No space left on device" in first_message and str(mnt) in first_message, first_message
    assert all(status != "PUT_OK" for status, _ in answers), f"PUT_OK after a full disk: {answers}"


@pytest.mark.parametrize("mode", ["sync", "async", "pool"])
def test_full_disk_answers_keeps_every_acknowledged_put_and_recovers(small_disk, mode):
    mnt = small_disk
    root = mnt / "store"
    filler = _fill(mnt, 9 << 19)  # 4.5 MiB left; the rest is room to give back later
    sizes, queues = "{}", 4
    out = _run(_WRITER, root, mode, sizes, queues, 0, 10_000)
    # (the commitlog usually meets the full disk first; an index file growing at the same time may)
    _assert_full_disk_answers(out, mnt, {"CREATE_MAPEDFILE_FAILED", "SERVICE_NOT_AVAILABLE"})
    acked = out["acked"]
    assert len(acked) > 500  # about 4 MiB of commitlog

    # readers on the full disk: alive, and everything acknowledged is there
    read = _run(_READER, root, mode, sizes, queues, stdin=json.dumps(acked))
    assert read["missing_or_wrong"] == [] and read["found"] == len(acked)
    report = _verify(root)
    assert report.returncode == 0, report.stdout[-3000:]

    # reopened for writing on the full disk: it answers (or, when a recovery that must dispatch
    # again has no room for it, refuses to open, naming the disk)
    still = _run(_WRITER, root, mode, sizes, queues, 200_000, 5)
    if "open_error" in still:
        assert "No space left on device" in still["open_error"] and str(mnt) in still["open_error"], still
    else:
        _assert_full_disk_answers(still, mnt, {"CREATE_MAPEDFILE_FAILED", "SERVICE_NOT_AVAILABLE"})
        assert still["acked"] == []

    # space comes back: the store reopens and takes puts again, the old ones still there
    filler.unlink()
    again = _run(_WRITER, root, mode, sizes, queues, 100_000, 50)
    assert again["answers"] == [] and len(again["acked"]) == 50
    read = _run(_READER, root, mode, sizes, queues, stdin=json.dumps(acked + again["acked"]))
    assert read["missing_or_wrong"] == []


@pytest.mark.parametrize("kind", ["segment", "sparse segment", "checkpoint", "index file"])
def test_every_file_written_through_a_mapping_has_its_blocks_before_the_first_write(small_disk, kind):
    """On a disk full to its last block, writing what a file of each kind holds room for -- a new and an
    existing sparse segment, the checkpoint, an index file's entries up to what was reserved -- is never
    a signal (a page without a block is a SIGBUS when written through a mapping; the index file's
    header and 100 slots end inside a page, whose rest must have its blocks too)."""
    out = _run(_EVERY_PAGE, small_disk / "store", small_disk / "filler", kind)
    if kind == "index file":
        assert out["keys"] > 0, out
    if out["refused"]:  # the index asked for more room: a StoreError naming the full disk
        assert "No space left on device" in out["refused"] and str(small_disk) in out["refused"], out


@pytest.mark.parametrize("mode", ["sync", "pool"])
def test_puts_resume_when_space_returns_while_the_store_runs(small_disk, mode):
    """A failed file creation is tried again by the next put (the allocate service forgets the failure)."""
    filler = _fill(small_disk, 5 << 20)
    out = _run(_RESUME, small_disk / "store", mode, filler)
    answers = out["answers"]
    statuses = [status for status, _ in answers]
    detail = json.dumps(answers, indent=1)
    # the failed creation is tried again by the next put, which succeeds now that there is room
    assert statuses[:2] == ["CREATE_MAPEDFILE_FAILED", "PUT_OK"], detail
    # the later puts succeed too -- unless another writer of the store (a commit, a flush, the dispatch)
    # met the full disk in the moment it lasted: then the store stops taking puts, naming the disk,
    # as test_dispatch_that_meets_the_full_disk_stops_puts_and_resumes_after_reopen requires
    for status, message in answers[2:]:
        assert status == "PUT_OK" or (status == "SERVICE_NOT_AVAILABLE" and "No space left on device" in message
                                      and str(small_disk) in message), detail
    assert len(answers) == 4, detail


@pytest.mark.parametrize("what, sizes, queues, room", [
    # every queue's first file takes 0.5 MB: the disk fills with queues
    ("consume queue", {"mapped_file_size_consume_queue": 512_000}, 40, 4 << 20),
    # 100 keys a message: index entries take 2 kB a message and fill the disk
    ("index file", {"max_index_num": 400_000, "keys_per_message": 100}, 1, 9 << 18),
])
def test_dispatch_that_meets_the_full_disk_stops_puts_and_resumes_after_reopen(small_disk, what, sizes, queues,
                                                                               room):
    """The dispatch thread meets the full disk first: the store becomes not writeable, nothing is skipped."""
    mnt = small_disk
    root = mnt / "store"
    filler = _fill(mnt, room)
    sizes = json.dumps(sizes)
    out = _run(_WRITER, root, "async", sizes, queues, 0, 180, 0.005)
    _assert_full_disk_answers(out, mnt, {"SERVICE_NOT_AVAILABLE"})
    assert what in out["answers"][0][1] and not out["writeable"], out["answers"][0]
    acked = out["acked"]
    assert (root / "abort").exists()  # not writeable: the next start recovers abnormally

    _verify(root)  # alive on the full disk (what dispatch missed is damage it may report)
    _run(_KEYS, root, "async", sizes, stdin=json.dumps(acked))  # key lookups too
    filler.unlink()
    again = _run(_WRITER, root, "async", sizes, queues, 100_000, 3)
    assert again["answers"] == [] and len(again["acked"]) == 3
    read = _run(_READER, root, "async", sizes, queues, stdin=json.dumps(acked + again["acked"]))
    assert read["missing_or_wrong"] == [], read
    if what == "index file":  # every key found again through the rebuilt index
        keys = _run(_KEYS, root, "async", sizes, stdin=json.dumps(acked + again["acked"]))
        assert keys["missing"] == [], keys


# -- flush and commit errors (no real disk needed) ------------------------------------------

def _failing(monkeypatch, name: str):
    """Make ``MappedFile.<name>`` fail with EIO while ``state['fail']``; returns the state."""
    state = {"fail": True}
    real = getattr(MappedFile, name)

    def failing(self, *args):
        if state["fail"]:
            raise OSError(errno.EIO, "Input/output error")
        return real(self, *args)

    monkeypatch.setattr(MappedFile, name, failing)
    return state


def _msg(i: int) -> Message:
    return Message("T", b"%08d" % i, born_host="192.0.2.1:1")


def test_sync_flush_error_answers_at_once_and_stops_puts(tmp_path, monkeypatch):
    cfg = StoreConfig(mapped_file_size_commit_log=65536, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=5000)
    store = MessageStore(tmp_path, cfg)
    store.start()
    try:
        assert store.put_message(_msg(0)).ok
        _failing(monkeypatch, "flush")
        t0 = time.monotonic()
        r = store.put_message(_msg(1))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and time.monotonic() - t0 < 2, r
        r = store.put_message(_msg(2))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "Input/output error" in r.message, r
        assert store.group_commit_service._thread.is_alive()
    finally:
        monkeypatch.undo()
        store.shutdown()


def test_commit_error_with_the_pool_stops_puts_and_loses_nothing_acknowledged(tmp_path, monkeypatch):
    """RocketMQ's commit thread dies here while puts go on answering PUT_OK; ours stops the puts,
    keeps committing once the file takes writes again, and every acknowledged put is on disk."""
    cfg = StoreConfig(mapped_file_size_commit_log=65536, transient_store_pool_enable=True,
                      commit_interval_commit_log=10, flush_interval_commit_log=10)
    store = MessageStore(tmp_path, cfg)
    store.start()
    acked = []
    try:
        assert store.put_message(_msg(0)).ok
        acked.append(0)
        state = _failing(monkeypatch, "_commit0")
        deadline = time.monotonic() + 5
        i = 1
        while time.monotonic() < deadline:
            r = store.put_message(_msg(i))
            if not r.ok:
                break
            acked.append(i)
            i += 1
            time.sleep(0.002)
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "Input/output error" in r.message, r
        assert store.commit_service._thread.is_alive()
        state["fail"] = False  # the disk recovers: what was acknowledged gets committed
    finally:
        store.shutdown()
    reopened = MessageStore(tmp_path, cfg, read_only=True)
    reopened.load()
    try:
        got = store_bodies(reopened)
    finally:
        reopened.close()
    assert got == [b"%08d" % i for i in acked]


def store_bodies(store) -> list[bytes]:
    out, offset = [], 0
    while True:
        got = store.get_message("g", "T", 0, offset, 64)
        if not got.messages:
            return out
        out += [bytes(m.body) for m in got.messages]
        offset = got.next_begin_offset
