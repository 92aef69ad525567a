"""The name server's requests: RocketMQ 4.9.8's ``DefaultRequestProcessor``, code for code.

Brokers: REGISTER_BROKER (103; the answer's header names a slave's master, its body is the
ORDER_TOPIC_CONFIG KV table), UNREGISTER_BROKER (104), QUERY_DATA_VERSION (322).  Clients:
GET_ROUTEINFO_BY_TOPIC (105).  Tools (``mqadmin``, the Dashboard): GET_BROKER_CLUSTER_INFO (106),
GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), GET_TOPICS_BY_CLUSTER (224), GET_SYSTEM_TOPIC_LIST_FROM_NS (304),
the unit topic lists (311-313), DELETE_TOPIC_IN_NAMESRV (216), WIPE/ADD_WRITE_PERM_OF_BROKER (205/327),
the KV config (100/101/102/219) and the name server's own config (318/319).

Answers are 4.9.8's: codes, remarks, header fields and bodies (see :mod:`.routes`, :mod:`.kvconfig`,
:mod:`.config`).  Where we differ: a code 4.9.8's name server does not know gets no answer there (the
client times out) and REQUEST_CODE_NOT_SUPPORTED here; a PUT_KV_CONFIG without a value and an update of
the name server's config with a value of the wrong type are refused with a remark naming them; a
REGISTER_BROKER body is read by its shape, not by the sender's version (:mod:`.register_body`).
"""

from __future__ import annotations

from ...format.crc import crc32
from ...remoting import Connection, RemotingCommand, RemotingServer, RequestCode, ResponseCode
from ...remoting.codes import MQVersion
from ..headers import Header
from ..jsonfmt import dumps, loads
from .kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG
from .register_body import RegisterBodyError, data_version_json, decode_register_body, parse_data_version
from .routes import encode_route, topic_list_body

__all__ = ["DefaultRequestProcessor", "APPLY_TOPIC_URL", "suggest_todo"]

APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"  # FAQUrl.APPLY_TOPIC_URL


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo: the tip 4.9.8 appends to some remarks."""
    return f"\nSee {url} for further details."


class DefaultRequestProcessor:
    """The handlers of one :class:`~rmqstore.broker.namesrv.NameServer` (its routes, KV and config)."""

    def __init__(self, namesrv):
        self.namesrv = namesrv

    @property
    def routes(self):
        return self.namesrv.routes

    @property
    def kv(self):
        return self.namesrv.kv

    def register(self, server: RemotingServer) -> None:
        r = RequestCode
        handlers = {
            r.PUT_KV_CONFIG: self.put_kv_config, r.GET_KV_CONFIG: self.get_kv_config,
            r.DELETE_KV_CONFIG: self.delete_kv_config, r.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            r.QUERY_DATA_VERSION: self.query_broker_topic_config, r.REGISTER_BROKER: self.register_broker,
            r.UNREGISTER_BROKER: self.unregister_broker, r.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            r.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            r.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            r.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            r.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list_from_nameserver,
            r.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv, r.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            r.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list_from_ns,
            r.GET_UNIT_TOPIC_LIST: self._topic_list(lambda: self.routes.unit_topics()),
            r.GET_HAS_UNIT_SUB_TOPIC_LIST: self._topic_list(lambda: self.routes.has_unit_sub_topics()),
            r.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._topic_list(lambda: self.routes.has_unit_sub_ununit_topics()),
            r.UPDATE_NAMESRV_CONFIG: self.update_config, r.GET_NAMESRV_CONFIG: self.get_config,
        }
        for code, handler in handlers.items():
            server.register(code, handler)

    # -- KV config ---------------------------------------------------------------------------------
    def put_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        f = req.ext_fields
        if f.get("namespace") is None or f.get("key") is None:
            return req.response(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        if f.get("value") is None:
            return req.response(ResponseCode.SYSTEM_ERROR, "value is null")
        self.kv.put_kv_config(f["namespace"], f["key"], f["value"])
        return req.response(ResponseCode.SUCCESS)

    def get_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        namespace, key = req.ext_fields.get("namespace"), req.ext_fields.get("key")
        value = self.kv.get_kv_config(namespace, key)
        if value is not None:
            return req.response(ResponseCode.SUCCESS, ext_fields={"value": value})
        return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")

    def delete_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        self.kv.delete_kv_config(req.ext_fields.get("namespace"), req.ext_fields.get("key"))
        return req.response(ResponseCode.SUCCESS)

    def get_kv_list_by_namespace(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        namespace = req.ext_fields.get("namespace")
        body = self.kv.get_kv_list_by_namespace(namespace)
        if body is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return req.response(ResponseCode.SUCCESS, body=body)

    # -- brokers -----------------------------------------------------------------------------------
    def register_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        expected = h.int("bodyCrc32", 0)
        if expected and crc32(req.body) != expected:
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        try:
            body = decode_register_body(req.body, h.bool("compressed", False))
        except RegisterBodyError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}")
        result = self.routes.register_broker(
            h.str("clusterName"), h.str("brokerAddr"), h.str("brokerName"), h.int("brokerId"),
            h.str("haServerAddr", ""), body.data_version, body.topic_configs, body.filter_servers, conn)
        return req.response(ResponseCode.SUCCESS, ext_fields=result,
                            body=self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG) or b"")

    def unregister_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        self.routes.unregister_broker(h.str("clusterName"), h.str("brokerAddr", ""), h.str("brokerName"),
                                      h.int("brokerId"))
        return req.response(ResponseCode.SUCCESS)

    def query_broker_topic_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        addr = Header(req.ext_fields).str("brokerAddr")
        try:
            version = parse_data_version(loads(req.body.decode("utf-8")) if req.body else None)
        except (UnicodeDecodeError, ValueError, RegisterBodyError) as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"the body is not a DataVersion: {exc}")
        changed = self.routes.is_broker_topic_config_changed(addr, version)
        if not changed:
            self.routes.update_broker_info_update_timestamp(addr)
        known = self.routes.query_broker_topic_config(addr)
        body = dumps(data_version_json(known)).encode("utf-8") if known is not None else b""
        return req.response(ResponseCode.SUCCESS, ext_fields={"changed": str(changed).lower()}, body=body)

    # -- routes ------------------------------------------------------------------------------------
    def get_route_info_by_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        topic = h.str("topic")
        route = self.namesrv.route_data(topic)
        if route is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: "
                                                              f"{topic}{suggest_todo(APPLY_TOPIC_URL)}")
        if self.namesrv.config.order_message_enable:
            order_conf = self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            if order_conf is not None:
                route["orderTopicConf"] = order_conf
        standard = req.version >= MQVersion.V4_9_4 or h.bool("acceptStandardJsonOnly", False)
        return req.response(ResponseCode.SUCCESS, body=encode_route(route, standard))

    def get_broker_cluster_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self.routes.cluster_info_body())

    def wipe_write_perm_of_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.operate_write_perm_of_broker(Header(req.ext_fields).str("brokerName"), wipe=True)
        return req.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    def add_write_perm_of_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.operate_write_perm_of_broker(Header(req.ext_fields).str("brokerName"), wipe=False)
        return req.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})

    def get_all_topic_list_from_nameserver(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=topic_list_body(self.routes.all_topics()))

    def delete_topic_in_namesrv(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = Header(req.ext_fields)
        self.routes.delete_topic(h.str("topic"), h.str("clusterName", "") or None)
        return req.response(ResponseCode.SUCCESS)

    def get_topics_by_cluster(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topics = self.routes.topics_by_cluster(Header(req.ext_fields).str("cluster"))
        return req.response(ResponseCode.SUCCESS, body=topic_list_body(topics))

    def get_system_topic_list_from_ns(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topics, addr = self.routes.system_topics()
        return req.response(ResponseCode.SUCCESS, body=topic_list_body(topics, addr))

    def _topic_list(self, topics):
        def handler(conn: Connection, req: RemotingCommand) -> RemotingCommand:
            return req.response(ResponseCode.SUCCESS, body=topic_list_body(topics()))
        return handler

    # -- the name server's config ------------------------------------------------------------------
    def update_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        if not req.body:
            return req.response(ResponseCode.SUCCESS)
        try:
            text = req.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}")
        refused = self.namesrv.config.update(text)
        if refused is None:
            return req.response(ResponseCode.SUCCESS)
        kind, remark = refused
        return req.response(ResponseCode.NO_PERMISSION if kind == "black list" else ResponseCode.SYSTEM_ERROR, remark)

    def get_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=self.namesrv.config.properties_text().encode("utf-8"))
