"""``rmqstore admin``: mqadmin's commands and options against our broker, printing what mqadmin prints (the text
when stdout is not a terminal), ``--json`` for machines, rich tables on a terminal; refusals and servers that are
down as one error line.  The same commands beside the real mqadmin, against the Java broker and ours:
tests/interop/test_admin_client_interop.py."""

from __future__ import annotations

import asyncio
import io
import json
import re

import pytest

from conftest import run_cli
import test_admin_ops
from test_admin_ops import GROUP, TOPIC, World, traffic
from test_admin_client import StandIn, free_address
from rmqstore.commands.terminal import Streams
from rmqstore.remoting import RequestCode

pytestmark = pytest.mark.timeout(240)

world = test_admin_ops.world  # the same fixture: our broker, a wire client, an admin


def admin(w: World, *argv) -> tuple[int, str, str]:
    return run_cli(["admin", *argv, "-n", w.bt.namesrv])


def test_topic_status_prints_mqadmins_table(world):
    w = world
    traffic(w)
    code, out, err = admin(w, "topicStatus", "-t", TOPIC)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "#Broker Name                      #QID  #Min Offset           #Max Offset             #Last Updated"
    assert [line.split()[:4] for line in lines[1:]] == [["broker-a", str(q), "0", str(m)]
                                                        for q, m in enumerate((2, 2, 2, 1))]
    assert all(re.search(r"    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}$", line) for line in lines[1:])


def test_consumer_progress_and_its_json(world):
    w = world
    traffic(w)
    code, out, _ = admin(w, "consumerProgress", "-g", GROUP)
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith(TOPIC)]
    assert [r[2:6] for r in rows] == [["0", "2", "1", "1"], ["1", "2", "2", "0"], ["2", "2", "0", "2"],
                                      ["3", "1", "0", "1"]]
    assert out.endswith("\nDiff Total: 4\n") and re.search(r"\nConsume TPS: \d+\.\d\d\n", out)
    code, out, _ = admin(w, "consumerProgress", "-g", GROUP, "--json")
    data = json.loads(out)
    assert code == 0 and data["group"] == GROUP
    assert sum(q["broker_offset"] - q["consumer_offset"] for q in data["queues"]) == 4
    code, out, _ = admin(w, "consumerProgress")
    (row,) = [line.split() for line in out.splitlines() if line.startswith(GROUP)]
    assert row == [GROUP, "1", "V4_9_8", "PUSH", "CLUSTERING", row[5], "4"]


def test_update_and_delete_topic_and_group_print_mqadmins_lines(world):
    w = world
    code, out, err = admin(w, "updateTopic", "-b", w.address, "-t", "CliT", "-r", "3", "-w", "2")
    assert (code, out) == (0, f"create topic to {w.address} success.\nTopicConfig [topicName=CliT, readQueueNums=3, "
                              "writeQueueNums=2, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]\n"), err
    code, out, _ = admin(w, "updateSubGroup", "-c", "DefaultCluster", "-g", "CliG", "-r", "5")
    assert out == (f"create subscription group to {w.address} success.\nSubscriptionGroupConfig [groupName=CliG, "
                   "consumeEnable=true, consumeFromMinEnable=false, consumeBroadcastEnable=false, retryQueueNums=1, "
                   "retryMaxTimes=5, brokerId=0, whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]\n")
    assert w.bt.broker.groups.table["CliG"].retry_max_times == 5
    code, out, _ = admin(w, "deleteSubGroup", "-b", w.address, "-g", "CliG")
    assert out == f"delete subscription group [CliG] from broker [{w.address}] success.\n"
    code, out, _ = admin(w, "deleteTopic", "-c", "DefaultCluster", "-t", "CliT")
    assert out == ("delete topic [CliT] from cluster [DefaultCluster] success.\n"
                   "delete topic [CliT] from NameServer success.\n")
    assert w.bt.broker.topics.select("CliT") is None


def test_topic_route_as_fastjson_pretty_prints_it(world):
    w = world
    admin(w, "updateTopic", "-b", w.address, "-t", "CliRouteT", "-r", "2", "-w", "2")
    code, out, _ = admin(w, "topicRoute", "-t", "CliRouteT")
    assert out == ("{\n\t\"brokerDatas\":[\n\t\t{\n\t\t\t\"brokerAddrs\":{0:\"" + w.address + "\"\n\t\t\t},\n"
                   "\t\t\t\"brokerName\":\"broker-a\",\n\t\t\t\"cluster\":\"DefaultCluster\"\n\t\t}\n\t],\n"
                   "\t\"filterServerTable\":{},\n\t\"queueDatas\":[\n\t\t{\n\t\t\t\"brokerName\":\"broker-a\",\n"
                   "\t\t\t\"perm\":6,\n\t\t\t\"readQueueNums\":2,\n\t\t\t\"topicSysFlag\":0,\n"
                   "\t\t\t\"writeQueueNums\":2\n\t\t}\n\t]\n}\n")
    code, out, _ = admin(w, "topicRoute", "-t", "CliRouteT", "-l")
    assert out.splitlines()[1].split() == ["DefaultCluster", "broker-a", "{0=" + w.address + "}", "2", "2", "6"]
    assert out.splitlines()[3].split() == ["Total:", "1", "2", "2"]


def test_connections_status_config_reset_and_messages(world):
    w = world
    ids = traffic(w)
    code, out, _ = admin(w, "consumerConnection", "-g", GROUP)
    assert out.splitlines()[1].split()[2:] == ["JAVA", "V4_9_8"] and f"{TOPIC}                 *" in out
    assert out.endswith("ConsumeType: CONSUME_PASSIVELY\nMessageModel: CLUSTERING\n"
                        "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET\n")
    code, out, _ = admin(w, "producerConnection", "-g", "PG_ops", "-t", TOPIC)
    assert re.fullmatch(r"0001  127\.0\.0\.1@ops +127\.0\.0\.1:\d+ +JAVA +V4_9_8\n", out)
    code, out, _ = admin(w, "brokerStatus", "-b", w.address)
    assert "msgPutTotalTodayNow             : 7\n" in out and out.splitlines() == sorted(out.splitlines())
    code, out, _ = admin(w, "getBrokerConfig", "-b", w.address)
    assert out.startswith(f"============{w.address}============\n") and "brokerName" + " " * 40 + "=  broker-a\n" in out
    code, out, _ = admin(w, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0")
    assert out.startswith(f"rollback consumer offset by specified group[{GROUP}], topic[{TOPIC}], force[true], "
                          "timestamp(string)[0], timestamp(long)[0]\n")
    assert [line.split() for line in out.splitlines()[2:]] == [["broker-a", str(q), "0"] for q in range(4)]
    code, out, _ = admin(w, "queryMsgById", "-i", ids[1])
    assert f"OffsetID:            {ids[1]}\n" in out and "Keys:                [k1]\n" in out
    assert "Message Body:        ops 1\n" in out and f"MessageTrack [consumerGroup={GROUP}, trackType=" in out
    code, out, _ = admin(w, "queryMsgByKey", "-t", TOPIC, "-k", "k6")
    assert code == 0 and out.splitlines()[1].split()[1:] == ["2", "1"]
    code, out, err = admin(w, "queryMsgByKey", "-t", TOPIC, "-k", "nokey")
    assert code == 1 and "no message" in err


def test_cluster_list_and_topic_list(world):
    w = world
    traffic(w)
    code, out, _ = admin(w, "clusterList")
    row = out.splitlines()[1].split()
    assert row[:5] == ["DefaultCluster", "broker-a", "0", w.address, "V4_9_8"]
    code, out, _ = admin(w, "clusterList", "-m")
    assert out.splitlines()[1].split() == ["DefaultCluster", "broker-a", "0", "0", "7", "0"]
    code, out, _ = admin(w, "topicList")
    assert TOPIC in out.splitlines() and not out.startswith("#")
    code, out, _ = admin(w, "topicList", "-c")
    assert [line.split() for line in out.splitlines() if f" {TOPIC} " in line] == [["DefaultCluster", TOPIC, GROUP]]


def test_refusals_and_servers_down_are_one_error_line(world, capsys):
    w = world
    code, out, err = admin(w, "topicStatus", "-t", "NoSuchTopic")
    assert code == 2 and out == ""
    assert err.startswith("rmqstore: error: GET_ROUTEINFO_BY_TOPIC to ") and "CODE: 17  DESC: No topic route" in err
    code, out, err = run_cli(["admin", "clusterList", "-n", free_address()])
    assert code == 2 and "cannot reach" in err
    code, out, err = admin(w, "updateTopic", "-t", "NoTargetT")
    usage = capsys.readouterr().err  # argparse's own line
    assert code == 2 and "-b" in usage and "-c" in usage  # mqadmin's option group: one of them is required


def test_a_terminal_gets_rich_tables(world, monkeypatch):
    w = world
    traffic(w)
    from rmqstore import cli

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out, err = Tty(), io.StringIO()
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["admin", "topicStatus", "-t", TOPIC, "-n", w.bt.namesrv], stdout=out, stderr=err) == 0, \
        err.getvalue()
    text = out.getvalue()
    assert "┃" in text or "│" in text  # a rich table's rules
    assert "Broker Name" in text and "#Broker Name" not in text
    assert isinstance(Streams(None, out, err).stdout_is_tty, bool)


def test_help_lists_mqadmins_commands_and_options(capsys):
    code, _, _ = run_cli(["admin", "--help"])
    out = capsys.readouterr().out
    assert code == 0
    from rmqstore.commands.admin import SUBCOMMANDS

    assert len(SUBCOMMANDS) == 17 and all(name in out for name in SUBCOMMANDS)
    code, _, _ = run_cli(["admin", "resetOffsetByTime", "--help"])
    out = capsys.readouterr().out
    assert code == 0 and all(flag in out for flag in ("-g GROUP", "-t TOPIC", "-s TIMESTAMP", "-n NAMESRV",
                                                      "--timeout"))


def test_a_server_that_does_not_answer_is_a_timeout_naming_it():
    async def never(conn, req):
        await asyncio.sleep(3600)

    with StandIn({RequestCode.GET_BROKER_CLUSTER_INFO: never}) as silent:
        code, out, err = run_cli(["admin", "clusterList", "-n", silent.address, "--timeout", "0.5"])
    assert (code, out) == (2, "")
    assert err == f"rmqstore: error: GET_BROKER_CLUSTER_INFO to {silent.address}: no answer in 0.5 s\n"


def test_a_broker_refusal_is_its_code_and_remark(world):
    w = world
    code, out, err = admin(w, "updateTopic", "-b", w.address, "-t", "TBW102")
    assert (code, out) == (2, "")
    assert err == (f"rmqstore: error: UPDATE_AND_CREATE_TOPIC to {w.address} refused: CODE: 1  DESC: The "
                   "topic[TBW102] is conflict with system topic.\n")
    code, out, err = admin(w, "consumerConnection", "-g", "NobodyG")
    # as mqadmin: the group's retry topic is looked up first, and there is none
    assert code == 2 and "CODE: 17  DESC: No topic route info in name server for the topic: %RETRY%NobodyG" in err


#: what mqadmin topicList printed for a name server that listed these topics sorted (interop run, issue 24):
#: mqadmin reads the list into a HashSet and prints the set, so its order is the set's, not the name server's
MQADMIN_TOPIC_LIST = ["%RETRY%CG_admin", "%RETRY%CG_adminb", "AdminDelay", "BenchmarkTest", "OFFSET_MOVED_EVENT",
                      "TBW102", "SELF_TEST_TOPIC", "DefaultCluster", "SCHEDULE_TOPIC_XXXX", "DefaultCluster_REPLY_TOPIC",
                      "AdmClientT", "AdminT", "broker-a"]


def test_topic_list_prints_in_mqadmins_order_whatever_the_name_servers():
    from rmqstore.admin import TopicList, text

    for listed in (sorted(MQADMIN_TOPIC_LIST), list(reversed(MQADMIN_TOPIC_LIST))):
        assert text.render(text.topic_list(TopicList(listed))).splitlines() == MQADMIN_TOPIC_LIST
