"""Protobuf-style zig-zag varints, as Kafka's ``ByteUtils`` reads and writes them.

A varint (int32) takes at most 5 bytes and a varlong (int64) at most 10; a longer encoding is invalid. Decoders
take a ``bytes`` buffer and a position and return ``(value, next_position)`` so record parsing stays allocation
free.
"""

from __future__ import annotations

from segments.errors import CorruptRecordError

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63)


# Values -64..63 encode to one byte; records are full of them (lengths of small keys, deltas, header counts).
_ONE_BYTE = [bytes((((v << 1) ^ (v >> 63)) & 0xFF,)) for v in range(-64, 64)]


def encode_varint(value: int) -> bytes:
    """Encode a signed int32 as a zig-zag varint (1-5 bytes). O(1)."""
    if -64 <= value < 64:
        return _ONE_BYTE[value + 64]
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Encode a signed int64 as a zig-zag varlong (1-10 bytes). O(1)."""
    if -64 <= value < 64:
        return _ONE_BYTE[value + 64]
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_unsigned(_zigzag_encode(value) & 0xFFFFFFFFFFFFFFFF)


def encode_unsigned_varint(value: int) -> bytes:
    """Kafka's ``ByteUtils.writeUnsignedVarint`` of a Java int: its 32 bits, 7 at a time (negative values take 5
    bytes). O(1)."""
    return _encode_unsigned(value & 0xFFFFFFFF)


def _encode_unsigned(raw: int) -> bytes:
    if raw < 0x80:
        return bytes((raw,))
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def varint_size(value: int) -> int:
    """Number of bytes :func:`encode_varint` produces for ``value``. O(1)."""
    if -64 <= value < 64:
        return 1
    raw = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return max(1, (raw.bit_length() + 6) // 7)


def varlong_size(value: int) -> int:
    """Number of bytes :func:`encode_varlong` produces for ``value``. O(1)."""
    if -64 <= value < 64:
        return 1
    raw = _zigzag_encode(value) & 0xFFFFFFFFFFFFFFFF
    return max(1, (raw.bit_length() + 6) // 7)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return ``(value, next_pos)``. O(1).

    Raises :class:`CorruptRecordError` (position = ``pos``) if the buffer ends mid-varint or the encoding
    is longer than 5 bytes.
    """
    try:
        b = buf[pos]
    except IndexError:
        raise CorruptRecordError("buffer ends inside a varint", position=pos) from None
    if b < 0x80:
        # One-byte values are by far the most common (lengths, deltas, counts): no loop for them.
        return (b >> 1) ^ -(b & 1), pos + 1
    return _decode_multi_byte(buf, pos, 28, 0xFFFFFFFF, "varint is longer than 5 bytes")


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong at ``pos``; return ``(value, next_pos)``. O(1).

    Raises :class:`CorruptRecordError` if the buffer ends mid-varlong or the encoding is longer than 10 bytes.
    """
    try:
        b = buf[pos]
    except IndexError:
        raise CorruptRecordError("buffer ends inside a varint", position=pos) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _decode_multi_byte(buf, pos, 63, 0xFFFFFFFFFFFFFFFF, "varlong is longer than 10 bytes")


def _decode_multi_byte(buf: bytes | bytearray | memoryview, pos: int, max_shift: int, mask: int, too_long: str) -> tuple[int, int]:
    raw = 0
    shift = 0
    cursor = pos
    while True:
        try:
            b = buf[cursor]
        except IndexError:
            raise CorruptRecordError("buffer ends inside a varint", position=pos) from None
        cursor += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > max_shift:
            raise CorruptRecordError(too_long, position=pos)
    raw &= mask
    return (raw >> 1) ^ -(raw & 1), cursor
