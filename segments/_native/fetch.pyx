# cython: language_level=3
"""The fields of a fetch result, compiled: the immutable base of :class:`logmgr.log.FetchDataInfo`, built on every
read (a dataclass's Python ``__init__`` cost as much as the index search it reports)."""

from segments.records import DEFAULT_DECODE_LIMITS


cdef class FetchData:
    """A fetch result's seven fields, read-only; compared (with an instance of the same class), hashed and shown by
    value, as the dataclass it replaces. Subclasses add methods only (``__slots__ = ()``), so they stay
    immutable."""

    cdef readonly object offset
    cdef readonly object records
    cdef readonly object segment_base_offset
    cdef readonly object position
    cdef readonly object aborted_transactions
    cdef readonly object path
    cdef readonly object limits

    __match_args__ = (
        "offset", "records", "segment_base_offset", "position", "aborted_transactions", "path", "limits"
    )

    def __init__(self, offset, records, segment_base_offset, position, aborted_transactions=None,
                 path=None, limits=DEFAULT_DECODE_LIMITS):
        self.offset = offset
        self.records = records
        self.segment_base_offset = segment_base_offset
        self.position = position
        self.aborted_transactions = aborted_transactions
        self.path = path
        self.limits = limits

    cdef tuple _key(self):
        return (self.offset, self.records, self.segment_base_offset, self.position, self.aborted_transactions,
                self.path, self.limits)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == (<FetchData>other)._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (
            f"{type(self).__qualname__}(offset={self.offset!r}, records={self.records!r}, "
            f"segment_base_offset={self.segment_base_offset!r}, position={self.position!r}, "
            f"aborted_transactions={self.aborted_transactions!r}, path={self.path!r}, limits={self.limits!r})"
        )

    def __reduce__(self):
        return type(self), self._key()
