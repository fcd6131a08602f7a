# cython: language_level=3, boundscheck=False, wraparound=False
"""Batch header walk and batch CRCs (Kafka's ``FileLogInputStream`` + ``DefaultRecordBatch`` header).

* :class:`RecordBatchHeader`: the 61-byte magic-2 header unpacked into C fields; ``segments.records``'s
  ``DefaultRecordBatch`` derives from it (record decode stays there).
* :class:`FileBatch` and :class:`BatchWalk`: Kafka's batch iteration over bytes fetched in windows, one object per
  batch and no Python-level work per batch.
* CRCs are computed per *run* of batches of one window with the GIL released: the first ``ensure_valid`` of a
  batch checksums it and the batches after it in its window (up to :data:`_CRC_RUN_BYTES`), the next ones find
  their CRC computed. A lookup that never checks a CRC pays nothing.

Every read of a byte is bounds-checked against the window it lies in; hostile sizes raise the typed errors of
``segments.errors`` with file positions.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.string cimport memcpy
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from posix.fcntl cimport O_CLOEXEC, O_RDONLY, open
from posix.stat cimport fstat, struct_stat
from posix.unistd cimport close

from segments._native.crc32c cimport logmgr_crc32c, logmgr_crc32c_init
from segments._native.fileio cimport (
    FILE_OK,
    O_NOFOLLOW,
    FileOutcome,
    encoded_path,
    file_failure,
    pread_full,
    write_if_different_at,
)
from segments._native.index cimport search_slot


cdef extern from "crc32c_batches.h" nogil:
    void logmgr_crc32c_many(const uint8_t *const *data, const size_t *length, uint32_t *out, int n)

from segments._native.wire cimport (
    ATTRIBUTE_CODEC_MASK,
    ATTRIBUTE_CONTROL,
    ATTRIBUTE_DELETE_HORIZON,
    ATTRIBUTE_LOG_APPEND_TIME,
    ATTRIBUTE_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORDS_COUNT_OFFSET,
    WIRE_OK,
    legacy_max_timestamp,
    load_be16,
    load_be32,
    load_be64,
    read_varint,
    read_varlong,
    store_be32,
    store_be64,
)

import os

from segments.errors import (
    CorruptIndexError,
    CorruptRecordError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    LogSegmentOffsetOverflowError,
    RecordTooLargeError,
    StorageFormatError,
    UnsupportedMagicError,
)

logmgr_crc32c_init()

cdef enum:
    # The largest window: 1 MiB stays in a core's second-level cache, so the walk and the CRC read the bytes the
    # pread just copied from there, and the allocator reuses the freed window instead of mapping fresh pages (an
    # 8 MiB window faulted in up to 40% of its pages per read): a whole-file header walk with CRC ran at 3.3 GB/s
    # with 8 MiB windows and 7 GB/s with 1 MiB (bench/header_walk.py).
    WINDOW_BYTES = 1024 * 1024
    FIRST_WINDOW_BYTES = 64 * 1024
    # A CRC run: at most this many batches / bytes per GIL release, so a reader that stops early wastes little.
    CRC_RUN_BATCHES = 256
    CRC_RUN_BYTES = 1024 * 1024

cdef int64_t _INT32_MAX = 2147483647
cdef int64_t _INT64_MAX = 9223372036854775807
cdef int64_t _INT64_MIN = -_INT64_MAX - 1


cdef inline int64_t _sat_add(int64_t a, int64_t b) noexcept nogil:
    """a + b clamped to int64 (hostile headers must not overflow): compares against an int64 target as the exact
    sum does."""
    if b > 0 and a > _INT64_MAX - b:
        return _INT64_MAX
    if b < 0 and a < _INT64_MIN - b:
        return _INT64_MIN
    return a + b

# The Python classes the walk instantiates (set by segments.file_records at import: records.py and legacy.py
# import this module, so it cannot import them).
cdef object _default_type = None
cdef object _legacy_type = None


def register(default_type, legacy_type):
    """Set the classes built for magic-2 batches (a subclass of :class:`RecordBatchHeader`) and magic 0/1
    messages. O(1)."""
    global _default_type, _legacy_type
    if not issubclass(default_type, RecordBatchHeader):
        raise TypeError(f"{default_type!r} does not derive from RecordBatchHeader")
    _default_type = default_type
    _legacy_type = legacy_type


cdef struct _CrcRun:
    # The CRCs of a run of batches of a window, in order, and the next one a walk is expected to ask for.
    int next
    int count
    Py_ssize_t pos[CRC_RUN_BATCHES]
    uint32_t crc[CRC_RUN_BATCHES]


cdef class _Window:
    """Bytes a walk fetched (or one batch given alone): the buffer export that keeps the pointer valid, and the
    CRCs of the current run of batches (``run``: allocated by the first run computed, so that a window never
    checked, as a header's or an empty one, is a small object: a new object is zeroed whole)."""

    cdef object obj
    cdef const uint8_t[::1] view
    cdef const uint8_t *data
    cdef Py_ssize_t size
    cdef bint immutable
    cdef _CrcRun *run

    def __dealloc__(self):
        PyMem_Free(self.run)

    cdef uint32_t crc_at(self, Py_ssize_t start, Py_ssize_t total):
        """CRC-32C of bytes [21, total) of the batch at ``start``, whose bytes lie in the window (callers made
        sure; total >= 61). O(1) when a run computed it, else O(run bytes) without the GIL."""
        cdef _CrcRun *run = self.run
        if not self.immutable:
            # A caller's bytearray may change between two checks: nothing is cached.
            return self._crc_alone(start, total)
        if run != NULL and run.next < run.count and run.pos[run.next] == start:
            run.next += 1
            return run.crc[run.next - 1]
        if run == NULL:
            run = self.run = <_CrcRun *>PyMem_Malloc(sizeof(_CrcRun))
            if run == NULL:
                # No memory for a run: this batch alone, nothing cached.
                return self._crc_alone(start, total)
            run.count = 0
        self._compute_run(start, total)
        run.next = 1
        return run.crc[0]

    cdef uint32_t _crc_alone(self, Py_ssize_t start, Py_ssize_t total):
        """:meth:`crc_at` of this one batch, nothing cached: without the GIL from ``CRC_RUN_BYTES``."""
        cdef uint32_t crc
        if total - ATTRIBUTES_OFFSET < CRC_RUN_BYTES:
            return logmgr_crc32c(0, self.data + start + ATTRIBUTES_OFFSET, <size_t>(total - ATTRIBUTES_OFFSET))
        with nogil:
            crc = logmgr_crc32c(0, self.data + start + ATTRIBUTES_OFFSET, <size_t>(total - ATTRIBUTES_OFFSET))
        return crc

    cdef void _compute_run(self, Py_ssize_t start, Py_ssize_t total):
        # Computed into locals without the GIL and published with it held: another thread checking a batch of the
        # same window meanwhile sees no run (and computes its own), never a half-written one.
        cdef const uint8_t *data = self.data
        cdef Py_ssize_t size = self.size
        cdef Py_ssize_t pos = start
        cdef Py_ssize_t run_bytes = 0
        cdef int n = 0
        cdef int i
        cdef int32_t length
        cdef Py_ssize_t run_pos[CRC_RUN_BATCHES]
        cdef uint32_t run_crc[CRC_RUN_BATCHES]
        cdef const uint8_t *run_data[CRC_RUN_BATCHES]
        cdef size_t run_length[CRC_RUN_BATCHES]
        cdef _CrcRun *run = self.run  # allocated by the caller
        run.count = 0
        with nogil:
            # The asked batch first (validated by its caller), then the whole magic-2 batches following it.
            run_pos[0] = start
            run_data[0] = data + start + ATTRIBUTES_OFFSET
            run_length[0] = <size_t>(total - ATTRIBUTES_OFFSET)
            n = 1
            run_bytes = total
            pos = start + total
            while n < CRC_RUN_BATCHES and run_bytes < CRC_RUN_BYTES and size - pos >= RECORD_BATCH_OVERHEAD:
                length = <int32_t>load_be32(data + pos + 8)
                if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or length > size - pos - LOG_OVERHEAD:
                    break
                if data[pos + 16] != MAGIC_V2:
                    break
                run_pos[n] = pos
                run_data[n] = data + pos + ATTRIBUTES_OFFSET
                run_length[n] = <size_t>(LOG_OVERHEAD + length - ATTRIBUTES_OFFSET)
                n += 1
                run_bytes += LOG_OVERHEAD + length
                pos += LOG_OVERHEAD + length
            logmgr_crc32c_many(run_data, run_length, run_crc, n)
        for i in range(n):
            run.pos[i] = run_pos[i]
            run.crc[i] = run_crc[i]
        run.count = n


cdef _Window _window_of(object buffer):
    cdef _Window window = _Window.__new__(_Window)
    window.obj = buffer
    if type(buffer) is bytes:
        # The common case (pread results): no buffer export needed, the bytes object is immutable.
        window.data = <const uint8_t *>PyBytes_AS_STRING(buffer)
        window.size = PyBytes_GET_SIZE(buffer)
        window.immutable = True
    else:
        window.immutable = type(buffer) is memoryview and buffer.readonly and type(buffer.obj) is bytes
        window.view = buffer
        window.size = window.view.shape[0]
        window.data = &window.view[0] if window.size else NULL
    return window


cdef class RecordBatchHeader:
    """The header of one magic-2 batch over ``buffer`` (exactly the batch's bytes, prefix included): fields
    unpacked on construction (O(1)), CRC checked on :meth:`ensure_valid` (O(size))."""

    cdef _Window _window
    cdef Py_ssize_t _start
    cdef readonly int64_t _base_offset
    cdef readonly int32_t _length
    cdef readonly int32_t _partition_leader_epoch
    cdef readonly int8_t _magic
    cdef readonly uint32_t _crc
    cdef readonly int16_t _attributes
    cdef readonly int32_t _last_offset_delta
    cdef readonly int64_t _base_timestamp
    cdef readonly int64_t _max_timestamp
    cdef readonly int64_t _producer_id
    cdef readonly int16_t _producer_epoch
    cdef readonly int32_t _base_sequence
    cdef readonly int32_t _records_count

    def __init__(self, buffer):
        cdef _Window window = _window_of(buffer)
        if window.size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt (the size {window.size} is smaller than the minimum allowed overhead "
                f"{RECORD_BATCH_OVERHEAD})",
                position=0,
            )
        _unpack(self, window, 0)
        if self._length + LOG_OVERHEAD != window.size:
            raise CorruptRecordError(
                f"batch length field {self._length} does not match the {window.size} bytes given", position=8
            )

    @property
    def _buffer(self):
        """The batch's bytes: the buffer given, or a view into the window a walk read. O(1)."""
        cdef Py_ssize_t total = self._length + LOG_OVERHEAD
        if self._start == 0 and total == self._window.size:
            return self._window.obj
        return memoryview(self._window.obj)[self._start : self._start + total]

    @property
    def magic(self):
        return self._magic

    @property
    def base_offset(self):
        return self._base_offset

    @property
    def last_offset_delta(self):
        return self._last_offset_delta

    @property
    def last_offset(self):
        # Summed as Python ints: a hostile header must not wrap around int64.
        return <object>self._base_offset + self._last_offset_delta

    @property
    def next_offset(self):
        return <object>self._base_offset + self._last_offset_delta + 1

    @property
    def size_in_bytes(self):
        return self._length + LOG_OVERHEAD

    @property
    def checksum(self):
        return self._crc

    @property
    def attributes(self):
        return self._attributes

    @property
    def base_timestamp(self):
        """Header field at byte 27: the first record's timestamp, or the delete horizon (attribute bit 6)."""
        return self._base_timestamp

    @property
    def first_timestamp(self):
        return self._base_timestamp

    @property
    def max_timestamp(self):
        return self._max_timestamp

    @property
    def is_transactional(self):
        return bool(self._attributes & ATTRIBUTE_TRANSACTIONAL)

    @property
    def is_control(self):
        return bool(self._attributes & ATTRIBUTE_CONTROL)

    @property
    def has_delete_horizon(self):
        return bool(self._attributes & ATTRIBUTE_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self):
        return self._base_timestamp if self._attributes & ATTRIBUTE_DELETE_HORIZON else None

    @property
    def producer_id(self):
        return self._producer_id

    @property
    def producer_epoch(self):
        return self._producer_epoch

    @property
    def base_sequence(self):
        return self._base_sequence

    @property
    def last_sequence(self):
        """Kafka's sequence arithmetic: wraps from ``Int.MAX`` to 0; -1 without a sequence."""
        cdef int64_t base = self._base_sequence
        cdef int64_t delta = self._last_offset_delta
        if base == -1:
            return -1
        if base > _INT32_MAX - delta:
            return delta - (_INT32_MAX - base) - 1
        return base + delta

    @property
    def partition_leader_epoch(self):
        return self._partition_leader_epoch

    @property
    def records_count(self):
        """The header's record count (outside the compressed area)."""
        return self._records_count

    def count_records(self):
        """The header's record count. O(1)."""
        return self._records_count

    def compute_checksum(self):
        """CRC-32C of bytes ``[21, size)`` (attributes to the end). O(size)."""
        return self._window.crc_at(self._start, self._length + LOG_OVERHEAD)

    def ensure_valid(self):
        """Kafka's ``ensureValid``: magic 2, size >= 61 and the stored CRC matches. O(size)."""
        cdef uint32_t computed
        if self._magic != MAGIC_V2:
            raise UnsupportedMagicError(f"record batch has unknown magic {self._magic}", position=16)
        computed = self._window.crc_at(self._start, self._length + LOG_OVERHEAD)
        if computed != self._crc:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {self._crc}, computed crc = {computed})", position=CRC_OFFSET
            )
        if self._records_count < 0:
            raise CorruptRecordError(f"found invalid record count {self._records_count}", position=57)


cdef inline void _unpack(RecordBatchHeader batch, _Window window, Py_ssize_t start) noexcept:
    """Fill the header fields from window bytes [start, start + 61), which the caller checked exist."""
    cdef const uint8_t *p = window.data + start
    batch._window = window
    batch._start = start
    batch._base_offset = <int64_t>load_be64(p)
    batch._length = <int32_t>load_be32(p + LENGTH_OFFSET)
    batch._partition_leader_epoch = <int32_t>load_be32(p + PARTITION_LEADER_EPOCH_OFFSET)
    batch._magic = <int8_t>p[MAGIC_OFFSET]
    batch._crc = load_be32(p + CRC_OFFSET)
    batch._attributes = <int16_t>load_be16(p + ATTRIBUTES_OFFSET)
    batch._last_offset_delta = <int32_t>load_be32(p + LAST_OFFSET_DELTA_OFFSET)
    batch._base_timestamp = <int64_t>load_be64(p + BASE_TIMESTAMP_OFFSET)
    batch._max_timestamp = <int64_t>load_be64(p + MAX_TIMESTAMP_OFFSET)
    batch._producer_id = <int64_t>load_be64(p + PRODUCER_ID_OFFSET)
    batch._producer_epoch = <int16_t>load_be16(p + PRODUCER_EPOCH_OFFSET)
    batch._base_sequence = <int32_t>load_be32(p + BASE_SEQUENCE_OFFSET)
    batch._records_count = <int32_t>load_be32(p + RECORDS_COUNT_OFFSET)


cdef class FileBatch:
    """A batch found in a file: where it starts, a lazy view of its bytes and the file (None in memory)."""

    cdef readonly Py_ssize_t position
    cdef readonly object batch
    cdef readonly object path

    def __init__(self, Py_ssize_t position, batch, path=None):
        self.position = position
        self.batch = batch
        self.path = path

    def iter_records(self, limits=None, *, check_crc=True):
        """``RecordBatch.iter_records`` with every error naming the file and its position in the file.
        O(size) time, O(largest record) memory."""
        if limits is None:
            records = self.batch.iter_records(check_crc=check_crc)
        else:
            records = self.batch.iter_records(limits, check_crc=check_crc)
        try:
            yield from records
        except StorageFormatError as err:
            raise err.at(self.path, position_base=self.position) from None

    def ensure_valid(self):
        """``RecordBatch.ensure_valid`` (the CRC; a legacy wrapper's too) with the error naming the file and its
        position in the file. O(size)."""
        try:
            self.batch.ensure_valid()
        except StorageFormatError as err:
            raise err.at(self.path, position_base=self.position) from None

    @property
    def size_in_bytes(self):
        return self.batch.size_in_bytes

    @property
    def end_position(self):
        return self.position + self.batch.size_in_bytes

    def __repr__(self):
        return f"FileBatch(position={self.position}, batch={self.batch!r}, path={self.path!r})"


cdef object _batch_in(_Window window, Py_ssize_t local, Py_ssize_t total, Py_ssize_t position, object path):
    """The batch object for window bytes [local, local + total) (whole, checked by the caller), chosen by its
    magic as ``segments.file_records.batch_view`` does; errors located at ``position`` of ``path``."""
    cdef RecordBatchHeader batch
    cdef uint8_t magic = window.data[local + 16]
    if magic == 0 or magic == 1:
        try:
            return _legacy_type(memoryview(window.obj)[local : local + total])
        except CorruptRecordError as err:
            raise err.at(path, position_base=position) from None
    if total < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch is corrupt (the size {total} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})",
            path=path,
            position=position,
        )
    batch = RecordBatchHeader.__new__(_default_type)
    _unpack(batch, window, local)
    return batch


cdef class BatchWalk:
    """Kafka's batch iteration over bytes ``[start, limit)`` (see ``segments.file_records.walk_batches``): an
    iterator of :class:`FileBatch`. O(bytes) over the whole walk, O(1) Python objects per batch."""

    cdef object _read
    # The descriptor windows are read from when there is no ``_read`` (-1: none).
    cdef int _fd
    cdef object _path
    cdef Py_ssize_t _position
    cdef Py_ssize_t _limit
    cdef int64_t _max_batch_size
    cdef _Window _window
    cdef Py_ssize_t _window_start
    cdef Py_ssize_t _window_size
    cdef bint _done

    def __init__(self, read, Py_ssize_t start, Py_ssize_t limit, *, path=None, max_batch_size=None, buffer=None):
        """``read(position, size)`` fetches windows; with ``buffer`` the whole walk reads that buffer (positions
        are offsets in it) and ``read`` is not called."""
        self._start(read, start, limit, path, max_batch_size, buffer)

    cdef int _start(self, read, Py_ssize_t start, Py_ssize_t limit, path, max_batch_size, buffer) except -1:
        # The body of __init__, called directly by subclasses (a call through BatchWalk.__init__ goes through the
        # slot wrapper and its argument parsing, a tenth of a segment recovery's interpreter work).
        if _default_type is None:
            raise RuntimeError("segments._native.batches.register() was not called")
        self._read = read
        self._fd = -1
        self._path = path
        self._position = start
        self._limit = limit
        self._max_batch_size = -1 if max_batch_size is None else max_batch_size
        self._window_size = FIRST_WINDOW_BYTES // 2
        self._window_start = 0
        self._done = False
        if buffer is not None:
            self._window = _window_of(buffer)
            self._window_size = -1
        else:
            self._window = _window_of(b"")
            self._window_start = start
        return 0

    def __iter__(self):
        return self

    cdef bint _fetch(self, Py_ssize_t at_least) except -1:
        """Read the next window at the current position (at least ``at_least`` bytes asked); False when the
        read came back shorter than ``at_least`` (the file ended or shrank)."""
        cdef Py_ssize_t want
        if self._window_size < 0:
            # A whole-buffer walk: everything is already in the window.
            return False
        self._window_size = min(self._window_size * 2, <Py_ssize_t>WINDOW_BYTES)
        want = max(min(self._window_size, self._limit - self._position), at_least)
        self._window = _window_of(self._read_window(self._position, want))
        self._window_start = self._position
        return self._window.size >= at_least

    cdef object _read_window(self, Py_ssize_t position, Py_ssize_t size):
        """Up to ``size`` bytes of the walked file from ``position`` (short only at its end): ``read``'s, or without
        one read from the descriptor ``_fd`` here (no Python call, no bytes object but the window; a failure raises
        ``OSError`` naming the file, the read's size and position)."""
        if self._read is None:
            return _read_range(self._fd, position, size, self._path)
        return self._read(position, size)

    cdef bint _advance(self, Py_ssize_t *local_out, Py_ssize_t *total_out) except -1:
        """Locate the batch at the current position in the window (fetching as needed), with Kafka's file rule:
        False at the end (17 bytes or fewer left, a partial batch, a file that shrank), the size errors raised.
        The position is not moved."""
        cdef Py_ssize_t position = self._position
        cdef Py_ssize_t local, total
        cdef int32_t size
        if self._done or self._limit - position <= HEADER_SIZE_UP_TO_MAGIC:
            # Kafka's FileLogInputStream stops unless *more* than 17 bytes remain.
            self._done = True
            return False
        local = position - self._window_start
        if local + HEADER_SIZE_UP_TO_MAGIC > self._window.size:
            if not self._fetch(HEADER_SIZE_UP_TO_MAGIC):
                self._done = True
                return False
            local = 0
        size = <int32_t>load_be32(self._window.data + local + 8)
        if size < RECORD_OVERHEAD_V0:
            self._done = True
            raise CorruptRecordError(
                f"found record size {size} smaller than the minimum record overhead ({RECORD_OVERHEAD_V0})",
                path=self._path,
                position=position,
            )
        if self._max_batch_size >= 0 and size > self._max_batch_size:
            self._done = True
            raise RecordTooLargeError(
                f"found record size {size} larger than the maximum allowed {self._max_batch_size}",
                path=self._path,
                position=position,
            )
        total = LOG_OVERHEAD + <Py_ssize_t>size
        if position + total > self._limit:
            self._done = True
            return False
        if local + total > self._window.size:
            if not self._fetch(total):
                # The file shrank under this reader (a concurrent truncation): the log ends here.
                self._done = True
                return False
            local = 0
        local_out[0] = local
        total_out[0] = total
        return True

    def __next__(self):
        cdef Py_ssize_t position = self._position
        cdef Py_ssize_t local = 0, total = 0
        cdef object batch
        if not self._advance(&local, &total):
            raise StopIteration
        try:
            batch = _batch_in(self._window, local, total, position, self._path)
        except BaseException:
            self._done = True
            raise
        self._position = position + total
        return _file_batch(position, batch, self._path)


cdef inline FileBatch _file_batch(Py_ssize_t position, object batch, object path):
    cdef FileBatch found = FileBatch.__new__(FileBatch)
    found.position = position
    found.batch = batch
    found.path = path
    return found


cdef enum:
    LOCATE_FOUND = 0
    LOCATE_END = 1
    LOCATE_BAD_SIZE = 2
    LOCATE_SHORT_V2 = 3
    LOCATE_IO_ERROR = 4


cdef struct _Located:
    int status
    int err
    Py_ssize_t position
    Py_ssize_t total
    int64_t base
    int32_t delta
    int32_t size


cdef inline bint _header_step(const uint8_t *header, Py_ssize_t got, Py_ssize_t position, Py_ssize_t limit,
                              int64_t target, bint by_timestamp, _Located *out) noexcept nogil:
    """One batch of the header hop: the header at ``position`` (``got`` bytes of it available: fewer than
    :data:`RECORD_BATCH_OVERHEAD` only at ``limit`` or the file end). True when the hop stops here (``out.status``
    says why), False when it goes on at ``position + out.total``; ``out`` holds the batch's fields either way."""
    cdef int64_t key = 0
    out.position = position
    out.status = LOCATE_END
    if got < HEADER_SIZE_UP_TO_MAGIC:
        return True
    out.size = <int32_t>load_be32(header + 8)
    if out.size < RECORD_OVERHEAD_V0:
        out.status = LOCATE_BAD_SIZE
        return True
    out.total = LOG_OVERHEAD + <Py_ssize_t>out.size
    if position + out.total > limit:
        return True
    if header[16] == 0 or header[16] == 1:
        # A legacy entry's offset is its last (a compressed wrapper carries its last inner offset); only
        # magic 1 has a timestamp (after crc, magic and attributes).
        out.base = <int64_t>load_be64(header)
        out.delta = 0
        key = legacy_max_timestamp(header, out.total) if got >= LEGACY_TIMESTAMP_OFFSET + 8 else -1
        if not by_timestamp:
            key = out.base
    elif out.total < RECORD_BATCH_OVERHEAD:
        out.status = LOCATE_SHORT_V2
        return True
    elif got < RECORD_BATCH_OVERHEAD:
        # The file shrank under this reader (a concurrent truncation): the log ends here.
        return True
    else:
        out.base = <int64_t>load_be64(header)
        out.delta = <int32_t>load_be32(header + LAST_OFFSET_DELTA_OFFSET)
        key = <int64_t>load_be64(header + MAX_TIMESTAMP_OFFSET) if by_timestamp else _sat_add(out.base, out.delta)
    if key >= target:
        out.status = LOCATE_FOUND
        return True
    return False


cdef void _locate(int fd, Py_ssize_t start, Py_ssize_t limit, int64_t target, bint by_timestamp,
                  _Located *out) noexcept nogil:
    """The header hop of :func:`locate_batch` (its status, the batch found or where the walk stopped)."""
    cdef uint8_t header[RECORD_BATCH_OVERHEAD]
    cdef Py_ssize_t position = start
    cdef Py_ssize_t got = 0
    while limit - position > HEADER_SIZE_UP_TO_MAGIC:
        out.err = pread_full(fd, header, min(<Py_ssize_t>RECORD_BATCH_OVERHEAD, limit - position), position, &got)
        if out.err != 0:
            out.status = LOCATE_IO_ERROR
            out.position = position
            return
        if _header_step(header, got, position, limit, target, by_timestamp, out):
            return
        position += out.total
    out.status = LOCATE_END
    out.position = position


cdef object _locate_failure(_Located *found, path):
    """The error of a header hop that ended on a flaw (status other than found / end)."""
    if found.status == LOCATE_BAD_SIZE:
        return CorruptRecordError(
            f"found record size {found.size} smaller than the minimum record overhead ({RECORD_OVERHEAD_V0})",
            path=path,
            position=found.position,
        )
    if found.status == LOCATE_SHORT_V2:
        return CorruptRecordError(
            f"record batch is corrupt (the size {found.total} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})",
            path=path,
            position=found.position,
        )
    return OSError(
        found.err,
        f"{os.strerror(found.err)} (read of a batch header at position {found.position})",
        None if path is None else os.fspath(path),
    )


def locate_batch(int fd, Py_ssize_t start, Py_ssize_t limit, int64_t target, bint by_timestamp=False, path=None):
    """Kafka's ``FileRecords.searchForOffsetWithSize`` over the open file ``fd``: ``(last offset, position,
    size)`` of the first batch from byte ``start`` whose last offset is >= ``target`` (``by_timestamp``: whose max
    timestamp is >= ``target``, the batch ``searchForTimestamp`` opens), or None. Reads batch
    headers only (one ``pread`` of at most 61 bytes per batch, GIL released over the whole hop), with the walk's
    rule and errors (see :class:`BatchWalk`): the end of ``limit`` or of the file ends the search; a size below the
    minimum overhead, or a magic-2 batch shorter than its header, raises :class:`CorruptRecordError` at its
    position. O(batches skipped)."""
    cdef _Located found
    with nogil:
        _locate(fd, start, limit, target, by_timestamp, &found)
    if found.status == LOCATE_FOUND:
        # Summed as Python ints: a hostile header's last offset may lie outside int64, as Kafka's long wraps.
        return <object>found.base + <object>found.delta, found.position, found.total
    if found.status == LOCATE_END:
        return None
    raise _locate_failure(&found, path)


cdef bint _last_batch(int fd, Py_ssize_t start, Py_ssize_t limit, int64_t *base, int32_t *delta,
                      _Located *found) noexcept nogil:
    """The walk of :func:`next_offset_from`: whether a batch lies between ``start`` and ``limit``, the last one's base
    offset and last offset delta in ``base`` and ``delta`` (``found.status`` says how the walk ended)."""
    cdef bint any_batch = False
    cdef Py_ssize_t position = start
    while True:
        # The first batch at or after the position, whatever its offsets: each hop takes one batch.
        _locate(fd, position, limit, _INT64_MIN, False, found)
        if found.status != LOCATE_FOUND:
            return any_batch
        any_batch = True
        base[0] = found.base
        delta[0] = found.delta
        position = found.position + found.total


cdef object _after(bint any_batch, int64_t base, int32_t delta, int64_t base_offset):
    # Summed as Python ints: a hostile header's last offset may lie at or past int64's end, as Kafka's long wraps.
    return <object>base + <object>delta + 1 if any_batch else base_offset


def next_offset_from(int fd, Py_ssize_t start, Py_ssize_t limit, int64_t base_offset, path=None):
    """Kafka's ``LogSegment.readNextOffset`` walk over the open file ``fd``: the offset after the last batch
    between byte ``start`` (a batch start: an offset-index entry's position, or 0) and ``limit``, ``base_offset``
    when none lies there. Reads batch headers only (one ``pread`` of at most 61 bytes per batch, GIL released over
    the whole hop), with the walk's rule and errors (see :func:`locate_batch`; a legacy entry's offset is its
    last). O(batches walked)."""
    cdef _Located found
    cdef int64_t base = 0
    cdef int32_t delta = 0
    cdef bint any_batch
    with nogil:
        any_batch = _last_batch(fd, start, limit, &base, &delta, &found)
    if found.status == LOCATE_END:
        return _after(any_batch, base, delta, base_offset)
    raise _locate_failure(&found, path)


def tail_next_offset(index_path, log_path, int64_t base_offset, Py_ssize_t max_tail, int64_t modified_before_ns):
    """What a clean shutdown left of a segment's end, from its files alone, nothing mapped: ``(log_size,
    next_offset)``, or None when either file cannot be opened (or is a link: neither is followed) or either was
    last modified at or after ``modified_before_ns`` (changed since). ``next_offset`` is :func:`next_offset_from`
    of the segment (Kafka's ``readNextOffset``): the last entry of its trimmed offset index by one ``pread``, then
    the header hop from that entry's position to the end of the ``.log``; None when the tail after the entry is
    longer than ``max_tail``, the entry does not point into the ``.log``, or any read or header fails (a caller
    then reads through the segment's objects, which report the flaw). Both files are ``fstat``-ed and closed at
    once, the GIL released throughout. O(batches after the last index entry)."""
    cdef bytes index_name = encoded_path(index_path)
    cdef bytes log_name = encoded_path(log_path)
    cdef const char *index_c = index_name
    cdef const char *log_c = log_name
    cdef uint8_t entry[8]
    cdef struct_stat index_stat, log_stat
    cdef Py_ssize_t got = 0
    cdef Py_ssize_t position = 0
    cdef int64_t base = 0
    cdef int32_t delta = 0
    cdef bint any_batch = False
    cdef bint opened = False
    cdef bint read = False
    cdef int index_fd, log_fd
    cdef int err = 0
    cdef _Located found
    with nogil:
        index_fd = open(index_c, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if index_fd >= 0:
            log_fd = open(log_c, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if log_fd >= 0:
                opened = (fstat(index_fd, &index_stat) == 0 and fstat(log_fd, &log_stat) == 0
                          and _mtime_ns(&index_stat) < modified_before_ns
                          and _mtime_ns(&log_stat) < modified_before_ns)
                if opened and log_stat.st_size > 0:
                    if index_stat.st_size >= 8:
                        err = pread_full(index_fd, entry, 8, (index_stat.st_size // 8 - 1) * 8, &got)
                        if err == 0 and got == 8:
                            position = <int32_t>load_be32(entry + 4)
                        else:
                            err = 1
                    if err == 0 and 0 <= position < log_stat.st_size and log_stat.st_size - position <= max_tail:
                        any_batch = _last_batch(log_fd, position, log_stat.st_size, &base, &delta, &found)
                        read = found.status == LOCATE_END
                close(log_fd)
            close(index_fd)
    if not opened:
        return None
    if log_stat.st_size == 0:
        return 0, base_offset
    return log_stat.st_size, _after(any_batch, base, delta, base_offset) if read else None


cdef inline int64_t _mtime_ns(struct_stat *found) noexcept nogil:
    """A stat's modification time in nanoseconds (``os.stat_result.st_mtime_ns``)."""
    return <int64_t>found.st_mtim.tv_sec * 1000000000 + found.st_mtim.tv_nsec


cdef class TimestampAndOffset:
    """A record found by timestamp (:meth:`segments.log_segment.LogSegment.find_offset_by_timestamp`): its timestamp
    and offset. Immutable, compared and hashed by value; made by the compiled lookup without a Python-level
    constructor call."""

    cdef readonly object timestamp
    cdef readonly object offset

    def __init__(self, timestamp, offset):
        self.timestamp = timestamp
        self.offset = offset

    def __eq__(self, other):
        if type(other) is not TimestampAndOffset:
            return NotImplemented
        return self.timestamp == (<TimestampAndOffset>other).timestamp and \
            self.offset == (<TimestampAndOffset>other).offset

    def __hash__(self):
        return hash((self.timestamp, self.offset))

    def __repr__(self):
        return f"TimestampAndOffset(timestamp={self.timestamp!r}, offset={self.offset!r})"


cdef TimestampAndOffset _timestamp_and_offset(timestamp, offset):
    cdef TimestampAndOffset found = TimestampAndOffset.__new__(TimestampAndOffset)
    found.timestamp = timestamp
    found.offset = offset
    return found


cdef class FetchSlice:
    """A read result (:meth:`segments.log_segment.LogSegment.read`): the first batch's last offset, a byte range of
    the segment's ``.log`` (``path``) and its bytes (``records``: shorter than ``size`` only when the file shrank
    under the read). Immutable, compared and hashed by value."""

    cdef readonly object offset
    cdef readonly long long segment_base_offset
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size
    cdef readonly bint first_entry_incomplete
    cdef readonly bytes records
    cdef readonly object path

    def __init__(self, offset, long long segment_base_offset, Py_ssize_t position, Py_ssize_t size,
                 bint first_entry_incomplete=False, bytes records=b"", path=None):
        self.offset = offset
        self.segment_base_offset = segment_base_offset
        self.position = position
        self.size = size
        self.first_entry_incomplete = first_entry_incomplete
        self.records = records
        self.path = path

    cdef tuple _key(self):
        return (self.offset, self.segment_base_offset, self.position, self.size, self.first_entry_incomplete,
                self.records, self.path)

    def __eq__(self, other):
        if type(other) is not FetchSlice:
            return NotImplemented
        return self._key() == (<FetchSlice>other)._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (
            f"FetchSlice(offset={self.offset!r}, segment_base_offset={self.segment_base_offset!r}, "
            f"position={self.position!r}, size={self.size!r}, first_entry_incomplete={self.first_entry_incomplete!r}, "
            f"records=<{len(self.records)} bytes>, path={self.path!r})"
        )


cdef bytes _read_range(int fd, Py_ssize_t position, Py_ssize_t size, path):
    """Bytes ``[position, position + size)`` of the open file ``fd`` (short only when the file shrank under the
    read), GIL released over the ``pread`` (a page-cache miss waits for the disk: other threads run meanwhile); a
    failure raises ``OSError`` naming ``path`` and the range, as :meth:`segments.file_records.FileRecords.read`
    does. O(size)."""
    return _fetch_records(fd, b"", position, position, size, path)


cdef int64_t _clamped(object value) except? -1:
    # Headers and index fields are int64: a target beyond them compares like the nearest bound.
    cdef int overflow = 0
    cdef long long clamped
    if type(value) is int:
        clamped = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow == 0:
            return clamped
        return _INT64_MAX if overflow > 0 else _INT64_MIN
    if value > _INT64_MAX:
        return _INT64_MAX
    if value < _INT64_MIN:
        return _INT64_MIN
    return value


cdef struct _IndexHint:
    # The entry after the floor entry (``has_next``): its offset and position, and the bytes from it to the entry
    # after it (0 when there is none); the floor entry's offset (the segment's base offset - 1 when none).
    bint has_next
    int64_t floor_offset
    int64_t next_offset
    Py_ssize_t next_position
    Py_ssize_t next_span


cdef Py_ssize_t _indexed_position(index_map, Py_ssize_t entries, index_path, int64_t base_offset,
                                  Py_ssize_t warm_entries, int64_t target, _IndexHint *hint=NULL) except -1:
    """Where a scan for offset ``target`` starts: the position of the offset index's largest entry at or below it
    (in ``index_map``'s first ``entries`` 8-byte entries), 0 when none; ``hint`` (when given) receives the entries
    around it. Kafka's index sanity check reads offsets only, so a damaged entry can hold a negative position:
    :class:`CorruptIndexError` naming ``index_path`` and the entry. O(log entries), no GIL held over the search."""
    cdef Py_buffer view
    cdef Py_ssize_t slot = -1
    cdef int64_t position = 0
    cdef int64_t entry_offset = 0
    cdef const uint8_t *data
    if hint != NULL:
        hint.has_next = False
        hint.floor_offset = base_offset - 1
    if entries <= 0:
        return 0
    if index_map is None:
        raise ValueError(f"{index_path}: index is closed")
    PyObject_GetBuffer(index_map, &view, PyBUF_SIMPLE)
    try:
        entries = min(entries, view.len // 8)
        if entries > 0:
            data = <const uint8_t *>view.buf
            with nogil:
                slot = search_slot(data, entries, 8, False, base_offset, target, True, warm_entries)
                if slot >= 0:
                    position = <int32_t>load_be32(data + slot * 8 + 4)
                    entry_offset = base_offset + <int32_t>load_be32(data + slot * 8)
                if hint != NULL:
                    if slot >= 0:
                        hint.floor_offset = entry_offset
                    if slot + 1 < entries:
                        hint.has_next = True
                        hint.next_offset = base_offset + <int32_t>load_be32(data + (slot + 1) * 8)
                        hint.next_position = <int32_t>load_be32(data + (slot + 1) * 8 + 4)
                        hint.next_span = (
                            <int32_t>load_be32(data + (slot + 2) * 8 + 4) - hint.next_position
                            if slot + 2 < entries else 0
                        )
    finally:
        PyBuffer_Release(&view)
    if position < 0:
        raise CorruptIndexError(f"entry for offset {entry_offset} has a negative position {position}", path=index_path)
    return <Py_ssize_t>position


def indexed_position(index_map, Py_ssize_t entries, index_path, long long base_offset, Py_ssize_t warm_entries,
                     offset):
    """Where a scan for ``offset`` starts: the offset index's position for it (see :func:`fetch_slice`; a target
    outside int64 compares like the nearest bound). O(log entries)."""
    return _indexed_position(index_map, entries, index_path, base_offset, warm_entries, _clamped(offset))


def find_timestamp(int fd, Py_ssize_t file_size, path, time_map, Py_ssize_t time_entries, time_index_path,
                   offset_map, Py_ssize_t offset_entries, offset_index_path, long long base_offset,
                   Py_ssize_t time_warm, Py_ssize_t offset_warm, timestamp, starting_offset,
                   int64_t max_record_bytes, decode):
    """Kafka's ``LogSegment.findOffsetByTimestamp`` in one call: the time index's largest entry at or below
    ``timestamp`` (12-byte entries of ``time_map``; none: the base offset), its offset raised to
    ``starting_offset``, that offset's offset-index position (:func:`fetch_slice`'s search and error), then the
    header hop to the first batch whose max timestamp is >= ``timestamp`` (:func:`locate_batch`), the read of that
    batch and the search of its records (CRC not checked, as Kafka's search does not): an uncompressed magic-2
    batch's records are scanned here (:func:`find_record_by_timestamp`, records above ``max_record_bytes``
    refused), any other batch is handed to ``decode(position, batch bytes, timestamp, starting_offset, path)``
    (a plain function: no closure made per lookup), which returns the answer or None.
    A batch without the answer continues the hop after it. The :class:`TimestampAndOffset` of the first record
    with timestamp >= ``timestamp`` and offset >= ``starting_offset``, or None (also when the file shrank under the
    read). Errors name ``path`` and the file position. O(log entries + batches skipped + the batches read), GIL
    released over the searches, the hop, the read and the record scan."""
    cdef Py_buffer view
    cdef int64_t target = _clamped(timestamp)
    cdef int64_t starting = _clamped(starting_offset)
    cdef int64_t offset = base_offset
    cdef Py_ssize_t slot = -1
    cdef Py_ssize_t entries = time_entries
    cdef Py_ssize_t start
    cdef _Located found
    cdef _TimestampScan scan
    cdef bytes data
    cdef const uint8_t *p
    cdef int64_t batch_base, batch_timestamp
    cdef bint append_time
    cdef int64_t append_timestamp
    if entries > 0:
        if time_map is None:
            raise ValueError(f"{time_index_path}: index is closed")
        PyObject_GetBuffer(time_map, &view, PyBUF_SIMPLE)
        try:
            entries = min(entries, view.len // 12)
            if entries > 0:
                with nogil:
                    slot = search_slot(<const uint8_t *>view.buf, entries, 12, True, 0, target, True, time_warm)
                    if slot >= 0:
                        offset = base_offset + <int32_t>load_be32(<const uint8_t *>view.buf + slot * 12 + 8)
        finally:
            PyBuffer_Release(&view)
    start = _indexed_position(offset_map, offset_entries, offset_index_path, base_offset, offset_warm,
                              max(offset, starting))
    while True:
        with nogil:
            _locate(fd, start, file_size, target, True, &found)
        if found.status == LOCATE_END:
            return None
        if found.status != LOCATE_FOUND:
            raise _locate_failure(&found, path)
        data = _read_range(fd, found.position, found.total, path)
        if PyBytes_GET_SIZE(data) < found.total:
            # The file shrank under this reader (a concurrent truncation): the log ends here.
            return None
        p = <const uint8_t *>PyBytes_AS_STRING(data)
        # (The bytes are read again after the hop: a concurrent truncation may have rewritten them, so the size
        # is checked against the header here too.)
        if found.total >= RECORD_BATCH_OVERHEAD and p[MAGIC_OFFSET] == MAGIC_V2 and \
                load_be16(p + ATTRIBUTES_OFFSET) & ATTRIBUTE_CODEC_MASK == 0:
            batch_base = <int64_t>load_be64(p)
            batch_timestamp = <int64_t>load_be64(p + BASE_TIMESTAMP_OFFSET)
            append_time = load_be16(p + ATTRIBUTES_OFFSET) & ATTRIBUTE_LOG_APPEND_TIME != 0
            append_timestamp = <int64_t>load_be64(p + MAX_TIMESTAMP_OFFSET)
            with nogil:
                _scan_timestamps(p + RECORD_BATCH_OVERHEAD, <size_t>(found.total - RECORD_BATCH_OVERHEAD),
                                 <int32_t>load_be32(p + RECORDS_COUNT_OFFSET), batch_base, batch_timestamp,
                                 append_time, append_timestamp, target, starting, max_record_bytes, &scan)
            hit = _scan_answer(&scan, batch_base, batch_timestamp, append_timestamp if append_time else None,
                               max_record_bytes, path, found.position + RECORD_BATCH_OVERHEAD)
            if hit is not None:
                return _timestamp_and_offset((<tuple>hit)[0], (<tuple>hit)[1])
        else:
            hit = decode(found.position, data, timestamp, starting_offset, path)
        if hit is not None:
            return hit
        start = found.position + found.total


cdef enum:
    # A fetch's header hop reads windows of the file rather than one header per pread: the first window from the
    # index entry's position holds this many bytes (the headers of the small batches an index interval spans)...
    _FETCH_WALK_WINDOW = 4096
    # ... and no window holds more than this many bytes (the fetch's bytes beyond it are read once its batch is
    # found), which bounds what a window read past the batch found can waste.
    _FETCH_WINDOW_CAP = 65536


cdef bytes _fetch_records(int fd, bytes window, Py_ssize_t window_start, Py_ssize_t position, Py_ssize_t size,
                          path):
    """Bytes ``[position, position + size)`` of the file, taken from ``window`` (bytes read at ``window_start``,
    holding ``position``) as far as it reaches and read after it (short only when the file shrank under the
    read), GIL released over the read. O(size)."""
    cdef Py_ssize_t offset = position - window_start
    cdef Py_ssize_t have = PyBytes_GET_SIZE(window) - offset
    cdef bytes data
    cdef uint8_t *buf
    cdef Py_ssize_t got = 0
    cdef int err
    if size <= 0:
        return b""
    if size <= have:
        if offset == 0 and size == PyBytes_GET_SIZE(window):
            return window
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(window) + offset, size)
    data = PyBytes_FromStringAndSize(NULL, size)
    buf = <uint8_t *>PyBytes_AS_STRING(data)
    memcpy(buf, PyBytes_AS_STRING(window) + offset, <size_t>have)
    with nogil:
        err = pread_full(fd, buf + have, size - have, position + have, &got)
    if err != 0:
        raise OSError(
            err,
            f"{os.strerror(err)} (read of {size - have} bytes at position {position + have})",
            None if path is None else os.fspath(path),
        )
    return data if have + got == size else data[:have + got]


def fetch_slice(int fd, Py_ssize_t file_size, path, index_map, Py_ssize_t index_entries, index_path,
                long long base_offset, Py_ssize_t warm_entries, start_offset, max_position, Py_ssize_t max_size,
                bint min_one_message):
    """Kafka's ``LogSegment.read`` and the read of its bytes in one call: the offset index's entry for
    ``start_offset`` (the largest at or below it, in ``index_map``'s first ``index_entries`` 8-byte entries; the
    file start when none), then the header hop from there to the batch holding it (:func:`locate_batch`'s rule up
    to ``file_size``), then the fetch's byte range: at most ``max_size`` bytes (at least that batch when
    ``min_one_message``), never past ``max_position`` (``None``: ``file_size``), and its bytes. A
    :class:`FetchSlice` (its ``path`` is ``path``), or None when the offset is past the segment. An index entry
    with a negative position raises :class:`CorruptIndexError` naming ``index_path``; the hop raises as
    :func:`locate_batch`, a read an ``OSError`` naming ``path`` and the range. O(log entries + batches skipped +
    bytes read), GIL released over the search and the reads.

    The hop reads windows (at most :data:`_FETCH_WINDOW_CAP` bytes each) and parses headers from them; its first
    two windows (the floor entry's batch, the batch after it) are sized for the fetch (``max_size``, or the size of
    the batch before when larger and ``min_one_message``), so a hop and its bytes take one or two ``pread`` calls
    when the guess holds; later windows hold a header (after a batch of 4 KiB or more) or 4 KiB, so a long hop
    copies little more than the headers it skips. When the floor entry lies below ``start_offset`` and the next index entry at or above it (an entry
    names the start of an append whose largest offset it holds), the hop first tries that entry's batch: it is
    the one found when its offsets cover ``start_offset``, its base offset is above the floor entry's offset and
    its last offset at most the next entry's (as a valid segment's increasing offsets make it; the walk from the
    floor entry would find it too), so a fetch in a log with an entry per batch reads one window. A batch at
    that entry that does not pass these checks (a gap of unindexed batches before it, a legacy batch, any flaw)
    sends the hop back to the floor entry's position, as Kafka's walk goes."""
    cdef int64_t target = _clamped(start_offset)
    cdef _IndexHint hint
    cdef Py_ssize_t start = _indexed_position(index_map, index_entries, index_path, base_offset, warm_entries,
                                              target, &hint)
    cdef Py_ssize_t limit = file_size if max_position is None else <Py_ssize_t>max_position
    cdef _Located found
    cdef Py_ssize_t adjusted, size, need, length, wanted, available
    cdef Py_ssize_t position = start
    cdef Py_ssize_t guess = _FETCH_WALK_WINDOW
    cdef Py_ssize_t window_start = 0, window_got = 0
    cdef bint window_short = False
    cdef bytes window = None
    cdef bint jump = False
    cdef bint stop
    cdef int reads = 0
    cdef const uint8_t *header = NULL
    cdef FetchSlice result
    if (hint.has_next and hint.floor_offset < target <= hint.next_offset
            and hint.next_position - start > _FETCH_WALK_WINDOW and hint.next_position < file_size):
        # The batch at the next entry, if it holds the offset, without reading the batches before it.
        jump = True
        position = hint.next_position
        guess = hint.next_span
    while True:
        if file_size - position <= HEADER_SIZE_UP_TO_MAGIC:
            found.status = LOCATE_END
            found.position = position
            stop = True
        else:
            need = min(<Py_ssize_t>RECORD_BATCH_OVERHEAD, file_size - position)
            if window is None or (position + need > window_start + window_got and not window_short):
                if reads < 2:
                    # The bytes a fetch from here would return (the batch's size guessed), at least a header: the
                    # first two windows hold the floor entry's batch and the one after it.
                    wanted = max(max_size, guess) if min_one_message else max_size
                    wanted = min(wanted, limit - position, <Py_ssize_t>_FETCH_WINDOW_CAP)
                else:
                    # A longer hop (an index sparser than the batches) copies no more than a header per large
                    # batch skipped, or a small window among small batches.
                    wanted = _FETCH_WALK_WINDOW if guess < _FETCH_WALK_WINDOW else 0
                reads += 1
                length = min(file_size - position, max(need, wanted))
                window = _read_range(fd, position, length, path)
                window_start = position
                window_got = PyBytes_GET_SIZE(window)
                window_short = window_got < length
            available = max(<Py_ssize_t>0, min(need, window_start + window_got - position))
            header = <const uint8_t *>PyBytes_AS_STRING(window) + (position - window_start)
            stop = _header_step(header, available, position, file_size, target, False, &found)
        if jump:
            jump = False
            if not ((found.status == LOCATE_FOUND or not stop) and header[MAGIC_OFFSET] == MAGIC_V2
                    and hint.floor_offset < found.base <= target
                    and _sat_add(found.base, found.delta) <= hint.next_offset):
                position = start
                guess = _FETCH_WALK_WINDOW
                window = None
                reads = 0
                continue
        if stop:
            break
        position += found.total
        guess = found.total
    if found.status == LOCATE_END:
        return None
    if found.status != LOCATE_FOUND:
        raise _locate_failure(&found, path)
    adjusted = max(max_size, found.total) if min_one_message else max_size
    size = max(<Py_ssize_t>0, min(limit - found.position, adjusted))
    result = FetchSlice.__new__(FetchSlice)
    # Summed as Python ints: a hostile header's last offset may lie outside int64, as Kafka's long wraps.
    result.offset = <object>found.base + <object>found.delta
    result.segment_base_offset = base_offset
    result.position = found.position
    result.size = size
    result.first_entry_incomplete = adjusted < found.total
    result.records = _fetch_records(fd, window, window_start, found.position, size, path)
    result.path = path
    return result


cdef struct _TimestampScan:
    # 0 = not found, 1 = found, 2 = bad length varint, 3 = too large, 4 = bad size, 5 = body too short,
    # 6 = deltas past the record.
    int status
    size_t start
    size_t left
    int32_t body
    int64_t timestamp_delta
    int32_t offset_delta


cdef void _scan_timestamps(const uint8_t *data, size_t end, int32_t count, int64_t base_offset,
                           int64_t base_timestamp, bint append_time, int64_t append_timestamp, int64_t target,
                           int64_t starting_offset, int64_t max_record_bytes, _TimestampScan *out) noexcept nogil:
    """The record loop of :func:`find_record_by_timestamp` (its status, and where and why it stopped)."""
    cdef size_t pos = 0
    cdef size_t body_end
    cdef int64_t timestamp
    cdef int32_t i
    out.status = 0
    out.body = 0
    out.timestamp_delta = 0
    out.offset_delta = 0
    for i in range(max(count, 0)):
        out.start = pos
        if read_varint(data, end, &pos, &out.body) != WIRE_OK:
            out.status = 2
            return
        if out.body > max_record_bytes:
            out.status = 3
            return
        if out.body < 0 or <size_t>out.body > end - pos:
            out.status = 4
            out.left = end - pos
            return
        body_end = pos + <size_t>out.body
        if pos >= body_end:
            out.status = 5
            return
        pos += 1  # attributes: unused
        if read_varlong(data, body_end, &pos, &out.timestamp_delta) != WIRE_OK or \
                read_varint(data, body_end, &pos, &out.offset_delta) != WIRE_OK:
            out.status = 6
            return
        timestamp = append_timestamp if append_time else _sat_add(base_timestamp, out.timestamp_delta)
        if timestamp >= target and _sat_add(base_offset, out.offset_delta) >= starting_offset:
            out.status = 1
            return
        pos = body_end


cdef object _scan_answer(_TimestampScan *scan, int64_t base_offset, int64_t base_timestamp, log_append_time,
                         int64_t max_record_bytes, path, Py_ssize_t position_base):
    """``(timestamp, offset)``, None, or the error of a :func:`_scan_timestamps` that ended on a flaw, at its
    record's position plus ``position_base`` in ``path``."""
    cdef Py_ssize_t at = position_base + <Py_ssize_t>scan.start
    if scan.status == 0:
        return None
    if scan.status == 1:
        offset = <object>base_offset + <object>scan.offset_delta
        if log_append_time is not None:
            return log_append_time, offset
        return <object>base_timestamp + <object>scan.timestamp_delta, offset
    if scan.status == 2:
        raise CorruptRecordError("buffer ends inside a varint", path=path, position=at)
    if scan.status == 3:
        raise RecordTooLargeError(
            f"record of {scan.body} bytes exceeds the limit of {max_record_bytes}", path=path, position=at
        )
    if scan.status == 4:
        raise CorruptRecordError(
            f"invalid record size: expected {scan.body} bytes in record payload, but only {scan.left} remain",
            path=path,
            position=at,
        )
    if scan.status == 5:
        raise CorruptRecordError("record ends before its attributes byte", path=path, position=at)
    raise CorruptRecordError("record ends inside its timestamp or offset delta", path=path, position=at)


def find_record_by_timestamp(region, int32_t count, int64_t base_offset, int64_t base_timestamp,
                             log_append_time, int64_t target, int64_t starting_offset, int64_t max_record_bytes):
    """``(timestamp, offset)`` of the first record of a magic-2 records region (uncompressed, ``count`` records)
    whose timestamp is >= ``target`` and offset >= ``starting_offset``, or None: the record loop of Kafka's
    ``FileRecords.searchForTimestamp``, reading each record's length, timestamp delta and offset delta only (keys,
    values and headers are skipped by length) and stopping at the answer, as Kafka's lazy iterator does.
    ``log_append_time`` is the batch's max timestamp for a LogAppendTime batch (every record reports it), else
    None.
    Raises :class:`RecordTooLargeError` / :class:`CorruptRecordError` at the record's position in the region for
    a length above ``max_record_bytes``, a length past the region, or deltas past the record. O(records
    scanned), no GIL held."""
    cdef const uint8_t[::1] view = region
    cdef const uint8_t *data = &view[0] if view.shape[0] else NULL
    cdef size_t end = view.shape[0]
    cdef bint append_time = log_append_time is not None
    cdef int64_t append_timestamp = log_append_time if append_time else 0
    cdef _TimestampScan scan
    with nogil:
        _scan_timestamps(data, end, count, base_offset, base_timestamp, append_time, append_timestamp, target,
                         starting_offset, max_record_bytes, &scan)
    return _scan_answer(&scan, base_offset, base_timestamp, log_append_time, max_record_bytes, None, 0)


cdef int64_t _MAX_RELATIVE_OFFSET = 2147483647


cdef struct _Entries:
    # A growing buffer of big-endian index entries (the bytes an index file holds): ``used`` bytes of ``size``
    # allocated at ``data`` (NULL until the first entry). A C buffer of the scan rather than an object: a recovery
    # makes two per segment.
    uint8_t *data
    Py_ssize_t used
    Py_ssize_t size


cdef uint8_t *_reserve(_Entries *entries, Py_ssize_t n) except NULL:
    """Room for ``n`` more bytes at the end of ``entries`` (doubling from 256 bytes: a recovered segment's index
    holds a few dozen entries, one per ``index.interval.bytes``). O(1) amortized."""
    cdef Py_ssize_t size
    cdef uint8_t *grown
    if entries.used + n > entries.size:
        size = max(entries.size * 2, entries.used + n, <Py_ssize_t>256)
        grown = <uint8_t *>PyMem_Realloc(entries.data, <size_t>size)
        if grown == NULL:
            raise MemoryError()
        entries.data = grown
        entries.size = size
    return entries.data + entries.used


cdef const char *_NO_ENTRIES = b""


cdef inline const char *_entry_bytes(_Entries *entries) noexcept nogil:
    """The entries' bytes (a valid pointer even before the first entry)."""
    return <const char *>entries.data if entries.data != NULL else _NO_ENTRIES


cdef class RecoveryScan(BatchWalk):
    """Kafka's ``LogSegment.recover`` loop over a segment's ``.log`` (header walk, CRC, offset continuity, index
    entries by the ``index.interval.bytes`` rule, max timestamp), compiled: no Python object per batch, CRCs
    computed per run of batches with the GIL released.

    Iterating it yields only the magic-2 batches whose bookkeeping needs Python (producer state, transactions,
    leader epochs): a batch with a producer id, the first batch of each leader-epoch run (a first run in
    ``leader_epoch``, the epoch the caller's cache already ends with, is not a new run: assigning it would change
    nothing), and the latest other batch before each of those (its producer-state effect, the map end offset, is
    what the skipped ones would have left). The other batches after the last one shown are not shown at all (most
    segments show nothing): :attr:`quiet_next_offset` is the offset after them, the map end offset they would
    leave. A yielded batch with a producer id counts as valid only when the next item is asked, so an error raised
    while handling it leaves :attr:`valid_bytes` at its start, as in Kafka's loop.

    The ``.log`` is read in windows of up to ``WINDOW_BYTES`` (a whole file up to that size in one read of exactly
    its length: no read only confirms the end) from ``source``: an open descriptor, which the scan reads itself
    (``pread`` into windows it owns, GIL released, no Python call; a failed read raises ``OSError`` naming the
    file, the read's size and position), or a ``read(position, size)`` callable (a ``.log`` object's, which may
    map the positions elsewhere: an offline plan's piece of a file).

    The scan ends at the end of the file, a partial batch, or the first invalid batch, whose error is raised
    (``CorruptRecordError``, or ``InvalidOffsetError`` from ``check_continues``); an index entry the index would
    refuse ends it with :attr:`rejected_entry` set instead (the caller replays that append to raise the index's
    own error). Afterwards :attr:`offset_entries` / :attr:`time_entries` hold the index files' bytes and
    :meth:`write_indexes` writes the files. O(bytes).
    """

    cdef int64_t _base_offset
    cdef bint _has_next_base
    cdef int64_t _next_base
    cdef int64_t _interval
    cdef object _check_continues
    cdef int64_t _offset_capacity
    cdef int64_t _time_capacity
    cdef int64_t _next_offset
    cdef int64_t _last_offset
    cdef readonly Py_ssize_t batches
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly Py_ssize_t last_index_entry
    cdef readonly object rejected_entry
    cdef _Entries _offsets
    cdef _Entries _times
    cdef Py_ssize_t _offset_count
    cdef Py_ssize_t _time_count
    cdef int64_t _last_index_offset
    cdef int64_t _last_time_timestamp
    cdef int64_t _last_time_offset
    cdef bint _pending
    cdef Py_ssize_t _pending_total
    cdef bint _have_epoch
    cdef int32_t _epoch
    cdef bint _quiet
    cdef _Window _quiet_window
    cdef Py_ssize_t _quiet_local
    cdef Py_ssize_t _quiet_position
    cdef int64_t _quiet_last
    cdef object _held
    cdef bint _finished

    def __init__(self, source, Py_ssize_t limit, int64_t base_offset, next_segment_base,
                 int64_t index_interval_bytes, int64_t offset_index_capacity, int64_t time_index_capacity,
                 check_continues, path=None, leader_epoch=None):
        """Scan the ``.log`` bytes ``[0, limit)`` of ``source``: an open descriptor (the caller keeps it open while
        iterating and closes it) or a ``read(position, size)`` callable; ``*_capacity`` are the indexes' slot
        counts at their maximum size; ``check_continues(first, last, next_offset, next_segment_base, position)``
        raises for offsets that do not continue the segment."""
        if type(source) is int:
            self._start(None, 0, limit, path, None, None)
            self._fd = source
        else:
            self._start(source, 0, limit, path, None, None)
        # Recovery reads the whole file: one read of it (up to the largest window) rather than windows growing
        # from 64 KiB, each re-reading the batch cut by the previous one (_fetch doubles this first).
        self._window_size = (min(max(limit, FIRST_WINDOW_BYTES), WINDOW_BYTES) + 1) // 2
        self._base_offset = base_offset
        self._has_next_base = next_segment_base is not None
        self._next_base = next_segment_base if self._has_next_base else 0
        self._interval = index_interval_bytes
        self._offset_capacity = offset_index_capacity
        self._time_capacity = time_index_capacity
        self._check_continues = check_continues
        self._next_offset = base_offset
        self._last_offset = base_offset - 1
        self.batches = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.last_index_entry = 0
        self.rejected_entry = None
        self._offsets.used = 0
        self._times.used = 0
        self._last_index_offset = 0
        self._last_time_timestamp = -1
        self._last_time_offset = base_offset
        self._held = None
        if leader_epoch is not None:
            self._have_epoch = True
            self._epoch = leader_epoch

    def __dealloc__(self):
        PyMem_Free(self._offsets.data)
        PyMem_Free(self._times.data)

    @property
    def valid_bytes(self):
        """Bytes of the batches accepted so far (the start of the batch being handled). O(1)."""
        return self._position

    @property
    def next_offset(self):
        """The offset after the last batch accepted so far (the base offset before any): the segment's next
        offset once the scan has ended without error. O(1)."""
        # Exact in Python: _next_offset saturates at the int64 maximum, as the checks need.
        return <object>self._last_offset + 1

    @property
    def quiet_next_offset(self):
        """The offset after the latest valid batch not shown (a magic-2 batch without producer id in the leader epoch
        of the batch before it), when no batch was shown after it; else None. Once the scan has ended: where the
        batches after the last one shown leave the map end offset (None: the last shown, or none, is where the
        valid magic-2 batches end). O(1)."""
        # Exact in Python, as next_offset.
        return <object>self._quiet_last + 1 if self._quiet else None

    @property
    def offset_entries(self):
        """The ``.index`` bytes of the entries found. O(entries)."""
        return PyBytes_FromStringAndSize(_entry_bytes(&self._offsets), self._offsets.used)

    @property
    def time_entries(self):
        """The ``.timeindex`` bytes of the entries found. O(entries)."""
        return PyBytes_FromStringAndSize(_entry_bytes(&self._times), self._times.used)

    def write_indexes(self, offset_index_path, time_index_path):
        """Write the ``.index`` and ``.timeindex`` the scan rebuilt as a recovery leaves them (Kafka's: trimmed to
        their entries, the time index ending with the final entry that recovery and close append: the max
        timestamp and the last offset of its batch, when the index would take it, i.e. a timestamp above its last
        entry's, any for an empty index). Each file is compared first and written only where it differs, never
        through a link (:func:`~segments._native.fileio.write_if_different_at`): an index a crash left correct is
        not modified at all. Both files in one compiled call, the GIL released over the system calls (per file:
        open, one read of one byte more than the entries, a second read confirming the end of a shorter file, a
        write and a truncation only where needed, close); the first failure raises ``OSError`` naming its file
        (the time index is then not written). O(entries)."""
        cdef bytes offset_name = encoded_path(offset_index_path)
        cdef bytes time_name = encoded_path(time_index_path)
        cdef const char *offset_c = offset_name
        cdef const char *time_c = time_name
        cdef Py_ssize_t offset_size = self._offsets.used
        cdef Py_ssize_t time_size = self._times.used
        cdef uint8_t *final
        cdef const char *offset_data
        cdef const char *time_data
        cdef bint time_failed = False
        cdef FileOutcome out
        if self.max_timestamp > self._last_time_timestamp:
            # After the kept entries, not counted among them (time_entries stays the scanned entries). The scan
            # accepted the batch holding the max, so its offset relative to the base fits the 32 bits.
            final = _reserve(&self._times, 12)
            store_be64(final, <uint64_t>self.max_timestamp)
            store_be32(final + 8, <uint32_t>(self.offset_of_max_timestamp - self._base_offset))
            time_size += 12
        offset_data = _entry_bytes(&self._offsets)
        time_data = _entry_bytes(&self._times)
        with nogil:
            write_if_different_at(offset_c, offset_data, offset_size, &out)
            if out.step == FILE_OK:
                time_failed = True
                write_if_different_at(time_c, time_data, time_size, &out)
        if out.step != FILE_OK:
            raise file_failure(&out, time_c, time_size) if time_failed else file_failure(&out, offset_c, offset_size)

    def __next__(self):
        cdef object item
        if self._held is not None:
            item, self._held = self._held, None
            return item
        if self._pending:
            self._position += self._pending_total
            self.batches += 1
            self._pending = False
        if self._finished:
            raise StopIteration
        try:
            item = self._scan()
        except (CorruptRecordError, InvalidOffsetError):
            self._end()
            raise
        if item is None:
            # Raised here, in __next__ itself, Cython ends the iteration without an exception object or a traceback
            # (raised from a cdef method it built one through every frame: most of a scan's Python overhead).
            raise StopIteration
        return item

    cdef void _end(self) noexcept:
        """Finish. The latest quiet batch, if any, is not shown (the caller reads :attr:`quiet_next_offset`):
        showing it cost a batch object and the caller's handling of it per segment."""
        self._finished = True
        self._done = True

    cdef object _scan(self):
        """Accept batches until one needs Python (returned) or the scan ends (``_end``, None returned)."""
        cdef Py_ssize_t position, local = 0, total = 0
        cdef const uint8_t *p
        cdef uint8_t magic
        cdef int64_t first, last, timestamp, producer_id, base, relative
        cdef int32_t delta = 0, epoch, count
        cdef uint32_t stored, computed
        cdef bint event
        cdef object legacy, found, quiet
        while True:
            position = self._position
            if not self._advance(&local, &total):
                self._end()
                return None
            p = self._window.data + local
            magic = p[MAGIC_OFFSET]
            if magic == 0 or magic == 1:
                try:
                    legacy = _legacy_type(memoryview(self._window.obj)[local : local + total])
                    legacy.ensure_valid()
                except CorruptRecordError as err:
                    raise err.at(self._path, position_base=position) from None
                last = legacy.last_offset
                # A legacy wrapper's base offset needs decompression; its last offset carries the same check.
                first = last
                timestamp = legacy.max_timestamp
            else:
                if total < RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(
                        f"record batch is corrupt (the size {total} is smaller than the minimum allowed overhead "
                        f"{RECORD_BATCH_OVERHEAD})",
                        path=self._path,
                        position=position,
                    )
                if magic != MAGIC_V2:
                    raise UnsupportedMagicError(
                        f"record batch has unknown magic {<int8_t>magic}", path=self._path, position=position + 16
                    )
                stored = load_be32(p + CRC_OFFSET)
                computed = self._window.crc_at(local, total)
                if computed != stored:
                    raise CorruptRecordError(
                        f"record batch is corrupt (stored crc = {stored}, computed crc = {computed})",
                        path=self._path,
                        position=position + CRC_OFFSET,
                    )
                count = <int32_t>load_be32(p + RECORDS_COUNT_OFFSET)
                if count < 0:
                    raise CorruptRecordError(f"found invalid record count {count}", path=self._path, position=position + RECORDS_COUNT_OFFSET)
                base = <int64_t>load_be64(p)
                delta = <int32_t>load_be32(p + LAST_OFFSET_DELTA_OFFSET)
                first = base
                last = _sat_add(base, delta)
                timestamp = <int64_t>load_be64(p + MAX_TIMESTAMP_OFFSET)
            if (_sat_add(last, -self._base_offset) > _MAX_RELATIVE_OFFSET or first < self._next_offset
                    or (self._has_next_base and last >= self._next_base)):
                # check_continues raises (its message is the one implementation of the rule); the sum is exact
                # in Python should a hostile header overflow int64.
                try:
                    self._check_continues(
                        first, (<object>first + <object>delta) if magic >= MAGIC_V2 else last, self._next_offset,
                        self._next_base if self._has_next_base else None, position,
                    )
                except IndexOffsetOverflowError as err:
                    # A legacy wrapper continuing the segment (its first inner offset too: decompressing a damaged
                    # one raises CorruptRecordError, i.e. damage) after batches that fit is a real overflow, which
                    # the loader splits. A v2 batch's base offset is outside its CRC, so there it is damage, and so
                    # is a first batch that does not fit (Kafka names a segment after its first batch).
                    if magic < MAGIC_V2 and self.batches > 0 and legacy.base_offset >= self._next_offset:
                        raise LogSegmentOffsetOverflowError(err.message, path=err.path, position=err.position) from None
                    raise
            self._next_offset = _sat_add(last, 1)
            self._last_offset = last
            if timestamp > self.max_timestamp:
                self.max_timestamp = timestamp
                self.offset_of_max_timestamp = last
            if position - self.last_index_entry > self._interval:
                if not self._index_entry(last, position):
                    self.rejected_entry = (last, position, self.max_timestamp, self.offset_of_max_timestamp)
                    self._end()
                    return None
                self.last_index_entry = position
            if magic < MAGIC_V2:
                self._position = position + total
                self.batches += 1
                continue
            producer_id = <int64_t>load_be64(p + PRODUCER_ID_OFFSET)
            epoch = <int32_t>load_be32(p + PARTITION_LEADER_EPOCH_OFFSET)
            event = producer_id != -1 or not self._have_epoch or epoch != self._epoch
            self._have_epoch = True
            self._epoch = epoch
            if not event:
                self._quiet = True
                self._quiet_window = self._window
                self._quiet_local = local
                self._quiet_position = position
                self._quiet_last = last
                self._position = position + total
                self.batches += 1
                continue
            found = _file_batch(position, _view_in(self._window, local), self._path)
            self._pending = True
            self._pending_total = total
            if self._quiet:
                self._quiet = False
                quiet = _file_batch(self._quiet_position, _view_in(self._quiet_window, self._quiet_local), self._path)
                self._held = found
                return quiet
            return found

    cdef bint _index_entry(self, int64_t offset, Py_ssize_t position) except -1:
        """Append ``(offset, position)`` to the offset index and the running max to the time index with the
        indexes' rules; False (nothing appended) when either would refuse it."""
        cdef int64_t relative = _sat_add(offset, -self._base_offset)
        cdef int64_t timestamp = self.max_timestamp
        cdef int64_t time_offset = self.offset_of_max_timestamp
        cdef int64_t time_relative = _sat_add(time_offset, -self._base_offset)
        cdef uint8_t *out
        if (self._offset_count >= self._offset_capacity
                or (self._offset_count > 0 and offset <= self._last_index_offset)
                or relative < 0 or relative > _MAX_RELATIVE_OFFSET
                or position > _INT32_MAX):
            return False
        # TimeIndex.maybe_append: the last slot is reserved; order checks before the equal-timestamp skip.
        if (self._time_count >= self._time_capacity - 1
                or (self._time_count > 0
                    and (time_offset < self._last_time_offset or timestamp < self._last_time_timestamp))
                or (timestamp > self._last_time_timestamp and (time_relative < 0 or time_relative > _MAX_RELATIVE_OFFSET))):
            return False
        out = _reserve(&self._offsets, 8)
        store_be32(out, <uint32_t>relative)
        store_be32(out + 4, <uint32_t>position)
        self._offsets.used += 8
        self._offset_count += 1
        self._last_index_offset = offset
        if timestamp > self._last_time_timestamp:
            out = _reserve(&self._times, 12)
            store_be64(out, <uint64_t>timestamp)
            store_be32(out + 8, <uint32_t>time_relative)
            self._times.used += 12
            self._time_count += 1
            self._last_time_timestamp = timestamp
            self._last_time_offset = time_offset
        return True


cdef object _view_in(_Window window, Py_ssize_t local):
    """The magic-2 batch object over a whole batch of the window at ``local`` (validated by the caller)."""
    cdef RecordBatchHeader batch = RecordBatchHeader.__new__(_default_type)
    _unpack(batch, window, local)
    return batch
