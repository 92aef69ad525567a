"""RocketMQ 4.9.8's broker configuration keys and their defaults: what its ``Configuration`` holds.

A 4.9.8 broker's configuration is every field of four classes -- ``BrokerConfig``,
``NettyServerConfig``, ``NettyClientConfig`` and ``MessageStoreConfig`` -- with the properties of
its broker.conf merged in; GET_BROKER_CONFIG answers all of it and UPDATE_BROKER_CONFIG may change
any of it (:mod:`rmqstore.broker.broker_properties`).  :data:`ROCKETMQ_DEFAULTS` is that key set
with each default as the broker shows it (Java's text of the value), for the keys whose default
does not depend on the machine; :func:`rocketmq_defaults` adds the thread counts RocketMQ derives
from the processor count.  A field whose default is null (``namesrvAddr``, ``haMasterAddress``,
``storePathCommitLog``...) is not shown by 4.9.8 until set, and is not listed here.  The keys
that name the machine (``brokerIP1``, ``brokerIP2``, ``brokerName``, ``storePathRootDir``,
``rocketmqHome``) are the broker's own values, never defaults.

The table was read from the real classes (``tests/interop/java/ConfigDefaults.java`` prints
them; ``tests/interop/test_adminb_mqadmin.py`` checks this table against it), with two values as
a running broker shows them: ``listenPort`` 10911 (BrokerStartup's, where NettyServerConfig says
8888) and ``bitMapLengthConsumeQueueExt`` 112 (set at start from ``expectConsumerNumUseFilter``
and ``maxErrorRateOfBloomFilter``).
"""

from __future__ import annotations

import os

__all__ = ["ROCKETMQ_DEFAULTS", "MACHINE_KEYS", "rocketmq_defaults"]

#: keys whose 4.9.8 default is the machine's (its address, host name, home): always the broker's own value
MACHINE_KEYS = ("brokerIP1", "brokerIP2", "brokerName", "storePathRootDir", "rocketmqHome")

ROCKETMQ_DEFAULTS: dict[str, str] = {
    # BrokerConfig
    "aclEnable": "false", "adminBrokerThreadPoolNums": "16", "autoCreateSubscriptionGroup": "true",
    "autoCreateTopicEnable": "true", "autoDeleteUnusedStats": "false", "brokerClusterName": "DefaultCluster",
    "brokerFastFailureEnable": "true", "brokerId": "0", "brokerPermission": "6", "brokerTopicEnable": "true",
    "clientManageThreadPoolNums": "32", "clientManagerThreadPoolQueueCapacity": "1000000",
    "clusterTopicEnable": "true", "commercialBaseCount": "1", "commercialBigCount": "1", "commercialEnable": "true",
    "commercialTimerCount": "1", "commercialTransCount": "1", "compressedRegister": "false",
    "configBlackList": "configBlackList;brokerConfigPath", "consumerFallbehindThreshold": "17179869184",
    "consumerManageThreadPoolNums": "32", "consumerManagerThreadPoolQueueCapacity": "1000000",
    "defaultTopicQueueNums": "8", "disableConsumeIfConsumerReadSlowly": "false", "enableCalcFilterBitMap": "false",
    "enableDetailStat": "true", "enablePropertyFilter": "false", "endTransactionPoolQueueCapacity": "100000",
    "expectConsumerNumUseFilter": "32", "fetchNamesrvAddrByAddressServer": "false",
    "filterDataCleanTimeSpan": "86400000", "filterServerNums": "0", "filterSupportRetry": "false",
    "flushConsumerOffsetHistoryInterval": "60000", "flushConsumerOffsetInterval": "5000", "forceRegister": "true",
    "heartbeatThreadPoolQueueCapacity": "50000", "highSpeedMode": "false", "isolateLogEnable": "false",
    "longPollingEnable": "true", "maxDelayTime": "40", "maxErrorRateOfBloomFilter": "20", "messageStorePlugIn": "",
    "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC", "notifyConsumerIdsChangedEnable": "true",
    "pullThreadPoolQueueCapacity": "100000", "putThreadPoolQueueCapacity": "10000",
    "queryThreadPoolQueueCapacity": "20000", "regionId": "DefaultRegion", "registerBrokerTimeoutMills": "6000",
    "registerNameServerPeriod": "30000", "rejectTransactionMessage": "false", "replyThreadPoolQueueCapacity": "10000",
    "sendThreadPoolQueueCapacity": "10000", "shortPollingTimeMills": "1000", "slaveReadEnable": "false",
    "startAcceptSendRequestTimeStamp": "0", "storeReplyMessageEnable": "true", "traceOn": "true",
    "traceTopicEnable": "false", "transactionCheckInterval": "60000", "transactionCheckMax": "15",
    "transactionTimeOut": "6000", "transferMsgByHeap": "true", "waitTimeMillsInHeartbeatQueue": "31000",
    "waitTimeMillsInPullQueue": "5000", "waitTimeMillsInSendQueue": "200", "waitTimeMillsInTransactionQueue": "3000",
    # NettyServerConfig
    "listenPort": "10911", "serverAsyncSemaphoreValue": "64", "serverCallbackExecutorThreads": "0",
    "serverChannelMaxIdleTimeSeconds": "120", "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true", "serverSelectorThreads": "3", "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0", "serverSocketSndBufSize": "0", "serverWorkerThreads": "8",
    "useEpollNativeSelector": "false",
    # NettyClientConfig
    "channelNotActiveInterval": "60000", "clientAsyncSemaphoreValue": "65535",
    "clientChannelMaxIdleTimeSeconds": "120", "clientCloseSocketIfTimeout": "true",
    "clientOnewaySemaphoreValue": "65535", "clientPooledByteBufAllocatorEnable": "false",
    "clientSocketRcvBufSize": "0", "clientSocketSndBufSize": "0", "clientWorkerThreads": "4",
    "connectTimeoutMillis": "3000", "useTLS": "false", "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
    # MessageStoreConfig
    "accessMessageInMemoryMaxRatio": "40", "bitMapLengthConsumeQueueExt": "112", "brokerRole": "ASYNC_MASTER",
    "checkCRCOnRecover": "true", "cleanFileForciblyEnable": "true", "cleanResourceInterval": "10000",
    "commitCommitLogLeastPages": "4", "commitCommitLogThoroughInterval": "200", "commitIntervalCommitLog": "200",
    "debugLockEnable": "false", "defaultQueryMaxNum": "32", "deleteCommitLogFilesInterval": "100",
    "deleteConsumeQueueFilesInterval": "100", "deleteWhen": "04", "destroyMapedFileIntervalForcibly": "120000",
    "diskFallRecorded": "true", "diskMaxUsedSpaceRatio": "75", "duplicationEnable": "false",
    "enableConsumeQueueExt": "false", "enableDLegerCommitLog": "false", "enableLmq": "false",
    "enableMultiDispatch": "false", "enableScheduleAsyncDeliver": "false", "enableScheduleMessageStats": "true",
    "fastFailIfNoBufferInStorePool": "false", "fileReservedTime": "72", "flushCommitLogLeastPages": "4",
    "flushCommitLogThoroughInterval": "10000", "flushCommitLogTimed": "true", "flushConsumeQueueLeastPages": "2",
    "flushConsumeQueueThoroughInterval": "60000", "flushDelayOffsetInterval": "10000", "flushDiskType": "ASYNC_FLUSH",
    "flushIntervalCommitLog": "500", "flushIntervalConsumeQueue": "1000", "flushLeastPagesWhenWarmMapedFile": "4096",
    "haHousekeepingInterval": "20000", "haListenPort": "10912", "haSendHeartbeatInterval": "5000",
    "haSlaveFallbehindMax": "268435456", "haTransferBatchSize": "32768", "isEnableBatchPush": "false",
    "mappedFileSizeCommitLog": "1073741824", "mappedFileSizeConsumeQueue": "6000000",
    "mappedFileSizeConsumeQueueExt": "50331648", "maxHashSlotNum": "5000000", "maxIndexNum": "20000000",
    "maxLmqConsumeQueueNum": "20000", "maxMessageSize": "4194304", "maxMsgsNumBatch": "64",
    "maxTransferBytesOnMessageInDisk": "65536", "maxTransferBytesOnMessageInMemory": "262144",
    "maxTransferCountOnMessageInDisk": "8", "maxTransferCountOnMessageInMemory": "32",
    "messageDelayLevel": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", "messageIndexEnable": "true",
    "messageIndexSafe": "false", "offsetCheckInSlave": "false", "osPageCacheBusyTimeOutMills": "1000",
    "putMsgIndexHightWater": "600000", "redeleteHangedFileInterval": "120000",
    "scheduleAsyncDeliverMaxPendingLimit": "2000", "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "slaveTimeout": "3000", "syncFlushTimeout": "5000", "transientStorePoolEnable": "false",
    "transientStorePoolSize": "5", "useReentrantLockWhenPutMessage": "true", "warmMapedFileEnable": "false",
}


def rocketmq_defaults(processors: int | None = None) -> dict[str, str]:
    """:data:`ROCKETMQ_DEFAULTS` with the thread counts 4.9.8 derives from the processor count."""
    n = processors or os.cpu_count() or 1
    derived = {"clientCallbackExecutorThreads": n, "endTransactionThreadPoolNums": 8 + 2 * n,
               "heartbeatThreadPoolNums": min(32, n), "processReplyMessageThreadPoolNums": 16 + 2 * n,
               "pullMessageThreadPoolNums": 16 + 2 * n, "putMessageFutureThreadPoolNums": min(n, 4),
               "queryMessageThreadPoolNums": 8 + n, "sendMessageThreadPoolNums": min(n, 4)}
    return dict(ROCKETMQ_DEFAULTS, **{key: str(value) for key, value in derived.items()})
