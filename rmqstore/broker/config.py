"""Broker configuration: RocketMQ's ``BrokerConfig`` keys, read from a ``broker.conf``.

A ``broker.conf`` is a Java properties file mixing BrokerConfig, NettyServerConfig and
MessageStoreConfig keys in camelCase (``brokerName=broker-a``, ``flushDiskType=SYNC_FLUSH``).
:func:`load_broker_conf` splits it: keys of :class:`BrokerConfig` land there, store keys go
through :meth:`StoreConfig.from_manifest` (the one camelCase-to-field mapping the project
has), each value converted to the type of the field's default.  Defaults are RocketMQ
4.9.8's, except the listen address, which is loopback unless asked.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from dataclasses import dataclass, fields

from ..config import StoreConfig
from ..errors import RmqStoreError

__all__ = ["BrokerConfig", "load_broker_conf", "parse_properties_text", "BrokerConfigError", "camel_to_snake"]


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


def _convert(name: str, default, value: str):
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise BrokerConfigError(f"{name}={value!r}: expected true or false")
        return value.lower() == "true"
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            raise BrokerConfigError(f"{name}={value!r}: expected an integer") from None
    return value


def load_broker_conf(text: str) -> tuple[BrokerConfig, StoreConfig, list[str]]:
    """(broker config, store config, keys neither knows) of a broker.conf's text."""
    props = parse_properties_text(text)
    broker_fields = {f.name: f for f in fields(BrokerConfig)}
    store_defaults = StoreConfig()
    store_names = {f.name for f in fields(StoreConfig)}
    broker_kwargs, store_values, unknown = {}, {}, []
    for key, value in props.items():
        name = camel_to_snake(key).replace("maped", "mapped")
        if name in ("broker_i_p1", "broker_i_p2"):
            name = "broker_ip" + name[-1]
        if name in broker_fields:
            f = broker_fields[name]
            default = f.default if f.default is not dataclasses.MISSING else ""
            broker_kwargs[name] = _convert(key, default, value)
        elif name in store_names:
            store_values[key] = _convert(key, getattr(store_defaults, name), value)
        else:
            unknown.append(key)
    try:
        store = StoreConfig.from_manifest(store_values)
    except ValueError as exc:
        raise BrokerConfigError(f"broker.conf: {exc}") from None
    return BrokerConfig(**broker_kwargs), store, unknown
