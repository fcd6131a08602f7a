"""The plan of ``logmgr compact``: one cleaning pass of Kafka's LogCleaner over each compacted log of a dir,
offline.

:func:`plan_compact` reads only. For each partition whose topic's ``cleanup.policy`` contains ``compact`` it
computes Kafka's cleanable range (:mod:`logmgr.cleaner.manager`; the last stable offset from a header walk of the
transactions and the checkpointed high watermark, the first dirty offset from ``cleaner-offset-checkpoint``) and,
when there are cleanable bytes, runs the pass into a :class:`~logmgr.cleaner.cleaner.CountingOutput`: the
cleaner's own decisions, counted, with nothing written anywhere (no temporary dir either). The plan then states
exactly which segments are cleaned in which groups, the bytes of each group before and after (the bytes
reclaimed), the batches and records kept and removed, and the dirty ratio. The real run applies
:class:`CompactLog` (the same pass at the same instant, so the same bytes, checked against the plan's figures)
and rewrites the ``cleaner-offset-checkpoint`` entry. The counted passes and the real passes of one command
share one throttler at ``log.cleaner.io.max.bytes.per.second`` (read plus written bytes), as Kafka's cleaner
threads share theirs: many small logs cannot each take a period's allowance.

A broker keeps producer state in its snapshots; offline, the last batch of every producer id seen in the log
is kept (Kafka keeps those of the producers still active, a subset), so no producer state is lost.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from checkpoints.atomic import fsync_dir
from checkpoints.offset_checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, parse_offset_checkpoint
from logmgr.cleaner.cleaner import (
    SEGMENT_FILES,
    CleanedOutput,
    Cleaner,
    CleanerStats,
    CountingOutput,
    LastRecord,
    Throttler,
)
from logmgr.cleaner.manager import LogToClean, SegmentStat, cleanable_offsets, is_cleanable, log_to_clean
from logmgr.cleaner.offset_map import SkimpyOffsetMap
from logmgr.config import BrokerConfig, LogConfig
from logmgr.errors import KafkaStorageError, PlanError, PlanStaleError
from logmgr.offline.checkpoint_edit import offset_checkpoint_rewrite
from logmgr.offline.plan import DERIVED, Action, LogDirPlan, PartitionPlan, Tree
from logmgr.offline.scan import CheckpointView, LogDirView, PartitionView, read_regular_file
from logmgr.topic_configs import EffectiveTopicConfig
from segments.log_segment import LogSegment
from segments.naming import (
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    TopicPartition,
    filename_prefix_from_offset,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from segments.transaction_index import AbortedTxn
from segments.transactions import TransactionTracker

_SEGMENT_MAKERS = (log_file, offset_index_file, time_index_file, transaction_index_file)


def _segment_names(base_offset: int, suffix: str = "") -> list[str]:
    return [make(Path(), base_offset, suffix).name for make in _SEGMENT_MAKERS]


class OfflineSource:
    """A partition dir opened read-only as a :class:`~logmgr.cleaner.cleaner.CleanSource`; the cleaned groups a
    real pass writes there are swapped in with Kafka's protocol."""

    def __init__(self, partition_dir: Path, tp: TopicPartition, config: LogConfig) -> None:
        self._dir = partition_dir
        self._tp = tp
        self._config = config
        self.segments = [
            LogSegment.open(partition_dir, base, writable=False, max_index_size=config.segment_index_bytes)
            for base in sorted(
                int(p.name[: -len(".log")]) for p in partition_dir.iterdir() if p.name.endswith(".log") and p.name[:-4].isdigit()
            )
        ]
        self._last_records: dict[int, LastRecord] | None = None

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def config(self) -> LogConfig:
        return self._config

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def segments_between(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        if to_offset <= from_offset:
            return []
        floor = max((s.base_offset for s in self.segments if s.base_offset <= from_offset), default=None)
        return [s for s in self.segments if (floor is None or s.base_offset >= floor) and s.base_offset < to_offset]

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        collected: list[AbortedTxn] = []
        for segment in self.segments_between(start, 1 << 62):
            result = segment.collect_aborted_txns(start, upper)
            collected.extend(result.aborted)
            if result.is_complete:
                break
        return collected

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        if self._last_records is None:
            found: dict[int, LastRecord] = {}
            for segment in self.segments:
                for item in segment.batches():
                    batch = item.batch
                    if batch.producer_id < 0:
                        continue
                    previous = found.get(batch.producer_id)
                    same_epoch = previous is not None and previous.producer_epoch == batch.producer_epoch
                    data = None if batch.is_control else batch.last_offset
                    if data is None and same_epoch:
                        assert previous is not None
                        data = previous.last_data_offset
                    found[batch.producer_id] = LastRecord(data, batch.producer_epoch)
            self._last_records = found
        return self._last_records

    def hold(self, segment: LogSegment) -> AbstractContextManager[LogSegment]:
        return nullcontext(segment)

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> None:
        directory = self._dir
        try:
            cleaned.rename_with_suffix(SWAP_SUFFIX)
            fsync_dir(directory)
            for segment in old:
                segment.close()
                for name in _segment_names(segment.base_offset):
                    path = directory / name
                    if path.exists():
                        os.replace(path, directory / (name + DELETED_SUFFIX))
            fsync_dir(directory)
            cleaned.rename_with_suffix("")
            cleaned.close()
            fsync_dir(directory)
            for segment in old:
                for name in _segment_names(segment.base_offset):
                    (directory / (name + DELETED_SUFFIX)).unlink(missing_ok=True)
            fsync_dir(directory)
        except OSError as err:
            raise KafkaStorageError(f"{directory}: swap of cleaned segment {cleaned.base_offset} failed: {err}") from err


@dataclass(frozen=True)
class CompactLog(Action):
    """One cleaning pass over one partition (Kafka's ``doClean``): each group of segments is written as
    ``.cleaned``, renamed ``.swap``, the originals renamed ``.deleted`` and removed, the swap renamed to its final
    name; a crash at any step is completed or undone by a broker's (or logmgr's) loader."""

    kind: ClassVar[str] = "compact"
    partition: str
    topic_partition: TopicPartition
    config: LogConfig
    first_dirty_offset: int
    first_uncleanable_offset: int
    end_offset: int
    now_ms: int
    map_memory: int
    load_factor: float
    groups: tuple[tuple[int, ...], ...]
    """Base offsets of each group of segments cleaned into one."""
    group_bytes: tuple[int, ...]
    """Bytes of each group's cleaned ``.log``."""
    log_sizes: tuple[tuple[int, int], ...]
    """``(base offset, .log size)`` of every segment read, checked before acting."""
    batches_before: int
    batches_after: int
    records_before: int
    records_removed: int
    dirty_ratio: float
    reason: str
    throttler: Throttler = field(compare=False, repr=False)
    """The command's throttler (``log.cleaner.io.max.bytes.per.second``), shared by all its passes."""

    def describe(self) -> str:
        groups = "; ".join(
            "+".join(filename_prefix_from_offset(base) for base in group) + f" -> {size} B"
            for group, size in zip(self.groups, self.group_bytes, strict=True)
        )
        return (
            f"compact offsets [{self.first_dirty_offset}, {self.end_offset}) (dirty ratio {self.dirty_ratio:.3f}): "
            f"clean {len(self.log_sizes)} segment(s) into {len(self.groups)} ({groups}), "
            f"{self.bytes_before} B -> {self.bytes_after} B, {self.bytes_freed} B reclaimed, "
            f"{self.batches_after} of {self.batches_before} batch(es) and "
            f"{self.records_before - self.records_removed} of {self.records_before} record(s) kept"
            f"{self._throttled()}: {self.reason}"
        )

    def _throttled(self) -> str:
        rate = self.io_max_bytes_per_second
        return "" if rate is None else f", throttled to {rate:g} B/s"

    @property
    def io_max_bytes_per_second(self) -> float | None:
        """The throttle's rate (None: unthrottled, Kafka's default Double.MaxValue). O(1)."""
        return None if self.throttler.unthrottled else self.throttler.rate

    def fields(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "firstDirtyOffset": self.first_dirty_offset,
            "firstUncleanableOffset": self.first_uncleanable_offset,
            "endOffset": self.end_offset,
            "dirtyRatio": round(self.dirty_ratio, 6),
            "groups": [list(group) for group in self.groups],
            "groupBytes": list(self.group_bytes),
            "bytesBefore": self.bytes_before,
            "bytesAfter": self.bytes_after,
            "batchesBefore": self.batches_before,
            "batchesAfter": self.batches_after,
            "recordsBefore": self.records_before,
            "recordsRemoved": self.records_removed,
            "ioMaxBytesPerSecond": self.io_max_bytes_per_second,
        }

    @property
    def bytes_before(self) -> int:
        return sum(size for _, size in self.log_sizes)

    @property
    def bytes_after(self) -> int:
        return sum(self.group_bytes)

    @property
    def bytes_freed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)

    @property
    def bytes_written(self) -> int:
        return self.bytes_after

    def predict(self, tree: Tree) -> None:
        for group in self.groups:
            for base in group:
                for name in _segment_names(base):
                    tree.pop(f"{self.partition}/{name}", None)
            # The cleaned .log is what the pass writes (the dry run measured its size, not its bytes); its indexes
            # follow Kafka's append rule; a .txnindex exists only when an aborted transaction's marker stays.
            log_name, index_name, time_name, txn_name = _segment_names(group[0])
            for name in (log_name, index_name, time_name):
                tree[f"{self.partition}/{name}"] = DERIVED
            tree[f"{self.partition}/{txn_name}?"] = DERIVED

    def apply(self, log_dir: Path) -> None:
        directory = log_dir / self.partition
        for base, size in self.log_sizes:
            path = log_file(directory, base)
            try:
                found = os.lstat(path).st_size
            except FileNotFoundError:
                found = None
            if found != size:
                raise PlanStaleError(f"{path}: is no longer a file of {size} bytes since the plan was made; nothing more was applied (re-run to re-plan)")
        end, stats, _ = _clean(
            directory, self.topic_partition, self.config, self.first_dirty_offset, self.first_uncleanable_offset,
            self.now_ms, self.map_memory, self.load_factor, SEGMENT_FILES, self.throttler,
        )
        planned = (self.end_offset, self.bytes_after, self.batches_after, self.records_removed)
        done = (end, stats.bytes_written, stats.batches_written, stats.records_removed)
        if done != planned:
            raise PlanStaleError(
                f"{directory}: the pass (end offset, bytes, batches written, records removed) was {done}, the plan "
                f"said {planned}: the partition changed since the plan was made"
            )


def _clean(
    directory: Path,
    tp: TopicPartition,
    config: LogConfig,
    first_dirty: int,
    first_uncleanable: int,
    now_ms: int,
    memory: int,
    load_factor: float,
    output: CleanedOutput,
    throttler: Throttler,
) -> tuple[int, CleanerStats, tuple[tuple[int, int], ...]]:
    """One pass over the partition at ``directory`` into ``output``: the end offset, the stats and the
    ``(base offset, .log size)`` of every segment it read."""
    source = OfflineSource(directory, tp, config)
    try:
        end, stats = Cleaner(
            SkimpyOffsetMap(memory), load_factor=load_factor, throttler=throttler, output=output
        ).clean(
            source, first_dirty, first_uncleanable, now_ms
        )
        return end, stats, tuple((s.base_offset, s.size) for s in source.segments_between(0, end))
    finally:
        source.close()


def _last_stable_offset(partition: PartitionView, directory: Path) -> int:
    """The first offset of the earliest open transaction (a header walk), bounded by the checkpointed high
    watermark (the log end offset without one)."""
    tracker = TransactionTracker()
    for segment in partition.segments:
        opened = LogSegment.open(directory, segment.base_offset, writable=False)
        try:
            for item in opened.batches():
                tracker.on_batch(item.batch)
        finally:
            opened.close()
    bound = partition.retention_snapshot().high_watermark
    unstable = tracker.first_unstable_offset()
    return bound if unstable is None else min(max(unstable, partition.log_start_offset), bound)


def _segment_stats(partition: PartitionView, directory: Path, config: LogConfig) -> list[SegmentStat]:
    stats = []
    for segment in partition.segments:
        first = -1
        if segment.log_size and config.max_compaction_lag_ms < (1 << 63) - 1:
            opened = LogSegment.open(directory, segment.base_offset, writable=False)
            try:
                head = next(iter(opened.batches()), None)
                first = -1 if head is None else head.batch.max_timestamp
            finally:
                opened.close()
        stats.append(SegmentStat(segment.base_offset, segment.log_size, segment.largest_timestamp, first))
    return stats


def plan_compact(
    view: LogDirView,
    resolve: Callable[[str], EffectiveTopicConfig],
    broker: BrokerConfig,
    now_ms: int,
    *,
    force: bool = True,
    notes: tuple[str, ...] = (),
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> LogDirPlan:
    """One cleaning pass over every compacted partition of ``view`` at ``now_ms`` (see the module doc); with
    ``force`` (the command's default) every log with cleanable bytes, else only those a broker's cleaner would
    pick (dirty ratio above ``min.cleanable.dirty.ratio`` or ``max.compaction.lag.ms`` due). Reads only (the
    pass is counted, not written). The counted passes and the actions' passes are throttled together to
    ``log.cleaner.io.max.bytes.per.second`` (``sleep`` and ``monotonic`` time the throttle). Raises :class:`PlanError` for a partition needing recovery.
    O(bytes of the compacted logs)."""
    damaged = [p for p in view.partitions if p.needs_recovery]
    if damaged:
        first = damaged[0]
        raise PlanError(
            f"{view.path / first.name}: {first.needs_recovery[0]}; a broker would recover it on load: run "
            "`logmgr recover` first"
        )
    raw = read_regular_file(view.path / CLEANER_OFFSET_CHECKPOINT_FILE)
    checkpoint = CheckpointView(
        CLEANER_OFFSET_CHECKPOINT_FILE, raw, parse_offset_checkpoint(raw or b"", view.path / CLEANER_OFFSET_CHECKPOINT_FILE)
    )
    entries = dict(checkpoint.entries)
    memory = min(broker.log_cleaner_dedupe_buffer_size // max(1, broker.log_cleaner_threads), (1 << 31) - 1)
    load_factor = broker.log_cleaner_io_buffer_load_factor
    throttler = Throttler(broker.log_cleaner_io_max_bytes_per_second, sleep=sleep, monotonic=monotonic)
    partitions: list[PartitionPlan] = []
    for partition in view.partitions:
        tp = partition.topic_partition
        effective = resolve(tp.topic)
        config = effective.config
        if not config.compact:
            continue
        policy = f"cleanup.policy={','.join(config.cleanup_policy)} ({effective.sources['cleanup.policy']})"
        if not partition.segments:
            partitions.append(PartitionPlan(partition.name, (), (f"{policy}: no segment",)))
            continue
        directory = view.path / partition.name
        stats = _segment_stats(partition, directory, config)
        offsets = cleanable_offsets(
            stats,
            log_start_offset=partition.log_start_offset,
            log_end_offset=partition.log_end_offset,
            last_stable_offset=_last_stable_offset(partition, directory),
            checkpoint=checkpoint.entries.get(tp),
            config=config,
            now_ms=now_ms,
        )
        ltc = log_to_clean(tp, stats, offsets, config, now_ms)
        summary = (
            f"{policy}: dirty ratio {ltc.cleanable_ratio:.3f} ({ltc.cleanable_bytes} of {ltc.total_bytes} B "
            f"cleanable, min.cleanable.dirty.ratio={config.min_cleanable_dirty_ratio}), first dirty offset "
            f"{offsets.first_dirty_offset}, first uncleanable offset {offsets.first_uncleanable_offset}"
        )
        if ltc.cleanable_bytes == 0 or not (force or is_cleanable(ltc, config)):
            why = "nothing cleanable" if ltc.cleanable_bytes == 0 else "below min.cleanable.dirty.ratio"
            partitions.append(PartitionPlan(partition.name, (), (summary, f"not cleaned: {why}")))
            if offsets.force_update_checkpoint:
                entries[tp] = offsets.first_dirty_offset
            continue
        action = _simulate(partition, directory, tp, config, ltc, now_ms, memory, load_factor, throttler)
        if action.end_offset > offsets.first_dirty_offset:
            entries[tp] = action.end_offset
        partitions.append(PartitionPlan(partition.name, (action,), (summary,)))
    write = offset_checkpoint_rewrite(checkpoint, entries, "the cleaned range ends here (Kafka's cleaner checkpoint)")
    return LogDirPlan("compact", view.path, tuple(partitions), () if write is None else (write,), (), notes)


def _simulate(
    partition: PartitionView,
    directory: Path,
    tp: TopicPartition,
    config: LogConfig,
    ltc: LogToClean,
    now_ms: int,
    memory: int,
    load_factor: float,
    throttler: Throttler,
) -> CompactLog:
    """Run the pass into a counting output: the groups and figures the real run will produce, nothing written."""
    counted = CountingOutput()
    end, stats, sizes = _clean(
        directory, tp, config, ltc.first_dirty_offset, ltc.first_uncleanable_offset, now_ms, memory, load_factor, counted,
        throttler,
    )
    return CompactLog(
        partition.name,
        tp,
        config,
        ltc.first_dirty_offset,
        ltc.first_uncleanable_offset,
        end,
        now_ms,
        memory,
        load_factor,
        tuple(group.bases for group in counted.groups),
        tuple(group.size for group in counted.groups),
        sizes,
        stats.batches_read,
        stats.batches_written,
        stats.messages_read,
        stats.records_removed,
        ltc.cleanable_ratio,
        "Kafka's LogCleaner pass (latest record per key, expired tombstones and markers, aborted data removed)",
        throttler,
    )


def iter_compacted(plan: LogDirPlan) -> Iterator[CompactLog]:
    """The :class:`CompactLog` actions of ``plan``. O(actions)."""
    for action in plan.actions():
        if isinstance(action, CompactLog):
            yield action

