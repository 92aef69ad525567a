"""Message properties: the ``name\\x01value\\x02...`` string and Java's hashing.

RocketMQ keeps a message's properties in a ``java.util.HashMap`` and serialises it in
that map's iteration order.  The store re-serialises the map in one place -- the delay
rewrite, which adds REAL_TOPIC and REAL_QID -- so to write the same bytes as RocketMQ we
must reproduce HashMap iteration order: entries sorted by bucket
``(h ^ (h >>> 16)) & (capacity - 1)`` of the key's Java ``hashCode``, ties in insertion
order (resizes split buckets without reordering), with the capacity grown from 16 by
doubling whenever the size exceeds three quarters of it.  :class:`JavaHashMap` is a
``dict`` that iterates that way.

Tags codes (consume-queue units) and index key hashes are Java ``String.hashCode``
values over UTF-16 code units; :func:`java_string_hash` computes them.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from operator import mul

__all__ = [
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "properties_to_string",
    "string_to_properties",
    "parse_properties",
    "java_string_hash",
    "JavaHashMap",
    "KEYS", "TAGS", "WAIT", "DELAY", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
    "UNIQ_KEY", "CLUSTER", "TRAN_PREPARED_QUEUE_OFFSET", "KEY_SEPARATOR",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# MessageConst property names used by the store
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"
DELAY = "DELAY"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
UNIQ_KEY = "UNIQ_KEY"
CLUSTER = "CLUSTER"
TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
KEY_SEPARATOR = " "


_POW31 = [pow(31, i, 1 << 32) for i in range(1024)]  # 31**i mod 2**32


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int.

    ``h = sum(c[i] * 31**(n-1-i)) mod 2**32``: evaluated as one C-level dot product of
    the reversed code units with precomputed powers (the loop form is 3x slower).
    """
    if s.isascii():
        units: bytes | tuple[int, ...] = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    if len(units) <= len(_POW31):
        h = sum(map(mul, reversed(units), _POW31)) & 0xFFFFFFFF
    else:
        h = 0
        for c in units:
            h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_TREEIFY_THRESHOLD = 8  # HashMap.TREEIFY_THRESHOLD
_MIN_TREEIFY_CAPACITY = 64  # HashMap.MIN_TREEIFY_CAPACITY


@lru_cache(maxsize=4096)
def _spread(key: str) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


class JavaHashMap(dict):
    """A ``dict`` whose iteration order is ``java.util.HashMap<String, String>``'s.

    Insertion order is remembered (for ties inside one bucket); the capacity follows
    HashMap's growth rules -- doubling when the size exceeds 3/4 of it, and also when a
    new key joins a bucket that already holds 8 keys while the capacity is below 64 --
    and never shrinks on removal, as in Java.  Not modelled: tree bins (a bucket of 9+
    keys once the capacity is 64 or more), whose iteration order differs.
    """

    def __init__(self, *args, **kwargs):
        super().__init__()
        self._capacity = 16
        self.update(*args, **kwargs)

    def __setitem__(self, key, value):
        new = key not in self
        if new and self._capacity < _MIN_TREEIFY_CAPACITY:
            # HashMap#putVal: appending to a bin that already holds TREEIFY_THRESHOLD (8)
            # nodes calls treeifyBin, which only resizes while the table is smaller than 64.
            mask = self._capacity - 1
            bucket = _spread(key) & mask
            if sum(1 for k in super().__iter__() if _spread(k) & mask == bucket) >= _TREEIFY_THRESHOLD:
                self._capacity *= 2
        super().__setitem__(key, value)
        if new and len(self) > self._capacity * 3 // 4:
            self._capacity *= 2

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def java_order(self) -> list[str]:
        mask = self._capacity - 1
        keys = list(super().__iter__())
        return sorted(keys, key=lambda k: _spread(k) & mask)  # stable: ties keep insertion order


def properties_to_string(props) -> str:
    """``MessageDecoder.messageProperties2String``: ``k\\x01v\\x02...`` without the last ``\\x02``.

    A :class:`JavaHashMap` is written in Java's iteration order, any other mapping in its
    own order. ``None`` values are skipped; ``None`` or an empty map gives ``""``.
    """
    if not props:
        return ""
    keys = props.java_order() if isinstance(props, JavaHashMap) else list(props)
    parts = []
    for k in keys:
        v = props[k]
        if v is not None:
            parts.append(f"{k}{NAME_VALUE_SEPARATOR}{v}")
    return PROPERTY_SEPARATOR.join(parts)


def parse_properties(s: str | None) -> dict[str, str]:
    """The same parse as :func:`string_to_properties` into a plain ``dict`` (fast; no Java order)."""
    result: dict[str, str] = {}
    if not s:
        return result
    for segment in s.split(PROPERTY_SEPARATOR):
        i = segment.find(NAME_VALUE_SEPARATOR)
        if 0 < i < len(segment) - 1:  # also rules out segments shorter than 3
            result[segment[:i]] = segment[i + 1:]
    return result


def string_to_properties(s: str | None) -> JavaHashMap:
    """``MessageDecoder.string2messageProperties``: parse, skipping malformed segments.

    A segment shorter than 3 characters, or whose first ``\\x01`` is at its start or end,
    is ignored; a later duplicate key overwrites an earlier one (keeping its position).
    """
    result = JavaHashMap()
    if not s:
        return result
    for segment in s.split(PROPERTY_SEPARATOR):
        if len(segment) < 3:
            continue
        i = segment.find(NAME_VALUE_SEPARATOR)
        if 0 < i < len(segment) - 1:
            result[segment[:i]] = segment[i + 1:]
    return result
