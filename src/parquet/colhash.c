/* "interop colhash v1": the column checksum the interop tools compute (see the header). */
#include "ftl/parquet.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/sha256.h"

#include <stdlib.h>
#include <string.h>

struct ftl_parquet_colhash {
    ftl_parquet_type type;
    ftl_sha256 values, nulls;
    int64_t rows, count, null_count;
    bool finished;
    char sha256[65], nulls_sha256[65]; /* the result, once final */
};

ftl_status ftl_parquet_colhash_init(ftl_parquet_colhash **out, ftl_parquet_type type) {
    *out = NULL;
    if (type == FTL_PARQUET_INT96 || (int)type < 0 || (int)type > FTL_PARQUET_FIXED_LEN_BYTE_ARRAY)
        return ftl_fail(FTL_E_UNSUPPORTED, "colhash v1 is not defined for %s columns", ftl_parquet_type_name(type));
    ftl_parquet_colhash *h = ftl_xcalloc(1, sizeof *h);
    h->type = type;
    ftl_sha256_init(&h->values);
    ftl_sha256_init(&h->nulls);
    *out = h;
    return FTL_OK;
}

static void put_u32(ftl_sha256 *s, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    ftl_sha256_update(s, b, 4);
}

ftl_status ftl_parquet_colhash_update(ftl_parquet_colhash *h, const ftl_parquet_column_values *v) {
    if (h->finished) return ftl_fail(FTL_E_INVALID_ARG, "colhash updated after final");
    if (v->type != h->type)
        return ftl_fail(FTL_E_INVALID_ARG, "colhash of a %s column fed %s values", ftl_parquet_type_name(h->type), ftl_parquet_type_name(v->type));
    bool packed = h->type != FTL_PARQUET_BYTE_ARRAY && h->type != FTL_PARQUET_FIXED_LEN_BYTE_ARRAY && h->type != FTL_PARQUET_BOOLEAN;
    if (packed && !v->validity) { /* fixed-width numbers are stored exactly as colhash serialises them */
        ftl_sha256_update(&h->values, v->values, (size_t)v->rows * (size_t)v->fixed_length);
        h->count += v->rows;
        h->rows += v->rows;
        return FTL_OK;
    }
    for (int64_t r = 0; r < v->rows; r++) {
        if (v->validity && !v->validity[r]) {
            uint64_t row = (uint64_t)(h->rows + r);
            uint8_t b[8];
            for (int i = 0; i < 8; i++) b[i] = (uint8_t)(row >> (8 * i));
            ftl_sha256_update(&h->nulls, b, 8);
            h->null_count++;
            continue;
        }
        h->count++;
        if (h->type == FTL_PARQUET_BYTE_ARRAY) {
            int64_t len = v->offsets[r + 1] - v->offsets[r];
            put_u32(&h->values, (uint32_t)len);
            ftl_sha256_update(&h->values, v->data + v->offsets[r], (size_t)len);
        } else {
            const uint8_t *p = (const uint8_t *)v->values + (size_t)r * (size_t)v->fixed_length;
            if (h->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY) put_u32(&h->values, (uint32_t)v->fixed_length);
            if (h->type == FTL_PARQUET_BOOLEAN) {
                uint8_t b = p[0] ? 1 : 0;
                ftl_sha256_update(&h->values, &b, 1);
            } else {
                ftl_sha256_update(&h->values, p, (size_t)v->fixed_length); /* stored little-endian already */
            }
        }
    }
    h->rows += v->rows;
    return FTL_OK;
}

void ftl_parquet_colhash_final(ftl_parquet_colhash *h, ftl_parquet_colhash_result *out) {
    if (!h->finished) {
        uint8_t d[32];
        h->finished = true;
        ftl_sha256_final(&h->values, d);
        ftl_sha256_hex(d, h->sha256);
        if (h->null_count) {
            ftl_sha256_final(&h->nulls, d);
            ftl_sha256_hex(d, h->nulls_sha256);
        }
    }
    memset(out, 0, sizeof *out);
    memcpy(out->sha256, h->sha256, sizeof out->sha256);
    memcpy(out->nulls_sha256, h->nulls_sha256, sizeof out->nulls_sha256);
    out->count = h->count;
    out->null_count = h->null_count;
}

void ftl_parquet_colhash_free(ftl_parquet_colhash *h) { free(h); }
