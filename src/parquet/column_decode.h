/* Decoding of one column chunk's pages into ftl_parquet_column_values (internal). */
#ifndef FTL_PARQUET_COLUMN_DECODE_H
#define FTL_PARQUET_COLUMN_DECODE_H

#include "ftl/parquet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Buffers kept in ftl_parquet_column_values between calls (priv_ slots). */
enum {
    SLOT_CHUNK = 0,     /* the raw column chunk */
    SLOT_PAGE,          /* one decompressed page */
    SLOT_VALIDITY,
    SLOT_VALUES,        /* fixed-width values, or byte-array offsets */
    SLOT_DATA,          /* byte-array bytes */
    SLOT_DICT_PAGE,     /* the decompressed dictionary page (fixed-width: the values) */
    SLOT_DICT_INDEX,    /* byte arrays: (position << 32 | length) per entry; booleans: one byte each */
    SLOT_SCRATCH_A,     /* per page: indices, decoded integers, prefix lengths */
    SLOT_SCRATCH_B,     /* per page: value end offsets */
    SLOT_SCRATCH_C,     /* per page: suffix lengths */
};

/* Largest buffer one column chunk may decode to: beyond it the file is treated as hostile
 * rather than allocating (real row groups are far smaller). */
#define PQ_MAX_DECODED_BYTES ((uint64_t)16 << 30)

typedef struct pq_decoder {
    ftl_parquet_column_values *out;
    int type;
    int width;                   /* bytes per fixed-width value */
    /* dictionary of the chunk */
    bool has_dict;
    int64_t dict_count;
    const uint8_t *dict_fixed;   /* fixed width: dict_count * width bytes */
    const uint64_t *dict_entries;/* byte arrays: (position << 32 | length) into dict_data */
    const uint8_t *dict_data;
    /* the page being decoded */
    int64_t row_base, page_rows, nonnull;
    const uint8_t *valid;        /* validity of the page's rows, NULL when it has no nulls */
    const char *err;             /* static detail of the last failure */
} pq_decoder;

/* Reserves `bytes` in a slot; keep = preserve contents. False past PQ_MAX_DECODED_BYTES or
 * when memory runs out. */
bool pq_slot_reserve(ftl_parquet_column_values *v, int slot, size_t bytes, bool keep);
static inline void *pq_slot(ftl_parquet_column_values *v, int slot) { return v->priv_[slot]; }

/* Each returns FTL_OK, FTL_E_FORMAT / FTL_E_UNSUPPORTED / FTL_E_NOMEM with d->err set. */
ftl_status pq_load_dictionary(pq_decoder *d, const uint8_t *p, size_t n, int64_t count);
ftl_status pq_decode_fixed(pq_decoder *d, int encoding, const uint8_t *p, size_t n);
ftl_status pq_decode_bytes(pq_decoder *d, int encoding, const uint8_t *p, size_t n);

#endif
