"""rmqstore.admin: an admin client for any RocketMQ 4.x cluster -- Apache's brokers or rmqstore's -- in Python.

What ``mqadmin`` does, as calls that return tables::

    from rmqstore.admin import Admin

    with Admin("127.0.0.1:9876") as admin:
        admin.cluster_list().to_pandas()                  # clusterList
        admin.update_topic("Orders", cluster="DefaultCluster", write_queue_nums=4, read_queue_nums=4)
        admin.topic_status("Orders").to_pandas()          # per queue: min/max offset, last store time
        admin.consumer_progress("OrderProcessors").to_pandas()   # per queue: broker/consumer offset, lag
        admin.reset_offset_by_time("OrderProcessors", "Orders", "now")
        admin.query_msg_by_key("Orders", "order-42").messages
        admin.snapshot()                                  # everything a live view shows, in three rounds

The calls are mqadmin's commands in Python style (``topicStatus`` -> ``topic_status``, ``getBrokerConfig`` ->
``get_broker_config``; ``consumerProgress`` without ``-g`` -> ``all_consumer_progress``) and do what RocketMQ
4.9.8's ``DefaultMQAdminExt`` does for them, request for request, so they work the same against the Java broker
and ours; ``rmqstore admin <command>`` is the same in mqadmin's words (:mod:`rmqstore.commands.admin`).

The package, one job a module:

* :mod:`.client` -- connections (one per server, pooled), signing (ACL), and errors: a refusal raises
  :class:`~rmqstore.common.errors.AdminError` with RocketMQ's ``code`` and ``remark``, silence
  :class:`~rmqstore.common.errors.AdminTimeoutError`, a server down :class:`~rmqstore.common.errors.AdminConnectionError`;
* :mod:`.bodies` -- the answers' bodies (fastjson's text, with its integer and object map keys; stored records)
  read into :mod:`.results` and :mod:`.stored` (dataclasses with ``.to_pandas()``; pandas only imported then);
* :mod:`.topics`, :mod:`.groups`, :mod:`.messages` -- the calls, by what they are about; :mod:`.snapshot` the
  whole cluster at once for a live view;
* :mod:`.sync` -- :class:`AsyncAdmin` (every call a coroutine, on the caller's loop) and :class:`Admin`, the same
  calls blocking, run on a loop of the admin's own in a thread: that is what works in Jupyter, where the kernel
  already runs a loop that no call may block or re-enter (:mod:`.sync` says more);
* :mod:`.text` -- what mqadmin prints for each result, for the command line.
"""

from ..common.errors import AdminConnectionError, AdminError, AdminTimeoutError
from .results import (BrokerAddress, BrokerConsumeStats, ClusterInfo, ConsumerConnection, ConsumerProgress,
                      GroupsProgress, ProducerConnection, QueueOffsets, QueueProgress, ResetOffsets, TopicList,
                      TopicRoute, TopicStatus)
from .snapshot import BrokerSnapshot, ClusterSnapshot
from .stored import BrokerConfig, BrokerRuntimeInfo, MessageTrack, MessageView, QueryResult, SubscriptionGroups, \
    TopicConfigs
from .sync import Admin, AsyncAdmin
from .topics import Applied

__all__ = [
    "Admin", "AsyncAdmin", "AdminError", "AdminTimeoutError", "AdminConnectionError", "Applied", "BrokerAddress",
    "BrokerConfig", "BrokerConsumeStats", "BrokerRuntimeInfo", "BrokerSnapshot", "ClusterInfo", "ClusterSnapshot",
    "ConsumerConnection", "ConsumerProgress", "GroupsProgress", "MessageTrack", "MessageView", "ProducerConnection",
    "QueryResult", "QueueOffsets", "QueueProgress", "ResetOffsets", "SubscriptionGroups", "TopicConfigs", "TopicList",
    "TopicRoute", "TopicStatus",
]
