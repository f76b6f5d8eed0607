/* JSON: a streaming writer (metadata, --json outputs, logs) and a small bounds-checked DOM
 * parser (safetensors headers, Parquet key-value metadata, references in tests). */
#ifndef FTL_UTIL_JSON_H
#define FTL_UTIL_JSON_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- writer: appends to a growable string buffer ---- */
typedef struct ftl_strbuf {
    char *data;
    size_t len, cap;
} ftl_strbuf;

void ftl_strbuf_append(ftl_strbuf *b, const char *s, size_t n);
void ftl_strbuf_printf(ftl_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ftl_strbuf_free(ftl_strbuf *b);
/* Appends s as a quoted JSON string (escaping quotes, backslashes, control characters). */
void ftl_json_append_string(ftl_strbuf *b, const char *s);
/* A JSON array of strings, e.g. class names ("[\"ants\", \"bees\"]"); caller frees. */
char *ftl_json_string_array(char *const *items, int64_t count);
/* Appends a double that round-trips (%.17g; NaN/Inf become null). */
void ftl_json_append_number(ftl_strbuf *b, double v);

/* ---- parser ---- */
typedef enum ftl_json_type {
    FTL_JSON_NULL, FTL_JSON_BOOL, FTL_JSON_NUMBER, FTL_JSON_STRING, FTL_JSON_ARRAY, FTL_JSON_OBJECT
} ftl_json_type;

typedef struct ftl_json ftl_json;
struct ftl_json {
    ftl_json_type type;
    bool boolean;
    double number;
    char *string;        /* STRING: decoded UTF-8, NUL-terminated; also the key storage of members */
    size_t count;        /* ARRAY/OBJECT: number of items */
    ftl_json *items;     /* ARRAY: values; OBJECT: values, with keys[] alongside */
    char **keys;         /* OBJECT only */
};

/* Parses text[0..size); on error returns FTL_E_FORMAT with the byte offset in the message. */
ftl_status ftl_json_parse(const char *text, size_t size, ftl_json **out);
void ftl_json_free(ftl_json *v);
const ftl_json *ftl_json_get(const ftl_json *object, const char *key);
const char *ftl_json_get_string(const ftl_json *object, const char *key); /* NULL if absent or not a string */
bool ftl_json_get_number(const ftl_json *object, const char *key, double *out);

#endif
