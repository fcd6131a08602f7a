# cython: language_level=3, boundscheck=False, wraparound=False
"""Kafka's index search (``AbstractIndex.indexSlotRangeFor``) over an index file's memory map.

Entries are fixed-size big-endian records; the searched field is a 32-bit value (relative offset or position,
the former plus the base offset) or a 64-bit timestamp at a fixed place in the entry. The last
``warm_entries`` entries are searched alone when the target lies beyond the first of them (Kafka's warm
section), so lookups near the end touch the same pages. Reads never go past ``entries`` whole entries of the
map (clamped to its length).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from segments._native.wire cimport load_be32, load_be64, store_be32, store_be64

from segments.errors import IndexFullError, InvalidOffsetError

# Field kinds (the ``field`` argument of :func:`search`).
FIELD_INT32 = 0
FIELD_INT64 = 1


def search(buffer, Py_ssize_t entries, int entry_size, int field_offset, int field, int64_t base, int64_t target,
           bint largest_lower_bound, Py_ssize_t warm_entries):
    """Slot of the largest entry whose field is <= ``target`` (``largest_lower_bound``) or Kafka's smallest upper
    bound (an entry whose field is >= target; when slot 0 itself matches exactly in the cold section the next
    slot is answered, as Kafka's loop never probes ``lo``), -1 when none (:func:`search_slot`). O(log entries),
    no GIL held."""
    cdef Py_buffer view
    cdef Py_ssize_t result
    cdef bint wide = field == FIELD_INT64
    if entries <= 0:
        return -1
    if entry_size <= 0 or field_offset < 0 or field_offset + (8 if wide else 4) > entry_size:
        raise ValueError(f"field at {field_offset} does not fit {entry_size}-byte entries")
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        entries = min(entries, view.len // entry_size)
        if entries <= 0:
            return -1
        with nogil:
            result = search_slot(<const uint8_t *>view.buf + field_offset, entries, entry_size, wide, base, target,
                                 largest_lower_bound, warm_entries)
        return result
    finally:
        PyBuffer_Release(&view)


cdef int64_t _INT32_MAX = 2147483647


cdef class IndexEntries:
    """The append state of one index map, in C fields that the Python index (:class:`segments.abstract_index.
    AbstractIndex` derives from this class) and the compiled appends share: the map, its slot count, the entry
    count, and the last entry's two fields (cached as the last append wrote them or a read parsed them: every append
    compares against it). Entries are added only here; the Python side changes the count on truncation and
    reload, which invalidates the cache (its count no longer matches)."""

    # Fields and C methods: declared in index.pxd (the segment append calls them).

    def __cinit__(self, *args, **kwargs):
        self._last_count = -1
        self._entry_size = getattr(type(self), "entry_size", 0)
        # Slots only a roll or close may fill (the time index keeps its last one for the final entry).
        self._reserved_slots = getattr(type(self), "reserved_slots", 0)

    def __dealloc__(self):
        if self._holding:
            PyBuffer_Release(&self._held)

    def _hold_map(self, mapped):
        """Hold a writable view of ``mapped`` (the index's new map, or None) for :meth:`_store`, releasing the view
        held on the map before: ``AbstractIndex._map`` and ``_unmap`` call it, so a map is never closed while held,
        and the writer's stores take no buffer of their own (one per entry cost a fifth of an append's
        bookkeeping). A read-only index holds nothing. O(1)."""
        if self._holding:
            self._holding = False
            PyBuffer_Release(&self._held)
        if mapped is not None and self.writable:
            PyObject_GetBuffer(mapped, &self._held, PyBUF_SIMPLE | PyBUF_WRITABLE)
            self._holding = True

    def _forget_last(self):
        """Drop the cached last entry (the entries were rewritten). O(1)."""
        self._last_count = -1

    def _last_fields(self):
        """(entry count, the last entry's two fields as the entry tuple gives them) of a non-empty index. O(1)."""
        self._load_last()
        return (self._entries, self._last_first, self._last_second)

    cdef int _load_last(self) except -1:
        cdef Py_buffer view
        cdef const uint8_t *p
        cdef Py_ssize_t slot = self._entries - 1
        if self._last_count == self._entries:
            return 0
        if slot < 0:
            raise ValueError(f"{self._path}: the index has no entry")
        if self._mm is None:
            raise ValueError(f"{self._path}: index is closed")
        PyObject_GetBuffer(self._mm, &view, PyBUF_SIMPLE)
        try:
            if (slot + 1) * self._entry_size > view.len:
                raise IndexError(f"index slot {slot} lies outside a {view.len}-byte map")
            p = <const uint8_t *>view.buf + slot * self._entry_size
            if self._entry_size == 8:
                self._last_first = self.base_offset + <int32_t>load_be32(p)
                self._last_second = <int32_t>load_be32(p + 4)
            else:
                self._last_first = <int64_t>load_be64(p)
                self._last_second = self.base_offset + <int32_t>load_be32(p + 8)
        finally:
            PyBuffer_Release(&view)
        self._last_count = self._entries
        return 0

    cdef int _store(self, int64_t first, int64_t second, int64_t last_first, int64_t last_second) except -1:
        """Write the next entry (``first``/``second`` as stored, relative already) and count it, caching
        (``last_first``, ``last_second``) as its parsed fields. O(1)."""
        cdef uint8_t *p
        cdef Py_ssize_t slot = self._entries
        if not self._holding:  # held exactly while a writable map is (see _hold_map)
            raise ValueError("the index is not mapped for writing (closed, read-only, or of length 0)")
        if (slot + 1) * self._entry_size > self._held.len:
            raise IndexError(f"index slot {slot} lies outside a {self._held.len}-byte map")
        p = <uint8_t *>self._held.buf + slot * self._entry_size
        if self._entry_size == 8:
            store_be32(p, <uint32_t><int32_t>first)
            store_be32(p + 4, <uint32_t><int32_t>second)
        else:
            store_be64(p, <uint64_t>first)
            store_be32(p + 8, <uint32_t><int32_t>second)
        self._entries = slot + 1
        self._last_count = slot + 1
        self._last_first = last_first
        self._last_second = last_second
        return 0

    cdef int _append_offset(self, int64_t offset, int64_t position) except -1:
        """OffsetIndex.append (see there), Kafka's order of checks. O(1)."""
        cdef Py_ssize_t entries = self._entries
        if self._closed or not self.writable:
            self._require_writable()
        if entries >= self._max_entries:
            raise IndexFullError(f"append to a full index ({entries} entries)", path=self._path)
        if entries:
            self._load_last()
            if offset <= self._last_first:
                raise InvalidOffsetError(
                    f"offset {offset} appended at slot {entries} is not larger than the last offset "
                    f"{self._last_first}",
                    path=self._path,
                    position=entries * 8,
                )
        if not 0 <= position <= _INT32_MAX:
            raise ValueError(f"{self._path}: file position {position} does not fit an int32")
        if not 0 <= offset - self.base_offset <= _INT32_MAX:
            self.relative_offset(offset)  # raises IndexOffsetOverflowError
        return self._store(offset - self.base_offset, position, offset, position)

    cdef int _maybe_append_time(self, int64_t timestamp, int64_t offset, bint skip_full_check,
                                bint timestamp_too_large) except -1:
        """TimeIndex.maybe_append (see there), Kafka's order of checks; ``timestamp_too_large``: the caller's
        timestamp lies above int64 (``timestamp`` is then clamped). O(1)."""
        cdef Py_ssize_t entries = self._entries
        cdef int64_t last_timestamp = -1
        if self._closed or not self.writable:
            self._require_writable()
        if not skip_full_check and self._full():
            raise IndexFullError(f"append to a full time index ({entries} entries)", path=self._path)
        if entries:
            self._load_last()
            last_timestamp = self._last_first
            if offset < self._last_second:
                raise InvalidOffsetError(
                    f"offset {offset} appended at slot {entries} is smaller than the last offset "
                    f"{self._last_second}",
                    path=self._path,
                    position=entries * 12,
                )
            if timestamp < last_timestamp:
                raise InvalidOffsetError(
                    f"timestamp {timestamp} appended at slot {entries} is smaller than the last timestamp "
                    f"{last_timestamp}",
                    path=self._path,
                    position=entries * 12,
                )
        if timestamp <= last_timestamp and not timestamp_too_large:
            return 0
        if timestamp_too_large:
            raise ValueError(f"{self._path}: timestamp {1 << 63} or more does not fit an int64")
        if entries >= self._max_entries:
            raise IndexFullError(f"no slot left in the time index ({entries} entries)", path=self._path)
        if not 0 <= offset - self.base_offset <= _INT32_MAX:
            self.relative_offset(offset)  # raises IndexOffsetOverflowError
        return self._store(timestamp, offset - self.base_offset, timestamp, offset)

    def _append_offset_entry(self, offset, position):
        """:meth:`OffsetIndex.append`'s compiled body (any ints: values outside int64 are clamped, which keeps every
        check's outcome). O(1)."""
        self._append_offset(_clamp(offset), _clamp(position))

    def _maybe_append_time_entry(self, timestamp, offset, bint skip_full_check):
        """:meth:`TimeIndex.maybe_append`'s compiled body (any ints, as :meth:`_append_offset_entry`). O(1)."""
        self._maybe_append_time(_clamp(timestamp), _clamp(offset), skip_full_check, timestamp > _INT64_MAX_OBJ)

    cdef bint _full(self) noexcept:
        return self._entries >= self._max_entries - self._reserved_slots

    def is_full(self):
        """True when no slot is left for an append (the time index: only its reserved last slot is). O(1)."""
        return self._full()


_INT64_MAX_OBJ = (1 << 63) - 1


cdef int64_t _clamp(value) except? -1:
    if value > _INT64_MAX_OBJ:
        return <int64_t>_INT64_MAX_OBJ
    if value < -_INT64_MAX_OBJ - 1:
        return <int64_t>(-_INT64_MAX_OBJ - 1)
    return <int64_t>value
