"""A local Spark session that talks on loopback and keeps its start-up noise to itself.

Started bare, a local Spark session looks up the machine's host name and, when it resolves
to a loopback address, binds to another interface instead and says so on stderr -- with the
host name and address -- followed by Spark's announcement of its default log profile and
Hadoop's warning that it has no native library.  In a notebook (and so on every page of
the documentation site) those lines are stderr output in red, they name the machine the
page was built on, and nothing in them is about the store.

:func:`local_session` is the one place rmqstore starts a Spark session of its own (the
``rmqstore spark`` commands, the notebooks, the test suite):

* ``SPARK_LOCAL_IP`` is set to ``127.0.0.1`` unless the environment already chose an
  address: like every server rmqstore starts, the driver listens on loopback unless told
  otherwise;
* the driver JVM gets ``log4j2-quiet.properties`` (beside this module): warnings still
  show, the start-up announcements do not;
* the UI and the console progress bar are off (a notebook has its own progress display);
* the driver JVM's stderr is passed on line by line (:func:`forward_jvm_stderr`) but for the note
  the JVM prints at every start because Spark loads an incubator module (``WARNING: Using
  incubator modules: jdk.incubator.vector``): no flag silences it, and in a notebook -- and on
  the site -- it stood in red above every Spark cell;
* the workers run this very interpreter (``sys.executable``) unless the user chose another
  (``PYSPARK_PYTHON``, or ``spark.pyspark.python`` in ``conf``).  Spark starts its Python
  workers as ``python3`` from PATH by default; JupyterLab started from a virtualenv that is not
  activated (``.venv/bin/jupyter lab``) runs its kernels on the virtualenv's Python while PATH's
  ``python3`` is another one, without rmqstore -- and the workers fail to unpickle the data
  source (``No module named 'rmqstore'``).  A local session started from Python ignores
  ``spark.pyspark.python``, so a choice given there is made effective the same way:
  :func:`worker_python` decides, ``PYSPARK_PYTHON`` carries it (PySpark reads it when the
  context starts).

Under ``spark-submit`` the cluster's own settings win: this function is not used there
(see :func:`rmqstore.spark.cli.spark_session`).
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["local_session", "worker_python", "forward_jvm_stderr", "QUIET_LOG4J2", "JVM_START_NOTES"]

#: the driver's Log4j 2 configuration (a file shipped with the package)
QUIET_LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-quiet.properties")


def worker_python(conf: dict | None = None) -> str:
    """The Python Spark's workers run: ``spark.pyspark.python`` in ``conf``, else ``PYSPARK_PYTHON``
    (Spark's own order), else this interpreter."""
    return str((conf or {}).get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable)


#: lines the JVM prints at every start that say nothing about this run (left out of its stderr)
JVM_START_NOTES = (b"WARNING: Using incubator modules:",)


def forward_jvm_stderr(stream, fd: int = 2) -> None:
    """Copy the JVM's stderr ``stream`` (binary) to file descriptor ``fd`` line by line, leaving out
    :data:`JVM_START_NOTES`; returns at the end of the stream (the JVM gone)."""
    for line in iter(stream.readline, b""):
        if not line.startswith(JVM_START_NOTES):
            os.write(fd, line)


def _start_driver_jvm(options: dict) -> None:
    """Start the driver JVM as ``SparkSession.builder.getOrCreate()`` would with ``options``, but with its
    stderr through :func:`forward_jvm_stderr`.  Nothing when a JVM already runs for this process (a
    session made before, stopped or not, or a ``PYSPARK_GATEWAY_PORT`` to connect to)."""
    import subprocess

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=forward_jvm_stderr, args=(gateway.proc.stderr,), name="rmqstore-spark-jvm-stderr",
                     daemon=True).start()
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def local_session(master: str = "local[*]", app_name: str = "rmqstore", conf: dict | None = None):
    """A new (or the active) local ``SparkSession`` on loopback, quiet, its workers on this Python (or
    the one the user chose: :func:`worker_python`), rmqstore's sources registered.

    ``conf`` holds extra Spark settings (``{"spark.sql.shuffle.partitions": 2}``).  A
    session already running in this process is returned as it is (one SparkContext per
    process), with the sources registered.
    """
    from pyspark.sql import SparkSession

    from . import register

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    python = worker_python(conf)
    os.environ["PYSPARK_PYTHON"] = python  # (what PySpark reads when the context starts)
    options = {"spark.master": master, "spark.app.name": app_name, "spark.pyspark.python": python,
               "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
               "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J2}",
               **{key: str(value) for key, value in (conf or {}).items()}}
    _start_driver_jvm(options)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    register(session)
    return session
