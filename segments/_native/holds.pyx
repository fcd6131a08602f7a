# cython: language_level=3
"""Reader hold counts for reader-safe segment deletion (:class:`logmgr.segment_deleter.SegmentReaders`), taken and
released on every read: without a lock, as each method's bookkeeping is atomic (see :class:`HoldCounts`)."""

from cpython.long cimport PyLong_FromVoidPtr

cdef enum:
    # The count of an object being closed: readers do not take it until the close is over.
    _CLOSING = -1


cdef class HoldCounts:
    """Counts of readers holding each object (by identity), and the closes deferred to the last release.

    Every method finishes its bookkeeping before it runs any Python code: it holds the GIL and only does dict
    operations on int keys (which never call back into Python), so each is atomic without a lock. An object is
    closed (``close(obj)``) with its count set to closing, so a reader that looked it up earlier cannot take it
    while its files are being closed: :meth:`acquire` says no, and once the close is over the reader takes it
    and finds it closed."""

    cdef dict _counts
    cdef dict _deferred
    cdef object _close

    def __cinit__(self, close):
        self._counts = {}
        self._deferred = {}
        self._close = close

    def acquire(self, obj):
        """Start holding ``obj``: True, or False while it is being closed (not held then). O(1)."""
        key = PyLong_FromVoidPtr(<void *>obj)
        cdef Py_ssize_t count = self._counts.get(key, 0)
        if count == _CLOSING:
            return False
        self._counts[key] = count + 1
        return True

    def release(self, obj):
        """Stop holding ``obj`` (taken by :meth:`acquire`); the last reader of an object whose close was
        deferred closes it. O(1)."""
        key = PyLong_FromVoidPtr(<void *>obj)
        cdef Py_ssize_t remaining = <Py_ssize_t>self._counts[key] - 1
        if remaining:
            self._counts[key] = remaining
            return
        deferred = self._deferred.pop(key, None) if self._deferred else None
        if deferred is None:
            del self._counts[key]
            return
        self._closing(key, deferred)

    def readers(self, obj):
        """How many readers hold ``obj`` now. O(1)."""
        cdef Py_ssize_t count = self._counts.get(PyLong_FromVoidPtr(<void *>obj), 0)
        return max(count, 0)

    def close_when_released(self, obj):
        """Close ``obj`` now if nobody holds it, else when its last reader releases it; whether the close was
        deferred. O(1) plus the close."""
        key = PyLong_FromVoidPtr(<void *>obj)
        if self._counts.get(key, 0) == 0:
            self._closing(key, obj)
            return False
        self._deferred[key] = obj
        return True

    cdef _closing(self, key, obj):
        self._counts[key] = _CLOSING
        try:
            self._close(obj)
        finally:
            del self._counts[key]
