"""Orderly consumption with the Java 4.9.8 client (``MessageListenerOrderly``) against our broker.

* a consumer gets every message of each queue, in queue order, and unlocks its queues when it shuts down;
* a consumer killed (``kill -9``) while it holds locks: the broker keeps its locks until they expire (a
  short lock time here), then the survivor takes the queues over from the dead one's committed offsets --
  no message skipped, and each queue's messages in order for the survivor;
* a message its listener keeps answering SUSPEND_CURRENT_QUEUE_A_MOMENT is consumed again until its
  reconsume times reach ``maxReconsumeTimes``, then sent back and stored in ``%DLQ%group``, as the Java
  broker does it (the same program against both, the outputs compared);
* the lock table answers LOCK_BATCH_MQ / UNLOCK_BATCH_MQ as the Java broker's does, a closed connection
  included (the same requests against both).

The Java program (tests/interop/java/OrderlyConsumer.java) shortens the client's lock renewal (1 s) and
its own lock time (3 s); the broker's lock time is set to a few seconds, above the client's, as 4.9.8's
defaults are (60 s against 30 s).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from .rmqjava import JAVA_DIR
from broker_support import BrokerThread, NamesrvThread, run_async, small_store_config
from rmqstore.broker.jsonfmt import loads
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from test_broker_protocol import send_v2
from test_orderly_lock import _body

pytestmark = pytest.mark.timeout(600)

#: every delay level one second: a message sent back with delay level 3 + reconsume times is due at once
FAST_DELAYS = " ".join(["1s"] * 18)
BROKER_LOCK_TIME = 6.0


def produce(address: str, topic: str, per_queue: int, queues: int = 4, body=lambda q, n: f"q{q}-{n}") -> None:
    """``per_queue`` messages to each of ``queues`` queues of ``topic`` (created from TBW102), over our own
    client: the consumers are what these tests are about."""
    host, port = address.rsplit(":", 1)

    async def run():
        client = await RemotingClient().connect(host, int(port))
        try:
            for n in range(per_queue):
                for q in range(queues):
                    r = await client.invoke(send_v2(topic, body(q, n).encode(), q), timeout=10)
                    assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await client.close()

    run_async(run(), 120)


class JavaConsumer:
    """``OrderlyConsumer.java`` running in the background; its lines collected as they come."""

    def __init__(self, rmq_java, *args):
        cmd = [str(rmq_java.root / "bin" / "rmq-java"), str(JAVA_DIR / "OrderlyConsumer.java"), *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=rmq_java.env(), cwd=str(rmq_java.workdir))
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline or (self.proc.poll() is not None and not self._reader.is_alive()
                                               and not predicate()):
                raise AssertionError(f"waiting for {what}: the consumer printed\n" + "\n".join(self.lines[-60:]))
            time.sleep(0.1)

    @property
    def client_id(self) -> str:
        self.wait_for(lambda: any(x.startswith("STARTED ") for x in self.lines), 120, "the consumer to start")
        return next(x.split()[1] for x in self.lines if x.startswith("STARTED "))

    def messages(self) -> list[tuple[float, int, int, str, int]]:
        return messages_of(list(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(10)


def messages_of(lines) -> list[tuple[float, int, int, str, int]]:
    """(wall time s, queue id, queue offset, body, reconsume times) of each MSG line, in order."""
    out = []
    for line in lines:
        if line.startswith("MSG "):
            _, ms, q, off, body, times = line.split()
            out.append((int(ms) / 1000, int(q), int(off), body, int(times)))
    return out


def committed(bt: BrokerThread, queue_id: int, group: str = "CG_kill", topic: str = "KillT") -> int:
    return bt.broker.offsets.query_offset(group, topic, queue_id)


def by_queue(messages) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for _, q, off, _, _ in messages:
        out.setdefault(q, []).append(off)
    return out


def test_java_orderly_consumer_gets_every_message_of_each_queue_in_order(rmq_java, tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        produce(bt.broker.address, "OrderT", 40)
        out = rmq_java.run_java("OrderlyConsumer.java", bt.namesrv, "OrderT", "CG_order", 160, 120, 0, -1,
                                timeout=300)
        msgs = messages_of(out.splitlines())
        assert "DONE 160" in out, out[-3000:]
        queues = by_queue(msgs)
        assert queues == {q: list(range(40)) for q in range(4)}, out[-3000:]   # every one, once, in order
        assert all(body == f"q{q}-{off}" for _, q, off, body, _ in msgs)
        # the consumer unlocked its queues when it shut down, and committed its offsets
        assert bt.broker.rebalance_locks.manager.snapshot("CG_order") == {}
        assert {q: bt.broker.offsets.query_offset("CG_order", "OrderT", q) for q in range(4)} == {q: 40 for q in range(4)}


def test_a_killed_consumers_queues_move_to_the_survivor_after_its_locks_expire(rmq_java, tmp_path):
    per_queue = 100
    every = {f"q{q}-{n}" for q in range(4) for n in range(per_queue)}
    with BrokerThread(tmp_path / "store") as bt:
        manager = bt.broker.rebalance_locks.manager
        manager.lock_max_live_time = BROKER_LOCK_TIME
        produce(bt.broker.address, "KillT", per_queue)
        a = JavaConsumer(rmq_java, bt.namesrv, "KillT", "CG_kill", len(every), 400, 300, -1)   # slow: 0.3 s a message
        b = None
        try:
            a_id = a.client_id
            a.wait_for(lambda: len(a.messages()) >= 4, 120, "A to consume")
            b = JavaConsumer(rmq_java, bt.namesrv, "KillT", "CG_kill", len(every), 400, 0, -1)
            b_id = b.client_id

            def owners():  # of KillT's queues (the group's retry topic has a queue to lock too)
                return sorted(e.client_id for mq, e in manager.snapshot("CG_kill").items() if mq.topic == "KillT")

            b.wait_for(lambda: owners() == sorted([a_id, a_id, b_id, b_id]), 120, "two queues locked by each")
            b.wait_for(lambda: len(b.messages()) >= 2, 120, "B to consume")
            a_queues = [mq.queue_id for mq, e in manager.snapshot("CG_kill").items()
                        if e.client_id == a_id and mq.topic == "KillT"]
            # A's client sends its offsets every second from 10 s after its start: let it commit once
            a.wait_for(lambda: all(committed(bt, q) > 0 for q in a_queues), 120, "A to commit offsets")
            os.kill(a.proc.pid, signal.SIGKILL)                   # A dies holding two queues' locks
            a.stop()
            b.wait_for(lambda: a_id not in bt.broker.clients.consumers["CG_kill"].connections, 60,
                       "the broker to see A gone")
            now_wall, now_mono = time.time(), time.monotonic()
            held = {mq.queue_id: now_wall - (now_mono - e.last_update_timestamp)
                    for mq, e in manager.snapshot("CG_kill").items() if e.client_id == a_id and mq.topic == "KillT"}
            assert len(held) == 2, manager.snapshot("CG_kill")   # a closed connection frees no lock
            left_at = {q: committed(bt, q) for q in held}         # A can commit nothing more
            b.wait_for(lambda: every <= {m[3] for m in a.messages() + b.messages()}, 240, "every message consumed")
        finally:
            a.stop()
            if b is not None:
                b.stop()
    survivor = b.messages()
    for q, offsets in by_queue(survivor).items():  # each queue in order, none skipped, for the survivor
        assert offsets == list(range(offsets[0], per_queue)), (q, offsets)
    for q, renewed_at in held.items():            # A's queues moved once its locks had expired, not before
        first = min(t for t, mq, _, _, _ in survivor if mq == q)
        assert first >= renewed_at + BROKER_LOCK_TIME - 0.05, (q, first - renewed_at)
    # B took A's queues over from the offsets A had committed, which A had consumed up to
    a_consumed = by_queue(a.messages())
    for q in held:
        assert by_queue(survivor)[q][0] == left_at[q] and set(range(left_at[q])) <= set(a_consumed[q]), q


# --- against the Java broker: the same program, the same requests ------------------------------

@pytest.fixture(scope="module")
def java_broker(rmq_java, tmp_path_factory):
    """A Java 4.9.8 broker registered with our name server, delay levels of one second."""
    folder = tmp_path_factory.mktemp("orderly-java-broker")
    with NamesrvThread() as namesrv, \
            rmq_java.java_broker(folder, {"namesrvAddr": namesrv.address, "messageDelayLevel": FAST_DELAYS,
                                          "brokerName": "broker-a"}) as address:
        yield namesrv.address, address


_VARIES = re.compile(r"\b(UNIQ_KEY|ORIGIN_MESSAGE_ID|MIN_OFFSET|MAX_OFFSET)=[^,\s]*")


def _suspend_run(rmq_java, namesrv: str, address: str) -> list[str]:
    """m0, suspend-1, m2 in queue 0: the listener keeps suspending suspend-1 (maxReconsumeTimes 2);
    the lines the consumer prints, times dropped and varying properties masked."""
    produce(address, "SuspendT", 1, queues=1, body=lambda q, n: "m0")
    produce(address, "SuspendT", 1, queues=1, body=lambda q, n: "suspend-1")
    produce(address, "SuspendT", 1, queues=1, body=lambda q, n: "m2")
    out = rmq_java.run_java("OrderlyConsumer.java", namesrv, "SuspendT", "CG_suspend", 2, 120, 0, 2, 1, timeout=300)
    lines = []
    for line in out.splitlines():
        if line.startswith(("MSG ", "TRY ")):
            kind, _, rest = line.split(" ", 2)
            lines.append(f"{kind} {rest}")
        elif line.startswith(("DONE", "TIMEOUT", "DLQ")):
            lines.append(_VARIES.sub(lambda m: m.group(1) + "=*", line))
    return lines


def test_a_suspended_message_goes_to_the_dlq_after_max_reconsume_times_as_with_the_java_broker(
        rmq_java, java_broker, tmp_path):
    java = _suspend_run(rmq_java, *java_broker)
    with BrokerThread(tmp_path / "store", store_config=small_store_config(message_delay_level=FAST_DELAYS)) as bt:
        ours = _suspend_run(rmq_java, bt.namesrv, bt.broker.address)
    assert java[:6] == ["MSG 0 0 m0 0", "TRY 0 1 suspend-1 0", "TRY 0 1 suspend-1 1", "TRY 0 1 suspend-1 2",
                        "MSG 0 2 m2 0", "DONE 2"], java
    assert java[6].startswith("DLQ %DLQ%CG_suspend 0 0 suspend-1 reconsumeTimes=2 origin=same "), java
    assert java[7:] == ["DLQ_DONE 1"], java
    assert ours == java, "\n".join(["ours:", *ours, "java:", *java])


LOCK_SCRIPT = [  # (connection, client id, op, queues): the answers compared between the brokers
    ("a", "A", "lock", [0, 1]),
    ("b", "B", "lock", [1, 2]),
    ("b", "B", "unlock", [0, 1]),
    ("b", "B", "lock", [0, 1, 2, 3]),
    ("a", "A", "lock", [0, 1, 2, 3]),
    ("a", "A", "unlock", [1]),
    ("b", "B", "lock", [1]),
    ("a", "A", "close", []),
    ("b", "B", "lock", [0, 1, 2, 3]),
    ("c", "A", "lock", [0, 3]),
]


async def _lock_script(address: str, broker_name: str) -> list[str]:
    host, port = address.rsplit(":", 1)
    conns = {name: await RemotingClient().connect(host, int(port)) for name in "abc"}
    answers = []
    try:
        for conn, client_id, op, queues in LOCK_SCRIPT:
            if op == "close":
                await conns[conn].close()
                await asyncio.sleep(1.0)  # the broker has seen the channel close (inactive) by then
                continue
            body = _body("CG_lockwire", client_id, queues).replace(b"broker-a", broker_name.encode())
            code = RequestCode.LOCK_BATCH_MQ if op == "lock" else RequestCode.UNLOCK_BATCH_MQ
            r = await conns[conn].invoke(RemotingCommand(code, {}, body, language="JAVA"), timeout=10)
            got = sorted(q["queueId"] for q in loads(r.body.decode())["lockOKMQSet"]) if r.body else None
            answers.append(f"{conn} {client_id} {op} {queues} -> code={r.code} {got}")
    finally:
        for c in conns.values():
            await c.close()
    return answers


def test_lock_answers_are_the_java_brokers(java_broker, tmp_path):
    java = run_async(_lock_script(java_broker[1], "broker-a"), 120)
    with BrokerThread(tmp_path / "store") as bt:
        ours = run_async(_lock_script(bt.broker.address, "broker-a"), 120)
    assert java[0] == "a A lock [0, 1] -> code=0 [0, 1]" and java[-2] == "b B lock [0, 1, 2, 3] -> code=0 [1, 2, 3]", java
    assert ours == java, "\n".join(["ours:", *ours, "java:", *java])
