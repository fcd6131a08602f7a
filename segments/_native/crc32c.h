/* CRC-32C (Castagnoli), the checksum of Kafka's v2 record batches and producer snapshots.
 *
 * Two implementations behind one entry point, chosen once at start-up:
 *  - x86-64 with SSE4.2: the CRC32 instruction on three independent 8-byte streams at a time (the instruction's
 *    latency is 3 cycles and its throughput 1 per cycle, so one stream would leave two thirds of it idle), the
 *    three partial CRCs joined by "shift by N zero bytes" tables (CRC is linear over GF(2): crc(A||B) =
 *    shift(crc(A), |B|) ^ crc(B) with a zero initial value for B);
 *  - elsewhere: table-driven slicing by 8.
 * Both are pure C over a pointer and a length and touch no Python object, so callers run them without the GIL.
 */
#ifndef LOGMGR_CRC32C_H
#define LOGMGR_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LOGMGR_CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */
#define LOGMGR_CRC32C_LONG 8192u       /* stream length of the long 3-way pass */
#define LOGMGR_CRC32C_SHORT 256u       /* stream length of the short 3-way pass */

static uint32_t logmgr_crc32c_table[8][256];
static uint32_t logmgr_crc32c_long[4][256];
static uint32_t logmgr_crc32c_short[4][256];
static int logmgr_crc32c_hw = 0;

/* mat (a 32x32 GF(2) matrix, one column per word) times vec. */
static uint32_t logmgr_gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void logmgr_gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = logmgr_gf2_times(mat, mat[n]);
}

/* Tables applying the operator "append len zero bytes" (len a power of two) to a CRC register, 8 bits a lookup. */
static void logmgr_crc32c_zeros(uint32_t zeros[4][256], size_t len) {
    uint32_t op[32], sq[32];
    /* op = one zero bit: shift right, xor the polynomial when the low bit falls out. */
    op[0] = LOGMGR_CRC32C_POLY;
    for (int n = 1; n < 32; n++) op[n] = 1u << (n - 1);
    /* Squaring doubles the number of zero bits: 3 squarings make a byte, log2(len) more make len bytes. */
    for (size_t bits = 1; bits < 8 * len; bits <<= 1) {
        logmgr_gf2_square(sq, op);
        memcpy(op, sq, sizeof(op));
    }
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = logmgr_gf2_times(op, n);
        zeros[1][n] = logmgr_gf2_times(op, n << 8);
        zeros[2][n] = logmgr_gf2_times(op, n << 16);
        zeros[3][n] = logmgr_gf2_times(op, n << 24);
    }
}

static inline uint32_t logmgr_crc32c_shift(uint32_t zeros[4][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

static uint32_t logmgr_crc32c_sw(uint32_t crc, const unsigned char *next, size_t len) {
    crc = ~crc;
    while (len && ((uintptr_t)next & 7)) {
        crc = logmgr_crc32c_table[0][(crc ^ *next++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        word ^= crc;
        crc = logmgr_crc32c_table[7][word & 0xff] ^ logmgr_crc32c_table[6][(word >> 8) & 0xff] ^
              logmgr_crc32c_table[5][(word >> 16) & 0xff] ^ logmgr_crc32c_table[4][(word >> 24) & 0xff] ^
              logmgr_crc32c_table[3][(word >> 32) & 0xff] ^ logmgr_crc32c_table[2][(word >> 40) & 0xff] ^
              logmgr_crc32c_table[1][(word >> 48) & 0xff] ^ logmgr_crc32c_table[0][word >> 56];
        next += 8;
        len -= 8;
    }
    while (len--) crc = logmgr_crc32c_table[0][(crc ^ *next++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOGMGR_CRC32C_HAVE_HW 1
/* One pass over three consecutive streams of stream bytes at next (a multiple of 8), joined into crc0. */
__attribute__((target("sse4.2"))) static inline uint64_t logmgr_crc32c_hw_3way(uint64_t crc0,
                                                                              const unsigned char *next,
                                                                              size_t stream,
                                                                              uint32_t zeros[4][256]) {
    uint64_t crc1 = 0, crc2 = 0;
    const unsigned char *end = next + stream;
    do {
        uint64_t a, b, c;
        memcpy(&a, next, 8);
        memcpy(&b, next + stream, 8);
        memcpy(&c, next + 2 * stream, 8);
        crc0 = __builtin_ia32_crc32di(crc0, a);
        crc1 = __builtin_ia32_crc32di(crc1, b);
        crc2 = __builtin_ia32_crc32di(crc2, c);
        next += 8;
    } while (next < end);
    crc0 = logmgr_crc32c_shift(zeros, (uint32_t)crc0) ^ crc1;
    return logmgr_crc32c_shift(zeros, (uint32_t)crc0) ^ crc2;
}

__attribute__((target("sse4.2"))) static uint32_t logmgr_crc32c_hw_run(uint32_t crc, const unsigned char *next,
                                                                        size_t len) {
    uint64_t crc0 = ~crc;
    while (len && ((uintptr_t)next & 7)) {
        crc0 = __builtin_ia32_crc32qi((uint32_t)crc0, *next++);
        len--;
    }
    /* Three streams of LONG bytes, then of SHORT bytes: the streams' CRCs are independent, so the processor
     * overlaps them; each pass ends by shifting crc0 over the next stream and folding it in. */
    while (len >= 3 * LOGMGR_CRC32C_LONG) {
        crc0 = logmgr_crc32c_hw_3way(crc0, next, LOGMGR_CRC32C_LONG, logmgr_crc32c_long);
        next += 3 * LOGMGR_CRC32C_LONG;
        len -= 3 * LOGMGR_CRC32C_LONG;
    }
    while (len >= 3 * LOGMGR_CRC32C_SHORT) {
        crc0 = logmgr_crc32c_hw_3way(crc0, next, LOGMGR_CRC32C_SHORT, logmgr_crc32c_short);
        next += 3 * LOGMGR_CRC32C_SHORT;
        len -= 3 * LOGMGR_CRC32C_SHORT;
    }
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
        crc0 = __builtin_ia32_crc32di(crc0, word);
        next += 8;
        len -= 8;
    }
    while (len--) crc0 = __builtin_ia32_crc32qi((uint32_t)crc0, *next++);
    return ~(uint32_t)crc0;
}
#endif

/* Fill the tables and pick the implementation; called once when the extension module is imported (under the
 * GIL, before any caller can run a CRC). */
static void logmgr_crc32c_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ LOGMGR_CRC32C_POLY : crc >> 1;
        logmgr_crc32c_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = logmgr_crc32c_table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = logmgr_crc32c_table[0][crc & 0xff] ^ (crc >> 8);
            logmgr_crc32c_table[k][n] = crc;
        }
    }
    logmgr_crc32c_zeros(logmgr_crc32c_long, LOGMGR_CRC32C_LONG);
    logmgr_crc32c_zeros(logmgr_crc32c_short, LOGMGR_CRC32C_SHORT);
#ifdef LOGMGR_CRC32C_HAVE_HW
    __builtin_cpu_init();
    logmgr_crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* CRC-32C of len bytes at data, continuing from crc (0 to start). Needs no GIL. */
static inline uint32_t logmgr_crc32c(uint32_t crc, const unsigned char *data, size_t len) {
#ifdef LOGMGR_CRC32C_HAVE_HW
    if (logmgr_crc32c_hw) return logmgr_crc32c_hw_run(crc, data, len);
#endif
    return logmgr_crc32c_sw(crc, data, len);
}

/* The portable implementation, for tests comparing both on the same bytes. */
static inline uint32_t logmgr_crc32c_portable(uint32_t crc, const unsigned char *data, size_t len) {
    return logmgr_crc32c_sw(crc, data, len);
}

static inline int logmgr_crc32c_uses_hardware(void) { return logmgr_crc32c_hw; }

#endif
