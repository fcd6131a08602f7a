"""Kafka's ``SkimpyOffsetMap``: key -> latest offset in a fixed amount of memory.

Each slot holds the 16-byte MD5 digest of a key and an 8-byte offset (24 bytes), in one preallocated
``bytearray``: the map never grows, whatever the keys. Two keys with the same digest are the same key to the map
(the chance is negligible, as in Kafka). Probing follows Kafka: the first 12 probes take 4 consecutive digest
bytes from successive positions, later ones step linearly.
"""

from __future__ import annotations

import hashlib
import struct

HASH_SIZE = 16
"""MD5 digest bytes per slot."""
BYTES_PER_ENTRY = HASH_SIZE + 8
"""Bytes one key costs: its digest and its offset."""

_OFFSET = struct.Struct(">q")
_EMPTY = bytes(HASH_SIZE)
_ZERO_CHUNK = bytes(1 << 20)


class OffsetMapFullError(Exception):
    """A put into a map that holds :attr:`SkimpyOffsetMap.slots` keys already."""


class SkimpyOffsetMap:
    """A hashed ``key -> offset`` map in ``memory`` bytes (``memory // 24`` slots), as Kafka's cleaner uses.

    :attr:`latest_offset` is the last offset put (or set by :meth:`update_latest_offset`): the map covers the log
    up to it. A digest of all zeros marks an empty slot, so a key whose digest is zero is stored under a digest of
    one (harmless: it is a digest collision like any other).
    """

    __slots__ = ("_bytes", "_entries", "_lookups", "_probes", "latest_offset", "slots")

    def __init__(self, memory: int) -> None:
        slots = memory // BYTES_PER_ENTRY
        if slots < 1:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes, got {memory}")
        self.slots = slots
        self._bytes = bytearray(slots * BYTES_PER_ENTRY)
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self.latest_offset = -1

    @staticmethod
    def _digest(key: bytes) -> bytes:
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        return digest if digest != _EMPTY else b"\x00" * (HASH_SIZE - 1) + b"\x01"

    def _position_of(self, digest: bytes, attempt: int) -> int:
        # Kafka's positionOf: 4 digest bytes from position ``attempt`` while they last, then linear steps.
        probe = int.from_bytes(digest[min(attempt, HASH_SIZE - 4) : min(attempt, HASH_SIZE - 4) + 4], "big")
        probe += max(0, attempt - (HASH_SIZE - 4))
        return (probe % self.slots) * BYTES_PER_ENTRY

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(position of ``digest``'s slot or of the empty slot it would take, whether it is there)."""
        data = self._bytes
        attempt = 0
        while True:
            position = self._position_of(digest, attempt)
            self._probes += 1
            stored = data[position : position + HASH_SIZE]
            if stored == digest:
                return position, True
            if stored == _EMPTY:
                return position, False
            attempt += 1
            if attempt > self.slots + HASH_SIZE:
                raise OffsetMapFullError(f"no free slot among {self.slots}")

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest of ``key`` and as :attr:`latest_offset`. Raises
        :class:`OffsetMapFullError` when the key is new and every slot is taken. O(1) expected."""
        digest = self._digest(key)
        self._lookups += 1
        position, found = self._find(digest)
        if not found:
            if self._entries >= self.slots:
                raise OffsetMapFullError(f"all {self.slots} slots are taken")
            self._bytes[position : position + HASH_SIZE] = digest
            self._entries += 1
        _OFFSET.pack_into(self._bytes, position + HASH_SIZE, offset)
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, or -1. O(1) expected."""
        digest = self._digest(key)
        self._lookups += 1
        position, found = self._find(digest)
        if not found:
            return -1
        value: int = _OFFSET.unpack_from(self._bytes, position + HASH_SIZE)[0]
        return value

    def update_latest_offset(self, offset: int) -> None:
        """Mark the map as covering the log up to ``offset`` (a batch whose records needed no entry). O(1)."""
        self.latest_offset = offset

    def clear(self) -> None:
        """Empty the map, keeping its memory. O(memory)."""
        if self._entries:
            # In place, a chunk at a time: no second buffer of the map's size, even briefly.
            data = self._bytes
            for start in range(0, len(data), len(_ZERO_CHUNK)):
                end = min(start + len(_ZERO_CHUNK), len(data))
                data[start:end] = _ZERO_CHUNK[: end - start]
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self.latest_offset = -1

    @property
    def size(self) -> int:
        """Keys held. O(1)."""
        return self._entries

    @property
    def utilization(self) -> float:
        """Share of the slots taken. O(1)."""
        return self._entries / self.slots

    @property
    def collision_rate(self) -> float:
        """Extra probes per lookup (Kafka's collisionRate). O(1)."""
        return 0.0 if self._lookups == 0 else (self._probes - self._lookups) / self._lookups

    def __len__(self) -> int:
        return self._entries
