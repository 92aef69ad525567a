"""Where a record was stored, as RocketMQ names it: socket addresses as a record holds them, and the offset msgId.

An offset msgId (``MessageDecoder.createMessageId``) is the storing broker's IP, port and the record's physical
offset in upper-case hex -- a name from which a reader can find the record again.  Both the codec
(:mod:`rmqstore.format.record`) and the put result (:mod:`rmqstore.format.status`) spell it, so it lives here, below both,
with :class:`Address`, the (IP bytes, port) pair it is made of.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple

from ..common.errors import LayoutError

__all__ = ["MAX_PORT", "Address", "socket_address", "create_message_id", "decode_message_id"]

_I32 = struct.Struct(">i")

MAX_PORT = 65535  # a socket port; the record's port field is a 4-byte int and holds more


class Address(NamedTuple):
    """A socket address as stored: raw IP bytes (4 or 16) and a port."""

    ip: bytes
    port: int

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    @property
    def host(self) -> str:
        return str(ipaddress.ip_address(self.ip))

    def __str__(self) -> str:
        host = self.host
        return f"[{host}]:{self.port}" if self.is_v6 else f"{host}:{self.port}"

    @property
    def packed(self) -> bytes:
        return self.ip + struct.pack(">i", self.port)

    @classmethod
    def parse(cls, text: "str | Address | tuple") -> "Address":
        """Parse ``"1.2.3.4:5"``, ``"[::1]:5"`` or ``("1.2.3.4", 5)``.

        An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) becomes IPv4, as Java's
        ``InetAddress`` does.
        """
        if isinstance(text, Address):
            return text
        if isinstance(text, tuple):
            if len(text) != 2:
                raise LayoutError(f"an address tuple is (host, port), got {text!r}")
            host, port = text
        else:
            if not isinstance(text, str):
                raise LayoutError(f"an address must be 'host:port', got {type(text).__name__}")
            host, sep, port = text.rpartition(":")
            if not sep:
                raise LayoutError(f"address {text!r} has no ':port'")
            host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if isinstance(host, (bytes, bytearray)):
            ip = bytes(host)
            if len(ip) not in (4, 16):
                raise LayoutError(f"an IP address has 4 or 16 bytes, got {len(ip)}")
        else:
            try:
                addr = ipaddress.ip_address(host)
            except ValueError as exc:
                raise LayoutError(f"bad IP address {host!r}") from exc
            if addr.version == 6 and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
            ip = addr.packed
        try:
            port = int(port)
        except (TypeError, ValueError) as exc:
            raise LayoutError(f"bad port {port!r}") from exc
        if not -2**31 <= port < 2**31:
            raise LayoutError(f"port {port} does not fit in an int")
        return cls(ip, port)


def socket_address(value) -> Address:
    """:meth:`Address.parse` for a host a producer hands the store: the port must be 0..65535.

    The record's port field is a 4-byte int, so the codec reads and writes any int there
    (damaged or synthetic records); a put, which stands for a real socket, may not.
    """
    addr = Address.parse(value)
    if not 0 <= addr.port <= MAX_PORT:
        raise LayoutError(f"port {addr.port} of {value!s} is outside 0..{MAX_PORT}")
    return addr


_OFFSET = struct.Struct(">q")


def create_message_id(store_host: Address, physical_offset: int) -> str:
    """The offset msgId: store IP + port (int) + physical offset (long), upper-case hex."""
    return (store_host.ip + _I32.pack(store_host.port) + _OFFSET.pack(physical_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[Address, int]:
    """Split an offset msgId (32 hex chars for IPv4, 56 for IPv6) into host and offset."""
    if not isinstance(msg_id, str) or len(msg_id) not in (32, 56):
        raise LayoutError(f"a msgId has 32 (IPv4) or 56 (IPv6) hex characters, got {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise LayoutError(f"msgId {msg_id!r} is not hexadecimal") from None
    if len(raw) * 2 != len(msg_id):  # fromhex skips whitespace
        raise LayoutError(f"msgId {msg_id!r} is not hexadecimal")
    ip_len = len(raw) - 12
    port = _I32.unpack_from(raw, ip_len)[0]
    return Address(raw[:ip_len], port), _OFFSET.unpack_from(raw, ip_len + 4)[0]
