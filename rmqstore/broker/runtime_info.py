"""The broker's runtime-info table (GET_BROKER_RUNTIME_INFO, 28): what ``mqadmin brokerStatus`` prints and
``clusterList`` reads its columns from.

4.9.8 builds it in three layers, and so does :func:`runtime_info`: the store's statistics
(``StoreStatsService.getRuntimeInfo``: :meth:`~.store_stats.StoreStatsService.runtime_info`), the store's
files (``DefaultMessageStore.getRuntimeInfo``: the disks' used ratios, a delay level's delivery offset, the
commitlog's offsets) and the broker's (``AdminBrokerProcessor.prepareRuntimeInfo``: version, the daily
put and get totals, thread-pool queues, dispatch lag, earliest message, the transient store pool, what is
still to flush, the disk's capacity).  Every value is a string, numbers printed as Java prints them.

Where this broker has nothing to measure, the value is what a 4.9.8 broker with nothing waiting shows: the
send, pull, query and end-transaction *queues* are 0 (requests are served on the event loop as they come;
RocketMQ queues them for thread pools -- their capacities are the configuration's), and so are their head
waits and ``pageCacheLockTimeMills`` (how long the put lock is held at this instant; ours is not timed).
"""

from __future__ import annotations

import os

from ..engine.lookup import pickup_store_timestamp
from ..files.store_paths import commitlog_dir, consume_queue_root
from .javatext import human_readable_byte_count, java_double
from .topics import SCHEDULE_TOPIC

__all__ = ["runtime_info", "disk_partition_space_used_percent", "earliest_message_time", "BROKER_VERSION",
           "BROKER_VERSION_DESC"]

#: MQVersion.CURRENT_VERSION of 4.9.8 (Version.V4_9_8's ordinal) and its name
BROKER_VERSION = 409
BROKER_VERSION_DESC = "V4_9_8"
_INTEGER_MAX = 2 ** 31 - 1

#: the queue capacities 4.9.8 reports: table key -> (BrokerConfig field, 4.9.8's default)
_QUEUE_CAPACITIES = {
    "sendThreadPoolQueueCapacity": ("send_thread_pool_queue_capacity", 10000),
    "pullThreadPoolQueueCapacity": ("pull_thread_pool_queue_capacity", 100000),
    "queryThreadPoolQueueCapacity": ("query_thread_pool_queue_capacity", 20000),
    "EndTransactionThreadPoolQueueCapacity": ("end_transaction_pool_queue_capacity", 100000),
}
_IDLE = ("sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "queryThreadPoolQueueSize", "EndTransactionQueueSize",
         "pageCacheLockTimeMills", "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
         "queryThreadPoolQueueHeadWaitTimeMills")


def disk_partition_space_used_percent(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: the used share of ``path``'s file system, rounded up to a
    hundredth; -1 when the path does not exist."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    percent = used * 100 // entire + (1 if used * 100 % entire else 0)
    return percent / 100.0


def earliest_message_time(store) -> int:
    """DefaultMessageStore.getEarliestMessageTime: the store time of the commitlog's first message, read as a
    range of twice maxMessageSize from the first offset -- so -1 until that much is readable (8 MiB with the
    default maxMessageSize), and for good with commitlog files shorter than that, as on a 4.9.8 broker."""
    return pickup_store_timestamp(store, store.get_min_phy_offset(), store.config.max_message_size * 2)


def _store_files(broker) -> dict[str, str]:
    """DefaultMessageStore.getRuntimeInfo beyond the statistics."""
    store = broker.store
    path = commitlog_dir(store.root)
    ratio = disk_partition_space_used_percent(path)
    info = {f"commitLogDiskRatio_{path}": java_double(ratio), "commitLogDiskRatio": java_double(ratio),
            "consumeQueueDiskRatio": java_double(disk_partition_space_used_percent(consume_queue_root(store.root))),
            "commitLogMinOffset": str(store.get_min_phy_offset()),
            "commitLogMaxOffset": str(store.get_max_phy_offset())}
    for level, offset in sorted(broker.schedule_service.offsets.items()):  # the levels delivered from
        max_offset = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
        info[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
    return info


def _broker(broker) -> dict[str, str]:
    """AdminBrokerProcessor.prepareRuntimeInfo's own keys."""
    store, cfg, stats = broker.store, broker.config, broker.stats
    daily = stats.daily
    puts = store.stats.snapshot()["putMessageTimesTotal"]
    info = {"brokerVersionDesc": BROKER_VERSION_DESC, "brokerVersion": str(BROKER_VERSION),
            "msgPutTotalYesterdayMorning": str(daily.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(daily.put_today_morning), "msgPutTotalTodayNow": str(puts),
            "msgGetTotalYesterdayMorning": str(daily.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(daily.get_today_morning),
            "msgGetTotalTodayNow": str(stats.store.get_message_transfered_msg_count)}
    info.update({key: str(getattr(cfg, name, default)) for key, (name, default) in _QUEUE_CAPACITIES.items()})
    info.update(dict.fromkeys(_IDLE, "0"))
    info["dispatchBehindBytes"] = str(store.reput_message_service.behind())
    info["earliestMessageTimeStamp"] = str(earliest_message_time(store))
    info["startAcceptSendRequestTimeStamp"] = str(getattr(cfg, "start_accept_send_request_time_stamp", 0))
    pool = store.transient_store_pool
    info["remainTransientStoreBufferNumbs"] = str(pool.available_buffer_nums() if pool is not None else _INTEGER_MAX)
    queue = store.commit_log.mapped_file_queue
    if pool is not None:
        info["remainHowManyDataToCommit"] = human_readable_byte_count(queue.remain_how_many_data_to_commit())
    info["remainHowManyDataToFlush"] = human_readable_byte_count(queue.remain_how_many_data_to_flush())
    if os.path.isdir(store.root):
        st = os.statvfs(store.root)
        info["commitLogDirCapacity"] = (f"Total : {human_readable_byte_count(st.f_blocks * st.f_frsize)}, "
                                        f"Free : {human_readable_byte_count(st.f_bavail * st.f_frsize)}.")
    return info


def runtime_info(broker) -> dict[str, str]:
    """The whole table of a started broker."""
    info = broker.stats.store.runtime_info(broker.stats.clock())
    info.update(_store_files(broker))
    info.update(_broker(broker))
    return info
