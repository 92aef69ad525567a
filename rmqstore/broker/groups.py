"""Consumer groups' settings: ``config/subscriptionGroup.json`` (RocketMQ's ``SubscriptionGroupManager``).

Each consumer group has a :class:`SubscriptionGroupConfig`: whether it may consume, how
many retry queues it gets and -- what matters most here -- ``retryMaxTimes``, how often a
message is redelivered before it goes to the group's dead-letter topic.  A group the
broker has not seen is created with the defaults on first use (``autoCreateSubscriptionGroup``,
true by default); with auto-create off, an unknown group is refused
SUBSCRIPTION_GROUP_NOT_EXIST.  The table is fastjson's text written atomically with a
``.bak``, like topics.json, so an admin (or a test) sets a group's retryMaxTimes by writing
the file before the broker starts, as with RocketMQ's ``updateSubGroup``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .config import camel_to_snake
from ..store_paths import SUBSCRIPTION_GROUP_JSON, config_path
from .jsonfmt import ConfigTable

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager", "SYSTEM_GROUPS"]

#: groups the broker creates at start (MixAll's system consumer groups)
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                 "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_SYS_RMQ_TRANS")


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
        names = {f.name: f for f in fields(cls)}
        kwargs: dict = {}
        for key, value in d.items():
            name = camel_to_snake(key)
            if name in names:
                kwargs[name] = value if name == "group_name" else (bool(value) if isinstance(value, bool)
                                                                    else int(value))
        return cls(**kwargs)


class SubscriptionGroupManager(ConfigTable):
    table_key = "subscriptionGroupTable"

    def __init__(self, store_root: str, broker_config):
        super().__init__(config_path(store_root, SUBSCRIPTION_GROUP_JSON))
        self.broker_config = broker_config
        self.table = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}

    def entry_from_json(self, name: str, d: dict) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json(dict(d, groupName=name))

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the group's config, created with defaults when allowed."""
        config = self.table.get(group)
        if config is None and self.broker_config.auto_create_subscription_group:
            config = self.table[group] = SubscriptionGroupConfig(group)
            self.changed()
        return config
