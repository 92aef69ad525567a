"""The interop tier's one door to the real Apache RocketMQ 4.9.8: find it, run Java against it.

The tier tests rmqstore against the real thing the way dulwich's compat tests use a real
``git``: the Java client (through the distribution's ``bin/rmq-java``, Java 17's single-file
launcher with the client jars on the classpath), and later ``mqadmin`` and the Java broker.
When the distribution is missing every interop test skips with one line saying where it looked.

Where it looks, first found wins (:func:`find_dist`):

1. ``$RMQ_JAVA_DIST`` (when set, only there: a wrong one skips, saying so);
2. ``<project root>/../shared/rocketmq-4.9.8`` (a developer's checkout or worktree beside ``shared/``);
3. ``../shared/rocketmq-4.9.8`` beside the folder the git ``origin`` remote points to, when that is
   a local path: a CI check clones the checkout somewhere else (``/tmp/ci-check``), and the
   clone's origin is the checkout that does sit beside ``shared/``.

API, small on purpose: :func:`java_dist` (the :class:`JavaDist`, or a pytest skip),
:meth:`JavaDist.run_java` (a program under ``tests/interop/java/`` or any ``.java`` file, with
arguments and a timeout; returns what it printed), :meth:`JavaDist.java_command` (its command line,
for a program the caller talks to while it runs, as bench/broker_drain.py does),
:meth:`JavaDist.java_broker` (a Java broker on free ports with a broker.conf and, optionally, a
plain_acl.yml; stopped in a ``finally``),
:meth:`JavaDist.java_namesrv` (a Java name server on a free port, likewise), :meth:`JavaDist.mqadmin`
(RocketMQ's own admin tool, with arguments and ``-n``) and
:func:`free_port` / :func:`free_broker_port`.  JVM starts are slow on two cores: a Java program
should batch several checks and print one line per check (``CASE name ...``), which
:func:`case_lines` reads back.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["DIST_NAME", "JAVA_DIR", "JavaDist", "JavaRunError", "find_dist", "java_dist", "free_port",
           "free_broker_port", "case_lines"]

DIST_NAME = "rocketmq-4.9.8"
HERE = Path(__file__).resolve().parent
#: the Java programs of the tier, one .java file each (Java 17 runs a source file directly)
JAVA_DIR = HERE / "java"
PROJECT_ROOT = HERE.parent.parent


class JavaRunError(AssertionError):
    """A Java program failed or ran out of time; the message holds what it printed."""


def _origin_path(root: Path) -> Path | None:
    """The local folder the checkout's ``origin`` remote points to, or None (no git, no origin, a URL)."""
    try:
        url = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if url.startswith("file://"):
        url = url[len("file://"):]
    if not url or "://" in url or (":" in url.split("/")[0]):  # ssh host:path and URLs are not local
        return None
    path = Path(url)
    if not path.is_absolute():
        path = (root / path).resolve()
    return path if path.is_dir() else None


def candidates(root: Path = PROJECT_ROOT) -> list[tuple[str, Path]]:
    """Where the distribution may be, in the order looked at: (how it was found, path)."""
    out = []
    if os.environ.get("RMQ_JAVA_DIST"):
        out.append(("$RMQ_JAVA_DIST", Path(os.environ["RMQ_JAVA_DIST"])))
    out.append(("beside the project", root.parent / "shared" / DIST_NAME))
    origin = _origin_path(root)
    if origin is not None:
        out.append((f"beside origin {origin}", origin.parent / "shared" / DIST_NAME))
    return out


def find_dist(root: Path = PROJECT_ROOT) -> tuple[Path | None, str]:
    """(the distribution, "") or (None, why not: every place looked at)."""
    if shutil.which(os.environ.get("JAVA", "java")) is None:
        return None, "no java on PATH (the RocketMQ 4.9.8 distribution needs Java 17)"
    explicit = os.environ.get("RMQ_JAVA_DIST")
    if explicit and not (Path(explicit) / "bin" / "rmq-java").is_file():
        return None, f"RMQ_JAVA_DIST={explicit} is not a RocketMQ 4.9.8 distribution (no bin/rmq-java)"
    looked = []
    for how, path in candidates(root):
        if (path / "bin" / "rmq-java").is_file():
            return path.resolve(), ""
        looked.append(f"{path} ({how})")
    return None, f"RocketMQ 4.9.8 distribution not found: looked at {', '.join(looked)}; set RMQ_JAVA_DIST"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_broker_port() -> int:
    """A listen port P for a Java broker: P, its fast port P-2 and its HA port P+1 are free on every address
    (a Java 4.9.8 broker binds 0.0.0.0 on all three)."""
    for _ in range(200):
        port = free_port("0.0.0.0")
        if port > 1026 and all(_port_free(p) for p in (port - 2, port + 1)):
            return port
    raise RuntimeError("no free port P with P-2 and P+1 free")


def case_lines(output: str, prefix: str = "CASE ") -> dict[str, str]:
    """``{name: rest of line}`` of the lines ``CASE name rest`` a batched Java program printed."""
    out = {}
    for line in output.splitlines():
        if line.startswith(prefix):
            name, _, rest = line[len(prefix):].partition(" ")
            out[name] = rest
    return out


@dataclass
class JavaDist:
    """The RocketMQ 4.9.8 distribution at ``root``; what it writes goes under ``workdir``."""

    root: Path
    workdir: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ, RMQ_JAVA_WORKDIR=str(self.workdir), LC_ALL="C.UTF-8")
        env.update(extra)
        return env

    def java_command(self, program: str | Path, *args: str) -> list[str]:
        """The command line running ``program`` (a name under tests/interop/java/, or a path) with ``args``
        through ``bin/rmq-java`` (which execs the JVM: a Popen of it is the JVM's process); run it with
        :meth:`env` and the work folder as its directory, as :meth:`run_java` does."""
        path = Path(program)
        if not path.is_absolute():
            path = JAVA_DIR / path
        return [str(self.root / "bin" / "rmq-java"), str(path), *map(str, args)]

    def run_java(self, program: str | Path, *args: str, timeout: float = 180, env: dict | None = None) -> str:
        """Run ``program`` (a name under tests/interop/java/, or a path) with ``args`` through ``bin/rmq-java``;
        its stdout. A non-zero exit or the timeout raises :class:`JavaRunError` with everything it printed."""
        cmd = self.java_command(program, *args)
        path = Path(cmd[1])
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or self.env(),
                                  cwd=str(self.workdir))
        except subprocess.TimeoutExpired as exc:
            raise JavaRunError(f"{path.name} ran out of its {timeout} s\n--- stdout\n{_text(exc.stdout)}"
                               f"\n--- stderr\n{_text(exc.stderr)}") from None
        if done.returncode != 0:
            raise JavaRunError(f"{path.name} exited {done.returncode}\n--- stdout\n{done.stdout}"
                               f"\n--- stderr\n{done.stderr}")
        return done.stdout

    @contextlib.contextmanager
    def java_broker(self, folder: Path, conf: dict[str, str], plain_acl: str | None = None,
                    start_timeout: float = 120, on_boot: Callable[[subprocess.Popen], None] | None = None):
        """A Java 4.9.8 broker (``bin/mqbroker``) on a free port, its store and home under ``folder``;
        yields ``"127.0.0.1:PORT"``. ``conf`` adds to or overrides broker.conf keys; ``plain_acl`` is the
        text of its ``conf/plain_acl.yml`` (the broker reads it from its home, ``rocketmq.home.dir``).
        ``on_boot`` is called with the broker's process (the JVM: ``bin/mqbroker`` execs it) once it booted
        (bench/broker.py reads its CPU time and RSS).  Killed, with its process group, when the block ends."""
        home = folder / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        for name in ("logback_broker.xml",):
            shutil.copy(self.root / "conf" / name, home / "conf" / name)
        if plain_acl is not None:
            (home / "conf" / "plain_acl.yml").write_text(plain_acl, encoding="utf-8")
        port = free_broker_port()
        keys = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-java", "brokerId": "0",
                "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "brokerIP1": "127.0.0.1",
                "listenPort": str(port), "storePathRootDir": str(folder / "store")}
        # (4.9.8's file sizes are mappedFileSizeCommitLog / mappedFileSizeConsumeQueue; the defaults, 1 GiB and
        # 300,000 units, are kept: the misspelt mapedFile* keys these tests once passed were never read)
        keys.update(conf)
        conf_path = folder / "broker.conf"
        conf_path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()), encoding="utf-8")
        log_path = folder / "broker.out"
        env = self.env(RMQ_BROKER_HEAP=os.environ.get("RMQ_BROKER_HEAP", "-Xms256m -Xmx256m"),
                       JAVA_OPT_EXT=f"-Drocketmq.home.dir={home}")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(self.root / "bin" / "mqbroker"), "-c", str(conf_path)], stdout=log,
                                    stderr=subprocess.STDOUT, env=env, cwd=str(folder), process_group=0)
        try:
            _wait_for_boot(proc, log_path, start_timeout)
            if on_boot is not None:
                on_boot(proc)
            yield f"127.0.0.1:{keys['listenPort']}"
        finally:
            _kill_group(proc)

    @contextlib.contextmanager
    def java_namesrv(self, folder: Path, conf: dict[str, str] | None = None, start_timeout: float = 120):
        """A Java 4.9.8 name server (``bin/mqnamesrv``) on a free port, its home and logs under ``folder``;
        yields ``"127.0.0.1:PORT"``. ``conf`` adds NamesrvConfig / NettyServerConfig keys. Killed, with its
        process group, when the block ends."""
        folder.mkdir(parents=True, exist_ok=True)
        home = folder / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        shutil.copy(self.root / "conf" / "logback_namesrv.xml", home / "conf" / "logback_namesrv.xml")
        port = free_port("0.0.0.0")
        keys = {"listenPort": str(port), "kvConfigPath": str(folder / "kvConfig.json")}
        keys.update(conf or {})
        conf_path = folder / "namesrv.conf"
        conf_path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()), encoding="utf-8")
        log_path = folder / "namesrv.out"
        env = self.env(RMQ_NAMESRV_HEAP=os.environ.get("RMQ_NAMESRV_HEAP", "-Xms128m -Xmx128m"),
                       JAVA_OPT_EXT=f"-Drocketmq.home.dir={home}")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(self.root / "bin" / "mqnamesrv"), "-c", str(conf_path)], stdout=log,
                                    stderr=subprocess.STDOUT, env=env, cwd=str(folder), process_group=0)
        try:
            _wait_for_boot(proc, log_path, start_timeout, what="name server")
            yield f"127.0.0.1:{keys['listenPort']}"
        finally:
            _kill_group(proc)

    def mqadmin(self, *args: str, namesrv: str | None = None, timeout: float = 120,
                check: bool = True) -> subprocess.CompletedProcess:
        """Run RocketMQ's own ``mqadmin`` with ``args`` (``-n namesrv`` appended when given); the finished
        process (stdout, stderr, returncode as text). With ``check``, a non-zero exit or the timeout raises
        :class:`JavaRunError` with what it printed (mqadmin prints most failures and exits 0: read stdout)."""
        cmd = [str(self.root / "bin" / "mqadmin"), *map(str, args)]
        if namesrv is not None:
            cmd += ["-n", namesrv]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env(),
                                  cwd=str(self.workdir))
        except subprocess.TimeoutExpired as exc:
            raise JavaRunError(f"mqadmin {' '.join(args)} ran out of its {timeout} s\n--- stdout\n"
                               f"{_text(exc.stdout)}\n--- stderr\n{_text(exc.stderr)}") from None
        if check and done.returncode != 0:
            raise JavaRunError(f"mqadmin {' '.join(args)} exited {done.returncode}\n--- stdout\n{done.stdout}"
                               f"\n--- stderr\n{done.stderr}")
        return done

    def __str__(self) -> str:
        return str(self.root)


def _text(data) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")


def _wait_for_boot(proc: subprocess.Popen, log_path: Path, timeout: float, what: str = "broker") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(encoding="utf-8", errors="replace")
        if "boot success" in text:
            return
        if proc.poll() is not None:
            raise JavaRunError(f"the Java {what} exited {proc.returncode} before it booted:\n{text}")
        time.sleep(0.3)
    raise JavaRunError(f"the Java {what} did not boot in {timeout} s:\n"
                       f"{log_path.read_text(encoding='utf-8', errors='replace')}")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's own process group (the JVM leads it: ``bin/mq*`` exec it), SIGKILL if it has
    not gone in 30 s.  A process group, not a session of its own (``start_new_session``): with the kernel's
    autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) a new session is a CPU group of its
    own, given half the CPU against the caller's, so a Java server beside a busy client ran ~20% slower
    than one started from a shell (bench/README, issue 23)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def java_dist(workdir: Path) -> JavaDist:
    """The distribution, writing under ``workdir``; skips the calling test (one line, where it looked) when
    it is not there."""
    import pytest

    root, why = find_dist()
    if root is None:
        pytest.skip(why)
    workdir.mkdir(parents=True, exist_ok=True)
    return JavaDist(root, workdir)
