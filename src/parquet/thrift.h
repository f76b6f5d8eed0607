/* Thrift compact protocol: the encoding of Parquet's footer and page headers.
 *
 * The reader is bounds-checked and keeps a sticky error: after the first problem every read
 * returns 0 and the caller checks `error` once at the end of a struct. List counts are bounded
 * by the bytes left (every element takes at least one byte), and nesting by a depth limit, so a
 * corrupt footer can neither loop nor allocate much. */
#ifndef FTL_PARQUET_THRIFT_H
#define FTL_PARQUET_THRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    THRIFT_STOP = 0,
    THRIFT_BOOL_TRUE = 1,
    THRIFT_BOOL_FALSE = 2,
    THRIFT_BYTE = 3,
    THRIFT_I16 = 4,
    THRIFT_I32 = 5,
    THRIFT_I64 = 6,
    THRIFT_DOUBLE = 7,
    THRIFT_BINARY = 8,
    THRIFT_LIST = 9,
    THRIFT_SET = 10,
    THRIFT_MAP = 11,
    THRIFT_STRUCT = 12,
};

enum { THRIFT_MAX_DEPTH = 32 };

typedef struct thrift_reader {
    const uint8_t *start, *p, *end;
    int depth;
    const char *error;       /* first problem (a static string), NULL while fine */
    size_t error_offset;     /* byte offset of the problem from `start` */
} thrift_reader;

void thrift_reader_init(thrift_reader *r, const void *data, size_t size);
/* Records the first error and makes every later read fail. */
void thrift_set_error(thrift_reader *r, const char *what);

uint64_t thrift_read_uvarint(thrift_reader *r);
int64_t thrift_read_i64(thrift_reader *r);  /* zigzag varint */
int32_t thrift_read_i32(thrift_reader *r);  /* zigzag varint, range-checked */
int8_t thrift_read_byte(thrift_reader *r);
double thrift_read_double(thrift_reader *r);
/* A length-prefixed byte string; *data points into the input. */
void thrift_read_binary(thrift_reader *r, const uint8_t **data, uint32_t *size);

/* Next field of the current struct: false at the STOP byte (or on error). *last_id carries the
 * previous field id of this struct (start it at 0). Bool fields: the value is in *type
 * (THRIFT_BOOL_TRUE / THRIFT_BOOL_FALSE). */
bool thrift_next_field(thrift_reader *r, int16_t *last_id, int *type, int16_t *id);
/* List or set header: element type and count (count <= bytes left). */
void thrift_read_list_header(thrift_reader *r, int *elem_type, uint32_t *count);
/* Skips one value of the given type (structs, lists and maps recursively, depth-limited). */
void thrift_skip(thrift_reader *r, int type);
/* Struct nesting guard: call on entering / leaving a struct value. */
bool thrift_enter(thrift_reader *r);
void thrift_leave(thrift_reader *r);
/* A field read with the wrong wire type is an error (and skipped). */
bool thrift_expect(thrift_reader *r, int type, int want);

/* ---- writer: appends to a growable buffer ---- */
typedef struct thrift_writer {
    uint8_t *data;
    size_t size, cap;
    int16_t last_id[THRIFT_MAX_DEPTH];
    int depth;
} thrift_writer;

void thrift_writer_reset(thrift_writer *w);  /* empties the buffer, keeps its memory */
void thrift_writer_free(thrift_writer *w);
void thrift_write_bytes(thrift_writer *w, const void *data, size_t size);
void thrift_write_uvarint(thrift_writer *w, uint64_t v);
void thrift_write_zigzag(thrift_writer *w, int64_t v);
void thrift_write_field_header(thrift_writer *w, int16_t id, int type);
void thrift_write_i32_field(thrift_writer *w, int16_t id, int32_t v);
void thrift_write_i64_field(thrift_writer *w, int16_t id, int64_t v);
void thrift_write_bool_field(thrift_writer *w, int16_t id, bool v);
void thrift_write_binary_field(thrift_writer *w, int16_t id, const void *data, size_t size);
void thrift_write_string_field(thrift_writer *w, int16_t id, const char *s);
void thrift_write_binary(thrift_writer *w, const void *data, size_t size); /* list element */
/* Struct as a field (field_id > 0) or as a list element (field_id 0); closed by _end (STOP). */
void thrift_write_struct_begin(thrift_writer *w, int16_t field_id);
void thrift_write_struct_end(thrift_writer *w);
void thrift_write_list_begin(thrift_writer *w, int16_t field_id, int elem_type, uint32_t count);

#endif
