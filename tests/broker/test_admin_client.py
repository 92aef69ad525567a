"""rmqstore.admin's failures against our broker and stand-in servers: refusals carry RocketMQ's code and remark,
a server that does not answer times out, a server that is down or goes down is named, a body that does not parse
is refused, ACL credentials are sent when given -- and after each the admin goes on working.  Also: the blocking
API works where an event loop already runs (a Jupyter cell)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from broker_support import BrokerThread, run_async
from rmqstore.admin import Admin, AsyncAdmin
from rmqstore.broker.background import ServiceThread
from rmqstore.common.errors import AdminConnectionError, AdminError, AdminTimeoutError, RmqStoreError
from rmqstore.remoting import RemotingServer, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(tmp_path / "store") as bt:
        yield bt


def broker_addr(bt: BrokerThread) -> str:
    return f"127.0.0.1:{bt.port}"


def free_address() -> str:
    """A loopback address nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class StandIn:
    """A remoting server on its own loop answering chosen codes with a processor of the test's."""

    def __init__(self, processors: dict):
        self.server = RemotingServer("127.0.0.1", 0)
        for code, processor in processors.items():
            self.server.register(code, processor)
        self.thread = ServiceThread(self.server, "stand-in")

    @property
    def address(self) -> str:
        return self.server.address

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.thread.stop()


# -- refusals --------------------------------------------------------------------------------------------------

def test_a_name_server_refusal_carries_its_code_and_remark(broker):
    with Admin(broker.namesrv, timeout=10) as admin:
        with pytest.raises(AdminError) as info:
            admin.topic_route("NoSuchTopic")
    err = info.value
    assert err.code == ResponseCode.TOPIC_NOT_EXIST and err.address == broker.namesrv
    assert err.remark.startswith("No topic route info in name server for the topic: NoSuchTopic")
    assert err.request == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert "CODE: 17  DESC: No topic route info" in str(err) and broker.namesrv in str(err)


def test_a_broker_refusal_carries_its_code_and_remark_and_the_admin_goes_on(broker):
    with Admin(broker.namesrv, timeout=10) as admin:
        with pytest.raises(AdminError) as info:
            admin.update_topic("TBW102", broker_addr=broker_addr(broker))
        assert (info.value.code, info.value.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        "The topic[TBW102] is conflict with system topic.")
        assert info.value.address == broker_addr(broker)
        admin.update_topic("AfterRefusalT", broker_addr=broker_addr(broker), read_queue_nums=2, write_queue_nums=2)
        assert broker.broker.topics.select("AfterRefusalT").write_queue_nums == 2


# -- servers that do not answer, are down, or go down ------------------------------------------------------------

def test_a_server_that_does_not_answer_times_out(broker):
    async def never(conn, req):
        await asyncio.sleep(3600)

    with StandIn({RequestCode.GET_BROKER_CLUSTER_INFO: never}) as silent, Admin(silent.address, timeout=0.5) as admin:
        with pytest.raises(AdminTimeoutError) as info:
            admin.cluster_list()
        assert isinstance(info.value, TimeoutError) and info.value.code is None
        assert silent.address in str(info.value) and "GET_BROKER_CLUSTER_INFO" in str(info.value)
        # the same admin, another server: still fine
        assert admin.broker_status(broker_addr(broker)).version_desc == "V4_9_8"


def test_a_server_that_is_down_is_named(broker):
    down = free_address()
    with Admin(down, timeout=10) as admin:
        with pytest.raises(AdminConnectionError) as info:
            admin.cluster_list()
        assert isinstance(info.value, ConnectionError) and down in str(info.value) and info.value.address == down
        with pytest.raises(AdminConnectionError):
            admin.broker_status(free_address())
        assert admin.broker_status(broker_addr(broker)).commit_log_max_offset == 0


def test_a_broker_that_goes_down_between_calls(tmp_path):
    bt = BrokerThread(tmp_path / "store")
    address = broker_addr(bt)
    try:
        admin = Admin(bt.namesrv, timeout=10)
        assert admin.broker_status(address).version_desc == "V4_9_8"  # a connection is pooled now
    finally:
        bt.stop()
    try:
        with pytest.raises(AdminConnectionError) as info:
            admin.broker_status(address)
        assert address in str(info.value)
    finally:
        admin.close()


def test_the_next_name_server_is_asked_when_one_is_down(broker):
    with Admin(f"{free_address()};{broker.namesrv}", timeout=10) as admin:
        info = admin.cluster_list()
    assert info.master_addresses() == [broker_addr(broker)]


def test_a_body_that_does_not_parse_is_refused_naming_the_request():
    def garbage(conn, req):
        return req.response(ResponseCode.SUCCESS, body=b'{"brokerAddrTable":{"b":{"brokerAddrs":')

    with StandIn({RequestCode.GET_BROKER_CLUSTER_INFO: garbage}) as server, Admin(server.address) as admin:
        with pytest.raises(AdminError) as info:
            admin.cluster_list()
    assert info.value.code is None and "GET_BROKER_CLUSTER_INFO" in str(info.value)
    assert "does not parse" in str(info.value) and server.address in str(info.value)


def test_every_failure_is_one_of_the_projects_errors(broker):
    with Admin(broker.namesrv, timeout=10) as admin:
        for call in (lambda: admin.topic_status("NoSuchTopic"), lambda: admin.broker_status(free_address()),
                     lambda: admin.consumer_connection("NobodyG"), lambda: admin.query_msg_by_id("not an id")):
            with pytest.raises(RmqStoreError):
                call()


# -- ACL ---------------------------------------------------------------------------------------------------------

ADMIN_ACCOUNT = """\
accounts:
  - accessKey: opsAdminKey
    secretKey: opsSecret1
    admin: true
"""


def test_acl_credentials_sign_every_request(tmp_path):
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(ADMIN_ACCOUNT, encoding="utf-8")
    with BrokerThread(tmp_path / "store", acl_enable=True, acl_file=str(rules)) as bt:
        address = broker_addr(bt)
        with Admin(bt.namesrv, timeout=10) as anonymous:
            with pytest.raises(AdminError) as info:
                anonymous.update_topic("AclT", broker_addr=address)
            assert info.value.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in info.value.remark
        with Admin(bt.namesrv, timeout=10, access_key="opsAdminKey", secret_key="wrong") as wrong:
            with pytest.raises(AdminError) as info:
                wrong.update_topic("AclT", broker_addr=address)
            assert "signature" in info.value.remark.lower()
        with Admin(bt.namesrv, timeout=10, access_key="opsAdminKey", secret_key="opsSecret1") as ops:
            ops.update_topic("AclT", broker_addr=address, write_queue_nums=3, read_queue_nums=3)
            assert ops.topic_status("AclT").queues[-1].queue_id == 2
        assert bt.broker.topics.select("AclT").write_queue_nums == 3


# -- where a loop already runs -------------------------------------------------------------------------------------

def test_the_blocking_api_works_inside_a_running_event_loop(broker):
    async def a_cell():  # a notebook cell runs in the kernel's loop; it calls the blocking API
        with Admin(broker.namesrv, timeout=10) as admin:
            return admin.cluster_list()

    assert run_async(a_cell()).master_addresses() == [broker_addr(broker)]


def test_the_async_api_on_the_callers_own_loop(broker):
    async def use():
        admin = AsyncAdmin(broker.namesrv, timeout=10)
        try:
            info, status = await asyncio.gather(admin.cluster_list(), admin.broker_status(broker_addr(broker)))
            return info, status
        finally:
            await admin.close()

    info, status = run_async(use())
    assert info.brokers[0].broker_name == "broker-a" and status.version_desc == "V4_9_8"
