"""Readers iterate a log while the writer rolls and cleanup deletes segments under them.

The stress test: one writer appends (4 KiB segments: it rolls every few appends) and now and then truncates the
log's tail, as a follower does after a leader change (whole later segments are deleted under the readers; the
offsets are then written again with the same contents, which derive from the offset), four readers each hold a
position and read forward with :meth:`Log.read` (two keep up with the tail, two lag so they live in the oldest
segments, the ones being deleted), and a cleaner thread runs ``cleanup_logs`` + ``delete_logs`` in a loop with a
small ``retention.bytes`` and no deletion delay, so segments are removed from the map, renamed and unlinked while
readers are inside them. A reader below the log start gets :class:`OffsetOutOfRangeError` and jumps to the new
start (expected). A tail reader whose fetch overlapped a truncation may find the log end below its position, or
(Log.read takes no lock, so the truncated tail can be rewritten between its position lookup and its read) bytes that
do not parse from its position: it goes back to the new end, and such fetches are counted. Asserted: no reader ever
hits a closed file or index, every record served is the one its offset determines and lies below the log end, each
reader's offsets strictly increase, and every scheduled deletion completes once the readers stop. The run is
measured in work (appends, and every race it counts having happened), never in seconds; threads pace on the
writer's append count, never on sleeps.

The other tests pin each race the stress test can hit to one deterministic interleaving.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from logmgr.config import BrokerConfig
from logmgr.errors import OffsetOutOfRangeError
from logmgr.log import Isolation, Log
from logmgr.log_manager import LogManager
from logmgr.log_segments import LogSegments
from segments.compression import CompressionType
from segments.file_records import iter_batches
from segments.log_segment import FetchSlice, LogSegment
from segments.naming import DELETED_SUFFIX
from segments.offset_index import OffsetIndex, OffsetPosition
from segments.records import DefaultRecordBatch
from tests.conftest import FAILURE_DEADLINE_S, ContendedLock, calm_disk, wait_until
from tests.faults.crash_writer import headers_for, key_for, records_for, value_for

SEED = 7
MIN_APPENDS = 600
"""The stress runs for this much work (about what 3 s gave on a quiet machine), then until every goal is met."""
LAGGING_APPENDS_PER_FETCH = 2
"""A lagging reader fetches at most 1 KiB per this many appends (each 1-16 records): it falls behind the writer
by construction, whatever the machine's speed, so retention overtakes it."""
READERS = 4
SEGMENT_BYTES = 4 * 1024
RETENTION_BYTES = 12 * 1024

TRUNCATE_PROBABILITY = 0.03


@dataclass(slots=True)
class Truncations:
    """A sequence counter bumped before and after each truncation (odd while one runs): a reader whose fetch
    overlapped one may find the log end below its position, and goes back to the new end."""

    count: int = 0


class Progress:
    """The writer's append count: readers at the tail, lagging readers and the cleaner wait for it to move (no
    sleeps), and everyone stops when :meth:`stop` is called."""

    def __init__(self) -> None:
        self._moved = threading.Condition()
        self.appends = 0
        self.stopped = False

    def advance(self) -> None:
        with self._moved:
            self.appends += 1
            self._moved.notify_all()

    def stop(self) -> None:
        with self._moved:
            self.stopped = True
            self._moved.notify_all()

    def wait_for(self, appends: int) -> int:
        """Block until ``appends`` appends were made (or the stop); return the count. O(1) per wake-up."""
        with self._moved:
            self._moved.wait_for(lambda: self.appends >= appends or self.stopped)
            return self.appends


@dataclass(slots=True)
class ReaderStats:
    records: int = 0
    reads: int = 0
    jumps: int = 0
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def fast_thread_switches() -> Iterator[None]:
    """Switch threads ~25x more often than by default, so reads, rolls and deletions interleave finely."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    yield
    sys.setswitchinterval(previous)


def _start_manager(log_dir: Path) -> LogManager:
    manager = LogManager(
        BrokerConfig.from_properties(
            {
                "log.dirs": str(log_dir),
                "log.segment.bytes": str(SEGMENT_BYTES),
                "log.retention.bytes": str(RETENTION_BYTES),
                "log.index.interval.bytes": "512",
                "log.segment.delete.delay.ms": "0",
                "logmgr.delete.force.after.ms": str(3_600_000),
            }
        ),
        disk_usage=calm_disk,
    )
    manager.startup()
    return manager


def _served_offsets(log: Log, offset: int) -> list[int]:
    return [r.offset for b in log.read(offset, 1 << 20, isolation=Isolation.LOG_END).batches() for r in b.records()]


def _read_forward(
    log: Log, progress: Progress, rng: random.Random, stats: ReaderStats, truncations: Truncations, *, lagging: bool
) -> None:
    """One reader: fetch from its position, check every record, advance; jump to the log start when deleted.
    A lagging reader fetches little and only every few appends, so it stays in the oldest segments."""
    position = log.log_start_offset
    sizes = (256, 1024) if lagging else (512, 4096, 32 * 1024)
    appends_seen = 0
    while not progress.stopped and not stats.errors:
        if lagging:
            appends_seen = progress.wait_for(appends_seen + LAGGING_APPENDS_PER_FETCH)
        else:
            appends_seen = progress.appends
        truncated_before = truncations.count
        try:
            fetch = log.read(position, rng.choice(sizes), isolation=Isolation.READ_UNCOMMITTED)
        except OffsetOutOfRangeError:
            start = log.log_start_offset
            if position > log.log_end_offset and truncations.count:
                position = max(start, log.log_end_offset)
                continue
            if start <= position:
                stats.errors.append(f"OffsetOutOfRangeError at {position} although the log starts at {start}")
                return
            position = start
            stats.jumps += 1
            continue
        except Exception as err:
            stats.errors.append(f"read at {position}: {type(err).__name__}: {err}")
            return
        stats.reads += 1
        fetched_from = position
        try:
            for found in iter_batches(fetch.records):
                batch = found.batch
                assert isinstance(batch, DefaultRecordBatch)
                batch.ensure_valid()
                for record in batch.records():
                    if record.offset < position:
                        continue
                    if record.offset != position:
                        raise AssertionError(f"offset {position} expected, {record.offset} served")
                    expected = (key_for(position), value_for(position), headers_for(position))
                    if (record.key, record.value, record.headers) != expected:
                        raise AssertionError(f"offset {position}: wrong key, value or headers")
                    position += 1
                    stats.records += 1
        except Exception as err:
            # Never excused, not even when a truncation overlapped the fetch: a read that overlaps one is done
            # again under the writer lock (regression: a lock-free read returned a position into the rewritten
            # tail, bytes that did not start at a batch, about once in 60 runs).
            stats.errors.append(f"fetch from {fetched_from}: {type(err).__name__}: {err}")
            return
        end = log.log_end_offset
        if position > end:
            if truncations.count != truncated_before or truncated_before % 2:
                position = end  # the tail it read was truncated (and will be written again identically)
                continue
            stats.errors.append(f"served offsets up to {position - 1} beyond the log end {end}")
            return
        if position == fetched_from:
            progress.wait_for(appends_seen + 1)  # at the tail: nothing new before the next append


def _write(log: Log, progress: Progress, rng: random.Random, errors: list[str], truncations: Truncations) -> None:
    codecs = list(CompressionType)
    try:
        while not progress.stopped:
            if rng.random() < TRUNCATE_PROBABILITY:
                target = max(log.log_start_offset, log.log_end_offset - rng.randint(1, 60))
                truncations.count += 1
                log.truncate_to(target)
                truncations.count += 1
            start = log.log_end_offset
            count = rng.randint(1, 16)
            info = log.append_records(records_for(start, count), compression=rng.choice(codecs))
            assert (info.first_offset, info.last_offset) == (start, start + count - 1)
            progress.advance()
    except Exception as err:
        errors.append(f"writer: {type(err).__name__}: {err}")


def _clean(manager: LogManager, progress: Progress, counts: dict[str, int], errors: list[str]) -> None:
    try:
        appends_seen = 0
        while not progress.stopped:
            report = manager.cleanup_logs()
            counts["scheduled"] += sum(len(d) for d in report.deletions.values())
            run = manager.delete_logs()
            counts["deleted"] += run.deleted_segments
            counts["deleted while read"] += run.forced
            appends_seen = progress.wait_for(appends_seen + 1)
    except Exception as err:
        errors.append(f"cleaner: {type(err).__name__}: {err}")


@pytest.mark.usefixtures("fast_thread_switches")
def test_readers_never_see_closed_files_while_cleanup_deletes_and_writer_rolls(tmp_path: Path) -> None:
    manager = _start_manager(tmp_path / "data")
    try:
        log = manager.get_or_create_log("concurrency", 0)
        progress = Progress()
        rng = random.Random(SEED)
        errors: list[str] = []
        counts = {"scheduled": 0, "deleted": 0, "deleted while read": 0}
        readers = [ReaderStats() for _ in range(READERS)]
        truncations = Truncations()
        threads = [
            threading.Thread(
                target=_write, args=(log, progress, random.Random(rng.random()), errors, truncations), name="writer"
            ),
            threading.Thread(target=_clean, args=(manager, progress, counts, errors), name="cleaner"),
            *(
                threading.Thread(
                    target=_read_forward,
                    args=(log, progress, random.Random(rng.random()), stats, truncations),
                    kwargs={"lagging": number % 2 == 1},
                    name=f"reader-{number}",
                )
                for number, stats in enumerate(readers)
            ),
        ]
        for thread in threads:
            thread.start()

        def finished() -> bool:
            # Work, not time: enough appends, and every race the assertions below count has happened.
            return bool(errors or any(s.errors for s in readers)) or (
                progress.appends >= MIN_APPENDS
                and counts["scheduled"] > 10
                and truncations.count > 0
                and all(s.records > 0 for s in readers)
                and all(s.jumps > 0 for s in readers[1::2])
            )

        try:
            wait_until(finished, "the stress goals")
        finally:
            progress.stop()
            for thread in threads:
                thread.join(timeout=FAILURE_DEADLINE_S)
        assert not [thread.name for thread in threads if thread.is_alive()], "threads did not stop"
        problems = errors + [f"reader-{n}: {e}" for n, s in enumerate(readers) for e in s.errors]
        assert not problems, "\n".join(problems)
        final = manager.delete_logs()
        assert not manager.deleter.pending(), f"deletions left after the readers stopped: {manager.deleter.pending()}"
        assert not list(log.dir.glob(f"*{DELETED_SUFFIX}"))
        log._check()
        deleted = counts["deleted"] + final.deleted_segments
        print(
            f"\nconcurrency: log end {log.log_end_offset}, start {log.log_start_offset}, truncations "
            f"{truncations.count // 2}, segments deleted {deleted} "
            f"of {counts['scheduled']} scheduled ({counts['deleted while read']} while read), "
            + ", ".join(
                f"reader-{n} {s.records} records/{s.reads} reads/{s.jumps} jumps"
                for n, s in enumerate(readers)
            )
        )
        # Truncations hand their later segments to the same deleter: at least every scheduled one went.
        assert counts["scheduled"] > 10 and deleted >= counts["scheduled"]
        assert truncations.count > 0
        assert all(s.records > 0 for s in readers)
        assert all(s.jumps > 0 for s in readers[1::2]), "the lagging readers never raced a deletion"
    finally:
        manager.shutdown()


def test_cleanup_during_an_append_sees_a_consistent_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: cleanup took Log.snapshot() without the log lock and saw new bytes with the old log end."""
    manager = _start_manager(tmp_path / "data")
    try:
        log = manager.get_or_create_log("t", 0)
        epochs = log.leader_epochs
        real_add_entry = epochs._add_entry
        log._lock = lock = ContendedLock(log._lock)  # type: ignore[assignment]
        outcome: list[str] = []
        cleaners: list[threading.Thread] = []

        def cleanup() -> None:
            try:
                # A manual request: the cleanup then plans from log.snapshot() itself, holding no log lock (the
                # retention rules, delete_old_segments, plan under the lock anyway).
                manager.request_manual_cleanup(1)
                manager.cleanup_logs()
                outcome.append("ok")
            except Exception as err:
                outcome.append(f"{type(err).__name__}: {err}")

        def append_then_clean(epoch: int, start_offset: int) -> bool:
            # The append tells the epoch cache right after its write (the first append of an epoch adds it): the
            # writer holds the log lock, the bytes are in the segment, the log end offset has not moved yet. A
            # correct cleanup waits for the lock (the append then finishes); a broken one ends on what it saw.
            assigned = real_add_entry(epoch, start_offset)
            cleaner = threading.Thread(target=cleanup)
            cleaner.start()
            wait_until(lambda: lock.contended.is_set() or not cleaner.is_alive(), "cleanup to wait or end")
            cleaners.append(cleaner)
            return assigned

        monkeypatch.setattr(epochs, "_add_entry", append_then_clean)
        log.append_records(records_for(0, 3))
        for cleaner in cleaners:
            cleaner.join(FAILURE_DEADLINE_S)
        assert outcome == ["ok"], f"cleanup_logs during an append: {outcome}"
    finally:
        manager.shutdown()


def test_index_lookups_survive_a_concurrent_trim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: AbstractIndex.resize unmapped the index before remapping it, failing concurrent lookups.
    Deterministic: a lookup runs inside each resize at its most exposed step, just before the new mapping is
    made (where the old code had left the index with no mapping at all)."""
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 64 * 1024)
    for slot in range(200):
        index.append(slot * 10, slot * 100)
    real_map = index._map
    seen: list[OffsetPosition] = []

    def map_after_a_lookup(fd: int, length: int) -> None:
        seen.append(index.lookup(1005))
        real_map(fd, length)

    monkeypatch.setattr(index, "_map", map_after_a_lookup)
    try:
        # A roll trims the segment readers are reading; growing it back and closing (a trim) repeat the window.
        index.trim_to_valid_size()
        index.resize(64 * 1024)
    finally:
        index.close()
    assert seen == [OffsetPosition(1000, 10_000)] * 3


def test_read_never_serves_an_append_in_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: reads at the log end were bounded by segment.size and served a batch still being appended."""
    manager = _start_manager(tmp_path / "data")
    try:
        log = manager.get_or_create_log("t", 0)
        log.append_records(records_for(0, 1))
        epochs = log.leader_epochs
        real_add_entry = epochs._add_entry
        seen: list[tuple[list[int], int]] = []

        def append_then_read(epoch: int, start_offset: int) -> bool:
            assigned = real_add_entry(epoch, start_offset)
            # Readers take no log lock: one may run right after the writer's pwritev (the append tells the epoch
            # cache next, which adds a new epoch), before the log end moves.
            seen.append((_served_offsets(log, 0), log.log_end_offset))
            return assigned

        monkeypatch.setattr(epochs, "_add_entry", append_then_read)
        log.append_records(records_for(1, 2), leader_epoch=1)
        [(served, log_end)] = seen
        assert served == list(range(log_end)), f"served {served} with the log end at {log_end}"
    finally:
        manager.shutdown()


def test_reader_that_found_a_segment_before_its_deletion_reads_it_intact(tmp_path: Path) -> None:
    """The deleter checks that nobody holds a due segment, then closes it; a reader that looked the segment up
    before it left the map takes its hold in between. Events force exactly that order: the reader must still read
    the bytes (Kafka's reader-safe deletion), not a closed descriptor."""
    manager = _start_manager(tmp_path / "data")
    try:
        log = manager.get_or_create_log("t", 0)
        log.append_records(records_for(0, 10))
        old = log.active_segment
        log.roll()
        log.append_records(records_for(10, 1))
        looked_up, checked, reading, closed = (threading.Event() for _ in range(4))
        real_floor, real_readers, real_read = log.segments.floor_segment, manager.readers.readers, old.read

        # Only the reader thread and the deleting (main) thread are stopped: the post-roll flush job looks
        # segments up too.
        def floor_segment(offset: int) -> LogSegment | None:
            segment = real_floor(offset)
            if threading.current_thread().name == "reader":
                looked_up.set()
                checked.wait(FAILURE_DEADLINE_S)
            return segment

        def readers(segment: LogSegment) -> int:
            count = real_readers(segment)
            if threading.current_thread() is threading.main_thread():
                checked.set()
                reading.wait(FAILURE_DEADLINE_S)
            return count

        def read(
            start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
        ) -> FetchSlice | None:
            if threading.current_thread().name == "reader":
                reading.set()
                closed.wait(FAILURE_DEADLINE_S)
            return real_read(start_offset, max_size, max_position, min_one_message)

        segments: LogSegments = log.segments
        segments.floor_segment = floor_segment  # type: ignore[method-assign]
        manager.readers.readers = readers  # type: ignore[method-assign]
        old.read = read  # type: ignore[method-assign]
        result: list[object] = []

        def reader() -> None:
            try:
                result.append(_served_offsets(log, 0))
            except Exception as err:
                result.append(err)

        thread = threading.Thread(target=reader, name="reader")
        thread.start()
        assert looked_up.wait(FAILURE_DEADLINE_S)
        segments.floor_segment = real_floor  # type: ignore[method-assign]
        log.apply_deletions([old.base_offset], False, reason="test")
        manager.delete_logs()
        closed.set()
        thread.join(FAILURE_DEADLINE_S)
        assert all(e.is_set() for e in (checked, reading)), "the interleaving was not reached"
        assert result == [list(range(10))]
        assert not manager.deleter.pending()
    finally:
        manager.shutdown()
