"""Offset, time and transaction indexes: Kafka's file layout, append rules, search, truncation and checks."""

from __future__ import annotations

import bisect
import io
import itertools
import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments.abstract_index import DEFAULT_MAX_INDEX_SIZE
from segments.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    StorageFormatError,
)
from segments.offset_index import OffsetIndex, OffsetPosition
from segments.time_index import TimeIndex, TimestampOffset
from segments.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from tests.conftest import KAFKA_REAL, require_fixtures

PARSE_ERRORS = (CorruptIndexError, InvalidOffsetError, IndexOffsetOverflowError)
per_example_files = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
fuzz_files = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)


def fresh(tmp_path: Path, name: str) -> Path:
    """A path in tmp_path with no file behind it (hypothesis reuses tmp_path across examples)."""
    path = tmp_path / name
    path.unlink(missing_ok=True)
    return path


def offset_entries(base: int, deltas: list[tuple[int, int]]) -> list[OffsetPosition]:
    """Strictly increasing offsets (first one may equal base) with strictly increasing positions."""
    out: list[OffsetPosition] = []
    offset, position = base - 1, 0
    for offset_step, position_step in deltas:
        offset += offset_step
        position += position_step
        out.append(OffsetPosition(offset, position))
    return out


def largest_lower_bound(keys: list[int], target: int) -> int:
    return bisect.bisect_right(keys, target) - 1


def kafka_smallest_upper_bound(values: list[int], target: int) -> int:
    """Smallest slot with value >= target, as Kafka answers it for strictly increasing values: its binary search
    never probes slot 0 on the cold path, so an exact match at slot 0 yields slot 1 (-1 for a single entry)."""
    if values and values[0] == target:
        return 1 if len(values) > 1 else -1
    slot = bisect.bisect_left(values, target)
    return -1 if slot == len(values) else slot


class SmallWarmOffsetIndex(OffsetIndex):
    """Warm section of 3 entries so small hypothesis inputs cross the warm/cold boundary."""

    _WARM_ENTRIES = 3


class SmallWarmTimeIndex(TimeIndex):
    _WARM_ENTRIES = 3


# -- creation, preallocation, trimming ------------------------------------------------------------------------


def test_new_offset_index_is_preallocated_to_segment_index_bytes(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "0.index", 0) as index:
        assert index.path.stat().st_size == DEFAULT_MAX_INDEX_SIZE == 10485760
        assert (index.entries, index.max_entries, index.is_full()) == (0, 1310720, False)
        index._check()


def test_new_time_index_is_preallocated_to_whole_entries(tmp_path: Path) -> None:
    with TimeIndex(tmp_path / "0.timeindex", 0) as index:
        assert index.path.stat().st_size == 10485756
        assert (index.entries, index.max_entries) == (0, 873813)
        index._check()


def test_zero_length_existing_file_is_treated_as_new(tmp_path: Path) -> None:
    path = tmp_path / "5.index"
    path.touch()
    with OffsetIndex(path, 5, max_index_size=100) as index:
        assert (index.length, index.entries, index.max_entries) == (96, 0, 12)


def test_without_preallocation_a_new_index_has_no_slot_until_resized(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, preallocate=False)
    assert (index.length, index.max_entries, index.is_full()) == (0, 0, True)
    assert index.lookup(10) == OffsetPosition(0, 0)
    with pytest.raises(IndexFullError):
        index.append(1, 10)
    assert index.resize(20)
    index.append(1, 10)
    index._check()
    index.close()
    assert index.path.stat().st_size == 8


def test_max_index_size_below_one_entry_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=11)


def test_close_trims_and_reopen_counts_every_slot(tmp_path: Path) -> None:
    path = tmp_path / "100.index"
    with OffsetIndex(path, 100) as index:
        for i in range(3):
            index.append(101 + i, 4100 * (i + 1))
    assert path.stat().st_size == 24
    reopened = OffsetIndex(path, 100)
    assert (reopened.entries, reopened.max_entries, reopened.is_full()) == (3, 3, True)
    assert reopened.last_offset == 103
    # Kafka resizes an active segment's index back to segment.index.bytes after loading it.
    assert reopened.resize(DEFAULT_MAX_INDEX_SIZE)
    reopened.append(104, 20000)
    reopened._check()
    reopened.close()
    with OffsetIndex(path, 100, writable=False) as read_only:
        assert [e.offset for e in read_only] == [101, 102, 103, 104]


@pytest.mark.parametrize(("cls", "size"), [(OffsetIndex, 10485760), (TimeIndex, 10485756)])
def test_untrimmed_file_reads_as_full_and_dump_stops_at_zero_fill(
    tmp_path: Path, cls: type[OffsetIndex] | type[TimeIndex], size: int
) -> None:
    live = tmp_path / f"50{cls.__name__}"
    index = cls(live, 50)
    for i in range(3):
        if isinstance(index, OffsetIndex):
            index.append(51 + i, 5000 * (i + 1))
        else:
            index.maybe_append(1_000 + i, 51 + i)
    crashed = tmp_path / "crashed"
    shutil.copyfile(live, crashed)  # what a crash leaves: the mapped pages without the trim
    index.close()
    with cls(crashed, 50, writable=False) as untrimmed:
        assert untrimmed.length == size
        assert untrimmed.entries == untrimmed.max_entries == size // cls.entry_size
        assert len(list(untrimmed.entries_for_dump())) == 3
        if cls is OffsetIndex:
            untrimmed.sanity_check()  # the zero entries' offset is the base: Kafka's check passes
        else:
            with pytest.raises(CorruptIndexError):  # last timestamp 0 < first timestamp
                untrimmed.sanity_check()
        findings = untrimmed.check()
        assert len(findings) == 1
        assert findings[0].position == 3 * cls.entry_size
        assert "untrimmed" in str(findings[0]) and str(crashed) in str(findings[0])


def test_read_only_mode_never_changes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x00\x00")
    index = OffsetIndex(path, 0, writable=False)
    assert (index.entries, index.length) == (1, 11)
    mutations: list[Callable[[], object]] = [
        lambda: index.append(2, 20),
        index.trim_to_valid_size,
        index.reset,
        lambda: index.truncate_to(0),
    ]
    for mutate in mutations:
        with pytest.raises(io.UnsupportedOperation):
            mutate()
    index.flush()
    index.close()
    assert path.stat().st_size == 11
    missing = OffsetIndex(tmp_path / "missing.index", 0, writable=False)
    assert (missing.entries, missing.lookup(5)) == (0, (0, 0))
    missing._check()
    missing.close()
    assert not (tmp_path / "missing.index").exists()


def test_zero_length_file_opens_empty_without_mapping(tmp_path: Path) -> None:
    path = tmp_path / "7.timeindex"
    path.touch()
    with TimeIndex(path, 7, writable=False) as index:
        assert (index.entries, index.max_entries) == (0, 0)
        assert index.lookup(5) == TimestampOffset(-1, 7)
        assert list(index.entries_for_dump()) == []
        index.sanity_check()
        assert index.check() == []
        index._check()


def test_closed_index_refuses_work_and_delete_rename(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, max_index_size=80)
    index.append(3, 30)
    index.rename_to(tmp_path / "0.index.deleted")
    assert index.path == tmp_path / "0.index.deleted" and index.path.exists()
    assert index.lookup(3) == OffsetPosition(3, 30)
    assert index.delete()
    assert not (tmp_path / "0.index.deleted").exists()
    index._check()
    with pytest.raises(ValueError):
        index.append(4, 40)
    with pytest.raises(ValueError):
        index.lookup(3)
    assert not index.delete()


def test_entry_out_of_range(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "0.index", 0, max_index_size=80) as index:
        index.append(0, 0)
        assert index.entry(0) == OffsetPosition(0, 0)
        for n in (-1, 1):
            with pytest.raises(IndexError):
                index.entry(n)


def test_resize_cannot_cut_valid_entries(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "0.index", 0, max_index_size=80) as index:
        index.append(1, 1)
        index.append(2, 2)
        with pytest.raises(ValueError):
            index.resize(15)
        assert not index.resize(83)  # rounds down to the current 80 bytes
        index.reset()
        assert (index.entries, index.length) == (0, 80)


# -- append rules -----------------------------------------------------------------------------------------------


def test_offset_index_append_rules(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "1000.index", 1000, max_index_size=24) as index:
        with pytest.raises(IndexOffsetOverflowError):
            index.append(999, 0)
        index.append(1000, 0)  # the base itself is a valid first entry
        for bad in (1000, 999):
            with pytest.raises(InvalidOffsetError) as err:
                index.append(bad, 100)
            assert err.value.position == 8 and str(index.path) in str(err.value)
        with pytest.raises(IndexOffsetOverflowError):
            index.append(1000 + 2**31, 100)
        with pytest.raises(ValueError):
            index.append(5000, -1)
        index.append(5000, 100)
        index.append(1000 + 2**31 - 1, 2**31 - 1)
        assert index.is_full() and index.last_offset == 1000 + 2**31 - 1
        with pytest.raises(IndexFullError):  # Kafka checks fullness before the offset
            index.append(0, 300)
        index._check()


def test_relative_offset_bounds(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "10.index", 10, max_index_size=8) as index:
        assert index.relative_offset(10) == 0
        assert index.relative_offset(10 + 2**31 - 1) == 2**31 - 1
        for bad in (9, 10 + 2**31):
            assert not index.can_append_offset(bad)
            with pytest.raises(IndexOffsetOverflowError):
                index.relative_offset(bad)


def test_time_index_append_rules(tmp_path: Path) -> None:
    with TimeIndex(tmp_path / "100.timeindex", 100, max_index_size=120) as index:
        index.maybe_append(-1, 100)  # not larger than the empty index's -1: ignored
        assert index.entries == 0
        index.maybe_append(0, 100)
        index.maybe_append(10, 105)
        assert index.last_entry == TimestampOffset(10, 105)
        index.maybe_append(10, 107)  # same timestamp: ignored
        index.maybe_append(11, 105)  # same offset, larger timestamp: appended, as in Kafka
        assert list(index) == [TimestampOffset(0, 100), TimestampOffset(10, 105), TimestampOffset(11, 105)]
        with pytest.raises(InvalidOffsetError):
            index.maybe_append(20, 104)
        with pytest.raises(InvalidOffsetError) as err:
            index.maybe_append(9, 200)
        assert err.value.position == 36
        with pytest.raises(IndexOffsetOverflowError):
            index.maybe_append(30, 100 + 2**31)
        with pytest.raises(ValueError):
            index.maybe_append(2**63, 200)
        index._check()


def test_time_index_reserves_its_last_slot_for_the_roll_entry(tmp_path: Path) -> None:
    with TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=48) as index:
        assert index.max_entries == 4
        for i in range(3):
            assert not index.is_full()
            index.maybe_append(10 * (i + 1), i)
        assert index.is_full()
        with pytest.raises(IndexFullError):
            index.maybe_append(40, 3)
        index.maybe_append(30, 3, skip_full_check=True)  # not larger: still a no-op
        index.maybe_append(40, 3, skip_full_check=True)
        assert index.entries == 4
        index.maybe_append(40, 3, skip_full_check=True)  # equal to the last entry: no slot needed
        with pytest.raises(IndexFullError):
            index.maybe_append(50, 4, skip_full_check=True)
        index._check()


# -- round trips -------------------------------------------------------------------------------------------------

offset_deltas = st.lists(st.tuples(st.integers(1, 2**20), st.integers(1, 2**16)), max_size=200)


@per_example_files
@given(base=st.integers(0, 2**62), deltas=offset_deltas)
def test_offset_index_round_trip(tmp_path: Path, base: int, deltas: list[tuple[int, int]]) -> None:
    entries = offset_entries(base, deltas)
    path = fresh(tmp_path, "rt.index")
    with OffsetIndex(path, base, max_index_size=8 * len(entries) + 8) as index:
        for entry in entries:
            index.append(*entry)
    assert path.stat().st_size == 8 * len(entries)
    with OffsetIndex(path, base, writable=False) as read_only:
        assert list(read_only) == entries
        assert list(read_only.entries_for_dump()) == entries
        read_only.sanity_check()
        assert read_only.check(entries[-1].position + 1 if entries else 0) == []
        for entry in entries:
            assert read_only.lookup(entry.offset) == entry


@per_example_files
@given(
    base=st.integers(0, 2**62),
    steps=st.lists(st.tuples(st.integers(1, 2**40), st.integers(1, 2**20)), max_size=200),
)
def test_time_index_round_trip(tmp_path: Path, base: int, steps: list[tuple[int, int]]) -> None:
    entries: list[TimestampOffset] = []
    timestamp, offset = -1, base - 1
    for ts_step, offset_step in steps:
        timestamp, offset = timestamp + ts_step, offset + offset_step
        entries.append(TimestampOffset(timestamp, offset))
    path = fresh(tmp_path, "rt.timeindex")
    with TimeIndex(path, base, max_index_size=12 * len(entries) + 12) as index:
        for entry in entries:
            index.maybe_append(*entry)
    with TimeIndex(path, base, writable=False) as read_only:
        assert list(read_only) == entries
        assert list(read_only.entries_for_dump()) == entries
        read_only.sanity_check()
        assert read_only.check() == []
        for entry in entries:
            assert read_only.lookup(entry.timestamp) == entry


@given(
    txn=st.builds(
        AbortedTxn,
        producer_id=st.integers(-(2**63), 2**63 - 1),
        first_offset=st.integers(-(2**63), 2**63 - 1),
        last_offset=st.integers(-(2**63), 2**63 - 1),
        last_stable_offset=st.integers(-(2**63), 2**63 - 1),
        version=st.integers(-(2**15), 2**15 - 1),
    )
)
def test_aborted_txn_round_trip(txn: AbortedTxn) -> None:
    data = txn.to_bytes()
    assert len(data) == 34
    assert AbortedTxn.from_bytes(data) == txn
    assert txn.reader_version == struct.unpack(">b", data[:1])[0]


def test_aborted_txn_validation() -> None:
    with pytest.raises(CorruptIndexError):
        AbortedTxn.from_bytes(b"\x00" * 33)
    with pytest.raises(ValueError):
        AbortedTxn(2**63, 0, 0, 0)
    with pytest.raises(ValueError):
        AbortedTxn(0, 0, 0, 0, version=2**15)


# -- search against brute force -----------------------------------------------------------------------------------


def sorted_unique(rng: random.Random, count: int, low: int, spread: int) -> list[int]:
    return sorted(rng.sample(range(low, low + spread), count))


def search_targets(rng: random.Random, keys: list[int]) -> list[int]:
    targets = [keys[0] - 1, keys[-1] + 1, keys[0], keys[-1]]
    for key in rng.sample(keys, min(len(keys), 400)):
        targets += [key - 1, key, key + 1]
    targets += [rng.randint(keys[0] - 10, keys[-1] + 10) for _ in range(400)]
    return targets


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_offset_lookup_matches_brute_force_in_warm_and_cold_sections(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    base = rng.randint(0, 2**40)
    count = 3000  # well beyond the 1024-entry warm section
    offsets = sorted_unique(rng, count, base, 50 * count)
    positions = sorted_unique(rng, count, 0, 1000 * count)
    with OffsetIndex(tmp_path / "big.index", base, max_index_size=8 * count) as index:
        for offset, position in zip(offsets, positions, strict=True):
            index.append(offset, position)
        assert index.is_full()
        first_warm = count - 1 - 1024
        hit_slots = set()
        for target in search_targets(rng, offsets):
            slot = largest_lower_bound(offsets, target)
            hit_slots.add(slot)
            expected = OffsetPosition(base, 0) if slot < 0 else OffsetPosition(offsets[slot], positions[slot])
            assert index.lookup(target) == expected
        assert min(s for s in hit_slots if s >= 0) < first_warm < max(hit_slots)
        for target in search_targets(rng, positions):
            slot = kafka_smallest_upper_bound(positions, target)
            got = index.fetch_upper_bound_offset(target - 7, 7)
            assert got == (None if slot < 0 else OffsetPosition(offsets[slot], positions[slot]))


@pytest.mark.parametrize("seed", [4, 5])
def test_time_lookup_matches_brute_force_in_warm_and_cold_sections(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    base = rng.randint(0, 2**40)
    count = 2500  # beyond the 682-entry warm section
    timestamps = sorted_unique(rng, count, 1_600_000_000_000, 100 * count)
    offsets = sorted_unique(rng, count, base, 20 * count)
    with TimeIndex(tmp_path / "big.timeindex", base, max_index_size=12 * (count + 1)) as index:
        for timestamp, offset in zip(timestamps, offsets, strict=True):
            index.maybe_append(timestamp, offset)
        for target in search_targets(rng, timestamps):
            slot = largest_lower_bound(timestamps, target)
            expected = (
                TimestampOffset(-1, base) if slot < 0 else TimestampOffset(timestamps[slot], offsets[slot])
            )
            assert index.lookup(target) == expected


@per_example_files
@given(
    deltas=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=0, max_size=30),
    targets=st.lists(st.integers(-3, 200), max_size=30),
)
def test_small_warm_section_search_matches_brute_force(
    tmp_path: Path, deltas: list[tuple[int, int]], targets: list[int]
) -> None:
    entries = offset_entries(0, deltas)
    offsets = [e.offset for e in entries]
    positions = [e.position for e in entries]
    with SmallWarmOffsetIndex(fresh(tmp_path, "w.index"), 0, max_index_size=8 * 31) as index:
        for entry in entries:
            index.append(*entry)
        for target in targets:
            slot = largest_lower_bound(offsets, target)
            assert index.lookup(target) == (OffsetPosition(0, 0) if slot < 0 else entries[slot])
            upper = kafka_smallest_upper_bound(positions, target)
            assert index.fetch_upper_bound_offset(target, 0) == (None if upper < 0 else entries[upper])
    with SmallWarmTimeIndex(fresh(tmp_path, "w.timeindex"), 0, max_index_size=12 * 32) as time_index:
        for entry in entries:
            time_index.maybe_append(entry.position, entry.offset)  # positions serve as increasing timestamps
        for target in targets:
            slot = largest_lower_bound(positions, target)
            expected = TimestampOffset(-1, 0) if slot < 0 else TimestampOffset(positions[slot], offsets[slot])
            assert time_index.lookup(target) == expected


def test_fetch_upper_bound_quirk_at_slot_zero(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "0.index", 0, max_index_size=80) as index:
        index.append(5, 100)
        assert index.fetch_upper_bound_offset(0, 100) is None  # Kafka: exact match at the only slot is missed
        index.append(9, 200)
        assert index.fetch_upper_bound_offset(0, 100) == OffsetPosition(9, 200)
        assert index.fetch_upper_bound_offset(0, 99) == OffsetPosition(5, 100)
        assert index.fetch_upper_bound_offset(150, 50) == OffsetPosition(9, 200)
        assert index.fetch_upper_bound_offset(150, 51) is None


# -- truncation ----------------------------------------------------------------------------------------------------


def test_truncate_to_follows_kafka_cases(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "10.index", 10, max_index_size=80) as index:
        for offset in (12, 15, 20):
            index.append(offset, offset * 100)
        index.truncate_to(25)
        assert index.entries == 3
        index.truncate_to(20)  # exact match goes
        assert [e.offset for e in index] == [12, 15]
        index.truncate_to(13)  # between entries
        assert [e.offset for e in index] == [12]
        index.truncate_to(5)  # below everything
        assert index.entries == 0 and index.last_offset == 10
        index.append(11, 1)
    with TimeIndex(tmp_path / "10.timeindex", 10, max_index_size=120) as time_index:
        for ts, offset in ((100, 12), (200, 15), (300, 20)):
            time_index.maybe_append(ts, offset)
        time_index.truncate_to(15)
        assert list(time_index) == [TimestampOffset(100, 12)]
        time_index.maybe_append(150, 13)
        assert time_index.last_entry == TimestampOffset(150, 13)


# -- sanity checks and findings ----------------------------------------------------------------------------------


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    below = write(tmp_path / "100.index", struct.pack(">iiii", 1, 10, -1, 20))
    with OffsetIndex(below, 100, writable=False) as index, pytest.raises(CorruptIndexError) as err:
        index.sanity_check()
    assert err.value.position == 8 and err.value.path == str(below)
    ragged = write(tmp_path / "0.index", struct.pack(">ii", 1, 10) + b"\x01\x02")
    with OffsetIndex(ragged, 0, writable=False) as index, pytest.raises(CorruptIndexError) as err:
        index.sanity_check()
    assert err.value.position == 8


def test_time_index_sanity_check(tmp_path: Path) -> None:
    decreasing = write(tmp_path / "0.timeindex", struct.pack(">qi", 500, 1) + struct.pack(">qi", 400, 2))
    with TimeIndex(decreasing, 0, writable=False) as index, pytest.raises(CorruptIndexError) as err:
        index.sanity_check()
    assert err.value.position == 12 and "first timestamp" in err.value.message
    below = write(tmp_path / "9.timeindex", struct.pack(">qi", 500, -1))
    with TimeIndex(below, 9, writable=False) as index, pytest.raises(CorruptIndexError) as err:
        index.sanity_check()
    assert "base offset" in err.value.message
    ragged = write(tmp_path / "1.timeindex", b"\x00" * 13)
    with TimeIndex(ragged, 1, writable=False) as index, pytest.raises(CorruptIndexError) as err:
        index.sanity_check()
    assert err.value.position == 12


def test_offset_index_check_findings(tmp_path: Path) -> None:
    rows = [(5, 100), (5, 200), (3, 150), (-2, 150), (9, 5000)]
    path = write(tmp_path / "10.index", b"".join(struct.pack(">ii", *r) for r in rows) + b"\x00")
    with OffsetIndex(path, 10, writable=False) as index:
        findings = index.check(log_size=4096)
    messages = [f"{f.position}: {f.message}" for f in findings]
    assert any(f.position == 40 and "multiple" in f.message for f in findings)
    assert any(f.position == 8 and "does not increase" in f.message for f in findings)
    assert any(f.position == 16 and "decreases" in f.message for f in findings)
    assert any(f.position == 24 and "below the base" in f.message for f in findings)
    assert any(f.position == 32 and "outside the 4096-byte log" in f.message for f in findings)
    assert not any(f.position == 0 for f in findings), messages


def test_time_index_check_findings(tmp_path: Path) -> None:
    rows = [(100, 1), (100, 2), (90, 0), (-5, 3)]
    path = write(tmp_path / "0.timeindex", b"".join(struct.pack(">qi", *r) for r in rows))
    with TimeIndex(path, 0, writable=False) as index:
        findings = index.check()
    assert {f.position for f in findings} == {12, 24, 36}
    assert any("negative timestamp" in f.message for f in findings)
    assert any("offset 0 decreases" in f.message for f in findings)


# -- transaction index ----------------------------------------------------------------------------------------------


def test_txn_index_is_created_lazily_and_checks_order(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, 100)
    assert index.all_aborted_txns() == [] and not path.exists()
    index.sanity_check()
    index.append(AbortedTxn(7, 90, 105, 106))
    assert path.stat().st_size == 34
    for last in (105, 104):
        with pytest.raises(InvalidOffsetError):
            index.append(AbortedTxn(8, 100, last, last + 1))
    index.append(AbortedTxn(8, 100, 110, 100))
    index.close()
    reopened = TransactionIndex(path, 100)
    with pytest.raises(InvalidOffsetError):
        reopened.append(AbortedTxn(9, 100, 110, 111))
    assert reopened.all_aborted_txns() == [AbortedTxn(7, 90, 105, 106), AbortedTxn(8, 100, 110, 100)]
    reopened.flush()
    reopened._check()
    reopened.close()


def test_txn_collect_rule(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex", 0)
    txns = [
        AbortedTxn(1, 0, 10, 11),
        AbortedTxn(2, 5, 20, 12),
        AbortedTxn(3, 15, 30, 31),
        AbortedTxn(4, 40, 50, 51),
    ]
    for txn in txns:
        index.append(txn)
    # lastOffset >= fetch and firstOffset < upper; stop after the first entry whose LSO reaches the upper bound.
    assert index.collect_aborted_txns(11, 25) == TxnIndexSearchResult([txns[1], txns[2]], True)
    assert index.collect_aborted_txns(0, 5) == TxnIndexSearchResult([txns[0]], True)
    assert index.collect_aborted_txns(0, 12) == TxnIndexSearchResult([txns[0], txns[1]], True)
    assert index.collect_aborted_txns(31, 100) == TxnIndexSearchResult([txns[3]], False)
    assert index.collect_aborted_txns(60, 100) == TxnIndexSearchResult([], False)
    index.close()


def test_txn_truncate_reset_delete_rename(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "0.txnindex", 0)
    index.rename_to(tmp_path / "0.txnindex.swap")  # nothing to move yet
    for last in (10, 20, 30):
        index.append(AbortedTxn(1, last - 5, last, last + 1))
    assert index.path == tmp_path / "0.txnindex.swap"
    index.truncate_to(20)
    assert [t.last_offset for t in index.all_aborted_txns()] == [10]
    index._check()
    index.append(AbortedTxn(1, 15, 15, 16))
    index.truncate_to(100)
    assert index.path.stat().st_size == 68
    index.rename_to(tmp_path / "0.txnindex")
    index.append(AbortedTxn(2, 16, 40, 41))
    index._check()
    index.reset()
    assert index.path.stat().st_size == 0
    index.append(AbortedTxn(1, 0, 1, 2))
    index._check()
    assert index.delete() and not index.path.exists()
    assert not index.delete()
    index._check()


def test_txn_reader_checks_only_the_first_version_byte(tmp_path: Path) -> None:
    good = AbortedTxn(1, 0, 10, 11).to_bytes()
    second_byte_set = AbortedTxn(2, 0, 20, 21, version=0x0005).to_bytes()
    negative = AbortedTxn(3, 0, 30, 31, version=-1).to_bytes()
    bad = AbortedTxn(4, 0, 40, 41, version=0x0100).to_bytes()
    path = write(tmp_path / "0.txnindex", good + second_byte_set + negative + bad + b"\x00" * 33)
    index = TransactionIndex(path, 0, writable=False)
    assert index.collect_aborted_txns(0, 11).aborted == [
        AbortedTxn(1, 0, 10, 11)
    ]  # stops before the bad entry
    with pytest.raises(CorruptIndexError) as err:
        index.all_aborted_txns()
    assert err.value.position == 102 and err.value.path == str(path)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    findings = index.check()
    assert [(f.position, "version" in f.message or "trailing" in f.message) for f in findings] == [
        (102, True),
        (136, True),
    ]
    with pytest.raises(io.UnsupportedOperation):
        index.append(AbortedTxn(5, 0, 50, 51))
    index._check()
    index.close()


def test_txn_sanity_check_and_findings(tmp_path: Path) -> None:
    rows = [AbortedTxn(1, 0, 90, 91), AbortedTxn(2, 120, 110, 200), AbortedTxn(3, 0, 100, 101)]
    path = write(tmp_path / "100.txnindex", b"".join(t.to_bytes() for t in rows))
    index = TransactionIndex(path, 100, writable=False)
    with pytest.raises(CorruptIndexError) as err:
        index.sanity_check()
    assert err.value.position == 0
    findings = index.check()
    assert {f.position for f in findings} == {0, 34, 68}
    assert any("first offset 120" in f.message for f in findings)
    assert any("last stable offset 200" in f.message for f in findings)
    assert any("does not increase" in f.message for f in findings)
    index.close()


# -- fuzz: arbitrary bytes only raise typed errors --------------------------------------------------------------------


def attempt(call: Callable[[], object], path: Path) -> None:
    """Run ``call``; only the documented typed errors may escape, and they must locate the problem."""
    try:
        call()
    except PARSE_ERRORS as err:
        assert err.path == str(path) and err.position is not None


@fuzz_files
@given(data=st.binary(max_size=300), base=st.integers(0, 2**62), target=st.integers(-(2**63), 2**63 - 1))
def test_fuzz_offset_index_bytes(tmp_path: Path, data: bytes, base: int, target: int) -> None:
    path = write(fresh(tmp_path, "f.index"), data)
    with OffsetIndex(path, base, writable=False) as index:
        list(index)
        list(index.entries_for_dump())
        index.lookup(target)
        index.fetch_upper_bound_offset(abs(target) % 2**31, 0)
        index.check(log_size=abs(target))
        attempt(index.sanity_check, path)
        index._check()
    with OffsetIndex(path, base, preallocate=False) as writable:
        writable.truncate_to(target)
        writable._check()


@fuzz_files
@given(data=st.binary(max_size=300), base=st.integers(0, 2**62), target=st.integers(-(2**63), 2**63 - 1))
def test_fuzz_time_index_bytes(tmp_path: Path, data: bytes, base: int, target: int) -> None:
    path = write(fresh(tmp_path, "f.timeindex"), data)
    with TimeIndex(path, base, writable=False) as index:
        list(index)
        list(index.entries_for_dump())
        index.lookup(target)
        index.check()
        attempt(index.sanity_check, path)
        index._check()
    with TimeIndex(path, base, preallocate=False) as writable:
        writable.truncate_to(target)
        writable._check()


@fuzz_files
@given(
    data=st.binary(max_size=300),
    start=st.integers(-(2**63), 2**63 - 1),
    target=st.integers(-(2**63), 2**63 - 1),
)
def test_fuzz_txn_index_bytes(tmp_path: Path, data: bytes, start: int, target: int) -> None:
    path = write(fresh(tmp_path, "f.txnindex"), data)
    for index in (TransactionIndex(path, start, writable=False), TransactionIndex(path, start)):
        attempt(index.all_aborted_txns, path)
        attempt(lambda: index.collect_aborted_txns(target, target), path)  # noqa: B023
        attempt(index.sanity_check, path)
        index.check()
        index._check()
        index.close()
    writable = TransactionIndex(path, start)
    attempt(lambda: writable.truncate_to(target), path)
    writable._check()
    writable.close()


# -- seeded random stress with invariant checks after every step --------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_offset_index_stress(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    base = rng.choice([0, 7, 2**40])
    path = tmp_path / "stress.index"
    size = 8 * 40
    index = OffsetIndex(path, base, max_index_size=size)
    model: list[OffsetPosition] = []
    for _ in range(600):
        op = rng.random()
        if op < 0.55:
            offset = (model[-1].offset if model else base) + rng.randint(-2, 20)
            position = (model[-1].position if model else 0) + rng.randint(1, 5000)
            try:
                index.append(offset, position)
            except IndexFullError:
                assert len(model) == index.max_entries
            except InvalidOffsetError:
                assert (model and offset <= model[-1].offset) or offset < base
            else:
                model.append(OffsetPosition(offset, position))
        elif op < 0.7:
            cut = rng.randint(base - 2, (model[-1].offset if model else base) + 3)
            index.truncate_to(cut)
            model = [e for e in model if e.offset < cut]
        elif op < 0.78:
            index.close()
            index = OffsetIndex(path, base, max_index_size=size)
            assert index.is_full() or not model
            index.resize(size)
        elif op < 0.83:
            index.trim_to_valid_size()
            assert index.max_entries == len(model)
        elif op < 0.87:
            index.resize(rng.choice([size, len(model) * 8 + 16]))
        elif op < 0.89:
            index.reset()
            model = []
        elif op < 0.91:
            index.flush()
        else:
            target = rng.randint(base - 3, (model[-1].offset if model else base) + 3)
            slot = largest_lower_bound([e.offset for e in model], target)
            assert index.lookup(target) == (model[slot] if slot >= 0 else OffsetPosition(base, 0))
        index._check()
        assert list(index) == model
        assert index.entries == len(model)
    index.close()
    index._check()


@pytest.mark.parametrize("seed", range(4))
def test_time_index_stress(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    base = rng.choice([0, 11, 2**33])
    path = tmp_path / "stress.timeindex"
    size = 12 * 30
    index = TimeIndex(path, base, max_index_size=size)
    model: list[TimestampOffset] = []
    for _ in range(600):
        op = rng.random()
        last = model[-1] if model else TimestampOffset(-1, base)
        if op < 0.6:
            timestamp = last.timestamp + rng.randint(-2, 50)
            offset = last.offset + rng.randint(-2, 10)
            skip = rng.random() < 0.1
            try:
                index.maybe_append(timestamp, offset, skip_full_check=skip)
            except IndexFullError:
                assert len(model) >= index.max_entries - (0 if skip else 1)
            except InvalidOffsetError:
                assert (model and (offset < last.offset or timestamp < last.timestamp)) or offset < base
            else:
                if timestamp > last.timestamp:
                    model.append(TimestampOffset(timestamp, offset))
        elif op < 0.72:
            cut = rng.randint(base - 2, last.offset + 3)
            index.truncate_to(cut)
            # Offsets can repeat; Kafka's rule drops from the slot its search lands on, so model it the same way.
            # Offsets may repeat, so only the guarantees are modelled: a prefix holding every entry below ``cut``
            # and none above it.
            kept = list(index)
            assert kept == model[: len(kept)]
            assert len(kept) >= sum(e.offset < cut for e in model)
            assert all(e.offset <= cut for e in kept)
            model = kept
        elif op < 0.8:
            index.close()
            index = TimeIndex(path, base, max_index_size=size)
            index.resize(size)
        elif op < 0.85:
            index.trim_to_valid_size()
        elif op < 0.88:
            index.reset()
            model = []
        else:
            target = rng.randint(-3, last.timestamp + 3)
            slot = largest_lower_bound([e.timestamp for e in model], target)
            assert index.lookup(target) == (model[slot] if slot >= 0 else TimestampOffset(-1, base))
        index._check()
        assert list(index) == model
        assert index.last_entry == (model[-1] if model else TimestampOffset(-1, base))
    index.close()


@pytest.mark.parametrize("seed", range(4))
def test_txn_index_stress(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "stress.txnindex"
    index = TransactionIndex(path, 0)
    model: list[AbortedTxn] = []
    for _ in range(400):
        op = rng.random()
        last = model[-1].last_offset if model else 0
        if op < 0.5:
            new_last = last + rng.randint(-2, 20)
            txn = AbortedTxn(rng.randint(0, 5), new_last - rng.randint(0, 10), new_last, new_last + 1)
            try:
                index.append(txn)
            except InvalidOffsetError:
                assert model and new_last <= last
            else:
                model.append(txn)
        elif op < 0.65:
            cut = rng.randint(-1, last + 3)
            index.truncate_to(cut)
            model = [t for t in model if t.last_offset < cut]
        elif op < 0.72:
            index.close()
            index = TransactionIndex(path, 0)
        elif op < 0.76:
            index.reset()
            model = []
        elif op < 0.8:
            index.flush()
        else:
            fetch = rng.randint(0, last + 5)
            upper = fetch + rng.randint(0, 30)
            aborted: list[AbortedTxn] = []
            complete = False
            for txn in model:
                if txn.last_offset >= fetch and txn.first_offset < upper:
                    aborted.append(txn)
                if txn.last_stable_offset >= upper:
                    complete = True
                    break
            assert index.collect_aborted_txns(fetch, upper) == TxnIndexSearchResult(aborted, complete)
        index._check()
        assert index.all_aborted_txns() == model
    index.close()


# -- real broker files -----------------------------------------------------------------------------------------------


def real_index_files() -> list[Path]:
    if not KAFKA_REAL.exists():
        return []
    return sorted(
        p for p in KAFKA_REAL.rglob("*") if p.suffix in (".index", ".timeindex") and p.stat().st_size > 0
    )


REAL_FILES = real_index_files()


@pytest.mark.parametrize(
    "path", REAL_FILES or [None], ids=[str(p.relative_to(KAFKA_REAL)) for p in REAL_FILES] or ["absent"]
)
def test_real_broker_indexes(path: Path | None) -> None:
    require_fixtures(KAFKA_REAL)
    if path is None:
        pytest.skip(f"no non-empty .index/.timeindex files under {KAFKA_REAL}")
    base = int(path.stem)
    log = path.with_suffix(".log")
    if path.suffix == ".index":
        with OffsetIndex(path, base, writable=False) as index:
            index.sanity_check()
            entries = list(index)
            assert entries and list(index.entries_for_dump()) == entries
            assert all(
                a.offset < b.offset and a.position < b.position for a, b in itertools.pairwise(entries)
            )
            assert index.check(log.stat().st_size if log.exists() else None) == []
    else:
        with TimeIndex(path, base, writable=False) as time_index:
            time_index.sanity_check()
            stamps = list(time_index)
            assert stamps and list(time_index.entries_for_dump()) == stamps
            assert all(
                a.timestamp < b.timestamp and a.offset <= b.offset for a, b in itertools.pairwise(stamps)
            )
            assert time_index.check() == []


def test_typed_errors_share_the_format_base() -> None:
    assert all(issubclass(e, StorageFormatError) for e in (*PARSE_ERRORS, IndexFullError))
