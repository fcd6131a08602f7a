"""Magic 0 and 1 message sets (``kafka-format.md`` §1.5): read and verify only, never written.

Each top-level message is one :class:`LegacyRecordBatch` (as Kafka's ``FileRecords.batches()`` iterates them):
either an uncompressed message, or a compressed *wrapper* whose value holds an inner message set. The wrapper's
offset is the last inner offset; magic-1 inner offsets are relative (0..n-1), magic-0 inner offsets absolute.

A magic-1 wrapper's absolute offsets need its last inner offset, so a wrapper is decompressed whole (within
:attr:`~segments.records.DecodeLimits.max_batch_bytes`) as Kafka's reader does; its records are then produced one
at a time, each inner message checked against :attr:`~segments.records.DecodeLimits.max_record_bytes`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from segments.compression import CompressionType, decompress
from segments.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError
from segments.records import (
    DEFAULT_DECODE_LIMITS,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Buffer,
    DecodeLimits,
    Record,
    RecordBatch,
    TimestampType,
)

RECORD_OVERHEAD_V0 = 14
"""crc(4) + magic(1) + attributes(1) + key length(4) + value length(4)."""
RECORD_OVERHEAD_V1 = 22
"""As v0 plus the 8-byte timestamp."""

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08


class _Message:
    """One legacy message (without its 12-byte prefix), parsed and bounds-checked eagerly."""

    __slots__ = ("attributes", "crc", "key", "magic", "size", "timestamp", "value")

    def __init__(self, message: bytes, position: int) -> None:
        # ``position`` is where ``message`` starts in the enclosing buffer, for error messages.
        self.size = len(message)
        if self.size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"record is corrupt (size {self.size} is smaller than the minimum record overhead {RECORD_OVERHEAD_V0})",
                position=position,
            )
        self.crc, self.magic, self.attributes = struct.unpack_from(">IbB", message, 0)
        if self.magic not in (MAGIC_V0, MAGIC_V1):
            raise CorruptRecordError(f"legacy message has invalid magic {self.magic}", position=position + 4)
        cursor = 6
        if self.magic == MAGIC_V1:
            if self.size < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(
                    f"record is corrupt (size {self.size} is smaller than the v1 record overhead {RECORD_OVERHEAD_V1})",
                    position=position,
                )
            (self.timestamp,) = struct.unpack_from(">q", message, cursor)
            cursor += 8
        else:
            self.timestamp = NO_TIMESTAMP
        self.key, cursor = _sized_bytes(message, cursor, position, "key")
        self.value, cursor = _sized_bytes(message, cursor, position, "value")
        if cursor != self.size:
            raise CorruptRecordError(
                f"legacy message has {self.size - cursor} bytes after its value", position=position + cursor
            )

    @property
    def codec(self) -> int:
        return int(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & _TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME


def _sized_bytes(message: bytes, cursor: int, position: int, what: str) -> tuple[bytes | None, int]:
    if cursor + 4 > len(message):
        raise CorruptRecordError(f"legacy message ends inside its {what} length", position=position + cursor)
    (size,) = struct.unpack_from(">i", message, cursor)
    cursor += 4
    if size < 0:
        return None, cursor
    if cursor + size > len(message):
        raise CorruptRecordError(
            f"legacy message {what} length {size} runs past the message end", position=position + cursor - 4
        )
    return message[cursor : cursor + size], cursor + size


class LegacyRecordBatch(RecordBatch):
    """A lazy view of one top-level magic 0/1 message (``buffer`` = the entry, 12-byte prefix included)."""

    __slots__ = ("_attributes", "_buffer", "_crc", "_first_offset", "_magic", "_offset", "_size", "_timestamp")

    _ATTRIBUTES_POSITION = LOG_OVERHEAD + 5

    def __init__(self, buffer: Buffer) -> None:
        if len(buffer) < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"legacy message of {len(buffer)} bytes is smaller than the minimum {LOG_OVERHEAD + RECORD_OVERHEAD_V0}",
                position=0,
            )
        prefix: tuple[int, ...] = struct.unpack_from(">qiIbB", buffer, 0)
        self._offset, self._size, self._crc, self._magic, self._attributes = prefix
        if self._size + LOG_OVERHEAD != len(buffer):
            raise CorruptRecordError(
                f"message size field {self._size} does not match the {len(buffer)} bytes given", position=8
            )
        self._timestamp = NO_TIMESTAMP
        if self._magic == MAGIC_V1 and len(buffer) >= LOG_OVERHEAD + RECORD_OVERHEAD_V1:
            (self._timestamp,) = struct.unpack_from(">q", buffer, LOG_OVERHEAD + 6)
        self._buffer = buffer
        self._first_offset: int | None = None

    @property
    def magic(self) -> int:
        return self._magic

    @property
    def last_offset(self) -> int:
        return self._offset

    @property
    def base_offset(self) -> int:
        """First offset: the message's own offset, or the first inner offset of a wrapper (decompresses)."""
        if self._attributes & _CODEC_MASK == 0:
            return self._offset
        if self._first_offset is None:
            first = next(self.iter_records(check_crc=False), None)
            self._first_offset = self._offset if first is None else first.offset
        return self._first_offset

    @property
    def size_in_bytes(self) -> int:
        return self._size + LOG_OVERHEAD

    @property
    def checksum(self) -> int:
        return self._crc

    @property
    def attributes(self) -> int:
        return self._attributes

    @property
    def max_timestamp(self) -> int:
        return self._timestamp

    @property
    def timestamp_type(self) -> TimestampType:
        if self._magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self._attributes & _TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    def compute_checksum(self) -> int:
        """CRC-32 (IEEE) over magic..end of the message. O(size)."""
        return zlib.crc32(memoryview(self._buffer)[LOG_OVERHEAD + 4 :]) & 0xFFFFFFFF

    def ensure_valid(self) -> None:
        """Size at least the v0 overhead and stored CRC-32 equal to the computed one. O(size)."""
        if self._magic not in (MAGIC_V0, MAGIC_V1):
            raise CorruptRecordError(f"legacy message has invalid magic {self._magic}", position=16)
        computed = self.compute_checksum()
        if computed != self._crc:
            raise CorruptRecordError(
                f"record is corrupt (stored crc = {self._crc}, computed crc = {computed})", position=LOG_OVERHEAD
            )

    def count_records(self) -> int:
        """1 for a plain message; the inner count for a wrapper (decompresses). O(size)."""
        return sum(1 for _ in self.iter_records(check_crc=False))

    def raw_bytes(self) -> bytes:
        return bytes(self._buffer)

    def records(self) -> list[Record]:
        """The message itself, or the inner messages of a compressed wrapper with Kafka's offset and
        timestamp rules applied, without checking the CRC. O(size); raises :class:`CorruptRecordError`."""
        return list(self.iter_records(check_crc=False))

    def iter_records(self, limits: DecodeLimits = DEFAULT_DECODE_LIMITS, *, check_crc: bool = True) -> Iterator[Record]:
        """See :meth:`RecordBatch.iter_records`. O(size) time; O(size) memory for a plain message, O(decompressed
        wrapper) for a wrapper."""
        if check_crc:
            self.ensure_valid()
        if self.size_in_bytes > limits.max_batch_bytes:
            raise RecordTooLargeError(
                f"message of {self.size_in_bytes} bytes exceeds the limit of {limits.max_batch_bytes}", position=8
            )
        outer = _Message(bytes(memoryview(self._buffer)[LOG_OVERHEAD:]), LOG_OVERHEAD)
        codec = outer.codec
        if codec == 0:
            if self.size_in_bytes > limits.max_record_bytes:
                raise RecordTooLargeError(
                    f"record of {self.size_in_bytes} bytes exceeds the limit of {limits.max_record_bytes}",
                    position=0,
                )
            yield Record(
                self._offset,
                outer.timestamp,
                outer.key,
                outer.value,
                (),
                NO_SEQUENCE,
                self.size_in_bytes,
                outer.timestamp,
                outer.crc,
            )
            return
        if codec > CompressionType.LZ4:
            raise UnsupportedCompressionError(
                f"compression type id {codec} is not valid for magic {self._magic}", position=17
            )
        if outer.value is None:
            raise CorruptRecordError("compressed legacy wrapper has a null value", position=LOG_OVERHEAD)
        try:
            inner_bytes = decompress(
                CompressionType(codec), outer.value, magic=self._magic, max_size=limits.max_batch_bytes
            )
        except CorruptRecordError as err:
            raise type(err)(f"wrapper value: {err.message}", position=LOG_OVERHEAD) from None
        absolute_base = 0
        # Kafka reads a v1 wrapper offset of 0 (some librdkafka produce data) as "inner offsets are absolute".
        # Otherwise a first pass finds the last inner offset (keeping no message) and checks every message, so
        # no record is produced from a wrapper that turns out to be corrupt further on.
        last_inner: int | None = None
        for inner_offset, _ in _iter_inner(inner_bytes, self._magic, limits.max_record_bytes):
            last_inner = inner_offset
        if last_inner is None:
            raise CorruptRecordError("compressed legacy wrapper holds no messages", position=LOG_OVERHEAD)
        if self._magic == MAGIC_V1 and self._offset != 0:
            if self._offset < last_inner:
                raise CorruptRecordError(
                    f"wrapper offset {self._offset} is less than the last inner message offset {last_inner}", position=0
                )
            absolute_base = self._offset - last_inner
        log_append = outer.timestamp_type is TimestampType.LOG_APPEND_TIME
        for inner_offset, message in _iter_inner(inner_bytes, self._magic, limits.max_record_bytes):
            timestamp = outer.timestamp if log_append else message.timestamp
            yield Record(
                absolute_base + inner_offset,
                timestamp,
                message.key,
                message.value,
                (),
                NO_SEQUENCE,
                message.size + LOG_OVERHEAD,
                message.timestamp,
                message.crc,
            )

    def __repr__(self) -> str:
        return f"LegacyRecordBatch(magic={self._magic}, offset={self._offset}, size={self.size_in_bytes})"


def _iter_inner(data: bytes, wrapper_magic: int, max_record_bytes: int) -> Iterator[tuple[int, _Message]]:
    """Inner message set of a wrapper, one ``(offset, message)`` at a time: every inner message must match the
    wrapper's magic, be uncompressed (a nested wrapper is refused, never decompressed), pass its CRC and stay
    within ``max_record_bytes``. O(len(data))."""
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise CorruptRecordError("inner message set ends inside a message header", position=pos)
        offset, size = struct.unpack_from(">qi", data, pos)
        if size < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + size > end:
            raise CorruptRecordError(f"inner message has invalid size {size}", position=pos)
        if LOG_OVERHEAD + size > max_record_bytes:
            raise RecordTooLargeError(
                f"inner message of {LOG_OVERHEAD + size} bytes exceeds the limit of {max_record_bytes}", position=pos
            )
        body = data[pos + LOG_OVERHEAD : pos + LOG_OVERHEAD + size]
        message = _Message(body, pos + LOG_OVERHEAD)
        if message.magic != wrapper_magic:
            raise CorruptRecordError(
                f"compressed message magic {message.magic} does not match wrapper magic {wrapper_magic}", position=pos
            )
        if message.codec != 0:
            raise CorruptRecordError("compressed message is nested inside another", position=pos)
        if zlib.crc32(body[4:]) & 0xFFFFFFFF != message.crc:
            raise CorruptRecordError("inner message CRC mismatch", position=pos)
        yield offset, message
        pos += LOG_OVERHEAD + size
