"""Typed errors of the format layer.

Every error that comes from reading bytes names *where* the problem is: the file (when known) and either the
byte position (record data, indexes, snapshots) or the 1-based line number (text checkpoint files). The message
of ``str(err)`` is one line meant for an operator, e.g.::

    /data/kafka/t-0/00000000000000000000.log: position 4096: batch CRC mismatch (stored 0x1a2b3c4d, computed ...)

Callers that do not know the file yet (parsing an in-memory buffer) raise without a path; the layer that knows
the file re-raises with :meth:`StorageFormatError.at`.
"""

from __future__ import annotations

from os import PathLike
from typing import Self


class StorageFormatError(Exception):
    """Base of every error raised for bytes that do not follow Kafka's on-disk formats."""

    def __init__(
        self,
        message: str,
        *,
        path: str | PathLike[str] | None = None,
        position: int | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.path: str | None = None if path is None else str(path)
        self.position = position
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.position is not None:
            where.append(f"position {self.position}")
        return ": ".join([*where, self.message])

    def at(
        self,
        path: str | PathLike[str] | None = None,
        *,
        position_base: int = 0,
    ) -> Self:
        """Return a copy located in ``path``, with positions shifted by ``position_base``.

        Used when a buffer-level parser's error travels up to the code that knows which file (and which file
        position the buffer started at) it came from.
        """
        position = None if self.position is None else self.position + position_base
        # Subclasses never override __init__, so the same constructor rebuilds any of them.
        return type(self)(self.message, path=self.path if path is None else path, position=position, line=self.line)

    def to_dict(self) -> dict[str, object]:
        """The ``{file, position, error}`` shape used by ``verify --json``."""
        return {"file": self.path, "position": self.position, "line": self.line, "error": self.message}


class CorruptRecordError(StorageFormatError):
    """A record batch or legacy message is invalid: bad CRC, impossible size, bad varint, bad framing."""


class UnsupportedCompressionError(CorruptRecordError):
    """A batch names a compression codec id Kafka does not define (5-7), or one invalid for its magic."""


class UnsupportedMagicError(CorruptRecordError):
    """A batch declares a magic byte other than 0, 1 or 2."""


class RecordTooLargeError(CorruptRecordError):
    """A declared length exceeds what the file holds or what the caller allows (guards allocation)."""


class InvalidOffsetError(StorageFormatError):
    """An offset breaks an ordering rule: index entries not increasing, appends below the log end, etc."""


class IndexOffsetOverflowError(InvalidOffsetError):
    """An offset does not fit the 32-bit relative offset of its segment (``offset - baseOffset > 2**31-1``)."""


class LogSegmentOffsetOverflowError(IndexOffsetOverflowError):
    """Kafka's ``LogSegmentOffsetOverflowException``: a CRC-valid legacy (magic 0/1) batch that continues its segment
    but whose offset does not fit 32 bits relative to the segment's base, as segments written before KAFKA-5413
    hold. The loader splits the segment at it instead of truncating (Kafka's ``splitOverflowedSegment``)."""


class CorruptIndexError(StorageFormatError):
    """An ``.index``, ``.timeindex`` or ``.txnindex`` file breaks its format or its sanity rules."""


class IndexFullError(StorageFormatError):
    """An append to an offset or time index that has no free slot left."""


class CorruptCheckpointError(StorageFormatError):
    """A text checkpoint or metadata file (offset checkpoints, leader epochs, partition.metadata,
    meta.properties, clean-shutdown marker) is malformed."""


class CorruptSnapshotError(StorageFormatError):
    """A producer-state ``.snapshot`` file has a bad version, CRC or size."""


class InvalidTopicError(StorageFormatError):
    """A topic name Kafka would refuse (empty, too long, bad characters, ``.`` or ``..``)."""


class InvalidPartitionDirError(StorageFormatError):
    """A directory name that is not ``<topic>-<partition>`` (optionally with a ``.uuid-delete|future|stray``
    suffix)."""


class SegmentClosedError(Exception):
    """A read of a segment whose files were closed for good (it was deleted): not an I/O failure of its dir. A
    reader that looked the segment up before its deletion looks it up again."""

    def __init__(self, path: str | PathLike[str]) -> None:
        super().__init__(f"{path}: segment closed (deleted)")
        self.path = path
