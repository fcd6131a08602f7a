"""Zig-zag varints and varlongs (Kafka's ``ByteUtils``): round trips, sizes, and rejection of bad encodings."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.errors import CorruptRecordError
from segments.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    varint_size,
    varlong_size,
)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)


def _zigzag_groups(raw: int) -> bytes:
    """Reference encoder: little-endian 7-bit groups with continuation bits, written independently."""
    out = []
    while True:
        group = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(group | 0x80)
        else:
            out.append(group)
            return bytes(out)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert varint_size(value) == len(encoded)


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (0, 1),
        (-1, 1),
        (INT64_MAX, 10),
        (INT64_MIN, 10),
        (INT32_MAX, 5),
        (INT32_MIN, 5),
        ((1 << 62) - 1, 9),
        (-(1 << 62), 9),
        (1 << 62, 10),
    ],
)
def test_varlong_extremes(value: int, size: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size == varlong_size(value)
    assert decode_varlong(encoded, 0) == (value, size)


@pytest.mark.parametrize(
    ("bits", "values", "encode", "size", "decode"),
    [
        (32, int32s, encode_varint, varint_size, decode_varint),
        (64, int64s, encode_varlong, varlong_size, decode_varlong),
    ],
    ids=["varint", "varlong"],
)
@settings(max_examples=300)
@given(data=st.data(), before=st.binary(max_size=4), after=st.binary(max_size=4))
def test_round_trip(
    bits: int,
    values: st.SearchStrategy[int],
    encode: Callable[[int], bytes],
    size: Callable[[int], int],
    decode: Callable[[bytes, int], tuple[int, int]],
    data: st.DataObject,
    before: bytes,
    after: bytes,
) -> None:
    """Encoding against the independent reference, its size, and decoding amid other bytes, for either width."""
    value = data.draw(values)
    encoded = encode(value)
    assert len(encoded) == size(value)
    assert 1 <= len(encoded) <= (bits + 6) // 7
    assert encoded == _zigzag_groups(((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1))
    assert decode(before + encoded + after, len(before)) == (value, len(before) + len(encoded))


@given(int32s)
def test_varint_decodes_as_varlong(value: int) -> None:
    # Zig-zag keeps small magnitudes small, so an int32 varint is also a valid varlong of the same value.
    assert decode_varlong(encode_varint(value), 0)[0] == value


@pytest.mark.parametrize("value", [INT32_MIN - 1, INT32_MAX + 1, 1 << 40])
def test_encode_varint_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)


@pytest.mark.parametrize("value", [INT64_MIN - 1, INT64_MAX + 1])
def test_encode_varlong_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varlong(value)


@pytest.mark.parametrize("start", [0, 3])
def test_six_byte_varint_is_corrupt(start: int) -> None:
    buf = b"\x00" * start + b"\x80\x80\x80\x80\x80\x00"
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes") as info:
        decode_varint(buf, start)
    assert info.value.position == start


def test_fifth_varint_byte_high_bits_are_dropped() -> None:
    # Kafka shifts the fifth byte left by 28 in an int, discarding what does not fit in 32 bits.
    assert decode_varint(b"\xfe\xff\xff\xff\x7f", 0) == (INT32_MAX, 5)


@pytest.mark.parametrize("start", [0, 2])
def test_eleven_byte_varlong_is_corrupt(start: int) -> None:
    buf = b"\x00" * start + b"\x80" * 10 + b"\x00"
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes") as info:
        decode_varlong(buf, start)
    assert info.value.position == start


@pytest.mark.parametrize(
    ("values", "encode", "decode", "prefix"),
    [(int32s, encode_varint, decode_varint, b"\x01\x02"), (int64s, encode_varlong, decode_varlong, b"\x07")],
    ids=["varint", "varlong"],
)
@settings(max_examples=200)
@given(data=st.data())
def test_truncated_value_reports_its_start(
    values: st.SearchStrategy[int],
    encode: Callable[[int], bytes],
    decode: Callable[[bytes, int], tuple[int, int]],
    prefix: bytes,
    data: st.DataObject,
) -> None:
    """A varint or varlong cut anywhere after its first byte is corrupt at the position it starts at (after
    ``prefix``)."""
    encoded = prefix + encode(data.draw(values))
    cut = data.draw(st.integers(len(prefix), len(encoded) - 1))
    with pytest.raises(CorruptRecordError) as info:
        decode(encoded[:cut], len(prefix))
    assert info.value.position == len(prefix)


def test_decode_past_end_is_corrupt() -> None:
    for decode in (decode_varint, decode_varlong):
        with pytest.raises(CorruptRecordError) as info:
            decode(b"\x02", 1)
        assert info.value.position == 1


@settings(max_examples=400)
@given(st.binary(max_size=16), st.integers(0, 16))
def test_arbitrary_bytes_raise_only_corrupt_record_error(buf: bytes, pos: int) -> None:
    for decode, limit in ((decode_varint, INT32_MAX), (decode_varlong, INT64_MAX)):
        try:
            value, end = decode(buf, pos)
        except CorruptRecordError as err:
            assert err.position == pos
        else:
            assert -limit - 1 <= value <= limit
            assert pos < end <= len(buf)


@given(st.binary(min_size=1, max_size=5))
def test_decode_varint_matches_reference_on_any_five_bytes(buf: bytes) -> None:
    try:
        value, end = decode_varint(buf, 0)
    except CorruptRecordError:
        assert all(b & 0x80 for b in buf)
        return
    raw = 0
    for i, b in enumerate(buf[:end]):
        raw |= (b & 0x7F) << (7 * i)
    raw &= 0xFFFFFFFF
    assert value == (raw >> 1) ^ -(raw & 1)
    assert all(b & 0x80 for b in buf[: end - 1]) and not buf[end - 1] & 0x80
