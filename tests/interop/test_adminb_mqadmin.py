"""RocketMQ 4.9.8's own mqadmin against our broker and against a Java broker, on the same traffic (issue 21):
updateTopic, deleteTopic (what lands on the broker), updateSubGroup, deleteSubGroup, getBrokerConfig,
updateBrokerConfig, consumerConnection, producerConnection, consumerStatus and resetOffsetByTime.

Two sides: a Java name server with the Java 4.9.8 broker ``broker-a`` of cluster ``DefaultCluster``, and a
standalone ``rmqstore namesrv`` with an rmqstore broker of the same name and cluster (so the name-server half of
a command, DELETE_TOPIC_IN_NAMESRV or GET_BROKER_CLUSTER_INFO, is ours on our side).  One
Java program holds a producer and a push consumer per side and sends both sides the same messages; mqadmin runs
its commands for both sides in one JVM (``MqadminBatch.java``: MQAdminStartup.main0, what bin/mqadmin runs).
Each command's output is compared side by side after :func:`mask` has replaced what must differ (addresses,
client ids, the paths of the stores); the files the brokers write (topics.json, subscriptionGroup.json, the
rewritten broker.conf) are compared as well.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_support import BrokerThread, NamesrvThread
from rmqstore.broker.config import parse_properties_text
from rmqstore.broker.config_defaults import MACHINE_KEYS, rocketmq_defaults
from rmqstore.broker.jsonfmt import loads

from .java_clients import JavaClients
from .mqadmin_support import mqadmin_batch as mqadmin
from .rmqjava import case_lines

pytestmark = pytest.mark.timeout(900)

CLIENT_TOPIC = "AdminbClientT"


@dataclass
class Side:
    name: str
    namesrv: str
    broker: str  # the broker's address
    store: Path
    conf: Path  # the broker.conf it was started with (updateBrokerConfig rewrites it)
    thread: BrokerThread | None = None  # ours


@pytest.fixture(scope="module")
def sides(rmq_java, tmp_path_factory):
    base = tmp_path_factory.mktemp("adminb")
    with contextlib.ExitStack() as stack:
        ns_java = stack.enter_context(rmq_java.java_namesrv(base / "ns-java"))
        ns_ours = stack.enter_context(NamesrvThread()).address
        java = stack.enter_context(rmq_java.java_broker(base / "java", {"namesrvAddr": ns_java,
                                                                        "brokerName": "broker-a"}))
        conf = base / "ours" / "broker.conf"
        conf.parent.mkdir()
        conf.write_text("brokerName=broker-a\nbrokerClusterName=DefaultCluster\n", encoding="utf-8")
        bt = stack.enter_context(BrokerThread(base / "ours" / "store", embedded_namesrv=False, namesrv_addr=ns_ours,
                                              broker_config_path=str(conf)))
        yield {"java": Side("java", ns_java, java, base / "java" / "store", base / "java" / "broker.conf"),
               "ours": Side("ours", ns_ours, f"127.0.0.1:{bt.port}", Path(bt.broker.store_root), conf, bt)}


def both(rmq_java, sides, *commands) -> dict[str, list[str]]:
    """Each command, a function of the side, run against both sides: {side: outputs}, masked."""
    runs = [(name, command(side)) for name, side in sides.items() for command in commands]
    outputs = mqadmin(rmq_java, *(c for _, c in runs))
    result: dict[str, list[str]] = {name: [] for name in sides}
    for (name, _), text in zip(runs, outputs):
        result[name].append(mask(text, sides[name]))
    return result


def assert_same(out: dict[str, list[str]]) -> None:
    """Both sides printed the same, command by command; else the differences, line by line."""
    for n, (java, ours) in enumerate(zip(out["java"], out["ours"])):
        if java != ours:
            diff = difflib.unified_diff(java.splitlines(), ours.splitlines(), "java", "ours", lineterm="")
            raise AssertionError(f"command {n} printed otherwise:\n" + "\n".join(diff))
    assert len(out["java"]) == len(out["ours"])


_CLIENT_ID = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}@[\w.-]+")  # ip@instanceName
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")
_RUNNING_INFO_FILE = re.compile(r"\b\d{13}/<client>")


def mask(text: str, side: Side) -> str:
    """What must differ between the sides, replaced: the broker's and name server's addresses, client ids (the
    host's address and the side's name), client addresses, consumerStatus's file names (a time), the store."""
    text = text.replace(side.broker, "<broker>").replace(side.namesrv, "<namesrv>").replace(str(side.store), "<store>")
    text = _CLIENT_ID.sub("<client>", text)
    text = _ADDRESS.sub("<address>", text)
    return _RUNNING_INFO_FILE.sub("<time>/<client>", text)


def config_entries(side: Side, name: str, table: str) -> dict:
    with open(side.store / "config" / name, encoding="utf-8") as f:
        return loads(f.read())[table]


def entry_texts(side: Side, name: str) -> dict[str, str]:
    """Each entry's pretty-printed block in a config file, byte for byte as the broker wrote it, by name."""
    text = (side.store / "config" / name).read_text(encoding="utf-8")
    return dict(re.findall(r'^\t\t"([^"]+)":(\{\n.*?^\t\t\})', text, re.M | re.S))


def assert_same_entries(name: str, sides) -> None:
    """Every entry both brokers' ``name`` holds is the same text; the file's frame too (entries aside)."""
    java, ours = (entry_texts(sides[n], name) for n in ("java", "ours"))
    common = set(java) & set(ours)
    assert {k: ours[k] for k in common} == {k: java[k] for k in common}
    frames = [re.sub(r'^\t\t"[^"]+":\{\n.*?^\t\t\},?\n', "", (sides[n].store / "config" / name).read_text(
        encoding="utf-8"), flags=re.M | re.S) for n in ("java", "ours")]
    frames = [re.sub(r'"(counter|timestamp)":\d+', r'"\1":N', frame) for frame in frames]
    assert frames[0] == frames[1], frames


# -- topics ---------------------------------------------------------------------------------------

def test_update_topic_lands_in_topics_json_as_the_java_broker_writes_it(rmq_java, sides):
    out = both(rmq_java, sides,
               lambda s: ["updateTopic", "-n", s.namesrv, "-b", s.broker, "-t", "AdminbT", "-r", "4", "-w", "6"],
               lambda s: ["updateTopic", "-n", s.namesrv, "-b", s.broker, "-t", "AdminbT", "-r", "2", "-w", "2",
                          "-p", "4"],
               lambda s: ["updateTopic", "-n", s.namesrv, "-b", s.broker, "-t", "TBW102"],
               lambda s: ["topicRoute", "-n", s.namesrv, "-t", "AdminbT"])
    assert_same(out)
    assert out["java"][1].startswith("create topic to <broker> success.\nTopicConfig [topicName=AdminbT, "
                                     "readQueueNums=2, writeQueueNums=2, perm=R--")
    assert "CODE: 1  DESC: The topic[TBW102] is conflict with system topic." in out["java"][2]
    assert '"perm":4' in out["java"][3] and '"writeQueueNums":2' in out["java"][3]
    # byte for byte, entry by entry: AdminbT and the system topics (not the ones 4.9.8 creates lazily)
    assert_same_entries("topics.json", sides)
    java, ours = (config_entries(sides[n], "topics.json", "topicConfigTable") for n in ("java", "ours"))
    assert "AdminbT" in java and "AdminbT" in ours
    assert set(java) - set(ours) <= {"RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}, set(java) ^ set(ours)


def test_delete_topic_removes_it_from_the_broker(rmq_java, sides):
    out = both(rmq_java, sides,
               lambda s: ["updateTopic", "-n", s.namesrv, "-b", s.broker, "-t", "AdminbDelT", "-r", "2", "-w", "2"],
               lambda s: ["sendMessage", "-n", s.namesrv, "-t", "AdminbDelT", "-p", "gone soon", "-b", "broker-a",
                          "-i", "1"],
               lambda s: ["deleteTopic", "-n", s.namesrv, "-c", "DefaultCluster", "-t", "AdminbDelT"],
               lambda s: ["topicRoute", "-n", s.namesrv, "-t", "AdminbDelT"],
               lambda s: ["deleteTopic", "-n", s.namesrv, "-c", "DefaultCluster", "-t", "TBW102"])
    # sendMessage prints the message id, which names the broker's store address and offset: masked whole
    for side in out.values():
        side[1] = re.sub(r"\b[0-9A-F]{32,}\b", "<msgId>", side[1])
    assert_same(out)
    assert out["java"][2] == ("delete topic [AdminbDelT] from cluster [DefaultCluster] success.\n"
                              "delete topic [AdminbDelT] from NameServer success.\n")
    assert "No topic route info in name server for the topic: AdminbDelT" in out["java"][3]
    assert "The topic[TBW102] is conflict with system topic." in out["java"][4]
    for side in sides.values():
        assert "AdminbDelT" not in config_entries(side, "topics.json", "topicConfigTable"), side.name
        assert not (side.store / "consumequeue" / "AdminbDelT" / "1").exists(), side.name


# -- subscription groups --------------------------------------------------------------------------

def test_update_and_delete_sub_group(rmq_java, sides):
    out = both(rmq_java, sides,
               lambda s: ["updateSubGroup", "-n", s.namesrv, "-b", s.broker, "-g", "AdminbG", "-r", "3", "-q", "2",
                          "-s", "true", "-m", "true", "-d", "true"],
               lambda s: ["updateSubGroup", "-n", s.namesrv, "-b", s.broker, "-g", "AdminbKeptG"])
    assert_same(out)
    assert out["java"][0].startswith("create subscription group to <broker> success.\n")
    assert_same_entries("subscriptionGroup.json", sides)
    java, ours = (config_entries(sides[n], "subscriptionGroup.json", "subscriptionGroupTable")
                  for n in ("java", "ours"))
    assert set(java) == set(ours) and {"AdminbG", "AdminbKeptG"} <= set(java)
    out = both(rmq_java, sides,
               lambda s: ["deleteSubGroup", "-n", s.namesrv, "-b", s.broker, "-g", "AdminbG", "-r", "true"])
    assert out["ours"] == out["java"] == ["delete subscription group [AdminbG] from broker [<broker>] success.\n"]
    for side in sides.values():
        groups = config_entries(side, "subscriptionGroup.json", "subscriptionGroupTable")
        assert "AdminbG" not in groups and "AdminbKeptG" in groups, side.name


# -- the broker's configuration -------------------------------------------------------------------

#: keys only rmqstore's broker has (its own settings); keys whose values must differ between the two brokers
OURS_ONLY = {"maxConnections", "serverFirstFrameTimeoutSeconds", "serverFrameTimeoutSeconds", "serverUnsentBudgetBytes",
             "serverConnectionUnsentHighBytes", "aclFile", "preFaultMappedFile", "allocateWaitTimeoutMs", "storeHost",
             "haEnable", "haListenHost", "haReconnectInterval", "native"}
JAVA_ONLY = {"rocketmqHome"}
DIFFERENT = {"listenPort", "haListenPort", "namesrvAddr", "storePathRootDir", "brokerIP2",
             # broker_support's small store on our side; 4.9.8's defaults on the Java side
             "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum"}


def _printed_config(text: str) -> dict[str, str]:
    """getBrokerConfig's lines ``%-50s=  %s`` as a table."""
    lines = [line for line in text.splitlines() if line and not line.startswith("=====")]
    assert all(re.match(r"^\S+ *=  ", line) for line in lines), text
    return {k.strip(): v for k, v in (line.split("=  ", 1) for line in lines)}


def test_get_and_update_broker_config(rmq_java, sides):
    out = both(rmq_java, sides,
               lambda s: ["getBrokerConfig", "-n", s.namesrv, "-b", s.broker],
               lambda s: ["updateBrokerConfig", "-n", s.namesrv, "-b", s.broker, "-k", "fileReservedTime", "-v", "48"],
               lambda s: ["updateBrokerConfig", "-n", s.namesrv, "-b", s.broker, "-k", "shortPollingTimeMills",
                          "-v", "700"],
               lambda s: ["updateBrokerConfig", "-n", s.namesrv, "-b", s.broker, "-k", "brokerConfigPath", "-v", "/x"],
               lambda s: ["getBrokerConfig", "-n", s.namesrv, "-c", "DefaultCluster"])
    java, ours = _printed_config(out["java"][0]), _printed_config(out["ours"][0])
    assert (set(ours) - set(java), set(java) - set(ours)) == (OURS_ONLY, JAVA_ONLY)
    same = set(java) & set(ours) - DIFFERENT
    assert {k: ours[k] for k in same} == {k: java[k] for k in same}
    assert out["ours"][0].startswith("============<broker>============\n")
    assert out["ours"][1:4] == out["java"][1:4]
    assert out["java"][1] == "update broker config success, <broker>\n"
    assert "CODE: 16  DESC: Can not update config in black list." in out["java"][3]
    after = {name: _printed_config(text[4].split("\n", 1)[1]) for name, text in out.items()}
    for name, printed in after.items():
        assert (printed["fileReservedTime"], printed["shortPollingTimeMills"]) == ("48", "700"), name
        saved = parse_properties_text(sides[name].conf.read_text(encoding="utf-8"))
        assert (saved["fileReservedTime"], saved["shortPollingTimeMills"]) == ("48", "700"), name
        assert saved["brokerName"] == "broker-a", name
    assert out["ours"][4].startswith("============Master: <broker>============\n")
    assert sides["ours"].thread.broker.config.short_polling_time_mills == 700


def test_the_config_keys_are_the_real_classes_keys_with_their_defaults(rmq_java):
    """rmqstore's table of 4.9.8's configuration keys (config_defaults) against the real classes, read by
    ConfigDefaults.java on this machine (so the thread counts derived from the processors are this machine's)."""
    real = {key: rest.split(" ", 1)[1] if " " in rest else "" for key, rest in
            case_lines(rmq_java.run_java("ConfigDefaults.java")).items()}
    ours = rocketmq_defaults()
    # two values as a running broker shows them, not as its classes start them (config_defaults' essay)
    assert (real.pop("listenPort"), ours.pop("listenPort")) == ("8888", "10911")
    assert (real.pop("bitMapLengthConsumeQueueExt"), ours.pop("bitMapLengthConsumeQueueExt")) == ("64", "112")
    assert set(real) - set(ours) == set(MACHINE_KEYS)
    assert {k: v for k, v in real.items() if k not in MACHINE_KEYS} == ours


def test_with_the_embedded_name_server(rmq_java, tmp_path):
    """The commands that need no cluster view work through the name server ``rmqstore broker`` embeds."""
    with BrokerThread(tmp_path / "store") as bt:
        ns, broker = bt.namesrv, f"127.0.0.1:{bt.port}"
        out = mqadmin(rmq_java, ["updateTopic", "-n", ns, "-b", broker, "-t", "EmbeddedT", "-w", "3", "-r", "3"],
                      ["topicRoute", "-n", ns, "-t", "EmbeddedT"],
                      ["updateSubGroup", "-n", ns, "-b", broker, "-g", "EmbeddedG"],
                      ["deleteSubGroup", "-n", ns, "-b", broker, "-g", "EmbeddedG"],
                      ["updateBrokerConfig", "-n", ns, "-b", broker, "-k", "longPollingEnable", "-v", "false"],
                      ["getBrokerConfig", "-n", ns, "-b", broker])
        assert out[0].startswith(f"create topic to {broker} success.\n")
        assert '"writeQueueNums":3' in out[1] and f'0:"{broker}"' in out[1]
        assert out[2].startswith(f"create subscription group to {broker} success.\n")
        assert out[3] == f"delete subscription group [EmbeddedG] from broker [{broker}] success.\n"
        assert out[4] == f"update broker config success, {broker}\n"
        assert _printed_config(out[5])["longPollingEnable"] == "false"
        assert bt.broker.config.long_polling_enable is False
        assert "EmbeddedG" not in bt.broker.groups.table and bt.broker.topics.select("EmbeddedT") is not None


# -- clients --------------------------------------------------------------------------------------

SENT = 10


def consumed(clients: JavaClients, side: str) -> list[str]:
    return clients.consumed(side)


@pytest.fixture(scope="module")
def clients(rmq_java, sides):
    """Both sides' producer and consumer running, every message of the first batch consumed and committed."""
    java_clients = JavaClients(rmq_java, {name: side.namesrv for name, side in sides.items()}, CLIENT_TOPIC)
    try:
        java_clients.wait_for(lambda: java_clients.seen("STARTED"))
        java_clients.command(f"SEND {SENT}")
        for name in sides:
            java_clients.wait_for(lambda n=name: len(set(consumed(java_clients, n))) == SENT)
        offsets = sides["ours"].thread.broker.offsets
        committed = lambda: sum(max(offsets.query_offset("CG_adminb", CLIENT_TOPIC, q), 0) for q in range(4))  # noqa
        java_clients.wait_for(lambda: committed() == SENT, 60)
        time.sleep(3)  # the Java side commits on the same one-second timer
        yield java_clients
    finally:
        java_clients.close()


def test_consumer_and_producer_connection(rmq_java, sides, clients):
    out = both(rmq_java, sides,
               lambda s: ["consumerConnection", "-n", s.namesrv, "-g", "CG_adminb"],
               lambda s: ["consumerConnection", "-n", s.namesrv, "-g", "CG_adminb", "-b", s.broker],
               lambda s: ["producerConnection", "-n", s.namesrv, "-g", "PG_adminb", "-t", CLIENT_TOPIC],
               lambda s: ["consumerConnection", "-n", s.namesrv, "-g", "NobodyG"],
               lambda s: ["producerConnection", "-n", s.namesrv, "-g", "NobodyPG", "-t", CLIENT_TOPIC])
    assert_same(out)
    connection = out["java"][0].splitlines()
    assert re.match(r"<client> +<address> +JAVA +V4_9_8$", connection[1])
    assert "%RETRY%CG_adminb" in out["java"][0] and f"{CLIENT_TOPIC:<20} TagA || TagB" in out["java"][0]
    assert "ConsumeType: CONSUME_PASSIVELY\nMessageModel: CLUSTERING\nConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET" \
        in out["java"][0]
    assert re.match(r"0001  <client> +<address> +JAVA +V4_9_8\n$", out["java"][2])
    assert "the producer group[NobodyPG] not exist" in out["java"][4]


def test_consumer_status_fetches_the_running_info_from_the_client(rmq_java, sides, clients):
    out = both(rmq_java, sides, lambda s: ["consumerStatus", "-n", s.namesrv, "-g", "CG_adminb"])
    assert_same(out)
    assert re.match(r"#Index +#ClientId +#Version +#ConsumerRunningInfoFile\n1 +<client> +V4_9_8 +<time>/<client>\n",
                    out["java"][0])
    assert "Same subscription in the same group of consumer" in out["java"][0]
    assert "Rebalance OK" in out["java"][0]


def test_reset_offset_by_time_makes_the_running_consumer_jump(rmq_java, sides, clients):
    before = {name: len(consumed(clients, name)) for name in sides}
    out = both(rmq_java, sides,
               lambda s: ["resetOffsetByTime", "-n", s.namesrv, "-g", "CG_adminb", "-t", CLIENT_TOPIC, "-s", "0"])
    assert_same(out)
    rows = re.findall(r"^broker-a +(\d+) +(\d+) *$", out["java"][0], re.M)
    assert out["java"][0].startswith("rollback consumer offset by specified group[CG_adminb], topic[AdminbClientT], "
                                     "force[true], timestamp(string)[0], timestamp(long)[0]\n")
    assert sorted(rows) == [(str(q), "0") for q in range(4)], out["java"][0]
    # each consumer drops what it holds, goes back to offset 0 and consumes the whole batch again
    for name in sides:
        clients.wait_for(lambda n=name: len(consumed(clients, n)) >= before[n] + SENT, 120)
        again = consumed(clients, name)[before[name]:]
        assert sorted(set(again)) == sorted(f"m{i}" for i in range(SENT)), (name, again)
