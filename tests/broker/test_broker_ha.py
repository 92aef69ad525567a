"""``rmqstore broker --role``: a SYNC_MASTER and a SLAVE started from the command line replicate.

A real RocketMQ producer (the ``rocketmq`` client) sends to the master; SYNC_MASTER answers
only once the slave has the bytes, so after the sends the slave's commitlog holds them,
and after both stop cleanly their commitlog files are byte-identical.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

rc = pytest.importorskip("rocketmq.client")

REPO = Path(__file__).resolve().parents[2]
CONF = ("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=100\nmaxIndexNum=400\n"
        "flushDiskType=SYNC_FLUSH\n")


def _start(tmp_path, name: str, *args: str):
    conf = tmp_path / f"{name}.conf"
    conf.write_text(f"brokerName=broker-ha\nstorePathRootDir={tmp_path / name}\n" + CONF)
    # banner: the broker, its role, the name server (none with --no-namesrv)
    return _launch(name, ["broker", "--config", str(conf), "--listen", "127.0.0.1:0", *args],
                   lambda line: "name server listening" in line or ("--no-namesrv" in args and (
                       "replicating from" in line or "serving slaves on" in line)))


def _launch(name: str, argv: list[str], done):
    """``python -m rmqstore.cli ARGV``; returns (process, banner) once ``done(line)`` for a line."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    lines = []
    out: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [out.put(ln) for ln in iter(proc.stdout.readline, "")] and None,
                     daemon=True).start()
    while True:
        try:
            line = out.get(timeout=60)
        except queue.Empty:
            proc.kill()
            pytest.fail(f"{name} printed no banner in 60 s; so far: {lines}")
        lines.append(line)
        if done(line):
            return proc, "".join(lines)


def _stop(proc) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == 0, err
    return err


def test_sync_master_and_slave_from_the_command_line(tmp_path):
    master, banner = _start(tmp_path, "master", "--role", "SYNC_MASTER", "--namesrv-listen", "127.0.0.1:0")
    slave = None
    try:
        ha = re.search(r"SYNC_MASTER serving slaves on (127\.0\.0\.1:\d+)", banner)
        namesrv = re.search(r"name server listening on (127\.0\.0\.1:\d+)", banner)
        assert ha and namesrv, banner
        broker_port = int(re.search(r"listening on 127\.0\.0\.1:(\d+),", banner).group(1))
        assert int(ha.group(1).rsplit(":", 1)[1]) != broker_port
        slave, slave_banner = _start(tmp_path, "slave", "--role", "SLAVE", "--ha-master", ha.group(1),
                                     "--no-namesrv")
        assert f"SLAVE replicating from {ha.group(1)}" in slave_banner
        sent = _send(namesrv.group(1), "HaCliTopic", 60)
        assert len(sent) == 60, sent
    finally:
        _stop(master)
        if slave is not None:
            _stop(slave)
    _assert_same_commitlogs(tmp_path)


def _send(namesrv: str, topic: str, count: int) -> list[int]:
    """``count`` sync sends through the name server; the offsets of those answered SEND_OK."""
    producer = rc.Producer(f"PG_{topic}")
    producer.set_namesrv_addr(namesrv)
    producer.set_timeout(5000)
    producer.start()
    sent = []
    try:
        deadline = time.monotonic() + 60
        while len(sent) < count and time.monotonic() < deadline:
            msg = rc.Message(topic)
            msg.set_keys(f"k{len(sent)}")
            msg.set_body(f"replicated {len(sent)} " * 100)  # the C++ client takes bodies as C strings
            result = producer.send_sync(msg)
            if result.status == rc.SendStatus.OK:
                sent.append(result.offset)
            else:  # the slave may still be connecting: SLAVE_NOT_AVAILABLE
                time.sleep(0.2)
    finally:
        producer.shutdown()
    return sent


def _assert_same_commitlogs(tmp_path) -> None:
    assert not (tmp_path / "master" / "abort").exists() and not (tmp_path / "slave" / "abort").exists()
    ours = sorted((tmp_path / "master" / "commitlog").iterdir())
    theirs = sorted((tmp_path / "slave" / "commitlog").iterdir())
    assert [p.name for p in ours] == [p.name for p in theirs] and len(ours) > 1  # rolled over
    for a, b in zip(ours, theirs):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_a_slave_finds_its_master_through_the_name_server(tmp_path):
    """``rmqstore namesrv``, a SYNC_MASTER and a SLAVE given only ``--namesrv``: the master registers
    its HA address, the name server answers the slave's registration with it, the slave connects;
    sends are answered SEND_OK (PUT_OK: the slave acknowledged) and the commitlogs end identical."""
    ns, ns_banner = _launch("namesrv", ["namesrv", "--listen", "127.0.0.1:0"],
                            lambda line: "name server listening" in line)
    master = slave = None
    try:
        namesrv = re.search(r"name server listening on (127\.0\.0\.1:\d+)", ns_banner).group(1)
        master, banner = _start(tmp_path, "master", "--role", "SYNC_MASTER", "--no-namesrv", "--namesrv", namesrv)
        assert "SYNC_MASTER serving slaves on" in banner  # --no-namesrv: the banner ends there
        ha = re.search(r"SYNC_MASTER serving slaves on (127\.0\.0\.1:\d+)", banner).group(1)
        slave, slave_banner = _start(tmp_path, "slave", "--role", "SLAVE", "--no-namesrv", "--namesrv", namesrv)
        assert f"SLAVE replicating from {ha} (the name server's answer, {namesrv})" in slave_banner
        sent = _send(namesrv, "HaLearnedTopic", 60)
        assert len(sent) == 60, sent
    finally:
        for proc in (slave, master):
            if proc is not None:
                _stop(proc)
        _stop(ns)
    _assert_same_commitlogs(tmp_path)
