"""The compiled CRC-32C against the reference implementation (the ``crc32c`` package) and its own portable path."""

from __future__ import annotations

import os

import crc32c as reference
from hypothesis import given
from hypothesis import strategies as st

from segments._native import crc

# Lengths around every stream boundary of the 3-way passes (256 and 8192 bytes per stream) and alignments 0-7.
BOUNDARY_LENGTHS = [0, 1, 7, 8, 9, 255, 256, 767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 5, 100_003]


def test_every_stream_boundary_and_alignment_matches_the_reference() -> None:
    data = os.urandom(max(BOUNDARY_LENGTHS) + 8)
    for length in BOUNDARY_LENGTHS:
        for skew in range(8):
            view = memoryview(data)[skew : skew + length]
            expected = reference.crc32c(view)
            assert crc.crc32c(view) == expected, (length, skew)
            assert crc.crc32c_portable(view) == expected, (length, skew)


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_continuing_a_crc_over_a_split_equals_one_pass(data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    assert crc.crc32c(data[cut:], crc.crc32c(data[:cut])) == reference.crc32c(data)


def test_known_vector() -> None:
    # RFC 3720 B.4: 32 bytes of zeros.
    assert crc.crc32c(bytes(32)) == 0x8A9136AA
    assert crc.crc32c(b"123456789") == 0xE3069283


def test_large_buffer_released_gil_path_matches() -> None:
    data = os.urandom((1 << 20) + 3)
    assert crc.crc32c(data) == reference.crc32c(data)
    assert crc.crc32c(bytearray(data)) == reference.crc32c(data)
