/* CRC-32C of many independent buffers (the batches of a window), three at a time.
 *
 * A batch of a few KiB is too short for crc32c.h's long 3-way pass and pays the "shift by N zero bytes" fold of
 * the short pass every 768 bytes. Three *different* batches are independent streams with nothing to fold: their
 * common length runs through the CRC32 instruction interleaved (latency 3, throughput 1 per cycle), then each
 * finishes alone. A buffer the fold kernel takes (256 bytes and more) runs alone: one fold pass outruns three
 * interleaved CRC32 streams. Without SSE4.2 each buffer goes through logmgr_crc32c.
 */
#ifndef LOGMGR_CRC32C_BATCHES_H
#define LOGMGR_CRC32C_BATCHES_H

#include "crc32c.h"

#ifdef LOGMGR_CRC32C_HAVE_HW
__attribute__((target("sse4.2"))) static void logmgr_crc32c_hw_three(const unsigned char *const *data,
                                                                     const size_t *len, uint32_t *out) {
    const unsigned char *a = data[0], *b = data[1], *c = data[2];
    size_t common = len[0] < len[1] ? len[0] : len[1];
    if (len[2] < common) common = len[2];
    common &= ~(size_t)7;
    uint64_t ca = 0xffffffffu, cb = 0xffffffffu, cc = 0xffffffffu;
    for (size_t k = 0; k < common; k += 8) {
        uint64_t x, y, z;
        memcpy(&x, a + k, 8);
        memcpy(&y, b + k, 8);
        memcpy(&z, c + k, 8);
        ca = __builtin_ia32_crc32di(ca, x);
        cb = __builtin_ia32_crc32di(cb, y);
        cc = __builtin_ia32_crc32di(cc, z);
    }
    /* logmgr_crc32c continues from a finished CRC: the register inverted back. */
    out[0] = logmgr_crc32c(~(uint32_t)ca, a + common, len[0] - common);
    out[1] = logmgr_crc32c(~(uint32_t)cb, b + common, len[1] - common);
    out[2] = logmgr_crc32c(~(uint32_t)cc, c + common, len[2] - common);
}
#endif

/* out[i] = CRC-32C of len[i] bytes at data[i], for i < n. Needs no GIL. */
static void logmgr_crc32c_many(const unsigned char *const *data, const size_t *len, uint32_t *out, int n) {
#ifdef LOGMGR_CRC32C_HAVE_HW
    if (logmgr_crc32c_kernel != LOGMGR_CRC32C_PORTABLE) {
        /* The buffers the fold kernel takes run alone; the others (all of them on SSE4.2 alone) three at a time. */
        size_t fold_from = logmgr_crc32c_kernel == LOGMGR_CRC32C_FOLD ? LOGMGR_CRC32C_FOLD_BYTES : SIZE_MAX;
        const unsigned char *three_data[3];
        size_t three_len[3];
        uint32_t three_out[3];
        int three_at[3];
        int waiting = 0;
        for (int i = 0; i < n; i++) {
            if (len[i] >= fold_from) {
                out[i] = logmgr_crc32c(0, data[i], len[i]);
                continue;
            }
            three_data[waiting] = data[i];
            three_len[waiting] = len[i];
            three_at[waiting++] = i;
            if (waiting == 3) {
                logmgr_crc32c_hw_three(three_data, three_len, three_out);
                for (int k = 0; k < 3; k++) out[three_at[k]] = three_out[k];
                waiting = 0;
            }
        }
        for (int k = 0; k < waiting; k++) out[three_at[k]] = logmgr_crc32c(0, three_data[k], three_len[k]);
        return;
    }
#endif
    for (int i = 0; i < n; i++) out[i] = logmgr_crc32c(0, data[i], len[i]);
}

#endif
