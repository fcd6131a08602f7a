"""Disk full and I/O errors (issue 6): what the engine does when the kernel refuses a write, an fsync or a rename.

Two ways to make the kernel say no, both on real files under ``tmp_path``:

* **A real file-size limit.** A forked child (``multiprocessing``, fork start method) ignores ``SIGXFSZ`` and
  lowers its own ``RLIMIT_FSIZE``; from then on every ``write``/``pwritev``/``ftruncate`` that would grow a file past
  the limit first writes what fits, then fails with ``EFBIG`` -- exactly the shape of a full disk (a short write,
  then ``ENOSPC``). The pytest process never lowers its own limit (:func:`limit_file_size` refuses to run in it),
  since it must still write its report. The child reports plain facts through a pipe; the parent asserts them and
  reopens the dirs without any limit.
* **Injected kernel answers.** pytest's ``monkeypatch`` replaces one os-level call (``os.fsync``, ``os.ftruncate``,
  ``os.replace``) as the module under test sees it (``module.os.<call>``, the ``os`` module every module shares)
  with a wrapper that forwards to the real call, except for files under the target dir whose name ends with a given
  suffix (a descriptor is resolved through ``/proc/self/fd``): there it returns the error the kernel returns on a
  full or failing disk (``ENOSPC``, ``EIO``). This is fault injection of the kernel's answer, not a filesystem
  mock: every byte that is written lands in a real file. An append's write is compiled (no os-level call to
  answer): its faults are the real ones, the file-size limit here and a full tmpfs in ``test_small_filesystem``.

Kafka's behaviour, which :mod:`logmgr.log` and :mod:`logmgr.log_manager` follow:

1. Any I/O error of a log operation (append, roll, flush, producer snapshot, close) or of a dir-level write
   (recovery-point and log-start-offset checkpoints, clean-shutdown marker) takes the whole log dir offline
   (Kafka's ``LogDirFailureChannel``). The caller of a log operation gets :class:`KafkaStorageError` naming the
   partition dir and, when known, the file and the kernel's error.
2. Every log of an offline dir reports ``is_offline`` and refuses appends **and reads** with
   :class:`KafkaStorageError` quoting the failure: Kafka stops serving the dir's partitions (``handleLogDirFailure``
   removes its logs; fetches answer ``KAFKA_STORAGE_ERROR``). Nothing is read from a failed disk until a restart.
3. Nothing more is written to an offline dir: no flush, checkpoint, producer snapshot, cleanup or clean-shutdown
   marker. Other dirs keep working: appends, reads, every scheduled job, their checkpoints and marker.
4. No partial file is ever visible: a failed atomic write removes its ``.tmp`` (a stale one is ignored on reload)
   and the old checkpoint stays readable; a short write of a batch is never published, and the restart (unclean,
   as the dir has no marker) recovers the dir from its last good checkpoint and cuts any torn tail, so the log ends
   exactly at the last acknowledged batch and every batch served has a valid CRC.

Index appends write to an mmap'd region inside a file already sized at segment creation; such a write cannot fail
with ``ENOSPC`` or ``EFBIG`` (a full disk raises ``SIGBUS`` on a sparse page instead), so index file creation at
roll (the ``ftruncate`` that sizes it) and index trimming are covered instead.

Each case counts records checked after reopening; the module prints a one-line summary and, when the environment
names a file in ``LOGMGR_FAULT_REPORT``, appends a JSON line of the same figures to it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import resource
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import checkpoints.atomic
import segments.abstract_index
import segments.file_records
from checkpoints.atomic import atomic_write_bytes, fsync_dir
from checkpoints.clean_shutdown import CLEAN_SHUTDOWN_FILE, CleanShutdownMarker
from checkpoints.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig
from logmgr.dir_lock import LogDirLock
from logmgr.errors import KafkaStorageError
from logmgr.log import Isolation, Log
from logmgr.log_manager import (
    JOB_DELETE_LOGS,
    JOB_FLUSHER,
    JOB_LOG_START_OFFSET_CHECKPOINT,
    JOB_PRODUCER_EXPIRATION,
    JOB_RECOVERY_POINT_CHECKPOINT,
    JOB_RETENTION,
    LogManager,
)
from logmgr.scheduler import ManualScheduler
from segments.file_records import FileRecords
from segments.naming import TopicPartition, log_file
from segments.records import SimpleRecord
from tests.conftest import calm_disk
from tests.small_disk_helpers import run_in_child

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"),
    reason="needs fork (RLIMIT_FSIZE children) and /proc/self/fd (fault injection by path)",
)

T0 = 1_700_000_000_000
HOUR = 3_600_000
PARENT_PID = os.getpid()
BIG_VALUE = 900
SMALL_VALUE = 24
BASE_PROPS = {
    "log.index.size.max.bytes": "4096",
    "log.index.interval.bytes": "1024",
    "log.initial.task.delay.ms": "1000",
    # Every run of the flusher job flushes every online log, so the healthy dir's recovery point follows its end.
    "log.flush.interval.ms": "0",
    "log.segment.delete.delay.ms": "0",
}
JOBS_IN_ORDER = (
    JOB_FLUSHER,
    JOB_RECOVERY_POINT_CHECKPOINT,
    JOB_LOG_START_OFFSET_CHECKPOINT,
    JOB_RETENTION,
    JOB_DELETE_LOGS,
    JOB_PRODUCER_EXPIRATION,
)
DIR_FILES = (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE)


# -- figures ------------------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """What the module checked: fault cases run, records read back after reopening, and the two failure counts."""

    cases: int = 0
    records_checked: int = 0
    lost: int = 0
    corrupt_served: int = 0


FIGURES = Figures()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    line = {"test": "disk_full", **asdict(FIGURES)}
    print(
        f"\ndisk full: {FIGURES.cases} cases, {FIGURES.records_checked} records checked, {FIGURES.lost} lost, "
        f"{FIGURES.corrupt_served} corrupt served"
    )
    target = os.environ.get("LOGMGR_FAULT_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


# -- records whose content follows from their offset ------------------------------------------------------------


def value_size(topic: str) -> int:
    """Topics named ``big*`` carry 900-byte values (a few batches fill a file-size limit), others 24 bytes."""
    return BIG_VALUE if topic.startswith("big") else SMALL_VALUE


def value_for(tp: TopicPartition, offset: int) -> bytes:
    """The value of the record at ``offset`` of ``tp``. O(size)."""
    seed = hashlib.blake2b(f"{tp}/{offset}".encode(), digest_size=16).hexdigest().encode()
    size = value_size(tp.topic)
    return (seed * (size // len(seed) + 1))[:size]


def produce(
    log: Log, batches: int = 1, *, records: int = 1, producer_id: int = -1, timestamp: int = T0
) -> int:
    """Append ``batches`` batches of ``records`` records (one idempotent batch at sequence 0 when ``producer_id``
    is set); return the log end offset, below which everything is acknowledged."""
    for _ in range(batches):
        base = log.log_end_offset
        tp = log.topic_partition
        batch = [SimpleRecord(value_for(tp, base + i), b"k%d" % (base + i), timestamp) for i in range(records)]
        if producer_id >= 0:
            log.append_records(batch, producer_id=producer_id, producer_epoch=0, base_sequence=0)
        else:
            log.append_records(batch)
    return log.log_end_offset


def refusal(operation: Callable[[Log], object], log: Log) -> str | None:
    """The message of the :class:`KafkaStorageError` ``operation(log)`` raises; None when it succeeds."""
    try:
        operation(log)
    except KafkaStorageError as err:
        return str(err)
    return None


def read_from_start(log: Log) -> object:
    return log.read(log.log_start_offset, 1 << 20)


# -- managers -----------------------------------------------------------------------------------------------------


def open_manager(dirs: Sequence[Path], **props: str) -> LogManager:
    """A started manager over ``dirs`` on a manual clock and scheduler (jobs run only through ``run_job_now``)."""
    clock = ManualClock(T0)
    config = BrokerConfig.from_properties({**BASE_PROPS, "log.dirs": ",".join(map(str, dirs)), **props})
    manager = LogManager(config, clock=clock, scheduler=ManualScheduler(clock), disk_usage=calm_disk)
    manager.startup()
    return manager


def dir_files(log_dir: Path) -> dict[str, bytes | None]:
    """The checkpoint and marker files of a log dir, by name (None when absent)."""
    return {name: (log_dir / name).read_bytes() if (log_dir / name).exists() else None for name in DIR_FILES}


def tmp_files(*dirs: Path) -> list[str]:
    """Every ``*.tmp`` file left under ``dirs``."""
    return sorted(str(p) for d in dirs for p in d.rglob("*.tmp"))


def offline_dirs(manager: LogManager) -> dict[str, bool]:
    return {Path(d["path"]).name: d["offline"] for d in manager.status()["dirs"]}


def check_contained(manager: LogManager, failed_dir: Path, healthy: Log) -> dict[str, Any]:
    """Once ``failed_dir`` failed: what every log of it and the healthy log do, and whether any job wrote to the
    failed dir. Returns picklable facts for :func:`assert_contained`."""
    failed = failed_dir.resolve()
    logs = [log for log in manager.all_logs() if log.dir.parent == failed]
    before = dir_files(failed)
    appends = [refusal(produce, log) for log in logs]
    reads = [refusal(read_from_start, log) for log in logs]
    facts: dict[str, Any] = {
        "failed_dir_path": str(failed),
        "failed_logs": len(logs),
        "offline_logs": sum(log.is_offline for log in logs),
        "appends_refused": sum(message is not None for message in appends),
        "reads_refused": sum(message is not None for message in reads),
        "refusal": next(filter(None, appends), ""),
        "healthy_end": produce(healthy, 2),
    }
    for job in JOBS_IN_ORDER:
        manager.run_job_now(job)
    healthy_dir = healthy.dir.parent
    facts["healthy_read"] = len(read_records(healthy))
    facts["healthy_checkpoint"] = OffsetCheckpointFile(healthy_dir / RECOVERY_POINT_CHECKPOINT_FILE).read().get(
        healthy.topic_partition
    )
    facts["failed_dir_unchanged"] = dir_files(failed) == before
    facts["offline_dirs"] = offline_dirs(manager)
    facts["failure"] = manager.status()["dirs"][[d.path for d in manager.log_dirs()].index(failed)]["failure"]
    return facts


def assert_contained(facts: Mapping[str, Any], failed_name: str, healthy_name: str) -> None:
    """Kafka's containment of a failed dir (module docstring, points 1-3)."""
    assert facts["failed_logs"] >= 1
    assert facts["offline_logs"] == facts["failed_logs"], "every log of the failed dir reports offline"
    assert facts["appends_refused"] == facts["failed_logs"], "every log of the failed dir refuses appends"
    assert facts["reads_refused"] == facts["failed_logs"], "every log of the failed dir refuses reads"
    assert f"log dir {facts['failed_dir_path']} is offline" in facts["refusal"]
    assert facts["failure"], "the failure that took the dir offline is recorded"
    assert "[Errno" in facts["refusal"], "a refusal quotes the kernel's error that took the dir offline"
    assert facts["offline_dirs"] == {failed_name: True, healthy_name: False}
    assert facts["failed_dir_unchanged"], "no job wrote a checkpoint or marker into the offline dir"
    assert facts["healthy_read"] == facts["healthy_end"]
    assert facts["healthy_checkpoint"] == facts["healthy_end"], "the healthy dir's jobs and checkpoints go on"


# -- reopening ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reopened:
    log_start_offset: int
    log_end_offset: int
    recovered_segments: int
    truncated_bytes: int
    producers: frozenset[int]
    clean_dir: bool


def read_records(log: Log) -> list[tuple[int, bytes | None]]:
    """Every record from the log start to the log end, batch CRCs checked (a bad one counts as corrupt served)."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = log.read(offset, 1 << 20, isolation=Isolation.LOG_END).batches()
        assert batches, f"{log.topic_partition}: nothing served at {offset} below the log end {log.log_end_offset}"
        for batch in batches:
            if not batch.is_valid():
                FIGURES.corrupt_served += 1
            out.extend((record.offset, record.value) for record in batch.records() if record.offset >= offset)
            offset = batch.last_offset + 1
    return out


def reopen_and_check(
    dirs: Sequence[Path], expected_end: Mapping[str, int], *, expected_start: Mapping[str, int] | None = None
) -> dict[str, Reopened]:
    """Reopen ``dirs`` with a fresh manager (no fault) and check every named log (``topic-partition``): it ends at
    its last acknowledged offset, and every record from its start is served, in order, CRC-valid and with the
    value its offset determines. Shuts the manager down; returns what the reopen found."""
    FIGURES.cases += 1
    assert not tmp_files(*dirs), "a failed write left a temporary file"
    manager = open_manager(dirs)
    try:
        found: dict[str, Reopened] = {}
        clean_dirs = {d.path: d.had_clean_shutdown for d in manager.log_dirs()}
        logs = {str(log.topic_partition): log for log in manager.all_logs()}
        for name, end in expected_end.items():
            log = logs[name]
            start = (expected_start or {}).get(name, log.log_start_offset)
            assert log.log_start_offset == start, f"{name}: log start {log.log_start_offset}, expected {start}"
            FIGURES.lost += max(0, end - log.log_end_offset)
            assert log.log_end_offset == end, f"{name}: log end {log.log_end_offset}, last acknowledged {end}"
            records = read_records(log)
            FIGURES.records_checked += len(records)
            assert [offset for offset, _ in records] == list(range(start, end)), f"{name}: offsets served"
            wrong = [offset for offset, value in records if value != value_for(log.topic_partition, offset)]
            assert not wrong, f"{name}: wrong values at offsets {wrong[:5]}"
            found[name] = Reopened(
                log.log_start_offset,
                log.log_end_offset,
                log.recovery.recovered_segments,
                log.recovery.truncated_bytes,
                frozenset(log.producer_state.active_producers),
                clean_dirs[log.dir.parent],
            )
    finally:
        manager.shutdown()
    assert FIGURES.corrupt_served == 0
    return found


# -- the two ways of failing ---------------------------------------------------------------------------------------


def limit_file_size(limit: int) -> None:
    """Lower RLIMIT_FSIZE of the calling process, which must be a forked child (never the pytest process)."""
    if os.getpid() == PARENT_PID:
        raise RuntimeError("RLIMIT_FSIZE is only ever lowered in a child: pytest must still write its report")
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


@dataclass
class Fault:
    """An injected kernel answer: ``errno_`` for ``call`` on files under ``under`` named ``*suffix``, after
    ``skip`` matching calls went through."""

    call: str
    errno_: int
    under: str
    suffix: str
    skip: int = 0
    seen: int = 0
    hits: int = 0

    def matches(self, target: int | str | os.PathLike[str]) -> bool:
        path = os.readlink(f"/proc/self/fd/{target}") if isinstance(target, int) else os.path.abspath(target)
        return path.startswith(self.under) and path.endswith(self.suffix)


def inject(
    monkeypatch: pytest.MonkeyPatch,
    module: ModuleType,
    call: str,
    errno_: int,
    under: Path,
    suffix: str,
    *,
    skip: int = 0,
) -> Fault:
    """Make ``module.os.<call>`` answer ``errno_`` for matching files (see the module docstring)."""
    fault = Fault(call, errno_, str(under.resolve()) + os.sep, suffix, skip)
    real = getattr(module.os, call)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if fault.matches(args[0]):
            fault.seen += 1
            if fault.seen > fault.skip:
                fault.hits += 1
                raise OSError(fault.errno_, os.strerror(fault.errno_))
        return real(*args, **kwargs)

    monkeypatch.setattr(module.os, call, kernel)
    return fault


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """Two log dirs: ``d1`` is the one that fails, ``d2`` must keep working."""
    return tmp_path / "d1", tmp_path / "d2"


def two_dir_manager(d1: Path, d2: Path, **props: str) -> tuple[LogManager, Log, Log, Log]:
    """A manager over both dirs with ``big-0`` and ``sib-0`` in d1 and ``healthy-0`` in d2, each holding a few
    flushed and checkpointed records (so the dirs have checkpoint content to preserve)."""
    manager = open_manager([d1, d2], **props)
    big = manager.get_or_create_log("big", 0)
    healthy = manager.get_or_create_log("healthy", 0)
    sib = manager.get_or_create_log("sib", 0)
    assert (big.dir.parent, healthy.dir.parent, sib.dir.parent) == (d1.resolve(), d2.resolve(), d1.resolve())
    produce(big, 2, records=2)
    produce(sib, 2)
    produce(healthy, 2)
    for job in (JOB_FLUSHER, JOB_RECOVERY_POINT_CHECKPOINT, JOB_LOG_START_OFFSET_CHECKPOINT):
        manager.run_job_now(job)
    return manager, big, sib, healthy


def ends(*logs: Log) -> dict[str, int]:
    return {str(log.topic_partition): log.log_end_offset for log in logs}


def shutdown_and_reopen(
    manager: LogManager, dirs: Sequence[Path], *logs: Log, expected_start: Mapping[str, int] | None = None
) -> dict[str, Reopened]:
    """Note where ``logs`` end, shut ``manager`` down and :func:`reopen_and_check` ``dirs`` against those ends."""
    expected = ends(*logs)
    manager.shutdown()
    return reopen_and_check(dirs, expected, expected_start=expected_start)


def append_until_refused(log: Log, append: Callable[[int], object], attempts: int = 60) -> dict[str, Any]:
    """Call ``append(i)`` for i = 0, 1, ... until ``log`` refuses with :class:`KafkaStorageError`; return the
    error, its cause's errno, how many appends succeeded, and the log end and active-segment size before the
    refused one (the last acknowledged state)."""
    for i in range(attempts):
        acked, published = log.log_end_offset, log.active_segment.size
        try:
            append(i)
        except KafkaStorageError as err:
            cause = err.__cause__
            return {
                "error": str(err),
                "errno": cause.errno if isinstance(cause, OSError) else None,
                "appended": i,
                "acked": acked,
                "published": published,
            }
    raise AssertionError(f"{log.topic_partition}: {attempts} appends and none refused")


# -- real file-size limit --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("crash", [False, True], ids=["then-shutdown", "then-crash"])
def test_append_past_the_file_size_limit(dirs: tuple[Path, Path], crash: bool) -> None:
    """A batch written across RLIMIT_FSIZE: the short write is never published, the dir goes offline, d2 works
    on; after a crash the torn tail is cut by recovery."""
    d1, d2 = dirs
    limit = 64 * 1024

    def body() -> dict[str, Any]:
        manager, big, sib, healthy = two_dir_manager(d1, d2)
        limit_file_size(limit)
        facts = append_until_refused(big, lambda _: produce(big, records=8))
        facts.update(
            still_published=big.active_segment.size == facts["published"],
            on_disk=os.path.getsize(big.active_segment.log.path),
            active_log=str(big.active_segment.log.path),
            ends=ends(big, sib),
        )
        facts.update(check_contained(manager, d1, healthy))
        facts["ends"].update(ends(healthy))
        if not crash:
            manager.shutdown()
            facts["markers"] = (CleanShutdownMarker.exists(d1), CleanShutdownMarker.exists(d2))
        return facts

    facts = run_in_child(body, ignore_sigxfsz=True)
    assert facts["errno"] == errno.EFBIG, facts["error"]
    assert "append of" in facts["error"] and facts["active_log"] in facts["error"] and "File too large" in facts["error"]
    assert facts["still_published"], "a failed append must not move the segment size readers see"
    assert facts["on_disk"] == limit, "the short write reached the limit (a torn batch sits past the log end)"
    assert_contained(facts, "d1", "d2")
    if not crash:
        assert facts["markers"] == (False, True)
    reopened = reopen_and_check([d1, d2], facts["ends"])
    assert not reopened["big-0"].clean_dir and reopened["healthy-0"].clean_dir is (not crash)
    assert reopened["big-0"].recovered_segments >= 1
    if crash:
        assert reopened["big-0"].truncated_bytes > 0, "recovery cut the torn batch"


def test_roll_cannot_size_the_new_index(dirs: tuple[Path, Path]) -> None:
    """A size-based roll whose new ``.index`` (``segment.index.bytes`` > the limit) cannot be sized: the append that
    needed the roll is refused, the dir goes offline, nothing of it is visible after reopening."""
    d1, d2 = dirs
    limit = 64 * 1024

    def body() -> dict[str, Any]:
        manager = open_manager([d1, d2])
        big = manager.get_or_create_log("big-roll", 0, {"segment.bytes": "16384", "segment.index.bytes": str(128 * 1024)})
        healthy = manager.get_or_create_log("healthy", 0)
        limit_file_size(limit)
        facts = append_until_refused(big, lambda _: produce(big))
        facts.update(segments=len(big.segments), ends=ends(big))
        facts.update(check_contained(manager, d1, healthy))
        facts["ends"].update(ends(healthy))
        manager.shutdown()
        return facts

    facts = run_in_child(body, ignore_sigxfsz=True)
    assert facts["errno"] == errno.EFBIG and f"roll to offset {facts['acked']}" in facts["error"], facts["error"]
    assert facts["segments"] == 1, "the segment that could not be created is not in the log"
    assert_contained(facts, "d1", "d2")
    reopen_and_check([d1, d2], facts["ends"])


def test_producer_snapshot_at_roll_past_the_limit(dirs: tuple[Path, Path]) -> None:
    """Time-based rolls, one idempotent producer per segment: the snapshot written at a roll grows by 46 bytes per
    producer until it crosses the limit. The roll fails, its append is refused, and the producers' state is rebuilt
    from the log on reopening."""
    d1, d2 = dirs
    limit = 1024

    def body() -> dict[str, Any]:
        manager = open_manager([d1, d2])
        pids = manager.get_or_create_log("pids", 0, {"segment.ms": "1000", "segment.index.bytes": "1024"})
        healthy = manager.get_or_create_log("healthy", 0)
        limit_file_size(limit)
        facts = append_until_refused(pids, lambda i: produce(pids, producer_id=5000 + i, timestamp=T0 + i * 2000))
        facts.update(producers=[5000 + i for i in range(facts["appended"])], ends=ends(pids))
        facts.update(check_contained(manager, d1, healthy))
        facts["ends"].update(ends(healthy))
        manager.shutdown()
        return facts

    facts = run_in_child(body, ignore_sigxfsz=True)
    assert facts["errno"] == errno.EFBIG and ".snapshot.tmp" in facts["error"], facts["error"]
    assert "roll to offset" in facts["error"] and len(facts["producers"]) > 20
    assert_contained(facts, "d1", "d2")
    reopened = reopen_and_check([d1, d2], facts["ends"])
    assert set(facts["producers"]) <= reopened["pids-0"].producers, "producer state rebuilt past the lost snapshot"


@pytest.mark.parametrize("first_job", [JOB_RECOVERY_POINT_CHECKPOINT, JOB_LOG_START_OFFSET_CHECKPOINT])
def test_checkpoint_write_past_the_limit(dirs: tuple[Path, Path], first_job: str) -> None:
    """A dir's checkpoint (long topic names make it larger than the limit) cannot be written: the old file stays
    whole and readable, no ``.tmp`` is left, the dir goes offline and neither checkpoint is written there again."""
    d1, d2 = dirs
    topic = "c" * 200
    limit = 1024
    partitions = 8

    def body() -> dict[str, Any]:
        setup = open_manager([d1])
        for p in range(partitions):
            produce(setup.get_or_create_log(topic, p), 3)
        setup.shutdown()
        manager = open_manager([d1, d2])
        healthy = manager.get_or_create_log("healthy", 0)
        produce(healthy, 2)
        logs = [manager.get_log(TopicPartition(topic, p)) for p in range(partitions)]
        for log in logs:
            assert log is not None and log.dir.parent == d1.resolve()
            log.delete_records_before(1)
        for job in (JOB_FLUSHER, JOB_RECOVERY_POINT_CHECKPOINT, JOB_LOG_START_OFFSET_CHECKPOINT):
            manager.run_job_now(job)
        old = dir_files(d1)
        for log in logs:
            assert log is not None
            log.delete_records_before(2)
            produce(log)
        limit_file_size(limit)
        manager.run_job_now(JOB_FLUSHER)
        manager.run_job_now(first_job)
        facts: dict[str, Any] = {
            "old_kept": dir_files(d1) == old,
            "tmp": tmp_files(d1),
            "ends": {str(log.topic_partition): log.log_end_offset for log in logs if log is not None},
        }
        facts.update(check_contained(manager, d1, healthy))
        facts["ends"].update(ends(healthy))
        manager.shutdown()
        facts["d1_after_shutdown"] = dir_files(d1) == old
        return facts

    facts = run_in_child(body, ignore_sigxfsz=True)
    assert facts["old_kept"] and facts["tmp"] == [] and facts["d1_after_shutdown"]
    checkpoint = RECOVERY_POINT_CHECKPOINT_FILE if first_job == JOB_RECOVERY_POINT_CHECKPOINT else LOG_START_OFFSET_CHECKPOINT_FILE
    assert f"{d1.resolve() / checkpoint}.tmp" in facts["failure"] and "File too large" in facts["failure"]
    assert_contained(facts, "d1", "d2")
    old_points = OffsetCheckpointFile(d1 / RECOVERY_POINT_CHECKPOINT_FILE).read()
    old_starts = OffsetCheckpointFile(d1 / LOG_START_OFFSET_CHECKPOINT_FILE).read()
    assert set(old_points.values()) == {3} and set(old_starts.values()) == {1} and len(old_starts) == partitions
    # The raise of the log start offset to 2 never reached a checkpoint: the restart keeps the old one, as Kafka.
    starts = {f"{topic}-{p}": 1 for p in range(partitions)}
    reopen_and_check([d1, d2], facts["ends"], expected_start=starts)


def test_clean_shutdown_marker_past_the_limit(dirs: tuple[Path, Path]) -> None:
    """The marker (30 bytes) cannot be written in either dir: shutdown still completes and releases the locks, no
    marker or ``.tmp`` is left, and the next start recovers both dirs."""
    d1, d2 = dirs

    def body() -> dict[str, Any]:
        manager = open_manager([d1, d2])
        m, n = manager.get_or_create_log("m", 0), manager.get_or_create_log("n", 0)
        produce(m, 3)
        produce(n, 3)
        limit_file_size(20)
        manager.shutdown()
        for d in (d1, d2):
            LogDirLock(d).release()
        return {
            "markers": [CleanShutdownMarker.exists(d) for d in (d1, d2)],
            "offline": offline_dirs(manager),
            "failure": [d["failure"] for d in manager.status()["dirs"]],
            "ends": ends(m, n),
        }

    facts = run_in_child(body, ignore_sigxfsz=True)
    assert facts["markers"] == [False, False] and facts["offline"] == {"d1": True, "d2": True}
    assert all(CLEAN_SHUTDOWN_FILE + ".tmp" in failure and "File too large" in failure for failure in facts["failure"])
    reopened = reopen_and_check([d1, d2], facts["ends"])
    assert not reopened["m-0"].clean_dir and not reopened["n-0"].clean_dir


# -- injected kernel answers -----------------------------------------------------------------------------------------


def test_flush_fsync_eio(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync answers EIO: the recovery point stays where the last good flush left it (the kernel may have
    dropped the dirty pages), the dir goes offline and the restart recovers from that point."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    produce(big, 3)
    point = big.recovery_point
    fault = inject(monkeypatch, segments.file_records, "fsync", errno.EIO, d1, ".log")
    with pytest.raises(KafkaStorageError) as caught:
        big.flush()
    message = str(caught.value)
    assert str(big.active_segment.log.path) in message and "Input/output error" in message
    assert big.recovery_point == point < big.log_end_offset
    facts = check_contained(manager, d1, healthy)
    assert fault.hits == 1, "no further fsync of the offline dir's files"
    monkeypatch.undo()
    assert_contained(facts, "d1", "d2")
    reopened = shutdown_and_reopen(manager, [d1, d2], big, sib, healthy)
    assert reopened["big-0"].recovered_segments >= 1 and reopened["healthy-0"].recovered_segments == 0


@pytest.mark.parametrize(
    ("checkpoint", "call", "err", "job"),
    [
        (RECOVERY_POINT_CHECKPOINT_FILE, "fsync", errno.EIO, JOB_RECOVERY_POINT_CHECKPOINT),
        (LOG_START_OFFSET_CHECKPOINT_FILE, "replace", errno.ENOSPC, JOB_LOG_START_OFFSET_CHECKPOINT),
    ],
    ids=["recovery-point-fsync-EIO", "log-start-offset-rename-ENOSPC"],
)
def test_checkpoint_job_fails(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, checkpoint: str, call: str, err: int, job: str
) -> None:
    """A checkpoint job meets EIO at the fsync of the ``.tmp`` or ENOSPC at the rename: the old checkpoint stays,
    the ``.tmp`` is removed, the dir goes offline and the failure names the file."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    big.delete_records_before(1)
    old = dir_files(d1)
    produce(big, 2)
    manager.run_job_now(JOB_FLUSHER)
    fault = inject(monkeypatch, checkpoints.atomic, call, err, d1, checkpoint + ".tmp")
    manager.run_job_now(job)
    assert fault.hits == 1 and dir_files(d1) == old and tmp_files(d1) == []
    facts = check_contained(manager, d1, healthy)
    assert f"{d1.resolve() / checkpoint}.tmp" in facts["failure"] and os.strerror(err) in facts["failure"]
    monkeypatch.undo()
    assert_contained(facts, "d1", "d2")
    expected = ends(big, sib, healthy)
    manager.shutdown()
    assert dir_files(d1) == old, "shutdown wrote nothing into the offline dir"
    reopen_and_check([d1, d2], expected, expected_start={"big-0": 0})


def test_stale_tmp_files_are_ignored_on_reload(dirs: tuple[Path, Path]) -> None:
    """Temporary files a crash left behind (checkpoint, marker, producer snapshot) are never read as the real
    thing: the old checkpoint is used and the dir counts as uncleanly shut down."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    expected = ends(big, sib, healthy)
    manager.shutdown()
    points = OffsetCheckpointFile(d1 / RECOVERY_POINT_CHECKPOINT_FILE).read()
    CleanShutdownMarker.remove(d1)
    (d1 / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")).write_bytes(b"0\n1\nbig 0 99")
    (d1 / (CLEAN_SHUTDOWN_FILE + ".tmp")).write_bytes(b'{"version":0,"brokerEpoch":')
    (big.dir / "00000000000000000099.snapshot.tmp").write_bytes(b"\x00\x01torn")
    manager = open_manager([d1, d2])
    try:
        reloaded = {d.path.name: d.had_clean_shutdown for d in manager.log_dirs()}
        log = manager.get_log(TopicPartition("big", 0))
        assert log is not None and log.recovery_point <= points[TopicPartition("big", 0)]
        assert log.producer_state.latest_snapshot_offset() != 99
    finally:
        manager.shutdown()
    assert reloaded == {"d1": False, "d2": True}
    for stale in tmp_files(d1):
        os.unlink(stale)
    reopen_and_check([d1, d2], expected)


# -- regressions: one per bug fixed -----------------------------------------------------------------------------------


def test_bug_is_offline_ignored_the_dir_state(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A dir taken offline by a failure outside a log (here its checkpoint) left its logs reporting online;
    reads were served. Now every log of the dir is offline and refuses every operation with the failure quoted."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    inject(monkeypatch, checkpoints.atomic, "fsync", errno.EIO, d1, ".tmp")
    manager.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
    operations: tuple[Callable[[Log], object], ...] = (
        produce,
        lambda log: log.read(0, 1024),
        lambda log: log.offset_for_timestamp(T0),
        lambda log: log.flush(),
        lambda log: log.roll(),
        lambda log: log.truncate_to(0),
        lambda log: log.delete_records_before(1),
    )
    for log in (big, sib):
        assert log.is_offline
        for operation in operations:
            with pytest.raises(KafkaStorageError, match=re.escape(RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")):
                operation(log)
    assert not healthy.is_offline and produce(healthy) == 3
    monkeypatch.undo()
    shutdown_and_reopen(manager, [d1, d2], big, sib, healthy)


def test_bug_roll_io_error_escaped_as_bare_oserror(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Trimming the old index at roll failed with EIO: a bare OSError escaped and the dir stayed online. Now the
    roll raises KafkaStorageError and the dir is offline."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    inject(monkeypatch, segments.abstract_index, "ftruncate", errno.EIO, d1, ".index")
    end = big.log_end_offset
    with pytest.raises(KafkaStorageError, match=f"roll to offset {end} failed in .*Input/output error"):
        big.roll()
    assert big.is_offline and sib.is_offline and offline_dirs(manager) == {"d1": True, "d2": False}
    monkeypatch.undo()
    shutdown_and_reopen(manager, [d1, d2], big, sib, healthy)


def test_bug_roll_check_io_error_reached_the_caller_as_a_raw_oserror(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The roll check before an append reads the active segment's first batch (its time rule): EIO there reached
    the caller as a raw OSError and the dir stayed online. Now it goes through the dir-failure path: the append is
    refused with KafkaStorageError naming the .log, d1 goes offline, d2 keeps working."""
    d1, d2 = dirs
    two_dir_manager(d1, d2)[0].shutdown()
    # Segments loaded from disk know nothing of their first batch: the first roll check reads it.
    manager = open_manager([d1, d2])
    big, sib, healthy = (manager.get_or_create_log(topic, 0) for topic in ("big", "sib", "healthy"))
    acked = ends(big, sib, healthy)
    fault = inject(monkeypatch, segments.file_records, "pread", errno.EIO, d1, ".log")
    failure = r"roll check failed in .*Input/output error.*00000000000000000000\.log"
    with pytest.raises(KafkaStorageError, match=failure):
        produce(big)
    assert fault.hits == 1 and big.log_end_offset == acked["big-0"]
    assert big.is_offline and sib.is_offline and offline_dirs(manager) == {"d1": True, "d2": False}
    assert produce(healthy) == acked["healthy-0"] + 1
    monkeypatch.undo()
    shutdown_and_reopen(manager, [d1, d2], big, sib, healthy)


def test_bug_post_roll_snapshot_fsync_escaped_as_bare_oserror(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The post-roll flush fsyncs the snapshot written at the roll outside any error handling: EIO escaped as a
    bare OSError and the dir stayed online."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    inject(monkeypatch, segments.file_records, "fsync", errno.EIO, d1, ".snapshot")
    base = big.roll().base_offset
    with pytest.raises(KafkaStorageError, match=r"fsync of .*\.snapshot failed") as caught:
        big.flush_up_to_segment(base)
    assert f"{base:020d}.snapshot" in str(caught.value) and big.is_offline and sib.is_offline
    big.flush_up_to_segment(base)  # a queued post-roll flush of an offline log has nothing to do
    monkeypatch.undo()
    shutdown_and_reopen(manager, [d1, d2], big, sib, healthy)


def test_bug_checkpoint_failure_at_shutdown_still_wrote_the_clean_marker(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At shutdown a failed recovery-point checkpoint took the dir offline, yet the log-start-offset checkpoint and
    the clean-shutdown marker were still written: the next start would skip recovery on a stale checkpoint."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    expected = ends(big, sib, healthy)
    old = dir_files(d1)
    inject(monkeypatch, checkpoints.atomic, "fsync", errno.EIO, d1, RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")
    manager.shutdown()
    assert dir_files(d1) == {**old, CLEAN_SHUTDOWN_FILE: None}
    assert CleanShutdownMarker.exists(d2)
    monkeypatch.undo()
    reopened = reopen_and_check([d1, d2], expected)
    assert not reopened["big-0"].clean_dir and reopened["healthy-0"].clean_dir


def test_bug_marker_write_failure_aborted_shutdown(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO at the fsync of d1's marker escaped from shutdown: d2 was never shut down and no lock was released."""
    d1, d2 = dirs
    manager, big, sib, healthy = two_dir_manager(d1, d2)
    expected = ends(big, sib, healthy)
    inject(monkeypatch, checkpoints.atomic, "fsync", errno.EIO, d1, CLEAN_SHUTDOWN_FILE + ".tmp")
    manager.shutdown()
    assert not CleanShutdownMarker.exists(d1) and CleanShutdownMarker.exists(d2) and tmp_files(d1) == []
    for d in (d1, d2):
        LogDirLock(d).release()
    monkeypatch.undo()
    reopened = reopen_and_check([d1, d2], expected)
    assert not reopened["big-0"].clean_dir and reopened["healthy-0"].clean_dir


def test_bug_close_failure_left_segments_open(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer snapshot at close meets ENOSPC at its rename: close raised before closing any segment (their
    descriptors leaked) and the dir stayed online, so its checkpoints were still written."""
    d1, d2 = dirs
    manager = open_manager([d1, d2])
    pids = manager.get_or_create_log("pids", 0)
    healthy = manager.get_or_create_log("healthy", 0)
    for pid in (7, 8, 9):
        produce(pids, producer_id=pid)
    produce(healthy, 2)
    expected = ends(pids, healthy)
    inject(monkeypatch, checkpoints.atomic, "replace", errno.ENOSPC, d1, ".snapshot.tmp")
    manager.shutdown()
    assert all(segment.log.closed for segment in pids.segments.values())
    assert offline_dirs(manager) == {"d1": True, "d2": False}
    assert dir_files(d1)[CLEAN_SHUTDOWN_FILE] is None and CleanShutdownMarker.exists(d2) and tmp_files(d1) == []
    monkeypatch.undo()
    reopened = reopen_and_check([d1, d2], expected)
    assert {7, 8, 9} <= reopened["pids-0"].producers


def test_bug_cleanup_io_error_skipped_the_other_dirs(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Retention renaming an expired segment to ``.deleted`` met ENOSPC: the bare OSError ended ``cleanup_logs``, so
    the dirs after the failed one were never cleaned. Now only the failed dir goes offline."""
    d1, d2 = dirs
    manager = open_manager([d1, d2], **{"log.segment.bytes": "420", "log.retention.ms": str(HOUR)})
    old = manager.get_or_create_log("old", 0)
    other = manager.get_or_create_log("other", 0)
    for log in (old, other):
        produce(log, 12, timestamp=T0 - 2 * HOUR)
        assert len(log.segments) > 2
    inject(monkeypatch, segments.file_records, "replace", errno.ENOSPC, d1, ".log")
    report = manager.cleanup_logs()
    assert offline_dirs(manager) == {"d1": True, "d2": False} and old.is_offline
    assert "No space left on device" in (manager.status()["dirs"][0]["failure"] or "")
    assert TopicPartition("other", 0) in report.deletions and other.log_start_offset == 12
    monkeypatch.undo()
    shutdown_and_reopen(manager, [d1, d2], old, other, expected_start={"other-0": 12})


def test_bug_write_errors_named_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.fsync``/``os.pwrite`` on a descriptor report no file: the atomic writer and FileRecords raised
    ``[Errno 5] Input/output error`` with nothing saying where."""
    target = tmp_path / "checkpoint"
    target.write_bytes(b"old")
    inject(monkeypatch, checkpoints.atomic, "fsync", errno.EIO, tmp_path, "checkpoint.tmp")
    with pytest.raises(OSError, match="Input/output error") as caught:
        atomic_write_bytes(target, b"new")
    assert caught.value.errno == errno.EIO and caught.value.filename == f"{target}.tmp"
    assert target.read_bytes() == b"old" and tmp_files(tmp_path) == []
    inject(monkeypatch, checkpoints.atomic, "fsync", errno.EIO, tmp_path.parent, tmp_path.name)
    with pytest.raises(OSError) as caught:
        fsync_dir(tmp_path)
    assert caught.value.filename == str(tmp_path)
    path = log_file(tmp_path, 0)

    def body() -> dict[str, Any]:
        # The append's write is compiled: a real file-size limit makes the kernel cut it short, then refuse.
        limit_file_size(50)
        with FileRecords(path, writable=True, create=True) as records:
            try:
                records.append(b"x" * 100)
            except OSError as err:
                refused = {"errno": err.errno, "filename": err.filename, "message": str(err)}
            size = records.size_in_bytes
        return {**refused, "size": size, "on_disk": path.stat().st_size}

    facts = run_in_child(body, ignore_sigxfsz=True)
    assert facts["errno"] == errno.EFBIG
    assert facts["filename"] == str(path) and "append of 100 bytes at position 0" in facts["message"]
    assert facts["size"] == 0 and facts["on_disk"] == 0, "close trims the short write"
