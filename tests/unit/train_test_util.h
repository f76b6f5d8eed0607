/* Helpers for the test_train_*.c unit tests: reference files from tests/ref/gen_train.sh. */
#ifndef FTL_TRAIN_TEST_UTIL_H
#define FTL_TRAIN_TEST_UTIL_H

#include "ftl.h"
#include "test.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <stdlib.h>

/* $BUILD/ref/train/<name>; caller frees. */
static inline char *train_ref_path(const char *name) {
    return ftl_format("%s/ref/train/%s", ftl_test_build_dir(), name);
}

/* Reads a reference file of exactly `bytes` bytes; NULL (and a recorded failure naming the
 * generator) if it is missing or has another size: missing references fail, never skip. */
static inline void *train_ref_read(const char *name, size_t bytes) {
    char *path = train_ref_path(name);
    uint8_t *data = NULL;
    size_t size = 0;
    if (ftl_read_file(path, &data, &size) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "reference %s missing (run tests/ref/gen_train.sh): %s", path, ftl_last_error());
        free(path);
        return NULL;
    }
    if (size != bytes) {
        ftl_test_fail(__FILE__, __LINE__, "reference %s has %zu bytes, expected %zu", path, size, bytes);
        free(data);
        free(path);
        return NULL;
    }
    free(path);
    return data;
}

/* Deterministic pseudo-random floats in [lo, hi) for synthetic data. */
static inline void train_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

/* CRC32C by its definition: reflected CRC-32 with polynomial 0x82F63B78, one bit at a time (the
 * independent reference for ftl's table and SSE4.2 paths). */
static inline uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int b = 0; b < 8; b++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

/* A safetensors file in memory: the 8-byte header length, `header`, then `data_len` zero bytes. */
static inline uint8_t *safetensors_make_file(const char *header, size_t data_len, size_t *size) {
    size_t n = strlen(header);
    *size = 8 + n + data_len;
    uint8_t *buf = calloc(1, *size);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    return buf;
}

#endif
