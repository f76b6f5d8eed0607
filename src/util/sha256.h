/* SHA-256 (FIPS 180-4): file checksums, dataset keys and Parquet column checksums. */
#ifndef FTL_UTIL_SHA256_H
#define FTL_UTIL_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ftl_sha256 {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_used;
} ftl_sha256;

void ftl_sha256_init(ftl_sha256 *h);
void ftl_sha256_update(ftl_sha256 *h, const void *data, size_t size);
void ftl_sha256_final(ftl_sha256 *h, uint8_t digest[32]);
/* Lowercase hex of the SHA-256 of a NUL-terminated string (cache keys). */
void ftl_sha256_hex_of_string(const char *text, char out[65]);
/* Whether the x86 SHA extensions are used where the CPU has them (the default; off: the portable
 * rounds, which the tests compare them with). Returns whether they are in use now. */
bool ftl_sha256_use_extensions(bool on);
/* Lowercase hex of a digest into out[65]. */
void ftl_sha256_hex(const uint8_t digest[32], char out[65]);

#endif
