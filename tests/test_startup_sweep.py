"""Startup sweeps temporaries (issue 11, item 5).

A crash inside an atomic write leaves ``<name>.tmp``; nothing but the next write of the same file replaced it, so
``leader-epoch-checkpoint.tmp`` or ``partition.metadata.tmp`` left by a SIGKILL survived restarts and clean
shutdowns. Startup now removes the ``.tmp`` of every file written that way, in the log dir (the four offset
checkpoints, the clean-shutdown marker, ``meta.properties``) and in each partition dir (leader-epoch checkpoint,
``partition.metadata``, producer snapshots, a ``.keyindex`` rebuilt by ``reindex --key-index``), with Kafka's
``.deleted``, ``.cleaned`` and stray ``.swap`` rules, and reports what it removed: ``LogDir.removed_temporaries``
and each log's ``recovery.actions``. Other files ending in ``.tmp``, and directories, are not its to remove.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from logmgr.config import BrokerConfig
from logmgr.log_manager import LogManager
from segments.naming import TopicPartition
from segments.records import SimpleRecord

TP = TopicPartition("t", 0)
NO_JOBS = str(10**15)
LOG_DIR_TEMPORARIES = [
    ".kafka_cleanshutdown.tmp",
    "cleaner-offset-checkpoint.tmp",
    "log-start-offset-checkpoint.tmp",
    "meta.properties.tmp",
    "recovery-point-offset-checkpoint.tmp",
    "replication-offset-checkpoint.tmp",
]
PARTITION_TEMPORARIES = [
    "00000000000000000000.keyindex.tmp",
    "00000000000000000003.snapshot.tmp",
    "leader-epoch-checkpoint.tmp",
    "partition.metadata.tmp",
]


def _manager(logdir: Path) -> LogManager:
    return LogManager(BrokerConfig.from_properties({"log.dirs": str(logdir), "log.initial.task.delay.ms": NO_JOBS}))


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    """A log dir with ``t-0`` holding 6 records over two segments, shut down cleanly."""
    path = tmp_path / "logdir"
    with _manager(path) as manager:
        log = manager.get_or_create_log(TP.topic, 0)
        for i in range(3):
            log.append_records([SimpleRecord(b"v%d" % i)])
        log.roll()
        for i in range(3, 6):
            log.append_records([SimpleRecord(b"v%d" % i)], leader_epoch=1)
    return path


def _values(manager: LogManager) -> list[bytes | None]:
    log = manager.get_log(TP)
    assert log is not None
    values: list[bytes | None] = []
    while len(values) < log.log_end_offset:
        values.extend(r.value for b in log.read(len(values), 1 << 20).batches() for r in b.records())
    return values


def test_startup_sweeps_every_temporary_kind_and_reports_it(logdir: Path) -> None:
    part = logdir / str(TP)
    for name in LOG_DIR_TEMPORARIES:
        (logdir / name).write_bytes(b"half-writ")
    for name in PARTITION_TEMPORARIES:
        (part / name).write_bytes(b"half-writ")
    # Not temporaries of ours: a user's file, a name that only looks like one, a directory.
    kept = [logdir / "notes.tmp", part / "other.tmp", part / "x.snapshot.tmp"]
    for path in kept:
        path.write_bytes(b"keep")
    (part / "partition.metadata.tmp.d").mkdir()
    with _manager(logdir) as manager:
        (log_dir,) = manager.log_dirs()
        assert log_dir.had_clean_shutdown, "a marker's temporary is not the marker"
        assert log_dir.removed_temporaries == LOG_DIR_TEMPORARIES
        log = manager.get_log(TP)
        assert log is not None
        reported = [a.split()[1] for a in log.recovery.actions if "temporary of an interrupted write" in a]
        assert sorted(reported) == PARTITION_TEMPORARIES
        assert log.recovery.recovered_segments == 0
        assert _values(manager) == [b"v%d" % i for i in range(6)]
    left = sorted(p.name for p in logdir.rglob("*.tmp"))
    assert left == sorted(p.name for p in kept)


def test_bug_half_written_temporaries_survived_restart_and_clean_shutdown(logdir: Path, tmp_path: Path) -> None:
    # A writer killed by SIGKILL while it rewrote the leader-epoch checkpoint and partition.metadata left both
    # .tmp files; a restart and a clean shutdown kept them. A real SIGKILL leaves them here: the child writes the
    # temporaries the way an atomic write starts (create, write half) and kills itself before the rename.
    part = logdir / str(TP)
    script = (
        "import os, signal, sys\n"
        "for name in sys.argv[1:]:\n"
        "    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
        "    os.write(fd, b'0\\n2\\n0 0')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    targets = [str(part / "leader-epoch-checkpoint.tmp"), str(part / "partition.metadata.tmp")]
    child = subprocess.run([sys.executable, "-c", script, *targets], check=False)
    assert child.returncode == -signal.SIGKILL
    assert all(os.path.exists(t) for t in targets)
    with _manager(logdir) as manager:
        assert _values(manager) == [b"v%d" % i for i in range(6)]
    assert not any(os.path.exists(t) for t in targets)
    with _manager(logdir):
        pass
    assert not list(logdir.rglob("*.tmp"))


def test_a_linked_temporary_is_removed_not_followed(logdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"outside content")
    (logdir / str(TP) / "partition.metadata.tmp").symlink_to(victim)
    (logdir / "recovery-point-offset-checkpoint.tmp").symlink_to(outside / "dangling")
    with _manager(logdir) as manager:
        assert manager.log_dirs()[0].removed_temporaries == ["recovery-point-offset-checkpoint.tmp"]
    assert victim.read_bytes() == b"outside content"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert not list(logdir.rglob("*.tmp"))


def test_cleaned_deleted_and_stray_swap_files_are_removed_and_reported(logdir: Path) -> None:
    part = logdir / str(TP)
    base = sorted(part.glob("*.log"))[-1].stem
    # An unfinished clean (.cleaned at 100) makes every .swap at or above it an unfinished split: all removed.
    leftovers = {
        "00000000000000000100.log.cleaned": "unfinished cleaning",
        "00000000000000000100.log.swap": "unfinished split",
        "00000000000000000150.index.swap": "unfinished split",
        f"{base}.log.deleted": "pending delete",
    }
    for name in leftovers:
        (part / name).write_bytes(b"")
    with _manager(logdir) as manager:
        log = manager.get_log(TP)
        assert log is not None
        for name, why in leftovers.items():
            assert f"removed {name} ({why})" in log.recovery.actions, log.recovery.actions
        assert _values(manager) == [b"v%d" % i for i in range(6)]
    assert not [p for p in part.iterdir() if p.name in leftovers]
