"""The broker's configuration as one table of properties (RocketMQ's ``Configuration``).

A 4.9.8 broker keeps its whole configuration as properties: every field of its config classes,
merged with every key of the broker.conf it was started with.  ``mqadmin getBrokerConfig``
(GET_BROKER_CONFIG, 26) reads that table, ``mqadmin updateBrokerConfig`` (UPDATE_BROKER_CONFIG,
25) changes it.  :class:`BrokerProperties` is the same table over rmqstore's configuration:

* **what is answered** -- from the bottom up: 4.9.8's defaults for every key
  (:mod:`rmqstore.broker.config_defaults`), the broker.conf's keys that are no field of ours
  (``BrokerConfig.properties``), then every field of :class:`~rmqstore.broker.config.BrokerConfig`
  and :class:`~rmqstore.common.config.StoreConfig` under its 4.9.8 key (``checkCRCOnRecover``,
  ``brokerIP1``...) or, for rmqstore's own, its name in camelCase (``maxConnections``).  A field
  that is not set (``haMasterAddress`` of a master) is left out, as 4.9.8 leaves out a null.
  The answer carries the table's data version (counted by each update, from 0 at start).
* **what an update does** -- as ``Configuration.update``: a key the table does not hold is
  ignored; a key of the black list (``brokerConfigPath``, ``rocketmqHome``, ``configBlackList``
  and whatever ``configBlackList`` names) refuses the whole update NO_PERMISSION; a value that
  is not of the key's type is ignored (logged).  The rest is set on the live configuration
  objects, the version counted, and the whole table written to the broker.conf the broker was
  started with (4.9.8's ``brokerConfigPath``: comments and order are not kept), or, without
  one, to ``<store>/config/broker.properties`` -- where 4.9.8 writes it for a store in its
  default place.  ``brokerPermission`` also re-registers with the name servers at once.
* **when it takes effect** -- a value the broker reads per request takes effect with the next
  one: ``brokerPermission``, ``autoCreateTopicEnable``, ``autoCreateSubscriptionGroup``,
  ``longPollingEnable``, ``shortPollingTimeMills``, ``transactionTimeOut``,
  ``transactionCheckInterval``, ``transactionCheckMax``, ``regionId``, ``traceOn``.  The others
  (file sizes, flush type, role, ports, the remoting limits...) are read when the broker starts,
  as 4.9.8's services read most of theirs, so they take effect at the next start; and 4.9.8's
  keys rmqstore does not use are kept, answered and persisted, and do nothing.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import fields

from typing import Any

from ..files.store_paths import config_path
from .config import BrokerConfigError, convert_value, field_of, parse_properties_text, property_text
from .config_defaults import MACHINE_KEYS, ROCKETMQ_DEFAULTS, rocketmq_defaults
from .jsonfmt import dumps, write_config_file

__all__ = ["BrokerProperties", "BLACK_LIST", "BROKER_PROPERTIES_FILE", "RUNTIME_KEYS"]

log = logging.getLogger(__name__)

#: keys no update may touch, whatever configBlackList says (AdminBrokerProcessor.initConfigBlackList)
BLACK_LIST = ("brokerConfigPath", "rocketmqHome", "configBlackList")
#: the file the configuration is persisted to when the broker started without a broker.conf
BROKER_PROPERTIES_FILE = "broker.properties"
#: 4.9.8's keys whose new value the broker uses from the next request on (the module's essay)
RUNTIME_KEYS = ("brokerPermission", "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "longPollingEnable",
                "shortPollingTimeMills", "transactionTimeOut", "transactionCheckInterval", "transactionCheckMax",
                "regionId", "traceOn")
#: 4.9.8's keys whose default is null (shown once set); with the others, the keys fields are known by
_NULL_DEFAULT_KEYS = ("namesrvAddr", "haMasterAddress")


def _processors() -> int:
    """What Java's availableProcessors says here: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _rocketmq_key_by_field() -> dict[tuple[str, str], str]:
    """(config, field) -> the 4.9.8 key it answers to, for the fields 4.9.8 has."""
    out = {}
    for key in (*ROCKETMQ_DEFAULTS, *MACHINE_KEYS, *_NULL_DEFAULT_KEYS):
        target = field_of(key)
        if target is not None:
            out[target] = key
    return out


_KEY_BY_FIELD = _rocketmq_key_by_field()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


class BrokerProperties:
    """The configuration table of one broker (its ``BrokerConfig`` and ``StoreConfig``, live)."""

    def __init__(self, broker):
        self.broker = broker
        self.data_version = {"counter": 0, "timestamp": int(time.time() * 1000)}

    def _objects(self) -> dict[str, Any]:
        """The live configuration objects by what :func:`field_of` calls them."""
        return {"broker": self.broker.config, "store": self.broker.store_config}

    def all_configs(self) -> dict[str, str]:
        """Every key and its text: 4.9.8's defaults, broker.conf's other keys, then the fields' values."""
        out = rocketmq_defaults(_processors())
        out.update(self.broker.config.properties)
        for which, obj in self._objects().items():
            for f in fields(obj):
                if not f.metadata.get("property", True):
                    continue
                key = _KEY_BY_FIELD.get((which, f.name), _camel(f.name))
                text = property_text(getattr(obj, f.name))
                if text is not None and not (text == "" and key in _NULL_DEFAULT_KEYS):
                    out[key] = text
        config = self.broker.config
        out["storePathRootDir"] = config.store_path_root_dir or self.broker.store_root
        out["brokerIP2"] = config.broker_ip2 or config.broker_ip1  # "" means brokerIP1 here
        return out

    def text(self) -> str:
        """The table as 4.9.8's ``properties2String`` writes it (``key=value`` lines; sorted here)."""
        return "".join(f"{key}={value}\n" for key, value in sorted(self.all_configs().items()))

    def version_json(self) -> str:
        return dumps(self.data_version)

    def path(self) -> str:
        return self.broker.config.broker_config_path or config_path(self.broker.store_root, BROKER_PROPERTIES_FILE)

    def update(self, text: str) -> str | None:
        """Apply ``key=value`` lines (``Configuration.update``); the remark of a refusal, else None."""
        props = parse_properties_text(text)
        current = self.all_configs()
        black = set(BLACK_LIST) | {k for k in current.get("configBlackList", "").split(";") if k}
        if black.intersection(props):
            return "Can not update config in black list."
        log.info("updateBrokerConfig, new config: %s", props)
        for key, value in props.items():
            if key in current:
                self._set(key, value)
        self.data_version = {"counter": self.data_version["counter"] + 1, "timestamp": int(time.time() * 1000)}
        try:
            write_config_file(self.path(), self.text())
        except OSError as exc:  # 4.9.8 logs it too: the new values are in effect, the file is as it was
            log.error("persisting the broker configuration to %s failed: %s", self.path(), exc)
        if "brokerPermission" in props:
            self.broker.topics.changed()  # registerBrokerAll: a new data version, sent at once
            self.broker.registration.register_soon()
        return None

    def _set(self, key: str, value: str) -> None:
        target = field_of(key)
        if target is None:
            self.broker.config.properties[key] = value
            return
        obj = self._objects()[target[0]]
        try:
            setattr(obj, target[1], convert_value(key, getattr(obj, target[1]), value))
        except BrokerConfigError as exc:
            log.warning("updateBrokerConfig ignores %s", exc)
