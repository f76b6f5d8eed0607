/* CRC-32C two ways: slicing-by-8 tables (any CPU) and the SSE4.2 crc32 instruction. The
 * instruction has a latency of 3 cycles and a throughput of 1, so the hardware path runs three
 * independent streams over neighbouring blocks and joins them with a table that shifts a CRC
 * register past one block of zero bytes (CRC is linear: crc(A B) = shift_|B|(crc(A)) ^ crc0(B)). */
#include "util/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

enum { POLY = 0x82F63B78u, STREAM_BLOCK = 4096 };

static uint32_t slice[8][256];         /* slice[k][b]: b's byte followed by k zero bytes */
static uint32_t block_shift[4][256];   /* the register shifted past STREAM_BLOCK zero bytes, per byte */
static bool hardware;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The raw register advanced over `count` zero bytes. */
static uint32_t zeros(uint32_t reg, size_t count) {
    while (count--) reg = slice[0][reg & 0xff] ^ (reg >> 8);
    return reg;
}

static void init_tables(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        slice[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++) slice[k][b] = (slice[k - 1][b] >> 8) ^ slice[0][slice[k - 1][b] & 0xff];
    uint32_t bit_image[32];
    for (int i = 0; i < 32; i++) bit_image[i] = zeros(1u << i, STREAM_BLOCK);
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if (b >> j & 1) v ^= bit_image[8 * k + j];
            block_shift[k][b] = v;
        }
#if defined(__x86_64__)
    hardware = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint64_t load_le64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 |
           (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

uint32_t ftl_crc32c_portable(uint32_t crc, const void *data, size_t size) {
    pthread_once(&init_once, init_tables);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    for (; size >= 8; p += 8, size -= 8) {
        uint64_t w = load_le64(p);
        uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
        c = slice[7][lo & 0xff] ^ slice[6][lo >> 8 & 0xff] ^ slice[5][lo >> 16 & 0xff] ^ slice[4][lo >> 24] ^
            slice[3][hi & 0xff] ^ slice[2][hi >> 8 & 0xff] ^ slice[1][hi >> 16 & 0xff] ^ slice[0][hi >> 24];
    }
    while (size--) c = slice[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

bool ftl_crc32c_hardware_available(void) {
    pthread_once(&init_once, init_tables);
    return hardware;
}

#if defined(__x86_64__)
static inline uint32_t shift_block(uint32_t reg) {
    return block_shift[0][reg & 0xff] ^ block_shift[1][reg >> 8 & 0xff] ^ block_shift[2][reg >> 16 & 0xff] ^
           block_shift[3][reg >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t hardware_run(uint32_t crc, const uint8_t *p, size_t size) {
    uint64_t c0 = ~crc;
    for (; size >= 3 * (size_t)STREAM_BLOCK; p += 3 * STREAM_BLOCK, size -= 3 * STREAM_BLOCK) {
        uint64_t c1 = 0, c2 = 0, w0, w1, w2;
        for (size_t i = 0; i < STREAM_BLOCK; i += 8) {
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + STREAM_BLOCK + i, 8);
            memcpy(&w2, p + 2 * STREAM_BLOCK + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c0 = shift_block(shift_block((uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
    }
    for (uint64_t w; size >= 8; p += 8, size -= 8) {
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
    }
    uint32_t c = (uint32_t)c0;
    while (size--) c = _mm_crc32_u8(c, *p++);
    return ~c;
}
#endif

uint32_t ftl_crc32c_hardware(uint32_t crc, const void *data, size_t size) {
#if defined(__x86_64__)
    if (ftl_crc32c_hardware_available()) return hardware_run(crc, data, size);
#endif
    return ftl_crc32c_portable(crc, data, size);
}

uint32_t ftl_crc32c(uint32_t crc, const void *data, size_t size) {
    return ftl_crc32c_hardware_available() ? ftl_crc32c_hardware(crc, data, size) : ftl_crc32c_portable(crc, data, size);
}
