/* Parquet writer: one call per row group; DATA_PAGE (v1) pages with PLAIN values and RLE
 * definition levels, CRC-32 per page, chunk statistics; the footer at close. The output is a
 * function of the input only (no clocks, no addresses), so equal inputs give equal files. */
#include "ftl/parquet.h"
#include "parquet/codec.h"
#include "parquet/encoding.h"
#include "parquet/format.h"
#include "parquet/thrift.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { PAGE_MAX_ROWS = 1 << 24 };

typedef struct write_chunk {
    int64_t start, data_page_offset;
    int64_t uncompressed, compressed, num_values;
    pq_write_stats stats;
} write_chunk;

typedef struct write_row_group {
    int64_t rows, file_offset, uncompressed, compressed;
    write_chunk *chunks;
} write_row_group;

struct ftl_parquet_writer {
    ftl_atomic_file file;
    uint64_t pos;
    int column_count;
    ftl_parquet_column_def *columns;
    ftl_parquet_writer_options opts;
    int rg_count, rg_cap;
    write_row_group *rgs;
    int kv_count, kv_cap;
    char **kv_keys, **kv_values;
    bool failed;
    uint8_t *page;          /* uncompressed page body */
    size_t page_len, page_cap;
    uint8_t *comp;
    size_t comp_cap;
    thrift_writer tw;
};

static void page_reserve(ftl_parquet_writer *w, size_t extra) {
    if (w->page_len + extra <= w->page_cap) return;
    size_t cap = w->page_cap ? w->page_cap : 4096;
    while (cap < w->page_len + extra) cap *= 2;
    w->page = ftl_xrealloc(w->page, cap);
    w->page_cap = cap;
}

static void page_append(ftl_parquet_writer *w, const void *data, size_t n) {
    page_reserve(w, n);
    if (n) memcpy(w->page + w->page_len, data, n);
    w->page_len += n;
}

static ftl_status write_bytes(ftl_parquet_writer *w, const void *data, size_t n) {
    ftl_status st = ftl_write_all(w->file.fp, data, n, w->file.final_path);
    if (st != FTL_OK) {
        w->failed = true;
        return st;
    }
    w->pos += n;
    return FTL_OK;
}

static int32_t fixed_width(const ftl_parquet_column_def *c) {
    switch (c->type) {
    case FTL_PARQUET_BOOLEAN: return 1;
    case FTL_PARQUET_INT32:
    case FTL_PARQUET_FLOAT: return 4;
    case FTL_PARQUET_INT64:
    case FTL_PARQUET_DOUBLE: return 8;
    case FTL_PARQUET_FIXED_LEN_BYTE_ARRAY: return c->fixed_length;
    default: return 0;
    }
}

ftl_status ftl_parquet_writer_open(const char *path, const ftl_parquet_column_def *columns, int column_count,
                                   const ftl_parquet_writer_options *opts, ftl_parquet_writer **out) {
    *out = NULL;
    if (column_count < 1) return ftl_fail(FTL_E_INVALID_ARG, "%s: a Parquet file needs at least one column", path);
    ftl_parquet_writer_options o = opts ? *opts : (ftl_parquet_writer_options){0};
    if (!pq_codec_supported(o.codec))
        return ftl_fail(FTL_E_INVALID_ARG, "%s: ftl cannot write codec %s (use none, snappy, gzip or zstd)", path,
                        ftl_parquet_codec_name(o.codec));
    if (o.max_page_bytes <= 0) o.max_page_bytes = 1 << 20;
    if (o.max_page_bytes > (1 << 30)) o.max_page_bytes = 1 << 30;
    for (int i = 0; i < column_count; i++) {
        const ftl_parquet_column_def *c = &columns[i];
        if (!c->name || !c->name[0]) return ftl_fail(FTL_E_INVALID_ARG, "%s: column %d has no name", path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(columns[j].name, c->name) == 0) return ftl_fail(FTL_E_INVALID_ARG, "%s: two columns named '%s'", path, c->name);
        if ((int)c->type < 0 || c->type > FTL_PARQUET_FIXED_LEN_BYTE_ARRAY || c->type == FTL_PARQUET_INT96)
            return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': ftl cannot write physical type %s", path, c->name,
                            ftl_parquet_type_name(c->type));
        if (c->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY && (c->fixed_length <= 0 || c->fixed_length > (1 << 30)))
            return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': FIXED_LEN_BYTE_ARRAY needs a fixed_length in 1..2^30", path, c->name);
        if (c->utf8 && c->type != FTL_PARQUET_BYTE_ARRAY)
            return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': utf8 needs a BYTE_ARRAY column", path, c->name);
    }
    ftl_parquet_writer *w = ftl_xcalloc(1, sizeof *w);
    ftl_status st = ftl_atomic_open(&w->file, path);
    if (st != FTL_OK) {
        free(w);
        return st;
    }
    w->file.no_replace = o.no_replace;
    w->opts = o;
    w->column_count = column_count;
    w->columns = ftl_xcalloc((size_t)column_count, sizeof *w->columns);
    for (int i = 0; i < column_count; i++) {
        w->columns[i] = columns[i];
        w->columns[i].name = ftl_strdup(columns[i].name);
    }
    st = write_bytes(w, PQ_MAGIC, 4);
    if (st != FTL_OK) {
        ftl_parquet_writer_abort(w);
        return st;
    }
    *out = w;
    return FTL_OK;
}

/* ---- pages ---- */

static bool is_valid(const ftl_parquet_column_data *d, int64_t r) { return !d->validity || d->validity[r]; }

static int64_t value_length(const ftl_parquet_column_data *d, int64_t r) {
    return d->offsets ? d->offsets[r + 1] - d->offsets[r] : (int64_t)d->byte_lengths[r];
}

static const uint8_t *value_bytes(const ftl_parquet_column_data *d, int64_t r) {
    return d->offsets ? (const uint8_t *)d->values + d->offsets[r] : d->byte_values[r];
}

/* Rows [from, to) -> one page body in w->page: levels (optional columns), PLAIN values. */
static void build_page(ftl_parquet_writer *w, const ftl_parquet_column_def *c, const ftl_parquet_column_data *d, int64_t from, int64_t to) {
    w->page_len = 0;
    int64_t n = to - from;
    if (c->optional) {
        /* v1 levels: 4-byte length, then the RLE / bit-packed hybrid of the 0/1 levels */
        uint8_t zero[4] = {0};
        page_append(w, zero, 4);
        size_t at = w->page_len;
        size_t len;
        if (d->validity) {
            uint8_t *levels = ftl_xmalloc((size_t)n);
            for (int64_t i = 0; i < n; i++) levels[i] = d->validity[from + i] ? 1 : 0;
            len = pq_rle_encode_u8(levels, (size_t)n, 1, &w->page, &w->page_len, &w->page_cap);
            free(levels);
        } else {
            /* all present: a single RLE run of 1s */
            uint8_t run[11];
            size_t k = 0;
            uint64_t header = (uint64_t)n << 1;
            while (header >= 0x80) {
                run[k++] = (uint8_t)(header | 0x80);
                header >>= 7;
            }
            run[k++] = (uint8_t)header;
            run[k++] = 1;
            page_append(w, run, k);
            len = k;
        }
        for (int i = 0; i < 4; i++) w->page[at - 4 + (size_t)i] = (uint8_t)(len >> (8 * i));
    }
    if (c->type == FTL_PARQUET_BYTE_ARRAY) {
        for (int64_t r = from; r < to; r++) {
            if (!is_valid(d, r)) continue;
            uint32_t len = (uint32_t)value_length(d, r);
            uint8_t lb[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
            page_append(w, lb, 4);
            page_append(w, value_bytes(d, r), len);
        }
    } else if (c->type == FTL_PARQUET_BOOLEAN) {
        page_reserve(w, (size_t)n / 8 + 1);
        uint8_t *out = w->page + w->page_len;
        memset(out, 0, (size_t)n / 8 + 1);
        int64_t k = 0;
        for (int64_t r = from; r < to; r++) {
            if (!is_valid(d, r)) continue;
            if (((const uint8_t *)d->values)[r]) out[k >> 3] |= (uint8_t)(1u << (k & 7));
            k++;
        }
        w->page_len += (size_t)(k + 7) / 8;
    } else {
        size_t width = (size_t)fixed_width(c);
        const uint8_t *src = (const uint8_t *)d->values + (size_t)from * width;
        if (!d->validity) {
            page_append(w, src, (size_t)n * width);
        } else {
            for (int64_t r = from; r < to; r++, src += width)
                if (d->validity[r]) page_append(w, src, width);
        }
    }
}

static ftl_status write_page(ftl_parquet_writer *w, int col, write_chunk *ch, int64_t rows) {
    const char *err;
    const uint8_t *body = w->page;
    size_t body_len = w->page_len;
    if (body_len > INT32_MAX)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': a page of %zu bytes is over Parquet's 2 GiB limit (a value that large?)",
                        w->file.final_path, w->columns[col].name, body_len);
    if (w->opts.codec != FTL_PARQUET_CODEC_NONE) {
        size_t bound = pq_compress_bound(w->opts.codec, body_len);
        if (bound > w->comp_cap) {
            free(w->comp);
            w->comp = ftl_xmalloc(bound);
            w->comp_cap = bound;
        }
        body_len = pq_compress(w->opts.codec, w->opts.compression_level, w->page, w->page_len, w->comp, w->comp_cap, &err);
        if (!body_len) return ftl_fail(FTL_E_INTERNAL, "%s: column '%s': %s", w->file.final_path, w->columns[col].name, err);
        if (body_len > INT32_MAX)
            return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': compressed page over 2 GiB", w->file.final_path,
                            w->columns[col].name);
        body = w->comp;
    }
    bool crc = !w->opts.no_page_crc;
    uint32_t sum = crc ? (uint32_t)crc32(0, body, (uInt)body_len) : 0;
    thrift_writer_reset(&w->tw);
    pq_write_data_page_header(&w->tw, (int32_t)w->page_len, (int32_t)body_len, crc, sum, (int32_t)rows);
    if (ch->num_values == 0 && ch->data_page_offset == 0) ch->data_page_offset = (int64_t)w->pos;
    FTL_TRY(write_bytes(w, w->tw.data, w->tw.size));
    FTL_TRY(write_bytes(w, body, body_len));
    ch->uncompressed += (int64_t)(w->tw.size + w->page_len);
    ch->compressed += (int64_t)(w->tw.size + body_len);
    ch->num_values += rows;
    return FTL_OK;
}

static ftl_status check_column_data(const ftl_parquet_writer *w, int col, int64_t rows, const ftl_parquet_column_data *d) {
    const ftl_parquet_column_def *c = &w->columns[col];
    const char *path = w->file.final_path;
    if (d->validity && !c->optional)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s' is REQUIRED but was given a validity array", path, c->name);
    if (c->type != FTL_PARQUET_BYTE_ARRAY) {
        if (!d->values) return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': no values", path, c->name);
        return FTL_OK;
    }
    if (d->offsets) {
        if (!d->values && d->offsets[rows] > d->offsets[0])
            return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': offsets without data", path, c->name);
        if (d->offsets[0] < 0) return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': negative offset", path, c->name);
        for (int64_t r = 0; r < rows; r++) {
            int64_t len = d->offsets[r + 1] - d->offsets[r];
            if (len < 0 || len > INT32_MAX)
                return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': row %lld: offsets decrease or the value is over 2 GiB", path,
                                c->name, (long long)r);
        }
    } else {
        if (!d->byte_lengths || !d->byte_values)
            return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': needs offsets, or byte_values and byte_lengths", path, c->name);
        for (int64_t r = 0; r < rows; r++) {
            if (!is_valid(d, r)) continue;
            if (d->byte_lengths[r] > INT32_MAX)
                return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': row %lld: value over 2 GiB", path, c->name, (long long)r);
            if (d->byte_lengths[r] && !d->byte_values[r])
                return ftl_fail(FTL_E_INVALID_ARG, "%s: column '%s': row %lld: NULL value pointer", path, c->name, (long long)r);
        }
    }
    return FTL_OK;
}

static ftl_status write_chunk_data(ftl_parquet_writer *w, int col, int64_t rows, const ftl_parquet_column_data *d, write_chunk *ch) {
    const ftl_parquet_column_def *c = &w->columns[col];
    ch->start = (int64_t)w->pos;
    int64_t limit = w->opts.max_page_bytes;
    int64_t width = fixed_width(c);
    int64_t from = 0;
    while (from < rows) {
        int64_t to = from;
        /* page value counts are int32 in the format; nulls take no value bytes */
        int64_t max_rows = rows - from < PAGE_MAX_ROWS ? rows - from : PAGE_MAX_ROWS;
        if (c->type == FTL_PARQUET_BYTE_ARRAY) {
            int64_t bytes = 0;
            do {
                if (is_valid(d, to)) bytes += 4 + value_length(d, to);
                to++;
            } while (to - from < max_rows && bytes + 4 + (is_valid(d, to) ? value_length(d, to) : 0) <= limit);
        } else {
            int64_t per_page = c->type == FTL_PARQUET_BOOLEAN ? limit * 8 : limit / width;
            if (per_page < 1) per_page = 1;
            if (per_page > max_rows) per_page = max_rows;
            to = from + per_page;
        }
        build_page(w, c, d, from, to);
        FTL_TRY(write_page(w, col, ch, to - from));
        pq_stats_update(c, d, from, to, &ch->stats);
        from = to;
    }
    pq_stats_finish(c, &ch->stats);
    return FTL_OK;
}

ftl_status ftl_parquet_writer_write_row_group(ftl_parquet_writer *w, int64_t rows, const ftl_parquet_column_data *columns) {
    if (w->failed) return ftl_fail(FTL_E_INVALID_ARG, "%s: the writer failed earlier; abort it", w->file.final_path);
    if (rows < 0) return ftl_fail(FTL_E_INVALID_ARG, "%s: negative row count", w->file.final_path);
    if (rows == 0) return FTL_OK;
    for (int c = 0; c < w->column_count; c++) FTL_TRY(check_column_data(w, c, rows, &columns[c]));
    if (w->rg_count == w->rg_cap) {
        w->rg_cap = w->rg_cap ? w->rg_cap * 2 : 16;
        w->rgs = ftl_xrealloc(w->rgs, (size_t)w->rg_cap * sizeof *w->rgs);
    }
    write_row_group *rg = &w->rgs[w->rg_count];
    memset(rg, 0, sizeof *rg);
    rg->rows = rows;
    rg->file_offset = (int64_t)w->pos;
    rg->chunks = ftl_xcalloc((size_t)w->column_count, sizeof *rg->chunks);
    w->rg_count++; /* counted now so that close/abort free the chunks */
    for (int c = 0; c < w->column_count; c++) {
        ftl_status st = write_chunk_data(w, c, rows, &columns[c], &rg->chunks[c]);
        if (st != FTL_OK) {
            w->failed = true;
            return st;
        }
        rg->uncompressed += rg->chunks[c].uncompressed;
        rg->compressed += rg->chunks[c].compressed;
    }
    return FTL_OK;
}

ftl_status ftl_parquet_writer_set_metadata(ftl_parquet_writer *w, const char *key, const char *value) {
    if (!key || !value) return ftl_fail(FTL_E_INVALID_ARG, "%s: metadata key and value must not be NULL", w->file.final_path);
    for (int i = 0; i < w->kv_count; i++)
        if (strcmp(w->kv_keys[i], key) == 0) {
            free(w->kv_values[i]);
            w->kv_values[i] = ftl_strdup(value);
            return FTL_OK;
        }
    if (w->kv_count == w->kv_cap) {
        w->kv_cap = w->kv_cap ? w->kv_cap * 2 : 8;
        w->kv_keys = ftl_xrealloc(w->kv_keys, (size_t)w->kv_cap * sizeof *w->kv_keys);
        w->kv_values = ftl_xrealloc(w->kv_values, (size_t)w->kv_cap * sizeof *w->kv_values);
    }
    w->kv_keys[w->kv_count] = ftl_strdup(key);
    w->kv_values[w->kv_count] = ftl_strdup(value);
    w->kv_count++;
    return FTL_OK;
}

/* ---- footer ---- */

static void write_schema(thrift_writer *t, const ftl_parquet_writer *w) {
    thrift_write_list_begin(t, 2, THRIFT_STRUCT, (uint32_t)w->column_count + 1);
    thrift_write_struct_begin(t, 0);
    thrift_write_string_field(t, 4, "schema");
    thrift_write_i32_field(t, 5, w->column_count);
    thrift_write_struct_end(t);
    for (int i = 0; i < w->column_count; i++) {
        const ftl_parquet_column_def *c = &w->columns[i];
        thrift_write_struct_begin(t, 0);
        thrift_write_i32_field(t, 1, c->type);
        if (c->type == FTL_PARQUET_FIXED_LEN_BYTE_ARRAY) thrift_write_i32_field(t, 2, c->fixed_length);
        thrift_write_i32_field(t, 3, c->optional ? PQ_OPTIONAL : PQ_REQUIRED);
        thrift_write_string_field(t, 4, c->name);
        if (c->utf8) {
            thrift_write_i32_field(t, 6, PQ_CONVERTED_UTF8);
            thrift_write_struct_begin(t, 10); /* LogicalType union: STRING = 1 */
            thrift_write_struct_begin(t, 1);
            thrift_write_struct_end(t);
            thrift_write_struct_end(t);
        }
        thrift_write_struct_end(t);
    }
}

static void write_column_chunk(thrift_writer *t, const ftl_parquet_writer *w, int col, const write_chunk *ch) {
    const ftl_parquet_column_def *c = &w->columns[col];
    thrift_write_struct_begin(t, 0);
    thrift_write_i64_field(t, 2, ch->start);
    thrift_write_struct_begin(t, 3);
    thrift_write_i32_field(t, 1, c->type);
    thrift_write_list_begin(t, 2, THRIFT_I32, c->optional ? 2 : 1);
    thrift_write_zigzag(t, FTL_PARQUET_ENC_PLAIN);
    if (c->optional) thrift_write_zigzag(t, FTL_PARQUET_ENC_RLE);
    thrift_write_list_begin(t, 3, THRIFT_BINARY, 1);
    thrift_write_binary(t, c->name, strlen(c->name));
    thrift_write_i32_field(t, 4, w->opts.codec);
    thrift_write_i64_field(t, 5, ch->num_values);
    thrift_write_i64_field(t, 6, ch->uncompressed);
    thrift_write_i64_field(t, 7, ch->compressed);
    thrift_write_i64_field(t, 9, ch->data_page_offset);
    thrift_write_struct_begin(t, 12);
    thrift_write_i64_field(t, 3, ch->stats.null_count);
    if (ch->stats.has_min_max) {
        thrift_write_binary_field(t, 5, ch->stats.max, ch->stats.min_max_len);
        thrift_write_binary_field(t, 6, ch->stats.min, ch->stats.min_max_len);
    }
    thrift_write_struct_end(t);
    thrift_write_struct_end(t);
    thrift_write_struct_end(t);
}

static void write_footer(thrift_writer *t, const ftl_parquet_writer *w) {
    int64_t rows = 0;
    for (int g = 0; g < w->rg_count; g++) rows += w->rgs[g].rows;
    thrift_write_struct_begin(t, 0);
    thrift_write_i32_field(t, 1, 1);
    write_schema(t, w);
    thrift_write_i64_field(t, 3, rows);
    thrift_write_list_begin(t, 4, THRIFT_STRUCT, (uint32_t)w->rg_count);
    for (int g = 0; g < w->rg_count; g++) {
        const write_row_group *rg = &w->rgs[g];
        thrift_write_struct_begin(t, 0);
        thrift_write_list_begin(t, 1, THRIFT_STRUCT, (uint32_t)w->column_count);
        for (int c = 0; c < w->column_count; c++) write_column_chunk(t, w, c, &rg->chunks[c]);
        thrift_write_i64_field(t, 2, rg->uncompressed);
        thrift_write_i64_field(t, 3, rg->rows);
        thrift_write_i64_field(t, 5, rg->file_offset);
        thrift_write_i64_field(t, 6, rg->compressed);
        if (g <= INT16_MAX) {
            thrift_write_field_header(t, 7, THRIFT_I16);
            thrift_write_zigzag(t, g);
        }
        thrift_write_struct_end(t);
    }
    if (w->kv_count) {
        thrift_write_list_begin(t, 5, THRIFT_STRUCT, (uint32_t)w->kv_count);
        for (int i = 0; i < w->kv_count; i++) {
            thrift_write_struct_begin(t, 0);
            thrift_write_string_field(t, 1, w->kv_keys[i]);
            thrift_write_string_field(t, 2, w->kv_values[i]);
            thrift_write_struct_end(t);
        }
    }
    thrift_write_string_field(t, 6, "ftl version " FTL_VERSION);
    /* column_orders: TypeDefinedOrder for every column, so readers trust min_value/max_value */
    thrift_write_list_begin(t, 7, THRIFT_STRUCT, (uint32_t)w->column_count);
    for (int c = 0; c < w->column_count; c++) {
        thrift_write_struct_begin(t, 0);
        thrift_write_struct_begin(t, 1);
        thrift_write_struct_end(t);
        thrift_write_struct_end(t);
    }
    thrift_write_struct_end(t);
}

static void writer_free(ftl_parquet_writer *w) {
    for (int i = 0; i < w->column_count; i++) free((char *)w->columns[i].name);
    free(w->columns);
    for (int g = 0; g < w->rg_count; g++) free(w->rgs[g].chunks);
    free(w->rgs);
    for (int i = 0; i < w->kv_count; i++) {
        free(w->kv_keys[i]);
        free(w->kv_values[i]);
    }
    free(w->kv_keys);
    free(w->kv_values);
    free(w->page);
    free(w->comp);
    thrift_writer_free(&w->tw);
    free(w);
}

ftl_status ftl_parquet_writer_close(ftl_parquet_writer *w) {
    if (!w) return ftl_fail(FTL_E_INVALID_ARG, "ftl_parquet_writer_close: NULL writer");
    if (w->failed) {
        ftl_status st = ftl_fail(FTL_E_INVALID_ARG, "%s: the writer failed earlier; nothing was written", w->file.final_path);
        ftl_parquet_writer_abort(w);
        return st;
    }
    thrift_writer_reset(&w->tw);
    write_footer(&w->tw, w);
    size_t n = w->tw.size;
    uint8_t tail[8] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24), 'P', 'A', 'R', '1'};
    ftl_status st = write_bytes(w, w->tw.data, n);
    if (st == FTL_OK) st = write_bytes(w, tail, 8);
    if (st == FTL_OK) st = ftl_atomic_commit(&w->file); /* aborts the temporary itself on failure */
    else ftl_atomic_abort(&w->file);
    writer_free(w);
    return st;
}

void ftl_parquet_writer_abort(ftl_parquet_writer *w) {
    if (!w) return;
    ftl_atomic_abort(&w->file);
    writer_free(w);
}
