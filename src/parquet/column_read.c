/* ftl_parquet_read_column: one column chunk -> values. The chunk is read with one pread (no
 * shared cursor, so threads may read concurrently), its page headers are walked once to check
 * that they tile the chunk and hold exactly the row group's rows, then each page is verified
 * (CRC when present), decompressed and decoded. */
#include "parquet/codec.h"
#include "parquet/column_decode.h"
#include "parquet/encoding.h"
#include "parquet/reader.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct chunk_ctx {
    ftl_parquet_file *f;
    int row_group, column;
    const pq_column *col;
    const pq_chunk *chunk;
    const uint8_t *bytes;        /* the chunk */
    uint64_t page_offset;        /* file offset of the page being handled (for messages) */
} chunk_ctx;

static ftl_status chunk_fail(const chunk_ctx *c, ftl_status code, const char *fmt, const char *detail) {
    char what[512];
    snprintf(what, sizeof what, fmt, detail ? detail : "");
    return ftl_fail(code, "%s: row group %d, column '%s': %s", c->f->path, c->row_group, c->col->info.name, what);
}

static ftl_status page_fail(const chunk_ctx *c, ftl_status code, const char *detail) {
    return ftl_fail(code, "%s: row group %d, column '%s': page at offset %llu: %s", c->f->path, c->row_group, c->col->info.name,
                    (unsigned long long)c->page_offset, detail);
}

/* First pass: the pages tile the chunk, at most one dictionary page comes first, and the data
 * pages hold exactly `rows` values. */
static ftl_status walk_pages(chunk_ctx *c, int64_t rows) {
    size_t len = (size_t)c->chunk->length, pos = 0;
    int64_t values = 0;
    int data_pages = 0;
    bool dict_seen = false;
    while (pos < len) {
        c->page_offset = (uint64_t)c->chunk->start + pos;
        pq_page_header h;
        size_t hs;
        const char *err;
        if (!pq_parse_page_header(c->bytes + pos, len - pos, &h, &hs, &err)) {
            char msg[160];
            snprintf(msg, sizeof msg, "corrupt page header: %s", err);
            return page_fail(c, FTL_E_FORMAT, msg);
        }
        size_t body = pos + hs;
        if ((size_t)h.compressed_size > len - body) return page_fail(c, FTL_E_FORMAT, "page runs past the end of the column chunk");
        if (h.type == PQ_DICTIONARY_PAGE) {
            if (!h.has_dictionary_header) return page_fail(c, FTL_E_FORMAT, "dictionary page without a dictionary header");
            if (dict_seen || data_pages) return page_fail(c, FTL_E_FORMAT, "dictionary page after other pages");
            dict_seen = true;
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            if (!h.has_data_header) return page_fail(c, FTL_E_FORMAT, "data page without a data page header");
            if (h.type == PQ_DATA_PAGE_V2 && h.num_rows != h.num_values)
                return page_fail(c, FTL_E_FORMAT, "v2 page's row and value counts differ in a flat column");
            values += h.num_values;
            data_pages++;
            if (values > rows) break;
        }
        pos = body + (size_t)h.compressed_size;
    }
    if (values != rows) {
        char msg[160];
        snprintf(msg, sizeof msg, "its pages hold %s%lld values but the row group has %lld rows", values > rows ? "at least " : "",
                 (long long)values, (long long)rows);
        return chunk_fail(c, FTL_E_FORMAT, "%s", msg);
    }
    return FTL_OK;
}

/* Page bytes ready to decode: the page itself (uncompressed) or its decompression in `slot`. */
static ftl_status page_payload(chunk_ctx *c, ftl_parquet_column_values *v, int slot, const uint8_t *src, size_t src_size,
                               size_t dst_size, bool compressed, const uint8_t **out) {
    int codec = compressed ? c->chunk->codec : FTL_PARQUET_CODEC_NONE;
    const char *err;
    if (codec == FTL_PARQUET_CODEC_NONE || (src_size == 0 && dst_size == 0)) { /* (some writers store empty v2 values raw) */
        if (src_size != dst_size) return page_fail(c, FTL_E_FORMAT, "uncompressed page's two sizes differ");
        *out = src;
        return FTL_OK;
    }
    if ((uint64_t)dst_size > pq_codec_max_expansion(codec, src_size))
        return page_fail(c, FTL_E_FORMAT, "uncompressed size is implausibly large for the compressed size");
    if (!pq_slot_reserve(v, slot, dst_size, false)) return page_fail(c, FTL_E_NOMEM, "out of memory for the decompressed page");
    uint8_t *dst = pq_slot(v, slot);
    if (!pq_decompress(codec, src, src_size, dst, dst_size, &err)) return page_fail(c, FTL_E_FORMAT, err);
    *out = dst;
    return FTL_OK;
}

/* Definition levels of a flat optional column (max level 1) are its validity. */
static ftl_status decode_levels(chunk_ctx *c, const uint8_t *p, size_t n, int encoding, bool v1, int64_t rows, uint8_t *valid,
                                size_t *used) {
    if (encoding == FTL_PARQUET_ENC_BIT_PACKED && v1) { /* deprecated: MSB first, no length */
        if (!pq_bitpacked_msb_decode(p, n, 1, valid, (size_t)rows)) return page_fail(c, FTL_E_FORMAT, "definition levels run past the page");
        *used = (size_t)((rows + 7) / 8);
        return FTL_OK;
    }
    if (encoding != FTL_PARQUET_ENC_RLE)
        return page_fail(c, FTL_E_UNSUPPORTED, "definition levels in an encoding other than RLE or BIT_PACKED");
    size_t start = 0, len = n;
    if (v1) { /* v1 pages prefix the levels with their byte length */
        if (n < 4) return page_fail(c, FTL_E_FORMAT, "definition levels are truncated");
        len = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
        start = 4;
        if (len > n - 4) return page_fail(c, FTL_E_FORMAT, "definition levels run past the page");
    }
    pq_rle_decoder rle;
    pq_rle_init(&rle, p + start, len, 1);
    if (!pq_rle_decode_u8(&rle, valid, (size_t)rows)) {
        char msg[160];
        snprintf(msg, sizeof msg, "definition levels: %s", rle.error);
        return page_fail(c, FTL_E_FORMAT, msg);
    }
    *used = start + len;
    return FTL_OK;
}

static int64_t count_valid(const uint8_t *valid, int64_t n) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) k += valid[i];
    return k;
}

static ftl_status decode_values(chunk_ctx *c, pq_decoder *d, int encoding, const uint8_t *p, size_t n) {
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
    return page_fail(c, st, msg);
}

/* Output room for rows [0, rows): grown page by page as pages back their row counts with data,
 * so counts claimed by a corrupt footer or page header cost no memory up front. */
static ftl_status ensure_rows(chunk_ctx *c, pq_decoder *d, int64_t rows) {
    ftl_parquet_column_values *v = d->out;
    bool ok = true;
    if (c->col->info.max_definition_level > 0) ok = pq_slot_reserve(v, SLOT_VALIDITY, (size_t)rows, true);
    if (ok && d->type == FTL_PARQUET_BYTE_ARRAY)
        ok = pq_slot_reserve(v, SLOT_VALUES, ((size_t)rows + 1) * 8, true);
    else if (ok)
        ok = (uint64_t)rows <= PQ_MAX_DECODED_BYTES / (uint64_t)d->width && pq_slot_reserve(v, SLOT_VALUES, (size_t)rows * (size_t)d->width, true);
    if (ok) return FTL_OK;
    char what[64];
    snprintf(what, sizeof what, "%lld rows", (long long)rows);
    return chunk_fail(c, FTL_E_NOMEM, "out of memory for %s (or over ftl's 16 GiB limit per column chunk)", what);
}

/* Required fixed-width PLAIN values are the whole (decompressed) page: decompress them straight
 * into the output. Returns false when the page is not of that kind. */
static bool try_direct_page(chunk_ctx *c, pq_decoder *d, const pq_page_header *h, const uint8_t *body, ftl_status *st) {
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
        *st = page_fail(c, FTL_E_FORMAT, "uncompressed size is implausibly large for the compressed size");
        return true;
    }
    *st = ensure_rows(c, d, d->row_base + h->num_values);
    if (*st != FTL_OK) return true;
    uint8_t *dst = (uint8_t *)pq_slot(d->out, SLOT_VALUES) + (size_t)d->row_base * (size_t)d->width;
    if (!pq_decompress(codec, body, (size_t)h->compressed_size, dst, want, &err)) *st = page_fail(c, FTL_E_FORMAT, err);
    d->row_base += h->num_values;
    return true;
}

/* PLAIN values of a required column take at least this many bits each: a page claiming more
 * values than its bytes can hold is corrupt (checked before making room for them). */
static bool plain_page_too_short(const pq_decoder *d, int64_t values, size_t n) {
    uint64_t bits = d->type == FTL_PARQUET_BOOLEAN ? 1 : d->type == FTL_PARQUET_BYTE_ARRAY ? 32 : (uint64_t)d->width * 8;
    return (uint64_t)values > (uint64_t)n * 8 / bits;
}

static ftl_status decode_data_page(chunk_ctx *c, pq_decoder *d, const pq_page_header *h, const uint8_t *body) {
    ftl_parquet_column_values *v = d->out;
    ftl_status direct;
    if (try_direct_page(c, d, h, body, &direct)) return direct;
    bool optional = c->col->info.max_definition_level > 0;
    const uint8_t *p, *levels_at;
    size_t n, levels_len, used = 0;
    d->page_rows = h->num_values;
    if (h->type == PQ_DATA_PAGE) { /* levels and values, compressed together */
        FTL_TRY(page_payload(c, v, SLOT_PAGE, body, (size_t)h->compressed_size, (size_t)h->uncompressed_size, true, &p));
        n = (size_t)h->uncompressed_size;
        levels_at = p;
        levels_len = n;
    } else { /* v2: uncompressed levels, then the (maybe compressed) values */
        size_t levels = (size_t)h->rep_length + (size_t)h->def_length;
        if (levels > (size_t)h->compressed_size || levels > (size_t)h->uncompressed_size)
            return page_fail(c, FTL_E_FORMAT, "v2 level lengths exceed the page size");
        if (h->rep_length > 0) return page_fail(c, FTL_E_FORMAT, "repetition levels in a flat column");
        FTL_TRY(page_payload(c, v, SLOT_PAGE, body + levels, (size_t)h->compressed_size - levels,
                             (size_t)h->uncompressed_size - levels, h->is_compressed, &p));
        n = (size_t)h->uncompressed_size - levels;
        levels_at = body;
        levels_len = (size_t)h->def_length;
    }
    if (!optional && h->encoding == FTL_PARQUET_ENC_PLAIN && plain_page_too_short(d, d->page_rows, n))
        return page_fail(c, FTL_E_FORMAT, "page holds fewer values than its header says");
    FTL_TRY(ensure_rows(c, d, d->row_base + d->page_rows));
    uint8_t *valid = optional ? (uint8_t *)pq_slot(v, SLOT_VALIDITY) + d->row_base : NULL;
    if (optional) {
        FTL_TRY(decode_levels(c, levels_at, levels_len, h->type == PQ_DATA_PAGE ? h->def_encoding : FTL_PARQUET_ENC_RLE,
                              h->type == PQ_DATA_PAGE, d->page_rows, valid, &used));
        if (h->type == PQ_DATA_PAGE) {
            p += used;
            n -= used;
        }
    }
    d->nonnull = optional ? count_valid(valid, d->page_rows) : d->page_rows;
    d->valid = optional && d->nonnull < d->page_rows ? valid : NULL;
    if (h->type == PQ_DATA_PAGE_V2 && h->num_nulls != d->page_rows - d->nonnull)
        return page_fail(c, FTL_E_FORMAT, "v2 page's null count differs from its definition levels");
    v->null_count += d->page_rows - d->nonnull;
    FTL_TRY(decode_values(c, d, h->encoding, p, n));
    d->row_base += d->page_rows;
    return FTL_OK;
}

/* Initial output room: enough for every row when pages hold at least one bit per row (true
 * unless runs of nulls or repeats are RLE-compressed), grown page by page beyond that. */
static ftl_status prepare_outputs(chunk_ctx *c, ftl_parquet_column_values *v, pq_decoder *d, int64_t rows) {
    const pq_chunk *ch = c->chunk;
    int64_t backed = ch->length * 8 + 4096;
    FTL_TRY(ensure_rows(c, d, rows < backed ? rows : backed));
    if (d->type == FTL_PARQUET_BYTE_ARRAY) {
        ((int64_t *)pq_slot(v, SLOT_VALUES))[0] = 0;
        /* one allocation in the common case: the chunk's uncompressed size bounds PLAIN values */
        uint64_t guess = (uint64_t)ch->total_uncompressed_size;
        uint64_t most = (uint64_t)ch->length * 8 + (1 << 20);
        if (guess > most) guess = most;
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)guess, false))
            return chunk_fail(c, FTL_E_NOMEM, "out of memory for %s", "the values");
    }
    return FTL_OK;
}

static ftl_status read_chunk(chunk_ctx *c, ftl_parquet_column_values *v) {
    const pq_chunk *ch = c->chunk;
    int64_t rows = c->f->md.row_groups[c->row_group].num_rows;
    if (c->col->info.nested)
        return chunk_fail(c, FTL_E_UNSUPPORTED, "nested columns (lists, maps, structs) are not supported%s", "");
    if (ch->has_file_path) return chunk_fail(c, FTL_E_UNSUPPORTED, "column chunks in other files are not supported%s", "");
    if (!pq_codec_supported(ch->codec))
        return chunk_fail(c, FTL_E_UNSUPPORTED, "codec %s is not supported (ftl reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD)",
                          ftl_parquet_codec_name((ftl_parquet_codec)ch->codec));
    if (ch->num_values != rows) {
        char msg[128];
        snprintf(msg, sizeof msg, "the chunk has %lld values but the row group has %lld rows", (long long)ch->num_values, (long long)rows);
        return chunk_fail(c, FTL_E_FORMAT, "%s", msg);
    }
    if (!pq_slot_reserve(v, SLOT_CHUNK, (size_t)ch->length, false))
        return chunk_fail(c, FTL_E_NOMEM, "out of memory for %s", "the column chunk");
    c->bytes = pq_slot(v, SLOT_CHUNK);
    FTL_TRY(pq_pread_full(c->f, (uint8_t *)c->bytes, (size_t)ch->length, (uint64_t)ch->start));
    FTL_TRY(walk_pages(c, rows));

    pq_decoder d;
    memset(&d, 0, sizeof d);
    d.out = v;
    d.type = c->col->info.type;
    d.width = c->col->info.fixed_length;
    FTL_TRY(prepare_outputs(c, v, &d, rows));

    size_t len = (size_t)ch->length, pos = 0;
    while (pos < len && d.row_base < rows) {
        c->page_offset = (uint64_t)ch->start + pos;
        pq_page_header h;
        size_t hs;
        const char *err;
        if (!pq_parse_page_header(c->bytes + pos, len - pos, &h, &hs, &err)) return page_fail(c, FTL_E_FORMAT, err);
        const uint8_t *body = c->bytes + pos + hs;
        pos += hs + (size_t)h.compressed_size;
        if (h.has_crc && !c->f->skip_crc && (uint32_t)crc32(0, body, (uInt)h.compressed_size) != h.crc)
            return page_fail(c, FTL_E_FORMAT, "page CRC mismatch: the data is corrupt");
        if (h.type == PQ_DICTIONARY_PAGE) {
            const uint8_t *p;
            FTL_TRY(page_payload(c, v, SLOT_DICT_PAGE, body, (size_t)h.compressed_size, (size_t)h.uncompressed_size, true, &p));
            if (h.encoding != FTL_PARQUET_ENC_PLAIN && h.encoding != FTL_PARQUET_ENC_PLAIN_DICTIONARY) {
                char msg[96];
                snprintf(msg, sizeof msg, "dictionary page in encoding %s", ftl_parquet_encoding_name(h.encoding));
                return page_fail(c, FTL_E_UNSUPPORTED, msg);
            }
            ftl_status st = pq_load_dictionary(&d, p, (size_t)h.uncompressed_size, h.num_values);
            if (st != FTL_OK) return page_fail(c, st, d.err);
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            FTL_TRY(decode_data_page(c, &d, &h, body));
        } /* index pages and unknown page types are skipped */
    }
    v->rows = rows;
    return FTL_OK;
}

ftl_status ftl_parquet_read_column(ftl_parquet_file *f, int row_group, int column, ftl_parquet_column_values *out) {
    if (!f || !out) return ftl_fail(FTL_E_INVALID_ARG, "ftl_parquet_read_column: NULL argument");
    if (row_group < 0 || row_group >= f->md.row_group_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: row group %d out of range (the file has %d)", f->path, row_group, f->md.row_group_count);
    if (column < 0 || column >= f->column_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: column %d out of range (the file has %d)", f->path, column, f->column_count);
    chunk_ctx c = {.f = f, .row_group = row_group, .column = column, .col = &f->columns[column],
                   .chunk = &f->md.row_groups[row_group].chunks[column]};
    out->type = c.col->info.type;
    out->fixed_length = c.col->info.type == FTL_PARQUET_BYTE_ARRAY ? 0 : c.col->info.fixed_length;
    out->rows = 0;
    out->null_count = 0;
    out->data_size = 0;
    out->validity = NULL;
    out->values = NULL;
    out->offsets = NULL;
    out->data = NULL;
    ftl_status st = read_chunk(&c, out);
    if (st != FTL_OK) {
        out->rows = 0;
        out->null_count = 0;
        out->data_size = 0;
        return st;
    }
    out->validity = out->null_count ? pq_slot(out, SLOT_VALIDITY) : NULL;
    if (out->type == FTL_PARQUET_BYTE_ARRAY) {
        out->offsets = pq_slot(out, SLOT_VALUES);
        out->data = pq_slot(out, SLOT_DATA);
    } else {
        out->values = pq_slot(out, SLOT_VALUES);
    }
    return FTL_OK;
}

ftl_status ftl_parquet_check_row_group(ftl_parquet_file *f, int row_group, int64_t *pages_without_crc) {
    if (pages_without_crc) *pages_without_crc = 0;
    if (!f) return ftl_fail(FTL_E_INVALID_ARG, "ftl_parquet_check_row_group: NULL file");
    if (row_group < 0 || row_group >= f->md.row_group_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: row group %d out of range (the file has %d)", f->path, row_group, f->md.row_group_count);
    uint8_t *buf = NULL;
    size_t cap = 0;
    ftl_status st = FTL_OK;
    for (int column = 0; column < f->column_count && st == FTL_OK; column++) {
        chunk_ctx c = {.f = f, .row_group = row_group, .column = column, .col = &f->columns[column],
                       .chunk = &f->md.row_groups[row_group].chunks[column]};
        size_t len = (size_t)c.chunk->length;
        if (len > cap || !buf) {
            free(buf);
            cap = len;
            buf = malloc(cap + 1);
            if (!buf) st = chunk_fail(&c, FTL_E_NOMEM, "out of memory for %s", "the column chunk");
        }
        if (st == FTL_OK) st = pq_pread_full(f, buf, len, (uint64_t)c.chunk->start);
        c.bytes = buf;
        if (st == FTL_OK) st = walk_pages(&c, f->md.row_groups[row_group].num_rows);
        /* walk_pages checked that the headers parse and the pages tile the chunk */
        for (size_t pos = 0; st == FTL_OK && pos < len;) {
            c.page_offset = (uint64_t)c.chunk->start + pos;
            pq_page_header h;
            size_t hs;
            const char *err;
            if (!pq_parse_page_header(buf + pos, len - pos, &h, &hs, &err)) {
                st = page_fail(&c, FTL_E_FORMAT, err);
                break;
            }
            const uint8_t *body = buf + pos + hs;
            if (!h.has_crc && pages_without_crc) (*pages_without_crc)++;
            else if (h.has_crc && (uint32_t)crc32(0, body, (uInt)h.compressed_size) != h.crc)
                st = page_fail(&c, FTL_E_FORMAT, "page CRC mismatch: the data is corrupt");
            pos += hs + (size_t)h.compressed_size;
        }
    }
    free(buf);
    return st;
}

void ftl_parquet_column_values_free(ftl_parquet_column_values *v) {
    if (!v) return;
    for (int i = 0; i < (int)(sizeof v->priv_ / sizeof v->priv_[0]); i++) free(v->priv_[i]);
    memset(v, 0, sizeof *v);
}
