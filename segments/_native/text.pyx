# cython: language_level=3
"""Kafka's text checkpoint files read in one compiled pass when they are in the form Kafka writes them (a load
reads a leader-epoch checkpoint per partition and the log dir's offset checkpoints, one line per partition): the
interpreted reader (``checkpoints.checkpoint_file.parse_checkpoint``: Java's line, whitespace and integer rules,
an error naming the line) cost more than the read of the file."""

from libc.stdint cimport int64_t, uint64_t


cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char *text, Py_ssize_t size, const char *errors)

cdef unsigned char _NEWLINE = 0x0A
cdef unsigned char _SPACE = 0x20

# Field kinds: TEXT keeps the field as a str; a number is the bits of the Java integer it is read as.
TEXT = 0


cdef inline bint _parse_int(const unsigned char *text, Py_ssize_t length, int bits, bint signed_ok,
                            int64_t *value) noexcept:
    """``text`` as a decimal integer (``-`` first if ``signed_ok``, then ASCII digits only) within the signed
    ``bits`` range, into ``value``: whether it is one. Java's parse accepts more (``+``, other digits); those
    forms are left to the interpreted reader."""
    cdef bint negative = signed_ok and length > 0 and text[0] == 0x2D
    cdef Py_ssize_t i = 1 if negative else 0
    cdef uint64_t limit = (<uint64_t>1 << (bits - 1)) - (0 if negative else 1)
    cdef uint64_t total = 0
    cdef unsigned int digit
    if i == length:
        return False
    while i < length:
        digit = text[i] - 48
        if digit > 9:
            return False
        if total > (limit - digit) // 10:
            return False
        total = total * 10 + digit
        i += 1
    # In unsigned arithmetic, so the most negative value (whose magnitude no int64 holds) comes out exact.
    value[0] = <int64_t>(0 - total) if negative else <int64_t>total
    return True


def checkpoint_entries(bytes data, int version, tuple kinds):
    """The entries of a text checkpoint (``<version>\\n<count>\\n`` then ``count`` lines of fields) as tuples, one
    value per field of ``kinds`` (``TEXT``: the field as a ``str``; 16, 32 or 64: a Java integer of those bits),
    when ``data`` is exactly in the form Kafka writes: ASCII, every line ending with ``\\n``, the header's version
    ``version``, fields separated by one space, integers as optional ``-`` and digits within their range, text
    fields of printable characters, and ``count`` such lines. None otherwise (an empty file too): the caller then
    reads the file with the interpreted reader, which accepts everything else Java does and names what is wrong.
    O(len(data))."""
    cdef const unsigned char *text = data
    cdef Py_ssize_t size = len(data), position = 0, start, field_count = len(kinds), line, expected, f
    cdef int64_t number
    cdef int kind
    cdef list entries = []
    cdef list fields
    cdef unsigned char c
    # The two header lines: unsigned integers.
    start = position
    while position < size and text[position] != _NEWLINE:
        position += 1
    if position == size or not _parse_int(text + start, position - start, 32, False, &number) or number != version:
        return None
    position += 1
    start = position
    while position < size and text[position] != _NEWLINE:
        position += 1
    if position == size or not _parse_int(text + start, position - start, 32, False, &number):
        return None
    expected = number
    position += 1
    for line in range(expected):
        fields = []
        for f in range(field_count):
            start = position
            while position < size:
                c = text[position]
                if c == _SPACE or c == _NEWLINE:
                    break
                if c < 0x21 or c > 0x7E:
                    return None
                position += 1
            # The separator after the field: a space between fields, the line's end after the last.
            if position == size or position == start or text[position] != (_NEWLINE if f == field_count - 1 else _SPACE):
                return None
            kind = kinds[f]
            if kind == TEXT:
                fields.append(PyUnicode_DecodeASCII(<const char *>text + start, position - start, NULL))
            elif _parse_int(text + start, position - start, kind, True, &number):
                fields.append(number)
            else:
                return None
            position += 1
        entries.append(tuple(fields))
    return entries if position == size else None
