# Declarations of crc32c.h for the kernels that cimport it.
from libc.stdint cimport uint32_t

cdef extern from "crc32c.h" nogil:
    void logmgr_crc32c_init()
    uint32_t logmgr_crc32c(uint32_t crc, const unsigned char *data, size_t length)
    uint32_t logmgr_crc32c_by(int kernel, uint32_t crc, const unsigned char *data, size_t length)
    int logmgr_crc32c_kernel
    enum:
        LOGMGR_CRC32C_PORTABLE
        LOGMGR_CRC32C_SSE42
        LOGMGR_CRC32C_FOLD
