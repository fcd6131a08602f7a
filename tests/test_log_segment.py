"""LogSegment: Kafka's append index rule, reads, timestamp lookups, recovery, truncation and lifecycle."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from logmgr.reindex import reindex
from logmgr.verify import verify_paths
from segments.compression import CompressionType
from segments.errors import CorruptRecordError, IndexFullError, IndexOffsetOverflowError, SegmentClosedError
from segments.log_segment import DEFAULT_INDEX_INTERVAL_BYTES, LogSegment
from segments.records import (
    ControlRecordType,
    DefaultRecordBatch,
    EndTransactionMarker,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
)

T0 = 1_700_000_000_000


def _batch(base: int, count: int = 5, *, ts: int | None = None, codec: CompressionType = CompressionType.NONE) -> bytes:
    start = T0 + base * 10 if ts is None else ts
    return build_batch(
        [SimpleRecord(b"v" * 100, str(base + i).encode(), start + i) for i in range(count)],
        base_offset=base,
        compression=codec,
    )


def _fill(segment: LogSegment, batches: int, count: int = 5) -> list[int]:
    positions = []
    offset = segment.base_offset
    for _ in range(batches):
        positions.append(segment.append(_batch(offset, count)))
        offset += count
    return positions


def test_first_append_is_never_indexed_and_interval_rule(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=1000)
    positions = _fill(segment, 10)
    size = len(_batch(0))
    # An entry is added before an append once more than 1000 bytes accumulated since the last entry.
    expected = []
    since = 0
    for i, position in enumerate(positions):
        if since > 1000:
            expected.append((i * 5 + 4, position))
            since = 0
        since += size
    assert [(e.offset, e.position) for e in segment.offset_index] == expected
    assert segment.offset_index.entries >= 1
    segment._check()
    segment.close()


def test_append_rejects_partial_batches_and_overflow(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 100, create=True)
    with pytest.raises(CorruptRecordError):
        segment.append(_batch(100)[:-1])
    with pytest.raises(IndexOffsetOverflowError):
        segment.append(_batch(100 + 2**31))
    with pytest.raises(IndexOffsetOverflowError):
        segment.append(_batch(50))
    segment.close()


def test_read_translate_and_min_one_message(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=500)
    positions = _fill(segment, 20)
    size = positions[8] - positions[7]
    fetch = segment.read(37, 10)
    assert fetch is not None
    assert (fetch.offset, fetch.position, fetch.size) == (39, positions[7], 10)
    assert fetch.first_entry_incomplete
    fetch = segment.read(37, 10, min_one_message=True)
    assert fetch is not None and fetch.size == size and not fetch.first_entry_incomplete
    assert len(fetch.records) == size and DefaultRecordBatch(fetch.records).base_offset == 35
    assert segment.read(100, 1000) is None
    fetch = segment.read(0, 10**9, max_position=positions[3])
    assert fetch is not None and fetch.size == positions[3]
    assert segment.read_next_offset() == 100
    segment.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=300)
    _fill(segment, 30)
    for target_offset in (0, 1, 47, 149):
        found = segment.find_offset_by_timestamp(T0 + (target_offset // 5) * 50 + target_offset % 5)
        assert found is not None and found.offset == target_offset
    found = segment.find_offset_by_timestamp(T0 - 1)
    assert found is not None and found.offset == 0
    assert segment.find_offset_by_timestamp(T0 + 10**9) is None
    found = segment.find_offset_by_timestamp(T0, starting_offset=52)
    assert found is not None and found.offset == 52
    segment.close()


def test_close_appends_final_time_entry_and_trims(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True)
    segment.append(_batch(0, ts=T0 + 50))
    segment.append(_batch(5, ts=T0))
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 10 * 1024 * 1024
    segment.close()
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 0
    # One final time entry: the max timestamp and the last offset of the batch holding it.
    reopened = LogSegment.open(tmp_path, 0, writable=False)
    assert list(reopened.time_index) == [(T0 + 54, 4)]
    assert reopened.max_timestamp_so_far == T0 + 54
    assert reopened.largest_timestamp() == T0 + 54
    reopened.close()


def test_reindex_equals_append_path(tmp_path: Path) -> None:
    partition = tmp_path / "t-0"
    partition.mkdir()
    segment = LogSegment.open(partition, 0, create=True, index_interval_bytes=700)
    rng = random.Random(7)
    offset = 0
    for _ in range(200):
        count = rng.randint(1, 12)
        codec = rng.choice(list(CompressionType))
        segment.append(_batch(offset, count, ts=T0 + rng.randint(-1000, 100000), codec=codec))
        offset += count
    segment.close()
    out = tmp_path / "out"
    report = reindex(partition, out=out, index_interval_bytes=700)
    assert report.ok
    for suffix in (".index", ".timeindex"):
        name = f"{0:020d}{suffix}"
        assert (out / name).read_bytes() == (partition / name).read_bytes(), suffix
    assert verify_paths([partition]).ok


@pytest.mark.parametrize("cut", [1, 30, 61, 200])
def test_recover_truncates_torn_tail(tmp_path: Path, cut: int) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=300)
    positions = _fill(segment, 12)
    full = segment.size
    segment.close()
    log = tmp_path / "00000000000000000000.log"
    with log.open("r+b") as f:
        f.truncate(full - cut)
    segment = LogSegment.open(tmp_path, 0)
    result = segment.recover()
    last_whole = max(p for p in positions if p <= full - cut)
    assert result.valid_bytes == last_whole
    assert result.error is None
    assert segment.size == last_whole
    assert segment.read_next_offset() == positions.index(last_whole) * 5
    assert result.next_offset == positions.index(last_whole) * 5
    segment._check()
    segment.close()
    assert verify_paths([tmp_path]).ok


def _opened_or_listed(
    directory: Path, base_offset: int, listed: bool, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
) -> LogSegment:
    """The segment at ``base_offset``: opened, or made from a listing (every file opened on first use)."""
    if listed:
        return LogSegment.listed(directory, [base_offset], index_interval_bytes=index_interval_bytes)[0]
    return LogSegment.open(directory, base_offset, index_interval_bytes=index_interval_bytes)


@pytest.mark.parametrize("listed", [False, True])
def test_recover_reports_the_next_offset_it_read_only_when_the_scan_ended_without_error(
    tmp_path: Path, listed: bool
) -> None:
    segment = LogSegment.open(tmp_path, 100, create=True)
    positions = _fill(segment, 6)
    segment.close()
    segment = _opened_or_listed(tmp_path, 100, listed)
    assert segment.recover().next_offset == segment.read_next_offset() == 130
    segment.close()
    log = tmp_path / "00000000000000000100.log"
    data = bytearray(log.read_bytes())
    data[positions[3] + 70] ^= 0x01
    log.write_bytes(bytes(data))
    segment = _opened_or_listed(tmp_path, 100, listed)
    result = segment.recover()
    # Stopped at a corrupt batch: the caller reads the next offset from the truncated log.
    assert result.error is not None and result.next_offset is None
    assert segment.read_next_offset() == 115
    segment.close()
    log.write_bytes(b"")
    segment = _opened_or_listed(tmp_path, 100, listed)
    assert segment.recover().next_offset == segment.read_next_offset() == 100
    segment.close()


def test_recover_stops_at_first_corrupt_batch(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True)
    positions = _fill(segment, 6)
    segment.close()
    log = tmp_path / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[positions[3] + 70] ^= 0x01
    log.write_bytes(bytes(data))
    report = verify_paths([tmp_path])
    assert not report.ok
    assert report.problems[0].position == positions[3] + 17
    segment = LogSegment.open(tmp_path, 0)
    result = segment.recover()
    assert result.valid_bytes == positions[3] and result.batches == 3
    assert isinstance(result.error, CorruptRecordError)
    assert result.error.path == str(log) and result.error.position == positions[3] + 17
    segment.close()
    assert log.stat().st_size == positions[3]


def test_recover_absurd_length_keeps_valid_prefix(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True)
    positions = _fill(segment, 4)
    segment.close()
    log = tmp_path / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[positions[2] + 8 : positions[2] + 12] = (2**31 - 1).to_bytes(4, "big")
    log.write_bytes(bytes(data))
    segment = LogSegment.open(tmp_path, 0)
    result = segment.recover()
    assert result.valid_bytes == positions[2] and result.truncated_bytes == len(data) - positions[2]
    segment.close()


def test_recover_rebuilds_txn_index(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True)
    segment.append(build_batch([SimpleRecord(b"a", None, T0)], base_offset=0, producer_id=5, producer_epoch=0,
                               base_sequence=0, is_transactional=True))
    segment.append(_batch(1, 2))
    segment.append(build_end_txn_marker(offset=3, timestamp=T0, partition_leader_epoch=0, producer_id=5,
                                        producer_epoch=0, marker=EndTransactionMarker(ControlRecordType.ABORT, 1)))
    result = segment.recover()
    assert result.batches == 3
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in segment.txn_index.all_aborted_txns()] == [(5, 0, 3, 4)]
    result = segment.collect_aborted_txns(0, 4)
    assert [t.producer_id for t in result.aborted] == [5]
    segment.close()


def test_truncate_to(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=300)
    positions = _fill(segment, 10)
    size_before = segment.size
    removed = segment.truncate_to(23)
    assert segment.size == positions[4]
    assert removed == size_before - positions[4]
    assert segment.read_next_offset() == 20
    assert all(e.offset < 23 for e in segment.offset_index)
    assert segment.offset_index.length == 10 * 1024 * 1024
    assert segment.max_timestamp_so_far == T0 + 154
    segment._check()
    assert segment.truncate_to(0) == positions[4]
    assert segment.size == 0
    segment.close()


def test_read_reopens_a_released_segment_and_follows_a_rename(tmp_path: Path) -> None:
    """read() takes the ``.log`` and index objects as plain attributes once made: a released segment (files
    closed, objects back to unopened) must reopen them, and a renamed one read at its new names."""
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=500)
    _fill(segment, 20)
    expected = segment.read(37, 1, min_one_message=True)
    assert expected is not None
    segment.release()
    assert segment.open_files == ()
    assert segment.read(37, 1, min_one_message=True) == expected
    assert set(segment.open_files) >= {"log", "index"}
    segment.rename_to_deleted()
    segment.release()
    renamed = segment.read(37, 1, min_one_message=True)
    assert renamed is not None and renamed.records == expected.records
    assert renamed.path == str(segment.log_path) and renamed.path.endswith(".log.deleted")
    segment.close()


def test_read_of_a_closed_segment_raises_segment_closed_error(tmp_path: Path) -> None:
    """A deleted segment's read (its files unlinked and closed, as the last reader's release leaves them) is a
    typed SegmentClosedError the log's reader retries on, never an I/O error (EBADF) that would take the dir
    offline, and it opens nothing again."""
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=500)
    _fill(segment, 20)
    segment.rename_to_deleted()
    segment.discard_indexes()
    segment.log.close()
    with pytest.raises(SegmentClosedError, match=r"00000000000000000000\.log\.deleted"):
        segment.read(37, 1, min_one_message=True)
    assert segment.open_files == ()


def test_rename_to_deleted_and_delete(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True)
    _fill(segment, 2)
    segment.rename_to_deleted()
    names = sorted(os.listdir(tmp_path))
    assert names == ["00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
                     "00000000000000000000.timeindex.deleted"]
    segment.append(_batch(10))
    segment.delete()
    assert os.listdir(tmp_path) == []


def test_read_only_open_with_missing_indexes(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=100)
    _fill(segment, 5)
    segment.close()
    for suffix in (".index", ".timeindex"):
        (tmp_path / f"{0:020d}{suffix}").unlink()
    reader = LogSegment.open(tmp_path, 0, writable=False)
    fetch = reader.read(12, 100)
    assert fetch is not None and fetch.offset == 14
    assert sorted(os.listdir(tmp_path)) == [f"{0:020d}.log"]
    reader.close()


def test_random_stress_keeps_invariants(tmp_path: Path) -> None:
    rng = random.Random(1234)
    segment = LogSegment.open(tmp_path, 1000, create=True, index_interval_bytes=256)
    next_offset = 1000
    for _ in range(300):
        action = rng.random()
        if action < 0.75:
            count = rng.randint(1, 8)
            segment.append(_batch(next_offset, count, ts=T0 + rng.randint(0, 10**6)))
            next_offset += count
        elif action < 0.9 and next_offset > 1000:
            target = rng.randint(1000, next_offset)
            segment.truncate_to(target)
            next_offset = segment.read_next_offset()
        else:
            segment.flush()
        segment._check()
        assert segment.read_next_offset() == next_offset
    segment.close()
    assert verify_paths([tmp_path]).ok


def _closed_segment_with_indexes(directory: Path) -> dict[str, bytes]:
    """A closed segment with several index entries; its ``.index``/``.timeindex`` bytes (what recovery rebuilds:
    the append path's entries, trimmed, with the final time entry)."""
    segment = LogSegment.open(directory, 0, create=True, index_interval_bytes=300)
    _fill(segment, 12)
    segment.append(_batch(60, ts=T0))  # below the max timestamp: the final time entry names an earlier batch
    segment.close()
    indexes = {suffix: (directory / f"{0:020d}{suffix}").read_bytes() for suffix in (".index", ".timeindex")}
    assert len(indexes[".index"]) >= 3 * 8 and len(indexes[".timeindex"]) >= 3 * 12
    return indexes


@pytest.mark.parametrize("listed", [False, True], ids=["opened", "listed"])
def test_recover_leaves_a_correct_index_file_untouched(tmp_path: Path, listed: bool) -> None:
    expected = _closed_segment_with_indexes(tmp_path)
    before = {}
    for suffix in expected:
        path = tmp_path / f"{0:020d}{suffix}"
        # An old modification time: any write by the recovery (even in the same clock tick) would change it.
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
        before[suffix] = path.stat()
    segment = _opened_or_listed(tmp_path, 0, listed, index_interval_bytes=300)
    result = segment.recover()
    assert result.error is None and result.truncated_bytes == 0
    for suffix, data in expected.items():
        after = (tmp_path / f"{0:020d}{suffix}").stat()
        assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
            before[suffix].st_ino, before[suffix].st_mtime_ns, before[suffix].st_size
        ), suffix
        assert (tmp_path / f"{0:020d}{suffix}").read_bytes() == data
    assert segment.read_next_offset() == 65
    segment._check()
    segment.close()


@pytest.mark.parametrize("damage", ["flipped", "zero_tail", "preallocated", "short", "empty", "missing", "longer"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_recover_rewrites_a_wrong_index_to_exactly_the_rebuilt_bytes(tmp_path: Path, suffix: str, damage: str) -> None:
    expected = _closed_segment_with_indexes(tmp_path)
    path = tmp_path / f"{0:020d}{suffix}"
    data = expected[suffix]
    damaged = {
        "flipped": data[:5] + bytes([data[5] ^ 0xFF]) + data[6:],
        "zero_tail": data[: len(data) // 2] + bytes(len(data) - len(data) // 2),
        # What a crash leaves of an active segment: the entries, then the zeros of the preallocated length.
        "preallocated": data + bytes(10 * 1024 * 1024 - len(data)),
        "short": data[: len(data) - 7],
        "empty": b"",
        "longer": data + data,
    }
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(damaged[damage])
    segment = LogSegment.listed(tmp_path, [0], index_interval_bytes=300)[0]
    result = segment.recover()
    assert result.error is None and result.truncated_bytes == 0
    for name, rebuilt in expected.items():
        assert (tmp_path / f"{0:020d}{name}").read_bytes() == rebuilt, name
    assert segment.find_offset_by_timestamp(T0 + 300) is not None
    segment._check()
    segment.close()
    for name, rebuilt in expected.items():
        assert (tmp_path / f"{0:020d}{name}").read_bytes() == rebuilt, name


def test_recover_raises_the_index_error_for_an_entry_its_scan_refused(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=100)
    for base in range(0, 60, 5):
        segment.append(_batch(base, ts=T0))  # one timestamp: a single time-index entry, the offset index fills
    segment.close()
    # Room for 10 offset entries (6 time slots, only one used): the 11th that recovery makes is replayed on the index, which raises its own error.
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=100, max_index_size=10 * 8)
    with pytest.raises(IndexFullError) as raised:
        segment.recover()
    assert raised.value.path == str(tmp_path / f"{0:020d}.index")
    assert segment.offset_index.entries == 10
    segment.close()
