"""The body CRC, as RocketMQ's ``UtilAll.crc32`` computes it.

The definition is crcmod's predefined ``crc-32`` model (the same CRC as
``java.util.zip.CRC32``) with the sign bit cleared, because RocketMQ stores it in a Java
``int`` and masks it with ``0x7FFFFFFF``.  :func:`crc32_reference` spells exactly that.

crcmod runs 8-13x slower than ``zlib.crc32`` here, so the hot paths use :func:`crc32`,
built on ISA-L's SIMD CRC-32 (``isal``; zlib when it is missing); a Hypothesis property in
the test suite proves both agree with crcmod on every input.
"""

import zlib

__all__ = ["crc32", "crc32_reference", "raw_crc32", "CRC_BACKEND"]

_MASK = 0x7FFFFFFF

try:  # ISA-L's SIMD CRC-32 is ~3x zlib's here; same function, proven equal by a property test
    from isal.isal_zlib import crc32 as raw_crc32

    CRC_BACKEND = "isal"
except ImportError:  # pragma: no cover - isal is a dependency, but stay usable without it
    raw_crc32 = zlib.crc32
    CRC_BACKEND = "zlib"


def crc32(data) -> int:
    """RocketMQ's body CRC of ``data`` (bytes-like); 0 for an empty body."""
    return raw_crc32(data) & _MASK


_reference_fn = None


def crc32_reference(data) -> int:
    """The same CRC through crcmod's predefined ``crc-32`` model (the definition)."""
    global _reference_fn
    if _reference_fn is None:
        import crcmod.predefined

        _reference_fn = crcmod.predefined.mkPredefinedCrcFun("crc-32")
    if len(data) == 0:
        return 0
    return _reference_fn(bytes(data)) & _MASK
