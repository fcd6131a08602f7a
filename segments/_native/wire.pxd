# Byte-level primitives shared by the kernels (cimported, inlined; no Python objects, callable without the GIL).
#
# Every reader takes the end of its input and checks it before touching a byte: hostile input yields a status
# code, never a read past the buffer. Kafka's wire is big-endian; varints are protobuf zig-zag (ByteUtils).
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# Kafka's record batch layout (kafka-format.md §1.1): every kernel reads and writes batches by these offsets.
cdef enum:
    LOG_OVERHEAD = 12             # baseOffset + length prefix
    LENGTH_OFFSET = 8
    HEADER_SIZE_UP_TO_MAGIC = 17
    RECORD_OVERHEAD_V0 = 14       # the smallest message (legacy v0): what a walk accepts before the magic is known
    RECORD_BATCH_OVERHEAD = 61    # a magic-2 batch header
    PARTITION_LEADER_EPOCH_OFFSET = 12
    MAGIC_OFFSET = 16
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    LAST_OFFSET_DELTA_OFFSET = 23
    MAX_TIMESTAMP_OFFSET = 35
    PRODUCER_ID_OFFSET = 43
    PRODUCER_EPOCH_OFFSET = 51
    BASE_SEQUENCE_OFFSET = 53
    RECORDS_COUNT_OFFSET = 57
    MAGIC_V2 = 2
    BASE_TIMESTAMP_OFFSET = 27
    ATTRIBUTE_CODEC_MASK = 0x07   # attributes: the compression codec
    ATTRIBUTE_LOG_APPEND_TIME = 0x08  # attributes: timestamp type LogAppendTime
    ATTRIBUTE_TRANSACTIONAL = 0x10  # attributes: part of a transaction
    ATTRIBUTE_CONTROL = 0x20      # attributes: a control batch (transaction markers and the like)
    ATTRIBUTE_DELETE_HORIZON = 0x40  # attributes: the base timestamp is the delete horizon (compaction)

# A magic 0/1 entry (kafka-format.md §1.5): offset (its last: a compressed wrapper's is its last inner offset),
# size, CRC-32, magic, attributes, then on magic 1 the timestamp.
cdef enum:
    LEGACY_ATTRIBUTES_OFFSET = 17
    LEGACY_TIMESTAMP_OFFSET = 18
    RECORD_OVERHEAD_V1 = 22       # v0's plus the 8-byte timestamp

# Status codes of the varint readers and the record framer (0 = ok).
cdef enum:
    WIRE_OK = 0
    WIRE_TRUNCATED = 1        # the input ends inside the value
    WIRE_VARINT_TOO_LONG = 2  # more than 5 (varint) or 10 (varlong) bytes
    WIRE_RECORD_TOO_LARGE = 3 # a record length above the caller's limit
    WIRE_BAD_RECORD_SIZE = 4  # a record length below the 6-byte minimum body or past the input
    WIRE_TRAILING_BYTES = 5   # bytes left after the declared number of records

cdef inline uint16_t load_be16(const uint8_t *p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline uint32_t load_be32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]

cdef inline uint64_t load_be64(const uint8_t *p) noexcept nogil:
    return (<uint64_t>load_be32(p) << 32) | <uint64_t>load_be32(p + 4)

cdef inline int64_t legacy_max_timestamp(const uint8_t *entry, size_t total) noexcept nogil:
    """A magic 0/1 entry's max timestamp (Kafka's ``AbstractLegacyRecordBatch.maxTimestamp``): magic 1's
    timestamp when the entry of ``total`` bytes (prefix included) holds one, else -1 (``NO_TIMESTAMP``: magic 0 has
    none). Needs ``entry[0:26]`` readable when magic is 1 and ``total >= 34``."""
    if entry[MAGIC_OFFSET] == 1 and total >= LOG_OVERHEAD + RECORD_OVERHEAD_V1:
        return <int64_t>load_be64(entry + LEGACY_TIMESTAMP_OFFSET)
    return -1

cdef inline void store_be16(uint8_t *p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void store_be32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void store_be64(uint8_t *p, uint64_t v) noexcept nogil:
    store_be32(p, <uint32_t>(v >> 32))
    store_be32(p + 4, <uint32_t>v)

cdef inline int read_varint(const uint8_t *buf, size_t end, size_t *pos, int32_t *out) noexcept nogil:
    """Zig-zag varint (int32) at buf[pos[0]] before end; advances pos. WIRE_TRUNCATED / WIRE_VARINT_TOO_LONG
    leave pos unchanged."""
    cdef size_t p = pos[0]
    cdef uint32_t raw = 0
    cdef int shift = 0
    cdef uint8_t b
    # One- and two-byte values (record lengths below 8 KiB, the deltas of a batch's first 8,192 records) without
    # the loop's shift and length checks: they are most of what record scans read.
    if p + 1 < end and buf[p + 1] < 0x80:
        if buf[p] < 0x80:
            raw = buf[p]
            pos[0] = p + 1
        else:
            raw = (<uint32_t>(buf[p] & 0x7F)) | (<uint32_t>buf[p + 1] << 7)
            pos[0] = p + 2
        out[0] = <int32_t>((raw >> 1) ^ (-(raw & 1)))
        return WIRE_OK
    while True:
        if p >= end:
            return WIRE_TRUNCATED
        b = buf[p]
        p += 1
        raw |= (<uint32_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            return WIRE_VARINT_TOO_LONG
    out[0] = <int32_t>((raw >> 1) ^ (-(raw & 1)))
    pos[0] = p
    return WIRE_OK

cdef inline int read_varlong(const uint8_t *buf, size_t end, size_t *pos, int64_t *out) noexcept nogil:
    """Zig-zag varlong (int64), as :func:`read_varint` with at most 10 bytes (and its fast path)."""
    cdef size_t p = pos[0]
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef uint8_t b
    if p + 1 < end and buf[p + 1] < 0x80:
        if buf[p] < 0x80:
            raw = buf[p]
            pos[0] = p + 1
        else:
            raw = (<uint64_t>(buf[p] & 0x7F)) | (<uint64_t>buf[p + 1] << 7)
            pos[0] = p + 2
        out[0] = <int64_t>((raw >> 1) ^ (-(raw & 1)))
        return WIRE_OK
    while True:
        if p >= end:
            return WIRE_TRUNCATED
        b = buf[p]
        p += 1
        raw |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            return WIRE_VARINT_TOO_LONG
    out[0] = <int64_t>((raw >> 1) ^ (-(raw & 1)))
    pos[0] = p
    return WIRE_OK

cdef inline size_t varint_size(int32_t value) noexcept nogil:
    cdef uint32_t raw = (<uint32_t>value << 1) ^ <uint32_t>(value >> 31)
    cdef size_t n = 1
    while raw >= 0x80:
        raw >>= 7
        n += 1
    return n

cdef inline size_t varlong_size(int64_t value) noexcept nogil:
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef size_t n = 1
    while raw >= 0x80:
        raw >>= 7
        n += 1
    return n

cdef inline uint8_t *write_varint(uint8_t *p, int32_t value) noexcept nogil:
    """Write the zig-zag varint of value at p (room for 5 bytes); return the byte after it."""
    cdef uint32_t raw = (<uint32_t>value << 1) ^ <uint32_t>(value >> 31)
    while raw >= 0x80:
        p[0] = <uint8_t>((raw & 0x7F) | 0x80)
        p += 1
        raw >>= 7
    p[0] = <uint8_t>raw
    return p + 1

cdef inline uint8_t *write_varlong(uint8_t *p, int64_t value) noexcept nogil:
    """Write the zig-zag varlong of value at p (room for 10 bytes); return the byte after it."""
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while raw >= 0x80:
        p[0] = <uint8_t>((raw & 0x7F) | 0x80)
        p += 1
        raw >>= 7
    p[0] = <uint8_t>raw
    return p + 1

cdef inline int frame_records(const uint8_t *buf, size_t length, int64_t count, int64_t max_record_bytes,
                              size_t *error_pos) noexcept nogil:
    """Check that buf[0:length] holds exactly ``count`` length-prefixed magic-2 records (Kafka's framing rule:
    each body at least 6 bytes, none past the end, nothing after the last), reading lengths only. On failure
    error_pos[0] is the start of the offending record (or of the trailing bytes). O(count).

    Runs of records of one size (fixed-size payloads, common in logs) are hopped without decoding: once two
    records in a row have the same length, each next record whose length prefix has the same one or two bytes
    has that length too (the same bytes are the same varint) and passed the same checks, so its start is known
    without waiting for its length to be decoded (the hop is a chain of dependent loads otherwise: 3-4 times the
    time). The first record that differs, or would not fit, is decoded and checked as any other."""
    cdef size_t pos = 0
    cdef size_t start
    cdef size_t stride
    cdef size_t previous_stride = 0
    cdef int shift
    cdef uint16_t prefix
    cdef int32_t body
    cdef int status
    cdef int64_t i = 0
    while i < count:
        start = pos
        status = read_varint(buf, length, &pos, &body)
        if status != WIRE_OK:
            error_pos[0] = start
            return status
        if body > max_record_bytes:
            error_pos[0] = start
            return WIRE_RECORD_TOO_LARGE
        if body < 6 or <size_t>body > length - pos:
            error_pos[0] = start
            return WIRE_BAD_RECORD_SIZE
        pos += <size_t>body
        i += 1
        stride = pos - start
        if stride == previous_stride and stride - <size_t>body <= 2:
            # Compare the prefix's bytes (the first of the two loaded when it is one byte long): both loads are in
            # bounds, as a record fits (stride <= length - pos) and is at least 7 bytes long.
            shift = 8 if stride - <size_t>body == 1 else 0
            prefix = load_be16(buf + start) >> shift
            while i < count and stride <= length - pos and load_be16(buf + pos) >> shift == prefix:
                pos += stride
                i += 1
        previous_stride = stride
    if pos != length:
        error_pos[0] = pos
        return WIRE_TRAILING_BYTES
    return WIRE_OK
