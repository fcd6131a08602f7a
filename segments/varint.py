"""Protobuf-style zig-zag varints, as Kafka's ``ByteUtils`` reads and writes them.

A varint (int32) takes at most 5 bytes and a varlong (int64) at most 10; a longer encoding is invalid. Decoders
take a buffer and a position and return ``(value, next_position)``. The signed codecs are the native ones of
:mod:`segments._native.records` (the record codec's own); the unsigned encoder serves Kafka's message schemas.
"""

from __future__ import annotations

from segments._native.records import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    varint_size,
    varlong_size,
)

__all__ = [
    "decode_varint",
    "decode_varlong",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "varint_size",
    "varlong_size",
]


def encode_unsigned_varint(value: int) -> bytes:
    """Kafka's ``ByteUtils.writeUnsignedVarint`` of a Java int: its 32 bits, 7 at a time (negative values take 5
    bytes). O(1)."""
    raw = value & 0xFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)
