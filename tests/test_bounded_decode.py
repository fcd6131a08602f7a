"""Streaming, CRC-checked, bounded record decoding (issue 11, items 1 and 2): ``decompress_chunks``,
``iter_decode_records``, ``iter_record_slices``, ``RecordBatch.iter_records``, ``FileBatch.iter_records`` and
``FetchDataInfo.iter_records``."""

from __future__ import annotations

import contextlib
import itertools
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.log_loader import load_log
from segments.compression import CHUNK_SIZE, CompressionType, compress, decompress, decompress_chunks
from segments.errors import CorruptRecordError, RecordTooLargeError
from segments.file_records import FileRecords, batch_view, iter_batches
from segments.legacy import LegacyRecordBatch
from segments.records import (
    CRC_OFFSET,
    DEFAULT_DECODE_LIMITS,
    DEFAULT_MAX_RECORD_BYTES,
    RECORD_BATCH_OVERHEAD,
    DecodeLimits,
    DefaultRecordBatch,
    Header,
    SimpleRecord,
    build_batch,
    decode_records,
    iter_decode_records,
    iter_record_slices,
)
from tests.faults.hostile_batches import (
    EMPTY_RECORD,
    empty_records_batch,
    huge_value_batch,
    legacy_empty_messages,
    legacy_huge_value,
    legacy_nested,
)

CODECS = tuple(CompressionType)
LEGACY_CODECS = (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4)
SMALL = DecodeLimits(max_record_bytes=64 * 1024, max_batch_bytes=1024 * 1024)

records_strategy = st.lists(
    st.builds(
        SimpleRecord,
        st.none() | st.binary(max_size=300),
        st.none() | st.binary(max_size=40),
        st.integers(0, 10**13),
        st.lists(st.builds(Header, st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3).map(tuple),
    ),
    min_size=1,
    max_size=40,
)


def _flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0x01
    return bytes(out)


# --- decompress_chunks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_decompress_chunks_concatenate_to_decompress_in_bounded_pieces(codec: CompressionType) -> None:
    data = bytes(3 * CHUNK_SIZE + 17) + bytes(range(256)) * 100
    packed = compress(codec, data)
    pieces = list(decompress_chunks(codec, packed))
    assert b"".join(pieces) == decompress(codec, packed) == data
    if codec is not CompressionType.NONE:
        assert max(len(piece) for piece in pieces) <= CHUNK_SIZE


@pytest.mark.parametrize("codec", CODECS[1:])
def test_decompress_chunks_refuse_output_past_the_limit_before_yielding_it(codec: CompressionType) -> None:
    packed = compress(codec, bytes(4 * CHUNK_SIZE))
    handed_out = 0
    with pytest.raises(RecordTooLargeError):
        for piece in decompress_chunks(codec, packed, max_size=CHUNK_SIZE):
            handed_out += len(piece)
    assert handed_out <= CHUNK_SIZE


# --- iter_decode_records / iter_record_slices ------------------------------------------------------------------


@given(records_strategy, st.lists(st.integers(0, 20_000), max_size=8))
def test_streamed_decode_equals_whole_region_decode_at_any_cut(items: list[SimpleRecord], cuts: list[int]) -> None:
    batch = DefaultRecordBatch(build_batch(items, base_offset=5, base_sequence=3, producer_id=1))
    region = bytes(batch.records_region())
    bounds = sorted({min(cut, len(region)) for cut in cuts} | {0, len(region)})
    pieces = [region[a:b] for a, b in itertools.pairwise(bounds)]
    kwargs = {"base_offset": 5, "base_timestamp": batch.base_timestamp, "base_sequence": 3, "log_append_time": None}
    whole = decode_records(region, len(items), **kwargs)  # type: ignore[arg-type]
    assert list(iter_decode_records(pieces, len(items), **kwargs)) == whole  # type: ignore[arg-type]
    slices = list(
        iter_record_slices(pieces, len(items), max_record_bytes=len(region), max_slice_records=3, max_slice_bytes=100)
    )
    assert b"".join(part for part, _ in slices) == region
    assert sum(count for _, count in slices) == len(items)
    assert all(count <= 3 for _, count in slices)


@given(st.binary(max_size=300), st.integers(0, 50), st.lists(st.integers(0, 300), max_size=4))
def test_streamed_decoders_fed_arbitrary_bytes_raise_only_typed_errors(data: bytes, count: int, cuts: list[int]) -> None:
    bounds = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    kwargs = {"base_offset": 0, "base_timestamp": 0, "base_sequence": -1, "log_append_time": None}
    with contextlib.suppress(CorruptRecordError):
        list(iter_decode_records(pieces, count, max_record_bytes=64, **kwargs))  # type: ignore[arg-type]
    with contextlib.suppress(CorruptRecordError):
        list(iter_record_slices(pieces, count, max_record_bytes=64, max_slice_records=2, max_slice_bytes=10))


def test_record_above_the_limit_is_refused_before_its_bytes_are_gathered() -> None:
    region = EMPTY_RECORD + struct.pack("B", 0xFE) + b"\xff\xff\x0f"  # second record claims ~16 MiB

    def pieces() -> Iterator[bytes]:
        yield region
        yield bytes(8)  # enough for any length varint, nothing like the body
        raise AssertionError("the decoder asked for the body of a record above its limit")

    decoded = iter_decode_records(
        pieces(), 2, base_offset=0, base_timestamp=0, base_sequence=-1, log_append_time=None, max_record_bytes=1024
    )
    assert next(decoded).offset == 0
    with pytest.raises(RecordTooLargeError, match="exceeds the limit of 1024") as info:
        next(decoded)
    assert info.value.position == len(EMPTY_RECORD)


# --- RecordBatch.iter_records: CRC first, limits, positions ----------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@given(items=records_strategy)
def test_iter_records_equals_records(codec: CompressionType, items: list[SimpleRecord]) -> None:
    batch = DefaultRecordBatch(build_batch(items, compression=codec))
    assert list(batch.iter_records()) == batch.records()


@pytest.mark.parametrize("codec", CODECS)
def test_iter_records_checks_the_crc_before_producing_a_record(codec: CompressionType) -> None:
    data = build_batch([SimpleRecord(b"v" * 100, b"k")], compression=codec)
    damaged = DefaultRecordBatch(_flip(data, len(data) - 3))
    with pytest.raises(CorruptRecordError, match="crc") as info:
        next(damaged.iter_records())
    assert info.value.position == CRC_OFFSET
    if codec is CompressionType.NONE:
        # The raw view stays readable, on request, for tools that show damaged data (dump).
        assert len(list(damaged.iter_records(check_crc=False))) == 1


@pytest.mark.parametrize("codec", CODECS)
def test_huge_value_batch_of_every_codec_is_refused_as_too_large(codec: CompressionType) -> None:
    batch = batch_view(huge_value_batch(codec, 256 * 1024))
    with pytest.raises(RecordTooLargeError) as info:
        list(batch.iter_records(SMALL))
    assert info.value.position is not None and info.value.position >= RECORD_BATCH_OVERHEAD
    assert len(batch.records()[0].value or b"") == 256 * 1024  # within the default limits


@pytest.mark.parametrize("codec", CODECS)
def test_batch_above_the_batch_limit_is_refused(codec: CompressionType) -> None:
    batch = batch_view(empty_records_batch(codec, 200_000))  # 1.4 MB of records
    with pytest.raises(RecordTooLargeError):
        sum(1 for _ in batch.iter_records(SMALL))
    assert sum(1 for _ in batch.iter_records()) == 200_000


def test_uncompressed_batch_above_the_batch_limit_is_refused_before_decoding() -> None:
    batch = batch_view(empty_records_batch(CompressionType.NONE, 200_000))
    with pytest.raises(RecordTooLargeError, match="batch of") as info:
        next(batch.iter_records(SMALL))
    assert info.value.position == 8


def test_limits_follow_max_message_bytes_but_never_go_below_the_defaults() -> None:
    assert DecodeLimits.for_max_message_bytes(1_048_588) == DecodeLimits()
    raised = DecodeLimits.for_max_message_bytes(512 * 1024 * 1024)
    assert raised.max_record_bytes == raised.max_batch_bytes == 512 * 1024 * 1024


@pytest.mark.parametrize("codec", CODECS)
def test_record_slices_frame_a_batch_within_the_limits(codec: CompressionType) -> None:
    batch = DefaultRecordBatch(empty_records_batch(codec, 10_000))
    slices = list(batch.record_slices(max_slice_records=4096, max_slice_bytes=1 << 20))
    assert [count for _, count in slices] == [4096, 4096, 1808]
    assert b"".join(part for part, _ in slices) == EMPTY_RECORD * 10_000
    with pytest.raises(RecordTooLargeError):
        list(DefaultRecordBatch(huge_value_batch(codec, 128 * 1024)).record_slices(
            SMALL, max_slice_records=10, max_slice_bytes=10
        ))


# --- legacy wrappers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_wrappers_stream_their_records_within_the_limits(codec: CompressionType) -> None:
    many = LegacyRecordBatch(legacy_empty_messages(codec, 50_000))
    assert sum(1 for _ in many.iter_records()) == 50_000
    with pytest.raises(RecordTooLargeError):
        list(many.iter_records(DecodeLimits(max_record_bytes=1024, max_batch_bytes=1024 * 1024)))
    huge = LegacyRecordBatch(legacy_huge_value(codec, 256 * 1024))
    with pytest.raises(RecordTooLargeError, match="inner message"):
        list(huge.iter_records(SMALL))


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_nested_legacy_wrappers_are_refused_without_decompressing_the_inner_one(codec: CompressionType) -> None:
    nested = LegacyRecordBatch(legacy_nested(codec, 30))
    with pytest.raises(CorruptRecordError, match="nested"):
        list(nested.iter_records())


# --- FileBatch and FetchDataInfo: errors name the file and the position -----------------------------------------


def test_file_batch_errors_name_the_file_and_the_file_position(tmp_path: Path) -> None:
    good = build_batch([SimpleRecord(b"a")])
    bad = build_batch([SimpleRecord(b"b" * 50)], base_offset=1)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(good + _flip(bad, len(bad) - 2))
    with FileRecords(path) as log:
        found = list(log.batches())
        assert [r.value for r in found[0].iter_records()] == [b"a"]
        with pytest.raises(CorruptRecordError) as info:
            list(found[1].iter_records())
    assert info.value.path == str(path)
    assert info.value.position == len(good) + CRC_OFFSET


def test_fetch_records_refuse_a_batch_failing_its_crc(tmp_path: Path) -> None:
    """Regression (issue 11): ``Log.read(...)`` consumers decoded a batch whose CRC fails."""
    pdir = tmp_path / "t-0"
    config = LogConfig.from_properties({})
    clock = ManualClock(1_700_000_000_000)
    log = load_log(pdir, config, clock=clock)
    log.append_as_leader(build_batch([SimpleRecord(b"first")]), leader_epoch=0)
    log.append_as_leader(build_batch([SimpleRecord(b"second" * 20)]), leader_epoch=0)
    assert [r.value for r in log.read(0, 1 << 20).iter_records()] == [b"first", b"second" * 20]
    log.close()
    segment = pdir / "00000000000000000000.log"
    data = segment.read_bytes()
    segment.write_bytes(_flip(data, len(data) - 5))
    log = load_log(pdir, config, clock=clock, had_clean_shutdown=True)
    try:
        fetched = log.read(0, 1 << 20)
        # The raw batches are served unchecked, as Kafka's broker serves them.
        assert len(fetched.batches()) == 2
        records = fetched.iter_records()
        assert next(records).value == b"first"
        with pytest.raises(CorruptRecordError, match="crc") as info:
            next(records)
        assert info.value.path == str(segment)
        first_size = len(build_batch([SimpleRecord(b"first")]))
        assert info.value.position == first_size + CRC_OFFSET
    finally:
        log.close()


def test_iter_batches_in_memory_have_no_path() -> None:
    data = build_batch([SimpleRecord(b"x")])
    (found,) = iter_batches(data)
    assert found.path is None and [r.value for r in found.iter_records()] == [b"x"]


def test_bug_fetch_records_refused_a_record_its_topic_accepted(tmp_path: Path) -> None:
    """Regression (issue 11, item 2): ``FetchDataInfo.iter_records`` decoded with the fixed 64 MiB record limit, so
    a topic whose ``max.message.bytes`` is larger appended a record its own reads refused. A fetch now carries the
    log's limits (the larger of ``max.message.bytes`` and the defaults)."""
    size = DEFAULT_MAX_RECORD_BYTES + 1024
    config = LogConfig.from_properties({"max.message.bytes": str(2 * DEFAULT_MAX_RECORD_BYTES)})
    log = load_log(tmp_path / "t-0", config, clock=ManualClock(1_700_000_000_000))
    try:
        log.append_as_leader(huge_value_batch(CompressionType.ZSTD, size), leader_epoch=0)
        fetched = log.read(0, 1 << 20)
        (record,) = fetched.iter_records()
        assert record.value is not None and len(record.value) == size
        with pytest.raises(RecordTooLargeError):
            next(fetched.iter_records(DEFAULT_DECODE_LIMITS))
    finally:
        log.close()
