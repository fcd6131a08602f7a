# cython: language_level=3
"""Small whole files compared (and written only when different) in one compiled call each, the GIL released over
the system calls: a recovery checks two index files and one producer snapshot per segment, and after a crash
that lost nothing each already holds the bytes it would write. Never through a symbolic link (``O_NOFOLLOW``);
a failure raises ``OSError`` naming the file and the failed action, as :func:`segments.file_records.located_error`
words it."""

import os

from libc.errno cimport ELOOP, errno
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp
from posix.fcntl cimport O_CLOEXEC, O_CREAT, O_NONBLOCK, O_RDONLY, O_RDWR, open
from posix.stat cimport S_ISREG, fstat, struct_stat
from posix.types cimport off_t
from posix.unistd cimport close, ftruncate

from segments._native.fileio cimport O_NOFOLLOW, encoded_path, pread_full, pwrite_full


cdef enum _Step:
    # Where a call failed (errno in _Outcome.error); _OK when it did not.
    _OK = 0
    _OPEN
    _STAT
    _READ
    _WRITE
    _TRUNCATE
    _CLOSE
    _MEMORY


cdef struct _Outcome:
    _Step step
    int error
    # The file starts with the bytes compared (``found`` bytes read, up to one more than compared).
    bint starts_with
    Py_ssize_t found


cdef void _compare(int fd, const char *data, Py_ssize_t size, bint require_regular, _Outcome *out) noexcept nogil:
    """Whether the open file ``fd`` starts with ``data`` (``out.starts_with``, ``out.found`` the bytes read: the file
    holds exactly ``data`` when that is ``size``; with ``require_regular``, False for a file that is not a regular
    one); ``out.step`` says which call failed. One read of ``size + 1`` bytes: the byte more tells a longer file
    apart without a stat."""
    cdef struct_stat info
    cdef char *buffer
    cdef Py_ssize_t got
    out.starts_with = False
    out.found = 0
    if require_regular:
        if fstat(fd, &info) != 0:
            out.step = _STAT
            out.error = errno
            return
        if not S_ISREG(info.st_mode):
            return
    buffer = <char *>malloc(<size_t>size + 1)
    if buffer == NULL:
        out.step = _MEMORY
        return
    out.error = pread_full(fd, buffer, size + 1, 0, &got)
    if out.error != 0:
        out.step = _READ
    else:
        out.found = got
        out.starts_with = got >= size and memcmp(buffer, data, <size_t>size) == 0
    free(buffer)


cdef void _write_if_different(const char *path, const char *data, Py_ssize_t size, _Outcome *out) noexcept nogil:
    cdef int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o666)
    out.step = _OK
    if fd < 0:
        out.step = _OPEN
        out.error = errno
        return
    _compare(fd, data, size, False, out)
    if out.step == _OK and not out.starts_with:
        out.error = pwrite_full(fd, data, size, 0)
        if out.error != 0:
            out.step = _WRITE
    if out.step == _OK and out.found > size:
        # A longer file (an active segment's preallocated index): cut to the bytes.
        if ftruncate(fd, <off_t>size) != 0:
            out.step = _TRUNCATE
            out.error = errno
    if close(fd) != 0 and out.step == _OK:
        out.step = _CLOSE
        out.error = errno


cdef object _failure(_Outcome *out, path, Py_ssize_t size):
    """The ``OSError`` of a failed call of ``out``, naming ``path`` (and the action, for calls on a descriptor)."""
    cdef int error = out.error
    if out.step == _MEMORY:
        return MemoryError(f"{path}: {size + 1} bytes to compare")
    if out.step == _OPEN and error == ELOOP:
        return OSError(ELOOP, "is a symbolic link, which is never followed", path)
    if out.step == _OPEN or out.step == _CLOSE:
        return OSError(error, os.strerror(error), path)
    if out.step == _STAT:
        action = "stat"
    elif out.step == _READ:
        action = f"read of {size + 1} bytes"
    elif out.step == _WRITE:
        action = f"write of {size} bytes"
    else:
        action = f"truncation to {size} bytes"
    return OSError(error, f"{os.strerror(error)} ({action})", path)


def open_for_reading(path):
    """``(descriptor, size)`` of the file at ``path`` opened read-only (never through a link), its size from one
    ``fstat``: two system calls in one compiled call. The caller closes the descriptor. A link raises
    ``OSError(ELOOP)`` saying so, other failures ``OSError`` naming the file. O(1), no GIL held."""
    cdef bytes encoded = encoded_path(path)
    cdef const char *c_path = encoded
    cdef struct_stat info
    cdef _Outcome out
    cdef int fd
    out.step = _OK
    with nogil:
        fd = open(c_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0:
            out.step = _OPEN
            out.error = errno
        elif fstat(fd, &info) != 0:
            out.step = _STAT
            out.error = errno
            close(fd)
    if out.step != _OK:
        raise _failure(&out, os.fsdecode(encoded), 0)
    return fd, info.st_size


def write_if_different(path, bytes data):
    """Make the file at ``path`` (created if missing, never through a link) hold exactly ``data``: the bytes there
    are read and compared first and written only when they differ, then a longer file is cut to ``len(data)``. A
    file that already holds them is not modified at all (no dirty page, no new modification time).
    O(len(data)), no GIL held."""
    cdef bytes encoded = encoded_path(path)
    cdef const char *c_path = encoded
    cdef const char *c_data = data
    cdef Py_ssize_t size = len(data)
    cdef _Outcome out
    with nogil:
        _write_if_different(c_path, c_data, size, &out)
    if out.step != _OK:
        raise _failure(&out, os.fsdecode(encoded), size)


def holds(path, bytes data):
    """Whether a regular file at ``path`` (never a link; a FIFO is opened without blocking and is not one) holds
    exactly ``data``; False when none can be opened there. A read that fails raises ``OSError`` naming the file.
    O(len(data)), no GIL held."""
    cdef bytes encoded = encoded_path(path)
    cdef const char *c_path = encoded
    cdef const char *c_data = data
    cdef Py_ssize_t size = len(data)
    cdef _Outcome out
    cdef int fd
    out.step = _OK
    out.starts_with = False
    out.found = 0
    with nogil:
        fd = open(c_path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        if fd >= 0:
            _compare(fd, c_data, size, True, &out)
            close(fd)
    if out.step != _OK:
        raise _failure(&out, os.fsdecode(encoded), size)
    return out.starts_with and out.found == size
