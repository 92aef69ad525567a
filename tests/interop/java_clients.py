"""``AdminbClients.java`` running beside a test: a RocketMQ 4.9.8 producer and push consumer per side, driven from
stdin, their output lines collected as they come.

    clients = JavaClients(rmq_java, {"java": java_namesrv, "ours": our_namesrv}, topic="AdminbClientT")
    clients.wait_for(lambda: clients.seen("STARTED"))
    clients.command("SEND 10")
    clients.wait_for(lambda: len(clients.consumed("java")) == 10)
    clients.close()

The program's protocol (stdin SEND/QUIT, stdout STARTED/SENT/CONSUMED lines) is described atop the .java file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time

from .rmqjava import JAVA_DIR, JavaDist

__all__ = ["JavaClients"]


class JavaClients:
    """``AdminbClients.java TOPIC SIDE=NAMESRV...`` as a child process (its own session, killed if it does not quit)."""

    def __init__(self, rmq_java: JavaDist, namesrvs: dict[str, str], topic: str):
        cmd = [str(rmq_java.root / "bin" / "rmq-java"), str(JAVA_DIR / "AdminbClients.java"), topic,
               *(f"{name}={namesrv}" for name, namesrv in namesrvs.items())]
        self.log = open(rmq_java.workdir / f"clients-{topic}.err", "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=rmq_java.env(), cwd=str(rmq_java.workdir), start_new_session=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def seen(self, prefix: str) -> list[str]:
        with self._lock:
            return [line for line in self.lines if line.startswith(prefix)]

    def consumed(self, side: str) -> list[str]:
        """The bodies the side's consumer consumed, in order (repeats included)."""
        return [line.split()[2] for line in self.seen(f"CONSUMED {side} ")]

    def wait_for(self, what, timeout: float = 180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = what()
            if got:
                return got
            if self.proc.poll() is not None:
                raise AssertionError(f"AdminbClients exited {self.proc.returncode}: {self.lines}")
            time.sleep(0.2)
        raise AssertionError(f"timed out; AdminbClients said {self.lines}")

    def command(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.command("QUIT")
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.log.close()
