/* Decoding of one column chunk's pages into ftl_parquet_column_values (internal). */
#ifndef FTL_PARQUET_COLUMN_DECODE_H
#define FTL_PARQUET_COLUMN_DECODE_H

#include "ftl/parquet.h"
#include "parquet/reader.h"

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
    SLOT_DEF_LEVELS,    /* definition levels when the maximum is over 1 (at 1 they are the validity) */
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

/* The column chunk being read, for reading its pages and for messages. */
typedef struct pq_chunk_ctx {
    ftl_parquet_file *f;
    int row_group, column;
    const pq_column *col;
    const pq_chunk *chunk;
    const uint8_t *bytes;        /* the chunk (whole-chunk reads) */
    uint64_t page_offset;        /* file offset of the page being handled (for messages) */
} pq_chunk_ctx;

/* FTL_E_* errors naming the file, row group and column (and the page): `fmt` has one %s for
 * `detail`. They return `code`. */
ftl_status pq_chunk_fail(const pq_chunk_ctx *c, ftl_status code, const char *fmt, const char *detail);
ftl_status pq_page_fail(const pq_chunk_ctx *c, ftl_status code, const char *detail);
/* What must hold before any page is read: not a leaf of a list or map, data in this file, a
 * codec ftl has. */
ftl_status pq_chunk_check_readable(const pq_chunk_ctx *c);
/* CRC of the page body, when the header has one and the file is verified. */
ftl_status pq_page_check_crc(const pq_chunk_ctx *c, const pq_page_header *h, const uint8_t *body);
/* Page bytes ready to decode: the page itself (uncompressed) or its decompression in `slot`. */
ftl_status pq_page_payload(const pq_chunk_ctx *c, ftl_parquet_column_values *v, int slot, const uint8_t *src, size_t src_size,
                           size_t dst_size, bool compressed, const uint8_t **out);

/* A data page's levels and values, ready to decode: v1 pages are decompressed whole (levels
 * first, then values: `values` is set once the levels are decoded), v2 pages keep their levels
 * uncompressed before the (maybe compressed) values. */
typedef struct pq_page_parts {
    const uint8_t *levels;
    size_t levels_len;
    const uint8_t *values;
    size_t values_len;
} pq_page_parts;
ftl_status pq_page_split(const pq_chunk_ctx *c, ftl_parquet_column_values *v, const pq_page_header *h, const uint8_t *body,
                         pq_page_parts *out);
/* Decodes the first `count` definition levels of the page into out (the column's maximum
 * checked); for v1 pages moves parts->values past the levels. */
ftl_status pq_page_def_levels(const pq_chunk_ctx *c, const pq_page_header *h, pq_page_parts *parts, int64_t count, uint8_t *out);

/* Reserves `bytes` in a slot; keep = preserve contents. False past PQ_MAX_DECODED_BYTES or
 * when memory runs out. */
bool pq_slot_reserve(ftl_parquet_column_values *v, int slot, size_t bytes, bool keep);
static inline void *pq_slot(ftl_parquet_column_values *v, int slot) { return v->priv_[slot]; }

/* Each returns FTL_OK, FTL_E_FORMAT / FTL_E_UNSUPPORTED / FTL_E_NOMEM with d->err set. */
ftl_status pq_load_dictionary(pq_decoder *d, const uint8_t *p, size_t n, int64_t count);
ftl_status pq_decode_fixed(pq_decoder *d, int encoding, const uint8_t *p, size_t n);
ftl_status pq_decode_bytes(pq_decoder *d, int encoding, const uint8_t *p, size_t n);

/* Output room for rows [0, rows) in d->out (validity, levels, values). */
ftl_status pq_ensure_rows(const pq_chunk_ctx *c, pq_decoder *d, int64_t rows);
/* Decodes one data page into d->out at rows d->row_base.. (then advances row_base). */
ftl_status pq_decode_data_page(const pq_chunk_ctx *c, pq_decoder *d, const pq_page_header *h, const uint8_t *body);

#endif
