"""Planning a read of Kafka log dirs, and reading one planned slice.

Planning (driver side, no Spark and no Arrow needed) turns :class:`ReadOptions` and the bounds of pushed filters
into :class:`SegmentSlice` s: one per segment, or per byte range of a segment larger than
``maxBytesPerPartition`` cut at batch boundaries taken from the offset index. Pruning uses only file names
(segment base offsets), the offset index, the time index, the ``.txnindex`` and logmgr's ``.keyindex``; a segment
outside the offset range is never opened, and a segment is opened for its time index only when a timestamp bound
needs it. With pushed keys, a segment whose key index covers the range is cut down to the batches
:func:`logmgr.key_index.query_segments` finds holding one of the keys (read on the driver, keys compared, so only
batches with a matching record are kept); a segment without an up-to-date key index is sliced in full.

Reading (executor side) walks the batches of a slice, verifies every CRC, applies Kafka's consumer rules
(control batches never returned; under ``read_committed`` the batches of aborted transactions are dropped by the
fetcher's algorithm over the aborted-transaction list and the abort markers) and feeds
:class:`logmgr.spark.columnar.ColumnarDecoder`.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa

from checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    read_producer_snapshot,
)
from logmgr.errors import ConfigError
from logmgr.key_index import query_segments
from logmgr.log_dirs import partition_dirs, segment_base_offsets
from logmgr.spark.columnar import TARGET_BYTES, TARGET_ROWS, ColumnarDecoder
from logmgr.spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions
from logmgr.spark.schema import OutputColumns
from segments.compression import CompressionType
from segments.errors import InvalidPartitionDirError, RecordTooLargeError, StorageFormatError
from segments.key_index import KeyIndexReader, key_index_file
from segments.log_segment import LogSegment
from segments.naming import (
    SNAPSHOT_SUFFIX,
    PartitionDirName,
    TopicPartition,
    log_file,
    offset_from_file_name,
    producer_snapshot_file,
    transaction_index_file,
)
from segments.records import (
    DEFAULT_DECODE_LIMITS,
    ControlRecordType,
    DecodeLimits,
    DefaultRecordBatch,
    Record,
    RecordBatch,
)
from segments.transaction_index import TransactionIndex
from segments.transactions import TransactionTracker

log = logging.getLogger(__name__)

_NO_LIMIT = 2**63 - 1


@dataclass(frozen=True)
class PushedBounds:
    """What the pushed filters allow: the AND of every filter Spark handed over (all of them are also returned
    to Spark, which re-applies them, so these bounds only need to be conservative)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    min_offset: int = 0
    max_offset: int = _NO_LIMIT  # exclusive
    min_timestamp: int | None = None  # records below it may be skipped batch by batch
    keys: frozenset[bytes] | None = None  # batches without a record of these keys may be skipped
    empty: bool = False  # contradictory filters: nothing can match

    def admits(self, topic: str, partition: int) -> bool:
        """Whether a topic-partition can hold matching rows. O(1)."""
        if self.empty:
            return False
        if self.topics is not None and topic not in self.topics:
            return False
        return self.partitions is None or partition in self.partitions


@dataclass(frozen=True)
class AbortedRange:
    """An aborted transaction from a ``.txnindex``: its producer and first/last offsets."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class SegmentSlice:
    """One unit of parallel work: batches of one segment starting in ``[start_position, end_position)``,
    records with offsets in ``[start_offset, end_offset)``. Non-empty ``ranges`` (ascending byte ranges within
    those positions) restrict the read to the batches starting in them: the ones a key index selected."""

    topic: str
    partition: int
    partition_dir: str
    base_offset: int
    start_position: int
    end_position: int
    start_offset: int
    end_offset: int
    min_timestamp: int | None = None
    read_committed: bool = False
    aborted: tuple[AbortedRange, ...] = ()
    limits: DecodeLimits = DEFAULT_DECODE_LIMITS
    """What the topic's records are decoded within (:meth:`ReadOptions.decode_limits`)."""
    ranges: tuple[tuple[int, int], ...] = ()

    @property
    def byte_ranges(self) -> tuple[tuple[int, int], ...]:
        """The byte ranges of ``.log`` read. O(1)."""
        return self.ranges or ((self.start_position, self.end_position),)

    @property
    def log_path(self) -> Path:
        """The segment's ``.log`` file. O(1)."""
        return log_file(self.partition_dir, self.base_offset)

    @property
    def size(self) -> int:
        """Bytes of ``.log`` this slice covers. O(len(ranges))."""
        return sum(end - start for start, end in self.byte_ranges)


@dataclass(frozen=True)
class PartitionRange:
    """The resolved offset range of one topic-partition: ``[start_offset, end_offset)`` within a log holding
    ``[log_start_offset, log_end_offset)`` (``log_end_offset`` is -1 when planning did not need to read the log
    end, i.e. no bound was ``latest`` or a timestamp)."""

    topic: str
    partition: int
    partition_dir: str
    start_offset: int
    end_offset: int
    log_start_offset: int
    log_end_offset: int


@dataclass
class ScanPlan:
    """The slices to read, the per-partition offset ranges they cover, how many segments planning opened (the
    proof that pruning did not touch the rest) and how many of them a key index cut down."""

    slices: list[SegmentSlice] = field(default_factory=list)
    ranges: list[PartitionRange] = field(default_factory=list)
    segments_opened: int = 0
    segments_total: int = 0
    segments_key_pruned: int = 0


def find_partition_dirs(paths: tuple[str, ...]) -> list[tuple[TopicPartition, Path]]:
    """Live partition dirs under each path: a log dir's children by Kafka's naming rules, or the path itself
    when it is a partition dir. Raises :class:`ConfigError` for a path that does not exist. O(entries)."""
    found: list[tuple[TopicPartition, Path]] = []
    for text in paths:
        path = Path(text)
        if not path.is_dir():
            raise ConfigError("path", f"{text!r} is not a directory")
        try:
            parsed = PartitionDirName.parse(path.name)
        except InvalidPartitionDirError:
            parsed = None
        if parsed is not None and parsed.kind == "live" and any(path.glob("*.log")):
            found.append((parsed.topic_partition, path))
        else:
            found.extend(partition_dirs(path))
    return found


def plan_scan(options: ReadOptions, bounds: PushedBounds | None = None) -> ScanPlan:
    """Plan a read: partitions selected by the options and ``bounds``, offset ranges resolved, slices cut.

    O(partitions x log(segments)) index lookups, plus one tail read per partition when ``latest`` must be
    resolved, plus one ``stat`` per candidate segment for ``read_committed``.
    """
    bounds = bounds or PushedBounds()
    plan = ScanPlan()
    for tp, directory in find_partition_dirs(options.paths):
        if not options.selects_partition(tp.topic, tp.partition) or not bounds.admits(tp.topic, tp.partition):
            continue
        _PartitionPlanner(tp, directory, options, bounds, plan).plan()
    return plan


class _PartitionPlanner:
    """Plans one partition dir; opens segments lazily and counts them."""

    def __init__(
        self, tp: TopicPartition, directory: Path, options: ReadOptions, bounds: PushedBounds, plan: ScanPlan
    ) -> None:
        self.tp = tp
        self.directory = directory
        self.options = options
        self.bounds = bounds
        self.out = plan
        self.bases = segment_base_offsets(directory)
        self._opened: dict[int, LogSegment] = {}
        self._leo: int | None = None
        plan.segments_total += len(self.bases)

    def segment(self, base: int) -> LogSegment:
        opened = self._opened.get(base)
        if opened is None:
            opened = LogSegment.open(self.directory, base, writable=False)
            self._opened[base] = opened
            self.out.segments_opened += 1
        return opened

    def plan(self) -> None:
        if not self.bases:
            return
        try:
            self._plan()
        finally:
            for segment in self._opened.values():
                segment.close()

    def _plan(self) -> None:
        log_start = self._log_start_offset()
        start = self._resolve(self.options.starting.for_partition(self.tp.topic, self.tp.partition), log_start)
        end = self._resolve(self.options.ending.for_partition(self.tp.topic, self.tp.partition), log_start)
        start = max(start, log_start, self.bounds.min_offset)
        end = min(end, self.bounds.max_offset)
        self.out.ranges.append(
            PartitionRange(
                self.tp.topic, self.tp.partition, str(self.directory), start, max(start, end), log_start,
                self._leo if self._leo is not None else -1,
            )
        )
        if start >= end:
            return
        aborted = self._aborted(start, end) if self.options.read_committed else ()
        for base, next_base in self._segment_ranges():
            if next_base <= start or base >= end:
                continue
            if not self._may_hold_timestamp(base, next_base == _NO_LIMIT):
                continue
            self._slice_segment(base, next_base, max(start, base), min(end, next_base), aborted)

    # -- offsets ----------------------------------------------------------------------------------------------

    def _segment_ranges(self) -> Iterator[tuple[int, int]]:
        """``(base offset, next segment's base offset)`` of every segment, the last one's next being unbounded."""
        return itertools.pairwise([*self.bases, _NO_LIMIT])

    def _checkpointed_offset(self, name: str) -> int:
        """This partition's entry in the log dir's checkpoint file ``name``; 0 when absent or unreadable (logged),
        as Kafka falls back."""
        checkpoint = self.directory.parent / name
        if checkpoint.is_file():
            try:
                return OffsetCheckpointFile(checkpoint).read().get(self.tp, 0)
            except StorageFormatError as err:
                log.warning("ignoring %s: %s", checkpoint, err)
        return 0

    def _log_start_offset(self) -> int:
        return max(self.bases[0], self._checkpointed_offset(LOG_START_OFFSET_CHECKPOINT_FILE))

    def log_end_offset(self) -> int:
        if self._leo is None:
            self._leo = self.segment(self.bases[-1]).read_next_offset()
        return self._leo

    def _resolve(self, spec: OffsetSpec, log_start: int) -> int:
        if spec.timestamp is not None:
            found = self._offset_for_timestamp(spec.timestamp, log_start)
            return self.log_end_offset() if found is None else found
        if spec.offset == EARLIEST:
            return log_start
        if spec.offset == LATEST:
            leo = self.log_end_offset()
            return self._last_stable_offset(leo) if self.options.read_committed else leo
        return spec.offset

    def _offset_for_timestamp(self, timestamp: int, log_start: int) -> int | None:
        """Kafka's ``fetchOffsetByTimestamp``: the first segment whose largest timestamp reaches ``timestamp``,
        then its time and offset indexes. O(segments opened x log n)."""
        for index, base in enumerate(self.bases):
            if self._largest_timestamp(base, index == len(self.bases) - 1) >= timestamp:
                found = self.segment(base).find_offset_by_timestamp(timestamp, max(base, log_start))
                if found is not None:
                    return found.offset
        return None

    def _largest_timestamp(self, base: int, last: bool) -> int:
        segment = self.segment(base)
        entry = segment.time_index.last_entry
        if last or entry.timestamp < 0:
            # The active segment's index lags its data; an empty index says nothing: read the tail.
            return segment.read_largest_timestamp().timestamp
        return entry.timestamp

    def _may_hold_timestamp(self, base: int, last: bool) -> bool:
        minimum = self.bounds.min_timestamp
        return minimum is None or self._largest_timestamp(base, last) >= minimum

    def _last_stable_offset(self, leo: int) -> int:
        """The first offset of the earliest transaction still open at the log end (Kafka's LSO), from the newest
        producer snapshot at or below the end plus the batches after it. O(bytes after the snapshot)."""
        snapshots = sorted(
            (offset_from_file_name(path.name), path)
            for path in self.directory.iterdir()
            if path.name.endswith(SNAPSHOT_SUFFIX)
        )
        ongoing: dict[int, int] = {}
        replay_from = self.bases[0]
        for offset, path in reversed(snapshots):
            if offset > leo:
                continue
            try:
                snapshot = read_producer_snapshot(path)
            except StorageFormatError as err:
                log.warning("ignoring producer snapshot %s: %s", path, err)
                continue
            ongoing = {
                entry.producer_id: entry.current_txn_first_offset
                for entry in snapshot.entries
                if entry.current_txn_first_offset >= 0
            }
            replay_from = offset
            break
        for base, next_base in self._segment_ranges():
            if next_base <= replay_from:
                continue
            segment = self.segment(base)
            located = segment.translate_offset(max(replay_from, base))
            if located is None:
                continue
            for found in segment.batches(located.position):
                batch = found.batch
                if batch.last_offset < replay_from or batch.magic < 2 or batch.producer_id < 0:
                    continue
                if batch.is_control:
                    ongoing.pop(batch.producer_id, None)
                elif batch.is_transactional:
                    ongoing.setdefault(batch.producer_id, batch.base_offset)
        return min(ongoing.values(), default=leo)

    def _aborted(self, start: int, end: int) -> tuple[AbortedRange, ...]:
        """Aborted transactions overlapping ``[start, end)``.

        Entries live in the ``.txnindex`` of the segment holding their marker, so every segment from the one
        holding ``start`` to the log end counts. A segment Kafka would recover on load (at or above the
        recovery point, unless the dir was shut down cleanly; every segment of a bare partition dir) may lack
        its entries, so its aborted transactions are rebuilt from the markers, as recovery would: a walk of
        batch headers that decodes only control batches. O(stat per segment + entries + rebuilt bytes).
        """
        rebuild_from = self._recovery_segment_base()
        found: list[AbortedRange] = []
        for base, next_base in self._segment_ranges():
            if next_base <= start or (rebuild_from is not None and base >= rebuild_from):
                continue
            path = transaction_index_file(self.directory, base)
            if path.is_file():
                with TransactionIndex(path, base, writable=False) as index:
                    found.extend(
                        AbortedRange(txn.producer_id, txn.first_offset, txn.last_offset)
                        for txn in index.all_aborted_txns()
                    )
        if rebuild_from is not None:
            found.extend(self._aborted_from_markers(rebuild_from))
        overlapping = {txn for txn in found if txn.last_offset >= start and txn.first_offset < end}
        return tuple(sorted(overlapping, key=lambda txn: (txn.first_offset, txn.producer_id)))

    def _recovery_segment_base(self) -> int | None:
        """Base of the first segment Kafka would recover when loading this dir, ``None`` after a clean
        shutdown."""
        if (self.directory.parent / CLEAN_SHUTDOWN_FILE).exists():
            return None
        recovery_point = self._checkpointed_offset(RECOVERY_POINT_CHECKPOINT_FILE)
        floor = bisect.bisect_right(self.bases, recovery_point) - 1
        return self.bases[max(floor, 0)]

    def _aborted_from_markers(self, from_base: int) -> list[AbortedRange]:
        snapshot = producer_snapshot_file(self.directory, from_base)
        open_txns: dict[int, int] = {}
        if snapshot.is_file():
            try:
                open_txns = {
                    entry.producer_id: entry.current_txn_first_offset
                    for entry in read_producer_snapshot(snapshot).entries
                    if entry.current_txn_first_offset >= 0
                }
            except StorageFormatError as err:
                log.warning("ignoring producer snapshot %s: %s", snapshot, err)
        tracker = TransactionTracker(open_txns)
        aborted: list[AbortedRange] = []
        for base in self.bases:
            if base < from_base:
                continue
            for found in self.segment(base).batches():
                if found.batch.magic < 2:
                    continue
                completed = tracker.on_batch(found.batch)
                if completed is not None and completed.is_aborted:
                    aborted.append(AbortedRange(completed.producer_id, completed.first_offset, completed.last_offset))
        return aborted

    # -- slicing ----------------------------------------------------------------------------------------------

    def _slice_segment(
        self, base: int, next_base: int, start: int, end: int, aborted: tuple[AbortedRange, ...]
    ) -> None:
        segment = self.segment(base)
        size = segment.size
        position = 0
        if start > base:
            located = segment.translate_offset(start)
            if located is None:
                return
            position = located.position
        if self.bounds.min_timestamp is not None:
            # Records before the time-index entry for the bound are older than it (Kafka's lookup rule).
            entry = segment.time_index.lookup(self.bounds.min_timestamp)
            if entry.offset > start:
                position = max(position, segment.offset_index.lookup(entry.offset).position)
        relevant = tuple(txn for txn in aborted if txn.last_offset >= start and txn.first_offset < end)
        template = SegmentSlice(
            self.tp.topic, self.tp.partition, str(self.directory), base, position, size, start, end,
            self.bounds.min_timestamp, self.options.read_committed, relevant,
            self.options.decode_limits(self.tp.topic),
        )
        keyed = self._key_ranges(segment, next_base, start, end, relevant)
        if keyed is not None:
            self.out.segments_key_pruned += 1
            for group in self._group_ranges([r for r in keyed if r[0] >= position]):
                self.out.slices.append(
                    replace(template, start_position=group[0][0], end_position=group[-1][1], ranges=tuple(group))
                )
            return
        for begin, finish in itertools.pairwise(self._cut_points(segment, position, size)):
            self.out.slices.append(replace(template, start_position=begin, end_position=finish))

    def _key_ranges(
        self, segment: LogSegment, next_base: int, start: int, end: int, aborted: tuple[AbortedRange, ...]
    ) -> list[tuple[int, int]] | None:
        """The byte ranges of the batches holding a record with a pushed key at an offset in ``[start, end)``,
        plus, under read_committed, the batches of the abort markers of ``aborted`` begun before a kept record
        (the reader must see them to end an aborted transaction); ``None`` when no key was pushed or the segment's key index does not cover
        the range (the segment is then read in full). One range per batch, ascending. O(index chains + batches
        read)."""
        keys = self.bounds.keys
        if keys is None:
            return None
        base = segment.base_offset
        stop = self.log_end_offset() if next_base == _NO_LIMIT else next_base
        try:
            with KeyIndexReader(key_index_file(self.directory, base)) as reader:
                header = reader.header
        except (OSError, StorageFormatError):
            return None
        # Up to date: of this segment, from the range's first offset, up to the range's end or the segment's,
        # and not ahead of the log (a file left by a crash or written before a truncation).
        if header.base_offset != base or header.start_offset > start or not min(end, stop) <= header.next_offset <= stop:
            return None
        found: dict[int, tuple[int, int]] = {}  # last offset -> (position, size) of every batch read

        limits = self.options.decode_limits(self.tp.topic)

        def read(low: int, high: int, max_bytes: int) -> Iterator[tuple[RecordBatch, Iterator[Record]]]:
            # Never past ``end``: query_segments reads only the batches the index names, nothing else is scanned.
            located = segment.translate_offset(low) if low < min(high, end) else None
            if located is None:
                return
            for item in segment.batches(located.position):
                if item.batch.base_offset >= min(high, end):
                    return
                found[item.batch.last_offset] = (item.position, item.size_in_bytes)
                # The records CRC-checked and within the topic's limits: a damaged batch raises, naming its file.
                yield item.batch, item.iter_records(limits)

        try:
            offsets = sorted(
                record.offset
                for key in keys
                for record in query_segments(
                    self.directory, [(base, stop)], read, key, log_start=start, max_records=_NO_LIMIT
                )
                if record.offset < end
            )
        except StorageFormatError as err:
            # A damaged candidate batch: the executors read the segment and apply failOnCorruption to it.
            log.warning("key index pruning skipped for %s: %s", log_file(self.directory, base), err)
            return None
        last_offsets = sorted(found)
        ranges = {found[last_offsets[bisect.bisect_left(last_offsets, offset)]] for offset in offsets}
        for txn in aborted:
            # Only a transaction begun by the last kept record can decide whether a kept record is aborted.
            if base <= txn.last_offset < stop and offsets and txn.first_offset <= offsets[-1]:
                marker = segment.translate_offset(txn.last_offset)
                if marker is not None:
                    ranges.add((marker.position, marker.size))
        return [(position, position + length) for position, length in sorted(ranges)]

    def _group_ranges(self, ranges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
        """Batch ``ranges`` (ascending) in groups of at most ``maxBytesPerPartition`` bytes (or one batch), the
        adjacent ones of a group coalesced. O(n)."""
        groups: list[list[tuple[int, int]]] = []
        total = 0
        for start, end in ranges:
            if not groups or total + end - start > self.options.max_bytes_per_partition:
                groups.append([])
                total = 0
            group = groups[-1]
            if group and group[-1][1] == start:
                group[-1] = (group[-1][0], end)
            else:
                group.append((start, end))
            total += end - start
        return groups

    def _cut_points(self, segment: LogSegment, start: int, size: int) -> list[int]:
        """``start``, batch starts from the offset index about every ``maxBytesPerPartition`` bytes, ``size``."""
        limit = self.options.max_bytes_per_partition
        cuts = [start]
        if size - start > limit:
            index = segment.offset_index
            slots = range(index.entries)
            while True:
                # Index entries ascend by position too: binary search for the next batch start past the limit.
                slot = bisect.bisect_left(slots, cuts[-1] + limit, key=lambda n: index.entry(n).position)
                if slot >= index.entries:
                    break
                position = index.entry(slot).position
                if size - position <= 0:
                    break
                cuts.append(position)
        cuts.append(size)
        return cuts


# -- reading ------------------------------------------------------------------------------------------------


@dataclass
class SliceStats:
    """What reading a slice did: batches decoded, skipped as corrupt, and rows produced."""

    batches: int = 0
    corrupt_batches: int = 0
    rows: int = 0


def read_slice(
    piece: SegmentSlice,
    columns: OutputColumns,
    *,
    fail_on_corruption: bool = True,
    stats: SliceStats | None = None,
) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of one slice (see the module docstring for the rules). O(bytes of the slice).

    With ``fail_on_corruption`` a bad batch raises :class:`CorruptRecordError` naming the ``.log`` and the byte
    position; otherwise the batch is skipped, logged and counted in ``stats`` (a batch whose length field is
    damaged ends the slice: nothing after it can be framed).
    """
    stats = stats if stats is not None else SliceStats()
    path = piece.log_path
    decoder = ColumnarDecoder(
        str(path), piece.topic, piece.partition, columns, min_offset=piece.start_offset, max_offset=piece.end_offset
    )
    pending_aborted = [(txn.first_offset, txn.producer_id) for txn in piece.aborted]
    heapq.heapify(pending_aborted)
    aborted_producers: set[int] = set()

    def skip(err: StorageFormatError) -> None:
        if fail_on_corruption:
            raise err
        stats.corrupt_batches += 1
        log.warning("skipping corrupt batch: %s", err)

    def flush() -> Iterator[pa.RecordBatch]:
        dropped = decoder.dropped
        out = decoder.flush(skip_corrupt=not fail_on_corruption)
        stats.corrupt_batches += decoder.dropped - dropped
        if out is not None:
            stats.rows += out.num_rows
            yield out

    segment = LogSegment.open(piece.partition_dir, piece.base_offset, writable=False)
    try:
        batches = itertools.chain.from_iterable(segment.log.batches(low, high) for low, high in piece.byte_ranges)
        while True:
            try:
                found = next(batches)
            except StopIteration:
                break
            except StorageFormatError as err:
                skip(err if err.path else err.at(str(path)))
                break
            batch = found.batch
            if batch.magic < 2:
                if batch.last_offset < piece.start_offset:
                    continue
                try:
                    batch.ensure_valid()
                    if decoder.pending_rows and not decoder.holds_legacy:
                        yield from flush()
                    # A wrapper may hold millions of messages: they are queued (and flushed) in slices.
                    records = batch.iter_records(piece.limits, check_crc=False)
                    while chunk := list(itertools.islice(records, TARGET_ROWS)):
                        decoder.add_legacy(batch, chunk)
                        if decoder.pending_rows >= TARGET_ROWS:
                            yield from flush()
                except StorageFormatError as err:
                    skip(err if err.path else err.at(str(path), position_base=found.position))
                    continue
                stats.batches += 1
                if batch.last_offset >= piece.end_offset - 1:
                    break
                continue
            if batch.base_offset >= piece.end_offset:
                break
            if batch.last_offset < piece.start_offset:
                continue
            try:
                batch.ensure_valid()
            except StorageFormatError as err:
                skip(err.at(str(path), position_base=found.position))
                continue
            if piece.read_committed and batch.producer_id >= 0:
                while pending_aborted and pending_aborted[0][0] <= batch.last_offset:
                    aborted_producers.add(heapq.heappop(pending_aborted)[1])
                if batch.is_control:
                    if batch.producer_id in aborted_producers and _is_abort_marker(batch):
                        aborted_producers.discard(batch.producer_id)
                    continue
                if batch.is_transactional and batch.producer_id in aborted_producers:
                    continue
            if batch.is_control:
                continue  # Kafka's consumer never returns control records
            if piece.min_timestamp is not None and batch.max_timestamp < piece.min_timestamp:
                continue
            try:
                if decoder.holds_legacy:
                    yield from flush()
                assert isinstance(batch, DefaultRecordBatch)
                small = _small_region(batch)
                if small is not None:
                    decoder.add(batch, small, position=found.position)
                else:
                    # One batch larger than an Arrow batch (tens of millions of records, or a huge record): its
                    # records are framed one at a time and decoded in slices, within the decode limits.
                    for region, count in batch.record_slices(
                        piece.limits, max_slice_records=TARGET_ROWS, max_slice_bytes=TARGET_BYTES
                    ):
                        decoder.add(batch, region, position=found.position, count=count)
                        if decoder.pending_rows >= TARGET_ROWS or decoder.pending_bytes >= TARGET_BYTES:
                            yield from flush()
            except StorageFormatError as err:
                skip(err if err.path else err.at(str(path), position_base=found.position))
                continue
            stats.batches += 1
            if decoder.pending_rows >= TARGET_ROWS or decoder.pending_bytes >= TARGET_BYTES:
                yield from flush()
        yield from flush()
    finally:
        segment.close()


def _small_region(batch: DefaultRecordBatch) -> bytes | memoryview | None:
    """The batch's records region when it fits one Arrow batch (the columnar decoder frames it vectorised), None
    when it does not: more than ``TARGET_ROWS`` records or ``TARGET_BYTES`` bytes decompressed. O(region), and
    O(TARGET_BYTES) memory at most."""
    if batch.records_count > TARGET_ROWS:
        return None
    if batch.compression is CompressionType.NONE:
        return batch.records_region() if batch.size_in_bytes <= TARGET_BYTES else None
    try:
        return batch.decompressed_records_region(max_size=TARGET_BYTES)
    except RecordTooLargeError:
        return None


def _is_abort_marker(batch: RecordBatch) -> bool:
    records = batch.records()
    return bool(records) and ControlRecordType.parse(records[0].key) is ControlRecordType.ABORT
