"""Kafka's transaction index (``.txnindex``): the aborted transactions whose ABORT marker lies in a segment.

An append-only file of 34-byte big-endian entries ``i16 version | i64 producerId | i64 firstOffset |
i64 lastOffset | i64 lastStableOffset``; not memory-mapped, not preallocated, created on the first append.
Kafka's reader checks only the first byte of the version field (a value > 0 is an error) and ignores a trailing
partial entry; both quirks are kept.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple, Self

from segments.errors import CorruptIndexError, InvalidOffsetError
from segments.file_records import located_error, open_no_follow

_ENTRY = struct.Struct(">hqqqq")
_LAST_OFFSET = struct.Struct(">q")
_LAST_OFFSET_FIELD = 18
_READ_ENTRIES = 1024
CURRENT_VERSION = 0
_MIN_I64, _MAX_I64 = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, first data offset, marker offset and the LSO at marker time.

    ``version`` is the whole 16-bit field as stored; :attr:`reader_version` is what Kafka's reader sees.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    SIZE: ClassVar[int] = _ENTRY.size

    def __post_init__(self) -> None:
        if not -(2**15) <= self.version < 2**15:
            raise ValueError(f"version {self.version} does not fit an int16")
        for value in (self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset):
            if not _MIN_I64 <= value <= _MAX_I64:
                raise ValueError(f"{value} does not fit an int64")

    @property
    def reader_version(self) -> int:
        """The signed first byte of the version field: Kafka's ``AbortedTxn.version()``. O(1)."""
        return self.version >> 8

    def to_bytes(self) -> bytes:
        """The 34-byte on-disk entry. O(1)."""
        return _ENTRY.pack(
            self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Decode exactly 34 bytes (no version check: see :attr:`reader_version`); CorruptIndexError on another
        length. O(1)."""
        if len(data) != cls.SIZE:
            raise CorruptIndexError(
                f"aborted transaction entry of {len(data)} bytes, expected {cls.SIZE}", position=0
            )
        version, producer_id, first_offset, last_offset, last_stable_offset = _ENTRY.unpack(data)
        return cls(producer_id, first_offset, last_offset, last_stable_offset, version)


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch range; ``is_complete`` means later segments need not be read."""

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` file of the segment starting at ``start_offset``.

    The file is opened on first use (when it exists) and created by the first :meth:`append`; a closed index
    reopens itself on the next access, as Kafka's does. ``writable=False`` never creates or changes the file.
    Unlike Kafka, which forgets the last offset when it reopens a file, appends are checked against the file's
    last entry too (read by the first append).
    """

    def __init__(self, path: str | os.PathLike[str], start_offset: int, writable: bool = True) -> None:
        self._path = Path(path)
        self.start_offset = start_offset
        self.writable = writable
        self._fd: int | None = None
        # Read on the first append, not here: constructing the index touches no file.
        self._last_offset: int | None = None
        self._last_offset_known = False

    @property
    def path(self) -> Path:
        """The index file's current path (it may not exist yet). O(1)."""
        return self._path

    # -- file handling --------------------------------------------------------------------------------------

    def _channel(self) -> int:
        if self._fd is None:
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND if self.writable else os.O_RDONLY
            # A link is refused (ELOOP): appends and truncations must never reach a file outside the log dir.
            self._fd = open_no_follow(self._path, flags, 0o666)
        return self._fd

    def _require_writable(self) -> None:
        if not self.writable:
            raise io.UnsupportedOperation(f"{self._path}: transaction index opened read-only")

    def _stored_last_offset(self) -> int | None:
        """Last offset of the file's last complete entry, read without any check. O(1)."""
        if not self._path.exists():
            return None
        fd = self._channel()
        count = os.fstat(fd).st_size // AbortedTxn.SIZE
        if count == 0:
            return None
        raw = os.pread(fd, _LAST_OFFSET.size, (count - 1) * AbortedTxn.SIZE + _LAST_OFFSET_FIELD)
        if len(raw) < _LAST_OFFSET.size:
            return None
        last_offset: int = _LAST_OFFSET.unpack(raw)[0]
        return last_offset

    def _raw_entries(self) -> Iterator[tuple[int, AbortedTxn]]:
        """``(byte position, entry)`` for each complete entry, trailing partial entry ignored. O(n)."""
        if not self._path.exists():
            return
        fd = self._channel()
        size = os.fstat(fd).st_size
        position = 0
        while size - position >= AbortedTxn.SIZE:
            want = min(_READ_ENTRIES, (size - position) // AbortedTxn.SIZE) * AbortedTxn.SIZE
            chunk = os.pread(fd, want, position)
            complete = len(chunk) // AbortedTxn.SIZE * AbortedTxn.SIZE
            if complete == 0:
                return
            for start in range(0, complete, AbortedTxn.SIZE):
                yield position + start, AbortedTxn.from_bytes(chunk[start : start + AbortedTxn.SIZE])
            position += complete

    def _entries(self) -> Iterator[tuple[int, AbortedTxn]]:
        """Like Kafka's iterator: an entry whose version byte is > 0 raises CorruptIndexError when reached. O(n)."""
        for position, txn in self._raw_entries():
            if txn.reader_version > CURRENT_VERSION:
                raise CorruptIndexError(
                    f"unexpected aborted transaction version {txn.reader_version}, current version is "
                    f"{CURRENT_VERSION}",
                    path=self._path,
                    position=position,
                )
            yield position, txn

    # -- operations -----------------------------------------------------------------------------------------

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Append one entry, creating the file if needed; InvalidOffsetError unless its last offset exceeds the
        previous entry's. O(1)."""
        self._require_writable()
        if not self._last_offset_known:
            self._set_last_offset(self._stored_last_offset())
        if self._last_offset is not None and aborted_txn.last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"last offset {aborted_txn.last_offset} of an appended aborted transaction is not greater than "
                f"the current last offset {self._last_offset}",
                path=self._path,
            )
        data = memoryview(aborted_txn.to_bytes())
        fd = self._channel()
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError as err:
            raise located_error(err, self._path, f"append of an aborted transaction at {aborted_txn.last_offset}") from err
        self._last_offset = aborted_txn.last_offset

    def _set_last_offset(self, offset: int | None) -> None:
        self._last_offset = offset
        self._last_offset_known = True

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry in file order. O(n)."""
        return [txn for _, txn in self._entries()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping ``[fetch_offset, upper_bound_offset)`` (``last_offset >= fetch_offset`` and
        ``first_offset < upper_bound_offset``); complete as soon as an entry's last stable offset reaches the
        upper bound, which ends the walk. O(n)."""
        aborted: list[AbortedTxn] = []
        for _, txn in self._entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                aborted.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def truncate_to(self, offset: int) -> None:
        """Cut the file before the first entry whose last offset is >= ``offset``. O(n)."""
        self._require_writable()
        new_last: int | None = None
        for position, txn in self._entries():
            if txn.last_offset >= offset:
                self._truncate(position)
                self._set_last_offset(new_last)
                return
            new_last = txn.last_offset

    def reset(self) -> None:
        """Remove all entries; the file, if any, stays with length 0. O(1)."""
        self._require_writable()
        if self._path.exists():
            self._truncate(0)
        self._set_last_offset(None)

    def _truncate(self, size: int) -> None:
        try:
            os.ftruncate(self._channel(), size)
        except OSError as err:
            raise located_error(err, self._path, f"truncation to {size} bytes") from err

    def flush(self) -> None:
        """fsync the file when it is open; an ``OSError`` names it. O(dirty pages)."""
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as err:
                raise located_error(err, self._path, "fsync") from err

    @property
    def is_open(self) -> bool:
        """Whether the file is open now. O(1)."""
        return self._fd is not None

    def close(self) -> None:
        """Close the file descriptor; a later access reopens it. O(1)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> bool:
        """Close and delete the file; False when it did not exist. O(1)."""
        self.close()
        self._set_last_offset(None)
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file if it exists; the index follows the new path either way. O(1)."""
        try:
            if self._path.exists():
                os.replace(self._path, path)
        finally:
            self._path = Path(path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- checks ---------------------------------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Kafka's ``TransactionIndex.sanityCheck``: CorruptIndexError for an entry whose last offset is below the
        segment's start offset (or a bad version byte, met while reading). O(n)."""
        for position, txn in self._entries():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"last offset {txn.last_offset} of aborted transaction is less than the start offset "
                    f"{self.start_offset}",
                    path=self._path,
                    position=position,
                )

    def check(self) -> list[CorruptIndexError]:
        """Findings for ``verify``: bad version byte, last offsets below the start offset or not strictly
        increasing, first offset after the marker, last stable offset past marker + 1, trailing partial entry.
        O(n)."""
        findings: list[CorruptIndexError] = []
        previous_last: int | None = None
        end = 0
        for position, txn in self._raw_entries():
            problems = []
            if txn.reader_version > CURRENT_VERSION:
                problems.append(f"unexpected aborted transaction version {txn.reader_version}")
            if txn.last_offset < self.start_offset:
                problems.append(
                    f"last offset {txn.last_offset} is below the start offset {self.start_offset}"
                )
            if previous_last is not None and txn.last_offset <= previous_last:
                problems.append(f"last offset {txn.last_offset} does not increase (previous {previous_last})")
            if txn.first_offset > txn.last_offset:
                problems.append(f"first offset {txn.first_offset} is after the last offset {txn.last_offset}")
            if txn.last_stable_offset > txn.last_offset + 1:
                problems.append(
                    f"last stable offset {txn.last_stable_offset} is past the last offset {txn.last_offset} + 1"
                )
            findings.extend(CorruptIndexError(p, path=self._path, position=position) for p in problems)
            previous_last = txn.last_offset
            end = position + AbortedTxn.SIZE
        if self._path.exists():
            size = os.fstat(self._channel()).st_size
            if size > end:
                findings.append(
                    CorruptIndexError(
                        f"{size - end} trailing bytes do not form a whole {AbortedTxn.SIZE}-byte entry",
                        path=self._path,
                        position=end,
                    )
                )
        return findings

    def _check(self) -> None:
        """Assert the internal invariants (tests call this after every step)."""
        assert not self._last_offset_known or self._last_offset == self._stored_last_offset()
        if self._fd is not None:
            assert os.path.samestat(os.fstat(self._fd), os.stat(self._path))
