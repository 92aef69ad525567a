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
* the UI and the console progress bar are off (a notebook has its own progress display).

Under ``spark-submit`` the cluster's own settings win: this function is not used there
(see :func:`rmqstore.spark.cli.spark_session`).
"""

from __future__ import annotations

import os

__all__ = ["local_session", "QUIET_LOG4J2"]

#: the driver's Log4j 2 configuration (a file shipped with the package)
QUIET_LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-quiet.properties")


def local_session(master: str = "local[*]", app_name: str = "rmqstore", conf: dict | None = None):
    """A new (or the active) local ``SparkSession`` on loopback, quiet, rmqstore's sources registered.

    ``conf`` holds extra Spark settings (``{"spark.sql.shuffle.partitions": 2}``).  A
    session already running in this process is returned as it is (one SparkContext per
    process), with the sources registered.
    """
    from pyspark.sql import SparkSession

    from . import register

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J2}"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    session = builder.getOrCreate()
    register(session)
    return session
