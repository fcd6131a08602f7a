"""The key index of one segment: an on-disk hash index of record keys, in the spirit of RocketMQ's ``IndexFile``.

One ``<base offset>.keyindex`` file per segment, so it goes with its segment and ``reindex`` rebuilds it. Layout
(big-endian, as Kafka's own files)::

    header (88 bytes)
      0  magic            4  b"LKIX"
      4  version          2  1
      6  reserved         2  0
      8  base_offset      8  the segment's base offset (relative offsets are against it)
     16  begin_timestamp  8  timestamp of the first entry: entries store their timestamp as a delta to it
     24  end_timestamp    8  timestamp of the last entry
     32  min_timestamp    8  smallest timestamp indexed (a query's time range skips the file without it)
     40  max_timestamp    8  largest timestamp indexed
     48  begin_offset     8  first record offset indexed
     56  end_offset       8  last record offset indexed
     64  start_offset     8  the first offset indexed from (the log start when the file was created)
     72  next_offset      8  every record in [start_offset, next_offset) is indexed (the dispatch progress)
     80  slot_count       4  number of hash slots
     84  entry_count      4  number of valid entries
    (timestamps and offsets are -1 while the file has no entry)
    slots (slot_count x 4 bytes): 1-based number of the newest entry whose key hash falls in the slot, 0 = none
    entries (20 bytes each, appended):
      0  key_hash         4  CRC-32 (zlib) of the key bytes
      4  relative_offset  4  record offset - base_offset
      8  timestamp_delta  8  record timestamp - the header's begin_timestamp
     16  previous         4  1-based number of the previous entry of the same slot, 0 = end of the chain

Writes go entries first, then slots, then the header, so a crash leaves at most entries the header does not count;
readers ignore every link that is not strictly below the entry linking to it (chains always point backwards), which
bounds a walk by the entry count even on a hostile file. Nothing here is fsynced: the dispatcher checks the header
against the log at open and rebuilds what does not match. Files are opened without following a symbolic link, as
every file of a log dir: a link is an ``OSError`` (``ELOOP``) naming it, never written through.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from segments.errors import StorageFormatError
from segments.file_records import open_no_follow
from segments.naming import filename_prefix_from_offset

__all__ = [
    "DEFAULT_SLOT_COUNT",
    "ENTRY_SIZE",
    "HEADER_SIZE",
    "KEY_INDEX_SUFFIX",
    "KeyIndexCorruptError",
    "KeyIndexEntry",
    "KeyIndexHeader",
    "KeyIndexReader",
    "KeyIndexWriter",
    "key_hash",
    "key_index_file",
]

KEY_INDEX_SUFFIX = ".keyindex"
MAGIC = b"LKIX"
VERSION = 1
HEADER_SIZE = 88
SLOT_SIZE = 4
ENTRY_SIZE = 20
DEFAULT_SLOT_COUNT = 4096
MAX_SLOT_COUNT = 1 << 24
_MAX_ENTRIES = (1 << 32) - 1
_HEADER = struct.Struct(">4sHHqqqqqqqqqII")
_ENTRY = struct.Struct(">IIqI")
_SLOT = struct.Struct(">I")
_NONE = -1


class KeyIndexCorruptError(StorageFormatError):
    """A ``.keyindex`` file does not follow the layout: bad magic or version, impossible counts, short file."""


def key_index_file(directory: str | PathLike[str], base_offset: int) -> Path:
    """Path of the key index of the segment at ``base_offset`` in ``directory``. O(1)."""
    return Path(directory) / (filename_prefix_from_offset(base_offset) + KEY_INDEX_SUFFIX)


def key_hash(key: bytes) -> int:
    """The 32-bit hash stored for ``key`` (zlib CRC-32: stable across processes, computed in C). O(len(key))."""
    return zlib.crc32(key)


@dataclass(frozen=True, slots=True)
class KeyIndexHeader:
    """The decoded 88-byte header."""

    base_offset: int
    begin_timestamp: int
    end_timestamp: int
    min_timestamp: int
    max_timestamp: int
    begin_offset: int
    end_offset: int
    start_offset: int
    next_offset: int
    slot_count: int
    entry_count: int

    def pack(self) -> bytes:
        """The header's bytes. O(1)."""
        return _HEADER.pack(
            MAGIC, VERSION, 0, self.base_offset, self.begin_timestamp, self.end_timestamp, self.min_timestamp,
            self.max_timestamp, self.begin_offset, self.end_offset, self.start_offset, self.next_offset,
            self.slot_count, self.entry_count,
        )

    @classmethod
    def unpack(cls, data: bytes, *, path: str | None = None, file_size: int | None = None) -> KeyIndexHeader:
        """Parse a header, checking magic, version, slot count and, given ``file_size``, that the slots and
        counted entries fit the file. Raises :class:`KeyIndexCorruptError`. O(1)."""
        if len(data) < HEADER_SIZE:
            raise KeyIndexCorruptError(f"header is {len(data)} bytes, expected {HEADER_SIZE}", path=path, position=0)
        magic, version, _reserved, base, t0, t1, tmin, tmax, o0, o1, first, nxt, slots, count = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise KeyIndexCorruptError(f"bad magic {magic!r}, expected {MAGIC!r}", path=path, position=0)
        if version != VERSION:
            raise KeyIndexCorruptError(f"unsupported version {version}", path=path, position=4)
        if not 1 <= slots <= MAX_SLOT_COUNT:
            raise KeyIndexCorruptError(f"slot count {slots} outside [1, {MAX_SLOT_COUNT}]", path=path, position=80)
        if not 0 <= base <= first <= nxt:
            raise KeyIndexCorruptError(
                f"offsets out of order: base {base}, start {first}, next {nxt}", path=path, position=64
            )
        if file_size is not None and HEADER_SIZE + slots * SLOT_SIZE + count * ENTRY_SIZE > file_size:
            raise KeyIndexCorruptError(
                f"{slots} slots and {count} entries need more than the file's {file_size} bytes", path=path,
                position=80,
            )
        return cls(base, t0, t1, tmin, tmax, o0, o1, first, nxt, slots, count)

    def covers(self, begin_timestamp: int | None, end_timestamp: int | None) -> bool:
        """Whether entries with timestamps in ``[begin_timestamp, end_timestamp]`` may be in the file. O(1)."""
        if self.entry_count == 0:
            return False
        if begin_timestamp is not None and self.max_timestamp < begin_timestamp:
            return False
        return end_timestamp is None or self.min_timestamp <= end_timestamp


@dataclass(frozen=True, slots=True)
class KeyIndexEntry:
    """One entry, decoded: the absolute offset and timestamp of a record whose key hashed to ``key_hash``."""

    key_hash: int
    offset: int
    timestamp: int


def _empty_header(base_offset: int, start_offset: int, slot_count: int) -> KeyIndexHeader:
    return KeyIndexHeader(base_offset, _NONE, _NONE, _NONE, _NONE, _NONE, _NONE, start_offset, start_offset, slot_count, 0)


class KeyIndexReader:
    """Read access to one ``.keyindex`` file, through positional reads on an open descriptor (a file unlinked
    while a query walks it stays readable). Use as a context manager."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self._fd = open_no_follow(self.path, os.O_RDONLY)
        try:
            size = os.fstat(self._fd).st_size
            self.header = KeyIndexHeader.unpack(os.pread(self._fd, HEADER_SIZE, 0), path=str(self.path), file_size=size)
        except BaseException:
            os.close(self._fd)
            raise

    def close(self) -> None:
        """Release the descriptor. O(1)."""
        os.close(self._fd)

    def fsync(self) -> None:
        """Make the file durable (offline rebuilds). O(file)."""
        os.fsync(self._fd)

    def __enter__(self) -> KeyIndexReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _entry(self, number: int) -> tuple[KeyIndexEntry, int]:
        position = HEADER_SIZE + self.header.slot_count * SLOT_SIZE + (number - 1) * ENTRY_SIZE
        data = os.pread(self._fd, ENTRY_SIZE, position)
        if len(data) < ENTRY_SIZE:
            raise KeyIndexCorruptError("entry cut short", path=str(self.path), position=position)
        hashed, relative, delta, previous = _ENTRY.unpack(data)
        return KeyIndexEntry(hashed, self.header.base_offset + relative, self.header.begin_timestamp + delta), previous

    def lookup(
        self, key: bytes, *, begin_timestamp: int | None = None, end_timestamp: int | None = None
    ) -> list[KeyIndexEntry]:
        """Entries whose hash is ``key``'s (collisions included: callers compare keys), newest first, within
        the timestamp bounds. O(chain length), bounded by the entry count."""
        header = self.header
        if not header.covers(begin_timestamp, end_timestamp):
            return []
        hashed = key_hash(key)
        slot_position = HEADER_SIZE + (hashed % header.slot_count) * SLOT_SIZE
        (number,) = _SLOT.unpack(os.pread(self._fd, SLOT_SIZE, slot_position))
        found: list[KeyIndexEntry] = []
        limit = header.entry_count + 1
        while 0 < number < limit:
            entry, previous = self._entry(number)
            in_range = (begin_timestamp is None or entry.timestamp >= begin_timestamp) and (
                end_timestamp is None or entry.timestamp <= end_timestamp
            )
            if entry.key_hash == hashed and in_range:
                found.append(entry)
            # Chains point strictly backwards; anything else is a torn or hostile file and ends the walk.
            limit, number = number, previous
        return found

    def entries(self) -> Iterator[KeyIndexEntry]:
        """Every counted entry in file order (verification). O(entries)."""
        for number in range(1, self.header.entry_count + 1):
            yield self._entry(number)[0]

    def slot_heads(self) -> list[int]:
        """Every slot's head entry number (verification). O(slots)."""
        data = os.pread(self._fd, self.header.slot_count * SLOT_SIZE, HEADER_SIZE)
        return [value for (value,) in _SLOT.iter_unpack(data[: len(data) - len(data) % SLOT_SIZE])]


class KeyIndexWriter:
    """Appends entries to one segment's key index, creating it (empty) or reopening a valid one. Slots are kept
    in memory; :meth:`add` buffers and :meth:`commit` writes entries, changed slots and header in that order.
    Not thread-safe: one dispatcher owns it."""

    def __init__(
        self,
        path: str | PathLike[str],
        base_offset: int,
        *,
        start_offset: int | None = None,
        slot_count: int = DEFAULT_SLOT_COUNT,
    ) -> None:
        self.path = Path(path)
        if self.path.exists():
            with KeyIndexReader(self.path) as reader:
                if reader.header.base_offset != base_offset:
                    raise KeyIndexCorruptError(
                        f"base offset {reader.header.base_offset}, expected {base_offset}", path=str(self.path),
                        position=8,
                    )
                self.header = reader.header
                self._slots = reader.slot_heads()
            self._fd = open_no_follow(self.path, os.O_RDWR)
        else:
            if not 1 <= slot_count <= MAX_SLOT_COUNT:
                raise ValueError(f"slot count {slot_count} outside [1, {MAX_SLOT_COUNT}]")
            first = base_offset if start_offset is None else start_offset
            if first < base_offset:
                raise ValueError(f"start offset {first} below the base offset {base_offset}")
            self.header = _empty_header(base_offset, first, slot_count)
            self._slots = [0] * slot_count
            self._fd = open_no_follow(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
            os.pwrite(self._fd, self.header.pack() + bytes(slot_count * SLOT_SIZE), 0)
        self._pending: list[bytes] = []
        self._dirty_slots: set[int] = set()
        self._next = self.header

    @property
    def next_offset(self) -> int:
        """Every record below this offset is indexed (pending entries included). O(1)."""
        return self._next.next_offset

    def add(self, key: bytes, offset: int, timestamp: int) -> None:
        """Buffer an entry for the record at ``offset`` (at or above :attr:`next_offset`). O(len(key))."""
        nxt = self._next
        relative = offset - nxt.base_offset
        if not 0 <= relative <= 0xFFFFFFFF or offset < nxt.next_offset:
            raise ValueError(f"offset {offset} cannot be indexed in the key index of segment {nxt.base_offset} now")
        number = nxt.entry_count + 1
        if number > _MAX_ENTRIES:
            raise ValueError(f"key index {self.path} is full")
        if nxt.entry_count == 0:
            nxt = KeyIndexHeader(
                nxt.base_offset, timestamp, timestamp, timestamp, timestamp, offset, offset, nxt.start_offset,
                offset, nxt.slot_count, 0,
            )
        hashed = key_hash(key)
        slot = hashed % nxt.slot_count
        head = self._slots[slot]
        # A head at or past this entry was left by a crash between a slot write and its header: not a chain.
        self._pending.append(_ENTRY.pack(hashed, relative, timestamp - nxt.begin_timestamp, head if head < number else 0))
        self._slots[slot] = number
        self._dirty_slots.add(slot)
        self._next = KeyIndexHeader(
            nxt.base_offset, nxt.begin_timestamp, timestamp, min(nxt.min_timestamp, timestamp),
            max(nxt.max_timestamp, timestamp), nxt.begin_offset, offset, nxt.start_offset, offset + 1, nxt.slot_count,
            number,
        )

    def advance(self, next_offset: int) -> None:
        """Record that every record below ``next_offset`` is indexed (batches without keys, control batches). O(1)."""
        nxt = self._next
        if next_offset > nxt.next_offset:
            self._next = KeyIndexHeader(
                nxt.base_offset, nxt.begin_timestamp, nxt.end_timestamp, nxt.min_timestamp, nxt.max_timestamp,
                nxt.begin_offset, nxt.end_offset, nxt.start_offset, next_offset, nxt.slot_count, nxt.entry_count,
            )

    def commit(self) -> None:
        """Write the buffered entries, the slots they changed, then the header. O(pending entries)."""
        if self._next == self.header:
            return
        slot_count = self.header.slot_count
        if self._pending:
            position = HEADER_SIZE + slot_count * SLOT_SIZE + self.header.entry_count * ENTRY_SIZE
            os.pwrite(self._fd, b"".join(self._pending), position)
            if len(self._dirty_slots) > slot_count // 8:
                os.pwrite(self._fd, b"".join(_SLOT.pack(s) for s in self._slots), HEADER_SIZE)
            else:
                for slot in self._dirty_slots:
                    os.pwrite(self._fd, _SLOT.pack(self._slots[slot]), HEADER_SIZE + slot * SLOT_SIZE)
        os.pwrite(self._fd, self._next.pack(), 0)
        self.header = self._next
        self._pending.clear()
        self._dirty_slots.clear()

    def close(self) -> None:
        """Commit what is buffered and release the descriptor. O(pending entries)."""
        if self._fd < 0:
            return
        try:
            self.commit()
        finally:
            os.close(self._fd)
            self._fd = -1
