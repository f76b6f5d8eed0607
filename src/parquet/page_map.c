/* Page maps of column chunks for single-value reads: from the chunk's OffsetIndex (one small
 * read) when the file has one that is consistent with the chunk, else by walking the page
 * headers with positioned reads through a small window (the page bodies are never read). Maps
 * and dictionaries are built without holding the file's lock and installed under it; a thread
 * that loses the race frees its copy, so readers never wait on another thread's I/O. */
#include "parquet/page_map.h"
#include "parquet/thrift.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

enum { WINDOW_MIN = 16 << 10 };  /* bytes read around a page header (headers are ~30-200 bytes) */

typedef struct window {
    uint8_t *buf;
    size_t cap, len;
    int64_t start;               /* file offset of buf[0] */
} window;

static ftl_status window_fill(const pq_chunk_ctx *c, window *w, int64_t pos, size_t len) {
    if (len > w->cap) {
        free(w->buf);
        w->buf = malloc(len);
        w->cap = w->buf ? len : 0;
        if (!w->buf) return pq_chunk_fail(c, FTL_E_NOMEM, "out of memory for %s", "a page header");
    }
    w->start = pos;
    w->len = 0;
    FTL_TRY(pq_pread_full(c->f, w->buf, len, (uint64_t)pos));
    w->len = len;
    return FTL_OK;
}

/* Parses the page header at file offset pos (< end), reading more of the chunk while the
 * header runs past what the window holds. */
static ftl_status header_at(pq_chunk_ctx *c, window *w, int64_t pos, int64_t end, pq_page_header *h, size_t *hs) {
    c->page_offset = (uint64_t)pos;
    size_t avail = pos >= w->start && pos < w->start + (int64_t)w->len ? (size_t)(w->start + (int64_t)w->len - pos) : 0;
    const char *err = "no bytes";
    for (;;) {
        if (avail > 0 && pq_parse_page_header(w->buf + (pos - w->start), avail, h, hs, &err)) return FTL_OK;
        size_t left = (size_t)(end - pos);
        if (avail >= left) break; /* the rest of the chunk does not hold a header: corrupt */
        size_t want = avail * 4 > WINDOW_MIN ? avail * 4 : WINDOW_MIN;
        FTL_TRY(window_fill(c, w, pos, want < left ? want : left));
        avail = w->len;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "corrupt page header: %s", err);
    return pq_page_fail(c, FTL_E_FORMAT, msg);
}

static void push_page(pq_page_map *m, int64_t *cap, pq_page_loc loc) {
    if (m->page_count == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        m->pages = ftl_xrealloc(m->pages, (size_t)*cap * sizeof *m->pages);
    }
    m->pages[m->page_count++] = loc;
}

/* The checks of a whole-chunk read's first pass: the pages tile the chunk, at most one
 * dictionary page comes first, the data pages hold exactly the row group's rows. */
static ftl_status walk_headers(pq_chunk_ctx *c, pq_page_map *m) {
    const pq_chunk *ch = c->chunk;
    int64_t pos = ch->start, end = ch->start + ch->length, values = 0, cap = 0;
    window w = {0};
    ftl_status st = FTL_OK;
    while (pos < end && st == FTL_OK) {
        pq_page_header h;
        size_t hs;
        st = header_at(c, &w, pos, end, &h, &hs);
        if (st != FTL_OK) break;
        int64_t size = (int64_t)hs + h.compressed_size;
        if (h.compressed_size > end - pos - (int64_t)hs) {
            st = pq_page_fail(c, FTL_E_FORMAT, "page runs past the end of the column chunk");
        } else if (h.type == PQ_DICTIONARY_PAGE) {
            if (!h.has_dictionary_header) st = pq_page_fail(c, FTL_E_FORMAT, "dictionary page without a dictionary header");
            else if (m->has_dictionary || m->page_count) st = pq_page_fail(c, FTL_E_FORMAT, "dictionary page after other pages");
            m->has_dictionary = true;
            m->dict = (pq_page_loc){pos, size, 0};
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            if (!h.has_data_header) st = pq_page_fail(c, FTL_E_FORMAT, "data page without a data page header");
            else if (h.type == PQ_DATA_PAGE_V2 && h.num_rows != h.num_values)
                st = pq_page_fail(c, FTL_E_FORMAT, "v2 page's row and value counts differ in a column outside lists");
            push_page(m, &cap, (pq_page_loc){pos, size, values});
            values += h.num_values;
            if (values > m->rows) break;
        }
        pos += size;
    }
    free(w.buf);
    if (st == FTL_OK && values != m->rows) {
        char msg[160];
        snprintf(msg, sizeof msg, "its pages hold %s%lld values but the row group has %lld rows", values > m->rows ? "at least " : "",
                 (long long)values, (long long)m->rows);
        st = pq_chunk_fail(c, FTL_E_FORMAT, "%s", msg);
    }
    return st;
}

/* PageLocation list of an OffsetIndex; false when it does not parse. */
static bool parse_offset_index(const uint8_t *data, size_t size, pq_page_map *m) {
    thrift_reader r;
    thrift_reader_init(&r, data, size);
    thrift_enter(&r);
    int16_t last = 0, id;
    int t;
    bool seen = false;
    int64_t cap = 0;
    while (thrift_next_field(&r, &last, &t, &id)) {
        if (id != 1 || t != THRIFT_LIST || seen) {
            thrift_skip(&r, t);
            continue;
        }
        seen = true;
        int et;
        uint32_t n;
        thrift_read_list_header(&r, &et, &n);
        if (n && et != THRIFT_STRUCT) thrift_set_error(&r, "page locations are not structs");
        for (uint32_t i = 0; i < n && !r.error; i++) {
            pq_page_loc loc = {-1, -1, -1};
            if (!thrift_enter(&r)) break;
            int16_t l2 = 0, f;
            int t2;
            while (thrift_next_field(&r, &l2, &t2, &f)) {
                if (f == 1 && t2 == THRIFT_I64) loc.offset = thrift_read_i64(&r);
                else if (f == 2 && t2 == THRIFT_I32) loc.length = thrift_read_i32(&r);
                else if (f == 3 && t2 == THRIFT_I64) loc.first_row = thrift_read_i64(&r);
                else thrift_skip(&r, t2);
            }
            thrift_leave(&r);
            push_page(m, &cap, loc);
        }
    }
    thrift_leave(&r);
    return seen && !r.error;
}

/* The pages of the chunk's OffsetIndex, when it has one that fits the chunk: inside it, in
 * order, not overlapping, first rows rising from 0 below the row count; whatever precedes the
 * first data page must be one dictionary page. False (m left empty) otherwise: then the headers
 * are walked. I/O errors also fall back to the walk, which reports them. */
static bool from_offset_index(pq_chunk_ctx *c, pq_page_map *m) {
    const pq_chunk *ch = c->chunk;
    const ftl_parquet_file *f = c->f;
    if (!ch->has_offset_index || ch->offset_index_offset < 4 ||
        (uint64_t)ch->offset_index_offset + (uint64_t)ch->offset_index_length > f->footer_start)
        return false;
    uint8_t *buf = malloc((size_t)ch->offset_index_length);
    bool ok = buf && pq_pread_full(f, buf, (size_t)ch->offset_index_length, (uint64_t)ch->offset_index_offset) == FTL_OK &&
              parse_offset_index(buf, (size_t)ch->offset_index_length, m);
    free(buf);
    int64_t start = ch->start, end = ch->start + ch->length;
    ok = ok && (m->page_count > 0 ? m->pages[0].first_row == 0 : m->rows == 0);
    for (int64_t i = 0; ok && i < m->page_count; i++) {
        const pq_page_loc *p = &m->pages[i];
        ok = p->offset >= start && p->length > 0 && p->length <= end - p->offset && p->first_row >= 0 && p->first_row < m->rows &&
             (i == 0 || (p->offset >= m->pages[i - 1].offset + m->pages[i - 1].length && p->first_row > m->pages[i - 1].first_row));
    }
    if (ok && m->page_count > 0 && m->pages[0].offset > start) {
        window w = {0};
        pq_page_header h;
        size_t hs;
        ok = header_at(c, &w, start, m->pages[0].offset, &h, &hs) == FTL_OK && h.type == PQ_DICTIONARY_PAGE && h.has_dictionary_header &&
             h.compressed_size <= m->pages[0].offset - start - (int64_t)hs;
        free(w.buf);
        ftl_clear_error();
        m->has_dictionary = ok;
        m->dict = (pq_page_loc){start, ok ? (int64_t)hs + h.compressed_size : 0, 0};
    }
    if (!ok) {
        free(m->pages);
        m->pages = NULL;
        m->page_count = 0;
        m->has_dictionary = false;
    }
    return ok;
}

ftl_status pq_page_map_build(pq_chunk_ctx *c, bool use_offset_index, pq_page_map **out) {
    *out = NULL;
    pq_page_map *m = ftl_xcalloc(1, sizeof *m);
    m->rows = c->f->md.row_groups[c->row_group].num_rows;
    if (c->chunk->num_values != m->rows) {
        char msg[128];
        snprintf(msg, sizeof msg, "the chunk has %lld values but the row group has %lld rows", (long long)c->chunk->num_values,
                 (long long)m->rows);
        free(m);
        return pq_chunk_fail(c, FTL_E_FORMAT, "%s", msg);
    }
    m->from_offset_index = use_offset_index && from_offset_index(c, m);
    if (!m->from_offset_index) {
        ftl_status st = walk_headers(c, m);
        if (st != FTL_OK) {
            pq_page_map_free(m);
            return st;
        }
    }
    *out = m;
    return FTL_OK;
}

void pq_page_map_free(pq_page_map *m) {
    if (!m) return;
    if (m->dictionary) ftl_parquet_column_values_free(&m->dictionary->bufs);
    free(m->dictionary);
    free(m->pages);
    free(m);
}

void pq_page_cache_free(ftl_parquet_file *f) {
    if (!f->page_maps) return;
    size_t n = (size_t)f->md.row_group_count * (size_t)f->column_count;
    for (size_t i = 0; i < n; i++) pq_page_map_free(f->page_maps[i]);
    free(f->page_maps);
    f->page_maps = NULL;
}

ftl_status pq_page_map_get(pq_chunk_ctx *c, const pq_page_map **out) {
    ftl_parquet_file *f = c->f;
    size_t slot = (size_t)c->row_group * (size_t)f->column_count + (size_t)c->column;
    pthread_mutex_lock(&f->cache_lock);
    if (!f->page_maps) f->page_maps = ftl_xcalloc((size_t)f->md.row_group_count * (size_t)f->column_count, sizeof *f->page_maps);
    pq_page_map *m = f->page_maps[slot];
    pthread_mutex_unlock(&f->cache_lock);
    if (!m) {
        FTL_TRY(pq_page_map_build(c, true, &m));
        pthread_mutex_lock(&f->cache_lock);
        if (f->page_maps[slot]) { /* another thread was faster */
            pq_page_map_free(m);
            m = f->page_maps[slot];
        } else {
            f->page_maps[slot] = m;
        }
        pthread_mutex_unlock(&f->cache_lock);
    }
    *out = m;
    return FTL_OK;
}

static ftl_status load_dictionary(pq_chunk_ctx *c, const pq_page_map *m, pq_dictionary *dict) {
    ftl_parquet_column_values *v = &dict->bufs;
    c->page_offset = (uint64_t)m->dict.offset;
    if (!pq_slot_reserve(v, SLOT_CHUNK, (size_t)m->dict.length, false))
        return pq_page_fail(c, FTL_E_NOMEM, "out of memory for the dictionary page");
    uint8_t *raw = pq_slot(v, SLOT_CHUNK);
    FTL_TRY(pq_pread_full(c->f, raw, (size_t)m->dict.length, (uint64_t)m->dict.offset));
    pq_page_header h;
    size_t hs;
    const char *err;
    if (!pq_parse_page_header(raw, (size_t)m->dict.length, &h, &hs, &err)) return pq_page_fail(c, FTL_E_FORMAT, err);
    if (h.type != PQ_DICTIONARY_PAGE || (int64_t)hs + h.compressed_size != m->dict.length)
        return pq_page_fail(c, FTL_E_FORMAT, "the dictionary page changed while the file was open");
    FTL_TRY(pq_page_check_crc(c, &h, raw + hs));
    if (h.encoding != FTL_PARQUET_ENC_PLAIN && h.encoding != FTL_PARQUET_ENC_PLAIN_DICTIONARY) {
        char msg[96];
        snprintf(msg, sizeof msg, "dictionary page in encoding %s", ftl_parquet_encoding_name(h.encoding));
        return pq_page_fail(c, FTL_E_UNSUPPORTED, msg);
    }
    const uint8_t *p;
    FTL_TRY(pq_page_payload(c, v, SLOT_DICT_PAGE, raw + hs, (size_t)h.compressed_size, (size_t)h.uncompressed_size, true, &p));
    dict->d.out = v;
    dict->d.type = c->col->info.type;
    dict->d.width = c->col->info.fixed_length;
    ftl_status st = pq_load_dictionary(&dict->d, p, (size_t)h.uncompressed_size, h.num_values);
    return st == FTL_OK ? st : pq_page_fail(c, st, dict->d.err);
}

ftl_status pq_page_map_dictionary(pq_chunk_ctx *c, const pq_page_map *map, const pq_dictionary **out) {
    pq_page_map *m = (pq_page_map *)map; /* only the dictionary slot changes, under the lock */
    *out = NULL;
    if (!m->has_dictionary) return FTL_OK;
    ftl_parquet_file *f = c->f;
    pthread_mutex_lock(&f->cache_lock);
    pq_dictionary *dict = m->dictionary;
    pthread_mutex_unlock(&f->cache_lock);
    if (!dict) {
        dict = ftl_xcalloc(1, sizeof *dict);
        ftl_status st = load_dictionary(c, m, dict);
        if (st != FTL_OK) {
            ftl_parquet_column_values_free(&dict->bufs);
            free(dict);
            return st;
        }
        pthread_mutex_lock(&f->cache_lock);
        if (m->dictionary) {
            ftl_parquet_column_values_free(&dict->bufs);
            free(dict);
            dict = m->dictionary;
        } else {
            m->dictionary = dict;
        }
        pthread_mutex_unlock(&f->cache_lock);
    }
    *out = dict;
    return FTL_OK;
}
