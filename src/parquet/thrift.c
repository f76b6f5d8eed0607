/* Thrift compact protocol reader and writer (the subset Parquet uses: no maps are written). */
#include "parquet/thrift.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

void thrift_reader_init(thrift_reader *r, const void *data, size_t size) {
    r->start = r->p = data;
    r->end = r->p + size;
    r->depth = 0;
    r->error = NULL;
    r->error_offset = 0;
}

void thrift_set_error(thrift_reader *r, const char *what) {
    if (!r->error) {
        r->error = what;
        r->error_offset = (size_t)(r->p - r->start);
    }
    r->p = r->end;
}

uint64_t thrift_read_uvarint(thrift_reader *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            thrift_set_error(r, "truncated varint");
            return 0;
        }
        uint8_t b = *r->p++;
        if (shift == 63 && (b & 0x7e)) break; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    thrift_set_error(r, "varint longer than 64 bits");
    return 0;
}

int64_t thrift_read_i64(thrift_reader *r) {
    uint64_t u = thrift_read_uvarint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

int32_t thrift_read_i32(thrift_reader *r) {
    int64_t v = thrift_read_i64(r);
    if (v < INT32_MIN || v > INT32_MAX) {
        thrift_set_error(r, "i32 value out of range");
        return 0;
    }
    return (int32_t)v;
}

int8_t thrift_read_byte(thrift_reader *r) {
    if (r->p >= r->end) {
        thrift_set_error(r, "truncated byte");
        return 0;
    }
    return (int8_t)*r->p++;
}

double thrift_read_double(thrift_reader *r) {
    if (r->end - r->p < 8) {
        thrift_set_error(r, "truncated double");
        return 0;
    }
    double d;
    memcpy(&d, r->p, 8); /* little-endian on the wire and on every target ftl builds for */
    r->p += 8;
    return d;
}

void thrift_read_binary(thrift_reader *r, const uint8_t **data, uint32_t *size) {
    uint64_t n = thrift_read_uvarint(r);
    *data = NULL;
    *size = 0;
    if (r->error) return;
    if (n > (uint64_t)(r->end - r->p)) {
        thrift_set_error(r, "string or binary runs past the end");
        return;
    }
    *data = r->p;
    *size = (uint32_t)n;
    r->p += n;
}

bool thrift_next_field(thrift_reader *r, int16_t *last_id, int *type, int16_t *id) {
    if (r->error) return false;
    if (r->p >= r->end) {
        thrift_set_error(r, "truncated struct (no STOP byte)");
        return false;
    }
    uint8_t b = *r->p++;
    if (b == THRIFT_STOP) return false;
    *type = b & 0x0f;
    int delta = b >> 4;
    if (delta) {
        int next = *last_id + delta;
        if (next > INT16_MAX) {
            thrift_set_error(r, "field id out of range");
            return false;
        }
        *id = (int16_t)next;
    } else {
        int64_t v = thrift_read_i64(r);
        if (v < INT16_MIN || v > INT16_MAX) {
            thrift_set_error(r, "field id out of range");
            return false;
        }
        *id = (int16_t)v;
    }
    if (*type < THRIFT_BOOL_TRUE || *type > THRIFT_STRUCT) {
        thrift_set_error(r, "unknown field type");
        return false;
    }
    *last_id = *id;
    return !r->error;
}

void thrift_read_list_header(thrift_reader *r, int *elem_type, uint32_t *count) {
    *elem_type = 0;
    *count = 0;
    if (r->p >= r->end) {
        thrift_set_error(r, "truncated list header");
        return;
    }
    uint8_t b = *r->p++;
    uint64_t n = b >> 4;
    if (n == 15) n = thrift_read_uvarint(r);
    if (r->error) return;
    if (n > (uint64_t)(r->end - r->p)) {
        thrift_set_error(r, "list longer than the bytes left");
        return;
    }
    *elem_type = b & 0x0f;
    *count = (uint32_t)n;
    if (n && (*elem_type < THRIFT_BOOL_TRUE || *elem_type > THRIFT_STRUCT)) thrift_set_error(r, "unknown list element type");
}

bool thrift_enter(thrift_reader *r) {
    if (++r->depth > THRIFT_MAX_DEPTH) {
        thrift_set_error(r, "structures nested too deeply");
        return false;
    }
    return !r->error;
}

void thrift_leave(thrift_reader *r) { r->depth--; }

void thrift_skip(thrift_reader *r, int type) {
    if (r->error) return;
    switch (type) {
    case THRIFT_BOOL_TRUE:
    case THRIFT_BOOL_FALSE: return; /* a bool field carries its value in the type */
    case THRIFT_BYTE: thrift_read_byte(r); return;
    case THRIFT_I16:
    case THRIFT_I32:
    case THRIFT_I64: thrift_read_uvarint(r); return;
    case THRIFT_DOUBLE: thrift_read_double(r); return;
    case THRIFT_BINARY: {
        const uint8_t *d;
        uint32_t n;
        thrift_read_binary(r, &d, &n);
        return;
    }
    case THRIFT_LIST:
    case THRIFT_SET: {
        int et;
        uint32_t n;
        thrift_read_list_header(r, &et, &n);
        if (!thrift_enter(r)) return;
        for (uint32_t i = 0; i < n && !r->error; i++) {
            if (et == THRIFT_BOOL_TRUE || et == THRIFT_BOOL_FALSE) thrift_read_byte(r); /* one byte each in lists */
            else thrift_skip(r, et);
        }
        thrift_leave(r);
        return;
    }
    case THRIFT_MAP: {
        uint64_t n = thrift_read_uvarint(r);
        if (r->error || n == 0) return;
        if (n > (uint64_t)(r->end - r->p)) {
            thrift_set_error(r, "map longer than the bytes left");
            return;
        }
        uint8_t kv = (uint8_t)thrift_read_byte(r);
        if (!thrift_enter(r)) return;
        for (uint64_t i = 0; i < n && !r->error; i++) {
            int kt = kv >> 4, vt = kv & 0x0f;
            if (kt == THRIFT_BOOL_TRUE || kt == THRIFT_BOOL_FALSE) thrift_read_byte(r);
            else thrift_skip(r, kt);
            if (vt == THRIFT_BOOL_TRUE || vt == THRIFT_BOOL_FALSE) thrift_read_byte(r);
            else thrift_skip(r, vt);
        }
        thrift_leave(r);
        return;
    }
    case THRIFT_STRUCT: {
        if (!thrift_enter(r)) return;
        int16_t last = 0, id;
        int t;
        while (thrift_next_field(r, &last, &t, &id)) thrift_skip(r, t);
        thrift_leave(r);
        return;
    }
    default: thrift_set_error(r, "unknown value type");
    }
}

bool thrift_expect(thrift_reader *r, int type, int want) {
    if (type == want) return true;
    if (want == THRIFT_BOOL_TRUE && type == THRIFT_BOOL_FALSE) return true;
    thrift_set_error(r, "field has an unexpected wire type");
    return false;
}

/* ---- writer ---- */

static void reserve(thrift_writer *w, size_t extra) {
    if (w->size + extra <= w->cap) return;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->size + extra) cap *= 2;
    w->data = ftl_xrealloc(w->data, cap);
    w->cap = cap;
}

void thrift_writer_reset(thrift_writer *w) {
    w->size = 0;
    w->depth = 0;
    w->last_id[0] = 0;
}

void thrift_writer_free(thrift_writer *w) {
    free(w->data);
    memset(w, 0, sizeof *w);
}

void thrift_write_bytes(thrift_writer *w, const void *data, size_t size) {
    reserve(w, size);
    if (size) memcpy(w->data + w->size, data, size);
    w->size += size;
}

void thrift_write_uvarint(thrift_writer *w, uint64_t v) {
    reserve(w, 10);
    while (v >= 0x80) {
        w->data[w->size++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->data[w->size++] = (uint8_t)v;
}

void thrift_write_zigzag(thrift_writer *w, int64_t v) {
    thrift_write_uvarint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void thrift_write_field_header(thrift_writer *w, int16_t id, int type) {
    int16_t *last = &w->last_id[w->depth];
    int delta = id - *last;
    if (delta > 0 && delta <= 15) {
        uint8_t b = (uint8_t)(delta << 4 | type);
        thrift_write_bytes(w, &b, 1);
    } else {
        uint8_t b = (uint8_t)type;
        thrift_write_bytes(w, &b, 1);
        thrift_write_zigzag(w, id);
    }
    *last = id;
}

void thrift_write_i32_field(thrift_writer *w, int16_t id, int32_t v) {
    thrift_write_field_header(w, id, THRIFT_I32);
    thrift_write_zigzag(w, v);
}

void thrift_write_i64_field(thrift_writer *w, int16_t id, int64_t v) {
    thrift_write_field_header(w, id, THRIFT_I64);
    thrift_write_zigzag(w, v);
}

void thrift_write_bool_field(thrift_writer *w, int16_t id, bool v) {
    thrift_write_field_header(w, id, v ? THRIFT_BOOL_TRUE : THRIFT_BOOL_FALSE);
}

void thrift_write_binary(thrift_writer *w, const void *data, size_t size) {
    thrift_write_uvarint(w, size);
    thrift_write_bytes(w, data, size);
}

void thrift_write_binary_field(thrift_writer *w, int16_t id, const void *data, size_t size) {
    thrift_write_field_header(w, id, THRIFT_BINARY);
    thrift_write_binary(w, data, size);
}

void thrift_write_string_field(thrift_writer *w, int16_t id, const char *s) {
    thrift_write_binary_field(w, id, s, strlen(s));
}

void thrift_write_struct_begin(thrift_writer *w, int16_t field_id) {
    if (field_id > 0) thrift_write_field_header(w, field_id, THRIFT_STRUCT);
    if (w->depth + 1 < THRIFT_MAX_DEPTH) w->depth++;
    w->last_id[w->depth] = 0;
}

void thrift_write_struct_end(thrift_writer *w) {
    uint8_t stop = THRIFT_STOP;
    thrift_write_bytes(w, &stop, 1);
    if (w->depth > 0) w->depth--;
}

void thrift_write_list_begin(thrift_writer *w, int16_t field_id, int elem_type, uint32_t count) {
    thrift_write_field_header(w, field_id, THRIFT_LIST);
    if (count < 15) {
        uint8_t b = (uint8_t)(count << 4 | elem_type);
        thrift_write_bytes(w, &b, 1);
    } else {
        uint8_t b = (uint8_t)(0xf0 | elem_type);
        thrift_write_bytes(w, &b, 1);
        thrift_write_uvarint(w, count);
    }
}
