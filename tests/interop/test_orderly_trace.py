"""Message trace with the Java 4.9.8 client and ``mqadmin queryMsgTraceById``, our broker against the Java broker.

The same traffic against both (tests/interop/java/TraceClient.java): a producer and a push consumer built
with ``enableMsgTrace`` send and consume three messages; their trace records (Pub, SubBefore, SubAfter)
go to ``RMQ_SYS_TRACE_TOPIC`` and are queried back by msgId, decoded as the tool decodes them; then
RocketMQ's own ``mqadmin queryMsgTraceById`` prints one message's trace.  The Java broker creates the
trace topic at start (``traceTopicEnable=true``); ours runs twice, so configured and with the defaults
(the first trace record creates the topic from TBW102).  Both outputs are compared with what differs between the runs masked: message ids,
the broker's address, times and costs.
"""

from __future__ import annotations

import re

import pytest

from broker_support import BrokerThread, NamesrvThread

pytestmark = pytest.mark.timeout(600)

COUNT = 3


def _masked_client_output(out: str) -> tuple[list[str], str]:
    """(the lines, ids and addresses masked; the first message's msgId)."""
    ids, broker, offset_ids = {}, None, {}
    for line in out.splitlines():
        if line.startswith("SENT "):
            _, i, msg_id, offset_id, broker = line.split()
            ids[msg_id], offset_ids[offset_id] = f"<msgId {i}>", f"<offsetMsgId {i}>"
    assert len(ids) == COUNT, out
    lines = []
    for line in out.splitlines():
        if line.startswith(("SENT", "CONSUMED", "TRACE")):
            for real, mask in list(ids.items()) + list(offset_ids.items()) + [(broker, "<broker>")]:
                line = line.replace(real, mask)
            lines.append(line)
    first = next(msg_id for msg_id, mask in ids.items() if mask == "<msgId 0>")
    return lines, first


_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_COST = re.compile(r"\b\d+ms *")  # with the padding of its %-10s column


def _masked_tool_output(text: str) -> str:
    return _COST.sub("<n>ms ", _TIME.sub("<time>", text))


def _run(rmq_java, namesrv: str) -> tuple[list[str], str]:
    out = rmq_java.run_java("TraceClient.java", namesrv, "TraceT", COUNT, timeout=300)
    lines, first = _masked_client_output(out)
    tool = rmq_java.mqadmin("queryMsgTraceById", "-i", first, namesrv=namesrv)
    return lines, _masked_tool_output(tool.stdout)


def test_trace_written_and_queried_back_as_with_the_java_broker(rmq_java, tmp_path):
    with NamesrvThread() as namesrv, \
            rmq_java.java_broker(tmp_path / "java", {"namesrvAddr": namesrv.address, "brokerName": "broker-a",
                                                     "traceTopicEnable": "true"}):
        java, java_tool = _run(rmq_java, namesrv.address)
    runs = {}
    for enable in (True, False):  # the trace topic created at start, or by the first trace record
        with BrokerThread(tmp_path / f"ours-{enable}", trace_topic_enable=enable) as bt:
            runs[enable] = _run(rmq_java, bt.namesrv)
            queues = bt.broker.topics.select("RMQ_SYS_TRACE_TOPIC").write_queue_nums
            stored = sum(bt.broker.store.get_max_offset_in_queue("RMQ_SYS_TRACE_TOPIC", q) for q in range(queues))
            assert (queues, stored > 0) == (1 if enable else 4, True)
    assert java[COUNT] == f"CONSUMED {COUNT}", java
    kinds = sorted({line.split()[2] for line in java if line.startswith("TRACE")})
    assert kinds == ["Pub", "SubAfter", "SubBefore"], java
    assert not any("incomplete" in line for line in java), java
    assert "Pub" in java_tool and "Sub" in java_tool and "PG_trace" in java_tool and "CG_trace" in java_tool, java_tool
    for ours, our_tool in runs.values():
        assert ours == java, "\n".join(["ours:", *ours, "java:", *java])
        assert our_tool == java_tool, f"ours:\n{our_tool}\njava:\n{java_tool}"
