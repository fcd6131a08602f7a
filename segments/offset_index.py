"""Kafka's offset index (``.index``): sparse map from offsets to byte positions in the segment's ``.log``.

Each 8-byte entry is ``i32 relativeOffset | i32 position`` (big-endian), relative to the segment's base offset.
Offsets strictly increase. ``lookup`` answers the largest indexed offset <= target, from which the reader scans
batches forward.
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

from segments.abstract_index import (
    INT32_FIELD,
    WARM_SECTION_BYTES,
    AbstractIndex,
    IndexField,
)
from segments.errors import CorruptIndexError

_ENTRY = struct.Struct(">ii")
_I32 = struct.Struct(">i")


class OffsetPosition(NamedTuple):
    """An offset and the byte position in the ``.log`` of the batch the index entry points at."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex[OffsetPosition]):
    """Memory-mapped ``.index`` file of one segment (see :class:`AbstractIndex` for opening modes)."""

    entry_size: ClassVar[int] = 8
    _WARM_ENTRIES: ClassVar[int] = WARM_SECTION_BYTES // entry_size
    _OFFSET_FIELD: ClassVar[IndexField] = IndexField(0, INT32_FIELD, True)
    _POSITION_FIELD: ClassVar[IndexField] = IndexField(4, INT32_FIELD, False)

    def _parse(self, slot: int) -> OffsetPosition:
        relative, position = _ENTRY.unpack_from(self._buffer(), slot * 8)
        return OffsetPosition(self.base_offset + relative, position)

    def _slot_offset(self, slot: int) -> int:
        relative: int = _I32.unpack_from(self._buffer(), slot * 8)[0]
        return self.base_offset + relative

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty. O(1)."""
        return self._last_fields()[1] if self._entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``.

        IndexFullError when no slot is left, InvalidOffsetError unless ``offset`` exceeds the last offset (on a
        non-empty index), IndexOffsetOverflowError when it does not fit a relative offset; Kafka's order of checks.
        O(1).
        """
        self._append_offset_entry(offset, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= ``target_offset``, else ``(base_offset, 0)``. O(log n)."""
        slot = self._largest_lower_bound_slot(target_offset, self._OFFSET_FIELD)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self._parse(slot)

    def fetch_upper_bound_offset(self, fetch_position: int, fetch_size: int) -> OffsetPosition | None:
        """An entry whose position is >= ``fetch_position + fetch_size`` (an offset surely past the fetched
        bytes), or None. Kafka's search: usually the smallest such entry, but when slot 0 itself matches exactly in
        the cold section the next slot is answered (None for a single entry). O(log n)."""
        slot = self._smallest_upper_bound_slot(fetch_position + fetch_size, self._POSITION_FIELD)
        return None if slot < 0 else self._parse(slot)

    def sanity_check(self) -> None:
        """Kafka's ``OffsetIndex.sanityCheck``: a non-empty index whose last offset is below the base offset, or a
        length that is not a multiple of 8, raises CorruptIndexError. O(1)."""
        if self._entries and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"last offset {self.last_offset} is less than the base offset {self.base_offset}",
                path=self._path,
                position=self.size_in_bytes - 8,
            )
        length_error = self._length_error()
        if length_error is not None:
            raise length_error

    def check(self, log_size: int | None = None) -> list[CorruptIndexError]:
        """Findings for ``verify`` that need no ``.log`` content: length, zero fill of an untrimmed file, offsets
        below the base or not strictly increasing, positions negative, decreasing, or (given ``log_size``) not
        inside the log file. O(n)."""
        findings, checked = self._structural_findings()
        previous: OffsetPosition | None = None
        for slot in range(checked):
            current = self._parse(slot)
            problems = []
            if current.offset < self.base_offset:
                problems.append(f"offset {current.offset} is below the base offset {self.base_offset}")
            if previous is not None and current.offset <= previous.offset:
                problems.append(f"offset {current.offset} does not increase (previous {previous.offset})")
            if current.position < 0:
                problems.append(f"negative position {current.position}")
            elif previous is not None and current.position < previous.position:
                problems.append(f"position {current.position} decreases (previous {previous.position})")
            if log_size is not None and current.position >= log_size:
                problems.append(f"position {current.position} is outside the {log_size}-byte log")
            findings.extend(CorruptIndexError(p, path=self._path, position=slot * 8) for p in problems)
            previous = current
        return findings
