/* CRC-32 by folding (carry-less multiplication over GF(2)). The checksum is M(x) * x^32 mod P for
 * the message polynomial M (bits in reflected order: the first byte's low bit is the highest
 * power) and P = x^32 + 0x04C11DB7, with the register started and ended inverted. A 128-bit block
 * X that stands D bits before a later block may be replaced by anything congruent to X * x^D
 * mod P added into that block: with X = A * x^64 + B (A the first 8 bytes), that is
 * A * (x^(D+63) mod P) * x + B * (x^(D-1) mod P) * x, two 64x32-bit carry-less products (the
 * extra x is how PCLMULQDQ's reflected product lands). Four blocks are folded 64 bytes ahead at a
 * time, then into one, and the last 16 bytes and the tail go through zlib. */
#include "parquet/page_crc.h"

#include <pthread.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool folding;
static uint64_t fold64_a, fold64_b, fold16_a, fold16_b; /* 512- and 128-bit distances */

/* x^n mod P, the coefficient of x^i in bit i. */
static uint32_t x_pow_mod(unsigned n) {
    uint64_t r = 1;
    for (unsigned i = 0; i < n; i++) {
        r <<= 1;
        if (r >> 32) r ^= 0x104C11DB7ull;
    }
    return (uint32_t)r;
}

/* A polynomial of degree < 64 in PCLMULQDQ's reflected order (x^i in bit 63 - i). */
static uint64_t reflected(uint64_t v) {
    uint64_t r = 0;
    for (int i = 0; i < 64; i++)
        if (v >> i & 1) r |= 1ull << (63 - i);
    return r;
}

static void init(void) {
    fold64_a = reflected(x_pow_mod(512 + 63));
    fold64_b = reflected(x_pow_mod(512 - 1));
    fold16_a = reflected(x_pow_mod(128 + 63));
    fold16_b = reflected(x_pow_mod(128 - 1));
#if defined(__x86_64__)
    folding = __builtin_cpu_supports("pclmul");
#endif
}

bool pq_crc32_folding_available(void) {
    pthread_once(&init_once, init);
    return folding;
}

uint32_t pq_crc32_zlib(const void *data, size_t size) {
    uLong c = crc32(0, Z_NULL, 0);
    const Bytef *p = data;
    for (; size > 0x40000000; p += 0x40000000, size -= 0x40000000) c = crc32(c, p, 0x40000000);
    return (uint32_t)crc32(c, p, (uInt)size);
}

#if defined(__x86_64__)
#define TARGET_PCLMUL __attribute__((target("pclmul,sse2")))

TARGET_PCLMUL static inline __m128i fold(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

TARGET_PCLMUL static inline __m128i load(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }

TARGET_PCLMUL static uint32_t folded_run(const uint8_t *p, size_t size) {
    const __m128i k64 = _mm_set_epi64x((long long)fold64_b, (long long)fold64_a);
    const __m128i k16 = _mm_set_epi64x((long long)fold16_b, (long long)fold16_a);
    /* the inverted start register, added into the first 4 bytes */
    __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(-1)), x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
    for (p += 64, size -= 64; size >= 64; p += 64, size -= 64) {
        x0 = _mm_xor_si128(fold(x0, k64), load(p));
        x1 = _mm_xor_si128(fold(x1, k64), load(p + 16));
        x2 = _mm_xor_si128(fold(x2, k64), load(p + 32));
        x3 = _mm_xor_si128(fold(x3, k64), load(p + 48));
    }
    x1 = _mm_xor_si128(fold(x0, k16), x1);
    x2 = _mm_xor_si128(fold(x1, k16), x2);
    x3 = _mm_xor_si128(fold(x2, k16), x3);
    for (; size >= 16; p += 16, size -= 16) x3 = _mm_xor_si128(fold(x3, k16), load(p));
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)last, x3);
    /* zlib's register starts inverted: 0xffffffff makes it start at zero, as the fold assumes */
    uLong c = crc32(0xffffffffUL, last, 16);
    return (uint32_t)crc32(c, p, (uInt)size);
}
#endif

uint32_t pq_crc32_folded(const void *data, size_t size) {
#if defined(__x86_64__)
    if (pq_crc32_folding_available() && size >= 64) return folded_run(data, size);
#endif
    return pq_crc32_zlib(data, size);
}

uint32_t pq_crc32(const void *data, size_t size) { return pq_crc32_folded(data, size); }
