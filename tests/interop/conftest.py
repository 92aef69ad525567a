"""The interop tier: rmqstore against the real Apache RocketMQ 4.9.8 (``rmqjava``).

Every test under this folder carries the ``interop`` marker (``-m "not interop"`` leaves the tier
out) and skips, with one line saying where the distribution was looked for, when it is not there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .rmqjava import JavaDist, java_dist

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.interop)


@pytest.fixture(scope="session")
def rmq_java(tmp_path_factory) -> JavaDist:
    """The RocketMQ 4.9.8 distribution; its logs and client files go under a temp folder of the session."""
    return java_dist(tmp_path_factory.mktemp("rmq-java-work"))
