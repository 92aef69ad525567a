"""Remote address patterns of plain_acl.yml (RocketMQ 4.9.8's ``RemoteAddressStrategyFactory``).

``globalWhiteRemoteAddresses`` and an account's ``whiteRemoteAddress`` hold patterns; a peer whose
address matches one is let in (a global one without any credentials).  The forms, decided in
this order, exactly as 4.9.8 decides them:

* blank (or missing): matches nothing;
* ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches everything;
* ending in ``}``: a list in braces for the last part, ``192.168.1.{1,2,30}``, ``1050::300c:{1,2}``;
* holding ``,``: a plain list, ``1.1.1.1,2.2.2.2`` (not trimmed: a space is a bad address, as in Java);
* holding ``*`` or ``-``: a range in one part -- the first part (after the first) that is ``*`` or
  ``a-b`` decides, and what follows it is not looked at: ``192.168.0.*``, ``192.168.1.1-100``,
  ``10.1-5.*.*`` (second octet 1 to 5), ``1050::0005:0600:300c:1-200`` (hex);
* otherwise one IPv4 or IPv6 address, compared after expanding (``::1`` is ``0:0:0:0:0:0:0:1``).

A pattern 4.9.8 would refuse (or crash on) is an :class:`~.errors.AclConfigError` naming it.
IPv6 addresses are compared as ``AclUtils.expandIP`` writes them: eight groups of four upper-case
hex digits.
"""

from __future__ import annotations

import ipaddress

from .errors import AclConfigError

__all__ = ["RemoteAddressStrategy", "remote_address_strategy", "expand_ip", "is_ipv4", "is_ipv6"]

_ANY = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


def is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return "%" not in text


def _split(text: str, sep: str) -> list[str]:
    """Commons-lang ``StringUtils.split``: empty pieces dropped."""
    return [piece for piece in text.split(sep) if piece]


def expand_ip(text: str, parts: int = 8) -> str:
    """``AclUtils.expandIP``: ``::`` widened to ``parts`` groups, each left-padded to 4 digits, upper case
    (an IPv4 address comes back as it is)."""
    text = text.upper()
    pad = parts - text.count(":")
    if pad > 0:
        text = text.replace("::", ":" * (pad + 1))
    return ":".join(group.rjust(4, "0") for group in text.split(":"))


def _bad(pattern: str, why: str) -> AclConfigError:
    return AclConfigError(f"remote address pattern {pattern!r}: {why}")


class RemoteAddressStrategy:
    """One pattern; :meth:`match` takes a peer's address text (``127.0.0.1``, ``::1``)."""

    def __init__(self, pattern: str):
        self.pattern = pattern

    def match(self, host: str) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.pattern!r})"


class _Nothing(RemoteAddressStrategy):
    def match(self, host: str) -> bool:
        return False


class _Everything(RemoteAddressStrategy):
    def match(self, host: str) -> bool:
        return True


class _One(RemoteAddressStrategy):
    def __init__(self, pattern: str):
        super().__init__(pattern)
        if not (is_ipv4(pattern) or is_ipv6(pattern)):
            raise _bad(pattern, "not an IPv4 or IPv6 address")
        self.expanded = expand_ip(pattern)

    def match(self, host: str) -> bool:
        return expand_ip(host) == self.expanded


class _Several(RemoteAddressStrategy):
    def __init__(self, pattern: str, addresses: list[str]):
        super().__init__(pattern)
        self.addresses = set()
        for address in addresses:
            if is_ipv4(address):
                self.addresses.add(address)
            elif is_ipv6(address):
                self.addresses.add(expand_ip(address))
            else:
                raise _bad(pattern, f"{address!r} is not an IPv4 or IPv6 address")

    def match(self, host: str) -> bool:
        return (expand_ip(host) if is_ipv6(host) else host) in self.addresses


def _braces(pattern: str) -> _Several:
    """``prefix{a,b,c}``: the prefix with each of a, b, c."""
    ipv6 = ":" in pattern
    parts = _split(pattern, ":" if ipv6 else ".")
    if not ipv6 and len(parts) < 4:
        raise _bad(pattern, "an IPv4 address has four parts")
    last = parts[-1]
    if not last.startswith("{"):
        raise _bad(pattern, "only the last part can be a {list}")
    prefix = pattern[:pattern.index("{")]
    return _Several(pattern, [prefix + item for item in _split(last[1:-1], ",")])


class _Range(RemoteAddressStrategy):
    """One part (the first ``*`` or ``a-b`` after the first part) ranges, the parts before it are fixed."""

    def __init__(self, pattern: str):
        super().__init__(pattern)
        self.ipv6 = ":" in pattern
        if self.ipv6:
            self._parse_ipv6(pattern)
        else:
            self._parse_ipv4(pattern)

    def _bounds(self, value: str, base: int, top: int) -> tuple[int, int] | None:
        value = value.strip()
        if value == "*":
            return 0, top
        if "-" not in value:
            return None
        if value.startswith("-"):
            raise _bad(self.pattern, f"range {value!r} has no start")
        pieces = _split(value, "-")
        try:
            start, end = int(pieces[0], base), int(pieces[1], base)
        except (ValueError, IndexError):
            raise _bad(self.pattern, f"range {value!r} is not start-end") from None
        if not (0 <= start <= end <= top):
            raise _bad(self.pattern, f"range {value!r} is not within 0-{top:x} with start <= end"
                       if base == 16 else f"range {value!r} is not within 0-{top} with start <= end")
        return start, end

    def _pick(self, parts: list[str], indexes, base: int, top: int) -> int:
        for index in indexes:
            if index >= len(parts):
                break
            bounds = self._bounds(parts[index], base, top)
            if bounds is not None and bounds[1] > 0:
                self.start, self.end = bounds
                return index
        raise _bad(self.pattern, "no part is '*' or a range start-end")

    def _parse_ipv4(self, pattern: str) -> None:
        parts = _split(pattern, ".")
        index = self._pick(parts, (1, 2, 3), 10, 255)
        _check_fixed_parts(pattern, index - 1)
        self.index = index
        self.head = "".join(part.strip() + "." for part in parts[:index])

    def _parse_ipv6(self, pattern: str) -> None:
        star, dash = pattern.find("*"), pattern.find("-")
        if star > -1 and star != len(pattern) - 1:
            raise _bad(pattern, "'*' can only end an IPv6 pattern")
        last_colon = pattern.rfind(":")
        if dash > -1 and dash <= (last_colon if star == -1 else pattern.rfind(":", 0, last_colon)):
            raise _bad(pattern, "a range can only be the last group of an IPv6 pattern")
        parts = _split(pattern, ":")
        index = self._pick(parts, range(1, len(parts)), 16, 0xFFFF)
        _check_fixed_parts(pattern, index - 1)
        if star > -1 and dash > -1:
            head = expand_ip(pattern[:pattern.rfind(":", 0, last_colon)], 6)
        else:
            head = expand_ip(pattern[:last_colon], 7)
        self.head = head
        self.index = len(_split(head, ":"))

    def match(self, host: str) -> bool:
        if is_ipv4(host) and not self.ipv6:
            if not host.startswith(self.head):
                return False
            rest = host[len(self.head):]
            value = rest.split(".")[0]
        elif is_ipv6(host) and self.ipv6:
            host = expand_ip(host)
            if not host.startswith(self.head):
                return False
            value = host[5 * self.index:5 * self.index + 4]
        else:
            return False
        try:
            return self.start <= int(value, 16 if self.ipv6 else 10) <= self.end
        except ValueError:
            return False


def _check_fixed_parts(pattern: str, count: int) -> None:
    """``AclUtils.verify``: the first ``count`` parts of the pattern are numbers of their address kind."""
    if ":" in pattern:
        parts, base, top = _split(expand_ip(pattern), ":"), 16, 0xFFFF
    else:
        parts, base, top = _split(pattern, "."), 10, 255
        if len(parts) != 4:
            raise _bad(pattern, "an IPv4 pattern has four parts")
    for part in parts[:count]:
        try:
            ok = 0 <= int(part.strip(), base) <= top
        except ValueError:
            ok = False
        if not ok:
            raise _bad(pattern, f"{part!r} is not a number from 0 to {top if base == 10 else 'ffff'}")


def remote_address_strategy(pattern: str | None) -> RemoteAddressStrategy:
    """The strategy of one pattern (``RemoteAddressStrategyFactory.getRemoteAddressStrategy``)."""
    if pattern is None or not pattern.strip():
        return _Nothing(pattern or "")
    if pattern in _ANY:
        return _Everything(pattern)
    if pattern.endswith("}"):
        return _braces(pattern)
    if "," in pattern:
        return _Several(pattern, _split(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return _Range(pattern)
    return _One(pattern)
