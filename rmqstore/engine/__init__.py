"""RocketMQ's store services: the commit log and its put path, flush and commit, pre-allocation, the
consume queues and the index, dispatch, recovery, replication (ha), and the read path (reading,
lookup). The facade :class:`rmqstore.store.MessageStore` holds them.
"""
