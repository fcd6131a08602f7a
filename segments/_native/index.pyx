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

from segments._native.wire cimport store_be32, store_be64

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


def store_entry(buffer, Py_ssize_t slot, int entry_size, int64_t first, int32_t second):
    """Write entry ``slot`` of an index map: an offset entry (``entry_size`` 8: int32 ``first`` = relative offset,
    int32 ``second`` = position) or a time entry (12: int64 ``first`` = timestamp, int32 ``second`` = relative
    offset), big-endian. ``ValueError`` for no map (``None``), ``IndexError`` unless the whole entry lies inside the map; ``OverflowError`` for a first
    field outside int32 in an offset entry. O(1)."""
    cdef Py_buffer view
    cdef uint8_t *p
    if buffer is None:
        raise ValueError("the index is not mapped (closed, or of length 0)")
    if entry_size != 8 and entry_size != 12:
        raise ValueError(f"no index has {entry_size}-byte entries")
    if entry_size == 8 and not -2147483648 <= first <= 2147483647:
        raise OverflowError(f"{first} does not fit an int32 index field")
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        if slot < 0 or (slot + 1) * entry_size > view.len:
            raise IndexError(f"index slot {slot} lies outside a {view.len}-byte map")
        p = <uint8_t *>view.buf + slot * entry_size
        if entry_size == 8:
            store_be32(p, <uint32_t><int32_t>first)
            store_be32(p + 4, <uint32_t>second)
        else:
            store_be64(p, <uint64_t>first)
            store_be32(p + 8, <uint32_t>second)
    finally:
        PyBuffer_Release(&view)
