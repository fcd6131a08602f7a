# cython: language_level=3
"""Descriptor I/O shared by the compiled modules: whole-range ``pread``/``pwrite``/``pwritev`` loops (errno results,
no GIL, no Python object), block reservation past a file's end (``reserve_blocks``) and a path's file-system bytes
for ``open(2)``. Files are opened with ``O_NOFOLLOW``: Kafka never links files in a log dir, and following one would
read or write outside it."""

from libc.errno cimport EINTR, EIO, errno
from libc.stdint cimport int64_t
from posix.types cimport off_t
from posix.uio cimport iovec, pwritev
from posix.unistd cimport pread, pwrite


cdef extern from "Python.h":
    bytes PyUnicode_EncodeFSDefault(object)
    object PyOS_FSPath(object)

cdef extern from "<limits.h>" nogil:
    enum: IOV_MAX

cdef extern from "<fcntl.h>" nogil:
    # Linux's; Cython's posix.fcntl does not declare it.
    enum: O_NOFOLLOW

cdef extern from *:
    """
    #include <errno.h>
    #include <fcntl.h>
    /* Reserve the blocks of bytes [offset, offset + length) of fd without changing its size (Linux's fallocate
       with FALLOC_FL_KEEP_SIZE): 0 or the errno; ENOSYS where the call does not exist. */
    static inline int logmgr_reserve_blocks(int fd, long long offset, long long length) {
    #if defined(__linux__) && defined(FALLOC_FL_KEEP_SIZE)
        return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length) == 0 ? 0 : errno;
    #else
        (void)fd; (void)offset; (void)length;
        return ENOSYS;
    #endif
    }
    """
    int reserve_blocks "logmgr_reserve_blocks"(int fd, long long offset, long long length) nogil


cdef inline int pread_full(int fd, void *buf, Py_ssize_t size, int64_t position, Py_ssize_t *got) noexcept nogil:
    """Read up to ``size`` bytes at ``position`` into ``buf`` (``got`` of them: short only at the end of the file),
    continuing after short reads; 0 or the errno."""
    cdef Py_ssize_t n
    got[0] = 0
    while got[0] < size:
        n = pread(fd, <char *>buf + got[0], <size_t>(size - got[0]), <off_t>(position + got[0]))
        if n < 0:
            if errno == EINTR:
                continue
            return errno
        if n == 0:
            break
        got[0] += n
    return 0


cdef inline int pwrite_full(int fd, const void *data, Py_ssize_t size, int64_t position) noexcept nogil:
    """Write all ``size`` bytes of ``data`` at ``position``, continuing after short writes; 0 or the errno."""
    cdef Py_ssize_t done = 0, n
    while done < size:
        n = pwrite(fd, <const char *>data + done, <size_t>(size - done), <off_t>(position + done))
        if n < 0:
            if errno == EINTR:
                continue
            return errno
        done += n
    return 0


cdef inline int pwritev_full(int fd, iovec *iov, Py_ssize_t count, int64_t position) noexcept nogil:
    """Write every byte of the ``count`` buffers of ``iov`` in order at ``position``, in ``pwritev`` calls of at
    most ``IOV_MAX`` buffers, continuing after short writes (which advance ``iov``'s entries: the array is
    consumed); 0 or the errno (``EIO`` for a call that wrote nothing of a non-empty request, which would never
    end)."""
    cdef Py_ssize_t first = 0
    cdef ssize_t n
    while first < count:
        if iov[first].iov_len == 0:
            first += 1
            continue
        n = pwritev(fd, iov + first, <int>min(count - first, <Py_ssize_t>IOV_MAX), <off_t>position)
        if n < 0:
            if errno == EINTR:
                continue
            return errno
        if n == 0:
            return EIO
        position += n
        while n > 0:
            if <size_t>n >= iov[first].iov_len:
                n -= <ssize_t>iov[first].iov_len
                first += 1
            else:
                iov[first].iov_base = <char *>iov[first].iov_base + n
                iov[first].iov_len -= <size_t>n
                n = 0
    return 0


cdef inline bytes encoded_path(path):
    """``os.fsencode(path)`` without its Python-level call (a path-like object's ``__fspath__``, a ``str`` encoded
    as the file system wants), refusing an embedded NUL byte: the C call would stop at it, naming another file
    (``os.open`` refuses it the same way)."""
    cdef object raw = PyOS_FSPath(path)
    cdef bytes encoded = PyUnicode_EncodeFSDefault(raw) if isinstance(raw, str) else <bytes?>raw
    if b"\0" in encoded:
        raise ValueError(f"embedded null byte in path {path!r}")
    return encoded
