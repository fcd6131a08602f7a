# cython: language_level=3, boundscheck=False, wraparound=False
"""Magic-2 record codec kernels (kafka-format.md §1.2-§1.3, Kafka's ``DefaultRecord`` / ``DefaultRecordBatch``).

* the record objects (:class:`Header`, :class:`SimpleRecord`, :class:`Record`): ``cdef class`` es, because the
  decoder creates one per record; :mod:`segments.records` re-exports them;
* :class:`RecordReader`: records decoded one at a time from a stream of pieces (O(largest record) memory);
* :class:`RecordSlicer` and :func:`frame_region`: records framed by their length varints alone;
* :func:`encode_batch` / :func:`append_record`: records and a whole batch written in one pass, header and CRC
  included (compression is a callback: :mod:`segments.compression`);
* :func:`decode_columns`: the records of many batches into Arrow-ready column buffers (the Spark reader);
* the zig-zag varint codecs of :mod:`segments.varint`.

One record parser (:func:`_parse_body`) serves the reader and the column decoder. Every read of input bytes is
bounded by the end of the bytes held (``wire.pxd``'s readers): hostile input gives the typed errors of
:mod:`segments.errors`, with the messages and positions the format layer has always reported.
"""

cimport cython
from cpython.buffer cimport PyBuffer_IsContiguous
from cpython.memoryview cimport PyMemoryView_Check, PyMemoryView_GET_BUFFER
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcpy, memset
from libc.stdint cimport INT32_MAX, INT32_MIN, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from segments._native.crc32c cimport logmgr_crc32c, logmgr_crc32c_init
from segments._native.wire cimport (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    WIRE_BAD_RECORD_SIZE,
    WIRE_OK,
    WIRE_RECORD_TOO_LARGE,
    WIRE_TRAILING_BYTES,
    WIRE_TRUNCATED,
    WIRE_VARINT_TOO_LONG,
    frame_records,
    read_varint,
    read_varlong,
    store_be16,
    store_be32,
    store_be64,
    varint_size as wire_varint_size,
    varlong_size as wire_varlong_size,
    write_varint,
    write_varlong,
)

from segments.errors import CorruptRecordError, RecordTooLargeError

logmgr_crc32c_init()

cdef extern from "Python.h":
    # The result of PyBytes_FromStringAndSize(NULL, n) is written before anyone else sees it.
    char *PyBytes_AS_STRING_MUT "PyBytes_AS_STRING" (object)

cdef extern from *:
    bint __builtin_add_overflow(int64_t a, int64_t b, int64_t *out) nogil
    bint __builtin_sub_overflow(int64_t a, int64_t b, int64_t *out) nogil

cdef enum:
    _MAX_VARINT_BYTES = 5
    # Below this many bytes the GIL is kept: releasing and retaking it costs more than the loop.
    _NOGIL_BYTES = 65536

cdef int64_t _NO_TIMESTAMP = -1
cdef int64_t _NO_SEQUENCE = -1


# --- record objects ---------------------------------------------------------------------------------------------


# The record objects hold bytes, ints and tuples of headers only: they take no part in reference cycles, so the
# garbage collector does not track them (a decoded batch of records would otherwise trigger and lengthen its
# young-generation passes). A cycle made by assigning a record into itself would only leak.
@cython.no_gc
@cython.freelist(64)
cdef class Header:
    """A record header: a UTF-8 key (never null) and a nullable value."""

    cdef public object key
    cdef public object value

    def __init__(self, key, value):
        self.key = key
        self.value = value

    def __repr__(self):
        return f"Header(key={self.key!r}, value={self.value!r})"

    def __eq__(self, other):
        if type(other) is not Header:
            return NotImplemented
        return (self.key, self.value) == ((<Header>other).key, (<Header>other).value)

    # Mutable like the dataclass it replaces: equal objects may change, so they are not hashable.
    __hash__ = None

    def __reduce__(self):
        return Header, (self.key, self.value)


@cython.no_gc
@cython.freelist(64)
cdef class SimpleRecord:
    """A record to be written: what a producer supplies, before offsets are assigned."""

    cdef public object value
    cdef public object key
    cdef public int64_t timestamp
    cdef public object headers

    def __init__(self, value, key=None, int64_t timestamp=_NO_TIMESTAMP, headers=()):
        self.value = value
        self.key = key
        self.timestamp = timestamp
        self.headers = headers

    def __repr__(self):
        return (
            f"SimpleRecord(value={self.value!r}, key={self.key!r}, timestamp={self.timestamp!r}, "
            f"headers={self.headers!r})"
        )

    def __eq__(self, other):
        if type(other) is not SimpleRecord:
            return NotImplemented
        cdef SimpleRecord o = <SimpleRecord>other
        return (self.value, self.key, self.timestamp, self.headers) == (o.value, o.key, o.timestamp, o.headers)

    __hash__ = None

    def __reduce__(self):
        return SimpleRecord, (self.value, self.key, self.timestamp, self.headers)


@cython.no_gc
@cython.freelist(1024)  # a batch's worth: the records of the batch read before are recycled for the next one
cdef class Record:
    """A decoded record, reported as Kafka's reader reports it.

    ``timestamp`` is what Kafka returns: the batch's max timestamp for LogAppendTime batches, ``-1`` for magic 0.
    ``stored_timestamp`` is the value actually encoded in the record (differs only under LogAppendTime).
    ``checksum`` is the stored CRC-32 of a legacy message, ``None`` for magic 2.
    """

    cdef public object offset  # an int: base offset + delta is not wrapped, even past the int64 range
    cdef public int64_t timestamp
    cdef public object key
    cdef public object value
    cdef public object headers
    cdef public int64_t sequence
    cdef public int64_t size_in_bytes
    cdef public int64_t stored_timestamp
    cdef public object checksum

    def __init__(
        self,
        offset,
        int64_t timestamp,
        key,
        value,
        headers,
        int64_t sequence,
        int64_t size_in_bytes,
        int64_t stored_timestamp,
        checksum=None,
    ):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.sequence = sequence
        self.size_in_bytes = size_in_bytes
        self.stored_timestamp = stored_timestamp
        self.checksum = checksum

    def to_simple(self):
        """The record as builder input (stored timestamp, key, value, headers). O(1)."""
        cdef SimpleRecord simple = SimpleRecord.__new__(SimpleRecord)
        simple.value = self.value
        simple.key = self.key
        simple.timestamp = self.stored_timestamp
        simple.headers = self.headers
        return simple

    cdef tuple _fields(self):
        return (
            self.offset,
            self.timestamp,
            self.key,
            self.value,
            self.headers,
            self.sequence,
            self.size_in_bytes,
            self.stored_timestamp,
            self.checksum,
        )

    def __repr__(self):
        return (
            f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r}, sequence={self.sequence!r}, size_in_bytes={self.size_in_bytes!r}, "
            f"stored_timestamp={self.stored_timestamp!r}, checksum={self.checksum!r})"
        )

    def __eq__(self, other):
        if type(other) is not Record:
            return NotImplemented
        return self._fields() == (<Record>other)._fields()

    __hash__ = None

    def __reduce__(self):
        return Record, self._fields()


# --- held input -------------------------------------------------------------------------------------------------


cdef class _Held:
    """The bytes a streamed reader holds, kept alive and exported as a pointer and a length, plus the rest of the
    stream of pieces they are gathered from."""

    cdef object source
    cdef object region  # bytes, or a contiguous memoryview (of a batch's buffer)
    cdef const uint8_t *buf
    cdef Py_ssize_t end
    cdef bint exhausted

    def __cinit__(self):
        self.buf = <const uint8_t *>b""
        self.end = 0
        self.exhausted = False

    cdef int hold(self, object region) except -1:
        cdef Py_buffer *view
        if PyMemoryView_Check(region):
            view = PyMemoryView_GET_BUFFER(region)
            if PyBuffer_IsContiguous(view, b'C') and view.itemsize == 1:
                # Read through the memoryview's own buffer, no new export: an export held by an object caught
                # in a reference cycle would outlive the memoryview's clearing by the garbage collector.
                self.region = region
                self.buf = <const uint8_t *>view.buf
                self.end = view.len
                return 0
        if not PyBytes_CheckExact(region):
            region = bytes(region)  # a mutable or strided buffer is copied once, so nothing can move under us
        self.region = region
        self.buf = <const uint8_t *>PyBytes_AS_STRING(region)
        self.end = PyBytes_GET_SIZE(region)
        return 0

    cdef int gather(self, Py_ssize_t position, Py_ssize_t need) except -1:
        """Hold ``region[position:]`` extended with pieces until it holds ``need`` bytes or the pieces run out.
        A lone piece is held as it is (nothing copied): an uncompressed region is never copied. O(need)."""
        cdef Py_ssize_t have = self.end - position
        cdef list parts = []
        if have > 0:
            parts.append(PyBytes_FromStringAndSize(<const char *>self.buf + position, have))
        else:
            have = 0
        while have < need:
            piece = next(self.source, None)
            if piece is None:
                self.exhausted = True
                break
            parts.append(piece)
            have += len(piece)
        if len(parts) == 1:
            self.hold(parts[0])
        else:
            self.hold(b"".join(parts))
        return 0

    cdef Py_ssize_t rest(self, Py_ssize_t position) except -1:
        """Bytes left from ``position``, the rest of the stream included (drains it). O(stream)."""
        cdef Py_ssize_t left = self.end - position
        for piece in self.source:
            left += len(piece)
        return left


cdef inline int _varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int32_t *out) noexcept nogil:
    cdef size_t p = <size_t>pos[0]
    cdef int status = read_varint(buf, <size_t>end, &p, out)
    pos[0] = <Py_ssize_t>p
    return status


cdef inline int _varlong(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out) noexcept nogil:
    cdef size_t p = <size_t>pos[0]
    cdef int status = read_varlong(buf, <size_t>end, &p, out)
    pos[0] = <Py_ssize_t>p
    return status


cdef inline str _varint_message(int status, bint long_value):
    if status == WIRE_TRUNCATED:
        return "buffer ends inside a varint"
    return "varlong is longer than 10 bytes" if long_value else "varint is longer than 5 bytes"


cdef inline int64_t _java_add(int64_t a, int64_t b) noexcept nogil:
    # Kafka adds timestamps as Java longs: a sum past the int64 range wraps instead of growing into a value no
    # index, writer or int64 column can hold.
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline int64_t _increment_sequence(int64_t sequence, int64_t increment) noexcept nogil:
    # Kafka's DefaultRecordBatch.incrementSequence: wraps from Int.MAX to 0.
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


# --- decode ---------------------------------------------------------------------------------------------------


cdef enum:
    # What _parse_body found wrong with a record (0 = nothing).
    _E_NO_ATTRIBUTES = 1      # an empty body
    _E_PAST_REGION = 2        # a field starts past the end of the held bytes
    _E_VARINT = 3             # a field's varint is cut or too long (at error_pos)
    _E_KEY_SIZE = 4
    _E_VALUE_SIZE = 5
    _E_HEADER_COUNT = 6
    _E_HEADER_KEY_SIZE = 7
    _E_HEADER_VALUE_SIZE = 8
    _E_READ_MISMATCH = 9      # the fields end before or after the declared body end


cdef struct _Parsed:
    int64_t timestamp_delta
    int32_t offset_delta
    Py_ssize_t key_pos
    int32_t key_size  # negative: null
    Py_ssize_t value_pos
    int32_t value_size
    Py_ssize_t headers_pos
    int32_t header_count
    Py_ssize_t error_pos  # _E_VARINT: where the varint starts
    int varint_status     # _E_VARINT: its WIRE_* status
    bint varlong          # _E_VARINT: a varlong (the timestamp delta)
    int64_t error_value   # the size or count refused, or (_E_READ_MISMATCH) the bytes read


cdef inline int _varint_error(int status, bint varlong, Py_ssize_t field, _Parsed *r) noexcept nogil:
    """Record a varint cut or too long at ``field`` in ``r``; returns _E_VARINT. O(1)."""
    r.error_pos = field
    r.varint_status = status
    r.varlong = varlong
    return _E_VARINT


cdef inline int _field_error(int status, bint varlong, Py_ssize_t field, Py_ssize_t end, _Parsed *r) noexcept nogil:
    # A field whose first byte is missing runs off the held bytes; a varint cut or too long is located at itself.
    if field >= end:
        return _E_PAST_REGION
    return _varint_error(status, varlong, field, r)


cdef int _parse_body(
    const uint8_t *buf, Py_ssize_t end, Py_ssize_t pos, int32_t body_size, Py_ssize_t body_end, _Parsed *r
) noexcept nogil:
    """Parse the body of a record from ``pos`` (after its length varint) to ``body_end`` (<= ``end``): Kafka's
    ``DefaultRecord.readFrom`` checks, headers walked but not decoded. Fields are read up to the end of the held
    bytes, not of the record: a record whose varints run past its own end is then refused by the size checks,
    with the messages Kafka gives. Returns 0 or an _E_* code (details in ``r``). O(record header bytes)."""
    cdef Py_ssize_t field
    cdef int status
    cdef int32_t i, size
    r.key_pos = r.value_pos = r.headers_pos = 0
    if pos >= body_end:
        return _E_NO_ATTRIBUTES
    pos += 1  # record attributes: unused
    field = pos
    status = _varlong(buf, end, &pos, &r.timestamp_delta)
    if status != WIRE_OK:
        return _field_error(status, True, field, end, r)
    field = pos
    status = _varint(buf, end, &pos, &r.offset_delta)
    if status != WIRE_OK:
        return _field_error(status, False, field, end, r)
    field = pos
    status = _varint(buf, end, &pos, &r.key_size)
    if status != WIRE_OK:
        return _field_error(status, False, field, end, r)
    if r.key_size >= 0:
        if pos + r.key_size > body_end:
            r.error_value = r.key_size
            return _E_KEY_SIZE
        r.key_pos = pos
        pos += r.key_size
    field = pos
    status = _varint(buf, end, &pos, &r.value_size)
    if status != WIRE_OK:
        return _field_error(status, False, field, end, r)
    if r.value_size >= 0:
        if pos + r.value_size > body_end:
            r.error_value = r.value_size
            return _E_VALUE_SIZE
        r.value_pos = pos
        pos += r.value_size
    field = pos
    status = _varint(buf, end, &pos, &r.header_count)
    if status != WIRE_OK:
        return _field_error(status, False, field, end, r)
    if r.header_count < 0 or r.header_count > body_end - pos:
        r.error_value = r.header_count
        return _E_HEADER_COUNT
    r.headers_pos = pos
    for i in range(r.header_count):
        # Header varints are located at themselves, even when their first byte is missing (Kafka's readVarint).
        field = pos
        status = _varint(buf, end, &pos, &size)
        if status != WIRE_OK:
            return _varint_error(status, False, field, r)
        if size < 0 or pos + size > body_end:
            r.error_value = size
            return _E_HEADER_KEY_SIZE
        pos += size
        field = pos
        status = _varint(buf, end, &pos, &size)
        if status != WIRE_OK:
            return _varint_error(status, False, field, r)
        if size >= 0:
            if pos + size > body_end:
                r.error_value = size
                return _E_HEADER_VALUE_SIZE
            pos += size
    if pos != body_end:
        r.error_value = pos - body_end + body_size
        return _E_READ_MISMATCH
    return 0


cdef str _parse_message(int error, _Parsed *r, int32_t body_size):
    if error == _E_NO_ATTRIBUTES:
        return "record ends before its attributes byte"
    if error == _E_PAST_REGION:
        return "record runs past the end of the records region"
    if error == _E_VARINT:
        return _varint_message(r.varint_status, r.varlong)
    if error == _E_KEY_SIZE:
        return f"key size {r.error_value} runs past the record end"
    if error == _E_VALUE_SIZE:
        return f"value size {r.error_value} runs past the record end"
    if error == _E_HEADER_COUNT:
        return f"found invalid number of record headers {r.error_value}"
    if error == _E_HEADER_KEY_SIZE:
        return f"invalid header key size {r.error_value}"
    if error == _E_HEADER_VALUE_SIZE:
        return f"invalid header value size {r.error_value}"
    return (
        f"invalid record size: expected to read {body_size} bytes in record payload, but read {r.error_value}"
    )


cdef tuple _headers(const uint8_t *buf, Py_ssize_t end, Py_ssize_t pos, int32_t count):
    """The ``count`` headers at ``pos``, already checked by :func:`_parse_body`, as Header objects. O(bytes)."""
    cdef list out = []
    cdef int32_t i, size = 0
    cdef Header header
    for i in range(count):
        _varint(buf, end, &pos, &size)
        header = Header.__new__(Header)
        # Kafka decodes header keys leniently (replacement characters); surrogateescape is as lenient and keeps
        # the exact bytes, so a batch re-encodes byte for byte.
        header.key = PyUnicode_DecodeUTF8(<const char *>buf + pos, size, "surrogateescape")
        pos += size
        _varint(buf, end, &pos, &size)
        if size >= 0:
            header.value = PyBytes_FromStringAndSize(<const char *>buf + pos, size)
            pos += size
        else:
            header.value = None
        out.append(header)
    return tuple(out)


cdef class RecordReader:
    """``count`` magic-2 records (Kafka's ``DefaultRecord.readFrom``) decoded one at a time from a stream of
    pieces whose concatenation is the records region. O(stream) time, O(largest record + largest piece) memory.

    A record whose length passes ``max_record_bytes`` raises :class:`RecordTooLargeError` before its bytes are
    gathered; every other flaw raises :class:`CorruptRecordError`, positions counted from the stream start. The
    stream must end right after the last record. An uncompressed region arrives as one piece: every record is
    then decoded from it in place.
    """

    cdef _Held held
    cdef Py_ssize_t pos
    cdef Py_ssize_t consumed  # stream position of the held region's first byte
    cdef int64_t count
    cdef int64_t remaining
    cdef int64_t base_offset
    cdef int64_t base_timestamp
    cdef int64_t base_sequence
    cdef int64_t log_append_time
    cdef bint append_time
    cdef int64_t max_record_bytes
    cdef bint done

    def __init__(
        self,
        pieces,
        int64_t count,
        int64_t base_offset,
        int64_t base_timestamp,
        int64_t base_sequence,
        log_append_time,
        int64_t max_record_bytes,
    ):
        self.held = _Held()
        self.held.source = iter(pieces)
        self.pos = 0
        self.consumed = 0
        self.count = count
        self.remaining = count if count > 0 else 0
        self.base_offset = base_offset
        self.base_timestamp = base_timestamp
        self.base_sequence = base_sequence
        self.append_time = log_append_time is not None
        self.log_append_time = log_append_time if self.append_time else 0
        self.max_record_bytes = max_record_bytes
        self.done = False

    def __iter__(self):
        return self

    def __length_hint__(self):
        return self.remaining

    def __next__(self):
        cdef Py_ssize_t left
        if self.remaining > 0:
            return self._next_record()
        if not self.done:
            self.done = True
            left = self.held.rest(self.pos)
            if left:
                raise CorruptRecordError(
                    f"incorrect declared batch size, {left} bytes remain after {self.count} records",
                    position=self.consumed + self.pos,
                )
        raise StopIteration

    cdef _fail(self, str message, Py_ssize_t position, type kind=CorruptRecordError):
        """The error for a flaw at ``position`` of the held region; the reader is finished."""
        self.remaining = 0
        self.done = True
        return kind(message, position=self.consumed + position)

    cdef int _gather(self, Py_ssize_t position, Py_ssize_t need) except -1:
        self.consumed += position
        try:
            self.held.gather(position, need)
        except CorruptRecordError as err:
            self.remaining = 0
            self.done = True
            raise err.at(position_base=self.consumed) from None
        return 0

    cdef Record _next_record(self):
        cdef _Held held = self.held
        cdef const uint8_t *buf
        cdef Py_ssize_t end, pos, start, body_end
        cdef int32_t body_size
        cdef int64_t stored_timestamp, offset
        cdef int status
        cdef _Parsed r
        if held.end - self.pos < _MAX_VARINT_BYTES:
            self._gather(self.pos, _MAX_VARINT_BYTES)
            self.pos = 0
        buf = held.buf
        end = held.end
        pos = self.pos
        start = pos
        status = _varint(buf, end, &pos, &body_size)
        if status != WIRE_OK:
            raise self._fail(_varint_message(status, False), start)
        if body_size > self.max_record_bytes:
            raise self._fail(
                f"record of {body_size} bytes exceeds the limit of {self.max_record_bytes}", start, RecordTooLargeError
            )
        body_end = pos + body_size
        if body_end > end:
            self._gather(start, body_end - start)
            buf = held.buf
            end = held.end
            pos -= start
            body_end -= start
            start = 0
        if body_size < 0 or body_end > end:
            raise self._fail(
                f"invalid record size: expected {body_size} bytes in record payload, but only {end - pos} remain",
                start,
            )
        status = _parse_body(buf, end, pos, body_size, body_end, &r)
        if status != 0:
            raise self._fail(_parse_message(status, &r, body_size), r.error_pos if status == _E_VARINT else start)
        self.pos = body_end
        self.remaining -= 1
        stored_timestamp = _java_add(self.base_timestamp, r.timestamp_delta)
        cdef Record record = Record.__new__(Record)
        if __builtin_add_overflow(self.base_offset, <int64_t>r.offset_delta, &offset):
            record.offset = <object>self.base_offset + r.offset_delta
        else:
            record.offset = offset
        record.timestamp = self.log_append_time if self.append_time else stored_timestamp
        if r.key_size >= 0:
            record.key = PyBytes_FromStringAndSize(<const char *>buf + r.key_pos, r.key_size)
        if r.value_size >= 0:
            record.value = PyBytes_FromStringAndSize(<const char *>buf + r.value_pos, r.value_size)
        record.headers = _headers(buf, end, r.headers_pos, r.header_count) if r.header_count else ()
        record.sequence = (
            _NO_SEQUENCE if self.base_sequence < 0 else _increment_sequence(self.base_sequence, r.offset_delta)
        )
        record.size_in_bytes = body_end - start
        record.stored_timestamp = stored_timestamp
        return record  # key, value, checksum: None unless set, as tp_new leaves them


# --- framing ----------------------------------------------------------------------------------------------------


cdef enum:
    _RUN_SLICE_FULL = 100  # the slice reached its record or byte limit
    _RUN_DONE = 101        # every record is framed
    _RUN_NEED_HEAD = 102   # fewer than 5 bytes held at a record start, and the stream goes on
    _RUN_NEED_BODY = 103   # a record's body runs past the held bytes, and the stream goes on


cdef int _frame_run(
    const uint8_t *buf,
    Py_ssize_t end,
    bint exhausted,
    Py_ssize_t first,
    Py_ssize_t *pos,
    int64_t *remaining,
    int64_t *records,
    int64_t max_slice_records,
    Py_ssize_t max_slice_bytes,
    int64_t max_record_bytes,
    int32_t *body_size,
) noexcept nogil:
    """Frame records of the held bytes from ``pos[0]`` until the slice from ``first`` is full, every record is
    framed, more bytes are needed, or a record is bad (a WIRE_* status; pos[0] is then the record start, and
    body_size[0] its length when it was read). O(records framed)."""
    cdef Py_ssize_t start, p, body_end
    cdef int status
    while remaining[0] > 0:
        start = pos[0]
        if end - start < _MAX_VARINT_BYTES and not exhausted:
            return _RUN_NEED_HEAD
        p = start
        status = _varint(buf, end, &p, body_size)
        if status != WIRE_OK:
            return status
        if body_size[0] > max_record_bytes:
            return WIRE_RECORD_TOO_LARGE
        body_end = p + body_size[0]
        if body_end > end and not exhausted:
            return _RUN_NEED_BODY
        if body_size[0] < 6 or body_end > end:
            return WIRE_BAD_RECORD_SIZE
        pos[0] = body_end
        remaining[0] -= 1
        records[0] += 1
        if records[0] >= max_slice_records or body_end - first >= max_slice_bytes:
            return _RUN_SLICE_FULL
    return _RUN_DONE


cdef class RecordSlicer:
    """``count`` magic-2 records framed by their length varints alone in a stream of pieces, yielded as
    ``(bytes, records)`` slices: a slice ends after ``max_slice_records`` records or at the first record boundary
    at or past ``max_slice_bytes``. O(stream) time, O(slice + largest record + piece) memory; the framing loop
    runs without the GIL over large held regions.

    A length below the 6-byte minimum body, a body running past the stream or bytes after the last record raise
    :class:`CorruptRecordError`, a length above ``max_record_bytes`` :class:`RecordTooLargeError`; positions are
    counted from the stream start.
    """

    cdef _Held held
    cdef Py_ssize_t pos
    cdef Py_ssize_t first  # start of the slice being gathered, in the held region
    cdef Py_ssize_t consumed  # stream position of the held region's first byte
    cdef int64_t count
    cdef int64_t remaining
    cdef int64_t records
    cdef int64_t max_record_bytes
    cdef int64_t max_slice_records
    cdef Py_ssize_t max_slice_bytes
    cdef bint done

    def __init__(
        self, pieces, int64_t count, int64_t max_record_bytes, int64_t max_slice_records, Py_ssize_t max_slice_bytes
    ):
        self.held = _Held()
        self.held.source = iter(pieces)
        self.pos = 0
        self.first = 0
        self.consumed = 0
        self.count = count
        self.remaining = count if count > 0 else 0
        self.records = 0
        self.max_record_bytes = max_record_bytes
        self.max_slice_records = max_slice_records
        self.max_slice_bytes = max_slice_bytes
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        cdef _Held held = self.held
        cdef int status
        cdef int32_t body_size = 0
        cdef Py_ssize_t pos, left
        cdef int64_t remaining, records
        while self.remaining > 0:
            pos = self.pos
            remaining = self.remaining
            records = self.records
            if held.end - pos >= _NOGIL_BYTES:
                with nogil:
                    status = _frame_run(
                        held.buf, held.end, held.exhausted, self.first, &pos, &remaining, &records,
                        self.max_slice_records, self.max_slice_bytes, self.max_record_bytes, &body_size,
                    )
            else:
                status = _frame_run(
                    held.buf, held.end, held.exhausted, self.first, &pos, &remaining, &records,
                    self.max_slice_records, self.max_slice_bytes, self.max_record_bytes, &body_size,
                )
            self.pos = pos
            self.remaining = remaining
            self.records = records
            if status == _RUN_SLICE_FULL:
                return self._emit()
            if status == _RUN_NEED_HEAD:
                self._gather(self.pos - self.first + _MAX_VARINT_BYTES)
            elif status == _RUN_NEED_BODY:
                self._gather(self.pos - self.first + _varint_end(held.buf, held.end, self.pos) + body_size)
            elif status != _RUN_DONE:
                self.remaining = 0
                self.done = True
                raise _framing_error(status, body_size, self.max_record_bytes, self.consumed + self.pos)
        if self.records:
            return self._emit()
        if not self.done:
            self.done = True
            left = held.rest(self.pos)
            if left:
                raise CorruptRecordError(
                    f"incorrect declared batch size, {left} bytes remain after {self.count} records",
                    position=self.consumed + self.pos,
                )
        raise StopIteration

    cdef tuple _emit(self):
        cdef _Held held = self.held
        cdef object piece
        if self.first == 0 and self.pos == held.end and PyBytes_CheckExact(held.region):
            piece = held.region
        else:
            piece = PyBytes_FromStringAndSize(<const char *>held.buf + self.first, self.pos - self.first)
        cdef tuple out = (piece, self.records)
        self.first = self.pos
        self.records = 0
        return out

    cdef int _gather(self, Py_ssize_t need) except -1:
        self.consumed += self.first
        self.held.gather(self.first, need)
        self.pos -= self.first
        self.first = 0
        return 0


cdef inline Py_ssize_t _varint_end(const uint8_t *buf, Py_ssize_t end, Py_ssize_t pos) noexcept:
    """Length of the (already read, valid) varint at ``pos``."""
    cdef int32_t ignored
    cdef Py_ssize_t p = pos
    _varint(buf, end, &p, &ignored)
    return p - pos


cdef object _framing_error(int status, int32_t body_size, int64_t max_record_bytes, Py_ssize_t position):
    if status == WIRE_TRUNCATED or status == WIRE_VARINT_TOO_LONG:
        return CorruptRecordError(_varint_message(status, False), position=position)
    if status == WIRE_RECORD_TOO_LARGE:
        return RecordTooLargeError(
            f"record of {body_size} bytes exceeds the limit of {max_record_bytes}", position=position
        )
    return CorruptRecordError(f"invalid record size {body_size}", position=position)


def frame_region(region, int64_t count, int64_t max_record_bytes):
    """Check that ``region`` (the whole uncompressed records region, any buffer) holds exactly ``count``
    length-prefixed records and nothing else, reading their lengths only (wire.pxd's ``frame_records``; the GIL
    is released over large regions). Errors as :class:`RecordSlicer`'s, positions in ``region``. O(count)."""
    cdef const uint8_t[::1] view = region
    cdef size_t length = view.shape[0]
    cdef const uint8_t *buf = &view[0] if length else <const uint8_t *>b""
    cdef size_t error_pos = 0
    cdef int status
    cdef int32_t body_size = 0
    cdef Py_ssize_t p
    if count <= 0:
        if length:
            raise CorruptRecordError(
                f"incorrect declared batch size, {length} bytes remain after {count} records", position=0
            )
        return
    if length >= _NOGIL_BYTES:
        with nogil:
            status = frame_records(buf, length, count, max_record_bytes, &error_pos)
    else:
        status = frame_records(buf, length, count, max_record_bytes, &error_pos)
    if status == WIRE_OK:
        return
    if status == WIRE_TRAILING_BYTES:
        raise CorruptRecordError(
            f"incorrect declared batch size, {length - error_pos} bytes remain after {count} records",
            position=error_pos,
        )
    p = <Py_ssize_t>error_pos
    _varint(buf, <Py_ssize_t>length, &p, &body_size)  # the length the framer refused, for the message
    raise _framing_error(status, body_size, max_record_bytes, <Py_ssize_t>error_pos)


# --- encode -----------------------------------------------------------------------------------------------------




cdef struct _Bytes:
    const char *data
    Py_ssize_t size  # -1: null


cdef inline object _as_bytes(object obj):
    # bytes are read in place; another buffer (bytearray, memoryview) is copied once, as the old encoder did.
    if obj is None or PyBytes_CheckExact(obj):
        return obj
    return bytes(obj)


cdef inline _Bytes _view(object obj) noexcept:
    """``obj`` (None or bytes) as a pointer and a size (-1: null)."""
    cdef _Bytes out
    if obj is None:
        out.data = NULL
        out.size = -1
    else:
        out.data = PyBytes_AS_STRING(obj)
        out.size = PyBytes_GET_SIZE(obj)
    return out


cdef inline int32_t _int32(object value) except? -1:
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return <int32_t>value


cdef inline int _check_size(Py_ssize_t size) except -1:
    if size > INT32_MAX:
        raise ValueError(f"varint out of int32 range: {size}")
    return 0


cdef inline int64_t _timestamp_delta(int64_t timestamp, int64_t base_timestamp) except? -1:
    cdef int64_t delta
    if __builtin_sub_overflow(timestamp, base_timestamp, &delta):
        raise ValueError(f"varlong out of int64 range: {<object>timestamp - <object>base_timestamp}")
    return delta


cdef inline size_t _nullable_size(_Bytes field) noexcept nogil:
    if field.size < 0:
        return 1
    return wire_varint_size(<int32_t>field.size) + <size_t>field.size


cdef inline uint8_t *_write_nullable(uint8_t *p, _Bytes field) noexcept nogil:
    if field.size < 0:
        p[0] = 1  # varint(-1)
        return p + 1
    p = write_varint(p, <int32_t>field.size)
    if field.size:
        memcpy(p, field.data, <size_t>field.size)
    return p + field.size


cdef inline Py_ssize_t _count(object headers) except -1:
    if PyTuple_CheckExact(headers):
        return PyTuple_GET_SIZE(headers)
    return len(headers)


cdef size_t _body_size(int32_t offset_delta, int64_t timestamp_delta, _Bytes key, _Bytes value, object headers) except 0:
    """Bytes of a record's body (attributes to the last header). O(headers)."""
    cdef size_t size = 1 + wire_varlong_size(timestamp_delta) + wire_varint_size(offset_delta)
    cdef Py_ssize_t n = _count(headers)
    _check_size(key.size)
    _check_size(value.size)
    _check_size(n)
    size += _nullable_size(key) + _nullable_size(value) + wire_varint_size(<int32_t>n)
    if n:
        for header in headers:
            header_key = header.key.encode("utf-8", "surrogateescape")
            header_value = _as_bytes(header.value)
            size += _nullable_size(_view(header_key)) + _nullable_size(_view(header_value))
    _check_size(<Py_ssize_t>size)
    return size


cdef uint8_t *_write_record(
    uint8_t *p, uint8_t *stop, int32_t offset_delta, int64_t timestamp_delta, _Bytes key, _Bytes value, object headers
) except NULL:
    """Write one record (length varint, then body) at ``p``, never past ``stop``; return the byte after it."""
    cdef size_t body = _body_size(offset_delta, timestamp_delta, key, value, headers)
    cdef Py_ssize_t n = _count(headers)
    if <size_t>(stop - p) < wire_varint_size(<int32_t>body) + body:
        raise RuntimeError("a record changed while it was encoded")
    p = write_varint(p, <int32_t>body)
    p[0] = 0  # attributes: unused
    p = write_varlong(p + 1, timestamp_delta)
    p = write_varint(p, offset_delta)
    p = _write_nullable(p, key)
    p = _write_nullable(p, value)
    p = write_varint(p, <int32_t>n)
    if n:
        for header in headers:
            header_key = header.key.encode("utf-8", "surrogateescape")
            header_value = _as_bytes(header.value)
            p = _write_nullable(p, _view(header_key))
            p = _write_nullable(p, _view(header_value))
    return p


def append_record(bytearray out, offset_delta, timestamp_delta, key, value, headers=()):
    """Append one encoded magic-2 record (length varint, then body) to ``out``. O(size)."""
    if not -(1 << 63) <= timestamp_delta < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {timestamp_delta}")
    cdef int64_t delta = timestamp_delta
    cdef int32_t offset = _int32(offset_delta)
    key = _as_bytes(key)
    value = _as_bytes(value)
    cdef _Bytes key_bytes = _view(key)
    cdef _Bytes value_bytes = _view(value)
    cdef size_t body = _body_size(offset, delta, key_bytes, value_bytes, headers)
    cdef Py_ssize_t size = <Py_ssize_t>(wire_varint_size(<int32_t>body) + body)
    cdef Py_ssize_t at = len(out)
    PyByteArray_Resize(out, at + size)
    cdef uint8_t *p = <uint8_t *>PyByteArray_AS_STRING(out) + at
    _write_record(p, p + size, offset, delta, key_bytes, value_bytes, headers)


def encode_record(offset_delta, timestamp_delta, key, value, headers=()):
    """Encode one magic-2 record, length varint included. O(size)."""
    cdef bytearray out = bytearray()
    append_record(out, offset_delta, timestamp_delta, key, value, headers)
    return bytes(out)


cdef inline SimpleRecord _simple(object item):
    """A record to encode as a SimpleRecord whose key and value are bytes or None: a SimpleRecord holding bytes
    is used as it is; any other object's fields are read by name and other buffers copied to bytes."""
    cdef SimpleRecord simple
    if type(item) is SimpleRecord:
        simple = <SimpleRecord>item
        if (simple.key is None or PyBytes_CheckExact(simple.key)) and (
            simple.value is None or PyBytes_CheckExact(simple.value)
        ):
            return simple
    return SimpleRecord(_as_bytes(item.value), _as_bytes(item.key), item.timestamp, item.headers)


def encode_batch(
    items,
    offset_deltas,
    int64_t base_offset,
    int32_t partition_leader_epoch,
    int16_t attributes,
    int64_t base_timestamp,
    log_append_time,
    int64_t producer_id,
    int16_t producer_epoch,
    int32_t base_sequence,
    compressor,
):
    """A magic-2 batch of ``items`` (:class:`SimpleRecord` s, or objects with their fields), built in two passes
    over the records (sizes, then bytes written straight into the batch or, with ``compressor``, into the
    records region handed to it, which returns the compressed region), then header and CRC-32C. Offset deltas are
    ``offset_deltas`` or ``0..n-1``; the max timestamp is ``log_append_time`` when given, else the largest record
    timestamp. O(size); the CRC runs without the GIL over large batches. Raises :class:`ValueError` for a field
    out of its varint range and :class:`RecordTooLargeError` for a batch past the 32-bit length field."""
    # Snapshots: the two passes index them without bounds checks, and an item's attributes may run Python code.
    cdef tuple records = tuple(items)
    cdef Py_ssize_t n = len(records)
    cdef Py_ssize_t i
    cdef int64_t timestamp = 0, max_timestamp = 0
    cdef int32_t offset_delta = 0
    cdef size_t records_size = 0, size, body
    cdef object region, out
    cdef SimpleRecord simple
    cdef uint8_t *p
    cdef uint8_t *stop
    cdef uint32_t crc
    cdef _Bytes key, value
    cdef tuple deltas = None if offset_deltas is None else tuple([_int32(delta) for delta in offset_deltas])
    if n == 0 or (deltas is not None and len(deltas) != n):
        raise ValueError("a batch needs at least one record, and one offset delta per record")
    for i in range(n):
        simple = _simple(records[i])
        timestamp = simple.timestamp
        offset_delta = <int32_t>i if deltas is None else <int32_t>deltas[i]
        body = _body_size(
            offset_delta,
            _timestamp_delta(timestamp, base_timestamp),
            _view(simple.key),
            _view(simple.value),
            simple.headers,
        )
        records_size += wire_varint_size(<int32_t>body) + body
        if i == 0 or timestamp > max_timestamp:
            max_timestamp = timestamp
    if log_append_time is not None:
        max_timestamp = log_append_time
    if compressor is None:
        size = RECORD_BATCH_OVERHEAD + records_size
        _check_batch_size(size)
        out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>size)
        p = <uint8_t *>PyBytes_AS_STRING_MUT(out) + RECORD_BATCH_OVERHEAD
    else:
        region = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>records_size)
        p = <uint8_t *>PyBytes_AS_STRING_MUT(region)
    stop = p + records_size
    for i in range(n):
        simple = _simple(records[i])
        offset_delta = <int32_t>i if deltas is None else <int32_t>deltas[i]
        p = _write_record(
            p,
            stop,
            offset_delta,
            _timestamp_delta(simple.timestamp, base_timestamp),
            _view(simple.key),
            _view(simple.value),
            simple.headers,
        )
    if p != stop:
        raise RuntimeError("a record changed while it was encoded")
    if compressor is not None:
        packed = _as_bytes(compressor(region))
        size = RECORD_BATCH_OVERHEAD + PyBytes_GET_SIZE(packed)
        _check_batch_size(size)
        out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>size)
        memcpy(PyBytes_AS_STRING_MUT(out) + RECORD_BATCH_OVERHEAD, PyBytes_AS_STRING(packed), PyBytes_GET_SIZE(packed))
    p = <uint8_t *>PyBytes_AS_STRING_MUT(out)
    store_be64(p, <uint64_t>base_offset)
    store_be32(p + LENGTH_OFFSET, <uint32_t>(size - LOG_OVERHEAD))
    store_be32(p + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>partition_leader_epoch)
    p[MAGIC_OFFSET] = MAGIC_V2
    store_be16(p + ATTRIBUTES_OFFSET, <uint16_t>attributes)
    store_be32(p + LAST_OFFSET_DELTA_OFFSET, <uint32_t>offset_delta)
    store_be64(p + BASE_TIMESTAMP_OFFSET, <uint64_t>base_timestamp)
    store_be64(p + MAX_TIMESTAMP_OFFSET, <uint64_t>max_timestamp)
    store_be64(p + PRODUCER_ID_OFFSET, <uint64_t>producer_id)
    store_be16(p + PRODUCER_EPOCH_OFFSET, <uint16_t>producer_epoch)
    store_be32(p + BASE_SEQUENCE_OFFSET, <uint32_t>base_sequence)
    store_be32(p + RECORDS_COUNT_OFFSET, <uint32_t>n)
    if size >= _NOGIL_BYTES:
        with nogil:
            crc = logmgr_crc32c(0, p + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET)
    else:
        crc = logmgr_crc32c(0, p + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET)
    store_be32(p + CRC_OFFSET, crc)
    return out


cdef int _check_batch_size(size_t size) except -1:
    if size - LOG_OVERHEAD > <size_t>INT32_MAX:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds the 32-bit length field")
    return 0


# --- varints ----------------------------------------------------------------------------------------------------


def decode_varint(buf, Py_ssize_t pos):
    """Decode a zig-zag varint at ``pos``; return ``(value, next_pos)``. O(1).

    Raises :class:`CorruptRecordError` (position = ``pos``) if the buffer ends mid-varint or the encoding is longer
    than 5 bytes.
    """
    cdef const uint8_t[::1] view = buf
    cdef int32_t value
    cdef Py_ssize_t p = pos
    cdef int status = WIRE_TRUNCATED
    if 0 <= pos < view.shape[0]:
        status = _varint(&view[0], view.shape[0], &p, &value)
    if status != WIRE_OK:
        raise CorruptRecordError(_varint_message(status, False), position=pos)
    return value, p


def decode_varlong(buf, Py_ssize_t pos):
    """Decode a zig-zag varlong at ``pos``; return ``(value, next_pos)``. O(1).

    Raises :class:`CorruptRecordError` if the buffer ends mid-varlong or the encoding is longer than 10 bytes.
    """
    cdef const uint8_t[::1] view = buf
    cdef int64_t value
    cdef Py_ssize_t p = pos
    cdef int status = WIRE_TRUNCATED
    if 0 <= pos < view.shape[0]:
        status = _varlong(&view[0], view.shape[0], &p, &value)
    if status != WIRE_OK:
        raise CorruptRecordError(_varint_message(status, True), position=pos)
    return value, p


def encode_varint(value):
    """Encode a signed int32 as a zig-zag varint (1-5 bytes). O(1)."""
    cdef uint8_t out[5]
    cdef uint8_t *end = write_varint(out, _int32(value))
    return PyBytes_FromStringAndSize(<const char *>out, end - out)


def encode_varlong(value):
    """Encode a signed int64 as a zig-zag varlong (1-10 bytes). O(1)."""
    cdef uint8_t out[10]
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    cdef uint8_t *end = write_varlong(out, <int64_t>value)
    return PyBytes_FromStringAndSize(<const char *>out, end - out)


def varint_size(int32_t value):
    """Number of bytes :func:`encode_varint` produces for ``value``. O(1)."""
    return wire_varint_size(value)


def varlong_size(int64_t value):
    """Number of bytes :func:`encode_varlong` produces for ``value``. O(1)."""
    return wire_varlong_size(value)


# --- Arrow-ready columns ----------------------------------------------------------------------------------------


cdef struct _Batch:
    const uint8_t *buf
    Py_ssize_t size
    int64_t count
    int64_t base_offset
    int64_t base_timestamp
    int64_t log_append_time
    bint append_time


cdef struct _Totals:
    Py_ssize_t rows
    Py_ssize_t key_bytes
    Py_ssize_t value_bytes
    Py_ssize_t headers
    Py_ssize_t header_key_bytes
    Py_ssize_t header_value_bytes


cdef struct _Sink:
    int64_t *offsets
    int64_t *timestamps
    int32_t *timestamp_types
    int32_t *key_offsets
    uint8_t *key_data
    uint8_t *key_validity
    int32_t *value_offsets
    uint8_t *value_data
    uint8_t *value_validity
    int32_t *header_offsets
    int32_t *header_key_offsets
    uint8_t *header_key_data
    int32_t *header_value_offsets
    uint8_t *header_value_data
    uint8_t *header_value_validity
    _Totals capacity  # what the first pass counted: the buffers' sizes


cdef inline void _copy_value(const uint8_t *src, int32_t size, Py_ssize_t row, int32_t *offsets, uint8_t *data) noexcept nogil:
    """Append value ``row`` (``size`` >= 0 bytes) to Arrow offsets and data."""
    cdef int32_t at = offsets[row]
    memcpy(data + at, src, <size_t>size)
    offsets[row + 1] = at + size


cdef inline void _copy_nullable(
    const uint8_t *src, int32_t size, Py_ssize_t row, int32_t *offsets, uint8_t *data, uint8_t *validity
) noexcept nogil:
    """Append nullable value ``row`` (``size`` < 0: null) to Arrow offsets, data and validity bits (zeroed)."""
    if size < 0:
        offsets[row + 1] = offsets[row]
        return
    _copy_value(src, size, row, offsets, data)
    validity[row >> 3] |= <uint8_t>(1 << (row & 7))


cdef inline void _header_bytes(
    const uint8_t *buf, Py_ssize_t end, const _Parsed *r, Py_ssize_t *key_bytes, Py_ssize_t *value_bytes
) noexcept nogil:
    """Add the key bytes and the (non-null) value bytes of a parsed record's headers, already checked by
    :func:`_parse_body`, to ``key_bytes`` and ``value_bytes``. O(headers)."""
    cdef Py_ssize_t pos = r.headers_pos
    cdef int32_t h, size = 0
    for h in range(r.header_count):
        _varint(buf, end, &pos, &size)
        key_bytes[0] += size
        pos += size
        _varint(buf, end, &pos, &size)
        if size > 0:
            value_bytes[0] += size
            pos += size


cdef bint _fits(const uint8_t *buf, Py_ssize_t end, _Sink *sink, Py_ssize_t row, Py_ssize_t header, _Parsed *r) noexcept nogil:
    """Whether a parsed record's fields fit the room left in the sink's buffers. O(headers)."""
    cdef Py_ssize_t key_bytes = 0, value_bytes = 0
    if row >= sink.capacity.rows:
        return False
    if r.key_size > 0 and sink.key_offsets[row] + <Py_ssize_t>r.key_size > sink.capacity.key_bytes:
        return False
    if r.value_size > 0 and sink.value_offsets[row] + <Py_ssize_t>r.value_size > sink.capacity.value_bytes:
        return False
    if sink.header_offsets == NULL or r.header_count == 0:
        return True
    if header + r.header_count > sink.capacity.headers:
        return False
    _header_bytes(buf, end, r, &key_bytes, &value_bytes)
    return (
        sink.header_key_offsets[header] + key_bytes <= sink.capacity.header_key_bytes
        and sink.header_value_offsets[header] + value_bytes <= sink.capacity.header_value_bytes
    )


cdef Py_ssize_t _columns_pass(_Batch *batches, Py_ssize_t n, _Totals *totals, _Sink *sink) noexcept nogil:
    """Frame and parse every record of every batch (``sink`` NULL: check and count only; else fill the Arrow
    buffers of ``sink``, sized by a first pass). Returns -1, or the index of the first batch whose records are
    corrupt by the rules of :class:`RecordReader`. O(bytes)."""
    cdef Py_ssize_t b, pos, start, body_end, row = 0, header = 0, hpos
    cdef int64_t k
    cdef int32_t body_size, h, size = 0
    cdef _Parsed r
    cdef _Batch *batch
    for b in range(n):
        batch = &batches[b]
        pos = 0
        for k in range(batch.count):
            start = pos
            if _varint(batch.buf, batch.size, &pos, &body_size) != WIRE_OK:
                return b
            body_end = pos + body_size
            if body_size < 0 or body_end > batch.size:
                return b
            if _parse_body(batch.buf, batch.size, pos, body_size, body_end, &r) != 0:
                return b
            pos = body_end
            if sink != NULL and not _fits(batch.buf, batch.size, sink, row, header, &r):
                # The bytes changed since the first pass (a buffer written by another thread while the GIL was
                # released): the batch is treated as corrupt rather than written past the buffers.
                return b
            if sink == NULL:
                totals.rows += 1
                totals.key_bytes += r.key_size if r.key_size > 0 else 0
                totals.value_bytes += r.value_size if r.value_size > 0 else 0
                totals.headers += r.header_count
                _header_bytes(batch.buf, batch.size, &r, &totals.header_key_bytes, &totals.header_value_bytes)
                continue
            # Offsets wrap as Java longs; Spark's range check on timestamps is the caller's.
            sink.offsets[row] = _java_add(batch.base_offset, r.offset_delta)
            if batch.append_time:
                sink.timestamps[row] = batch.log_append_time
                sink.timestamp_types[row] = 1
            else:
                sink.timestamps[row] = _java_add(batch.base_timestamp, r.timestamp_delta)
                sink.timestamp_types[row] = 0
            _copy_nullable(batch.buf + r.key_pos, r.key_size, row, sink.key_offsets, sink.key_data, sink.key_validity)
            _copy_nullable(
                batch.buf + r.value_pos, r.value_size, row, sink.value_offsets, sink.value_data, sink.value_validity
            )
            if sink.header_offsets != NULL:
                hpos = r.headers_pos
                for h in range(r.header_count):
                    _varint(batch.buf, batch.size, &hpos, &size)
                    _copy_value(batch.buf + hpos, size, header, sink.header_key_offsets, sink.header_key_data)
                    hpos += size
                    _varint(batch.buf, batch.size, &hpos, &size)
                    _copy_nullable(
                        batch.buf + hpos, size, header, sink.header_value_offsets, sink.header_value_data,
                        sink.header_value_validity,
                    )
                    if size > 0:
                        hpos += size
                    header += 1
                sink.header_offsets[row + 1] = <int32_t>header
            row += 1
        if pos != batch.size:
            return b
    return -1


cdef class RecordColumns:
    """The records of a run of magic-2 batches as Arrow-ready buffers (native byte order): ``offsets`` and
    ``timestamps`` (int64), ``timestamp_types`` (int32), and for keys, values, header keys and header values
    int32 offsets (rows + 1), data and a validity bitmap (LSB first) with its null count; ``header_offsets``
    (int32, rows + 1) index the headers of each row when headers were asked for, else are None."""

    cdef readonly Py_ssize_t rows
    cdef readonly bytearray offsets
    cdef readonly bytearray timestamps
    cdef readonly bytearray timestamp_types
    cdef readonly bytearray key_offsets
    cdef readonly bytearray key_data
    cdef readonly bytearray key_validity
    cdef readonly Py_ssize_t key_nulls
    cdef readonly bytearray value_offsets
    cdef readonly bytearray value_data
    cdef readonly bytearray value_validity
    cdef readonly Py_ssize_t value_nulls
    cdef readonly Py_ssize_t headers
    cdef readonly object header_offsets
    cdef readonly object header_key_offsets
    cdef readonly object header_key_data
    cdef readonly object header_value_offsets
    cdef readonly object header_value_data
    cdef readonly object header_value_validity
    cdef readonly Py_ssize_t header_value_nulls


cdef bytearray _zeros(Py_ssize_t size):
    cdef bytearray out = PyByteArray_FromStringAndSize(NULL, size)
    if size:
        memset(PyByteArray_AS_STRING(out), 0, <size_t>size)
    return out


cdef inline void *_ptr(bytearray buffer) noexcept:
    return PyByteArray_AS_STRING(buffer)


cdef Py_ssize_t _count_nulls(const uint8_t *validity, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, valid = 0
    for i in range(n):
        valid += (validity[i >> 3] >> (i & 7)) & 1
    return n - valid


def decode_columns(regions, counts, base_offsets, base_timestamps, log_append_times, bint headers):
    """Decode the records of many magic-2 batches into :class:`RecordColumns`: ``regions[i]`` is batch i's
    (decompressed) records region (bytes or a contiguous memoryview) or a slice of whole records of it,
    ``counts[i]`` its records, ``log_append_times[i]`` the batch's max timestamp under LogAppendTime (what every
    record reports) or None. Records are checked exactly as :class:`RecordReader` checks them; the first batch
    failing returns its index instead (the caller asks the scalar decoder for the precise error). Two passes over
    the bytes (check and size, then fill), both without the GIL. O(bytes)."""
    cdef Py_ssize_t n = len(regions), i, failed
    cdef _Batch *batches = <_Batch *>PyMem_Malloc(max(n, 1) * sizeof(_Batch))
    cdef _Totals totals
    cdef _Sink sink
    cdef RecordColumns out
    cdef list held = []
    cdef Py_buffer *view
    if batches == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            region = regions[i]
            if PyMemoryView_Check(region):
                view = PyMemoryView_GET_BUFFER(region)
                if not (PyBuffer_IsContiguous(view, b'C') and view.itemsize == 1):
                    region = bytes(region)
            elif not PyBytes_CheckExact(region):
                region = bytes(region)
            held.append(region)
            if PyBytes_CheckExact(region):
                batches[i].buf = <const uint8_t *>PyBytes_AS_STRING(region)
                batches[i].size = PyBytes_GET_SIZE(region)
            else:
                view = PyMemoryView_GET_BUFFER(region)
                batches[i].buf = <const uint8_t *>view.buf
                batches[i].size = view.len
            batches[i].count = counts[i]
            batches[i].base_offset = base_offsets[i]
            batches[i].base_timestamp = base_timestamps[i]
            batches[i].append_time = log_append_times[i] is not None
            batches[i].log_append_time = log_append_times[i] if batches[i].append_time else 0
        memset(&totals, 0, sizeof(_Totals))
        with nogil:
            failed = _columns_pass(batches, n, &totals, NULL)
        if failed >= 0:
            return failed
        if totals.key_bytes > INT32_MAX or totals.value_bytes > INT32_MAX or totals.header_key_bytes > INT32_MAX \
                or totals.header_value_bytes > INT32_MAX or totals.headers > INT32_MAX:
            raise ValueError("more than 2 GiB of keys, values or headers for one Arrow batch")
        out = RecordColumns.__new__(RecordColumns)
        out.rows = totals.rows
        out.offsets = PyByteArray_FromStringAndSize(NULL, totals.rows * 8)
        out.timestamps = PyByteArray_FromStringAndSize(NULL, totals.rows * 8)
        out.timestamp_types = PyByteArray_FromStringAndSize(NULL, totals.rows * 4)
        out.key_offsets = _zeros((totals.rows + 1) * 4)
        out.key_data = PyByteArray_FromStringAndSize(NULL, totals.key_bytes)
        out.key_validity = _zeros((totals.rows + 7) // 8)
        out.value_offsets = _zeros((totals.rows + 1) * 4)
        out.value_data = PyByteArray_FromStringAndSize(NULL, totals.value_bytes)
        out.value_validity = _zeros((totals.rows + 7) // 8)
        out.headers = totals.headers
        memset(&sink, 0, sizeof(_Sink))
        sink.capacity = totals
        sink.offsets = <int64_t *>_ptr(out.offsets)
        sink.timestamps = <int64_t *>_ptr(out.timestamps)
        sink.timestamp_types = <int32_t *>_ptr(out.timestamp_types)
        sink.key_offsets = <int32_t *>_ptr(out.key_offsets)
        sink.key_data = <uint8_t *>_ptr(out.key_data)
        sink.key_validity = <uint8_t *>_ptr(out.key_validity)
        sink.value_offsets = <int32_t *>_ptr(out.value_offsets)
        sink.value_data = <uint8_t *>_ptr(out.value_data)
        sink.value_validity = <uint8_t *>_ptr(out.value_validity)
        if headers:
            out.header_offsets = _zeros((totals.rows + 1) * 4)
            out.header_key_offsets = _zeros((totals.headers + 1) * 4)
            out.header_key_data = PyByteArray_FromStringAndSize(NULL, totals.header_key_bytes)
            out.header_value_offsets = _zeros((totals.headers + 1) * 4)
            out.header_value_data = PyByteArray_FromStringAndSize(NULL, totals.header_value_bytes)
            out.header_value_validity = _zeros((totals.headers + 7) // 8)
            sink.header_offsets = <int32_t *>_ptr(out.header_offsets)
            sink.header_key_offsets = <int32_t *>_ptr(out.header_key_offsets)
            sink.header_key_data = <uint8_t *>_ptr(out.header_key_data)
            sink.header_value_offsets = <int32_t *>_ptr(out.header_value_offsets)
            sink.header_value_data = <uint8_t *>_ptr(out.header_value_data)
            sink.header_value_validity = <uint8_t *>_ptr(out.header_value_validity)
        with nogil:
            _columns_pass(batches, n, &totals, &sink)
            out.key_nulls = _count_nulls(sink.key_validity, totals.rows)
            out.value_nulls = _count_nulls(sink.value_validity, totals.rows)
            out.header_value_nulls = (
                _count_nulls(sink.header_value_validity, totals.headers) if headers else 0
            )
        return out
    finally:
        PyMem_Free(batches)
