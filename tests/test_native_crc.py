"""The compiled CRC-32C, every kernel this processor runs, against the reference implementation (the ``crc32c``
package)."""

from __future__ import annotations

import os

import crc32c as reference
import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments._native import crc

# Lengths around every stream boundary of the 3-way passes (256 and 8192 bytes per stream), and around every step
# of the fold kernel: its least length (256), its 256-byte main step, its 64- and 16-byte steps and an 8-byte tail.
BOUNDARY_LENGTHS = sorted(
    {0, 1, 7, 8, 9, 15, 16, 17, 255, 256, 257, 767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 5, 100_003}
    | {256 * steps + 64 * blocks + 16 * words + tail
       for steps in (1, 2, 3) for blocks in (0, 1, 3) for words in (0, 1, 3) for tail in (0, 7, 8, 15)}
)


def test_every_kernel_of_this_processor_is_listed_fastest_first() -> None:
    assert crc.kernels()[0] == crc.kernel()
    assert crc.kernels()[-1] == "portable"
    with pytest.raises(ValueError, match="not one of this processor's"):
        crc.crc32c_by("no-such-kernel", b"x")


@pytest.mark.parametrize("kernel", crc.kernels())
def test_every_boundary_and_alignment_matches_the_reference(kernel: str) -> None:
    data = os.urandom(max(BOUNDARY_LENGTHS) + 8)
    for length in BOUNDARY_LENGTHS:
        for skew in range(8):
            view = memoryview(data)[skew : skew + length]
            expected = reference.crc32c(view)
            assert crc.crc32c_by(kernel, view) == expected, (length, skew)
            assert crc.crc32c_by(kernel, view, 0x12345678) == reference.crc32c(view, 0x12345678), (length, skew)
    assert crc.crc32c(data) == reference.crc32c(data)


@pytest.mark.parametrize("kernel", crc.kernels())
@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_continuing_a_crc_over_a_split_equals_one_pass(kernel: str, data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    assert crc.crc32c_by(kernel, data[cut:], crc.crc32c_by(kernel, data[:cut])) == reference.crc32c(data)


def test_known_vector() -> None:
    # RFC 3720 B.4: 32 bytes of zeros.
    assert crc.crc32c(bytes(32)) == 0x8A9136AA
    assert crc.crc32c(b"123456789") == 0xE3069283


def test_large_buffer_released_gil_path_matches() -> None:
    data = os.urandom((1 << 20) + 3)
    assert crc.crc32c(data) == reference.crc32c(data)
    assert crc.crc32c(bytearray(data)) == reference.crc32c(data)
