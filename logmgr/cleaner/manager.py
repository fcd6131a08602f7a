"""Kafka's ``LogCleanerManager``: which compacted log to clean next, its cleanable range, the
``cleaner-offset-checkpoint`` files and the per-partition cleaning states.

The range (``cleanableOffsets``): the first dirty offset is the checkpointed offset, reset to the log start offset
when it is below it or above the log end; the first uncleanable offset is the smallest of the last stable offset
(bounded by the high watermark), the active segment's base and, with ``min.compaction.lag.ms``, the base of the
first dirty segment holding a record younger than the lag; it is then rounded down to the base of the segment
holding it, which bounds the pass (Kafka's ``LogToClean.firstUncleanableOffset``). The dirty ratio is
``cleanable bytes / (clean bytes + cleanable bytes)`` counted in whole segments; a log is cleanable when the ratio
exceeds ``min.cleanable.dirty.ratio``, or when it has cleanable bytes and a dirty record older than
``max.compaction.lag.ms`` (forced). The dirtiest log goes first.

States (``LogCleaningState``): a partition being cleaned is ``in_progress``; :meth:`abort_and_pause` (deletion or
truncation of the log) asks a running pass to stop and waits until it has, then keeps the partition paused
(counted: pauses nest) until :meth:`resume`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkpoints.offset_checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from logmgr.config import LogConfig
from logmgr.errors import LogmgrError
from segments.errors import StorageFormatError
from segments.naming import TopicPartition

logger = logging.getLogger("logmgr.cleaner")


@dataclass(frozen=True, slots=True)
class SegmentStat:
    """What the range and ratio rules read of one segment."""

    base_offset: int
    size: int
    largest_timestamp: int
    first_batch_timestamp: int


@dataclass(frozen=True, slots=True)
class OffsetsToClean:
    """Kafka's ``OffsetsToClean``: the cleanable range and whether the checkpoint had to be reset."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    force_update_checkpoint: bool = False


@dataclass(frozen=True, slots=True)
class LogToClean:
    """Kafka's ``LogToClean``: a compacted log's clean and cleanable bytes (whole segments), the pass's upper bound
    (``first_uncleanable_offset``, a segment base) and whether its ``max.compaction.lag.ms`` forces a clean."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Dirty share of the cleanable part of the log (0 for an empty log). O(1)."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "firstDirtyOffset": self.first_dirty_offset,
            "firstUncleanableOffset": self.first_uncleanable_offset,
            "cleanBytes": self.clean_bytes,
            "cleanableBytes": self.cleanable_bytes,
            "dirtyRatio": round(self.cleanable_ratio, 6),
            "forced": self.needs_compaction_now,
        }


def cleanable_offsets(
    segments: Sequence[SegmentStat],
    *,
    log_start_offset: int,
    log_end_offset: int,
    last_stable_offset: int,
    checkpoint: int | None,
    config: LogConfig,
    now_ms: int,
) -> OffsetsToClean:
    """Kafka's ``cleanableOffsets`` (see the module doc). ``segments`` are oldest first, the active one last.
    O(segments)."""
    checkpointed = log_start_offset if checkpoint is None else checkpoint
    force = checkpointed < log_start_offset or checkpointed > log_end_offset
    first_dirty = log_start_offset if force else checkpointed
    candidates = [last_stable_offset, segments[-1].base_offset]
    if config.min_compaction_lag_ms > 0:
        for segment in _non_active_from(segments, first_dirty):
            if segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                candidates.append(segment.base_offset)
                break
    return OffsetsToClean(first_dirty, min(candidates), force)


def _segments_from(segments: Sequence[SegmentStat], offset: int) -> list[SegmentStat]:
    """The segments from the one holding ``offset`` (its floor) on."""
    start = 0
    for index, segment in enumerate(segments):
        if segment.base_offset <= offset:
            start = index
    return list(segments[start:])


def _segments_between(segments: Sequence[SegmentStat], from_offset: int, to_offset: int) -> list[SegmentStat]:
    """Kafka's ``logSegments(from, to)``: from the floor of ``from`` (or the first), every segment based below
    ``to``."""
    if to_offset <= from_offset:
        return []
    return [s for s in _segments_from(segments, from_offset) if s.base_offset < to_offset]


def _non_active_from(segments: Sequence[SegmentStat], offset: int) -> list[SegmentStat]:
    """Kafka's ``nonActiveLogSegmentsFrom``: ``logSegments(offset, active base)``."""
    return _segments_between(segments, offset, segments[-1].base_offset)


def max_compaction_delay(segments: Sequence[SegmentStat], first_dirty: int, config: LogConfig, now_ms: int) -> int:
    """Kafka's ``maxCompactionDelay``: how long past ``max.compaction.lag.ms`` the oldest dirty record is (0: not
    due). O(segments)."""
    stamps = [s.first_batch_timestamp for s in _non_active_from(segments, first_dirty) if s.first_batch_timestamp > 0]
    if not stamps:
        return 0
    clean_until = now_ms - max(config.max_compaction_lag_ms, 0)
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(
    tp: TopicPartition, segments: Sequence[SegmentStat], offsets: OffsetsToClean, config: LogConfig, now_ms: int
) -> LogToClean:
    """The clean/cleanable bytes of ``segments`` for ``offsets`` (Kafka's ``LogToClean`` and
    ``calculateCleanableBytes``): the uncleanable offset is rounded down to its segment's base, which bounds the
    pass too, so the segment holding the last stable offset (or the high watermark) is never rewritten. O(segments)."""
    first_dirty = offsets.first_dirty_offset
    clean_bytes = sum(s.size for s in _segments_between(segments, -1, first_dirty))
    holding = _non_active_from(segments, offsets.first_uncleanable_offset)
    first_uncleanable = holding[0].base_offset if holding else segments[-1].base_offset
    cleanable_bytes = sum(s.size for s in _segments_between(segments, min(first_dirty, first_uncleanable), first_uncleanable))
    forced = max_compaction_delay(segments, first_dirty, config, now_ms) > 0
    return LogToClean(tp, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, forced)


def is_cleanable(ltc: LogToClean, config: LogConfig) -> bool:
    """Kafka's selection filter: forced with cleanable bytes, or a dirty ratio above the minimum. O(1)."""
    return (ltc.needs_compaction_now and ltc.cleanable_bytes > 0) or ltc.cleanable_ratio > config.min_cleanable_dirty_ratio


_CHECKPOINT_UPDATES = threading.Lock()
"""Guards the read-modify-write of every ``cleaner-offset-checkpoint`` of the process, as the lock of Kafka's
LogCleanerManager does: two cleaner threads finishing logs of one dir must neither lose each other's entry nor
share the temporary file."""


class CleanerCheckpoints:
    """One log dir's ``cleaner-offset-checkpoint`` (Kafka's offset-checkpoint format, version 0). An unreadable
    file reads as empty, as Kafka's ``allCleanerCheckpoints`` logs and carries on."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / CLEANER_OFFSET_CHECKPOINT_FILE
        self._file = OffsetCheckpointFile(self.path)

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed first dirty offsets. O(file)."""
        try:
            return dict(self._file.read())
        except FileNotFoundError:
            return {}
        except (StorageFormatError, OSError) as err:
            logger.warning("%s is unreadable (%s): every compacted log of the dir is cleaned from its start", self.path, err)
            return {}

    def update(self, updates: Mapping[TopicPartition, int], *, remove: Iterable[TopicPartition] = ()) -> None:
        """Write the file with ``updates`` applied and ``remove`` dropped; other entries stay. Serialized with every
        other update of the process (``_CHECKPOINT_UPDATES``). O(entries)."""
        with _CHECKPOINT_UPDATES:
            current = self.read()
            current.update(updates)
            for tp in remove:
                current.pop(tp, None)
            self._file.write(dict(sorted(current.items(), key=lambda kv: str(kv[0]))))


class LogCleaningAbortedByRequest(LogmgrError):
    """Raised inside a pass whose partition was asked to stop (:meth:`LogCleanerManager.abort_and_pause`)."""


class LogCleanerManager:
    """The states of the partitions of every log dir: ``in_progress``, ``aborted`` (asked to stop), paused (a
    count). Thread-safe. O(1) per call but the waits."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._in_progress: dict[TopicPartition, str] = {}
        self._paused: dict[TopicPartition, int] = {}
        # Test hook: set when abort_and_pause finds a pass in progress and blocks until it ends, so a test holding
        # that pass inside its loop can release it exactly once the abort was asked for (no sleep). Set under the
        # condition's lock, which the pass needs to see the request: it cannot end between the set and the wait.
        self.abort_waiting = threading.Event()

    def try_start(self, tp: TopicPartition) -> bool:
        """Mark ``tp`` in progress unless it is paused or already cleaned. O(1)."""
        with self._lock:
            if tp in self._in_progress or self._paused.get(tp, 0) > 0:
                return False
            self._in_progress[tp] = "in_progress"
            return True

    def done(self, tp: TopicPartition) -> None:
        """End ``tp``'s pass (completed or aborted) and wake the waiters. O(1)."""
        with self._lock:
            self._in_progress.pop(tp, None)
            self._lock.notify_all()

    def check_done(self, tp: TopicPartition) -> None:
        """Raise :class:`LogCleaningAbortedByRequest` if ``tp``'s pass was asked to stop (Kafka's ``checkDone``).
        O(1)."""
        with self._lock:
            if self._in_progress.get(tp) == "aborted":
                raise LogCleaningAbortedByRequest(f"cleaning of {tp} was aborted")

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop a running pass of ``tp`` (waiting for it) and pause ``tp`` until :meth:`resume`. O(1) + wait."""
        with self._lock:
            if tp in self._in_progress:
                self._in_progress[tp] = "aborted"
            self._paused[tp] = self._paused.get(tp, 0) + 1
            while tp in self._in_progress:
                self.abort_waiting.set()
                self._lock.wait()

    def resume(self, tp: TopicPartition) -> None:
        """Undo one :meth:`abort_and_pause`. O(1)."""
        with self._lock:
            count = self._paused.get(tp, 0) - 1
            if count > 0:
                self._paused[tp] = count
            else:
                self._paused.pop(tp, None)

    def state(self, tp: TopicPartition) -> str | None:
        """``in_progress``, ``aborted``, ``paused(n)`` or None. O(1)."""
        with self._lock:
            if tp in self._in_progress:
                return self._in_progress[tp]
            count = self._paused.get(tp, 0)
            return f"paused({count})" if count else None
