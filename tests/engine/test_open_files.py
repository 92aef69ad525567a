"""A read-only walk holds a bounded number of files open, whatever the store's size.

``rmqstore verify``, ``inspect`` and ``msg`` read every file of a store; a process may hold
only so many open (``ulimit -n``), and a mapping holds its file open.  Done means:

* on stores of about 500 small files (tiny segment sizes), under an open-file limit of 256
  set in the child (``resource.setrlimit`` before exec), each command answers what it answers
  without the limit -- verify the same report, inspect the same store, msg the same message --
  on the compiled path (the default) and the pure one (``RMQSTORE_PURE=1``); one store has an
  index (verify's pure walk, msg by key), the other none (verify's compiled bulk pass);
* an OS error on the way (a limit too low to run at all, or a file the system refuses) is an
  error of the run -- exit 3 and a message naming the error -- never damage of the store.
"""

from __future__ import annotations

import errno
import io
import json
import os
import resource
import subprocess
import sys

import pytest

from rmqstore import Message, MessageStore, StoreConfig, cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT = 256
MESSAGES = 4000
EXIT_SYSTEM = 3

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_NOFILE behaviour is Linux's here")


def _build(root, indexed: bool) -> int:
    """The store; the offset of its last record."""
    cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200, max_hash_slot_num=10,
                      max_index_num=40, message_index_enable=indexed)
    store = MessageStore(root, cfg)
    store.start()
    try:
        for i in range(MESSAGES):
            r = store.put_message(Message(f"T{i % 3}", b"m%06d" % i * 10, queue_id=i % 4, properties=f"KEYS\x01k{i}"))
            assert r.ok, r
        assert store.wait_dispatched()
    finally:
        store.shutdown()
    return r.append_result.wrote_offset


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    out = {}
    for kind in ("indexed", "unindexed"):
        root = tmp_path_factory.mktemp(kind) / "store"
        last_offset = _build(root, kind == "indexed")
        files = sum(len(names) for _, _, names in os.walk(root))
        assert files > 2 * LIMIT, files  # more files than the limit lets a process hold open
        out[kind] = root
        out[f"{kind} last offset"] = last_offset
    return out


def _cli(args, *, pure: bool, limit: int | None = None) -> subprocess.CompletedProcess:
    def lower_the_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("RMQSTORE_PURE", None)
    if pure:
        env["RMQSTORE_PURE"] = "1"
    return subprocess.run([sys.executable, "-m", "rmqstore.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env, preexec_fn=lower_the_limit if limit else None)


def _json(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return json.loads(r.stdout)


def _same_store(info: dict) -> dict:
    """What inspect says of the store itself (not of the disk it is on, which other processes change)."""
    return {k: v for k, v in info.items() if k not in ("disk",)}


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("kind", ["indexed", "unindexed"])
def test_verify_under_a_low_open_file_limit_gives_the_report_it_gives_without(stores, kind, pure):
    root = stores[kind]
    want = _json(_cli(["verify", root, "--json"], pure=pure))
    assert want["ok"] and not want["problems"], want
    got = _json(_cli(["verify", root, "--json"], pure=pure, limit=LIMIT))
    assert got == want


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("kind", ["indexed", "unindexed"])
def test_inspect_under_a_low_open_file_limit_sees_what_it_sees_without(stores, kind, pure):
    root = stores[kind]
    want = _json(_cli(["inspect", root, "--json"], pure=pure))
    assert want["health"] == "OK", want["issues"]
    got = _json(_cli(["inspect", root, "--json"], pure=pure, limit=LIMIT))
    assert _same_store(got) == _same_store(want)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("kind", ["indexed", "unindexed"])
def test_msg_under_a_low_open_file_limit_finds_what_it_finds_without(stores, kind, pure):
    root = stores[kind]
    last = MESSAGES - 1
    # by key through the index files; without an index, by the offset of the last record
    args = ["--key", f"k{last}"] if kind == "indexed" else ["--offset", stores[f"{kind} last offset"]]
    want = _cli(["msg", root, *args, "--json"], pure=pure)
    assert want.returncode == 0, want.stderr
    found = json.loads(want.stdout.splitlines()[0])
    assert bytes.fromhex(found["body"]) == b"m%06d" % last * 10
    got = _cli(["msg", root, *args, "--json"], pure=pure, limit=LIMIT)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout == want.stdout


@pytest.mark.parametrize("command", ["verify", "inspect", "msg"])
def test_a_limit_too_low_to_run_is_an_error_of_the_run_not_damage(stores, command):
    """Ten descriptors: the interpreter starts, the walk cannot map what it needs."""
    args = {"verify": ["verify", stores["indexed"]], "inspect": ["inspect", stores["indexed"]],
            "msg": ["msg", stores["indexed"], "--key", "k1"]}[command]
    r = _cli(args, pure=False, limit=10)
    assert r.returncode == EXIT_SYSTEM, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert "Too many open files" in r.stderr and "DAMAGED" not in r.stdout, r.stderr[-2000:]


def test_verify_reports_a_file_it_cannot_open_as_an_error_of_the_run(stores, monkeypatch):
    """In-process: the system refuses one consume-queue file (EMFILE, as a process at its limit gets)."""
    real_open = os.open
    victim = sorted((stores["indexed"] / "consumequeue" / "T1" / "2").iterdir())[3]

    def refusing_open(path, flags, *args, **kwargs):
        if os.fspath(path) == str(victim):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["verify", str(stores["indexed"])], stdin=io.BytesIO(b""), stdout=out, stderr=err)
    monkeypatch.undo()
    assert code == EXIT_SYSTEM, out.getvalue()[-2000:] + err.getvalue()
    assert "Too many open files" in err.getvalue() and str(victim) in err.getvalue(), err.getvalue()
    assert "DAMAGED" not in out.getvalue()


def test_maps_in_use_are_never_unmapped_and_the_others_stay_within_the_budget(tmp_path):
    """The mechanism (rmqstore.files.read_maps), in-process: more files than the budget read one after another."""
    from rmqstore.files.read_maps import ReadMap, map_budget

    budget = map_budget()
    paths = []
    for i in range(budget + 40):
        paths.append(tmp_path / f"{i:05d}")
        paths[-1].write_bytes(b"%05d" % i * 1000)
    maps = [ReadMap(str(p), 5000) for p in paths]
    fds_before = len(os.listdir("/proc/self/fd"))
    try:
        held = maps[0].buf  # a walk's local variable
        view = memoryview(maps[1].buf)[:5]  # an exported buffer
        for i, m in enumerate(maps):
            assert m.buf[:5] == b"%05d" % i
        assert sum(m.mapped for m in maps) <= budget
        assert maps[0].mapped and maps[1].mapped and held[:5] == b"00000" and bytes(view) == b"00001"
        assert len(os.listdir("/proc/self/fd")) - fds_before <= budget
        view.release()
        del held, view
        for i, m in enumerate(maps):  # unmapped ones map again
            assert m.buf[-5:] == b"%05d" % i
    finally:
        for m in maps:
            m.close()
    assert not any(m.mapped for m in maps)
