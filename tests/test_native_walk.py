"""The compiled walk, CRC, search and recovery kernels (``segments/_native/batches.pyx``, ``index.pyx``) against
small references written here from the documented format (``kafka-format.md`` §1-§3, §6), on generated batches and
on mutated / arbitrary bytes: both accept with equal results, or both reject with the same error type (and, for
errors located in the ``.log``, the same position)."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import cast

import crc32c as reference_crc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments._native.batches import (
    RecoveryScan,
    find_record_by_timestamp,
    find_timestamp,
    next_offset_from,
    tail_next_offset,
)
from segments.abstract_index import WARM_SECTION_BYTES
from segments.errors import (
    CorruptIndexError,
    CorruptRecordError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    LogSegmentOffsetOverflowError,
    RecordTooLargeError,
    StorageFormatError,
    UnsupportedMagicError,
)
from segments.file_records import FileRecords, iter_batches, walk_batches
from segments.legacy import LegacyRecordBatch
from segments.log_segment import LogSegment
from segments.naming import log_file
from segments.offset_index import OffsetIndex
from segments.records import DefaultRecordBatch, RecordBatch, SimpleRecord, TimestampType, build_batch
from segments.time_index import TimeIndex
from segments.transactions import TransactionTracker
from tests.faults.test_hostile_input import mutate, mutations, valid_legacy_entry, valid_v2_batch

_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
_HEADER = struct.Struct(">qiibIhiqqqhii")
_MAX_RELATIVE = 2**31 - 1

Outcome = tuple[object, tuple[type[BaseException], int | None] | None]


def _error(err: StorageFormatError) -> tuple[type[BaseException], int | None]:
    return type(err), err.position


# --- references from the documented format ------------------------------------------------------------------------


def ref_walk(data: bytes, start: int, limit: int, max_batch_size: int | None = None) -> Outcome:
    """Kafka's file iteration (§2): ``[(position, size)]`` and the error that ended it. Stops unless more than 17
    bytes remain or when a declared size runs past ``limit``; a size below 14, above ``max_batch_size``, or a
    magic-2 batch shorter than its 61-byte header is an error at the batch start."""
    found = []
    position = start
    while limit - position > 17:
        size = struct.unpack_from(">i", data, position + 8)[0]
        if size < 14:
            return found, (CorruptRecordError, position)
        if max_batch_size is not None and size > max_batch_size:
            return found, (RecordTooLargeError, position)
        total = 12 + size
        if position + total > limit:
            break
        if data[position + 16] not in (0, 1) and total < 61:
            return found, (CorruptRecordError, position)
        found.append((position, total))
        position += total
    return found, None


def ref_ensure_valid(batch: bytes) -> tuple[type[BaseException], int] | None:
    """Kafka's ``DefaultRecordBatch.ensureValid`` (§1.1): magic 2, CRC-32C of bytes [21, end), count >= 0."""
    fields = _HEADER.unpack_from(batch, 0)
    if fields[3] != 2:
        return UnsupportedMagicError, 16
    if reference_crc.crc32c(batch[21:]) != fields[4]:
        return CorruptRecordError, 17
    if fields[12] < 0:
        return CorruptRecordError, 57
    return None


def _last_and_timestamp(batch: bytes) -> tuple[int, int]:
    """A batch's last offset and max timestamp from its header: legacy messages carry their (last) offset in the
    prefix and a timestamp only at magic 1 (§1.4)."""
    if batch[16] in (0, 1):
        timestamp = struct.unpack_from(">q", batch, 18)[0] if batch[16] == 1 and len(batch) >= 34 else -1
        return struct.unpack_from(">q", batch, 0)[0], timestamp
    fields = _HEADER.unpack_from(batch, 0)
    return fields[0] + fields[6], fields[8]


def _zigzag_varint(data: bytes, position: int, end: int, max_bytes: int, bits: int) -> tuple[int, int] | None:
    """Protobuf zig-zag varint of at most ``max_bytes`` bytes before ``end`` (Kafka's ByteUtils: bits past the
    type's width are dropped); None when truncated or too long."""
    raw = 0
    for n in range(max_bytes):
        if position + n >= end:
            return None
        byte = data[position + n]
        raw |= (byte & 0x7F) << (7 * n)
        if byte < 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), position + n + 1
    return None


def ref_find_by_timestamp(
    region: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None, target: int,
    starting: int, max_record_bytes: int,
) -> Outcome:
    """Kafka's record loop of ``searchForTimestamp`` (§1.2 record layout): the first record with timestamp >= target
    and offset >= starting, reading length, attributes, timestamp delta and offset delta of each record."""
    position = 0
    for _ in range(max(count, 0)):
        start = position
        length = _zigzag_varint(region, position, len(region), 5, 32)
        if length is None:
            return None, (CorruptRecordError, start)
        body, position = length
        if body > max_record_bytes:
            return None, (RecordTooLargeError, start)
        if body < 0 or body > len(region) - position:
            return None, (CorruptRecordError, start)
        end = position + body
        if body == 0:
            return None, (CorruptRecordError, start)
        timestamp_delta = _zigzag_varint(region, position + 1, end, 10, 64)
        offset_delta = None if timestamp_delta is None else _zigzag_varint(region, timestamp_delta[1], end, 5, 32)
        if timestamp_delta is None or offset_delta is None:
            return None, (CorruptRecordError, start)
        timestamp = log_append_time if log_append_time is not None else base_timestamp + timestamp_delta[0]
        offset = base_offset + offset_delta[0]
        if timestamp >= target and offset >= starting:
            return (timestamp, offset), None
        position = end
    return None, None


# --- generated data -----------------------------------------------------------------------------------------------


def _log_bytes(rng: random.Random, *, legacy: bool) -> bytes:
    """A few batches in offset order (v2, sometimes legacy), leader epochs and producers varying."""
    out = bytearray()
    offset = 0
    for _ in range(rng.randint(1, 6)):
        if legacy and rng.random() < 0.2:
            entry = bytearray(valid_legacy_entry(rng))
            struct.pack_into(">q", entry, 0, offset + rng.randint(0, 3))
            last = struct.unpack_from(">q", entry, 0)[0]
        else:
            producer = rng.choice([-1, -1, rng.randint(0, 5)])
            entry = bytearray(
                build_batch(
                    [SimpleRecord(bytes(rng.randint(0, 400)), None, 1000 + rng.randint(0, 50)) for _ in range(3)],
                    base_offset=offset,
                    producer_id=producer,
                    producer_epoch=-1 if producer < 0 else 0,
                    base_sequence=-1 if producer < 0 else offset,
                    partition_leader_epoch=rng.choice([0, 0, 1, 2]),
                    timestamp_type=rng.choice(list(TimestampType)[1:]),
                    log_append_time=2000 + offset,
                )
            )
            last = offset + 2
        out += entry
        offset = last + 1
    return bytes(out)


@st.composite
def logs(draw: st.DrawFn, *, legacy: bool = True) -> bytes:
    data = _log_bytes(random.Random(draw(st.integers(0, 2**32 - 1))), legacy=legacy)
    return mutate(data, draw(mutations())) if draw(st.booleans()) else data


# --- walk and header ----------------------------------------------------------------------------------------------


def _native_walk(walk: Callable[[], object]) -> Outcome:
    found = []
    try:
        for batch in walk():  # type: ignore[attr-defined]
            found.append((batch.position, batch.size_in_bytes))
    except StorageFormatError as err:
        return found, _error(err)
    return found, None


@_SETTINGS
@given(data=logs(), start=st.integers(0, 64), max_batch_size=st.sampled_from([None, 100, 1 << 20]))
def test_walk_matches_the_file_rule(data: bytes, start: int, max_batch_size: int | None) -> None:
    start = min(start, len(data))
    expected = ref_walk(data, start, len(data), max_batch_size)
    # Windows of every size: a read returns at most what is asked, as pread does.
    assert _native_walk(
        lambda: walk_batches(lambda p, s: data[p : p + s], start, len(data), max_batch_size=max_batch_size)
    ) == expected
    if max_batch_size is None:
        assert _native_walk(lambda: iter_batches(data, start=start)) == expected


@_SETTINGS
@given(data=st.binary(min_size=0, max_size=400))
def test_walk_of_arbitrary_bytes_matches_the_file_rule(data: bytes) -> None:
    assert _native_walk(lambda: iter_batches(data)) == ref_walk(data, 0, len(data))


@_SETTINGS
@given(seed=st.integers(0, 2**32 - 1), ops=mutations(), as_bytearray=st.booleans())
def test_header_fields_and_ensure_valid_match_the_layout(seed: int, ops: list[tuple[str, int, int]], as_bytearray: bool) -> None:
    data = mutate(valid_v2_batch(random.Random(seed)), ops)
    if len(data) < 61:
        with pytest.raises(CorruptRecordError) as raised:
            DefaultRecordBatch(data)
        assert raised.value.position == 0
        return
    fields = _HEADER.unpack_from(data, 0)
    if fields[1] + 12 != len(data):
        with pytest.raises(CorruptRecordError) as raised:
            DefaultRecordBatch(data)
        assert raised.value.position == 8
        return
    batch = DefaultRecordBatch(bytearray(data) if as_bytearray else data)
    assert (
        batch.base_offset, batch.size_in_bytes - 12, batch.partition_leader_epoch, batch.magic, batch.checksum,
        batch.attributes, batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp, batch.producer_id,
        batch.producer_epoch, batch.base_sequence, batch.records_count,
    ) == fields
    assert batch.last_offset == fields[0] + fields[6]
    assert batch.compute_checksum() == reference_crc.crc32c(data[21:])
    expected = ref_ensure_valid(data)
    try:
        batch.ensure_valid()
        outcome = None
    except CorruptRecordError as err:
        outcome = _error(err)
    assert outcome == expected
    assert batch.is_valid() == (expected is None)
    assert bytes(batch.raw_bytes()) == data


def test_crc_of_a_changed_bytearray_is_recomputed() -> None:
    data = bytearray(build_batch([SimpleRecord(b"v" * 100)]))
    batch = DefaultRecordBatch(data)
    batch.ensure_valid()
    data[70] ^= 1
    assert not batch.is_valid()


def test_crc_runs_cover_every_batch_of_a_window(tmp_path: Path) -> None:
    """Batches checked out of order, and windows holding hundreds of batches (several CRC runs), short and long
    ones mixed (a run folds the batches of 256 bytes and more alone and interleaves the others three at a time)."""
    batches = [build_batch([SimpleRecord(bytes([n % 251]) * (n * 37 % 600))], base_offset=n) for n in range(700)]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    with FileRecords(path) as log:
        found = list(log.batches())
        for batch in found[::-1] + found[1::7]:
            batch.batch.ensure_valid()
        assert [b.batch.compute_checksum() for b in found] == [
            reference_crc.crc32c(raw[21:]) for raw in batches
        ]
        assert len(list(log.checked_batches())) == 700


# --- header-only searches -----------------------------------------------------------------------------------------


def ref_locate(data: bytes, start: int, target: int, by_timestamp: bool) -> Outcome:
    found, error = ref_walk(data, start, len(data))
    for position, total in found:
        last, timestamp = _last_and_timestamp(data[position : position + total])
        if (timestamp if by_timestamp else last) >= target:
            return (last, position, total), None
    return None, error


@_SETTINGS
@given(data=logs(), start=st.integers(0, 64), target=st.integers(-5, 30), by_timestamp=st.booleans())
def test_locate_batch_matches_the_walk(tmp_path: Path, data: bytes, start: int, target: int, by_timestamp: bool) -> None:
    path = tmp_path / "locate.log"
    path.write_bytes(data)
    start = min(start, len(data))
    target = target if not by_timestamp else 995 + 3 * target
    with FileRecords(path) as log:
        try:
            outcome: Outcome = log.locate_batch(start, target, by_timestamp=by_timestamp), None
        except CorruptRecordError as err:
            outcome = None, _error(err)
    assert outcome == ref_locate(data, start, target, by_timestamp)


def ref_next_offset(data: bytes, start: int, base_offset: int) -> Outcome:
    found, error = ref_walk(data, start, len(data))
    if error is not None:
        return None, error
    next_offset = base_offset
    for position, total in found:
        next_offset = _last_and_timestamp(data[position : position + total])[0] + 1
    return next_offset, None


@_SETTINGS
@given(data=logs(), start=st.integers(0, 64), entry=st.integers(-3, 70))
def test_next_offset_reads_match_the_walk(tmp_path: Path, data: bytes, start: int, entry: int) -> None:
    """Kafka's readNextOffset hop (what a load reads of the active segment) against the documented walk, from an
    open file and from the files alone (an index whose last entry names the start; anything but a batch start
    inside the .log, a flaw or a link answers None there)."""
    path = tmp_path / "00000000000000000007.log"
    path.write_bytes(data)
    start = min(start, len(data))
    with FileRecords(path) as log:
        try:
            outcome: Outcome = next_offset_from(log._descriptor(), start, len(data), 7, str(path)), None
        except CorruptRecordError as err:
            outcome = None, _error(err)
    expected = ref_next_offset(data, start, 7)
    assert outcome == expected
    index = tmp_path / "00000000000000000007.index"
    index.write_bytes(struct.pack(">ii", 0, 99) + struct.pack(">ii", 1, entry))
    after = max(path.stat().st_mtime_ns, index.stat().st_mtime_ns) + 1
    from_files = tail_next_offset(index, path, 7, 1 << 20, after)
    assert from_files is not None and from_files[0] == len(data)
    if not data:
        assert from_files[1] == 7
    elif 0 <= entry < len(data) and expected[1] is None and ref_walk(data, entry, len(data))[1] is None:
        assert from_files[1] == ref_next_offset(data, entry, 7)[0]
    elif not 0 <= entry < len(data):
        assert from_files[1] is None
    link = tmp_path / "link.index"
    if not link.is_symlink():  # the directory serves every example
        link.symlink_to(index)
    assert tail_next_offset(link, path, 7, 1 << 20, after) is None
    # Modified at or after the given time (the checkpoint's): changed since the clean shutdown.
    assert tail_next_offset(index, path, 7, 1 << 20, after - 1) is None
    if data:
        assert tail_next_offset(index, path, 7, len(data) - entry - 1, after) == (len(data), None)


@_SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    ops=st.one_of(st.just([]), mutations()),
    target=st.integers(0, 2**41),
    starting=st.integers(0, 2**40),
    appended=st.booleans(),
)
def test_timestamp_search_matches_the_record_layout(
    seed: int, ops: list[tuple[str, int, int]], target: int, starting: int, appended: bool
) -> None:
    rng = random.Random(seed)
    records = [SimpleRecord(bytes(rng.randint(0, 30)), None, rng.randint(0, 2**41)) for _ in range(rng.randint(1, 8))]
    region = mutate(build_batch(records)[61:], ops)
    count = len(records) if rng.random() < 0.8 else rng.randint(-2, 12)
    append_time = rng.randint(0, 2**41) if appended else None
    args = (region, count, rng.randint(0, 2**40), rng.randint(0, 2**41), append_time, target, starting, 64)
    try:
        outcome: Outcome = find_record_by_timestamp(*args), None
    except CorruptRecordError as err:
        outcome = None, _error(err)
    assert outcome == ref_find_by_timestamp(*args)


@pytest.mark.parametrize("appended", [False, True])
def test_offset_for_timestamp_finds_the_first_record_kafka_finds(tmp_path: Path, appended: bool) -> None:
    """Against a decode of every record: the first record (in offset order) at or after the target."""
    segment = LogSegment.open(tmp_path, 0, create=True, index_interval_bytes=100)
    rng = random.Random(7)
    decoded = []
    for n in range(40):
        raw = build_batch(
            [SimpleRecord(b"x" * 20, None, 1000 + rng.randint(0, 400)) for _ in range(5)],
            base_offset=5 * n,
            timestamp_type=TimestampType.LOG_APPEND_TIME if appended else TimestampType.CREATE_TIME,
            log_append_time=1000 + 10 * n,
        )
        segment.append(raw)
        decoded.extend(DefaultRecordBatch(raw).records())
    for target in range(900, 1500, 7):
        for starting in (0, 33, 150):
            expected = next(
                ((r.timestamp, r.offset) for r in decoded if r.timestamp >= target and r.offset >= starting), None
            )
            found = segment.find_offset_by_timestamp(target, starting)
            assert (None if found is None else (found.timestamp, found.offset)) == expected
    segment.close()


# --- index search -------------------------------------------------------------------------------------------------


def ref_index_search(values: list[int], target: int, largest_lower_bound: bool, warm_entries: int) -> int:
    """Kafka's ``AbstractIndex.indexSlotRangeFor`` over the entries' field values (warm section first)."""
    if not values:
        return -1
    first_warm = max(0, len(values) - 1 - warm_entries)
    if values[first_warm] < target:
        lo, hi = first_warm, len(values) - 1
    elif values[0] > target:
        return -1 if largest_lower_bound else 0
    else:
        lo, hi = 0, first_warm
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if values[mid] > target:
            hi = mid - 1
        elif values[mid] < target:
            lo = mid
        else:
            return mid
    if largest_lower_bound:
        return lo
    return -1 if lo == len(values) - 1 else lo + 1


@_SETTINGS
@given(
    data=st.one_of(st.binary(max_size=200), st.integers(0, 3000).map(lambda n: b"".join(
        struct.pack(">ii", 3 * i, 40 * i) for i in range(n)))),
    targets=st.lists(st.integers(-(2**33), 2**65), max_size=8),
)
def test_offset_index_search_matches_kafka(tmp_path: Path, data: bytes, targets: list[int]) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(data)
    with OffsetIndex(path, 100, writable=False) as index:
        entries = list(index)
        offsets = [e.offset for e in entries]
        positions = [e.position for e in entries]
        warm = WARM_SECTION_BYTES // 8
        for target in [*targets, *offsets[:3], *offsets[-3:]]:
            slot = ref_index_search(offsets, min(max(target, -(2**63)), 2**63 - 1), True, warm)
            assert index.lookup(target) == (entries[slot] if slot >= 0 else (100, 0))
            upper = ref_index_search(positions, target + 10, False, warm)
            assert index.fetch_upper_bound_offset(target, 10) == (entries[upper] if upper >= 0 else None)


@_SETTINGS
@given(data=st.binary(max_size=300), targets=st.lists(st.integers(-(2**64), 2**64), max_size=8))
def test_time_index_search_matches_kafka(tmp_path: Path, data: bytes, targets: list[int]) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(data)
    with TimeIndex(path, 100, writable=False) as index:
        entries = list(index)
        for target in [*targets, *(e.timestamp for e in entries[:3])]:
            slot = ref_index_search(
                [e.timestamp for e in entries], min(max(target, -(2**63)), 2**63 - 1), True, WARM_SECTION_BYTES // 12
            )
            assert index.lookup(target) == (entries[slot] if slot >= 0 else (-1, 100))


# --- a fetch's lookup: index search + header hop in one call ---------------------------------------------------------


def _clamp64(value: int) -> int:
    return min(max(value, -(2**63)), 2**63 - 1)


def ref_indexed_position(entries: list[tuple[int, int]], base: int, target: int) -> tuple[int, int | None]:
    """The offset index's position for ``target`` (largest entry at or below it, else 0), or the offset of an
    entry whose position is negative (the CorruptIndexError case) as ``(-1, offset)``."""
    slot = ref_index_search([base + rel for rel, _ in entries], _clamp64(target), True, WARM_SECTION_BYTES // 8)
    if slot < 0:
        return 0, None
    rel, position = entries[slot]
    return (position, None) if position >= 0 else (-1, base + rel)


_index_entries = st.lists(st.tuples(st.integers(-5, 40), st.integers(-3, 400)), max_size=12).map(
    lambda entries: sorted(entries)
)


@_SETTINGS
@given(
    data=logs(),
    entries=_index_entries,
    target=st.integers(-5, 40),
    max_size=st.integers(0, 300),
    max_position=st.one_of(st.none(), st.integers(0, 600)),
    min_one_message=st.booleans(),
)
def test_segment_read_matches_the_index_and_walk(
    tmp_path: Path,
    data: bytes,
    entries: list[tuple[int, int]],
    target: int,
    max_size: int,
    max_position: int | None,
    min_one_message: bool,
) -> None:
    """``LogSegment.read`` (one compiled call) against the documented steps: Kafka's index search, the header hop
    from the entry's position, then the fetch bounds; hostile index entries (offsets out of order, negative
    positions) included."""
    base = 3
    directory = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
    directory.mkdir()
    log_file(directory, base).write_bytes(data)
    (directory / f"{base:020d}.index").write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in entries))
    segment = LogSegment.open(directory, base, writable=False)
    try:
        try:
            found = segment.read(target, max_size, max_position=max_position, min_one_message=min_one_message)
            outcome: Outcome = (
                None if found is None else (found.offset, found.position, found.size, found.first_entry_incomplete)
            ), None
        except (CorruptRecordError, CorruptIndexError) as err:
            outcome = None, _error(err)
    finally:
        segment.close()
    start, bad_entry = ref_indexed_position(entries, base, target)
    if bad_entry is not None:
        expected: Outcome = None, (CorruptIndexError, None)
    else:
        located, error = ref_locate(data, start, target, False)
        if located is None:
            expected = None, error
        else:
            last, position, total = located  # type: ignore[misc]
            adjusted = max(max_size, total) if min_one_message else max_size
            limit = len(data) if max_position is None else max_position
            expected = (last, position, max(0, min(limit - position, adjusted)), adjusted < total), None
    assert outcome == expected


@_SETTINGS
@given(
    data=logs(),
    entries=_index_entries,
    times=st.lists(st.tuples(st.integers(980, 1200), st.integers(-5, 40)), max_size=10).map(sorted),
    timestamp=st.integers(950, 1250),
    starting=st.integers(-5, 40),
)
def test_timestamp_find_matches_the_indexes_walk_and_record_layout(
    tmp_path: Path,
    data: bytes,
    entries: list[tuple[int, int]],
    times: list[tuple[int, int]],
    timestamp: int,
    starting: int,
) -> None:
    """``find_timestamp`` (a timestamp lookup in one call) against the documented steps: the time index's largest
    entry at or below the timestamp, its offset raised to ``starting``, that offset's offset-index position, the
    header hop by max timestamp, then each such batch's records (uncompressed magic 2: the record layout; any
    other batch handed to ``decode``) until one holds the answer."""
    base = 3
    path = tmp_path / "t.log"
    path.write_bytes(data)
    offset_map = b"".join(struct.pack(">ii", r, p) for r, p in entries)
    time_map = b"".join(struct.pack(">qi", t, r) for t, r in times)
    decoded: list[tuple[int, bytes]] = []

    def decode(position: int, batch: bytes, target: int, start: int, named: str | os.PathLike[str] | None) -> None:
        # The lookup's own arguments come along (the plain-function protocol: no closure per lookup).
        assert (target, start, named) == (timestamp, starting, path)
        decoded.append((position, batch))
        return None

    with FileRecords(path) as log:
        try:
            found = find_timestamp(
                log._fd, log.size_in_bytes, path, time_map, len(times), "t.timeindex", offset_map, len(entries),
                "t.index", base, WARM_SECTION_BYTES // 12, WARM_SECTION_BYTES // 8, timestamp, starting, 64, decode,
            )
            outcome: Outcome = None if found is None else (found.timestamp, found.offset), None
        except (CorruptRecordError, CorruptIndexError) as err:
            outcome = None, _error(err)
    slot = ref_index_search([t for t, _ in times], timestamp, True, WARM_SECTION_BYTES // 12)
    offset = base if slot < 0 else base + times[slot][1]
    start, bad_entry = ref_indexed_position(entries, base, max(offset, starting))
    expected_decoded: list[tuple[int, bytes]] = []
    expected: Outcome = None, None
    if bad_entry is not None:
        expected = None, (CorruptIndexError, None)
    else:
        found, walk_error = ref_walk(data, start, len(data))
        expected = None, walk_error
        for position, total in cast(list[tuple[int, int]], found):
            raw = data[position : position + total]
            if _last_and_timestamp(raw)[1] < timestamp:
                continue
            # A legacy batch (whose header is shorter than magic 2's) or a compressed one goes to ``decode``.
            if raw[16] != 2 or struct.unpack_from(">h", raw, 21)[0] & 0x07:
                expected_decoded.append((position, raw))
                continue
            base_offset, attributes, base_timestamp, max_timestamp, count = (
                struct.unpack_from(">q", raw, 0)[0],
                struct.unpack_from(">h", raw, 21)[0],
                *struct.unpack_from(">qq", raw, 27),
                struct.unpack_from(">i", raw, 57)[0],
            )
            append_time = max_timestamp if attributes & 0x08 else None
            hit, error = ref_find_by_timestamp(
                raw[61:], count, base_offset, base_timestamp, append_time, timestamp, starting, 64
            )
            if error is not None:
                expected = None, (error[0], None if error[1] is None else position + 61 + error[1])
                break
            if hit is not None:
                expected = hit, None
                break
    assert outcome == expected
    assert decoded == expected_decoded


# --- recovery -----------------------------------------------------------------------------------------------------


def ref_recover(
    data: bytes, base: int, interval: int, next_base: int | None
) -> tuple[int, int, tuple[type[BaseException], int | None] | None, list[tuple[int, int]], list[tuple[int, int]]]:
    """Kafka's ``LogSegment.recover`` (§6.3) as the documented loop: valid bytes, batches, the error that ended
    it, offset index entries and time index entries (final entry included)."""
    found, walk_error = ref_walk(data, 0, len(data))
    valid = count = last_entry = 0
    max_timestamp, max_offset = -1, -1
    next_offset = base
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = [(-1, base)]
    tracker = TransactionTracker()
    error: tuple[type[BaseException], int | None] | None = walk_error

    def result() -> tuple[int, int, tuple[type[BaseException], int | None] | None, list[tuple[int, int]], list[tuple[int, int]]]:
        if max_timestamp > times[-1][0]:
            times.append((max_timestamp, max_offset))
        return valid, count, error, offsets, times[1:]

    for position, total in found:
        raw = data[position : position + total]
        if raw[16] in (0, 1):
            legacy = LegacyRecordBatch(raw)
            try:
                legacy.ensure_valid()
            except CorruptRecordError as err:
                error = type(err), position + (err.position or 0)
                return result()
            first = last = legacy.last_offset
            timestamp = legacy.max_timestamp
        else:
            invalid = ref_ensure_valid(raw)
            if invalid is not None:
                error = invalid[0], position + invalid[1]
                return result()
            last, timestamp = _last_and_timestamp(raw)
            first = struct.unpack_from(">q", raw, 0)[0]
        # Continuity first, the 32-bit range last: an overflow is a batch that continues the segment otherwise.
        if first < next_offset or (next_base is not None and last >= next_base):
            error = InvalidOffsetError, position
            return result()
        if last - base > _MAX_RELATIVE:
            # A CRC-valid legacy batch continuing the segment after batches that fit is a real overflow (split).
            real = raw[16] in (0, 1) and count > 0 and LegacyRecordBatch(raw).base_offset >= next_offset
            error = (LogSegmentOffsetOverflowError if real else IndexOffsetOverflowError), position
            return result()
        next_offset = last + 1
        if timestamp > max_timestamp:
            max_timestamp, max_offset = timestamp, last
        if valid - last_entry > interval:
            if (offsets and last <= offsets[-1][0]) or not 0 <= last - base <= _MAX_RELATIVE:
                error = InvalidOffsetError, None
                return result()
            ordered = len(times) == 1 or (max_offset >= times[-1][1] and max_timestamp >= times[-1][0])
            if not ordered or (max_timestamp > times[-1][0] and not 0 <= max_offset - base <= _MAX_RELATIVE):
                offsets.append((last, valid))
                error = InvalidOffsetError, None
                return result()
            offsets.append((last, valid))
            if max_timestamp > times[-1][0]:
                times.append((max_timestamp, max_offset))
            last_entry = valid
        if raw[16] == 2:
            try:
                tracker.on_batch(DefaultRecordBatch(raw))
            except CorruptRecordError:
                error = CorruptRecordError, position
                return result()
        valid += total
        count += 1
    return result()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(data=logs(), interval=st.sampled_from([0, 100, 4096]), next_base=st.sampled_from([None, 9, 1000]))
def test_recover_matches_kafkas_loop(tmp_path_factory: pytest.TempPathFactory, data: bytes, interval: int, next_base: int | None) -> None:
    directory = tmp_path_factory.mktemp("recover")
    log_file(directory, 0).write_bytes(data)
    segment = LogSegment.open(directory, 0, index_interval_bytes=interval)
    try:
        result = segment.recover(next_segment_base=next_base)
        valid, count, error, offsets, times = ref_recover(data, 0, interval, next_base)
        got_error = None
        if result.error is not None:
            in_log = result.error.path is not None and result.error.path.endswith(".log")
            got_error = type(result.error), result.error.position if in_log else None
        assert (result.valid_bytes, result.batches, got_error) == (valid, count, error)
        assert result.truncated_bytes == len(data) - valid
        assert segment.size == valid
        assert list(segment.offset_index) == offsets
        assert list(segment.time_index) == times
    finally:
        segment.close()


def test_recover_observer_sees_producer_and_epoch_batches_and_the_result_ends_the_rest(tmp_path: Path) -> None:
    epochs = [0, 0, 0, 1, 1, 1, 1]
    producers = [-1, -1, 7, -1, -1, -1, -1]
    data = b"".join(
        build_batch(
            [SimpleRecord(b"v")],
            base_offset=n,
            partition_leader_epoch=epoch,
            producer_id=producer,
            producer_epoch=-1 if producer < 0 else 0,
            base_sequence=-1 if producer < 0 else 0,
        )
        for n, (epoch, producer) in enumerate(zip(epochs, producers, strict=True))
    )
    log_file(tmp_path, 0).write_bytes(data)
    seen_by_epoch: dict[int | None, list[int]] = {}
    for known in (None, 0, 1):
        segment = LogSegment.open(tmp_path, 0)
        seen: list[int] = []
        result = segment.recover(observer=lambda batch, seen=seen: seen.append(batch.base_offset), leader_epoch=known)
        segment.close()
        assert result.batches == 7 and result.error is None
        # 4-6 are not shown: the map end offset they leave is the result's.
        assert result.quiet_next_offset == 7
        seen_by_epoch[known] = seen
    # 0 starts epoch 0; 1 is the batch before the producer's 2; 3 starts epoch 1.
    assert seen_by_epoch[None] == [0, 1, 2, 3]
    # A cache already ending with epoch 0 needs no assign for batch 0: not shown. Epoch 1 differs from the
    # cache's (the observer decides), so batch 0 is shown then.
    assert seen_by_epoch[0] == [1, 2, 3]
    assert seen_by_epoch[1] == [0, 1, 2, 3]


def test_recover_quiet_next_offset_is_none_after_a_shown_last_batch_and_set_before_damage(tmp_path: Path) -> None:
    """The result ends the batches the observer was not shown: none when the last valid batch was shown (a
    producer's), the offset after the last valid one when damage follows them (the error is the result's)."""
    producers = [-1, -1, 7]
    data = b"".join(
        build_batch(
            [SimpleRecord(b"v")],
            base_offset=n,
            partition_leader_epoch=0,
            producer_id=producer,
            producer_epoch=-1 if producer < 0 else 0,
            base_sequence=-1 if producer < 0 else 0,
        )
        for n, producer in enumerate(producers)
    )
    quiet = b"".join(build_batch([SimpleRecord(b"v")], base_offset=n, partition_leader_epoch=0) for n in (3, 4))
    damaged = bytearray(build_batch([SimpleRecord(b"v")], base_offset=5, partition_leader_epoch=0))
    damaged[-1] ^= 0xFF
    for content, shown, quiet_next, batches in (
        (data, [1, 2], None, 3),
        (data + quiet + bytes(damaged), [1, 2], 5, 5),
    ):
        log_file(tmp_path, 0).write_bytes(content)
        segment = LogSegment.open(tmp_path, 0)
        seen: list[int] = []

        def observe(batch: RecordBatch, seen: list[int] = seen) -> None:
            seen.append(batch.base_offset)

        result = segment.recover(observer=observe, leader_epoch=0)
        segment.close()
        assert (seen, result.quiet_next_offset, result.batches) == (shown, quiet_next, batches)
        assert (result.error is None) == (quiet_next is None)


def test_recovery_scan_reads_its_descriptor_and_names_the_file_on_a_failed_read(tmp_path: Path) -> None:
    """Given a descriptor the scan reads the .log itself (one read of the whole file here); a failed read is an
    OSError naming the file, the read's size and position (a recovery then cuts the segment, as Kafka does)."""
    data = b"".join(build_batch([SimpleRecord(b"v" * 100)], base_offset=n) for n in range(3))
    path = log_file(tmp_path, 0)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        scan = RecoveryScan(fd, len(data), 0, None, 64, 100, 100, lambda *_: None, str(path), -1)
        assert list(scan) == [] and scan.batches == 3 and scan.valid_bytes == len(data)
        assert scan.next_offset == 3 == scan.quiet_next_offset
    finally:
        os.close(fd)
    # A write-only descriptor cannot be read: EBADF, named.
    fd = os.open(path, os.O_WRONLY)
    try:
        with pytest.raises(OSError) as raised:
            list(RecoveryScan(fd, len(data), 0, None, 64, 100, 100, lambda *_: None, str(path), -1))
    finally:
        os.close(fd)
    assert raised.value.filename == str(path)
    assert f"read of {len(data)} bytes at position 0" in str(raised.value)


def test_write_indexes_leaves_correct_files_untouched_and_names_a_failing_one(tmp_path: Path) -> None:
    """Both rebuilt index files in one call: bytes already right are not written (same modification time), and a
    file that cannot be written raises an OSError naming it (a link: never followed)."""
    data = b"".join(build_batch([SimpleRecord(b"v" * 100, None, 1000 + n)], base_offset=n) for n in range(5))
    path = log_file(tmp_path, 0)
    path.write_bytes(data)
    index, time_index = tmp_path / "0.index", tmp_path / "0.timeindex"

    def scan() -> RecoveryScan:
        fd = os.open(path, os.O_RDONLY)
        try:
            # One entry (batch 3, at position 510 > 400) before the last batch: the final entry is the last one's.
            found = RecoveryScan(fd, len(data), 0, None, 400, 100, 100, lambda *_: None, str(path), -1)
            list(found)
        finally:
            os.close(fd)
        return found

    first = scan()
    first.write_indexes(index, time_index)
    # Entries by the interval rule, then the final time entry (the max timestamp and its offset) the scan adds.
    assert index.read_bytes() == first.offset_entries == struct.pack(">ii", 3, 510)
    assert time_index.read_bytes() == first.time_entries + struct.pack(">qi", 1004, 4)
    assert first.time_entries == struct.pack(">qi", 1003, 3)
    os.utime(index, ns=(1_000_000_000, 1_000_000_000))
    os.utime(time_index, ns=(1_000_000_000, 1_000_000_000))
    scan().write_indexes(index, time_index)
    assert index.stat().st_mtime_ns == time_index.stat().st_mtime_ns == 1_000_000_000
    time_index.unlink()
    time_index.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError) as raised:
        scan().write_indexes(index, time_index)
    assert raised.value.filename == str(time_index) and not (tmp_path / "elsewhere").exists()
