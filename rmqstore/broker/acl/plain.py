"""plain_acl.yml: RocketMQ 4.9.8's ACL rules file, read into :class:`PlainAcl` (``PlainPermissionManager.load``).

The file is YAML::

    globalWhiteRemoteAddresses:     # peers let in without credentials (addresses.py has the patterns)
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ         # both longer than 6 characters
        secretKey: 12345678
        whiteRemoteAddress:         # a peer matching it is let in on the access key alone
        admin: false                # admin request codes (create topic, ...) need true
        defaultTopicPerm: DENY      # for topics not listed below (none given: DENY)
        defaultGroupPerm: SUB       # for groups not listed below (none given: DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

Values are read as Java reads them through SnakeYAML and fastjson: ``secretKey: 12345678`` is the
text ``12345678``; a group's permission is kept under its retry topic ``%RETRY%group``.

Stricter than 4.9.8, because an ACL file that means something else than it says should stop the
broker rather than let it run on a guess: a file that does not parse, an unknown permission
(4.9.8 reads ``PUBLISH`` as DENY), a ``res=perm`` entry that is not one, a short key, an access
key given twice (4.9.8 keeps the first), or a bad address pattern is an :class:`AclConfigError`
naming the file and the problem.  Secret keys never appear in a message.  An empty file (or
one of comments) is no rules at all: only global white addresses -- none -- would be let in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import yaml

from ..topics import retry_topic
from .addresses import RemoteAddressStrategy, remote_address_strategy
from .errors import AclConfigError
from .permissions import Perm, parse_perm

__all__ = ["PlainAccount", "PlainAcl", "load_plain_acl", "parse_plain_acl", "KEY_MIN_LENGTH"]

#: an access key and a secret key must be longer than this (``AclConstants.ACCESS_KEY_MIN_LENGTH``)
KEY_MIN_LENGTH = 6


@dataclass
class PlainAccount:
    access_key: str
    secret_key: str = field(repr=False)
    white: RemoteAddressStrategy
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    #: topics by name, groups by retry topic; empty when the account lists none (4.9.8: a null map)
    resource_perms: dict[str, Perm] = field(default_factory=dict)


@dataclass
class PlainAcl:
    path: str
    global_white: list[RemoteAddressStrategy] = field(default_factory=list)
    accounts: dict[str, PlainAccount] = field(default_factory=dict)
    #: False when the file held nothing at all (empty, or only comments): "no data" to 4.9.8's reload
    has_data: bool = True


def _java_text(value, what: str) -> str | None:
    """A scalar as the text Java's bean mapping makes of it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise AclConfigError(f"{what} is a {type(value).__name__}, not a single value")


def _bool(value, what: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{what} is {value!r}, not true or false")


def _list(value, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclConfigError(f"{what} is a {type(value).__name__}, not a list")
    return value


def _resource_perms(entries, what: str, as_group: bool) -> dict[str, Perm]:
    out = {}
    for entry in _list(entries, what):
        text = _java_text(entry, f"{what} entry {entry!r}") or ""
        pieces = [piece for piece in text.split("=") if piece]
        if len(pieces) != 2:
            raise AclConfigError(f"{what} entry {text!r} is not name=PERM (e.g. topicA=PUB|SUB)")
        name = pieces[0].strip()
        try:
            out[retry_topic(name) if as_group else name] = parse_perm(pieces[1])
        except AclConfigError as exc:
            raise AclConfigError(f"{what} entry {text!r}: {exc}") from None
    return out


def _account(raw, n: int) -> PlainAccount:
    where = f"accounts[{n}]"
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where} is a {type(raw).__name__}, not a mapping")
    access_key = _java_text(raw.get("accessKey"), f"{where}.accessKey")
    secret_key = _java_text(raw.get("secretKey"), f"{where}.secretKey")
    if access_key is None or secret_key is None:
        raise AclConfigError(f"{where} ({access_key or 'no accessKey'}) needs an accessKey and a secretKey")
    if len(access_key) <= KEY_MIN_LENGTH or len(secret_key) <= KEY_MIN_LENGTH:
        raise AclConfigError(f"{where} ({access_key}): accessKey and secretKey must be longer than "
                             f"{KEY_MIN_LENGTH} characters")
    where = f"{where} ({access_key})"
    try:
        topic_default = parse_perm(_java_text(raw.get("defaultTopicPerm"), f"{where}.defaultTopicPerm"))
        group_default = parse_perm(_java_text(raw.get("defaultGroupPerm"), f"{where}.defaultGroupPerm"))
        white = remote_address_strategy(_java_text(raw.get("whiteRemoteAddress"), f"{where}.whiteRemoteAddress"))
    except AclConfigError as exc:
        raise AclConfigError(f"{where}: {exc}") from None
    perms = _resource_perms(raw.get("groupPerms"), f"{where}.groupPerms", True)
    perms.update(_resource_perms(raw.get("topicPerms"), f"{where}.topicPerms", False))
    return PlainAccount(access_key, secret_key, white, _bool(raw.get("admin"), f"{where}.admin"),
                        topic_default, group_default, perms)


def _rules(data, path: str) -> PlainAcl:
    acl = PlainAcl(path, has_data=bool(data))
    if not data:
        return acl
    if not isinstance(data, dict):
        raise AclConfigError(f"the file is a {type(data).__name__}, not a mapping of "
                             "globalWhiteRemoteAddresses and accounts")
    for pattern in _list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses"):
        acl.global_white.append(remote_address_strategy(_java_text(pattern, "a global white address")))
    for n, raw in enumerate(_list(data.get("accounts"), "accounts")):
        account = _account(raw, n)
        if account.access_key in acl.accounts:
            raise AclConfigError(f"accounts[{n}]: accessKey {account.access_key} is given twice")
        acl.accounts[account.access_key] = account
    return acl


def parse_plain_acl(text: str, path: str) -> PlainAcl:
    """The rules of a plain_acl.yml's text; ``path`` names it in errors."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: does not parse as YAML: {' '.join(str(exc).split())}") from None
    try:
        return _rules(data, path)
    except AclConfigError as exc:
        raise AclConfigError(f"{path}: {exc}") from None


def load_plain_acl(path: str | os.PathLike) -> PlainAcl:
    """The rules of the plain_acl.yml at ``path``."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise AclConfigError(f"{path}: cannot read the ACL file: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AclConfigError(f"{path}: is not UTF-8 text: {exc}") from None
    return parse_plain_acl(text, path)
