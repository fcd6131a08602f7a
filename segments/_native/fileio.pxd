# cython: language_level=3
"""Descriptor I/O shared by the compiled modules: whole-range ``pread``/``pwrite``/``pwritev`` loops (errno results,
no GIL, no Python object), block reservation past a file's end (``reserve_blocks``), a path's file-system bytes
for ``open(2)``, and small whole files compared and written only where they differ (``write_if_different_at``, the
``OSError`` of a failure from ``file_failure``). Files are opened with ``O_NOFOLLOW``: Kafka never links files in a
log dir, and following one would read or write outside it."""

from libc.errno cimport EINTR, EIO, ELOOP, errno
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, strerror
from posix.fcntl cimport O_CLOEXEC, O_CREAT, O_RDWR, open
from posix.stat cimport S_ISREG, fstat, struct_stat
from posix.types cimport off_t
from posix.uio cimport iovec, pwritev
from posix.unistd cimport close, ftruncate, pread, pwrite


cdef extern from "Python.h":
    bytes PyUnicode_EncodeFSDefault(object)
    object PyUnicode_DecodeFSDefault(const char *)
    object PyUnicode_DecodeLocale(const char *, const char *)
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


cdef enum FileStep:
    # Where a call on a small whole file failed (errno in FileOutcome.error); FILE_OK when it did not.
    FILE_OK = 0
    FILE_OPEN
    FILE_STAT
    FILE_READ
    FILE_WRITE
    FILE_TRUNCATE
    FILE_CLOSE
    FILE_MEMORY


cdef struct FileOutcome:
    FileStep step
    int error
    # The file starts with the bytes compared (``found`` bytes there: read, up to one more than compared, or the
    # length fstat gave); ``asked`` the bytes a read asked for (named by a read's failure).
    bint starts_with
    Py_ssize_t found
    Py_ssize_t asked


cdef inline void compare_file(int fd, const char *data, Py_ssize_t size, bint require_regular,
                              FileOutcome *out) noexcept nogil:
    """Whether the open file ``fd`` starts with ``data`` (``out.starts_with``, ``out.found`` the bytes there: the
    file holds exactly ``data`` when that is ``size``); ``out.step`` says which call failed.

    With ``require_regular`` (a file opened read-only, which may be anything) one ``fstat`` tells a file that is not
    a regular one (not a match) and gives the length: a length other than ``size`` is no match, with nothing read,
    and an equal one is read in one ``pread`` of exactly ``size`` bytes. Otherwise (a file opened for writing: a
    FIFO or a device fails the read, as it would the write) one read of ``size + 1`` bytes, the byte more telling a
    longer file apart; a shorter file costs a second ``pread`` confirming its end."""
    cdef struct_stat info
    cdef char *buffer
    cdef Py_ssize_t got
    cdef Py_ssize_t wanted = size + 1
    out.starts_with = False
    out.found = 0
    if require_regular:
        if fstat(fd, &info) != 0:
            out.step = FILE_STAT
            out.error = errno
            return
        if not S_ISREG(info.st_mode):
            return
        out.found = <Py_ssize_t>info.st_size
        if info.st_size != size:
            return
        if size == 0:
            out.starts_with = True
            return
        wanted = size
    out.asked = wanted
    buffer = <char *>malloc(<size_t>wanted)
    if buffer == NULL:
        out.step = FILE_MEMORY
        return
    out.error = pread_full(fd, buffer, wanted, 0, &got)
    if out.error != 0:
        out.step = FILE_READ
    else:
        out.found = got
        out.starts_with = got >= size and memcmp(buffer, data, <size_t>size) == 0
    free(buffer)


cdef inline void write_if_different_at(const char *path, const char *data, Py_ssize_t size,
                                       FileOutcome *out) noexcept nogil:
    """Make the file at ``path`` (created if missing, never through a link) hold exactly ``data``: compared first
    (:func:`compare_file`), written only where it differs, a longer file cut to ``size``. A file that already holds
    the bytes is not modified at all (no dirty page, no new modification time). ``out.step`` says which call
    failed (``FILE_OK``: none)."""
    cdef int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o666)
    out.step = FILE_OK
    if fd < 0:
        out.step = FILE_OPEN
        out.error = errno
        return
    compare_file(fd, data, size, False, out)
    if out.step == FILE_OK and not out.starts_with:
        out.error = pwrite_full(fd, data, size, 0)
        if out.error != 0:
            out.step = FILE_WRITE
    if out.step == FILE_OK and out.found > size:
        # A longer file (an active segment's preallocated index): cut to the bytes.
        if ftruncate(fd, <off_t>size) != 0:
            out.step = FILE_TRUNCATE
            out.error = errno
    if close(fd) != 0 and out.step == FILE_OK:
        out.step = FILE_CLOSE
        out.error = errno


cdef inline object file_failure(FileOutcome *out, const char *path, Py_ssize_t size):
    """The exception of a failed call of ``out`` on the file at ``path`` (its file-system bytes): an ``OSError``
    naming the file (and the action, for calls on a descriptor), as ``segments.file_records.located_error`` words
    it; ``MemoryError`` when no compare buffer could be had."""
    cdef int error = out.error
    name = PyUnicode_DecodeFSDefault(path)
    if out.step == FILE_MEMORY:
        return MemoryError(f"{name}: {size + 1} bytes to compare")
    if out.step == FILE_OPEN and error == ELOOP:
        return OSError(ELOOP, "is a symbolic link, which is never followed", name)
    message = PyUnicode_DecodeLocale(strerror(error), "surrogateescape")
    if out.step == FILE_OPEN or out.step == FILE_CLOSE:
        return OSError(error, message, name)
    if out.step == FILE_STAT:
        action = "stat"
    elif out.step == FILE_READ:
        action = f"read of {out.asked} bytes"
    elif out.step == FILE_WRITE:
        action = f"write of {size} bytes"
    else:
        action = f"truncation to {size} bytes"
    return OSError(error, f"{message} ({action})", name)
