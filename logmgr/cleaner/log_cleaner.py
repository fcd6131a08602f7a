"""Kafka's ``LogCleaner`` for the LogManager: passes over every compacted log, the checkpoints, the metrics.

:meth:`LogCleaner.run_pass` cleans the compacted logs whose dirty ratio exceeds ``min.cleanable.dirty.ratio`` (or
whose ``max.compaction.lag.ms`` is due), dirtiest first, each once, by ``log.cleaner.threads``
:class:`~logmgr.cleaner.cleaner.Cleaner` workers (each with its share of ``log.cleaner.dedupe.buffer.size``),
throttled together to ``log.cleaner.io.max.bytes.per.second``; a log's ``cleaner-offset-checkpoint`` entry moves
to the end of its cleaned range. With ``limit`` it cleans only the dirtiest ``limit`` logs: the step of the
``kafka-log-cleaner`` job, which (as Kafka's ``CleanerThread.doWork``) takes the next step at once while a step
cleaned something and waits ``log.cleaner.backoff.ms`` only after one that did not
(:meth:`CleanerRunReport.progressed`). Without it, one full pass over every cleanable log
(``LogManager.run_job_now``). :meth:`LogCleaner.clean_log` cleans one log on demand, whatever its ratio.

A pass reads a live :class:`~logmgr.log.Log` without its lock (inactive segments do not change but by deletion
or truncation, both of which the swap detects) and publishes each cleaned group under the log's lock
(:class:`LiveLogSource`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoints.atomic import fsync_dir
from logmgr.cleaner.cleaner import Cleaner, CleanerStats, LastRecord, LogCleaningAbortedError, Throttler
from logmgr.cleaner.manager import (
    CleanerCheckpoints,
    LogCleanerManager,
    LogCleaningAbortedByRequest,
    LogToClean,
    SegmentStat,
    cleanable_offsets,
    is_cleanable,
    log_to_clean,
    max_compaction_delay,
)
from logmgr.cleaner.offset_map import SkimpyOffsetMap
from logmgr.clock import Clock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.log import Log
from segments.errors import SegmentClosedError
from segments.java_numbers import INT64_MAX
from segments.log_segment import LogSegment
from segments.naming import SWAP_SUFFIX, TopicPartition
from segments.transaction_index import AbortedTxn

logger = logging.getLogger("logmgr.cleaner")

_INT32_MAX = (1 << 31) - 1


def segment_stats(segments: list[LogSegment], config: LogConfig) -> list[SegmentStat]:
    """What the range and ratio rules read of ``segments`` (first batch timestamps only when
    ``max.compaction.lag.ms`` is set). O(segments)."""
    stats = []
    for segment in segments:
        first = -1
        if config.max_compaction_lag_ms < INT64_MAX:
            head = next(iter(segment.batches()), None)
            first = -1 if head is None else head.batch.max_timestamp
        try:
            largest = segment.largest_timestamp()
        except (FileNotFoundError, SegmentClosedError):
            # Deleted by retention since the listing (renamed, or closed for good): nothing of it is cleaned.
            largest = -1
        stats.append(SegmentStat(segment.base_offset, segment.size, largest, first))
    return stats


class LiveLogSource:
    """A live :class:`Log` as a :class:`~logmgr.cleaner.cleaner.CleanSource`."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._sizes: dict[int, int] = {}

    @property
    def dir(self) -> Path:
        return self.log.dir

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic_partition

    @property
    def config(self) -> LogConfig:
        return self.log.config

    def segments_between(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        if to_offset <= from_offset:
            return []
        floor = self.log.segments.floor_segment(from_offset) if from_offset >= 0 else None
        return self.log.segments.values(None if floor is None else floor.base_offset, to_offset)

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        collected: list[AbortedTxn] = []
        for segment in self.segments_between(start, 1 << 62):
            with self.hold(segment):
                if segment.log.closed:
                    raise LogCleaningAbortedError(f"{self.log.topic_partition}: segment {segment.base_offset} went away")
                result = segment.collect_aborted_txns(start, upper)
            collected.extend(result.aborted)
            if result.is_complete:
                break
        return collected

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        with self.log._lock:
            return {
                pid: LastRecord(entry.last_data_offset if entry.last_data_offset >= 0 else None, entry.producer_epoch)
                for pid, entry in self.log.producer_state.active_producers.items()
            }

    @contextmanager
    def _held(self, segment: LogSegment) -> Iterator[LogSegment]:
        with self.log.readers.hold(segment):
            if segment.log.closed:
                raise LogCleaningAbortedError(f"{self.log.topic_partition}: segment {segment.base_offset} went away")
            self._sizes.setdefault(id(segment), segment.size)
            yield segment

    def hold(self, segment: LogSegment) -> AbstractContextManager[LogSegment]:
        return self._held(segment)

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> None:
        """Kafka's ``replaceSegments`` under the log's lock: ``.cleaned`` -> ``.swap``, the swap into the segment
        map, the old segments out (renamed ``.deleted``, deleted after ``file.delete.delay.ms``, with the producer
        snapshots of those not replaced), ``.swap`` -> final names, fsync of the dir."""
        log = self.log
        with log._lock:
            if log._closed or log.is_offline:
                raise LogCleaningAbortedError(f"{log.topic_partition}: the log was closed during cleaning")
            for segment in old:
                if log.segments.get(segment.base_offset) is not segment or segment.size != self._sizes.get(id(segment)):
                    raise LogCleaningAbortedError(
                        f"{log.topic_partition}: segment {segment.base_offset} was deleted or truncated during cleaning"
                    )
            try:
                cleaned.rename_with_suffix(SWAP_SUFFIX)
                log.segments.add(cleaned)
                extras: list[tuple[Path, ...]] = []
                for segment in old:
                    if segment.base_offset != cleaned.base_offset:
                        log.segments.remove(segment.base_offset)
                        snapshot = log.producer_state.rename_snapshot_to_deleted(segment.base_offset)
                        extras.append(() if snapshot is None else (snapshot,))
                    else:
                        extras.append(())
                    segment.rename_to_deleted()
                for segment, extra in zip(old, extras, strict=True):
                    log.deleter.schedule(segment, log.config.file_delete_delay_ms, extra)
                cleaned.rename_with_suffix("")
                fsync_dir(log.dir)
            except OSError as err:
                raise log._io_failure(f"swap of cleaned segment {cleaned.base_offset}", err) from err


@dataclass(slots=True)
class LogCleanResult:
    """One log's outcome in a pass: the range, the stats, the dirty ratio before and after."""

    topic_partition: TopicPartition
    before: LogToClean
    after: LogToClean | None = None
    end_offset: int | None = None
    stats: CleanerStats | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": str(self.topic_partition),
            "firstDirtyOffset": self.before.first_dirty_offset,
            "endOffset": self.end_offset,
            "dirtyRatioBefore": round(self.before.cleanable_ratio, 6),
            "dirtyRatioAfter": None if self.after is None else round(self.after.cleanable_ratio, 6),
            **({} if self.stats is None else self.stats.to_json()),
            **({} if self.error is None else {"error": self.error}),
        }


@dataclass(slots=True)
class CleanerRunReport:
    """What one pass did, per log (``LogManager.run_job_now("kafka-log-cleaner")`` returns it)."""

    logs: list[LogCleanResult] = field(default_factory=list)

    @property
    def progressed(self) -> bool:
        """Whether some log's checkpoint moved (Kafka's ``cleaned``): an aborted or failed log, or a pass that
        could not get past its first dirty offset, is no reason to go on without backing off. O(logs)."""
        return any(
            r.error is None and r.end_offset is not None and r.end_offset > r.before.first_dirty_offset
            for r in self.logs
        )

    def to_json(self) -> dict[str, Any]:
        return {"logs": [result.to_json() for result in self.logs]}


class LogCleaner:
    """The cleaner of a LogManager's dirs. ``logs`` returns ``{log dir: its logs}`` when called. Thread-safe: passes
    are serialised."""

    def __init__(
        self,
        broker: BrokerConfig,
        logs: Callable[[], Mapping[Path, list[Log]]],
        clock: Clock,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker = broker
        self._logs = logs
        self.clock = clock
        self.manager = LogCleanerManager()
        self.throttler = Throttler(broker.log_cleaner_io_max_bytes_per_second, sleep=sleep, monotonic=monotonic)
        self._pass_lock = threading.Lock()
        self._maps: list[SkimpyOffsetMap] = []
        self._maps_lock = threading.Lock()
        self.last_run_ms: int | None = None
        self.last_report = CleanerRunReport()
        self.max_dirty_ratio = 0.0
        self.max_compaction_delay_ms = 0

    @property
    def threads(self) -> int:
        return max(1, self.broker.log_cleaner_threads)

    def _offset_map(self, worker: int) -> SkimpyOffsetMap:
        # Allocated on first use: a manager without compacted logs never pays for the dedupe buffer.
        with self._maps_lock:
            while len(self._maps) <= worker:
                memory = min(self.broker.log_cleaner_dedupe_buffer_size // self.threads, _INT32_MAX)
                self._maps.append(SkimpyOffsetMap(memory))
            return self._maps[worker]

    # -- selection ----------------------------------------------------------------------------------------------------

    def _to_clean(self, log: Log, checkpoint: int | None, now: int) -> tuple[LogToClean, bool]:
        config = log.config
        segments = segment_stats(log.segments.values(), config)
        offsets = cleanable_offsets(
            segments,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            last_stable_offset=log.last_stable_offset,
            checkpoint=checkpoint,
            config=config,
            now_ms=now,
        )
        self.max_compaction_delay_ms = max(
            self.max_compaction_delay_ms, max_compaction_delay(segments, offsets.first_dirty_offset, config, now)
        )
        return log_to_clean(log.topic_partition, segments, offsets, config, now), offsets.force_update_checkpoint

    def dirty_logs(self, *, all_compacted: bool = False) -> list[tuple[Path, Log, LogToClean]]:
        """The compacted logs to clean, dirtiest first (``all_compacted``: every compacted log with cleanable
        bytes, whatever its ratio). Resets checkpoints that fell outside their log. O(logs x segments)."""
        now = self.clock.time_ms()
        found: list[tuple[Path, Log, LogToClean]] = []
        self.max_compaction_delay_ms = 0
        max_ratio = 0.0
        for log_dir, logs in self._logs().items():
            checkpoints = CleanerCheckpoints(log_dir)
            saved = checkpoints.read()
            resets: dict[TopicPartition, int] = {}
            for log in logs:
                if not log.config.compact or log.is_offline or self.manager.state(log.topic_partition) is not None:
                    continue
                ltc, reset = self._to_clean(log, saved.get(log.topic_partition), now)
                if reset:
                    resets[log.topic_partition] = ltc.first_dirty_offset
                if ltc.total_bytes == 0:
                    continue
                max_ratio = max(max_ratio, ltc.cleanable_ratio)
                if (all_compacted and ltc.cleanable_bytes > 0) or is_cleanable(ltc, log.config):
                    found.append((log_dir, log, ltc))
            if resets:
                checkpoints.update(resets)
        self.max_dirty_ratio = max_ratio
        found.sort(key=lambda item: item[2].cleanable_ratio, reverse=True)
        return found

    # -- cleaning -----------------------------------------------------------------------------------------------------

    def run_pass(self, *, all_compacted: bool = False, limit: int | None = None) -> CleanerRunReport:
        """Clean every dirty compacted log once (only the dirtiest ``limit`` with it), dirtiest first, on
        ``log.cleaner.threads`` workers. Returns the per-log results (a log whose pass failed carries its error;
        the others go on). O(dirty bytes)."""
        with self._pass_lock:
            self.last_run_ms = self.clock.time_ms()
            todo = self.dirty_logs(all_compacted=all_compacted)[:limit]
            report = CleanerRunReport()
            if todo:
                workers = min(self.threads, len(todo))
                if workers == 1:
                    results = [self._clean_one(0, log_dir, log, ltc) for log_dir, log, ltc in todo]
                else:
                    # Each running task takes a free worker slot (its offset map) and gives it back.
                    free: queue.SimpleQueue[int] = queue.SimpleQueue()
                    for worker in range(workers):
                        free.put(worker)

                    def task(log_dir: Path, log: Log, ltc: LogToClean) -> LogCleanResult:
                        worker = free.get()
                        try:
                            return self._clean_one(worker, log_dir, log, ltc)
                        finally:
                            free.put(worker)

                    with ThreadPoolExecutor(workers, thread_name_prefix="kafka-log-cleaner-thread") as pool:
                        futures = [pool.submit(task, log_dir, log, ltc) for log_dir, log, ltc in todo]
                        results = [future.result() for future in futures]
                report.logs.extend(results)
                # Kafka's gauges read each thread's last cleaning: a step that found nothing leaves them as they were.
                self.last_report = report
            return report

    def clean_log(self, log_dir: Path, log: Log) -> LogCleanResult | None:
        """Clean ``log`` now whatever its dirty ratio (None: nothing cleanable, or paused). O(dirty bytes)."""
        with self._pass_lock:
            checkpoint = CleanerCheckpoints(log_dir).read().get(log.topic_partition)
            ltc, _ = self._to_clean(log, checkpoint, self.clock.time_ms())
            if ltc.cleanable_bytes == 0:
                return None
            return self._clean_one(0, log_dir, log, ltc)

    def _clean_one(self, worker: int, log_dir: Path, log: Log, ltc: LogToClean) -> LogCleanResult:
        tp = log.topic_partition
        result = LogCleanResult(tp, ltc)
        if not self.manager.try_start(tp):
            result.error = "paused"
            return result
        # One map per worker: workers never share one, as Kafka's threads each own theirs.
        cleaner = Cleaner(
            self._offset_map(worker),
            load_factor=self.broker.log_cleaner_io_buffer_load_factor,
            throttler=self.throttler,
            check_done=self.manager.check_done,
        )
        try:
            end_offset, stats = cleaner.clean(
                LiveLogSource(log), ltc.first_dirty_offset, ltc.first_uncleanable_offset, self.clock.time_ms()
            )
            result.end_offset, result.stats = end_offset, stats
            if end_offset > ltc.first_dirty_offset:
                CleanerCheckpoints(log_dir).update({tp: end_offset})
            result.after, _ = self._to_clean(log, max(end_offset, ltc.first_dirty_offset), self.clock.time_ms())
            logger.info(
                "%s cleaned up to %d: %d -> %d bytes, %d records removed in %.3f s", tp, end_offset,
                stats.bytes_read, stats.bytes_written, stats.records_removed, stats.duration_s,
            )
        except (LogCleaningAbortedError, LogCleaningAbortedByRequest) as err:
            result.error = f"aborted: {err}"
            logger.info("cleaning of %s aborted: %s", tp, err)
        finally:
            self.manager.done(tp)
        return result

    # -- lifecycle hooks ----------------------------------------------------------------------------------------------

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop cleaning ``tp`` (waiting for a running pass) until :meth:`resume`: before its deletion or
        truncation. O(1) + wait."""
        self.manager.abort_and_pause(tp)

    def resume(self, tp: TopicPartition) -> None:
        """Undo :meth:`abort_and_pause`. O(1)."""
        self.manager.resume(tp)

    def remove_checkpoint(self, log_dir: Path, tp: TopicPartition) -> None:
        """Drop ``tp``'s entry from ``log_dir``'s checkpoint (its log was deleted). O(entries)."""
        checkpoints = CleanerCheckpoints(log_dir)
        if tp in checkpoints.read():
            checkpoints.update({}, remove=(tp,))

    def move_checkpoint(self, source: Path, target: Path, tp: TopicPartition) -> None:
        """Kafka's ``alterCheckpointDir`` (first half): ``target``'s checkpoint gets ``tp``'s entry of ``source``,
        or loses a stale one when ``source`` has none; the caller drops ``source``'s once the log moved, so a crash
        in between leaves an entry only where the log may be. O(entries)."""
        offset = CleanerCheckpoints(source).read().get(tp)
        if offset is None:
            self.remove_checkpoint(target, tp)
        else:
            CleanerCheckpoints(target).update({tp: offset})

    def truncate_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int) -> None:
        """Kafka's ``maybeTruncateCheckpoint``: after ``tp``'s log was truncated, a checkpoint above ``offset`` (the
        base of its active segment) comes down to it, so the next pass re-reads what may have been rewritten.
        O(entries)."""
        checkpoints = CleanerCheckpoints(log_dir)
        current = checkpoints.read().get(tp)
        if current is not None and current > offset:
            checkpoints.update({tp: offset})

    # -- metrics ------------------------------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Kafka's cleaner gauges from the last pass that cleaned a log: ``max-dirty-percent``, ``cleaner-recopy-percent``,
        ``max-clean-time-secs``, ``max-buffer-utilization-percent``, ``max-compaction-delay-secs``,
        ``time-since-last-run-ms``. O(logs of the last pass)."""
        stats = [r.stats for r in self.last_report.logs if r.stats is not None]
        read = sum(s.bytes_read for s in stats)
        written = sum(s.bytes_written for s in stats)
        return {
            "max-dirty-percent": 100.0 * self.max_dirty_ratio,
            "cleaner-recopy-percent": 100.0 * written / read if read else 0.0,
            "max-clean-time-secs": max((s.duration_s for s in stats), default=0.0),
            "max-buffer-utilization-percent": 100.0 * max((s.buffer_utilization for s in stats), default=0.0),
            "max-compaction-delay-secs": self.max_compaction_delay_ms / 1000,
            "time-since-last-run-ms": float(
                0 if self.last_run_ms is None else max(0, self.clock.time_ms() - self.last_run_ms)
            ),
        }
