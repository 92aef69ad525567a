"""The repository stays small: generated stores, sites and bench data are never committed.

A submission over the size limit is refused whole, so a 420 MB default-sized index file
or a 2 GiB bench store slipped into a commit would lose every change with it.
"""

import subprocess

import pytest

from conftest import REPO

MAX_FILE = 4 * 1024 * 1024     # the largest tracked file (fixture segments are 64 KiB..1 MiB)
MAX_TOTAL = 64 * 1024 * 1024   # all tracked files together


def tracked_sizes():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    sizes = {}
    for name in filter(None, out.decode().split("\0")):
        path = REPO / name
        if path.is_file():
            sizes[name] = path.stat().st_size
    return sizes


def test_no_tracked_file_is_big():
    sizes = tracked_sizes()
    assert sizes, "git ls-files listed nothing"
    big = {n: s for n, s in sizes.items() if s > MAX_FILE}
    assert not big, f"tracked files over {MAX_FILE:,} bytes (generate them, do not commit them): {big}"


def test_tracked_files_are_small_in_all():
    total = sum(tracked_sizes().values())
    assert total < MAX_TOTAL, f"tracked files add up to {total:,} bytes"
