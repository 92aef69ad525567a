"""The broker at the protocol level: frames as the Java client sends them.

Batch (320) with consecutive queue offsets and comma-joined msgIds (Done means 5), routes,
long polling, pull statuses, the send checks, broken clients that cannot take the broker
down (Done means 6), and the ``rmqstore broker`` command stopping cleanly on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from broker_support import BrokerThread
from conftest import REPO
from rmqstore.broker.batch import encode_batch_body
from rmqstore.broker.jsonfmt import loads
from rmqstore.format.properties import properties_to_string
from rmqstore.format.record import decode_message_id, decode_record
from rmqstore.remoting import RemotingCommand, RequestCode, ResponseCode, SerializeType, encode_frame

pytestmark = pytest.mark.timeout(90)


def send_v2(topic: str, body: bytes, queue_id: int = 0, props: dict | None = None,
            code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
    """A SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request with the Java client's header fields."""
    ext = {"a": "PG_proto", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props or {"WAIT": "true"}),
           "j": "0", "k": "false", "m": str(code == RequestCode.SEND_BATCH_MESSAGE).lower()}
    return RemotingCommand(code, ext, body, language="JAVA")


def pull(topic: str, queue_id: int, offset: int, *, suspend_ms: int = 0, sub: str = "*") -> RemotingCommand:
    flags = 4 | (2 if suspend_ms else 0)  # subscription (+ suspend)
    return RemotingCommand(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "CG_proto", "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(flags), "commitOffset": "0", "suspendTimeoutMillis": str(suspend_ms),
        "subscription": sub, "subVersion": "0", "expressionType": "TAG"})


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        yield bt


def test_batch_gets_consecutive_queue_offsets_and_comma_joined_msg_ids(broker):
    client = broker.client()
    try:
        body = encode_batch_body([(f"b{i}".encode(), properties_to_string({"KEYS": f"k{i}"}), 0) for i in range(5)])
        first = broker.call(client.invoke(send_v2("BatchTopic", b"one", 1)))
        assert first.code == ResponseCode.SUCCESS and first.ext_fields["queueOffset"] == "0"
        r = broker.call(client.invoke(send_v2("BatchTopic", body, 1, code=RequestCode.SEND_BATCH_MESSAGE)))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "1"
        ids = r.ext_fields["msgId"].split(",")
        assert len(ids) == 5
        store = broker.broker.store
        offsets = [decode_message_id(i)[1] for i in ids]
        for n, phy in enumerate(offsets):
            rec = store.look_message_by_offset(phy)
            assert rec.body == f"b{n}".encode() and rec.queue_offset == 1 + n and rec.queue_id == 1
        assert offsets == sorted(offsets)
        bad = broker.call(client.invoke(send_v2("BatchTopic", body[:-3], 1, code=RequestCode.SEND_BATCH_MESSAGE)))
        assert bad.code == ResponseCode.MESSAGE_ILLEGAL
    finally:
        broker.call(client.close())


def test_routes_unknown_topic_default_topic_and_retry_topic(broker):
    ns_host, ns_port = broker.namesrv.rsplit(":", 1)
    from rmqstore.remoting import RemotingClient
    client = broker.call(RemotingClient().connect(ns_host, int(ns_port)))
    try:
        def route(topic):
            return broker.call(client.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})))
        r = route("NoSuchTopic")
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        r = route("TBW102")
        assert r.code == ResponseCode.SUCCESS
        assert b'"brokerAddrs":{0:"127.0.0.1:' in r.body  # fastjson's unquoted broker id
        data = loads(r.body.decode())
        assert data["queueDatas"][0]["writeQueueNums"] == 8 and data["brokerDatas"][0]["cluster"] == "DefaultCluster"
        bc = broker.client()
        hb = {"clientID": "127.0.0.1@1", "consumerDataSet": [{"groupName": "G1", "subscriptionDataSet": []}],
              "producerDataSet": []}
        assert broker.call(bc.invoke(RemotingCommand(RequestCode.HEART_BEAT, body=str.encode(
            __import__("json").dumps(hb))))).code == 0
        assert route("%RETRY%G1").code == ResponseCode.SUCCESS
        r = broker.call(bc.invoke(RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})))
        assert loads(r.body.decode()) == {"consumerIdList": ["127.0.0.1@1"]}
        broker.call(bc.close())
    finally:
        broker.call(client.close())


def test_long_polling_pull_is_held_until_a_message_arrives(broker):
    client = broker.client()
    try:
        assert broker.call(client.invoke(send_v2("PollTopic", b"first", 0))).code == 0
        broker.broker.store.wait_dispatched()
        found = broker.call(client.invoke(pull("PollTopic", 0, 0)))
        assert found.code == ResponseCode.SUCCESS and found.ext_fields["nextBeginOffset"] == "1"
        t0 = time.monotonic()
        held = asyncio.run_coroutine_threadsafe(client.invoke(pull("PollTopic", 0, 1, suspend_ms=10_000), 20),
                                                broker.loop)
        time.sleep(0.3)
        assert not held.done()  # held, not answered "not found"
        assert broker.call(client.invoke(send_v2("PollTopic", b"second", 0))).code == 0
        r = held.result(5)
        assert r.code == ResponseCode.SUCCESS and b"second" in r.body
        assert time.monotonic() - t0 < 5
        t0 = time.monotonic()
        r = broker.call(client.invoke(pull("PollTopic", 0, 2, suspend_ms=400), 10))
        assert r.code == ResponseCode.PULL_NOT_FOUND and 0.35 < time.monotonic() - t0 < 3
    finally:
        broker.call(client.close())


def test_pull_statuses_moved_retry_and_tag_filter(broker):
    client = broker.client()
    try:
        for tag in ("a", "b", "a"):
            assert broker.call(client.invoke(send_v2("TagTopic", tag.encode(), 0, {"TAGS": tag}))).code == 0
        broker.broker.store.wait_dispatched()
        r = broker.call(client.invoke(pull("TagTopic", 0, 0, sub="a")))
        assert r.code == ResponseCode.SUCCESS and r.body.count(b"TAGS\x01a") == 2 and b"TAGS\x01b" not in r.body
        r = broker.call(client.invoke(pull("TagTopic", 0, 1, sub="zzz")))
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "3"
        r = broker.call(client.invoke(pull("TagTopic", 0, 99)))
        assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "3"
        r = broker.call(client.invoke(pull("TagTopic", 3, 0)))
        assert r.code == ResponseCode.PULL_NOT_FOUND
        r = broker.call(client.invoke(pull("NoTopic", 0, 0)))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        broker.call(client.close())


def test_send_checks_map_to_rocketmq_codes(broker):
    client = broker.client()
    try:
        assert broker.call(client.invoke(send_v2("SCHEDULE_TOPIC_XXXX", b"x"))).code == ResponseCode.NO_PERMISSION
        assert broker.call(client.invoke(send_v2("bad topic!", b"x"))).code == ResponseCode.SYSTEM_ERROR
        r = broker.call(client.invoke(send_v2("QTopic", b"x", 99)))
        assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[99] is illegal" in r.remark
        nohdr = RemotingCommand(RequestCode.SEND_MESSAGE_V2, {"a": "PG"}, b"x")
        r = broker.call(client.invoke(nohdr))
        assert r.code == ResponseCode.SYSTEM_ERROR and "<topic> is null" in r.remark
        r = broker.call(client.invoke(send_v2("QTopic", b"x", -1), serialize_type=SerializeType.ROCKETMQ))
        assert r.code == ResponseCode.SUCCESS and r.serialize_type == SerializeType.ROCKETMQ
    finally:
        broker.call(client.close())


def _raw(port: int, data: bytes, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        if not read:
            return b""
        try:
            return s.recv(65536)
        except (socket.timeout, ConnectionError):
            return b""


def test_broken_clients_cannot_take_the_broker_down(broker):
    store = broker.broker.store
    before = store.get_max_phy_offset()
    good = encode_frame(send_v2("SafeTopic", b"ok"))
    head = b'{"code":310,"opaque":5,"flag":0,"extFields":{"b":'
    garbage = [
        struct.pack(">i", 2**31 - 1) + b"x" * 100,          # absurd length
        struct.pack(">i", -1),                               # negative length
        struct.pack(">ii", 4 + 10, 10) + b"{not json!",      # bad JSON
        struct.pack(">ii", 4 + len(head), len(head)) + head,  # truncated JSON header
        struct.pack(">ii", 8, 50) + b"\0" * 4,               # header longer than the frame
        struct.pack(">ii", 8, (7 << 24) | 4) + b"abcd",      # unknown serialize type
        good[:len(good) // 2],                                # half a frame, then silence
        os.urandom(256),
    ]
    for data in garbage:
        _raw(broker.port, data, read=False)
    # a half frame left hanging on an open socket does not block anyone else
    hanging = socket.create_connection(("127.0.0.1", broker.port))
    hanging.sendall(good[:20])
    r = _raw(broker.port, encode_frame(RemotingCommand(4242, opaque=9)))
    assert struct.unpack(">i", r[:4])[0] == len(r) - 4 and b'"code":3' in r
    r = _raw(broker.port, encode_frame(RemotingCommand(RequestCode.PULL_MESSAGE, {"topic": "x"}, opaque=3)))
    assert b'"code":1' in r  # missing header fields: SYSTEM_ERROR, no crash
    assert store.get_max_phy_offset() == before  # not one byte stored from any of it
    client = broker.client()
    try:
        assert broker.call(client.invoke(send_v2("SafeTopic", b"ok"))).code == ResponseCode.SUCCESS
    finally:
        broker.call(client.close())
        hanging.close()


def test_broker_command_stops_cleanly_on_sigterm(tmp_path):
    root = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-cli\nstorePathRootDir={root}\nmappedFileSizeCommitLog=1048576\n"
                    "mappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "rmqstore.cli", "broker", "--config", str(conf),
                             "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env=env)
    try:
        line = proc.stdout.readline()
        assert "listening on 127.0.0.1:" in line, proc.stderr.read() if proc.poll() is not None else line
        port = int(line.split("listening on 127.0.0.1:")[1].split(",")[0])
        r = _raw(port, encode_frame(send_v2("CliTopic", b"hello")))
        assert b'"code":0' in r
        assert (root / "abort").exists()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped cleanly" in out and "broker broker-cli listening" in line
    assert not (root / "abort").exists()
    assert (root / "config" / "topics.json").exists()
    assert "CliTopic" in loads((root / "config" / "topics.json").read_text())["topicConfigTable"]


def test_offsets_piggyback_oneway_update_and_queries(broker):
    client = broker.client()
    try:
        for n in range(3):
            r = broker.call(client.invoke(send_v2("OffTopic", f"m{n}".encode(), 0, {"KEYS": f"key{n}"})))
            assert r.code == 0
        broker.broker.store.wait_dispatched()

        def ask(code, **ext):
            return broker.call(client.invoke(RemotingCommand(code, {k: str(v) for k, v in ext.items()})))
        q = dict(consumerGroup="G_off", topic="OffTopic", queueId=0)
        assert ask(RequestCode.QUERY_CONSUMER_OFFSET, **q).ext_fields["offset"] == "0"  # young queue: from 0
        piggy = pull("OffTopic", 0, 1)
        piggy.ext_fields.update(sysFlag="5", commitOffset="1", consumerGroup="G_off")  # commit-offset + subscription
        assert broker.call(client.invoke(piggy)).code == ResponseCode.SUCCESS
        assert ask(RequestCode.QUERY_CONSUMER_OFFSET, **q).ext_fields["offset"] == "1"
        broker.call(client.invoke_oneway(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                         dict({k: str(v) for k, v in q.items()}, commitOffset="3"))))
        deadline = time.monotonic() + 5
        while ask(RequestCode.QUERY_CONSUMER_OFFSET, **q).ext_fields["offset"] != "3" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ask(RequestCode.QUERY_CONSUMER_OFFSET, **q).ext_fields["offset"] == "3"
        assert ask(RequestCode.GET_MAX_OFFSET, topic="OffTopic", queueId=0).ext_fields["offset"] == "3"
        assert ask(RequestCode.GET_MIN_OFFSET, topic="OffTopic", queueId=0).ext_fields["offset"] == "0"
        far = ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic="OffTopic", queueId=0, timestamp=2**62)
        assert far.code == 0 and far.ext_fields["offset"] in ("2", "3")
        found = ask(RequestCode.QUERY_MESSAGE, topic="OffTopic", key="key1", maxNum=32, beginTimestamp=0,
                    endTimestamp=2**62)
        assert found.code == 0 and b"m1" in found.body and b"m0" not in found.body
        assert ask(RequestCode.QUERY_MESSAGE, topic="OffTopic", key="nokey", maxNum=32, beginTimestamp=0,
                   endTimestamp=2**62).code == ResponseCode.QUERY_NOT_FOUND
        one = ask(RequestCode.VIEW_MESSAGE_BY_ID, offset=decode_message_id(r.ext_fields["msgId"])[1])
        assert one.code == 0 and decode_record(one.body).body == b"m2" and len(one.body) == decode_record(
            one.body).total_size
        assert ask(RequestCode.VIEW_MESSAGE_BY_ID, offset=10**9).code == ResponseCode.SYSTEM_ERROR
    finally:
        broker.call(client.close())


def test_subscription_groups_are_created_persisted_or_refused(tmp_path):
    root = tmp_path / "store"
    with BrokerThread(root) as bt:
        client = bt.client()
        try:
            assert bt.call(client.invoke(send_v2("GroupTopic", b"g"))).code == 0
            assert bt.call(client.invoke(pull("GroupTopic", 0, 0))).code in (ResponseCode.SUCCESS,
                                                                              ResponseCode.PULL_NOT_FOUND)
        finally:
            bt.call(client.close())
    table = loads((root / "config" / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert table["CG_proto"]["retryMaxTimes"] == 16 and table["CG_proto"]["consumeEnable"] is True
    with BrokerThread(root, auto_create_subscription_group=False) as bt:
        client = bt.client()
        try:
            r = bt.call(client.invoke(pull("GroupTopic", 0, 0)))
            assert r.code == ResponseCode.SUCCESS  # known from the file
            unknown = pull("GroupTopic", 0, 0)
            unknown.ext_fields["consumerGroup"] = "NewGroup"
            r = bt.call(client.invoke(unknown))
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        finally:
            bt.call(client.close())


def test_sync_flush_sends_wait_on_the_store_pool_not_on_the_loop(tmp_path):
    from broker_support import small_store_config
    from rmqstore.common.config import FlushDiskType

    with BrokerThread(tmp_path / "store", store_config=small_store_config(
            flush_disk_type=FlushDiskType.SYNC_FLUSH)) as bt:
        client = bt.client()
        try:
            async def many():
                return await asyncio.gather(*(client.invoke(send_v2("SyncTopic", f"s{n}".encode(), n % 4))
                                              for n in range(40)))
            responses = bt.call(many())
            assert all(r.code == ResponseCode.SUCCESS for r in responses)
            store = bt.broker.store
            assert store.commit_log.mapped_file_queue.flushed_where >= store.get_max_phy_offset()
        finally:
            bt.call(client.close())


def test_sends_the_store_put_at_once_are_answered_without_a_task_or_a_wakeup_each(broker):
    """ASYNC_FLUSH: the append is the whole put, so the broker answers in the connection's reader -- no task per
    send, no hand-off through the loop's self-pipe (a done future wrapped for the loop) -- issue 23."""
    client = broker.client()
    n = 40
    try:
        assert broker.call(client.invoke(send_v2("AtOnceTopic", b"warm"))).code == ResponseCode.SUCCESS
        counts = {"tasks": 0, "wakeups": 0}

        async def sends():
            loop = asyncio.get_running_loop()
            create_task, write_to_self = loop.create_task, loop._write_to_self

            def counting_task(*args, **kwargs):
                counts["tasks"] += 1
                return create_task(*args, **kwargs)

            def counting_wakeup():
                counts["wakeups"] += 1
                write_to_self()
            loop.create_task, loop._write_to_self = counting_task, counting_wakeup
            try:
                return [await client.invoke(send_v2("AtOnceTopic", f"m{i}".encode(), i % 4)) for i in range(n)]
            finally:
                del loop.create_task, loop._write_to_self
        responses = broker.call(sends())
        assert [r.code for r in responses] == [ResponseCode.SUCCESS] * n
        assert [int(r.ext_fields["queueOffset"]) for r in responses if r.ext_fields["queueId"] == "1"] == \
            list(range(n // 4))
        # the client's own loop is the broker's here (one thread): its invoke makes no task either
        assert counts["tasks"] < n // 2 and counts["wakeups"] < n // 2, counts
    finally:
        broker.call(client.close())


def test_sends_take_the_compiled_put_and_store_the_peer_as_born_host(broker):
    """The compiled Putter takes a born host as an Address (or a cached string); the peer's address as the socket
    gives it, a plain tuple, made it decline every send, so each took the pure put (issue 23's profile)."""
    put_path = broker.broker.store.put_path
    if put_path.async_putter is None:
        pytest.skip("the compiled put is not built (or RMQSTORE_PURE)")
    answers = []

    class Spy:  # the store's own Putter, its answers kept (None: declined, the pure path runs)
        def __init__(self, putter):
            self.putter = putter

        def put(self, item):
            result = self.putter.put(item)
            answers.append(result is not None)
            return result

        def put_batch(self, batch):
            return self.putter.put_batch(batch)

    put_path.async_putter = Spy(put_path.async_putter)
    client = broker.client()
    try:
        responses = [broker.call(client.invoke(send_v2("CompiledTopic", f"c{i}".encode(), i % 2))) for i in range(8)]
        assert [r.code for r in responses] == [ResponseCode.SUCCESS] * 8
        local = broker.call(_local_address(client))
        record = broker.broker.store.look_message_by_offset(decode_message_id(responses[-1].ext_fields["msgId"])[1])
        assert (record.born_host.host, record.born_host.port) == local
    finally:
        put_path.async_putter = put_path.async_putter.putter
        broker.call(client.close())
    assert answers[1:] == [True] * 7  # the first may make the topic (the pure path's checks, once)


async def _local_address(client) -> tuple[str, int]:
    return client.connection.writer.get_extra_info("sockname")[:2]


def test_sync_flush_answers_reach_the_loop_with_one_wakeup_a_flush_not_one_a_send(tmp_path):
    """A group commit answers many waiting sends at once; their results reach the event loop with one wake-up of
    its self-pipe for the burst (rmqstore.broker.handoff), not one per send as wrap_future's hand-off made."""
    from broker_support import small_store_config
    from rmqstore.common.config import FlushDiskType

    n = 40
    with BrokerThread(tmp_path / "store", store_config=small_store_config(
            flush_disk_type=FlushDiskType.SYNC_FLUSH)) as bt:
        client = bt.client()
        try:
            assert bt.call(client.invoke(send_v2("WakeTopic", b"warm"))).code == ResponseCode.SUCCESS
            wakeups = []

            async def many():
                loop = asyncio.get_running_loop()
                loop._write_to_self = lambda _w=loop._write_to_self: wakeups.append(1) or _w()
                try:
                    return await asyncio.gather(*(client.invoke(send_v2("WakeTopic", f"s{i}".encode(), i % 4))
                                                  for i in range(n)))
                finally:
                    del loop._write_to_self
            responses = bt.call(many())
            assert [r.code for r in responses] == [ResponseCode.SUCCESS] * n
            assert len(wakeups) < n // 2, f"{len(wakeups)} wake-ups for {n} sends"
        finally:
            bt.call(client.close())
