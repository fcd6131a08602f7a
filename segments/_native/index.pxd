# cython: language_level=3
"""Kafka's index slot search (``AbstractIndex.indexSlotRangeFor``) over entries in memory, shared by
:mod:`segments._native.index` (the indexes' own lookups) and :mod:`segments._native.batches` (a fetch's offset
lookup and batch header hop in one call), and the append state of an index (:class:`IndexEntries`), whose C
methods the segment append of :mod:`segments._native.append` calls."""

from libc.stdint cimport int32_t, int64_t, uint8_t

from segments._native.wire cimport load_be32, load_be64


cdef inline int64_t index_field(const uint8_t *p, bint wide, int64_t base) noexcept nogil:
    if wide:
        return <int64_t>load_be64(p)
    return base + <int32_t>load_be32(p)


cdef inline Py_ssize_t search_slot(const uint8_t *data, Py_ssize_t entries, Py_ssize_t entry_size, bint wide,
                                   int64_t base, int64_t target, bint largest_lower_bound,
                                   Py_ssize_t warm_entries) noexcept nogil:
    """Slot of the largest entry whose field (at ``data`` in the first entry: ``entries`` > 0 whole entries must
    be readable from ``data``) is <= ``target`` (``largest_lower_bound``) or Kafka's smallest upper bound (an
    entry whose field is >= target; when slot 0 itself matches exactly in the cold section the next slot is
    answered, as Kafka's loop never probes ``lo``), -1 when none. The last ``warm_entries`` entries are searched
    alone when the target lies beyond the first of them (Kafka's warm section). O(log entries)."""
    cdef Py_ssize_t lo, hi, mid
    cdef int64_t found
    cdef Py_ssize_t first_warm = max(<Py_ssize_t>0, entries - 1 - warm_entries)
    if index_field(data + first_warm * entry_size, wide, base) < target:
        lo = first_warm
        hi = entries - 1
    elif index_field(data, wide, base) > target:
        return -1 if largest_lower_bound else 0
    else:
        lo = 0
        hi = first_warm
    while lo < hi:
        mid = (lo + hi + 1) // 2
        found = index_field(data + mid * entry_size, wide, base)
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    if largest_lower_bound:
        return lo
    return -1 if lo == entries - 1 else lo + 1


cdef class IndexEntries:
    cdef public object _mm
    cdef public Py_ssize_t _entries
    cdef public Py_ssize_t _max_entries
    cdef public int64_t base_offset
    cdef public bint writable
    cdef public bint _closed
    cdef Py_ssize_t _last_count
    cdef int64_t _last_first
    cdef int64_t _last_second
    cdef int _entry_size
    cdef Py_ssize_t _reserved_slots
    cdef Py_buffer _held      # a writable view of the map while _holding (see _hold_map)
    cdef bint _holding

    cdef int _load_last(self) except -1
    cdef int _store(self, int64_t first, int64_t second, int64_t last_first, int64_t last_second) except -1
    cdef int _append_offset(self, int64_t offset, int64_t position) except -1
    cdef int _maybe_append_time(self, int64_t timestamp, int64_t offset, bint skip_full_check,
                                bint timestamp_too_large) except -1
    cdef bint _full(self) noexcept
