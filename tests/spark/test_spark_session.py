"""rmqstore's local Spark session: on loopback, and quiet on stderr (notebooks and the site show stderr)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

CHILD = """
import os, sys
from rmqstore.spark import local_session
spark = local_session("local[1]", "session-test")
print("COUNT", spark.read.format("rmqstore.commitlog").load(sys.argv[1]).count())
print("DRIVER", spark.sparkContext.getConf().get("spark.driver.host"))
spark.stop()
"""


def test_local_session_binds_loopback_and_prints_no_startup_noise(tmp_path):
    from pathlib import Path

    store = Path(__file__).resolve().parents[1] / "fixtures" / "basic" / "store"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(store)], capture_output=True, text=True,
                          env=env, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("COUNT", "DRIVER")))
    assert int(out["COUNT"]) == 600  # the sources are registered: the basic fixture's 600 messages
    assert socket.gethostbyname(out["DRIVER"]).startswith("127."), out["DRIVER"]  # the driver is on loopback
    # what a bare session prints: its log profile, a level change, Hadoop's native library, and
    # (on a machine whose name resolves to loopback) the host name and the address it binds instead
    for noise in ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader",
                  "resolves to a loopback address", socket.gethostname() + ","):
        assert noise not in proc.stderr, proc.stderr
