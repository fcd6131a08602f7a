"""Magic-2 record batches: build/parse round trips, control records, header rewrites, corruption and fuzzing.

The helpers :func:`patch_batch` and :data:`batch_like_bytes` are shared with ``test_file_records``.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.compression import CompressionType, compress
from segments.errors import (
    CorruptRecordError,
    StorageFormatError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from segments.records import (
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    ControlRecordType,
    DefaultRecordBatch,
    EndTransactionMarker,
    Header,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_end_txn_marker,
    decode_records,
    encode_record,
    increment_sequence,
    read_prefix,
)
from segments.varint import encode_varint

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
CODECS = list(CompressionType)

# Header field name -> (struct format, byte offset) (format doc §1.1).
FIELDS = {
    "base_offset": (">q", 0),
    "length": (">i", 8),
    "partition_leader_epoch": (">i", 12),
    "magic": (">b", 16),
    "crc": (">I", 17),
    "attributes": (">h", 21),
    "last_offset_delta": (">i", 23),
    "base_timestamp": (">q", 27),
    "max_timestamp": (">q", 35),
    "producer_id": (">q", 43),
    "producer_epoch": (">h", 51),
    "base_sequence": (">i", 53),
    "records_count": (">i", 57),
}


def patch_batch(batch: bytes, *, region: bytes | None = None, fix_crc: bool = True, **fields: int) -> bytes:
    """``batch`` with header fields and/or the records region replaced, the length field matched to the new size
    and (unless ``fix_crc`` is false) a correct CRC, so a test corrupts exactly one thing."""
    out = bytearray(batch[:RECORD_BATCH_OVERHEAD])
    out += batch[RECORD_BATCH_OVERHEAD:] if region is None else region
    struct.pack_into(">i", out, 8, len(out) - 12)
    for name, value in fields.items():
        fmt, offset = FIELDS[name]
        struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


# --- strategies -------------------------------------------------------------------------------------------------

timestamps = st.integers(-(1 << 40), 1 << 45)
headers = st.builds(
    Header,
    st.text(max_size=6),
    st.one_of(st.none(), st.binary(max_size=6)),
)
simple_records = st.builds(
    SimpleRecord,
    value=st.one_of(st.none(), st.binary(max_size=24)),
    key=st.one_of(st.none(), st.binary(max_size=8)),
    timestamp=timestamps,
    headers=st.lists(headers, max_size=3).map(tuple),
)


@st.composite
def offset_deltas_for(draw: st.DrawFn, count: int) -> list[int] | None:
    if not draw(st.booleans()):
        return None
    gaps = draw(st.lists(st.integers(1, 1000), min_size=count - 1, max_size=count - 1))
    deltas = [draw(st.integers(0, 5))]
    for gap in gaps:
        deltas.append(deltas[-1] + gap)
    return deltas


SAMPLE_RECORDS = [
    SimpleRecord(b"v0", b"k0", 1_000, (Header("h", b"x"), Header("nul", None))),
    SimpleRecord(None, b"tombstone", 1_005),
    SimpleRecord(b"", None, 999),
    SimpleRecord(b"\xff" * 40, b"", 1_010, (Header("clé-ключ-鍵", b""),)),
]


def _valid_batches() -> list[bytes]:
    batches = [build_batch(SAMPLE_RECORDS, base_offset=100, compression=codec) for codec in CODECS]
    batches.append(
        build_batch(
            SAMPLE_RECORDS,
            base_offset=7,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            log_append_time=5_000,
            producer_id=3,
            producer_epoch=1,
            base_sequence=INT32_MAX - 1,
            is_transactional=True,
            partition_leader_epoch=9,
            delete_horizon_ms=77,
            offset_deltas=[0, 2, 3, 9],
        )
    )
    batches.append(
        build_end_txn_marker(
            offset=20,
            timestamp=1,
            partition_leader_epoch=2,
            producer_id=3,
            producer_epoch=1,
            marker=EndTransactionMarker(ControlRecordType.ABORT, 4),
        )
    )
    return batches


VALID_BATCHES = _valid_batches()


@st.composite
def mutated_batch(draw: st.DrawFn) -> bytes:
    """A valid batch with random byte edits, a cut or an extension; usually with length (and often CRC) fixed
    up afterwards so the parser gets past the framing and CRC checks into the record decoder."""
    data = bytearray(draw(st.sampled_from(VALID_BATCHES)))
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(data) - 1))
        data[pos] ^= draw(st.integers(1, 255))
    edit = draw(st.sampled_from(["none", "cut", "extend", "region"]))
    if edit == "cut":
        del data[draw(st.integers(0, len(data) - 1)) :]
    elif edit == "extend":
        data += draw(st.binary(min_size=1, max_size=16))
    elif edit == "region":
        data[RECORD_BATCH_OVERHEAD:] = draw(st.binary(max_size=64))
    if len(data) >= RECORD_BATCH_OVERHEAD and draw(st.booleans()):
        return patch_batch(bytes(data), fix_crc=draw(st.booleans()))
    return bytes(data)


batch_like_bytes = st.one_of(st.binary(max_size=160), mutated_batch())


# --- round trips ------------------------------------------------------------------------------------------------


def _check_round_trip(
    items: list[SimpleRecord],
    data: bytes,
    *,
    base_offset: int,
    deltas: list[int],
    codec: CompressionType,
    timestamp_type: TimestampType,
    log_append_time: int | None,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
    is_control: bool,
    partition_leader_epoch: int,
    delete_horizon_ms: int | None,
) -> None:
    batch = DefaultRecordBatch(data)
    batch.ensure_valid()
    assert batch.is_valid()
    assert batch.compute_checksum() == batch.checksum == struct.unpack_from(">I", data, 17)[0]
    assert batch.magic == 2
    assert batch.base_offset == base_offset
    assert batch.last_offset_delta == deltas[-1]
    assert batch.last_offset == base_offset + deltas[-1]
    assert batch.next_offset == batch.last_offset + 1
    assert batch.size_in_bytes == len(data)
    assert read_prefix(data) == (base_offset, len(data) - 12, 2)
    assert batch.raw_bytes() == data
    assert batch.compression is codec
    assert batch.timestamp_type is timestamp_type
    assert batch.is_transactional is is_transactional
    assert batch.is_control is is_control
    assert batch.producer_id == producer_id
    assert batch.producer_epoch == producer_epoch
    assert batch.base_sequence == base_sequence
    assert batch.partition_leader_epoch == partition_leader_epoch
    assert batch.records_count == batch.count_records() == len(items)
    if base_sequence == NO_SEQUENCE:
        assert batch.last_sequence == NO_SEQUENCE
    else:
        assert batch.last_sequence == increment_sequence(base_sequence, deltas[-1])
    assert batch.has_delete_horizon is (delete_horizon_ms is not None)
    assert batch.delete_horizon_ms == delete_horizon_ms
    expected_base_ts = items[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    assert batch.base_timestamp == batch.first_timestamp == expected_base_ts
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        assert batch.max_timestamp == log_append_time
    else:
        assert batch.max_timestamp == max(item.timestamp for item in items)
    attributes = int(codec) | (8 if timestamp_type is TimestampType.LOG_APPEND_TIME else 0)
    attributes |= (0x10 if is_transactional else 0) | (0x20 if is_control else 0)
    attributes |= 0x40 if delete_horizon_ms is not None else 0
    assert batch.attributes == attributes
    assert repr(batch).startswith("DefaultRecordBatch(")

    records = batch.records()
    assert len(records) == len(items)
    region = batch.decompressed_records_region()
    if codec is CompressionType.NONE:
        assert region == data[RECORD_BATCH_OVERHEAD:]
    assert sum(record.size_in_bytes for record in records) == len(region)
    for record, item, delta in zip(records, items, deltas, strict=True):
        assert record.offset == base_offset + delta
        assert record.key == item.key
        assert record.value == item.value
        assert record.headers == item.headers
        assert record.stored_timestamp == item.timestamp
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            assert record.timestamp == log_append_time
        else:
            assert record.timestamp == item.timestamp
        if base_sequence == NO_SEQUENCE:
            assert record.sequence == NO_SEQUENCE
        else:
            assert record.sequence == increment_sequence(base_sequence, delta)
        assert record.checksum is None
        assert record.to_simple() == item


@settings(max_examples=120)
@given(
    items=st.lists(simple_records, min_size=1, max_size=6),
    codec=st.sampled_from(CODECS),
    log_append_time=st.one_of(st.none(), timestamps),
    base_offset=st.integers(0, 1 << 62),
    producer=st.one_of(
        st.just((-1, -1, -1)),
        st.tuples(st.integers(0, INT64_MAX), st.integers(0, 32767), st.integers(0, INT32_MAX)),
    ),
    is_transactional=st.booleans(),
    partition_leader_epoch=st.integers(-1, INT32_MAX),
    delete_horizon_ms=st.one_of(st.none(), timestamps),
    data=st.data(),
)
def test_build_parse_round_trip(
    items: list[SimpleRecord],
    codec: CompressionType,
    log_append_time: int | None,
    base_offset: int,
    producer: tuple[int, int, int],
    is_transactional: bool,
    partition_leader_epoch: int,
    delete_horizon_ms: int | None,
    data: st.DataObject,
) -> None:
    deltas = data.draw(offset_deltas_for(len(items)))
    timestamp_type = TimestampType.CREATE_TIME if log_append_time is None else TimestampType.LOG_APPEND_TIME
    producer_id, producer_epoch, base_sequence = producer
    kwargs: dict[str, Any] = {
        "base_offset": base_offset,
        "timestamp_type": timestamp_type,
        "log_append_time": log_append_time,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "base_sequence": base_sequence,
        "is_transactional": is_transactional,
        "is_control": False,
        "partition_leader_epoch": partition_leader_epoch,
        "delete_horizon_ms": delete_horizon_ms,
    }
    built = build_batch(items, compression=codec, offset_deltas=deltas, **kwargs)
    _check_round_trip(
        items, built, deltas=list(range(len(items))) if deltas is None else deltas, codec=codec, **kwargs
    )


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("timestamp_type", [TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])
def test_every_codec_and_timestamp_type(codec: CompressionType, timestamp_type: TimestampType) -> None:
    log_append_time = 9_999 if timestamp_type is TimestampType.LOG_APPEND_TIME else None
    items = SAMPLE_RECORDS * 50  # large enough for every codec to actually compress
    data = build_batch(
        items,
        base_offset=5,
        compression=codec,
        timestamp_type=timestamp_type,
        log_append_time=log_append_time,
    )
    if codec is not CompressionType.NONE:
        assert len(data) < len(
            build_batch(items, base_offset=5, timestamp_type=timestamp_type, log_append_time=log_append_time)
        )
    _check_round_trip(
        items,
        data,
        base_offset=5,
        deltas=list(range(len(items))),
        codec=codec,
        timestamp_type=timestamp_type,
        log_append_time=log_append_time,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        is_transactional=False,
        is_control=False,
        partition_leader_epoch=-1,
        delete_horizon_ms=None,
    )


def test_null_key_null_value_empty_value_and_headers() -> None:
    items = [
        SimpleRecord(None, None, 10),
        SimpleRecord(b"", b"", 11),
        SimpleRecord(b"v", None, 12, (Header("", None), Header("ключ", b"\x00"), Header("🔑", None))),
    ]
    records = DefaultRecordBatch(build_batch(items)).records()
    assert [(r.key, r.value, r.headers) for r in records] == [(i.key, i.value, i.headers) for i in items]


def test_sequence_wraps_past_int32_max() -> None:
    items = [SimpleRecord(b"x", None, 1)] * 4
    batch = DefaultRecordBatch(
        build_batch(items, producer_id=1, producer_epoch=0, base_sequence=INT32_MAX - 1)
    )
    assert [r.sequence for r in batch.records()] == [INT32_MAX - 1, INT32_MAX, 0, 1]
    assert batch.last_sequence == 1


@pytest.mark.parametrize(
    ("sequence", "increment", "expected"),
    [
        (0, 0, 0),
        (0, 5, 5),
        (INT32_MAX, 0, INT32_MAX),
        (INT32_MAX, 1, 0),
        (INT32_MAX - 2, 5, 2),
        (10, INT32_MAX, 9),
    ],
)
def test_increment_sequence(sequence: int, increment: int, expected: int) -> None:
    assert increment_sequence(sequence, increment) == expected


@given(st.integers(0, INT32_MAX), st.integers(0, INT32_MAX))
def test_increment_sequence_is_modular(sequence: int, increment: int) -> None:
    assert increment_sequence(sequence, increment) == (sequence + increment) % (1 << 31)


def test_explicit_offset_deltas_after_compaction() -> None:
    batch = DefaultRecordBatch(build_batch(SAMPLE_RECORDS[:3], base_offset=50, offset_deltas=[1, 4, 30]))
    assert [r.offset for r in batch.records()] == [51, 54, 80]
    assert batch.last_offset == 80
    assert batch.records_count == 3


def test_delete_horizon_keeps_record_timestamps() -> None:
    """Regression (build_batch delete horizon): record deltas were taken from the first record's timestamp while
    the header stored the horizon, so readers saw every timestamp shifted by ``horizon - first``."""
    items = [SimpleRecord(b"a", None, 1_000), SimpleRecord(b"b", None, 1_005)]
    batch = DefaultRecordBatch(build_batch(items, delete_horizon_ms=5_000))
    assert batch.delete_horizon_ms == 5_000 == batch.base_timestamp
    assert [r.timestamp for r in batch.records()] == [1_000, 1_005]
    assert batch.max_timestamp == 1_005


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offset_deltas": [0, 0, 1, 2]}, "strictly increasing"),
        ({"offset_deltas": [0, 1]}, "one per record"),
        ({"compression": CompressionType.GZIP, "is_control": True}, "never compressed"),
        ({"timestamp_type": TimestampType.LOG_APPEND_TIME}, "log_append_time"),
        ({"timestamp_type": TimestampType.NO_TIMESTAMP_TYPE}, "CreateTime or LogAppendTime"),
    ],
)
def test_build_batch_rejects_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_batch(SAMPLE_RECORDS, **kwargs)


def test_build_batch_needs_a_record() -> None:
    with pytest.raises(ValueError):
        build_batch([])


@settings(max_examples=60)
@given(
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, INT64_MAX),
    epoch=st.integers(-(1 << 31), INT32_MAX),
)
def test_header_rewrites_keep_crc_valid(codec: CompressionType, base_offset: int, epoch: int) -> None:
    original = DefaultRecordBatch(build_batch(SAMPLE_RECORDS, base_offset=3, compression=codec))
    moved = DefaultRecordBatch(original.with_base_offset(base_offset))
    stamped = DefaultRecordBatch(moved.with_partition_leader_epoch(epoch))
    for batch in (moved, stamped):
        batch.ensure_valid()
        assert batch.checksum == original.checksum
        assert batch.base_offset == base_offset
        assert [r.offset - base_offset for r in batch.records()] == [r.offset - 3 for r in original.records()]
    assert stamped.partition_leader_epoch == epoch
    assert moved.partition_leader_epoch == -1
    assert stamped.raw_bytes()[16:] == original.raw_bytes()[16:]


def test_timestamp_type_labels() -> None:
    for member in TimestampType:
        assert TimestampType.from_label(member.label) is member
    assert TimestampType.CREATE_TIME.label == "CreateTime"
    assert TimestampType.LOG_APPEND_TIME.label == "LogAppendTime"
    with pytest.raises(ValueError):
        TimestampType.from_label("createtime")


def test_memoryview_and_bytearray_buffers() -> None:
    data = VALID_BATCHES[0]
    for buffer in (memoryview(data), bytearray(data)):
        batch = DefaultRecordBatch(buffer)
        batch.ensure_valid()
        assert batch.raw_bytes() == data
        assert batch.records() == DefaultRecordBatch(data).records()


# --- control records -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_end_txn_marker_batch(control_type: ControlRecordType) -> None:
    marker = EndTransactionMarker(control_type, coordinator_epoch=17)
    data = build_end_txn_marker(
        offset=1234,
        timestamp=1_700_000_000_000,
        partition_leader_epoch=5,
        producer_id=99,
        producer_epoch=3,
        marker=marker,
    )
    assert len(data) == 78
    batch = DefaultRecordBatch(data)
    batch.ensure_valid()
    assert batch.is_control and batch.is_transactional
    assert batch.compression is CompressionType.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (1234, 1234, 1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 3, NO_SEQUENCE)
    assert batch.partition_leader_epoch == 5
    assert batch.max_timestamp == batch.base_timestamp == 1_700_000_000_000
    # §1.3: length 0x20, attributes, ts delta 0, offset delta 0, key (4 bytes), value (6 bytes), no headers.
    assert data[61:66] == b"\x20\x00\x00\x00\x08"
    assert data[70] == 0x0C and data[77] == 0x00
    (record,) = batch.records()
    assert record.offset == 1234
    parsed_type = ControlRecordType.parse(record.key)
    assert parsed_type is control_type
    assert EndTransactionMarker.parse(parsed_type, record.value) == marker


def test_kraft_control_batch_round_trip() -> None:
    key = struct.pack(">hh", 0, int(ControlRecordType.LEADER_CHANGE))
    items = [SimpleRecord(b"\x00\x00payload", key, 42)]
    data = build_batch(items, base_offset=8, is_control=True, partition_leader_epoch=3)
    _check_round_trip(
        items,
        data,
        base_offset=8,
        deltas=[0],
        codec=CompressionType.NONE,
        timestamp_type=TimestampType.CREATE_TIME,
        log_append_time=None,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        is_transactional=False,
        is_control=True,
        partition_leader_epoch=3,
        delete_horizon_ms=None,
    )
    assert (
        ControlRecordType.parse(DefaultRecordBatch(data).records()[0].key) is ControlRecordType.LEADER_CHANGE
    )


def test_end_txn_marker_rejects_other_control_types() -> None:
    with pytest.raises(ValueError):
        build_end_txn_marker(
            offset=0,
            timestamp=0,
            partition_leader_epoch=0,
            producer_id=1,
            producer_epoch=0,
            marker=EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 0),
        )


@pytest.mark.parametrize(
    ("type_id", "expected"),
    [
        (0, ControlRecordType.ABORT),
        (1, ControlRecordType.COMMIT),
        (2, ControlRecordType.LEADER_CHANGE),
        (3, ControlRecordType.SNAPSHOT_HEADER),
        (4, ControlRecordType.SNAPSHOT_FOOTER),
        (5, ControlRecordType.KRAFT_VERSION),
        (6, ControlRecordType.KRAFT_VOTERS),
        (7, ControlRecordType.UNKNOWN),
        (-1, ControlRecordType.UNKNOWN),
        (-2, ControlRecordType.UNKNOWN),
        (32767, ControlRecordType.UNKNOWN),
    ],
)
def test_control_record_type_parse(type_id: int, expected: ControlRecordType) -> None:
    assert ControlRecordType.parse(struct.pack(">hh", 0, type_id)) is expected
    # A higher version is read as version 0, and trailing bytes are ignored.
    assert ControlRecordType.parse(struct.pack(">hh", 3, type_id) + b"extra") is expected


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00"])
def test_control_record_key_too_short(key: bytes | None) -> None:
    with pytest.raises(CorruptRecordError, match="at least 4 bytes"):
        ControlRecordType.parse(key)


def test_control_record_key_negative_version() -> None:
    with pytest.raises(CorruptRecordError, match="negative version"):
        ControlRecordType.parse(struct.pack(">hh", -1, 1))


@pytest.mark.parametrize("value", [None, b"", b"\x00\x00\x00\x00\x00"])
def test_end_txn_marker_value_too_short(value: bytes | None) -> None:
    with pytest.raises(CorruptRecordError, match="at least 6 bytes"):
        EndTransactionMarker.parse(ControlRecordType.COMMIT, value)


def test_end_txn_marker_value_versions() -> None:
    with pytest.raises(CorruptRecordError, match="negative version"):
        EndTransactionMarker.parse(ControlRecordType.ABORT, struct.pack(">hi", -3, 1))
    marker = EndTransactionMarker.parse(ControlRecordType.ABORT, struct.pack(">hi", 1, -7) + b"\x00")
    assert marker == EndTransactionMarker(ControlRecordType.ABORT, -7)
    assert marker.value_bytes() == struct.pack(">hi", 0, -7)
    assert marker.key_bytes() == struct.pack(">hh", 0, 0)


# --- corruption ------------------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(batch=st.sampled_from(VALID_BATCHES), data=st.data())
def test_any_flip_in_crc_range_is_detected(batch: bytes, data: st.DataObject) -> None:
    position = data.draw(st.integers(21, len(batch) - 1))
    corrupted = bytearray(batch)
    corrupted[position] ^= data.draw(st.integers(1, 255))
    view = DefaultRecordBatch(bytes(corrupted))
    assert not view.is_valid()
    with pytest.raises(CorruptRecordError, match="stored crc") as info:
        view.ensure_valid()
    assert info.value.position == 17


@settings(max_examples=100)
@given(batch=st.sampled_from(VALID_BATCHES), data=st.data())
def test_flips_outside_crc_range_keep_crc(batch: bytes, data: st.DataObject) -> None:
    position = data.draw(st.sampled_from([*range(8), *range(12, 16)]))
    corrupted = bytearray(batch)
    corrupted[position] ^= data.draw(st.integers(1, 255))
    view = DefaultRecordBatch(bytes(corrupted))
    view.ensure_valid()
    assert view.compute_checksum() == DefaultRecordBatch(batch).checksum


@pytest.mark.parametrize("magic", [3, 0x7F, -1, 0, 1])
def test_wrong_magic(magic: int) -> None:
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[0], magic=magic))
    assert batch.magic == magic
    with pytest.raises(UnsupportedMagicError) as info:
        batch.ensure_valid()
    assert info.value.position == 16
    assert not batch.is_valid()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id: int) -> None:
    data = patch_batch(VALID_BATCHES[0], attributes=codec_id)
    batch = DefaultRecordBatch(data)
    batch.ensure_valid()  # the CRC was recomputed: only the codec is wrong
    with pytest.raises(UnsupportedCompressionError) as info:
        _ = batch.compression
    assert info.value.position == 21
    with pytest.raises(UnsupportedCompressionError, match=f"id {codec_id}") as info:
        batch.records()
    assert info.value.position == 21


def test_attribute_high_byte_is_ignored() -> None:
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[0], attributes=0x7F00))
    assert batch.compression is CompressionType.NONE
    assert len(batch.records()) == len(SAMPLE_RECORDS)


@pytest.mark.parametrize("count", [-1, -(1 << 31)])
def test_negative_record_count(count: int) -> None:
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[0], records_count=count))
    for call in (batch.ensure_valid, batch.records):
        with pytest.raises(CorruptRecordError, match="invalid record count") as info:
            call()
        assert info.value.position == 57


def _uncompressed_region() -> bytes:
    return VALID_BATCHES[0][RECORD_BATCH_OVERHEAD:]


def _first_record_size() -> int:
    return DefaultRecordBatch(VALID_BATCHES[0]).records()[0].size_in_bytes


@pytest.mark.parametrize(
    ("region", "count", "message", "position"),
    [
        # Length varint longer than 5 bytes.
        (b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 10, 1, "longer than 5 bytes", 61),
        # Length varint cut by the end of the region.
        (b"\x80", 1, "ends inside a varint", 61),
        # Negative body length (-5).
        (b"\x09" + b"\x00" * 10, 1, "invalid record size", 61),
        # Body longer than what remains.
        (b"\x28" + b"\x00" * 10, 1, "invalid record size", 61),
        # Body shorter than its fields (declares 2 bytes but the fields need 6).
        (b"\x04\x00\x00\x00\x01\x01\x00", 1, "number of record headers", 61),
        # Key size past the record end.
        (b"\x0c\x00\x00\x00\x14abcd\x01\x00", 1, "key size", 61),
        # Negative header count.
        (b"\x0c\x00\x00\x00\x01\x01\x01" + b"\x00" * 5, 1, "number of record headers", 61),
        # Absurd count.
        (_uncompressed_region(), INT32_MAX, "cannot fit", 61),
        # Count larger than the records present: the decoder runs off the end.
        (_uncompressed_region(), len(SAMPLE_RECORDS) + 1, "ends inside a varint", len(VALID_BATCHES[0])),
        # Bytes left over after the declared count.
        (_uncompressed_region(), 1, "remain after 1 records", 61 + _first_record_size()),
    ],
)
def test_corrupt_records_region(region: bytes, count: int, message: str, position: int) -> None:
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[0], region=region, records_count=count))
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match=message) as info:
        batch.records()
    assert info.value.position == position


@pytest.mark.parametrize("codec", CODECS[1:])
@pytest.mark.parametrize("count_change", [-1, 1])
def test_compressed_count_mismatch(codec: CompressionType, count_change: int) -> None:
    """Regression (compressed record errors had no position): errors inside the decompressed records now point
    at the compressed region and name the decompressed offset."""
    count = len(SAMPLE_RECORDS) + count_change
    batch = DefaultRecordBatch(
        patch_batch(build_batch(SAMPLE_RECORDS, compression=codec), records_count=count)
    )
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError, match="in decompressed records at offset") as info:
        batch.records()
    assert info.value.position == RECORD_BATCH_OVERHEAD


@pytest.mark.parametrize("codec", CODECS[1:])
def test_compressed_garbage(codec: CompressionType) -> None:
    batch = DefaultRecordBatch(
        patch_batch(build_batch(SAMPLE_RECORDS, compression=codec), region=b"\x00garbage!")
    )
    batch.ensure_valid()
    with pytest.raises(CorruptRecordError) as info:
        batch.records()
    assert info.value.position is not None and info.value.position >= RECORD_BATCH_OVERHEAD


def test_zstd_library_error_gets_a_position() -> None:
    """Regression (zstd errors without a position): when the codec library cannot locate the damage, the error
    points at the start of the compressed region."""
    region = bytearray(compress(CompressionType.ZSTD, bytes(range(256)) * 4))
    region[5] ^= 0xFF  # the frame content size, which only the library checks
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[4], region=bytes(region)))
    assert batch.compression is CompressionType.ZSTD
    with pytest.raises(CorruptRecordError, match="zstd") as info:
        batch.records()
    assert info.value.position == RECORD_BATCH_OVERHEAD


def test_compressed_records_that_do_not_decode() -> None:
    region = compress(CompressionType.GZIP, b"\x80")
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[1], region=region, records_count=1))
    with pytest.raises(CorruptRecordError, match="at offset 0: buffer ends inside a varint"):
        batch.records()


def test_decompression_limit() -> None:
    batch = DefaultRecordBatch(
        build_batch([SimpleRecord(b"\x00" * 10_000)], compression=CompressionType.GZIP)
    )
    with pytest.raises(CorruptRecordError) as info:
        batch.decompressed_records_region(max_size=100)
    assert info.value.position is not None
    assert len(batch.decompressed_records_region(max_size=20_000)) > 10_000


@pytest.mark.parametrize("size", [0, 12, 60])
def test_buffer_below_minimum_overhead(size: int) -> None:
    with pytest.raises(CorruptRecordError, match="minimum allowed overhead") as info:
        DefaultRecordBatch(VALID_BATCHES[0][:size])
    assert info.value.position == 0


@pytest.mark.parametrize("delta", [-1, 1, 1000])
def test_length_field_must_match_buffer(delta: int) -> None:
    data = bytearray(VALID_BATCHES[0])
    struct.pack_into(">i", data, 8, len(data) - 12 + delta)
    with pytest.raises(CorruptRecordError, match="length field") as info:
        DefaultRecordBatch(bytes(data))
    assert info.value.position == 8


# --- decode_records / encode_record ------------------------------------------------------------------------------


@settings(max_examples=100)
@given(st.lists(simple_records, min_size=1, max_size=5), st.integers(0, 1 << 40), st.integers(-1, INT32_MAX))
def test_encode_decode_records(items: list[SimpleRecord], base_offset: int, base_sequence: int) -> None:
    region = b"".join(
        encode_record(i * 2, item.timestamp, item.key, item.value, item.headers)
        for i, item in enumerate(items)
    )
    records = decode_records(
        region,
        len(items),
        base_offset=base_offset,
        base_timestamp=0,
        base_sequence=base_sequence,
        log_append_time=None,
    )
    assert [r.offset for r in records] == [base_offset + 2 * i for i in range(len(items))]
    assert [r.to_simple() for r in records] == items


def test_encode_record_length_prefix() -> None:
    encoded = encode_record(0, 0, b"k", b"value", [Header("h", None)])
    body_length = len(encoded) - 1
    assert encoded[:1] == encode_varint(body_length)


def test_decode_records_zero_count_on_empty_region() -> None:
    assert (
        decode_records(b"", 0, base_offset=0, base_timestamp=0, base_sequence=-1, log_append_time=None) == []
    )


# --- fuzzing ---------------------------------------------------------------------------------------------------


def _exercise(batch: DefaultRecordBatch) -> None:
    """Every reading entry point of a batch view; only typed format errors may escape, and each has a position."""
    calls: list[Callable[[], object]] = [
        batch.ensure_valid,
        batch.is_valid,
        batch.records,
        batch.count_records,
        lambda: batch.compression,
        lambda: batch.last_sequence,
        lambda: repr(batch),
        batch.decompressed_records_region,
    ]
    for call in calls:
        try:
            call()
        except StorageFormatError as err:
            assert err.position is not None, err


@settings(max_examples=600)
@given(batch_like_bytes)
def test_fuzz_default_record_batch(data: bytes) -> None:
    try:
        batch = DefaultRecordBatch(data)
    except StorageFormatError as err:
        assert err.position is not None
        return
    _exercise(batch)


@settings(max_examples=300)
@given(st.binary(max_size=80), st.integers(-2, 40))
def test_fuzz_decode_records(region: bytes, count: int) -> None:
    try:
        records = decode_records(
            region, count, base_offset=0, base_timestamp=0, base_sequence=0, log_append_time=None
        )
    except CorruptRecordError as err:
        assert err.position is not None and 0 <= err.position <= len(region)
    else:
        assert len(records) == max(count, 0)
        assert sum(r.size_in_bytes for r in records) == len(region)


def test_non_utf8_header_key_is_read_leniently_and_round_trips() -> None:
    """Regression (non-UTF-8 header keys were reported as corrupt): Kafka decodes header keys leniently, so a
    healthy log written by a client that puts raw bytes in a key must read; the exact bytes survive re-encoding."""
    key = b"\xff\xferaw"
    region = encode_varint(8 + len(key)) + b"\x00\x00\x00\x01\x01\x02" + encode_varint(len(key)) + key + b"\x01"
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[0], region=region, records_count=1))
    (record,) = batch.records()
    assert record.headers[0].value is None
    rebuilt = build_batch([record.to_simple()])
    assert DefaultRecordBatch(rebuilt).records()[0].headers == record.headers
    assert region in rebuilt


@pytest.mark.parametrize("codec", CODECS)
def test_record_framing_accepts_valid_batches_and_rejects_count_mismatches(codec: CompressionType) -> None:
    batch = DefaultRecordBatch(build_batch(SAMPLE_RECORDS, compression=codec))
    batch.validate_record_framing()
    for change in (-1, 1):
        wrong = DefaultRecordBatch(patch_batch(build_batch(SAMPLE_RECORDS, compression=codec), records_count=len(SAMPLE_RECORDS) + change))
        with pytest.raises(CorruptRecordError) as info:
            wrong.validate_record_framing()
        assert info.value.position is not None and info.value.position >= RECORD_BATCH_OVERHEAD


@settings(max_examples=200)
@given(st.binary(max_size=80), st.integers(-2, 40))
def test_record_framing_is_implied_by_a_successful_decode(region: bytes, count: int) -> None:
    batch = DefaultRecordBatch(patch_batch(VALID_BATCHES[0], region=region, records_count=count))
    try:
        batch.records()
    except CorruptRecordError:
        with contextlib.suppress(CorruptRecordError):
            batch.validate_record_framing()
    else:
        batch.validate_record_framing()
