"""README's word on the disk a fresh broker takes, checked against a broker run as it says.

A fresh ``rmqstore broker STORE`` makes its first commitlog file and the next one ahead, at RocketMQ's
default ``mappedFileSizeCommitLog`` (1 GiB): 2 GiB reserved before the first message.  A newcomer met
that without warning; README says it, and gives the broker.conf that makes the files small -- run here
as written.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from rmqstore.broker.config_defaults import ROCKETMQ_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _disk_paragraph() -> str:
    m = re.search(r"^\*\*Disk\.\*\*.*?(?=^\*\*|^## )", README, re.M | re.S)
    assert m, "README's broker section has no **Disk.** paragraph"
    return m.group(0)


def _small_conf() -> str:
    m = re.search(r"```properties\n(.*?)```", _disk_paragraph(), re.S)
    assert m, "the **Disk.** paragraph gives no broker.conf (a ```properties block)"
    return m.group(1)


def _commitlog_after_start(store: Path, *argv) -> list[tuple[str, int]]:
    """Start ``rmqstore broker STORE *argv`` on ephemeral ports, wait for its two commitlog files (the
    first and the one made ahead); their names and sizes while it runs (then it is stopped with SIGINT)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "broker", str(store), "--listen", "127.0.0.1:0",
                             "--no-namesrv", *map(str, argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    folder = store / "commitlog"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            names = sorted(os.listdir(folder)) if folder.exists() else []
            if len(names) >= 2 and not any(n.endswith(".creating") for n in names):
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        files = [(n, (folder / n).stat().st_size) for n in sorted(os.listdir(folder))]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return files


def test_readme_says_a_fresh_broker_reserves_two_1_gib_commitlog_files(tmp_path):
    text = " ".join(_disk_paragraph().split())
    default = int(ROCKETMQ_DEFAULTS["mappedFileSizeCommitLog"])
    assert default == 1 << 30
    assert "two commitlog files of 1 GiB" in text and "`mappedFileSizeCommitLog`" in text, text
    files = _commitlog_after_start(tmp_path / "store")
    assert files == [(f"{0:020d}", default), (f"{default:020d}", default)]


def test_the_readmes_small_broker_conf_makes_small_files(tmp_path):
    conf = tmp_path / "small.conf"
    conf.write_text(_small_conf(), encoding="utf-8")
    keys = dict(line.split("=", 1) for line in _small_conf().splitlines() if line and not line.startswith("#"))
    assert set(keys) <= set(ROCKETMQ_DEFAULTS), "keys RocketMQ's broker.conf knows"
    size = int(keys["mappedFileSizeCommitLog"])
    assert size <= 1 << 20
    files = _commitlog_after_start(tmp_path / "store", "--config", conf)
    assert files == [(f"{0:020d}", size), (f"{size:020d}", size)]
    assert "rmqstore broker STORE --config small.conf" in " ".join(_disk_paragraph().split())
