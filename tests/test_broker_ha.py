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

REPO = Path(__file__).resolve().parent.parent
CONF = ("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=100\nmaxIndexNum=400\n"
        "flushDiskType=SYNC_FLUSH\n")


def _start(tmp_path, name: str, *args: str):
    conf = tmp_path / f"{name}.conf"
    conf.write_text(f"brokerName=broker-ha\nstorePathRootDir={tmp_path / name}\n" + CONF)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "broker", "--config", str(conf),
                             "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env=env)
    lines = []
    out: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [out.put(ln) for ln in iter(proc.stdout.readline, "")] and None,
                     daemon=True).start()
    while True:  # banner: the broker, its role, the name server (none with --no-namesrv)
        try:
            line = out.get(timeout=60)
        except queue.Empty:
            proc.kill()
            pytest.fail(f"{name} printed no banner in 60 s; so far: {lines}")
        lines.append(line)
        if "name server listening" in line or ("replicating from" in line and "--no-namesrv" in args):
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
        producer = rc.Producer("PG_ha")
        producer.set_namesrv_addr(namesrv.group(1))
        producer.set_timeout(5000)
        producer.start()
        try:
            sent = []
            deadline = time.monotonic() + 60
            while len(sent) < 60 and time.monotonic() < deadline:
                msg = rc.Message("HaCliTopic")
                msg.set_keys(f"k{len(sent)}")
                msg.set_body(f"replicated {len(sent)} " * 100)  # the C++ client takes bodies as C strings
                result = producer.send_sync(msg)
                if result.status == rc.SendStatus.OK:
                    sent.append(result.offset)
                else:  # the slave may still be connecting: SLAVE_NOT_AVAILABLE
                    time.sleep(0.2)
        finally:
            producer.shutdown()
        assert len(sent) == 60, sent
    finally:
        _stop(master)
        if slave is not None:
            _stop(slave)
    assert not (tmp_path / "master" / "abort").exists() and not (tmp_path / "slave" / "abort").exists()
    ours = sorted((tmp_path / "master" / "commitlog").iterdir())
    theirs = sorted((tmp_path / "slave" / "commitlog").iterdir())
    assert [p.name for p in ours] == [p.name for p in theirs] and len(ours) > 1  # rolled over
    for a, b in zip(ours, theirs):
        assert a.read_bytes() == b.read_bytes(), a.name
