"""Kafka's lz4 frame reader against other writers' frames and damaged frames: frames from the ``lz4`` package
(every block size, content size, content and block checksums), from kafka-python's and aiokafka's producers, and
from ours decode to their input; any truncation or damage of a frame gives a typed error, and a frame whose
output passes the limit is refused before a buffer larger than the limit is allocated."""

from __future__ import annotations

import tracemalloc

import lz4.frame  # type: ignore[import-untyped]
import pytest
from aiokafka.codec import lz4_encode as aiokafka_lz4_encode
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.codec import lz4_encode as kafka_python_lz4_encode

from segments.compression import (
    CompressionType,
    _lz4_header_checksum,
    compress,
    decompress,
    decompress_chunks,
)
from segments.errors import CorruptRecordError, RecordTooLargeError

LZ4 = CompressionType.LZ4
BLOCK_SIZES = [
    lz4.frame.BLOCKSIZE_MAX64KB,
    lz4.frame.BLOCKSIZE_MAX256KB,
    lz4.frame.BLOCKSIZE_MAX1MB,
    lz4.frame.BLOCKSIZE_MAX4MB,
]

# Compressible and incompressible stretches, so frames hold compressed and stored blocks.
payloads = st.lists(
    st.one_of(st.binary(max_size=3000), st.integers(1, 200_000).map(lambda n: b"kafka log " * (n // 10))),
    max_size=4,
).map(b"".join)


@settings(max_examples=60, deadline=None)
@given(
    data=payloads,
    block_size=st.sampled_from(BLOCK_SIZES),
    store_size=st.booleans(),
    content_checksum=st.booleans(),
    block_checksum=st.booleans(),
    level=st.sampled_from([0, 9, 16]),
)
def test_lz4_package_frames_decode_to_their_input(
    data: bytes, block_size: int, store_size: bool, content_checksum: bool, block_checksum: bool, level: int
) -> None:
    frame = lz4.frame.compress(
        data,
        compression_level=level,
        block_size=block_size,
        block_linked=False,
        store_size=store_size,
        content_checksum=content_checksum,
        block_checksum=block_checksum,
    )
    assert decompress(LZ4, frame) == data
    assert b"".join(decompress_chunks(LZ4, frame)) == data


@settings(max_examples=40, deadline=None)
@given(data=payloads)
def test_producer_frames_decode_to_their_input(data: bytes) -> None:
    """kafka-python (``lz4`` package, independent blocks), aiokafka (cramjam's frame writer) and ours."""
    for frame in (kafka_python_lz4_encode(data), aiokafka_lz4_encode(data), compress(LZ4, data)):
        assert decompress(LZ4, frame) == data


def test_linked_blocks_are_refused() -> None:
    frame = lz4.frame.compress(b"x" * 200_000, block_linked=True)
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        decompress(LZ4, frame)


@settings(max_examples=80, deadline=None)
@given(data=payloads, cut=st.integers(0, 10**9), block_checksum=st.booleans())
def test_truncated_frames_are_refused_typed(data: bytes, cut: int, block_checksum: bool) -> None:
    frame = lz4.frame.compress(data, block_linked=False, block_checksum=block_checksum)
    truncated = frame[: cut % len(frame)]
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, truncated)


@settings(max_examples=150, deadline=None)
@given(
    data=payloads,
    flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1, max_size=4),
    block_checksum=st.booleans(),
)
def test_damaged_frames_decode_or_are_refused_typed(
    data: bytes, flips: list[tuple[int, int]], block_checksum: bool
) -> None:
    """A damaged frame either still decodes (damage in a stored block, a skipped content checksum or size) or
    raises CorruptRecordError (RecordTooLargeError past the limit): never another exception, never more output
    than the limit."""
    frame = bytearray(lz4.frame.compress(data, block_linked=False, block_checksum=block_checksum))
    for position, xor in flips:
        frame[position % len(frame)] ^= xor
    try:
        out = decompress(LZ4, bytes(frame), max_size=1 << 20)
    except CorruptRecordError:
        return
    assert len(out) <= 1 << 20


def test_output_past_the_limit_is_refused_before_allocating_it() -> None:
    """64 MiB of zeros in 1 MiB blocks compresses to a few KiB; with a 1 MiB limit the reader must refuse with
    RecordTooLargeError and allocate about the limit at most, not the frame's 64 MiB."""
    frame = lz4.frame.compress(bytes(64 << 20), block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX1MB)
    assert len(frame) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            decompress(LZ4, frame, max_size=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 << 20


def test_hostile_block_sizes_allocate_by_the_bytes_present() -> None:
    """A frame of many tiny compressed blocks in a 4 MiB-block frame: each could claim 4 MiB, but a block of n
    bytes decodes to at most about 256 n, so the buffer follows the bytes present."""
    header = bytes.fromhex("04224d18") + bytes((0x60, 0x70))
    header += bytes((_lz4_header_checksum(header[4:6]),))
    block = (1).to_bytes(4, "little") + b"\x10"  # a 1-byte block: a token asking for one literal that is missing
    frame = header + block * 10_000 + bytes(4)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            decompress(LZ4, frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
