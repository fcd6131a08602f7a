"""Symbolic links inside a log dir, round two (issue 11, item 3): the engine itself, not only the CLI, never writes
through a link, and refuses one with a typed error that takes the dir offline.

``tests/faults/test_path_safety.py`` covers the CLI, which refuses a dir holding links before opening it. Here a
:class:`LogManager` runs directly over two dirs: ``d1`` holds ``t-0`` (several segments, an idempotent producer's
snapshots, an aborted transaction in a ``.txnindex``, two leader epochs), ``d2`` holds ``h-0``. One file of
``d1`` is replaced by a link to a file outside both dirs, the dir is started cleanly or after a crash, and every
operation is run on both logs: appends (a new leader epoch, a transaction aborted), reads from the start, a
lookup by timestamp, a roll, truncation, every scheduled job, shutdown. Asserted for each case:

* the outside file (and everything beside it) is byte for byte what it was, mode included;
* every error any operation raises is typed (:class:`LogmgrError` or :class:`StorageFormatError`), never a bare
  ``OSError``;
* a link at a file the engine opens for writing or maps (``.log``, ``.index``, ``.timeindex``, ``.txnindex``) is
  refused with an error naming it, ``d1`` goes offline as Kafka's failed dir does, and ``d2`` keeps appending and
  serving reads; a checkpoint or snapshot link is replaced by the atomic rename, never written through.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from logmgr.errors import KafkaStorageError, LogmgrError
from logmgr.log import Isolation, Log
from logmgr.log_manager import (
    JOB_DELETE_LOGS,
    JOB_FLUSHER,
    JOB_LOG_START_OFFSET_CHECKPOINT,
    JOB_RECOVERY_POINT_CHECKPOINT,
    JOB_RETENTION,
    LogManager,
)
from segments.errors import StorageFormatError
from segments.naming import TopicPartition
from segments.records import ControlRecordType, SimpleRecord
from tests.faults.test_disk_full import T0, open_manager, produce
from tests.faults.test_path_safety import _tree

T = TopicPartition("t", 0)
H = TopicPartition("h", 0)
PID = 7
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")
OTHER_FILES = ("snapshot", "leader-epoch-checkpoint", "partition.metadata", "recovery-point-offset-checkpoint")


def _start(d1: Path, d2: Path) -> LogManager:
    return open_manager([d1, d2], **{"log.segment.bytes": "4096"})


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``d1`` (with ``t-0``) and ``d2`` (with ``h-0``) under one root, shut down cleanly."""
    root = tmp_path_factory.mktemp("links")
    manager = _start(root / "d1", root / "other" / "d2")
    log = manager.get_or_create_log(T.topic, 0)
    healthy = manager.get_or_create_log(H.topic, 0)
    assert log.dir.parent.name == "d1" and healthy.dir.parent.name == "d2"
    # 15 small batches pass index.interval.bytes (1024): the first and last segments get offset-index entries.
    produce(log, 15)
    log.append_records([SimpleRecord(b"p", b"k", T0)], producer_id=PID, producer_epoch=0, base_sequence=0)
    log.append_records(
        [SimpleRecord(b"x", b"k", T0)], producer_id=PID + 1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    log.append_end_txn_marker(PID + 1, 0, ControlRecordType.ABORT, 0)
    log.roll()
    produce(log, 4)
    log.append_records([SimpleRecord(b"e", b"k", T0)], leader_epoch=1)
    log.roll()
    produce(log, 15)
    produce(healthy, 3)
    manager.shutdown()
    assert len(list((root / "d1" / "t-0").glob("*.log"))) == 3
    return root


def _target(d1: Path, kind: str, segment: str) -> Path:
    """The file of ``t-0`` (or of ``d1``) a case replaces with a link."""
    part = d1 / str(T)
    if kind in SEGMENT_FILES:
        logs = sorted(part.glob("*.log"))
        return (logs[0] if segment == "first" else logs[-1]).with_suffix(kind)
    if kind == "snapshot":
        return sorted(part.glob("*.snapshot"))[-1]
    if kind == "recovery-point-offset-checkpoint":
        return d1 / kind
    return part / kind


def _link_out(root: Path, target: Path) -> Path:
    """Replace ``target`` with a link to a copy of it (or, if absent, a file) in ``root/outside``; return the link."""
    outside = root / "outside"
    outside.mkdir(exist_ok=True)
    victim = outside / f"victim-{target.name}"
    if target.exists():
        shutil.copy(target, victim)
        target.unlink()
    else:
        victim.write_bytes(b"\x00" * 34)
    target.symlink_to(victim)
    return target


class Outcome:
    """Every error the exercised operations raised, by operation."""

    def __init__(self) -> None:
        self.errors: dict[str, BaseException] = {}

    def run(self, name: str, operation: Callable[[], object]) -> object:
        try:
            return operation()
        except Exception as err:  # recorded, then asserted typed
            self.errors[name] = err
            return None

    def untyped(self) -> dict[str, str]:
        return {
            name: f"{type(err).__name__}: {err}"
            for name, err in self.errors.items()
            if not isinstance(err, (LogmgrError, StorageFormatError))
        }


def _operate(outcome: Outcome, name: str, log: Log) -> None:
    """Every write and read path of one log."""
    outcome.run(f"{name}.append", lambda: produce(log, 3))
    outcome.run(f"{name}.new-epoch", lambda: log.append_records([SimpleRecord(b"n", b"k", T0)], leader_epoch=5))
    outcome.run(
        f"{name}.abort",
        lambda: (
            log.append_records([SimpleRecord(b"a", b"k", T0)], producer_id=99, producer_epoch=0, base_sequence=0,
                               is_transactional=True),
            log.append_end_txn_marker(99, 0, ControlRecordType.ABORT, 0, leader_epoch=5),
        ),
    )
    outcome.run(f"{name}.read", lambda: log.read(log.log_start_offset, 1 << 20, isolation=Isolation.READ_COMMITTED))
    outcome.run(f"{name}.by-time", lambda: log.offset_for_timestamp(T0))
    outcome.run(f"{name}.roll", log.roll)
    outcome.run(f"{name}.append-after-roll", lambda: produce(log, 2))
    outcome.run(f"{name}.truncate", lambda: log.truncate_to(log.log_end_offset - 1))


def exercise(d1: Path, d2: Path) -> tuple[Outcome, dict[str, Any]]:
    """Start a manager over both dirs, run every operation and job, shut down; return what failed and how d1 and
    d2 ended."""
    outcome = Outcome()
    manager = outcome.run("startup", lambda: _start(d1, d2))
    facts: dict[str, Any] = {}
    if not isinstance(manager, LogManager):
        return outcome, facts
    for tp in (T, H):
        log = manager.get_log(tp)
        if log is not None:
            _operate(outcome, str(tp), log)
    for job in (JOB_FLUSHER, JOB_RECOVERY_POINT_CHECKPOINT, JOB_LOG_START_OFFSET_CHECKPOINT, JOB_RETENTION, JOB_DELETE_LOGS):
        outcome.run(job, lambda job=job: manager.run_job_now(job))
    facts["dirs"] = {Path(d["path"]).name: (d["offline"], d["failure"]) for d in manager.status()["dirs"]}
    healthy = manager.get_log(H)
    facts["healthy_end"] = None if healthy is None else healthy.log_end_offset
    outcome.run("shutdown", manager.shutdown)
    return outcome, facts


@pytest.fixture
def dirs(template: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """``(root, d1, d2)``: a fresh copy of the template."""
    root = tmp_path / "root"
    shutil.copytree(template, root, symlinks=True)
    return root, root / "d1", root / "other" / "d2"


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("segment", ["first", "active"])
@pytest.mark.parametrize("kind", SEGMENT_FILES)
def test_a_linked_segment_file_takes_its_dir_offline(
    dirs: tuple[Path, Path, Path], kind: str, segment: str, clean: bool
) -> None:
    root, d1, d2 = dirs
    link = _link_out(root, _target(d1, kind, segment))
    if not clean:
        (d1 / ".kafka_cleanshutdown").unlink()
    before = _tree(root / "outside")
    outcome, facts = exercise(d1, d2)
    assert _tree(root / "outside") == before, "written through the link"
    assert outcome.untyped() == {}
    offline, failure = facts["dirs"]["d1"]
    assert offline and str(link) in failure and "symbolic link" in failure, facts
    assert facts["dirs"]["d2"] == (False, None), facts
    assert not {name for name in outcome.errors if name.startswith(str(H))}, outcome.errors
    assert facts["healthy_end"] == 3 + 3 + 1 + 2 + 2 - 1


@pytest.mark.parametrize("kind", OTHER_FILES)
def test_a_linked_checkpoint_or_snapshot_is_never_written_through(dirs: tuple[Path, Path, Path], kind: str) -> None:
    root, d1, d2 = dirs
    _link_out(root, _target(d1, kind, "active"))
    (d1 / ".kafka_cleanshutdown").unlink()
    before = _tree(root / "outside")
    outcome, facts = exercise(d1, d2)
    assert _tree(root / "outside") == before, "written through the link"
    assert outcome.untyped() == {}
    assert facts["dirs"]["d2"] == (False, None), facts


# --- regressions -----------------------------------------------------------------------------------------------


def test_bug_log_manager_wrote_through_a_symlinked_timeindex(dirs: tuple[Path, Path, Path]) -> None:
    # The active segment's .timeindex, a link: the load resized (truncated) the file it named and appends wrote
    # time-index entries into it. Index files are now opened with O_NOFOLLOW.
    root, d1, d2 = dirs
    link = _link_out(root, _target(d1, ".timeindex", "active"))
    victim = link.resolve()
    content = victim.read_bytes()
    outcome, facts = exercise(d1, d2)
    assert victim.read_bytes() == content
    assert facts["dirs"]["d1"][0] and outcome.untyped() == {}


def test_bug_symlinked_log_raised_a_bare_oserror(dirs: tuple[Path, Path, Path]) -> None:
    # A linked .log made LogManager.startup raise OSError(ELOOP) for the whole manager. Now its dir goes offline;
    # a manager with no other dir fails with a typed error naming the link.
    root, d1, d2 = dirs
    link = _link_out(root, _target(d1, ".log", "first"))
    with pytest.raises(KafkaStorageError, match="symbolic link") as refused:
        open_manager([d1])
    assert str(link) in str(refused.value)
    manager = open_manager([d1, d2])
    try:
        statuses = {Path(d["path"]).name: d["offline"] for d in manager.status()["dirs"]}
        assert statuses == {"d1": True, "d2": False}
        healthy = manager.get_log(H)
        assert healthy is not None and produce(healthy, 1) == 4
    finally:
        manager.shutdown()


def test_bug_negative_index_position_raised_a_bare_oserror(dirs: tuple[Path, Path, Path]) -> None:
    # An offset-index entry with a negative position (the sanity check reads offsets only) made the load read the
    # .log at that position: OSError(EINVAL). The load now rebuilds such an index of the active segment; on an
    # inactive segment a read raises CorruptIndexError naming the index.
    _, d1, d2 = dirs
    damaged: dict[str, int] = {}
    for segment in ("first", "active"):
        index = _target(d1, ".index", segment)
        data = bytearray(index.read_bytes())
        assert len(data) >= 8, "the template's segments each hold an index entry"
        damaged[segment] = int(index.stem) + struct.unpack_from(">i", data)[0]
        struct.pack_into(">i", data, 4, -4096)
        index.write_bytes(bytes(data))
    manager = open_manager([d1, d2])
    try:
        log = manager.get_log(T)
        assert log is not None and not log.is_offline
        assert any("negative position" in action for action in log.recovery.actions), log.recovery.actions
        with pytest.raises(StorageFormatError, match="negative position"):
            log.read(damaged["first"], 1 << 20)
        assert produce(log, 1) == log.log_end_offset
    finally:
        manager.shutdown()


def _key_indexed(d1: Path, d2: Path) -> tuple[LogManager, Log]:
    manager = open_manager([d1, d2], **{"log.segment.bytes": "4096", "logmgr.key.index.enable": "true"})
    log = manager.get_or_create_log("keyed", 0)
    assert log.dir.parent.name == "d1" and log.key_index is not None
    return manager, log


def test_bug_key_index_wrote_through_a_symlinked_keyindex(tmp_path: Path) -> None:
    # The .keyindex files (added after round two) were opened without O_NOFOLLOW: a link to a valid key index
    # outside the dir got the dispatcher's entries, and a dangling link at the next segment's name created the
    # file it named. Both are now refused (ELOOP): the linked file is dropped at load and the index rebuilt, the
    # dangling link is left unused (queries scan that segment), and nothing outside changes.
    d1, d2, outside = tmp_path / "d1", tmp_path / "d2", tmp_path / "outside"
    outside.mkdir()
    manager, log = _key_indexed(d1, d2)
    produce(log, 3)
    manager.key_indexer.drain()
    manager.shutdown()
    keyindex = next((d1 / "keyed-0").glob("*.keyindex"))
    shutil.copy(keyindex, outside / "copy.keyindex")
    keyindex.unlink()
    keyindex.symlink_to(outside / "copy.keyindex")
    before = _tree(outside)
    manager, log = _key_indexed(d1, d2)
    try:
        produce(log, 3)
        (d1 / "keyed-0" / f"{log.log_end_offset:020d}.keyindex").symlink_to(outside / "dangling.keyindex")
        log.roll()
        produce(log, 2)
        manager.key_indexer.drain()
        assert _tree(outside) == before, "written through a link"
        assert [r.offset for r in log.query_by_key(b"k%d" % 4)] == [4]
        assert not log.is_offline and produce(log, 1) == log.log_end_offset
    finally:
        manager.shutdown()
