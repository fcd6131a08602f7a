"""Disk reserved ahead of an active segment's end (``logmgr.append.reserve.bytes``, see
:class:`segments._native.append.FileAppendState`) and the trims that give it back, with Kafka's ``preallocate``
around a roll: on real files in ``tmp_path``, whose file system must support ``fallocate`` with
``FALLOC_FL_KEEP_SIZE`` (the tests that need it skip with the reason otherwise).

The file's size is what Kafka and every reader see: it stays the bytes written whatever is reserved.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from logmgr.config import LogConfig
from logmgr.log import Log
from logmgr.log_loader import load_log
from segments._native.append import RESERVE_LEAST_BYTES
from segments.naming import log_file
from segments.records import SimpleRecord, build_batch
from tests.small_disk_helpers import run_in_child

KIB = 1024
MIB = 1024 * KIB
LEAST_STEP = RESERVE_LEAST_BYTES
INT64_MAX = 2**63 - 1


def _batch(value_bytes: int) -> bytes:
    """One client batch of one record with a ``value_bytes``-byte value (base offset 0: the leader assigns)."""
    return build_batch([SimpleRecord(b"key", b"v" * value_bytes, timestamp=1_000)])


def _allocated(path: Path) -> int:
    """Bytes of disk the file holds (its blocks), reserved ones included. O(1)."""
    return os.stat(path).st_blocks * 512


def _blocks_for(size: int, path: Path) -> int:
    """The disk a file of ``size`` bytes holds without a reservation: whole file-system blocks. O(1)."""
    block = os.statvfs(path).f_bsize
    return -(-size // block) * block


def _holds_no_reservation(path: Path, size: int) -> bool:
    """Whether the file holds less than one reservation step past what ``size`` bytes need (a file system may
    count a few metadata blocks of its own, ext4 its extent tree). O(1)."""
    return _allocated(path) < _blocks_for(size, path) + LEAST_STEP


def _log(tmp_path: Path, **config: object) -> Log:
    return load_log(tmp_path / "topic-0", LogConfig(**config))  # type: ignore[arg-type]


def _require_reservation(log: Log) -> None:
    """Skip unless the active segment's appends could reserve disk (its file system supports the call)."""
    if log.active_segment.log._reserve_at == INT64_MAX:
        pytest.skip(f"the file system of {log.dir} refuses fallocate(FALLOC_FL_KEEP_SIZE)")


def test_appends_reserve_disk_ahead_and_the_size_stays_the_bytes_written(tmp_path: Path) -> None:
    log = _log(tmp_path, segment_bytes=64 * MIB)
    try:
        log.append_as_leader(_batch(1_000))
        _require_reservation(log)
        records = log.active_segment.log
        path = records.path
        size = records.size_in_bytes
        # The first step: at least 64 KiB past the first write's end.
        assert records._reserved_end == size + LEAST_STEP
        assert os.stat(path).st_size == size
        assert _allocated(path) >= records._reserved_end
        for _ in range(300):
            log.append_as_leader(_batch(16 * KIB))
        size = records.size_in_bytes
        assert os.stat(path).st_size == size
        # Steps as large as the file reached when they were taken: never more than that past its end.
        assert size < records._reserved_end <= 2 * size + LEAST_STEP
        assert _allocated(path) >= records._reserved_end
        # A reader finds the last batch and nothing past it.
        last = log.read(log.log_end_offset - 1, 1 << 20).batches()
        assert len(last) == 1 and last[0].is_valid() and last[0].last_offset == log.log_end_offset - 1
    finally:
        log.close()


def test_reservation_steps_stop_at_reserve_bytes_and_segment_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path, segment_bytes=8 * MIB, logmgr_append_reserve_bytes=128 * KIB)
    try:
        log.append_as_leader(_batch(1_000))
        _require_reservation(log)
        records = log.active_segment.log
        while records.size_in_bytes < 2 * MIB:
            log.append_as_leader(_batch(16 * KIB))
        # Past 128 KiB of file, a step is the configured most.
        assert records._reserved_end - records.size_in_bytes <= 128 * KIB
    finally:
        log.close()
    small = _log(tmp_path / "small", segment_bytes=20 * KIB)
    try:
        small.append_as_leader(_batch(100))
        records = small.active_segment.log
        # Never past segment.bytes: the segment rolls before its file could reach further.
        assert records._reserved_end == 20 * KIB
        assert _allocated(records.path) <= _blocks_for(20 * KIB, records.path)
    finally:
        small.close()


def test_roll_truncation_and_close_give_the_reserved_disk_back(tmp_path: Path) -> None:
    log = _log(tmp_path, segment_bytes=64 * MIB)
    try:
        for _ in range(40):
            log.append_as_leader(_batch(16 * KIB))
        _require_reservation(log)
        first = log.active_segment.log
        assert not _holds_no_reservation(first.path, first.size_in_bytes)
        log.roll()
        assert os.stat(first.path).st_size == first.size_in_bytes
        assert _holds_no_reservation(first.path, first.size_in_bytes)
        for _ in range(40):
            log.append_as_leader(_batch(16 * KIB))
        second = log.active_segment.log
        assert not _holds_no_reservation(second.path, second.size_in_bytes)
        # A truncation cuts the reserved blocks with the bytes; the next append reserves again.
        log.truncate_to(second_base := log.active_segment.base_offset)
        log.append_as_leader(_batch(16 * KIB))
        assert log.active_segment.base_offset == second_base
        assert second._reserved_end == second.size_in_bytes + LEAST_STEP
        log.append_as_leader(_batch(16 * KIB))
        path, size = second.path, second.size_in_bytes
    finally:
        log.close()
    assert os.stat(path).st_size == size
    assert _holds_no_reservation(path, size)


def test_zero_reserve_bytes_reserves_nothing(tmp_path: Path) -> None:
    log = _log(tmp_path, logmgr_append_reserve_bytes=0)
    try:
        for _ in range(40):
            log.append_as_leader(_batch(16 * KIB))
        records = log.active_segment.log
        assert records._reserved_end == 0
        assert _holds_no_reservation(records.path, records.size_in_bytes)
    finally:
        log.close()


def test_bug_roll_kept_the_preallocated_tail_of_the_old_segment(tmp_path: Path) -> None:
    # With preallocate=true a roll trimmed the old segment's indexes but not its .log: the file kept its
    # segment.bytes length (a zero tail past the batches) until the log closed, and a crash left it for good.
    # Kafka's onBecomeInactiveSegment trims the .log too.
    log = _log(tmp_path, preallocate=True, segment_bytes=MIB)
    try:
        for _ in range(2):
            log.append_as_leader(_batch(100))
            log.roll()
        sizes = {segment.base_offset: segment.size for segment in log.segments.values()}
        assert {base: os.stat(log_file(log.dir, base)).st_size for base in sizes} == {**sizes, 2: MIB}
    finally:
        log.close()


def test_bug_first_segment_of_a_new_log_was_not_preallocated(tmp_path: Path) -> None:
    # Kafka's loader creates a new log's first segment with preallocate, as a roll creates the next ones; the
    # loader made it at 0 bytes.
    log = _log(tmp_path, preallocate=True, segment_bytes=MIB)
    try:
        assert os.stat(log_file(log.dir, 0)).st_size == MIB
        log.append_as_leader(_batch(100))
        size = log.active_segment.size
    finally:
        log.close()
    assert os.stat(log_file(tmp_path / "topic-0", 0)).st_size == size


def test_a_crash_leaves_one_step_reserved_which_the_next_roll_gives_back(tmp_path: Path) -> None:
    def appends_then_dies() -> dict[str, Any]:
        log = _log(tmp_path, segment_bytes=64 * MIB)
        for _ in range(40):
            log.append_as_leader(_batch(16 * KIB))
        log.flush()
        records = log.active_segment.log
        # The process ends without closing the log: nothing trims the .log.
        return {"size": records.size_in_bytes, "reserved_end": records._reserved_end}

    died = run_in_child(appends_then_dies)
    if died["reserved_end"] == 0:
        pytest.skip(f"the file system of {tmp_path} refuses fallocate(FALLOC_FL_KEEP_SIZE)")
    path = log_file(tmp_path / "topic-0", 0)
    assert os.stat(path).st_size == died["size"]
    assert _allocated(path) >= died["reserved_end"] > died["size"]
    log = _log(tmp_path, segment_bytes=64 * MIB)
    try:
        assert log.log_end_offset == 40
        log.roll()
        assert _holds_no_reservation(path, died["size"])
    finally:
        log.close()
