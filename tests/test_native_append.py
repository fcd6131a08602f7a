"""The native append path (``segments._native.append`` behind ``Log.append_as_leader`` / ``append_as_follower``)
against a reference that follows Kafka's documented checks with the format layer's Python views: the batch walk
(file rule), magic 2 (a follower also takes magic 0/1 entries as they are, decoded whole by the legacy reader),
``max.message.bytes``, ``ensureValid`` (CRC, record count), the record framing (also of compressed batches, after
decompression), then offsets, leader epoch and LogAppendTime stamping.

Generated appends, and mutated or arbitrary bytes (with CRCs fixed up, so the deeper checks are reached): both
sides accept with the same bytes on disk and the same ``LogAppendInfo``, or both refuse with the same error type
and message.
"""

from __future__ import annotations

import inspect
import itertools
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from logmgr.clock import ManualClock
from logmgr.config import LogConfig
from logmgr.errors import InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError
from logmgr.log import Log, LogDirState
from logmgr.log_loader import load_log
from logmgr.log_segments import LogSegments
from logmgr.producer_state import AppendOrigin, ProducerStateManager
from segments._native.append import (
    SCAN_CORRUPT,
    SCAN_INCOMPLETE,
    SCAN_INVALID,
    SCAN_NOT_V2,
    SCAN_OFFSET_OVERFLOW,
    SCAN_OK,
    SCAN_TOO_LARGE,
    LogAppendInfo,
    scan_append,
)
from segments.compression import CompressionType
from segments.errors import CorruptRecordError
from segments.file_records import FileRecords, iter_batches
from segments.lazy_index import LazyIndex
from segments.legacy import LegacyRecordBatch
from segments.log_segment import LogSegment
from segments.records import DecodeLimits, DefaultRecordBatch, RecordBatch, SimpleRecord, build_batch
from tests.test_legacy import LEGACY_CODECS, entry, message, wrapper

T0 = 1_700_000_000_000
MAX_MESSAGE_BYTES = 4_000
_DIRS = itertools.count()


# -- the reference ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refused:
    kind: type[Exception]
    message: str


@dataclass(frozen=True)
class Accepted:
    data: bytes
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    batches: int
    records: int


def reference_append(
    records: bytes, tp: str, *, leader: bool, log_end: int, leader_epoch: int, append_time: int | None,
    max_message_bytes: int = MAX_MESSAGE_BYTES, client: bool = False,
) -> Refused | Accepted:
    """Kafka's validation and stamping of one append, batch by batch, with the format layer's lazy views;
    ``client``: a leader's append of origin CLIENT (Kafka's client-only rules of validateBatch)."""
    batches: list[RecordBatch] = []
    position = 0
    try:
        for found in iter_batches(records):
            batch = found.batch
            if isinstance(batch, LegacyRecordBatch) and not leader:
                if batch.size_in_bytes > max_message_bytes:
                    return Refused(
                        RecordBatchTooLargeError,
                        f"{tp}: batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {max_message_bytes}",
                    )
                list(batch.iter_records(DecodeLimits.for_max_message_bytes(max_message_bytes)))
                if not 0 <= batch.last_offset - batch.base_offset <= (1 << 31) - 1:
                    return Refused(
                        InvalidRecordError,
                        f"{tp}: invalid batch at position {found.position}: Batch has an invalid offset range: "
                        f"[{batch.base_offset}, {batch.last_offset}]",
                    )
                batches.append(batch)
                position = found.end_position
                continue
            if not isinstance(batch, DefaultRecordBatch) or batch.magic != 2:
                return Refused(InvalidRecordError, f"{tp}: only magic 2 batches can be appended")
            if batch.size_in_bytes > max_message_bytes:
                return Refused(
                    RecordBatchTooLargeError,
                    f"{tp}: batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {max_message_bytes}",
                )
            batch.ensure_valid()
            if batch.records_count >= 0:
                refusal = reference_batch_checks(batch, leader=leader, client=client)
                if refusal is not None:
                    return Refused(InvalidRecordError, f"{tp}: invalid batch at position {found.position}: {refusal}")
            batch.validate_record_framing(DecodeLimits.for_max_message_bytes(max_message_bytes))
            batches.append(batch)
            position = found.end_position
    except CorruptRecordError as err:
        return Refused(InvalidRecordError, f"{tp}: invalid batch at position {position}: {err}")
    if not batches or position != len(records):
        return Refused(InvalidRecordError, f"{tp}: an append must hold one or more whole batches")
    if leader:
        # Kafka's validateTimestamp with unbounded windows (the default): a record the producer marked LogAppendTime
        # is refused unless the topic is CreateTime and the record has a timestamp.
        create_time = append_time is None
        for number, batch in enumerate(batches):
            assert isinstance(batch, DefaultRecordBatch)
            if not batch.attributes & 0x08:
                continue
            for index, record in enumerate(batch.records()):
                if not create_time or record.timestamp == -1:
                    return Refused(
                        InvalidTimestampError,
                        f"{tp}: One or more records have been rejected due to invalid timestamp (batch {number} of "
                        f"the append, record {index}: Invalid timestamp type in message with offset {record.offset}. "
                        "Producer should not set timestamp type to LogAppendTime.)",
                    )
    next_offset = log_end
    stamped = []
    for batch in batches:
        if leader:
            assert isinstance(batch, DefaultRecordBatch)
            out = bytearray(batch.raw_bytes())
            struct.pack_into(">q", out, 0, next_offset)
            struct.pack_into(">i", out, 12, leader_epoch)
            if append_time is not None:
                struct.pack_into(">h", out, 21, batch.attributes | 0x08)
                struct.pack_into(">q", out, 35, append_time)
                struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
            batch = DefaultRecordBatch(bytes(out))
        elif batch.base_offset < next_offset:
            return Refused(
                InvalidRecordError,
                f"{tp}: follower append at offset {batch.base_offset} is below the expected offset {next_offset}",
            )
        next_offset = batch.last_offset + 1
        stamped.append(batch)
    first, last = stamped[0], stamped[-1]
    if last.last_offset - first.base_offset > (1 << 31) - 1:
        return Refused(
            InvalidRecordError,
            f"{tp}: offsets {first.base_offset}..{last.last_offset} of one append do not fit one segment "
            "(32-bit relative offsets)",
        )
    top = max(stamped, key=lambda b: b.max_timestamp)
    return Accepted(
        b"".join(b.raw_bytes() for b in stamped),
        first.base_offset,
        last.last_offset,
        top.max_timestamp,
        top.last_offset,
        len(stamped),
        sum(b.records_count if isinstance(b, DefaultRecordBatch) else b.count_records() for b in stamped),
    )


def reference_batch_checks(batch: DefaultRecordBatch, *, leader: bool, client: bool) -> str | None:
    """Kafka's ``LogValidator.validateBatch`` on the header of a batch (a negative record count is refused as
    corrupt before it): the offset range must not be empty; a leader also needs at least one record and exactly
    ``lastOffsetDelta + 1`` of them; a client's append has no control batch and no producer id with a negative
    base sequence."""
    count_from_offsets = batch.last_offset - batch.base_offset + 1
    offsets = f"[{batch.base_offset}, {batch.last_offset}]"
    if count_from_offsets <= 0:
        return f"Batch has an invalid offset range: {offsets}"
    if not leader:
        return None
    if batch.records_count <= 0:
        return f"Invalid reported count for record batch: {batch.records_count}"
    if count_from_offsets != batch.records_count:
        return f"Inconsistent batch offset range {offsets} and count of records {batch.records_count}"
    if not client:
        return None
    if batch.is_control:
        return "Clients are not allowed to write control records"
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        return f"Invalid sequence number {batch.base_sequence} in record batch with producerId {batch.producer_id}"
    return None


def fix_crcs(data: bytes | bytearray) -> bytes:
    """``data`` with the CRC of every batch the walk can frame recomputed (magic 2's CRC-32C, a legacy entry's
    CRC-32), so mutations reach the checks after the CRC. O(size)."""
    out = bytearray(data)
    position = 0
    while len(out) - position > 17:
        (size,) = struct.unpack_from(">i", out, position + 8)
        if size < 14 or position + 12 + size > len(out):
            break
        if out[position + 16] == 2 and size + 12 >= 61:
            struct.pack_into(">I", out, position + 17, crc32c(bytes(out[position + 21 : position + 12 + size])))
        elif out[position + 16] in (0, 1):
            struct.pack_into(">I", out, position + 12, zlib.crc32(bytes(out[position + 16 : position + 12 + size])))
        position += 12 + size
    return bytes(out)


# -- strategies ---------------------------------------------------------------------------------------------------

_records = st.lists(
    st.builds(
        SimpleRecord,
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=20)),
        st.integers(T0 - 10_000, T0 + 10_000),
    ),
    min_size=1,
    max_size=12,
)
_codecs = st.sampled_from([CompressionType.NONE, CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])


@st.composite
def appends(draw: st.DrawFn) -> bytes:
    """One to three batches, their base offsets increasing (a follower may take them as they are); the first may
    be a control batch or a producer's with base sequence 0 or -1 (only a client's append refuses those two)."""
    out = []
    base = draw(st.integers(0, 50))
    for number in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["plain", "plain", "control", "producer"])) if number == 0 else "plain"
        built = bytearray(build_batch(
            draw(_records), compression=CompressionType.NONE if kind == "control" else draw(_codecs),
            is_control=kind == "control",
            **({"producer_id": 7, "producer_epoch": 0, "base_sequence": draw(st.sampled_from([-1, 0]))}
               if kind == "producer" else {}),
        ))
        struct.pack_into(">q", built, 0, base)
        base += struct.unpack_from(">i", built, 23)[0] + 1 + draw(st.integers(0, 3))
        out.append(bytes(built))
    return b"".join(out)


@st.composite
def legacy_appends(draw: st.DrawFn) -> bytes:
    """One to three magic 0/1 entries (plain messages or compressed wrappers) with increasing offsets, sometimes
    followed by a magic-2 batch: what a follower copies from a log written before magic 2."""
    out = []
    offset = draw(st.integers(0, 50))
    for _ in range(draw(st.integers(1, 3))):
        magic = draw(st.sampled_from([0, 1]))
        values = draw(st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=4))
        timestamp = draw(st.integers(T0 - 10_000, T0 + 10_000))
        codec = draw(st.sampled_from([None, *LEGACY_CODECS]))
        if codec is None:
            for value in values:
                out.append(entry(offset, message(magic, b"k", value, timestamp=timestamp)))
                offset += 1
        else:
            inner = [
                (i if magic == 1 else offset + i, message(magic, None, value, timestamp=timestamp + i))
                for i, value in enumerate(values)
            ]
            out.append(wrapper(magic, codec, offset + len(values) - 1, inner, timestamp=timestamp + len(values) - 1))
            offset += len(values)
        offset += draw(st.integers(0, 2))
    if draw(st.booleans()):
        built = bytearray(build_batch(draw(_records)))
        struct.pack_into(">q", built, 0, offset)
        out.append(bytes(built))
    return b"".join(out)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.one_of(appends(), legacy_appends())))
    for _ in range(draw(st.integers(1, 4))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        data += draw(st.binary(max_size=40))
    return fix_crcs(data) if draw(st.booleans()) else bytes(data)


@st.composite
def mutated_inside(draw: st.DrawFn) -> bytes:
    """An uncompressed batch whose record region, count, magic or attributes are edited under a valid CRC: the
    framing and header checks after the CRC."""
    data = bytearray(build_batch(draw(_records)))
    region = st.integers(61, len(data) - 1)
    where = draw(st.one_of(region, region, st.integers(57, 60), st.just(16), st.just(22)))
    data[where] = draw(st.one_of(st.integers(0, 255), st.sampled_from([0x7F, 0x80, 0xFF, 0x00, 0x0A])))
    if draw(st.booleans()):
        cut = draw(st.integers(61, len(data)))
        data = data[:cut] + draw(st.binary(max_size=6))
        struct.pack_into(">i", data, 8, len(data) - 12)
    return fix_crcs(data)


_CONTROL_BATCH = build_batch([SimpleRecord(b"v", b"k", T0)], is_control=True)

inputs = st.one_of(appends(), legacy_appends(), mutated(), mutated_inside(), st.binary(max_size=200).map(fix_crcs))


def new_log(root: Path, clock: ManualClock, **props: str) -> Log:
    config = LogConfig.from_properties({"max.message.bytes": str(MAX_MESSAGE_BYTES), **props})
    return load_log(root / f"topic-{next(_DIRS)}", config, clock=clock)


def outcome(log: Log, data: bytes, *, origin: AppendOrigin, leader_epoch: int) -> Refused | Accepted:
    """What ``log`` does with ``data`` appended from ``origin`` (REPLICATION: as a follower). O(size)."""
    before = log.size_in_bytes
    try:
        if origin is AppendOrigin.REPLICATION:
            info = log.append_as_follower(data)
        else:
            info = log.append_as_leader(data, leader_epoch=leader_epoch, origin=origin)
    except (InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError) as err:
        assert log.size_in_bytes == before
        return Refused(type(err), str(err))
    with open(log.active_segment.log.path, "rb") as f:
        f.seek(info.position)
        written = f.read(info.valid_bytes)
    assert log.log_end_offset == info.last_offset + 1
    return Accepted(
        bytes(written), info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
        info.batches, info.records,
    )


# -- differential tests -------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=inputs,
    origin=st.sampled_from(AppendOrigin),
    log_end=st.integers(0, 40),
    leader_epoch=st.integers(-1, 5),
    append_time=st.booleans(),
)
# Bug (of this reference): a leader append of a batch the producer marked LogAppendTime to a LogAppendTime topic is
# refused, as Kafka's validateTimestamp refuses it; the reference accepted it.
@example(
    data=bytes.fromhex(
        "000000000000000000000038ffffffff023a95fdab0008000000000000018bcfe540f00000018bcfe540f0ffffffffffffffffff"
        "ffffffffff000000010c000000010100"
    ),
    origin=AppendOrigin.CLIENT, log_end=0, leader_epoch=0, append_time=True,
)
# A control batch (no producer id): refused from a client only.
@example(data=_CONTROL_BATCH, origin=AppendOrigin.CLIENT, log_end=0, leader_epoch=0, append_time=False)
@example(data=_CONTROL_BATCH, origin=AppendOrigin.COORDINATOR, log_end=0, leader_epoch=0, append_time=False)
def test_appends_match_the_reference(
    tmp_path: Path, data: bytes, origin: AppendOrigin, log_end: int, leader_epoch: int, append_time: bool
) -> None:
    leader = origin is not AppendOrigin.REPLICATION
    clock = ManualClock(T0)
    props = {"message.timestamp.type": "LogAppendTime"} if append_time else {}
    log = new_log(tmp_path, clock, **props)
    try:
        if log_end:
            log.truncate_fully_and_start_at(log_end)
        expected = reference_append(
            data, str(log.topic_partition), leader=leader, log_end=log_end, leader_epoch=leader_epoch,
            append_time=T0 if append_time and leader else None, client=origin is AppendOrigin.CLIENT,
        )
        event(type(expected).__name__ if isinstance(expected, Accepted) else expected.message.split(": ", 2)[-1][:40])
        assert outcome(log, data, origin=origin, leader_epoch=leader_epoch) == expected
        log._check()
    finally:
        log.close()


@settings(max_examples=300, deadline=None)
@given(data=inputs, max_message_bytes=st.sampled_from([61, 500, MAX_MESSAGE_BYTES, 1 << 20]))
def test_scan_classifies_every_input_as_the_reference_does(data: bytes, max_message_bytes: int) -> None:
    """The kernel alone, on any bytes: a verdict, never a crash; compressed batches before a flaw are left to
    the caller, so the comparison frames them as the log does."""
    scan = scan_append(data, max_message_bytes, False, False)
    expected = reference_append(
        data, "t-0", leader=False, log_end=0, leader_epoch=-1, append_time=None, max_message_bytes=max_message_bytes
    )
    limits = DecodeLimits.for_max_message_bytes(max_message_bytes)
    for start, end in scan.spans(compressed=True, legacy=True):
        try:
            if data[start + 16] == 2:
                DefaultRecordBatch(data[start:end]).validate_record_framing(limits)
            else:
                legacy = LegacyRecordBatch(data[start:end])
                list(legacy.iter_records(limits))
                if not 0 <= legacy.last_offset - legacy.base_offset <= (1 << 31) - 1:
                    assert isinstance(expected, Refused) and "invalid offset range" in expected.message
                    return
        except CorruptRecordError as err:
            assert expected == Refused(InvalidRecordError, f"t-0: invalid batch at position {start}: {err}")
            return
    if scan.failure == SCAN_OK:
        assert isinstance(expected, Accepted) or "follower append" in expected.message or "32-bit" in expected.message
        assert scan.batches == len(scan.spans()) and scan.spans()[-1][1] == len(data)
    elif scan.failure == SCAN_CORRUPT:
        assert scan.error is not None
        assert expected == Refused(InvalidRecordError, f"t-0: invalid batch at position {scan.failure_position}: "
                                                       f"{scan.error}")
    elif scan.failure == SCAN_INVALID:
        assert expected == Refused(InvalidRecordError, f"t-0: invalid batch at position {scan.failure_position}: "
                                                       f"{scan.reason}")
    elif scan.failure == SCAN_NOT_V2:
        assert expected == Refused(InvalidRecordError, "t-0: only magic 2 batches can be appended")
    elif scan.failure == SCAN_TOO_LARGE:
        assert isinstance(expected, Refused) and expected.kind is RecordBatchTooLargeError
        assert f"batch of {scan.failure_size} bytes" in expected.message
    else:
        assert scan.failure == SCAN_INCOMPLETE
        assert expected == Refused(InvalidRecordError, "t-0: an append must hold one or more whole batches")


# -- the kernel's own contract ------------------------------------------------------------------------------------


def _two_batches() -> bytes:
    first = build_batch([SimpleRecord(b"a", b"k", T0 + 5), SimpleRecord(b"b", b"k", T0 + 9)], producer_id=7,
                        producer_epoch=0, base_sequence=0)
    second = bytearray(build_batch([SimpleRecord(b"c", b"k", T0 + 9)], compression=CompressionType.GZIP))
    struct.pack_into(">q", second, 0, 2)  # outside the CRC
    return first + bytes(second)


def test_leader_stamping_facts_and_spans() -> None:
    data = _two_batches()
    scan = scan_append(data, 1 << 20, True, True)
    assert scan.failure == SCAN_OK and scan.batches == 2
    first_end = DefaultRecordBatch(data[: struct.unpack_from(">i", data, 8)[0] + 12]).size_in_bytes
    assert scan.spans() == [(0, first_end), (first_end, len(data))]
    assert scan.spans(compressed=True) == [(first_end, len(data))]
    assert scan.producer_spans() == [(0, first_end, 0)]
    scan.assign_offsets(100, 3)
    # The records are not copied: a stamped header, then a view of the batch's records in the input, per batch.
    buffers = scan.buffers()
    assert scan.data is data and [len(b) for b in buffers] == [61, first_end - 61, 61, len(data) - first_end - 61]
    assert [bytes(b) for b in buffers[1::2]] == [data[61:first_end], data[first_end + 61 :]]
    assert scan.producer_spans() == [(0, first_end, 100)]
    with pytest.raises(ValueError, match="assigned already"):
        scan.assign_offsets(100, 3)
    assert (scan.first_offset, scan.last_offset, scan.largest_offset, scan.records) == (100, 102, 102, 3)
    # Both batches end at T0 + 9: the first one holding the max gives its offset, as Kafka's shallow offset.
    assert (scan.max_timestamp, scan.offset_of_max_timestamp) == (T0 + 9, 101)
    assert scan.epoch_starts() == [(3, 100), (3, 102)]
    stamped = b"".join(buffers)
    assert len(stamped) == len(data)
    for found in iter_batches(stamped):
        found.batch.ensure_valid()
        assert found.batch.partition_leader_epoch == 3


def test_log_append_time_recomputes_the_crc() -> None:
    scan = scan_append(_two_batches(), 1 << 20, True, True)
    scan.assign_offsets(0, 0, T0 + 1000)
    for found in iter_batches(b"".join(scan.buffers())):
        found.batch.ensure_valid()
        assert found.batch.max_timestamp == T0 + 1000 and found.batch.attributes & 0x08
    assert (scan.max_timestamp, scan.offset_of_max_timestamp) == (T0 + 1000, 1)


def test_follower_offsets_are_checked_not_changed() -> None:
    data = _two_batches()
    scan = scan_append(data, 1 << 20, False, False)
    assert scan.check_follower(1) == (0, 1)
    scan = scan_append(data, 1 << 20, False, False)
    assert scan.check_follower(0) is None and scan.data is data and scan.buffers() == [data]
    assert (scan.first_offset, scan.last_offset, scan.offset_of_max_timestamp) == (0, 2, 1)
    assert scan.epoch_starts() == []


def test_offsets_past_int64_are_refused() -> None:
    scan = scan_append(_two_batches(), 1 << 20, True, True)
    scan.assign_offsets((1 << 63) - 2, 0)
    assert scan.failure == SCAN_OFFSET_OVERFLOW
    with pytest.raises(ValueError):
        scan.assign_offsets(0, 0)
    built = bytearray(build_batch([SimpleRecord(b"x")]))
    struct.pack_into(">q", built, 0, (1 << 63) - 1)
    struct.pack_into(">i", built, 23, 5)
    scan = scan_append(fix_crcs(built), 1 << 20, False, False)
    assert scan.check_follower(0) is None and scan.failure == SCAN_OFFSET_OVERFLOW


def test_empty_and_tiny_inputs() -> None:
    for data in (b"", b"\x00" * 17, bytearray(5), memoryview(b"\x00" * 30)):
        scan = scan_append(data, 1 << 20, True, True)
        assert scan.failure in (SCAN_INCOMPLETE, SCAN_CORRUPT) and scan.batches == 0
        with pytest.raises(ValueError):
            scan.check_follower(0)


def test_large_append_releases_the_gil_and_matches() -> None:
    """A large append (its walk runs without the GIL): same verdicts, the flaw found in its batch."""
    batches = [build_batch([SimpleRecord(bytes([n]) * 900, None, T0 + n) for _ in range(20)]) for n in range(8)]
    data = b"".join(batches)
    assert len(data) > 65536
    scan = scan_append(data, 1 << 20, True, True)
    assert scan.failure == SCAN_OK and scan.batches == 8
    scan.assign_offsets(0, 0, T0 + 1000)
    assert scan.records == 160 and scan.last_offset == 159
    # LogAppendTime over a large append: each CRC runs over the stamped header and the records in place.
    stamped = [found.batch for found in iter_batches(b"".join(scan.buffers()))]
    assert [b.base_offset for b in stamped] == [20 * n for n in range(8)]
    for batch in stamped:
        batch.ensure_valid()
    broken = bytearray(data)
    broken[len(batches[0]) * 5 + 100] ^= 1
    scan = scan_append(bytes(broken), 1 << 20, True, True)
    assert scan.failure == SCAN_CORRUPT and scan.batches == 5 and "crc" in str(scan.error)


@pytest.mark.parametrize("count", [1, 2, 8, 9, 40])
def test_scan_storage_holds_every_batch_from_one_to_many(count: int) -> None:
    """A scan keeps one batch and its stamped header in the scan object itself and moves to allocated storage from
    the second (grown again past eight): every count keeps each batch's facts, stamps each header, and a flaw after
    them still names its batch."""
    batches = [build_batch([SimpleRecord(bytes([n % 256]) * 30, None, T0 + n)] * 3) for n in range(count)]
    data = b"".join(batches)
    scan = scan_append(data, 1 << 20, True, True)
    assert scan.failure == SCAN_OK and scan.batches == count
    scan.assign_offsets(100, 7)
    stamped = [found.batch for found in iter_batches(b"".join(scan.buffers()))]
    assert [(b.base_offset, b.partition_leader_epoch) for b in stamped] == [(100 + 3 * n, 7) for n in range(count)]
    assert [b.max_timestamp for b in stamped] == [T0 + n for n in range(count)]
    assert scan.last_offset == 100 + 3 * count - 1 and scan.records == 3 * count
    flipped = bytearray(batches[0])
    flipped[-1] ^= 0xFF
    scan = scan_append(data + bytes(flipped), 1 << 20, True, True)
    assert scan.failure == SCAN_CORRUPT and scan.batches == count and scan.failure_position == len(data)


def _with_region(region: bytes, count: int) -> bytes:
    """An uncompressed batch holding ``region`` as its records and ``count`` in its header, CRC valid."""
    data = bytearray(build_batch([SimpleRecord(b"v")]))[:61] + region
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">i", data, 57, count)
    return fix_crcs(data)


@pytest.mark.parametrize(
    ("region", "count", "message"),
    [
        pytest.param(b"\x0e" + bytes(7) + b"\x00", 1, "incorrect declared batch size, 1 bytes remain", id="trailing"),
        pytest.param(b"\x80\x80\x80\x80\x80\x01" + bytes(8), 1, "varint is longer than 5 bytes", id="long-varint"),
        pytest.param(b"\x80\x80\x80\x80", 1, "buffer ends inside a varint", id="cut-varint"),
        pytest.param(b"\xfe\xff\xff\xff\x07" + bytes(8), 1, "record of 1073741823 bytes exceeds the limit",
                     id="too-large"),
        pytest.param(b"\x0a" + bytes(5), 1, "invalid record size 5", id="short-body"),
        pytest.param(b"", 3, "buffer ends inside a varint", id="missing-records"),
    ],
)
def test_every_framing_flaw_gives_the_reference_error(region: bytes, count: int, message: str) -> None:
    data = _with_region(region, count)
    # A follower's scan: the leader's count check would refuse a count of 3 before the framing is read.
    expected = reference_append(data, "t-0", leader=False, log_end=0, leader_epoch=-1, append_time=None)
    assert isinstance(expected, Refused) and message in expected.message
    scan = scan_append(data, MAX_MESSAGE_BYTES, False, False)
    assert scan.failure == SCAN_CORRUPT and scan.error is not None
    assert Refused(InvalidRecordError, f"t-0: invalid batch at position 0: {scan.error}") == expected
    assert type(scan.error) is type(expected_cause(data))


def expected_cause(data: bytes) -> CorruptRecordError:
    try:
        DefaultRecordBatch(data).validate_record_framing(DecodeLimits.for_max_message_bytes(MAX_MESSAGE_BYTES))
    except CorruptRecordError as err:
        return err
    raise AssertionError("framing passed")


def test_log_append_info_is_a_value() -> None:
    """The compiled result of an append compares, hashes and prints by its fields, as the dataclass it replaced;
    ``duplicate`` defaults to False."""
    first = LogAppendInfo(5, 9, 1_000, 9, 0, 120, 300, 1, 5)
    same = LogAppendInfo(5, 9, 1_000, 9, 0, 120, 300, 1, 5, duplicate=False)
    retried = LogAppendInfo(5, 9, 1_000, 9, -1, -1, 0, 0, 0, duplicate=True)
    assert first == same and hash(first) == hash(same) and first != retried
    assert not first.duplicate and retried.duplicate and first != (5, 9)
    assert repr(first) == (
        "LogAppendInfo(first_offset=5, last_offset=9, max_timestamp=1000, offset_of_max_timestamp=9, "
        "segment_base_offset=0, position=120, valid_bytes=300, batches=1, records=5, duplicate=False)"
    )


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (FileRecords, ("_fd", "_size", "_writable", "_path", "_path_name")),
        (
            LogSegment,
            (
                "_log", "_offset_index", "_time_index", "base_offset", "_bytes_since_last_index_entry",
                "_offset_of_max_timestamp", "_suffix", "_closed",
            ),
        ),
        (
            Log,
            (
                "config", "_end", "_lock", "segments", "leader_epochs", "producer_state", "dir_state", "dir",
                "topic_partition", "truncation_observer",
            ),
        ),
        (LazyIndex, ("_index", "_path", "_resize_to")),
        (LogDirState, ("offline", "full", "failure")),
        (LogSegments, ("_segments", "_last", "_floor_snapshot")),
        (ProducerStateManager, ("map_end_offset", "_producers", "_snapshots", "_last_snap_offset")),
    ],
)
def test_append_state_fields_are_slots_shared_with_the_compiled_append(
    tmp_path: Path, cls: type, fields: tuple[str, ...]
) -> None:
    """The state classes' fields are slots (member descriptors: the interpreter specializes their reads, not those
    of the properties Cython makes, nor of an instance dict of a class derived from a compiled one), and what Python
    writes through them is what the compiled append reads: an index interval set to 0 from Python makes the next
    append's offset-index entry."""
    for name in fields:
        assert type(inspect.getattr_static(cls, name)).__name__ == "member_descriptor", name
    log = load_log(tmp_path / "t-0", LogConfig())
    try:
        log.append_records([SimpleRecord(b"v")])
        segment = log.active_segment
        segment.index_interval_bytes = 0
        assert segment.offset_index.entries == 0
        log.append_records([SimpleRecord(b"w")])
        *_, last = segment.batches()
        assert [tuple(entry) for entry in segment.offset_index] == [(1, last.position)]
    finally:
        log.close()


def test_typed_state_fields_are_read_only_and_their_setters_check_the_type(tmp_path: Path) -> None:
    """The fields the compiled append reads without a type test (the log's segment map, epoch cache, producer state
    and dir state; a segment's ``.log`` and index holders; the newest segment; a holder's opened index) refuse a
    Python write, which a member could not check, and their setters refuse an object of another type: an append
    never meets one."""
    log = load_log(tmp_path / "t-0", LogConfig())
    try:
        log.append_records([SimpleRecord(b"v")])
        segment = log.active_segment
        holder = segment._offset_index
        assert holder is not None
        for owner, name in (
            (log, "segments"), (log, "leader_epochs"), (log, "producer_state"), (log, "dir_state"),
            (segment, "_log"), (segment, "_offset_index"), (segment, "_time_index"), (log.segments, "_last"),
            (holder, "_index"),
        ):
            with pytest.raises(AttributeError):
                setattr(owner, name, getattr(owner, name))
        stranger = object()
        for refused in (
            lambda: log._set_parts(log.segments, log.leader_epochs, stranger),
            lambda: log._set_parts(None, log.leader_epochs, log.producer_state),
            lambda: log._set_dir_state(stranger),
            lambda: log._set_dir_state(None),
            lambda: segment._set_log(stranger),
            lambda: segment._set_index_holders(holder, stranger),
            lambda: log.segments._set_last(stranger),
            lambda: holder._set_index(stranger),
        ):
            with pytest.raises(TypeError):
                refused()
        state = LogDirState()
        log._set_dir_state(state)
        assert log.dir_state is state
        assert log.append_records([SimpleRecord(b"w")]).last_offset == 1
    finally:
        log.close()
