"""Opening a partition directory (logmgr.log_loader.load_log): Kafka's LogLoader, format doc §6.4.

Every test builds a real log in ``tmp_path`` with :func:`load_log` + appends, closes it, changes the files the way a
crash, a cleaner or an operator would, and loads it again: transient files (step 1), orphan indexes and missing
indexes (step 2), unclean-shutdown recovery (step 3), the log start offset / recovery point rules (steps 4-5), and
the producer state and leader epochs rebuilt from the batches.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry
from checkpoints.producer_snapshot import ProducerSnapshotEntry, serialize_producer_snapshot
from logmgr import log_loader
from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.log import Isolation, Log
from logmgr.log_loader import OverflowSplit, load_log
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.errors import LogSegmentOffsetOverflowError
from segments.file_records import FileRecords
from segments.log_segment import LogSegment
from segments.naming import (
    SWAP_SUFFIX,
    TopicPartition,
    delete_dir_name,
    log_file,
    offset_index_file,
    producer_snapshot_file,
    time_index_file,
    transaction_index_file,
)
from segments.records import ControlRecordType, SimpleRecord
from tests.test_legacy import entry, message, wrapper

T0 = 1_700_000_000_000
PID = 4242
# About five one-record batches per segment, an index entry every other batch.
CONFIG = LogConfig(segment_bytes=420, index_interval_bytes=100, segment_index_bytes=4096)


# -- helpers ---------------------------------------------------------------------------------------------------


def open_log(
    partition_dir: Path,
    *,
    clean: bool = True,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    config: LogConfig = CONFIG,
) -> Log:
    return load_log(
        partition_dir,
        config,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
        had_clean_shutdown=clean,
        clock=ManualClock(T0),
    )


def fill(log: Log, count: int, *, first: int = 0, leader_epoch: int = 0) -> None:
    for i in range(first, first + count):
        log.append_records([SimpleRecord(b"value-%04d" % i, b"key", T0 + i)], leader_epoch=leader_epoch)


def make_log(partition_dir: Path, count: int = 20) -> list[int]:
    """A closed log of ``count`` one-record batches; returns the segment base offsets."""
    log = open_log(partition_dir)
    fill(log, count)
    bases = log.segments.base_offsets()
    log.close()
    return bases


def read_all(log: Log) -> list[tuple[int, bytes | None]]:
    """Every data record (offset, value) from the log start to the log end, batch CRCs checked, control batches
    skipped (isolation LOG_END: aborted data records are kept). O(log size)."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetch = log.read(offset, 1 << 20, isolation=Isolation.LOG_END)
        batches = fetch.batches()
        assert batches, f"{log}: nothing served at {offset} below the log end {log.log_end_offset}"
        for batch in batches:
            batch.ensure_valid()
            out.extend((record.offset, record.value) for record in batch.records() if not batch.is_control)
        offset = batches[-1].last_offset + 1
    return out


def values(offsets: range | list[int]) -> list[tuple[int, bytes | None]]:
    return [(i, b"value-%04d" % i) for i in offsets]


def batch_ends(path: Path) -> list[tuple[int, int, int]]:
    """``(base offset, last offset, end position)`` of each batch of a ``.log``."""
    with FileRecords(path, writable=False) as records:
        return [(f.batch.base_offset, f.batch.last_offset, f.end_position) for f in records.batches()]


def names(partition_dir: Path) -> set[str]:
    return {p.name for p in partition_dir.iterdir()}


def segment_files(partition_dir: Path, base: int) -> list[Path]:
    return [
        log_file(partition_dir, base),
        offset_index_file(partition_dir, base),
        time_index_file(partition_dir, base),
    ]


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# -- step 1: transient files -----------------------------------------------------------------------------------


def test_deleted_files_are_removed_but_kraft_snapshot_deletions_are_kept(pdir: Path) -> None:
    bases = make_log(pdir)
    doomed = [
        "00000000000000000100.log.deleted",
        "00000000000000000100.index.deleted",
        "00000000000000000100.timeindex.deleted",
        "00000000000000000100.snapshot.deleted",
    ]
    kept = "00000000000000000100-0000000003.checkpoint.deleted"
    for name in [*doomed, kept]:
        (pdir / name).write_bytes(b"x" * 10)
    log = open_log(pdir)
    assert not names(pdir) & set(doomed)
    assert kept in names(pdir)
    assert log.segments.base_offsets() == bases
    assert read_all(log) == values(range(20))
    assert any("pending delete" in action for action in log.recovery.actions)


def test_cleaned_files_are_removed(pdir: Path) -> None:
    make_log(pdir)
    cleaned = ["00000000000000000000.log.cleaned", "00000000000000000000.index.cleaned"]
    for name in cleaned:
        (pdir / name).write_bytes(b"partial cleaner output")
    log = open_log(pdir)
    assert not names(pdir) & set(cleaned)
    assert read_all(log) == values(range(20))


def _write_swap(pdir: Path, base: int, sources: list[int], keep: set[int]) -> bytes:
    """A cleaner's output: the batches of ``sources`` whose offset is in ``keep``, as ``<base>.*.swap``."""
    swap = LogSegment.open(
        pdir, base, file_suffix=SWAP_SUFFIX, create=True, index_interval_bytes=100, max_index_size=4096
    )
    for source in sources:
        with FileRecords(log_file(pdir, source), writable=False) as records:
            for found in records.batches():
                if found.batch.base_offset in keep:
                    swap.append(found.batch.raw_bytes())
    data = swap.log.read(0, swap.size)
    swap.close()
    return data


def test_swap_segment_replaces_the_segments_it_covers(pdir: Path) -> None:
    bases = make_log(pdir)
    assert len(bases) >= 4
    first, second, third = bases[0], bases[1], bases[2]
    # A compaction of the first two segments keeping the even offsets, installed as .swap when the broker died.
    kept = {o for o in range(first, third) if o % 2 == 0}
    swapped = _write_swap(pdir, first, [first, second], kept)
    assert producer_snapshot_file(pdir, second).exists()
    log = open_log(pdir)
    assert not any(name.endswith(SWAP_SUFFIX) for name in names(pdir))
    assert log_file(pdir, first).read_bytes() == swapped
    # Every file of the replaced second segment went, its producer snapshot too; the third is untouched.
    for path in [*segment_files(pdir, second), producer_snapshot_file(pdir, second)]:
        assert not path.exists(), path
    assert log.segments.base_offsets() == [first, *bases[2:]]
    assert read_all(log) == values(sorted(kept)) + values(range(third, 20))
    assert any("replaced by a .swap segment" in action for action in log.recovery.actions)
    assert log.recovery.recovered_segments == 0


def test_swap_log_without_its_index_swap_is_recovered_after_the_rename(pdir: Path) -> None:
    bases = make_log(pdir)
    kept = set(range(bases[0], bases[2]))
    swapped = _write_swap(pdir, bases[0], [bases[0], bases[1]], kept)
    for suffix in (".index", ".timeindex", ".txnindex"):
        (pdir / f"{bases[0]:020d}{suffix}{SWAP_SUFFIX}").unlink(missing_ok=True)
    log = open_log(pdir)
    assert log_file(pdir, bases[0]).read_bytes() == swapped
    assert log.recovery.recovered_segments == 1
    assert read_all(log) == values(range(20))


def test_swap_files_at_or_above_the_smallest_cleaned_offset_are_an_unfinished_split(pdir: Path) -> None:
    bases = make_log(pdir)
    second = bases[1]
    before = {p.name: p.read_bytes() for p in pdir.iterdir() if p.is_file()}
    unfinished = [
        f"{second:020d}.log.swap",
        f"{second:020d}.index.swap",
        f"{bases[2]:020d}.log.swap",
        f"{second:020d}.log.cleaned",
        f"{bases[2]:020d}.log.cleaned",
    ]
    for name in unfinished:
        (pdir / name).write_bytes(b"half-written split output")
    log = open_log(pdir)
    assert not names(pdir) & set(unfinished)
    assert log.segments.base_offsets() == bases
    assert read_all(log) == values(range(20))
    log.close()
    for name, data in before.items():
        if name.endswith(".log"):
            assert (pdir / name).read_bytes() == data, name


def test_swap_below_the_smallest_cleaned_offset_is_still_completed(pdir: Path) -> None:
    bases = make_log(pdir)
    kept = {o for o in range(bases[0], bases[2]) if o % 3 != 1}
    swapped = _write_swap(pdir, bases[0], [bases[0], bases[1]], kept)
    (pdir / f"{bases[3]:020d}.log.cleaned").write_bytes(b"unfinished")
    log = open_log(pdir)
    assert log_file(pdir, bases[0]).read_bytes() == swapped
    assert read_all(log) == values(sorted(kept)) + values(range(bases[2], 20))


# -- step 2: segment files -------------------------------------------------------------------------------------


def test_index_files_without_their_log_are_deleted(pdir: Path) -> None:
    make_log(pdir)
    orphans = [f"{500:020d}.index", f"{500:020d}.timeindex", f"{500:020d}.txnindex"]
    for name in orphans:
        (pdir / name).write_bytes(bytes(24))
    log = open_log(pdir)
    assert not names(pdir) & set(orphans)
    assert any("(no .log)" in action for action in log.recovery.actions)
    assert read_all(log) == values(range(20))


def test_index_files_not_named_as_kafka_names_them_are_matched_by_offset(pdir: Path) -> None:
    # Names the loader's bulk match skips go through offset parsing: "7.index" names offset 7, whose .log is
    # 00000000000000000007.log (absent: deleted); "+0.timeindex" names offset 0, whose .log is there (kept).
    make_log(pdir)
    (pdir / "7.index").write_bytes(bytes(8))
    (pdir / "+0.timeindex").write_bytes(bytes(12))
    log = open_log(pdir)
    assert "7.index" not in names(pdir) and "+0.timeindex" in names(pdir)
    assert [a for a in log.recovery.actions if "(no .log)" in a] == ["removed 7.index (no .log)"]
    assert read_all(log) == values(range(20))


def test_a_subdirectory_in_the_partition_dir_is_not_a_segment_file(pdir: Path) -> None:
    bases = make_log(pdir)
    (pdir / f"{bases[-1]:020d}.index.d").mkdir()
    log = open_log(pdir)
    assert log.segments.base_offsets() == bases
    assert read_all(log) == values(range(20))


def test_a_segment_index_that_is_a_symbolic_link_is_refused(pdir: Path, tmp_path: Path) -> None:
    bases = make_log(pdir)
    index = pdir / f"{bases[0]:020d}.timeindex"
    outside = tmp_path / "outside.timeindex"
    index.rename(outside)
    index.symlink_to(outside)
    with pytest.raises(OSError) as raised:
        open_log(pdir)
    assert raised.value.errno == errno.ELOOP and raised.value.filename == str(index)


def test_missing_offset_index_recovers_the_segment_and_rebuilds_identical_indexes(pdir: Path) -> None:
    bases = make_log(pdir, count=30)
    originals = {p.name: p.read_bytes() for p in pdir.iterdir() if p.suffix in (".index", ".timeindex")}
    assert any(data for data in originals.values()), "the test needs indexes with entries"
    middle = bases[2]
    offset_index_file(pdir, middle).unlink()
    log = open_log(pdir)
    assert log.recovery.recovered_segments == 1
    assert any(f"recovered segment {middle}" in action for action in log.recovery.actions)
    assert read_all(log) == values(range(30))
    log.close()
    rebuilt = {p.name: p.read_bytes() for p in pdir.iterdir() if p.suffix in (".index", ".timeindex")}
    assert rebuilt == originals


def test_every_index_missing_is_rebuilt_byte_equal(pdir: Path) -> None:
    make_log(pdir, count=30)
    originals = {p.name: p.read_bytes() for p in pdir.iterdir() if p.suffix in (".index", ".timeindex")}
    for name in originals:
        (pdir / name).unlink()
    log = open_log(pdir)
    assert log.recovery.recovered_segments == len(log.segments)
    log.close()
    assert {
        p.name: p.read_bytes() for p in pdir.iterdir() if p.suffix in (".index", ".timeindex")
    } == originals


def test_corrupt_transaction_index_recovers_the_segment(pdir: Path) -> None:
    bases = make_log(pdir)
    # An aborted transaction whose last offset lies below the segment's base: Kafka's sanityCheck refuses it.
    entry = (
        (0).to_bytes(2, "big") + (7).to_bytes(8, "big") + (0).to_bytes(8, "big") * 2 + (1).to_bytes(8, "big")
    )
    transaction_index_file(pdir, bases[1]).write_bytes(entry)
    log = open_log(pdir)
    assert log.recovery.recovered_segments == 1
    assert transaction_index_file(pdir, bases[1]).stat().st_size == 0
    assert read_all(log) == values(range(20))


# -- step 3: unclean shutdown ------------------------------------------------------------------------------------


def test_clean_shutdown_recovers_nothing(pdir: Path) -> None:
    make_log(pdir)
    log = open_log(pdir, clean=True, recovery_point=0)
    assert log.recovery.recovered_segments == 0
    assert log.recovery_point == log.log_end_offset == 20


def test_unclean_shutdown_recovers_from_the_recovery_point_segment_on(pdir: Path) -> None:
    bases = make_log(pdir)
    recovery_point = bases[2] + 1
    log = open_log(pdir, clean=False, recovery_point=recovery_point)
    expected = [b for b in bases if b >= bases[2]]
    assert log.recovery.recovered_segments == len(expected)
    recovered = [a for a in log.recovery.actions if a.startswith("recovered segment")]
    assert [int(a.split()[2]) for a in recovered] == expected
    assert log.recovery.truncated_bytes == 0
    assert log.recovery_point == recovery_point
    assert read_all(log) == values(range(20))


def test_unclean_load_takes_the_log_end_from_the_recovery_and_leaves_the_active_segment_unopened(pdir: Path) -> None:
    bases = make_log(pdir)
    log = open_log(pdir, clean=False, recovery_point=0)
    active = log.segments.active_segment
    assert log.recovery.recovered_segments == len(bases)
    assert log.log_end_offset == 20
    # Its recovery found the log end: no index mapped to read it (Kafka's lazy index, as after a clean load).
    assert active.open_files == ()
    assert log.log_end_offset == active.read_next_offset()
    fill(log, 1, first=20)
    # The active segment's index is preallocated when first used (the resize the load asked for).
    active_index = offset_index_file(pdir, log.segments.active_segment.base_offset)
    assert os.path.getsize(active_index) == CONFIG.segment_index_bytes
    assert read_all(log) == values(range(21))


def test_recovery_point_below_every_segment_recovers_all(pdir: Path) -> None:
    bases = make_log(pdir)
    for path in segment_files(pdir, bases[0]):
        path.unlink()
    log = open_log(pdir, clean=False, recovery_point=0, log_start_offset=bases[1])
    assert log.recovery.recovered_segments == len(bases) - 1
    assert read_all(log) == values(range(bases[1], 20))


def test_torn_tail_of_the_active_segment_is_truncated(pdir: Path) -> None:
    bases = make_log(pdir)
    active = log_file(pdir, bases[-1])
    ends = batch_ends(active)
    size = active.stat().st_size
    with open(active, "r+b") as f:
        f.truncate(size - 7)
    log = open_log(pdir, clean=False, recovery_point=bases[-1])
    assert log.log_end_offset == ends[-1][0]
    assert log.recovery.truncated_bytes == ends[-1][2] - 7 - ends[-2][2]
    assert active.stat().st_size == ends[-2][2]
    assert read_all(log) == values(range(ends[-1][0]))
    log._check()


def test_torn_tail_in_a_middle_segment_truncates_it_and_deletes_every_later_segment(pdir: Path) -> None:
    bases = make_log(pdir)
    torn = bases[1]
    path = log_file(pdir, torn)
    ends = batch_ends(path)
    cut = ends[1][2] + 10
    with open(path, "r+b") as f:
        f.truncate(cut)
    log = open_log(pdir, clean=False, recovery_point=0)
    assert log.segments.base_offsets() == [bases[0], torn]
    assert log.log_end_offset == ends[1][1] + 1
    assert log.recovery.truncated_bytes == 10
    for later in bases[2:]:
        assert not log_file(pdir, later).exists()
        assert not offset_index_file(pdir, later).exists()
    assert all(offset <= log.log_end_offset for offset in log.producer_state.snapshot_offsets())
    assert not any(
        p.name.endswith(".snapshot") and int(p.name[:20]) > log.log_end_offset for p in pdir.iterdir()
    )
    assert read_all(log) == values(range(log.log_end_offset))
    # Appends continue at the new end.
    fill(log, 3, first=log.log_end_offset)
    assert read_all(log) == values(range(log.log_end_offset))


def test_corrupt_middle_batch_truncates_there(pdir: Path) -> None:
    bases = make_log(pdir)
    victim = bases[1]
    path = log_file(pdir, victim)
    ends = batch_ends(path)
    bad_base, _, bad_end = ends[2]
    data = bytearray(path.read_bytes())
    data[bad_end - 3] ^= 0xFF  # a byte of the record value: the CRC no longer matches
    path.write_bytes(bytes(data))
    log = open_log(pdir, clean=False, recovery_point=0)
    assert log.log_end_offset == bad_base
    assert log.segments.base_offsets() == [bases[0], victim]
    assert path.stat().st_size == ends[1][2]
    assert any("stopped at" in action for action in log.recovery.actions)
    assert read_all(log) == values(range(bad_base))


def test_corruption_below_the_recovery_point_is_not_scanned(pdir: Path) -> None:
    bases = make_log(pdir)
    path = log_file(pdir, bases[0])
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    log = open_log(pdir, clean=False, recovery_point=bases[2])
    # Kafka trusts flushed data: only the segments from the recovery point's one are recovered.
    assert log.log_end_offset == 20
    assert log.recovery.recovered_segments == len(bases) - 2


# -- steps 4 and 5: log start offset and recovery point ---------------------------------------------------------


@pytest.mark.parametrize(
    ("clean", "checkpoint", "expected"),
    [(True, 3, 20), (True, 500, 20), (False, 3, 3), (False, 0, 0), (False, 500, 20)],
)
def test_recovery_point_rule(pdir: Path, clean: bool, checkpoint: int, expected: int) -> None:
    make_log(pdir)
    log = open_log(pdir, clean=clean, recovery_point=checkpoint)
    assert log.recovery_point == expected


def test_log_start_offset_is_the_larger_of_checkpoint_and_first_base(pdir: Path) -> None:
    bases = make_log(pdir)
    assert open_log(pdir, log_start_offset=6).log_start_offset == 6
    for path in [*segment_files(pdir, bases[0]), producer_snapshot_file(pdir, bases[0])]:
        path.unlink(missing_ok=True)
    log = open_log(pdir, log_start_offset=2)
    assert log.log_start_offset == bases[1]
    assert read_all(log) == values(range(bases[1], 20))


def test_log_start_offset_at_the_log_end_keeps_the_segments(pdir: Path) -> None:
    bases = make_log(pdir)
    log = open_log(pdir, log_start_offset=20)
    assert log.segments.base_offsets() == bases
    assert log.log_start_offset == log.log_end_offset == 20
    assert read_all(log) == []


@pytest.mark.parametrize(("clean", "recovery_point"), [(True, 50), (False, 0)])
def test_log_start_checkpoint_above_the_log_end_deletes_every_segment(
    pdir: Path, clean: bool, recovery_point: int
) -> None:
    bases = make_log(pdir)
    log = open_log(pdir, clean=clean, recovery_point=0, log_start_offset=50)
    assert log.segments.base_offsets() == [50]
    assert log.log_start_offset == log.log_end_offset == 50
    # Kafka: the log end offset after a clean shutdown, else min(checkpoint, log end offset).
    assert log.recovery_point == recovery_point
    for base in bases:
        assert not log_file(pdir, base).exists()
    assert log_file(pdir, 50).exists()
    assert read_all(log) == []
    fill(log, 2, first=50)
    assert read_all(log) == values([50, 51])


def test_bug_stale_leader_epochs_kept_when_log_start_was_above_log_end(pdir: Path) -> None:
    log = open_log(pdir)
    fill(log, 5, leader_epoch=1)
    fill(log, 5, first=5, leader_epoch=3)
    log.close()
    log = open_log(pdir, log_start_offset=50)
    # Kafka's clearAndFlush: nothing is known about epochs of offsets that no longer exist.
    assert log.leader_epochs.entries == []
    assert "3 0" not in (pdir / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_deleted_partition_dir_skips_recovery(tmp_path: Path) -> None:
    pdir = tmp_path / delete_dir_name(TopicPartition("topic", 0), uuid.uuid4().hex)
    bases = make_log(pdir)
    path = log_file(pdir, bases[-1])
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 5)
    log = open_log(pdir, clean=False, recovery_point=0)
    assert log.recovery.recovered_segments == 0
    empty = tmp_path / delete_dir_name(TopicPartition("topic", 1), uuid.uuid4().hex)
    log = open_log(empty, clean=False, log_start_offset=70)
    assert log.segments.base_offsets() == [0]


# -- producer state and leader epochs -------------------------------------------------------------------------------


def _transactional_log(pdir: Path) -> tuple[int, int]:
    """Committed transaction, then a transaction left open at the end; returns (open txn first offset, LEO)."""
    log = open_log(pdir)
    fill(log, 6)
    sequence = 0
    for _ in range(3):
        log.append_records(
            [SimpleRecord(b"txn-a", None, T0)],
            producer_id=PID,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
        sequence += 1
    log.append_end_txn_marker(PID, 0, ControlRecordType.COMMIT, 0)
    fill(log, 4, first=100)
    open_first = log.append_records(
        [SimpleRecord(b"txn-b", None, T0)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
    ).first_offset
    log.append_records(
        [SimpleRecord(b"txn-b", None, T0)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=sequence + 1,
        is_transactional=True,
    )
    assert len(log.segments) >= 3
    leo = log.log_end_offset
    log.close()
    return open_first, leo


def _assert_open_transaction(log: Log, open_first: int, leo: int) -> None:
    assert log.log_end_offset == leo
    assert log.producer_state.ongoing_txns == {PID: open_first}
    assert log.last_stable_offset == open_first
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == 4
    log.producer_state._check()


def test_open_transaction_survives_a_clean_reload(pdir: Path) -> None:
    open_first, leo = _transactional_log(pdir)
    _assert_open_transaction(open_log(pdir), open_first, leo)


def test_open_transaction_is_rebuilt_by_replay_without_snapshots(pdir: Path) -> None:
    open_first, leo = _transactional_log(pdir)
    for snapshot in pdir.glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(pdir, clean=False, recovery_point=0)
    _assert_open_transaction(log, open_first, leo)
    # Appending continues the producer's sequence; a commit closes the transaction.
    log.append_records(
        [SimpleRecord(b"txn-b", None, T0)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=5,
        is_transactional=True,
    )
    log.append_end_txn_marker(PID, 0, ControlRecordType.COMMIT, 0)
    assert log.producer_state.ongoing_txns == {}


def test_replay_from_an_older_snapshot_restores_the_open_transaction(pdir: Path) -> None:
    open_first, leo = _transactional_log(pdir)
    newest = max(pdir.glob("*.snapshot"))
    newest.unlink()
    log = open_log(pdir, clean=False, recovery_point=leo)
    _assert_open_transaction(log, open_first, leo)


def test_clean_load_snapshots_the_last_two_segment_bases_and_the_log_end(pdir: Path) -> None:
    bases = make_log(pdir)
    for snapshot in pdir.glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(pdir, clean=True)
    assert log.producer_state.snapshot_offsets() == [bases[-2], bases[-1], 20]
    assert sorted(int(p.name[:20]) for p in pdir.glob("*.snapshot")) == [bases[-2], bases[-1], 20]


def test_bug_recovery_skipped_snapshots_at_the_last_two_segment_bases(pdir: Path) -> None:
    bases = make_log(pdir)
    for snapshot in pdir.glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(pdir, clean=False, recovery_point=20)
    assert {bases[-2], bases[-1], 20} <= set(log.producer_state.snapshot_offsets())


def test_stray_snapshots_are_removed_on_load(pdir: Path) -> None:
    bases = make_log(pdir)
    stray = producer_snapshot_file(pdir, bases[1] + 1)
    shutil.copy(producer_snapshot_file(pdir, bases[1]), stray)
    above = producer_snapshot_file(pdir, 999)
    shutil.copy(producer_snapshot_file(pdir, bases[1]), above)
    log = open_log(pdir)
    assert not stray.exists()
    assert not above.exists()
    assert 999 not in log.producer_state.snapshot_offsets()


def test_recovery_keeps_the_snapshots_it_would_write_again_and_replaces_or_deletes_the_rest(pdir: Path) -> None:
    open_first, leo = _transactional_log(pdir)
    log = open_log(pdir, clean=False, recovery_point=0)
    log.close()
    written = {path.name: path.read_bytes() for path in pdir.glob("*.snapshot")}
    kept, changed = sorted(int(name[:20]) for name in written)[-3:-1]
    # An old modification time tells the kept file from a new one (an inode number may be reused).
    os.utime(producer_snapshot_file(pdir, kept), ns=(T0 * 1_000_000, T0 * 1_000_000))
    # Valid snapshots the log does not produce: another producer at one offset, one above the log end.
    other = producer_snapshot_file(pdir, changed)
    other.write_bytes(serialize_producer_snapshot([ProducerSnapshotEntry(7, 0, 0, 0, 0, T0, -1, -1)]))
    above = producer_snapshot_file(pdir, leo + 100)
    above.write_bytes(written[other.name])
    log = open_log(pdir, clean=False, recovery_point=0)
    _assert_open_transaction(log, open_first, leo)
    # Set aside by the recovery of the first segment, then: the same bytes kept (no write, no unlink), other bytes
    # replaced by the log's, the one no recovered segment ends at deleted.
    assert producer_snapshot_file(pdir, kept).stat().st_mtime_ns == T0 * 1_000_000
    assert {path.name: path.read_bytes() for path in pdir.glob("*.snapshot")} == written
    assert not above.exists()
    assert log.recovery.unsynced_snapshots >= len(written)


def test_aborted_transactions_are_rewritten_to_the_txnindex_by_recovery(pdir: Path) -> None:
    log = open_log(pdir)
    fill(log, 2)
    first = log.append_records(
        [SimpleRecord(b"doomed", None, T0)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    ).first_offset
    log.append_end_txn_marker(PID, 0, ControlRecordType.ABORT, 0)
    fill(log, 2, first=10)
    segment = log.segments.floor_segment(first)
    assert segment is not None
    txn_path = transaction_index_file(pdir, segment.base_offset)
    log.close()
    original = txn_path.read_bytes()
    assert original
    txn_path.unlink()
    log = open_log(pdir, clean=False, recovery_point=0)
    assert txn_path.read_bytes() == original
    fetch = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert fetch.aborted_transactions is not None
    assert [(t.producer_id, t.first_offset) for t in fetch.aborted_transactions] == [(PID, first)]


def test_leader_epochs_are_rebuilt_from_the_batches_replayed_in_recovery(pdir: Path) -> None:
    log = open_log(pdir)
    fill(log, 5, leader_epoch=0)
    fill(log, 6, first=5, leader_epoch=2)
    fill(log, 4, first=11, leader_epoch=5)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(5, 11)]
    log.close()
    (pdir / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    log = open_log(pdir, clean=False, recovery_point=0)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(5, 11)]
    assert (pdir / LEADER_EPOCH_CHECKPOINT_FILE).read_text().splitlines() == ["0", "3", "0 0", "2 5", "5 11"]


def test_leader_epochs_past_a_truncation_are_dropped(pdir: Path) -> None:
    log = open_log(pdir)
    fill(log, 5, leader_epoch=1)
    fill(log, 5, first=5, leader_epoch=4)
    holder = log.segments.floor_segment(5)
    assert holder is not None
    log.close()
    path = log_file(pdir, holder.base_offset)
    # Cut in the middle of the first batch of epoch 4: everything from offset 5 on is gone.
    start_of_5 = next(end for _, last, end in batch_ends(path) if last == 4) if holder.base_offset < 5 else 0
    with open(path, "r+b") as f:
        f.truncate(start_of_5 + 30)
    log = open_log(pdir, clean=False, recovery_point=0)
    assert log.log_end_offset == 5
    assert log.leader_epochs.entries == [EpochEntry(1, 0)]


# -- properties --------------------------------------------------------------------------------------------------


@settings(max_examples=40)
@given(count=st.integers(min_value=1, max_value=14), cut_fraction=st.floats(min_value=0.0, max_value=1.0))
def test_any_torn_write_recovers_exactly_the_complete_batches(count: int, cut_fraction: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pdir = Path(tmp) / "prop-0"
        bases = make_log(pdir, count)
        active = log_file(pdir, bases[-1])
        ends = batch_ends(active)
        cut = int(active.stat().st_size * cut_fraction)
        with open(active, "r+b") as f:
            f.truncate(cut)
        survivors = [last for _, last, end in ends if end <= cut]
        log = open_log(pdir, clean=False, recovery_point=bases[-1])
        expected_end = survivors[-1] + 1 if survivors else bases[-1]
        assert log.log_end_offset == expected_end
        assert read_all(log) == values(range(expected_end))
        log._check()
        log.close()


def test_seeded_crash_and_reload_stress(tmp_path: Path) -> None:
    rng = random.Random(20240603)
    pdir = tmp_path / "stress-0"
    log = open_log(pdir)
    model: list[int] = []
    for step in range(25):
        for _ in range(rng.randint(1, 12)):
            offset = log.log_end_offset
            log.append_records([SimpleRecord(b"value-%04d" % offset, b"k", T0 + offset)])
            model.append(offset)
        if rng.random() < 0.3:
            log.roll()
        bases = log.segments.base_offsets()
        log.close()
        recovery_base = rng.choice(bases)
        victim = rng.choice([b for b in bases if b >= recovery_base])
        action = rng.choice(["tear", "drop-index", "none"])
        if action == "tear":
            path = log_file(pdir, victim)
            ends = batch_ends(path)
            size = path.stat().st_size
            cut = rng.randint(0, size)
            with open(path, "r+b") as f:
                f.truncate(cut)
            if cut < size:
                survivors = [last for _, last, end in ends if end <= cut]
                new_end = survivors[-1] + 1 if survivors else victim
                model = [o for o in model if o < new_end]
        elif action == "drop-index":
            offset_index_file(pdir, victim).unlink()
        log = open_log(pdir, clean=False, recovery_point=recovery_base)
        log._check()
        log.segments.active_segment._check()
        assert read_all(log) == values(model), f"step {step}: {action} at {victim}"
        assert log.log_end_offset == (model[-1] + 1 if model else log.segments.active_segment.base_offset)
    log.close()


# -- legacy segments whose offsets overflow 32 bits (Kafka's splitOverflowedSegment) -----------------------------

SPLIT_AT = 2**31 + 5
"""Offsets from here do not fit 32 bits relative to base 0."""
SECOND_SPLIT_AT = 2**32 + 10
"""The first inner offset of a gzip wrapper whose last offset does not fit relative to SPLIT_AT."""


def _legacy(offset: int, *, crc: int | None = None) -> bytes:
    return entry(offset, message(1, b"key", b"value-%d" % offset, timestamp=T0, crc=crc))


def overflowed_segment(pdir: Path, *, damage: str | None = None) -> list[int]:
    """A magic-1 segment at base 0 written before KAFKA-5413: offsets 0-2, then SPLIT_AT and SPLIT_AT + 1, then a
    gzip wrapper holding SECOND_SPLIT_AT..SECOND_SPLIT_AT+2 (no index files). ``damage``: the message at SPLIT_AT
    has a bad CRC (``"crc"``), or goes back below offset 2 (``"backwards"``). Returns the offsets written."""
    pdir.mkdir(parents=True)
    offsets = [0, 1, 2, SPLIT_AT, SPLIT_AT + 1]
    entries = [_legacy(o) for o in offsets]
    if damage == "crc":
        entries[3] = _legacy(SPLIT_AT, crc=0)
    elif damage == "backwards":
        entries[3] = _legacy(1)
    inner = [(i, message(1, b"key", b"value-%d" % (SECOND_SPLIT_AT + i), timestamp=T0)) for i in range(3)]
    entries.append(wrapper(1, CompressionType.GZIP, SECOND_SPLIT_AT + 2, inner, timestamp=T0))
    log_file(pdir, 0).write_bytes(b"".join(entries))
    return [*offsets, *range(SECOND_SPLIT_AT, SECOND_SPLIT_AT + 3)]


def legacy_values(offsets: list[int]) -> list[tuple[int, bytes | None]]:
    return [(o, b"value-%d" % o) for o in offsets]


def read_legacy(log: Log) -> list[tuple[int, bytes | None]]:
    """Every record from the log start to the log end, legacy batches included, CRCs checked."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = list(log.read(offset, 1 << 20, isolation=Isolation.LOG_END).iter_records())
        assert records, f"nothing served at {offset} below the log end {log.log_end_offset}"
        out.extend((r.offset, r.value) for r in records if r.offset >= offset)
        offset = records[-1].offset + 1
    return out


def assert_split(log: Log, offsets: list[int]) -> None:
    assert log.segments.base_offsets() == [0, SPLIT_AT, SECOND_SPLIT_AT]
    assert read_legacy(log) == legacy_values(offsets)
    assert log.log_end_offset == SECOND_SPLIT_AT + 3
    log._check()


@pytest.mark.parametrize("clean", [True, False])
def test_legacy_segment_overflowing_32_bits_is_split_not_truncated(pdir: Path, clean: bool) -> None:
    offsets = overflowed_segment(pdir)
    size = log_file(pdir, 0).stat().st_size
    old = T0 // 1000 - 86_400
    os.utime(log_file(pdir, 0), (old, old))
    log = open_log(pdir, clean=clean)
    try:
        assert_split(log, offsets)
        assert sum("split segment" in action for action in log.recovery.actions) == 2
        assert log.recovery.truncated_bytes == 0
        assert sum(s.size for s in log.segments.values()) == size
        # The split segments keep the original's modification time (time retention may use it).
        assert {int(p.stat().st_mtime) for p in pdir.glob("*.log")} == {old}
        info = log.append_records([SimpleRecord(b"after", None, T0)])
        assert info.first_offset == SECOND_SPLIT_AT + 3
    finally:
        log.close()
    log = open_log(pdir, clean=True)
    try:
        assert log.segments.base_offsets() == [0, SPLIT_AT, SECOND_SPLIT_AT]
        assert read_legacy(log)[-1] == (SECOND_SPLIT_AT + 3, b"after")
        assert log.recovery.recovered_segments == 0
    finally:
        log.close()
    assert verify_paths([pdir]).ok


@pytest.mark.parametrize("damage", ["crc", "backwards"])
def test_damage_at_an_overflowing_offset_is_truncated_not_split(pdir: Path, damage: str) -> None:
    """Kafka checks the CRC before the offset range: a message that fails it is damage, and so is one whose
    offsets do not continue the segment, wherever they point."""
    overflowed_segment(pdir, damage=damage)
    log = open_log(pdir, clean=False)
    try:
        assert log.segments.base_offsets() == [0]
        assert read_legacy(log) == legacy_values([0, 1, 2])
        assert not any("split segment" in action for action in log.recovery.actions)
        assert log.recovery.truncated_bytes > 0
    finally:
        log.close()


def _split_plan(pdir: Path) -> OverflowSplit:
    segment = LogSegment.open(pdir, 0)
    try:
        with pytest.raises(LogSegmentOffsetOverflowError) as raised:
            segment.recover()
        plan = OverflowSplit.plan(segment, raised.value)
    finally:
        segment.close()
    assert (plan.base, plan.new_base) == (0, SPLIT_AT)
    return plan


def test_split_interrupted_after_any_step_loads_the_same_log(tmp_path: Path) -> None:
    """A crash between any two steps of the split (``.cleaned`` written, renamed ``.swap``, old segment deleted,
    ``.swap`` renamed) leaves files the next load completes or rolls back to the same split log."""
    template = tmp_path / "template" / "topic-0"
    offsets = overflowed_segment(template)
    steps = len(_split_plan(template).steps())
    assert steps > 6
    for done in range(steps + 1):
        pdir = tmp_path / f"crash-{done}" / "topic-0"
        shutil.copytree(template, pdir)
        for step in _split_plan(pdir).steps()[:done]:
            step()
        for clean in (False, True):
            log = open_log(pdir, clean=clean)
            try:
                assert_split(log, offsets)
            finally:
                log.close()
        assert not [p.name for p in pdir.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]


def test_bug_an_index_entry_at_the_end_of_the_log_put_the_log_end_below_its_batches(tmp_path: Path) -> None:
    """A damaged active index whose last entry names the end of the ``.log`` (found by the recover-plan property
    test): the clean load scanned from there, found no batch and set the log end to the segment base, below the
    records on disk, so the next append would have reused their offsets. Such an entry is now corrupt and the
    segment is recovered (its index rebuilt)."""
    partition_dir = tmp_path / "t-0"
    make_log(partition_dir, 3)
    log_path = partition_dir / "00000000000000000000.log"
    size = log_path.stat().st_size
    (partition_dir / "00000000000000000000.index").write_bytes((2).to_bytes(4, "big") + size.to_bytes(4, "big"))
    log = open_log(partition_dir)
    try:
        assert log.log_end_offset == 3
        assert any("corrupt index" in action for action in log.recovery.actions), log.recovery.actions
        log.append_records([SimpleRecord(b"next", b"key", T0)])
        assert [b.base_offset for b in log.read(0, 1 << 20).batches()] == [0, 1, 2, 3]
    finally:
        log.close()


def test_rewritten_index_is_synced_even_when_recovery_writes_no_snapshot(
    pdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery rewrites a wrong ``.index`` in place without fsync; the load's one file-system sync ran only when
    it wrote a producer snapshot, which the recovery of an empty active segment (its snapshot written at the roll)
    does not: the rebuilt index was left to writeback while a later clean-shutdown marker could vouch for it."""
    make_log(pdir)
    log = open_log(pdir)
    log.roll()
    log.close()
    index = offset_index_file(pdir, 20)
    index.write_bytes(b"\x01" * 16)
    synced: list[Path] = []
    real_sync = log_loader.sync_filesystem
    monkeypatch.setattr(log_loader, "sync_filesystem", lambda path: (synced.append(path), real_sync(path))[1])
    log = open_log(pdir, clean=False, recovery_point=20)
    assert log.recovery.recovered_segments == 1
    assert log.recovery.unsynced_snapshots == 0
    assert index.read_bytes().strip(b"\0") == b""
    assert synced == [pdir]
