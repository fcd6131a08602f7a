# cython: language_level=3
"""Small whole files compared (and written only when different) in one compiled call each, the GIL released over
the system calls: a recovery checks two index files and one producer snapshot per segment, and after a crash
that lost nothing each already holds the bytes it would write. Never through a symbolic link (``O_NOFOLLOW``);
a failure raises ``OSError`` naming the file and the failed action, as :func:`segments.file_records.located_error`
words it."""

from libc.errno cimport errno
from posix.fcntl cimport O_CLOEXEC, O_NONBLOCK, O_RDONLY, open
from posix.stat cimport fstat, struct_stat
from posix.unistd cimport close

from segments._native.fileio cimport (
    FILE_OK,
    FILE_OPEN,
    FILE_STAT,
    O_NOFOLLOW,
    FileOutcome,
    compare_file,
    encoded_path,
    file_failure,
    write_if_different_at,
)


def open_for_reading(path):
    """``(descriptor, size)`` of the file at ``path`` opened read-only (never through a link), its size from one
    ``fstat``: two system calls in one compiled call. The caller closes the descriptor. A link raises
    ``OSError(ELOOP)`` saying so, other failures ``OSError`` naming the file. O(1), no GIL held."""
    cdef bytes encoded = encoded_path(path)
    cdef const char *c_path = encoded
    cdef struct_stat info
    cdef FileOutcome out
    cdef int fd
    out.step = FILE_OK
    with nogil:
        fd = open(c_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0:
            out.step = FILE_OPEN
            out.error = errno
        elif fstat(fd, &info) != 0:
            out.step = FILE_STAT
            out.error = errno
            close(fd)
    if out.step != FILE_OK:
        raise file_failure(&out, c_path, 0)
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
    cdef FileOutcome out
    with nogil:
        write_if_different_at(c_path, c_data, size, &out)
    if out.step != FILE_OK:
        raise file_failure(&out, c_path, size)


def holds(path, bytes data):
    """Whether a regular file at ``path`` (never a link; a FIFO is opened without blocking and is not one) holds
    exactly ``data``; False when none can be opened there. A read that fails raises ``OSError`` naming the file.
    Four system calls (open, fstat, one read of ``len(data)`` bytes only when the length matches, close).
    O(len(data)), no GIL held."""
    cdef bytes encoded = encoded_path(path)
    cdef const char *c_path = encoded
    cdef const char *c_data = data
    cdef Py_ssize_t size = len(data)
    cdef FileOutcome out
    cdef int fd
    out.step = FILE_OK
    out.starts_with = False
    out.found = 0
    with nogil:
        fd = open(c_path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        if fd >= 0:
            compare_file(fd, c_data, size, True, &out)
            close(fd)
    if out.step != FILE_OK:
        raise file_failure(&out, c_path, size)
    return out.starts_with and out.found == size
