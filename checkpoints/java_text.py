"""Java's text-reading rules, as Kafka's checkpoint readers apply them.

Kafka reads its text files with ``BufferedReader.readLine`` (lines end at ``\\n``, ``\\r`` or ``\\r\\n``), splits
fields with ``Pattern.split("\\\\s+")`` (Java's ``\\s`` is ASCII-only) and converts numbers with
``Integer.parseInt`` / ``Long.parseLong``. Python's ``str.splitlines``, ``str.split`` and ``int`` each accept
more than that, so the readers use these helpers instead.
"""

from __future__ import annotations

import re
import unicodedata
from os import PathLike

from segments.errors import CorruptCheckpointError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")
# Java's \s without UNICODE_CHARACTER_CLASS: space, \t, \n, \x0b, \f, \r.
JAVA_WHITESPACE = "[ \t\n\x0b\f\r]"
_WHITESPACE_RUN = re.compile(JAVA_WHITESPACE + "+")
# Character.digit(c, 10) accepts every Unicode decimal digit (category Nd), as does \d on str patterns.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_BOUNDS = {16: (INT16_MIN, INT16_MAX), 32: (INT32_MIN, INT32_MAX), 64: (INT64_MIN, INT64_MAX)}


def decode_utf8(data: bytes, path: str | PathLike[str] | None) -> str:
    """Decode ``data`` as strict UTF-8, raising :class:`CorruptCheckpointError` at the offending line. O(n)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = len(_LINE_BREAK_BYTES.findall(data, 0, err.start)) + 1
        raise CorruptCheckpointError(
            f"invalid UTF-8 byte 0x{data[err.start]:02x}", path=path, line=line, position=err.start
        ) from None


def split_lines(text: str) -> list[str]:
    """The lines ``BufferedReader.readLine`` returns for ``text``, terminators removed. O(n).

    A terminator at the very end does not start another line; an empty text has no lines.
    """
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def line_separator(text: str) -> str:
    """The first line terminator used in ``text`` (``"\\n"`` when there is none), to rewrite a file alike. O(n)."""
    found = _LINE_BREAK.search(text)
    return "\n" if found is None else found.group()


def check_line_separator(separator: str) -> str:
    """Return ``separator`` if it is one ``readLine`` recognises (``\\n``, ``\\r\\n``, ``\\r``), else raise ``ValueError``. O(1)."""
    if separator not in ("\n", "\r\n", "\r"):
        raise ValueError(f"unsupported line separator {separator!r}")
    return separator


def split_whitespace(line: str) -> list[str]:
    """``line.split("\\\\s+")`` with Java's semantics. O(n).

    Leading whitespace yields an empty first field; trailing empty fields are dropped; a line without
    whitespace (including the empty line) is returned whole.
    """
    if _WHITESPACE_RUN.search(line) is None:
        return [line]
    fields = _WHITESPACE_RUN.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def parse_java_int(text: str, bits: int) -> int:
    """``Integer.parseInt`` (bits=32), ``Long.parseLong`` (64) or ``Short.parseShort`` (16). O(len(text)).

    Raises ``ValueError`` when Java would throw ``NumberFormatException``: no digits, any other character
    (whitespace included), or a value outside the signed range.
    """
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise ValueError(f"not an integer: {text!r}")
    low, high = _BOUNDS[bits]
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
