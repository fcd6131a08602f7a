"""Kafka's ``Cleaner``: one compaction pass over one log (``kafka.log.Cleaner``, ``CleanedTransactionMetadata``).

A pass, given the first dirty offset (the cleaner checkpoint) and the first uncleanable offset:

1. **Offset map** of the dirty section ``[first_dirty, first_uncleanable)``: key -> latest offset, skipping aborted
   transactional data and control batches, in a fixed-memory :class:`~logmgr.cleaner.offset_map.SkimpyOffsetMap`
   filled up to ``slots x log.cleaner.io.buffer.load.factor``; when it fills, the pass covers the log only up to
   the last offset it holds (``end_offset``), the next pass goes on from there.
2. **Groups**: every segment below ``end_offset`` (clean and dirty alike: tombstones and markers of the clean
   section expire too), grouped while the sum of their ``.log`` sizes fits ``segment.bytes``, their index sizes
   fit ``segment.index.bytes`` and their offsets fit 32-bit relative offsets.
3. **Filter** each group into one ``.cleaned`` segment based at the group's first base offset, Kafka's rules:
   a record is kept if it is past the map (``offset > latest_offset``) or is the latest for its key and has a
   value or its batch's delete horizon (KIP-534) has not passed; records without key are dropped; aborted
   transactional batches go; COMMIT markers go once no batch of their transaction was seen in the pass, ABORT
   markers once their data is gone, both only after the batch's delete horizon; the last batch of each active
   producer is kept (empty if need be) so producer state survives a reload, and so is the batch that ends the
   cleaning round. A batch whose records all stay and that needs no horizon is copied byte for byte; otherwise
   it is rebuilt with the same base offset, last offset delta, producer id/epoch, base sequence, leader epoch,
   timestamp type and codec (records keep their offsets and timestamps); tombstones (and markers of emptied
   transactions) get a delete horizon of ``now + delete.retention.ms`` the first time a pass sees them.
4. **Swap**: the cleaned segment is flushed, given the last source segment's mtime, renamed ``.cleaned`` ->
   ``.swap``, the sources renamed ``.deleted``, the swap renamed to its final name, the dir fsynced: a crash at
   any step is completed or undone by the loader's swap rules (:mod:`logmgr.log_loader`, step 1).

Where the segments come from and how the swap is published is the :class:`CleanSource`'s business: a live
:class:`~logmgr.log.Log` (:class:`~logmgr.cleaner.log_cleaner.LiveLogSource`) or a partition dir offline
(:mod:`logmgr.cleaner.offline`). Where the cleaned bytes go is the :class:`CleanedOutput`'s: segment files swapped
in (:class:`SegmentFiles`, every real pass) or only counted (:class:`CountingOutput`, the offline plan: the same
decisions, nothing written anywhere).
"""

from __future__ import annotations

import heapq
import os
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from logmgr.cleaner.offset_map import SkimpyOffsetMap
from logmgr.config import LogConfig
from logmgr.errors import LogmgrError
from segments._native.crc import crc32c
from segments.log_segment import LogSegment
from segments.naming import (
    CLEANED_SUFFIX,
    TopicPartition,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from segments.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    ControlRecordType,
    DefaultRecordBatch,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
)
from segments.transaction_index import AbortedTxn

_INT32_MAX = (1 << 31) - 1
_LAST_OFFSET_DELTA_OFFSET = 23
_EMPTY_HEADER = struct.Struct(">qiibIhiqqqhii")
_WRITE_CHUNK = 1 << 20


class LogCleaningAbortedError(LogmgrError):
    """The pass was stopped (the log is being deleted or truncated, or changed under the cleaner): nothing of it
    was published; the next pass starts again."""


@dataclass(frozen=True, slots=True)
class LastRecord:
    """Kafka's ``LastRecord``: an active producer's last data offset (None when its last entry is a marker) and
    epoch."""

    last_data_offset: int | None
    producer_epoch: int


class CleanSource(Protocol):
    """What a cleaning pass needs of a log."""

    @property
    def dir(self) -> Path: ...

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def config(self) -> LogConfig: ...

    def segments_between(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Kafka's ``logSegments(from, to)``: the segments holding offsets in ``[from, to)``, oldest first."""

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start, upper)`` from every ``.txnindex``."""

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """Each active producer's :class:`LastRecord`."""

    def hold(self, segment: LogSegment) -> AbstractContextManager[LogSegment]:
        """Keep ``segment`` open while it is read."""

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> None:
        """Swap ``cleaned`` (flushed ``.cleaned`` files) in for ``old``, crash-safe (see the module doc); raise
        :class:`LogCleaningAbortedError` if ``old`` changed since the pass read it."""


class CleanedSink(Protocol):
    """What a pass writes a cleaned group into: its retained batches and the aborted transactions its
    ``.txnindex`` keeps."""

    def append(self, records: bytes, /) -> object: ...

    def append_aborted_txn(self, aborted: AbortedTxn, /) -> None: ...


class CleanedOutput(Protocol):
    """Where the cleaned groups of a pass go."""

    def write_group(self, source: CleanSource, group: list[LogSegment], fill: Callable[[CleanedSink], None]) -> None:
        """Give ``fill`` a sink for the group's cleaned content (it raises to abandon the group), then publish it
        in place of ``group``."""


class SegmentFiles:
    """A real pass's output: the group is written as ``.cleaned`` files next to its segments, then swapped in by
    the source (see the module doc); an abandoned group leaves no ``.cleaned`` file."""

    def write_group(self, source: CleanSource, group: list[LogSegment], fill: Callable[[CleanedSink], None]) -> None:
        config = source.config
        base = group[0].base_offset
        for path in cleaned_segment_paths(source.dir, base):
            path.unlink(missing_ok=True)
        cleaned = LogSegment.open(
            source.dir,
            base,
            file_suffix=CLEANED_SUFFIX,
            create=True,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
        )
        published = False
        try:
            fill(cleaned)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            # The cleaned segment keeps the group's last modification time: time-based retention sees the same age.
            try:
                modified = os.stat(group[-1].log.path).st_mtime_ns
            except FileNotFoundError:
                # Renamed by retention or truncation meanwhile: the swap would refuse the group anyway.
                raise LogCleaningAbortedError(f"{group[-1].log.path} was deleted during cleaning") from None
            os.utime(cleaned.log.path, ns=(modified, modified))
            source.replace_segments(cleaned, group)
            published = True
        finally:
            if not published:
                cleaned.close()
                for path in cleaned_segment_paths(source.dir, base):
                    path.unlink(missing_ok=True)


@dataclass(slots=True)
class CountedGroup:
    """One group as a :class:`CountingOutput` saw it: the base offsets it replaces and the bytes its cleaned
    ``.log`` would hold."""

    bases: tuple[int, ...]
    size: int = 0

    def append(self, records: bytes, /) -> object:
        self.size += len(records)
        return None

    def append_aborted_txn(self, aborted: AbortedTxn, /) -> None:
        """Nothing to count: the plan leaves open whether the group keeps a ``.txnindex`` (``CompactLog.predict``)."""


class CountingOutput:
    """A planning pass's output: each group's content is counted, never written (not even to a temporary dir),
    and nothing is swapped; ``groups`` holds what a real pass with the same inputs writes."""

    def __init__(self) -> None:
        self.groups: list[CountedGroup] = []

    def write_group(self, source: CleanSource, group: list[LogSegment], fill: Callable[[CleanedSink], None]) -> None:
        counted = CountedGroup(tuple(s.base_offset for s in group))
        fill(counted)
        self.groups.append(counted)


SEGMENT_FILES = SegmentFiles()


class Throttler:
    """Kafka's ``Throttler``: sleep so the bytes reported stay under ``rate`` per second (checked every 300 ms of
    work). ``monotonic`` (seconds) and ``sleep`` are injectable: a test's clock moved only by the sleeps turns the
    time slept into the bytes let through. O(1) per call."""

    def __init__(
        self,
        rate: float,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self._sleep = sleep
        self._monotonic = monotonic
        self._period_start = monotonic()
        self._observed = 0.0
        self.throttled_s = 0.0

    @property
    def unthrottled(self) -> bool:
        """Whether the rate is Kafka's default, Double.MaxValue (never sleeps). O(1)."""
        return self.rate >= 1.7e308

    def maybe_throttle(self, observed: int) -> None:
        """Account ``observed`` bytes; sleep if the rate since the period start is above the limit."""
        if self.unthrottled:
            return
        self._observed += observed
        now = self._monotonic()
        elapsed = now - self._period_start
        if elapsed < 0.3 and self._observed < self.rate:
            return
        wanted = self._observed / self.rate
        if wanted > elapsed:
            self._sleep(wanted - elapsed)
            self.throttled_s += wanted - elapsed
        self._period_start = self._monotonic()
        self._observed = 0.0


@dataclass(slots=True)
class CleanerStats:
    """Kafka's ``CleanerStats`` for one pass: what was read to build the map, read and written while cleaning."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    segments_read: int = 0
    segments_written: int = 0
    batches_read: int = 0
    batches_written: int = 0
    buffer_utilization: float = 0.0
    started: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    ended: float = 0.0

    @property
    def records_removed(self) -> int:
        return self.messages_read - self.messages_written

    @property
    def duration_s(self) -> float:
        return max(0.0, (self.ended or time.monotonic()) - self.started)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready counters (bytes, records, seconds). O(1)."""
        return {
            "bytesRead": self.bytes_read,
            "bytesWritten": self.bytes_written,
            "mapBytesRead": self.map_bytes_read,
            "recordsRead": self.messages_read,
            "recordsRemoved": self.records_removed,
            "segmentsRead": self.segments_read,
            "segmentsWritten": self.segments_written,
            "batchesRead": self.batches_read,
            "batchesWritten": self.batches_written,
            "invalidRecords": self.invalid_messages,
            "bufferUtilization": round(self.buffer_utilization, 4),
            "durationSecs": round(self.duration_s, 6),
        }


class CleanedTransactionMetadata:
    """Kafka's ``CleanedTransactionMetadata``: which transactions are aborted, which markers may go, and the
    aborted-transaction entries the cleaned segment's ``.txnindex`` must keep. One per pass (shared by its
    groups)."""

    def __init__(self) -> None:
        self._aborted: list[tuple[int, int, AbortedTxn]] = []
        self._sequence = 0
        self._ongoing_committed: set[int] = set()
        # producer id -> (the aborted transaction, last offset of one of its batches seen in this pass or None)
        self._ongoing_aborted: dict[int, list[Any]] = {}
        self.cleaned_index: CleanedSink | None = None

    def add_aborted_transactions(self, aborted: list[AbortedTxn]) -> None:
        """Queue aborted transactions found in the ``.txnindex`` files (ordered by first offset). O(n log n)."""
        for txn in aborted:
            self._sequence += 1
            heapq.heappush(self._aborted, (txn.first_offset, self._sequence, txn))

    def _consume_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """Whether the marker ``batch`` may be discarded (its transaction has nothing left). O(1)."""
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True
        control = ControlRecordType.parse(records[0].key)
        producer_id = batch.producer_id
        if control is ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1] is not None:
                # Its data is removed by this pass: the marker (and its index entry) stays until the next.
                if self.cleaned_index is not None:
                    self.cleaned_index.append_aborted_txn(ongoing[0])
                return False
            return True
        if control is ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """Whether the data ``batch`` belongs to an aborted transaction (and may be discarded). O(1)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing[1] = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose ``.log`` bytes fit ``max_size``, whose offset
    and time index bytes each fit ``max_index_size`` and whose offsets fit 32-bit relative offsets from the first
    base (the last offset of a segment is bounded by the next base, or ``first_uncleanable_offset``). O(n)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        log_size = first.size
        index_size = first.offset_index.size_in_bytes
        time_size = first.time_index.size_in_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            last_offset = (segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable_offset) - 1
            if (
                log_size + candidate.size > max_size
                or index_size + candidate.offset_index.size_in_bytes > max_index_size
                or time_size + candidate.time_index.size_in_bytes > max_index_size
                or (candidate.size > 0 and last_offset - first.base_offset > _INT32_MAX)
            ):
                break
            group.append(candidate)
            log_size += candidate.size
            index_size += candidate.offset_index.size_in_bytes
            time_size += candidate.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def empty_batch(batch: RecordBatch) -> bytes:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: a 61-byte batch with no record that keeps ``batch``'s
    offsets, producer id/epoch, base sequence, leader epoch, timestamp type and max timestamp. O(1)."""
    attributes = batch.attributes & ~(COMPRESSION_CODEC_MASK | DELETE_HORIZON_FLAG_MASK)
    out = bytearray(
        _EMPTY_HEADER.pack(
            batch.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, batch.partition_leader_epoch, MAGIC_V2, 0,
            attributes, batch.last_offset - batch.base_offset, NO_TIMESTAMP, batch.max_timestamp,
            batch.producer_id, batch.producer_epoch, batch.base_sequence, 0,
        )
    )
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def rebuild_batch(batch: DefaultRecordBatch, retained: list[Record], delete_horizon_ms: int | None) -> bytes:
    """Kafka's ``buildRetainedRecordsInto``: ``retained`` records of ``batch`` as one batch with the same base
    offset and last offset delta (the producer's last sequence stays), header fields and codec. O(size)."""
    log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    raw = bytearray(
        build_batch(
            [record.to_simple() for record in retained],
            base_offset=batch.base_offset,
            compression=batch.compression,
            timestamp_type=batch.timestamp_type,
            log_append_time=batch.max_timestamp if log_append else None,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            is_transactional=batch.is_transactional,
            is_control=batch.is_control,
            partition_leader_epoch=batch.partition_leader_epoch,
            delete_horizon_ms=delete_horizon_ms,
            offset_deltas=[record.offset - batch.base_offset for record in retained],
        )
    )
    struct.pack_into(">i", raw, _LAST_OFFSET_DELTA_OFFSET, batch.last_offset_delta)
    struct.pack_into(">I", raw, CRC_OFFSET, crc32c(memoryview(raw)[ATTRIBUTES_OFFSET:]))
    return bytes(raw)


def cleaned_segment_paths(directory: Path, base_offset: int) -> list[Path]:
    """The four ``.cleaned`` files of a group based at ``base_offset``. O(1)."""
    return [
        make(directory, base_offset, CLEANED_SUFFIX)
        for make in (log_file, offset_index_file, time_index_file, transaction_index_file)
    ]


class Cleaner:
    """One cleaner thread's worker (Kafka's ``Cleaner``): its offset map, throttler and abort check."""

    def __init__(
        self,
        offset_map: SkimpyOffsetMap,
        *,
        load_factor: float = 0.9,
        throttler: Throttler | None = None,
        check_done: Callable[[TopicPartition], None] = lambda tp: None,
        output: CleanedOutput = SEGMENT_FILES,
    ) -> None:
        self.offset_map = offset_map
        self.output = output
        self.load_factor = load_factor
        self.throttler = throttler or Throttler(1.8e308)
        self.check_done = check_done

    # -- the pass ---------------------------------------------------------------------------------------------------

    def clean(self, source: CleanSource, first_dirty: int, first_uncleanable: int, now_ms: int) -> tuple[int, CleanerStats]:
        """Kafka's ``doClean``: map the dirty section, clean every segment below the map's end in groups, swap each
        group in. Returns the new cleaner checkpoint (``end_offset``) and the stats. O(log bytes + keys)."""
        stats = CleanerStats()
        self.build_offset_map(source, first_dirty, first_uncleanable, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done = time.monotonic()
        transactions = CleanedTransactionMetadata()
        config = source.config
        groups = group_segments_by_size(
            source.segments_between(0, end_offset), config.segment_bytes, config.segment_index_bytes, first_uncleanable
        )
        for group in groups:
            self.clean_segments(source, group, stats, transactions, now_ms, first_uncleanable)
        stats.buffer_utilization = self.offset_map.utilization
        stats.ended = time.monotonic()
        return end_offset, stats

    def build_offset_map(self, source: CleanSource, start: int, end: int, stats: CleanerStats) -> None:
        """Kafka's ``buildOffsetMap`` over ``[start, end)``; stops (leaving ``latest_offset`` at the last offset
        covered) once the map holds ``slots x load_factor`` keys. O(dirty bytes)."""
        offset_map = self.offset_map
        offset_map.clear()
        dirty = source.segments_between(start, end)
        transactions = CleanedTransactionMetadata()
        transactions.add_aborted_transactions(source.collect_aborted(start, end))
        max_desired = int(offset_map.slots * self.load_factor)
        for index, segment in enumerate(dirty):
            next_start = dirty[index + 1].base_offset if index + 1 < len(dirty) else end
            with source.hold(segment):
                found = segment.translate_offset(start) if start > segment.base_offset else None
                position = 0 if start <= segment.base_offset else (segment.size if found is None else found.position)
                for item in segment.batches(position):
                    self.check_done(source.topic_partition)
                    batch = item.batch
                    if batch.base_offset >= end:
                        # ``end`` was a segment base when the range was chosen, but a truncation since may have
                        # left it inside a segment: nothing at or above it may enter the map, or a record of an
                        # open transaction would supersede committed ones below it and its abort would lose them.
                        break
                    self.throttler.maybe_throttle(batch.size_in_bytes)
                    stats.map_bytes_read += batch.size_in_bytes
                    if batch.is_control:
                        transactions.on_control_batch_read(batch)
                        stats.map_messages_read += 1
                    elif transactions.on_batch_read(batch):
                        stats.map_messages_read += batch.count_records()
                    else:
                        for record in batch.records():
                            if record.key is not None and start <= record.offset < end:
                                if offset_map.size >= max_desired:
                                    return
                                offset_map.put(record.key, record.offset)
                            stats.map_messages_read += 1
                    if batch.last_offset >= start:
                        offset_map.update_latest_offset(batch.last_offset)
            offset_map.update_latest_offset(next_start - 1)

    def clean_segments(
        self,
        source: CleanSource,
        group: list[LogSegment],
        stats: CleanerStats,
        transactions: CleanedTransactionMetadata,
        now_ms: int,
        upper_bound_of_round: int,
    ) -> None:
        """Kafka's ``cleanSegments``: filter ``group`` into one cleaned segment and publish it through the
        output. O(group bytes)."""

        def fill(cleaned: CleanedSink) -> None:
            transactions.cleaned_index = cleaned
            try:
                last_records = source.last_records_of_active_producers()
                for index, segment in enumerate(group):
                    with source.hold(segment):
                        upper = group[index + 1].base_offset if index + 1 < len(group) else segment.read_next_offset()
                        transactions.add_aborted_transactions(source.collect_aborted(segment.base_offset, upper))
                        self._clean_into(source, segment, cleaned, transactions, last_records, upper_bound_of_round, stats, now_ms)
                    stats.segments_read += 1
            finally:
                transactions.cleaned_index = None

        self.output.write_group(source, group, fill)
        stats.segments_written += 1

    def _clean_into(
        self,
        source: CleanSource,
        segment: LogSegment,
        dest: CleanedSink,
        transactions: CleanedTransactionMetadata,
        last_records: dict[int, LastRecord],
        upper_bound_of_round: int,
        stats: CleanerStats,
        now_ms: int,
    ) -> None:
        """Kafka's ``cleanInto`` with ``MemoryRecords.filterTo``: copy what ``segment`` retains into ``dest``."""
        pending: list[bytes] = []
        pending_size = 0
        delete_retention_ms = source.config.delete_retention_ms
        for item in segment.batches():
            self.check_done(source.topic_partition)
            batch = item.batch
            if not isinstance(batch, DefaultRecordBatch):
                raise LogCleaningAbortedError(f"{segment.log.path}: legacy message sets are not cleaned by logmgr")
            self.throttler.maybe_throttle(batch.size_in_bytes)
            stats.bytes_read += batch.size_in_bytes
            stats.batches_read += 1
            out = self._filter_batch(batch, transactions, last_records, upper_bound_of_round, stats, now_ms, delete_retention_ms)
            if out is None:
                continue
            pending.append(out)
            pending_size += len(out)
            if pending_size >= _WRITE_CHUNK:
                self._write(dest, pending, stats)
                pending, pending_size = [], 0
        if pending:
            self._write(dest, pending, stats)

    def _write(self, dest: CleanedSink, pending: list[bytes], stats: CleanerStats) -> None:
        data = b"".join(pending)
        dest.append(data)
        stats.bytes_written += len(data)
        stats.batches_written += len(pending)
        self.throttler.maybe_throttle(len(data))

    def _filter_batch(
        self,
        batch: DefaultRecordBatch,
        transactions: CleanedTransactionMetadata,
        last_records: dict[int, LastRecord],
        upper_bound_of_round: int,
        stats: CleanerStats,
        now_ms: int,
        delete_retention_ms: int,
    ) -> bytes | None:
        """What ``batch`` becomes in the cleaned segment (None: nothing)."""
        horizon = batch.delete_horizon_ms
        if batch.is_control:
            can_discard = transactions.on_control_batch_read(batch)
            discard_records = can_discard and horizon is not None and horizon <= now_ms
        else:
            can_discard = transactions.on_batch_read(batch)
            discard_records = can_discard
        last = last_records.get(batch.producer_id) if batch.producer_id >= 0 else None
        is_last_of_producer = last is not None and (
            batch.last_offset == last.last_data_offset
            if last.last_data_offset is not None
            else batch.is_control and batch.producer_epoch == last.producer_epoch
        )
        retain_empty = is_last_of_producer or batch.next_offset == upper_bound_of_round
        records = batch.records()
        stats.messages_read += len(records)
        if discard_records and not retain_empty:
            return None
        marker_for_empty_txn = can_discard and batch.is_control
        if discard_records:
            retained: list[Record] = []
        elif batch.is_control:
            retained = records
        else:
            retained = [r for r in records if self._should_retain(batch, r, stats, now_ms)]
        stats.messages_written += len(retained)
        if not retained:
            return empty_batch(batch) if retain_empty else None
        tombstones = any(r.value is None for r in retained)
        set_horizon = (tombstones or marker_for_empty_txn) and horizon is None
        if len(retained) == len(records) and not set_horizon:
            return batch.raw_bytes()
        new_horizon = now_ms + delete_retention_ms if set_horizon else horizon
        return rebuild_batch(batch, retained, new_horizon)

    def _should_retain(self, batch: DefaultRecordBatch, record: Record, stats: CleanerStats, now_ms: int) -> bool:
        """Kafka's ``shouldRetainRecord`` (magic 2 only)."""
        offset_map = self.offset_map
        if record.offset > offset_map.latest_offset:
            return True
        if record.key is None:
            stats.invalid_messages += 1
            return False
        if record.offset < offset_map.get(record.key):
            return False
        if record.value is not None:
            return True
        horizon = batch.delete_horizon_ms
        return horizon is None or now_ms < horizon


def iter_log_batches(segments: list[LogSegment]) -> Iterator[RecordBatch]:
    """Every batch of ``segments`` in order (a header walk). O(bytes)."""
    for segment in segments:
        for item in segment.batches():
            yield item.batch
