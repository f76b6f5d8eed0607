/* ftl_parquet_read_value: one row's value, reading only the page that holds it. The page is
 * found in the chunk's page map (page_map.c), read with one pread, checked (header against the
 * map, CRC), decompressed, and its definition levels decoded up to the row. Byte arrays in PLAIN
 * or dictionary encoding (encoded images) are then located in place: skipping the lengths of
 * the values before the row, or decoding the dictionary indices up to it. Other encodings and
 * types decode the page whole with the chunk reader's decoders and pick the row. */
#include "parquet/column_decode.h"
#include "parquet/encoding.h"
#include "parquet/page_map.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Index of the page holding `row`: the last one starting at or before it. */
static int64_t find_page(const pq_page_map *m, int64_t row) {
    int64_t lo = 0, hi = m->page_count - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (m->pages[mid].first_row <= row) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Reads the page into SLOT_CHUNK and checks its header against the map. */
static ftl_status read_page(pq_chunk_ctx *c, ftl_parquet_column_values *v, const pq_page_loc *loc, int64_t rows, pq_page_header *h,
                            const uint8_t **body) {
    c->page_offset = (uint64_t)loc->offset;
    if (!pq_slot_reserve(v, SLOT_CHUNK, (size_t)loc->length, false)) return pq_page_fail(c, FTL_E_NOMEM, "out of memory for the page");
    uint8_t *raw = pq_slot(v, SLOT_CHUNK);
    FTL_TRY(pq_pread_full(c->f, raw, (size_t)loc->length, (uint64_t)loc->offset));
    size_t hs;
    const char *err;
    if (!pq_parse_page_header(raw, (size_t)loc->length, h, &hs, &err)) {
        char msg[160];
        snprintf(msg, sizeof msg, "corrupt page header: %s", err);
        return pq_page_fail(c, FTL_E_FORMAT, msg);
    }
    if ((h->type != PQ_DATA_PAGE && h->type != PQ_DATA_PAGE_V2) || !h->has_data_header)
        return pq_page_fail(c, FTL_E_FORMAT, "not a data page, where the page index puts one");
    if ((int64_t)hs + h->compressed_size != loc->length)
        return pq_page_fail(c, FTL_E_FORMAT, "the page's size differs from the page index's");
    if (h->num_values != rows) {
        char msg[160];
        snprintf(msg, sizeof msg, "the page holds %lld values, its place in the chunk says %lld", (long long)h->num_values, (long long)rows);
        return pq_page_fail(c, FTL_E_FORMAT, msg);
    }
    if (h->type == PQ_DATA_PAGE_V2 && h->num_rows != h->num_values)
        return pq_page_fail(c, FTL_E_FORMAT, "v2 page's row and value counts differ in a column outside lists");
    *body = raw + hs;
    return pq_page_check_crc(c, h, *body);
}

static ftl_status set_value(ftl_parquet_value *out, ftl_parquet_column_values *v, const uint8_t *data, int64_t size, bool copy) {
    if (copy) { /* a dictionary entry: copied, so the value lives in the struct's own buffer */
        if (!pq_slot_reserve(v, SLOT_DATA, (size_t)size, false)) return ftl_fail(FTL_E_NOMEM, "out of memory for a value");
        if (size) memcpy(pq_slot(v, SLOT_DATA), data, (size_t)size);
        data = pq_slot(v, SLOT_DATA);
    }
    out->is_null = false;
    out->data = data;
    out->size = size;
    return FTL_OK;
}

/* Byte arrays in PLAIN or dictionary encoding: the value is found without decoding the others. */
static ftl_status locate_byte_array(pq_chunk_ctx *c, const pq_decoder *d, const pq_page_header *h, const uint8_t *body, int64_t idx,
                                    ftl_parquet_value *out) {
    ftl_parquet_column_values *v = d->out;
    int max_def = c->col->info.max_definition_level;
    pq_page_parts parts;
    FTL_TRY(pq_page_split(c, v, h, body, &parts));
    int64_t before = idx; /* values stored before the row's */
    if (max_def > 0) {
        if (!pq_slot_reserve(v, SLOT_DEF_LEVELS, (size_t)idx + 1, false)) return pq_page_fail(c, FTL_E_NOMEM, "out of memory for levels");
        uint8_t *levels = pq_slot(v, SLOT_DEF_LEVELS);
        FTL_TRY(pq_page_def_levels(c, h, &parts, idx + 1, levels));
        out->def_level = levels[idx];
        if (levels[idx] < max_def) return FTL_OK;
        before = 0;
        for (int64_t r = 0; r < idx; r++) before += levels[r] == max_def;
    }
    const uint8_t *p = parts.values;
    size_t n = parts.values_len;
    if (h->encoding == FTL_PARQUET_ENC_PLAIN) {
        size_t pos = 0;
        for (int64_t i = 0;; i++) {
            if (n - pos < 4) return pq_page_fail(c, FTL_E_FORMAT, "PLAIN values: page holds fewer values than its value count");
            uint32_t len = load_u32(p + pos);
            if (len > n - pos - 4) return pq_page_fail(c, FTL_E_FORMAT, "PLAIN values: byte array value runs past the page");
            if (i == before) return set_value(out, v, p + pos + 4, len, false);
            pos += 4 + (size_t)len;
        }
    }
    /* dictionary indices: a bit width, then the RLE / bit-packed hybrid */
    if (!d->has_dict) return pq_page_fail(c, FTL_E_FORMAT, "dictionary-encoded page without a dictionary page");
    if (n < 1 || p[0] > 32) return pq_page_fail(c, FTL_E_FORMAT, "dictionary-encoded page without a valid bit width");
    if (!pq_slot_reserve(v, SLOT_SCRATCH_A, ((size_t)before + 1) * 4, false))
        return pq_page_fail(c, FTL_E_NOMEM, "out of memory for dictionary indices");
    uint32_t *indices = pq_slot(v, SLOT_SCRATCH_A);
    pq_rle_decoder rle;
    pq_rle_init(&rle, p + 1, n - 1, p[0]);
    if (!pq_rle_decode_u32(&rle, indices, (size_t)before + 1)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s values: %s", ftl_parquet_encoding_name(h->encoding), rle.error);
        return pq_page_fail(c, FTL_E_FORMAT, msg);
    }
    uint32_t k = indices[before];
    if ((int64_t)k >= d->dict_count) return pq_page_fail(c, FTL_E_FORMAT, "dictionary index out of range");
    uint64_t e = d->dict_entries[k];
    return set_value(out, v, d->dict_data + (e >> 32), (uint32_t)e, true);
}

/* Row idx of a page decoded whole into v's buffers. */
static ftl_status pick_decoded(const ftl_parquet_column_info *info, ftl_parquet_column_values *v, int64_t idx, ftl_parquet_value *out) {
    int max_def = info->max_definition_level;
    if (max_def > 0) {
        out->def_level = ((const uint8_t *)pq_slot(v, max_def == 1 ? SLOT_VALIDITY : SLOT_DEF_LEVELS))[idx];
        if (out->def_level < max_def) return FTL_OK;
    }
    if (info->type == FTL_PARQUET_BYTE_ARRAY) {
        const int64_t *offsets = pq_slot(v, SLOT_VALUES);
        return set_value(out, v, (const uint8_t *)pq_slot(v, SLOT_DATA) + offsets[idx], offsets[idx + 1] - offsets[idx], false);
    }
    return set_value(out, v, (const uint8_t *)pq_slot(v, SLOT_VALUES) + (size_t)idx * (size_t)info->fixed_length,
                     info->fixed_length, false);
}

/* Any other page (and a page asked for twice in a row): decoded whole into the struct's buffers,
 * then the row picked. */
static ftl_status decode_whole_page(pq_chunk_ctx *c, pq_decoder *d, const pq_page_header *h, const uint8_t *body, int64_t idx,
                                    ftl_parquet_value *out) {
    ftl_parquet_column_values *v = d->out;
    FTL_TRY(pq_ensure_rows(c, d, h->num_values));
    v->null_count = 0;
    v->data_size = 0;
    if (d->type == FTL_PARQUET_BYTE_ARRAY) ((int64_t *)pq_slot(v, SLOT_VALUES))[0] = 0;
    FTL_TRY(pq_decode_data_page(c, d, h, body));
    return pick_decoded(&c->col->info, v, idx, out);
}

/* What an ftl_parquet_value keeps between calls: its buffers, and which page they hold. A page
 * asked for again right after (rows read in the order they are stored) is decoded whole once and
 * its rows picked from it, instead of being read again for each row. */
typedef struct value_state {
    ftl_parquet_column_values v;
    uint64_t file;           /* the open file's id (an address may be reused by a later open) */
    int row_group, column;
    int64_t page;            /* the page asked for last (-1: none) */
    bool decoded;            /* that page is decoded whole in v */
} value_state;

ftl_status ftl_parquet_read_value(ftl_parquet_file *f, int row_group, int column, int64_t row, ftl_parquet_value *out) {
    if (!f || !out) return ftl_fail(FTL_E_INVALID_ARG, "ftl_parquet_read_value: NULL argument");
    out->is_null = true;
    out->def_level = 0;
    out->data = NULL;
    out->size = 0;
    if (row_group < 0 || row_group >= f->md.row_group_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: row group %d out of range (the file has %d)", f->path, row_group, f->md.row_group_count);
    if (column < 0 || column >= f->column_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: column %d out of range (the file has %d)", f->path, column, f->column_count);
    int64_t rows = f->md.row_groups[row_group].num_rows;
    if (row < 0 || row >= rows)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: row group %d: row %lld out of range (it has %lld rows)", f->path, row_group, (long long)row,
                        (long long)rows);
    pq_chunk_ctx c = {.f = f, .row_group = row_group, .column = column, .col = &f->columns[column],
                      .chunk = &f->md.row_groups[row_group].chunks[column]};
    FTL_TRY(pq_chunk_check_readable(&c));
    const pq_page_map *m;
    FTL_TRY(pq_page_map_get(&c, &m));
    int64_t p = find_page(m, row);
    const pq_page_loc *loc = &m->pages[p];
    int64_t page_rows = (p + 1 < m->page_count ? m->pages[p + 1].first_row : m->rows) - loc->first_row;
    if (!out->priv_) {
        value_state *fresh = ftl_xcalloc(1, sizeof *fresh);
        fresh->page = -1;
        out->priv_ = fresh;
    }
    value_state *state = out->priv_;
    ftl_parquet_column_values *v = &state->v;
    bool same_page = state->file == f->open_id && state->row_group == row_group && state->column == column && state->page == p;
    if (same_page && state->decoded) return pick_decoded(&c.col->info, v, row - loc->first_row, out);
    *state = (value_state){.v = state->v, .file = f->open_id, .row_group = row_group, .column = column, .page = p};
    pq_page_header h;
    const uint8_t *body = NULL;
    FTL_TRY(read_page(&c, v, loc, page_rows, &h, &body));
    pq_decoder d;
    memset(&d, 0, sizeof d);
    d.out = v;
    d.type = c.col->info.type;
    d.width = c.col->info.fixed_length;
    if (h.encoding == FTL_PARQUET_ENC_PLAIN_DICTIONARY || h.encoding == FTL_PARQUET_ENC_RLE_DICTIONARY) {
        const pq_dictionary *dict;
        FTL_TRY(pq_page_map_dictionary(&c, m, &dict));
        c.page_offset = (uint64_t)loc->offset;
        if (dict) {
            d.has_dict = true;
            d.dict_count = dict->d.dict_count;
            d.dict_fixed = dict->d.dict_fixed;
            d.dict_entries = dict->d.dict_entries;
            d.dict_data = dict->d.dict_data;
        }
    }
    /* a first visit locates a byte array in place; a second one in a row decodes the page for the rest */
    bool in_place = !same_page && d.type == FTL_PARQUET_BYTE_ARRAY && (h.encoding == FTL_PARQUET_ENC_PLAIN || d.has_dict);
    ftl_status st = in_place ? locate_byte_array(&c, &d, &h, body, row - loc->first_row, out)
                             : decode_whole_page(&c, &d, &h, body, row - loc->first_row, out);
    state->decoded = st == FTL_OK && !in_place;
    if (st != FTL_OK) {
        out->is_null = true;
        out->data = NULL;
        out->size = 0;
    }
    return st;
}

void ftl_parquet_value_free(ftl_parquet_value *v) {
    if (!v) return;
    value_state *state = v->priv_;
    if (state) ftl_parquet_column_values_free(&state->v);
    free(v->priv_);
    memset(v, 0, sizeof *v);
}
