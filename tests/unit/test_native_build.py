"""The compiled fast path is optional, says which path runs, and CI runs it.

* In CI the build is part of the install, so the whole suite runs on the compiled path
  (unless RMQSTORE_PURE asks for the pure one, as CI's second run does).
* ``rmqstore --version`` names the active path, and RMQSTORE_PURE=1 turns it off.
* A build on a machine without a C compiler still gives a working package: the wheel
  holds no extension, ``rmqstore --version`` says "pure Python", and a store takes puts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from rmqstore.common import native

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_fast_path():
    if not os.environ.get("CI") or native.forced_pure():
        pytest.skip("outside CI, or RMQSTORE_PURE set: either path may run")
    assert native.active(), native.describe()


def test_setup_builds_every_compiled_module_and_no_other():
    """setup.py's extensions are native.MODULES: a module added to one and not the other would never be
    built (CI's test above fails) or never be chosen."""
    import re

    built = re.findall(r'extension\("(\w+)", "(\w+)\.c"\)', (ROOT / "setup.py").read_text())
    assert sorted(name for name, _ in built) == sorted(native.MODULES)
    for name, source in built:
        assert name == f"_{source}" and (ROOT / "rmqstore" / "_native" / f"{source}.c").is_file()


def _version(env_extra: dict) -> str:
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-m", "rmqstore.cli", "--version"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_version_names_the_active_path():
    pure = _version({native.PURE_ENV: "1"})
    assert pure.startswith("rmqstore ")
    assert "pure Python (RMQSTORE_PURE is set)" in pure
    assert "off (RMQSTORE_PURE)" in pure
    fast = _version({native.PURE_ENV: ""})
    if native.compiled("_cwalk") is not None:
        assert "compiled" in fast.splitlines()[1]
        assert "rmqstore._native._cwalk" in fast and "compiled" in fast


@pytest.mark.parametrize("pure", ["1", ""])
def test_version_lines_up_its_columns(pure):
    """Each module's line starts its description and its state in the same columns as the others, two
    spaces at least after the longest description (``_cwait``'s pushed its "compiled" out of line)."""
    rows = {line.split()[0]: line for line in _version({native.PURE_ENV: pure}).splitlines()
            if line.lstrip().startswith("rmqstore._")}
    assert sorted(rows) == sorted(f"rmqstore._native.{name}" for name in native.MODULES)
    described, state = set(), set()
    for name, what in native.MODULES.items():
        row = rows[f"rmqstore._native.{name}"]
        end = row.index(what) + len(what)
        assert row[end:end + 2] == "  ", row
        described.add(row.index(what))
        state.add(end + len(row[end:]) - len(row[end:].lstrip()))
    assert len(described) == 1 and len(state) == 1, "\n".join(rows.values())


def test_a_store_can_ask_for_the_pure_path_alone():
    for name in native.MODULES:
        assert native.module(name, False) is None
        assert native.module(name, True) is native.module(name)
    with pytest.raises(KeyError, match="no compiled module"):
        native.module("_nope")


@pytest.mark.slow
def test_a_build_without_a_compiler_gives_the_pure_package(tmp_path):
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / rel).is_file():
            target.write_bytes((ROOT / rel).read_bytes())
    wheels = tmp_path / "wheels"
    env = dict(os.environ, CC="false", CXX="false", LDSHARED="false", PIP_DISABLE_PIP_VERSION_CHECK="1")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(wheels), str(src)], capture_output=True, text=True, env=env, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next(wheels.glob("rmqstore-*.whl"))
    assert "-py3-none-any" in wheel.name or "linux" in wheel.name
    import zipfile

    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    script = (
        "import rmqstore, tempfile\n"
        "from rmqstore import MessageStore, StoreConfig, Message; from rmqstore.common import native\n"
        "assert 'site-packages' in rmqstore.__file__, rmqstore.__file__\n"
        "print(native.describe())\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    s = MessageStore(d, StoreConfig(mapped_file_size_commit_log=1 << 16)); s.start()\n"
        "    r = s.put_message(Message('T', b'hello', queue_id=0))\n"
        "    assert r.status.name == 'PUT_OK', r\n"
        "    s.shutdown()\n"
        "print('put ok')\n")
    # -S and an explicit path: the wheel's site-packages first, then this interpreter's for the
    # dependencies -- whose .pth files (this checkout's editable install among them) stay unread
    import sysconfig

    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    path = os.pathsep.join([site, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", native.PURE_ENV)}
    run = subprocess.run([str(py), "-S", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, env=dict(env, PYTHONPATH=path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "pure Python (the compiled speedups are not built)" in run.stdout
    assert "put ok" in run.stdout
