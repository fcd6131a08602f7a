/* CRC-32C (Castagnoli), the checksum of Kafka's v2 record batches and producer snapshots.
 *
 * Three kernels behind one entry point, the fastest the processor runs chosen once at start-up:
 *  - x86-64 with AVX-512 and VPCLMULQDQ ("fold"), for 256 bytes and more: carry-less multiplication folds the
 *    input, 16 bytes per 128-bit lane and 256 bytes per step, into one 128-bit remainder that the CRC32
 *    instruction finishes. Up to four times the CRC32 instruction's rate, which is capped at 8 bytes a cycle;
 *  - x86-64 with SSE4.2 ("sse4.2"): the CRC32 instruction on three independent 8-byte streams at a time (the
 *    instruction's latency is 3 cycles and its throughput 1 per cycle, so one stream would leave two thirds of it
 *    idle), the three partial CRCs joined by "shift by N zero bytes" tables (CRC is linear over GF(2):
 *    crc(A||B) = shift(crc(A), |B|) ^ crc(B) with a zero initial value for B);
 *  - elsewhere ("portable"): table-driven slicing by 8.
 * All are pure C over a pointer and a length and touch no Python object, so callers run them without the GIL.
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

/* The kernels, slowest first: logmgr_crc32c_kernel is the fastest this processor runs. */
enum { LOGMGR_CRC32C_PORTABLE = 0, LOGMGR_CRC32C_SSE42 = 1, LOGMGR_CRC32C_FOLD = 2 };
static int logmgr_crc32c_kernel = LOGMGR_CRC32C_PORTABLE;

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

#include <immintrin.h>
#define LOGMGR_CRC32C_FOLD_BYTES 256u /* the fold kernel's least length: its first step loads 4 x 64 bytes */
#define LOGMGR_CRC32C_CLMUL "avx512f,vpclmulqdq,pclmul,sse4.2"

/* The fold constants: for a distance of D bits, the pair (x^(D+63) mod P, x^(D-1) mod P), each bit-reflected
 * into the upper half of a 64-bit word (logmgr_crc32c_fold_init).
 *
 * Why: the input is read 16 bytes at a time as little-endian 128-bit words, in which bit 0 is the message's first
 * bit, its highest-degree term (the reflected convention). A word A = H.x^64 + L (H its low 64 bits) followed by
 * D bits of input contributes as A.x^D = H.x^(D+64) + L.x^D, congruent modulo P to H.k_H + L.k_L with k_H =
 * x^(D+64) mod P and k_L = x^D mod P, of degree < 96: it is added (XOR) to the word that starts D bits later.
 * On reflected operands the carry-less product comes out one degree up (reflecting over 127 bits, not 128), so
 * the constants are taken one degree down. A finished fold leaves one word W at the input's last whole 16
 * bytes; the CRC of the input is then the CRC register run from 0 over W's bytes and the tail, with the
 * caller's register (~crc) added to the input's first 4 bytes, as the register's initial value is. */
enum { LOGMGR_FOLD_128 = 0, LOGMGR_FOLD_256, LOGMGR_FOLD_384, LOGMGR_FOLD_512, LOGMGR_FOLD_2048, LOGMGR_FOLDS };
static uint64_t logmgr_crc32c_fold_k[LOGMGR_FOLDS][2]; /* [distance][0: k_H for the low half, 1: k_L] */

/* x^n mod P in the normal (unreflected) convention, bit i the coefficient of x^i. */
static uint32_t logmgr_crc32c_xpow(unsigned n) {
    uint64_t r = 1;
    while (n--) {
        r <<= 1;
        if (r >> 32) r ^= 0x11edc6f41u; /* P, unreflected, with its x^32 term */
    }
    return (uint32_t)r;
}

/* A degree < 32 polynomial reflected over 64 bits: x^i at bit 63 - i. */
static uint64_t logmgr_crc32c_reflect64(uint32_t v) {
    uint64_t r = 0;
    for (int i = 0; i < 32; i++)
        if (v >> i & 1) r |= 1ull << (63 - i);
    return r;
}

static void logmgr_crc32c_fold_init(void) {
    static const unsigned bits[LOGMGR_FOLDS] = {128, 256, 384, 512, 2048};
    for (int d = 0; d < LOGMGR_FOLDS; d++) {
        logmgr_crc32c_fold_k[d][0] = logmgr_crc32c_reflect64(logmgr_crc32c_xpow(bits[d] + 63));
        logmgr_crc32c_fold_k[d][1] = logmgr_crc32c_reflect64(logmgr_crc32c_xpow(bits[d] - 1));
    }
}

__attribute__((target(LOGMGR_CRC32C_CLMUL))) static inline __m512i logmgr_fold512(__m512i x, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     next, 0x96 /* a ^ b ^ c */);
}

__attribute__((target(LOGMGR_CRC32C_CLMUL))) static inline __m128i logmgr_fold128(__m128i x, int distance) {
    __m128i k = _mm_set_epi64x((long long)logmgr_crc32c_fold_k[distance][1],
                               (long long)logmgr_crc32c_fold_k[distance][0]);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target(LOGMGR_CRC32C_CLMUL))) static inline __m512i logmgr_fold_k512(int distance) {
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)logmgr_crc32c_fold_k[distance][1],
                                                 (long long)logmgr_crc32c_fold_k[distance][0]));
}

/* len >= LOGMGR_CRC32C_FOLD_BYTES. */
__attribute__((target(LOGMGR_CRC32C_CLMUL))) static uint32_t logmgr_crc32c_fold_run(uint32_t crc,
                                                                                   const unsigned char *next,
                                                                                   size_t len) {
    /* Four registers of four 16-byte lanes: each lane folds 2048 bits on per step, enough independent products
     * to cover the multiplier's latency. */
    __m512i x0 = _mm512_loadu_si512((const void *)next);
    __m512i x1 = _mm512_loadu_si512((const void *)(next + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(next + 128));
    __m512i x3 = _mm512_loadu_si512((const void *)(next + 192));
    x0 = _mm512_xor_si512(x0, _mm512_maskz_set1_epi32(1, (int)~crc));
    next += 256;
    len -= 256;
    __m512i k = logmgr_fold_k512(LOGMGR_FOLD_2048);
    while (len >= 256) {
        x0 = logmgr_fold512(x0, k, _mm512_loadu_si512((const void *)next));
        x1 = logmgr_fold512(x1, k, _mm512_loadu_si512((const void *)(next + 64)));
        x2 = logmgr_fold512(x2, k, _mm512_loadu_si512((const void *)(next + 128)));
        x3 = logmgr_fold512(x3, k, _mm512_loadu_si512((const void *)(next + 192)));
        next += 256;
        len -= 256;
    }
    /* The four registers into one (each 512 bits before the next), then 64 bytes a step. */
    k = logmgr_fold_k512(LOGMGR_FOLD_512);
    x1 = logmgr_fold512(x0, k, x1);
    x2 = logmgr_fold512(x1, k, x2);
    x0 = logmgr_fold512(x2, k, x3);
    while (len >= 64) {
        x0 = logmgr_fold512(x0, k, _mm512_loadu_si512((const void *)next));
        next += 64;
        len -= 64;
    }
    /* The four lanes into the last one, 384, 256 and 128 bits behind it, then 16 bytes a step. */
    __m128i w = _mm_xor_si128(
        _mm_xor_si128(logmgr_fold128(_mm512_castsi512_si128(x0), LOGMGR_FOLD_384),
                      logmgr_fold128(_mm512_extracti32x4_epi32(x0, 1), LOGMGR_FOLD_256)),
        _mm_xor_si128(logmgr_fold128(_mm512_extracti32x4_epi32(x0, 2), LOGMGR_FOLD_128),
                      _mm512_extracti32x4_epi32(x0, 3)));
    while (len >= 16) {
        w = _mm_xor_si128(logmgr_fold128(w, LOGMGR_FOLD_128), _mm_loadu_si128((const __m128i *)next));
        next += 16;
        len -= 16;
    }
    uint64_t reg = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(w));
    reg = __builtin_ia32_crc32di(reg, (uint64_t)_mm_extract_epi64(w, 1));
    if (len >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
        reg = __builtin_ia32_crc32di(reg, word);
        next += 8;
        len -= 8;
    }
    while (len--) reg = __builtin_ia32_crc32qi((uint32_t)reg, *next++);
    return ~(uint32_t)reg;
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
    logmgr_crc32c_fold_init();
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) logmgr_crc32c_kernel = LOGMGR_CRC32C_SSE42;
    if (logmgr_crc32c_kernel == LOGMGR_CRC32C_SSE42 && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq"))
        logmgr_crc32c_kernel = LOGMGR_CRC32C_FOLD;
#endif
}

/* CRC-32C of len bytes at data, continuing from crc (0 to start), with kernel (at most logmgr_crc32c_kernel: tests
 * run each kernel the processor has on the same bytes). Needs no GIL. */
static inline uint32_t logmgr_crc32c_by(int kernel, uint32_t crc, const unsigned char *data, size_t len) {
#ifdef LOGMGR_CRC32C_HAVE_HW
    if (kernel == LOGMGR_CRC32C_FOLD && len >= LOGMGR_CRC32C_FOLD_BYTES) return logmgr_crc32c_fold_run(crc, data, len);
    if (kernel != LOGMGR_CRC32C_PORTABLE) return logmgr_crc32c_hw_run(crc, data, len);
#else
    (void)kernel;
#endif
    return logmgr_crc32c_sw(crc, data, len);
}

/* CRC-32C of len bytes at data, continuing from crc (0 to start), on the fastest kernel. Needs no GIL. */
static inline uint32_t logmgr_crc32c(uint32_t crc, const unsigned char *data, size_t len) {
    return logmgr_crc32c_by(logmgr_crc32c_kernel, crc, data, len);
}

#endif
