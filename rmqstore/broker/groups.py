"""Consumer groups' settings: ``config/subscriptionGroup.json`` (RocketMQ's ``SubscriptionGroupManager``).

Each consumer group has a :class:`SubscriptionGroupConfig`: whether it may consume, how
many retry queues it gets and -- what matters most here -- ``retryMaxTimes``, how often a
message is redelivered before it goes to the group's dead-letter topic.  A group the
broker has not seen is created with the defaults on first use (``autoCreateSubscriptionGroup``,
true by default); with auto-create off, an unknown group is refused
SUBSCRIPTION_GROUP_NOT_EXIST.  The table is fastjson's text written atomically with a
``.bak``, like topics.json, so an admin (or a test) sets a group's retryMaxTimes by writing
the file before the broker starts -- or sends what RocketMQ's ``mqadmin updateSubGroup`` sends
(:mod:`rmqstore.broker.admin`), which changes the table at once and persists it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields

from .config import camel_to_snake
from ..files.store_paths import SUBSCRIPTION_GROUP_JSON, config_path
from .jsonfmt import ConfigTable

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager", "SYSTEM_GROUPS"]

log = logging.getLogger(__name__)

#: groups the broker creates at start (MixAll's system consumer groups)
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                 "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            camel = f.name.split("_")[0] + "".join(w.title() for w in f.name.split("_")[1:])
            out[camel] = getattr(self, f.name)
        return dict(sorted(out.items()))

    @classmethod
    def from_json(cls, d: dict) -> "SubscriptionGroupConfig":
        """The config a JSON object describes (unknown keys ignored); ValueError naming a value of the wrong
        type or a missing groupName."""
        names = {f.name: f for f in fields(cls)}
        kwargs: dict = {}
        for key, value in d.items():
            name = camel_to_snake(key)
            f = names.get(name)
            if f is None:
                continue
            if name == "group_name":
                if not isinstance(value, str) or not value:
                    raise ValueError(f"groupName {value!r} is not a group name")
                kwargs[name] = value
            elif isinstance(f.default, bool):
                kwargs[name] = _as_bool(key, value)
            elif isinstance(value, bool) or not isinstance(value, (int, str)):
                raise ValueError(f"{key} {value!r} is not a number")
            else:
                kwargs[name] = int(value)
        if "group_name" not in kwargs:
            raise ValueError("no groupName")
        return cls(**kwargs)


def _as_bool(key: str, value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{key} {value!r} is not true or false")


class SubscriptionGroupManager(ConfigTable):
    table_key = "subscriptionGroupTable"

    def __init__(self, store_root: str, broker_config):
        super().__init__(config_path(store_root, SUBSCRIPTION_GROUP_JSON))
        self.broker_config = broker_config
        self.table = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}

    def entry_from_json(self, name: str, d: dict) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json(dict(d, groupName=name))

    def put(self, config: SubscriptionGroupConfig) -> None:
        """``updateSubscriptionGroupConfig``: add or replace a group, count a data version, persist."""
        self.table[config.group_name] = config
        self.changed()

    def delete(self, group: str) -> bool:
        """``deleteSubscriptionGroupConfig``: False when there was no such group."""
        if self.table.pop(group, None) is None:
            log.warning("delete subscription group failed, subscription groupName: %s not exist", group)
            return False
        self.changed()
        return True

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the group's config, created with defaults when allowed."""
        config = self.table.get(group)
        if config is None and self.broker_config.auto_create_subscription_group:
            config = self.table[group] = SubscriptionGroupConfig(group)
            self.changed()
        return config
