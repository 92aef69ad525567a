"""What a broker holds, as the admin calls answer it: its runtime figures and configuration, its topic and group
tables, and stored messages (the other results are in :mod:`.results`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from ..broker.groups import SubscriptionGroupConfig
from ..broker.topics import TopicConfig
from .results import Table

__all__ = ["BrokerRuntimeInfo", "BrokerConfig", "TopicConfigs", "SubscriptionGroups", "MessageView", "MessageTrack",
           "QueryResult"]


# -- brokers --------------------------------------------------------------------------------------------------

def _first_number(text: str | None) -> float:
    """The first figure of a runtime value such as ``putTps`` ("12.5 11.9 12.1": the last 10 s, 1 min, 10 min)."""
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return 0.0


def _int(text: str | None, default: int = 0) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


@dataclass
class BrokerRuntimeInfo(Table):
    """``KVTable`` of GET_BROKER_RUNTIME_INFO: the broker's figures by name, as text (``brokerStatus``), with typed
    views of the ones a live view shows."""

    address: str
    table: dict[str, str]

    columns = ("key", "value")

    def rows(self) -> list[dict]:
        return [{"key": k, "value": v} for k, v in sorted(self.table.items())]

    @property
    def version_desc(self) -> str:
        return self.table.get("brokerVersionDesc", "")

    @property
    def put_tps(self) -> float:
        """Messages put a second over the last 10 s."""
        return _first_number(self.table.get("putTps"))

    @property
    def get_transferred_tps(self) -> float:
        """Messages sent to consumers a second over the last 10 s (the broker's ``getTransferedTps``)."""
        return _first_number(self.table.get("getTransferedTps"))

    @property
    def commit_log_min_offset(self) -> int:
        return _int(self.table.get("commitLogMinOffset"))

    @property
    def commit_log_max_offset(self) -> int:
        return _int(self.table.get("commitLogMaxOffset"))

    @property
    def commit_log_disk_ratio(self) -> float:
        return _first_number(self.table.get("commitLogDiskRatio"))

    @property
    def boot_timestamp(self) -> int:
        return _int(self.table.get("bootTimestamp"))

    @property
    def msg_put_total_today_now(self) -> int:
        return _int(self.table.get("msgPutTotalTodayNow"))

    @property
    def msg_get_total_today_now(self) -> int:
        return _int(self.table.get("msgGetTotalTodayNow"))


@dataclass
class BrokerConfig(Table):
    """GET_BROKER_CONFIG: the broker's configuration as properties (all text), and the version of it."""

    address: str
    properties: dict[str, str]
    data_version: dict | None = None

    columns = ("key", "value")

    def rows(self) -> list[dict]:
        return [{"key": k, "value": v} for k, v in sorted(self.properties.items())]

    @property
    def store_path_root_dir(self) -> str | None:
        """Where the broker's store is (a live view opens it when it is on this machine)."""
        return self.properties.get("storePathRootDir")


@dataclass
class TopicConfigs(Table):
    """``TopicConfigSerializeWrapper``: a broker's topic table (GET_ALL_TOPIC_CONFIG)."""

    address: str
    topics: dict[str, TopicConfig]
    data_version: dict | None = None

    columns = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_filter_type", "topic_sys_flag",
               "order")

    def rows(self) -> list[dict]:
        return [asdict(t) for _, t in sorted(self.topics.items())]


@dataclass
class SubscriptionGroups(Table):
    """``SubscriptionGroupWrapper``: a broker's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""

    address: str
    groups: dict[str, SubscriptionGroupConfig]
    data_version: dict | None = None

    columns = tuple(f.name for f in fields(SubscriptionGroupConfig))

    def rows(self) -> list[dict]:
        return [asdict(g) for _, g in sorted(self.groups.items())]


# -- messages -------------------------------------------------------------------------------------------------

@dataclass
class MessageView:
    """A stored message as an admin sees it (``MessageExt``): where it is, its times and hosts, properties, body.
    ``msg_id`` is the producer's unique key when it set one (as mqadmin shows), else the offset msgId."""

    offset_msg_id: str
    msg_id: str
    topic: str
    tags: str | None
    keys: str | None
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    reconsume_times: int
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    sys_flag: int
    properties: dict[str, str]
    body: bytes
    body_crc: int = 0


@dataclass
class MessageTrack:
    """Whether a consumer group has consumed a message (``MessageTrack``; its type is a ``TrackType`` name)."""

    consumer_group: str
    track_type: str
    exception_desc: str | None = None


@dataclass
class QueryResult(Table):
    """Messages found (``queryMsgByKey``, ``queryMsgById``), with the consumer groups' tracks of each when asked."""

    messages: list[MessageView]
    index_last_update_timestamp: int = 0
    tracks: dict[str, list[MessageTrack]] = field(default_factory=dict)  # offset msgId -> tracks

    columns = ("msg_id", "offset_msg_id", "topic", "tags", "keys", "queue_id", "queue_offset", "commit_log_offset",
               "store_timestamp", "born_host", "store_host", "body_size")

    def rows(self) -> list[dict]:
        return [{c: (len(m.body) if c == "body_size" else getattr(m, c)) for c in self.columns} for m in self.messages]
