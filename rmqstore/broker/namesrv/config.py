"""The name server's own configuration: RocketMQ 4.9.8's ``NamesrvConfig`` and what GET/UPDATE_NAMESRV_CONFIG
(319/318, ``mqadmin getNamesrvConfig`` / ``updateNamesrvConfig``) see of it.

The keys are NamesrvConfig's -- ``rocketmqHome`` (``$ROCKETMQ_HOME``; left out when unset),
``kvConfigPath``, ``configStorePath``, ``productEnvName``, ``clusterTest``, ``orderMessageEnable``,
``configBlackList`` -- and of NettyServerConfig the two this server has: ``listenPort`` and
``serverChannelMaxIdleTimeSeconds``.  Netty's thread, buffer and allocator knobs do not exist here and are
not reported.  Every other key of the ``namesrv.conf`` the server was started with is kept and reported as
given, as 4.9.8 remembers its ``-c`` file's properties.

An update takes Java properties text.  Keys of the black list (``configBlackList`` plus
``configBlackList``, ``configStorePath``, ``kvConfigPath`` and ``rocketmqHome``) refuse the whole update
with NO_PERMISSION; a key the configuration does not have is ignored; a value that is not of its key's type
(``orderMessageEnable=maybe``) refuses the update with an error naming it (4.9.8 reads it as false).  The
whole configuration is then written to ``configStorePath`` (the ``--config`` file, as ``mqnamesrv -c``
does), atomically with a ``.bak``.  Of the keys, ``orderMessageEnable`` acts at once (routes carry the
topic's ORDER_TOPIC_CONFIG value); the others, as in 4.9.8, only at the next start.

Defaults: 4.9.8 keeps ``kvConfig.json`` and ``namesrv.properties`` under ``~/namesrv/``
(:meth:`NamesrvConfig.rocketmq_defaults`, what ``rmqstore namesrv`` uses); a ``NamesrvConfig()`` made by a
program keeps nothing on disk unless given paths; the embedded name server keeps both in the store's
``config/`` folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..config import BrokerConfigError, parse_properties_text
from ..jsonfmt import write_config_file

__all__ = ["NamesrvConfig", "NamesrvConfigError", "FIXED_BLACK_LIST"]

#: keys no update may change, whatever configBlackList says (DefaultRequestProcessor.initConfigBlackList)
FIXED_BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")

_KEYS = {"rocketmqHome": "rocketmq_home", "kvConfigPath": "kv_config_path", "configStorePath": "config_store_path",
         "productEnvName": "product_env_name", "clusterTest": "cluster_test",
         "orderMessageEnable": "order_message_enable", "configBlackList": "config_black_list",
         "listenPort": "listen_port", "serverChannelMaxIdleTimeSeconds": "server_channel_max_idle_time_seconds"}


class NamesrvConfigError(BrokerConfigError):
    """A namesrv.conf or an update with a value that cannot be used."""


def _convert(key: str, default, value: str):
    if isinstance(default, bool):
        if value.strip().lower() not in ("true", "false"):
            raise NamesrvConfigError(f"{key}={value!r}: expected true or false")
        return value.strip().lower() == "true"
    if isinstance(default, int):
        try:
            return int(value.strip())
        except ValueError:
            raise NamesrvConfigError(f"{key}={value!r}: expected an integer") from None
    return value


@dataclass
class NamesrvConfig:
    rocketmq_home: str | None = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME"))
    kv_config_path: str = ""  # "" keeps the KV table in memory only
    config_store_path: str = ""  # "" keeps updates in memory only
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    config_black_list: str = "configBlackList;configStorePath;kvConfigPath"
    listen_port: int = 9876
    server_channel_max_idle_time_seconds: int = 120
    #: keys of the namesrv.conf that are none of the above, kept and reported as given
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def rocketmq_defaults(cls) -> "NamesrvConfig":
        """4.9.8's defaults: ``~/namesrv/kvConfig.json`` and ``~/namesrv/namesrv.properties``."""
        home = os.path.join(os.path.expanduser("~"), "namesrv")
        return cls(kv_config_path=os.path.join(home, "kvConfig.json"),
                   config_store_path=os.path.join(home, "namesrv.properties"))

    def apply(self, props: dict[str, str]) -> None:
        """Set the keys of ``props`` this configuration has (typed); keep the others in ``extra``."""
        values = {}
        for key, value in props.items():
            name = _KEYS.get(key)
            if name is None:
                self.extra[key] = value
            else:
                values[name] = _convert(key, getattr(self, name), value)
        for name, value in values.items():  # all converted first: a bad value changes nothing
            setattr(self, name, value)

    @classmethod
    def load(cls, path: str, base: "NamesrvConfig | None" = None) -> "NamesrvConfig":
        """``base`` (default: RocketMQ's defaults) with a namesrv.conf's keys; the file becomes the
        ``configStorePath``, as with ``mqnamesrv -c``."""
        config = base or cls.rocketmq_defaults()
        with open(path, encoding="utf-8") as f:
            props = parse_properties_text(f.read())
        config.apply(props)
        config.config_store_path = path
        return config

    def black_list(self) -> set[str]:
        return set(FIXED_BLACK_LIST) | {k.strip() for k in self.config_black_list.split(";") if k.strip()}

    def all_configs(self) -> dict[str, str]:
        """Every key and its value as the properties text GET_NAMESRV_CONFIG answers."""
        out = dict(self.extra)
        for key, name in _KEYS.items():
            value = getattr(self, name)
            if value is not None:
                out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    def properties_text(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in sorted(self.all_configs().items()))

    def update(self, text: str) -> tuple[str, str] | None:
        """An UPDATE_NAMESRV_CONFIG body: None when applied (and persisted), else (``"black list"`` or
        ``"invalid"``, the reason)."""
        try:
            props = parse_properties_text(text)
        except BrokerConfigError as exc:
            return "invalid", f"string2Properties error: {exc}"
        if self.black_list() & props.keys():
            return "black list", "Can not update config in black list."
        known = {k: v for k, v in props.items() if k in _KEYS or k in self.extra}
        try:
            self.apply(known)
        except NamesrvConfigError as exc:
            return "invalid", str(exc)
        self.persist()
        return None

    def persist(self) -> None:
        if self.config_store_path:
            write_config_file(self.config_store_path, self.properties_text())
