# cython: language_level=3, boundscheck=False, wraparound=False
"""CRC-32C for Python callers (batch CRCs, producer snapshots, the cleaner's rewritten batches)."""

from libc.stdint cimport uint32_t

from segments._native.crc32c cimport (
    logmgr_crc32c,
    logmgr_crc32c_init,
    logmgr_crc32c_portable,
    logmgr_crc32c_uses_hardware,
)

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


def crc32c_portable(data, unsigned int crc=0):
    """The table-driven implementation whatever the processor: tests compare it with :func:`crc32c`. O(len)."""
    cdef const unsigned char[::1] view = data
    if view.shape[0] == 0:
        return crc
    return logmgr_crc32c_portable(crc, &view[0], view.shape[0])


def uses_hardware():
    """Whether :func:`crc32c` runs on the processor's CRC32 instruction. O(1)."""
    return bool(logmgr_crc32c_uses_hardware())
