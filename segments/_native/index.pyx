# cython: language_level=3, boundscheck=False, wraparound=False
"""Kafka's index search (``AbstractIndex.indexSlotRangeFor``) over an index file's memory map.

Entries are fixed-size big-endian records; the searched field is a 32-bit value (relative offset or position,
the former plus the base offset) or a 64-bit timestamp at a fixed place in the entry. The last
``warm_entries`` entries are searched alone when the target lies beyond the first of them (Kafka's warm
section), so lookups near the end touch the same pages. Reads never go past ``entries`` whole entries of the
map (clamped to its length).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t

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
