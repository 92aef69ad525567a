"""The broker's ACL check of every request (RocketMQ 4.9.8's ``PlainAccessValidator`` and
``PlainPermissionManager.validate``), and the refusal it answers.

:class:`PlainAccessValidator` is an RPC hook (``RemotingServer.rpc_hooks``): it sees each request
before its processor, and a request it refuses never reaches one -- a refused send stores nothing.
The decision, in 4.9.8's order:

1. the peer's address matches a global white address: let in, no credentials needed;
2. no ``AccessKey``: refused, "No accessKey is configured";
3. an access key no account has: "No acl config for KEY";
4. the peer matches the account's ``whiteRemoteAddress``: let in on the key alone;
5. the ``Signature`` is not the one the account's secret key gives for what arrived (the extFields
   but Signature and ``_UNIQUE_KEY_QUERY`` -- which 4.9.8 leaves out although its client signs it,
   so a Java client's query by unique key is refused with ACL on, there as here -- then the body):
   "Check signature failed for accessKey=KEY";
6. a send to ``RMQ_SYS_TRACE_TOPIC`` (message traces) is let in;
7. an admin request code from an account that is not admin: "Need admin permission for request
   code=N, but accessKey=KEY is not"; then each resource the code needs (permissions.py) against
   the account's permission for it, or its default for topics or groups: "No default permission
   for topic:T" (or group:G) -- an admin account that lists no permissions owns everything.

A refusal is answered as 4.9.8's broker answers an exception thrown by its RPC hook: code
SYSTEM_ERROR (1), remark ``org.apache.rocketmq.acl.common.AclException: <message>``.  (4.9.8
appends the Java stack frame that threw, ``, org.apache...PlainPermissionManager.validate(...:684)``;
we leave that out.)  The Java client then throws ``MQBrokerException`` with code 1 and that
remark; the C++ client fails the call with it.

**Reloading.** :class:`PlainPermissionManager` looks at the file's modification time, size and
inode at most every ``watch_interval`` seconds (5 s, 4.9.8's ``AclFileWatchService`` interval),
at the first request after that time -- rules only matter when a request comes, so no thread of
its own is needed.  A changed file is loaded whole and replaces the rules; one that cannot be
loaded keeps the rules before it and says why once in the log (at ERROR, naming the file and the
problem), as does a file emptied or deleted (4.9.8 also keeps its rules for a file without any
data, which protects against catching an editor between truncating and writing; a file that
says ``accounts: []`` is taken).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import time
from dataclasses import dataclass, field

from ...remoting import RemotingCommand, ResponseCode
from .errors import AclConfigError, AclRefusal
from .permissions import ADMIN_CODES, Perm, check_permission, is_retry_topic, java_hash_order, \
    needed_resources, resource_name
from .plain import PlainAccount, PlainAcl, load_plain_acl
from .signature import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, cal_signature, combine_request_content

__all__ = ["AccessRequest", "PlainPermissionManager", "PlainAccessValidator", "ACL_EXCEPTION",
           "TRACE_TOPIC", "UNIQUE_MSG_QUERY_FLAG", "peer_host"]

log = logging.getLogger("rmqstore.broker.acl")

#: how 4.9.8's remark names the exception (``RemotingHelper.exceptionSimpleDesc``)
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: an extField the Java client adds to a query by unique key, which 4.9.8's broker does not sign
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
WATCH_INTERVAL = 5.0


def peer_host(address: tuple) -> str:
    """The address text of a peer (``127.0.0.1``, ``::1``); an IPv4-mapped IPv6 address is its IPv4 address,
    as Java reports it."""
    host = str(address[0])
    try:
        mapped = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host
    if isinstance(mapped, ipaddress.IPv6Address) and mapped.ipv4_mapped is not None:
        return str(mapped.ipv4_mapped)
    return host


@dataclass
class AccessRequest:
    """What a request asks for (4.9.8's ``PlainAccessResource`` of a request)."""

    host: str
    code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    resources: dict[str, Perm] = field(default_factory=dict)
    content: bytes = b""

    @classmethod
    def parse(cls, cmd: RemotingCommand, host: str) -> "AccessRequest":
        """``PlainAccessValidator.parse``: :class:`AclRefusal` when the request cannot be read for its resources."""
        ext = cmd.ext_fields
        if not ext:  # no credentials to check anything against: only a white address lets it in
            return cls(host, cmd.code)
        signed = {k: v for k, v in ext.items() if k not in (SIGNATURE, UNIQUE_MSG_QUERY_FLAG)}
        return cls(host, cmd.code, ext.get(ACCESS_KEY), ext.get(SIGNATURE), ext.get(SECURITY_TOKEN),
                   needed_resources(cmd), combine_request_content(signed, cmd.body))


class PlainPermissionManager:
    """The rules of one plain_acl.yml, reloaded when the file changes, and the decision on a request."""

    def __init__(self, path: str | os.PathLike, watch_interval: float = WATCH_INTERVAL):
        self.path = os.fspath(path)
        self.watch_interval = watch_interval
        self._stamp = self._file_stamp()
        self.acl: PlainAcl = load_plain_acl(self.path)  # a bad file at start: the error, no broker
        self.last_check = time.monotonic()

    def _file_stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def check_for_changes(self) -> None:
        """Reload the file if it changed since it was last looked at (at most every ``watch_interval`` s)."""
        now = time.monotonic()
        if now - self.last_check < self.watch_interval:
            return
        self.last_check = now
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            acl = load_plain_acl(self.path)
        except AclConfigError as exc:
            log.error("ACL file changed but cannot be used, keeping the rules loaded before: %s", exc)
            return
        if not acl.has_data:
            log.error("ACL file %s changed but holds no rules, keeping the rules loaded before", self.path)
            return
        self.acl = acl
        log.info("ACL file %s reloaded: %d accounts, %d global white addresses", self.path, len(acl.accounts),
                 len(acl.global_white))

    def validate(self, request: AccessRequest) -> None:
        """Let ``request`` in, or raise :class:`AclRefusal` with 4.9.8's message."""
        self.check_for_changes()
        acl = self.acl
        if any(white.match(request.host) for white in acl.global_white):
            return
        if request.access_key is None:
            raise AclRefusal("No accessKey is configured")
        account = acl.accounts.get(request.access_key)
        if account is None:
            raise AclRefusal(f"No acl config for {request.access_key}")
        if account.white.match(request.host):
            return
        expected = cal_signature(request.content, account.secret_key).encode("ascii")
        if not hmac.compare_digest(expected, (request.signature or "").encode("utf-8", "surrogatepass")):
            raise AclRefusal(f"Check signature failed for accessKey={request.access_key}")
        if request.resources.get(TRACE_TOPIC) == Perm.PUB:
            return
        check_perm(request, account)


def check_perm(request: AccessRequest, account: PlainAccount) -> None:
    """``PlainPermissionManager.checkPerm``: the admin codes, then every needed resource."""
    if request.code in ADMIN_CODES and not account.admin:
        raise AclRefusal(f"Need admin permission for request code={request.code}, "
                         f"but accessKey={account.access_key} is not")
    if not request.resources or (not account.resource_perms and account.admin):
        return
    for resource in java_hash_order(list(request.resources)):
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_retry_topic(resource) else account.default_topic_perm
        if not check_permission(request.resources[resource], owned):
            raise AclRefusal(f"No default permission for {resource_name(resource)}")


class PlainAccessValidator:
    """The RPC hook: ``validator(connection, request)`` is None (let in) or the refusal to answer."""

    def __init__(self, manager: PlainPermissionManager):
        self.manager = manager

    def __call__(self, connection, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            self.manager.validate(AccessRequest.parse(cmd, peer_host(connection.remote_address)))
        except AclRefusal as exc:
            log.debug("refused request %d from %s: %s", cmd.code, connection.remote_address, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {exc}")
        return None
