"""Magic 0/1 message sets (read-only): plain messages, compressed wrappers, Kafka's offset/timestamp rules,
corruption and fuzzing. Messages are built by hand here (struct + zlib.crc32), independently of the reader."""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.compression import CompressionType, compress
from segments.errors import CorruptRecordError, StorageFormatError, UnsupportedCompressionError
from segments.legacy import LegacyRecordBatch
from segments.records import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TimestampType

LEGACY_CODECS = [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]


def _sized(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def message(
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    timestamp: int = 0,
    attributes: int = 0,
    crc: int | None = None,
) -> bytes:
    """One legacy message without its 12-byte log prefix: crc | magic | attributes | [timestamp] | key | value."""
    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += _sized(key) + _sized(value)
    return struct.pack(">I", zlib.crc32(body) if crc is None else crc) + body


def entry(offset: int, msg: bytes) -> bytes:
    """A log entry: offset | size | message."""
    return struct.pack(">qi", offset, len(msg)) + msg


def _compress(codec: CompressionType, data: bytes) -> bytes:
    # gzip through the standard library, so the wrapper is independent of our own gzip writer.
    return gzip.compress(data) if codec is CompressionType.GZIP else compress(codec, data)


def wrapper(
    magic: int,
    codec: CompressionType,
    wrapper_offset: int,
    inner: Sequence[tuple[int, bytes]],
    *,
    timestamp: int = 0,
    log_append_time: bool = False,
) -> bytes:
    """A compressed wrapper entry holding ``inner`` ``(offset, message)`` pairs."""
    inner_set = b"".join(entry(offset, msg) for offset, msg in inner)
    attributes = int(codec) | (0x08 if log_append_time else 0)
    return entry(
        wrapper_offset,
        message(magic, None, _compress(codec, inner_set), timestamp=timestamp, attributes=attributes),
    )


# --- plain messages ---------------------------------------------------------------------------------------------


@settings(max_examples=100)
@given(
    magic=st.sampled_from([0, 1]),
    offset=st.integers(0, (1 << 63) - 1),
    key=st.one_of(st.none(), st.binary(max_size=16)),
    value=st.one_of(st.none(), st.binary(max_size=32)),
    timestamp=st.integers(-1, 1 << 45),
    log_append_time=st.booleans(),
)
def test_plain_message_round_trip(
    magic: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int, log_append_time: bool
) -> None:
    msg = message(magic, key, value, timestamp=timestamp, attributes=0x08 if log_append_time else 0)
    data = entry(offset, msg)
    batch = LegacyRecordBatch(data)
    batch.ensure_valid()
    assert batch.is_valid()
    assert batch.magic == magic
    assert batch.base_offset == batch.last_offset == offset
    assert batch.next_offset == offset + 1
    assert batch.size_in_bytes == len(data)
    assert batch.raw_bytes() == data
    assert batch.checksum == batch.compute_checksum() == struct.unpack_from(">I", msg)[0]
    assert batch.compression is CompressionType.NONE
    assert batch.count_records() == 1
    assert (batch.producer_id, batch.base_sequence, batch.last_sequence) == (
        NO_PRODUCER_ID,
        NO_SEQUENCE,
        NO_SEQUENCE,
    )
    assert batch.partition_leader_epoch == NO_PARTITION_LEADER_EPOCH
    assert not batch.is_transactional and not batch.is_control
    assert batch.delete_horizon_ms is None
    if magic == 0:
        assert batch.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE
        expected_ts = -1
    else:
        assert batch.timestamp_type is (
            TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME
        )
        expected_ts = timestamp
    assert batch.max_timestamp == expected_ts
    (record,) = batch.records()
    assert (record.offset, record.key, record.value, record.headers) == (offset, key, value, ())
    assert record.timestamp == record.stored_timestamp == expected_ts
    assert record.sequence == NO_SEQUENCE
    assert record.size_in_bytes == len(data)
    assert record.checksum == batch.checksum
    assert repr(batch).startswith("LegacyRecordBatch(magic=")


# --- compressed wrappers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v1_wrapper_relative_offsets(codec: CompressionType) -> None:
    inner = [(i, message(1, f"k{i}".encode(), f"v{i}".encode(), timestamp=1_000 + i)) for i in range(3)]
    data = wrapper(1, codec, 102, inner, timestamp=1_002)
    batch = LegacyRecordBatch(data)
    batch.ensure_valid()
    assert batch.compression is codec
    assert batch.last_offset == 102
    assert batch.base_offset == 100
    assert batch.count_records() == 3
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    records = batch.records()
    assert [r.offset for r in records] == [100, 101, 102]
    assert [r.timestamp for r in records] == [1_000, 1_001, 1_002]
    assert [(r.key, r.value) for r in records] == [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]
    assert [r.size_in_bytes for r in records] == [12 + len(msg) for _, msg in inner]
    assert [r.checksum for r in records] == [struct.unpack_from(">I", msg)[0] for _, msg in inner]
    assert batch.records() == records


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v0_wrapper_absolute_offsets(codec: CompressionType) -> None:
    inner = [(offset, message(0, None, b"x" * offset)) for offset in (50, 51, 53)]
    batch = LegacyRecordBatch(wrapper(0, codec, 53, inner))
    batch.ensure_valid()
    assert batch.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE
    assert [r.offset for r in batch.records()] == [50, 51, 53]
    assert [r.timestamp for r in batch.records()] == [-1, -1, -1]
    assert (batch.base_offset, batch.last_offset) == (50, 53)


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    inner = [(i, message(1, None, b"v", timestamp=10 + i)) for i in range(3)]
    batch = LegacyRecordBatch(
        wrapper(1, CompressionType.GZIP, 2, inner, timestamp=99_999, log_append_time=True)
    )
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 99_999
    records = batch.records()
    assert [r.timestamp for r in records] == [99_999] * 3
    assert [r.stored_timestamp for r in records] == [10, 11, 12]


def test_v1_wrapper_offset_zero_means_absolute_inner_offsets() -> None:
    """Regression (v1 wrapper offset 0): Kafka treats a zero wrapper offset (librdkafka produce data) as
    "inner offsets are already absolute" instead of computing a negative base."""
    inner = [(i, message(1, None, b"v", timestamp=i)) for i in range(3)]
    assert [r.offset for r in LegacyRecordBatch(wrapper(1, CompressionType.GZIP, 0, inner)).records()] == [
        0,
        1,
        2,
    ]


def test_v1_wrapper_offset_below_last_inner_offset() -> None:
    """Regression (v1 wrapper offset below the last inner offset): Kafka rejects it; we produced negative offsets."""
    inner = [(i, message(1, None, b"v", timestamp=i)) for i in range(4)]
    batch = LegacyRecordBatch(wrapper(1, CompressionType.GZIP, 2, inner))
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match="less than the last inner message offset") as info:
        batch.records()
    assert info.value.position == 0


# --- corruption -------------------------------------------------------------------------------------------------


VALID_ENTRIES = [
    entry(7, message(0, b"key", b"value")),
    entry(8, message(1, None, b"value", timestamp=123)),
    wrapper(1, CompressionType.GZIP, 12, [(i, message(1, b"k", b"v" * i, timestamp=i)) for i in range(3)]),
    wrapper(0, CompressionType.SNAPPY, 5, [(i, message(0, None, b"v" * i)) for i in range(4, 6)]),
]


@settings(max_examples=150)
@given(data=st.sampled_from(VALID_ENTRIES), choice=st.data())
def test_crc_mismatch_detected(data: bytes, choice: st.DataObject) -> None:
    position = choice.draw(st.integers(12, len(data) - 1))
    corrupted = bytearray(data)
    corrupted[position] ^= choice.draw(st.integers(1, 255))
    batch = LegacyRecordBatch(bytes(corrupted))
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError) as info:
        batch.ensure_valid()
    assert info.value.position in (12, 16)


@pytest.mark.parametrize("data", VALID_ENTRIES)
def test_offset_is_outside_the_crc(data: bytes) -> None:
    moved = bytearray(data)
    moved[:8] = struct.pack(">q", 1 << 40)
    LegacyRecordBatch(bytes(moved)).ensure_valid()


def _inner_failure(inner_messages: list[tuple[int, bytes]], magic: int = 1) -> CorruptRecordError:
    batch = LegacyRecordBatch(wrapper(magic, CompressionType.GZIP, 10, inner_messages))
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError) as info:
        batch.records()
    assert info.value.position is not None
    return info.value


def test_nested_compression_rejected() -> None:
    nested = message(
        1, None, gzip.compress(entry(0, message(1, None, b"v"))), attributes=int(CompressionType.GZIP)
    )
    assert "nested" in _inner_failure([(0, nested)]).message


@pytest.mark.parametrize(("wrapper_magic", "inner_magic"), [(1, 0), (0, 1)])
def test_inner_magic_mismatch_rejected(wrapper_magic: int, inner_magic: int) -> None:
    err = _inner_failure([(0, message(inner_magic, None, b"v"))], magic=wrapper_magic)
    assert "does not match wrapper magic" in err.message


def test_inner_crc_mismatch_rejected() -> None:
    assert "CRC" in _inner_failure([(0, message(1, None, b"v", crc=0xDEADBEEF))]).message


@pytest.mark.parametrize(
    "inner_set",
    [
        b"\x00" * 5,  # shorter than an inner header
        entry(0, message(1, None, b"v"))[:-1],  # inner message cut short
        struct.pack(">qi", 0, 3) + b"abc",  # size below the minimum
    ],
)
def test_bad_inner_framing(inner_set: bytes) -> None:
    data = entry(0, message(1, None, gzip.compress(inner_set), attributes=int(CompressionType.GZIP)))
    with pytest.raises(CorruptRecordError):
        LegacyRecordBatch(data).records()


def test_empty_wrapper_rejected() -> None:
    data = entry(0, message(1, None, gzip.compress(b""), attributes=int(CompressionType.GZIP)))
    with pytest.raises(CorruptRecordError, match="holds no messages"):
        LegacyRecordBatch(data).records()


def test_null_wrapper_value_rejected() -> None:
    data = entry(0, message(1, None, None, attributes=int(CompressionType.GZIP)))
    with pytest.raises(CorruptRecordError, match="null value"):
        LegacyRecordBatch(data).records()


def test_wrapper_value_that_does_not_decompress() -> None:
    data = entry(0, message(1, None, b"not gzip at all", attributes=int(CompressionType.GZIP)))
    with pytest.raises(CorruptRecordError, match="wrapper value") as info:
        LegacyRecordBatch(data).records()
    assert info.value.position == 12


@pytest.mark.parametrize("codec_id", [4, 5, 6, 7])
@pytest.mark.parametrize("magic", [0, 1])
def test_unsupported_wrapper_codec(codec_id: int, magic: int) -> None:
    batch = LegacyRecordBatch(entry(0, message(magic, None, b"x", attributes=codec_id)))
    batch.ensure_valid()
    with pytest.raises(UnsupportedCompressionError) as info:
        batch.records()
    assert info.value.position == 17
    if codec_id > 4:
        with pytest.raises(UnsupportedCompressionError) as info:
            _ = batch.compression
        assert info.value.position == 17


@pytest.mark.parametrize("size", [0, 12, 25])
def test_too_small(size: int) -> None:
    with pytest.raises(CorruptRecordError, match="smaller than the minimum") as info:
        LegacyRecordBatch(VALID_ENTRIES[0][:size])
    assert info.value.position == 0


def test_size_field_mismatch() -> None:
    data = bytearray(VALID_ENTRIES[0])
    struct.pack_into(">i", data, 8, len(data))
    with pytest.raises(CorruptRecordError, match="size field") as info:
        LegacyRecordBatch(bytes(data))
    assert info.value.position == 8


@pytest.mark.parametrize(
    ("msg", "match"),
    [
        (message(2, None, b"v"), "invalid magic"),
        (message(-1, None, b"v"), "invalid magic"),
        (message(1, None, b"v")[:18], "v1 record overhead"),
        (message(0, None, b"v") + b"\x00", "after its value"),
        (struct.pack(">IbBi", 0, 0, 0, 100) + b"x" * 10, "key length 100 runs past the message end"),
        (struct.pack(">IbB", 0, 0, 0) + _sized(b"kk") + b"\x00\x00", "ends inside its value length"),
    ],
)
def test_malformed_message(msg: bytes, match: str) -> None:
    batch = LegacyRecordBatch(entry(0, msg))
    with pytest.raises(CorruptRecordError, match=match) as info:
        batch.records()
    assert info.value.position is not None


def test_invalid_magic_in_ensure_valid() -> None:
    batch = LegacyRecordBatch(entry(0, message(2, None, b"v")))
    with pytest.raises(CorruptRecordError, match="invalid magic") as info:
        batch.ensure_valid()
    assert info.value.position == 16


# --- fuzzing ---------------------------------------------------------------------------------------------------


def _fix_up(data: bytearray) -> bytes:
    """Size field matched to the buffer and a correct outer CRC, so mutations reach the message decoder."""
    if len(data) >= 17:
        struct.pack_into(">i", data, 8, len(data) - 12)
        struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    return bytes(data)


@st.composite
def mutated_entry(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        # A wrapper around arbitrary or mutated inner bytes, so the inner-set parser is fuzzed too.
        inner = bytearray(b"".join(entry(i, message(1, b"k", b"v", timestamp=i)) for i in range(2)))
        for _ in range(draw(st.integers(0, 3))):
            inner[draw(st.integers(0, len(inner) - 1))] ^= draw(st.integers(1, 255))
        if draw(st.booleans()):
            inner = bytearray(draw(st.binary(max_size=60)))
        codec = draw(st.sampled_from([*LEGACY_CODECS, CompressionType.ZSTD]))
        magic = draw(st.sampled_from([0, 1]))
        return entry(
            draw(st.integers(0, 5)),
            message(magic, None, compress(codec, bytes(inner)), attributes=int(codec)),
        )
    data = bytearray(draw(st.sampled_from(VALID_ENTRIES)))
    for _ in range(draw(st.integers(1, 4))):
        data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    if draw(st.booleans()):
        del data[draw(st.integers(0, len(data))) :]
    if draw(st.booleans()):
        data += draw(st.binary(max_size=8))
    return _fix_up(data) if draw(st.booleans()) else bytes(data)


legacy_like_bytes = st.one_of(st.binary(max_size=100), mutated_entry())


@settings(max_examples=500)
@given(legacy_like_bytes)
def test_fuzz_legacy_record_batch(data: bytes) -> None:
    try:
        batch = LegacyRecordBatch(data)
    except StorageFormatError as err:
        assert err.position is not None
        return
    calls: list[Callable[[], object]] = [
        batch.ensure_valid,
        batch.is_valid,
        batch.records,
        batch.count_records,
        lambda: batch.base_offset,
        lambda: batch.compression,
        lambda: repr(batch),
    ]
    for call in calls:
        try:
            call()
        except StorageFormatError as err:
            assert err.position is not None, err
