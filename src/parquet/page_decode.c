/* One data page of a column chunk -> values at its rows: CRC, decompression, definition levels
 * (validity, and the levels themselves when structs hold the leaf), values. Shared by whole-chunk
 * reads (column_read.c) and single-value reads (value_read.c). */
#include "parquet/codec.h"
#include "parquet/column_decode.h"
#include "parquet/levels.h"
#include "parquet/page_crc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

ftl_status pq_chunk_fail(const pq_chunk_ctx *c, ftl_status code, const char *fmt, const char *detail) {
    char what[512];
    snprintf(what, sizeof what, fmt, detail ? detail : "");
    return ftl_fail(code, "%s: row group %d, column '%s': %s", c->f->path, c->row_group, c->col->info.name, what);
}

ftl_status pq_page_fail(const pq_chunk_ctx *c, ftl_status code, const char *detail) {
    return ftl_fail(code, "%s: row group %d, column '%s': page at offset %llu: %s", c->f->path, c->row_group, c->col->info.name,
                    (unsigned long long)c->page_offset, detail);
}

ftl_status pq_chunk_check_readable(const pq_chunk_ctx *c) {
    if (c->col->info.repeated)
        return pq_chunk_fail(c, FTL_E_UNSUPPORTED,
                             "the column is inside a list or map (a repeated field): ftl reads structs but not lists%s", "");
    if (c->chunk->has_file_path) return pq_chunk_fail(c, FTL_E_UNSUPPORTED, "column chunks in other files are not supported%s", "");
    if (!pq_codec_supported(c->chunk->codec))
        return pq_chunk_fail(c, FTL_E_UNSUPPORTED, "codec %s is not supported (ftl reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD)",
                             ftl_parquet_codec_name((ftl_parquet_codec)c->chunk->codec));
    return FTL_OK;
}

ftl_status pq_page_check_crc(const pq_chunk_ctx *c, const pq_page_header *h, const uint8_t *body) {
    if (h->has_crc && !c->f->skip_crc && pq_crc32(body, (size_t)h->compressed_size) != h->crc)
        return pq_page_fail(c, FTL_E_FORMAT, "page CRC mismatch: the data is corrupt");
    return FTL_OK;
}

ftl_status pq_page_payload(const pq_chunk_ctx *c, ftl_parquet_column_values *v, int slot, const uint8_t *src, size_t src_size,
                           size_t dst_size, bool compressed, const uint8_t **out) {
    int codec = compressed ? c->chunk->codec : FTL_PARQUET_CODEC_NONE;
    const char *err;
    if (codec == FTL_PARQUET_CODEC_NONE || (src_size == 0 && dst_size == 0)) { /* (some writers store empty v2 values raw) */
        if (src_size != dst_size) return pq_page_fail(c, FTL_E_FORMAT, "uncompressed page's two sizes differ");
        *out = src;
        return FTL_OK;
    }
    if ((uint64_t)dst_size > pq_codec_max_expansion(codec, src_size))
        return pq_page_fail(c, FTL_E_FORMAT, "uncompressed size is implausibly large for the compressed size");
    if (!pq_slot_reserve(v, slot, dst_size, false)) return pq_page_fail(c, FTL_E_NOMEM, "out of memory for the decompressed page");
    uint8_t *dst = pq_slot(v, slot);
    if (!pq_decompress(codec, src, src_size, dst, dst_size, &err)) return pq_page_fail(c, FTL_E_FORMAT, err);
    *out = dst;
    return FTL_OK;
}

ftl_status pq_page_split(const pq_chunk_ctx *c, ftl_parquet_column_values *v, const pq_page_header *h, const uint8_t *body,
                         pq_page_parts *out) {
    if (h->type == PQ_DATA_PAGE) { /* levels and values, compressed together */
        FTL_TRY(pq_page_payload(c, v, SLOT_PAGE, body, (size_t)h->compressed_size, (size_t)h->uncompressed_size, true, &out->values));
        out->values_len = (size_t)h->uncompressed_size;
        out->levels = out->values;
        out->levels_len = out->values_len;
        return FTL_OK;
    }
    size_t levels = (size_t)h->rep_length + (size_t)h->def_length;
    if (levels > (size_t)h->compressed_size || levels > (size_t)h->uncompressed_size)
        return pq_page_fail(c, FTL_E_FORMAT, "v2 level lengths exceed the page size");
    if (h->rep_length > 0) return pq_page_fail(c, FTL_E_FORMAT, "repetition levels in a column outside lists");
    FTL_TRY(pq_page_payload(c, v, SLOT_PAGE, body + levels, (size_t)h->compressed_size - levels, (size_t)h->uncompressed_size - levels,
                            h->is_compressed, &out->values));
    out->values_len = (size_t)h->uncompressed_size - levels;
    out->levels = body;
    out->levels_len = (size_t)h->def_length;
    return FTL_OK;
}

ftl_status pq_page_def_levels(const pq_chunk_ctx *c, const pq_page_header *h, pq_page_parts *parts, int64_t count, uint8_t *out) {
    bool v1 = h->type == PQ_DATA_PAGE;
    char err[160];
    size_t used = 0;
    ftl_status st = pq_decode_def_levels(parts->levels, parts->levels_len, h->def_encoding, v1, c->col->info.max_definition_level,
                                         h->num_values, count, out, &used, err, sizeof err);
    if (st != FTL_OK) return pq_page_fail(c, st, err);
    if (v1) {
        parts->values += used;
        parts->values_len -= used;
    }
    return FTL_OK;
}

static int64_t count_valid(const uint8_t *valid, int64_t n) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) k += valid[i];
    return k;
}

static ftl_status decode_values(const pq_chunk_ctx *c, pq_decoder *d, int encoding, const uint8_t *p, size_t n) {
    ftl_status st = d->type == FTL_PARQUET_BYTE_ARRAY ? pq_decode_bytes(d, encoding, p, n) : pq_decode_fixed(d, encoding, p, n);
    if (st == FTL_OK) return st;
    char msg[256];
    if (st == FTL_E_UNSUPPORTED && strcmp(ftl_parquet_encoding_name(encoding), "?") == 0)
        snprintf(msg, sizeof msg, "unknown encoding %d (not in the Parquet spec ftl knows)", encoding);
    else if (st == FTL_E_UNSUPPORTED)
        snprintf(msg, sizeof msg, "encoding %s is not supported for %s values", ftl_parquet_encoding_name(encoding),
                 ftl_parquet_type_name((ftl_parquet_type)d->type));
    else
        snprintf(msg, sizeof msg, "%s values: %s", ftl_parquet_encoding_name(encoding), d->err);
    return pq_page_fail(c, st, msg);
}

/* Output room for rows [0, rows): grown page by page as pages back their row counts with data,
 * so counts claimed by a corrupt footer or page header cost no memory up front. */
ftl_status pq_ensure_rows(const pq_chunk_ctx *c, pq_decoder *d, int64_t rows) {
    ftl_parquet_column_values *v = d->out;
    int max_def = c->col->info.max_definition_level;
    bool ok = true;
    if (max_def > 0) ok = pq_slot_reserve(v, SLOT_VALIDITY, (size_t)rows, true);
    if (ok && max_def > 1) ok = pq_slot_reserve(v, SLOT_DEF_LEVELS, (size_t)rows, true);
    if (ok && d->type == FTL_PARQUET_BYTE_ARRAY)
        ok = pq_slot_reserve(v, SLOT_VALUES, ((size_t)rows + 1) * 8, true);
    else if (ok)
        ok = (uint64_t)rows <= PQ_MAX_DECODED_BYTES / (uint64_t)d->width && pq_slot_reserve(v, SLOT_VALUES, (size_t)rows * (size_t)d->width, true);
    if (ok) return FTL_OK;
    char what[64];
    snprintf(what, sizeof what, "%lld rows", (long long)rows);
    return pq_chunk_fail(c, FTL_E_NOMEM, "out of memory for %s (or over ftl's 16 GiB limit per column chunk)", what);
}

/* Required fixed-width PLAIN values are the whole (decompressed) page: decompress them straight
 * into the output. Returns false when the page is not of that kind. */
static bool try_direct_page(const pq_chunk_ctx *c, pq_decoder *d, const pq_page_header *h, const uint8_t *body, ftl_status *st) {
    int codec = c->chunk->codec;
    size_t levels = h->type == PQ_DATA_PAGE_V2 ? (size_t)h->rep_length + (size_t)h->def_length : 0;
    if (c->col->info.max_definition_level > 0 || d->type == FTL_PARQUET_BYTE_ARRAY || d->type == FTL_PARQUET_BOOLEAN ||
        h->encoding != FTL_PARQUET_ENC_PLAIN || codec == FTL_PARQUET_CODEC_NONE || levels != 0 ||
        (h->type == PQ_DATA_PAGE_V2 && !h->is_compressed))
        return false;
    size_t want = (size_t)h->num_values * (size_t)d->width;
    if ((size_t)h->uncompressed_size != want) return false; /* trailing bytes: take the general path */
    const char *err;
    if ((uint64_t)want > pq_codec_max_expansion(codec, (uint64_t)h->compressed_size)) {
        *st = pq_page_fail(c, FTL_E_FORMAT, "uncompressed size is implausibly large for the compressed size");
        return true;
    }
    *st = pq_ensure_rows(c, d, d->row_base + h->num_values);
    if (*st != FTL_OK) return true;
    uint8_t *dst = (uint8_t *)pq_slot(d->out, SLOT_VALUES) + (size_t)d->row_base * (size_t)d->width;
    if (!pq_decompress(codec, body, (size_t)h->compressed_size, dst, want, &err)) *st = pq_page_fail(c, FTL_E_FORMAT, err);
    d->row_base += h->num_values;
    return true;
}

/* PLAIN values of a required column take at least this many bits each: a page claiming more
 * values than its bytes can hold is corrupt (checked before making room for them). */
static bool plain_page_too_short(const pq_decoder *d, int64_t values, size_t n) {
    uint64_t bits = d->type == FTL_PARQUET_BOOLEAN ? 1 : d->type == FTL_PARQUET_BYTE_ARRAY ? 32 : (uint64_t)d->width * 8;
    return (uint64_t)values > (uint64_t)n * 8 / bits;
}

ftl_status pq_decode_data_page(const pq_chunk_ctx *c, pq_decoder *d, const pq_page_header *h, const uint8_t *body) {
    ftl_parquet_column_values *v = d->out;
    ftl_status direct;
    if (try_direct_page(c, d, h, body, &direct)) return direct;
    int max_def = c->col->info.max_definition_level;
    pq_page_parts parts;
    d->page_rows = h->num_values;
    FTL_TRY(pq_page_split(c, v, h, body, &parts));
    if (max_def == 0 && h->encoding == FTL_PARQUET_ENC_PLAIN && plain_page_too_short(d, d->page_rows, parts.values_len))
        return pq_page_fail(c, FTL_E_FORMAT, "page holds fewer values than its header says");
    FTL_TRY(pq_ensure_rows(c, d, d->row_base + d->page_rows));
    uint8_t *valid = max_def > 0 ? (uint8_t *)pq_slot(v, SLOT_VALIDITY) + d->row_base : NULL;
    if (max_def > 0) {
        /* at maximum 1 the levels are the validity; deeper leaves keep them beside it */
        uint8_t *levels = max_def == 1 ? valid : (uint8_t *)pq_slot(v, SLOT_DEF_LEVELS) + d->row_base;
        FTL_TRY(pq_page_def_levels(c, h, &parts, d->page_rows, levels));
        if (max_def > 1)
            for (int64_t r = 0; r < d->page_rows; r++) valid[r] = levels[r] == max_def;
    }
    d->nonnull = max_def > 0 ? count_valid(valid, d->page_rows) : d->page_rows;
    d->valid = max_def > 0 && d->nonnull < d->page_rows ? valid : NULL;
    if (h->type == PQ_DATA_PAGE_V2 && h->num_nulls != d->page_rows - d->nonnull)
        return pq_page_fail(c, FTL_E_FORMAT, "v2 page's null count differs from its definition levels");
    v->null_count += d->page_rows - d->nonnull;
    FTL_TRY(decode_values(c, d, h->encoding, parts.values, parts.values_len));
    d->row_base += d->page_rows;
    return FTL_OK;
}
