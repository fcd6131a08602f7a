"""The LogManager (logmgr.log_manager): startup/shutdown over real log dirs, every scheduled job driven by a
ManualScheduler + ManualClock, the RocketMQ-style space management, real broker data from ../shared, one run on the
real APScheduler, and an I/O failure that takes one log dir offline while another keeps working."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from checkpoints.clean_shutdown import CleanShutdownMarker
from checkpoints.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from logmgr import log_manager as log_manager_module
from logmgr.clock import ManualClock, SystemClock
from logmgr.config import BrokerConfig
from logmgr.dir_lock import LogDirLock
from logmgr.errors import (
    ConfigError,
    InvalidTimestampError,
    KafkaStorageError,
    LogDirFullError,
    LogDirLockedError,
    LogmgrError,
    OffsetOutOfRangeError,
)
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from logmgr.log_manager import (
    JOB_DELETE_LOGS,
    JOB_FLUSHER,
    JOB_LOG_START_OFFSET_CHECKPOINT,
    JOB_PRODUCER_EXPIRATION,
    JOB_RECOVERY_POINT_CHECKPOINT,
    JOB_RETENTION,
    LogManager,
)
from logmgr.scheduler import ApsScheduler, ManualScheduler
from logmgr.verify import verify_paths
from segments.errors import CorruptCheckpointError, InvalidTopicError
from segments.file_records import FileRecords
from segments.naming import TopicPartition, delete_dir_name, log_file, producer_snapshot_file
from segments.records import SimpleRecord
from tests.conftest import FAILURE_DEADLINE_S, KAFKA_REAL, calm_disk, require_fixtures, wait_until
from tests.test_log_loader import read_all

T0 = 1_700_000_000_000
MINUTE = 60_000
HOUR = 3_600_000
DELETE_DELAY = 10_000
# One-record batches of 81 bytes: five per 420-byte segment, so 20 records are segments 0, 5, 10, 15.
BASE_PROPS = {
    "log.segment.bytes": "420",
    "log.index.interval.bytes": "100",
    "log.index.size.max.bytes": "4096",
    "log.initial.task.delay.ms": "1000",
    "log.retention.check.interval.ms": "5000",
    "log.flush.offset.checkpoint.interval.ms": "5000",
    "log.flush.start.offset.checkpoint.interval.ms": "5000",
    "log.segment.delete.delay.ms": str(DELETE_DELAY),
}

Factory = Callable[..., LogManager]


# -- helpers ---------------------------------------------------------------------------------------------------


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Factory]:
    """Build (not start) managers on dirs under tmp_path; every one still running is shut down at teardown."""
    with managers_under(tmp_path) as factory:
        yield factory


@contextmanager
def managers_under(tmp_path: Path) -> Iterator[Factory]:
    """A factory of managers (not started) on ``dirs`` (default ``tmp_path/d1``) with ``BASE_PROPS`` and ``props``,
    a manual clock and scheduler and a calm disk unless given; on exit every one still running is shut down and
    its dir locks released."""
    made: list[LogManager] = []

    def factory(
        dirs: list[Path] | None = None,
        props: dict[str, str] | None = None,
        *,
        clock: ManualClock | None = None,
        **kwargs: Any,
    ) -> LogManager:
        dirs = dirs or [tmp_path / "d1"]
        clock = clock or ManualClock(T0)
        config = BrokerConfig.from_properties(
            {**BASE_PROPS, "log.dirs": ",".join(str(d) for d in dirs), **(props or {})}
        )
        kwargs.setdefault("scheduler", ManualScheduler(clock))
        kwargs.setdefault("disk_usage", calm_disk)
        manager = LogManager(config, clock=clock, **kwargs)
        made.append(manager)
        return manager

    try:
        yield factory
    finally:
        for manager in made:
            with suppress(LogmgrError):
                manager.shutdown()
            for log_dir in manager.log_dirs():
                log_dir.lock.release()


def started_with_an_hour_old_log(make: Factory, props: dict[str, str], **kwargs: Any) -> tuple[LogManager, Log]:
    """A manager from ``make(props=props, **kwargs)``, started, with log ``t-0`` holding 20 one-record batches
    stamped an hour before ``T0``."""
    m = make(props=props, **kwargs)
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20, ts=T0 - HOUR)
    return m, log


def sched(manager: LogManager) -> ManualScheduler:
    assert isinstance(manager.scheduler, ManualScheduler)
    return manager.scheduler


def clock_of(manager: LogManager) -> ManualClock:
    assert isinstance(manager.clock, ManualClock)
    return manager.clock


def fill(log: Log, count: int, *, ts: int | None = None, step_ms: int = 0) -> None:
    """``count`` one-record batches; timestamps ``ts + i * step_ms`` (default: the log's clock)."""
    for i in range(count):
        offset = log.log_end_offset
        stamp = (log.clock.time_ms() if ts is None else ts) + i * step_ms
        log.append_records([SimpleRecord(b"value-%04d" % offset, b"key", stamp)])


def values(offsets: range) -> list[tuple[int, bytes | None]]:
    return [(i, b"value-%04d" % i) for i in offsets]


def checkpoint_text(log_dir: Path, name: str) -> str:
    return (log_dir / name).read_text()


def recovered(manager: LogManager) -> int:
    return sum(log.recovery.recovered_segments for log in manager.all_logs())


def pending_files(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.rglob("*.deleted"))


# -- startup and shutdown ------------------------------------------------------------------------------------------


def test_startup_and_shutdown_write_checkpoints_marker_and_release_the_lock(
    make: Factory, tmp_path: Path
) -> None:
    seen: list[tuple[int, int, TopicPartition]] = []
    m = make()
    m.startup()
    with pytest.raises(LogmgrError, match="already started"):
        m.startup()
    fill(m.get_or_create_log("t", 0), 20)
    fill(m.get_or_create_log("t", 1), 7)
    m.get_log(TopicPartition("t", 1)).delete_records_before(3)  # type: ignore[union-attr]
    m.shutdown()
    m.shutdown()  # idempotent
    d1 = tmp_path / "d1"
    assert CleanShutdownMarker.read(d1) == CleanShutdownMarker(-1)
    assert checkpoint_text(d1, RECOVERY_POINT_CHECKPOINT_FILE) == "0\n2\nt 0 20\nt 1 7\n"
    assert checkpoint_text(d1, LOG_START_OFFSET_CHECKPOINT_FILE) == "0\n1\nt 1 3\n"
    LogDirLock(d1).release()
    m2 = make(progress=lambda done, total, tp: seen.append((done, total, tp)))
    m2.startup()
    assert [(done, total) for done, total, _ in seen] == [(1, 2), (2, 2)]
    assert {tp for _, _, tp in seen} == {TopicPartition("t", 0), TopicPartition("t", 1)}
    m2.shutdown()


@pytest.mark.parametrize("threads", [1, 3], ids=["inline", "pool"])
@pytest.mark.parametrize("failure", ["io", "other"])
def test_a_failed_load_is_handled_alike_inline_and_on_a_pool(
    make: Factory, tmp_path: Path, threads: int, failure: str
) -> None:
    """One recovery thread for one dir loads in the calling thread, more on a pool: either way an I/O failure
    takes the dir offline while its other logs load on, and any other failure is raised with every log loaded
    meanwhile closed."""
    d1 = tmp_path / "d1"
    m = make()
    m.startup()
    for partition in range(4):
        fill(m.get_or_create_log("t", partition), 7)
    m.shutdown()
    LogDirLock(d1).release()
    broken = d1 / "t-1"
    if failure == "io":
        outside = tmp_path / "outside.log"
        (broken / log_file(broken, 0).name).rename(outside)
        log_file(broken, 0).symlink_to(outside)
        expected: type[BaseException] = KafkaStorageError
    else:
        (broken / "leader-epoch-checkpoint").write_bytes(b"0\n1\nnot an entry\n")
        expected = CorruptCheckpointError
    seen: list[tuple[int, int, TopicPartition]] = []
    loaded: list[Log] = []

    def recording(*args: Any, **kwargs: Any) -> Log:
        log = load_log(*args, **kwargs)
        loaded.append(log)
        return log

    m2 = make(
        props={"num.recovery.threads.per.data.dir": str(threads)},
        progress=lambda done, total, tp: seen.append((done, total, tp)),
    )
    with mock.patch.object(log_manager_module, "load_log", recording), pytest.raises(expected) as raised:
        m2.startup()
    assert all(log._closed for log in loaded)
    assert m2.all_logs() == []
    if failure == "io":
        assert "symbolic link" in str(raised.value) and str(log_file(broken, 0)) in str(raised.value)
        assert [(done, total) for done, total, _ in seen] == [(1, 4), (2, 4), (3, 4)]
        assert {tp for _, _, tp in seen} == {TopicPartition("t", p) for p in (0, 2, 3)}


def test_clean_shutdown_then_reopen_recovers_nothing_and_keeps_offsets_and_checkpoints(
    make: Factory, tmp_path: Path
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = make([d1, d2])
    m.startup()
    for partition, count in enumerate([20, 13, 4, 0]):
        fill(m.get_or_create_log("t", partition), count)
    m.get_log(TopicPartition("t", 0)).delete_records_before(7)  # type: ignore[union-attr]
    sched(m).advance(2000)
    before = {log.topic_partition: (log.log_start_offset, log.log_end_offset) for log in m.all_logs()}
    m.shutdown()
    files = {
        (d, name): checkpoint_text(d, name)
        for d in (d1, d2)
        for name in (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE)
    }
    assert files[(d1, RECOVERY_POINT_CHECKPOINT_FILE)] == "0\n2\nt 0 20\nt 2 4\n"
    assert files[(d2, RECOVERY_POINT_CHECKPOINT_FILE)] == "0\n2\nt 1 13\nt 3 0\n"
    assert files[(d1, LOG_START_OFFSET_CHECKPOINT_FILE)] == "0\n1\nt 0 7\n"
    assert files[(d2, LOG_START_OFFSET_CHECKPOINT_FILE)] == "0\n0\n"
    m2 = make([d1, d2])
    m2.startup()
    assert recovered(m2) == 0
    after = {log.topic_partition: (log.log_start_offset, log.log_end_offset) for log in m2.all_logs()}
    assert after == before
    assert all(log.recovery_point == log.log_end_offset for log in m2.all_logs())
    m2.shutdown()
    assert {key: checkpoint_text(*key) for key in files} == files


def test_kill_like_reopen_recovers_from_the_recovery_point(make: Factory, tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    m = make()
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 12)
    log.flush()
    m.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
    fill(log, 8)
    assert not CleanShutdownMarker.exists(d1)
    # A kill -9: no shutdown, only the process's locks go away.
    for log_dir in m.log_dirs():
        log_dir.lock.release()
    m2 = make()
    m2.startup()
    reopened = m2.get_log(TopicPartition("t", 0))
    assert reopened is not None
    # The segments from the one holding recovery point 12 (base 10) on: 10 and 15.
    assert reopened.recovery.recovered_segments == 2
    assert read_all(reopened) == values(range(20))
    fill(reopened, 3)
    assert reopened.log_end_offset == 23


def test_copy_taken_mid_run_opens_with_recovery(make: Factory, tmp_path: Path) -> None:
    m = make()
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 17)
    copy = tmp_path / "copy"
    # Opening and closing the running dir's .lock from this process would drop its POSIX lock: leave it out.
    shutil.copytree(tmp_path / "d1", copy, ignore=shutil.ignore_patterns(".lock"))
    m2 = make([copy])
    m2.startup()
    copied = m2.get_log(TopicPartition("t", 0))
    assert copied is not None and copied.recovery.recovered_segments >= 1
    assert read_all(copied) == values(range(17))
    m2.shutdown()
    assert verify_paths([copy]).ok


_HOLDER = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
    "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_bug_failed_lock_of_one_dir_removed_the_clean_marker_of_another(
    make: Factory, tmp_path: Path
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    first = make([d1, d2])
    first.startup()
    fill(first.get_or_create_log("t", 0), 6)
    first.shutdown()
    assert CleanShutdownMarker.exists(d1) and CleanShutdownMarker.exists(d2)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(d2 / ".lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        blocked = make([d1, d2])
        with pytest.raises(LogDirLockedError, match=re.escape(str(d2))):
            blocked.startup()
        assert blocked.all_logs() == []
        # Nothing of this process holds d1, and the refused startup left both dirs' markers alone.
        LogDirLock(d1).release()
        assert CleanShutdownMarker.exists(d1) and CleanShutdownMarker.exists(d2)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(FAILURE_DEADLINE_S)
    again = make([d1, d2])
    again.startup()
    assert recovered(again) == 0


def test_non_partition_directory_fails_startup_and_releases_the_locks(make: Factory, tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    (d1 / "not-a-partition").mkdir(parents=True)
    m = make()
    with pytest.raises(LogmgrError, match="not a partition directory"):
        m.startup()
    LogDirLock(d1).release()


def test_skipped_directories(make: Factory, tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    for name in ("__cluster_metadata-0", "remote-log-index-cache", "t-1.abc-stray"):
        (d1 / name).mkdir(parents=True)
    (d1 / "__cluster_metadata-0" / "00000000000000000000.index").write_bytes(bytes(8))
    m = make()
    m.startup()
    assert m.all_logs() == []
    # KRaft's metadata log is not ours: even its orphan index stays.
    assert (d1 / "__cluster_metadata-0" / "00000000000000000000.index").exists()
    assert (d1 / "t-1.abc-stray").is_dir()


# -- logs ---------------------------------------------------------------------------------------------------------


def test_get_or_create_log_picks_the_dir_with_fewest_partitions(make: Factory, tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = make([d1, d2])
    m.startup()
    placed = [m.get_or_create_log("a", p).dir.parent for p in range(3)]
    assert placed == [d1.resolve(), d2.resolve(), d1.resolve()]
    assert [m.get_or_create_log("b", p).dir.parent for p in range(2)] == [d2.resolve(), d1.resolve()]
    log = m.get_or_create_log("a", 0)
    assert m.get_or_create_log("a", 0) is log
    metadata = read_partition_metadata(log.dir / PARTITION_METADATA_FILE)
    assert metadata.version == 0
    overridden = m.get_or_create_log("c", 0, {"retention.ms": "1234", "cleanup.policy": "compact"})
    assert overridden.config.retention_ms == 1234 and overridden.config.compact
    assert m.log_config("c").retention_ms == 1234
    with pytest.raises(InvalidTopicError):
        m.get_or_create_log("bad/topic", 0)


def test_bug_invalid_overrides_poisoned_the_topic_config(make: Factory) -> None:
    m = make()
    m.startup()
    with pytest.raises(ConfigError, match=r"retention\.ms"):
        m.get_or_create_log("x", 0, {"retention.ms": "soon"})
    assert m.get_or_create_log("x", 0).config.retention_ms == m.broker.log_retention_ms


def test_update_topic_config_applies_to_existing_logs_as_kafkas_dynamic_topic_configs(
    make: Factory, tmp_path: Path
) -> None:
    m = make([tmp_path / "d1", tmp_path / "d2"])
    m.startup()
    t0, t1, other = m.get_or_create_log("t", 0), m.get_or_create_log("t", 1), m.get_or_create_log("u", 0)
    assert t0.dir.parent != t1.dir.parent  # the topic's logs live in both dirs
    fill(t0, 20, ts=T0, step_ms=MINUTE)
    clock_of(m).advance(21 * MINUTE)
    assert m.cleanup_logs().deletions == {}  # the broker default keeps 7 days
    config = m.update_topic_config("t", {"retention.ms": str(10 * MINUTE), "message.timestamp.before.max.ms": "0"})
    assert t0.config is config and t1.config is config and config.retention_ms == 10 * MINUTE
    assert other.config == m.broker.log_config()
    # Retention of the existing log follows at once, and so do appends (a timestamp in the past is refused now).
    assert [d.base_offset for d in m.cleanup_logs().deletions[TopicPartition("t", 0)]] == [0, 5]
    with pytest.raises(InvalidTimestampError):
        fill(t1, 1, ts=T0)
    # A partition created later takes the same overrides.
    assert m.get_or_create_log("t", 2).config == config
    # An invalid change names the key and the topic and changes nothing.
    with pytest.raises(ConfigError, match=r"^retention\.ms: .*topic 't'"):
        m.update_topic_config("t", {"retention.ms": "soon"})
    assert t0.config is config and m.topic_overrides["t"]["retention.ms"] == str(10 * MINUTE)
    # The overrides are the whole set, as Kafka's AlterConfigs: an empty set is the broker defaults again.
    assert m.update_topic_config("t", {}) == m.broker.log_config()
    assert t1.config == m.broker.log_config() and "t" not in m.topic_overrides
    fill(t1, 1, ts=T0)


def test_update_topic_config_attaches_and_detaches_the_key_index_and_the_cleaner(make: Factory) -> None:
    m = make()
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 12)
    assert log.key_index is None
    m.update_topic_config("t", {"logmgr.key.index.enable": "true", "cleanup.policy": "compact"})
    index = log.key_index
    assert index is not None
    m.key_indexer.drain()
    assert index.progress == log.log_end_offset  # caught up from the log it was enabled on
    m.update_topic_config("t", {})
    assert log.key_index is None
    # Compaction turned off: Kafka's abortCleaning leaves the log neither paused nor in progress.
    assert m.cleaner.manager.state(log.topic_partition) is None


def test_delete_log_renames_then_delete_logs_removes_after_the_delay(make: Factory, tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    m = make()
    m.startup()
    fill(m.get_or_create_log("t", 0), 12)
    fill(m.get_or_create_log("t", 1), 3)
    target = m.delete_log(TopicPartition("t", 0))
    assert re.fullmatch(r"t-0\.[0-9a-f]{32}-delete", target.name)
    assert target.exists() and not (d1 / "t-0").exists()
    assert m.get_log(TopicPartition("t", 0)) is None
    assert checkpoint_text(d1, RECOVERY_POINT_CHECKPOINT_FILE) == "0\n1\nt 1 0\n"
    with pytest.raises(LogmgrError, match="no log"):
        m.delete_log(TopicPartition("t", 0))
    m.run_job_now(JOB_DELETE_LOGS)
    assert target.exists()
    sched(m).advance(DELETE_DELAY + 1000)
    assert not target.exists()
    assert m.scheduler.job_stats(JOB_DELETE_LOGS).runs >= 1


def test_bug_one_failing_segment_deletion_held_back_every_other_dirs_deletions(make: Factory, tmp_path: Path) -> None:
    """Was: the deleter stopped at the first unlink that failed and kept that entry first in its queue, so the
    segments due in every other dir waited behind a failed disk forever."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = make([d1, d2], {"log.retention.bytes": "0"})
    m.startup()
    logs = [m.get_or_create_log("t", p) for p in (0, 1)]
    assert {log.dir.parent for log in logs} == {d1, d2}
    for log in logs:
        fill(log, 12)
    m.cleanup_logs()
    broken = logs[0].dir.parent
    victim = sorted(broken.rglob("*.log.deleted"))[0]
    victim.unlink()
    victim.mkdir()  # unlink() of a directory fails with EISDIR, as a failing disk's would with EIO
    clock_of(m).advance(DELETE_DELAY + 1)
    with pytest.raises(KafkaStorageError, match=str(broken)):
        m.delete_logs()
    healthy = logs[1].dir.parent
    assert not list(healthy.rglob("*.deleted")), "the other dir's due segments were deleted"
    assert logs[0].is_offline and not logs[1].is_offline


def test_delete_dirs_found_at_startup_are_removed_after_the_delay(make: Factory, tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    leftover = d1 / delete_dir_name(TopicPartition("gone", 3), "0" * 32)
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"old")
    m = make()
    m.startup()
    assert m.all_logs() == []
    clock_of(m).advance(DELETE_DELAY - 1)
    m.run_job_now(JOB_DELETE_LOGS)
    assert leftover.exists()
    clock_of(m).advance(1)
    m.run_job_now(JOB_DELETE_LOGS)
    assert not leftover.exists()


# -- retention (cleanup_logs) ---------------------------------------------------------------------------------------


def _run(manager: LogManager, job: str, via: str, ms: int) -> None:
    """Move time ``ms`` forward and run ``job``: by the scheduler, or by hand after moving the clock."""
    if via == "scheduler":
        sched(manager).advance(ms)
    else:
        clock_of(manager).advance(ms)
        manager.run_job_now(job)


@pytest.mark.parametrize("via", ["scheduler", "run_job_now"])
def test_retention_ms_deletes_old_segments_then_files_after_the_delay(
    make: Factory, via: str, tmp_path: Path
) -> None:
    m = make(props={"log.retention.ms": str(10 * MINUTE), "log.retention.check.interval.ms": str(MINUTE)})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20, ts=T0, step_ms=MINUTE)
    # At T0+21min segment 0 (newest record T0+4min) and 5 (T0+9min) are older than 10 minutes; 10 (T0+14min) is not.
    _run(m, JOB_RETENTION, via, 21 * MINUTE)
    assert log.segments.base_offsets() == [10, 15]
    assert log.log_start_offset == 10
    assert read_all(log) == values(range(10, 20))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    _run(m, JOB_DELETE_LOGS, via, DELETE_DELAY + 10_000)
    assert pending_files(tmp_path / "d1") == []
    assert not log_file(log.dir, 0).exists() and not log_file(log.dir, 5).exists()


@pytest.mark.parametrize("via", ["scheduler", "run_job_now"])
def test_retention_bytes_keeps_at_least_the_limit(make: Factory, via: str) -> None:
    m = make(props={"log.retention.bytes": "900"})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)
    sizes = [s.size for s in log.segments.values()]
    _run(m, JOB_RETENTION, via, 6000)
    # Excess 4 x 405 - 900 = 720 covers the first segment (405) but not the second (315 left).
    assert sum(sizes) - 900 >= sizes[0] and sum(sizes) - 900 - sizes[0] < sizes[1]
    assert log.segments.base_offsets() == [5, 10, 15]
    assert log.size_in_bytes >= 900


def test_log_start_offset_rule_deletes_segments_below_delete_records_before(make: Factory) -> None:
    m = make()
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)
    assert log.delete_records_before(12) == 12
    m.run_job_now(JOB_RETENTION)
    assert log.segments.base_offsets() == [10, 15]
    assert log.log_start_offset == 12
    assert read_all(log) == values(range(12, 20))
    m.run_job_now(JOB_LOG_START_OFFSET_CHECKPOINT)
    assert checkpoint_text(log.dir.parent, LOG_START_OFFSET_CHECKPOINT_FILE) == "0\n1\nt 0 12\n"


def test_retention_never_passes_the_high_watermark(make: Factory) -> None:
    m, log = started_with_an_hour_old_log(make, {"log.retention.ms": str(MINUTE)})
    log.high_watermark = 7
    m.run_job_now(JOB_RETENTION)
    # Segment 5's upper bound (10) is above the high watermark: it stays although it expired.
    assert log.segments.base_offsets() == [5, 10, 15]
    log.high_watermark = 20
    report = m.cleanup_logs()
    # Everything expired and the high watermark is at the end: a new empty segment is rolled first.
    assert report.rolled == [TopicPartition("t", 0)]
    assert log.segments.base_offsets() == [20]
    assert log.log_start_offset == log.log_end_offset == 20


def test_compacted_topics_obey_the_log_start_offset_rule_and_compact_delete_retention(make: Factory) -> None:
    # Issue 12 item 2: compacted logs used to be exempt from every deletion; Kafka's cleaner thread runs
    # deleteOldSegments on them (start-offset rule; size and time too with `delete`).
    m = make(
        props={"log.retention.ms": str(MINUTE)},
        topic_overrides={"c": {"cleanup.policy": "compact"}, "cd": {"cleanup.policy": "compact,delete"}},
    )
    m.startup()
    logs = [m.get_or_create_log(topic, 0) for topic in ("c", "cd", "d")]
    for log in logs:
        fill(log, 12, ts=T0 - HOUR)
        log.delete_records_before(11)
    report = m.cleanup_logs()
    assert set(report.deletions) == {TopicPartition(t, 0) for t in ("c", "cd", "d")}
    assert [log.log_start_offset for log in logs] == [11, 12, 12]
    assert logs[0].segments.base_offsets() == [10]


def test_bug_empty_cleanup_policy_skipped_the_log_start_offset_rule(make: Factory) -> None:
    m = make(props={"log.retention.ms": str(MINUTE)}, topic_overrides={"none": {"cleanup.policy": ""}})
    m.startup()
    log = m.get_or_create_log("none", 0)
    fill(log, 12, ts=T0 - HOUR)
    log.delete_records_before(6)
    m.cleanup_logs()
    # Kafka runs deleteOldSegments on every non-compacted log; without `delete` only the start-offset rule applies.
    assert log.segments.base_offsets() == [5, 10]


# -- flush and checkpoint jobs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["scheduler", "run_job_now"])
def test_flush_dirty_logs_honours_flush_ms(make: Factory, via: str) -> None:
    m = make(props={"log.flush.interval.ms": "3000", "log.flush.scheduler.interval.ms": "1000"})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 4)
    _run(m, JOB_FLUSHER, via, 1000)
    assert log.recovery_point == 0
    _run(m, JOB_FLUSHER, via, 2000)
    assert log.recovery_point == 4
    assert log.last_flush_ms == clock_of(m).time_ms()


def test_checkpoint_recovery_points_prunes_producer_snapshots(make: Factory, tmp_path: Path) -> None:
    m = make()
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20)
    snapshots = lambda: sorted(int(p.name[:20]) for p in log.dir.glob("*.snapshot"))  # noqa: E731
    assert snapshots() == [5, 10, 15]
    m.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
    # Recovery point 0: every snapshot from the recovery point's segment on is kept.
    assert checkpoint_text(tmp_path / "d1", RECOVERY_POINT_CHECKPOINT_FILE) == "0\n1\nt 0 0\n"
    assert snapshots() == [5, 10, 15]
    log.flush()
    m.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
    assert checkpoint_text(tmp_path / "d1", RECOVERY_POINT_CHECKPOINT_FILE) == "0\n1\nt 0 20\n"
    # The last two segments' snapshots stay (pre-2.8 rule).
    assert snapshots() == [10, 15]


def test_post_roll_flush_runs_as_a_one_shot_job(make: Factory) -> None:
    m = make()
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 12)
    assert log.recovery_point == 0
    sched(m).advance(0)
    assert log.recovery_point == 10
    assert producer_snapshot_file(log.dir, 10).exists()


def test_checkpoint_log_start_offsets_lists_only_logs_started_above_their_first_segment(
    make: Factory, tmp_path: Path
) -> None:
    m = make()
    m.startup()
    a, b = m.get_or_create_log("a", 0), m.get_or_create_log("b", 0)
    fill(a, 20)
    fill(b, 20)
    a.delete_records_before(7)
    b.delete_records_before(10)
    m.run_job_now(JOB_LOG_START_OFFSET_CHECKPOINT)
    assert checkpoint_text(tmp_path / "d1", LOG_START_OFFSET_CHECKPOINT_FILE) == "0\n2\na 0 7\nb 0 10\n"
    m.run_job_now(JOB_RETENTION)
    m.run_job_now(JOB_LOG_START_OFFSET_CHECKPOINT)
    # b's first segment now starts at its log start offset, a's (5) still lies below 7.
    assert checkpoint_text(tmp_path / "d1", LOG_START_OFFSET_CHECKPOINT_FILE) == "0\n1\na 0 7\n"


def test_delete_logs_waits_for_the_delay_and_pauses_between_deletions(make: Factory, tmp_path: Path) -> None:
    sleeps: list[float] = []
    props = {"log.retention.ms": str(MINUTE), "logmgr.delete.interval.ms": "250"}
    m, log = started_with_an_hour_old_log(make, props, sleep=sleeps.append)
    log.high_watermark = 15
    m.cleanup_logs()
    assert log.segments.base_offsets() == [15]
    pending = pending_files(tmp_path / "d1")
    assert [name for name in pending if name.endswith(".log.deleted")] == [
        f"{base:020d}.log.deleted" for base in (0, 5, 10)
    ]
    # Each segment's snapshot (none at offset 0) waits with it.
    assert [name for name in pending if name.endswith(".snapshot.deleted")] == [
        f"{base:020d}.snapshot.deleted" for base in (5, 10)
    ]
    run = m.delete_logs()
    assert run.deleted_segments == 0 and sleeps == []
    clock_of(m).advance(DELETE_DELAY)
    run = m.delete_logs()
    assert run.deleted_segments == 3
    assert run.deleted_bytes == 3 * 405
    assert sleeps == [0.25, 0.25]
    assert pending_files(tmp_path / "d1") == []


def test_producer_expiration_job_drops_idle_producers_but_not_open_transactions(make: Factory) -> None:
    m = make(
        props={"producer.id.expiration.ms": "60000", "producer.id.expiration.check.interval.ms": "10000"}
    )
    m.startup()
    log = m.get_or_create_log("t", 0)
    log.append_records([SimpleRecord(b"a", None, T0)], producer_id=7, producer_epoch=0, base_sequence=0)
    log.append_records(
        [SimpleRecord(b"b", None, T0)],
        producer_id=8,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    sched(m).advance(50_000)
    assert set(log.producer_state.active_producers) == {7, 8}
    sched(m).advance(20_000)
    assert set(log.producer_state.active_producers) == {8}
    assert m.scheduler.job_stats(JOB_PRODUCER_EXPIRATION).runs == 7


def test_checkpoint_jobs_run_on_their_schedule_and_expiration_on_demand(
    make: Factory, tmp_path: Path
) -> None:
    d1 = tmp_path / "d1"
    m = make(props={"producer.id.expiration.ms": "1000"})
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 7)
    log.delete_records_before(2)
    log.append_records([SimpleRecord(b"p", None, T0)], producer_id=9, producer_epoch=0, base_sequence=0)
    sched(m).advance(999)
    assert not (d1 / RECOVERY_POINT_CHECKPOINT_FILE).exists()
    sched(m).advance(1)
    # At the initial delay: the post-roll flush (recovery point 5) and both checkpoint jobs have run.
    assert checkpoint_text(d1, RECOVERY_POINT_CHECKPOINT_FILE) == "0\n1\nt 0 5\n"
    assert checkpoint_text(d1, LOG_START_OFFSET_CHECKPOINT_FILE) == "0\n1\nt 0 2\n"
    log.flush()
    sched(m).advance(5000)
    assert checkpoint_text(d1, RECOVERY_POINT_CHECKPOINT_FILE) == "0\n1\nt 0 8\n"
    assert set(log.producer_state.active_producers) == {9}
    m.run_job_now(JOB_PRODUCER_EXPIRATION)
    assert set(log.producer_state.active_producers) == set()


def test_shutdown_runs_no_more_jobs_and_status_reports_them(make: Factory) -> None:
    m = make()
    m.startup()
    fill(m.get_or_create_log("t", 0), 3)
    sched(m).advance(6000)
    status = m.status()
    assert status["dirs"][0]["partitions"] == 1
    assert status["jobs"][JOB_RETENTION]["runs"] == 2
    assert all(job["failures"] == 0 for job in status["jobs"].values())
    m.shutdown()
    runs = m.scheduler.job_stats(JOB_RETENTION).runs
    sched(m).advance(60_000)
    assert m.scheduler.job_stats(JOB_RETENTION).runs == runs


def test_bug_shutdown_deadlocked_with_a_running_job(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def blocking_sleep(seconds: float) -> None:
        entered.set()
        release.wait(FAILURE_DEADLINE_S)

    # Not from `make`: its teardown would shut the manager down again, and hang on the lock a deadlock holds.
    clock = ManualClock(T0)
    props = {"log.retention.ms": str(MINUTE), "logmgr.delete.interval.ms": "1", "log.dirs": str(tmp_path / "d1")}
    config = BrokerConfig.from_properties({**BASE_PROPS, **props})
    m = LogManager(config, clock=clock, scheduler=ManualScheduler(clock), sleep=blocking_sleep)
    m.startup()
    log = m.get_or_create_log("t", 0)
    fill(log, 20, ts=T0 - HOUR)
    log.high_watermark = 15
    m.cleanup_logs()
    clock_of(m).advance(DELETE_DELAY)
    job = threading.Thread(target=m.run_job_now, args=(JOB_DELETE_LOGS,), daemon=True)
    job.start()
    assert entered.wait(FAILURE_DEADLINE_S)
    stopper = threading.Thread(target=m.shutdown, daemon=True)
    stopper.start()
    assert m.scheduler.shutdown_waiting.wait(FAILURE_DEADLINE_S)
    # The job resumes while shutdown waits for it: it must be able to finish (it takes the manager's lock).
    release.set()
    stopper.join(FAILURE_DEADLINE_S)
    assert not stopper.is_alive(), "shutdown deadlocked with the job it waits for"
    job.join(FAILURE_DEADLINE_S)
    assert not job.is_alive()
    assert CleanShutdownMarker.exists(tmp_path / "d1")


# -- RocketMQ-style space management -----------------------------------------------------------------------------


class Disk:
    """A fake file system size: ``other`` bytes plus the real bytes of the dir's ``.log`` files (pending ones too)."""

    def __init__(self, total: int, other: int = 0) -> None:
        self.total = total
        self.other = other
        self.calls = 0

    def __call__(self, path: Path) -> tuple[int, int]:
        self.calls += 1
        used = sum(p.stat().st_size for p in path.rglob("*.log*") if p.is_file())
        return self.other + used, self.total


def _interleaved(m: LogManager, count: int = 20) -> tuple[Log, Log]:
    """Logs a-0 and b-0 written alternately, so their segments' ages interleave (a's older)."""
    a, b = m.get_or_create_log("a", 0), m.get_or_create_log("b", 0)
    for i in range(count):
        fill(a, 1, ts=T0 + 2 * i * 1000)
        fill(b, 1, ts=T0 + (2 * i + 1) * 1000)
    return a, b


def test_disk_usage_above_the_clean_ratio_deletes_the_oldest_segments_of_the_dir(make: Factory) -> None:
    disk = Disk(total=5000)
    m = make(props={"logmgr.disk.max.used.ratio": "0.5", "logmgr.disk.usage.clean.ratio": "0.5"}, disk_usage=disk)
    m.startup()
    a, b = _interleaved(m)
    assert disk(a.dir.parent)[0] == 2 * 4 * 405
    report = m.cleanup_logs()
    # 3240 B used, limit 2500: the two globally oldest segments (a's then b's first) bring it to 2430.
    assert {tp: [d.base_offset for d in ds] for tp, ds in report.deletions.items()} == {
        TopicPartition("a", 0): [0],
        TopicPartition("b", 0): [0],
    }
    assert all(d.reason == "disk-usage" for ds in report.deletions.values() for d in ds)
    assert (a.log_start_offset, b.log_start_offset) == (5, 5)
    # Pending .deleted bytes count as freed: a second pass deletes nothing more.
    assert m.cleanup_logs().deletions == {}
    clock_of(m).advance(DELETE_DELAY)
    m.delete_logs()
    assert m.cleanup_logs().deletions == {}
    assert disk(a.dir.parent)[0] == 6 * 405


def test_disk_pressure_never_deletes_past_the_high_watermark(make: Factory) -> None:
    m = make(props={"logmgr.disk.max.used.ratio": "0.5", "logmgr.disk.usage.clean.ratio": "0.5"}, disk_usage=Disk(total=5000))
    m.startup()
    _, b = _interleaved(m)
    b.high_watermark = 3
    report = m.cleanup_logs()
    assert {tp: [d.base_offset for d in ds] for tp, ds in report.deletions.items()} == {
        TopicPartition("a", 0): [0, 5]
    }
    assert len(b.segments) == 4


def test_disk_usage_above_the_warn_ratio_refuses_appends_until_it_drops(make: Factory) -> None:
    disk = Disk(total=10_000, other=9_500)
    m = make(
        props={"logmgr.disk.usage.clean.ratio": "0.8", "logmgr.disk.usage.warn.ratio": "0.9"}, disk_usage=disk
    )
    m.startup()
    log = m.get_or_create_log("t", 0)
    m.cleanup_logs()
    with pytest.raises(LogDirFullError, match="disk usage"):
        fill(log, 1)
    assert m.status()["dirs"][0]["full"] is True
    disk.other = 1_000
    m.cleanup_logs()
    fill(log, 1)
    assert log.log_end_offset == 1 and m.status()["dirs"][0]["full"] is False


def test_bug_warn_ratio_without_clean_ratio_never_marked_the_dir_full(make: Factory) -> None:
    disk = Disk(total=10_000, other=9_500)
    m = make(props={"logmgr.disk.usage.clean.ratio": "1.0", "logmgr.disk.usage.warn.ratio": "0.9"}, disk_usage=disk)
    m.startup()
    log = m.get_or_create_log("t", 0)
    m.run_job_now(JOB_RETENTION)
    with pytest.raises(LogDirFullError):
        fill(log, 1)
    disk.other = 0
    m.run_job_now(JOB_RETENTION)
    fill(log, 1)


def test_delete_window_blocks_time_based_deletion_but_not_size_based(make: Factory) -> None:
    hour = datetime.fromtimestamp(T0 // 1000).hour
    window = (hour + 3) % 24
    m, log = started_with_an_hour_old_log(
        make,
        {"log.retention.ms": str(MINUTE), "log.retention.bytes": "1300", "logmgr.delete.when": f"{window:02d}"},
    )
    log.high_watermark = 15
    report = m.cleanup_logs()
    # Outside the window only retention.bytes acts, and its excess (1620 - 1300 = 320 B) covers no segment.
    assert report.deletions == {}
    assert log.segments.base_offsets() == [0, 5, 10, 15]
    clock_of(m).advance(3 * HOUR)
    assert datetime.fromtimestamp(clock_of(m).time_ms() // 1000).hour == window
    report = m.cleanup_logs()
    assert {d.reason for ds in report.deletions.values() for d in ds} == {"retention.ms"}
    assert log.segments.base_offsets() == [15]


def test_delete_window_still_lets_retention_bytes_delete(make: Factory) -> None:
    hour = datetime.fromtimestamp(T0 // 1000).hour
    window = (hour + 5) % 24
    m, log = started_with_an_hour_old_log(
        make,
        {"log.retention.ms": str(MINUTE), "log.retention.bytes": "800", "logmgr.delete.when": f"{window:02d}"},
    )
    report = m.cleanup_logs()
    assert [d.reason for d in report.deletions[TopicPartition("t", 0)]] == [
        "retention.bytes",
        "retention.bytes",
    ]
    assert log.segments.base_offsets() == [10, 15]


def test_manual_cleanup_deletes_the_oldest_eligible_segments_once(make: Factory) -> None:
    m = make()
    m.startup()
    _interleaved(m)
    m.request_manual_cleanup(3)
    report = m.cleanup_logs()
    assert {tp: [d.base_offset for d in ds] for tp, ds in report.deletions.items()} == {
        TopicPartition("a", 0): [0, 5],
        TopicPartition("b", 0): [0],
    }
    assert all(d.reason == "manual" for ds in report.deletions.values() for d in ds)
    assert m.cleanup_logs().deletions == {}


def test_reader_holding_a_segment_delays_its_physical_deletion(make: Factory, tmp_path: Path) -> None:
    m, log = started_with_an_hour_old_log(make, {"log.retention.ms": str(MINUTE)})
    log.high_watermark = 15
    held = log.segments.first_segment()
    assert held is not None
    with ExitStack() as stack:
        stack.enter_context(log.readers.hold(held))
        m.run_job_now(JOB_RETENTION)
        assert log.segments.base_offsets() == [15]
        clock_of(m).advance(DELETE_DELAY)
        run = m.delete_logs()
        assert (run.deleted_segments, run.waiting_for_readers) == (2, 1)
        assert held.log.path.name.endswith(".log.deleted") and held.log.path.exists()
        assert not held.log.closed
        assert held.log.read(0, 81)[:8] == (0).to_bytes(8, "big")
    assert not held.log.closed
    run = m.delete_logs()
    assert run.deleted_segments == 1 and not held.log.path.exists() and held.log.closed
    assert pending_files(tmp_path / "d1") == []


def test_force_after_unlinks_a_held_segment_and_closes_it_on_release(make: Factory) -> None:
    props = {"log.retention.ms": str(MINUTE), "logmgr.delete.force.after.ms": "5000"}
    m, log = started_with_an_hour_old_log(make, props)
    log.high_watermark = 5
    held = log.segments.first_segment()
    assert held is not None
    with log.readers.hold(held):
        m.cleanup_logs()
        clock_of(m).advance(DELETE_DELAY)
        assert m.delete_logs().waiting_for_readers == 1
        clock_of(m).advance(5000)
        run = m.delete_logs()
        assert run.forced == 1 and not held.log.path.exists()
        # The reader still reads through its open descriptor.
        assert not held.log.closed and len(held.log.read(0, 405)) == 405
    assert held.log.closed


def test_io_failure_takes_one_log_dir_offline_while_another_keeps_working(
    make: Factory, tmp_path: Path
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = make([d1, d2])
    m.startup()
    a, b = m.get_or_create_log("a", 0), m.get_or_create_log("b", 0)
    assert (a.dir.parent, b.dir.parent) == (d1.resolve(), d2.resolve())
    fill(a, 3)
    fill(b, 3)
    (d1 / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")).mkdir()
    m.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
    offline = {Path(d["path"]).name: d["offline"] for d in m.status()["dirs"]}
    assert offline == {"d1": True, "d2": False}
    assert OffsetCheckpointFile(d2 / RECOVERY_POINT_CHECKPOINT_FILE).read() == {TopicPartition("b", 0): 0}
    with pytest.raises(KafkaStorageError):
        fill(a, 1)
    fill(b, 2)
    assert m.get_or_create_log("c", 0).dir.parent == d2.resolve()
    m.run_job_now(JOB_RETENTION)
    m.run_job_now(JOB_LOG_START_OFFSET_CHECKPOINT)
    m.shutdown()
    assert not CleanShutdownMarker.exists(d1)
    assert CleanShutdownMarker.exists(d2)
    (d1 / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")).rmdir()
    m2 = make([d1, d2])
    m2.startup()
    reopened = {log.topic_partition.topic: log for log in m2.all_logs()}
    assert reopened["a"].recovery.recovered_segments == 1
    assert reopened["b"].recovery.recovered_segments == 0
    assert reopened["a"].log_end_offset == 3 and reopened["b"].log_end_offset == 5


# -- the real APScheduler ----------------------------------------------------------------------------------------


def test_real_scheduler_runs_retention_and_checkpoints_in_the_background(tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    config = BrokerConfig.from_properties(
        {
            **BASE_PROPS,
            "log.dirs": str(d1),
            "log.initial.task.delay.ms": "20",
            "log.retention.check.interval.ms": "100",
            "log.flush.offset.checkpoint.interval.ms": "100",
            "log.flush.start.offset.checkpoint.interval.ms": "100",
            "log.segment.delete.delay.ms": "50",
            "log.retention.ms": str(MINUTE),
        }
    )
    clock = SystemClock()
    m = LogManager(config, clock=clock, scheduler=ApsScheduler(clock))
    m.startup()
    try:
        log = m.get_or_create_log("t", 0)
        fill(log, 20, ts=clock.time_ms() - HOUR)

        def checkpoint() -> dict[TopicPartition, int]:
            path = d1 / RECOVERY_POINT_CHECKPOINT_FILE
            return OffsetCheckpointFile(path).read() if path.exists() else {}

        wait_until(
            lambda: log.log_start_offset == 20
            and checkpoint().get(TopicPartition("t", 0)) == 20
            and not pending_files(d1),
            "retention, the deletion and the recovery-point checkpoint to run",
        )
        assert log.segments.base_offsets() == [20]
        assert checkpoint() == {TopicPartition("t", 0): 20}
        assert pending_files(d1) == []
        status = m.status()["jobs"]
        assert status[JOB_RETENTION]["runs"] >= 1 and status[JOB_RECOVERY_POINT_CHECKPOINT]["runs"] >= 1
        assert all(job["failures"] == 0 for job in status.values())
    finally:
        # A hang (shutdown waiting for a whole period, or for a job that never ends) fails; its speed is not tested.
        stopper = threading.Thread(target=m.shutdown, daemon=True)
        stopper.start()
        stopper.join(FAILURE_DEADLINE_S)
        assert not stopper.is_alive(), "shutdown hangs"
    # Nothing can run after shutdown: no schedule is left, and APScheduler itself is stopped with no job.
    assert m.scheduler.jobs() == []
    assert isinstance(m.scheduler, ApsScheduler)
    assert not m.scheduler._aps.running and m.scheduler._aps.get_jobs() == []
    assert CleanShutdownMarker.exists(d1)


# -- real broker data --------------------------------------------------------------------------------------------


def _real_log_dirs() -> list[Path]:
    if not KAFKA_REAL.exists():
        return []
    return sorted(meta.parent for meta in KAFKA_REAL.glob("*/**/meta.properties"))


def _expected_partition(partition_dir: Path, log_start: int) -> tuple[int, int]:
    """``(log end offset, batches)`` from the files, by FileRecords: Kafka's load rules on what is present."""
    logs = sorted(partition_dir.glob("*.log"))
    end, batches = None, 0
    for path in logs:
        with FileRecords(path, writable=False) as records:
            found = list(records.batches())
        batches += len(found)
        end = found[-1].batch.last_offset + 1 if found else int(path.name[:20])
    return max(end if end is not None else 0, log_start), batches


@pytest.mark.parametrize("clean", [True, False], ids=["as-found", "marker-removed"])
@pytest.mark.parametrize("source", _real_log_dirs() or [KAFKA_REAL], ids=lambda p: p.parent.name)
def test_real_broker_log_dir_loads_serves_and_shuts_down_cleanly(
    make: Factory, tmp_path: Path, source: Path, clean: bool
) -> None:
    require_fixtures(source)
    copy = tmp_path / "logs"
    shutil.copytree(source, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    if not clean:
        (copy / ".kafka_cleanshutdown").unlink(missing_ok=True)
    had_marker = (copy / ".kafka_cleanshutdown").exists()
    metadata = {
        p.relative_to(copy): p.read_bytes() for p in copy.glob("__cluster_metadata-0/*") if p.is_file()
    }
    starts = OffsetCheckpointFile(copy / LOG_START_OFFSET_CHECKPOINT_FILE).read()
    expected: dict[TopicPartition, tuple[int, int]] = {}
    for child in copy.iterdir():
        if child.is_dir() and child.name != "__cluster_metadata-0":
            tp = TopicPartition.parse(child.name)
            expected[tp] = _expected_partition(child, starts.get(tp, 0))
    with_data = sum(1 for tp in expected if any((copy / str(tp)).glob("*.log")))
    m = make([copy])
    m.startup()
    logs = {log.topic_partition: log for log in m.all_logs()}
    assert set(logs) == set(expected)
    for tp, log in logs.items():
        end, batches = expected[tp]
        assert log.log_end_offset == end, tp
        served = 0
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            fetched = log.read(offset, 1 << 20, isolation=Isolation.LOG_END).batches()
            assert fetched, (tp, offset)
            for batch in fetched:
                batch.ensure_valid()
                batch.records()
            served += len(fetched)
            offset = fetched[-1].last_offset + 1
        assert served == batches, tp
        log._check()
        # A producer snapshot or leader epoch beyond the data (its .log absent) does not survive the load.
        assert all(o <= log.log_end_offset for o in log.producer_state.snapshot_offsets()), tp
        assert all(e.start_offset < log.log_end_offset for e in log.leader_epochs.entries), tp
    if had_marker:
        # Only segments whose index was absent from the snapshot are recovered.
        assert recovered(m) <= sum(1 for _ in copy.glob("*/*.log"))
    else:
        assert recovered(m) >= with_data
    m.shutdown()
    assert CleanShutdownMarker.exists(copy)
    points = OffsetCheckpointFile(copy / RECOVERY_POINT_CHECKPOINT_FILE).read()
    assert points == {tp: log.log_end_offset for tp, log in logs.items()}
    assert {
        p.relative_to(copy): p.read_bytes() for p in copy.glob("__cluster_metadata-0/*") if p.is_file()
    } == metadata
    report = verify_paths([copy])
    assert report.ok, [str(p) for p in report.problems][:5]
    again = make([copy])
    again.startup()
    assert recovered(again) == 0
    assert {log.topic_partition: log.log_end_offset for log in again.all_logs()} == {
        tp: log.log_end_offset for tp, log in logs.items()
    }


def test_real_partitions_without_log_files_open_empty_and_drop_what_lies_beyond(
    make: Factory, tmp_path: Path
) -> None:
    """kraft-3.6-running-snapshots has no .log at all: producer snapshots and leader epochs point past the data.
    Kafka's loader opens such a partition empty at its log start offset, deletes the snapshots above the log end
    and cuts the leader epochs there; the KRaft metadata partition is not a log the manager loads."""
    source = require_fixtures(KAFKA_REAL / "kraft-3.6-running-snapshots" / "kafka-logs")
    copy = tmp_path / "logs"
    shutil.copytree(source, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    partition = copy / "client.order.report-0"
    assert [p.name for p in partition.glob("*.snapshot")] == ["00000000000000094751.snapshot"]
    assert (partition / "leader-epoch-checkpoint").read_text().split("\n")[:2] == ["0", "3"]
    m = make([copy])
    m.startup()
    log = m.get_log(TopicPartition("client.order.report", 0))
    assert log is not None
    assert (log.log_start_offset, log.log_end_offset, log.segments.base_offsets()) == (0, 0, [0])
    assert list(partition.glob("*.snapshot")) == []
    assert log.leader_epochs.entries == []
    assert (partition / "leader-epoch-checkpoint").read_text() == "0\n0\n"
    assert m.get_log(TopicPartition("__cluster_metadata", 0)) is None
    m.shutdown()
    assert verify_paths([copy]).ok
