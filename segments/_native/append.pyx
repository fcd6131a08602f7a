# cython: language_level=3, boundscheck=False, wraparound=False
"""The append path over the bytes of one append (Kafka's ``analyzeAndValidateRecords`` + ``LogValidator`` for
magic-2 batches): one native walk validates every batch and gathers what the log needs, then the leader's headers
are stamped with offsets, leader epoch and (LogAppendTime topics) the append time, apart from the records: the log
writes each stamped header and the caller's records after it with one ``os.pwritev`` (no copy of the records).

A follower also takes magic 0/1 entries as they are (Kafka's ``appendAsFollower``: no conversion, offsets kept):
the walk reads their header facts (last offset, max timestamp; no leader epoch, no producer) and leaves their
validation to the caller, which decodes them with the format layer's legacy reader (the CRC-32, the message and a
wrapper's inner set) and hands back their first offsets and record counts (:meth:`AppendScan.decoded_legacy`).

:func:`scan_append` runs without the log lock: the walk of Kafka's file rule, magic, ``max.message.bytes``, the
CRC, the record count and, for uncompressed batches, the record framing (``wire.frame_records``), all without the
GIL for large appends. It stops at the first flaw and reports it (code, batch position, the format layer's typed
error) rather than raising, because the log layer turns flaws into its own errors and must first frame the
compressed batches before the flaw, whose records only the Python decompressor reaches (Kafka's order of checks:
batch by batch). :meth:`AppendScan.assign_offsets` then runs under the log lock.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Malloc
from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport PyObject, PyTypeObject
from cpython.pythread cimport (
    PY_LOCK_ACQUIRED,
    PY_LOCK_INTR,
    PyLockStatus,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)
from libc.errno cimport EDQUOT, EINTR, EIO, ENOSPC
from libc.stdint cimport INT64_MAX, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, strerror
from posix.uio cimport iovec

from segments._native.crc32c cimport logmgr_crc32c, logmgr_crc32c_init
from segments._native.fileio cimport pwritev_full, reserve_blocks
from segments._native.index cimport IndexEntries
from segments._native.wire cimport (
    ATTRIBUTE_CODEC_MASK,
    ATTRIBUTE_CONTROL,
    ATTRIBUTE_LOG_APPEND_TIME,
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LEGACY_ATTRIBUTES_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    WIRE_BAD_RECORD_SIZE,
    WIRE_OK,
    WIRE_RECORD_TOO_LARGE,
    WIRE_TRAILING_BYTES,
    WIRE_TRUNCATED,
    frame_records,
    legacy_max_timestamp,
    load_be32,
    load_be64,
    read_varint,
    store_be16,
    store_be32,
    store_be64,
)

from segments.append_origin import AppendOrigin
from segments.errors import CorruptRecordError, RecordTooLargeError

from time import monotonic

cdef extern from "pythread.h":
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds, int intr_flag) nogil
    unsigned long PyThread_get_thread_ident()
    const long long PY_TIMEOUT_MAX  # microseconds

logmgr_crc32c_init()

cdef extern from *:
    bint add_overflow "__builtin_add_overflow"(int64_t a, int64_t b, int64_t *out) nogil

# Results of a scan (AppendScan.failure).
cdef enum:
    _OK = 0
    _CORRUPT = 1            # a CorruptRecordError (or subclass) in AppendScan.error, located in its batch
    _NOT_V2 = 2             # a batch of magic other than 2 (a follower takes magic 0/1)
    _TOO_LARGE = 3          # a batch above max.message.bytes (AppendScan.failure_size)
    _INCOMPLETE = 4         # no batch, or bytes after the last whole batch
    _OFFSET_OVERFLOW = 5    # an assigned or given last offset past the int64 range
    _INVALID = 6            # Kafka's validateBatch refused the batch (AppendScan.reason)
    # Flaws found without the GIL, turned into a CorruptRecordError once it is held again.
    _SMALL_SIZE = 10      # size field below the 14-byte minimum record overhead (walk)
    _SHORT_BATCH = 11     # a magic-2 batch below the 61-byte header
    _BAD_CRC = 12
    _BAD_COUNT = 13
    _BAD_FRAMING = 14     # wire status in _Walk.wire_status
    _BAD_OFFSET_RANGE = 15  # a last offset delta below 0
    _BAD_LEADER_COUNT = 16  # leader only: no records, or lastOffsetDelta + 1 != records
    _CLIENT_CONTROL = 17    # client only: a control batch
    _CLIENT_SEQUENCE = 18   # client only: a producer id with a negative base sequence

# Below these many bytes the GIL is kept. The walk (and the CRC of a LogAppendTime stamp) keeps it below 64 KiB, as
# segments._native.crc and records do for their byte loops: a walk of a 16 KiB batch takes 0.2 us from cache, 1.4 us
# from memory, less than the few microseconds of SHA-256 for which hashlib releases it (2 KiB and more); and a
# release hands the GIL to any thread waiting for it, which may then hold it up to the switch interval (5 ms) before
# this append can go on. A write releases it from 4 KiB: it may wait on the disk (writeback throttling, a full page
# cache), whatever its size.
cdef enum:
    _NOGIL_WALK_BYTES = 65536
    _NOGIL_WRITE_BYTES = 4096
    _FEW_BUFFERS = 16       # iovecs kept on the stack for a write (8 stamped batches); more are allocated
    _RESERVE_LEAST_BYTES = 65536  # the smallest step of disk reserved ahead of a file's end (FileAppendState)

RESERVE_LEAST_BYTES = _RESERVE_LEAST_BYTES
SCAN_OK = _OK
SCAN_CORRUPT = _CORRUPT
SCAN_NOT_V2 = _NOT_V2
SCAN_TOO_LARGE = _TOO_LARGE
SCAN_INCOMPLETE = _INCOMPLETE
SCAN_OFFSET_OVERFLOW = _OFFSET_OVERFLOW
SCAN_INVALID = _INVALID

cdef int64_t _DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024  # segments.records.DEFAULT_MAX_RECORD_BYTES
cdef int _NO_PARTITION_LEADER_EPOCH = -1  # segments.records.NO_PARTITION_LEADER_EPOCH
cdef object _CLIENT = AppendOrigin.CLIENT
cdef object _REPLICATION = AppendOrigin.REPLICATION

cdef struct _Batch:
    size_t position
    size_t size
    int64_t base_offset        # as given (legacy: the last offset until decoded_legacy); replaced by assign_offsets
    int64_t last_offset        # base_offset + last offset delta, once assigned (or checked, for a follower)
    int64_t max_timestamp      # as given; replaced for LogAppendTime
    int64_t producer_id
    int32_t last_offset_delta
    int32_t leader_epoch
    int32_t records
    int16_t attributes         # legacy: the 1-byte attributes (codec bits 0-2, as magic 2's)
    uint8_t magic

cdef struct _Walk:
    # Inputs.
    const uint8_t *buf
    size_t length
    int64_t max_message_bytes
    int64_t max_record_bytes
    bint leader               # the leader's offset checks (lastOffsetDelta + 1 == records > 0)
    bint client               # a client's append (a leader's): Kafka's client-only rules of validateBatch
    # Batches found valid so far: first in the caller's one-entry storage (most appends are one batch), then
    # grown by doubling into allocated memory (at most length / 26 entries).
    _Batch *batches
    _Batch *inline_batches    # the caller's storage, never freed here
    size_t count
    size_t capacity
    size_t compressed         # how many of them are compressed
    size_t producers          # how many of them carry a producer id
    size_t legacy             # how many of them are magic 0/1 (a follower's)
    # The first flaw: code, start of its batch, and what the message needs.
    int failure
    size_t failure_position
    int64_t detail            # size field, stored CRC, record count or body size
    uint32_t computed_crc
    int wire_status
    size_t wire_position      # offset of a framing flaw in the records region


cdef inline int _fail(_Walk *walk, int code, size_t position, int64_t detail) noexcept nogil:
    """Record the walk's first flaw (its code, the start of its batch, what the message needs); returns 1, the
    walk's "stopped, memory sufficed" answer. O(1)."""
    walk.failure = code
    walk.failure_position = position
    walk.detail = detail
    return 1


cdef _Batch *_add(_Walk *walk, const uint8_t *batch, size_t position, size_t total, uint8_t magic) noexcept nogil:
    """A new found batch at ``position`` (its place, size, magic and first 8 bytes filled in; the caller fills the
    rest); NULL when memory runs out. O(1) amortized."""
    cdef size_t capacity
    cdef _Batch *grown
    cdef _Batch *found
    if walk.count == walk.capacity:
        capacity = 8 if walk.capacity < 8 else walk.capacity * 2
        if walk.batches == walk.inline_batches:
            grown = <_Batch *>malloc(capacity * sizeof(_Batch))
            if grown == NULL:
                return NULL
            memcpy(grown, walk.batches, walk.count * sizeof(_Batch))
        else:
            grown = <_Batch *>realloc(walk.batches, capacity * sizeof(_Batch))
            if grown == NULL:
                return NULL
        walk.batches = grown
        walk.capacity = capacity
    found = &walk.batches[walk.count]
    walk.count += 1
    found.position = position
    found.size = total
    found.magic = magic
    found.base_offset = <int64_t>load_be64(batch)
    return found


cdef int _walk(_Walk *walk) noexcept nogil:
    """Validate the batches of walk.buf in order, stopping at the first flaw (walk.failure). Returns 0 when memory
    ran out. O(length): one CRC pass plus a hop over the record lengths of uncompressed batches."""
    cdef const uint8_t *buf = walk.buf
    cdef size_t length = walk.length
    cdef size_t position = 0
    cdef size_t total
    cdef int32_t size
    cdef int32_t records
    cdef int32_t delta
    cdef int64_t producer_id
    cdef uint8_t magic
    cdef uint32_t stored
    cdef uint32_t computed
    cdef int status
    cdef size_t wire_position
    cdef const uint8_t *batch
    cdef _Batch *found
    # Kafka's FileLogInputStream: a batch is read only while more than 17 bytes remain.
    while length - position > HEADER_SIZE_UP_TO_MAGIC:
        batch = buf + position
        size = <int32_t>load_be32(batch + LENGTH_OFFSET)
        if size < RECORD_OVERHEAD_V0:
            return _fail(walk, _SMALL_SIZE, position, size)
        total = <size_t>size + LOG_OVERHEAD
        if total > length - position:
            break
        magic = batch[MAGIC_OFFSET]
        if magic == 0 or magic == 1:
            if walk.leader:
                return _fail(walk, _NOT_V2, position, 0)
            if <int64_t>total > walk.max_message_bytes:
                return _fail(walk, _TOO_LARGE, position, <int64_t>total)
            # Kafka's follower reads a legacy entry's header only (its first offset needs decompression): the
            # caller decodes it (CRC-32 and all) before anything is appended.
            found = _add(walk, batch, position, total, magic)
            if found == NULL:
                return 0
            found.last_offset_delta = 0
            found.leader_epoch = -1
            found.attributes = batch[LEGACY_ATTRIBUTES_OFFSET]
            found.max_timestamp = legacy_max_timestamp(batch, total)
            found.producer_id = -1
            found.records = 1
            walk.legacy += 1
            position += total
            continue
        if total < RECORD_BATCH_OVERHEAD:
            return _fail(walk, _SHORT_BATCH, position, <int64_t>total)
        if magic != 2:
            return _fail(walk, _NOT_V2, position, 0)
        if <int64_t>total > walk.max_message_bytes:
            return _fail(walk, _TOO_LARGE, position, <int64_t>total)
        stored = load_be32(batch + CRC_OFFSET)
        computed = logmgr_crc32c(0, batch + ATTRIBUTES_OFFSET, total - ATTRIBUTES_OFFSET)
        if computed != stored:
            walk.computed_crc = computed
            return _fail(walk, _BAD_CRC, position, stored)
        records = <int32_t>load_be32(batch + RECORDS_COUNT_OFFSET)
        if records < 0:
            return _fail(walk, _BAD_COUNT, position, records)
        # Kafka's validateBatch, after the CRC and before the records are read: offsets are assigned from the
        # last offset delta, so one that disagrees with the records would move the log end offset backwards
        # (a negative delta) or give offsets no record holds; a follower keeps the delta (compaction leaves
        # fewer records than offsets) but never one below 0.
        delta = <int32_t>load_be32(batch + LAST_OFFSET_DELTA_OFFSET)
        if delta < 0:
            return _fail(walk, _BAD_OFFSET_RANGE, position, delta)
        if walk.leader and (records == 0 or <int64_t>delta + 1 != records):
            return _fail(walk, _BAD_LEADER_COUNT, position, records)
        producer_id = <int64_t>load_be64(batch + PRODUCER_ID_OFFSET)
        # Kafka's validateBatch for AppendOrigin.CLIENT: only a coordinator writes control batches (transaction
        # markers), and an idempotent producer numbers its batches from 0 (the producer state takes any sequence
        # as a new producer's first, so a negative one would be kept and de-duplicated against).
        if walk.client:
            if batch[ATTRIBUTES_OFFSET + 1] & ATTRIBUTE_CONTROL:
                return _fail(walk, _CLIENT_CONTROL, position, 0)
            if producer_id >= 0 and <int32_t>load_be32(batch + BASE_SEQUENCE_OFFSET) < 0:
                return _fail(walk, _CLIENT_SEQUENCE, position, 0)
        if (batch[ATTRIBUTES_OFFSET + 1] & ATTRIBUTE_CODEC_MASK) == 0:
            status = frame_records(batch + RECORD_BATCH_OVERHEAD, total - RECORD_BATCH_OVERHEAD, records,
                                   walk.max_record_bytes, &wire_position)
            if status != WIRE_OK:
                walk.wire_status = status
                walk.wire_position = wire_position
                return _fail(walk, _BAD_FRAMING, position, records)
        found = _add(walk, batch, position, total, magic)
        if found == NULL:
            return 0
        found.leader_epoch = <int32_t>load_be32(batch + PARTITION_LEADER_EPOCH_OFFSET)
        found.attributes = <int16_t>((batch[ATTRIBUTES_OFFSET] << 8) | batch[ATTRIBUTES_OFFSET + 1])
        found.last_offset_delta = delta
        found.max_timestamp = <int64_t>load_be64(batch + MAX_TIMESTAMP_OFFSET)
        found.producer_id = producer_id
        found.records = records
        walk.compressed += (found.attributes & ATTRIBUTE_CODEC_MASK) != 0
        walk.producers += found.producer_id >= 0
        position += total
    if walk.count == 0 or position != length:
        return _fail(walk, _INCOMPLETE, position, 0)
    return 1


cdef object _framing_error(const uint8_t *region, size_t length, int status, size_t at, int32_t records,
                           int64_t max_record_bytes):
    """The CorruptRecordError Kafka's framing check raises for ``status`` at region offset ``at``, located in
    the batch (the region starts at byte 61). O(1)."""
    cdef size_t pos = at
    cdef int32_t body = 0
    cdef int64_t position = RECORD_BATCH_OVERHEAD + <int64_t>at
    if status == WIRE_TRUNCATED:
        return CorruptRecordError("buffer ends inside a varint", position=position)
    if status == WIRE_TRAILING_BYTES:
        return CorruptRecordError(
            f"incorrect declared batch size, {length - at} bytes remain after {records} records", position=position
        )
    if status == WIRE_RECORD_TOO_LARGE or status == WIRE_BAD_RECORD_SIZE:
        # The framer read this length before refusing it: read again for the message.
        read_varint(region, length, &pos, &body)
        if status == WIRE_RECORD_TOO_LARGE:
            return RecordTooLargeError(
                f"record of {body} bytes exceeds the limit of {max_record_bytes}", position=position
            )
        return CorruptRecordError(f"invalid record size {body}", position=position)
    return CorruptRecordError("varint is longer than 5 bytes", position=position)


cdef str _batch_refusal(const uint8_t *batch, int failure):
    """Kafka's ``validateBatch`` message for a batch whose header (whole, CRC-checked) has a negative last offset
    delta (``_BAD_OFFSET_RANGE``), on a leader a record count the delta disagrees with (``_BAD_LEADER_COUNT``), or
    on a client's append a control flag (``_CLIENT_CONTROL``) or a producer id with a negative base sequence
    (``_CLIENT_SEQUENCE``); without Kafka's " in topic partition" suffix (the log names its partition). O(1)."""
    cdef int64_t base = <int64_t>load_be64(batch)
    cdef int32_t delta = <int32_t>load_be32(batch + LAST_OFFSET_DELTA_OFFSET)
    cdef int32_t records = <int32_t>load_be32(batch + RECORDS_COUNT_OFFSET)
    if failure == _CLIENT_CONTROL:
        return "Clients are not allowed to write control records"
    if failure == _CLIENT_SEQUENCE:
        return (f"Invalid sequence number {<int32_t>load_be32(batch + BASE_SEQUENCE_OFFSET)} in record batch with "
                f"producerId {<int64_t>load_be64(batch + PRODUCER_ID_OFFSET)}")
    # Python ints: base + delta may pass the int64 range.
    offsets = f"[{base}, {<object>base + delta}]"
    if failure == _BAD_OFFSET_RANGE:
        return f"Batch has an invalid offset range: {offsets}"
    if records == 0:
        return f"Invalid reported count for record batch: {records}"
    return f"Inconsistent batch offset range {offsets} and count of records {records}"


cdef int _stamp(uint8_t *headers, const uint8_t *source, _Batch *batches, size_t count, int64_t offset,
                int32_t leader_epoch, bint stamp_time, int64_t now) noexcept nogil:
    """Fill ``headers`` (61 bytes per batch) with each batch's header stamped (see
    :meth:`AppendScan.assign_offsets`), updating ``batches``; 0 when an offset passes the int64 range. The records
    stay where they are: base offset and leader epoch lie before the CRC'd range, and a LogAppendTime CRC runs
    over the stamped header's CRC'd part and then the batch's own records. O(batches), plus a CRC pass over the
    batches for LogAppendTime."""
    cdef size_t i
    cdef _Batch *b
    cdef uint8_t *p
    cdef uint32_t crc
    for i in range(count):
        b = &batches[i]
        p = headers + i * RECORD_BATCH_OVERHEAD
        memcpy(p, source + b.position, RECORD_BATCH_OVERHEAD)
        b.base_offset = offset
        if add_overflow(offset, b.last_offset_delta, &b.last_offset) or add_overflow(b.last_offset, 1, &offset):
            return 0
        b.leader_epoch = leader_epoch
        store_be64(p, <uint64_t>b.base_offset)
        store_be32(p + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>leader_epoch)
        if stamp_time:
            b.attributes = b.attributes | ATTRIBUTE_LOG_APPEND_TIME
            b.max_timestamp = now
            store_be16(p + ATTRIBUTES_OFFSET, <uint16_t>b.attributes)
            store_be64(p + MAX_TIMESTAMP_OFFSET, <uint64_t>now)
            crc = logmgr_crc32c(0, p + ATTRIBUTES_OFFSET, RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET)
            crc = logmgr_crc32c(crc, source + b.position + RECORD_BATCH_OVERHEAD, b.size - RECORD_BATCH_OVERHEAD)
            store_be32(p + CRC_OFFSET, crc)
    return 1


cdef struct _Reserve:
    # What a write needs to reserve disk ahead of the file's end (see FileAppendState): ``most`` the reservation's
    # largest step (0: none), ``limit`` the size the file never passes (its segment rolls first), ``reserved_end``
    # and ``reserve_at`` FileAppendState's fields, written back.
    int64_t most
    int64_t limit
    int64_t reserved_end
    int64_t reserve_at


cdef inline void _reserve_ahead(int fd, int64_t position, int64_t end, _Reserve *reserve) noexcept nogil:
    """Before a write of bytes ``[position, end)`` that passes ``reserve.reserve_at``: reserve the file's blocks
    from ``position`` (or the reserved end, if past it) up to ``end`` and as many bytes again as the file then
    holds, at least 64 KiB and at most ``reserve.most``, never past ``reserve.limit`` (see
    :class:`FileAppendState`)."""
    cdef int64_t target = min(end + min(reserve.most, max(<int64_t>_RESERVE_LEAST_BYTES, end)), reserve.limit)
    cdef int64_t start = max(position, reserve.reserved_end)
    cdef int err
    if target <= start:
        return  # reserved already, up to the limit
    err = reserve_blocks(fd, start, target - start)
    if err == 0:
        reserve.reserved_end = target
        reserve.reserve_at = target
    elif err == ENOSPC or err == EDQUOT or err == EINTR or err == EIO:
        # No reservation this time: the write itself reports a real shortage; tried again once past this step.
        reserve.reserve_at = target
    else:
        # The file system cannot (EOPNOTSUPP on one without fallocate, ...): never again for this file.
        reserve.reserve_at = INT64_MAX


cdef int _write_iov(int fd, iovec *iov, Py_ssize_t count, int64_t position, Py_ssize_t length,
                    _Reserve *reserve) noexcept:
    """:func:`pwritev_full` of the ``count`` buffers of ``iov`` (``length`` bytes in all) at ``position``, first
    reserving disk ahead when ``reserve`` says it is due; without the GIL for 4 KiB and more, and for a
    reservation; 0 or the errno."""
    cdef int err
    cdef bint reserving = reserve.most > 0 and position + length > reserve.reserve_at
    if length < _NOGIL_WRITE_BYTES and not reserving:
        return pwritev_full(fd, iov, count, position)
    with nogil:
        if reserving:
            _reserve_ahead(fd, position, position + length, reserve)
        err = pwritev_full(fd, iov, count, position)
    return err


@cython.freelist(4)  # one per append in flight: the allocator is skipped
cdef class AppendScan:
    """What :func:`scan_append` found: the valid batches before the first flaw (if any) and their facts; after
    :meth:`assign_offsets` (leader) or :meth:`check_follower`, the offsets and timestamps of the append.

    ``data`` is the input, never changed: a leader's stamped headers are kept apart and written with the records
    they head by :meth:`buffers` (no copy of the records)."""

    cdef readonly object data
    cdef readonly int failure
    cdef readonly Py_ssize_t failure_position
    cdef readonly Py_ssize_t failure_size
    cdef readonly object error
    cdef readonly str reason
    cdef readonly Py_ssize_t compressed_batches
    cdef readonly Py_ssize_t producer_batches
    cdef readonly Py_ssize_t legacy_batches
    cdef readonly long long records
    cdef readonly long long first_offset
    cdef readonly long long last_offset
    cdef readonly long long largest_offset
    cdef readonly long long max_timestamp
    cdef readonly long long offset_of_max_timestamp
    cdef _Batch *_batches      # _one_batch, or allocated for two batches and more
    cdef size_t _count
    cdef bint _leader
    cdef uint8_t *_headers     # the stamped headers, 61 bytes per batch (assign_offsets), else NULL
    # The storage of a one-batch append (most appends), which then allocates nothing.
    cdef _Batch _one_batch
    cdef uint8_t _one_header[RECORD_BATCH_OVERHEAD]

    def __dealloc__(self):
        if self._batches != &self._one_batch:
            free(self._batches)
        if self._headers != self._one_header:
            free(self._headers)

    @property
    def batches(self):
        """Number of valid batches (all of them when :attr:`failure` is ``SCAN_OK``). O(1)."""
        return self._count

    @property
    def log_append_time_batches(self):
        """How many valid batches of the input carry the LogAppendTime flag (a leader refuses them on a CreateTime
        topic; zero lets it skip decoding the timestamps when no window bounds them). O(batches)."""
        return self._log_append_time_batches()

    cdef Py_ssize_t _log_append_time_batches(self) noexcept:
        cdef size_t i
        cdef Py_ssize_t count = 0
        for i in range(self._count):
            count += (self._batches[i].attributes & ATTRIBUTE_LOG_APPEND_TIME) != 0
        return count

    def spans(self, *, compressed=False, legacy=False):
        """``(start, end)`` of the valid batches in order: all of them, or when filters are given those matching
        any of them: ``compressed`` magic-2 ones (codec bits set: their records are framed by the caller),
        ``legacy`` ones (magic 0/1: decoded by the caller). O(batches)."""
        cdef size_t i
        cdef _Batch *b
        cdef bint every = not (compressed or legacy)
        out = []
        for i in range(self._count):
            b = &self._batches[i]
            if (every
                    or (compressed and b.magic == 2 and (b.attributes & ATTRIBUTE_CODEC_MASK) != 0)
                    or (legacy and b.magic != 2)):
                out.append((b.position, b.position + b.size))
        return out

    def producer_spans(self):
        """``(start, end, base offset)`` of the batches of a producer (id >= 0), in order: where each lies in
        :attr:`data` and the base offset it gets in the log (assigned by :meth:`assign_offsets`, else as given).
        O(batches)."""
        cdef size_t i
        cdef _Batch *b
        out = []
        for i in range(self._count):
            b = &self._batches[i]
            if b.producer_id >= 0:
                out.append((b.position, b.position + b.size, b.base_offset))
        return out

    def buffers(self):
        """What the log writes, in order (:meth:`_write`'s buffers, as Python objects): the input as it is (a
        follower's), or after :meth:`assign_offsets` each batch's stamped 61-byte header followed by a view of its
        records in :attr:`data`. O(batches)."""
        cdef Py_buffer source
        cdef iovec few[_FEW_BUFFERS]
        cdef iovec *iov = few
        cdef Py_ssize_t count, i
        cdef const uint8_t *start
        if self._headers == NULL:
            return [self.data]
        view = memoryview(self.data)
        out = []
        PyObject_GetBuffer(self.data, &source, PyBUF_SIMPLE)
        try:
            count = self._layout(<const uint8_t *>source.buf, source.len, &iov, few)
            start = <const uint8_t *>source.buf
            for i in range(count):
                if i % 2 == 0:
                    out.append(PyBytes_FromStringAndSize(<char *>iov[i].iov_base, <Py_ssize_t>iov[i].iov_len))
                else:
                    offset = <const uint8_t *>iov[i].iov_base - start
                    out.append(view[offset : offset + <Py_ssize_t>iov[i].iov_len])
        finally:
            if iov != few:
                free(iov)
            PyBuffer_Release(&source)
        return out

    cdef Py_ssize_t _layout(self, const uint8_t *source, Py_ssize_t length, iovec **iov, iovec *few) except -1:
        """The buffers the log writes for this scan of ``source`` (``length`` bytes: :attr:`data`) into
        ``iov[0]`` (``few``, holding ``_FEW_BUFFERS``, or an allocated array the caller frees when it is not
        ``few``): the input whole, or each stamped header then the batch's records. Returns their count.
        O(batches)."""
        cdef Py_ssize_t count
        cdef size_t i
        cdef _Batch *b
        if self._headers == NULL:
            few[0].iov_base = <void *>source
            few[0].iov_len = <size_t>length
            iov[0] = few
            return 1
        count = 2 * <Py_ssize_t>self._count
        iov[0] = few
        if count > _FEW_BUFFERS:
            iov[0] = <iovec *>malloc(<size_t>count * sizeof(iovec))
            if iov[0] == NULL:
                raise MemoryError()
        for i in range(self._count):
            b = &self._batches[i]
            iov[0][2 * i].iov_base = self._headers + i * RECORD_BATCH_OVERHEAD
            iov[0][2 * i].iov_len = RECORD_BATCH_OVERHEAD
            iov[0][2 * i + 1].iov_base = <void *>(source + b.position + RECORD_BATCH_OVERHEAD)
            iov[0][2 * i + 1].iov_len = b.size - RECORD_BATCH_OVERHEAD
        return count

    cdef int _write(self, int fd, int64_t position, Py_ssize_t *length, _Reserve *reserve) except -1:
        """Write what the log keeps of this scan at ``position`` of ``fd`` (:meth:`_layout`'s buffers: one
        ``pwritev`` for all of them, no Python object per buffer, the GIL released for 4 KiB and more), reserving
        disk ahead first when ``reserve`` says so (:func:`_write_iov`); ``length`` gets the byte count (the
        input's: each stamped header replaces the one it was stamped from). 0 or the errno. O(length)."""
        cdef Py_buffer source
        cdef iovec few[_FEW_BUFFERS]
        cdef iovec *iov = few
        cdef Py_ssize_t count
        cdef int err
        PyObject_GetBuffer(self.data, &source, PyBUF_SIMPLE)
        try:
            length[0] = source.len
            count = self._layout(<const uint8_t *>source.buf, source.len, &iov, few)
            err = _write_iov(fd, iov, count, position, source.len, reserve)
        finally:
            if iov != few:
                free(iov)
            PyBuffer_Release(&source)
        return err

    def decoded_legacy(self, facts):
        """Follower: the ``(first offset, record count)`` of every legacy batch, in order, as the caller's decode
        found them; each first offset at most the batch's last offset and within 2^31 - 1 of it (the caller refuses
        others as Kafka's ``validateBatch`` does). Until then a legacy batch has its header's facts, Kafka's shallow
        view: its last offset as its first, one record. Called before :meth:`check_follower`. O(batches)."""
        cdef size_t i
        cdef Py_ssize_t n = 0
        cdef _Batch *b
        cdef int64_t first, last
        facts = list(facts)
        if len(facts) != self.legacy_batches:
            raise ValueError(f"{len(facts)} facts for {self.legacy_batches} legacy batches")
        for i in range(self._count):
            b = &self._batches[i]
            if b.magic == 2:
                continue
            first, records = facts[n]
            n += 1
            last = b.base_offset + b.last_offset_delta
            if not 0 <= <object>last - <object>first <= 0x7FFFFFFF or records < 1:
                raise ValueError(f"legacy batch at {b.position}: first offset {first} or {records} records do not "
                                 f"fit its last offset {last}")
            b.base_offset = first
            b.last_offset_delta = <int32_t>(last - first)
            b.records = records

    def epoch_starts(self):
        """``(leader epoch, base offset)`` of every batch with an epoch (>= 0), in order: what the leader epoch
        cache is told after the write. O(batches)."""
        cdef size_t i
        return [
            (self._batches[i].leader_epoch, self._batches[i].base_offset)
            for i in range(self._count)
            if self._batches[i].leader_epoch >= 0
        ]

    def assign_offsets(self, long long next_offset, int leader_epoch, append_time=None):
        """Leader: stamp each batch's header with its base offset (from ``next_offset`` on, each batch taking
        ``last offset delta + 1`` offsets), ``leader_epoch`` and, when ``append_time`` is given, the
        LogAppendTime flag and that max timestamp (with the CRC over the stamped header and the batch's records:
        both are CRC-covered). The stamped headers are kept apart (:meth:`buffers`), :attr:`data` is unchanged.
        Sets the offsets and the max timestamp facts, or ``failure = SCAN_OFFSET_OVERFLOW`` when an offset passes
        the int64 range (then nothing is kept). Only for a leader's scan (its offset checks let each batch take
        exactly its records' offsets), once. O(batches), plus a CRC pass over the input for LogAppendTime."""
        self._assign(next_offset, leader_epoch, append_time is not None, append_time if append_time is not None else 0)

    cdef int _assign(self, int64_t next_offset, int leader_epoch, bint stamp_time, int64_t now) except -1:
        """:meth:`assign_offsets`, ``now`` stamped when ``stamp_time``."""
        self._require_valid()
        if not self._leader:
            raise ValueError("offsets are assigned only to a leader's scan (scan_append(..., leader=True))")
        if self._headers != NULL:
            raise ValueError("offsets were assigned already")
        # A buffer view, not a typed memoryview: its set-up costs a tenth (every append passes here).
        cdef Py_buffer source
        cdef uint8_t *headers = self._one_header
        cdef int ok
        if self._count > 1:
            headers = <uint8_t *>malloc(self._count * RECORD_BATCH_OVERHEAD)
            if headers == NULL:
                raise MemoryError()
        try:
            PyObject_GetBuffer(self.data, &source, PyBUF_SIMPLE)
        except BaseException:
            if headers != self._one_header:
                free(headers)
            raise
        if stamp_time and source.len >= _NOGIL_WALK_BYTES:
            with nogil:
                ok = _stamp(headers, <const uint8_t *>source.buf, self._batches, self._count, next_offset,
                            leader_epoch, stamp_time, now)
        else:
            ok = _stamp(headers, <const uint8_t *>source.buf, self._batches, self._count, next_offset, leader_epoch,
                        stamp_time, now)
        PyBuffer_Release(&source)
        if not ok:
            if headers != self._one_header:
                free(headers)
            self.failure = _OFFSET_OVERFLOW
            return 0
        self._headers = headers
        self._gather_offsets()
        return 0

    def check_follower(self, long long log_end_offset):
        """Follower: the first batch whose base offset lies below the offset it must start at or above (the log
        end, then each batch's last offset + 1), as ``(base offset, expected offset)``, else None after setting the
        offset and max timestamp facts (``failure = SCAN_OFFSET_OVERFLOW`` when a last offset passes the int64
        range). O(batches)."""
        cdef int64_t expected = log_end_offset
        cdef size_t i
        cdef _Batch *b
        self._require_valid()
        for i in range(self._count):
            b = &self._batches[i]
            if b.base_offset < expected:
                return (b.base_offset, expected)
            if add_overflow(b.base_offset, b.last_offset_delta, &b.last_offset) or \
                    add_overflow(b.last_offset, 1, &expected):
                self.failure = _OFFSET_OVERFLOW
                return None
        self._gather_offsets()
        return None

    cdef int _require_valid(self) except -1:
        if self.failure != _OK:
            raise ValueError(f"the append was refused (scan failure {self.failure}); nothing to assign")
        return 0

    cdef void _gather_offsets(self):
        """First/last/largest offsets, record count, and the max timestamp with the last offset of the first
        batch holding it (Kafka's ``offsetOfMaxTimestamp`` of an append). O(batches)."""
        cdef size_t i
        cdef _Batch *b = &self._batches[0]
        cdef int64_t records = 0
        self.first_offset = b.base_offset
        self.largest_offset = b.last_offset
        self.max_timestamp = b.max_timestamp
        self.offset_of_max_timestamp = b.last_offset
        for i in range(self._count):
            b = &self._batches[i]
            records += b.records
            if b.last_offset > self.largest_offset:
                self.largest_offset = b.last_offset
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp = b.max_timestamp
                self.offset_of_max_timestamp = b.last_offset
        self.last_offset = b.last_offset
        self.records = records


def scan_append(records, long long max_message_bytes, bint leader, bint client):
    """Walk the batches of one append (any contiguous buffer) and validate each as Kafka does before an append:
    the file rule (a size field of at least 14, whole batches), magic 2 (a follower also takes magic 0/1 entries,
    whose size is checked here and the rest by the caller: see :meth:`AppendScan.decoded_legacy`), at most
    ``max_message_bytes``, the CRC, a
    non-negative record count, Kafka's ``validateBatch`` offset checks (a last offset delta of at least 0; for a
    ``leader``, at least one record and ``lastOffsetDelta + 1 == records``: offsets are assigned from the delta)
    and, for a ``client``'s append (a leader's whose origin is Kafka's ``AppendOrigin.CLIENT``), Kafka's client-only
    rules: no control batch, no producer id with a negative base sequence; then, for uncompressed batches, the
    framing of exactly that many records (lengths only; a record above ``max(max_message_bytes, 64 MiB)`` is too
    large). Stops at the first flaw. O(size), the GIL released for appends of 64 KiB and more."""
    return _scan(records, max_message_bytes, leader, client)


cdef AppendScan _scan(records, long long max_message_bytes, bint leader, bint client):
    """:func:`scan_append`, called from C (the append's own call, without a Python call's argument parsing)."""
    # A buffer view, not a typed memoryview: its set-up costs a tenth (every append passes here). Released when
    # the scan is built: the walk's failure reports read the bytes.
    cdef Py_buffer view
    cdef AppendScan scan = AppendScan.__new__(AppendScan)
    if client and not leader:
        raise ValueError("a client's append is a leader's (scan_append(..., leader=True, client=True))")
    PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
    try:
        _scan_into(scan, records, <const uint8_t *>view.buf, <size_t>view.len, max_message_bytes, leader, client)
    finally:
        PyBuffer_Release(&view)
    return scan


cdef int _scan_into(AppendScan scan, object records, const uint8_t *buf, size_t length, long long max_message_bytes,
                    bint leader, bint client) except -1:
    """:func:`scan_append`'s walk of ``buf`` (``records``' bytes, ``length`` of them) into ``scan``. O(length)."""
    cdef _Walk walk
    cdef int enough_memory = 1
    cdef const uint8_t *batch
    walk.length = length
    walk.buf = buf if walk.length > 0 else NULL
    walk.max_message_bytes = max_message_bytes
    walk.max_record_bytes = max(max_message_bytes, _DEFAULT_MAX_RECORD_BYTES)
    walk.leader = leader
    walk.client = client
    walk.batches = walk.inline_batches = &scan._one_batch
    walk.count = 0
    walk.capacity = 1
    walk.compressed = 0
    walk.producers = 0
    walk.legacy = 0
    walk.failure = _OK
    walk.failure_position = 0
    if walk.length >= _NOGIL_WALK_BYTES:
        with nogil:
            enough_memory = _walk(&walk)
    else:
        enough_memory = _walk(&walk)
    scan._batches = walk.batches
    scan._count = walk.count
    scan._leader = leader
    scan.compressed_batches = walk.compressed
    scan.producer_batches = walk.producers
    scan.legacy_batches = walk.legacy
    if not enough_memory:
        raise MemoryError()
    scan.data = records
    scan.failure_position = walk.failure_position
    batch = walk.buf + walk.failure_position
    if walk.failure == _SMALL_SIZE:
        scan.error = CorruptRecordError(
            f"found record size {walk.detail} smaller than the minimum record overhead ({RECORD_OVERHEAD_V0})",
            position=walk.failure_position,
        )
    elif walk.failure == _SHORT_BATCH:
        # The batch view's own check, located in the append as the walk locates it.
        scan.error = CorruptRecordError(
            f"record batch is corrupt (the size {walk.detail} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD})",
            position=walk.failure_position,
        )
    elif walk.failure == _BAD_CRC:
        scan.error = CorruptRecordError(
            f"record batch is corrupt (stored crc = {walk.detail}, computed crc = {walk.computed_crc})",
            position=CRC_OFFSET,
        )
    elif walk.failure == _BAD_COUNT:
        scan.error = CorruptRecordError(f"found invalid record count {walk.detail}", position=RECORDS_COUNT_OFFSET)
    elif walk.failure == _BAD_FRAMING:
        scan.error = _framing_error(
            batch + RECORD_BATCH_OVERHEAD,
            <size_t>load_be32(batch + LENGTH_OFFSET) + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD,
            walk.wire_status,
            walk.wire_position,
            <int32_t>load_be32(batch + RECORDS_COUNT_OFFSET),
            walk.max_record_bytes,
        )
    elif (walk.failure == _BAD_OFFSET_RANGE or walk.failure == _BAD_LEADER_COUNT or walk.failure == _CLIENT_CONTROL
            or walk.failure == _CLIENT_SEQUENCE):
        scan.reason = _batch_refusal(batch, walk.failure)
    if scan.error is not None:
        scan.failure = _CORRUPT
    elif scan.reason is not None:
        scan.failure = _INVALID
    elif walk.failure == _TOO_LARGE:
        scan.failure = _TOO_LARGE
        scan.failure_size = walk.detail
    else:
        scan.failure = walk.failure
    return 0


# -- the append state of a segment's files ------------------------------------------------------------------------

cdef int64_t _MAX_RELATIVE_OFFSET = 2147483647  # segments.abstract_index.MAX_RELATIVE_OFFSET


cdef int _write_buffers(int fd, tuple buffers, int64_t position, Py_ssize_t *length, _Reserve *reserve) except -1:
    """Write the bytes of ``buffers`` (objects with the buffer interface) in order at ``position`` of ``fd`` with
    :func:`_write_iov` (``reserve`` as there); ``length`` gets their byte count. 0 or the errno. O(length)."""
    cdef Py_ssize_t count = len(buffers)
    cdef Py_ssize_t held = 0
    cdef Py_ssize_t i
    cdef Py_buffer *views
    cdef iovec *iov
    cdef int err = 0
    length[0] = 0
    if count == 0:
        return 0
    views = <Py_buffer *>malloc(<size_t>count * sizeof(Py_buffer))
    iov = <iovec *>malloc(<size_t>count * sizeof(iovec))
    try:
        if views == NULL or iov == NULL:
            raise MemoryError()
        for i in range(count):
            PyObject_GetBuffer(buffers[i], &views[i], PyBUF_SIMPLE)
            held = i + 1
            iov[i].iov_base = views[i].buf
            iov[i].iov_len = <size_t>views[i].len
            length[0] += views[i].len
        err = _write_iov(fd, iov, count, position, length[0], reserve)
    finally:
        for i in range(held):
            PyBuffer_Release(&views[i])
        free(views)
        free(iov)
    return err


cdef class FileAppendState:
    """The append state of a ``.log`` (:class:`segments.file_records.FileRecords` derives from it), in C fields
    that the Python class and the compiled segment append share: the descriptor (None until opened, -1 once
    closed for good), the size readers see, whether the file is writable, and its path (with the path as text).
    One writer (the owning log's lock); readers read ``_size`` without a lock, and it moves only after the bytes
    are written.

    A log's appends reserve the file's disk blocks ahead of its end (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``:
    the size, all a reader or Kafka sees, stays the bytes written), in steps as large as the file already is,
    between 64 KiB and the topic's ``logmgr.append.reserve.bytes``, never past ``segment.bytes`` (the segment
    rolls first). A write into reserved blocks skips the file system's allocation work per written block (ext4's
    delayed allocation: a reservation and an extent-status entry per block), which is about a tenth of the time
    of a 16 KiB ``write`` on ext4 (``bench/append_bench.py``). ``_reserved_end``: blocks are reserved up to there
    (the trim at roll and close gives back what lies past the size, as does a truncation); ``_reserve_at``: a
    write reaching past it reserves the next step (``INT64_MAX`` once the file system refused the call as
    unsupported). A refused step (a full disk or quota) only waits for the next one: the write itself reports a
    real shortage."""

    cdef public object _fd
    cdef public object _size
    cdef public object _writable
    cdef public object _path
    cdef public object _path_name
    cdef public int64_t _reserved_end
    cdef public int64_t _reserve_at

    def append(self, *buffers):
        """Append the bytes of ``buffers`` in order, written together (``pwritev``: a leader writes each stamped
        batch header and the producer's records after it without joining them), continuing after short writes;
        return the position they start at. No disk is reserved ahead (only a log's appends do). O(total length).

        A failed write (``ENOSPC``, ``EFBIG``, ``EIO``) raises an ``OSError`` naming the file and leaves
        :attr:`size_in_bytes` unchanged, so readers never see the bytes a short write left behind; the next append
        overwrites them and :meth:`close` trims them."""
        return self._append(None, buffers, 0, 0)

    cdef int64_t _append(self, AppendScan scan, tuple buffers, int64_t reserve_most, int64_t reserve_limit) except -1:
        """:meth:`append` of ``buffers``, or of what ``scan`` keeps (:meth:`AppendScan._write`), reserving disk
        ahead in steps of at most ``reserve_most`` bytes (0: none), never past ``reserve_limit`` (the segment's
        ``segment.bytes``). O(length)."""
        cdef int64_t position = <int64_t>self._size
        cdef Py_ssize_t length = 0
        cdef int err
        cdef _Reserve reserve
        reserve.most = reserve_most
        reserve.limit = reserve_limit
        reserve.reserved_end = self._reserved_end
        reserve.reserve_at = self._reserve_at
        if not self._writable:
            self._require_writable()
        fd = self._fd
        if fd is None:
            fd = self._descriptor()
        if scan is not None:
            err = scan._write(fd, position, &length, &reserve)
        else:
            err = _write_buffers(fd, buffers, position, &length, &reserve)
        self._reserved_end = reserve.reserved_end
        self._reserve_at = reserve.reserve_at
        if err:
            raw = OSError(err, strerror(err).decode())
            raise self._located(raw, f"append of {length} bytes at position {position}") from raw
        self._size = position + length
        return position


cdef class LazyIndexState:
    """The state of a lazily opened index (``segments.lazy_index.LazyIndex`` derives from this class), in C fields
    the Python class shares: ``_index`` (the opened index, None until opened), ``_path``, ``_opener``,
    ``_resize_to``, ``_lock`` (their meaning is the Python class's). The append reads ``_index`` four times:
    it is typed, read-only from Python, set by :meth:`_set_index`."""

    cdef public IndexEntries _index
    cdef public object _path
    cdef public object _opener
    cdef public object _resize_to
    cdef public object _lock

    def _set_index(self, IndexEntries index):
        """Hold ``index``, the opened index (None: unopened). O(1)."""
        self._index = index


cdef inline IndexEntries _opened_index(LazyIndexState lazy, segment, bint offsets):
    """The opened index behind a segment's lazy holder (a ``LazyIndex``: its ``_index``), or the segment's property
    that opens it (``offset_index`` / ``time_index``)."""
    if lazy is not None and lazy._index is not None:
        return lazy._index
    return segment.offset_index if offsets else segment.time_index


cdef class SegmentAppendState:
    """The append state of a segment (:class:`segments.log_segment.LogSegment` derives from it), in C fields that
    the Python class and the compiled append share, and the two steps of every append: Kafka's roll rule
    (:meth:`roll_due`) and the write with its index entries (:meth:`append_scan`, :meth:`append_batches`).

    ``_log``, ``_offset_index``, ``_time_index``: the ``.log`` object and the index holders, None until made (a
    listed segment makes them on first use); typed, read-only from Python, set by :meth:`_set_log` and
    :meth:`_set_index_holders`. ``_max_timestamp``: the largest batch max timestamp appended (-1:
    none), None until known (see ``_max_timestamp_so_far``; a property over two C fields, so that an append stores
    it without an int object), with ``_offset_of_max_timestamp`` (set with it, and read only once it is known).
    ``rolling_based_timestamp``: the first batch's max timestamp (the time rule's start), None until known.
    ``_bytes_since_last_index_entry``: appended since the last offset-index entry. One writer (the owning log's
    lock)."""

    cdef public FileAppendState _log
    cdef public LazyIndexState _offset_index
    cdef public LazyIndexState _time_index
    cdef public object base_offset
    cdef public object index_interval_bytes
    cdef public object roll_jitter_ms
    cdef public object created_ms
    cdef public int64_t _bytes_since_last_index_entry
    cdef int64_t _max_timestamp_value  # the largest max timestamp, while _max_timestamp_known
    cdef bint _max_timestamp_known
    cdef public int64_t _offset_of_max_timestamp
    cdef public object rolling_based_timestamp
    # The rest of the Python class's state (see there), kept here too: an attribute in the instance dict of a
    # class derived from a compiled one is read without the interpreter's specialization, at three times the cost.
    cdef public object _txn_index
    cdef public object _listed_size
    cdef public object _txn_index_unlisted
    cdef public object _resize_indexes_to
    cdef public object _suffix
    cdef public object _closed
    cdef public object _directory
    cdef public object _writable
    cdef public object _max_index_size
    cdef public object _clock

    def __cinit__(self):
        # What differs from None (or 0) for a new segment (the arguments of the constructor are ignored here).
        self._offset_of_max_timestamp = -1
        self._txn_index_unlisted = False
        self._suffix = ""
        self._closed = False

    def _setup(self, directory, base_offset, str file_suffix, size, writable, max_index_size, index_interval_bytes,
               roll_jitter_ms, clock, created_ms=None, bint txn_index_listed=True):
        """Set what a segment's files are opened from (none of them is made or opened here): its ``directory``,
        ``base_offset`` and ``file_suffix``, ``size`` (a listed segment's ``.log`` length, if known, else None),
        ``txn_index_listed`` (False: its listing has no ``.txnindex``), ``created_ms`` (None: ``clock()`` now).
        Compiled: a log load sets up every segment of every partition, and an interpreted frame per segment was a
        tenth of a clean load. O(1)."""
        self._set_fields(directory, base_offset, file_suffix, size, writable, max_index_size, index_interval_bytes,
                         roll_jitter_ms, clock, int(clock() * 1000) if created_ms is None else created_ms,
                         txn_index_listed)

    cdef void _set_fields(self, directory, base_offset, str file_suffix, size, writable, max_index_size,
                          index_interval_bytes, roll_jitter_ms, clock, created_ms, bint txn_index_listed):
        """What :meth:`_setup` and :meth:`_listed` set. O(1)."""
        self._directory = directory
        self._suffix = file_suffix
        self._listed_size = size
        self._txn_index_unlisted = not txn_index_listed
        self._writable = writable
        self._max_index_size = max_index_size
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self.created_ms = created_ms

    @classmethod
    def _listed(cls, directory, list base_offsets, list sizes, list txn_indexes_listed, list roll_jitters_ms,
                writable, max_index_size, index_interval_bytes, clock, created_ms):
        """One segment of ``cls`` per base offset, set up as :meth:`_setup` does with the per-segment ``sizes``,
        ``txn_indexes_listed`` and ``roll_jitters_ms`` (lists as long as ``base_offsets``) and the rest shared: a
        log load's segments, made in one compiled loop with no interpreted frame or call per segment. O(n)."""
        cdef Py_ssize_t count = len(base_offsets), i
        cdef SegmentAppendState segment
        cdef list made = []
        if len(sizes) != count or len(txn_indexes_listed) != count or len(roll_jitters_ms) != count:
            raise ValueError("sizes, txn_indexes_listed and roll_jitters_ms must have one item per base offset")
        for i in range(count):
            segment = cls.__new__(cls)
            segment._set_fields(directory, base_offsets[i], "", sizes[i], writable, max_index_size,
                                index_interval_bytes, roll_jitters_ms[i], clock, created_ms, txn_indexes_listed[i])
            made.append(segment)
        return made

    def _set_log(self, FileAppendState log):
        """Hold ``log`` as the segment's ``.log`` object. O(1)."""
        self._log = log

    def _set_index_holders(self, LazyIndexState offset_index, LazyIndexState time_index):
        """Hold the offset and time index holders. O(1)."""
        self._offset_index = offset_index
        self._time_index = time_index

    @property
    def _max_timestamp(self):
        return self._max_timestamp_value if self._max_timestamp_known else None

    @_max_timestamp.setter
    def _max_timestamp(self, value):
        if value is None:
            self._max_timestamp_known = False
        else:
            self._max_timestamp_value = value
            self._max_timestamp_known = True

    def roll_due(self, int64_t incoming_bytes, int64_t max_timestamp, int64_t last_offset, int64_t now_ms,
                 int64_t segment_bytes, int64_t roll_ms):
        """Kafka's ``shouldRoll`` for an append of ``incoming_bytes`` whose largest offset is ``last_offset`` and
        max timestamp ``max_timestamp`` (§6.1), cheapest rule first: ``segment.bytes``; the offset overflowing the
        32-bit relative range; the time rule (``roll_ms`` less this segment's jitter) on ``timeWaitedForRoll``, the
        incoming max timestamp minus the first batch's max timestamp when that is known (>= 0), else wall time
        since this segment object was created; either index full (the time index keeps its last slot for the
        roll's entry). One call per append. O(1) after the first call on a reopened segment (which reads the
        first batch header)."""
        return self._roll_due(incoming_bytes, max_timestamp, last_offset, now_ms, None, segment_bytes, roll_ms)

    cdef bint _roll_due(self, int64_t incoming_bytes, int64_t max_timestamp, int64_t last_offset, object now_ms,
                        object clock, int64_t segment_bytes, int64_t roll_ms) except -1:
        """:meth:`roll_due`; ``now_ms`` None: ``clock.time_ms()``, asked only when the time rule needs it."""
        cdef int64_t size
        cdef int64_t waited
        cdef FileAppendState log = self._log
        size = log._size if log is not None else self.size
        if size > segment_bytes - incoming_bytes or last_offset - <int64_t>self.base_offset > _MAX_RELATIVE_OFFSET:
            return True
        if size > 0:
            first = self.rolling_based_timestamp
            if first is None:
                for found in self.log.batches():
                    first = self.rolling_based_timestamp = found.batch.max_timestamp
                    break
            if first is not None and first >= 0:
                waited = max_timestamp - <int64_t>first
            else:
                waited = (clock.time_ms() if now_ms is None else now_ms) - self.created_ms
            if waited > roll_ms - <int64_t>self.roll_jitter_ms:
                return True
        return (_opened_index(self._offset_index, self, True)._full()
                or _opened_index(self._time_index, self, False)._full())

    def append_scan(self, AppendScan scan, int64_t largest_timestamp, int64_t shallow_offset_of_max_timestamp):
        """Append what the log keeps of ``scan`` (its batches, a leader's with their stamped headers: written
        without a Python object per buffer); ``largest_timestamp`` and ``shallow_offset_of_max_timestamp`` as for
        :meth:`append_batches`. Returns the position the bytes start at. O(length) for the write."""
        return self._append(scan, None, scan.largest_offset, largest_timestamp, shallow_offset_of_max_timestamp, 0, 0)

    def append_batches(self, buffers, int64_t largest_offset, int64_t largest_timestamp,
                       int64_t shallow_offset_of_max_timestamp):
        """Append batches already walked by the caller (Kafka's ``LogSegment.append``): their bytes are those of
        ``buffers`` in order (one write), ``largest_offset`` is their largest last offset, ``largest_timestamp``
        their largest max timestamp if above -1 (else -1) and ``shallow_offset_of_max_timestamp`` the last offset
        of the first batch holding it (else -1). Index entries follow Kafka's append rule: past
        ``index.interval.bytes`` since the last entry, an offset entry for this append's start and a time entry
        for the segment's max timestamp so far. Returns the position the bytes start at (no disk is reserved ahead:
        only a log's own appends do, see :class:`FileAppendState`). O(total length) for the write."""
        return self._append(None, tuple(buffers), largest_offset, largest_timestamp,
                            shallow_offset_of_max_timestamp, 0, 0)

    cdef int64_t _append(self, AppendScan scan, tuple buffers, int64_t largest_offset, int64_t largest_timestamp,
                         int64_t shallow_offset_of_max_timestamp, int64_t reserve_bytes,
                         int64_t reserve_limit) except -1:
        """The append of :meth:`append_scan` and :meth:`append_batches`, reserving disk ahead of the ``.log``'s
        end in steps of at most ``reserve_bytes`` (a log's ``logmgr.append.reserve.bytes``; 0: none) never past
        ``reserve_limit`` (its ``segment.bytes``); see :class:`FileAppendState`."""
        cdef FileAppendState file
        cdef int64_t position, length, most
        cdef int64_t since_index_entry = self._bytes_since_last_index_entry
        if not 0 <= largest_offset - <int64_t>self.base_offset <= _MAX_RELATIVE_OFFSET:
            self._ensure_offset_in_range(largest_offset)
        file = self._log
        if file is None:
            file = self.log
        position = file._append(scan, buffers, reserve_bytes, reserve_limit)
        length = <int64_t>file._size - position
        if position == 0:
            self.rolling_based_timestamp = largest_timestamp
        most = self._max_timestamp_value if self._max_timestamp_known else self._max_timestamp_so_far().timestamp
        if largest_timestamp > most:
            most = largest_timestamp
            self._max_timestamp_value = most
            self._max_timestamp_known = True
            self._offset_of_max_timestamp = shallow_offset_of_max_timestamp
        if since_index_entry > <int64_t>self.index_interval_bytes:
            _opened_index(self._offset_index, self, True)._append_offset(largest_offset, position)
            _opened_index(self._time_index, self, False)._maybe_append_time(
                most, self._offset_of_max_timestamp, False, False)
            self._bytes_since_last_index_entry = length
        else:
            self._bytes_since_last_index_entry = since_index_entry + length
        return position


# -- the state classes' fields, as the interpreter reads slots ---------------------------------------------------

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
        const char *doc
    enum:
        T_OBJECT_EX
        T_LONGLONG
        READONLY

cdef extern from "Python.h":
    object PyDescr_NewMember(PyTypeObject *, PyMemberDef *)
    void PyType_Modified(PyTypeObject *)

cdef list _member_names = []  # the UTF-8 names the member definitions point to, kept for the life of the types


cdef int _expose_as_members(type cls, tuple names, tuple int64_names=(), tuple typed=()) except -1:
    """Give the ``cdef public`` fields ``names`` (objects) and ``int64_names`` (``int64_t``) of ``cls`` member
    descriptors (``T_OBJECT_EX``, as a ``__slots__`` slot has, and ``T_LONGLONG``) in place of the properties Cython
    makes for them: the interpreter specializes a read of a slot, not a property, so each Python read of a field
    (the Python classes read them on every fetch) would otherwise cost a generic lookup and a call, twice an
    instance attribute's. ``typed``: (name, type) of the object fields declared with a type (None or an instance
    of it, which the compiled code reads without a type test): their members are read-only, since a member
    cannot check what is stored, and the class sets them through its typed ``_set_*`` methods. Each field's
    place is found by writing a fresh object (or a marker number) through its property on a probe instance and
    finding it, once, among the instance's words. The object fields are never deleted (a deleted one would be
    NULL, which the compiled code does not expect). O(fields x instance size), once per class at import."""
    cdef PyTypeObject *tp = <PyTypeObject *>cls
    cdef Py_ssize_t words = tp.tp_basicsize // <Py_ssize_t>sizeof(PyObject *)
    cdef PyObject **slots
    cdef int64_t *numbers
    cdef PyMemberDef *member
    cdef Py_ssize_t i, found
    cdef int64_t number_marker = 0x6c6f676d67720000  # "logmgr" and a count, never a field's default
    probe = cls.__new__(cls)
    slots = <PyObject **><PyObject *>probe
    numbers = <int64_t *><PyObject *>probe
    types = dict(typed)
    for name in names + int64_names + tuple(types):
        is_number = name in int64_names
        number_marker += 1
        kind = types.get(name)
        marker = number_marker if is_number else object() if kind is None else kind.__new__(kind)
        setattr(probe, name, marker)
        found = -1
        for i in range(words):
            if (numbers[i] == number_marker) if is_number else (slots[i] == <PyObject *>marker):
                if found >= 0:
                    raise RuntimeError(f"{cls.__name__}.{name}: its marker appears twice in the instance")
                found = i
        setattr(probe, name, 0 if is_number else None)
        if found < 0:
            raise RuntimeError(f"{cls.__name__}.{name}: not a field of the instance")
        encoded = name.encode()
        _member_names.append(encoded)
        member = <PyMemberDef *>PyMem_Malloc(sizeof(PyMemberDef))
        if member == NULL:
            raise MemoryError()
        member.name = encoded
        member.type = T_LONGLONG if is_number else T_OBJECT_EX
        member.offset = found * <Py_ssize_t>sizeof(PyObject *)
        member.flags = 0 if kind is None else READONLY
        member.doc = NULL
        (<dict>tp.tp_dict)[name] = PyDescr_NewMember(tp, member)
    PyType_Modified(tp)
    return 0


_expose_as_members(FileAppendState, ("_fd", "_size", "_writable", "_path", "_path_name"))
_expose_as_members(LazyIndexState, ("_path", "_opener", "_resize_to", "_lock"), (), (("_index", IndexEntries),))
_expose_as_members(SegmentAppendState, (
    "base_offset", "index_interval_bytes", "roll_jitter_ms", "created_ms", "rolling_based_timestamp", "_txn_index",
    "_listed_size", "_txn_index_unlisted", "_resize_indexes_to", "_suffix", "_closed", "_directory", "_writable",
    "_max_index_size", "_clock",
), ("_bytes_since_last_index_entry", "_offset_of_max_timestamp"), (
    ("_log", FileAppendState), ("_offset_index", LazyIndexState), ("_time_index", LazyIndexState),
))


# -- the append sequence of a partition log ----------------------------------------------------------------------

cdef long long _INT32_MAX_OFFSETS = 2147483647  # the most offsets past the first that one segment can hold
cdef long long _NO_TIMESTAMP = -1


@cython.freelist(4)  # one per append (most are dropped at once by the caller)
cdef class LogAppendInfo:
    """The result of an append (re-exported as ``logmgr.log.LogAppendInfo``): offsets assigned, max timestamp and
    where the bytes went; ``duplicate``: a retried idempotent batch answered with its first append's offsets
    (nothing written). A value, compared and hashed by its fields; compiled, as every append makes one."""

    cdef readonly int64_t first_offset
    cdef readonly int64_t last_offset
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly int64_t segment_base_offset
    cdef readonly int64_t position
    cdef readonly int64_t valid_bytes
    cdef readonly int64_t batches
    cdef readonly int64_t records
    cdef readonly bint duplicate

    def __init__(self, int64_t first_offset, int64_t last_offset, int64_t max_timestamp,
                 int64_t offset_of_max_timestamp, int64_t segment_base_offset, int64_t position, int64_t valid_bytes,
                 int64_t batches, int64_t records, bint duplicate=False):
        self._set(first_offset, last_offset, max_timestamp, offset_of_max_timestamp, segment_base_offset, position,
                  valid_bytes, batches, records)
        self.duplicate = duplicate

    cdef void _set(self, int64_t first_offset, int64_t last_offset, int64_t max_timestamp,
                   int64_t offset_of_max_timestamp, int64_t segment_base_offset, int64_t position,
                   int64_t valid_bytes, int64_t batches, int64_t records) noexcept:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.segment_base_offset = segment_base_offset
        self.position = position
        self.valid_bytes = valid_bytes
        self.batches = batches
        self.records = records

    cdef tuple _fields(self):
        return (self.first_offset, self.last_offset, self.max_timestamp, self.offset_of_max_timestamp,
                self.segment_base_offset, self.position, self.valid_bytes, self.batches, self.records,
                self.duplicate)

    def __eq__(self, other):
        if type(other) is not LogAppendInfo:
            return NotImplemented
        return self._fields() == (<LogAppendInfo>other)._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        return (f"LogAppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
                f"max_timestamp={self.max_timestamp}, offset_of_max_timestamp={self.offset_of_max_timestamp}, "
                f"segment_base_offset={self.segment_base_offset}, position={self.position}, "
                f"valid_bytes={self.valid_bytes}, batches={self.batches}, records={self.records}, "
                f"duplicate={self.duplicate})")


cdef LogAppendInfo _appended(int64_t first_offset, int64_t last_offset, int64_t max_timestamp,
                             int64_t offset_of_max_timestamp, int64_t segment_base_offset, int64_t position,
                             int64_t valid_bytes, int64_t batches, int64_t records):
    """A :class:`LogAppendInfo` made without the argument parsing of a call."""
    cdef LogAppendInfo info = LogAppendInfo.__new__(LogAppendInfo)
    info._set(first_offset, last_offset, max_timestamp, offset_of_max_timestamp, segment_base_offset, position,
              valid_bytes, batches, records)
    return info


cdef class EpochCacheState:
    """The state of a partition's leader epoch cache (``logmgr.leader_epoch_cache.LeaderEpochCache`` derives from
    this class), in C fields the Python class shares (``_entries``: the ``EpochEntry`` list, oldest first;
    ``_lock``; ``_file``), and its :meth:`assign`, which every append asks: compiled, the common answer
    (not newer) costs no interpreter frame."""

    cdef public object _entries
    cdef public object _lock
    cdef public object _file
    # The latest entry _assign compared with, and its epoch: an entry is immutable, so while the list's last entry
    # is this very object its epoch is known without reading the attribute.
    cdef object _latest_entry
    cdef int64_t _latest_epoch

    def assign(self, int64_t epoch, int64_t start_offset):
        """Record that ``epoch`` starts at ``start_offset`` when it is newer than the latest epoch; persist
        (``_add_entry``). Returns whether an entry was added. O(1) when it is not newer, O(n) for the rewrite."""
        return self._assign(epoch, start_offset)

    cdef bint _assign(self, int64_t epoch, int64_t start_offset) except -1:
        cdef list entries = self._entries
        cdef Py_ssize_t count = len(entries)
        if epoch < 0:
            return False
        if count:
            # (No negative index: this module is compiled without wraparound.)
            latest = entries[count - 1]
            if latest is not self._latest_entry:
                self._latest_epoch = latest.epoch
                self._latest_entry = latest
            if epoch <= self._latest_epoch:
                # The common refusal needs no lock: only a truncation from the end can lift it, and truncations
                # and appends are serialised by the log's writer lock.
                return False
        return self._add_entry(epoch, start_offset)


_expose_as_members(EpochCacheState, ("_entries", "_lock", "_file"))


cdef class LogSegmentsState:
    """The state of a log's segment map (``logmgr.log_segments.LogSegments`` derives from this class), in C fields
    the Python class shares (``_segments``, ``_lock``, ``_last``: the newest segment, which every append asks for,
    ``_floor_snapshot``; their meaning is the Python class's). ``_last`` is typed, read-only from Python, set by
    :meth:`_set_last`."""

    cdef public object _segments
    cdef public object _lock
    cdef public SegmentAppendState _last
    cdef public object _floor_snapshot

    def _set_last(self, SegmentAppendState segment):
        """Hold ``segment`` as the newest segment (None: no segment). O(1)."""
        self._last = segment


_expose_as_members(LogSegmentsState, ("_segments", "_lock", "_floor_snapshot"), (), (
    ("_last", SegmentAppendState),
))


cdef class ProducerStateManagerState:
    """The state of a partition's producer state manager (``logmgr.producer_state.ProducerStateManager`` derives
    from this class), in C fields the Python class shares (their meaning is its own): ``map_end_offset``, which
    every append stores, and the rest of the manager's fields (an attribute in the instance dict of a class derived
    from a compiled one is read without the interpreter's specialization)."""

    cdef public object map_end_offset
    cdef public object _dir
    cdef public object _dir_name
    cdef public object producer_id_expiration_ms
    cdef public object _clock
    cdef public object _producers
    cdef public object _ongoing
    cdef public object _unreplicated
    cdef public object _snapshots
    cdef public object _set_aside
    cdef public object _last_snap_offset


_expose_as_members(ProducerStateManagerState, (
    "map_end_offset", "_dir", "_dir_name", "producer_id_expiration_ms", "_clock", "_producers", "_ongoing",
    "_unreplicated", "_snapshots", "_set_aside", "_last_snap_offset",
))


cdef class WriterLock:
    """The writer lock of a partition log (``Log._lock``), with ``threading.RLock``'s contract: re-entrant (its
    owner may take it again, and releases it as often), ``acquire(blocking=True, timeout=-1)``, ``release()`` (by
    the owner only: else ``RuntimeError``), a context manager. In C so that the compiled append takes and releases
    it without a method call (an ``RLock`` cost two method calls and a clock read an append).

    Its state (owner, depth, the threads queued for it) is read and written under the GIL only, so taking a free
    lock and releasing an uncontended one are a few field writes. A thread that finds it held queues and waits,
    without the GIL, on a binary semaphore (``_handoff``, taken at creation) that a release posts only while
    threads are queued: the lock passes to one of them (it stays unowned until that thread runs, and newcomers
    queue behind it), so the semaphore is posted at most once before it is taken. A wait is interrupted by a
    signal whose handler raises, as threading's locks are. O(1) uncontended."""

    cdef PyThread_type_lock _handoff
    cdef unsigned long _owner  # the owning thread's ident, read only while _depth > 0
    cdef Py_ssize_t _depth
    cdef readonly Py_ssize_t queued  # threads waiting for a handoff (or about to wait)

    def __cinit__(self):
        self._handoff = PyThread_allocate_lock()
        if self._handoff == NULL:
            raise MemoryError()
        PyThread_acquire_lock_timed(self._handoff, 0, 0)

    def __dealloc__(self):
        if self._handoff != NULL:
            PyThread_free_lock(self._handoff)

    def acquire(self, bint blocking=True, double timeout=-1):
        """Take the lock (again, by its owner); False when ``blocking`` is false or ``timeout`` seconds passed
        and another thread still holds it. O(1) uncontended."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        if timeout * 1e6 > <double>PY_TIMEOUT_MAX:
            raise OverflowError("timeout value is too large")
        return self._take(-1 if timeout == -1 else <long long>(timeout * 1e6)) if blocking else self._take(0)

    def release(self):
        """Release one level of the owner's hold; the lock is free once released as often as taken. O(1)."""
        self._release()

    def __enter__(self):
        return self._take(-1)

    def __exit__(self, kind, error, trace):
        self._release()

    def _is_owned(self):
        """Whether the calling thread holds the lock (``threading.Condition`` asks). O(1)."""
        return self._depth > 0 and self._owner == PyThread_get_thread_ident()

    def __repr__(self):
        held = f"held {self._depth} deep" if self._depth else "free"
        return f"<WriterLock {held}, {self.queued} queued>"

    cdef bint _take(self, long long timeout_us) except -1:
        """Take the lock, waiting up to ``timeout_us`` microseconds (-1: no limit). Returns whether it is held."""
        cdef unsigned long me = PyThread_get_thread_ident()
        if self._depth:
            if self._owner == me:
                self._depth += 1
                return True
        elif not self.queued:
            self._owner = me
            self._depth = 1
            return True
        if timeout_us == 0:
            return False
        self.queued += 1
        if not self._wait(timeout_us):
            return False
        self._owner = me
        self._depth = 1
        return True

    cdef bint _wait(self, long long timeout_us) except -1:
        """The queued thread's wait for a handoff, up to ``timeout_us`` (-1: no limit), leaving the queue either
        way; a signal handler that raises ends it (a handoff made meanwhile passes on)."""
        cdef PyLockStatus status
        deadline = None if timeout_us < 0 else monotonic() + timeout_us / 1e6
        while True:
            with nogil:
                status = PyThread_acquire_lock_timed(self._handoff, timeout_us, 1)
            if status == PY_LOCK_ACQUIRED:
                self.queued -= 1
                return True
            if status == PY_LOCK_INTR:
                try:
                    PyErr_CheckSignals()
                except BaseException:
                    self.queued -= 1
                    if PyThread_acquire_lock_timed(self._handoff, 0, 0) == PY_LOCK_ACQUIRED and self.queued:
                        PyThread_release_lock(self._handoff)
                    raise
                if deadline is None:
                    continue
                timeout_us = max(0, <long long>((deadline - monotonic()) * 1e6))
                if timeout_us > 0:
                    continue
            # Timed out. Under the GIL no release can come between this check and leaving the queue: a handoff
            # posted before it is taken here.
            self.queued -= 1
            return PyThread_acquire_lock_timed(self._handoff, 0, 0) == PY_LOCK_ACQUIRED

    cdef int _release(self) except -1:
        if self._depth == 0 or self._owner != PyThread_get_thread_ident():
            raise RuntimeError("cannot release un-acquired lock")
        self._depth -= 1
        if self._depth == 0 and self.queued:
            PyThread_release_lock(self._handoff)
        return 0


cdef class LogDirState:
    """The state of a log dir, shared by its logs (re-exported as ``logmgr.log.LogDirState``): set by the manager
    (or by a log that hit an I/O error), checked on every read and write. ``offline`` and ``full`` (bools) and
    ``failure`` (the text of the I/O error that took the dir offline, quoted by every refusal that follows, else
    None) are slots, in C fields the compiled append reads without an attribute lookup."""

    cdef public object offline
    cdef public object full
    cdef public object failure

    def __init__(self, offline=False, full=False, failure=None):
        self.offline = offline
        self.full = full
        self.failure = failure

    def mark_offline(self, err):
        """Take the dir offline after ``err``; True the first time (the failure then recorded is ``err``). O(1)."""
        first = not self.offline
        if first:
            self.failure = str(err)
        self.offline = True
        return first

    def __repr__(self):
        return f"LogDirState(offline={self.offline!r}, full={self.full!r}, failure={self.failure!r})"


_expose_as_members(LogDirState, ("offline", "full", "failure"))


cdef class LogAppendState:
    """The state of a partition log that every append reads (``logmgr.log.Log`` derives from this class), in C
    fields that the Python class and its append methods share: the config and what appends derive from it
    (``_facts``), the writer lock, the dir's state and the log's own failure, the clock, the segments, the leader
    epoch and producer state, the key index and group commit hooks, the published end (``_end``) and the recovery
    point. The Python class sets and reads them as attributes (their meaning and locking are its own), but for
    the typed ones, read-only from Python: ``segments``, ``leader_epochs`` and ``producer_state``, set together by
    :meth:`_set_parts`, and ``dir_state``, set by :meth:`_set_dir_state`."""

    cdef public object config
    cdef public object _facts
    cdef public object _lock
    cdef public LogDirState dir_state
    cdef public object _closed
    cdef public object _offline_error
    cdef public object clock
    cdef public LogSegmentsState segments
    cdef public EpochCacheState leader_epochs
    cdef public ProducerStateManagerState producer_state
    cdef public object key_index
    cdef public object group_commit
    cdef public object _end
    cdef public object _recovery_point
    # The rest of the Python class's state (see there), kept here too: an attribute in the instance dict of a
    # class derived from a compiled one is read without the interpreter's specialization, at three times the cost.
    cdef public object dir
    cdef public object topic_partition
    cdef public object readers
    cdef public object deleter
    cdef public object _run_async
    cdef public object recovery
    cdef public object _truncation_sequence
    cdef public object _log_start_offset
    cdef public object _high_watermark
    cdef public object _high_watermark_provider
    cdef public object last_flush_ms
    cdef public object _rng
    cdef public object _limits
    cdef public object truncation_observer

    def _set_parts(self, LogSegmentsState segments not None, EpochCacheState leader_epochs not None,
                   ProducerStateManagerState producer_state not None):
        """Hold the log's segment map, leader epoch cache and producer state. O(1)."""
        self.segments = segments
        self.leader_epochs = leader_epochs
        self.producer_state = producer_state

    def _set_dir_state(self, LogDirState dir_state not None):
        """Hold ``dir_state``, the state of the log's dir (shared by the logs of that dir). O(1)."""
        self.dir_state = dir_state

    def append_as_leader(self, records, *, int leader_epoch=0, origin=_CLIENT):
        """Append whole magic-2 batches, assigning offsets from the log end offset and stamping the leader epoch
        (and the append time for LogAppendTime topics). Idempotent producers' duplicates are not written again:
        the original offsets are returned with ``duplicate=True``. ``origin``: an :class:`AppendOrigin`, a
        producer's by default. O(size)."""
        return _append(self, records, True, leader_epoch, origin, origin is _CLIENT)

    def append_as_follower(self, records):
        """Append batches with their offsets as given (replication, restore, an intra-broker move): strictly
        increasing and starting at or above the log end offset. Magic 0/1 entries are taken as they are, bytes
        unchanged (Kafka's ``appendAsFollower``), once decoded whole: CRC-32, message, a wrapper's inner set.
        O(size)."""
        return _append(self, records, False, _NO_PARTITION_LEADER_EPOCH, _REPLICATION, False)


_expose_as_members(LogAppendState, (
    "config", "_facts", "_lock", "_closed", "_offline_error", "clock", "key_index", "group_commit", "_end",
    "_recovery_point", "dir", "topic_partition", "readers", "deleter", "_run_async", "recovery",
    "_truncation_sequence", "_log_start_offset", "_high_watermark", "_high_watermark_provider", "last_flush_ms",
    "_rng", "_limits", "truncation_observer",
), (), (
    ("dir_state", LogDirState), ("segments", LogSegmentsState), ("leader_epochs", EpochCacheState),
    ("producer_state", ProducerStateManagerState),
))


cdef LogAppendInfo _append(LogAppendState log, records, bint leader, int leader_epoch, origin, bint client):
    """The append of ``records`` (whole batches) to the partition log ``log`` (``logmgr.log.Log``: Kafka's
    ``UnifiedLog.append``) for :meth:`LogAppendState.append_as_leader` and ``append_as_follower``, compiled: every
    produce request passes here, and the same steps in Python cost twice the write. The log's own methods take the
    rare branches (refusals, producer state, timestamp windows, a roll, a due flush), so this is the one sequence of
    an append:

    validation (:func:`scan_append` and, past it, ``log._validate``; the null-key rule of a compacted topic) before
    the writer lock, as Kafka's ``analyzeAndValidateRecords``; under ``log._lock``: the log online and its dir
    below its usage limit, the timestamp windows (leader), offsets assigned (leader) or checked against the log
    end (follower), the producer state checked, the roll check, the write (``LogSegment.append_scan``), the
    leader epoch cache, producers updated and transactions ended, the log end published, the key index told, a
    due flush (``flush.messages``) started; after the lock, the group commit's wait. Returns the
    ``LogAppendInfo``. An ``OSError`` that no step names more precisely takes the dir offline as the append's
    (``log._io_failure("append", ...)``: Kafka's ``maybeHandleIOException``). O(size)."""
    try:
        return _append_to_log(log, records, leader, leader_epoch, origin, client)
    except OSError as err:
        raise log._io_failure("append", err) from err


cdef LogAppendInfo _append_to_log(LogAppendState log, records, bint leader, int leader_epoch, origin, bint client):
    cdef AppendScan scan
    cdef tuple facts
    cdef bint durable_wait = False
    cdef bint writer_lock
    cdef LogAppendInfo appended
    known = log._facts
    if known is None or (<tuple>known)[0] is not log.config:
        known = log._append_facts()
    facts = <tuple>known  # an AppendFacts: a tuple subclass, read by position
    bounded = facts[1]
    roll_ms = facts[2]
    stamp_append_time = facts[3]
    cdef long long max_message_bytes = facts[5]
    scan = _scan(records, max_message_bytes, leader, client)
    if scan.failure != _OK or scan.compressed_batches or scan.legacy_batches:
        log._validate(records, scan, max_message_bytes)
    if leader and facts[4]:
        log._refuse_null_keys(records, scan)
    # The log's WriterLock, taken in C; any other lock object (tests put a contention-observing one in its place)
    # by its methods.
    lock = log._lock
    writer_lock = type(lock) is WriterLock
    if writer_lock:
        (<WriterLock>lock)._take(-1)
    else:
        lock.acquire()
    try:
        appended = _append_locked(log, records, scan, leader, leader_epoch, origin, bounded, roll_ms,
                                  stamp_append_time, facts[6], facts[7], facts[8], &durable_wait)
        committer = log.group_commit if durable_wait else None
    finally:
        if writer_lock:
            (<WriterLock>lock)._release()
        else:
            lock.release()
    if committer is not None:
        # Outside the writer lock: the flusher takes it, and other appenders queue behind the same fsync.
        committer.wait_durable(log, appended.last_offset + 1)
    return appended


cdef LogAppendInfo _append_locked(LogAppendState log, records, AppendScan scan, bint leader, int leader_epoch,
                                  origin, bounded, roll_ms, stamp_append_time, long long segment_bytes,
                                  long long flush_messages, int64_t reserve_bytes, bint *durable_wait):
    """The append under the writer lock: the result; ``durable_wait[0]`` set when the append must wait
    for the log's group commit (``flush.messages`` reached)."""
    cdef long long first_offset, last_offset, max_timestamp, offset_of_max_timestamp, log_end, position
    cdef long long segment_timestamp, segment_offset_of_max
    cdef Py_ssize_t incoming = len(records)
    cdef SegmentAppendState segment
    cdef LogDirState dir_state = log.dir_state
    cdef FileAppendState file
    if dir_state is None or log.segments is None or log.leader_epochs is None or log.producer_state is None:
        # Read below without a type test or a None test: only a Log whose __init__ did not run lacks them.
        raise TypeError("the log's state is not set (Log.__init__ did not run)")
    if log._closed or log._offline_error is not None or dir_state.offline:
        log._ensure_online()
    if dir_state.full:
        raise log._dir_full_error()
    # The clock is read only when a rule needs the time (most appends: none does).
    now = None
    if leader:
        if bounded or scan._log_append_time_batches():
            # Otherwise nothing can be refused: the records need not be decoded.
            now = log.clock.time_ms()
            log._check_timestamps(records, scan, now)
        if stamp_append_time is not None and now is None:
            now = log.clock.time_ms()
        scan._assign((<tuple>log._end)[0], leader_epoch, stamp_append_time is not None,
                     now if stamp_append_time is not None else 0)
    else:
        below = scan.check_follower(log._end[0])
        if below is not None:
            raise log._refusal(f"follower append at offset {below[0]} is below the expected offset {below[1]}")
    if scan.failure == _OFFSET_OVERFLOW:
        raise log._refusal("the offsets of the append pass 2^63 - 1")
    first_offset = scan.first_offset
    last_offset = scan.last_offset
    if last_offset - first_offset > _INT32_MAX_OFFSETS:
        # No segment can hold it; refused before a roll could leave an empty segment above the log end.
        raise log._refusal(f"offsets {first_offset}..{last_offset} of one append do not fit one segment (32-bit "
                           "relative offsets)")
    producers = None
    if scan.producer_batches:
        producers = log._prepare_producers(records, scan, now if leader and stamp_append_time is not None else None,
                                           origin, leader)
        if type(producers) is not tuple:
            return producers  # a retried idempotent batch: its first append's offsets
    max_timestamp = scan.max_timestamp
    offset_of_max_timestamp = scan.offset_of_max_timestamp
    # The roll check (Kafka's maybeRoll); an I/O error in it takes the dir offline as the append's own would.
    try:
        # LogSegments' newest segment (its active_segment property, without the call).
        segment = log.segments._last
        if segment is None:
            segment = log.segments.active_segment
        if incoming > segment_bytes:
            raise log._too_large_for_a_segment(incoming, segment_bytes)
        if segment._roll_due(incoming, max_timestamp, last_offset, now, log.clock, segment_bytes, roll_ms):
            segment = log.roll(first_offset)
    except OSError as err:
        raise log._io_failure("roll check", err) from err
    # The segment's facts start from "no timestamp" (-1), as its own walk of the batches would.
    if max_timestamp <= _NO_TIMESTAMP:
        segment_timestamp, segment_offset_of_max = _NO_TIMESTAMP, -1
    else:
        segment_timestamp, segment_offset_of_max = max_timestamp, offset_of_max_timestamp
    try:
        position = segment._append(scan, None, scan.largest_offset, segment_timestamp, segment_offset_of_max,
                                   reserve_bytes, segment_bytes)
    except OSError as err:
        raise log._io_failure(f"append of {incoming} bytes at offset {first_offset}", err) from err
    if leader:
        # Every batch was stamped with leader_epoch: the first one is the only one the cache can take.
        log.leader_epochs._assign(leader_epoch, first_offset)
    else:
        for epoch, start_offset in scan.epoch_starts():
            log.leader_epochs._assign(epoch, start_offset)
    if producers is not None:
        log._apply_producers(producers[0], producers[1], segment, last_offset)
    log_end = last_offset + 1
    end = log_end  # one int object for the published end and the producer state's map end
    # The segment's new size, as its .log holds it (position + incoming), not a new int object.
    file = segment._log  # made by the write
    log._end = (end, segment.base_offset, file._size)
    log.producer_state.map_end_offset = end
    key_index = log.key_index
    if key_index is not None:
        key_index.notify()
    if log_end - <long long>log._recovery_point >= flush_messages:
        if log.group_commit is None:
            log.flush(log_end)
        else:
            durable_wait[0] = True
    return _appended(first_offset, last_offset, max_timestamp, offset_of_max_timestamp, segment.base_offset,
                     position, incoming, scan._count, scan.records)
