"""Record batches: the magic-2 format (read and write) and the interface shared with legacy message sets.

Layout and rules: ``kafka-format.md`` §1.1-§1.3 (Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``).

A :class:`DefaultRecordBatch` is a *lazy view*: constructing it unpacks the 61-byte header only. The CRC is
computed on :meth:`~DefaultRecordBatch.is_valid` / :meth:`~DefaultRecordBatch.ensure_valid`, and record bodies
are decompressed and decoded only when :meth:`~DefaultRecordBatch.records` is called, so walking a segment
(header walk + CRC) never touches record bodies.

Readers of data they did not write use :meth:`RecordBatch.iter_records`: it checks the CRC first (a batch that
fails it is never decoded, as a Kafka consumer with ``check.crcs=true`` refuses it), decompresses in pieces and
decodes one record at a time, so memory is O(largest record) and a record or batch above its
:class:`DecodeLimits` is refused with :class:`RecordTooLargeError` before it is held.
"""

from __future__ import annotations

import enum
import itertools
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from segments._native.batches import RecordBatchHeader
from segments._native.crc import crc32c

# The record objects and the record codec are native (segments/_native/records.pyx); re-exported here.
from segments._native.records import Header as Header
from segments._native.records import Record as Record
from segments._native.records import RecordReader, RecordSlicer, encode_batch, frame_region
from segments._native.records import SimpleRecord as SimpleRecord
from segments._native.records import append_record as append_record
from segments._native.records import encode_record as encode_record
from segments.compression import (
    CompressionType,
    compress,
    compression_from_attributes,
    decompress,
    decompress_chunks,
)
from segments.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

Buffer = bytes | bytearray | memoryview

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2
CURRENT_MAGIC = MAGIC_V2

LOG_OVERHEAD = 12
"""Bytes of the ``baseOffset`` + ``length`` prefix shared by every batch/message format."""
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_BATCH_OVERHEAD = 61
MAX_RECORD_OVERHEAD = 21

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MAX = (1 << 31) - 1

# Offsets inside the batch header (§1.1).
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40


DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Default :attr:`DecodeLimits.max_record_bytes`: the largest record (key, value, headers) a reader decodes."""
DEFAULT_MAX_BATCH_BYTES = 256 * 1024 * 1024
"""Default :attr:`DecodeLimits.max_batch_bytes`: the largest batch a reader decodes, after decompression."""


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """What a reader is willing to decode: records above ``max_record_bytes`` (encoded, uncompressed) and
    batches above ``max_batch_bytes`` (uncompressed records region, or the stored batch when uncompressed) raise
    :class:`RecordTooLargeError` before their bytes are gathered."""

    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES

    @classmethod
    def for_max_message_bytes(cls, max_message_bytes: int) -> DecodeLimits:
        """The limits for a topic whose ``max.message.bytes`` is given: never below it, never below the defaults
        (a batch Kafka accepted is always readable). O(1)."""
        return cls(max(max_message_bytes, DEFAULT_MAX_RECORD_BYTES), max(max_message_bytes, DEFAULT_MAX_BATCH_BYTES))


DEFAULT_DECODE_LIMITS = DecodeLimits()


class TimestampType(enum.IntEnum):
    """Kafka's ``TimestampType``; :attr:`label` is the name Kafka prints (``CreateTime`` ...)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return _TIMESTAMP_LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> TimestampType:
        for member, text in _TIMESTAMP_LABELS.items():
            if text == label:
                return member
        raise ValueError(f"unknown timestamp type {label!r}")


_TIMESTAMP_LABELS = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class ControlRecordType(enum.IntEnum):
    """Type field of a control record key (``ControlRecordType``)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def parse(cls, key: bytes | None) -> ControlRecordType:
        """Parse a control record key: ``i16 version | i16 type``. O(1).

        A key shorter than 4 bytes or with a negative version is corrupt; a higher version is read as v0 and an
        unknown type is :attr:`UNKNOWN`, as Kafka does.
        """
        if key is None or len(key) < 4:
            raise CorruptRecordError(f"control record key must hold at least 4 bytes, got {0 if key is None else len(key)}")
        version, type_id = struct.unpack_from(">hh", key, 0)
        if version < 0:
            raise CorruptRecordError(f"control record key has negative version {version}")
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """Value of a COMMIT/ABORT control record: ``i16 version | i32 coordinatorEpoch``."""

    control_type: ControlRecordType
    coordinator_epoch: int

    CURRENT_VERSION = 0

    @classmethod
    def parse(cls, control_type: ControlRecordType, value: bytes | None) -> EndTransactionMarker:
        """Decode a marker value (at least 6 bytes; a negative version is corrupt). O(1)."""
        if value is None or len(value) < 6:
            raise CorruptRecordError("end transaction marker value must hold at least 6 bytes")
        version, coordinator_epoch = struct.unpack_from(">hi", value, 0)
        if version < 0:
            raise CorruptRecordError(f"end transaction marker has negative version {version}")
        return cls(control_type, coordinator_epoch)

    def key_bytes(self) -> bytes:
        """The control record key (version 0, type). O(1)."""
        return struct.pack(">hh", 0, int(self.control_type))

    def value_bytes(self) -> bytes:
        """The control record value (version 0, coordinator epoch). O(1)."""
        return struct.pack(">hi", self.CURRENT_VERSION, self.coordinator_epoch)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence arithmetic: wraps from ``Int.MAX`` to 0. O(1)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


class RecordBatch(ABC):
    """What every batch format exposes (Kafka's ``RecordBatch``): magic 2 batches and legacy messages."""

    __slots__ = ()

    _ATTRIBUTES_POSITION: ClassVar[int] = ATTRIBUTES_OFFSET
    """Where the attributes start in the batch, for the position of an unknown-codec error."""

    @property
    @abstractmethod
    def magic(self) -> int: ...

    @property
    @abstractmethod
    def base_offset(self) -> int: ...

    @property
    @abstractmethod
    def last_offset(self) -> int: ...

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    @abstractmethod
    def size_in_bytes(self) -> int:
        """Whole batch including the 12-byte offset+length prefix."""

    @property
    @abstractmethod
    def checksum(self) -> int:
        """The stored CRC (CRC-32C for magic 2, CRC-32 for legacy messages)."""

    @property
    @abstractmethod
    def attributes(self) -> int: ...

    @property
    @abstractmethod
    def max_timestamp(self) -> int: ...

    @property
    @abstractmethod
    def timestamp_type(self) -> TimestampType: ...

    @property
    def compression(self) -> CompressionType:
        """The codec; :class:`UnsupportedCompressionError` for ids 5-7. O(1)."""
        try:
            return compression_from_attributes(self.attributes)
        except UnsupportedCompressionError as err:
            raise UnsupportedCompressionError(err.message, position=self._ATTRIBUTES_POSITION) from None

    @property
    def is_transactional(self) -> bool:
        return False

    @property
    def is_control(self) -> bool:
        return False

    @property
    def producer_id(self) -> int:
        return NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH

    @property
    def base_sequence(self) -> int:
        return NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return NO_SEQUENCE

    @property
    def partition_leader_epoch(self) -> int:
        return NO_PARTITION_LEADER_EPOCH

    @property
    def delete_horizon_ms(self) -> int | None:
        return None

    @abstractmethod
    def compute_checksum(self) -> int:
        """Recompute the CRC over the covered bytes. O(size)."""

    @abstractmethod
    def ensure_valid(self) -> None:
        """Raise :class:`CorruptRecordError` (position relative to the batch start) unless the batch is valid."""

    def is_valid(self) -> bool:
        """Whether :meth:`ensure_valid` passes. O(size)."""
        try:
            self.ensure_valid()
        except CorruptRecordError:
            return False
        return True

    @abstractmethod
    def records(self) -> list[Record]:
        """Decompress and decode every record, without checking the CRC. O(size) time and memory; raises
        :class:`CorruptRecordError` (and :class:`RecordTooLargeError` past :data:`DEFAULT_DECODE_LIMITS`)."""

    @abstractmethod
    def iter_records(self, limits: DecodeLimits = DEFAULT_DECODE_LIMITS, *, check_crc: bool = True) -> Iterator[Record]:
        """The records one at a time, decompressed in pieces: O(size) time, O(largest record) memory (legacy
        compressed wrappers: O(decompressed wrapper), as in Kafka's reader).

        With ``check_crc`` (the default) the batch's CRC is verified first and a mismatch raises
        :class:`CorruptRecordError` before any record is produced. A record or batch above ``limits`` raises
        :class:`RecordTooLargeError`. Error positions are relative to the batch start.
        """

    @abstractmethod
    def count_records(self) -> int:
        """Number of records (decodes legacy compressed wrappers; header field for magic 2). O(1) or O(size)."""

    @abstractmethod
    def raw_bytes(self) -> bytes:
        """The batch's bytes exactly as stored. O(size)."""


class DefaultRecordBatch(RecordBatchHeader, RecordBatch):
    """A lazy view of one magic-2 batch over ``buffer`` (exactly the batch's bytes, prefix included).

    The header (fields, ``compute_checksum``, ``ensure_valid``) is the compiled
    :class:`~segments._native.batches.RecordBatchHeader`: constructing a view unpacks the 61-byte header only
    (O(1)); nothing is validated until asked.
    """

    __slots__ = ()

    @property
    def timestamp_type(self) -> TimestampType:
        if self._attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    def records_region(self) -> memoryview:
        """The bytes after the header: raw records, or one compressed stream of them. O(1)."""
        return memoryview(self._buffer)[RECORD_BATCH_OVERHEAD:]

    def decompressed_records_region(self, *, max_size: int | None = None) -> bytes:
        """The concatenated encoded records (decompressed if needed). O(size)."""
        codec = self.compression
        region = self.records_region()
        if codec is CompressionType.NONE:
            return bytes(region)
        try:
            if max_size is None:
                return decompress(codec, region, magic=MAGIC_V2)
            return decompress(codec, region, magic=MAGIC_V2, max_size=max_size)
        except CorruptRecordError as err:
            raise _located_in_region(err) from None

    def validate_record_framing(self, limits: DecodeLimits = DEFAULT_DECODE_LIMITS) -> None:
        """Check that the records region (decompressed if needed) holds exactly ``records_count`` length-prefixed
        records and nothing else, without decoding their fields: what an append must prove before the batch is
        written. An uncompressed region is framed in place by one native loop (without the GIL when large).
        O(size) time, O(largest record) memory. Raises :class:`CorruptRecordError`."""
        if self.compression is not CompressionType.NONE:
            for _ in self.record_slices(limits, max_slice_records=_INT32_MAX, max_slice_bytes=_FRAMING_SLICE_BYTES):
                pass
            return
        self._check_region(limits)
        try:
            frame_region(self.records_region(), self._records_count, limits.max_record_bytes)
        except CorruptRecordError as err:
            raise err.at(position_base=RECORD_BATCH_OVERHEAD) from None

    def record_slices(
        self, limits: DecodeLimits = DEFAULT_DECODE_LIMITS, *, max_slice_records: int, max_slice_bytes: int
    ) -> Iterator[tuple[bytes, int]]:
        """The (decompressed) records region cut at record boundaries: ``(bytes, record count)`` slices of at
        most ``max_slice_records`` records, each ending at the first record boundary at or past
        ``max_slice_bytes``. Records are framed by their lengths only (fields are not decoded) and checked
        against ``limits``; the CRC is not checked. O(size) time, O(slice + largest record) memory. Errors are
        located as in :meth:`records`."""
        compressed = self._check_region(limits)
        slices = iter_record_slices(
            self._region_pieces(limits.max_batch_bytes),
            self._records_count,
            max_record_bytes=limits.max_record_bytes,
            max_slice_records=max_slice_records,
            max_slice_bytes=max_slice_bytes,
        )
        try:
            yield from slices
        except _RegionError as failure:
            raise failure.error from None
        except CorruptRecordError as err:
            raise _located_record_error(err, compressed) from None

    def _check_region(self, limits: DecodeLimits) -> bool:
        """Refuse a negative record count and an uncompressed batch above ``limits``; whether the batch is
        compressed. O(1)."""
        if self._records_count < 0:
            raise CorruptRecordError(f"found invalid record count {self._records_count}", position=57)
        compressed = self.compression is not CompressionType.NONE
        if not compressed and self.size_in_bytes > limits.max_batch_bytes:
            raise RecordTooLargeError(
                f"batch of {self.size_in_bytes} bytes exceeds the limit of {limits.max_batch_bytes}", position=8
            )
        return compressed

    def records(self) -> list[Record]:
        """Decode every record (decompressing first), without checking the CRC. O(size) time and memory.

        Raises :class:`CorruptRecordError` for a negative count, a record whose body does not match its declared
        length, bad varints, negative header counts/key sizes, or bytes left over after the declared count.
        Positions in errors are relative to the batch start; for a compressed batch a record error points at the
        compressed region (byte 61) and its message gives the offset inside the decompressed records.
        """
        compressed, records = self._reader(DEFAULT_DECODE_LIMITS)
        try:
            return list(records)
        except _RegionError as failure:
            raise failure.error from None
        except CorruptRecordError as err:
            raise _located_record_error(err, compressed) from None

    def iter_records(self, limits: DecodeLimits = DEFAULT_DECODE_LIMITS, *, check_crc: bool = True) -> Iterator[Record]:
        """See :meth:`RecordBatch.iter_records`; errors are located as in :meth:`records`. O(size) time,
        O(largest record) memory."""
        if check_crc:
            self.ensure_valid()
        compressed, records = self._reader(limits)
        try:
            yield from records
        except _RegionError as failure:
            raise failure.error from None
        except CorruptRecordError as err:
            raise _located_record_error(err, compressed) from None

    def _reader(self, limits: DecodeLimits) -> tuple[bool, Iterator[Record]]:
        """Whether the batch is compressed, and the native decoder of its records (checked against ``limits``).
        O(1)."""
        compressed = self._check_region(limits)
        if not compressed and self._records_count > self.size_in_bytes - RECORD_BATCH_OVERHEAD:
            # Each record takes at least 7 bytes; refuse before looping over an absurd count.
            raise CorruptRecordError(
                f"record count {self._records_count} cannot fit in {self.size_in_bytes - RECORD_BATCH_OVERHEAD} "
                "bytes of records",
                position=RECORD_BATCH_OVERHEAD,
            )
        log_append_time = self._max_timestamp if self._attributes & TIMESTAMP_TYPE_MASK else None
        records = RecordReader(
            self._region_pieces(limits.max_batch_bytes),
            self._records_count,
            self._base_offset,
            self._base_timestamp,
            self._base_sequence,
            log_append_time,
            limits.max_record_bytes,
        )
        return compressed, records

    def _region_pieces(self, max_size: int) -> Iterator[Buffer]:
        """The records region, decompressed in pieces (an uncompressed region is one piece, read in place); a
        codec error comes out as :class:`_RegionError` holding the error located in the batch, so
        :meth:`iter_records` does not take it for a record error."""
        if self.compression is CompressionType.NONE:
            return iter((self.records_region(),))
        return self._decompressed_pieces(max_size)

    def _decompressed_pieces(self, max_size: int) -> Iterator[bytes | bytearray]:
        try:
            yield from decompress_chunks(self.compression, self.records_region(), magic=MAGIC_V2, max_size=max_size)
        except CorruptRecordError as err:
            raise _RegionError(_located_in_region(err)) from None

    def raw_bytes(self) -> bytes:
        return bytes(self._buffer)

    def with_base_offset(self, base_offset: int) -> bytes:
        """Copy of the batch with a new base offset (outside the CRC, so the CRC stays valid). O(size)."""
        out = bytearray(self._buffer)
        struct.pack_into(">q", out, 0, base_offset)
        return bytes(out)

    def with_log_append_time(self, timestamp: int) -> bytes:
        """Copy stamped as a broker does for a LogAppendTime topic: timestamp-type bit set and max timestamp =
        ``timestamp``; both are CRC-covered, so the CRC is recomputed. O(size)."""
        out = bytearray(self._buffer)
        struct.pack_into(">h", out, ATTRIBUTES_OFFSET, self._attributes | TIMESTAMP_TYPE_MASK)
        struct.pack_into(">q", out, MAX_TIMESTAMP_OFFSET, timestamp)
        struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
        return bytes(out)

    def with_partition_leader_epoch(self, epoch: int) -> bytes:
        """Copy of the batch stamped with a leader epoch (outside the CRC). O(size)."""
        out = bytearray(self._buffer)
        struct.pack_into(">i", out, PARTITION_LEADER_EPOCH_OFFSET, epoch)
        return bytes(out)

    def __repr__(self) -> str:
        return (
            f"DefaultRecordBatch(base_offset={self._base_offset}, last_offset={self.last_offset}, "
            f"count={self._records_count}, size={self.size_in_bytes}, compression={self.compression.name})"
        )


class _RegionError(Exception):
    """Carries a decompression error through the record decoder, which would otherwise locate it as a record's."""

    def __init__(self, error: CorruptRecordError) -> None:
        super().__init__(error)
        self.error = error


def _located_record_error(err: CorruptRecordError, compressed: bool) -> CorruptRecordError:
    """A record error of the (decompressed) records region located in the batch: an uncompressed region starts
    at byte 61; in a compressed one the error points at the compressed region and names the offset inside the
    decompressed records."""
    if compressed:
        return type(err)(f"in decompressed records at offset {err.position}: {err.message}", position=RECORD_BATCH_OVERHEAD)
    return err.at(position_base=RECORD_BATCH_OVERHEAD)


def _located_in_region(err: CorruptRecordError) -> CorruptRecordError:
    """A codec error (position inside the compressed region, or None) located in the batch."""
    if err.position is None:
        # The codec library cannot say where its input is damaged: point at the compressed region.
        return type(err)(err.message, position=RECORD_BATCH_OVERHEAD)
    return err.at(position_base=RECORD_BATCH_OVERHEAD)


def decode_records(
    region: bytes,
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    base_sequence: int,
    log_append_time: int | None,
) -> list[Record]:
    """Decode ``count`` magic-2 records from ``region`` (Kafka's ``DefaultRecord.readFrom``). O(len(region)).

    Every byte must be consumed: a short region or leftover bytes raise :class:`CorruptRecordError` with the
    position inside ``region``.
    """
    if count > len(region):
        # Each record takes at least 7 bytes; refuse before looping over an absurd count.
        raise CorruptRecordError(f"record count {count} cannot fit in {len(region)} bytes of records", position=0)
    return list(
        iter_decode_records(
            (region,),
            count,
            base_offset=base_offset,
            base_timestamp=base_timestamp,
            base_sequence=base_sequence,
            log_append_time=log_append_time,
            max_record_bytes=len(region),
        )
    )


# Slices validate_record_framing asks for of a compressed batch: big enough that slicing costs nothing per record,
# small enough that framing a decompressed batch holds little of it.
_FRAMING_SLICE_BYTES = 1 << 20


def iter_decode_records(
    pieces: Iterable[Buffer],
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    base_sequence: int,
    log_append_time: int | None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> Iterator[Record]:
    """Decode ``count`` magic-2 records (Kafka's ``DefaultRecord.readFrom``) from the stream of ``pieces``
    (their concatenation is the records region), one at a time, in the native decoder. O(stream) time,
    O(largest record + largest piece) memory.

    A record whose length passes ``max_record_bytes`` raises :class:`RecordTooLargeError` before its bytes are
    gathered; every other flaw raises :class:`CorruptRecordError`, positions counted from the stream start. The
    stream must end right after the last record.
    """
    return RecordReader(pieces, count, base_offset, base_timestamp, base_sequence, log_append_time, max_record_bytes)


def iter_record_slices(
    pieces: Iterable[Buffer],
    count: int,
    *,
    max_record_bytes: int,
    max_slice_records: int,
    max_slice_bytes: int,
) -> Iterator[tuple[bytes, int]]:
    """Frame ``count`` magic-2 records in the stream of ``pieces`` by their length varints alone and yield them
    as ``(bytes, records)`` slices: a slice ends after ``max_slice_records`` records or at the first record
    boundary at or past ``max_slice_bytes``. O(stream) time, O(slice + largest record + piece) memory.

    A length below the 6-byte minimum body, a body running past the stream or bytes after the last record raise
    :class:`CorruptRecordError`, a length above ``max_record_bytes`` :class:`RecordTooLargeError`; positions
    are counted from the stream start.
    """
    return RecordSlicer(pieces, count, max_record_bytes, max_slice_records, max_slice_bytes)


def build_batch(
    records: Iterable[SimpleRecord],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    delete_horizon_ms: int | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Build a magic-2 batch as Kafka's ``MemoryRecordsBuilder`` does, records, header and CRC written by the
    native encoder in one pass (compression by :func:`segments.compression.compress`). O(size).

    Offsets are ``base_offset + i`` unless ``offset_deltas`` (strictly increasing, as after compaction) is given.
    Under LogAppendTime, ``log_append_time`` becomes the batch max timestamp (what readers report for every
    record) while records keep their own timestamps as deltas.
    """
    items = records if type(records) is list else list(records)
    if not items:
        raise ValueError("a record batch needs at least one record")
    if offset_deltas is not None and (
        len(offset_deltas) != len(items) or any(b <= a for a, b in itertools.pairwise(offset_deltas))
    ):
        raise ValueError("offset_deltas must be strictly increasing, one per record")
    if compression is not CompressionType.NONE and is_control:
        raise ValueError("control batches are never compressed")
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("LogAppendTime batches need log_append_time")
    elif timestamp_type is TimestampType.CREATE_TIME:
        log_append_time = None
    else:
        raise ValueError("magic 2 batches are CreateTime or LogAppendTime")
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    compressor = None
    if compression is not CompressionType.NONE:

        def compressor(region: bytes) -> bytes:
            return compress(compression, region, level=compression_level)

    # Kafka's builder takes record timestamp deltas from the header's baseTimestamp, which is the delete
    # horizon when one is set, so readers recover the records' own timestamps.
    base_timestamp = items[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    return encode_batch(
        items,
        offset_deltas,
        base_offset,
        partition_leader_epoch,
        attributes,
        base_timestamp,
        log_append_time,
        producer_id,
        producer_epoch,
        base_sequence,
        compressor,
    )


def build_end_txn_marker(
    *,
    offset: int,
    timestamp: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    marker: EndTransactionMarker,
) -> bytes:
    """A COMMIT/ABORT control batch (78 bytes), as ``MemoryRecords.withEndTransactionMarker`` builds it. O(1)."""
    if marker.control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise ValueError("end transaction markers are COMMIT or ABORT")
    return build_batch(
        [SimpleRecord(marker.value_bytes(), marker.key_bytes(), timestamp)],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_prefix(buffer: Buffer, position: int = 0) -> tuple[int, int, int]:
    """``(offset, length, magic)`` of the batch or message at ``position`` (needs 17 bytes). O(1)."""
    offset, length = _PREFIX.unpack_from(buffer, position)
    return offset, length, buffer[position + 16]
