"""Group commit (issue 14, item 2; RocketMQ's ``CommitLog.GroupCommitService``): with ``flush.messages=1`` and
``logmgr.group.commit.enable=true`` concurrent appenders share the fsyncs of one flusher thread, each append
returns only once durable, and an fsync that does not come within ``logmgr.group.commit.timeout.ms`` raises
:class:`GroupCommitTimeoutError`. Fsyncs are counted by the service (one ``Log.flush`` per log per round)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.errors import ConfigError, GroupCommitTimeoutError, KafkaStorageError
from logmgr.group_commit import GroupCommitService
from logmgr.log import Log, LogAppendInfo
from logmgr.log_loader import load_log
from logmgr.log_manager import LogManager
from logmgr.scheduler import ManualScheduler
from segments.records import SimpleRecord
from tests.conftest import FAILURE_DEADLINE_S, wait_until

T0 = 1_700_000_000_000


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = load_log(
        tmp_path / "t-0", LogConfig.from_properties({"flush.messages": "1"}), clock=ManualClock(T0)
    )
    yield opened
    opened.close()


def append_one(log: Log, value: bytes) -> LogAppendInfo:
    return log.append_records([SimpleRecord(value, b"key", T0)])


def run_threads(count: int, body: Callable[[int], object]) -> list[BaseException]:
    """Run ``body(index)`` on ``count`` threads; return what they raised."""
    errors: list[BaseException] = []

    def main(index: int) -> None:
        try:
            body(index)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=main, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(FAILURE_DEADLINE_S)
        assert not thread.is_alive(), "an appender never returned"
    return errors


def test_eight_queued_appends_share_one_fsync_and_each_returns_durable(log: Log) -> None:
    service = GroupCommitService(timeout_ms=60_000)
    log.group_commit = service
    durable_on_return: list[bool] = []

    def body(index: int) -> None:
        info = append_one(log, b"v%d" % index)
        durable_on_return.append(log.recovery_point > info.last_offset)

    # The flusher is not running yet: all eight appends are written and wait, none is durable.
    errors: list[BaseException] = []
    appenders = threading.Thread(target=lambda: errors.extend(run_threads(8, body)))
    appenders.start()
    wait_until(lambda: service.pending == 8, "8 queued appends")
    assert log.log_end_offset == 8 and log.recovery_point == 0
    service.start()
    appenders.join(FAILURE_DEADLINE_S)
    service.stop()
    assert errors == []
    assert (service.flushes, service.requests) == (1, 8)
    assert durable_on_return == [True] * 8
    assert log.recovery_point == 8


def test_concurrent_appenders_never_need_more_fsyncs_than_appends(log: Log) -> None:
    service = GroupCommitService(timeout_ms=60_000)
    service.start()
    log.group_commit = service
    returned: list[tuple[int, int]] = []

    def body(index: int) -> None:
        for i in range(25):
            info = append_one(log, b"%d-%d" % (index, i))
            returned.append((info.last_offset, log.recovery_point))

    assert run_threads(4, body) == []
    service.stop()
    assert service.requests == 100 and 1 <= service.flushes <= 100
    # Each append came back with its own offset already below the recovery point.
    assert all(recovery > last for last, recovery in returned)
    assert log.recovery_point == log.log_end_offset == 100


def test_an_fsync_past_the_timeout_raises_the_typed_error_and_keeps_the_records(log: Log) -> None:
    service = GroupCommitService(timeout_ms=1)
    log.group_commit = service  # never started: no fsync can come
    with pytest.raises(GroupCommitTimeoutError, match=r"logmgr.group.commit.timeout.ms \(1 ms\)"):
        append_one(log, b"late")
    assert log.log_end_offset == 1 and log.recovery_point == 0
    # The record is in the log; the next flush makes it durable (the queued request is served at stop).
    service.start()
    service.stop()
    assert log.recovery_point == 1 and service.flushes == 1


def test_a_failed_flush_reaches_every_appender_it_covered(log: Log) -> None:
    service = GroupCommitService(timeout_ms=60_000)
    log.group_commit = service
    errors: list[BaseException] = []
    appenders = threading.Thread(target=lambda: errors.extend(run_threads(3, lambda i: append_one(log, b"x"))))
    appenders.start()
    wait_until(lambda: service.pending == 3, "3 queued appends")
    log.close()  # the flush now fails: the log refuses it
    service.start()
    appenders.join(FAILURE_DEADLINE_S)
    service.stop()
    assert len(errors) == 3 and all(isinstance(err, KafkaStorageError) for err in errors)


def test_without_group_commit_every_append_flushes_itself(log: Log) -> None:
    for i in range(3):
        info = append_one(log, b"%d" % i)
        assert log.recovery_point == info.last_offset + 1


def test_service_rejects_a_non_positive_timeout() -> None:
    with pytest.raises(ValueError, match="timeout"):
        GroupCommitService(timeout_ms=0)


def test_broker_settings_parse_with_rocketmq_defaults() -> None:
    broker = BrokerConfig.from_properties({})
    assert (broker.group_commit_enable, broker.group_commit_timeout_ms) == (False, 5_000)
    broker = BrokerConfig.from_properties(
        {"logmgr.group.commit.enable": "true", "logmgr.group.commit.timeout.ms": "250"}
    )
    assert (broker.group_commit_enable, broker.group_commit_timeout_ms) == (True, 250)
    with pytest.raises(ConfigError, match=r"logmgr\.group\.commit\.timeout\.ms"):
        BrokerConfig.from_properties({"logmgr.group.commit.timeout.ms": "0"})


def test_log_manager_group_commits_its_logs_and_drains_at_shutdown(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    broker = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path / "d1"), "log.flush.interval.messages": "1", "logmgr.group.commit.enable": "true"}
    )
    manager = LogManager(broker, clock=clock, scheduler=ManualScheduler(clock))
    manager.startup()
    try:
        created = manager.get_or_create_log("t", 0)
        assert created.group_commit is manager.group_commit is not None
        assert run_threads(4, lambda i: [append_one(created, b"%d" % i) for _ in range(10)]) == []
        assert created.recovery_point == created.log_end_offset == 40
        assert manager.group_commit.requests == 40
    finally:
        manager.shutdown()
    # Reopened after the shutdown, every group-committed log gets the service again.
    manager = LogManager(broker, clock=clock, scheduler=ManualScheduler(clock))
    manager.startup()
    try:
        loaded = manager.get_log(created.topic_partition)
        assert loaded is not None and loaded.group_commit is manager.group_commit
        append_one(loaded, b"after")
        assert loaded.recovery_point == 41
    finally:
        manager.shutdown()
