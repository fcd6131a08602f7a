"""Per-partition key index, built off the append path as RocketMQ's ``ReputMessageService`` builds its IndexFile.

:class:`KeyIndexDispatcher` is one thread per manager: appends only wake it (:meth:`LogKeyIndex.notify`, O(1)),
and it reads what was appended since its progress and writes the entries into the segment's ``.keyindex`` file
(:mod:`segments.key_index`). At registration a log's progress is recovered from the files' headers, checked against
the log, so a crash or an index enabled on an existing log is caught up from the log itself. Segment deletion
removes a segment's file and truncation trims the index of the new active segment (hooks called by
:class:`~logmgr.log.Log` under its lock).

:func:`query_by_key` needs no dispatcher: it uses each segment's file up to the file's progress and scans the rest
of the segment, and it compares the keys of the records it reads, so hash collisions and stale entries are never
returned, and neither are records of deleted or truncated segments (they cannot be read any more).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from logmgr.errors import KafkaStorageError, OffsetOutOfRangeError
from segments.errors import StorageFormatError
from segments.file_records import iter_batches
from segments.key_index import KEY_INDEX_SUFFIX, KeyIndexReader, KeyIndexWriter, key_index_file
from segments.records import Record, RecordBatch

if TYPE_CHECKING:
    from logmgr.log import Log

__all__ = [
    "BatchReader", "KeyIndexDispatcher", "LogKeyIndex", "log_batches", "query_by_key", "query_segments",
    "write_segment_key_index",
]

logger = logging.getLogger(__name__)

_READ_BYTES = 1 << 20


BatchReader = Callable[[int, int, int], Iterator[tuple[RecordBatch, Iterator[Record]]]]
"""``(start, stop, max_bytes)`` -> the batches holding offsets in ``[start, stop)``, in order, each with its
records: a lazy iterator that checks the CRC (or the reader's checked it before) and decodes within the reader's
limits, so the reader decides what a corrupt batch does (raise naming the file, or skip); ``max_bytes`` is a hint
of how much the caller wants (a lookup wants one batch)."""


def log_batches(log: Log) -> BatchReader:
    """A :data:`BatchReader` over ``log`` through :meth:`Log.read` (never past the log end or below its start);
    every batch is CRC-checked before it is handed out, so no corrupt record is served (the error names the
    segment file and the batch's position)."""
    from logmgr.log import Isolation

    def read(start: int, stop: int, max_bytes: int) -> Iterator[tuple[RecordBatch, Iterator[Record]]]:
        offset = max(start, log.log_start_offset)
        while offset < stop:
            fetch = log.read(offset, max_bytes, isolation=Isolation.LOG_END, max_offset=stop)
            if not fetch.records:
                return
            for found in fetch.checked_batches():
                yield found.batch, found.iter_records(fetch.limits, check_crc=False)
                offset = max(offset, found.batch.next_offset)

    return read


def _records(read: BatchReader, start: int, stop: int) -> Iterator[Record]:
    """Data records with offsets in ``[start, stop)``. O(bytes read)."""
    if start >= stop:
        return
    for batch, records in read(start, stop, _READ_BYTES):
        if not batch.is_control:
            for record in records:
                if start <= record.offset < stop:
                    yield record


def _records_at(read: BatchReader, offsets: list[int], stop: int) -> Iterator[Record]:
    """The records at ``offsets`` (ascending), one batch read per batch holding some. O(batches touched)."""
    i = 0
    while i < len(offsets):
        found = next(iter(read(offsets[i], stop, 1)), None)
        if found is None:
            return
        batch, records = found
        wanted = set()
        while i < len(offsets) and offsets[i] <= batch.last_offset:
            wanted.add(offsets[i])
            i += 1
        if not batch.is_control:
            # Streamed: a batch of millions of records is never held decoded for the few wanted.
            yield from (r for r in records if r.offset in wanted)


def _wanted(record: Record, key: bytes, begin_timestamp: int | None, end_timestamp: int | None) -> bool:
    return (
        record.key == key
        and (begin_timestamp is None or record.timestamp >= begin_timestamp)
        and (end_timestamp is None or record.timestamp <= end_timestamp)
    )


def _indexed_offsets(
    path: Path, base: int, stop: int, key: bytes, begin_timestamp: int | None, end_timestamp: int | None
) -> tuple[list[int], int, int]:
    """Candidate offsets of ``key`` from the segment's file and the range ``[start, next)`` it covers (empty when
    the file is missing, unreadable, of another segment or ahead of the log)."""
    try:
        with KeyIndexReader(path) as reader:
            header = reader.header
            if header.base_offset != base or header.next_offset > stop:
                return [], base, base
            entries = reader.lookup(key, begin_timestamp=begin_timestamp, end_timestamp=end_timestamp)
            offsets = sorted(e.offset for e in entries if e.offset < header.next_offset)
            return offsets, header.start_offset, header.next_offset
    except (OSError, StorageFormatError):
        return [], base, base


def query_segments(
    directory: Path,
    bounds: Sequence[tuple[int, int]],
    read: BatchReader,
    key: bytes,
    *,
    log_start: int,
    begin_timestamp: int | None = None,
    end_timestamp: int | None = None,
    max_records: int = 64,
) -> list[Record]:
    """The first ``max_records`` records with ``key`` (timestamps within the bounds) of the segments whose
    ``(base offset, end offset)`` are ``bounds`` (ascending) in ``directory``, at or above ``log_start``, in
    offset order. Each segment's file is used where it covers it and the rest of the segment is scanned; keys are
    compared, so collisions and stale entries never come back. O(segments + chains + records read)."""
    found: list[Record] = []
    for base, stop in bounds:
        if max_records <= len(found):
            break
        if stop <= log_start:
            continue
        offsets, indexed_from, indexed_to = _indexed_offsets(
            key_index_file(directory, base), base, stop, key, begin_timestamp, end_timestamp
        )
        first = max(base, log_start)
        # The file covers [indexed_from, indexed_to); below indexed_from are only records that were under the log
        # start when it was made (served again if the start went back after a crash).
        records = itertools.chain(
            _records(read, first, indexed_from),
            _records_at(read, [o for o in offsets if o >= first], indexed_to),
            _records(read, max(first, indexed_to), stop),
        )
        wanted = (r for r in records if _wanted(r, key, begin_timestamp, end_timestamp))
        try:
            # Lazy up to the limit: the rest of the segment is not read once enough records are found.
            found.extend(itertools.islice(wanted, max_records - len(found)))
        except OffsetOutOfRangeError:
            # Retention or truncation removed the segment while we read it: its records are not served.
            continue
    return found


def query_by_key(
    log: Log,
    key: bytes,
    *,
    begin_timestamp: int | None = None,
    end_timestamp: int | None = None,
    max_records: int = 64,
) -> list[Record]:
    """:func:`query_segments` over ``log``'s current segments. Raises :class:`KafkaStorageError` once the log
    is closed or offline. O(segments + chains + records read)."""
    bases = log.segments.base_offsets()
    bounds = list(zip(bases, [*bases[1:], log.log_end_offset], strict=True))
    return query_segments(
        log.dir, bounds, log_batches(log), key, log_start=log.log_start_offset, begin_timestamp=begin_timestamp,
        end_timestamp=end_timestamp, max_records=max_records,
    )


class LogKeyIndex:
    """The key index state of one log: the dispatch progress and the writer of the segment being indexed.
    Hooks from :class:`~logmgr.log.Log` take :attr:`_lock` under the log's lock; the dispatcher never takes the
    log's lock while holding it."""

    def __init__(self, log: Log, wake: Callable[[], None]) -> None:
        self.log = log
        self._wake = wake
        self._lock = threading.Lock()
        self._writer: KeyIndexWriter | None = None
        # Bumped by every hook: an indexing step that read before a hook ran discards what it read.
        self._generation = 0
        self._progress = self._recover()

    @property
    def progress(self) -> int:
        """Every record below this offset is in the index files. O(1)."""
        return self._progress

    def _recover(self) -> int:
        """The first offset whose segment's file is missing, torn or ahead of the log; files of later segments
        and of segments no longer in the log are removed (they are rebuilt in order). O(segments + files)."""
        log = self.log
        segments = list(log.segments.values())
        log_end = log.log_end_offset
        # Files of segments no longer in the log (merged away by the cleaner, deleted before a crash) go.
        current = {key_index_file(log.dir, s.base_offset).name for s in segments}
        for stale in log.dir.glob("*" + KEY_INDEX_SUFFIX):
            if stale.name not in current:
                stale.unlink(missing_ok=True)
        progress: int | None = None
        for i, segment in enumerate(segments):
            path = key_index_file(log.dir, segment.base_offset)
            if progress is not None:
                path.unlink(missing_ok=True)
                continue
            stop = segments[i + 1].base_offset if i + 1 < len(segments) else log_end
            try:
                with KeyIndexReader(path) as reader:
                    header = reader.header
                usable = header.base_offset == segment.base_offset and header.next_offset <= stop
            except (OSError, StorageFormatError):
                usable = False
            if not usable:
                path.unlink(missing_ok=True)
                progress = segment.base_offset
            elif i + 1 == len(segments) or header.next_offset < stop:
                # The next segment may start past the last batch (compaction gaps): reading resumes there.
                progress = header.next_offset
        return max(log.log_start_offset, log_end if progress is None else progress)

    def notify(self) -> None:
        """Called after every append: wakes the dispatcher, never waits for it. O(1)."""
        self._wake()

    def _close_writer(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(OSError):
                self._writer.close()
            self._writer = None

    def segment_removed(self, base_offset: int) -> None:
        """Hook: the segment at ``base_offset`` left the log; its file goes with it. O(1)."""
        with self._lock:
            self._generation += 1
            if self._writer is not None and self._writer.header.base_offset == base_offset:
                self._close_writer()
            key_index_file(self.log.dir, base_offset).unlink(missing_ok=True)

    def truncated(self, log_end_offset: int) -> None:
        """Hook: the log now ends at ``log_end_offset``; the active segment's file is rebuilt when it indexed
        records past it. O(1)."""
        with self._lock:
            self._generation += 1
            if self._progress <= log_end_offset:
                return
            self._close_writer()
            active = self.log.segments.active_segment.base_offset
            key_index_file(self.log.dir, active).unlink(missing_ok=True)
            self._progress = min(active, log_end_offset)

    def _writer_for(self, base_offset: int, start: int) -> KeyIndexWriter:
        writer = self._writer
        if writer is not None and writer.header.base_offset == base_offset:
            return writer
        self._close_writer()
        path = key_index_file(self.log.dir, base_offset)
        try:
            writer = KeyIndexWriter(path, base_offset, start_offset=start)
            if writer.next_offset > start:
                writer.close()
                raise ValueError("ahead of the dispatch progress")
        except (ValueError, StorageFormatError):
            path.unlink()
            writer = KeyIndexWriter(path, base_offset, start_offset=start)
        self._writer = writer
        return writer

    def index_some(self, max_bytes: int = _READ_BYTES) -> bool:
        """Index up to ``max_bytes`` of records past the progress. True when more remains. O(bytes read)."""
        from logmgr.log import Isolation

        with self._lock:
            start, generation = self._progress, self._generation
        log = self.log
        if start >= log.log_end_offset:
            return False
        try:
            fetch = log.read(start, max_bytes, isolation=Isolation.LOG_END)
        except OffsetOutOfRangeError:
            with self._lock:
                if generation == self._generation:
                    self._progress = max(self._progress, log.log_start_offset)
            return True
        except KafkaStorageError:
            return False
        if not fetch.records:
            return False
        with self._lock:
            if generation != self._generation or start != self._progress:
                return True
            writer = self._writer_for(fetch.segment_base_offset, start)
            for found in iter_batches(fetch.records):
                batch = found.batch
                if not batch.is_control:
                    for record in batch.iter_records(check_crc=False):
                        if record.key is not None and record.offset >= writer.next_offset:
                            writer.add(record.key, record.offset, record.timestamp)
                writer.advance(batch.next_offset)
            writer.commit()
            self._progress = writer.next_offset
            return self._progress < log.log_end_offset

    def catch_up(self) -> None:
        """Index everything appended so far (offline builds, tests). O(bytes not yet indexed)."""
        while self.index_some():
            pass

    def close(self) -> None:
        """Commit and release the open writer. O(1)."""
        with self._lock:
            self._close_writer()


class KeyIndexDispatcher:
    """The thread that builds the key indexes of every registered log, off the append path. The thread starts with
    the first log registered to a started dispatcher (at :meth:`start` when one already is) and runs until
    :meth:`stop`: with the key index off everywhere (the default) none runs and nothing wakes every poll
    interval."""

    def __init__(self, *, poll_seconds: float = 1.0, batch_seconds: float = 0.001) -> None:
        self._poll_seconds = poll_seconds
        self._batch_seconds = batch_seconds
        self._indexes: dict[int, LogKeyIndex] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Guards _thread and _started (start, stop and the first registration may race).
        self._lifecycle = threading.Lock()
        self._started = False

    def register(self, log: Log) -> LogKeyIndex | None:
        """Attach a key index to ``log`` when its config enables one (recovering its progress); the first one of a
        started dispatcher starts its thread. O(segments)."""
        if not log.config.logmgr_key_index_enable:
            return None
        index = LogKeyIndex(log, self._wake.set)
        with self._lock:
            self._indexes[id(log)] = index
        log.key_index = index
        self._wake.set()
        with self._lifecycle:
            if self._started:
                self._start_thread()
        return index

    def unregister(self, log: Log) -> None:
        """Detach ``log`` (deleted or closed). O(1)."""
        with self._lock:
            index = self._indexes.pop(id(log), None)
        if index is not None:
            log.key_index = None
            index.close()

    def run_once(self) -> bool:
        """One indexing step for every registered log; True when some log has more to index. O(logs + bytes)."""
        with self._lock:
            indexes = list(self._indexes.values())
        more = False
        for index in indexes:
            try:
                more = index.index_some() or more
            except (OSError, StorageFormatError) as err:
                # The log itself is checked by its readers; a broken index only costs scans until reindexed.
                logger.warning("key index of %s: %s", index.log.topic_partition, err)
        return more

    def drain(self) -> None:
        """Index until every registered log is caught up (tests, shutdown). O(bytes not yet indexed)."""
        while self.run_once():
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._poll_seconds)
            # As RocketMQ's ReputMessageService sleeps 1 ms a round: appends meanwhile are indexed together, so a
            # busy log costs one read and one header write per round, not per append.
            self._stop.wait(self._batch_seconds)
            self._wake.clear()
            while not self._stop.is_set() and self.run_once():
                pass

    def start(self) -> None:
        """Start indexing: the thread starts now if a log is registered, else with the first registration.
        O(1)."""
        with self._lifecycle:
            self._started = True
            self._stop.clear()
            with self._lock:
                registered = bool(self._indexes)
            if registered:
                self._start_thread()

    def _start_thread(self) -> None:
        """Under ``_lifecycle``: start the thread unless it runs. O(1)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="key-index-dispatcher", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (if it runs) and commit every open writer. O(logs)."""
        with self._lifecycle:
            self._started = False
            self._stop.set()
            self._wake.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        with self._lock:
            indexes = list(self._indexes.values())
        for index in indexes:
            index.close()


def write_segment_key_index(directory: Path, base_offset: int, batches: Iterable[RecordBatch]) -> int:
    """Write the key index of the segment at ``base_offset`` from its ``batches`` (offline: ``reindex
    --key-index``): built beside it under a temporary name, fsynced, renamed over the old file. Returns the entry
    count. O(bytes of the segment)."""
    path = key_index_file(directory, base_offset)
    partial = path.with_name(path.name + ".tmp")
    partial.unlink(missing_ok=True)
    writer = KeyIndexWriter(partial, base_offset)
    try:
        for batch in batches:
            if not batch.is_control:
                for record in batch.iter_records(check_crc=False):
                    if record.key is not None and record.offset >= writer.next_offset:
                        writer.add(record.key, record.offset, record.timestamp)
            writer.advance(batch.next_offset)
    finally:
        writer.close()
    with KeyIndexReader(partial) as reader:
        reader.fsync()
        entries = reader.header.entry_count
    os.replace(partial, path)
    return entries
