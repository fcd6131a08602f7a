"""The LogManager: every partition log of one or more log dirs, and the scheduled jobs that keep them.

Kafka's ``LogManager`` (format doc §5-§7), plus RocketMQ-style space management and durability: the three disk
tiers checked by their own job (``logmgr.disk.check.interval.ms``) from each dir's real used space, a daily delete
window, manual deletion (RocketMQ's ``executeDeleteFilesManually``) and "delete the N oldest" requests, throttled
and reader-safe physical deletion, and group commit (one flusher thread whose fsyncs concurrent appenders share).

Startup per log dir: take ``.lock`` (refusing a dir another process holds), note and remove the clean-shutdown
marker, remove the temporaries of interrupted checkpoint writes, read the recovery-point and log-start-offset
checkpoints, then load every partition dir on a thread pool (``num.recovery.threads.per.data.dir`` threads per
dir), recovering after an unclean shutdown. An I/O error in any of these steps (a full disk, a read-only remount, a
symbolic link where a file must be) takes only that dir offline, as Kafka's ``loadLogs`` does; startup fails, with
a :class:`KafkaStorageError`, only when no dir is left online. Shutdown: stop the jobs (waiting for running ones),
flush and close every log, write both checkpoints, then the clean-shutdown marker of each dir whose logs all
loaded.

Locks: ``LogManager._lock`` guards the maps of logs and dirs (create, delete, lookup); each log has its own writer
lock (:mod:`logmgr.log`); jobs run one instance each (the scheduler guarantees it) and take only the locks of
the logs they touch, one at a time.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from checkpoints.atomic import fsync_dir, remove_temporaries, sync_filesystem
from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE, CleanShutdownMarker
from checkpoints.meta_properties import META_PROPERTIES_FILE
from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from logmgr.cleaner.log_cleaner import CleanerRunReport, LogCleaner
from logmgr.clock import Clock, SystemClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.dir_lock import LogDirLock
from logmgr.errors import KafkaStorageError, LogmgrError
from logmgr.group_commit import GroupCommitService
from logmgr.key_index import KeyIndexDispatcher
from logmgr.log import Log
from logmgr.log_loader import load_log
from logmgr.log_move import COPY_CHUNK_BYTES, LogMove, LogMoveCancelledError, MoveEvent
from logmgr.retention import (
    DISK_TIER_OFF,
    DiskUsageState,
    LogSnapshot,
    PlannedDeletion,
    disk_tier_note,
    disk_usage_state,
    plan_disk_pressure,
    plan_manual_cleanup,
    plans_by_log,
    with_note,
)
from logmgr.scheduler import ApsScheduler, Scheduler
from logmgr.segment_deleter import DeletionRun, SegmentDeleter, SegmentReaders
from segments._native.append import LogDirState
from segments.errors import InvalidPartitionDirError, StorageFormatError
from segments.naming import PartitionDirName, TopicPartition, future_dir_name, validate_topic_partition

logger = logging.getLogger("logmgr.manager")

JOB_RETENTION = "kafka-log-retention"
JOB_FLUSHER = "kafka-log-flusher"
JOB_RECOVERY_POINT_CHECKPOINT = "kafka-recovery-point-checkpoint"
JOB_LOG_START_OFFSET_CHECKPOINT = "kafka-log-start-offset-checkpoint"
JOB_DELETE_LOGS = "kafka-delete-logs"
JOB_PRODUCER_EXPIRATION = "PeriodicProducerExpirationCheck"
JOB_LOG_CLEANER = "kafka-log-cleaner"
JOB_DISK_CHECK = "logmgr-disk-check"
JOB_ALTER_LOG_DIRS = "ReplicaAlterLogDirsThread"
"""Prefix of the one-shot job that resumes the move of a future log found at startup (``<prefix>-<topic>-<p>``)."""
MANUAL_DELETE_RUNS = 20
"""RocketMQ's ``MAX_MANUAL_DELETE_FILE_TIMES``: cleanup runs one :meth:`LogManager.execute_delete_files_manually`
opens the delete window for."""

_SKIPPED_DIRS = frozenset({"remote-log-index-cache"})
# The files at the top of a log dir that are written through a ``.tmp`` (atomic replace).
_LOG_DIR_ATOMIC_FILES = frozenset(
    {
        RECOVERY_POINT_CHECKPOINT_FILE,
        LOG_START_OFFSET_CHECKPOINT_FILE,
        REPLICATION_OFFSET_CHECKPOINT_FILE,
        CLEANER_OFFSET_CHECKPOINT_FILE,
        CLEAN_SHUTDOWN_FILE,
        META_PROPERTIES_FILE,
    }
)
_METADATA_TOPIC = "__cluster_metadata"

DiskUsage = Callable[[Path], tuple[int, int]]


def measure_disk_usage(path: Path) -> tuple[int, int]:
    """RocketMQ's ``UtilAll.getDiskPartitionSpaceUsedPercent`` as a fraction: the bytes used on ``path``'s file
    system (total minus free) and the bytes it can hold for us (used plus available: blocks reserved for root
    count as neither, as in ``df``). The default usage probe of :class:`LogManager` and ``logmgr cleanup``. O(1)."""
    usage = shutil.disk_usage(path)
    return usage.used, usage.used + usage.free


@dataclass(slots=True)
class LogDir:
    """One log dir: its lock (None when an I/O error kept it from being taken), its logs and what startup learned,
    including the temporaries it removed (partition dirs report theirs in each log's ``recovery.actions``)."""

    path: Path
    lock: LogDirLock | None
    state: LogDirState
    had_clean_shutdown: bool
    logs: dict[TopicPartition, Log] = field(default_factory=dict)
    future_logs: dict[TopicPartition, Log] = field(default_factory=dict)
    """The ``-future`` logs of moves into this dir (Kafka's ``futureLogs``), checkpointed and flushed with it."""
    loaded_all: bool = False
    recovery_points_written_ns: int | None = None
    """When startup found the recovery-point checkpoint last modified (None: missing), for the loader's clean path."""
    removed_temporaries: list[str] = field(default_factory=list)
    disk_state: DiskUsageState = "ok"
    """The disk tier its last usage check found."""
    disk_usage: tuple[int, int] | None = None
    """Bytes used and usable its last usage check measured (None: never measured, every tier off)."""


_LoadWork = tuple[LogDir, Path, PartitionDirName, LogConfig, int, int]
"""One log for startup to load: its dir, partition path and parsed directory name, config, recovery point, log
start offset."""


@dataclass(slots=True)
class CleanupReport:
    """What one ``cleanup_logs`` run deleted (or, for plans, would delete), per log."""

    deletions: dict[TopicPartition, list[PlannedDeletion]] = field(default_factory=dict)
    rolled: list[TopicPartition] = field(default_factory=list)
    future_deletions: dict[TopicPartition, list[PlannedDeletion]] = field(default_factory=dict)
    """What retention deleted from the future logs of moves (Kafka's cleanupLogs cleans them too)."""

    @property
    def bytes_freed(self) -> int:
        return sum(d.size for ds in (*self.deletions.values(), *self.future_deletions.values()) for d in ds)

    def add(self, tp: TopicPartition, deletions: Iterable[PlannedDeletion]) -> None:
        items = list(deletions)
        if items:
            self.deletions.setdefault(tp, []).extend(items)


@dataclass(slots=True)
class _PendingDirDeletion:
    path: Path
    due_ms: int


def _no_event(step: str) -> None:
    """A move nobody watches."""


class LogManager:
    """All logs of ``broker.log_dirs``; :meth:`startup` loads them and starts the jobs."""

    def __init__(
        self,
        broker: BrokerConfig,
        *,
        topic_overrides: Mapping[str, Mapping[str, str]] | None = None,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        disk_usage: DiskUsage = measure_disk_usage,
        progress: Callable[[int, int, TopicPartition], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        broker_epoch: int | None = None,
    ) -> None:
        self.broker = broker
        # Written into the clean-shutdown marker (Kafka 3.7+ JSON form); a standalone manager has none (-1).
        self.broker_epoch = -1 if broker_epoch is None else broker_epoch
        self.topic_overrides = {k: dict(v) for k, v in (topic_overrides or {}).items()}
        self.clock = clock or SystemClock()
        self.scheduler = scheduler or ApsScheduler(self.clock)
        self.readers = SegmentReaders()
        self.deleter = SegmentDeleter(
            self.clock,
            self.readers,
            interval_ms=broker.delete_interval_ms,
            force_after_ms=broker.delete_force_after_ms,
            sleep=sleep,
        )
        self._disk_usage = disk_usage
        self._progress = progress
        self._lock = threading.RLock()
        self._dirs: dict[Path, LogDir] = {}
        self._deleted_dirs: list[_PendingDirDeletion] = []
        self._manual_cleanup_requests = 0
        self._manual_delete_runs = 0
        # One cleanup at a time: the retention job and the disk-check job both plan from snapshots of the same logs.
        self._cleanup_lock = threading.Lock()
        # Config changes one at a time (Kafka's single config-change handler), so logs end with the last one.
        self._config_lock = threading.Lock()
        self.group_commit = (
            GroupCommitService(broker.group_commit_timeout_ms, name="logmgr-group-commit")
            if broker.group_commit_enable
            else None
        )
        self._one_shot_ids = itertools.count()
        self._started = False
        self.last_cleanup: CleanupReport | None = None
        self.cleaner = LogCleaner(broker, self._logs_by_dir, self.clock, sleep=sleep)
        self.key_indexer = KeyIndexDispatcher()
        # Intra-broker moves in progress, by partition: each has its future log in its target dir's future_logs.
        self._moves: dict[TopicPartition, LogMove] = {}

    # -- configuration ----------------------------------------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        """Broker defaults with the topic's overrides applied. O(keys)."""
        return self.broker.effective_log_config(topic, self.topic_overrides)

    def update_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Kafka's dynamic topic config change (``LogManager.updateTopicConfig``): ``overrides`` become the topic's
        whole set of overrides (a key left out is back at the broker default) and apply now to the topic's existing
        logs, as to those created later. Validated first: an invalid override raises :class:`ConfigError` naming
        the key and the topic and changes nothing. As in Kafka, turning compaction off aborts a cleaning in
        progress; turning the key index on attaches it (caught up from the log), off detaches it. Returns the new
        config. O(logs + a running cleaning pass)."""
        config = self.broker.effective_log_config(topic, {topic: overrides})
        with self._config_lock:
            with self._lock:
                if overrides:
                    self.topic_overrides[topic] = dict(overrides)
                else:
                    self.topic_overrides.pop(topic, None)
                logs = [log for d in self._dirs.values() for tp, log in d.logs.items() if tp.topic == topic]
            # Outside the manager's lock: aborting waits for a running cleaning pass, which may need it.
            for log in logs:
                old = log.update_config(config)
                if old.compact and not config.compact:
                    # Kafka's abortCleaning: a pass under way must not finish compacting a log no longer compacted.
                    self.cleaner.abort_and_pause(log.topic_partition)
                    self.cleaner.resume(log.topic_partition)
                if config.logmgr_key_index_enable and log.key_index is None:
                    self.key_indexer.register(log)
                elif not config.logmgr_key_index_enable and log.key_index is not None:
                    self.key_indexer.unregister(log)
        return config

    # -- startup / shutdown -------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock and load every log dir, then schedule the jobs. Raises :class:`LogDirLockedError` if another
        process holds a dir, and :class:`KafkaStorageError` (quoting each dir's failure) when I/O errors left no dir
        online; nothing is left open or locked then. A dir that failed alone stays offline, reported by
        :meth:`status`. O(partitions + bytes recovered)."""
        with self._lock:
            if self._started:
                raise LogmgrError("the log manager is already started")
            locked: list[LogDir] = []
            try:
                # Every dir is locked before any marker is touched: a dir another process holds must not cost the
                # others their clean-shutdown marker (and a full recovery at the next start).
                for raw in self.broker.log_dirs:
                    locked.append(self._lock_dir(Path(raw)))
                for log_dir in locked:
                    if not log_dir.state.offline:
                        self._prepare_dir(log_dir)
                for log_dir in locked:
                    self._dirs[log_dir.path] = log_dir
                self._load_all()
                self._reconcile_future_logs()
                if all(log_dir.state.offline for log_dir in locked):
                    # Kafka halts a broker none of whose log dirs is online.
                    failures = "; ".join(str(d.state.failure) for d in locked)
                    raise KafkaStorageError(f"no log dir is online: {failures}")
            except BaseException:
                # Leave nothing open or locked: the logs already loaded are closed (no checkpoint or marker is
                # written, so the next start still treats the dirs as they were found).
                for log_dir in locked:
                    for log in [*log_dir.logs.values(), *log_dir.future_logs.values()]:
                        with contextlib.suppress(KafkaStorageError):
                            log.close()
                    log_dir.logs.clear()
                    log_dir.future_logs.clear()
                    if log_dir.lock is not None:
                        log_dir.lock.release()
                self._dirs.clear()
                self._moves.clear()
                raise
            self._schedule_jobs()
            for tp, move in self._moves.items():
                # Kafka's broker restarts the alter-log-dirs fetcher of every future log it loaded.
                self.scheduler.schedule_once(f"{JOB_ALTER_LOG_DIRS}-{tp}", partial(self._run_move, move, _no_event), 0)
            self.scheduler.startup()
            if self.group_commit is not None:
                self.group_commit.start()
            self.key_indexer.start()
            self._started = True

    def _lock_dir(self, path: Path) -> LogDir:
        """Create (if needed) and lock the log dir at ``path``; an I/O error leaves it offline and unlocked (Kafka's
        ``createAndValidateLogDirs`` and ``lockLogDirs``), a lock held elsewhere raises
        :class:`LogDirLockedError`. O(1)."""
        try:
            path.mkdir(parents=True, exist_ok=True)
            return LogDir(path.resolve(), LogDirLock(path), LogDirState(), False)
        except OSError as err:
            log_dir = LogDir(path.absolute(), None, LogDirState(), False)
            self._dir_failure(log_dir, "locking", err)
            return log_dir

    def _prepare_dir(self, log_dir: LogDir) -> None:
        """Note and remove the clean-shutdown marker and sweep the temporaries of interrupted checkpoint writes;
        an I/O error (a read-only remount) takes the dir offline. O(entries of the dir)."""
        try:
            log_dir.had_clean_shutdown = CleanShutdownMarker.exists(log_dir.path)
            # Kafka removes the marker before loading: a crash during the load must count as unclean.
            CleanShutdownMarker.remove(log_dir.path)
            log_dir.removed_temporaries = remove_temporaries(log_dir.path, _LOG_DIR_ATOMIC_FILES.__contains__)
        except OSError as err:
            self._dir_failure(log_dir, "startup", err)
            return
        for name in log_dir.removed_temporaries:
            logger.info("removed %s (temporary of an interrupted write)", log_dir.path / name)

    def _load_all(self) -> None:
        work: list[_LoadWork] = []
        configs: dict[str, LogConfig] = {}
        for log_dir in self._dirs.values():
            if log_dir.state.offline:
                continue
            recovery_points = self._read_checkpoint(log_dir.path / RECOVERY_POINT_CHECKPOINT_FILE)
            try:
                log_dir.recovery_points_written_ns = (
                    (log_dir.path / RECOVERY_POINT_CHECKPOINT_FILE).stat().st_mtime_ns if recovery_points else None
                )
            except OSError:
                log_dir.recovery_points_written_ns = None
            start_offsets = self._read_checkpoint(log_dir.path / LOG_START_OFFSET_CHECKPOINT_FILE)
            try:
                # Directories only, symbolic links to one excluded: the listing's file types, no stat per entry.
                with os.scandir(log_dir.path) as entries:
                    names = sorted(entry.name for entry in entries if entry.is_dir(follow_symlinks=False))
            except OSError as err:
                self._dir_failure(log_dir, "listing", err)
                continue
            for name in names:
                if name in _SKIPPED_DIRS:
                    continue
                child = log_dir.path / name
                try:
                    parsed = PartitionDirName.parse(name)
                except StorageFormatError as err:
                    raise LogmgrError(f"{child}: not a partition directory ({err.message})") from None
                if parsed.topic == _METADATA_TOPIC:
                    continue
                if parsed.kind == "delete":
                    self._deleted_dirs.append(_PendingDirDeletion(child, self.clock.time_ms()))
                    continue
                if parsed.kind not in ("live", "future"):
                    logger.warning("skipping %s (%s replica)", child, parsed.kind)
                    continue
                tp = parsed.topic_partition
                config = configs.get(tp.topic)
                if config is None:
                    # Once per topic: the topic's logs share the (immutable) config, as they would share its values.
                    config = configs[tp.topic] = self.log_config(tp.topic)
                # A future log's checkpoint entries are its own (Kafka checkpoints future logs in their dir).
                work.append((log_dir, child, parsed, config, recovery_points.get(tp, 0), start_offsets.get(tp, 0)))
        threads = max(1, self.broker.num_recovery_threads_per_data_dir) * max(1, len(self._dirs))
        done = 0
        failure: BaseException | None = None
        with contextlib.closing(self._run_loads(work, threads, lambda: failure is not None)) as loads:
            for log_dir, path, future, load in loads:
                try:
                    log = load()
                except (OSError, KafkaStorageError) as err:
                    # Kafka's loadLogs: an I/O error takes the dir offline; its other logs and other dirs load on.
                    self._dir_failure(log_dir, f"loading {path.name}", err)
                    continue
                except BaseException as err:
                    if failure is None:
                        # Load nothing more (_run_loads starts no further load); the logs still loading are kept so
                        # startup() can close them.
                        failure = err
                    continue
                with self._lock:
                    if future:
                        log_dir.future_logs[log.topic_partition] = log
                    else:
                        log_dir.logs[log.topic_partition] = log
                if failure is not None:
                    continue
                done += 1
                if self._progress is not None:
                    self._progress(done, len(work), log.topic_partition)
                if done % 100 == 0 or done == len(work):
                    logger.info("loaded %d/%d logs", done, len(work))
        if failure is not None:
            raise failure
        for log_dir in self._dirs.values():
            self._sync_load_writes(log_dir)
            log_dir.loaded_all = not log_dir.state.offline

    def _sync_load_writes(self, log_dir: LogDir) -> None:
        """Make what the loads of ``log_dir`` wrote without fsync (producer snapshots, recovered segments' indexes
        and truncations) durable with one file-system sync (see ``load_log``), before anything can rely on them; an I/O error takes the dir offline. O(logs)."""
        if log_dir.state.offline:
            return
        if any(log.recovery.needs_sync for log in [*log_dir.logs.values(), *log_dir.future_logs.values()]):
            try:
                sync_filesystem(log_dir.path)
            except OSError as err:
                self._dir_failure(log_dir, "syncing the producer snapshots of the load", err)

    def _run_loads(
        self, work: list[_LoadWork], threads: int, stopped: Callable[[], bool]
    ) -> Generator[tuple[LogDir, Path, bool, Callable[[], Log]], None, None]:
        """Each load of ``work`` as ``(dir, partition path, is-future, outcome)``, where ``outcome()`` returns the loaded log or
        raises what its load raised; no load starts once ``stopped()``. On one thread the loads run in this thread,
        in order, each when its outcome is called (a pool task per partition cost ~12% of a clean startup); on
        more, in a pool of ``threads``, in completion order, the loads not yet started cancelled once ``stopped()``
        (those already running are still yielded). O(len(work)) plus the loads."""
        if threads == 1:
            for log_dir, path, dir_name, config, rp, lso in work:
                if stopped():
                    return
                future = dir_name.kind == "future"
                yield log_dir, path, future, partial(
                    self._load_one, log_dir, path, config, rp, lso, future=future, sync_snapshots=False,
                    dir_name=dir_name,
                )
            return
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-recovery") as pool:
            futures = {
                pool.submit(
                    self._load_one, log_dir, path, config, rp, lso, future=dir_name.kind == "future",
                    sync_snapshots=False, dir_name=dir_name,
                ): (log_dir, path, dir_name.kind == "future")
                for log_dir, path, dir_name, config, rp, lso in work
            }
            cancelled = False
            for completed in as_completed(futures):
                log_dir, path, future = futures[completed]
                yield log_dir, path, future, completed.result
                if not cancelled and stopped():
                    for pending in futures:
                        pending.cancel()
                    cancelled = True

    def _load_one(
        self,
        log_dir: LogDir,
        path: Path,
        config: LogConfig,
        recovery_point: int,
        start: int,
        *,
        future: bool = False,
        clean: bool | None = None,
        sync_snapshots: bool = True,
        dir_name: PartitionDirName | None = None,
    ) -> Log:
        """Load the log at ``path`` for ``log_dir`` (recovering unless the dir, or ``clean``, says it shut down
        cleanly); a ``future`` log gets no group commit or key index until it is swapped in. ``sync_snapshots``
        and ``dir_name`` as for ``load_log``. O(load)."""
        log = load_log(
            path,
            config,
            recovery_point=recovery_point,
            log_start_offset=start,
            had_clean_shutdown=log_dir.had_clean_shutdown if clean is None else clean,
            # The recovery point is the dir's checkpoint entry only when the caller gives no clean state of its own.
            recovery_point_written_ns=log_dir.recovery_points_written_ns if clean is None else None,
            clock=self.clock,
            deleter=self.deleter,
            readers=self.readers,
            run_async=self._run_async,
            producer_id_expiration_ms=self.broker.producer_id_expiration_ms,
            sync_snapshots=sync_snapshots,
            dir_name=dir_name,
        )
        log._set_dir_state(log_dir.state)
        if not future:
            log.group_commit = self.group_commit
            self.key_indexer.register(log)
        return log

    def _reconcile_future_logs(self) -> None:
        """Resume or finish the moves whose future logs startup found. A future log with a current log becomes a
        move again (its tail cut to the current's end first: records the current lost to its recovery). One with
        no current log was complete: a move renames the current to ``-delete`` only once its future holds
        every record, flushed, so the future is swapped in (Kafka's ``recoverAbandonedFutureLogs``), unless a dir
        is offline: the current may be there, and the future is then left on disk untouched. O(futures)."""
        any_offline = any(d.state.offline for d in self._dirs.values())
        for log_dir in self._dirs.values():
            for tp, future in list(log_dir.future_logs.items()):
                source = self._dir_of(tp)
                if tp in self._moves:
                    # Kafka's loadLog refuses two future logs of one partition.
                    raise LogmgrError(f"duplicate future logs of {tp}: {future.dir} and {self._moves[tp].future.dir}")
                if source is not None:
                    move = LogMove(source.logs[tp], future, source.path, log_dir.path)
                    move.realign()
                    self._moves[tp] = move
                    self.cleaner.abort_and_pause(tp)
                    continue
                del log_dir.future_logs[tp]
                if any_offline:
                    logger.warning("%s has no current log in an online dir: left as it is", future.dir)
                    future.close()
                    continue
                logger.info("%s: the current log is gone, the future log replaces it", future.dir)
                future.flush()
                future.close()
                self._promote(log_dir, future, _no_event)

    def _dir_of(self, tp: TopicPartition) -> LogDir | None:
        """The dir holding the current log of ``tp``. O(dirs)."""
        with self._lock:
            return next((d for d in self._dirs.values() if tp in d.logs), None)

    def _promote(self, log_dir: LogDir, future: Log, on_event: MoveEvent) -> Log:
        """Kafka's ``renameDir`` of the future log (flushed and closed by the caller) to the partition's name in
        ``log_dir``, fsynced, and its reload as the current log. O(segments)."""
        tp = future.topic_partition
        path = log_dir.path / str(tp)
        try:
            os.replace(future.dir, path)
            fsync_dir(log_dir.path)
        except OSError as err:
            raise self._dir_failure(log_dir, f"renaming {future.dir.name} to {path.name}", err) from err
        on_event("future-renamed")
        try:
            log = self._load_one(
                log_dir, path, self.log_config(tp.topic), future.log_end_offset, future.log_start_offset, clean=True
            )
        except (OSError, KafkaStorageError) as err:
            raise self._dir_failure(log_dir, f"loading {path.name}", err) from err
        with self._lock:
            log_dir.logs[tp] = log
        return log

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        """Kafka's startup rule: an unreadable checkpoint is logged and treated as empty."""
        try:
            return OffsetCheckpointFile(path).read()
        except (StorageFormatError, OSError) as err:
            logger.error("ignoring unreadable %s: %s", path, err)
            return {}

    def _run_async(self, func: Callable[[], None]) -> None:
        """Post-roll flushes run as one-shot jobs, like Kafka's ``flush-log`` task."""
        if self._started:
            self.scheduler.schedule_once(f"flush-log-{next(self._one_shot_ids)}", func, 0)
        else:
            func()

    def _schedule_jobs(self) -> None:
        broker = self.broker
        delay = broker.log_initial_task_delay_ms
        self.scheduler.schedule(JOB_RETENTION, self.cleanup_logs, delay_ms=delay, period_ms=broker.log_retention_check_interval_ms)
        self.scheduler.schedule(JOB_FLUSHER, self.flush_dirty_logs, delay_ms=delay, period_ms=broker.log_flush_scheduler_interval_ms)
        self.scheduler.schedule(
            JOB_RECOVERY_POINT_CHECKPOINT,
            self.checkpoint_recovery_points,
            delay_ms=delay,
            period_ms=broker.log_flush_offset_checkpoint_interval_ms,
        )
        self.scheduler.schedule(
            JOB_LOG_START_OFFSET_CHECKPOINT,
            self.checkpoint_log_start_offsets,
            delay_ms=delay,
            period_ms=broker.log_flush_start_offset_checkpoint_interval_ms,
        )
        self.scheduler.schedule(
            JOB_DELETE_LOGS, self.delete_logs, delay_ms=delay, period_ms=max(1, min(broker.log_segment_delete_delay_ms, 10_000))
        )
        self.scheduler.schedule(
            JOB_PRODUCER_EXPIRATION,
            self.remove_expired_producers,
            delay_ms=broker.producer_id_expiration_check_interval_ms,
            period_ms=broker.producer_id_expiration_check_interval_ms,
        )
        if broker.disk_tiers_enabled:
            self.scheduler.schedule(
                JOB_DISK_CHECK, self.check_disk_usage, delay_ms=delay, period_ms=broker.disk_check_interval_ms
            )
        if broker.log_cleaner_enable and broker.log_cleaner_threads > 0:
            self.scheduler.schedule_once(JOB_LOG_CLEANER, self.clean_filthiest_logs, delay)

    def shutdown(self) -> None:
        """Stop the jobs (waiting for running ones), flush and close every log, write the checkpoints and the
        clean-shutdown markers, release the locks. An I/O error takes only its dir offline (no checkpoint, no
        marker there: its next start recovers); every other dir still shuts down cleanly. O(logs)."""
        with self._lock:
            if not self._started:
                return
        with self._lock:
            for move in self._moves.values():
                # A copy under way stops at its next step; its future log stays, resumed at the next start.
                move.cancelled = True
        # Not under the manager's lock: a running job may need it to finish, and the shutdown waits for the job.
        self.scheduler.shutdown(wait=True)
        if self.group_commit is not None:
            # Appenders still waiting get their fsync before the logs close.
            self.group_commit.stop()
        self.key_indexer.stop()
        with self._lock:
            if not self._started:
                return
            try:
                for log_dir in self._dirs.values():
                    try:
                        self._shutdown_dir(log_dir)
                    finally:
                        if log_dir.lock is not None:
                            log_dir.lock.release()
            finally:
                self._started = False

    def _shutdown_dir(self, log_dir: LogDir) -> None:
        """Kafka's per-dir shutdown: flush and close the logs; only a dir still online gets its checkpoints, and
        the clean-shutdown marker when every log of it loaded. O(logs of the dir)."""
        for log in [*log_dir.logs.values(), *log_dir.future_logs.values()]:
            try:
                if not log.is_offline:
                    log.flush()
                log.close()
            except KafkaStorageError as err:
                self._mark_dir_offline(log_dir, err)
        if log_dir.state.offline:
            logger.warning("log dir %s is offline: no checkpoints or clean-shutdown marker written", log_dir.path)
            return
        self._write_recovery_points(log_dir)
        self._write_log_start_offsets(log_dir)
        if not log_dir.loaded_all or log_dir.state.offline:
            return
        try:
            CleanShutdownMarker(self.broker_epoch).write(log_dir.path)
        except OSError as err:
            # Kafka swallows this failure: without the marker the next start just recovers the dir.
            self._mark_dir_offline(log_dir, err)

    def __enter__(self) -> LogManager:
        self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- logs -----------------------------------------------------------------------------------------------------

    def all_logs(self) -> list[Log]:
        """Every live log. O(logs)."""
        with self._lock:
            return [log for d in self._dirs.values() for log in d.logs.values()]

    def get_log(self, tp: TopicPartition) -> Log | None:
        """The log of ``tp`` if loaded. O(dirs)."""
        with self._lock:
            for log_dir in self._dirs.values():
                if tp in log_dir.logs:
                    return log_dir.logs[tp]
            return None

    def get_or_create_log(
        self, topic: str, partition: int, config_overrides: Mapping[str, str] | None = None
    ) -> Log:
        """The log of ``topic-partition``, created (with ``partition.metadata``) in the dir holding the fewest
        partitions when missing. Overrides become the topic's config. O(dirs)."""
        tp = TopicPartition(topic, partition)
        validate_topic_partition(tp)
        with self._lock:
            existing = self.get_log(tp)
            if existing is not None:
                return existing
            for log_dir in self._dirs.values():
                # Startup skipped a linked partition dir; creating the log must not write through it either.
                if (log_dir.path / str(tp)).is_symlink():
                    raise InvalidPartitionDirError(f"{log_dir.path / str(tp)} is a symbolic link; refusing to use it")
            if config_overrides:
                merged = {**self.topic_overrides.get(topic, {}), **config_overrides}
                # Validated before it is kept: a refused override must not break the topic's later creations.
                self.broker.effective_log_config(topic, {topic: merged})
                self.topic_overrides[topic] = merged
            candidates = [d for d in self._dirs.values() if not d.state.offline]
            if not candidates:
                raise KafkaStorageError("no online log dir to create the log in")
            log_dir = min(candidates, key=lambda d: (len(d.logs), str(d.path)))
            try:
                log = load_log(
                    log_dir.path / str(tp),
                    self.log_config(topic),
                    had_clean_shutdown=True,
                    clock=self.clock,
                    deleter=self.deleter,
                    readers=self.readers,
                    run_async=self._run_async,
                    producer_id_expiration_ms=self.broker.producer_id_expiration_ms,
                )
            except (OSError, KafkaStorageError) as err:
                raise self._dir_failure(log_dir, f"creating the log of {tp}", err) from err
            log._set_dir_state(log_dir.state)
            log.group_commit = self.group_commit
            # Listed before its metadata is written: if that write fails (taking the dir offline), shutdown still
            # closes the log.
            log_dir.logs[tp] = log
            self.key_indexer.register(log)
            log.ensure_partition_metadata()
            return log

    def truncate_to(self, tp: TopicPartition, offset: int) -> bool:
        """Kafka's ``LogManager.truncateTo`` for one log (a follower cutting its divergent tail): cleaning of it is
        paused meanwhile and its cleaner checkpoint comes down to the new active segment. Returns whether anything
        was removed. O(segments + replay)."""
        with self._lock:
            for log_dir in self._dirs.values():
                log = log_dir.logs.get(tp)
                if log is None:
                    continue
                self.cleaner.abort_and_pause(tp)
                try:
                    truncated = log.truncate_to(offset)
                    if truncated:
                        self.cleaner.truncate_checkpoint(log_dir.path, tp, log.active_segment.base_offset)
                finally:
                    self.cleaner.resume(tp)
                return truncated
        raise LogmgrError(f"no log for {tp}")

    def delete_log(self, tp: TopicPartition) -> Path:
        """Close the log, rename its dir to the ``-delete`` form and remove it after ``file.delete.delay.ms``.
        O(segments)."""
        with self._lock:
            move = self._moves.get(tp)
            if move is not None:
                # The future log goes first: a future left without its current would be swapped in at the next start.
                move.cancelled = True
                self._abort_move(move)
            for log_dir in self._dirs.values():
                log = log_dir.logs.pop(tp, None)
                if log is not None:
                    # Kafka's abortAndPauseCleaning: no pass may swap segments into a log being deleted.
                    self.cleaner.abort_and_pause(tp)
                    self.key_indexer.unregister(log)
                    try:
                        target = log.delete()
                        self.cleaner.remove_checkpoint(log_dir.path, tp)
                    finally:
                        self.cleaner.resume(tp)
                    self._deleted_dirs.append(_PendingDirDeletion(target, self.clock.time_ms()))
                    self._write_recovery_points(log_dir)
                    self._write_log_start_offsets(log_dir)
                    return target
        raise LogmgrError(f"no log for {tp}")

    # -- intra-broker moves -------------------------------------------------------------------------------------

    def move_log(
        self,
        topic: str,
        partition: int,
        target_dir: Path | str,
        *,
        on_event: MoveEvent = _no_event,
        chunk_bytes: int = COPY_CHUNK_BYTES,
    ) -> Log:
        """Move the log of ``topic-partition`` into the log dir ``target_dir`` (Kafka's alterReplicaLogDirs,
        ``ReplicaAlterLogDirsThread`` and ``replaceCurrentWithFutureLog``), in the caller's thread; returns the log
        that serves the partition afterwards (the old :class:`Log` object is closed: callers fetch the new one).

        1. The future log ``<topic>-<partition>.<uniqueId>-future`` is created in the target dir (with the
           partition's topic id) and cleaning of the partition pauses until the swap.
        2. The current log's batches are appended to it as a follower (:class:`LogMove`) while appends go on.
        3. Under the current's writer lock (appends wait): the last batches are copied, the future log is flushed
           and closed, the target dir's checkpoints get its recovery point and log start offset and the cleaner
           checkpoint entry moves to the target dir.
        4. The current log is renamed ``-delete`` (fsynced; removed after ``file.delete.delay.ms``), then the future
           log is renamed to the partition's name (fsynced) and reopened as the current log, with the old one's
           high watermark. The source dir's checkpoints drop the partition.

        A crash before step 4 leaves the current log and a future log, resumed at the next start; after its first
        rename, a future log and no current log, which the next start swaps in: a partition is never served from
        two dirs, and every record acknowledged before the swap is in the future log. Moving a future log's
        partition again to the same dir joins (or resumes) that move; to the dir it is in returns its log.
        ``on_event`` hears each step (``copied``, ``caught-up``, ``future-flushed``, ``checkpoints-written``,
        ``source-deleted``, ``future-renamed``, ``swapped``). Raises :class:`LogmgrError` for an unknown partition or
        dir, a move to another dir under way, or a record the future log refuses (the move is then undone: the
        future log is deleted); :class:`KafkaStorageError` when a dir fails; :class:`LogMoveCancelledError` when
        shutdown stops it. O(bytes of the log); appends wait O(about a chunk + appends since).
        """
        tp = TopicPartition(topic, partition)
        with self._lock:
            target = self._dirs.get(Path(target_dir).resolve())
            if target is None:
                raise LogmgrError(f"{target_dir} is not a log dir of this manager")
            if target.state.offline:
                raise KafkaStorageError(f"log dir {target.path} is offline ({target.state.failure})")
            move = self._moves.get(tp)
            if move is not None and move.target != target.path:
                raise LogmgrError(f"{tp} is already moving to {move.target}")
            if move is None:
                source = self._dir_of(tp)
                if source is None:
                    raise LogmgrError(f"no log for {tp}")
                if source is target:
                    return source.logs[tp]
                move = self._start_move(tp, source, target, chunk_bytes)
        return self._run_move(move, on_event)

    def future_logs(self) -> list[LogMove]:
        """The moves under way (each with its current log, future log and lag). O(moves)."""
        with self._lock:
            return list(self._moves.values())

    def _start_move(self, tp: TopicPartition, source: LogDir, target: LogDir, chunk_bytes: int) -> LogMove:
        """Create the future log of ``tp`` in ``target`` (Kafka's ``getOrCreateLog(isFuture = true)``), pause its
        cleaning (Kafka's alterReplicaLogDirs does) and register the move. Under the manager's lock. O(1)."""
        current = source.logs[tp]
        try:
            topic_id = read_partition_metadata(current.dir / PARTITION_METADATA_FILE).topic_id
        except FileNotFoundError:
            topic_id = None
        path = target.path / future_dir_name(tp)
        try:
            future = self._load_one(target, path, self.log_config(tp.topic), 0, 0, future=True, clean=True)
            future.ensure_partition_metadata(topic_id)
        except (OSError, KafkaStorageError) as err:
            raise self._dir_failure(target, f"creating the future log of {tp}", err) from err
        target.future_logs[tp] = future
        move = LogMove(current, future, source.path, target.path, chunk_bytes=chunk_bytes)
        self._moves[tp] = move
        self.cleaner.abort_and_pause(tp)
        logger.info("moving %s from %s to %s (future log %s)", tp, source.path, target.path, path.name)
        return move

    def _run_move(self, move: LogMove, on_event: MoveEvent) -> Log:
        """Copy, catch up and swap (steps 2-4 of :meth:`move_log`); undo the move when the copy fails. O(bytes)."""
        tp = move.topic_partition
        with move.run_lock:
            if move.done:
                log = self.get_log(tp)
                if log is None:
                    raise LogmgrError(f"no log for {tp}")
                return log
            try:
                move.copy_unlocked(on_event)
                # The manager's lock before the log's, as delete_log and truncate_to take them.
                with self._lock:
                    move.check()
                    with move.current._lock:
                        move.catch_up()
                        on_event("caught-up")
                        return self._swap(move, on_event)
            except BaseException as err:
                if move.cancelled and not isinstance(err, LogMoveCancelledError):
                    # Shutdown or deletion closed a log under the copy: the move stops, it did not fail.
                    raise LogMoveCancelledError(f"move of {tp} to {move.target} cancelled") from err
                if not move.cancelled and not move.committed:
                    with self._lock:
                        self._abort_move(move)
                raise

    def _swap(self, move: LogMove, on_event: MoveEvent) -> Log:
        """Steps 3 (after the catch-up) and 4 of :meth:`move_log`, under the manager's and the current's locks."""
        source, target = self._dirs[move.source], self._dirs[move.target]
        current, future, tp = move.current, move.future, move.topic_partition
        future.flush()
        future.close()
        on_event("future-flushed")
        self._write_recovery_points(target)
        self._write_log_start_offsets(target)
        self.cleaner.move_checkpoint(source.path, target.path, tp)
        if target.state.offline:
            raise KafkaStorageError(f"log dir {target.path} is offline ({target.state.failure})")
        on_event("checkpoints-written")
        # From here on the future log holds the partition: nothing may delete it any more.
        move.committed = True
        move.detach()
        del self._moves[tp]
        del target.future_logs[tp]
        source.logs.pop(tp)
        self.key_indexer.unregister(current)
        try:
            deleted = current.delete()
        except KafkaStorageError as err:
            # Its dir is offline now; the next start finds the current log or its -delete dir, and the future log.
            raise self._dir_failure(source, f"renaming {current.dir.name} for deletion", err) from err
        self._deleted_dirs.append(_PendingDirDeletion(deleted, self.clock.time_ms()))
        on_event("source-deleted")
        log = self._promote(target, future, on_event)
        log.adopt_high_watermark(current)
        self.cleaner.remove_checkpoint(source.path, tp)
        self._write_recovery_points(source)
        self._write_log_start_offsets(source)
        move.done = True
        self.cleaner.resume(tp)
        logger.info("moved %s from %s to %s", tp, source.path, target.path)
        on_event("swapped")
        return log

    def abort_move(self, topic: str, partition: int) -> Path | None:
        """Cancel the move of ``topic-partition`` (Kafka's cancellation of an alter-log-dirs reassignment): a copy
        under way stops at its next step, the future log is closed and renamed ``-delete`` (removed after
        ``file.delete.delay.ms``, or at the next start) and the current log keeps serving. Returns the renamed
        dir (None when its dir failed). Raises :class:`LogmgrError` when no move of the partition is pending or its
        swap has begun. O(segments of the future log)."""
        tp = TopicPartition(topic, partition)
        with self._lock:
            move = self._moves.get(tp)
            if move is None:
                raise LogmgrError(f"no move of {tp} is pending")
            move.cancelled = True
        # Waits for a running copy to stop (it checks `cancelled` at each step; a cancelled copy keeps its future).
        with move.run_lock, self._lock:
            if move.committed or move.done:
                raise LogmgrError(f"the move of {tp} to {move.target} is already swapping in the future log")
            return self._abort_move(move)

    def _abort_move(self, move: LogMove) -> Path | None:
        """Undo a move before its swap: the future log is deleted, cleaning resumes. Under the manager's lock;
        idempotent. Returns the future's ``-delete`` dir (None when nothing was renamed). O(segments of the
        future log)."""
        tp = move.topic_partition
        if self._moves.get(tp) is not move:
            return None
        del self._moves[tp]
        target = self._dirs[move.target]
        target.future_logs.pop(tp, None)
        move.detach()
        deleted: Path | None = None
        try:
            deleted = move.future.delete()
            self._deleted_dirs.append(_PendingDirDeletion(deleted, self.clock.time_ms()))
        except KafkaStorageError as err:
            self._mark_dir_offline(target, err)
        self._write_recovery_points(target)
        self._write_log_start_offsets(target)
        self.cleaner.resume(tp)
        logger.info("move of %s to %s undone", tp, target.path)
        return deleted

    def log_dirs(self) -> list[LogDir]:
        with self._lock:
            return list(self._dirs.values())

    # -- jobs -----------------------------------------------------------------------------------------------------

    def run_job_now(self, name: str) -> CleanerRunReport | None:
        """Run one scheduled job now (never concurrently with itself). ``kafka-log-cleaner`` runs one full pass
        over every cleanable log (serialised with the job's steps by the cleaner) and returns its per-log report
        (bytes read/written, records removed, duration, dirty ratio before/after); other jobs None."""
        if name != JOB_LOG_CLEANER:
            self.scheduler.run_job_now(name)
            return None
        self.scheduler.job_stats(name)  # KeyError when the cleaner is disabled, as for any job not scheduled
        return self.cleaner.run_pass()

    def clean_filthiest_logs(self) -> CleanerRunReport:
        """The ``kafka-log-cleaner`` job, Kafka's ``CleanerThread.doWork``: clean the dirtiest log (one per
        ``log.cleaner.threads`` worker), then run again at once if that moved a checkpoint, so a log bigger than
        the dedupe buffer goes on where its partial pass ended; only a step that cleaned nothing waits
        ``log.cleaner.backoff.ms``. O(dirty bytes of the logs cleaned)."""
        progressed = False
        try:
            report = self.cleaner.run_pass(limit=self.cleaner.threads)
            progressed = report.progressed
            return report
        finally:
            # Rescheduled even when the step failed (logged by the scheduler), after the backoff; a no-op once the
            # scheduler is shut down, which ends the loop.
            delay = 0 if progressed else max(1, self.broker.log_cleaner_backoff_ms)
            self.scheduler.schedule_once(JOB_LOG_CLEANER, self.clean_filthiest_logs, delay)

    def _logs_by_dir(self) -> dict[Path, list[Log]]:
        """The logs of every online dir (what the cleaner walks). O(logs)."""
        return {d.path: list(d.logs.values()) for d in self.log_dirs() if not d.state.offline}

    def request_manual_cleanup(self, segments: int = 1) -> None:
        """Ask the next ``cleanup_logs`` to delete up to ``segments`` more of the oldest eligible segments per log
        dir, whatever the retention settings say. O(1)."""
        with self._lock:
            self._manual_cleanup_requests += max(0, segments)

    def execute_delete_files_manually(self, runs: int = MANUAL_DELETE_RUNS) -> None:
        """RocketMQ's ``executeDeleteFilesManually``: the next ``runs`` cleanup runs (:meth:`cleanup_logs`) ignore
        ``logmgr.delete.when`` and delete what ``retention.ms`` has expired at any hour; retention itself still
        decides what goes. Sets the count (a second call restarts it, as RocketMQ does). O(1)."""
        if runs < 0:
            raise ValueError(f"manual deletion runs must be >= 0, got {runs}")
        with self._lock:
            self._manual_delete_runs = runs

    @property
    def manual_delete_runs(self) -> int:
        """Cleanup runs still to ignore the delete window. O(1)."""
        with self._lock:
            return self._manual_delete_runs

    def cleanup_logs(self) -> CleanupReport:
        """Kafka's cleanupLogs for ``cleanup.policy=delete`` logs, plus the disk tiers, the daily delete window,
        manual deletion runs and "delete the N oldest" requests. O(logs x segments)."""
        now = self.clock.time_ms()
        with self._lock:
            manual = self._manual_cleanup_requests
            self._manual_cleanup_requests = 0
            window_forced = self._manual_delete_runs > 0
            self._manual_delete_runs = max(0, self._manual_delete_runs - 1)
        report = self._run_cleanup(self.log_dirs(), manual, window_forced or self.broker.delete_window_open(now))
        self.last_cleanup = report
        if report.deletions or report.future_deletions:
            logger.info("cleanup scheduled %d bytes for deletion", report.bytes_freed)
        return report

    def check_disk_usage(self) -> dict[Path, DiskUsageState]:
        """The disk-check job (every ``logmgr.disk.check.interval.ms``, RocketMQ's 10 s check): measure each online
        dir's real used space, mark it full or not, and clean each dir above the first tier now rather than at the
        next retention run. Returns each online dir's tier. O(dirs), plus a cleanup of each dir above a tier."""
        states = {}
        for log_dir in self.log_dirs():
            if log_dir.state.offline:
                continue
            try:
                states[log_dir.path] = self._measure_disk(log_dir)
            except OSError as err:
                self._mark_dir_offline(log_dir, err)
        pressed = [log_dir for log_dir in self.log_dirs() if states.get(log_dir.path, "ok") != "ok"]
        if pressed:
            report = self._run_cleanup(pressed, 0, self.broker.delete_window_open(self.clock.time_ms()))
            if report.deletions:
                self.last_cleanup = report
                logger.info("disk check scheduled %d bytes for deletion", report.bytes_freed)
        return states

    def _run_cleanup(self, dirs: Iterable[LogDir], manual: int, window_open: bool) -> CleanupReport:
        report = CleanupReport()
        with self._cleanup_lock:
            for log_dir in dirs:
                if log_dir.state.offline:
                    continue
                try:
                    self._cleanup_dir(log_dir, manual, window_open, report)
                except (KafkaStorageError, OSError) as err:
                    # One failing dir must not stop the cleanup of the others.
                    self._mark_dir_offline(log_dir, err)
        return report

    def _cleanup_dir(self, log_dir: LogDir, manual: int, window_open: bool, report: CleanupReport) -> None:
        # Kafka runs deleteOldSegments on every log (its cleaner thread does it for compacted ones): the
        # start-offset rule always, size and time only with `delete`; the space-management policies touch `delete`
        # logs only. A cleaning pass racing these deletions aborts its swap (LiveLogSource.replace_segments).
        state = self._measure_disk(log_dir)
        retained = dict(log_dir.logs)
        logs = {tp: log for tp, log in retained.items() if log.config.delete}
        if state in ("clean", "full"):
            snapshots = {tp: log.snapshot() for tp, log in logs.items()}
            self._apply(logs, snapshots, self._disk_pressure_plan(log_dir, snapshots), report)
        if manual:
            # Fresh snapshots: disk pressure may just have deleted segments of these logs.
            snapshots = {tp: log.snapshot() for tp, log in logs.items()}
            self._apply(logs, snapshots, plan_manual_cleanup(snapshots, manual), report)
        # RocketMQ's first tier: above diskMaxUsedSpaceRatio expired segments go whatever the hour.
        time_rule_allowed = window_open or state != "ok"
        note = ""
        if not window_open and state != "ok" and log_dir.disk_usage is not None:
            note = disk_tier_note(*log_dir.disk_usage, *self.broker.disk_tier(state))
        for tp, log in retained.items():
            plan = log.delete_old_segments(time_rule_allowed=time_rule_allowed)
            report.add(tp, with_note(plan.deletions, "retention.ms", note) if note else plan.deletions)
            if plan.roll_first:
                report.rolled.append(tp)
        # Kafka's cleanupLogs runs deleteOldSegments on the future log of each non-compacted log it cleans (the
        # cleaner thread, which handles compacted logs, never sees future logs): a move's copy keeps to the same
        # retention, bounded by its high watermark, the current log's (LogMove sets it).
        for tp, future in list(log_dir.future_logs.items()):
            if future.config.compact:
                continue
            deletions = future.delete_old_segments(time_rule_allowed=time_rule_allowed).deletions
            if deletions:
                report.future_deletions.setdefault(tp, []).extend(
                    with_note(deletions, "retention.ms", note) if note else deletions
                )

    def _disk_pressure_plan(
        self, log_dir: LogDir, snapshots: Mapping[TopicPartition, LogSnapshot]
    ) -> list[tuple[TopicPartition, PlannedDeletion]]:
        ratio = self.broker.disk_usage_clean_ratio
        if ratio >= DISK_TIER_OFF or not snapshots:
            return []
        used, total = self._disk_usage(log_dir.path)
        # The tier is the file system's real usage (_measure_disk), but how much more to delete discounts the
        # segments already renamed .deleted: they free their space when unlinked, and counting them again would
        # delete more than needed while physical deletion waits for its delay.
        projected_used = max(0, used - self.deleter.pending_bytes())
        return plan_disk_pressure(snapshots, projected_used, total, ratio)

    def _apply(
        self,
        logs: Mapping[TopicPartition, Log],
        snapshots: Mapping[TopicPartition, LogSnapshot],
        picked: Iterable[tuple[TopicPartition, PlannedDeletion]],
        report: CleanupReport,
    ) -> None:
        """Apply picks planned from ``snapshots`` (the same snapshots group them into per-log plans)."""
        for tp, plan in plans_by_log(snapshots, picked).items():
            logs[tp].apply_deletions([d.base_offset for d in plan.deletions], plan.roll_first, reason=plan.deletions[0].reason)
            report.add(tp, plan.deletions)

    def _measure_disk(self, log_dir: LogDir) -> DiskUsageState:
        """The dir's disk tier from the file system's real used space (a segment pending deletion counts until it
        is unlinked, as the disk sees it); marks the dir full above the third tier. O(1)."""
        broker = self.broker
        state: DiskUsageState = "ok"
        if broker.disk_tiers_enabled:
            used, total = self._disk_usage(log_dir.path)
            log_dir.disk_usage = (used, total)
            state = disk_usage_state(
                used, total, broker.disk_usage_clean_ratio, broker.disk_usage_warn_ratio, broker.disk_max_used_ratio
            )
            if state != log_dir.disk_state:
                logger.warning("%s: disk usage %d/%d B: tier %s -> %s", log_dir.path, used, total, log_dir.disk_state, state)
        log_dir.disk_state = state
        log_dir.state.full = state == "full"
        return state

    def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is ``flush.ms`` old; advances recovery points. O(logs)."""
        now = self.clock.time_ms()
        for log_dir in self.log_dirs():
            for log in [log for _, log in self._checkpointed(log_dir)]:
                if log_dir.state.offline:
                    break
                if now - log.last_flush_ms < log.config.flush_ms:
                    continue
                try:
                    log.flush(log.log_end_offset)
                except KafkaStorageError as err:
                    # A log closed by a concurrent deletion refuses the flush too; only a failed one fails its dir.
                    if log.is_offline:
                        self._mark_dir_offline(log_dir, err)

    def checkpoint_recovery_points(self) -> None:
        """Write each dir's recovery-point checkpoint, then prune producer snapshots (pre-2.8 rule). O(logs)."""
        for log_dir in self.log_dirs():
            self._write_recovery_points(log_dir)
            for log in list(log_dir.logs.values()):
                if log_dir.state.offline:
                    break
                try:
                    log.prune_producer_snapshots()
                except KafkaStorageError as err:
                    self._mark_dir_offline(log_dir, err)

    def checkpoint_log_start_offsets(self) -> None:
        """Write each dir's log-start-offset checkpoint (only logs whose start is above their first segment). O(logs)."""
        for log_dir in self.log_dirs():
            self._write_log_start_offsets(log_dir)

    def delete_logs(self) -> DeletionRun:
        """Physically delete due ``.deleted`` segments (reader-safe, throttled) and due ``-delete`` dirs. O(due)."""
        run = self.deleter.run_due()
        now = self.clock.time_ms()
        with self._lock:
            due = [d for d in self._deleted_dirs if d.due_ms + self.broker.log_segment_delete_delay_ms <= now]
            for entry in due:
                self._deleted_dirs.remove(entry)
        for entry in due:
            shutil.rmtree(entry.path, ignore_errors=True)
            logger.info("deleted %s", entry.path)
        errors = []
        for err in run.failures:
            failed = self._dir_holding(err.filename)
            errors.append(
                KafkaStorageError(f"segment deletion failed: {err}")
                if failed is None
                else self._dir_failure(failed, "segment deletion", err)
            )
        if errors:
            # Every failed dir is offline by now; the first error is the job's.
            raise errors[0]
        return run

    def remove_expired_producers(self) -> None:
        """Drop producers idle for ``producer.id.expiration.ms`` (no open transaction). O(producers)."""
        now = self.clock.time_ms()
        for log in self.all_logs():
            log.remove_expired_producers(now)

    # -- checkpoints ------------------------------------------------------------------------------------------

    def _write_recovery_points(self, log_dir: LogDir) -> None:
        """Kafka drops an offline dir's checkpoint files from its maps: nothing is written there anymore."""
        if log_dir.state.offline:
            return
        points = {tp: log.recovery_point for tp, log in sorted(self._checkpointed(log_dir), key=lambda kv: str(kv[0]))}
        try:
            OffsetCheckpointFile(log_dir.path / RECOVERY_POINT_CHECKPOINT_FILE).write(points)
        except OSError as err:
            self._mark_dir_offline(log_dir, err)

    @staticmethod
    def _checkpointed(log_dir: LogDir) -> list[tuple[TopicPartition, Log]]:
        """The logs a dir's checkpoints list: its current logs and its future logs (as Kafka's ``logsByDir``; a
        future log is never in the dir of its current log, so their entries cannot clash). O(logs)."""
        return [*log_dir.logs.items(), *log_dir.future_logs.items()]

    def _write_log_start_offsets(self, log_dir: LogDir) -> None:
        if log_dir.state.offline:
            return
        offsets = {}
        for tp, log in sorted(self._checkpointed(log_dir), key=lambda kv: str(kv[0])):
            first = log.segments.first_segment()
            if first is not None and log.log_start_offset > first.base_offset:
                offsets[tp] = log.log_start_offset
        try:
            OffsetCheckpointFile(log_dir.path / LOG_START_OFFSET_CHECKPOINT_FILE).write(offsets)
        except OSError as err:
            self._mark_dir_offline(log_dir, err)

    # -- failures -------------------------------------------------------------------------------------------------

    def _dir_failure(self, log_dir: LogDir, action: str, err: BaseException) -> KafkaStorageError:
        """Take ``log_dir`` offline after ``err`` (an ``OSError``, or a log's :class:`KafkaStorageError` that
        carries one) and return the typed error naming the dir, the action and the file. O(1)."""
        error = KafkaStorageError(f"log dir {log_dir.path}: {action} failed: {err}")
        self._mark_dir_offline(log_dir, error)
        return error

    def _dir_holding(self, path: str | None) -> LogDir | None:
        """The log dir ``path`` lies in, if any. O(dirs)."""
        if path is None:
            return None
        target = Path(path).absolute()
        for log_dir in self.log_dirs():
            if target.is_relative_to(log_dir.path):
                return log_dir
        return None

    def _mark_dir_offline(self, log_dir: LogDir, err: BaseException) -> None:
        """Kafka's LogDirFailureChannel: an I/O error takes the whole dir offline; other dirs keep working.

        The dir's :class:`LogDirState` is shared by its logs, so every one of them reports ``is_offline`` and
        refuses reads and writes; its checkpoints, cleanup, flushes and clean-shutdown marker stop. A log that
        fails on its own sets the same state (:meth:`Log._io_failure`); this records it for the manager. O(1).
        """
        if log_dir.state.mark_offline(err):
            logger.error("log dir %s is offline after %s", log_dir.path, err)

    # -- status -------------------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Counts, sizes and job statistics, JSON-ready. O(logs x segments)."""
        dirs = []
        for log_dir in self.log_dirs():
            logs = list(log_dir.logs.values())
            dirs.append(
                {
                    "path": str(log_dir.path),
                    "offline": log_dir.state.offline,
                    "failure": log_dir.state.failure,
                    "full": log_dir.state.full,
                    "diskTier": log_dir.disk_state,
                    "partitions": len(logs),
                    "segments": sum(len(log.segments) for log in logs),
                    "bytes": sum(log.size_in_bytes for log in logs),
                }
            )
        jobs = {}
        for name in self.scheduler.jobs():
            stats = self.scheduler.job_stats(name)
            jobs[name] = {
                "runs": stats.runs,
                "failures": stats.failures,
                "lastStartMs": stats.last_start_ms,
                "lastDurationMs": stats.last_duration_ms,
                "lastError": stats.last_error,
            }
        cleanup = self.last_cleanup
        last_cleanup = None if cleanup is None else {
            str(tp): {"rolled": tp in cleanup.rolled, "deletions": [d.describe() for d in deletions]}
            for tp, deletions in sorted(cleanup.deletions.items(), key=lambda kv: str(kv[0]))
        } | {
            f"{tp} (future)": {"rolled": False, "deletions": [d.describe() for d in deletions]}
            for tp, deletions in sorted(cleanup.future_deletions.items(), key=lambda kv: str(kv[0]))
        }
        moves = [
            {
                "topic": move.topic_partition.topic,
                "partition": move.topic_partition.partition,
                "sourceDir": str(move.source),
                "futureDir": str(move.future.dir),
                "logEndOffset": move.future.log_end_offset,
                "lag": move.lag,
            }
            for move in self.future_logs()
        ]
        return {
            "dirs": dirs,
            # Moves under way: each future log, how far it is behind its current log (Kafka's offsetLag).
            "futureLogs": moves,
            "jobs": jobs,
            "pendingDeletionBytes": self.deleter.pending_bytes(),
            # The retention job's last executed plan: each segment it deleted and why.
            "lastCleanup": last_cleanup,
            "cleaner": self.cleaner.metrics(),
        }
