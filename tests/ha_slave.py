"""A slave process for the HA tests: replicate from a master until killed.

    python tests/ha_slave.py STORE_DIR MASTER_HOST:PORT FILE_SIZE

Opens (recovers) the store as a SLAVE with ``ha_master_address``, prints ``S <max offset
after recovery>`` once started, and replicates until it gets SIGTERM (clean shutdown,
exit 0) or SIGKILL (the test's crash).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from rmqstore import BrokerRole, MessageStore, StoreConfig  # noqa: E402


def main() -> int:
    root, master, file_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = MessageStore(root, StoreConfig(mapped_file_size_commit_log=file_size, broker_role=BrokerRole.SLAVE,
                                           ha_master_address=master, ha_reconnect_interval=100,
                                           mapped_file_size_consume_queue=20 * 50))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    store.start()
    print("S", store.get_max_phy_offset(), flush=True)
    stop.wait()
    store.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
