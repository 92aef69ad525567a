/* CRC-32 (the IEEE / zlib / java.util.zip.CRC32 polynomial, reflected 0xEDB88320) for the
 * compiled fast path.
 *
 * Two implementations of one function, chosen once at import:
 *   - carry-less multiplication folding (x86-64 PCLMULQDQ): the buffer is folded 64 bytes
 *     at a time in four 128-bit lanes, the lanes are folded into one, then 16 bytes at a
 *     time, and the last 128 bits are reduced to 32 with a Barrett reduction.  The fold
 *     constants are x^(k) mod P for the distances involved (Intel's white paper "Fast CRC
 *     Computation for Generic Polynomials Using PCLMULQDQ Instruction", 2009);
 *   - slicing-by-8 tables, built at first use, for short tails and machines without
 *     PCLMULQDQ.
 * tests/unit/test_native_crc.py proves both equal to zlib.crc32 and crcmod's model.
 *
 * rmq_crc32(crc, buf, len) continues a running CRC like zlib's crc32(); RocketMQ's body
 * CRC is rmq_crc32(0, body, len) & 0x7FFFFFFF.
 */
#ifndef RMQ_CRC32_H
#define RMQ_CRC32_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t rmq_crc_table[8][256];
static int rmq_crc_ready = 0;
static int rmq_crc_use_clmul = 0;

static void rmq_crc_init(void)
{
    if (rmq_crc_ready)
        return;
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        rmq_crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = rmq_crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = rmq_crc_table[0][c & 0xFF] ^ (c >> 8);
            rmq_crc_table[t][n] = c;
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    rmq_crc_use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    rmq_crc_ready = 1;
}

/* the table walk on an inverted register (no pre/post inversion here) */
static uint32_t rmq_crc_tables(uint32_t c, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = rmq_crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = rmq_crc_table[7][lo & 0xFF] ^ rmq_crc_table[6][(lo >> 8) & 0xFF] ^
            rmq_crc_table[5][(lo >> 16) & 0xFF] ^ rmq_crc_table[4][lo >> 24] ^
            rmq_crc_table[3][hi & 0xFF] ^ rmq_crc_table[2][(hi >> 8) & 0xFF] ^
            rmq_crc_table[1][(hi >> 16) & 0xFF] ^ rmq_crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
#endif
    while (n--)
        c = rmq_crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define RMQ_CLMUL __attribute__((target("pclmul,sse4.1")))

/* fold one 128-bit lane forward by the distance the constant pair k encodes, adding `next` */
RMQ_CLMUL static inline __m128i rmq_fold(__m128i lane, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(lane, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(lane, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* n is a multiple of 16 and at least 64; c is the inverted register */
RMQ_CLMUL static uint32_t rmq_crc_clmul(uint32_t c, const unsigned char *p, size_t n)
{
    /* x^(4*128+64) and x^(4*128) mod P (bit-reflected, shifted): folds 512 bits ahead */
    const __m128i k_512 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    /* x^(128+64) and x^128 mod P: folds 128 bits ahead */
    const __m128i k_128 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k_64 = _mm_set_epi64x(0, 0x0163cd6124LL);
    /* Barrett: P' = x^64 / P and P itself (bit-reflected) */
    const __m128i barrett = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);

    __m128i a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));
    __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i d = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    n -= 64;
    while (n >= 64) {
        a = rmq_fold(a, k_512, _mm_loadu_si128((const __m128i *)p));
        b = rmq_fold(b, k_512, _mm_loadu_si128((const __m128i *)(p + 16)));
        d = rmq_fold(d, k_512, _mm_loadu_si128((const __m128i *)(p + 32)));
        e = rmq_fold(e, k_512, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    a = rmq_fold(a, k_128, b);
    a = rmq_fold(a, k_128, d);
    a = rmq_fold(a, k_128, e);
    while (n >= 16) {
        a = rmq_fold(a, k_128, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 -> 96 -> 64 bits */
    __m128i t = _mm_clmulepi64_si128(a, k_128, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    t = _mm_srli_si128(a, 4);
    a = _mm_clmulepi64_si128(_mm_and_si128(a, low32), k_64, 0x00);
    a = _mm_xor_si128(a, t);
    /* Barrett reduction to 32 bits */
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}
#endif

/* zlib's crc32(crc, buf, len): continue the CRC `crc` over `len` bytes */
static uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
    uint32_t c = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (rmq_crc_use_clmul && n >= 64) {
        size_t bulk = n & ~(size_t)15;
        c = rmq_crc_clmul(c, p, bulk);
        p += bulk;
        n -= bulk;
    }
#endif
    c = rmq_crc_tables(c, p, n);
    return ~c;
}

#endif
