"""A real small filesystem filled to ENOSPC (issue 11, item 4): no SIGBUS, no bare ``OSError``, nothing lost.

Each test mounts its own 2 MiB tmpfs (root only: skipped with a reason otherwise, or when the mount is refused),
puts log dir ``d1`` on it and ``d2`` on the ordinary disk, fills the tmpfs with a filler file until the kernel
answers ENOSPC, and drives the engine into the full disk during appends, rolls, checkpoint writes and startup
recovery (and a read-only remount at startup). tmpfs allocates a page at the first write of a sparse page, so a
memory-mapped index left sparse faults there with SIGBUS, which kills the process: the engine therefore runs in a
forked child, and a child killed by a signal fails the test by name instead of killing pytest.

Asserted for every case: the failure is a typed :class:`KafkaStorageError` naming a file of the full dir; ``d1`` goes
offline while ``d2`` keeps appending and serving reads; once the filler is removed a fresh manager reopens ``d1``
with every acknowledged record present, CRC-valid and carrying the value its offset determines; appends resume.
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoints.offset_checkpoint import RECOVERY_POINT_CHECKPOINT_FILE
from logmgr.errors import KafkaStorageError
from logmgr.log import Isolation, Log
from logmgr.log_manager import JOB_RECOVERY_POINT_CHECKPOINT, LogManager
from segments.naming import TopicPartition
from segments.records import SimpleRecord
from tests.faults.test_disk_full import T0, open_manager, produce, value_for
from tests.small_disk_helpers import mounted_tmpfs, run_in_child

FS_SIZE = "2m"
# Small segments and indexes so a 2 MiB filesystem holds many rolls; one index page each.
PROPS = {"log.segment.bytes": "16384", "log.index.size.max.bytes": "4096"}
T_BIG = TopicPartition("big", 0)
T_HEALTHY = TopicPartition("healthy", 0)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A fresh 2 MiB tmpfs mounted at ``tmp_path/fs`` for this test only; unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path, FS_SIZE)


def fill(fs: Path) -> Path:
    """Write a filler file on ``fs`` until the kernel answers ENOSPC; return it (removing it frees the space)."""
    filler = fs / "filler"
    page = b"\xa5" * 4096
    with open(filler, "wb", buffering=0) as out:
        while True:
            try:
                out.write(page)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
                return filler


def manager_with_logs(d1: Path, d2: Path) -> tuple[LogManager, Log, Log]:
    """A started manager over both dirs: ``big-0`` in d1 (900-byte values), ``healthy-0`` in d2."""
    manager = open_manager([d1, d2], **PROPS)
    big = manager.get_or_create_log(T_BIG.topic, 0)
    healthy = manager.get_or_create_log(T_HEALTHY.topic, 0)
    assert (big.dir.parent, healthy.dir.parent) == (d1.resolve(), d2.resolve())
    return manager, big, healthy


def storage_facts(err: KafkaStorageError) -> dict[str, Any]:
    cause = err.__cause__
    return {
        "error": str(err),
        "errno": cause.errno if isinstance(cause, OSError) else None,
        "filename": cause.filename if isinstance(cause, OSError) else None,
    }


def healthy_facts(manager: LogManager, healthy: Log) -> dict[str, Any]:
    """What the dir on the ordinary disk still does once d1 failed."""
    end = produce(healthy, 2)
    served = healthy.read(healthy.log_start_offset, 1 << 20, isolation=Isolation.LOG_END).batches()
    return {
        "healthy_end": end,
        "healthy_served": sum(b.records_count for b in served),
        "offline": {Path(d["path"]).name: d["offline"] for d in manager.status()["dirs"]},
    }


def refused_facts(manager: LogManager, healthy: Log, action: Callable[[], object]) -> dict[str, Any]:
    """Run ``action`` on the full disk, which must refuse it with :class:`KafkaStorageError`; return the error's
    facts and what the dir on the ordinary disk still does."""
    with pytest.raises(KafkaStorageError) as refused:
        action()
    return {**storage_facts(refused.value), **healthy_facts(manager, healthy)}


def check_reopened(d1: Path, d2: Path, acked: int) -> dict[str, Any]:
    """Reopen both dirs (space freed) and check ``big-0``: every acknowledged record is there, every served batch is
    CRC-valid with the values its offsets determine; then appends resume. A write refused after its bytes reached
    the ``.log`` may survive too (Kafka does not promise to drop it), so the end is at least ``acked``."""
    manager = open_manager([d1, d2], **PROPS)
    try:
        log = manager.get_log(T_BIG)
        assert log is not None and not log.is_offline
        end = log.log_end_offset
        assert end >= acked, f"log end {end} below the last acknowledged offset {acked}"
        offset, checked = log.log_start_offset, 0
        assert offset == 0
        while offset < end:
            batches = log.read(offset, 1 << 20, isolation=Isolation.LOG_END).batches()
            assert batches, f"nothing served at {offset} below the log end {end}"
            for batch in batches:
                assert batch.is_valid(), f"corrupt batch served at offset {batch.base_offset}"
                for record in batch.records():
                    assert record.offset == offset and record.value == value_for(T_BIG, offset), offset
                    offset += 1
                    checked += 1
        resumed = produce(log, 3)
        assert resumed == end + 3
        return {"end": end, "checked": checked}
    finally:
        manager.shutdown()


def assert_contained(facts: dict[str, Any], fs: Path) -> None:
    """The full dir failed with a typed error naming one of its files; the other dir kept working."""
    assert facts["errno"] == errno.ENOSPC, facts
    assert facts["filename"] and Path(facts["filename"]).is_relative_to(fs), facts
    assert facts["filename"] in facts["error"], facts
    assert facts["offline"] == {"d1": True, "d2": False}, facts
    assert facts["healthy_served"] == facts["healthy_end"], facts


def test_appends_fill_the_disk_then_resume(small_fs: Path, tmp_path: Path) -> None:
    """Finding: SIGBUS while appending (the first entry written to a sparse index page of a full tmpfs)."""
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"

    def body() -> dict[str, Any]:
        manager, big, healthy = manager_with_logs(d1, d2)
        spare = small_fs / "spare"
        spare.write_bytes(b"\x00" * (256 * 1024))
        for _ in range(5000):
            acked = big.log_end_offset
            try:
                produce(big, 1)
            except KafkaStorageError as err:
                facts = {**storage_facts(err), **healthy_facts(manager, healthy), "acked": acked}
                break
        else:
            raise AssertionError("the small filesystem never filled")
        # Every later write to the offline dir is refused, typed.
        with pytest.raises(KafkaStorageError):
            produce(big, 1)
        manager.shutdown()
        return facts

    facts = run_in_child(body)
    assert_contained(facts, small_fs)
    (small_fs / "spare").unlink()
    reopened = check_reopened(d1, d2, facts["acked"])
    assert reopened["checked"] >= facts["acked"] > 0


def test_bug_sigbus_on_an_index_entry_of_a_full_disk(small_fs: Path, tmp_path: Path) -> None:
    # A new segment's indexes were sized with ftruncate, so sparse: with the disk filled after the first batch, the
    # next appends fit the .log's page, but the first index entry written to the map faulted (SIGBUS) and killed
    # the process. Indexes are now allocated at creation: the entry lands, and the disk being full shows only once
    # the .log needs a page, as a typed ENOSPC.
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"

    def body() -> dict[str, Any]:
        manager, big, healthy = manager_with_logs(d1, d2)
        produce(big, 2)
        big.roll()
        produce(big, 1)
        # Without the disk reserved ahead of the .log's end (given back here), the next page of the .log is what
        # the full disk refuses, after the index entries of the appends that fit the current one.
        big.active_segment.log.trim()
        fill(small_fs)
        for _ in range(100):
            acked = big.log_end_offset
            try:
                produce(big, 1)
            except KafkaStorageError as err:
                facts = {**storage_facts(err), **healthy_facts(manager, healthy), "acked": acked}
                break
        else:
            raise AssertionError("appends to a full disk never failed")
        facts["index_entries"] = big.active_segment.offset_index.entries
        manager.shutdown()
        return facts

    facts = run_in_child(body)
    assert_contained(facts, small_fs)
    assert facts["filename"].endswith(".log") and facts["index_entries"] > 0, facts
    (small_fs / "filler").unlink()
    check_reopened(d1, d2, facts["acked"])


def test_roll_on_a_full_disk(small_fs: Path, tmp_path: Path) -> None:
    """A roll on a full disk: the new segment's index cannot be allocated; ENOSPC, typed, not a later SIGBUS."""
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"

    def body() -> dict[str, Any]:
        manager, big, healthy = manager_with_logs(d1, d2)
        acked = produce(big, 3)
        # The roll first gives back the disk the appends reserved ahead (its trim of the old .log): given back
        # now, the disk is still full when the roll creates the new segment's files.
        big.active_segment.log.trim()
        fill(small_fs)
        facts = {**refused_facts(manager, healthy, big.roll), "acked": acked}
        manager.shutdown()
        return facts

    facts = run_in_child(body)
    assert_contained(facts, small_fs)
    assert facts["filename"].endswith((".index", ".timeindex", ".log", ".snapshot.tmp")), facts
    (small_fs / "filler").unlink()
    check_reopened(d1, d2, facts["acked"])


def test_checkpoint_write_on_a_full_disk(small_fs: Path, tmp_path: Path) -> None:
    """The recovery-point checkpoint on a full disk: the old content stays, no ``.tmp`` is left, d1 goes offline."""
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"

    def body() -> dict[str, Any]:
        manager, big, healthy = manager_with_logs(d1, d2)
        acked = produce(big, 3)
        big.flush()
        manager.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
        before = (d1 / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes()
        produce(big, 1)
        fill(small_fs)
        manager.run_job_now(JOB_RECOVERY_POINT_CHECKPOINT)
        state = next(d for d in manager.log_dirs() if d.path == d1.resolve()).state
        facts = {
            **refused_facts(manager, healthy, lambda: produce(big, 1)),
            "failure": state.failure,
            "unchanged": (d1 / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes() == before,
            "tmp_left": sorted(p.name for p in d1.rglob("*.tmp")),
            "acked": acked + 1,
        }
        manager.shutdown()
        return facts

    facts = run_in_child(body)
    assert facts["failure"] and RECOVERY_POINT_CHECKPOINT_FILE in facts["failure"], facts
    assert "No space left on device" in facts["failure"], facts
    assert facts["unchanged"] and facts["tmp_left"] == [], facts
    assert facts["offline"] == {"d1": True, "d2": False}, facts
    assert facts["healthy_served"] == facts["healthy_end"], facts
    (small_fs / "filler").unlink()
    check_reopened(d1, d2, facts["acked"])


def test_bug_leader_epoch_checkpoint_enospc_escaped_append_as_bare_oserror(small_fs: Path, tmp_path: Path) -> None:
    # A batch of a new leader epoch fits the last page of the .log, but the leader-epoch-checkpoint rewrite that
    # follows needs a page: the append raised the checkpoint's bare OSError and left the dir online.
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"
    small = TopicPartition("small", 0)

    def body() -> dict[str, Any]:
        manager = open_manager([d1, d2], **PROPS)
        log = manager.get_or_create_log(small.topic, 0)
        healthy = manager.get_or_create_log(T_HEALTHY.topic, 0)
        produce(log, 2)
        fill(small_fs)
        new_epoch = [SimpleRecord(b"v", b"k", T0)]
        facts = refused_facts(manager, healthy, lambda: log.append_records(new_epoch, leader_epoch=1))
        manager.shutdown()
        return facts

    facts = run_in_child(body)
    assert_contained(facts, small_fs)
    assert facts["filename"].endswith("leader-epoch-checkpoint.tmp"), facts


@pytest.mark.parametrize("dirs", ["two", "one"])
def test_startup_recovery_on_a_full_disk(small_fs: Path, tmp_path: Path, dirs: str) -> None:
    """Findings: SIGBUS during recovery at startup (rebuilt indexes mapped sparse), and ENOSPC on
    ``*.snapshot.tmp`` escaping startup as a bare OSError. With two dirs only d1 goes offline; with one, startup
    fails with a typed error (Kafka halts a broker with no online dir) and leaves the dir as it found it."""
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"
    manager, big, healthy = manager_with_logs(d1, d2)
    for _ in range(4):
        produce(big, 6)
        big.roll()
    acked = produce(big, 2)
    produce(healthy, 2)
    manager.shutdown()
    # An unclean restart recovers from the (absent) recovery point: every segment's indexes are rebuilt and a
    # producer snapshot written per segment. A missing index is recreated: a fresh page to map on a full disk.
    for name in (".kafka_cleanshutdown", RECOVERY_POINT_CHECKPOINT_FILE, "big-0/00000000000000000006.index"):
        (d1 / name).unlink()
    fill(small_fs)
    log_dirs = [d1, d2] if dirs == "two" else [d1]

    def body() -> dict[str, Any]:
        try:
            started = open_manager(log_dirs, **PROPS)
        except KafkaStorageError as err:
            return {"refused": str(err)}
        state = next(d for d in started.log_dirs() if d.path == d1.resolve()).state
        live = started.get_log(T_HEALTHY)
        assert live is not None
        facts = {"failure": state.failure, **healthy_facts(started, live)}
        started.shutdown()
        return facts

    facts = run_in_child(body)
    if dirs == "one":
        assert set(facts) == {"refused"} and "No space left on device" in facts["refused"], facts
        assert str(small_fs) in facts["refused"], facts
    else:
        assert facts["failure"] and "No space left on device" in facts["failure"], facts
        assert str(small_fs) in facts["failure"], facts
        assert facts["offline"] == {"d1": True, "d2": False}, facts
    assert not (d1 / ".kafka_cleanshutdown").exists()
    (small_fs / "filler").unlink()
    check_reopened(d1, d2, acked)


def test_startup_on_a_read_only_remount(small_fs: Path, tmp_path: Path) -> None:
    """Finding: startup on a read-only remount raised a bare OSError (EROFS). Now only d1 goes offline."""
    d1, d2 = small_fs / "d1", tmp_path / "other" / "d2"
    manager, big, _ = manager_with_logs(d1, d2)
    acked = produce(big, 5)
    manager.shutdown()
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    try:

        def body() -> dict[str, Any]:
            started = open_manager([d1, d2], **PROPS)
            state = next(d for d in started.log_dirs() if d.path == d1.resolve()).state
            live = started.get_log(T_HEALTHY)
            assert live is not None
            facts = {"failure": state.failure, **healthy_facts(started, live)}
            started.shutdown()
            with contextlib.suppress(KafkaStorageError):
                open_manager([d1], **PROPS).shutdown()
                return {**facts, "single": "started"}
            return {**facts, "single": "refused"}

        facts = run_in_child(body)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
    assert facts["failure"] and "Read-only file system" in facts["failure"], facts
    assert facts["offline"] == {"d1": True, "d2": False}, facts
    assert facts["single"] == "refused", facts
    check_reopened(d1, d2, acked)
