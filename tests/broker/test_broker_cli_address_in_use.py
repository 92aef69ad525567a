"""``rmqstore broker`` / ``rmqstore namesrv`` on an address another process holds: one line naming the
address, which server wanted it, and the flags (or broker.conf key) that move it -- exit 2, the store
untouched.  (It once said "[Errno 98] Address already in use" and nothing else.)

Each test holds a loopback port in this process and runs the command line in a subprocess.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def held_port():
    """A loopback port this process listens on (so nothing else can)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def _run(*argv, cwd=None):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "rmqstore.cli", *map(str, argv)], capture_output=True, text=True,
                       timeout=120, env=env, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rmqstore: error: "), err  # no traceback, one line
    return lines[0]


def test_the_broker_port_taken_names_it_and_the_flags_that_change_it(tmp_path, held_port):
    code, out, err = _run("broker", tmp_path / "store", "--listen", f"127.0.0.1:{held_port}", "--no-namesrv")
    line = _one_error_line(err)
    assert code == 2, (code, err)
    assert f"the broker cannot listen on 127.0.0.1:{held_port}" in line, line
    assert "Address already in use" in line and "another process listens there" in line, line
    assert "--listen HOST:PORT" in line and "listenPort" in line, line
    assert "Errno" not in line
    assert not (tmp_path / "store").exists() or not os.listdir(tmp_path / "store" / "commitlog"), \
        "nothing written to the store"


def test_the_embedded_name_server_port_taken_says_how_to_move_it_or_leave_it_out(tmp_path, held_port):
    code, out, err = _run("broker", tmp_path / "store", "--listen", "127.0.0.1:0", "--namesrv-listen",
                          f"127.0.0.1:{held_port}")
    line = _one_error_line(err)
    assert code == 2, (code, err)
    assert f"the embedded name server cannot listen on 127.0.0.1:{held_port}" in line, line
    assert "--namesrv-listen HOST:PORT" in line and "--no-namesrv" in line, line


def test_the_ha_port_taken_names_the_ha_flags(tmp_path, held_port):
    code, out, err = _run("broker", tmp_path / "store", "--listen", "127.0.0.1:0", "--no-namesrv", "--role",
                          "SYNC_MASTER", "--ha-listen", f"127.0.0.1:{held_port}")
    line = _one_error_line(err)
    assert code == 2, (code, err)
    assert f"cannot listen for slaves on 127.0.0.1:{held_port}" in line, line
    assert "--ha-listen HOST:PORT" in line and "haListenPort" in line, line


def test_a_port_taken_in_broker_conf_names_the_key(tmp_path, held_port):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-x\nlistenPort={held_port}\nstorePathRootDir={tmp_path / 'store'}\n")
    code, out, err = _run("broker", "--config", conf, "--no-namesrv")
    line = _one_error_line(err)
    assert code == 2, (code, err)
    assert f"cannot listen on 127.0.0.1:{held_port}" in line and "listenPort" in line, line


def test_the_standalone_name_server_port_taken(held_port, tmp_path):
    code, out, err = _run("namesrv", "--listen", f"127.0.0.1:{held_port}", cwd=tmp_path)
    line = _one_error_line(err)
    assert code == 2, (code, err)
    assert f"the name server cannot listen on 127.0.0.1:{held_port}" in line, line
    assert "--listen HOST:PORT" in line and "listenPort" in line, line
