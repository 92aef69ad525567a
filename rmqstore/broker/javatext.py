"""Numbers as RocketMQ's Java code prints them into the tables mqadmin shows.

The broker's runtime-info table (``brokerStatus``) is a map of strings the Java broker builds with
string concatenation and ``String.format``, so its numbers are Java's text, not Python's:

* :func:`java_double` -- ``Double.toString``: plain decimal between 10^-3 and 10^7 with at least one
  digit after the point (``0.0``, ``220.33333333333334``), computerized scientific notation outside
  (``1.0E7``, ``1.0E-4``), ``NaN`` and ``Infinity``.  The digits are the shortest that read back as the
  same double (Python's ``repr``); JDK 17 prints a few doubles with more digits than that (the JDK
  bug 4511638 fixed in 19), never values these tables hold.
* :func:`java_fixed` -- ``String.format("%.Nf")``: the double's exact decimal value rounded HALF_UP
  (Python's ``%`` formatting rounds half to even).
* :func:`human_readable_byte_count` -- ``MixAll.humanReadableByteCount(bytes, false)``: ``0 B`` ..
  ``1023 B``, then ``1.0 KiB``, ``252.0 GiB``.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

__all__ = ["java_double", "java_fixed", "human_readable_byte_count"]


def java_double(value: float) -> str:
    """``Double.toString(value)``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(float(value))
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    power = int(exponent) + len(digits) - 1  # a finite value: the exponent is a number
    fraction = mantissa[1:] or "0"
    return f"{'-' if sign else ''}{mantissa[0]}.{fraction}E{power}"


def java_fixed(value: float, digits: int) -> str:
    """``String.format("%.<digits>f", value)``: HALF_UP on the double's exact value."""
    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def human_readable_byte_count(n: int) -> str:
    """``MixAll.humanReadableByteCount(n, false)`` (binary units)."""
    unit = 1024
    if n < unit:
        return f"{n} B"
    exp = int(math.log(n) / math.log(unit))
    return f"{java_fixed(n / unit ** exp, 1)} {'KMGTPE'[exp - 1]}iB"
