"""Startup without reading data (issue 13, item 2): a clean startup opens no segment file and maps no index but
the active segments' ones, and every read, append, retention, cleaner and deletion path still works on segments
that were only listed; an unclean startup recovers as before."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from checkpoints.clean_shutdown import CleanShutdownMarker
from checkpoints.offset_checkpoint import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from logmgr.clock import ManualClock
from logmgr.config import BrokerConfig, LogConfig
from logmgr.log import Isolation, Log
from logmgr.log_loader import load_log
from logmgr.log_manager import LogManager
from logmgr.scheduler import ManualScheduler
from segments.log_segment import LogSegment
from segments.naming import DELETED_SUFFIX, TopicPartition, log_file
from segments.records import ControlRecordType, SimpleRecord
from tests.conftest import calm_disk
from tests.test_log_loader import read_all

T0 = 1_700_000_000_000
SEGMENT_KINDS = (".log", ".index", ".timeindex", ".txnindex")
PARTITIONS = 4
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)

Records = list[tuple[int, bytes | None]]
"""``(offset, value)`` of each record, as :func:`read_all` returns them."""
Written = tuple[Path, dict[str, Records]]
"""The :func:`written` fixture: the root dir, and what each partition dir (``t-<p>``) holds."""


def open_segment_files() -> set[str]:
    """Paths of segment files this process holds a descriptor for (``/proc/self/fd``; CPython's mmap keeps one
    per mapped index). O(fds)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(SEGMENT_KINDS):
            found.add(target)
    return found


def mapped_index_files() -> set[str]:
    """Index files mapped into this process (``/proc/self/maps``). O(maps)."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if line.rstrip().endswith((".index", ".timeindex"))}


def produce(log: Log, clock: ManualClock, count: int, *, aborted_every: int = 0) -> None:
    """``count`` keyed records, one per batch, a minute apart; every ``aborted_every``-th one in an aborted
    transaction (so some segments get a ``.txnindex``)."""
    sequence = 0
    for i in range(count):
        clock.advance(60_000)
        offset = log.log_end_offset
        record = SimpleRecord(b"v%05d" % offset, b"k%d" % (offset % 7), clock.time_ms())
        if aborted_every and i % aborted_every == 0:
            log.append_records(
                [record], producer_id=7, producer_epoch=0, base_sequence=sequence, is_transactional=True
            )
            sequence += 1
            log.append_end_txn_marker(7, 0, ControlRecordType.ABORT, 0)
        else:
            log.append_records([record])


@pytest.fixture
def written(tmp_path: Path) -> Iterator[Written]:
    """A partition dir per partition, written and cleanly closed; with what each one holds."""
    clock = ManualClock(T0)
    expected = {}
    for p in range(PARTITIONS):
        log = load_log(tmp_path / f"t-{p}", CONFIG, clock=clock)
        produce(log, clock, 60, aborted_every=9 if p % 2 else 0)
        assert len(log.segments) > 5
        expected[f"t-{p}"] = read_all(log)
        log.close()
    yield tmp_path, expected


def clean_load(directory: Path, clock: ManualClock | None = None, config: LogConfig = CONFIG) -> Log:
    return load_log(directory, config, clock=clock or ManualClock(T0 + 10**9), had_clean_shutdown=True)


def manager_for(log_dir: Path, clock: ManualClock) -> LogManager:
    broker = BrokerConfig.from_properties(
        {"log.dirs": str(log_dir), "log.segment.bytes": "600", "log.index.interval.bytes": "100"}
    )
    return LogManager(broker, clock=clock, scheduler=ManualScheduler(clock), disk_usage=calm_disk)


def backdate_segment_files(log_dir: Path) -> None:
    """Segment files last changed a second before the recovery-point checkpoint: what a shutdown after an idle
    second leaves. A test shuts down within one tick of its last write, and on a kernel with coarse file times
    the loader then reads the active segment (a change in the checkpoint's tick counts as after it)."""
    written = (log_dir / RECOVERY_POINT_CHECKPOINT_FILE).stat().st_mtime_ns
    for path in log_dir.rglob("*"):
        if path.name.endswith(SEGMENT_KINDS):
            os.utime(path, ns=(written - 10**9, written - 10**9))


def written_manager_dir(log_dir: Path, clock: ManualClock) -> dict[str, tuple[int, Records]]:
    """Partitions written through a manager and cleanly shut down; each one's log end and contents."""
    manager = manager_for(log_dir, clock)
    manager.startup()
    for p in range(PARTITIONS):
        produce(manager.get_or_create_log("t", p), clock, 50, aborted_every=7 if p % 2 else 0)
    expected = {str(log.topic_partition): (log.log_end_offset, read_all(log)) for log in manager.all_logs()}
    manager.shutdown()
    assert CleanShutdownMarker.exists(log_dir)
    assert list(log_dir.rglob("*.txnindex")), "the data must include transaction indexes"
    backdate_segment_files(log_dir)
    return expected


def test_clean_startup_opens_and_maps_no_segment_file_until_first_use(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log_dir = tmp_path / "d1"
    expected = written_manager_dir(log_dir, clock)
    before, maps_before = open_segment_files(), mapped_index_files()
    restarted = manager_for(log_dir, clock)
    restarted.startup()
    try:
        logs = restarted.all_logs()
        assert len(logs) == PARTITIONS and all(len(log.segments) > 5 for log in logs)
        assert open_segment_files() == before
        assert mapped_index_files() == maps_before
        for log in logs:
            assert all(segment.open_files == () for segment in log.segments.values())
            # The log end came from the checkpoint and the listing; it is the one the segment holds.
            assert log.log_end_offset == expected[str(log.topic_partition)][0]
            assert log.recovery.actions == []
        log = logs[0]
        active = log.segments.active_segment
        # First use: an append opens the active segment and grows its trimmed indexes (Kafka's lazy index).
        assert active.offset_index_path.stat().st_size < CONFIG.segment_index_bytes
        clock.advance(1000)
        log.append_records([SimpleRecord(b"after", b"k", clock.time_ms())])
        assert set(active.open_files) == {"log", "index", "timeindex"}
        assert active.offset_index_path.stat().st_size == restarted.broker.log_config().segment_index_bytes
        assert read_all(log) == [*expected[str(log.topic_partition)][1], (log.log_end_offset - 1, b"after")]
        assert open_segment_files() - before >= {str(active.log.path), str(active.offset_index_path)}
    finally:
        restarted.shutdown()
    assert open_segment_files() == before


@pytest.mark.parametrize(
    "change", ["cut-active-log", "checkpoint-ahead", "checkpoint-behind", "snapshot-missing", "index-touched"]
)
def test_clean_startup_reads_the_active_segment_when_the_checkpoint_disagrees(tmp_path: Path, change: str) -> None:
    """The log end comes from the checkpoint only when the listing agrees with it; otherwise the loader reads the
    active segment's last batches, and every figure is the segment's."""
    clock = ManualClock(T0)
    log_dir = tmp_path / "d1"
    expected = written_manager_dir(log_dir, clock)
    # t-1's active segment holds two offsets (a transaction marker's among them): a lowered checkpoint stays above
    # its base, where the listing alone would take it.
    name, number = ("t-1", 1) if change == "checkpoint-behind" else ("t-0", 0)
    partition = log_dir / name
    end = expected[name][0]
    active_log = max(partition.glob("*.log"))
    if change == "cut-active-log":
        # The last batch (one record) cut after the shutdown: the log ends one offset lower.
        size = active_log.stat().st_size
        last = LogSegment.listed(partition, [int(active_log.stem)], sizes=[size], writable=False)[0]
        last_position = max(found.position for found in last.batches())
        last.close()
        os.truncate(active_log, last_position)
        end -= 1
    elif change == "checkpoint-ahead":
        checkpoint = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        points = checkpoint.read()
        points[TopicPartition("t", number)] = end + 5
        checkpoint.write(points)
    elif change == "checkpoint-behind":
        # Lowered by hand after the shutdown, with the newest snapshot renamed to match: only the data tells.
        checkpoint = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        points = checkpoint.read()
        points[TopicPartition("t", number)] = end - 1
        newest = max(partition.glob("*.snapshot"))
        newest.rename(newest.with_name(f"{end - 1:020d}.snapshot"))
        checkpoint.write(points)
    else:
        index = active_log.with_suffix(".index")
        os.utime(index)
    restarted = manager_for(log_dir, clock)
    restarted.startup()
    try:
        log = restarted.get_log(TopicPartition("t", number))
        assert log is not None
        assert log.log_end_offset == end
        assert read_all(log) == [r for r in expected[name][1] if r[0] < end]
        assert log.segments.active_segment.open_files != (), "the active segment was read"
        for other in restarted.all_logs():
            if other is not log:
                assert all(segment.open_files == () for segment in other.segments.values())
    finally:
        restarted.shutdown()


def test_every_path_works_on_segments_a_clean_load_only_listed(written: Written) -> None:
    root, expected = written
    clock = ManualClock(T0 + 10**9)
    log = clean_load(root / "t-1", clock)
    segments = log.segments.values()
    assert all(s.open_files == () for s in segments[:-1])
    # Sizes come from the listing: nothing is opened to report them.
    assert log.size_in_bytes == sum(os.path.getsize(s.log.path) for s in segments)
    assert all(s.open_files == () for s in segments[:-1])
    assert read_all(log) == expected["t-1"]
    committed = log.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED)
    assert committed.aborted_transactions, "the aborted transactions come from the .txnindex files"
    target = segments[2]
    first = target.batches().__next__().batch
    assert log.offset_for_timestamp(first.max_timestamp) == (first.base_offset, first.max_timestamp)
    # Appends, rolls and a flush still work, and a flush of never-opened segments has nothing to do.
    clock.advance(1000)
    log.append_records([SimpleRecord(b"new", b"k", clock.time_ms())] * 20)
    log.roll()
    log.flush()
    log.truncate_to(log.log_end_offset - 3)
    assert read_all(log)[: len(expected["t-1"])] == expected["t-1"]
    log.close()


def test_retention_by_size_and_time_deletes_unopened_segments(written: Written) -> None:
    root, expected = written
    clock = ManualClock(T0 + 10**9)
    sized = clean_load(root / "t-0", clock, replace(CONFIG, retention_bytes=2000, file_delete_delay_ms=0))
    sizes = [s.size for s in sized.segments.values()]
    plan = sized.delete_old_segments()
    assert plan.deletions and sized.size_in_bytes <= 2000 + sizes[-1]
    sized.deleter.run_due(everything=True)
    assert read_all(sized) == [r for r in expected["t-0"] if r[0] >= sized.log_start_offset]
    sized.close()
    timed = clean_load(root / "t-2", clock, replace(CONFIG, retention_ms=30 * 60_000))
    # Every segment is older than the retention: all but the active one go (it is rolled, then deleted too).
    timed.delete_old_segments()
    assert timed.log_start_offset > 0
    timed.deleter.run_due(everything=True)
    assert not [p for p in (root / "t-2").iterdir() if p.name.endswith(".deleted")]
    timed.close()


def test_reader_holding_an_unopened_segment_reads_after_it_is_unlinked(written: Written) -> None:
    root, _ = written
    log = clean_load(root / "t-0", ManualClock(T0 + 10**9), replace(CONFIG, file_delete_delay_ms=0))
    first = log.segments.first_segment()
    assert first is not None and first.open_files == ()
    with log.readers.hold(first):
        log.delete_records_before(log.segments.values()[1].base_offset)
        log.delete_old_segments()
        run = log.deleter.run_due(everything=True)
        assert run.forced == 1 and not first.log.path.exists()
        # Files were opened before their names went: the held reader still reads the segment.
        fetched = first.read(first.base_offset, 1 << 20)
        assert fetched is not None
        assert fetched.records
    assert first.log.closed and first.open_files == ()
    log.close()


def test_unopened_segments_rename_close_and_delete_by_name(tmp_path: Path) -> None:
    log = load_log(tmp_path / "t-0", CONFIG, clock=ManualClock(T0))
    produce(log, ManualClock(T0), 30, aborted_every=4)
    log.close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.name.startswith("00000000000000000000"))
    assert [name.split(".", 1)[1] for name in names] == ["index", "log", "timeindex", "txnindex"]
    listed = LogSegment.listed(tmp_path / "t-0", [0])[0]
    listed.flush()
    assert not listed.size_known
    listed.rename_to_deleted()
    assert listed.open_files == ()
    # The rename learned the length under the old name (one stat), nothing was opened.
    assert listed.size_known and listed.size == os.path.getsize(log_file(tmp_path / "t-0", 0, DELETED_SUFFIX))
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.name.startswith("00000000000000000000")) == [
        name + ".deleted" for name in names
    ]
    assert listed.txn_index.all_aborted_txns(), "the renamed .txnindex is read under its new name"
    assert listed.read(0, 1 << 20) is not None
    listed.delete()
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.startswith("00000000000000000000")]
    never_opened = LogSegment.listed(tmp_path / "t-0", [log.log_end_offset], sizes=[0])[0]
    never_opened.close()
    never_opened.close()
    assert never_opened.log.closed and never_opened.open_files == ()


def test_concurrent_first_reads_open_a_segment_once(written: Written) -> None:
    root, _ = written
    log = clean_load(root / "t-0")
    target = log.segments.values()[1]
    before = open_segment_files()
    results: list[tuple[int, int]] = []
    barrier = threading.Barrier(8)

    def read() -> None:
        barrier.wait()
        fetched = target.read(target.base_offset, 1 << 20)
        assert fetched is not None
        results.append((fetched.position, fetched.size))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and all(r == results[0] for r in results)
    assert open_segment_files() - before == {str(target.log.path), str(target.offset_index_path)}
    log.close()


def test_the_cleaner_compacts_a_log_of_unopened_segments(tmp_path: Path) -> None:
    from logmgr.cleaner.log_cleaner import LogCleaner

    compact = LogConfig(cleanup_policy=("compact",), segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0)
    clock = ManualClock(T0)
    log = load_log(tmp_path / "t-0", compact, clock=clock)
    produce(log, clock, 60)
    log.roll()
    latest = {}
    for offset, value in read_all(log):
        latest[offset % 7] = (offset, value)
    log.close()
    reopened = clean_load(tmp_path / "t-0", clock, compact)
    cleaner = LogCleaner(BrokerConfig(), lambda: {tmp_path: [reopened]}, clock)  # type: ignore[arg-type,dict-item]
    result = cleaner.clean_log(tmp_path, reopened)
    assert result is not None and result.error is None
    assert sorted(read_all(reopened)) == sorted(latest.values())
    reopened.close()


def test_unclean_load_recovers_every_segment_as_before(written: Written) -> None:
    root, expected = written
    for p in range(PARTITIONS):
        directory = root / f"t-{p}"
        clean = clean_load(directory)
        shape = [(s.base_offset, s.size) for s in clean.segments.values()], clean.log_end_offset
        aborted = clean.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED).aborted_transactions
        clean.close()
        unclean = load_log(directory, CONFIG, clock=ManualClock(T0 + 10**9), recovery_point=0)
        assert unclean.recovery.recovered_segments == len(unclean.segments)
        assert ([(s.base_offset, s.size) for s in unclean.segments.values()], unclean.log_end_offset) == shape
        assert all(s.open_files == () for s in unclean.segments.values()[:-1])
        assert read_all(unclean) == expected[f"t-{p}"]
        assert unclean.read(0, 1 << 20, isolation=Isolation.READ_COMMITTED).aborted_transactions == aborted
        unclean.close()


def log_file_sizes(directory: Path) -> dict[int, int]:
    """Every ``.log`` length in ``directory`` by base offset, as the file system has it. O(files)."""
    return {int(path.name.split(".")[0]): path.stat().st_size for path in directory.glob("*.log")}


def test_clean_startup_stats_no_inactive_segment(tmp_path: Path) -> None:
    """A clean startup learns no inactive segment's ``.log`` length (no stat, no open); the first use learns the
    file's, and the log's size is then the sum of the files'."""
    clock = ManualClock(T0)
    log_dir = tmp_path / "d1"
    written_manager_dir(log_dir, clock)
    restarted = manager_for(log_dir, clock)
    restarted.startup()
    try:
        for log in restarted.all_logs():
            segments = log.segments.values()
            assert not any(segment.size_known for segment in segments[:-1]), "an inactive segment was stat'ed"
            assert segments[-1].size_known, "the active segment's length comes from the listing"
            assert all(segment.open_files == () for segment in segments)
            assert "size=None" in repr(segments[0]), "repr does no I/O"
            sizes = log_file_sizes(log.dir)
            assert log.size_in_bytes == sum(sizes.values())
            assert all(segment.size_known and segment.size == sizes[segment.base_offset] for segment in segments)
            # Learned by a stat: still nothing opened.
            assert all(segment.open_files == () for segment in segments)
    finally:
        restarted.shutdown()


def test_lazily_learned_size_follows_the_logs_own_truncation_and_appends(
    written: tuple[Path, dict[str, list[tuple[int, bytes | None]]]],
) -> None:
    """An inactive segment whose length was never learned becomes the active one by a truncation into it: the
    truncation, and the appends after it, keep its size the file's."""
    root, _ = written
    clock = ManualClock(T0 + 10**9)
    log = clean_load(root / "t-0", clock)
    middle = log.segments.values()[2]
    assert not middle.size_known
    target = middle.base_offset + 1
    log.truncate_to(target)
    assert log.segments.active_segment is middle
    assert middle.size == os.path.getsize(middle.log_path) > 0
    assert middle.read_next_offset() == target == log.log_end_offset
    clock.advance(1000)
    log.append_records([SimpleRecord(b"grown", b"k", clock.time_ms())])
    assert middle.size == os.path.getsize(middle.log_path)
    assert log.size_in_bytes == sum(log_file_sizes(log.dir).values())
    log.close()


def test_size_retention_of_a_clean_load_deletes_by_the_files_lengths(
    written: tuple[Path, dict[str, list[tuple[int, bytes | None]]]],
) -> None:
    """Retention by size on segments whose lengths are unknown after a clean load learns the files' lengths: it
    deletes exactly the oldest segments whose removal keeps the log within ``retention.bytes``."""
    root, _ = written
    sizes = log_file_sizes(root / "t-1")
    bases = sorted(sizes)
    limit = sum(sizes.values()) - sizes[bases[0]] - sizes[bases[1]] // 2
    log = clean_load(root / "t-1", config=replace(CONFIG, retention_bytes=limit, file_delete_delay_ms=0))
    assert not any(segment.size_known for segment in log.segments.values()[:-1])
    log.high_watermark = log.log_end_offset
    plan = log.delete_old_segments(time_rule_allowed=False)
    assert [deletion.reason for deletion in plan.deletions] == ["retention.bytes"]
    # Kafka's rule: a segment goes while the bytes left over the limit are at least its size; the second one's
    # size is above the excess left after the first.
    assert log.segments.base_offsets() == bases[1:]
    assert log.size_in_bytes == sum(sizes[base] for base in bases[1:])
    log.close()


def test_concurrent_first_size_reads_learn_one_length(
    written: tuple[Path, dict[str, list[tuple[int, bytes | None]]]],
) -> None:
    """Readers asking for an unlearned length at once (a status call and a retention check) all get the file's,
    while the writer makes the segment's ``.log`` object; nothing is opened by asking."""
    root, _ = written
    log = clean_load(root / "t-2")
    segments = log.segments.values()[:-1]
    expected = log_file_sizes(log.dir)
    threads_count = 4
    barrier = threading.Barrier(threads_count + 1)
    seen: list[list[int]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            barrier.wait()
            seen.append([segment.size for segment in segments])
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=reader) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    barrier.wait()
    made = [segment.log.size_in_bytes for segment in reversed(segments)][::-1]
    for thread in threads:
        thread.join()
    assert not errors
    wanted = [expected[segment.base_offset] for segment in segments]
    assert made == wanted and all(row == wanted for row in seen)
    assert all(segment.open_files == () for segment in segments)
    log.close()


def test_bug_a_load_without_txnindex_files_took_each_segment_for_one_with_a_txnindex(written: Written) -> None:
    # A listing without any .txnindex left every segment "listed" (the segment setup's default), so each recovery
    # of an unclean load tried to open one to empty it: a failed open per segment.
    root, _ = written
    directory = root / "t-0"
    assert not list(directory.glob("*.txnindex"))
    for had_clean_shutdown in (True, False):
        log = load_log(directory, CONFIG, clock=ManualClock(T0 + 10**9), had_clean_shutdown=had_clean_shutdown)
        assert all(segment._txn_index_unlisted for segment in log.segments.values())
        log.close()
    assert list(root.joinpath("t-1").glob("*.txnindex"))
    log = clean_load(root / "t-1")
    listed = {int(path.stem) for path in root.joinpath("t-1").glob("*.txnindex")}
    assert {s.base_offset for s in log.segments.values() if not s._txn_index_unlisted} == listed
    log.close()
