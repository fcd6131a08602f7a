"""Kafka's time index (``.timeindex``): sparse map from max timestamps to offsets.

Each 12-byte entry is ``i64 timestamp | i32 relativeOffset`` (big-endian). An entry ``(t, o)`` means the largest
timestamp seen up to offset ``o`` is ``t``. Timestamps strictly increase; offsets never decrease. The last slot is
reserved for the entry written when the segment rolls or closes.
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

from segments.abstract_index import (
    INT32_FIELD,
    INT64_FIELD,
    WARM_SECTION_BYTES,
    AbstractIndex,
    IndexField,
)
from segments.errors import CorruptIndexError

_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    """A timestamp and the offset the time index associates with it."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex[TimestampOffset]):
    """Memory-mapped ``.timeindex`` file of one segment (see :class:`AbstractIndex` for opening modes)."""

    entry_size: ClassVar[int] = 12
    # The last slot is kept for the roll/close entry: is_full() is true one entry early.
    reserved_slots: ClassVar[int] = 1
    _WARM_ENTRIES: ClassVar[int] = WARM_SECTION_BYTES // entry_size
    _OFFSET_FIELD: ClassVar[IndexField] = IndexField(8, INT32_FIELD, True)
    _TIMESTAMP_FIELD: ClassVar[IndexField] = IndexField(0, INT64_FIELD, False)

    def _parse(self, slot: int) -> TimestampOffset:
        timestamp, relative = _ENTRY.unpack_from(self._buffer(), slot * 12)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def _slot_timestamp(self, slot: int) -> int:
        timestamp: int = _I64.unpack_from(self._buffer(), slot * 12)[0]
        return timestamp

    def _slot_offset(self, slot: int) -> int:
        relative: int = _I32.unpack_from(self._buffer(), slot * 12 + 8)[0]
        return self.base_offset + relative

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty. O(1)."""
        if not self._entries:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        _, timestamp, offset = self._last_fields()
        return TimestampOffset(timestamp, offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` exceeds the last timestamp (-1 for an empty index).

        Kafka's rules, in order: IndexFullError if full (unless ``skip_full_check``, used for the roll/close entry);
        on a non-empty index InvalidOffsetError if ``offset`` < last offset or ``timestamp`` < last timestamp (equal
        values are accepted and, for an equal timestamp, ignored); IndexOffsetOverflowError if the offset does not
        fit. IndexFullError also when not even the reserved slot is free. O(1).
        """
        self._maybe_append_time_entry(timestamp, offset, skip_full_check)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= ``target_timestamp``, else ``(-1, base_offset)``. O(log n)."""
        slot = self._largest_lower_bound_slot(target_timestamp, self._TIMESTAMP_FIELD)
        return TimestampOffset(NO_TIMESTAMP, self.base_offset) if slot < 0 else self._parse(slot)

    def sanity_check(self) -> None:
        """Kafka's ``TimeIndex.sanityCheck``: on a non-empty index, a last timestamp below the first one or a last
        offset below the base offset; or a length that is not a multiple of 12; raises CorruptIndexError. O(1)."""
        if self._entries:
            last = self.last_entry
            first_timestamp = self._slot_timestamp(0)
            last_position = self.size_in_bytes - 12
            if last.timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"last timestamp {last.timestamp} is less than the first timestamp {first_timestamp}",
                    path=self._path,
                    position=last_position,
                )
            if last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"last offset {last.offset} is less than the base offset {self.base_offset}",
                    path=self._path,
                    position=last_position,
                )
        length_error = self._length_error()
        if length_error is not None:
            raise length_error

    def check(self) -> list[CorruptIndexError]:
        """Findings for ``verify`` that need no ``.log`` content: length, zero fill of an untrimmed file, negative
        timestamps, timestamps not strictly increasing, offsets below the base or decreasing. O(n)."""
        findings, checked = self._structural_findings()
        previous: TimestampOffset | None = None
        for slot in range(checked):
            current = self._parse(slot)
            problems = []
            if current.timestamp < 0:
                problems.append(f"negative timestamp {current.timestamp}")
            elif previous is not None and current.timestamp <= previous.timestamp:
                problems.append(
                    f"timestamp {current.timestamp} does not increase (previous {previous.timestamp})"
                )
            if current.offset < self.base_offset:
                problems.append(f"offset {current.offset} is below the base offset {self.base_offset}")
            elif previous is not None and current.offset < previous.offset:
                problems.append(f"offset {current.offset} decreases (previous {previous.offset})")
            findings.extend(CorruptIndexError(p, path=self._path, position=slot * 12) for p in problems)
            previous = current
        return findings
