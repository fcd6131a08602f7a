"""Generators of hostile record batches: small on disk, huge or endless when decoded.

Shared by ``tests/faults/test_hostile_batches.py`` (at sizes scaled to small :class:`DecodeLimits`) and
``bench/hostile_bench.py`` (at full size, through every command). Every batch has a valid CRC, so only the
decoder's limits stand between it and the reader's memory.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from crc32c import crc32c

from segments.compression import CompressionType, compress
from segments.legacy import RECORD_OVERHEAD_V1
from segments.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V1,
    RECORD_BATCH_OVERHEAD,
    SimpleRecord,
    build_batch,
    encode_record,
)

EMPTY_RECORD = b"\x0c\x00\x00\x00\x01\x01\x00"
"""One magic-2 record of 7 bytes: length 6, attributes 0, deltas 0, null key, null value, no header."""

_LAST_OFFSET_DELTA_OFFSET = 23
_RECORDS_COUNT_OFFSET = 57


def batch_of_region(region: bytes, count: int, codec: CompressionType, *, base_offset: int = 0) -> bytes:
    """A magic-2 batch whose records region is ``region`` (compressed with ``codec``) declaring ``count``
    records, with a valid CRC. O(len(region))."""
    template = bytearray(build_batch([SimpleRecord(b"", None, 0)], base_offset=base_offset, compression=codec))
    body = compress(codec, region) if codec is not CompressionType.NONE else region
    out = template[:RECORD_BATCH_OVERHEAD] + body
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">i", out, _LAST_OFFSET_DELTA_OFFSET, max(count - 1, 0))
    struct.pack_into(">i", out, _RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def huge_value_batch(codec: CompressionType, value_size: int) -> bytes:
    """One record holding ``value_size`` zero bytes. O(value_size)."""
    return batch_of_region(encode_record(0, 0, None, bytes(value_size)), 1, codec)


def empty_records_batch(codec: CompressionType, count: int) -> bytes:
    """``count`` empty records (7 bytes each decompressed). O(count)."""
    return batch_of_region(EMPTY_RECORD * count, count, codec)


def _legacy_message(offset: int, value: bytes | None, attributes: int = 0) -> bytes:
    """One magic-1 message with its 12-byte prefix and a valid CRC-32."""
    body = struct.pack(">bBqi", MAGIC_V1, attributes, 0, -1)
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def legacy_wrapper(codec: CompressionType, inner: bytes, last_offset: int) -> bytes:
    """A magic-1 wrapper whose value is the message set ``inner`` compressed with ``codec``. O(len(inner))."""
    return _legacy_message(last_offset, compress(codec, inner), int(codec))


def legacy_empty_messages(codec: CompressionType, count: int) -> bytes:
    """A magic-1 wrapper of ``count`` inner messages with null values. O(count)."""
    messages = b"".join(_legacy_message(i, None) for i in range(min(count, 1)))
    inner = messages * count if count else b""
    assert len(inner) == count * (LOG_OVERHEAD + RECORD_OVERHEAD_V1)
    return legacy_wrapper(codec, inner, count - 1)


def legacy_huge_value(codec: CompressionType, value_size: int) -> bytes:
    """A magic-1 wrapper of one inner message holding ``value_size`` zero bytes. O(value_size)."""
    return legacy_wrapper(codec, _legacy_message(0, bytes(value_size)), 0)


def legacy_nested(codec: CompressionType, depth: int) -> bytes:
    """A magic-1 wrapper nested ``depth`` deep (Kafka refuses a wrapper inside a wrapper). O(depth)."""
    message = _legacy_message(0, b"")
    for _ in range(depth):
        message = legacy_wrapper(codec, message, 0)
    return message


CODECS = tuple(CompressionType)
LEGACY_CODECS = (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4)


def write_partition(log_dir: Path, batches: list[bytes], topic: str = "hostile") -> Path:
    """A partition dir ``<topic>-0`` under ``log_dir`` whose only segment holds ``batches``. O(bytes)."""
    partition = log_dir / f"{topic}-0"
    partition.mkdir(parents=True, exist_ok=True)
    (partition / "00000000000000000000.log").write_bytes(b"".join(batches))
    return partition
