"""Producer-state snapshots, ``<20-digit offset>.snapshot`` in a partition directory.

Layout (big-endian)::

    0   i16  version = 1
    2   u32  CRC-32C of bytes [6, EOF)
    6   i32  entry count
    10  46 bytes per entry: i64 producerId | i16 epoch | i32 lastSequence | i64 lastOffset | i32 offsetDelta |
                            i64 timestamp | i32 coordinatorEpoch | i64 currentTxnFirstOffset

The offset in the name is the producer-state map end offset: the state covers every record below it. Kafka
writes snapshots in place (create + write, no rename); we write them atomically all the same.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, fields
from os import PathLike

from checkpoints.atomic import atomic_write_bytes, read_file_bytes
from segments._native.crc import crc32c
from segments._native.files import holds
from segments.errors import CorruptSnapshotError
from segments.java_numbers import check_java_int
from segments.naming import offset_from_file_name

PRODUCER_SNAPSHOT_VERSION = 1

_HEADER = struct.Struct(">hIi")
_VERSION_AND_CRC = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_POSITION = 2
_COUNT_POSITION = 6
# The CRC covers everything after itself: the count and the entries.
_CRC_START = _COUNT_POSITION
HEADER_SIZE = _HEADER.size
ENTRY_SIZE = _ENTRY.size
_EMPTY_SNAPSHOT = _VERSION_AND_CRC.pack(PRODUCER_SNAPSHOT_VERSION, crc32c(_COUNT.pack(0))) + _COUNT.pack(0)
"""The bytes of a snapshot of no producer."""


@dataclass(frozen=True)
class ProducerSnapshotEntry:
    """One producer's state; ``last_offset`` −1 means no batch metadata, ``current_txn_first_offset`` −1 no open
    transaction."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    def __post_init__(self) -> None:
        for spec, bits in zip(fields(self), (64, 16, 32, 64, 32, 64, 32, 64), strict=True):
            check_java_int(getattr(self, spec.name), bits, spec.name)


@dataclass(frozen=True)
class ProducerSnapshot:
    """A snapshot file's content and the offset its name carries."""

    offset: int
    entries: list[ProducerSnapshotEntry]


def parse_producer_snapshot(data: bytes, path: str | PathLike[str] | None = None) -> list[ProducerSnapshotEntry]:
    """Decode a snapshot's bytes into its entries, in file order. O(n).

    Raises :class:`~segments.errors.CorruptSnapshotError` (with ``path`` and the byte position) for a short
    header, a version other than 1, a negative count, a size other than ``10 + 46 * count`` (checked before
    decoding anything) or a CRC mismatch.
    """
    if len(data) < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"truncated header: {len(data)} bytes, need {HEADER_SIZE}", path=path, position=len(data)
        )
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"unsupported snapshot version {version} (expected {PRODUCER_SNAPSHOT_VERSION})", path=path, position=0
        )
    if count < 0:
        raise CorruptSnapshotError(f"negative entry count {count}", path=path, position=_COUNT_POSITION)
    expected_size = HEADER_SIZE + ENTRY_SIZE * count
    if len(data) != expected_size:
        problem = "truncated" if len(data) < expected_size else "trailing bytes"
        raise CorruptSnapshotError(
            f"{problem}: {count} entries need {expected_size} bytes, file has {len(data)}",
            path=path,
            position=min(len(data), expected_size),
        )
    computed_crc = crc32c(memoryview(data)[_CRC_START:])
    if computed_crc != stored_crc:
        raise CorruptSnapshotError(
            f"CRC mismatch (stored 0x{stored_crc:08x}, computed 0x{computed_crc:08x})",
            path=path,
            position=_CRC_POSITION,
        )
    return [ProducerSnapshotEntry(*values) for values in _ENTRY.iter_unpack(memoryview(data)[HEADER_SIZE:])]


def serialize_producer_snapshot(entries: Sequence[ProducerSnapshotEntry]) -> bytes:
    """The exact bytes Kafka writes for ``entries`` (in the given order). O(n)."""
    if not entries:
        # A partition without producers (a recovery writes one snapshot per segment).
        return _EMPTY_SNAPSHOT
    # The CRC-covered part (count and entries) in one join, then the version and CRC before it.
    covered = _COUNT.pack(len(entries)) + b"".join(
        [
            _ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.last_sequence,
                entry.last_offset,
                entry.offset_delta,
                entry.timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )
            for entry in entries
        ]
    )
    return _VERSION_AND_CRC.pack(PRODUCER_SNAPSHOT_VERSION, crc32c(covered)) + covered


def read_producer_snapshot(path: str | PathLike[str]) -> ProducerSnapshot:
    """Read ``path`` and decode it; the offset comes from the file name. O(n).

    Raises :class:`~segments.errors.InvalidOffsetError` when the name does not start with an offset.
    """
    offset = offset_from_file_name(os.path.basename(os.fspath(path)))
    return ProducerSnapshot(offset, parse_producer_snapshot(read_file_bytes(path), path))


def write_producer_snapshot(
    path: str | PathLike[str],
    entries: Sequence[ProducerSnapshotEntry],
    *,
    sync: bool = True,
    keep_if_equal: bool = False,
) -> bool:
    """Atomically replace ``path`` with a snapshot of ``entries``; ``sync=False`` skips the fsyncs, as Kafka does
    for the snapshot taken at roll (the flush task syncs it later). With ``keep_if_equal`` a regular file at
    ``path`` that already holds exactly these bytes is left as it is (a recovery writing again the snapshots it
    set aside: a read instead of a write and the unlink of the old file). Returns whether it wrote. O(n)."""
    # A partition without producers (a recovery writes one snapshot per segment) needs no serializing call.
    data = serialize_producer_snapshot(entries) if entries else _EMPTY_SNAPSHOT
    if keep_if_equal and holds(path, data):
        return False
    atomic_write_bytes(path, data, sync=sync)
    return True
