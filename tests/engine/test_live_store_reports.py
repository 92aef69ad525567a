"""``inspect`` and ``verify`` on the store of a running writer say it is live, not crashed.

A running store keeps its abort file (removed at a clean shutdown) and makes the next commitlog file
ahead of need; read from outside, those are the marks of an unclean shutdown and of a leftover
allocation only when nobody holds the store's lock.  These tests run a started ``MessageStore`` in a
subprocess (and a broker in this process), read the store with the command line while it runs, then
kill the writer with SIGKILL: only then is it an unclean shutdown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from broker_support import BrokerThread, small_store_config
from conftest import REPO, run_cli

WRITER = textwrap.dedent("""
    import sys
    from rmqstore import Message, MessageStore, StoreConfig
    store = MessageStore(sys.argv[1], StoreConfig(mapped_file_size_commit_log=64 * 1024))
    store.start()
    for i in range(40):
        assert store.put_message(Message("TopicA", b"x" * 100, queue_id=i % 2, properties=f"KEYS\\x01k{i}\\x02")).ok
    store.wait_dispatched(30)
    print("ready", flush=True)
    sys.stdin.read()  # runs until the test closes stdin (or kills it)
    store.shutdown()
""")

NEXT_FILE = "commitlog/00000000000000065536"


@pytest.fixture
def writer(tmp_path):
    root = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc, root
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def _wait_for_next_file(root):
    import time

    deadline = time.monotonic() + 60
    while not (root / NEXT_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (root / NEXT_FILE).exists(), "the running store makes the next commitlog file ahead"


def test_inspect_and_verify_say_a_running_store_is_live(writer):
    proc, root = writer
    _wait_for_next_file(root)
    assert (root / "abort").exists()

    code, text, _ = run_cli(["inspect", root])
    assert code == 0
    assert "did not stop cleanly" not in text and "did not shut down cleanly" not in text, text
    assert "unclean" not in text and "left by a writer" not in text, text
    assert f"live: process {proc.pid}" in text, text
    assert f"kept by the running store (process {proc.pid})" in text, text  # the abort line
    assert "made ahead by the running store" in text, text
    code, out, _ = run_cli(["inspect", root, "--json"])
    info = json.loads(out)
    assert info["live"]["pid"] == proc.pid and not info["live"]["thisProcess"]
    assert info["live"]["command"].startswith(f"{sys.executable} -c import sys")  # which process: its command
    assert info["health"].startswith("OK"), info["health"]

    code, text, _ = run_cli(["verify", root])
    assert code == 0, text
    assert "unclean" not in text and "did not stop cleanly" not in text and "left by a writer" not in text, text
    code, out, _ = run_cli(["verify", root, "--json"])
    report = json.loads(out)
    kinds = {p["kind"]: p for p in report["problems"]}
    assert "unclean_shutdown" not in kinds
    assert report["live"] == proc.pid
    assert f"process {proc.pid}" in kinds["live_store"]["message"]
    assert "abort file" in kinds["live_store"]["message"]
    made_ahead = kinds["preallocated_segment"]
    assert made_ahead["path"] == NEXT_FILE and "made ahead by the running store" in made_ahead["message"]

    # the writer killed: now the same files are an unclean shutdown's, and they are called so
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    code, text, _ = run_cli(["inspect", root])
    assert "unclean shutdown (abort file present)" in text and "live:" not in text, text
    code, out, _ = run_cli(["verify", root, "--json"])
    kinds = {p["kind"]: p for p in json.loads(out)["problems"]}
    assert "unclean_shutdown" in kinds and "live_store" not in kinds
    assert "made ahead" not in kinds["preallocated_segment"]["message"]


def test_a_clean_stop_leaves_a_store_that_is_neither_live_nor_crashed(writer):
    proc, root = writer
    proc.stdin.close()
    assert proc.wait(60) == 0
    code, out, _ = run_cli(["inspect", root, "--json"])
    info = json.loads(out)
    assert info["live"] is None and not info["abort"] and info["health"] == "OK", info["health"]
    code, out, _ = run_cli(["verify", root, "--json"])
    assert json.loads(out)["live"] is None


def test_a_broker_running_in_this_process_is_named_as_this_process(tmp_path):
    with BrokerThread(tmp_path / "store", store_config=small_store_config()):
        code, out, _ = run_cli(["inspect", tmp_path / "store", "--json"])
        info = json.loads(out)
        assert info["live"]["pid"] == os.getpid() and info["live"]["thisProcess"]
        code, text, _ = run_cli(["inspect", tmp_path / "store"])
        assert f"this process ({os.getpid()}) holds the store's lock" in text and "unclean" not in text, text
        code, out, _ = run_cli(["verify", tmp_path / "store", "--json"])
        kinds = {p["kind"] for p in json.loads(out)["problems"]}
        assert "live_store" in kinds and "unclean_shutdown" not in kinds
