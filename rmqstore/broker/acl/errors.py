"""The two ways the ACL says no: a rules file it cannot use, and a request it refuses."""

from __future__ import annotations

from ..config import BrokerConfigError

__all__ = ["AclConfigError", "AclRefusal"]


class AclConfigError(BrokerConfigError):
    """A plain_acl.yml (or one of its address patterns or permissions) that cannot be used: the message names
    the file and what is wrong in it."""


class AclRefusal(Exception):
    """A request the ACL refuses; the message is RocketMQ's (``AclException``'s) text naming what was missing."""
