"""What a request needs, and what an account owns (RocketMQ 4.9.8's ``Permission`` and the request-code
table of ``PlainAccessValidator.parse``).

A permission is a bit set: DENY 1, ANY 2, PUB 4, SUB 8.  A resource is a topic, or a consumer group
written as its retry topic ``%RETRY%group`` -- which is how a group's permissions and a topic's share
one table.  :func:`check_permission` is 4.9.8's: DENY in what is owned refuses everything; ANY
needs PUB or SUB; otherwise a needed bit must be owned.

:func:`needed_resources` is the per-code table: which resources a request touches and the
permission each needs --

=========================  ======================================================================
SEND_MESSAGE (10)          PUB on ``topic``; a retry topic needs SUB on the group of extField ``group``
SEND_MESSAGE_V2 (310)      PUB on ``b``; a retry topic ``b`` needs SUB on the group ``a``
SEND_BATCH_MESSAGE (320)   as V2 (ours: 4.9.8 checks no topic for a batch, see DIFFERENCES)
CONSUMER_SEND_MSG_BACK     SUB on the group ``group``
PULL_MESSAGE (11)          SUB on ``topic`` and on the group ``consumerGroup``
QUERY_MESSAGE (12)         SUB on ``topic``
HEART_BEAT (34)            SUB on every consumer group of the body and every topic it subscribes
UNREGISTER_CLIENT (35)     SUB on ``consumerGroup`` (none for a producer)
GET_CONSUMER_LIST_BY_GROUP SUB on ``consumerGroup``
UPDATE_CONSUMER_OFFSET     SUB on ``consumerGroup`` and ``topic``
anything else              nothing beyond a valid signature; the admin codes (:data:`ADMIN_CODES`)
                           need an admin account
=========================  ======================================================================

A missing field names no resource (4.9.8 skips a null), except where 4.9.8 decodes the typed
header and a missing ``@CFNotNull`` field refuses the request ("the custom field <x> is null").
A V1 retry send names its group ``producerGroup``, not ``group``, so 4.9.8 -- and we -- check no
group for it.

4.9.8 keeps the needed resources in a ``java.util.HashMap`` and refuses on the first one that
fails, so with several failing resources its message names the first in *hash-map order*;
:func:`java_hash_order` reproduces that order, so our message names the same one.
"""

from __future__ import annotations

import enum

from ...remoting import RemotingCommand, RequestCode
from ..headers import Header, HeaderError
from ..jsonfmt import loads
from ..topics import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from .errors import AclConfigError, AclRefusal
from .signature import java_string_order_key

__all__ = ["Perm", "ADMIN_CODES", "parse_perm", "check_permission", "needed_resources", "java_hash_order",
           "is_retry_topic", "resource_name"]


class Perm(enum.IntFlag):
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


#: codes only an admin account may send (``Permission.ADMIN_CODE``)
ADMIN_CODES = frozenset({17, 25, 215, 200, 207})  # UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG,
# DELETE_TOPIC_IN_BROKER, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP

_PERMS = {"PUB": Perm.PUB, "SUB": Perm.SUB, "PUB|SUB": Perm.PUB | Perm.SUB, "SUB|PUB": Perm.PUB | Perm.SUB,
          "DENY": Perm.DENY}


def parse_perm(text: str | None) -> Perm:
    """``PUB``, ``SUB``, ``PUB|SUB`` (``SUB|PUB``) or ``DENY``; nothing given is DENY. Anything else is an error
    (4.9.8 takes it as DENY without a word: a typo would deny silently)."""
    if text is None:
        return Perm.DENY
    try:
        return _PERMS[text.strip()]
    except KeyError:
        raise AclConfigError(f"permission {text!r} is not one of PUB, SUB, PUB|SUB, DENY") from None


def check_permission(needed: int, owned: int) -> bool:
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


def is_retry_topic(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def resource_name(resource: str) -> str:
    """How 4.9.8's messages name a resource: ``group:G`` for ``%RETRY%G``, else ``topic:T``."""
    if is_retry_topic(resource):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX):]
    return "topic:" + resource


def _java_hash(text: str) -> int:
    """``String.hashCode`` (over UTF-16 units), as an unsigned 32-bit number."""
    data = java_string_order_key(text)
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_order(keys: list[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` the distinct ``keys`` were put into in this order:
    by bucket (the spread hash modulo the table size, which starts at 16 and doubles past 3/4 full),
    and in one bucket by insertion."""
    size = 16
    while len(keys) > size * 3 // 4:
        size *= 2

    def bucket(i: int) -> tuple[int, int]:
        h = _java_hash(keys[i])
        return (h ^ (h >> 16)) & (size - 1), i

    return [keys[i] for i in sorted(range(len(keys)), key=bucket)]


def _add(resources: dict[str, Perm], resource: str | None, perm: Perm) -> None:
    if resource is not None:
        resources[resource] = perm


def _group(group: str | None) -> str | None:
    return None if group is None else retry_topic(group)


def _send(resources: dict, topic: str | None, group: str | None) -> None:
    if topic is not None and is_retry_topic(topic):
        _add(resources, _group(group), Perm.SUB)
    else:
        _add(resources, topic, Perm.PUB)


def _text(value) -> str | None:
    return None if value is None else str(value)


def _heartbeat(resources: dict, body: bytes) -> None:
    try:
        data = loads(body.decode("utf-8")) if body else {}
        for consumer in data.get("consumerDataSet") or ():
            _add(resources, _group(_text(consumer.get("groupName"))), Perm.SUB)
            for subscription in consumer.get("subscriptionDataSet") or ():
                _add(resources, _text(subscription.get("topic")), Perm.SUB)
    except (ValueError, TypeError, AttributeError) as exc:
        raise AclRefusal(f"heartbeat body does not decode: {type(exc).__name__}: {exc}") from None


def _required(ext: dict, *names: str) -> list[str]:
    """The values of typed-header fields that must be there (checked in the header's field order)."""
    header = Header(ext)
    try:
        return [header.str(name) for name in names]
    except HeaderError as exc:
        raise AclRefusal(str(exc)) from None


def needed_resources(cmd: RemotingCommand) -> dict[str, Perm]:  # noqa: C901 -- one branch per code, as the table
    """``{resource: permission needed}`` of a request, in the order 4.9.8 puts them; :class:`AclRefusal` when
    the request cannot be read for it."""
    ext, code = cmd.ext_fields, cmd.code
    resources: dict[str, Perm] = {}
    if code == RequestCode.SEND_MESSAGE:
        _send(resources, ext.get("topic"), ext.get("group"))
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        _send(resources, ext.get("b"), ext.get("a"))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        _add(resources, _group(ext.get("group")), Perm.SUB)
    elif code == RequestCode.PULL_MESSAGE:
        _add(resources, ext.get("topic"), Perm.SUB)
        _add(resources, _group(ext.get("consumerGroup")), Perm.SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        _add(resources, ext.get("topic"), Perm.SUB)
    elif code == RequestCode.HEART_BEAT:
        _heartbeat(resources, cmd.body)
    elif code == RequestCode.UNREGISTER_CLIENT:
        _required(ext, "clientID")
        _add(resources, _group(ext.get("consumerGroup")), Perm.SUB)
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        (group,) = _required(ext, "consumerGroup")
        _add(resources, _group(group), Perm.SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        group, topic, _, _ = _required(ext, "consumerGroup", "topic", "queueId", "commitOffset")
        _add(resources, _group(group), Perm.SUB)
        _add(resources, topic, Perm.SUB)
    return resources
