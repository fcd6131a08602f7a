"""Java's text-reading rules, as Kafka's checkpoint readers apply them.

Kafka reads its text files with ``BufferedReader.readLine`` (lines end at ``\\n``, ``\\r`` or ``\\r\\n``), splits
fields with ``Pattern.split("\\\\s+")`` (Java's ``\\s`` is ASCII-only) and converts numbers with
``Integer.parseInt`` / ``Long.parseLong``. Python's ``str.splitlines``, ``str.split`` and ``int`` each accept
more than that, so the readers use these helpers instead.
"""

from __future__ import annotations

import re
from os import PathLike

from segments.errors import CorruptCheckpointError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")
# Java's \s without UNICODE_CHARACTER_CLASS: space, \t, \n, \x0b, \f, \r.
JAVA_WHITESPACE = "[ \t\n\x0b\f\r]"
_WHITESPACE_RUN = re.compile(JAVA_WHITESPACE + "+")


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


