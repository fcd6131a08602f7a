"""One partition's log: Kafka's ``UnifiedLog`` + ``LocalLog`` over :class:`~segments.log_segment.LogSegment` files.

Offsets: ``log_start_offset <= high_watermark <= log_end_offset``; ``recovery_point`` is the offset below which
everything is fsynced; the last stable offset (LSO) is the first offset of the earliest open transaction, bounded by
the high watermark.

Locks: one writer per log. ``Log._lock`` (a re-entrant :class:`~segments._native.append.WriterLock`) serialises
every mutation: append, roll, flush bookkeeping, truncation, retention, log-start-offset changes, close. Readers
(:meth:`Log.read`, :meth:`Log.offset_for_timestamp`) take no log lock: they look segments up through
:class:`~logmgr.log_segments.LogSegments` (its own short lock), snapshot the end offsets (plain ints), and hold the
segment they read through :class:`SegmentReaders`, so a segment deleted meanwhile stays open until they release it.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, NamedTuple, ParamSpec, TypeVar

from checkpoints.atomic import fsync_dir
from checkpoints.partition_metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadata,
    write_partition_metadata,
)
from logmgr.clock import Clock, SystemClock
from logmgr.config import CREATE_TIME, LogConfig
from logmgr.errors import (
    DuplicateSequenceError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    LogDirFullError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from logmgr.group_commit import GroupCommitService
from logmgr.leader_epoch_cache import LeaderEpochCache
from logmgr.log_segments import LogSegments
from logmgr.producer_state import AppendOrigin, EndedTxn, ProducerAppendInfo, ProducerStateManager
from logmgr.retention import LogSnapshot, RetentionPlan, RetentionSettings, SegmentInfo, plan_retention
from logmgr.segment_deleter import SegmentDeleter, SegmentReaders
from segments._native.append import (
    SCAN_CORRUPT,
    SCAN_INVALID,
    SCAN_NOT_V2,
    SCAN_OK,
    SCAN_TOO_LARGE,
    AppendScan,
    LogAppendInfo,
    LogAppendState,
    LogDirState,
    WriterLock,
)
from segments._native.fetch import FetchData
from segments.compression import CompressionType
from segments.errors import CorruptRecordError, SegmentClosedError
from segments.file_records import FileBatch, iter_batches, open_no_follow
from segments.java_numbers import INT64_MAX
from segments.key_index import key_index_file
from segments.legacy import LegacyRecordBatch
from segments.log_segment import LogSegment
from segments.naming import (
    TopicPartition,
    delete_dir_name,
    log_file,
    producer_snapshot_file,
)
from segments.records import (
    MAGIC_V2,
    NO_TIMESTAMP,
    ControlRecordType,
    DecodeLimits,
    DefaultRecordBatch,
    EndTransactionMarker,
    Record,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_end_txn_marker,
)
from segments.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from logmgr.key_index import LogKeyIndex

logger = logging.getLogger("logmgr.log")

# The roll jitter's random source, shared by every log: seeding one per log cost ~12 us of each log's load.
_JITTER_RNG = random.Random()

_INT32_MAX = (1 << 31) - 1

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class Isolation(enum.Enum):
    """How far a read may go: the log end (replicas), the high watermark (read_uncommitted consumers) or the
    last stable offset (read_committed consumers)."""

    LOG_END = "log_end"
    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


# The members as module globals for every read's comparisons: an Enum class attribute goes through
# EnumType.__getattr__ (Python 3.11), ten times a global's cost.
_LOG_END = Isolation.LOG_END
_READ_UNCOMMITTED = Isolation.READ_UNCOMMITTED
_READ_COMMITTED = Isolation.READ_COMMITTED


class AppendFacts(NamedTuple):
    """What an append derives from a log's config (see :meth:`Log._append_facts`); a tuple, which the compiled
    append sequence unpacks by position in this order."""

    config: LogConfig
    bounded: bool
    """A CreateTime window can refuse a timestamp."""
    roll_ms: int
    """The time-based roll limit (``segment.ms``, or ``max.compaction.lag.ms`` if lower on a compacted topic)."""
    append_time: int | None
    """Not None when the topic stamps LogAppendTime."""
    compact: bool
    max_message_bytes: int
    segment_bytes: int
    flush_messages: int
    reserve_bytes: int
    """``logmgr.append.reserve.bytes``."""


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """An aborted transaction overlapping a read_committed fetch, as returned to clients."""

    producer_id: int
    first_offset: int


class FetchDataInfo(FetchData):
    """What :meth:`Log.read` returns: whole batches starting with the one holding ``offset`` (``records``), read
    from ``path`` at byte ``position`` of the segment starting at ``segment_base_offset``; read_committed fetches
    carry the ``aborted_transactions`` overlapping them (else None); ``limits`` are the decode limits of the log's
    topic (never below its ``max.message.bytes``, so a record the log accepted is always decoded; default
    :data:`~segments.records.DEFAULT_DECODE_LIMITS`). Constructed as ``FetchDataInfo(offset, records,
    segment_base_offset, position, aborted_transactions=None, path=None, limits=...)``. An immutable value: its
    fields are read-only, compared (with another ``FetchDataInfo``), hashed and shown by value; they live in the
    compiled base :class:`~segments._native.fetch.FetchData`, built without Python-level code on every read."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def aborted_transactions(self) -> tuple[AbortedTransaction, ...] | None: ...

    def batches(self) -> list[DefaultRecordBatch]:
        """The fetched batches (magic 2 views; legacy data is never appended by logmgr), as raw views: their
        CRCs are not checked, as Kafka's broker serves fetches unchecked and leaves the check to the consumer.
        Decode through :meth:`iter_records` or :meth:`checked_batches`, which check them. O(size)."""
        return [found.batch for found in iter_batches(self.records) if isinstance(found.batch, DefaultRecordBatch)]

    def checked_batches(self) -> Iterator[FileBatch]:
        """The fetched batches located in their segment file, each CRC-checked before it is handed out (a consumer
        with ``check.crcs=true``): a failing one raises :class:`CorruptRecordError` naming the file and the
        batch's position in it. O(size), one batch checked at a time."""
        for found in iter_batches(self.records):
            located = FileBatch(self.position + found.position, found.batch, self.path)
            located.ensure_valid()
            yield located

    def iter_records(self, limits: DecodeLimits | None = None) -> Iterator[Record]:
        """Every record of the fetched batches, as a consumer with ``check.crcs=true`` reads them: each batch's
        CRC is checked before it is decoded, and a failing batch raises :class:`CorruptRecordError` naming the
        segment file and the batch's position in it. Records above ``limits`` (default :attr:`limits`) raise
        :class:`RecordTooLargeError`. O(size) time, O(largest record) memory."""
        for found in iter_batches(self.records):
            located = FileBatch(self.position + found.position, found.batch, self.path)
            yield from located.iter_records(limits or self.limits)


@dataclass(slots=True)
class RecoveryStats:
    """What loading did: segments recovered, bytes truncated, actions taken (for reports)."""

    recovered_segments: int = 0
    truncated_bytes: int = 0
    actions: list[str] = field(default_factory=list)
    unsynced_snapshots: int = 0
    """Producer snapshot files the load wrote, kept or deleted without fsync, made durable by one sync at its end
    (see ``load_log``)."""

    @property
    def needs_sync(self) -> bool:
        """Whether the load changed files without fsync: producer snapshots, or a recovered segment's rebuilt
        ``.index``/``.timeindex`` and truncated ``.log`` (written in place, as Kafka's mapped indexes are). One
        file-system sync at the end of the load makes them durable before a clean-shutdown marker can vouch for
        them. O(1)."""
        return self.unsynced_snapshots > 0 or self.recovered_segments > 0


def _synchronous(func: Callable[[], None]) -> None:
    func()


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _io_guarded(action: str) -> Callable[[Callable[Concatenate[Log, _P], _R]], Callable[Concatenate[Log, _P], _R]]:
    """Kafka's ``maybeHandleIOException`` around a whole log operation: any ``OSError`` it lets escape (a leader
    epoch checkpoint, a snapshot, a lazily opened index, a stat) takes the dir offline and becomes a
    :class:`KafkaStorageError` naming the file. Steps that name their action more precisely catch first."""

    def decorate(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
        @functools.wraps(method)
        def guarded(self: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return method(self, *args, **kwargs)
            except OSError as err:
                raise self._io_failure(action, err) from err

        return guarded

    return decorate


class Log(LogAppendState):
    """One partition's log in ``partition_dir`` (opened by :class:`~logmgr.log_loader.LogLoader`).

    The state is kept in C fields (slots) of :class:`~segments._native.append.LogAppendState` (declared below for
    the type checker), so that the compiled append sequence reads it without attribute lookups."""

    config: LogConfig
    _facts: AppendFacts | None
    _lock: WriterLock
    dir_state: LogDirState
    _closed: bool
    _offline_error: OSError | None
    clock: Clock
    segments: LogSegments
    leader_epochs: LeaderEpochCache
    producer_state: ProducerStateManager
    key_index: LogKeyIndex | None
    group_commit: GroupCommitService | None
    _end: tuple[int, int, int]
    _recovery_point: int
    dir: Path
    topic_partition: TopicPartition
    readers: SegmentReaders
    deleter: SegmentDeleter
    _run_async: Callable[[Callable[[], None]], None]
    recovery: RecoveryStats
    _truncation_sequence: int
    _log_start_offset: int
    _high_watermark: int | None
    _high_watermark_provider: Callable[[], int] | None
    last_flush_ms: int
    _rng: random.Random
    _limits: tuple[int, DecodeLimits]
    truncation_observer: Callable[[int, bool], None] | None

    def __init__(
        self,
        partition_dir: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        segments: LogSegments,
        *,
        log_start_offset: int,
        log_end_offset: int,
        recovery_point: int,
        producer_state: ProducerStateManager,
        leader_epochs: LeaderEpochCache,
        clock: Clock | None = None,
        deleter: SegmentDeleter | None = None,
        readers: SegmentReaders | None = None,
        run_async: Callable[[Callable[[], None]], None] = _synchronous,
        recovery: RecoveryStats | None = None,
    ) -> None:
        self.dir = partition_dir
        self.topic_partition = topic_partition
        self.config = config
        # segments, leader_epochs, producer_state and dir_state are typed C fields the append reads without a type
        # test: set through their setters.
        self._set_parts(segments, leader_epochs, producer_state)
        self.clock = clock or SystemClock()
        self.readers = readers or SegmentReaders()
        self.deleter = deleter or SegmentDeleter(self.clock, self.readers)
        self._run_async = run_async
        self.recovery = recovery or RecoveryStats()
        self._lock = WriterLock()
        # Odd while a truncation rewrites the tail under the lock; lock-free reads compare it (see read()).
        self._truncation_sequence = 0
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        # (log end offset, active segment base, byte position of the log end in it), replaced as one tuple under
        # the writer lock after each change, so a reader that snapshots it never serves an append in progress.
        self._end = (0, 0, 0)
        # The loader found the log end (reading the active segment's tail, or from a clean shutdown's checkpoint).
        self._publish_end(log_end_offset)
        self._high_watermark = None
        self._high_watermark_provider = None
        self.last_flush_ms = self.clock.time_ms()
        self._rng = _JITTER_RNG
        # What appends derive from the config (see _append_facts), for the config object it was derived from.
        self._facts = None
        # (max.message.bytes, its decode limits): every read hands them out (see _refresh_limits).
        self._limits = (config.max_message_bytes, DecodeLimits.for_max_message_bytes(config.max_message_bytes))
        self._set_dir_state(LogDirState())
        self._closed = False
        self._offline_error = None
        # Set by the LogManager under logmgr.group.commit.enable: due flushes go to its shared flusher thread.
        self.group_commit = None
        # Set by the key index dispatcher when the topic enables the key index; hooks below keep it in step.
        self.key_index = None
        # Set by an intra-broker move (logmgr.log_move): told of every truncation, under the writer lock, with the
        # new log end offset and whether the log was emptied, so the future log drops the same tail.
        self.truncation_observer = None

    # -- offsets ------------------------------------------------------------------------------------------------

    @property
    def _log_end_offset(self) -> int:
        return self._end[0]

    def _publish_end(self, log_end_offset: int, active: LogSegment | None = None) -> None:
        """Publish the log end with the active segment's base and size (``active``: the caller's, if known)."""
        if active is None:
            active = self.segments.active_segment
        self._end = (log_end_offset, active.base_offset, active.size)

    @property
    def log_end_offset(self) -> int:
        """Next offset to be assigned. O(1)."""
        return self._end[0]

    @property
    def log_start_offset(self) -> int:
        """First offset a reader may fetch. O(1)."""
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below it are on disk (fsynced). O(1)."""
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        """Supplied by the embedding service (setter or provider); standalone it is the log end offset. Always
        clamped to ``[log_start_offset, log_end_offset]``. O(1)."""
        if self._high_watermark_provider is not None:
            value = self._high_watermark_provider()
        elif self._high_watermark is not None:
            value = self._high_watermark
        else:
            value = self._log_end_offset
        return max(self._log_start_offset, min(value, self._log_end_offset))

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        with self._lock:
            self._high_watermark = value
            self.producer_state.on_high_watermark_updated(self.high_watermark)

    def set_high_watermark_provider(self, provider: Callable[[], int] | None) -> None:
        """Let the embedding service answer :attr:`high_watermark` (e.g. from its replication state). O(1)."""
        self._high_watermark_provider = provider

    def adopt_high_watermark(self, source: Log) -> None:
        """Take ``source``'s high watermark (its provider, or the value set on it), as Kafka's
        ``replaceCurrentWithFutureLog`` gives the future log the current one's. O(producers)."""
        self.set_high_watermark_provider(source._high_watermark_provider)
        if source._high_watermark is not None:
            self.high_watermark = source._high_watermark

    @property
    def truncation_sequence(self) -> int:
        """Grows by two with every truncation, odd while one runs: a copier that read the log compares it to know
        that what it read is still the log's (:mod:`logmgr.log_move`). O(1)."""
        return self._truncation_sequence

    def remove_expired_producers(self, now_ms: int) -> None:
        """Drop producers idle for ``producer.id.expiration.ms`` under the log lock (appends add producers and
        open transactions concurrently), as Kafka's ``removeExpiredProducers``. O(producers)."""
        with self._lock:
            self.producer_state.remove_expired_producers(now_ms)

    @property
    def last_stable_offset(self) -> int:
        """First offset of the earliest transaction not yet decided and replicated (open, or ended above the high
        watermark), capped at the high watermark. O(producers)."""
        with self._lock:
            hw = self.high_watermark
            # A provider may have moved the high watermark: completed transactions below it become stable.
            self.producer_state.on_high_watermark_updated(hw)
            unstable = self.producer_state.first_unstable_offset()
            if unstable is None:
                return hw
            # Kafka's maybeIncrementFirstUnstableOffset: a transaction whose start DeleteRecords removed is
            # unstable from the log start on.
            return min(max(unstable, self._log_start_offset), hw)

    @property
    def size_in_bytes(self) -> int:
        """Total ``.log`` bytes. O(segments)."""
        return self.segments.size_in_bytes()

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active_segment

    def update_config(self, config: LogConfig) -> LogConfig:
        """Apply a changed topic config (Kafka's ``UnifiedLog.updateConfig``); returns the previous one. Appends,
        rolls and retention use it from now on; existing segments keep what they were created with (index sizes,
        preallocation, roll jitter), as in Kafka. O(1)."""
        with self._lock:
            old, self.config = self.config, config
        return old

    # -- append -------------------------------------------------------------------------------------------------

    def append_records(
        self,
        records: Sequence[SimpleRecord],
        *,
        compression: CompressionType = CompressionType.NONE,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        leader_epoch: int = 0,
    ) -> LogAppendInfo:
        """Build one batch from ``records`` and append it as leader (offsets assigned here). O(size)."""
        now = self.clock.time_ms()
        stamped = [r if r.timestamp >= 0 else SimpleRecord(r.value, r.key, now, r.headers) for r in records]
        batch = build_batch(
            stamped,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
        )
        return self.append_as_leader(batch, leader_epoch=leader_epoch)

    def append_end_txn_marker(
        self, producer_id: int, producer_epoch: int, control_type: ControlRecordType, coordinator_epoch: int,
        *, leader_epoch: int = 0,
    ) -> LogAppendInfo:
        """Append a COMMIT/ABORT marker for ``producer_id`` (what a transaction coordinator writes). O(1)."""
        marker = build_end_txn_marker(
            offset=0,
            timestamp=self.clock.time_ms(),
            partition_leader_epoch=leader_epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            marker=EndTransactionMarker(control_type, coordinator_epoch),
        )
        return self.append_as_leader(marker, leader_epoch=leader_epoch, origin=AppendOrigin.COORDINATOR)

    def _validate(self, records: bytes, scan: AppendScan, max_message_bytes: int) -> None:
        """Kafka's checks of every batch before an append, in its order (batch by batch: the file rule, magic 2
        (magic 0/1 too on a follower), ``max.message.bytes``, CRC, record count, the offset range and, on a
        leader, that ``lastOffsetDelta + 1`` is the record count; from a client (origin CLIENT), no control batch
        and no producer id with a negative base sequence; record framing), past the native walk ``scan``
        of ``records`` (:func:`scan_append`, which the append runs itself: most appends need nothing more): the
        batches the walk passed whose records need the decompressor or the legacy reader, each before any later
        flaw (the framing of compressed magic-2 batches, the whole decode of legacy ones), then the walk's failure
        as a typed error. O(size)."""
        if scan.compressed_batches or scan.legacy_batches:
            limits = DecodeLimits.for_max_message_bytes(max_message_bytes)
            view = memoryview(records)
            legacy: list[tuple[int, int]] = []
            for start, end in scan.spans(compressed=True, legacy=True):
                try:
                    if view[start + 16] == MAGIC_V2:
                        DefaultRecordBatch(view[start:end]).validate_record_framing(limits)
                    else:
                        legacy.append(self._decode_legacy(LegacyRecordBatch(view[start:end]), start, limits))
                except CorruptRecordError as err:
                    raise self._invalid_batch(start, err) from err
            if scan.failure == SCAN_OK and legacy:
                scan.decoded_legacy(legacy)
        failure = scan.failure
        if failure == SCAN_OK:
            return
        if failure == SCAN_CORRUPT and scan.error is not None:
            raise self._invalid_batch(scan.failure_position, scan.error) from scan.error
        if failure == SCAN_INVALID:
            raise InvalidRecordError(
                f"{self.topic_partition}: invalid batch at position {scan.failure_position}: {scan.reason}"
            )
        if failure == SCAN_NOT_V2:
            raise InvalidRecordError(f"{self.topic_partition}: only magic 2 batches can be appended")
        if failure == SCAN_TOO_LARGE:
            raise RecordBatchTooLargeError(
                f"{self.topic_partition}: batch of {scan.failure_size} bytes exceeds max.message.bytes "
                f"{max_message_bytes}"
            )
        raise InvalidRecordError(f"{self.topic_partition}: an append must hold one or more whole batches")

    def _decode_legacy(self, batch: LegacyRecordBatch, position: int, limits: DecodeLimits) -> tuple[int, int]:
        """``(first offset, record count)`` of a legacy entry a follower appends, decoded as a consumer checking
        CRCs reads it (the legacy reader: CRC-32, message layout, a wrapper's inner set), so no corrupt entry is
        ever kept; its offsets must form a range within one segment (Kafka's ``validateBatch``: first <= last,
        here also last - first < 2^31). O(size), a wrapper decompressed once within ``limits``."""
        first = -1
        count = 0
        for record in batch.iter_records(limits):
            if count == 0:
                first = record.offset
            count += 1
        last = batch.last_offset
        if not 0 <= last - first <= _INT32_MAX:
            raise InvalidRecordError(
                f"{self.topic_partition}: invalid batch at position {position}: Batch has an invalid offset range: "
                f"[{first}, {last}]"
            )
        return first, count

    def _invalid_batch(self, position: int, err: CorruptRecordError) -> InvalidRecordError:
        return InvalidRecordError(f"{self.topic_partition}: invalid batch at position {position}: {err}")

    def _refuse_null_keys(self, records: bytes, scan: AppendScan) -> None:
        """Kafka's LogValidator rule: a compacted topic refuses records without a key (the cleaner could never
        supersede them). O(size)."""
        view = memoryview(records)
        for start, end in scan.spans():
            batch = DefaultRecordBatch(view[start:end])
            if batch.is_control:
                continue
            try:
                keyless = next((r.offset for r in batch.records() if r.key is None), None)
            except CorruptRecordError as err:
                raise InvalidRecordError(f"{self.topic_partition}: invalid batch: {err}") from err
            if keyless is not None:
                raise InvalidRecordError(
                    f"{self.topic_partition}: compacted topic cannot accept message without key (record "
                    f"{keyless - batch.base_offset} of the batch)"
                )

    def _check_timestamps(self, records: bytes, scan: AppendScan, now: int) -> None:
        """Kafka's LogValidator.validateTimestamp on a leader append: on a CreateTime topic a record's timestamp
        (NO_TIMESTAMP exempt) must lie within ``[now - before, now + after]`` (:attr:`LogConfig.timestamp_bounds`);
        otherwise a batch the producer marked LogAppendTime is refused. Raises :class:`InvalidTimestampError` with
        the RecordErrors of the first failing batch, as Kafka fails the batch. O(records) with finite windows,
        O(batches) otherwise."""
        create_time = self.config.message_timestamp_type == CREATE_TIME
        before, after = self.config.timestamp_bounds
        bounded = self._append_facts().bounded
        view = memoryview(records)
        for number, (start, end) in enumerate(scan.spans()):
            batch = DefaultRecordBatch(view[start:end])
            log_append_time = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
            if not bounded and not log_append_time:
                continue
            errors: list[tuple[int, str]] = []
            try:
                decoded = batch.records()
            except CorruptRecordError as err:
                raise InvalidRecordError(f"{self.topic_partition}: invalid batch: {err}") from err
            for index, record in enumerate(decoded):
                if create_time and record.timestamp != NO_TIMESTAMP:
                    if now - record.timestamp > before or record.timestamp - now > after:
                        errors.append((index, (
                            f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                            f"The timestamp should be within [{now - before}, {now + after}]"
                        )))
                elif log_append_time:
                    errors.append((index, (
                        f"Invalid timestamp type in message with offset {record.offset}. Producer should not set "
                        "timestamp type to LogAppendTime."
                    )))
            if errors:
                raise InvalidTimestampError(
                    f"{self.topic_partition}: One or more records have been rejected due to invalid timestamp "
                    f"(batch {number} of the append, record {errors[0][0]}: {errors[0][1]})",
                    errors,
                )

    def _append_facts(self) -> AppendFacts:
        """What every append derives from the current config (:class:`AppendFacts`), derived again only after
        :meth:`update_config`: every append asks once. O(1)."""
        facts = self._facts
        config = self.config
        if facts is None or facts[0] is not config:
            before, after = config.timestamp_bounds
            bounded = config.message_timestamp_type == CREATE_TIME and (before != INT64_MAX or after != INT64_MAX)
            if config.compact and config.max_compaction_lag_ms > 0:
                roll_ms = min(config.max_compaction_lag_ms, config.segment_ms)
            else:
                roll_ms = config.segment_ms
            append_time = 0 if config.message_timestamp_type == "LogAppendTime" else None
            facts = self._facts = AppendFacts(
                config, bounded, roll_ms, append_time, config.compact, config.max_message_bytes, config.segment_bytes,
                config.flush_messages, config.logmgr_append_reserve_bytes,
            )
        return facts

    def _dir_full_error(self) -> LogDirFullError:
        return LogDirFullError(
            f"{self.topic_partition}: log dir {self.dir.parent} is above its disk usage limit; appends are refused "
            "until cleanup frees space"
        )

    def _refusal(self, reason: str) -> InvalidRecordError:
        return InvalidRecordError(f"{self.topic_partition}: {reason}")

    def _too_large_for_a_segment(self, incoming: int, segment_bytes: int) -> RecordBatchTooLargeError:
        return RecordBatchTooLargeError(
            f"{self.topic_partition}: append of {incoming} bytes exceeds segment.bytes {segment_bytes}"
        )

    def _prepare_producers(
        self, records: bytes, scan: AppendScan, append_time: int | None, origin: AppendOrigin, leader: bool
    ) -> tuple[list[ProducerAppendInfo], list[EndedTxn]] | LogAppendInfo:
        """Producer state checked before anything is written (duplicates, sequences, epochs), on the batches as
        given with the offsets (and ``append_time``) the leader stamped in their headers: the updates to apply
        after the write and the transactions they end, or, for a leader's retried idempotent batch, the offsets
        it got the first time (Kafka's answer; nothing is written). O(producer batches)."""
        infos: list[ProducerAppendInfo] = []
        completed: list[EndedTxn] = []
        view = memoryview(records)
        for start, end, base_offset in scan.producer_spans():
            batch = DefaultRecordBatch(view[start:end])
            info = self.producer_state.prepare_update(batch.producer_id, origin)
            try:
                txn = info.append(batch, base_offset, append_time)
            except DuplicateSequenceError as dup:
                if not leader or dup.duplicate is None:
                    raise
                meta = dup.duplicate
                return LogAppendInfo(
                    meta.first_offset, meta.last_offset, meta.timestamp, meta.last_offset, -1, -1, 0, 0, 0,
                    duplicate=True,
                )
            infos.append(info)
            if txn is not None:
                completed.append(txn)
        return infos, completed

    def _apply_producers(
        self, infos: Sequence[ProducerAppendInfo], completed: Sequence[EndedTxn], segment: LogSegment, last_offset: int
    ) -> None:
        """After the write: the producer updates of :meth:`_prepare_producers`, then each ended transaction
        (an aborted one indexed in ``segment``'s ``.txnindex``). The LSO is computed after every producer of the
        append is updated, as in Kafka. O(producer batches)."""
        for info in infos:
            self.producer_state.update(info)
        for ended in completed:
            lso = self.producer_state.last_stable_offset(ended)
            if ended.is_aborted:
                aborted = AbortedTxn(ended.producer_id, ended.first_offset, ended.last_offset, lso)
                try:
                    segment.append_aborted_txn(aborted)
                except OSError as err:
                    raise self._io_failure(f"transaction index append at offset {last_offset}", err) from err
            self.producer_state.complete_txn(ended)

    # -- roll -----------------------------------------------------------------------------------------------------

    def should_roll(self, segment: LogSegment, incoming_bytes: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        """Kafka's roll rules (§6.1): size, time (record time when known, with jitter), full indexes, relative
        offset overflow (:meth:`LogSegment.roll_due` on this log's config). O(1)."""
        facts = self._append_facts()
        return segment.roll_due(incoming_bytes, max_timestamp, last_offset, now, facts.segment_bytes, facts.roll_ms)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log end offset)``: the old one gets its final
        time-index entry and trimmed indexes, producer state is snapshotted at the new base, and the segments below
        it are flushed (asynchronously when a scheduler is attached). O(1) + flush."""
        with self._lock:
            self._ensure_online()
            new_offset = max(expected_next_offset or 0, self._log_end_offset)
            active = self.segments.active_segment
            if active.base_offset == new_offset and active.size == 0:
                # Rolling onto an empty active segment with the same base replaces it, as Kafka does.
                return active
            if log_file(self.dir, new_offset).exists():
                raise KafkaStorageError(f"{self.topic_partition}: segment file for offset {new_offset} already exists")
            # Kafka's roll runs under maybeHandleIOException: any I/O error (trimming the old indexes, creating the
            # new files, the producer snapshot) takes the dir offline, whatever step it interrupted.
            try:
                active.on_become_inactive_segment()
                segment = self._new_segment(new_offset)
                self.segments.add(segment)
                self._publish_end(self._log_end_offset)
                self.producer_state.map_end_offset = new_offset
                self.producer_state.take_snapshot(sync=False)
            except OSError as err:
                raise self._io_failure(f"roll to offset {new_offset}", err) from err
            self._run_async(lambda: self.flush_up_to_segment(new_offset))
            logger.info("%s rolled new segment at offset %d", self.topic_partition, new_offset)
            return segment

    def _new_segment(self, base_offset: int) -> LogSegment:
        config = self.config
        jitter = config.random_segment_jitter(self._rng)
        segment = LogSegment.open(
            self.dir,
            base_offset,
            create=True,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=jitter,
            clock=lambda: self.clock.time_ms() / 1000,
            preallocate_bytes=config.segment_bytes if config.preallocate else 0,
        )
        return segment

    # -- flush ------------------------------------------------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets in ``[recovery_point, up_to_offset)`` (default: everything) and
        advance the recovery point; fsyncs the directory so new segment files survive a crash. O(dirty bytes)."""
        with self._lock:
            self._ensure_online()
            target = self._log_end_offset if up_to_offset is None else min(up_to_offset, self._log_end_offset)
            if target <= self._recovery_point and up_to_offset is not None:
                return
            start = self.segments.floor_segment(self._recovery_point)
            from_offset = start.base_offset if start is not None else None
            try:
                for segment in self.segments.values(from_offset, target + 1 if target == self._log_end_offset else target):
                    segment.flush()
                fsync_dir(self.dir)
            except OSError as err:
                # The recovery point stays: after a failed fsync the kernel may have dropped the dirty pages.
                raise self._io_failure(f"flush up to offset {target}", err) from err
            if target > self._recovery_point:
                self._recovery_point = target
            self.last_flush_ms = self.clock.time_ms()

    def flush_up_to_segment(self, base_offset: int) -> None:
        """The post-roll flush: everything below ``base_offset`` plus the producer snapshot written at the roll."""
        with self._lock:
            # A post-roll flush queued before the log closed or its dir went offline has nothing left to make durable.
            if self._closed or self.is_offline:
                return
            self.flush(base_offset)
            snapshot = producer_snapshot_file(self.dir, base_offset)
            if snapshot.exists():
                try:
                    fd = open_no_follow(snapshot, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                except OSError as err:
                    raise self._io_failure(f"fsync of {snapshot}", err) from err

    # -- read -------------------------------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` (at least one batch when
        ``min_one_message``), never past the isolation bound (high watermark, last stable offset or log end) or
        ``max_offset``. read_committed also returns the aborted transactions overlapping the result. Raises
        :class:`OffsetOutOfRangeError` outside ``[log_start_offset, log_end_offset]`` and
        :class:`KafkaStorageError` once the log is closed or its dir offline. O(log n + bytes).

        Lock-free, as Kafka's reads: appends never change bytes already published. A truncation does (a follower
        cuts its tail and appends again), so reads check the truncation sequence (odd while one runs): a read that
        overlapped one is done again under the writer lock, never returning a position into a rewritten tail.
        """
        # _io_guarded("read"), written out: the decorator's call layer costs as much as the index search.
        try:
            sequence = self._truncation_sequence
            if sequence % 2 == 0:
                fetched = self._read(start_offset, max_bytes, isolation, max_offset, min_one_message)
                if self._truncation_sequence == sequence:
                    return fetched
            with self._lock:
                return self._read(start_offset, max_bytes, isolation, max_offset, min_one_message)
        except OSError as err:
            raise self._io_failure("read", err) from err

    def _read(
        self,
        start_offset: int,
        max_bytes: int,
        isolation: Isolation,
        max_offset: int | None,
        min_one_message: bool,
    ) -> FetchDataInfo:
        if self._closed or self._offline_error is not None or self.dir_state.offline:
            self._ensure_online()
        end = self._end
        log_end = end[0]
        if isolation is _LOG_END:
            bound = log_end
        elif isolation is _READ_UNCOMMITTED:
            # A standalone log's high watermark is its log end (the property's answer, without its calls).
            if self._high_watermark_provider is None and self._high_watermark is None:
                bound = log_end
            else:
                bound = min(self.high_watermark, log_end)
        else:
            bound = min(self.last_stable_offset, log_end)
        if max_offset is not None:
            bound = min(bound, max_offset)
        if start_offset < self._log_start_offset or start_offset > log_end:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: offset {start_offset} is outside [{self._log_start_offset}, {log_end}]"
            )
        if start_offset >= bound:
            return self._empty_fetch(start_offset, isolation)
        segments = self.segments
        segment = segments.floor_segment(start_offset)
        readers = self.readers
        while segment is not None:
            held = segment
            if not readers.acquire(held):
                # Being closed after its deletion: retry from the current start.
                segment = segments.floor_segment(max(start_offset, self._log_start_offset))
                continue
            try:
                try:
                    if bound >= log_end and segment.base_offset == end[1]:
                        # The active segment up to the published end: _position_of's common answer, without the
                        # call.
                        max_position = end[2]
                    else:
                        max_position = self._position_of(segment, bound, end)
                    fetch = segment.read(start_offset, max_bytes, max_position, min_one_message)
                except SegmentClosedError:
                    # Deleted (and closed) between lookup and hold: retry from the current start. The hold keeps
                    # a segment from being closed once taken, so its reads raise this before touching any file.
                    segment = segments.floor_segment(max(start_offset, self._log_start_offset))
                    continue
                if fetch is not None:
                    data = fetch.records
                    aborted = None
                    if isolation is _READ_COMMITTED:
                        aborted = self._collect_aborted(segment, start_offset, fetch.position, fetch.size)
                        if self._log_start_offset > start_offset:
                            # Retention removed this segment and later ones while we read: the .txnindex
                            # entries of markers in those later segments may be missing from ``aborted``, so
                            # the data cannot be served as committed. The offset is now out of range anyway.
                            raise OffsetOutOfRangeError(
                                f"{self.topic_partition}: offset {start_offset} was deleted during the read "
                                f"(log start is now {self._log_start_offset})"
                            )
                    limits = self._limits
                    if limits[0] != self.config.max_message_bytes:
                        limits = self._refresh_limits()
                    return FetchDataInfo(
                        fetch.offset, data, segment.base_offset, fetch.position, aborted, fetch.path, limits[1]
                    )
            finally:
                # ``segment`` may name the next one to try by now.
                readers.release(held)
            segment = self.segments.higher_segment(held.base_offset)
        return self._empty_fetch(start_offset, isolation)

    def _refresh_limits(self) -> tuple[int, DecodeLimits]:
        """(``max.message.bytes``, its decode limits) for the current config, kept for the reads after (which
        compare the first field before calling this). O(1)."""
        max_message_bytes = self.config.max_message_bytes
        self._limits = (max_message_bytes, DecodeLimits.for_max_message_bytes(max_message_bytes))
        return self._limits

    @staticmethod
    def _empty_fetch(start_offset: int, isolation: Isolation) -> FetchDataInfo:
        return FetchDataInfo(start_offset, b"", -1, -1, () if isolation is _READ_COMMITTED else None)

    def _position_of(self, segment: LogSegment, bound: int, end: tuple[int, int, int]) -> int:
        """Byte position in ``segment`` where batches at or beyond ``bound`` begin, given the published ``end``
        (bytes past the published log end are an append in progress and never served)."""
        log_end, end_base, end_position = end
        if segment.base_offset > end_base:
            return 0
        if bound >= log_end:
            return end_position if segment.base_offset == end_base else segment.size
        if segment.log.closed:
            # The translation reads its files: a deleted segment is for the caller to look up again (as its read).
            raise SegmentClosedError(segment.log_path)
        found = segment.translate_offset(bound)
        if found is None:
            return segment.size
        # translate_offset finds the batch holding ``bound``; it must not be served unless it starts below it.
        batch = next(iter(segment.batches(found.position)), None)
        if batch is not None and batch.batch.base_offset < bound:
            return found.position + found.size
        return found.position

    def _collect_aborted(self, segment: LogSegment, fetch_offset: int, position: int, size: int) -> tuple[AbortedTransaction, ...]:
        upper = segment.fetch_upper_bound_offset(position, size)
        if upper is None:
            after = self.segments.higher_segment(segment.base_offset)
            upper = after.base_offset if after is not None else self._log_end_offset
        collected: list[AbortedTxn] = []
        for candidate in self.segments.values(segment.base_offset):
            result = candidate.collect_aborted_txns(fetch_offset, upper)
            collected.extend(result.aborted)
            if result.is_complete:
                break
        return tuple(AbortedTransaction(t.producer_id, t.first_offset) for t in collected)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp``; ``-2`` gives the log start
        offset, ``-1`` the log end offset, ``-3`` the record with the max timestamp; :class:`KafkaStorageError` once
        the log is closed or its dir offline. O(segments + bytes scanned)."""
        # _io_guarded("offset lookup by timestamp"), written out: the decorator's call layer costs as much as the
        # index search.
        try:
            return self._offset_for_timestamp(timestamp)
        except OSError as err:
            raise self._io_failure("offset lookup by timestamp", err) from err

    def _offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        if self._closed or self._offline_error is not None or self.dir_state.offline:
            self._ensure_online()
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            best: tuple[int, int] | None = None
            for segment in self.segments.values():
                ts = segment.max_timestamp_so_far
                if ts >= 0 and (best is None or ts > best[1]):
                    best = (segment.shallow_offset_of_max_timestamp_so_far, ts)
            return best
        readers = self.readers
        for segment in self.segments.values():
            known = segment.known_max_timestamp
            if known is not None and 0 <= known < timestamp:
                # What largest_timestamp() would answer, from memory: no hold needed (the common skip of every
                # segment before the answer's).
                continue
            if not readers.acquire(segment):
                # Being closed after its deletion.
                continue
            try:
                # A known max timestamp at or above the target is largest_timestamp()'s answer already.
                if known is None or known < 0:
                    try:
                        newest = segment.largest_timestamp()
                    except FileNotFoundError:
                        # Its mtime fallback stats the file by name: renamed or unlinked by a concurrent deletion.
                        continue
                    if newest < timestamp:
                        continue
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
            except SegmentClosedError:
                # Deleted (and closed) between lookup and hold: its records are gone, as read() finds them.
                continue
            finally:
                readers.release(segment)
            if found is not None:
                return found.offset, found.timestamp
        return None

    def query_by_key(
        self, key: bytes, *, begin_timestamp: int | None = None, end_timestamp: int | None = None, max_records: int = 64
    ) -> list[Record]:
        """The first ``max_records`` records whose key is ``key`` (timestamps within the bounds), in offset order,
        through the key index where it covers the log and a scan elsewhere. O(segments + chains + records read)."""
        from logmgr.key_index import query_by_key

        return query_by_key(
            self, key, begin_timestamp=begin_timestamp, end_timestamp=end_timestamp, max_records=max_records
        )

    # -- truncation and log start ---------------------------------------------------------------------------------

    @_io_guarded("truncation")
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset ``>= target_offset`` (whole batches); False when there is nothing to remove.
        Later segments are deleted, producer state is rebuilt at the new end, leader epochs are cut. O(segments +
        replay from the latest snapshot)."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {target_offset}")
        with self._lock:
            self._ensure_online()
            if target_offset >= self._log_end_offset:
                return False
            first = self.segments.first_segment()
            if first is None or target_offset < first.base_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            with self._truncating():
                self._truncate_segments_to(target_offset)
            return True

    @contextlib.contextmanager
    def _truncating(self) -> Iterator[None]:
        """Mark a truncation in progress for lock-free readers (:meth:`read`): the sequence is odd while it runs.
        Called under the writer lock. O(1)."""
        self._truncation_sequence += 1
        try:
            yield
        finally:
            self._truncation_sequence += 1

    def _truncate_segments_to(self, target_offset: int) -> None:
        """The body of :meth:`truncate_to` once ``target_offset`` is inside the log. Under the writer lock."""
        doomed = [s for s in self.segments.values() if s.base_offset > target_offset]
        self._remove_and_delete(doomed, reason="truncation")
        self.segments.active_segment.truncate_to(target_offset)
        self._publish_end(self.segments.active_segment.read_next_offset())
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        if self._high_watermark is not None:
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self.leader_epochs.truncate_from_end(self._log_end_offset)
        from logmgr.log_loader import rebuild_producer_state

        rebuild_producer_state(self, self._log_end_offset)
        if self.key_index is not None:
            self.key_index.truncated(self._log_end_offset)
        else:
            # Nothing maintains it: a file that indexed the removed tail would hide the records appended after.
            key_index_file(self.dir, self.segments.active_segment.base_offset).unlink(missing_ok=True)
        if self.truncation_observer is not None:
            self.truncation_observer(self._log_end_offset, False)

    @_io_guarded("full truncation")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset``. O(segments)."""
        with self._lock, self._truncating():
            self._ensure_online()
            self._remove_and_delete(self.segments.values(), reason="full truncation", roll_to=new_offset)
            self._publish_end(new_offset)
            self._log_start_offset = new_offset
            self._recovery_point = new_offset
            self._high_watermark = None if self._high_watermark is None else new_offset
            self.leader_epochs.clear()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            if self.key_index is not None:
                self.key_index.truncated(new_offset)
            if self.truncation_observer is not None:
                self.truncation_observer(new_offset, True)

    @_io_guarded("log start offset increase")
    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (Kafka's DeleteRecords); never past the high watermark. The
        segments wholly below it go at the next cleanup. Returns the new log start offset. O(epochs)."""
        with self._lock:
            self._ensure_online()
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.topic_partition}: cannot delete records before {offset}, beyond the high watermark "
                    f"{self.high_watermark}"
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self.leader_epochs.truncate_from_start(offset)
                self.producer_state.on_log_start_offset_incremented(offset)
            return self._log_start_offset

    # -- retention --------------------------------------------------------------------------------------------------

    def snapshot(self) -> LogSnapshot:
        """What the pure retention policies see of this log. O(segments)."""
        # Under the lock: largest_timestamp() may stat a segment's file, which truncation or retention renames.
        with self._lock:
            segments = tuple(SegmentInfo.of(s) for s in self.segments.values())
            return LogSnapshot(segments, self._log_end_offset, self._log_start_offset, self.high_watermark)

    def plan_retention(self, now_ms: int, *, time_rule_allowed: bool = True) -> RetentionPlan:
        """The deletions ``delete_old_segments`` would make now, without making them. O(segments)."""
        settings = RetentionSettings(self.config.retention_ms, self.config.retention_bytes, self.config.delete)
        return plan_retention(self.snapshot(), settings, now_ms, time_rule_allowed=time_rule_allowed)

    def delete_old_segments(self, *, time_rule_allowed: bool = True) -> RetentionPlan:
        """Kafka's ``deleteOldSegments``: log-start-offset, size and time rules, oldest first, never past the high
        watermark; rolls first when the active segment goes. Returns what was deleted. O(segments)."""
        with self._lock:
            if self._closed:
                return self.plan_retention(self.clock.time_ms(), time_rule_allowed=False)
            plan = self.plan_retention(self.clock.time_ms(), time_rule_allowed=time_rule_allowed)
            self.apply_deletions([d.base_offset for d in plan.deletions], plan.roll_first, reason="retention")
            return plan

    @_io_guarded("segment deletion")
    def apply_deletions(self, base_offsets: Iterable[int], roll_first: bool, *, reason: str) -> int:
        """Delete the given segments (oldest first, a prefix of the log), rolling first when every segment goes;
        the log start offset moves to the first remaining offset. Returns bytes scheduled for deletion."""
        with self._lock:
            # Closed by a concurrent deletion of the log: its files are going anyway.
            if self._closed:
                return 0
            self._ensure_online()
            doomed = [s for s in (self.segments.get(b) for b in base_offsets) if s is not None]
            if not doomed:
                return 0
            if roll_first or len(doomed) == len(self.segments):
                new_active = self.roll()
                doomed = [s for s in doomed if s is not new_active]
            freed = sum(s.size for s in doomed)
            remaining = self.segments.higher_segment(doomed[-1].base_offset)
            if remaining is not None and remaining.base_offset > self._log_start_offset:
                self._log_start_offset = remaining.base_offset
                self.leader_epochs.truncate_from_start(self._log_start_offset)
                self.producer_state.on_log_start_offset_incremented(self._log_start_offset)
            try:
                self._remove_and_delete(doomed, reason=reason)
            except OSError as err:
                raise self._io_failure(f"{reason} deletion of {len(doomed)} segments", err) from err
            return freed

    def _remove_and_delete(self, doomed: Iterable[LogSegment], *, reason: str, roll_to: int | None = None) -> None:
        """Kafka's deletion order: remove from the map, rename files to ``.deleted`` (with the segment's producer
        snapshot), schedule the physical deletion after ``file.delete.delay.ms``."""
        doomed = list(doomed)
        for segment in doomed:
            self.segments.remove(segment.base_offset)
            segment.rename_to_deleted()
            if self.key_index is not None:
                self.key_index.segment_removed(segment.base_offset)
            else:
                # A key index built earlier (topic config since changed, reindex --key-index) would otherwise be
                # taken for a new segment that reuses the base offset.
                key_index_file(self.dir, segment.base_offset).unlink(missing_ok=True)
        if roll_to is not None:
            # Only after the renames: the new segment may take the base offset (and file names) of a doomed one.
            self.segments.add(self._new_segment(roll_to))
        for segment in doomed:
            # Through the manager, so it stops listing the snapshot (Kafka's removeAndMarkSnapshotForDeletion).
            snapshot = self.producer_state.rename_snapshot_to_deleted(segment.base_offset)
            extra = () if snapshot is None else (snapshot,)
            self.deleter.schedule(segment, self.config.file_delete_delay_ms, extra)
            logger.info(
                "%s scheduled deletion of segment %d (%d bytes, %s)", self.topic_partition, segment.base_offset,
                segment.size, reason,
            )

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def _ensure_online(self) -> None:
        # Reads are refused too: Kafka stops serving every partition of an offline dir (fetches answer
        # KAFKA_STORAGE_ERROR), so nothing is read from a failed disk until a restart has recovered the dir.
        if self._closed:
            raise KafkaStorageError(f"{self.topic_partition}: log in {self.dir} is closed")
        if self.is_offline:
            cause = self._offline_error or self.dir_state.failure or "I/O error"
            raise KafkaStorageError(f"{self.topic_partition}: log dir {self.dir.parent} is offline ({cause})")

    def _io_failure(self, action: str, err: OSError) -> KafkaStorageError:
        """Take the log's dir offline after ``err`` (Kafka's ``maybeHandleIOException`` feeding the
        LogDirFailureChannel) and return the error to raise, naming the partition dir (and the file when the
        ``OSError`` names one). O(1)."""
        self._mark_offline(err)
        return KafkaStorageError(f"{self.topic_partition}: {action} failed in {self.dir}: {err}")

    def prune_producer_snapshots(self) -> list[int]:
        """Delete producer snapshots no longer needed (the pre-2.8 rule: keep the last two segments' snapshots and
        every one from the recovery point's segment on; drop those of deleted segments). O(snapshots)."""
        with self._lock:
            if self._closed or self.is_offline:
                return []
            try:
                return self.producer_state.prune_snapshots_pre_2_8(self.segments.base_offsets(), self._recovery_point)
            except OSError as err:
                raise self._io_failure("producer snapshot pruning", err) from err

    def _mark_offline(self, err: OSError) -> None:
        self._offline_error = err
        self.dir_state.mark_offline(err)
        logger.error("%s: I/O error, log marked offline: %s", self.topic_partition, err)

    @property
    def is_offline(self) -> bool:
        """True once this log hit an I/O error or any log of its dir did: the dir goes offline as a whole, as in
        Kafka. O(1)."""
        return self._offline_error is not None or self.dir_state.offline

    def close(self) -> None:
        """Snapshot producer state at the log end (fsynced; skipped when the dir is offline), flush the leader
        epochs, close every segment (final time-index entries, trimmed indexes). An I/O error takes the dir
        offline and raises :class:`KafkaStorageError` after every segment was closed. O(segments)."""
        with self._lock:
            if self._closed:
                return
            failure: KafkaStorageError | None = None
            # No snapshot into an offline dir: Kafka writes nothing more there.
            if not self.is_offline:
                try:
                    self.producer_state.map_end_offset = self._log_end_offset
                    if self.producer_state.latest_snapshot_offset() != self._log_end_offset:
                        self.producer_state.take_snapshot(sync=True)
                except OSError as err:
                    failure = self._io_failure(f"producer snapshot at offset {self._log_end_offset}", err)
            # The descriptors are released even after a failure, so a failed dir does not pin its files.
            try:
                self.segments.close()
            except OSError as err:
                failure = failure or self._io_failure("close", err)
            finally:
                self._closed = True
            if failure is not None:
                raise failure

    @_io_guarded("log deletion")
    def delete(self) -> Path:
        """Close the log and rename its directory to ``<topic>-<partition>.<uuid>-delete`` (removed later by the
        manager). Returns the new path. O(segments)."""
        with self._lock:
            self.close()
            target = self.dir.with_name(delete_dir_name(self.topic_partition, uuid.uuid4().hex))
            os.replace(self.dir, target)
            fsync_dir(target.parent)
            self.dir = target
            return target

    @_io_guarded("partition.metadata write")
    def ensure_partition_metadata(self, topic_id: uuid.UUID | None = None) -> None:
        """Write ``partition.metadata`` if missing (Kafka flushes it before the first append). O(1)."""
        path = self.dir / PARTITION_METADATA_FILE
        if not path.exists():
            write_partition_metadata(path, PartitionMetadata(0, topic_id or uuid.uuid4()))

    def _check(self) -> None:
        """Assert the log's invariants (stress tests call it after every step)."""
        with self._lock:
            self.segments._check()
            assert self._log_start_offset <= self._log_end_offset or self.segments.is_empty()
            assert self._recovery_point <= self._log_end_offset
            assert self.log_start_offset <= self.high_watermark <= self._log_end_offset
            bases = self.segments.base_offsets()
            assert bases and bases[-1] <= self._log_end_offset
            self.leader_epochs._check()

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, start={self._log_start_offset}, end={self._log_end_offset}, "
            f"recovery_point={self._recovery_point}, segments={len(self.segments)})"
        )


