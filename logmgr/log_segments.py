"""The segments of one log, keyed by base offset (Kafka's ``LogSegments``).

Backed by a :class:`sortedcontainers.SortedDict`. Kafka uses a concurrent skip list so readers can look segments
up while the writer rolls and deletes; here every operation takes a short internal lock, so a reader's lookup is
atomic with respect to the writer's structural changes (add, remove, replace). The lock guards only the map:
the segments' own files follow the one-writer/many-readers rule of :mod:`segments.log_segment`.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator

from sortedcontainers import SortedDict

from segments._native.append import LogSegmentsState
from segments.log_segment import LogSegment


class LogSegments(LogSegmentsState):
    """Ordered map ``base offset -> LogSegment``; its fields are those of the compiled
    :class:`~segments._native.append.LogSegmentsState` (the append reads the newest segment from C)."""

    _segments: SortedDict
    _lock: threading.RLock
    _last: LogSegment | None
    _floor_snapshot: tuple[list[int], list[LogSegment]] | None

    def __init__(self, segments: Iterable[LogSegment] = ()) -> None:
        """The map of ``segments`` (a later one with the same base offset replaces an earlier one, as
        :meth:`add` would), built in one go: O(n log n), O(n) when they come in ascending order."""
        by_base = {segment.base_offset: segment for segment in segments}
        self._segments = SortedDict(by_base)
        self._lock = threading.RLock()
        # (base offsets, segments) as two lists for floor_segment's C bisect (every fetch's first step) and for
        # values() of the whole log (every timestamp lookup's): dropped by each structural change under the lock,
        # rebuilt by the next lookup. A reader that took the old pair just before a change answers as if it had
        # looked up before it. Made here from the plain dict (a log load asks for it at once).
        keys = sorted(by_base)
        self._floor_snapshot = (keys, list(map(by_base.__getitem__, keys)))
        # The newest segment, kept in step by every structural change: every append asks for it, and a
        # SortedDict peek costs microseconds.
        self._set_last(by_base[keys[-1]] if keys else None)

    # -- structure -------------------------------------------------------------------------------------------

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert (or replace) the segment at its base offset; return the one replaced. O(log n)."""
        with self._lock:
            previous: LogSegment | None = self._segments.get(segment.base_offset)
            self._segments[segment.base_offset] = segment
            self._floor_snapshot = None
            if self._last is None or segment.base_offset >= self._last.base_offset:
                self._set_last(segment)
            return previous

    def remove(self, base_offset: int) -> LogSegment | None:
        """Remove and return the segment at ``base_offset`` (``None`` if absent). O(log n)."""
        with self._lock:
            removed: LogSegment | None = self._segments.pop(base_offset, None)
            self._floor_snapshot = None
            if removed is not None and removed is self._last:
                self._set_last(self._segments.peekitem(-1)[1] if self._segments else None)
            return removed

    def clear(self) -> list[LogSegment]:
        """Remove every segment; return them oldest first. O(n)."""
        with self._lock:
            segments = list(self._segments.values())
            self._segments.clear()
            self._floor_snapshot = None
            self._set_last(None)
            return segments

    def close(self) -> None:
        """Close every segment (trimming indexes). O(n)."""
        for segment in self.values():
            segment.close()

    # -- lookups ---------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._segments)

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._segments

    def is_empty(self) -> bool:
        """O(1)."""
        return not self._segments

    def get(self, base_offset: int) -> LogSegment | None:
        """The segment starting exactly at ``base_offset``. O(log n)."""
        segment: LogSegment | None = self._segments.get(base_offset)
        return segment

    def base_offsets(self) -> list[int]:
        """Every base offset, ascending. O(n)."""
        return list(self._snapshot()[0])

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Segments with ``from_offset <= base < to_offset`` (both bounds optional), oldest first. O(log n + k)."""
        if from_offset is None and to_offset is None:
            return list(self._snapshot()[1])
        with self._lock:
            keys = self._segments.irange(from_offset, to_offset, inclusive=(True, False))
            return [self._segments[k] for k in keys]

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def first_segment(self) -> LogSegment | None:
        """The oldest segment. O(1)."""
        with self._lock:
            if not self._segments:
                return None
            segment: LogSegment = self._segments.peekitem(0)[1]
            return segment

    def last_segment(self) -> LogSegment | None:
        """The newest (active) segment. O(1), lock-free (one attribute read)."""
        return self._last

    @property
    def active_segment(self) -> LogSegment:
        """The newest segment; a log always has one once loaded. O(1)."""
        segment = self._last
        if segment is None:
            raise LookupError("the log has no segment")
        return segment

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset ``<= offset`` (the one holding ``offset``). O(log n); O(n) for
        the first lookup after a structural change."""
        snapshot = self._floor_snapshot
        if snapshot is None:
            # Every read's lookup: the rebuild's call only after a structural change.
            snapshot = self._snapshot()
        index = bisect_right(snapshot[0], offset)
        return snapshot[1][index - 1] if index else None

    def _snapshot(self) -> tuple[list[int], list[LogSegment]]:
        """The (base offsets, segments) lists, rebuilt under the lock if a structural change dropped them. O(1);
        O(n) after a change."""
        snapshot = self._floor_snapshot
        if snapshot is None:
            with self._lock:
                # Iterating the map itself and looking the values up are C-level; its keys() and values() views
                # iterate through Python generators, three times slower.
                keys = list(self._segments)
                snapshot = self._floor_snapshot = (keys, list(map(self._segments.__getitem__, keys)))
        return snapshot

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The first segment with base offset ``> offset``. O(log n)."""
        with self._lock:
            index = self._segments.bisect_right(offset)
            if index == len(self._segments):
                return None
            segment: LogSegment = self._segments.peekitem(index)[1]
            return segment

    def lower_segment(self, offset: int) -> LogSegment | None:
        """The last segment with base offset ``< offset``. O(log n)."""
        with self._lock:
            index = self._segments.bisect_left(offset)
            if index == 0:
                return None
            segment: LogSegment = self._segments.peekitem(index - 1)[1]
            return segment

    def size_in_bytes(self) -> int:
        """Total ``.log`` bytes of all segments. O(n)."""
        return sum(segment.size for segment in self.values())

    def _check(self) -> None:
        """Assert the invariants: keys equal base offsets, ascending."""
        with self._lock:
            keys = list(self._segments.keys())
            assert keys == sorted(keys)
            for key, segment in self._segments.items():
                assert segment.base_offset == key
            assert self._last is (self._segments.peekitem(-1)[1] if self._segments else None)
            snapshot = self._floor_snapshot
            assert snapshot is None or (snapshot[0] == keys and snapshot[1] == list(self._segments.values()))
