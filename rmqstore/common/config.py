"""Store configuration: RocketMQ's ``MessageStoreConfig`` fields the engine uses.

Names follow RocketMQ's in Python style; defaults are RocketMQ 4.9.8's.  Sizes can be
tiny (tests use 64 KiB commitlog files to force rollovers, as RocketMQ's own tests do).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields

__all__ = ["FlushDiskType", "BrokerRole", "StoreConfig"]


class FlushDiskType(str, enum.Enum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class BrokerRole(str, enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


_DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass
class StoreConfig:
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    fast_fail_if_no_buffer_in_store_pool: bool = False
    max_message_size: int = 4 * 1024 * 1024
    message_delay_level: str = _DEFAULT_DELAY_LEVELS
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    #: abnormal recovery also starts no later than the index checkpoint (RocketMQ's messageIndexSafe)
    message_index_safe: bool = False
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_commit_log_timed: bool = True
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    sync_flush_timeout: int = 5_000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    use_reentrant_lock_when_put_message: bool = True
    warm_mapped_file_enable: bool = False
    #: ours, not RocketMQ's: the allocate service pre-faults each new commitlog file
    #: (madvise POPULATE_WRITE) so puts do not page-fault; see MappedFile.pre_fault.
    #: Not with SYNC_FLUSH, whose next flush would write the whole file's zeros back first
    pre_fault_mapped_file: bool = True
    flush_least_pages_when_warm_mapped_file: int = 1024 // 4 * 16
    max_msgs_num_batch: int = 64
    os_page_cache_busy_timeout_mills: int = 1000
    allocate_wait_timeout_ms: int = 5_000  # AllocateMappedFileService.waitTimeOut
    store_host: str = "127.0.0.1:10911"
    # -- HA replication (rmqstore.engine.ha); RocketMQ's names and defaults.  The broker sets
    # haListenPort to its own port + 1; haMasterAddress is the master's host:haListenPort
    ha_listen_port: int = 10912
    ha_send_heartbeat_interval: int = 1000 * 5
    ha_housekeeping_interval: int = 1000 * 20
    ha_transfer_batch_size: int = 1024 * 32
    ha_master_address: str | None = None
    ha_slave_fallbehind_max: int = 1024 * 1024 * 256
    #: ours: a master listens for slaves only when asked (a library store opens no port by
    #: default; RocketMQ's broker always listens); a SLAVE always runs its HA client
    ha_enable: bool = False
    #: ours: the address the HA port binds (RocketMQ binds every interface)
    ha_listen_host: str = "127.0.0.1"
    #: ours: a slave retries a closed or refused connection after this (RocketMQ: 5 s, fixed)
    ha_reconnect_interval: int = 5000
    #: ours: use the compiled fast path where it is built (rmqstore.common.native); False forces this
    #: store onto the pure-Python path, as RMQSTORE_PURE=1 does for the whole process
    native: bool = True

    def __post_init__(self):
        self.flush_disk_type = FlushDiskType(self.flush_disk_type)
        self.broker_role = BrokerRole(self.broker_role)
        self.flush_least_pages_when_warm_mapped_file = int(self.flush_least_pages_when_warm_mapped_file)
        if self.mapped_file_size_commit_log <= 8:
            raise ValueError("mapped_file_size_commit_log must exceed the 8-byte blank record")
        if self.mapped_file_size_consume_queue % 20:  # the getter rounds up to whole units
            self.mapped_file_size_consume_queue += 20 - self.mapped_file_size_consume_queue % 20

    @property
    def is_transient_store_pool_enabled(self) -> bool:
        """RocketMQ's ``isTransientStorePoolEnable``: only on an async-flushing master."""
        return (self.transient_store_pool_enable
                and self.flush_disk_type is FlushDiskType.ASYNC_FLUSH
                and self.broker_role is not BrokerRole.SLAVE)

    def delay_level_table(self) -> dict[int, int]:
        """Delay level (1-based) -> delay in milliseconds."""
        table = {}
        for level, token in enumerate(self.message_delay_level.split(), start=1):
            table[level] = int(token[:-1]) * _UNIT_MS[token[-1]]
        return table

    @classmethod
    def from_manifest(cls, cfg: dict, **overrides) -> "StoreConfig":
        """Build from a fixture manifest's ``config`` (RocketMQ's camelCase names)."""
        import re

        names = {f.name for f in fields(cls)}
        kwargs = {}
        for key, value in cfg.items():
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key.split("(")[0]).lower()
            snake = snake.replace("maped", "mapped")
            if key == "transientStorePoolEnable(raw)":
                snake = "transient_store_pool_enable"
            if snake in names:
                kwargs[snake] = value
        kwargs.update(overrides)
        return cls(**kwargs)
