"""Memory-mapped base shared by Kafka's offset index (``.index``) and time index (``.timeindex``).

Both files are flat arrays of fixed-size big-endian entries: no header, no entry count, no checksum. A newly
created index is pre-sized to ``floor(segment.index.bytes / entry_size) * entry_size`` zero bytes and starts with
0 entries; an existing file is assumed to be full of valid entries (``entries = file_size // entry_size``), which is
Kafka's rule and the reason indexes are trimmed on roll and close. An untrimmed file left by a crash therefore
looks full of zero entries; :meth:`AbstractIndex.entries_for_dump` stops where ``kafka-dump-log`` stops.

Lookups are Kafka's cache-friendly binary search: the last ``8192 // entry_size`` entries (the "warm" section)
are searched alone whenever the target lies beyond the first of them, so in-sync lookups touch the same pages.
"""

from __future__ import annotations

import io
import mmap
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Generic, NamedTuple, Self, TypeVar

from segments._native import index as _native_index
from segments.errors import CorruptIndexError, IndexOffsetOverflowError
from segments.file_records import allocate, located_error, open_no_follow

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
"""Kafka's default ``segment.index.bytes`` (10 MiB)."""

WARM_SECTION_BYTES = 8192
"""Size of the warm section in bytes; every subclass sets ``_WARM_ENTRIES = WARM_SECTION_BYTES // entry_size``."""

MAX_RELATIVE_OFFSET = 2**31 - 1

UNTRIMMED_INDEX = "untrimmed index"
"""Start of the finding :meth:`AbstractIndex.check` reports for a preallocated, zero-filled tail."""

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

EntryT = TypeVar("EntryT")


class IndexField(NamedTuple):
    """Where a searched field lies in an entry: byte ``offset``, ``kind`` (``FIELD_INT32`` / ``FIELD_INT64`` of
    :mod:`segments._native.index`) and whether the stored value is relative to the base offset."""

    offset: int
    kind: int
    relative: bool


INT32_FIELD = _native_index.FIELD_INT32
INT64_FIELD = _native_index.FIELD_INT64


class AbstractIndex(_native_index.IndexEntries, ABC, Generic[EntryT]):
    """A fixed-entry-size index file of one segment, memory-mapped like Kafka's ``AbstractIndex``.

    ``writable=False`` opens an existing file read-only (``ACCESS_READ`` mapping) for tools: the file is never
    created, resized or trimmed. ``writable=True`` creates a missing file; a missing or zero-length file is
    pre-sized to ``max_index_size`` (rounded down to whole entries) when ``preallocate`` is true, otherwise it stays
    zero-length with no free slot until :meth:`resize`. Zero-length files are never mapped (``mmap`` refuses 0
    bytes) and read as empty.

    A writable index allocates its whole mapped length (``posix_fallocate``) before mapping it, so a full disk is
    an ``OSError`` (``ENOSPC``) naming the file at open or resize, never a SIGBUS at an entry write; a symbolic
    link at the path is refused (``OSError`` ``ELOOP``), never mapped.
    """

    entry_size: ClassVar[int]
    _WARM_ENTRIES: ClassVar[int]
    _OFFSET_FIELD: ClassVar[IndexField]
    """The entry's offset (truncation searches it)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        *,
        preallocate: bool = True,
    ) -> None:
        self._path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._mm: mmap.mmap | None = None
        self._length = 0
        self._max_entries = 0
        self._entries = 0
        # The last entry's fields are cached in the native base (IndexEntries), valid while the count matches:
        # entries are only added by appends (which refresh it) and dropped by truncations (which change the count);
        # load_entries, which rewrites them, drops it.
        self._closed = False
        presize = self._round_down(max_index_size) if writable and preallocate else 0
        if writable and preallocate and presize == 0:
            raise ValueError(f"invalid max index size {max_index_size} for {self.entry_size}-byte entries")
        if not writable and not self._path.exists():
            # Read-only tools opening a segment whose index was never written (or was deleted to force a
            # rebuild): Kafka would create an empty one; a reader just sees no entries.
            return
        # 0o666 leaves permissions to the umask, as Java's RandomAccessFile does. A link is refused, not followed:
        # a writable map of it would write index entries into whatever file it names.
        fd = open_no_follow(self._path, os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY, 0o666)
        try:
            length = os.fstat(fd).st_size
            if length == 0 and presize:
                length = presize
                entries = 0
            else:
                entries = length // self.entry_size
            if writable and length:
                # Every mapped page gets its blocks now (a file left sparse by a crash or by Kafka's ftruncate
                # too): a full disk is then ENOSPC here, never SIGBUS at the first write of an entry.
                allocate(fd, length, self._path)
            self._map(fd, length)
            self._entries = entries
        finally:
            os.close(fd)

    # -- properties -------------------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The index file's current path. O(1)."""
        return self._path

    @property
    def entries(self) -> int:
        """Number of valid entries. O(1)."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """Number of slots the current file length holds. O(1)."""
        return self._max_entries

    @property
    def length(self) -> int:
        """Current file length in bytes (preallocated slots included). O(1)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by valid entries. O(1)."""
        return self._entries * self.entry_size

    # -- entry access ---------------------------------------------------------------------------------------

    @abstractmethod
    def _parse(self, slot: int) -> EntryT:
        """Decode the entry stored in ``slot`` (absolute offsets)."""

    @abstractmethod
    def _slot_offset(self, slot: int) -> int:
        """Absolute offset stored in ``slot``."""

    def entry(self, n: int) -> EntryT:
        """The ``n``-th entry (0-based); IndexError outside ``[0, entries)``. O(1)."""
        if not 0 <= n < self._entries:
            raise IndexError(f"{self._path}: entry {n} requested from an index of {self._entries} entries")
        return self._parse(n)

    def __iter__(self) -> Iterator[EntryT]:
        """Every valid entry in slot order. O(n)."""
        for slot in range(self._entries):
            yield self._parse(slot)

    def entries_for_dump(self) -> Iterator[EntryT]:
        """Entries as ``kafka-dump-log`` prints them: it stops at the first slot after slot 0 whose offset is the
        base offset, the start of the zero fill of an untrimmed file. O(n)."""
        for slot in range(self._dump_end()):
            yield self._parse(slot)

    def _dump_end(self) -> int:
        for slot in range(1, self._entries):
            if self._slot_offset(slot) == self.base_offset:
                return slot
        return self._entries

    def _buffer(self) -> mmap.mmap:
        if self._mm is None:
            raise ValueError(f"{self._path}: index is closed")
        return self._mm

    # -- relative offsets -----------------------------------------------------------------------------------

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``; IndexOffsetOverflowError unless it lies in ``[0, 2**31-1]``. O(1)."""
        relative = offset - self.base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise IndexOffsetOverflowError(
                f"offset {offset} does not fit a 32-bit relative offset from base offset {self.base_offset}",
                path=self._path,
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` converts to a relative offset of this index. O(1)."""
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # -- search ---------------------------------------------------------------------------------------------

    def _largest_lower_bound_slot(self, target: int, field: IndexField) -> int:
        """Slot of the largest entry whose ``field`` is <= target, or -1. O(log n)."""
        return self._search(target, field, largest_lower_bound=True)

    def _smallest_upper_bound_slot(self, target: int, field: IndexField) -> int:
        """Slot of an entry whose ``field`` is >= target, or -1, with Kafka's result: when slot 0 itself matches
        exactly in the cold section the next slot is answered (Kafka's loop never probes ``lo``; fetch upper
        bounds depend on it). O(log n)."""
        return self._search(target, field, largest_lower_bound=False)

    def _search(self, target: int, field: IndexField, *, largest_lower_bound: bool) -> int:
        """Kafka's warm/cold binary search, compiled (:func:`segments._native.index.search`) over the map. O(log
        n)."""
        if self._entries == 0:
            return -1
        # Fields are int32 (+ base offset) or int64: a target outside int64 compares like the nearest bound.
        target = min(max(target, _INT64_MIN), _INT64_MAX)
        return _native_index.search(
            self._buffer(),
            self._entries,
            self.entry_size,
            field.offset,
            field.kind,
            self.base_offset if field.relative else 0,
            target,
            largest_lower_bound,
            self._WARM_ENTRIES,
        )

    # -- mutation -------------------------------------------------------------------------------------------

    def _require_writable(self) -> None:
        if self._closed:
            raise ValueError(f"{self._path}: index is closed")
        if not self.writable:
            raise io.UnsupportedOperation(f"{self._path}: index opened read-only")

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset`` (Kafka's three cases: none <= offset drops all, an exact
        match is dropped with everything after it, otherwise entries after the largest lower one go). The bytes of
        dropped slots stay until overwritten or trimmed, as in Kafka. O(log n)."""
        self._require_writable()
        slot = self._largest_lower_bound_slot(offset, self._OFFSET_FIELD)
        if slot < 0:
            self._entries = 0
        elif self._slot_offset(slot) == offset:
            self._entries = slot
        else:
            self._entries = slot + 1

    def reset(self) -> None:
        """Drop all entries and resize the file back to ``max_index_size``. O(1) plus the resize."""
        self._require_writable()
        self._entries = 0
        self.resize(self.max_index_size)

    def load_entries(self, entries: bytes, capacity: int) -> None:
        """Replace every entry with ``entries`` (whole entries in the file's format, already valid) in a file of
        ``capacity`` bytes (rounded down to whole entries, at least the entries): a recovery replaying an entry its scan
        refused loads the rebuilt ones so, at full size, before the append that raises. O(len(entries)) plus the resize."""
        self._require_writable()
        if len(entries) % self.entry_size:
            raise ValueError(f"{self._path}: {len(entries)} bytes are not whole {self.entry_size}-byte entries")
        self._entries = 0
        self._forget_last()
        self.resize(max(capacity, len(entries)))
        if entries:
            self._buffer()[: len(entries)] = entries
        self._entries = len(entries) // self.entry_size

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) length to ``new_size`` rounded down to whole entries, keeping the entries.

        Returns False when the length is already that. ValueError if it would cut valid entries; an ``OSError``
        naming the file when the disk cannot hold the growth (allocated, so never a SIGBUS later). O(1) syscalls.
        """
        self._require_writable()
        rounded = self._round_down(new_size)
        if rounded == self._length:
            return False
        if rounded < self.size_in_bytes:
            raise ValueError(
                f"{self._path}: cannot resize to {rounded} bytes below {self._entries} valid entries"
            )
        # The old mapping is replaced, not closed: a reader that fetched it mid-lookup keeps a valid view of the
        # entries (which lie inside both lengths) and it is unmapped when the last reference goes away.
        fd = open_no_follow(self._path, os.O_RDWR)
        try:
            if rounded > self._length:
                # Growth is allocated, not left sparse: see __init__.
                allocate(fd, rounded, self._path)
            else:
                try:
                    os.ftruncate(fd, rounded)
                except OSError as err:
                    raise located_error(err, self._path, f"resize to {rounded} bytes") from err
            self._map(fd, rounded)
        finally:
            os.close(fd)
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to exactly the valid entries (done on roll and close). O(1) syscalls."""
        self.resize(self.size_in_bytes)

    def flush(self) -> None:
        """Write dirty mapped pages and fsync the file; no-op for read-only or closed indexes. O(dirty pages)."""
        if not self.writable or self._closed:
            return
        fd = open_no_follow(self._path, os.O_RDONLY)
        try:
            if self._mm is not None:
                self._mm.flush()
            os.fsync(fd)
        except OSError as err:
            raise located_error(err, self._path, "fsync") from err
        finally:
            os.close(fd)

    @property
    def closed(self) -> bool:
        """Whether the index was closed or deleted (unmapped for good). O(1)."""
        return self._closed

    def close(self) -> None:
        """Trim (writable indexes only) and unmap; later calls are no-ops. O(1) syscalls."""
        if self._closed:
            return
        if self.writable:
            self.trim_to_valid_size()
        self._unmap()
        self._closed = True

    def delete(self) -> bool:
        """Unmap without trimming and delete the file; False when it did not exist. O(1)."""
        self._unmap()
        self._closed = True
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the backing file (the mapping stays valid). O(1)."""
        os.replace(self._path, path)
        self._path = Path(path)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- checks ---------------------------------------------------------------------------------------------

    @abstractmethod
    def sanity_check(self) -> None:
        """Kafka's sanity check; raises CorruptIndexError."""

    def _length_error(self) -> CorruptIndexError | None:
        partial = self._length % self.entry_size
        if partial == 0:
            return None
        return CorruptIndexError(
            f"file length {self._length} is not a multiple of the {self.entry_size}-byte entry size",
            path=self._path,
            position=self._length - partial,
        )

    def _structural_findings(self) -> tuple[list[CorruptIndexError], int]:
        """Length and zero-fill findings, and how many leading slots deserve per-entry checks. O(n)."""
        findings: list[CorruptIndexError] = []
        length_error = self._length_error()
        if length_error is not None:
            findings.append(length_error)
        end = self._dump_end()
        if end < self._entries:
            start, stop = end * self.entry_size, self.size_in_bytes
            if self._buffer()[start:stop].count(0) == stop - start:
                findings.append(
                    CorruptIndexError(
                        f"{UNTRIMMED_INDEX}: {self._entries - end} zero-filled slots from here to the end",
                        path=self._path,
                        position=start,
                    )
                )
                return findings, end
        return findings, self._entries

    def _check(self) -> None:
        """Assert the internal invariants (tests call this after every step)."""
        assert self._max_entries == self._length // self.entry_size
        assert 0 <= self._entries <= self._max_entries
        if self._closed:
            assert self._mm is None
            return
        assert (self._mm is None) == (self._length == 0)
        assert self._mm is None or len(self._mm) == self._length
        if self.writable or self._path.exists():
            assert os.path.getsize(self._path) == self._length

    # -- helpers --------------------------------------------------------------------------------------------

    def _round_down(self, size: int) -> int:
        if size < 0:
            raise ValueError(f"negative index size {size}")
        return size // self.entry_size * self.entry_size

    def _map(self, fd: int, length: int) -> None:
        access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
        try:
            mapped = mmap.mmap(fd, length, access=access) if length else None
        except OSError as err:
            raise located_error(err, self._path, f"map of {length} bytes") from err
        if mapped is not None and self.writable:
            # Appends touch the map one new page at a time: without this, each first touch is a fault that also
            # reads ahead (zero-fills and maps) a window of pages past it, several times the cost of the page
            # itself, on every segment's tail.
            try:
                mapped.madvise(mmap.MADV_RANDOM)
            except OSError as err:
                mapped.close()
                raise located_error(err, self._path, "madvise of the map") from err
        self._hold_map(mapped)
        self._mm = mapped
        self._length = length
        self._max_entries = length // self.entry_size

    def _unmap(self) -> None:
        if self._mm is not None:
            self._hold_map(None)
            self._mm.close()
            self._mm = None
