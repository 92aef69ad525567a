"""Reading a request's custom header (its extFields) as RocketMQ's typed header classes do, and its JSON body.

Java decodes extFields into a header object field by field: a missing ``@CFNotNull`` field
or a value that is not a number where a number belongs throws, and the request is answered
SYSTEM_ERROR with the exception's text.  :class:`Header` does the same with
:class:`HeaderError`, which the connection turns into that answer
(:meth:`rmqstore.remoting.server.Connection.run_processor`).  A JSON body (a heartbeat, a
subscription group) that does not parse into an object is a :class:`BodyError`, answered alike.
"""

from __future__ import annotations

import builtins

from ..common.errors import RmqStoreError
from .jsonfmt import loads

__all__ = ["Header", "HeaderError", "BodyError", "json_body"]

_MISSING = object()


class HeaderError(RmqStoreError, ValueError):
    """A custom header field is missing or not of its type."""


class BodyError(RmqStoreError, ValueError):
    """A request body that is not what its request code carries."""


def json_body(body: bytes, what: str) -> dict:
    """The JSON object (fastjson's text) ``body`` holds; :class:`BodyError` naming ``what`` when it holds none."""
    try:
        data = loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BodyError(f"the {what} body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BodyError(f"the {what} body is not a JSON object")
    return data


class Header:
    def __init__(self, ext_fields: dict[str, str]):
        self.ext = ext_fields

    def str(self, name: str, default=_MISSING) -> str:
        value = self.ext.get(name)
        if value is None:
            if default is _MISSING:
                raise HeaderError(f"the custom field <{name}> is null")
            return default
        return value

    def int(self, name: builtins.str, default=_MISSING, bits: builtins.int = 64) -> builtins.int:
        value = self.ext.get(name)
        if value is None or value == "":
            if default is _MISSING:
                raise HeaderError(f"the custom field <{name}> is null")
            return default
        try:
            number = int(value)
        except ValueError:
            raise HeaderError(f"the custom field <{name}> is not a number: {value[:40]!r}") from None
        if not -2**(bits - 1) <= number < 2**(bits - 1):
            raise HeaderError(f"the custom field <{name}> = {number} is out of range")
        return number

    def bool(self, name: builtins.str, default: builtins.bool = False) -> builtins.bool:
        value = self.ext.get(name)
        return default if value is None else value.strip().lower() == "true"
