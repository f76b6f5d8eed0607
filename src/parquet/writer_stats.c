/* Column chunk statistics for the writer: null count for every column, min/max for numbers
 * and booleans (PLAIN-encoded, in the type's order; NaN ignored). */
#include "parquet/format.h"

#include <math.h>
#include <string.h>

/* Folds the value of row r (type T, little-endian) into min/max; NaN never takes part. */
#define PQ_STATS_FOLD(T)                                                      \
    do {                                                                      \
        T v, lo, hi;                                                          \
        memcpy(&v, p + r * (int64_t)sizeof(T), sizeof(T));                    \
        if (v != v) break; /* NaN has no place in an order */                 \
        memcpy(&lo, s->min, sizeof(T));                                       \
        memcpy(&hi, s->max, sizeof(T));                                       \
        if (!s->has_min_max || v < lo) memcpy(s->min, &v, sizeof(T));         \
        if (!s->has_min_max || v > hi) memcpy(s->max, &v, sizeof(T));         \
        s->has_min_max = true;                                                \
        s->min_max_len = sizeof(T);                                           \
    } while (0)

void pq_stats_update(const ftl_parquet_column_def *c, const ftl_parquet_column_data *d, int64_t from, int64_t to, pq_write_stats *s) {
    for (int64_t r = from; r < to; r++) {
        if (d->validity && !d->validity[r]) {
            s->null_count++;
            continue;
        }
        const uint8_t *p = (const uint8_t *)d->values;
        switch (c->type) {
        case FTL_PARQUET_INT32: PQ_STATS_FOLD(int32_t); break;
        case FTL_PARQUET_INT64: PQ_STATS_FOLD(int64_t); break;
        case FTL_PARQUET_FLOAT: PQ_STATS_FOLD(float); break;
        case FTL_PARQUET_DOUBLE: PQ_STATS_FOLD(double); break;
        case FTL_PARQUET_BOOLEAN: {
            uint8_t v = p[r] ? 1 : 0;
            if (!s->has_min_max || v < s->min[0]) s->min[0] = v;
            if (!s->has_min_max || v > s->max[0]) s->max[0] = v;
            s->has_min_max = true;
            s->min_max_len = 1;
            break;
        }
        default: break; /* byte arrays: null count only (images make min/max expensive and useless) */
        }
    }
}

/* The spec asks for -0.0 as a zero minimum and +0.0 as a zero maximum. */
void pq_stats_finish(const ftl_parquet_column_def *c, pq_write_stats *s) {
    if (!s->has_min_max) return;
    if (c->type == FTL_PARQUET_FLOAT) {
        float lo, hi;
        memcpy(&lo, s->min, 4);
        memcpy(&hi, s->max, 4);
        if (lo == 0) lo = -0.0f;
        if (hi == 0) hi = 0.0f;
        memcpy(s->min, &lo, 4);
        memcpy(s->max, &hi, 4);
    } else if (c->type == FTL_PARQUET_DOUBLE) {
        double lo, hi;
        memcpy(&lo, s->min, 8);
        memcpy(&hi, s->max, 8);
        if (lo == 0) lo = -0.0;
        if (hi == 0) hi = 0.0;
        memcpy(s->min, &lo, 8);
        memcpy(s->max, &hi, 8);
    }
}
