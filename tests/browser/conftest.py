"""Browser tier: Debian's Chromium driven by Playwright, a throw-away JupyterLab, a static server.

Fixtures
--------
``browser``        session-scoped Playwright Chromium (``/usr/bin/chromium``, never a downloaded build)
``page``           a fresh context + page per test; a screenshot of it is saved at teardown
``snap``           ``snap("name")`` saves a named screenshot of the test's page mid-test
``page_errors``    uncaught JavaScript errors of the test's page (a list, filled as they happen)
``external_requests``  requests the page tried to send off the loopback interface (blocked)
``static_server``  ``static_server(directory) -> "http://127.0.0.1:PORT"``; stopped at teardown
``jupyterlab``     session-scoped ``jupyter lab`` on loopback with its own config/data/runtime dirs
``artifacts_dir``  where screenshots go: ``$RMQ_ARTIFACTS`` or a pytest temp folder

Locally a missing Chromium, Playwright or JupyterLab skips the tier with the reason; with
``CI=true`` it fails instead, so CI can never go green without having run it.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

CHROMIUM = os.environ.get("RMQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
VIEWPORT = {"width": 1280, "height": 900}
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")

_artifacts: list[Path] = []


def unavailable(reason: str):
    """Skip locally; fail under CI=true (the browser tier must really run in CI)."""
    if IN_CI:
        pytest.fail(f"{reason} -- CI=true, so this is a failure, not a skip (.ci/run installs it)",
                    pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:150]


# --------------------------------------------------------------------------- artifacts

@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory) -> Path:
    env = os.environ.get("RMQ_ARTIFACTS")
    path = Path(env).resolve() if env else tmp_path_factory.mktemp("browser-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def pytest_terminal_summary(terminalreporter):
    if _artifacts:
        folder = _artifacts[0].parent
        terminalreporter.write_line(f"browser artifacts: {len(_artifacts)} screenshot(s) in {folder}")


# --------------------------------------------------------------------------- browser

@pytest.fixture(scope="session")
def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the Python package 'playwright' is not installed (pip install -e '.[dev]')")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(_playwright):
    """Debian's Chromium.  Playwright gives every launch a fresh temporary user-data dir."""
    try:
        b = _playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                        timeout=60_000)
    except Exception as exc:  # noqa: BLE001 - report why the browser would not start
        unavailable(f"Chromium at {CHROMIUM} did not start: {exc}")
    yield b
    b.close()


@pytest.fixture
def page_errors() -> list[str]:
    return []


@pytest.fixture
def external_requests() -> list[str]:
    return []


@pytest.fixture
def page(browser, request, artifacts_dir, page_errors, external_requests):
    """A page in a fresh context.  Requests off loopback are blocked and recorded: the tier
    runs offline, and a view that needs a CDN must show up as a failure, not as a hang."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(20_000)

    def guard(route):
        host = urlsplit(route.request.url).hostname or ""
        scheme = urlsplit(route.request.url).scheme
        if scheme in ("http", "https", "ws", "wss") and host not in LOOPBACK:
            external_requests.append(route.request.url)
            route.abort()
        else:
            route.fallback()

    context.route("**/*", guard)
    pg = context.new_page()
    pg.on("pageerror", lambda exc: page_errors.append(str(exc)))
    yield pg
    shot = artifacts_dir / f"{_safe_name(request.node.nodeid.split('::', 1)[-1])}.png"
    try:
        pg.screenshot(path=str(shot), full_page=True, timeout=15_000)
        _artifacts.append(shot)
    except Exception as exc:  # noqa: BLE001 - a failed screenshot must not hide the test's result
        print(f"screenshot failed: {exc}")
    context.close()


@pytest.fixture
def snap(page, request, artifacts_dir):
    """``snap("after-play")`` saves ``<test>--after-play.png`` next to the teardown screenshot."""
    base = _safe_name(request.node.nodeid.split("::", 1)[-1])

    def save(name: str, target=None) -> Path:
        """The whole page, or ``target`` (a locator) alone; ``target="viewport"`` takes what is on
        screen without scrolling (scrolling moves content under the mouse and ends a hover)."""
        path = artifacts_dir / f"{base}--{_safe_name(name)}.png"
        if target is None:
            page.screenshot(path=str(path), full_page=True)
        elif target == "viewport":
            page.screenshot(path=str(path))
        else:
            target.screenshot(path=str(path))
        _artifacts.append(path)
        return path

    return save


# --------------------------------------------------------------------------- static server

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


@pytest.fixture(scope="session")
def static_server():
    """``static_server(directory)`` serves *directory* on 127.0.0.1 (random port, own thread)."""
    servers = []

    def serve(directory) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, name="static-server", daemon=True)
        thread.start()
        servers.append((httpd, thread))
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield serve
    for httpd, thread in servers:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# --------------------------------------------------------------------------- JupyterLab

@dataclass
class Lab:
    base_url: str
    token: str
    root_dir: Path
    log_path: Path

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{sep}token={self.token}"

    def notebook_url(self, name: str, workspace: str | None = None) -> str:
        """The Lab UI on ``name``; a workspace of its own keeps other tests' tabs out of it."""
        prefix = f"lab/workspaces/{workspace}/" if workspace else "lab/"
        return self.url(f"{prefix}tree/{name}")

    def api(self, path: str):
        req = urllib.request.Request(f"{self.base_url}/api/{path.lstrip('/')}",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read().decode())

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


#: JupyterLab user settings for a quiet, deterministic UI: every cell in the DOM (no
#: virtual scrolling), no news or update pop-ups.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False, "fetchNews": "false", "doNotDisturbMode": True},
}


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory):
    """A JupyterLab on 127.0.0.1 with a random port and token, serving a fresh temp folder.

    Tests copy their notebooks into ``lab.root_dir``.  Jupyter's config, data, runtime and
    IPython dirs are all under the same temp tree, so nothing of the user's is read or written.
    """
    try:
        import jupyterlab  # noqa: F401
        import ipykernel  # noqa: F401
    except ImportError as exc:
        unavailable(f"JupyterLab is not installed ({exc}; pip install -e '.[dev]')")
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "root"
    dirs = {name: base / name for name in ("config", "data", "runtime", "ipython", "workspaces")}
    for d in (root, *dirs.values()):
        d.mkdir(parents=True, exist_ok=True)
    settings_dir = dirs["config"] / "lab" / "user-settings"
    for rel, value in LAB_SETTINGS.items():
        path = settings_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))

    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), IPYTHONDIR=str(dirs["ipython"]),
               JUPYTERLAB_SETTINGS_DIR=str(settings_dir), JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
               RMQ_REPO=str(REPO), PYTHONUNBUFFERED="1")
    env.pop("JUPYTER_TOKEN", None)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--ServerApp.open_browser=False", "--ServerApp.terminals_enabled=False",
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LanguageServerManager.autodetect=False",
           "--KernelSpecManager.ensure_native_kernel=True"]
    log_path = base / "jupyterlab.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token, root, log_path)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{lab.log_tail()}", pytrace=False)
            try:
                lab.api("status")
                break
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer /api/status in 90 s:\n{lab.log_tail()}",
                                pytrace=False)
                time.sleep(0.25)
        yield lab
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server (it shuts its kernels down), then SIGKILL its process group if needed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group we started: leftover kernels, if any
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
