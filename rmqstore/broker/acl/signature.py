"""The request signature of RocketMQ 4.9.8's ACL (``AclUtils``, ``AclSigner``, ``AclClientRPCHook``).

A client holding an account's keys puts three fields into every request's extFields:
``AccessKey``, optionally ``SecurityToken``, and ``Signature`` -- the base64 of
HMAC-SHA1(secretKey, content), where the content is the *values* of the extFields (every field
but Signature itself, AccessKey and SecurityToken included), concatenated in the order of
their keys, UTF-8 encoded, followed by the body's bytes.  The broker recomputes it from what
arrived; a client that signed other bytes, or with another secret, does not match.

"The order of their keys" is Java's ``TreeMap<String, ...>`` order, ``String.compareTo``: UTF-16
code units, not code points.  The two differ only for keys holding characters beyond U+FFFF
against characters from U+E000 up, but that is the difference between a signature that
matches and one that does not, so :func:`java_string_order_key` sorts as Java does.

The C++ client (PyPI ``rocketmq``) signs the same way from its own map -- AccessKey,
``OnsChannel`` (its session credentials' channel) and the header fields, in ``std::map``
order, which for the ASCII keys of RocketMQ's headers is the same -- and sends OnsChannel as
an extField, so the broker's recomputation covers it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Mapping

__all__ = ["ACCESS_KEY", "SECRET_KEY", "SIGNATURE", "SECURITY_TOKEN", "java_string_order_key",
           "combine_request_content", "cal_signature", "sign_request"]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def java_string_order_key(text: str) -> bytes:
    """A sort key giving Java's ``String.compareTo`` order: UTF-16 code units compared one by one
    (big-endian UTF-16 bytes compare the same way)."""
    return text.encode("utf-16-be", "surrogatepass")


def combine_request_content(fields: Mapping[str, str], body: bytes | None) -> bytes:
    """What is signed (``AclUtils.combineRequestContent``): the values of ``fields`` but Signature, in Java's
    order of their keys, UTF-8, then the body."""
    values = "".join(fields[key] for key in sorted(fields, key=java_string_order_key) if key != SIGNATURE)
    return values.encode("utf-8", "surrogatepass") + (body or b"")


def cal_signature(data: bytes, secret_key: str) -> str:
    """base64(HMAC-SHA1(secret_key, data)) (``AclSigner.calSignature``)."""
    mac = hmac.new(secret_key.encode("utf-8", "surrogatepass"), data, hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


def sign_request(cmd, access_key: str, secret_key: str, security_token: str | None = None) -> None:
    """Sign a request as ``AclClientRPCHook.doBeforeRequest`` does: AccessKey (and SecurityToken) go into
    its extFields first, so they are signed too, then Signature."""
    cmd.ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        cmd.ext_fields[SECURITY_TOKEN] = security_token
    cmd.ext_fields.pop(SIGNATURE, None)
    cmd.ext_fields[SIGNATURE] = cal_signature(combine_request_content(cmd.ext_fields, cmd.body), secret_key)
