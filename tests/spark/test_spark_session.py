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
    # what a bare session prints: its log profile, a level change, Hadoop's native library, (on a
    # machine whose name resolves to loopback) the host name and the address it binds instead, and the
    # JVM's note at every start that Spark loads an incubator module (jdk.incubator.vector)
    for noise in ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader",
                  "resolves to a loopback address", socket.gethostname() + ",", "Using incubator modules"):
        assert noise not in proc.stderr, proc.stderr


WORKER = """
import sys
from rmqstore.spark import local_session
conf = {"spark.pyspark.python": sys.argv[2]} if len(sys.argv) > 2 else None
spark = local_session("local[1]", "worker-python-test", conf)
print("WORKER", spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()[0])
print("COUNT", spark.read.format("rmqstore.commitlog").load(sys.argv[1]).count())
spark.stop()
"""


def _worker_run(store, *argv, env=None):
    from conftest import newcomer

    proc = subprocess.run([newcomer().python, "-c", WORKER, str(store), *argv], capture_output=True, text=True,
                          env=env or newcomer().env, timeout=240, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("WORKER", "COUNT")))


BASIC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "basic", "store")


def test_workers_run_the_sessions_own_python_not_python3_from_path():
    """A session started from a virtualenv that is not activated (``.venv/bin/jupyter lab``): the
    ``python3`` on PATH lacks rmqstore, so workers started from it cannot unpickle the data source
    (``No module named 'rmqstore'``); local_session gives them the driver's own interpreter."""
    from conftest import newcomer

    out = _worker_run(BASIC)
    assert out["WORKER"] == newcomer().python
    assert int(out["COUNT"]) == 600


@pytest.mark.parametrize("how", ["PYSPARK_PYTHON", "spark.pyspark.python"])
def test_a_worker_python_the_user_chose_is_kept(how):
    """PYSPARK_PYTHON, or spark.pyspark.python given to local_session (which a local session started from
    Python ignores otherwise), names the workers' Python: it is used, not the driver's."""
    from conftest import newcomer

    chosen = os.path.join(os.path.dirname(newcomer().python), "python3")  # the same venv, another name
    assert chosen != newcomer().python
    if how == "PYSPARK_PYTHON":
        out = _worker_run(BASIC, env=dict(newcomer().env, PYSPARK_PYTHON=chosen))
    else:
        out = _worker_run(BASIC, chosen)
    assert out["WORKER"] == chosen
    assert int(out["COUNT"]) == 600


def test_the_jvms_stderr_reaches_stderr_but_for_its_start_up_note():
    """The driver JVM's stderr is passed on line by line -- its warnings and errors still show -- without the
    one line every start prints (``WARNING: Using incubator modules: ...``)."""
    from rmqstore.spark.session import forward_jvm_stderr

    read_end, write_end = os.pipe()
    src = os.pipe()
    with os.fdopen(src[1], "wb") as jvm:
        jvm.write(b"WARNING: Using incubator modules: jdk.incubator.vector\nWARN a real warning\nerror: partial")
    with os.fdopen(src[0], "rb") as jvm_stderr:
        forward_jvm_stderr(jvm_stderr, write_end)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as got:
        assert got.read() == b"WARN a real warning\nerror: partial"
