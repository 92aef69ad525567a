"""The interop tier's finder: where the RocketMQ distribution is looked for, and the skip's reason."""

from __future__ import annotations

import subprocess

import pytest

from . import rmqjava


def _fake_dist(path):
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "rmq-java").write_text("#!/bin/sh\n")
    return path


@pytest.fixture
def java_on_path(monkeypatch):
    monkeypatch.setattr(rmqjava.shutil, "which", lambda name: "/usr/bin/java")
    monkeypatch.delenv("RMQ_JAVA_DIST", raising=False)


def test_the_environment_variable_wins(tmp_path, monkeypatch, java_on_path):
    dist = _fake_dist(tmp_path / "elsewhere" / "dist")
    _fake_dist(tmp_path / "shared" / rmqjava.DIST_NAME)
    monkeypatch.setenv("RMQ_JAVA_DIST", str(dist))
    (tmp_path / "project").mkdir()
    assert rmqjava.find_dist(tmp_path / "project") == (dist.resolve(), "")


def test_a_wrong_environment_variable_skips_saying_so(tmp_path, monkeypatch, java_on_path):
    _fake_dist(tmp_path / "shared" / rmqjava.DIST_NAME)
    monkeypatch.setenv("RMQ_JAVA_DIST", str(tmp_path / "nowhere"))
    (tmp_path / "project").mkdir()
    root, why = rmqjava.find_dist(tmp_path / "project")
    assert root is None and why.startswith(f"RMQ_JAVA_DIST={tmp_path / 'nowhere'} is not")


def test_beside_the_project(tmp_path, java_on_path):
    dist = _fake_dist(tmp_path / "shared" / rmqjava.DIST_NAME)
    (tmp_path / "project").mkdir()
    assert rmqjava.find_dist(tmp_path / "project") == (dist.resolve(), "")


def test_a_clone_elsewhere_finds_it_beside_its_origin(tmp_path, java_on_path):
    """CI clones the checkout to another folder: the clone's origin is the checkout beside shared/."""
    dist = _fake_dist(tmp_path / "work" / "shared" / rmqjava.DIST_NAME)
    origin = tmp_path / "work" / "main"
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    subprocess.run(["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    clone = tmp_path / "ci" / "ci-check"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    assert rmqjava.find_dist(clone) == (dist.resolve(), "")


def test_absent_gives_one_line_naming_every_place(tmp_path, java_on_path):
    (tmp_path / "project").mkdir()
    root, why = rmqjava.find_dist(tmp_path / "project")
    assert root is None and "\n" not in why
    assert str(tmp_path / "shared" / rmqjava.DIST_NAME) in why and "RMQ_JAVA_DIST" in why


def test_no_java_is_a_reason_too(tmp_path, monkeypatch):
    monkeypatch.setattr(rmqjava.shutil, "which", lambda name: None)
    assert rmqjava.find_dist(tmp_path) == (None, "no java on PATH (the RocketMQ 4.9.8 distribution needs Java 17)")


def test_case_lines_reads_a_batched_programs_answers():
    out = "12:00 INFO noise\nCASE a code=0 remark=\nCASE b code=1 remark=x y\n"
    assert rmqjava.case_lines(out) == {"a": "code=0 remark=", "b": "code=1 remark=x y"}


def test_a_java_name_server_answers_the_real_mqadmin(rmq_java, tmp_path):
    """The harness's Java name server boots on a free port and RocketMQ's own mqadmin talks to it."""
    with rmq_java.java_namesrv(tmp_path / "ns") as namesrv:
        done = rmq_java.mqadmin("getNamesrvConfig", namesrv=namesrv)
        port = namesrv.rsplit(":", 1)[1]
        assert "listenPort" in done.stdout and port in done.stdout, done.stdout
