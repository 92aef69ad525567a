"""Transactions at the protocol level (issue 12, Done means 4), with frames as the Java producer sends them.

Half messages are invisible; END_TRANSACTION commit delivers, rollback does not, and an
unknown outcome makes the broker send CHECK_TRANSACTION_STATE to the producer's own
connection, whose answer is applied.
"""

from __future__ import annotations

import json
import time

import pytest

from broker_support import BrokerThread
from rmqstore.format.properties import parse_properties
from rmqstore.format.record import decode_message_id, decode_record
from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqstore.format.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from test_broker_protocol import pull, send_v2

pytestmark = pytest.mark.timeout(60)

GROUP = "PG_tx"
TOPIC = "TxTopic"


def _half(body: bytes, n: int) -> RemotingCommand:
    req = send_v2(TOPIC, body, 0, {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": f"UNIQ{n:04d}",
                                   "WAIT": "true"})
    req.ext_fields["a"] = GROUP
    req.ext_fields["f"] = str(TRANSACTION_PREPARED_TYPE)
    return req


def _end(sent: RemotingCommand, kind: int, from_check: bool = False) -> RemotingCommand:
    ext = sent.ext_fields
    return RemotingCommand(RequestCode.END_TRANSACTION, {
        "producerGroup": GROUP, "tranStateTableOffset": ext.get("queueOffset", ext.get("tranStateTableOffset")),
        "commitLogOffset": ext.get("commitLogOffset") or str(decode_message_id(ext["msgId"])[1]),
        "commitOrRollback": str(kind), "fromTransactionCheck": str(from_check).lower(),
        "msgId": ext["msgId"], "transactionId": ext["msgId"]})


def _bodies(bt, client) -> list[bytes]:
    bt.broker.store.wait_dispatched()
    r = bt.call(client.invoke(pull(TOPIC, 0, 0)))
    if r.code != ResponseCode.SUCCESS:
        return []
    out, pos = [], 0
    while pos < len(r.body):
        rec = decode_record(r.body, pos)
        out.append(rec.body)
        pos += rec.total_size
    return out


def test_commit_delivers_rollback_does_not_unknown_is_checked(tmp_path):
    with BrokerThread(tmp_path / "store", transaction_time_out=300, transaction_check_interval=200) as bt:
        checks = []

        async def on_check(conn, req):  # the producer's local transaction says: commit
            checks.append(req)
            await conn.invoke_oneway(_end(req, TRANSACTION_COMMIT_TYPE, from_check=True))

        producer = bt.call(RemotingClient({RequestCode.CHECK_TRANSACTION_STATE: on_check})
                           .connect("127.0.0.1", bt.port))
        consumer = bt.client()
        try:
            hb = {"clientID": "tx-producer", "producerDataSet": [{"groupName": GROUP}]}
            assert bt.call(producer.invoke(RemotingCommand(RequestCode.HEART_BEAT,
                                                           body=json.dumps(hb).encode()))).code == 0
            sent = [bt.call(producer.invoke(_half(f"tx{n}".encode(), n))) for n in range(3)]
            assert all(s.code == ResponseCode.SUCCESS for s in sent)
            assert _bodies(bt, consumer) == []  # half messages are invisible
            r = bt.call(producer.invoke(_end(sent[0], TRANSACTION_COMMIT_TYPE)))
            assert r.code == ResponseCode.SUCCESS
            assert bt.call(producer.invoke(_end(sent[1], TRANSACTION_ROLLBACK_TYPE))).code == ResponseCode.SUCCESS
            wrong = _end(sent[1], TRANSACTION_COMMIT_TYPE)
            wrong.ext_fields["producerGroup"] = "other"
            assert bt.call(producer.invoke(wrong)).remark == "The producer group wrong"
            bt.call(producer.invoke_oneway(_end(sent[2], 0)))  # unknown: the broker will ask
            assert _bodies(bt, consumer) == [b"tx0"]
            deadline = time.monotonic() + 10
            while _bodies(bt, consumer) != [b"tx0", b"tx2"] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _bodies(bt, consumer) == [b"tx0", b"tx2"]
            assert len(checks) == 1 and checks[0].ext_fields["msgId"] == "UNIQ0002"
            checked = decode_record(checks[0].body)  # the body is the half message itself
            assert checked.body == b"tx2" and parse_properties(checked.properties)["REAL_TOPIC"] == TOPIC
            time.sleep(0.6)  # later checks must not ask again: the op messages mark them done
            assert len(checks) == 1
        finally:
            bt.call(producer.close())
            bt.call(consumer.close())
        store = bt.broker.store
        committed = [store.look_message_by_offset(decode_message_id(s.ext_fields["msgId"])[1]) for s in sent]
        assert all(c.topic == "RMQ_SYS_TRANS_HALF_TOPIC" for c in committed)
        final = store.get_message("x", TOPIC, 0, 0, 10).messages[0]
        assert final.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE
        assert final.prepared_transaction_offset == committed[0].physical_offset
        assert store.get_max_offset_in_queue("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 3  # commit, rollback, check's commit
