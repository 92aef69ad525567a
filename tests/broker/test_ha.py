"""HA replication on real sockets: our master and our slave, RocketMQ 4.9.8's frames.

Every test runs on loopback with ephemeral ports, tiny commitlog files (64 KiB) so that
transfers cross file boundaries, and bounded waits; every store and process is shut
down at the end.  Fake masters and slaves speak the wire by hand, through the frame
tables of :mod:`rmqstore.engine.ha.frames`, so the tests also pin the wire format.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rmqstore import BrokerRole, Message, MessageBatch, MessageStore, PutMessageStatus, StoreConfig
from rmqstore.common.config import FlushDiskType
from rmqstore.common.errors import StoreStateError
from rmqstore.engine.ha import SLAVE_REPORT, TRANSFER_HEADER, frames_markdown
from rmqstore.common.trace import RecordingTracer

from conftest import wait_until
from test_put_checks import walk_commitlog

FILE = 64 * 1024
CQ_FILE = 20 * 50
OK = PutMessageStatus.PUT_OK
SLAVE_SCRIPT = Path(__file__).resolve().parents[1] / "ha_slave.py"


def msg(i: int, size: int | None = None) -> Message:
    body = bytes([65 + i % 26]) * (size if size is not None else 40 + (i * 37) % 1500)
    return Message(topic="HaTopic", queue_id=i % 4, body=body, properties=f"KEYS\x01k{i}\x02TAGS\x01t{i % 3}",
                   born_timestamp=1_700_000_000_000 + i, born_host="192.0.2.1:40000")


def end_of(result) -> int:
    return result.append_result.wrote_offset + result.append_result.wrote_bytes


@pytest.fixture
def make(tmp_path):
    """Start stores in tmp_path subfolders (masters listen on an ephemeral port); all shut down at the end."""
    made = []

    def make_store(name: str, role: BrokerRole, **cfg):
        cfg.setdefault("mapped_file_size_commit_log", FILE)
        cfg.setdefault("mapped_file_size_consume_queue", CQ_FILE)
        cfg.setdefault("ha_listen_port", 0)
        cfg.setdefault("ha_reconnect_interval", 100)
        cfg.setdefault("sync_flush_timeout", 2000)
        cfg.setdefault("ha_enable", role is not BrokerRole.SLAVE)
        store = MessageStore(tmp_path / name, StoreConfig(broker_role=role, **cfg))
        made.append(store)
        store.start()
        return store

    yield make_store
    for s in reversed(made):
        s.shutdown()


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)
        p.stdout.close()


def start_slave_process(procs, root, master_addr: str) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([sys.executable, str(SLAVE_SCRIPT), str(root), master_addr, str(FILE)],
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.stdout.readline().split()
    assert line and line[0] == "S", line
    return p, int(line[1])


def connect_slave(master, slave) -> None:
    wait_until(lambda: master.ha_service.connection_count >= 1 and slave.ha_service.ha_client.connected,
               what="the slave to connect")


def same_commitlog(master_root, slave_root) -> None:
    """Every master commitlog file that holds data is byte-identical on the slave."""
    mdir, sdir = Path(master_root) / "commitlog", Path(slave_root) / "commitlog"
    names = sorted(n for n in os.listdir(mdir) if any((mdir / n).read_bytes()))
    assert names, "the master holds nothing"
    for name in names:
        assert (sdir / name).read_bytes() == (mdir / name).read_bytes(), f"commitlog file {name} differs"
    extra = [n for n in os.listdir(sdir) if n not in names and any((sdir / n).read_bytes())]
    assert not extra, f"the slave holds data the master does not: {extra}"


def same_consume_queues(master_root, slave_root) -> None:
    mq, sq = Path(master_root) / "consumequeue", Path(slave_root) / "consumequeue"
    mfiles = sorted(str(p.relative_to(mq)) for p in mq.rglob("*") if p.is_file())
    sfiles = sorted(str(p.relative_to(sq)) for p in sq.rglob("*") if p.is_file())
    assert mfiles == sfiles and len(mfiles) > 4  # 4 queues, several files each
    for rel in mfiles:
        assert (sq / rel).read_bytes() == (mq / rel).read_bytes(), f"consume queue file {rel} differs"


def records(root) -> list[tuple[int, bytes]]:
    return [(off, rec.body) for off, rec in walk_commitlog(root, FILE) if hasattr(rec, "body")]


# -- the frames ------------------------------------------------------------------------------

def test_frames_are_rocketmqs():
    """Master->slave: 8-byte offset + 4-byte size, big-endian; slave->master: 8-byte offset."""
    assert TRANSFER_HEADER.size == 12 and SLAVE_REPORT.size == 8
    assert TRANSFER_HEADER.pack(0x0102030405060708, 32768) == struct.pack(">qi", 0x0102030405060708, 32768)
    assert SLAVE_REPORT.pack(65536) == (65536).to_bytes(8, "big")
    table = frames_markdown()
    assert "physical_offset" in table and "body_size" in table and "max_offset" in table


# -- master and slave ------------------------------------------------------------------------

def test_sync_master_and_slave(make):
    """N puts under SYNC_MASTER: all PUT_OK, each on the slave when answered; files identical."""
    master = make("m", BrokerRole.SYNC_MASTER, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    slave = make("s", BrokerRole.SLAVE, ha_master_address=master.ha_service.listen_address)
    connect_slave(master, slave)
    master.tracer = tracer = RecordingTracer({"replica", "replica.wake", "ha.push"})
    for i in range(400):
        if i % 25 == 7:
            r = master.put_messages(MessageBatch(topic="HaTopic", queue_id=i % 4, items=[b"b%d" % j for j in range(5)]))
        else:
            r = master.put_message(msg(i))
        assert r.status is OK, (i, r)
        # the answer was given only after a slave had appended the put's bytes
        assert slave.get_max_phy_offset() >= end_of(r), i
    master.tracer = None
    assert master.get_max_phy_offset() > 5 * FILE  # transfers crossed files
    ev = tracer.by_stage("replica")
    assert len(ev) == 400 and all(e["waits"] and e["status"] == "PUT_OK" for e in ev)
    assert all(e["acked"] >= e["next_offset"] for e in ev)
    pushes = tracer.by_stage("ha.push")
    assert pushes and all(p["size"] <= 32 * 1024 for p in pushes)
    assert sum(w["served"] for w in tracer.by_stage("replica.wake")) == 400
    pos = master.ha_service.positions()
    assert pos["slaves"][0]["acked"] == pos["push2_slave_max_offset"] == master.get_max_phy_offset()
    assert pos["slaves"][0]["pushed"] == master.get_max_phy_offset()

    # the slave refuses puts and serves reads
    refused = slave.put_message(msg(0))
    assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "slave" in refused.message
    assert slave.wait_dispatched() and master.wait_dispatched()
    for qid in range(4):
        want = master.get_message("g", "HaTopic", qid, 0, 32)
        got = slave.get_message("g", "HaTopic", qid, 0, 32)
        assert got.status.name == "FOUND" and [m.body for m in got.messages] == [m.body for m in want.messages]
        assert slave.get_max_offset_in_queue("HaTopic", qid) == master.get_max_offset_in_queue("HaTopic", qid)
    slave.shutdown()
    master.shutdown()
    same_commitlog(master.root, slave.root)
    same_consume_queues(master.root, slave.root)


def test_async_master_never_waits_and_slave_catches_up(make):
    master = make("m", BrokerRole.ASYNC_MASTER)
    silent = socket.create_connection(_addr(master))  # a slave that never acknowledges anything
    silent.sendall(SLAVE_REPORT.pack(0))
    wait_until(lambda: master.ha_service.connection_count == 1)
    t0 = time.monotonic()
    results = [master.put_message(msg(i)) for i in range(50)]
    assert all(r.status is OK for r in results) and time.monotonic() - t0 < 2
    slave = make("s", BrokerRole.SLAVE, ha_master_address=master.ha_service.listen_address)
    wait_until(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset(), what="catch-up")
    silent.close()


def test_sync_master_statuses(make):
    """No slave: SLAVE_NOT_AVAILABLE at once; a silent slave: FLUSH_SLAVE_TIMEOUT after the timeout,
    overriding a successful flush; a slave too far behind: SLAVE_NOT_AVAILABLE."""
    master = make("m", BrokerRole.SYNC_MASTER, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=300,
                  ha_slave_fallbehind_max=3000)
    t0 = time.monotonic()
    r = master.put_message(msg(0, 100))
    assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and r.append_result.wrote_bytes > 0
    assert time.monotonic() - t0 < 0.25
    silent = socket.create_connection(_addr(master))
    silent.sendall(SLAVE_REPORT.pack(0))
    wait_until(lambda: master.ha_service.connection_count == 1)
    t0 = time.monotonic()
    r = master.put_message(msg(1, 100))
    waited = time.monotonic() - t0
    assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and "slave" in r.message, r
    assert 0.25 < waited < 2.0
    assert master.commit_log.mapped_file_queue.flushed_where >= end_of(r)  # flushed: the slave's status won
    big = master.put_message(msg(2, 4000))  # its end is more than 3000 bytes past what the slave acked
    assert big.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    # queued puts each wait one timeout from their own put, not one after the other
    # (DIFFERENCES["ha_replica_deadline"]); the 2000-byte bodies keep them within ha_slave_fallbehind_max
    master.config.ha_slave_fallbehind_max = 1 << 20
    t0 = time.monotonic()
    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda i: master.put_message(msg(i, 2000)).status, range(6)))
    assert statuses == [PutMessageStatus.FLUSH_SLAVE_TIMEOUT] * 6
    assert time.monotonic() - t0 < 1.5
    silent.close()


def test_replication_snapshot_shows_waits_and_their_outcomes(make):
    """The snapshot counts every SYNC_MASTER answer by status, keeps the last with its wait, and
    sees a put while it waits for a slave; an ASYNC_MASTER and non-waiting puts record nothing."""
    from rmqstore.engine.ha import replication_snapshot

    master = make("m", BrokerRole.SYNC_MASTER, sync_flush_timeout=400)
    assert replication_snapshot(master)["master"]["outcomes"] == {}
    assert master.put_message(msg(0, 100)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    snap = replication_snapshot(master)
    assert snap["master"]["last_replica"]["status"] == "SLAVE_NOT_AVAILABLE"
    assert snap["master"]["last_replica"]["next_offset"] is None and snap["slave"] is None
    silent = socket.create_connection(_addr(master))
    silent.sendall(SLAVE_REPORT.pack(master.get_max_phy_offset()))
    wait_until(lambda: master.ha_service.push2_slave_max_offset == master.get_max_phy_offset())
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(master.put_message, msg(1, 100))
        wait_until(lambda: replication_snapshot(master)["master"]["waiting"] == 1, what="the put to wait")
        r = pending.result()
    assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    nowait = Message(topic="HaTopic", queue_id=0, body=b"n" * 100, properties="WAIT\x01false")
    assert not nowait.wait_store_msg_ok
    assert master.put_message(nowait).status is OK  # does not wait, so it is no replica outcome
    snap = replication_snapshot(master)["master"]
    assert snap["waiting"] == 0
    assert snap["outcomes"] == {"SLAVE_NOT_AVAILABLE": 1, "FLUSH_SLAVE_TIMEOUT": 1}
    last = snap["last_replica"]
    assert last["status"] == "FLUSH_SLAVE_TIMEOUT" and last["next_offset"] == end_of(r) and last["waited_ms"] >= 400
    assert snap["slaves"][0]["acked"] == snap["push2_slave_max_offset"] < end_of(r)
    silent.close()
    async_master = make("a", BrokerRole.ASYNC_MASTER)
    assert async_master.put_message(msg(3, 100)).status is OK
    assert replication_snapshot(async_master)["master"]["outcomes"] == {}


def _addr(store) -> tuple[str, int]:
    host, port = store.ha_service.listen_address.rsplit(":", 1)
    return host, int(port)


def test_port_in_use_refuses_start(make, tmp_path):
    master = make("m", BrokerRole.SYNC_MASTER)
    other = MessageStore(tmp_path / "other", StoreConfig(broker_role=BrokerRole.SYNC_MASTER, ha_enable=True,
                                                         ha_listen_port=_addr(master)[1]))
    with pytest.raises(StoreStateError, match=str(_addr(master)[1])):
        other.start()
    assert not (tmp_path / "other" / "abort").exists()
    other.close()


# -- the wire by hand ----------------------------------------------------------------------

def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_master_frames_and_bad_slaves(make):
    """A raw slave gets RocketMQ's frames; bad reports, garbage and a half report close only
    their own connection while a real slave and the puts go on."""
    master = make("m", BrokerRole.SYNC_MASTER, ha_housekeeping_interval=600, ha_send_heartbeat_interval=200)
    for i in range(150):
        master.put_message(msg(i))  # SLAVE_NOT_AVAILABLE, but written: 2+ files
    good = make("s", BrokerRole.SLAVE, ha_master_address=master.ha_service.listen_address)
    connect_slave(master, good)

    raw = socket.create_connection(_addr(master))
    raw.sendall(SLAVE_REPORT.pack(0))  # "I have nothing": the master starts at its last file
    head = _recv_exactly(raw, TRANSFER_HEADER.size)
    offset, size = TRANSFER_HEADER.unpack_from(head)
    last_file = master.get_max_phy_offset() - master.get_max_phy_offset() % FILE
    assert offset == last_file and 0 < size <= 32 * 1024
    body = _recv_exactly(raw, size)
    mf = master.commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
    assert body == mf.get_bytes(0, size)
    raw.close()

    bad = {"beyond the max offset": SLAVE_REPORT.pack(master.get_max_phy_offset() + 10**9),
           "negative": SLAVE_REPORT.pack(-8),
           "garbage": b"GET / HTTP/1.1\r\nHost: rocketmq\r\n\r\n"}
    for what, data in bad.items():
        s = socket.create_connection(_addr(master))
        s.sendall(data)
        assert _closed_by_peer(s, 3), what
        s.close()
        # a first report is checked too (RocketMQ takes it as an ack: DIFFERENCES["ha_first_report"])
        assert master.ha_service.push2_slave_max_offset <= master.get_max_phy_offset(), what
        assert master.put_message(msg(1000)).status is OK, what
    later = socket.create_connection(_addr(master))
    later.sendall(SLAVE_REPORT.pack(0))
    later.sendall(SLAVE_REPORT.pack(master.get_max_phy_offset() + 1))  # a later report beyond the end
    assert _closed_by_peer(later, 3)
    later.close()
    half = socket.create_connection(_addr(master))
    half.sendall(b"\x00\x00\x00\x00")  # half a report, then silence
    t0 = time.monotonic()
    assert _closed_by_peer(half, 5)
    assert 0.5 < time.monotonic() - t0 < 3
    half.close()
    wait_until(lambda: master.ha_service.connection_count == 1, what="only the good slave left")
    for i in range(20):
        r = master.put_message(msg(2000 + i))
        assert r.status is OK and good.get_max_phy_offset() >= end_of(r)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    sock.settimeout(5)
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "closed early"
        data += chunk
    return data


def test_slave_against_a_fake_master(make, tmp_path, caplog):
    """Our slave appends a frame at its max offset, reports it, and closes on a wrong offset or a half header.

    The frame is sent in two transfers cut inside a record: the slave's reput waits for the
    second half without calling the first one corrupt."""
    source = make("src", BrokerRole.ASYNC_MASTER)
    for i in range(5):
        source.put_message(msg(i, 100))
    data = source.commit_log.get_data(0)
    payload = data.buffer.tobytes()
    data.release()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    addr = "127.0.0.1:%d" % listener.getsockname()[1]
    slave = make("s", BrokerRole.SLAVE, ha_master_address=addr, ha_housekeeping_interval=600)
    conn, _ = listener.accept()
    assert _recv_exactly(conn, 8) == SLAVE_REPORT.pack(0)  # reported at once on connect
    cut = len(payload) // 2 + 3
    conn.sendall(TRANSFER_HEADER.pack(0, cut) + payload[:cut])
    assert _recv_exactly(conn, 8) == SLAVE_REPORT.pack(cut)  # the ack: its new max offset
    time.sleep(0.05)  # the reput service meets the cut record
    conn.sendall(TRANSFER_HEADER.pack(cut, len(payload) - cut) + payload[cut:])
    assert _recv_exactly(conn, 8) == SLAVE_REPORT.pack(len(payload))
    conn.sendall(TRANSFER_HEADER.pack(len(payload) + 100, 0))  # not where the slave is
    assert _closed_by_peer(conn, 3)
    conn.close()
    assert slave.get_max_phy_offset() == len(payload)
    assert slave.wait_dispatched() and slave.get_max_offset_in_queue("HaTopic", 0) == 2
    assert not [r for r in caplog.records if "undecodable" in r.getMessage()]
    conn, _ = listener.accept()  # it reconnects and asks for what it lacks
    assert _recv_exactly(conn, 8) == SLAVE_REPORT.pack(len(payload))
    conn.sendall(TRANSFER_HEADER.pack(len(payload), 0)[:6])  # half a header, then silence
    t0 = time.monotonic()
    assert _closed_by_peer(conn, 5)
    assert 0.5 < time.monotonic() - t0 < 3
    conn.close()
    listener.close()
    assert slave.get_max_phy_offset() == len(payload)


# -- failures --------------------------------------------------------------------------------

def test_slave_killed_mid_transfer_then_catches_up(make, procs, tmp_path):
    master = make("m", BrokerRole.SYNC_MASTER, ha_transfer_batch_size=1024, sync_flush_timeout=500)
    addr = master.ha_service.listen_address
    slave_root = tmp_path / "s"
    proc, start = start_slave_process(procs, slave_root, addr)
    assert start == 0

    def acked():
        slaves = master.ha_service.positions()["slaves"]
        return slaves[0]["acked"] if slaves else -1

    # an empty slave starts at the master's last file: let the master settle on 0 before the puts
    wait_until(lambda: master.ha_service.positions()["slaves"][0]["pushed"] == 0 if acked() == 0 else False,
               what="the slave to connect")
    for i in range(300):  # ~4 MB that do not wait for the slave, which fetches them in 1 KiB transfers
        master.put_messages(MessageBatch(topic="HaTopic", queue_id=i % 4, items=[b"%05d" % i * 200] * 12,
                                         properties="WAIT\x01false"))
    total = master.get_max_phy_offset()
    wait_until(lambda: acked() > FILE, timeout=20, what="the transfer to pass the first file")
    os.kill(proc.pid, signal.SIGKILL)
    killed_at = acked()
    assert killed_at < total, "the transfer ended before the kill"
    proc.wait(timeout=10)
    statuses = set()
    wait_until(lambda: master.ha_service.connection_count == 0, what="the master to notice")
    for i in range(10):
        r = master.put_message(msg(i))
        statuses.add(r.status)
        assert r.append_result.wrote_bytes > 0  # written all the same
    assert statuses <= {PutMessageStatus.SLAVE_NOT_AVAILABLE, PutMessageStatus.FLUSH_SLAVE_TIMEOUT}
    proc, start = start_slave_process(procs, slave_root, addr)
    assert 0 < start <= total
    wait_until(lambda: master.ha_service.connection_count == 1, what="the slave to come back")
    wait_until(lambda: master.ha_service.positions()["slaves"][0]["requested"] >= 0)
    assert master.ha_service.positions()["slaves"][0]["requested"] == start  # from its own max offset
    wait_until(lambda: acked() == master.get_max_phy_offset(), timeout=30, what="catch-up")
    for i in range(10):
        assert master.put_message(msg(100 + i)).status is OK
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    master.shutdown()
    same_commitlog(master.root, slave_root)
    assert records(slave_root) == records(master.root)  # no byte missing or doubled


def test_master_restart_slave_reconnects(make):
    master = make("m", BrokerRole.SYNC_MASTER)
    addr = master.ha_service.listen_address
    slave = make("s", BrokerRole.SLAVE, ha_master_address=addr)
    connect_slave(master, slave)
    assert all(master.put_message(msg(i)).status is OK for i in range(10))
    master.shutdown()
    wait_until(lambda: not slave.ha_service.ha_client.connected, what="the slave to notice")
    master2 = make("m", BrokerRole.SYNC_MASTER, ha_listen_port=_addr(master)[1])
    wait_until(lambda: master2.ha_service.connection_count == 1, what="the slave to reconnect")
    assert slave.ha_service.ha_client.connects == 2
    for i in range(10, 20):
        r = master2.put_message(msg(i))
        assert r.status is OK and slave.get_max_phy_offset() >= end_of(r)


def test_docs_show_the_declared_frames():
    """docs/ha.md carries the frame tables exactly as rmqstore.engine.ha.frames declares them."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ha.md").read_text(encoding="utf-8")
    between = doc.split("<!-- frames:begin -->\n", 1)[1].split("\n<!-- frames:end -->", 1)[0]
    assert between == frames_markdown()


def test_get_data_never_answers_another_offset(make):
    """An offset before the first file (it was deleted) has no data.  RocketMQ's getData(0)
    answers the first file's bytes (returnFirstOnNotFound), which a master would push under
    offset 0; its write side never asks for 0 then, ours cannot get it wrong either way."""
    store = make("m", BrokerRole.ASYNC_MASTER)
    for i in range(200):
        store.put_message(msg(i))
    queue = store.commit_log.mapped_file_queue
    first = queue.mapped_files[0]
    queue.mapped_files = queue.mapped_files[1:]
    first.destroy()
    assert store.commit_log.get_data(0) is None
    data = store.commit_log.get_data(FILE + 8)
    assert data.start_offset == FILE + 8
    data.release()


def test_two_slaves_and_a_learned_master_address(make):
    """A slave started without a master learns it later; with two slaves, a SYNC_MASTER put is
    answered by whichever acknowledges first, and losing one slave loses nothing."""
    master = make("m", BrokerRole.SYNC_MASTER)
    first = make("s1", BrokerRole.SLAVE, ha_master_address=master.ha_service.listen_address)
    second = make("s2", BrokerRole.SLAVE)
    time.sleep(0.2)
    assert not second.ha_service.ha_client.connected  # nowhere to go yet
    second.update_ha_master_address(master.ha_service.listen_address)
    wait_until(lambda: master.ha_service.connection_count == 2, what="two slaves")
    for i in range(30):
        r = master.put_message(msg(i))
        assert r.status is OK and max(first.get_max_phy_offset(), second.get_max_phy_offset()) >= end_of(r)
    first.shutdown()
    wait_until(lambda: master.ha_service.connection_count == 1, what="the master to drop the first slave")
    for i in range(30, 60):
        r = master.put_message(msg(i))
        assert r.status is OK and second.get_max_phy_offset() >= end_of(r)
    assert len(master.ha_service.positions()["slaves"]) == 1
    with pytest.raises(StoreStateError):
        make("plain", BrokerRole.ASYNC_MASTER, ha_enable=False).update_ha_master_address("127.0.0.1:1")


def test_a_new_master_address_moves_a_connected_slave(make):
    """A slave connected to one master and told another (a later name server answer) leaves the
    first -- closed by its own thread, for that reason -- and replicates from the second."""
    first = make("m1", BrokerRole.SYNC_MASTER)
    second = make("m2", BrokerRole.SYNC_MASTER)
    slave = make("s", BrokerRole.SLAVE, ha_master_address=first.ha_service.listen_address)
    connect_slave(first, slave)
    slave.update_ha_master_address(second.ha_service.listen_address)
    wait_until(lambda: second.ha_service.connection_count == 1 and first.ha_service.connection_count == 0,
               what="the slave to move")
    client = slave.ha_service.ha_client
    assert client.last_close_reason == "the master address changed" and client.connects == 2
    for i in range(10):
        r = second.put_message(msg(i))
        assert r.status is OK and slave.get_max_phy_offset() >= end_of(r)
    assert first.put_message(msg(10)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE


class _CuttingSocket:
    """A socket that takes half of each frame (``half``), or nothing (a full send buffer)."""

    def __init__(self, sock, half: bool):
        self.sock, self.half = sock, half

    def send(self, data) -> int:
        if not self.half:
            raise BlockingIOError
        return self.sock.send(bytes(data[:max(1, len(data) // 2)]))

    def __getattr__(self, name):
        return getattr(self.sock, name)


@pytest.mark.parametrize("half", [True, False], ids=["cut-frames", "full-socket"])
def test_a_put_that_cannot_push_whole_leaves_the_rest_to_the_write_thread(make, half):
    """A SYNC_MASTER put pushes its own bytes without blocking; a frame the socket takes only in
    part (or not at all) is finished by the write thread, whole and in order: every put PUT_OK with
    its bytes on the slave, the commitlogs identical."""
    master = make("m", BrokerRole.SYNC_MASTER)
    slave = make("s", BrokerRole.SLAVE, ha_master_address=master.ha_service.listen_address)
    connect_slave(master, slave)
    conn = master.ha_service.connections[0]
    conn._nbsock = _CuttingSocket(conn._nbsock, half)
    for i in range(120):
        r = master.put_message(msg(i))
        assert r.status is OK and slave.get_max_phy_offset() >= end_of(r)
    assert conn.closed_reason is None
    wait_until(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset(), what="the slave to catch up")
    same_commitlog(master.root, slave.root)
