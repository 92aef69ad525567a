"""Shared helpers for the test suite: the RocketMQ fixtures and a plain commitlog walk.

``manifest(name)`` and ``commitlog_records(name)`` are cached; treat what they return
as read-only.  Test modules import them with ``from conftest import ...`` (pytest puts
this directory on ``sys.path``).  The helpers every kind of test needs live here once,
each with one contract: ``wait_until`` (poll, return the answer, or fail naming what was
awaited), ``run_cli`` (the CLI in-process), ``copy_store``, ``snapshot`` (every path's kind,
size, mtime and digest: "nothing written" checks) and ``files_under``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from hypothesis import settings

from rmqstore.common.errors import CorruptRecordError
from rmqstore.format.layout import BLANK_MAGIC_CODE
from rmqstore.format.record import BlankRecord, decode_record
from rmqstore.format.walk import End, step

# Hypothesis: a CI run must land or fail on the code, not on the draw, so CI (env CI set)
# replays the same examples every time and keeps no example database; a developer's run
# draws fresh examples each time and remembers failures in .hypothesis/ (HYPOTHESIS_PROFILE=dev
# or =ci picks one explicitly).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

# the tests are grouped in folders by what they prove (README, "Tests"); helpers a test imports from
# another (``from test_recovery import check_store``, ``from crash_writer import ...``) are found from any
TESTS = Path(__file__).resolve().parent
for _group in ("unit", "compat", "engine", "broker", "spark", "jupyter", "browser", ""):
    if str(TESTS / _group) not in sys.path:
        sys.path.append(str(TESTS / _group))

FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: every fixture folder; ``crash`` has no ``puts`` (its manifest describes a killed run)
ALL_FIXTURES = ("basic", "boundary", "txn_delay", "flush_async", "flush_sync", "flush_tsp", "crash")
#: fixtures whose manifest lists every put
PUT_FIXTURES = tuple(n for n in ALL_FIXTURES if n != "crash")



def compiled_module(name: str):
    """The compiled fast-path module ``name`` (``rmqstore.common.native.compiled``) for a test comparing
    the two paths.  Where it is not built the test is skipped -- except in CI, where the
    build is part of the install and a missing module is a failure."""
    import pytest

    from rmqstore.common import native

    mod = native.compiled(name)
    if mod is None:
        why = native.status()[name]
        if os.environ.get("CI"):
            pytest.fail(f"rmqstore._native.{name} is not built in CI: {why}")
        pytest.skip(f"rmqstore._native.{name} is not built: {why}")
    return mod


@lru_cache(maxsize=None)
def manifest(name: str) -> dict:
    """The parsed ``tests/fixtures/<name>/manifest.json``."""
    return json.loads((FIXTURES / name / "manifest.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def commitlog_files(name: str, store: str = "store") -> tuple[tuple[int, bytes], ...]:
    """``(start offset, file bytes)`` of every commitlog file of a fixture, in offset order."""
    files = sorted((FIXTURES / name / store / "commitlog").iterdir(), key=lambda p: int(p.name))
    return tuple((int(p.name), p.read_bytes()) for p in files)


def walk_file(data: bytes, base: int = 0):
    """Yield ``(physical offset, record)`` of one commitlog file, walking from position 0.

    :func:`rmqstore.format.walk.step` decides each position; records are decoded with
    :func:`decode_record`.  The walk stops after a blank (END_OF_FILE) record, which is
    yielded too, at 8 zero bytes (the unwritten part of the newest file) or when the bytes
    run out.  Anything else raises CorruptRecordError, so a test walking a fixture fails loudly.
    """
    pos = 0
    while True:
        s = step(data, pos, base)
        if s.end in (End.UNWRITTEN, End.OUT_OF_BYTES):
            return
        if s.end is End.CORRUPT:
            raise CorruptRecordError(s.reason, pos)
        yield base + pos, (BlankRecord(s.size, BLANK_MAGIC_CODE) if s.end is End.BLANK else decode_record(data, pos))
        if s.end is End.BLANK:
            return
        pos += s.size


@lru_cache(maxsize=None)
def commitlog_records(name: str, store: str = "store") -> tuple:
    """Every record ``(physical offset, record)`` of a fixture's commitlog, blanks included."""
    out = []
    for base, data in commitlog_files(name, store):
        out.extend(walk_file(data, base))
    return tuple(out)


REPO = Path(__file__).resolve().parent.parent


class Tty(io.StringIO):
    """A text stream that says it is a terminal (rich renders tables and progress bars to it)."""

    def isatty(self) -> bool:
        return True


def run_cli(argv, stdin: bytes = b"", tty: bool = False):
    """Run ``rmqstore`` in-process: ``(exit code, stdout text, stderr text)``; ``tty``: its output
    streams say they are a terminal."""
    from rmqstore import cli

    out, err = (Tty(), Tty()) if tty else (io.StringIO(), io.StringIO())
    code = cli.main([str(a) for a in argv], stdin=io.BytesIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def wait_until(predicate, timeout: float = 10.0, what="condition", interval: float = 0.005):
    """Poll ``predicate`` until it answers something true, and return that; after ``timeout`` seconds
    (generous: behaviour, not the machine's speed) fail with AssertionError naming ``what`` (a string,
    or a function called then: the state worth seeing) and the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {described}; last value {value!r}")
        time.sleep(interval)


def copy_store(src, tmp, *, drop_index: bool = False) -> Path:
    """A copy of a store -- ``src`` a fixture's name (its ``store``: a name, no separator) or a store
    directory -- at ``<tmp>/store``; ``drop_index``: without its index files."""
    root = Path(tmp) / "store"
    named = isinstance(src, str) and os.sep not in src
    shutil.copytree(FIXTURES / src / "store" if named else src, root)
    if drop_index and (root / "index").exists():
        shutil.rmtree(root / "index")
    return root


def snapshot(root) -> dict:
    """Every path under ``root`` -> (kind, size, mtime_ns, sha256); directories too (with their mtime).

    A symlink is recorded as its target (never followed); a file larger than 64 MiB (a sparse
    file a fuzz test planted) by size, mtime and allocated blocks instead of its digest.
    """
    root = Path(root)
    out = {".": ("dir", None, root.stat().st_mtime_ns, None)}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath) / d
            out[str(p.relative_to(root))] = ("dir", None, p.lstat().st_mtime_ns, None)
        for f in filenames:
            p = Path(dirpath) / f
            st = p.lstat()
            if p.is_symlink():
                out[str(p.relative_to(root))] = ("link", None, st.st_mtime_ns, os.readlink(p))
                continue
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size <= 64 << 20 else st.st_blocks
            out[str(p.relative_to(root))] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def files_under(root) -> list[str]:
    """The files under ``root``, as sorted relative POSIX paths."""
    root = Path(root)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def pipe_dump_load(fixture: str, target: Path, timeout: float = 120) -> None:
    """``python -m rmqstore.cli dump FIXTURE/store --json | python -m rmqstore.cli load TARGET --like FIXTURE``."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    dump = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "dump", str(FIXTURES / fixture / "store"),
                             "--json"], stdout=subprocess.PIPE, cwd=REPO, env=env)
    load = subprocess.run([sys.executable, "-m", "rmqstore.cli", "load", str(target), "--like",
                           str(FIXTURES / fixture)], stdin=dump.stdout, capture_output=True, cwd=REPO,
                          env=env, timeout=timeout)
    dump.stdout.close()
    assert dump.wait(timeout=60) == 0
    assert load.returncode == 0, load.stderr


# --- a newcomer's environment: a virtualenv's Python, not activated ---------------------------------

class Newcomer(NamedTuple):
    """Pythons as a newcomer has them after ``pip install`` into a virtualenv and ``.venv/bin/jupyter lab``
    without activating it: ``python`` is the virtualenv's interpreter (rmqstore installed: this checkout),
    ``bare_python`` the ``python3`` found first on PATH, which lacks rmqstore, and ``env`` the
    environment such a kernel has (PATH with ``bare_python``'s folder first, no PYTHONPATH, no
    PYSPARK_PYTHON, no VIRTUAL_ENV, and not pytest's PYTEST_CURRENT_TEST)."""

    python: str
    bare_python: str
    env: dict


@lru_cache(maxsize=None)
def newcomer() -> Newcomer:
    """Two virtualenvs made once per test session (removed at exit): one that sees this environment's
    packages plus this checkout (a ``.pth`` file: what an editable install writes) and one bare.  Made
    with the standard library's ``venv`` and no download (``--without-pip``)."""
    import atexit
    import venv

    base = tempfile.mkdtemp(prefix="rmq-newcomer-")
    atexit.register(shutil.rmtree, base, True)
    with_rmqstore, bare = os.path.join(base, "venv"), os.path.join(base, "path-python")
    venv.EnvBuilder(system_site_packages=True, symlinks=True).create(with_rmqstore)
    venv.EnvBuilder(symlinks=True).create(bare)
    python = os.path.join(with_rmqstore, "bin", "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "rmqstore-checkout.pth"), "w", encoding="utf-8") as f:
        f.write(str(REPO) + "\n")
    # (PYTEST_CURRENT_TEST too: ipykernel stops forwarding what is written to its file descriptors 1 and 2
    # -- a JVM's, a C library's -- when it sees it, and JupyterLab or `rmqstore site` show that output)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTEST_CURRENT_TEST")}
    env["PATH"] = os.path.join(bare, "bin") + os.pathsep + os.environ.get("PATH", "")
    return Newcomer(python, os.path.join(bare, "bin", "python3"), env)


@lru_cache(maxsize=None)
def newcomer_kernel() -> str:
    """A Jupyter kernel of :func:`newcomer`'s virtualenv (its interpreter by absolute path, as
    ``ipykernel install`` writes it), found through JUPYTER_PATH; its name."""
    name = "rmqstore-newcomer"
    prefix = os.path.dirname(os.path.dirname(newcomer().python))
    spec = os.path.join(prefix, "share", "jupyter", "kernels", name)
    os.makedirs(spec, exist_ok=True)
    with open(os.path.join(spec, "kernel.json"), "w", encoding="utf-8") as f:
        json.dump({"argv": [newcomer().python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "rmqstore (a virtualenv, not activated)", "language": "python"}, f)
    share = os.path.join(prefix, "share", "jupyter")
    os.environ["JUPYTER_PATH"] = share + (os.pathsep + os.environ["JUPYTER_PATH"] if os.environ.get("JUPYTER_PATH")
                                          else "")
    return name


# --- notebooks: each executed once per session, however many test modules check it -------------

NOTEBOOKS_DIR = REPO / "notebooks"


@lru_cache(maxsize=None)
def executed_notebook(name: str):
    """``notebooks/<name>`` executed top to bottom in a real kernel (cached for the session), as
    ``rmqstore site`` runs it (a failing cell is named: notebook, cell number, first line).

    The kernel runs as a newcomer's does (:func:`newcomer`): from a virtualenv that is not
    activated, so the ``python3`` on its PATH lacks rmqstore and nothing reaches it through
    PYTHONPATH -- a notebook that starts ``python3`` from PATH (Spark's workers once did) fails here."""
    import nbformat

    from rmqstore.widgets.static_html import execute_notebook

    path = NOTEBOOKS_DIR / name
    nb = nbformat.read(path, as_version=4)
    # a notebook that removes its scratch store at the end keeps it under this folder instead,
    # so that its test can read what it wrote (the test removes it)
    keep = os.path.join(tempfile.gettempdir(), f"rmq-notebook-work-{os.getpid()}")
    os.makedirs(keep, exist_ok=True)
    # the kernel's temp folder is one of its own: whatever the notebook leaves there is counted
    # (test_notebooks: a notebook cleans up after itself), then removed
    scratch = tempfile.mkdtemp(prefix="rmq-notebook-tmp-")
    try:
        kernel = notebook_kernel()
        execute_notebook(nb, path, timeout=600, kernel_name=kernel,
                         env=dict(newcomer().env, RMQSTORE_NOTEBOOK_WORK=keep, TMPDIR=scratch, TEMP=scratch, TMP=scratch))
        NOTEBOOK_TEMP_LEFTOVERS[name] = sorted(os.listdir(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return nb


#: what each executed notebook left in its kernel's temp folder (``executed_notebook``)
NOTEBOOK_TEMP_LEFTOVERS: dict[str, list[str]] = {}


def notebook_kernel() -> str:
    """The kernel the notebooks run in: in CI the kernel of a virtualenv holding exactly the README's
    main-job install (``.ci/run`` makes it and names it in ``RMQSTORE_NOTEBOOK_KERNEL``), so a notebook
    needing more than the main job installs fails there; elsewhere :func:`newcomer_kernel` (this
    environment's packages and this checkout, in a virtualenv of its own)."""
    return os.environ.get("RMQSTORE_NOTEBOOK_KERNEL") or newcomer_kernel()


def notebook_text(name: str) -> str:
    """Everything the executed notebook printed (streams and ``text/plain`` results), joined."""
    parts = []
    for cell in executed_notebook(name).cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "data" in out and "text/plain" in out["data"]:
                parts.append(out["data"]["text/plain"])
    return "".join(parts)


def notebook_work_folder(text: str) -> str:
    """The folder a notebook kept its stores in, from the ``work folder: <path>`` line it printed."""
    found = re.search(r"^work folder: (\S+)$", text, re.M)
    assert found, "the notebook printed no 'work folder: <path>' line"
    return found.group(1)


# --- Spark: one local session for every Spark test module -----------------------------------------

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """A ``local[2]`` SparkSession with the rmqstore data sources registered (skips without PySpark)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from rmqstore.spark import local_session

    session = local_session("local[2]", "rmqstore-tests", {"spark.sql.shuffle.partitions": 2})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
