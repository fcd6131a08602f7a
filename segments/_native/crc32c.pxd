# Declarations of crc32c.h for the kernels that cimport it.
from libc.stdint cimport uint32_t

cdef extern from "crc32c.h" nogil:
    void logmgr_crc32c_init()
    uint32_t logmgr_crc32c(uint32_t crc, const unsigned char *data, size_t length)
    uint32_t logmgr_crc32c_portable(uint32_t crc, const unsigned char *data, size_t length)
    int logmgr_crc32c_uses_hardware()
