# cython: language_level=3
"""Reader hold counts for reader-safe segment deletion (:class:`logmgr.segment_deleter.SegmentReaders`), taken and
released on every read: without a lock, as each method's bookkeeping is atomic (see :class:`HoldCounts`)."""

cdef enum:
    # The count of an object being closed: readers do not take it until the close is over.
    _CLOSING = -1


cdef class _Hold:
    """One object's readers: their count (or ``_CLOSING``), and the object itself while its close waits for the
    last of them (else None)."""

    cdef Py_ssize_t count
    cdef object deferred


cdef inline _Hold _hold_of(obj):
    """``obj``'s hold, made and attached on first need (attribute ``_reader_hold``). Runs no Python code: plain
    instance attribute reads and writes, as :class:`HoldCounts` requires of the objects it holds."""
    cdef object hold = getattr(obj, "_reader_hold", None)
    if hold is None:
        hold = _Hold.__new__(_Hold)
        obj._reader_hold = hold
    return <_Hold>hold


cdef class HoldCounts:
    """Counts of readers holding each object, and the closes deferred to the last release.

    Each object's count is kept in the object itself (a small native record in its ``_reader_hold`` attribute,
    attached on first hold): a hold is an attribute read and a field update, with no per-read entry keyed by
    identity. The objects held must keep that attribute plain (no ``__getattr__``, ``__setattr__``, property or
    slot of that name). Every method then finishes its bookkeeping before it runs any Python code: it holds the
    GIL and only reads and writes that attribute and the record's fields, so each is atomic without a lock. An
    object is closed (``close(obj)``) with its count set to closing, so a reader that looked it up earlier cannot
    take it while its files are being closed: :meth:`acquire` says no, and once the close is over the reader
    takes it and finds it closed."""

    cdef object _close

    def __cinit__(self, close):
        self._close = close

    def acquire(self, obj):
        """Start holding ``obj``: True, or False while it is being closed (not held then). O(1)."""
        cdef _Hold hold = _hold_of(obj)
        if hold.count == _CLOSING:
            return False
        hold.count += 1
        return True

    def release(self, obj):
        """Stop holding ``obj`` (taken by :meth:`acquire`); the last reader of an object whose close was
        deferred closes it. O(1)."""
        cdef _Hold hold = _hold_of(obj)
        if hold.count <= 0:
            raise ValueError(f"{obj!r} is not held")
        hold.count -= 1
        if hold.count == 0 and hold.deferred is not None:
            hold.deferred = None
            self._closing(hold, obj)

    def readers(self, obj):
        """How many readers hold ``obj`` now. O(1)."""
        return max(_hold_of(obj).count, 0)

    def close_when_released(self, obj):
        """Close ``obj`` now if nobody holds it, else when its last reader releases it; whether the close was
        deferred. O(1) plus the close."""
        cdef _Hold hold = _hold_of(obj)
        if hold.count == 0:
            self._closing(hold, obj)
            return False
        # The object is kept by its own hold until the close (a cycle the close breaks).
        hold.deferred = obj
        return True

    cdef _closing(self, _Hold hold, obj):
        hold.count = _CLOSING
        try:
            self._close(obj)
        finally:
            hold.count = 0
