"""Intra-broker moves (``LogManager.move_log``), against Kafka's ``ReplicaAlterLogDirsThread`` and
``LogManager.replaceCurrentWithFutureLog``: the copy with appends, truncations and retention racing it (driven from
the move's step hook, no sleeps), the swap killed (SIGKILL of a child) after each of its steps, a ``-future`` dir
found at startup resumed, ``logmgr info`` showing the lag, and the moved log still appending, reading, retaining
and compacting."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoints.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from checkpoints.partition_metadata import PARTITION_METADATA_FILE, read_partition_metadata
from cli.info_cmd import info
from logmgr.clock import ManualClock
from logmgr.errors import InvalidRecordError, KafkaStorageError, LogmgrError
from logmgr.log import Isolation, Log
from logmgr.log_manager import JOB_ALTER_LOG_DIRS, LogManager
from logmgr.log_move import LogMoveCancelledError
from logmgr.scheduler import ManualScheduler
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.file_records import iter_batches
from segments.naming import TopicPartition, log_file, offset_from_file_name
from segments.records import SimpleRecord
from tests.conftest import (
    CLIENTS_GENERATED,
    FAILURE_DEADLINE_S,
    ContendedLock,
    child_env,
    require_fixtures,
    wait_until,
)
from tests.test_legacy_follower import legacy_batch
from tests.test_log_loader import read_all, read_legacy
from tests.test_log_manager import DELETE_DELAY, T0, managers_under

TP = TopicPartition("t", 0)
FUTURE_NAME = re.compile(r"t-0\.[0-9a-f]{32}-future")
SWAP_STEPS = ["copied", "caught-up", "future-flushed", "checkpoints-written", "source-deleted", "future-renamed", "swapped"]

Factory = Callable[..., LogManager]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return (tmp_path / "d1").resolve(), (tmp_path / "d2").resolve()


@pytest.fixture
def make(dirs: tuple[Path, Path], tmp_path: Path) -> Iterator[Factory]:
    """Build (not start) managers over both dirs with ``props``; every one still running is shut down at teardown."""
    with managers_under(tmp_path) as factory:
        yield lambda props=None: factory(list(dirs), props)


def start_in_d1(make: Factory, dirs: tuple[Path, Path], count: int, props: dict[str, str] | None = None) -> tuple[LogManager, Log]:
    """A started manager with ``t-0`` in d1 holding ``count`` records (values ``v<offset>``)."""
    m = make(props)
    m.startup()
    log = m.get_or_create_log("t", 0)
    assert log.dir.parent == dirs[0]
    append(log, count)
    return m, log


def append(log: Log, count: int, prefix: bytes = b"v") -> None:
    for _ in range(count):
        log.append_records([SimpleRecord(prefix + b"%d" % log.log_end_offset, b"key", T0)])


def values(log: Log) -> list[tuple[int, bytes | None]]:
    return read_all(log)


def expected(offsets: range, prefix: bytes = b"v") -> list[tuple[int, bytes | None]]:
    return [(o, prefix + b"%d" % o) for o in offsets]


def live_dirs(dirs: tuple[Path, Path]) -> list[Path]:
    return [d / "t-0" for d in dirs if (d / "t-0").is_dir()]


def futures_in(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if FUTURE_NAME.fullmatch(p.name)]


# -- the move ---------------------------------------------------------------------------------------------------


def test_move_copies_every_record_and_swaps_as_kafka(make: Factory, dirs: tuple[Path, Path]) -> None:
    d1, d2 = dirs
    m, log = start_in_d1(make, dirs, 30)
    topic_id = read_partition_metadata(log.dir / PARTITION_METADATA_FILE).topic_id
    seen: list[str] = []
    future_names: list[str] = []

    def on_event(step: str) -> None:
        seen.append(step)
        if step == "copied" and not future_names:
            future_names.extend(p.name for p in futures_in(d2))

    moved = m.move_log("t", 0, d2, on_event=on_event, chunk_bytes=300)
    # Kafka's logFutureDirName, and the steps in order.
    assert len(future_names) == 1 and FUTURE_NAME.fullmatch(future_names[0])
    assert seen[-6:] == SWAP_STEPS[1:] and set(seen[:-6]) == {"copied"}
    assert moved.dir == d2 / "t-0" and m.get_log(TP) is moved
    assert values(moved) == expected(range(30))
    assert read_partition_metadata(moved.dir / PARTITION_METADATA_FILE).topic_id == topic_id
    # The old log is closed and renamed -delete, removed after file.delete.delay.ms.
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append_records([SimpleRecord(b"x")])
    deleted = [p for p in d1.iterdir() if p.name.endswith("-delete")]
    assert len(deleted) == 1 and live_dirs(dirs) == [d2 / "t-0"]
    # Checkpoints moved with it.
    assert OffsetCheckpointFile(d2 / RECOVERY_POINT_CHECKPOINT_FILE).read() == {TP: 30}
    assert TP not in OffsetCheckpointFile(d1 / RECOVERY_POINT_CHECKPOINT_FILE).read()
    assert m.future_logs() == [] and m.status()["futureLogs"] == []
    sched = m.scheduler
    assert isinstance(sched, ManualScheduler)
    sched.advance(DELETE_DELAY + 10_000)
    assert not deleted[0].exists()


def test_move_to_its_own_dir_or_an_unknown_dir(make: Factory, dirs: tuple[Path, Path], tmp_path: Path) -> None:
    m, log = start_in_d1(make, dirs, 3)
    assert m.move_log("t", 0, dirs[0]) is log
    with pytest.raises(LogmgrError, match="not a log dir"):
        m.move_log("t", 0, tmp_path)
    with pytest.raises(LogmgrError, match="no log for t-1"):
        m.move_log("t", 1, dirs[1])


def test_appends_during_the_copy_and_during_the_swap_are_all_kept(make: Factory, dirs: tuple[Path, Path]) -> None:
    m, log = start_in_d1(make, dirs, 20)
    blocked = ContendedLock(log._lock)
    log._lock = blocked  # type: ignore[assignment]
    acked: list[int] = []
    appenders: list[threading.Thread] = []

    def append_from_thread(count: int) -> threading.Thread:
        def run() -> None:
            target: Log | None = log
            for _ in range(count):
                while True:
                    assert target is not None
                    try:
                        info = target.append_records([SimpleRecord(b"c%d" % len(acked), b"key", T0)])
                    except KafkaStorageError:
                        # The log it held was swapped out while it waited: the manager serves the new one.
                        target = m.get_log(TP)
                        continue
                    acked.append(info.first_offset)
                    break

        thread = threading.Thread(target=run)
        thread.start()
        appenders.append(thread)
        return thread

    def on_event(step: str) -> None:
        if step == "copied" and len(appenders) == 0:
            # The bulk copy holds no writer lock: these appends complete while it runs.
            thread = append_from_thread(15)
            thread.join(FAILURE_DEADLINE_S)
            assert not thread.is_alive(), "appends were blocked during the bulk copy"
        elif step == "caught-up":
            # The swap holds it: this append waits, then lands in the new log.
            append_from_thread(1)
            wait_until(blocked.contended.is_set, "the appender to wait for the writer lock")

    moved = m.move_log("t", 0, dirs[1], on_event=on_event, chunk_bytes=200)
    for thread in appenders:
        thread.join(FAILURE_DEADLINE_S)
    assert len(acked) == 16 and acked == list(range(20, 36))
    got = values(moved)
    assert got[:20] == expected(range(20))
    assert [o for o, _ in got] == list(range(36))
    assert moved.dir == dirs[1] / "t-0"


def test_truncation_and_retention_of_the_current_during_the_copy(make: Factory, dirs: tuple[Path, Path]) -> None:
    m, log = start_in_d1(make, dirs, 30)
    done: list[str] = []

    def on_event(step: str) -> None:
        if step != "copied" or done:
            return
        done.append(step)
        # A follower cutting a divergent tail the future already copied, then new records at the same offsets.
        m.truncate_to(TP, 4)
        append(log, 6, b"w")
        # DeleteRecords past what was copied: the future starts over there.
        log.delete_records_before(7)

    moved = m.move_log("t", 0, dirs[1], on_event=on_event, chunk_bytes=200)
    assert done
    assert moved.log_start_offset == 7
    assert values(moved) == expected(range(7, 10), b"w")


def test_a_failure_before_the_swap_undoes_the_move(make: Factory, dirs: tuple[Path, Path]) -> None:
    m, log = start_in_d1(make, dirs, 12)

    def on_event(step: str) -> None:
        if step == "checkpoints-written":
            raise OSError("injected")

    with pytest.raises(OSError, match="injected"):
        m.move_log("t", 0, dirs[1], on_event=on_event)
    assert m.get_log(TP) is log and m.future_logs() == []
    assert futures_in(dirs[1]) == []
    append(log, 3)
    assert values(log) == expected(range(15))
    # The move can be made again.
    assert values(m.move_log("t", 0, dirs[1])) == expected(range(15))


def test_a_failure_after_the_current_was_renamed_leaves_the_future_for_the_next_start(
    make: Factory, dirs: tuple[Path, Path]
) -> None:
    m, _ = start_in_d1(make, dirs, 12)

    def on_event(step: str) -> None:
        if step == "source-deleted":
            raise OSError("injected")

    with pytest.raises(OSError, match="injected"):
        m.move_log("t", 0, dirs[1], on_event=on_event)
    assert m.get_log(TP) is None
    m.shutdown()
    assert live_dirs(dirs) == [] and len(futures_in(dirs[1])) == 1
    again = make()
    again.startup()
    log = again.get_log(TP)
    assert log is not None and log.dir == dirs[1] / "t-0"
    assert values(log) == expected(range(12)) and futures_in(dirs[1]) == []


def test_deleting_the_log_cancels_its_move(make: Factory, dirs: tuple[Path, Path]) -> None:
    m, _ = start_in_d1(make, dirs, 20)

    def on_event(step: str) -> None:
        if step == "copied":
            m.delete_log(TP)

    with pytest.raises(LogMoveCancelledError):
        m.move_log("t", 0, dirs[1], on_event=on_event, chunk_bytes=200)
    assert m.get_log(TP) is None and live_dirs(dirs) == [] and futures_in(dirs[1]) == []
    m.shutdown()
    again = make()
    again.startup()
    assert again.get_log(TP) is None


# -- resuming at startup ------------------------------------------------------------------------------------------


def stop_mid_copy(make: Factory, dirs: tuple[Path, Path], count: int, steps: int = 1) -> None:
    """Leave ``t-0`` in d1 with ``count`` records and a partial future log in d2 (shutdown after ``steps`` copy
    steps)."""
    m, _ = start_in_d1(make, dirs, count)
    copied: list[str] = []

    def on_event(step: str) -> None:
        copied.append(step)
        if len(copied) == steps:
            m.shutdown()

    with pytest.raises(LogMoveCancelledError):
        m.move_log("t", 0, dirs[1], on_event=on_event, chunk_bytes=200)
    assert len(futures_in(dirs[1])) == 1 and live_dirs(dirs) == [dirs[0] / "t-0"]


def test_a_future_dir_found_at_startup_is_loaded_and_the_move_resumes(make: Factory, dirs: tuple[Path, Path]) -> None:
    stop_mid_copy(make, dirs, 25)
    m = make()
    m.startup()
    (move,) = m.future_logs()
    assert move.future.dir.parent == dirs[1] and 0 < move.future.log_end_offset < 25
    assert move.lag == 25 - move.future.log_end_offset
    status = m.status()["futureLogs"]
    assert status == [
        {
            "topic": "t", "partition": 0, "sourceDir": str(dirs[0]), "futureDir": str(move.future.dir),
            "logEndOffset": move.future.log_end_offset, "lag": move.lag,
        }
    ]
    # Appends go on before the resumed copy catches up.
    current = m.get_log(TP)
    assert current is not None
    append(current, 5)
    job = f"{JOB_ALTER_LOG_DIRS}-{TP}"
    assert job in m.scheduler.jobs()
    sched = m.scheduler
    assert isinstance(sched, ManualScheduler)
    sched.advance(0)
    moved = m.get_log(TP)
    assert moved is not None and moved.dir == dirs[1] / "t-0"
    assert values(moved) == expected(range(30))
    assert m.future_logs() == [] and futures_in(dirs[1]) == []


def test_a_future_ahead_of_its_current_after_a_crash_is_cut_back(make: Factory, dirs: tuple[Path, Path]) -> None:
    stop_mid_copy(make, dirs, 25, steps=8)
    # The current loses every segment but its first (an unflushed tail gone with the crash); the future had
    # copied beyond it.
    current_dir = dirs[0] / "t-0"
    for path in current_dir.iterdir():
        if path.name[:20].isdigit() and offset_from_file_name(path.name) > 0:
            path.unlink()
    (dirs[0] / ".kafka_cleanshutdown").unlink(missing_ok=True)
    m = make()
    m.startup()
    current = m.get_log(TP)
    (move,) = m.future_logs()
    assert current is not None and move.future.log_end_offset == current.log_end_offset < 25
    cut = current.log_end_offset
    append(current, 4, b"n")
    moved = m.move_log("t", 0, dirs[1])
    assert values(moved) == expected(range(cut)) + expected(range(cut, cut + 4), b"n")


def test_retention_cleans_future_logs_as_kafkas_cleanup_logs_within_the_currents_high_watermark(
    make: Factory, dirs: tuple[Path, Path]
) -> None:
    # Kafka's LogManager.cleanupLogs runs deleteOldSegments on the future log of every non-compacted log it
    # cleans; the future's high watermark is the current's (ReplicaAlterLogDirsThread's updateHighWatermark).
    stop_mid_copy(make, dirs, 25, steps=8)
    m = make({"log.retention.ms": "60000"})
    m.startup()
    (move,) = m.future_logs()
    current = m.get_log(TP)
    assert current is not None and move.future.segments.base_offsets()[:3] == [0, 5, 10]
    current.high_watermark = 10
    assert move.future.high_watermark == 10
    clock = m.clock
    assert isinstance(clock, ManualClock)
    clock.advance(3_600_000)
    report = m.cleanup_logs()
    assert [d.base_offset for d in report.deletions[TP]] == [0, 5]
    assert [(d.base_offset, d.reason) for d in report.future_deletions[TP]] == [(0, "retention.ms"), (5, "retention.ms")]
    assert move.future.log_start_offset == 10 and "t-0 (future)" in m.status()["lastCleanup"]
    # The move still completes with every retained record.
    current.high_watermark = 25
    moved = m.move_log("t", 0, dirs[1])
    assert values(moved) == expected(range(10, 25))


def test_future_logs_of_compacted_logs_are_left_to_the_move(make: Factory, dirs: tuple[Path, Path]) -> None:
    stop_mid_copy(make, dirs, 25, steps=8)
    m = make({"log.retention.ms": "60000", "log.cleanup.policy": "compact,delete"})
    m.startup()
    (move,) = m.future_logs()
    clock = m.clock
    assert isinstance(clock, ManualClock)
    clock.advance(3_600_000)
    report = m.cleanup_logs()
    assert report.future_deletions == {} and move.future.log_start_offset == 0


def test_info_shows_future_logs_and_their_lag(make: Factory, dirs: tuple[Path, Path]) -> None:
    stop_mid_copy(make, dirs, 25)
    runner = CliRunner()
    result = runner.invoke(info, ["--json", str(dirs[1]), "--log-dir", str(dirs[0])])
    assert result.exit_code == 0, result.output
    (future,) = json.loads(result.output)["futureLogs"]
    assert FUTURE_NAME.fullmatch(future["dir"])
    assert future["currentLogDir"] == str(dirs[0]) and future["currentLogEndOffset"] == 25
    assert 0 < future["logEndOffset"] < 25 and future["lag"] == 25 - future["logEndOffset"]
    text = runner.invoke(info, [str(dirs[1]), "--log-dir", str(dirs[0])])
    assert text.exit_code == 0
    assert re.search(rf"{future['dir']}\s.*\s{dirs[0]}\s+25\s+{future['lag']}$", text.output, re.M), text.output
    # Without the current's dir the lag is unknown.
    alone = json.loads(runner.invoke(info, ["--json", str(dirs[1])]).output)["futureLogs"][0]
    assert alone["lag"] is None and alone["currentLogDir"] is None


# -- the moved log keeps working -------------------------------------------------------------------------------


def test_the_moved_log_appends_reads_retains_and_compacts(make: Factory, dirs: tuple[Path, Path]) -> None:
    props = {"log.cleanup.policy": "compact,delete", "log.cleaner.enable": "true", "log.cleaner.min.cleanable.ratio": "0.01"}
    m, log = start_in_d1(make, dirs, 30, props)
    report = m.cleaner.clean_log(dirs[0], log)
    assert report is not None and report.end_offset is not None and report.end_offset > 0
    checkpoint = OffsetCheckpointFile(dirs[0] / CLEANER_OFFSET_CHECKPOINT_FILE).read()[TP]
    moved = m.move_log("t", 0, dirs[1])
    # The cleaner checkpoint moved with the log.
    assert OffsetCheckpointFile(dirs[1] / CLEANER_OFFSET_CHECKPOINT_FILE).read() == {TP: checkpoint}
    assert TP not in OffsetCheckpointFile(dirs[0] / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    append(moved, 10)
    assert values(moved)[-1] == (39, b"v39")
    # Compaction: every record has the same key, so only the newest survive below the active segment.
    cleaned = m.cleaner.clean_log(dirs[1], moved)
    assert cleaned is not None and cleaned.end_offset is not None and cleaned.end_offset > checkpoint
    assert values(moved)[-1] == (39, b"v39") and len(values(moved)) < 40
    # Retention: the log start offset rule deletes the segments below it.
    moved.delete_records_before(35)
    report_cleanup = m.cleanup_logs()
    assert TP in report_cleanup.deletions and moved.log_start_offset == 35
    m.shutdown()
    again = make(props)
    again.startup()
    reopened = again.get_log(TP)
    assert reopened is not None and reopened.dir == dirs[1] / "t-0" and values(reopened)[-1] == (39, b"v39")


# -- a crash at each step ------------------------------------------------------------------------------------------

_CHILD = """
import os, signal, sys
from pathlib import Path
from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager
from segments.records import SimpleRecord

d1, d2, kill_at = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
config = BrokerConfig.from_properties({"log.dirs": f"{d1},{d2}", "log.segment.bytes": "420", "log.index.interval.bytes": "100"})
m = LogManager(config)
m.startup()
log = m.get_or_create_log("t", 0)
assert log.dir.parent == d1.resolve()
for offset in range(30):
    log.append_records([SimpleRecord(b"v%d" % offset, b"key", 1_700_000_000_000)])
log.flush()

def on_event(step: str) -> None:
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

m.move_log("t", 0, d2, on_event=on_event, chunk_bytes=300)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_crash_at_each_step_of_the_move_loads_one_whole_log(make: Factory, dirs: tuple[Path, Path], step: str) -> None:
    for d in dirs:
        d.mkdir()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(dirs[0]), str(dirs[1]), step], env=child_env(), capture_output=True,
        timeout=FAILURE_DEADLINE_S,
    )
    assert child.returncode == -9, child.stderr.decode()
    # Never two live copies of the partition on disk (none between the two renames: the future log is complete).
    assert len(live_dirs(dirs)) == (0 if step == "source-deleted" else 1)
    m = make()
    m.startup()
    sched = m.scheduler
    assert isinstance(sched, ManualScheduler)
    sched.advance(0)  # a move left under way resumes and swaps
    log = m.get_log(TP)
    assert log is not None
    assert values(log) == expected(range(30))
    assert live_dirs(dirs) == [log.dir] and futures_in(dirs[1]) == [] and m.future_logs() == []
    # The move ended in d2 unless the crash came before anything was copied to the future log.
    assert log.dir == dirs[1] / "t-0"
    append(log, 2)
    assert values(log)[-1] == (31, b"v31")



# -- legacy logs (magic 0/1 segments, written before magic 2) --------------------------------------------------------

LEGACY_LOGS: dict[str, list[tuple[int, bytes]]] = {
    # name: the segments of t-0 as (base offset, .log bytes); values v<offset>, timestamps T0 + offset (magic 1).
    "magic0": [(0, legacy_batch(0, None, 0, 12))],
    "magic1": [(0, legacy_batch(1, None, 0, 7)), (7, legacy_batch(1, None, 7, 5, ts=T0 + 7))],
    "magic0-gzip": [(0, b"".join(legacy_batch(0, CompressionType.GZIP, o, 3) for o in range(0, 12, 3)))],
    "magic1-snappy": [(0, b"".join(legacy_batch(1, CompressionType.SNAPPY, o, 4, ts=T0 + o) for o in range(0, 12, 4)))],
    "magic1-lz4": [
        (0, legacy_batch(1, CompressionType.LZ4, 0, 5) + legacy_batch(1, None, 5, 2, ts=T0 + 5)),
        (7, legacy_batch(0, CompressionType.GZIP, 7, 5)),
    ],
}


def start_legacy(
    make: Factory, dirs: tuple[Path, Path], segments: list[tuple[int, bytes]], props: dict[str, str] | None = None
) -> tuple[LogManager, Log]:
    """``t-0`` written in d1 as the legacy ``segments`` (no index, snapshot or checkpoint: the first start recovers
    them), then a manager started over it (``make(props)``); the manager and that log."""
    pdir = dirs[0] / "t-0"
    pdir.mkdir(parents=True)
    for base, data in segments:
        log_file(pdir, base).write_bytes(data)
    m = make(props)
    m.startup()
    current = m.get_log(TP)
    assert current is not None
    return m, current


def log_bytes(log: Log) -> bytes:
    """The ``.log`` bytes of ``log``'s segments in offset order (the future log rolls by its own size rule, so
    segment boundaries may differ: the bytes may not). O(size)."""
    return b"".join(segment.log.read(0, segment.size) for segment in log.segments.values())


@dataclass(frozen=True)
class LogView:
    """What a reader sees of a log: every record, the batch bytes served at each offset, timestamp lookups,
    producer state and leader epochs."""

    records: list[tuple[int, bytes | None]]
    served: list[bytes]
    by_timestamp: list[tuple[int, int] | None]
    producers: dict[int, tuple[int, int, int]]
    epochs: list[tuple[int, int]]

    @classmethod
    def of(cls, log: Log) -> LogView:
        offsets = range(log.log_start_offset, log.log_end_offset)
        served = []
        for offset in offsets:
            fetched = log.read(offset, 1, isolation=Isolation.LOG_END)
            served.append(fetched.records[: next(iter_batches(fetched.records)).end_position])
        return cls(
            read_legacy(log),
            served,
            [log.offset_for_timestamp(ts) for ts in (-2, -1, -3, T0 - 1, T0, T0 + 3, T0 + 8, T0 + 11, T0 + 100)],
            {pid: (e.producer_epoch, e.last_seq, e.last_data_offset) for pid, e in log.producer_state.active_producers.items()},
            [(e.epoch, e.start_offset) for e in log.leader_epochs.entries],
        )


def assert_moved_as_is(dirs: tuple[Path, Path], source: bytes, view: LogView, moved: Log) -> None:
    """The moved log in d2 holds the source's bytes and reads as it did."""
    assert moved.dir == dirs[1] / "t-0" and live_dirs(dirs) == [moved.dir] and futures_in(dirs[1]) == []
    assert log_bytes(moved) == source
    assert LogView.of(moved) == view
    moved._check()


def assert_reopens_as_is(make: Factory, props: dict[str, str], source: bytes, view: LogView) -> None:
    """After a restart the moved log still holds the source's bytes and reads as it did; its dir verifies (indexes
    consistent with the segments). The manager that moved it must be shut down."""
    again = make(props)
    again.startup()
    reopened = again.get_log(TP)
    assert reopened is not None and log_bytes(reopened) == source and LogView.of(reopened) == view
    again.shutdown()
    report = verify_paths([reopened.dir])
    assert report.ok, report.problems


@pytest.mark.parametrize("name", list(LEGACY_LOGS))
def test_a_legacy_log_moves_byte_for_byte(make: Factory, dirs: tuple[Path, Path], name: str) -> None:
    m, current = start_legacy(make, dirs, LEGACY_LOGS[name], {"log.segment.bytes": "200"})
    assert current.log_end_offset == 12
    source, view = log_bytes(current), LogView.of(current)
    assert source == b"".join(data for _, data in LEGACY_LOGS[name])
    assert view.records == expected(range(12))
    moved = m.move_log("t", 0, dirs[1], chunk_bytes=150)
    # segment.bytes 200: the future rolled by its own rule.
    assert len(moved.segments) > 1
    assert_moved_as_is(dirs, source, view, moved)
    m.shutdown()
    assert_reopens_as_is(make, {"log.segment.bytes": "200"}, source, view)


@pytest.mark.parametrize("folder", ["magic0-0", "magic0-lz4-0", "magic1-0"])
def test_kafka_written_legacy_segments_move_byte_for_byte(make: Factory, dirs: tuple[Path, Path], folder: str) -> None:
    fixture = require_fixtures(CLIENTS_GENERATED / folder / "00000000000000000000.log")
    # The lz4 fixture holds a 467-byte wrapper: segments must hold it.
    m, current = start_legacy(make, dirs, [(0, fixture.read_bytes())], {"log.segment.bytes": "600"})
    source, view = log_bytes(current), LogView.of(current)
    assert source == fixture.read_bytes()
    records = [json.loads(line) for line in (fixture.parent / "expected.jsonl").read_text().splitlines()]
    assert [offset for offset, _ in view.records] == [r["offset"] for r in records]
    moved = m.move_log("t", 0, dirs[1], chunk_bytes=200)
    assert_moved_as_is(dirs, source, view, moved)
    m.shutdown()
    assert_reopens_as_is(make, {"log.segment.bytes": "600"}, source, view)


def test_a_mixed_log_moves_with_its_producer_state_and_epochs(make: Factory, dirs: tuple[Path, Path]) -> None:
    """Legacy segments, then magic-2 batches of an idempotent producer under two leader epochs."""
    m, current = start_legacy(make, dirs, LEGACY_LOGS["magic1-lz4"])
    current.roll()
    for n in range(6):
        current.append_records(
            [SimpleRecord(b"v%d" % current.log_end_offset, b"key", T0 + 12 + n)], producer_id=42, producer_epoch=3,
            base_sequence=n, leader_epoch=5 if n < 3 else 6,
        )
    source, view = log_bytes(current), LogView.of(current)
    assert view.records == expected(range(18))
    assert view.producers == {42: (3, 5, 17)} and view.epochs == [(5, 12), (6, 15)]
    moved = m.move_log("t", 0, dirs[1], chunk_bytes=150)
    assert_moved_as_is(dirs, source, view, moved)
    m.shutdown()
    assert_reopens_as_is(make, {}, source, view)


def test_a_crash_in_the_middle_of_a_legacy_copy_resumes_it(make: Factory, dirs: tuple[Path, Path]) -> None:
    """SIGKILL after two copy steps of a legacy log: the next start loads (recovers) the partial future log, whose
    legacy segments are resumed from, and the move completes with the source's bytes."""
    dirs[1].mkdir()
    m, current = start_legacy(make, dirs, LEGACY_LOGS["magic1-snappy"] + [(12, legacy_batch(0, None, 12, 6))])
    source, view = log_bytes(current), LogView.of(current)
    m.shutdown()
    child = subprocess.run(
        [sys.executable, "-c", _LEGACY_CHILD, str(dirs[0]), str(dirs[1])], env=child_env(), capture_output=True,
        timeout=FAILURE_DEADLINE_S,
    )
    assert child.returncode == -9, child.stderr.decode()
    (future,) = futures_in(dirs[1])
    assert 0 < sum(p.stat().st_size for p in future.glob("*.log")) < len(source)
    m = make()
    m.startup()
    (move,) = m.future_logs()
    assert 0 < move.future.log_end_offset < 18
    sched = m.scheduler
    assert isinstance(sched, ManualScheduler)
    sched.advance(0)
    moved = m.get_log(TP)
    assert moved is not None
    assert_moved_as_is(dirs, source, view, moved)
    m.shutdown()
    assert_reopens_as_is(make, {}, source, view)


_LEGACY_CHILD = """
import os, signal, sys
from pathlib import Path
from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager

d1, d2 = Path(sys.argv[1]), Path(sys.argv[2])
config = BrokerConfig.from_properties({"log.dirs": f"{d1},{d2}", "log.segment.bytes": "420", "log.index.interval.bytes": "100"})
m = LogManager(config)
m.startup()
steps = []

def on_event(step: str) -> None:
    steps.append(step)
    if len(steps) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

m.move_log("t", 0, d2, on_event=on_event, chunk_bytes=150)
"""


@pytest.mark.parametrize(
    ("name", "at"),
    [
        pytest.param("magic1", 100, id="plain-message-crc"),
        pytest.param("magic0-gzip", 40, id="first-wrapper-value"),
        pytest.param("magic0-gzip", 200, id="later-wrapper-value"),
    ],
)
def test_a_corrupt_legacy_entry_fails_the_move_typed_and_undoes_it(
    make: Factory, dirs: tuple[Path, Path], name: str, at: int
) -> None:
    """A damaged entry in a log loaded clean (so not recovered): the future's follower append refuses it with
    InvalidRecordError, even a wrapper whose first offset cannot be decompressed; the future log is deleted and the
    current keeps its bytes."""
    m, _ = start_legacy(make, dirs, LEGACY_LOGS[name])
    m.shutdown()
    path = log_file(dirs[0] / "t-0", 0)
    damaged = bytearray(path.read_bytes())
    damaged[at] ^= 0x5A
    path.write_bytes(bytes(damaged))
    m = make()
    m.startup()
    with pytest.raises(InvalidRecordError, match="record is corrupt"):
        m.move_log("t", 0, dirs[1], chunk_bytes=60)
    assert futures_in(dirs[1]) == [] and m.future_logs() == [] and live_dirs(dirs) == [dirs[0] / "t-0"]
    current = m.get_log(TP)
    assert current is not None and log_bytes(current).startswith(bytes(damaged))
