"""Java's integer parsing (``Integer.parseInt`` / ``Long.parseLong`` / ``Short.parseShort``) and range checks.

Kafka reads every number in its file names and text files with these; Python's ``int`` accepts more (spaces,
underscores), so the format layer uses :func:`parse_java_int` instead.
"""

from __future__ import annotations

import re
import unicodedata

# Character.digit(c, 10) accepts every Unicode decimal digit (category Nd), as does \d on str patterns.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_SHORT_DIGITS = 20
_BOUNDS = {16: (INT16_MIN, INT16_MAX), 32: (INT32_MIN, INT32_MAX), 64: (INT64_MIN, INT64_MAX)}


def parse_java_int(text: str, bits: int) -> int:
    """``Integer.parseInt`` (bits=32), ``Long.parseLong`` (64) or ``Short.parseShort`` (16). O(len(text)).

    Raises ``ValueError`` when Java would throw ``NumberFormatException``: no digits, any other character
    (whitespace included), or a value outside the signed range.
    """
    low, high = _BOUNDS[bits]
    if len(text) <= _SHORT_DIGITS and text.isascii() and text.isdigit():
        # Every segment file name (20 ASCII digits): a short string, so int() builds no bignum worth avoiding.
        value = int(text)
        if value > high:
            raise ValueError(f"out of the int{bits} range: {text!r}")
        return value
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise ValueError(f"not an integer: {text!r}")
    negative = text[0] == "-"
    value = 0
    # Digit by digit so a huge (or zero-padded) string is rejected or accepted without building a bignum.
    for char in text.lstrip("+-"):
        value = value * 10 + unicodedata.decimal(char)
        if value > high + 1:
            raise ValueError(f"out of the int{bits} range: {text!r}")
    value = -value if negative else value
    if not low <= value <= high:
        raise ValueError(f"out of the int{bits} range: {text!r}")
    return value


def check_java_int(value: object, bits: int, what: str) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) within the signed ``bits`` range. O(1).

    Writers call it so a value Kafka could not read back raises ``ValueError`` before anything is written.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an int, got {type(value).__name__}")
    low, high = _BOUNDS[bits]
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside the int{bits} range")
    return value
