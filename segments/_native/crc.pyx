# cython: language_level=3, boundscheck=False, wraparound=False
"""CRC-32C for Python callers (batch CRCs, producer snapshots, the cleaner's rewritten batches)."""

from libc.stdint cimport uint32_t

from segments._native.crc32c cimport logmgr_crc32c, logmgr_crc32c_by, logmgr_crc32c_init, logmgr_crc32c_kernel

logmgr_crc32c_init()

# Below this many bytes the GIL is kept: releasing and retaking it costs more than the CRC.
cdef enum:
    _NOGIL_BYTES = 65536


def crc32c(data, unsigned int crc=0):
    """CRC-32C of ``data`` (any contiguous buffer), continuing from ``crc``. O(len(data)); the GIL is released
    for buffers of 64 KiB and more."""
    cdef const unsigned char[::1] view = data
    cdef size_t length = view.shape[0]
    cdef uint32_t result
    if length == 0:
        return crc
    if length >= _NOGIL_BYTES:
        with nogil:
            result = logmgr_crc32c(crc, &view[0], length)
    else:
        result = logmgr_crc32c(crc, &view[0], length)
    return result


# The kernels' names, by their number in crc32c.h (slowest first).
_KERNELS = ("portable", "sse4.2", "fold")


def kernel():
    """The name of the kernel :func:`crc32c` runs on: "fold" (AVX-512 VPCLMULQDQ, from 256 bytes), "sse4.2" (the
    CRC32 instruction) or "portable" (tables). O(1)."""
    return _KERNELS[logmgr_crc32c_kernel]


def kernels():
    """Every kernel this processor runs, fastest first: tests compare each with a reference. O(1)."""
    return _KERNELS[logmgr_crc32c_kernel::-1]


def crc32c_by(str name, data, unsigned int crc=0):
    """:func:`crc32c` on the kernel ``name`` (one of :func:`kernels`, else ``ValueError``). O(len(data))."""
    if name not in kernels():
        raise ValueError(f"CRC-32C kernel {name!r} is not one of this processor's {kernels()}")
    cdef const unsigned char[::1] view = data
    if view.shape[0] == 0:
        return crc
    return logmgr_crc32c_by(_KERNELS.index(name), crc, &view[0], view.shape[0])
