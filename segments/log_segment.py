"""One segment of a partition: a ``.log`` file and its ``.index``, ``.timeindex`` and ``.txnindex``.

Mirrors Kafka's ``LogSegment`` (``kafka-format.md`` §3, §6). Index rules in brief:

* on append, an offset-index entry ``(largest offset of the append, position where it starts)`` is added when
  more than ``index.interval.bytes`` were appended since the last entry (so the first append is never indexed),
  with a time-index entry ``(max timestamp so far, offset of the batch holding it)`` beside it;
* :meth:`LogSegment.recover` rebuilds all three indexes batch by batch with Kafka's recovery rule and truncates
  the ``.log`` at the first invalid batch;
* closing or deactivating a segment appends one final time-index entry and trims both indexes.

Concurrency: one writer per segment (append, truncate, recover, flush, close, rename) under the owning log's
lock; readers call :meth:`read`, :meth:`translate_offset` and :meth:`find_offset_by_timestamp` without a lock
(see :mod:`segments.file_records`).
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

from segments._native.append import SegmentAppendState
from segments._native.batches import (
    FetchSlice,
    RecoveryScan,
    TimestampAndOffset,
    fetch_slice,
    find_record_by_timestamp,
    find_timestamp,
    indexed_position,
    next_offset_from,
)
from segments._native.files import open_for_reading
from segments.abstract_index import DEFAULT_MAX_INDEX_SIZE, MAX_RELATIVE_OFFSET
from segments.errors import (
    CorruptIndexError,
    CorruptRecordError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    LogSegmentOffsetOverflowError,
    SegmentClosedError,
    StorageFormatError,
)
from segments.file_records import (
    FileBatch,
    FileRecords,
    batch_view,
    iter_batches,
    open_no_follow,
)
from segments.lazy_index import LazyIndex
from segments.naming import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix_from_offset,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from segments.offset_index import OffsetIndex, OffsetPosition
from segments.records import (
    COMPRESSION_CODEC_MASK,
    DEFAULT_DECODE_LIMITS,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    DefaultRecordBatch,
    RecordBatch,
)
from segments.time_index import TimeIndex, TimestampOffset
from segments.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from segments.transactions import TransactionTracker

DEFAULT_INDEX_INTERVAL_BYTES = 4096

_IndexT = TypeVar("_IndexT", OffsetIndex, TimeIndex)

_UNKNOWN = TimestampOffset(NO_TIMESTAMP, -1)
_MAKING = threading.Lock()
"""Serializes the first creation of a segment's file objects (once per file), shared so a segment that was only
listed holds no lock of its own."""


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """The batch found for an offset: its last offset, where it starts and its size."""

    offset: int
    position: int
    size: int


class RecoveryResult(NamedTuple):
    """What a recovery or index rebuild found: bytes of valid batches, bytes cut, the error that ended the
    scan (``None`` when the whole file was valid or ended in a partial batch), the offset after the last valid
    batch (the base offset when there is none: :meth:`LogSegment.read_next_offset` once recovered) when the scan
    ended without one (``None`` otherwise), and the offset after the valid magic-2 batches the observer was not
    shown at the end (``None``: it was shown the last one, or there is none; see
    :meth:`LogSegment.rebuild_indexes`). A named tuple: made once per recovered segment, where a frozen
    dataclass's ``object.__setattr__`` per field cost a microsecond."""

    valid_bytes: int
    truncated_bytes: int
    batches: int
    error: StorageFormatError | None
    next_offset: int | None = None
    quiet_next_offset: int | None = None


BatchObserver = Callable[[RecordBatch], None]


def first_record_at_or_after(batch: RecordBatch, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
    """The first record of ``batch`` (CRC not checked, as Kafka's search does not) with timestamp >= ``timestamp``
    and offset >= ``starting_offset``. A magic-2 batch is scanned by the compiled record-timestamp loop
    (:func:`segments._native.batches.find_record_by_timestamp`) over its records region, decompressed first when
    compressed (bounded by :data:`DEFAULT_DECODE_LIMITS`); legacy messages are decoded. Errors are located in the
    batch as :meth:`RecordBatch.records` locates them. O(records scanned)."""
    if not isinstance(batch, DefaultRecordBatch):
        for record in batch.records():
            if record.timestamp >= timestamp and record.offset >= starting_offset:
                return TimestampAndOffset(record.timestamp, record.offset)
        return None
    limits = DEFAULT_DECODE_LIMITS
    # Attribute bits rather than the enum properties: this runs once per timestamp lookup.
    attributes = batch.attributes
    compressed = attributes & COMPRESSION_CODEC_MASK != 0
    region = batch.decompressed_records_region(max_size=limits.max_batch_bytes) if compressed else batch.records_region()
    log_append_time = batch.max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
    try:
        hit = find_record_by_timestamp(
            region,
            batch.records_count,
            batch.base_offset,
            batch.base_timestamp,
            log_append_time,
            timestamp,
            starting_offset,
            limits.max_record_bytes,
        )
    except CorruptRecordError as err:
        if compressed:
            raise type(err)(
                f"in decompressed records at offset {err.position}: {err.message}", position=RECORD_BATCH_OVERHEAD
            ) from None
        raise err.at(position_base=RECORD_BATCH_OVERHEAD) from None
    return None if hit is None else TimestampAndOffset(*hit)


def _first_record_in_batch(
    position: int, data: bytes, timestamp: int, starting_offset: int, path: str | os.PathLike[str] | None
) -> TimestampAndOffset | None:
    """:func:`first_record_at_or_after` over the bytes ``data`` of the batch at ``position`` of the ``.log`` at
    ``path``, errors located there: the compressed and legacy batches of a timestamp lookup (the compiled
    ``find_timestamp`` calls this plain function, so no closure is made per lookup). O(records scanned)."""
    try:
        return first_record_at_or_after(batch_view(data), timestamp, starting_offset)
    except StorageFormatError as err:
        raise err.at(path, position_base=position) from None


class LogSegment(SegmentAppendState):
    """A segment: ``.log`` + offset index + time index + transaction index, starting at ``base_offset``.

    A segment loaded from a directory listing (:meth:`listed`) holds only its directory and base
    offset (and the ``.log`` length when the listing had it: the active segment's): each of its four files gets its
    object, and is opened, on first use (Kafka's lazy index, extended to the ``.log`` and ``.txnindex``), and
    :meth:`release` closes them again. Its ``.log`` length is learned by one ``stat`` the first time :attr:`size`
    or :attr:`log` is asked for.

    Concurrency of that length: it is learned, and the ``.log`` object made, under the module lock ``_MAKING``, and
    only while no ``.log`` object exists. The file changes only through that object (appends, truncations, renames:
    the log's one writer), so a length learned before it exists is the file's, and once it exists :attr:`size` is
    the object's. Readers read either without a lock (one attribute read each).

    Kafka's roll rule (``roll_due``) and the append with its index entries (``append_scan``, ``append_batches``)
    are compiled: :class:`segments._native.append.SegmentAppendState`, which holds the state as C fields.
    """

    # The state is kept in C fields of SegmentAppendState (slots, declared here for the type checker), whose
    # defaults (None; "" and False where said) are what a listed segment does not have yet: a log load makes
    # thousands of segments and most are never used, so each is given only what the compiled _setup sets.
    # None until first use (made under _MAKING):
    _log: FileRecords | None
    _offset_index: LazyIndex[OffsetIndex] | None
    _time_index: LazyIndex[TimeIndex] | None
    _txn_index: TransactionIndex | None
    _listed_size: int | None
    """The ``.log`` length while ``_log`` is None: the listing's, or None until learned (see the class doc)."""
    _txn_index_unlisted: bool
    """The listing the segment came from had no ``.txnindex`` (only a ``TransactionIndex`` object, made on first
    use of :attr:`txn_index`, creates one): while there is no object, nothing to empty before a rebuild."""
    _resize_indexes_to: int | None
    """The size :meth:`resize_indexes` asked for before the index holders were made: given to them when made."""
    _suffix: str
    _closed: bool
    _directory: Path
    _writable: bool
    _max_index_size: int
    _clock: Callable[[], float]

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex | LazyIndex[OffsetIndex],
        time_index: TimeIndex | LazyIndex[TimeIndex],
        txn_index: TransactionIndex,
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        roll_jitter_ms: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._setup(
            log.path.parent, base_offset, "", None, txn_index.writable, DEFAULT_MAX_INDEX_SIZE,
            index_interval_bytes, roll_jitter_ms, clock,
        )
        self._set_log(log)
        # Indexes open on first use (Kafka's LazyIndex): inactive segments that are never read cost one descriptor.
        self._set_index_holders(
            offset_index if isinstance(offset_index, LazyIndex) else LazyIndex.of(offset_index),
            time_index if isinstance(time_index, LazyIndex) else LazyIndex.of(time_index),
        )
        self._txn_index = txn_index

    # -- opening ----------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        *,
        file_suffix: str = "",
        writable: bool = True,
        create: bool = False,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        roll_jitter_ms: int = 0,
        clock: Callable[[], float] = time.time,
        preallocate_bytes: int = 0,
    ) -> LogSegment:
        """Open (``create=True``: create) the segment with ``base_offset`` in ``directory``. O(1).

        ``preallocate_bytes`` reserves that much disk for a new ``.log`` (Kafka's ``preallocate``). A segment of a
        directory listing, whose files are all opened on first use, is made by :meth:`listed`.

        A writable segment creates missing index files (preallocated to ``max_index_size``, blocks allocated) when
        it maps them. A read-only segment (tools) needs the ``.log``; a missing ``.index``/``.timeindex`` reads as
        empty. A symbolic link at any of the four files, or a disk too full for the new indexes, raises an
        ``OSError`` naming the file; nothing opened is left open.
        """
        segment = cls.__new__(cls)
        # A Path given is kept: Path(path) would parse it again.
        directory = directory if isinstance(directory, Path) else Path(directory)
        log = FileRecords(
            log_file(directory, base_offset, file_suffix),
            writable=writable,
            create=create,
            preallocate_bytes=preallocate_bytes,
        )
        segment._setup(
            directory, base_offset, file_suffix, None, writable, max_index_size, index_interval_bytes,
            roll_jitter_ms, clock,
        )
        segment._set_log(log)
        if create:
            # A new segment is the active one: map its indexes now, so the first append does not pay for it
            # (and a full disk fails the roll here, while allocating them, rather than a later append).
            try:
                segment._lazy_offset_index().get()
                segment._lazy_time_index().get()
            except BaseException:
                # Nothing else holds these yet: a failed open must not leak the descriptors and maps it took.
                segment._lazy_offset_index().close()
                segment._lazy_time_index().close()
                log.close()
                raise
        return segment

    @classmethod
    def listed(
        cls,
        directory: Path,
        base_offsets: Sequence[int],
        *,
        sizes: Sequence[int | None] | None = None,
        txn_indexes_listed: Sequence[bool] | None = None,
        roll_jitters_ms: Sequence[int] | None = None,
        writable: bool = True,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        clock: Callable[[], float] = time.time,
        created_ms: int | None = None,
    ) -> list[LogSegment]:
        """The segments of ``directory`` with ``base_offsets``, from a directory listing (a log load's): nothing is
        opened, read or stat'ed now, every file on first use. Per segment, in the order of ``base_offsets``:
        ``sizes``, the ``.log`` length the listing's stat found, if it has one (the load's active segment), else
        None, learned on first use; ``txn_indexes_listed``, False when the listing has no ``.txnindex`` for it (a
        recovery then opens none to empty it); ``roll_jitters_ms`` (default 0). ``created_ms``: the creation time
        of them all (default: ``clock`` now). All in one call, with no interpreted frame per segment: a load makes
        every segment of every partition. O(len(base_offsets))."""
        count = len(base_offsets)
        return cls._listed(
            directory,
            list(base_offsets),
            [None] * count if sizes is None else list(sizes),
            [True] * count if txn_indexes_listed is None else list(txn_indexes_listed),
            [0] * count if roll_jitters_ms is None else list(roll_jitters_ms),
            writable,
            max_index_size,
            index_interval_bytes,
            clock,
            int(clock() * 1000) if created_ms is None else created_ms,
        )

    @property
    def log(self) -> FileRecords:
        """The ``.log`` (its object made, not opened, on first access; the file opens on first read/write). O(1)."""
        log = self._log
        if log is None:
            with _MAKING:
                log = self._log
                if log is None:
                    log = FileRecords(self.log_path, writable=self._writable, size=self._learned_size())
                    if self._closed:
                        log.close()
                    self._set_log(log)
        return log

    @property
    def log_path(self) -> Path:
        """Path of the ``.log`` file, without making its object or opening it. O(1)."""
        log = self._log
        return log.path if log is not None else log_file(self._directory, self.base_offset, self._suffix)

    @property
    def size_known(self) -> bool:
        """Whether :attr:`size` is known without I/O (a listed segment's ``.log`` length is learned by one ``stat``
        on first use): the hook tests use to check that a clean load stats no inactive segment. O(1)."""
        return self._log is not None or self._listed_size is not None

    def _learned_size(self) -> int:
        """The ``.log`` length while no ``.log`` object exists: the listing's, else one ``stat`` (a link is not
        followed, as opening it would refuse it), kept. Called with ``_MAKING`` held (see the class doc). O(1)."""
        size = self._listed_size
        if size is None:
            size = self._listed_size = os.stat(self.log_path, follow_symlinks=False).st_size
        return size

    @property
    def txn_index(self) -> TransactionIndex:
        """The ``.txnindex`` (its object made on first access; the file opens on first read/write). O(1)."""
        index = self._txn_index
        if index is None:
            with _MAKING:
                index = self._txn_index
                if index is None:
                    index = TransactionIndex(
                        transaction_index_file(self._directory, self.base_offset, self._suffix),
                        self.base_offset,
                        self._writable,
                    )
                    self._txn_index = index
        return index

    def _lazy_offset_index(self) -> LazyIndex[OffsetIndex]:
        lazy = self._offset_index
        return lazy if lazy is not None else self._make_lazy_index("_offset_index", offset_index_file, OffsetIndex)

    def _lazy_time_index(self) -> LazyIndex[TimeIndex]:
        lazy = self._time_index
        return lazy if lazy is not None else self._make_lazy_index("_time_index", time_index_file, TimeIndex)

    def _make_lazy_index(
        self,
        attribute: Literal["_offset_index", "_time_index"],
        file_name: Callable[[Path, int, str], Path],
        index_type: Callable[[Path, int, int, bool], _IndexT],
    ) -> LazyIndex[_IndexT]:
        """The holder of an index at ``attribute``, made on first need (once, under ``_MAKING``), with the resize
        :meth:`resize_indexes` asked for before. O(1)."""
        base, size, writable = self.base_offset, self._max_index_size, self._writable
        with _MAKING:
            lazy: LazyIndex[_IndexT] | None = getattr(self, attribute)
            if lazy is None:
                lazy = LazyIndex(
                    file_name(self._directory, base, self._suffix), lambda path: index_type(path, base, size, writable)
                )
                if self._resize_indexes_to is not None:
                    lazy.resize_when_opened(self._resize_indexes_to)
                if attribute == "_offset_index":
                    self._set_index_holders(lazy, self._time_index)
                else:
                    self._set_index_holders(self._offset_index, lazy)
        return lazy

    @property
    def open_files(self) -> tuple[str, ...]:
        """The kinds (``"log"``, ``"index"``, ``"timeindex"``, ``"txnindex"``) of this segment's files that hold a
        descriptor or a map now: the hook tests use to check that a clean load opens nothing. O(1)."""
        opened: list[str] = []
        if self._log is not None and self._log.is_open:
            opened.append("log")
        if self._offset_index is not None and self._offset_index.is_open:
            opened.append("index")
        if self._time_index is not None and self._time_index.is_open:
            opened.append("timeindex")
        if self._txn_index is not None and self._txn_index.is_open:
            opened.append("txnindex")
        return tuple(opened)

    def pin(self) -> None:
        """Open the ``.log`` and map both indexes now, as Kafka keeps them: for a segment about to be unlinked
        while readers may hold it, who then keep reading through the open descriptors. O(1)."""
        if self._closed:
            return
        self._lazy_offset_index().get()
        self._lazy_time_index().get()
        self.log.ensure_open()

    # -- indexes ----------------------------------------------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index, opened on first use. O(1)."""
        lazy = self._offset_index
        return (lazy if lazy is not None else self._lazy_offset_index()).get()

    @property
    def time_index(self) -> TimeIndex:
        """The time index, opened on first use. O(1)."""
        lazy = self._time_index
        return (lazy if lazy is not None else self._lazy_time_index()).get()

    @property
    def offset_index_path(self) -> Path:
        """Path of the ``.index`` file, without opening it. O(1)."""
        lazy = self._offset_index
        return lazy.path if lazy is not None else offset_index_file(self._directory, self.base_offset, self._suffix)

    @property
    def time_index_path(self) -> Path:
        """Path of the ``.timeindex`` file, without opening it. O(1)."""
        lazy = self._time_index
        return lazy.path if lazy is not None else time_index_file(self._directory, self.base_offset, self._suffix)

    def resize_indexes(self, size: int) -> None:
        """Kafka's ``resizeIndexes`` for the active segment of a load: both indexes at ``size`` (trimmed ones
        re-expanded), resized now if mapped, else when first used (:meth:`LazyIndex.resize_when_opened`; an index
        whose holder is not made yet gets the size when it is). O(1)."""
        with _MAKING:
            self._resize_indexes_to = size
            holders = (self._offset_index, self._time_index)
        for lazy in holders:
            if lazy is not None:
                lazy.resize_when_opened(size)

    def release(self) -> None:
        """Close the ``.log`` and ``.txnindex`` and close (trim) and unmap both indexes; they reopen on next use.
        For inactive segments nobody reads yet, such as those a log load just recovered, so a recovered log holds
        no descriptor for them. O(1)."""
        if self._log is not None:
            self._log.release()
        for lazy in (self._offset_index, self._time_index):
            if lazy is not None:
                lazy.unload()
        if self._txn_index is not None:
            self._txn_index.close()

    def discard_indexes(self) -> None:
        """Unmap the indexes without trimming and remove their files (a deleted segment whose names may already be
        gone). O(1)."""
        self._lazy_offset_index().discard()
        self._lazy_time_index().discard()

    # -- sizes and timestamps ---------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the ``.log``: the ``.log`` object's, or while there is none the listing's, learned by one
        ``stat`` on first use for a listed segment (see the class doc). O(1)."""
        log = self._log
        if log is not None:
            return log.size_in_bytes
        size = self._listed_size
        if size is not None:
            return size
        with _MAKING:
            log = self._log
            return self._learned_size() if log is None else log.size_in_bytes

    def _max_timestamp_so_far(self) -> TimestampOffset:
        # After a restart the max timestamp comes from the last time-index entry, as in Kafka.
        timestamp = self._max_timestamp
        if timestamp is None:
            timestamp, self._offset_of_max_timestamp = self.time_index.last_entry
            self._max_timestamp = timestamp
        return TimestampOffset(timestamp, self._offset_of_max_timestamp)

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp appended (or the last time-index entry after reopening). O(1)."""
        return self._max_timestamp_so_far().timestamp

    @property
    def known_max_timestamp(self) -> int | None:
        """:attr:`max_timestamp_so_far` when it is known without reading the time index (after an append, a
        recovery or a first read of it), else None. Never does I/O: safe on a segment nobody holds. O(1)."""
        return self._max_timestamp

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        """Last offset of the batch holding :attr:`max_timestamp_so_far`. O(1)."""
        return self._max_timestamp_so_far().offset

    def largest_timestamp(self) -> int:
        """Kafka's ``largestTimestamp`` for retention: the max record timestamp, else the ``.log`` mtime. Raises
        :class:`SegmentClosedError` once the segment is closed for good (deleted), before touching its files. O(1)."""
        log = self._log
        if log is not None and log.closed:
            raise SegmentClosedError(log._path_name)
        timestamp = self.max_timestamp_so_far
        if timestamp >= 0:
            return timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    # -- writing ----------------------------------------------------------------------------------------------

    def append(self, records: bytes | memoryview) -> int:
        """Append one or more whole batches (already offset-assigned and validated by the caller); return the
        position they start at. O(len(records)) for the header walk and the write.

        Index entries follow Kafka's append rule (see the module docstring). Raises
        :class:`IndexOffsetOverflowError` when the largest offset does not fit the segment.
        """
        largest_offset = -1
        largest_timestamp = NO_TIMESTAMP
        shallow_offset_of_max = -1
        count = 0
        for found in iter_batches(records):
            batch = found.batch
            count += 1
            largest_offset = max(largest_offset, batch.last_offset)
            if batch.max_timestamp > largest_timestamp:
                largest_timestamp = batch.max_timestamp
                shallow_offset_of_max = batch.last_offset
            end = found.end_position
        if count == 0 or end != len(records):
            raise CorruptRecordError(f"append to {self.log.path} must hold whole batches")
        return self.append_batches((records,), largest_offset, largest_timestamp, shallow_offset_of_max)

    def append_aborted_txn(self, aborted: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker lies in this segment. O(1)."""
        self.txn_index.append(aborted)

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET:
            raise IndexOffsetOverflowError(
                f"offset {offset} does not fit a segment based at {self.base_offset}", path=self.log.path
            )

    # -- reading ----------------------------------------------------------------------------------------------

    def batches(self, start_position: int = 0) -> Iterator[FileBatch]:
        """Batches from ``start_position`` (Kafka's file iteration rule). O(bytes read)."""
        return self.log.batches(start_position)

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is ``>= offset``, searching from the offset index's entry. O(log n +
        batches scanned), reading batch headers only; ``None`` when the offset is past this segment."""
        found = self.log.locate_batch(max(self._indexed_position(offset), starting_position), offset)
        return None if found is None else LogOffsetPosition(*found)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchSlice | None:
        """The byte range to serve a fetch from ``start_offset`` and its bytes (``records``): whole batches from
        the one holding the offset, at most ``max_size`` bytes (at least the first batch when
        ``min_one_message``) and never past ``max_position`` (default: the segment size). ``None`` when the
        offset is past this segment. Raises :class:`SegmentClosedError` once the segment is closed for good (a
        deleted segment: its readers look again), before touching any of its files. O(log n + bytes scanned +
        bytes read)."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read from {self.log_path}")
        # Every fetch's path: the files' objects are read as plain attributes once made (the properties' fallbacks
        # make them, and reopen released ones), then one compiled call (index search, header hop, bounds, read) on
        # their state: the descriptor and size snapshot of the .log, the index map and its entry count.
        log = self._log
        if log is None:
            log = self.log
        fd = log._descriptor()
        if fd < 0:
            raise SegmentClosedError(log._path_name)
        lazy = self._offset_index
        index = None if lazy is None else lazy._index
        if index is None:
            index = self.offset_index
        return fetch_slice(
            fd, log._size, log._path_name, index._mm, index._entries, index._path, self.base_offset,
            index._WARM_ENTRIES, start_offset, max_position, max_size, min_one_message,
        )

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampAndOffset | None:
        """The first record with timestamp ``>= timestamp`` and offset ``>= starting_offset`` (Kafka's
        ``findOffsetByTimestamp``). O(log n + batches scanned): batch headers are read until one's max timestamp
        reaches the target, and only that batch is read, its records scanned for their timestamps and offsets
        (:func:`first_record_at_or_after`'s search; an uncompressed magic-2 batch is scanned in the same compiled
        call as the index searches and the header hop). Raises :class:`SegmentClosedError` once the segment is closed
        for good, before touching any of its files."""
        # Every timestamp lookup's path, as in read(): a closed (deleted) segment raises before any of its files is
        # touched, then the files' objects are read as plain attributes once made.
        log = self._log
        if log is None:
            log = self.log
        fd = log._descriptor()
        if fd < 0:
            raise SegmentClosedError(log._path_name)
        time_lazy = self._time_index
        time_index = None if time_lazy is None else time_lazy._index
        if time_index is None:
            time_index = self.time_index
        offset_lazy = self._offset_index
        offset_index = None if offset_lazy is None else offset_lazy._index
        if offset_index is None:
            offset_index = self.offset_index
        base_offset = self.base_offset
        starting = base_offset if starting_offset is None else starting_offset
        return find_timestamp(
            fd, log._size, log._path, time_index._mm, time_index._entries, time_index._path, offset_index._mm,
            offset_index._entries, offset_index._path, base_offset, time_index._WARM_ENTRIES,
            offset_index._WARM_ENTRIES, timestamp, starting, DEFAULT_DECODE_LIMITS.max_record_bytes,
            _first_record_in_batch,
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch: base offset if empty (Kafka's ``readNextOffset``: batch headers from the
        last offset-index entry, :func:`next_offset_from`). O(batches after the last index entry)."""
        start = self._indexed_position(self.offset_index.last_offset)
        log = self.log
        return next_offset_from(log._descriptor(), start, log._size, self.base_offset, log._path_name)

    def _indexed_position(self, offset: int) -> int:
        """Where a scan for ``offset`` starts: the position of the offset index's entry for it. Kafka's index sanity
        check reads offsets only, so a damaged entry can hold a negative position, or one at or past the end of
        the ``.log``: CorruptIndexError naming the index file, rather than a read at a negative position or a scan that
        finds nothing where batches are (which would put the log end below them; the loader recovers the segment
        instead). The compiled search is :func:`segments._native.batches.indexed_position`. O(log n)."""
        index = self.offset_index
        position = indexed_position(
            index._mm, index._entries, index._path, self.base_offset, index._WARM_ENTRIES, offset
        )
        # An entry names the start of a batch, so never the end of the log or past it (0 is every scan's start).
        if position > 0 and position >= self.size:
            raise CorruptIndexError(
                f"entry for offset {offset} points at position {position}, at or past the end of the "
                f"{self.size}-byte log",
                path=self.offset_index_path,
            )
        return position

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)`` from this segment's
        ``.txnindex``. O(entries)."""
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """Offset of the first index entry at or after ``start_position + fetch_size``. O(log n)."""
        found = self.offset_index.fetch_upper_bound_offset(start_position, fetch_size)
        return None if found is None else found.offset

    # -- recovery and truncation ------------------------------------------------------------------------------

    def rebuild_indexes(
        self,
        *,
        transactions: TransactionTracker | None = None,
        observer: BatchObserver | None = None,
        next_segment_base: int | None = None,
        leader_epoch: int | None = None,
    ) -> RecoveryResult:
        """Rebuild all three indexes from the ``.log`` with Kafka's recovery rule, without touching the ``.log``.
        O(size): a compiled header walk with CRC (:class:`segments._native.batches.RecoveryScan`, which reads the
        ``.log`` from its descriptor itself, GIL released over the reads and the CRCs); only control batches are
        decoded. The rebuilt ``.index`` and ``.timeindex`` are written as :meth:`recover` leaves them (Kafka's: both
        trimmed to their entries, the time index ending with the final entry, the max timestamp, that recovery and
        close append) by plain file I/O, no index mapped: bytes equal to the file's are not written again, so an
        index a crash left correct is left untouched (the common case), and a wrong one is rewritten in place to
        exactly the rebuilt bytes (:meth:`~segments._native.batches.RecoveryScan.write_indexes`: both files in one
        compiled call, never through a link). Index objects opened before are closed first and reopen from the
        rebuilt files on next use.

        ``transactions`` carries transactions opened in earlier segments (a fresh tracker when ``None``);
        ``observer`` sees, in order, every valid magic-2 batch that can change producer state or the leader-epoch
        cache (a batch with a producer id, the first batch of each leader-epoch run) and the latest other batch
        before each of those (whose producer-state effect, the map end offset, is what the other batches would
        leave); the other batches after the last one shown are not shown (a segment of such batches alone shows
        none, the common case of a load): their effect is the result's ``quiet_next_offset``, the map end offset
        they leave (None when there are none). ``leader_epoch`` is the epoch the caller's leader-epoch cache ends
        with (None: no entry), so a first run of batches in it is not shown as a new run (assigning it changes
        nothing). The scan ends at a partial tail or at the first invalid batch, returned as ``error``: a bad CRC
        or framing (:class:`CorruptRecordError`), or offsets that do not continue the segment
        (:class:`InvalidOffsetError`): not above the previous batch's, below the base offset, at or past
        ``next_segment_base``, or beyond the 32-bit relative range (:class:`IndexOffsetOverflowError`;
        :class:`LogSegmentOffsetOverflowError` for a legacy batch that otherwise continues the segment: a real
        overflow, which :meth:`recover` raises for a split). The batch CRC does not cover the base offset, so a damaged one is only visible this way; Kafka's
        recovery would instead fail on the next index append and empty the whole segment.
        """
        if not self._writable:
            raise io.UnsupportedOperation(f"{self._directory}: segment {self.base_offset} opened read-only")
        tracker = TransactionTracker() if transactions is None else transactions
        # The segment's files by name (a string, no Path) when they have no object yet (formatting the directory
        # costs one interpreted call of its __str__, os.fspath two).
        stem = f"{self._directory}/{filename_prefix_from_offset(self.base_offset)}"
        self._reset_txn_index(stem)
        max_index_size = self._max_index_size
        log = self._log
        fd: int | None = None
        if log is not None:
            # Through the object's read (which a subclass may map elsewhere).
            source: int | Callable[[int, int], bytes] = log.read
            size, log_path = log.size_in_bytes, log._path_name
        else:
            # No .log object yet (a listed segment, the common case of a load): the scan reads the file itself
            # through a descriptor of its own, closed below; the object (a Path, a later open) is made only for a
            # truncation.
            log_path = stem + LOG_SUFFIX + self._suffix
            fd, size = open_for_reading(log_path)
            source = fd
            try:
                size = self._learn_size(size)
            except BaseException:
                os.close(fd)
                raise
        scan = self._scan(source, size, log_path, next_segment_base, max_index_size, max_index_size, leader_epoch)
        error: StorageFormatError | None = None
        try:
            try:
                for found in scan:
                    batch = found.batch
                    try:
                        completed = tracker.on_batch(batch)
                    except CorruptRecordError as err:
                        raise CorruptRecordError(err.message, path=self.log.path, position=found.position) from None
                    if completed is not None and completed.is_aborted:
                        self.txn_index.append(
                            AbortedTxn(
                                completed.producer_id,
                                completed.first_offset,
                                completed.last_offset,
                                completed.last_stable_offset,
                            )
                        )
                    if observer is not None:
                        observer(batch)
            finally:
                if fd is not None:
                    os.close(fd)
                # Index objects opened before are closed (trimmed) first: they reopen from the rebuilt files. A file is
                # written in place, as Kafka's mapped index is: an index is rebuilt from the .log by any recovery a
                # crash starts, and made durable by the load's file-system sync.
                offset_lazy, time_lazy = self._offset_index, self._time_index
                if offset_lazy is not None:
                    offset_lazy.unload()
                if time_lazy is not None:
                    time_lazy.unload()
                scan.write_indexes(
                    stem + INDEX_SUFFIX + self._suffix if offset_lazy is None else offset_lazy.path,
                    stem + TIME_INDEX_SUFFIX + self._suffix if time_lazy is None else time_lazy.path,
                )
            rejected = scan.rejected_entry
            if rejected is not None:
                # An entry the scan refused (a full index, a position beyond 32 bits) is replayed on the indexes at
                # their full size, so the index raises its own error.
                offset, position, timestamp, timestamp_offset = rejected
                offset_index, time_index = self.offset_index, self.time_index
                offset_index.load_entries(scan.offset_entries, offset_index.max_index_size)
                time_index.load_entries(scan.time_entries, time_index.max_index_size)
                offset_index.append(offset, position)
                time_index.maybe_append(timestamp, timestamp_offset)
        except (CorruptRecordError, InvalidOffsetError) as err:
            error = err if err.path is not None else err.at(self.log.path, position_base=scan.valid_bytes)
        self._max_timestamp, self._offset_of_max_timestamp = scan.max_timestamp, scan.offset_of_max_timestamp
        self._bytes_since_last_index_entry = scan.valid_bytes - scan.last_index_entry
        # After an error (in the scan or in the handling of a batch it yielded) or a refused index entry the
        # scan's position may be past the batch it stopped at: no next offset then (the caller reads it).
        next_offset = scan.next_offset if error is None and scan.rejected_entry is None else None
        return RecoveryResult(
            scan.valid_bytes, size - scan.valid_bytes, scan.batches, error, next_offset, scan.quiet_next_offset
        )

    def _learn_size(self, size: int) -> int:
        """The ``.log`` length while no ``.log`` object exists: the one learned before (the listing's) if any, else
        ``size`` (an ``fstat``'s: a recovery's, or a clean load's end check), kept as the learned length (see the
        class doc), so the object a truncation makes starts from it. O(1)."""
        with _MAKING:
            if self._log is None and self._listed_size is None:
                self._listed_size = size
            elif self._listed_size is not None:
                size = self._listed_size
        return size

    def _reset_txn_index(self, stem: str) -> None:
        """Empty the ``.txnindex`` before a rebuild: through its object when one was made, else by name
        (``stem`` + suffixes), and only when the file exists (most segments have none: nothing at all when the
        listing said so, else one failed open; no object). O(1)."""
        if self._txn_index is not None:
            self._txn_index.reset()
            return
        if self._txn_index_unlisted:
            return
        path = stem + TXN_INDEX_SUFFIX + self._suffix
        try:
            fd = open_no_follow(path, os.O_WRONLY | os.O_TRUNC)
        except FileNotFoundError:
            return
        os.close(fd)

    def recovery_scan(
        self,
        next_segment_base: int | None,
        offset_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        time_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> RecoveryScan:
        """The walk of :meth:`rebuild_indexes` over the ``.log``, reading only (the index entries stay in the scan):
        iterating it raises what ends recovery, :class:`LogSegmentOffsetOverflowError` at a real overflow. The index
        sizes bound the entries it accepts. O(1); O(size) to iterate."""
        log = self.log
        return self._scan(
            log.read, log.size_in_bytes, log._path_name, next_segment_base, offset_index_size, time_index_size
        )

    def _scan(
        self,
        source: int | Callable[[int, int], bytes],
        size: int,
        path: str,
        next_segment_base: int | None,
        offset_index_size: int,
        time_index_size: int,
        leader_epoch: int | None = None,
    ) -> RecoveryScan:
        """:meth:`recovery_scan` over the first ``size`` bytes of the ``.log`` that ``source`` reads (an open
        descriptor, read by the scan itself, or a ``read(position, size)`` callable), errors naming ``path``
        (``leader_epoch``: see :meth:`rebuild_indexes`). O(1)."""
        return RecoveryScan(
            source,
            size,
            self.base_offset,
            next_segment_base,
            self.index_interval_bytes,
            offset_index_size // OffsetIndex.entry_size,
            time_index_size // TimeIndex.entry_size,
            self.check_continues,
            path,
            leader_epoch,
        )

    def check_continues(
        self, first_offset: int, last_offset: int, next_offset: int, next_segment_base: int | None, position: int
    ) -> None:
        """Raise unless a batch's offsets continue this segment (see :meth:`rebuild_indexes`): from ``next_offset``,
        below ``next_segment_base``, within the 32-bit relative range (checked last: an overflow is a batch that
        continues the segment in every other way). O(1)."""
        if first_offset < next_offset or (next_segment_base is not None and last_offset >= next_segment_base):
            limit = "" if next_segment_base is None else f" and below the next segment's base {next_segment_base}"
            raise InvalidOffsetError(
                f"batch offsets {first_offset}-{last_offset} do not continue the segment (from {next_offset}{limit})",
                path=self.log.path,
                position=position,
            )
        if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            raise IndexOffsetOverflowError(
                f"offset {last_offset} does not fit a segment based at {self.base_offset}",
                path=self.log.path,
                position=position,
            )

    def recover(
        self,
        *,
        transactions: TransactionTracker | None = None,
        observer: BatchObserver | None = None,
        next_segment_base: int | None = None,
        leader_epoch: int | None = None,
    ) -> RecoveryResult:
        """Kafka's ``LogSegment.recover`` (§6.3): rebuild the indexes (trimmed, with the final time-index entry, see
        :meth:`rebuild_indexes` for what is valid) and truncate the ``.log`` to the valid prefix.
        Raises :class:`LogSegmentOffsetOverflowError` (nothing truncated, indexes to rebuild) at a legacy batch
        that overflows the segment, as Kafka's ``ensureOffsetInRange`` does. O(size)."""
        result = self.rebuild_indexes(
            transactions=transactions, observer=observer, next_segment_base=next_segment_base, leader_epoch=leader_epoch
        )
        if isinstance(result.error, LogSegmentOffsetOverflowError):
            raise result.error
        if result.truncated_bytes > 0:
            self.log.truncate_to(result.valid_bytes)
        return result

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is ``>= offset`` (whole batches) and index entries from
        ``offset`` on; return the bytes removed. O(log n + bytes scanned)."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.size == 0:
            self.created_ms = int(self._clock() * 1000)
            self.rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        # Kafka re-reads the max only if one was known; it comes from the last time-index entry left plus a scan
        # of the batches after it (the time index may have lost every entry to the truncation).
        if self.max_timestamp_so_far >= 0:
            self._max_timestamp, self._offset_of_max_timestamp = self.read_largest_timestamp()
        return removed

    def read_largest_timestamp(self) -> TimestampOffset:
        """The largest batch max timestamp and its batch's last offset, from the last time-index entry plus the
        batches after it: exact even for a segment whose last entry is missing or lags (an active segment, or one
        left by a crash). O(log n + bytes after the last entry)."""
        last = self.time_index.last_entry
        best = last
        for found in self.log.batches(self._indexed_position(last.offset)):
            if found.batch.max_timestamp > best.timestamp:
                best = TimestampOffset(found.batch.max_timestamp, found.batch.last_offset)
        return best

    # -- lifecycle --------------------------------------------------------------------------------------------

    def on_become_inactive_segment(self) -> None:
        """On roll (Kafka's ``onBecomeInactiveSegment``): final time-index entry, trim both indexes and the
        ``.log`` (its ``preallocate`` tail and the disk its appends reserved ahead). O(1)."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.shallow_offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def flush(self) -> None:
        """fsync the ``.log``, both index maps and the ``.txnindex`` (those opened: an unopened file has nothing to
        make durable). O(dirty pages)."""
        if self._log is not None:
            self._log.flush()
        for lazy in (self._offset_index, self._time_index):
            if lazy is not None and lazy.is_loaded:
                lazy.get().flush()
        if self._txn_index is not None:
            self._txn_index.flush()

    def close(self) -> None:
        """Append the final time-index entry (if anything was appended) and close every file, trimming the
        indexes; files never opened stay unopened (and closed: a later use finds them closed). O(1)."""
        if self._closed or (self._log is not None and self._log.closed):
            return
        self._closed = True
        time_index = self._time_index
        if (
            time_index is not None
            and time_index.is_loaded
            and self.time_index.writable
            and self._max_timestamp is not None
            and (self._max_timestamp, self._offset_of_max_timestamp) != _UNKNOWN
        ):
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        for lazy in (self._offset_index, time_index):
            if lazy is not None:
                lazy.close()
        if self._txn_index is not None:
            self._txn_index.close()
        if self._log is not None:
            self._log.close()

    def rename_with_suffix(self, suffix: str) -> None:
        """Rename all four files to this segment's names with ``suffix`` (``""``, ``.deleted``, ``.swap`` ...);
        Kafka's ``changeFileSuffixes``. Opened files stay open; unopened ones are renamed by name (the ``.log``
        through its object, made first so a listed segment's length is learned under its old name). O(1)."""
        directory = self._directory
        base = self.base_offset
        self.log.rename_to(log_file(directory, base, suffix))
        self._lazy_offset_index().rename_to(offset_index_file(directory, base, suffix))
        self._lazy_time_index().rename_to(time_index_file(directory, base, suffix))
        self.txn_index.rename_to(transaction_index_file(directory, base, suffix))
        self._suffix = suffix

    def rename_to_deleted(self) -> None:
        """Rename the segment's files with the ``.deleted`` suffix for asynchronous deletion. O(1)."""
        self.rename_with_suffix(DELETED_SUFFIX)

    def delete(self) -> None:
        """Close and remove all four files (missing ones are ignored). O(1)."""
        self.close()
        for path in (self.log_path, self.offset_index_path, self.time_index_path, self.txn_index.path):
            path.unlink(missing_ok=True)

    def _check(self) -> None:
        """Assert the segment's invariants (for stress tests)."""
        self.offset_index._check()
        self.time_index._check()
        assert self.offset_index.last_offset >= self.base_offset
        for entry in self.offset_index:
            assert entry.position < max(self.size, 1)

    def __repr__(self) -> str:
        # No I/O: a listed segment's unlearned length shows as None.
        size = self.size if self.size_known else None
        return f"LogSegment(base_offset={self.base_offset}, size={size}, path={self.log_path})"


__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "FetchSlice",
    "LogOffsetPosition",
    "LogSegment",
    "OffsetPosition",
    "RecoveryResult",
    "TimestampAndOffset",
]
