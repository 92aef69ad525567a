"""Record what a Java RocketMQ 4.9.8 name server and broker answer the admin requests, as fixtures for the unit tests
of :mod:`rmqstore.admin`'s body parsers (tests/fixtures/admin/, see its README.md).

    PYTHONPATH=$PWD:$PWD/tests python3 -m tests.interop.record_admin_bodies tests/fixtures/admin

Starts a Java name server and broker (``broker-a``, cluster ``DefaultCluster``) through the interop harness, runs
``AdminTraffic.java`` (keyed messages to AdminT, consumer group CG_admin 3 behind, a delayed message) and keeps
``AdminbClients.java`` online (producer PG_adminb and consumer CG_adminb on AdminbClientT, 10 messages consumed),
then asks each request once and writes, per request, ``<name>.body`` (the response body, byte for byte) and an
entry of ``responses.json`` (the request's code and header, the response's code, remark and header).  Addresses,
times and ids in the bodies are whatever that run had: the tests read values relative to each other.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from rmqstore.remoting import RemotingClient, RemotingCommand, RequestCode

from .java_clients import JavaClients
from .rmqjava import JavaDist, case_lines, find_dist

R = RequestCode
CLIENT_TOPIC = "AdminbClientT"


def namesrv_requests() -> dict[str, tuple[int, dict, int]]:
    """name -> (code, header, version) asked of the name server."""
    return {
        "cluster_info": (R.GET_BROKER_CLUSTER_INFO, {}, 409),
        "topic_list": (R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, 409),
        "route_standard": (R.GET_ROUTEINFO_BY_TOPIC, {"topic": "AdminT"}, 409),  # 4.9.4 and later: quoted keys
        "route_fastjson": (R.GET_ROUTEINFO_BY_TOPIC, {"topic": "AdminT"}, 0),  # older clients: fastjson's {0:"..."}
        "route_missing": (R.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"}, 409),
    }


def broker_requests(first_offset_id: str) -> dict[str, tuple[int, dict, int]]:
    physical = int(first_offset_id[16:], 16)
    return {
        "topic_stats": (R.GET_TOPIC_STATS_INFO, {"topic": "AdminT"}, 409),
        "topic_stats_missing": (R.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"}, 409),
        "consume_stats": (R.GET_CONSUME_STATS, {"consumerGroup": "CG_admin"}, 409),
        "consume_stats_online": (R.GET_CONSUME_STATS, {"consumerGroup": "CG_adminb"}, 409),
        "broker_consume_stats": (R.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}, 409),
        "consumer_connection": (R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG_adminb"}, 409),
        "consumer_connection_offline": (R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG_admin"}, 409),
        "producer_connection": (R.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG_adminb"}, 409),
        "runtime_info": (R.GET_BROKER_RUNTIME_INFO, {}, 409),
        "broker_config": (R.GET_BROKER_CONFIG, {}, 409),
        "topic_config": (R.GET_ALL_TOPIC_CONFIG, {}, 409),
        "subscription_groups": (R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, 409),
        "consume_by_who": (R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "AdminT"}, 409),
        "view_message": (R.VIEW_MESSAGE_BY_ID, {"offset": str(physical)}, 409),
        "query_message": (R.QUERY_MESSAGE, {"topic": "AdminT", "key": "key3", "maxNum": "64", "beginTimestamp": "0",
                                            "endTimestamp": str(2**63 - 1), "_UNIQUE_KEY_QUERY": "false"}, 409),
        "update_topic_refused": (R.UPDATE_AND_CREATE_TOPIC, {"topic": "TBW102", "defaultTopic": "TBW102",
                                                             "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
                                                             "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
                                                             "order": "false"}, 409),
        # last: it moves the online consumer's offsets
        "reset_offset": (R.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": CLIENT_TOPIC, "group": "CG_adminb",
                                                           "timestamp": "0", "isForce": "true"}, 409),
        "reset_offset_offline": (R.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "AdminT", "group": "CG_admin",
                                                                   "timestamp": "0", "isForce": "true"}, 409),
    }


async def ask_all(address: str, requests: dict[str, tuple[int, dict, int]], out: Path) -> dict[str, dict]:
    host, _, port = address.rpartition(":")
    client = await RemotingClient().connect(host, int(port))
    index = {}
    try:
        for name, (code, header, version) in requests.items():
            answer = await client.invoke(RemotingCommand(int(code), dict(header), version=version), 10)
            (out / f"{name}.body").write_bytes(answer.body)
            index[name] = {"request": {"code": int(code), "extFields": header, "version": version},
                           "response": {"code": answer.code, "remark": answer.remark, "extFields": answer.ext_fields}}
    finally:
        await client.close()
    return index


def wait_for_commits(broker: str, group: str, count: int, timeout: float = 120) -> None:
    """Until the broker holds ``count`` consumed messages of ``group`` (its consumer commits every second)."""
    deadline = time.monotonic() + timeout
    request = RemotingCommand(R.GET_CONSUME_STATS, {"consumerGroup": group}, version=409)
    while time.monotonic() < deadline:
        answer = asyncio.run(ask(broker, request))
        committed = re.findall(rb'"consumerOffset":(\d+)', answer.body)
        if sum(int(c) for c in committed) >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"{group} did not commit {count} messages in {timeout} s")


async def ask(address: str, request: RemotingCommand) -> RemotingCommand:
    host, _, port = address.rpartition(":")
    client = await RemotingClient().connect(host, int(port))
    try:
        return await client.invoke(request, 10)
    finally:
        await client.close()


def record(dist: JavaDist, base: Path, out: Path) -> None:
    with dist.java_namesrv(base / "ns") as namesrv, \
            dist.java_broker(base / "broker", {"namesrvAddr": namesrv, "brokerName": "broker-a"}) as broker:
        first = case_lines(dist.run_java("AdminTraffic.java", namesrv, timeout=300))[namesrv].split("first=")[1]
        clients = JavaClients(dist, {"java": namesrv}, CLIENT_TOPIC)
        try:
            clients.wait_for(lambda: clients.seen("STARTED"))
            clients.command("SEND 10")
            clients.wait_for(lambda: len(set(clients.consumed("java"))) == 10)
            wait_for_commits(broker, "CG_adminb", 10)
            index = asyncio.run(ask_all(namesrv, namesrv_requests(), out))
            index.update(asyncio.run(ask_all(broker, broker_requests(first), out)))
        finally:
            clients.close()
    meta = {"namesrv": namesrv, "broker": broker, "first_offset_msg_id": first, "recorded": int(time.time() * 1000)}
    (out / "responses.json").write_text(json.dumps({"run": meta, "responses": index}, indent=1, sort_keys=True) + "\n",
                                        encoding="utf-8")


def main(argv: list[str]) -> int:
    root, why = find_dist()
    if root is None:
        print(why, file=sys.stderr)
        return 2
    out = Path(argv[0] if argv else "tests/fixtures/admin")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="record-admin-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        record(JavaDist(root, work), Path(tmp), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
