"""The name server's KV config: RocketMQ 4.9.8's ``KVConfigManager``.

Namespaces of string keys and values that operators and tools keep on the name servers
(``mqadmin updateKvConfig`` / ``deleteKvConfig``; ``updateOrderConf`` keeps a topic's order config in
the ``ORDER_TOPIC_CONFIG`` namespace, which every registration answer carries and, with
``orderMessageEnable``, every route).  Each change is written at once to ``kvConfigPath`` as
``KVConfigSerializeWrapper`` writes it -- ``{"configTable":{namespace:{key:value}}}``, one line --
atomically, the previous file kept as ``.bak`` (RocketMQ's ``MixAll.string2File``).  A namespace stays
when its last key is deleted, as in RocketMQ.

Loading reads the file when it exists; a file that is not the KV table is refused with an error
naming it (and left as it is), where 4.9.8 would start with an empty table and overwrite it at the
first change.  Without a path the table lives in memory only.
"""

from __future__ import annotations

import logging
import os

from ...common.errors import RmqStoreError
from ..jsonfmt import dumps, loads, write_config_file

__all__ = ["KVConfigManager", "NAMESPACE_ORDER_TOPIC_CONFIG", "KVConfigError"]

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil


class KVConfigError(RmqStoreError, ValueError):
    """A kvConfig.json that cannot be read."""


class KVConfigManager:
    def __init__(self, path: str = ""):
        self.path = path
        self.config_table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        if not self.path or not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
            data = loads(text) if text.strip() else {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise KVConfigError(f"{self.path}: not a KV config table: {exc}") from None
        table = data.get("configTable", {}) if isinstance(data, dict) else None
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise KVConfigError(f"{self.path}: not a KV config table ({{\"configTable\":{{namespace:{{key:value}}}}}})")
        for namespace, entries in table.items():
            self.config_table[str(namespace)] = {str(k): str(v) for k, v in entries.items()}
        log.info("KV config loaded from %s: %d namespaces", self.path, len(self.config_table))

    def persist(self) -> None:
        if self.path:
            write_config_file(self.path, dumps({"configTable": self.config_table}))

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        table = self.config_table.setdefault(namespace, {})
        log.info("KV config %s: %s %s = %s", "update" if key in table else "create", namespace, key, value)
        table[key] = value
        self.persist()

    def delete_kv_config(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None and key in table:
            log.info("KV config delete: %s %s (was %s)", namespace, key, table.pop(key))
        self.persist()

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        return self.config_table.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> bytes | None:
        """KVTable ``{"table":{...}}`` of ``namespace``, or None when the namespace does not exist."""
        table = self.config_table.get(namespace)
        return None if table is None else dumps({"table": table}).encode("utf-8")
