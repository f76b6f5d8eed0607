/* Page headers (PageHeader, DataPageHeader, DataPageHeaderV2, DictionaryPageHeader of
 * parquet.thrift): parsing for the reader, DATA_PAGE serialisation for the writer. */
#include "parquet/format.h"

#include <string.h>

static int32_t read_i32_field(thrift_reader *r, int type) {
    if (!thrift_expect(r, type, THRIFT_I32)) return 0;
    return thrift_read_i32(r);
}

static void parse_data_page_header(thrift_reader *r, pq_page_header *h, bool v2) {
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    unsigned seen = 0;
    h->is_compressed = true;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (id > 0 && id < 32) seen |= 1u << id;
        if (id == 1) h->num_values = read_i32_field(r, t);
        else if (!v2 && id == 2) h->encoding = read_i32_field(r, t);
        else if (!v2 && id == 3) h->def_encoding = read_i32_field(r, t);
        else if (!v2 && id == 4) h->rep_encoding = read_i32_field(r, t);
        else if (v2 && id == 2) h->num_nulls = read_i32_field(r, t);
        else if (v2 && id == 3) h->num_rows = read_i32_field(r, t);
        else if (v2 && id == 4) h->encoding = read_i32_field(r, t);
        else if (v2 && id == 5) h->def_length = read_i32_field(r, t);
        else if (v2 && id == 6) h->rep_length = read_i32_field(r, t);
        else if (v2 && id == 7 && (t == THRIFT_BOOL_TRUE || t == THRIFT_BOOL_FALSE)) h->is_compressed = t == THRIFT_BOOL_TRUE;
        else thrift_skip(r, t);
    }
    thrift_leave(r);
    unsigned required = v2 ? 0x7e : 0x1e;
    if (!r->error && (seen & required) != required) thrift_set_error(r, "data page header misses a required field");
}

static void parse_dictionary_page_header(thrift_reader *r, pq_page_header *h) {
    if (!thrift_enter(r)) return;
    int16_t last = 0, id;
    int t;
    unsigned seen = 0;
    while (thrift_next_field(r, &last, &t, &id)) {
        if (id > 0 && id < 32) seen |= 1u << id;
        if (id == 1) h->num_values = read_i32_field(r, t);
        else if (id == 2) h->encoding = read_i32_field(r, t);
        else thrift_skip(r, t);
    }
    thrift_leave(r);
    if (!r->error && (seen & 0x6) != 0x6) thrift_set_error(r, "dictionary page header misses a required field");
}

bool pq_parse_page_header(const uint8_t *data, size_t size, pq_page_header *h, size_t *header_size, const char **err) {
    memset(h, 0, sizeof *h);
    h->type = -1;
    thrift_reader r;
    thrift_reader_init(&r, data, size);
    thrift_enter(&r);
    int16_t last = 0, id;
    int t;
    unsigned seen = 0;
    while (thrift_next_field(&r, &last, &t, &id)) {
        if (id > 0 && id < 32) seen |= 1u << id;
        switch (id) {
        case 1: h->type = read_i32_field(&r, t); break;
        case 2: h->uncompressed_size = read_i32_field(&r, t); break;
        case 3: h->compressed_size = read_i32_field(&r, t); break;
        case 4:
            h->crc = (uint32_t)read_i32_field(&r, t);
            h->has_crc = !r.error;
            break;
        case 5:
        case 8:
            if (!thrift_expect(&r, t, THRIFT_STRUCT)) break;
            if (h->has_data_header || h->has_dictionary_header) {
                thrift_set_error(&r, "page header with two page kinds");
                break;
            }
            parse_data_page_header(&r, h, id == 8);
            h->has_data_header = true;
            break;
        case 7:
            if (!thrift_expect(&r, t, THRIFT_STRUCT)) break;
            if (h->has_data_header || h->has_dictionary_header) {
                thrift_set_error(&r, "page header with two page kinds");
                break;
            }
            parse_dictionary_page_header(&r, h);
            h->has_dictionary_header = true;
            break;
        default: thrift_skip(&r, t);
        }
    }
    thrift_leave(&r);
    if (!r.error && (seen & 0xe) != 0xe) thrift_set_error(&r, "page header misses a required field");
    if (!r.error && (h->uncompressed_size < 0 || h->compressed_size < 0)) thrift_set_error(&r, "page header with a negative size");
    if (!r.error && (h->num_values < 0 || h->num_nulls < 0 || h->num_rows < 0 || h->def_length < 0 || h->rep_length < 0))
        thrift_set_error(&r, "page header with a negative count");
    if (r.error) {
        *err = r.error;
        return false;
    }
    *header_size = (size_t)(r.p - data);
    return true;
}

void pq_write_data_page_header(thrift_writer *w, int32_t uncompressed, int32_t compressed, bool has_crc, uint32_t crc,
                               int32_t num_values) {
    thrift_write_struct_begin(w, 0);
    thrift_write_i32_field(w, 1, PQ_DATA_PAGE);
    thrift_write_i32_field(w, 2, uncompressed);
    thrift_write_i32_field(w, 3, compressed);
    if (has_crc) thrift_write_i32_field(w, 4, (int32_t)crc);
    thrift_write_struct_begin(w, 5);
    thrift_write_i32_field(w, 1, num_values);
    thrift_write_i32_field(w, 2, FTL_PARQUET_ENC_PLAIN);
    /* level encodings: RLE (also for required columns, which have no levels: writers agree) */
    thrift_write_i32_field(w, 3, FTL_PARQUET_ENC_RLE);
    thrift_write_i32_field(w, 4, FTL_PARQUET_ENC_RLE);
    thrift_write_struct_end(w);
    thrift_write_struct_end(w);
}
