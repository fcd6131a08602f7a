"""Kafka's versioned text checkpoint format (``CheckpointFile``), shared by offset and leader-epoch checkpoints.

Layout (UTF-8, one item per line, lines ended by the platform separator — ``\\n`` on Linux)::

    <version>
    <entry count>
    <entry>
    ...

Reader rules, as Kafka applies them: an empty file, or one holding only the version line, has no entries;
the version must be the expected one; every line after the count line is an entry (a blank line is a malformed
entry, not padding) and the number of entries must equal the count.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from os import PathLike
from typing import Generic, TypeVar

from checkpoints.atomic import atomic_write_bytes, read_file_bytes
from checkpoints.java_text import check_line_separator, decode_utf8, split_lines, split_whitespace
from segments.errors import CorruptCheckpointError
from segments.java_numbers import parse_java_int

T = TypeVar("T")
ReadT = TypeVar("ReadT")
WriteT = TypeVar("WriteT")


def parse_checkpoint(
    data: bytes,
    *,
    version: int,
    parse_entry: Callable[[list[str]], T],
    path: str | PathLike[str] | None = None,
) -> list[T]:
    """Parse a checkpoint file's bytes into its entries, in file order. O(n).

    ``parse_entry`` receives the whitespace-split fields of one entry line and raises ``ValueError`` (its
    message is used) when they do not form an entry. Every problem raises :class:`CorruptCheckpointError`
    naming ``path`` and the 1-based line.
    """
    lines = split_lines(decode_utf8(data, path))
    if not lines:
        return []
    found_version = _header_int(lines[0], 1, "version", path)
    if found_version != version:
        raise CorruptCheckpointError(
            f"unsupported checkpoint version {found_version} (expected {version})", path=path, line=1
        )
    if len(lines) == 1:
        return []
    count = _header_int(lines[1], 2, "entry count", path)
    if count < 0:
        raise CorruptCheckpointError(f"negative entry count {count}", path=path, line=2)
    entries: list[T] = []
    for number, line in enumerate(lines[2:], start=3):
        try:
            entries.append(parse_entry(split_whitespace(line)))
        except ValueError as err:
            raise CorruptCheckpointError(f"malformed entry {line[:80]!r}: {err}", path=path, line=number) from None
    if len(entries) != count:
        raise CorruptCheckpointError(
            f"entry count {count} does not match the {len(entries)} entries present", path=path, line=2
        )
    return entries


def format_checkpoint(version: int, entry_lines: Sequence[str], *, line_separator: str = "\n") -> bytes:
    """Serialize already formatted entry lines under the version and count header. O(n)."""
    check_line_separator(line_separator)
    lines = [str(version), str(len(entry_lines)), *entry_lines]
    return "".join(line + line_separator for line in lines).encode("utf-8")


class TextCheckpointFile(ABC, Generic[ReadT, WriteT]):
    """One checkpoint file on disk; subclasses say how its content is parsed and formatted."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = os.fspath(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    @abstractmethod
    def _parse(self, data: bytes) -> ReadT: ...

    @abstractmethod
    def _format(self, content: WriteT) -> bytes: ...

    def create_if_missing(self) -> None:
        """Create the file empty unless it exists, as Kafka's ``CheckpointFile`` constructor does. O(1).

        An empty file reads as no entries, so no fsync is needed: losing it in a crash changes nothing.
        """
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

    def read(self) -> ReadT:
        """The file's content; a missing file reads as empty, since Kafka creates it empty. O(n).

        Raises :class:`CorruptCheckpointError` naming the file and line when it is malformed.
        """
        try:
            data = read_file_bytes(self.path)
        except FileNotFoundError:
            data = b""
        return self._parse(data)

    def write(self, content: WriteT) -> None:
        """Atomically replace the file with ``content`` (tmp, fsync, rename, fsync dir). O(n).

        Content that cannot be formatted raises before the file is touched.
        """
        atomic_write_bytes(self.path, self._format(content))


def _header_int(line: str, number: int, what: str, path: str | PathLike[str] | None) -> int:
    try:
        return parse_java_int(line, 32)
    except ValueError as err:
        raise CorruptCheckpointError(f"malformed {what} line: {err}", path=path, line=number) from None
