"""Broker configuration: RocketMQ's ``BrokerConfig`` keys, read from a ``broker.conf``.

A ``broker.conf`` is a Java properties file mixing BrokerConfig, NettyServerConfig and
MessageStoreConfig keys in camelCase (``brokerName=broker-a``, ``flushDiskType=SYNC_FLUSH``).
:func:`load_broker_conf` splits it: :func:`field_of` is the one mapping from a key to a field
of :class:`BrokerConfig` or of :class:`~rmqstore.common.config.StoreConfig` (case and underscores
aside, RocketMQ's old ``maped`` spelling read as ``mapped``), and :func:`convert_value` turns
the text into the field's type.  A key that maps to no field is kept in
``BrokerConfig.properties`` -- a 4.9.8 broker keeps every key of its broker.conf in its
configuration too, and answers them to GET_BROKER_CONFIG (:mod:`rmqstore.broker.broker_properties`).
Defaults are RocketMQ 4.9.8's, except the listen address, which is loopback unless asked.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import socket
from dataclasses import dataclass, fields

from ..common.config import StoreConfig
from ..common.errors import RmqStoreError

__all__ = ["BrokerConfig", "load_broker_conf", "parse_properties_text", "BrokerConfigError", "camel_to_snake",
           "field_of", "convert_value", "property_text"]


class BrokerConfigError(RmqStoreError, ValueError):
    """A broker.conf value that cannot be used."""


@dataclass
class BrokerConfig:
    broker_name: str = dataclasses.field(default_factory=socket.gethostname)
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    broker_ip1: str = "127.0.0.1"
    broker_ip2: str = ""  # the HA address's host a broker registers; "" = brokerIP1 (RocketMQ: the local address)
    listen_port: int = 10911
    namesrv_addr: str = ""
    store_path_root_dir: str = ""
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    trace_topic_enable: bool = False  # create msgTraceTopicName at start (TopicConfigManager), for client traces
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    broker_permission: int = 6
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    flush_consumer_offset_interval: int = 5000
    server_channel_max_idle_time_seconds: int = 120
    transaction_time_out: int = 6000
    transaction_check_interval: int = 60000
    transaction_check_max: int = 15
    max_connections: int = 1024  # ours: RocketMQ relies on the OS's limits
    # ours too (rmqstore.remoting.Limits): a connection's first frame and each frame's deadline, seconds; the
    # answers not yet read by their clients, all connections together and one connection's high-water mark
    server_first_frame_timeout_seconds: int = 10
    server_frame_timeout_seconds: int = 30
    server_unsent_budget_bytes: int = 64 * 1024 * 1024
    server_connection_unsent_high_bytes: int = 4 * 1024 * 1024
    register_name_server_period: int = 30000  # ms; used clamped to 10-60 s, as RocketMQ does
    acl_enable: bool = False  # plain ACL (rmqstore.broker.acl): check every request against acl_file's rules
    acl_file: str = ""  # ours: the plain_acl.yml (RocketMQ: conf/plain_acl.yml of ROCKETMQ_HOME); the CLI
    # fills in the one beside broker.conf
    #: the broker.conf the broker started with (BrokerPathConfigHelper's brokerConfigPath): where
    #: UPDATE_BROKER_CONFIG persists the configuration; "" = <store>/config/broker.properties.  Not a property.
    broker_config_path: str = dataclasses.field(default="", metadata={"property": False})
    #: broker.conf's keys that are no field here (4.9.8's keys rmqstore does not use, and any other): kept,
    #: answered and persisted as 4.9.8 keeps every key of its broker.conf.  Not a property itself.
    properties: dict = dataclasses.field(default_factory=dict, metadata={"property": False})

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"


def camel_to_snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines of a Java properties file (``#``/``!`` comments, ``:`` also separates)."""
    out = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise BrokerConfigError(f"line {n}: {raw!r} is not key=value")
        out[m.group(1)] = m.group(2).strip()
    return out


def _normal(name: str) -> str:
    return name.replace("_", "").lower().replace("maped", "mapped")


def _fields_by_normal_name(cls) -> dict[str, str]:
    return {_normal(f.name): f.name for f in fields(cls) if f.metadata.get("property", True)}


_BROKER_FIELDS = _fields_by_normal_name(BrokerConfig)
_STORE_FIELDS = _fields_by_normal_name(StoreConfig)


def field_of(key: str) -> tuple[str, str] | None:
    """``("broker", field)`` or ``("store", field)`` for a broker.conf key, or None when neither config has it.
    Case and underscores do not count (``checkCRCOnRecover`` is ``check_crc_on_recover``), and RocketMQ's old
    ``maped`` is read as ``mapped``."""
    normal = _normal(key)
    if normal in _BROKER_FIELDS:
        return "broker", _BROKER_FIELDS[normal]
    if normal in _STORE_FIELDS:
        return "store", _STORE_FIELDS[normal]
    return None


def convert_value(key: str, current, value: str):
    """``value`` (a property's text) as the type of ``current`` (the field's value or default); BrokerConfigError
    naming the key when it is not one."""
    if isinstance(current, bool):
        if value.lower() not in ("true", "false"):
            raise BrokerConfigError(f"{key}={value!r}: expected true or false")
        return value.lower() == "true"
    if isinstance(current, enum.Enum):
        try:
            return type(current)(value)
        except ValueError:
            names = ", ".join(m.value for m in type(current))
            raise BrokerConfigError(f"{key}={value!r}: expected one of {names}") from None
    if isinstance(current, int):
        try:
            return int(value)
        except ValueError:
            raise BrokerConfigError(f"{key}={value!r}: expected an integer") from None
    return value


def property_text(value) -> str | None:
    """A field's value as a property's text, Java's ``toString`` (None for a value not set)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def load_broker_conf(text: str) -> tuple[BrokerConfig, StoreConfig, list[str]]:
    """(broker config, store config, keys neither uses) of a broker.conf's text.  The keys neither uses are in
    ``BrokerConfig.properties``; the list leaves out 4.9.8's own keys at their defaults (a broker.conf that
    RocketMQ, or UPDATE_BROKER_CONFIG, wrote in full), so it names what was set in vain."""
    from .config_defaults import rocketmq_defaults

    defaults = rocketmq_defaults()
    broker_defaults, store_defaults = BrokerConfig(), StoreConfig()
    broker_kwargs: dict = {"properties": {}}
    store_kwargs: dict = {}
    unknown = []
    for key, value in parse_properties_text(text).items():
        target = field_of(key)
        if target is None:
            broker_kwargs["properties"][key] = value
            if defaults.get(key) != value:
                unknown.append(key)
        elif target[0] == "broker":
            broker_kwargs[target[1]] = convert_value(key, getattr(broker_defaults, target[1]), value)
        else:
            store_kwargs[target[1]] = convert_value(key, getattr(store_defaults, target[1]), value)
    try:
        store = StoreConfig(**store_kwargs)
    except ValueError as exc:
        raise BrokerConfigError(f"broker.conf: {exc}") from None
    return BrokerConfig(**broker_kwargs), store, unknown
