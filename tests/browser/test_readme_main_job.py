"""The README's main job, tried as a new user would: its first command opens the tour, which runs.

The README's FIRST fenced bash block is the main-job command::

    python3 -m pip install -e '.[jupyter]' && jupyter lab --allow-root --ServerApp.root_dir=. notebooks/01_tour.ipynb

* The install part is checked for what it asks (``pip install -e`` of the ``jupyter`` extra)
  and that pyproject defines that extra with what the tour imports; it is not run here (no
  ``pip install`` in the suite, which already runs on an installed package).  That pip
  really installs the project on a fresh machine is checked by ``.ci/run``'s fresh install
  (``pip install -e '.[jupyter,dev]'``, the README's test command: the main job's extra is
  installed from scratch there too).
* The ``jupyter lab ...`` part is run exactly as written -- same program, same arguments, from
  the root of a checkout -- plus only test isolation: loopback ip, a free port, a token, no
  browser, temp config/data/runtime dirs, autosave off.  The "checkout" is a temp folder with
  the tour copied to ``notebooks/``, the README copied and ``data/`` linked to the repository's
  (what the tour reads), so JupyterLab's checkpoints and saves can never land in the shared
  working tree.  JupyterLab must be rooted at the checkout, so a newcomer can browse ``data/``
  and the README from its file browser, not only ``notebooks/``.
* The page Chromium opens is the one the server writes for the browser it would have
  launched (``jpserver-file-to-run-<pid>-open.html`` in the runtime dir): so the test sees the
  URL a user's browser gets, and checks it shows the tour.  Then Run > Run All Cells from
  the menu, wait for an idle kernel, and check: no traceback, the tour's printed lines
  (message and blank counts from our own scan of the sample store, the first segment line)
  and its chart.
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.error
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .browser_helpers import open_notebook
from .conftest import LAB_SETTINGS, REPO, Lab, _stop, free_port, unavailable

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

TOUR = "notebooks/01_tour.ipynb"
#: JupyterLab must not write the notebook back while the test runs it
NO_AUTOSAVE = {"@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False}}


def main_job_command() -> list[list[str]]:
    """The README's first fenced bash block, comments dropped, split at ``&&``."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```bash\n(.*?)^```", readme, re.M | re.S)
    assert block, "README.md has no fenced bash block"
    lines = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(lines) == 1, f"the main-job block should be one command line, got {lines}"
    parts, current = [], []
    for token in shlex.split(lines[0]):
        if token == "&&":
            parts.append(current)
            current = []
        else:
            current.append(token)
    return parts + [current]


def tour_imports() -> set[str]:
    """Top-level modules the tour's code cells import (not the standard library, not rmqstore)."""
    import ast

    nb = json.loads((REPO / TOUR).read_text(encoding="utf-8"))
    names = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "rmqstore"}


def requirement_names(reqs) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("_", "-") for r in reqs}


def test_install_part_is_the_jupyter_extra():
    install, _ = main_job_command()
    assert install == ["python3", "-m", "pip", "install", "-e", ".[jupyter]"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = requirement_names(project["optional-dependencies"]["jupyter"])
    assert {"jupyterlab", "ipywidgets", "anywidget"} <= extra, extra
    provided = extra | requirement_names(project["dependencies"])
    assert tour_imports() <= provided, f"the tour imports {tour_imports() - provided} that the install lacks"


def write_settings(config_dir: Path) -> Path:
    settings_dir = config_dir / "lab" / "user-settings"
    for rel, value in {**LAB_SETTINGS, **NO_AUTOSAVE}.items():
        path = settings_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    return settings_dir


def wait_for_open_file(proc, runtime: Path, lab: Lab, timeout: float = 90) -> str:
    """The URL the server hands the browser for the file it was given (its redirect page)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{lab.log_tail()}", pytrace=False)
        try:
            lab.api("status")
            opened = list(runtime.glob("jpserver-file-to-run-*-open.html"))
            if opened:
                m = re.search(r'url=([^"]+)"', opened[0].read_text(encoding="utf-8"))
                return html.unescape(m.group(1))
        except (urllib.error.URLError, ConnectionError, OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"jupyter lab wrote no browser page for the tour in {timeout:.0f} s:\n{lab.log_tail()}",
                        pytrace=False)
        time.sleep(0.25)


@pytest.fixture
def main_job_lab(tmp_path):
    """The README's ``jupyter lab ...`` part running in a checkout-shaped temp folder."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed")
    _, run = main_job_command()
    assert run[0] == "jupyter" and run[1] == "lab" and run[-1] == TOUR, run
    program = shutil.which("jupyter", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if program is None:
        unavailable("the `jupyter` command is not on PATH")

    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    shutil.copy(REPO / TOUR, checkout / TOUR)
    shutil.copy(REPO / "README.md", checkout / "README.md")
    (checkout / "data").symlink_to(REPO / "data", target_is_directory=True)
    dirs = {name: tmp_path / name for name in ("config", "data", "runtime", "ipython", "workspaces")}
    for d in dirs.values():
        d.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), IPYTHONDIR=str(dirs["ipython"]),
               JUPYTERLAB_SETTINGS_DIR=str(write_settings(dirs["config"])),
               JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    env.pop("JUPYTER_TOKEN", None)
    isolation = ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                 "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
    log_path = tmp_path / "jupyterlab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([program, *run[1:], *isolation], cwd=checkout, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token, checkout, log_path)
    try:
        yield lab, wait_for_open_file(proc, dirs["runtime"], lab), checkout
    finally:
        _stop(proc)


class _OpenURL:
    """Stands in for a ``Lab`` in ``open_notebook``: the notebook's URL is the one the server
    wrote for the browser, not one the test makes up."""

    def __init__(self, url: str):
        self._url = url

    def notebook_url(self, name: str, workspace: str | None = None) -> str:
        return self._url


def test_main_job_opens_the_tour_and_it_runs(page, main_job_lab, snap, page_errors, external_requests):
    lab, url, checkout = main_job_lab
    parts = urlsplit(url)
    assert (parts.hostname, parts.path) == ("127.0.0.1", "/lab/tree/notebooks/01_tour.ipynb"), url
    assert f"token={lab.token}" in parts.query
    # rooted at the checkout: the file browser offers data/ and the README beside notebooks/
    assert {"README.md", "data", "notebooks"} <= {e["name"] for e in lab.api("contents")["content"]}

    nb = open_notebook(page, _OpenURL(url), "01_tour.ipynb", timeout_ms=90_000)
    tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").all_text_contents()
    assert [t for t in tabs if ".ipynb" in t] == ["01_tour.ipynb"], tabs
    nb.run_all_cells(timeout_ms=150_000)
    inspector = nb.wait_for_view("store-inspector", timeout_ms=60_000)
    # the first view in the notebook, and it shows the sample store's segments
    assert nb.outputs().locator("[data-testid]").first.get_attribute("data-testid") == "store-inspector"

    from rmqstore import MessageRecord
    from rmqstore.read.scan import CommitLogScan, find_commitlog_dir, list_segments

    store = REPO / "data" / "sample_store"
    records = list(CommitLogScan(store))
    n_msgs = sum(isinstance(r, MessageRecord) for _, r in records)
    segments = list_segments(find_commitlog_dir(store))
    first, width = segments[0], len(f"{segments[-1].offset:,}")  # the notebook's column: the widest offset
    text = "\n".join(nb.output_texts())
    assert f"{n_msgs} messages, {len(records) - n_msgs} blank records" in text, text[:1000]
    assert f"{first.name}  starts at offset {first.offset:>{width},}  size {first.size:,} bytes" in text
    assert f"store: {(checkout / 'data' / 'sample_store').resolve()}" in text
    bars = inspector.get_by_test_id("segment")
    n_segments = len(list_segments(find_commitlog_dir(store)))
    page.wait_for_function("([el, n]) => el.querySelectorAll(\"[data-testid='segment']\").length === n",
                           arg=[inspector.element_handle(), n_segments], timeout=30_000)
    assert bars.count() == n_segments
    chart = nb.outputs().locator("img").first
    chart.wait_for()
    assert chart.evaluate("img => img.complete && img.naturalWidth > 0"), "the tour's chart is shown"
    assert not nb.errors()
    snap("tour-ran", "viewport")
    assert not external_requests, external_requests
    assert not page_errors, page_errors
    # nothing was saved over the copy (autosave off) -- and the shared tree was never served
    assert json.loads((checkout / TOUR).read_text(encoding="utf-8")) == json.loads(
        (REPO / TOUR).read_text(encoding="utf-8"))
