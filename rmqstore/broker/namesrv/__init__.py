"""The name server role: which broker serves which topic, and the tools' view of the cluster.

A RocketMQ client knows only name server addresses.  Before it sends to or pulls from a topic it
asks a name server for the topic's route (GET_ROUTEINFO_BY_TOPIC, 105): the brokers (name, cluster,
address by broker id, 0 being the master) and, per broker, the topic's read and write queue counts
and permission.  It then talks to the brokers directly.  Brokers register (REGISTER_BROKER, 103) every
30 s with their topic tables; operators' tools (``mqadmin``, the Dashboard) ask the name server for the
cluster, the topic lists, its KV and its own config.

This package is RocketMQ 4.9.8's ``namesrv`` module, one job a module:

* :mod:`.routes` -- ``RouteInfoManager``: the tables routes are made of, merged from every broker;
* :mod:`.register_body` -- the REGISTER_BROKER body (RegisterBrokerBody, plain or compressed);
* :mod:`.kvconfig` -- ``KVConfigManager``, persisted in ``kvConfig.json``;
* :mod:`.config` -- ``NamesrvConfig`` and GET/UPDATE_NAMESRV_CONFIG's view of it;
* :mod:`.processor` -- ``DefaultRequestProcessor``: the request codes and their answers;
* :mod:`.server` -- ``NameServer`` (``NamesrvController``): the socket, the scan of silent brokers, the
  in-process registration of the embedded name server's own broker.
"""

from .config import NamesrvConfig
from .kvconfig import KVConfigManager
from .register_body import decode_register_body, encode_register_body
from .routes import BROKER_CHANNEL_EXPIRED_TIME, MASTER_ID, RouteInfoManager
from .server import SCAN_NOT_ACTIVE_BROKER_INTERVAL, NameServer, embedded_namesrv_config

__all__ = ["NameServer", "NamesrvConfig", "KVConfigManager", "RouteInfoManager", "decode_register_body",
           "encode_register_body", "embedded_namesrv_config", "BROKER_CHANNEL_EXPIRED_TIME",
           "SCAN_NOT_ACTIVE_BROKER_INTERVAL", "MASTER_ID", "DIFFERENCES"]

#: where our name server deliberately differs from Apache RocketMQ 4.9.8's
DIFFERENCES = {
    "unknown_code": "A request code the name server does not know is answered REQUEST_CODE_NOT_SUPPORTED; 4.9.8's "
                    "DefaultRequestProcessor answers nothing and the client times out.",
    "register_body": "A REGISTER_BROKER body is read by its shape, not by the version the sender names (4.9.8 reads "
                     "a version-0 sender's body as the bare topic table).",
    "kv_config_file": "A kvConfig.json that does not parse stops the start with an error naming the file; 4.9.8 "
                      "starts empty and overwrites the file at the first change.",
    "bad_values": "PUT_KV_CONFIG without a value and a config update with a value of the wrong type are refused "
                  "with a remark naming the problem.",
    "expired_routes": "A route never names a broker past its 120 s expiry, also before the periodic scan runs.",
    "embedded_files": "The embedded name server keeps kvConfig.json and namesrv.properties in the store's config/ "
                      "folder; the standalone one under ~/namesrv/, as 4.9.8.",
    "netty_config": "GET_NAMESRV_CONFIG does not report Netty's thread, buffer and allocator settings.",
}
