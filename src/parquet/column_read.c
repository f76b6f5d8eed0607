/* ftl_parquet_read_column: one column chunk -> values. The chunk is read with one pread (no
 * shared cursor, so threads may read concurrently), its page headers are walked once to check
 * that they tile the chunk and hold exactly the row group's rows, then each page is verified
 * (CRC when present), decompressed and decoded. */
#include "parquet/column_decode.h"
#include "parquet/page_crc.h"
#include "parquet/reader.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* First pass: the pages tile the chunk, at most one dictionary page comes first, and the data
 * pages hold exactly `rows` values. */
static ftl_status walk_pages(pq_chunk_ctx *c, int64_t rows) {
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
            return pq_page_fail(c, FTL_E_FORMAT, msg);
        }
        size_t body = pos + hs;
        if ((size_t)h.compressed_size > len - body) return pq_page_fail(c, FTL_E_FORMAT, "page runs past the end of the column chunk");
        if (h.type == PQ_DICTIONARY_PAGE) {
            if (!h.has_dictionary_header) return pq_page_fail(c, FTL_E_FORMAT, "dictionary page without a dictionary header");
            if (dict_seen || data_pages) return pq_page_fail(c, FTL_E_FORMAT, "dictionary page after other pages");
            dict_seen = true;
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            if (!h.has_data_header) return pq_page_fail(c, FTL_E_FORMAT, "data page without a data page header");
            if (h.type == PQ_DATA_PAGE_V2 && h.num_rows != h.num_values)
                return pq_page_fail(c, FTL_E_FORMAT, "v2 page's row and value counts differ in a column outside lists");
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
        return pq_chunk_fail(c, FTL_E_FORMAT, "%s", msg);
    }
    return FTL_OK;
}

/* Initial output room: enough for every row when pages hold at least one bit per row (true
 * unless runs of nulls or repeats are RLE-compressed), grown page by page beyond that. */
static ftl_status prepare_outputs(pq_chunk_ctx *c, ftl_parquet_column_values *v, pq_decoder *d, int64_t rows) {
    const pq_chunk *ch = c->chunk;
    int64_t backed = ch->length * 8 + 4096;
    FTL_TRY(pq_ensure_rows(c, d, rows < backed ? rows : backed));
    if (d->type == FTL_PARQUET_BYTE_ARRAY) {
        ((int64_t *)pq_slot(v, SLOT_VALUES))[0] = 0;
        /* one allocation in the common case: the chunk's uncompressed size bounds PLAIN values */
        uint64_t guess = (uint64_t)ch->total_uncompressed_size;
        uint64_t most = (uint64_t)ch->length * 8 + (1 << 20);
        if (guess > most) guess = most;
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)guess, false))
            return pq_chunk_fail(c, FTL_E_NOMEM, "out of memory for %s", "the values");
    }
    return FTL_OK;
}

static ftl_status read_chunk(pq_chunk_ctx *c, ftl_parquet_column_values *v) {
    const pq_chunk *ch = c->chunk;
    int64_t rows = c->f->md.row_groups[c->row_group].num_rows;
    FTL_TRY(pq_chunk_check_readable(c));
    if (ch->num_values != rows) {
        char msg[128];
        snprintf(msg, sizeof msg, "the chunk has %lld values but the row group has %lld rows", (long long)ch->num_values, (long long)rows);
        return pq_chunk_fail(c, FTL_E_FORMAT, "%s", msg);
    }
    if (!pq_slot_reserve(v, SLOT_CHUNK, (size_t)ch->length, false))
        return pq_chunk_fail(c, FTL_E_NOMEM, "out of memory for %s", "the column chunk");
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
        if (!pq_parse_page_header(c->bytes + pos, len - pos, &h, &hs, &err)) return pq_page_fail(c, FTL_E_FORMAT, err);
        const uint8_t *body = c->bytes + pos + hs;
        pos += hs + (size_t)h.compressed_size;
        FTL_TRY(pq_page_check_crc(c, &h, body));
        if (h.type == PQ_DICTIONARY_PAGE) {
            const uint8_t *p;
            FTL_TRY(pq_page_payload(c, v, SLOT_DICT_PAGE, body, (size_t)h.compressed_size, (size_t)h.uncompressed_size, true, &p));
            if (h.encoding != FTL_PARQUET_ENC_PLAIN && h.encoding != FTL_PARQUET_ENC_PLAIN_DICTIONARY) {
                char msg[96];
                snprintf(msg, sizeof msg, "dictionary page in encoding %s", ftl_parquet_encoding_name(h.encoding));
                return pq_page_fail(c, FTL_E_UNSUPPORTED, msg);
            }
            ftl_status st = pq_load_dictionary(&d, p, (size_t)h.uncompressed_size, h.num_values);
            if (st != FTL_OK) return pq_page_fail(c, st, d.err);
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            FTL_TRY(pq_decode_data_page(c, &d, &h, body));
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
    pq_chunk_ctx c = {.f = f, .row_group = row_group, .column = column, .col = &f->columns[column],
                   .chunk = &f->md.row_groups[row_group].chunks[column]};
    out->type = c.col->info.type;
    out->fixed_length = c.col->info.type == FTL_PARQUET_BYTE_ARRAY ? 0 : c.col->info.fixed_length;
    out->rows = 0;
    out->null_count = 0;
    out->data_size = 0;
    out->validity = NULL;
    out->def_levels = NULL;
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
    int max_def = c.col->info.max_definition_level;
    out->validity = out->null_count ? pq_slot(out, SLOT_VALIDITY) : NULL;
    out->def_levels = max_def > 1 ? pq_slot(out, SLOT_DEF_LEVELS) : max_def == 1 ? pq_slot(out, SLOT_VALIDITY) : NULL;
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
        pq_chunk_ctx c = {.f = f, .row_group = row_group, .column = column, .col = &f->columns[column],
                       .chunk = &f->md.row_groups[row_group].chunks[column]};
        size_t len = (size_t)c.chunk->length;
        if (len > cap || !buf) {
            free(buf);
            cap = len;
            buf = malloc(cap + 1);
            if (!buf) st = pq_chunk_fail(&c, FTL_E_NOMEM, "out of memory for %s", "the column chunk");
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
                st = pq_page_fail(&c, FTL_E_FORMAT, err);
                break;
            }
            const uint8_t *body = buf + pos + hs;
            if (!h.has_crc && pages_without_crc) (*pages_without_crc)++;
            else if (h.has_crc && pq_crc32(body, (size_t)h.compressed_size) != h.crc)
                st = pq_page_fail(&c, FTL_E_FORMAT, "page CRC mismatch: the data is corrupt");
            pos += hs + (size_t)h.compressed_size;
        }
    }
    free(buf);
    return st;
}
