"""Every notebook can run after the README's main-job install, and nothing more.

A newcomer runs the README's first command (``pip install -e '.[<extras>]' && jupyter lab
...``) and opens the notebooks.  A notebook that imports a package the main job's extras
do not bring fails for them after work has been done (notebook 10 once wrote a 26 MB store
and then died on ``import pyspark``).  The suite itself installs more (the ``dev`` extra),
so executing the notebooks cannot catch this; this test reads what each notebook imports,
maps every third-party module to the distribution that provides it in this environment,
and checks that distribution is in the dependency closure of the extras the README's
main-job command names.  ``rmqstore.spark`` imports PySpark lazily, so a notebook that
uses it needs everything the ``spark`` extra lists.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main_job_extras() -> list[str]:
    """The extras of the first ``pip install -e '.[...]'`` in the README (the main job)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"pip install -e '\.\[([a-z0-9_,-]+)\]'", text)
    assert m, "the README's main-job command installs the package with extras"
    return m.group(1).split(",")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _closure(requirements: list[str]) -> set[str]:
    """Canonical names of the distributions these requirements pull in (installed metadata)."""
    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = _canon(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        for sub in dist.requires or []:
            sub_req = Requirement(sub)
            extras = req.extras or {""}
            for e in extras:
                todo.append((sub_req, e))
    return seen


def main_job_closure() -> set[str]:
    project = _pyproject()["project"]
    reqs = list(project["dependencies"])
    for extra in main_job_extras():
        reqs += project["optional-dependencies"][extra]
    return _closure(reqs)


def notebook_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
    return names


def needed_distributions(modules: set[str]) -> dict[str, set[str]]:
    """Module -> the distributions it needs beyond the standard library and rmqstore's core."""
    provided = metadata.packages_distributions()
    spark_extra = _pyproject()["project"]["optional-dependencies"]["spark"]
    need: dict[str, set[str]] = {}
    for mod in modules:
        top = mod.split(".")[0]
        if mod == "rmqstore.spark" or mod.startswith("rmqstore.spark."):
            need[mod] = {_canon(Requirement(r).name) for r in spark_extra}
        elif top == "rmqstore" or top in sys.stdlib_module_names:
            continue
        else:
            dists = provided.get(top)
            assert dists, f"module {top!r} is provided by no installed distribution"
            need[mod] = {_canon(d) for d in dists}
    return need


def test_readme_main_job_names_the_jupyter_extra():
    assert "jupyter" in main_job_extras()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_the_main_job_install(path):
    closure = main_job_closure()
    missing = {mod: sorted(d - closure) for mod, d in needed_distributions(notebook_imports(path)).items()
               if not d & closure or (mod.startswith("rmqstore.spark") and d - closure)}
    assert not missing, (f"{path.name} imports modules the README's main-job install does not bring: {missing}; "
                         "add them to the extra the main job installs")


def test_widgets_folder_is_the_import_path(tmp_path):
    """``rmqstore/widgets/`` is a real package folder: importing it from outside the checkout
    (after ``pip install -e .``) finds the files in the tree, with no package-dir mapping, and
    every ``rmqstore`` sub-package is listed by the build (``rmqstore.engine.ha`` once was not)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", "import rmqstore.widgets, rmqstore.engine.ha, rmqstore.spark;"
                          "print(rmqstore.widgets.__file__)"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "rmqstore" / "widgets" / "__init__.py"
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "package-dir" not in config
    from setuptools import find_packages

    found = set(find_packages(str(ROOT), include=config["packages"]["find"]["include"]))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "rmqstore").rglob("__init__.py")}
    assert on_disk <= found, on_disk - found


def _kernel_python(name: str) -> str:
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().get_kernel_spec(name).argv[0]


@pytest.mark.skipif(os.environ.get("CI") != "true" and "RMQSTORE_NOTEBOOK_KERNEL" not in os.environ,
                    reason="CI runs the notebooks in a virtualenv of the main job's install (.ci/run); "
                           "set RMQSTORE_NOTEBOOK_KERNEL to a kernel of such an environment to check one here")
def test_notebooks_run_in_the_main_jobs_environment():
    """In CI the notebooks run in a kernel whose Python has exactly what the README's main-job command
    installs: not this environment (which has the dev extra), and no test tool in it."""
    import subprocess

    from conftest import notebook_kernel

    kernel = notebook_kernel()
    assert kernel != "python3", "RMQSTORE_NOTEBOOK_KERNEL names the main job's kernel"
    python = _kernel_python(kernel)
    prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert prefix != sys.prefix, "the kernel runs in an environment of its own"
    probe = ("import importlib.util as u, json; print(json.dumps({m: u.find_spec(m) is not None "
             "for m in ['rmqstore', 'jupyterlab', 'pytest', 'hypothesis', 'playwright']}))")
    found = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert found == {"rmqstore": True, "jupyterlab": True, "pytest": False, "hypothesis": False,
                     "playwright": False}, found
    where = subprocess.run([python, "-c", "import rmqstore; print(rmqstore.__file__)"], capture_output=True,
                           text=True, check=True, cwd="/").stdout.strip()
    assert Path(where) == ROOT / "rmqstore" / "__init__.py", "the checkout is installed (editable) there"


def test_the_notebooks_kernel_is_a_virtualenvs_python_that_is_not_activated():
    """The premise of every notebook test (conftest.executed_notebook): the kernel's Python is a
    virtualenv's and has rmqstore, this checkout, with no PYTHONPATH; the ``python3`` first on the
    kernel's PATH is another Python, one without rmqstore -- what ``.venv/bin/jupyter lab`` gives a
    newcomer who did not activate the virtualenv.  (Notebook 10 failed there: Spark's workers started
    ``python3`` from PATH.)"""
    import shutil
    import subprocess

    from conftest import newcomer, notebook_kernel

    env = newcomer().env
    python = _kernel_python(notebook_kernel())
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env and "PYSPARK_PYTHON" not in env
    probe = "import sys, rmqstore; print(sys.prefix != sys.base_prefix, rmqstore.__file__)"
    in_venv, where = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True, cwd="/",
                                    env=env).stdout.split()
    assert in_venv == "True", "the kernel runs from a virtualenv"
    assert Path(where) == ROOT / "rmqstore" / "__init__.py"
    on_path = shutil.which("python3", path=env["PATH"])
    assert on_path and Path(on_path).parent != Path(python).parent, "the virtualenv is not activated"
    r = subprocess.run([on_path, "-c", "import rmqstore"], capture_output=True, text=True, cwd="/", env=env)
    assert r.returncode != 0 and "No module named 'rmqstore'" in r.stderr, "PATH's python3 lacks rmqstore"
