/* JSON writer and parser (RFC 8259). The parser bounds every read by the input size and limits
 * nesting depth, so hostile headers cannot crash it. */
#include "util/json.h"
#include "util/alloc.h"
#include "util/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void ftl_strbuf_append(ftl_strbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        b->data = ftl_xrealloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ftl_strbuf_printf(ftl_strbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof small) {
        ftl_strbuf_append(b, small, (size_t)n);
    } else {
        char *big = ftl_xmalloc((size_t)n + 1);
        vsnprintf(big, (size_t)n + 1, fmt, ap2);
        ftl_strbuf_append(b, big, (size_t)n);
        free(big);
    }
    va_end(ap2);
}

void ftl_strbuf_free(ftl_strbuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void ftl_json_append_string(ftl_strbuf *b, const char *s) {
    ftl_strbuf_append(b, "\"", 1);
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *esc = NULL;
        char hex[8];
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (*p < 0x20) {
                snprintf(hex, sizeof hex, "\\u%04x", *p);
                esc = hex;
            } else if (*p >= 0x80) {
                int n = ftl_utf8_char_length((const char *)p);
                if (n > 0) {
                    p += n - 1; /* a whole character, kept */
                    continue;
                }
                esc = "\\ufffd"; /* a byte that is no UTF-8: JSON must be */
            }
        }
        if (esc) {
            ftl_strbuf_append(b, run, (size_t)((const char *)p - run));
            ftl_strbuf_append(b, esc, strlen(esc));
            run = (const char *)p + 1;
        }
    }
    ftl_strbuf_append(b, run, strlen(run));
    ftl_strbuf_append(b, "\"", 1);
}

char *ftl_json_string_array(char *const *items, int64_t count) {
    ftl_strbuf b = {0};
    ftl_strbuf_append(&b, "[", 1);
    for (int64_t i = 0; i < count; i++) {
        if (i) ftl_strbuf_append(&b, ", ", 2);
        ftl_json_append_string(&b, items[i]);
    }
    ftl_strbuf_append(&b, "]", 1);
    return b.data;
}

void ftl_json_append_number(ftl_strbuf *b, double v) {
    if (!isfinite(v)) {
        ftl_strbuf_append(b, "null", 4);
        return;
    }
    if (v == floor(v) && fabs(v) < 9.0e15) ftl_strbuf_printf(b, "%.0f", v);
    else ftl_strbuf_printf(b, "%.17g", v);
}

/* ---- parser ---- */

enum { JSON_MAX_DEPTH = 64 };

typedef struct json_parser {
    const char *text;
    size_t size, pos;
} json_parser;

static ftl_status json_error(const json_parser *p, const char *what) {
    return ftl_fail(FTL_E_FORMAT, "invalid JSON at byte %zu: %s", p->pos, what);
}

static void skip_space(json_parser *p) {
    while (p->pos < p->size) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static bool consume_literal(json_parser *p, const char *lit) {
    size_t n = strlen(lit);
    if (p->size - p->pos < n || memcmp(p->text + p->pos, lit, n) != 0) return false;
    p->pos += n;
    return true;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(json_parser *p, unsigned *out) {
    if (p->size - p->pos < 4) return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p->text[p->pos + (size_t)i]);
        if (h < 0) return false;
        v = v * 16 + (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

static void put_utf8(ftl_strbuf *b, unsigned cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    ftl_strbuf_append(b, u, n);
}

static ftl_status parse_string(json_parser *p, char **out) {
    ftl_strbuf b = {0};
    ftl_strbuf_append(&b, "", 0);
    p->pos++; /* opening quote */
    for (;;) {
        if (p->pos >= p->size) {
            ftl_strbuf_free(&b);
            return json_error(p, "unterminated string");
        }
        char c = p->text[p->pos++];
        if (c == '"') break;
        if ((unsigned char)c < 0x20) {
            ftl_strbuf_free(&b);
            return json_error(p, "control character in string");
        }
        if (c != '\\') {
            ftl_strbuf_append(&b, &c, 1);
            continue;
        }
        if (p->pos >= p->size) {
            ftl_strbuf_free(&b);
            return json_error(p, "unterminated escape");
        }
        char e = p->text[p->pos++];
        const char *simple = NULL;
        switch (e) {
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        case '/': simple = "/"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'u': {
            unsigned cp;
            if (!read_hex4(p, &cp)) {
                ftl_strbuf_free(&b);
                return json_error(p, "bad \\u escape");
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (!consume_literal(p, "\\u") || !read_hex4(p, &lo) || lo < 0xDC00 || lo >= 0xE000) {
                    ftl_strbuf_free(&b);
                    return json_error(p, "unpaired surrogate");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0) {
                ftl_strbuf_free(&b);
                return json_error(p, "NUL in string");
            }
            put_utf8(&b, cp);
            continue;
        }
        default:
            ftl_strbuf_free(&b);
            return json_error(p, "unknown escape");
        }
        ftl_strbuf_append(&b, simple, 1);
    }
    *out = b.data;
    return FTL_OK;
}

static ftl_status parse_value(json_parser *p, ftl_json *v, int depth);

static ftl_status parse_container(json_parser *p, ftl_json *v, int depth, bool is_object) {
    char close = is_object ? '}' : ']';
    v->type = is_object ? FTL_JSON_OBJECT : FTL_JSON_ARRAY;
    p->pos++;
    size_t cap = 0;
    skip_space(p);
    if (p->pos < p->size && p->text[p->pos] == close) {
        p->pos++;
        return FTL_OK;
    }
    for (;;) {
        if (v->count == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = ftl_xrealloc(v->items, cap * sizeof *v->items);
            if (is_object) v->keys = ftl_xrealloc(v->keys, cap * sizeof *v->keys);
        }
        ftl_json *item = &v->items[v->count];
        memset(item, 0, sizeof *item);
        skip_space(p);
        if (is_object) {
            if (p->pos >= p->size || p->text[p->pos] != '"') return json_error(p, "expected a key string");
            char *key;
            FTL_TRY(parse_string(p, &key));
            v->keys[v->count] = key;
            skip_space(p);
            if (p->pos >= p->size || p->text[p->pos] != ':') {
                v->count++; /* so the key is freed */
                return json_error(p, "expected ':'");
            }
            p->pos++;
        }
        v->count++;
        FTL_TRY(parse_value(p, item, depth + 1));
        skip_space(p);
        if (p->pos >= p->size) return json_error(p, "unterminated container");
        char c = p->text[p->pos++];
        if (c == close) return FTL_OK;
        if (c != ',') return json_error(p, "expected ',' or the container's end");
    }
}

static ftl_status parse_number(json_parser *p, ftl_json *v) {
    size_t start = p->pos;
    if (p->pos < p->size && p->text[p->pos] == '-') p->pos++;
    size_t digits = p->pos;
    while (p->pos < p->size && p->text[p->pos] != '\0' && strchr("0123456789+-.eE", p->text[p->pos])) p->pos++;
    if (p->pos == digits) return json_error(p, "expected a value");
    char buf[64];
    size_t n = p->pos - start;
    if (n >= sizeof buf) return json_error(p, "number too long");
    memcpy(buf, p->text + start, n);
    buf[n] = '\0';
    char *end;
    v->number = strtod(buf, &end);
    if (*end) return json_error(p, "malformed number");
    v->type = FTL_JSON_NUMBER;
    return FTL_OK;
}

static ftl_status parse_value(json_parser *p, ftl_json *v, int depth) {
    if (depth > JSON_MAX_DEPTH) return json_error(p, "nesting too deep");
    skip_space(p);
    if (p->pos >= p->size) return json_error(p, "unexpected end");
    char c = p->text[p->pos];
    if (c == '{') return parse_container(p, v, depth, true);
    if (c == '[') return parse_container(p, v, depth, false);
    if (c == '"') {
        v->type = FTL_JSON_STRING;
        return parse_string(p, &v->string);
    }
    if (consume_literal(p, "true")) { v->type = FTL_JSON_BOOL; v->boolean = true; return FTL_OK; }
    if (consume_literal(p, "false")) { v->type = FTL_JSON_BOOL; v->boolean = false; return FTL_OK; }
    if (consume_literal(p, "null")) { v->type = FTL_JSON_NULL; return FTL_OK; }
    return parse_number(p, v);
}

static void free_contents(ftl_json *v) {
    free(v->string);
    for (size_t i = 0; i < v->count; i++) {
        free_contents(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void ftl_json_free(ftl_json *v) {
    if (!v) return;
    free_contents(v);
    free(v);
}

ftl_status ftl_json_parse(const char *text, size_t size, ftl_json **out) {
    *out = NULL;
    json_parser p = {text, size, 0};
    ftl_json *v = ftl_xcalloc(1, sizeof *v);
    ftl_status st = parse_value(&p, v, 0);
    if (st == FTL_OK) {
        skip_space(&p);
        if (p.pos != size) st = json_error(&p, "trailing characters");
    }
    if (st != FTL_OK) {
        ftl_json_free(v);
        return st;
    }
    *out = v;
    return FTL_OK;
}

const ftl_json *ftl_json_get(const ftl_json *object, const char *key) {
    if (!object || object->type != FTL_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0) return &object->items[i];
    return NULL;
}

const char *ftl_json_get_string(const ftl_json *object, const char *key) {
    const ftl_json *v = ftl_json_get(object, key);
    return v && v->type == FTL_JSON_STRING ? v->string : NULL;
}

bool ftl_json_get_number(const ftl_json *object, const char *key, double *out) {
    const ftl_json *v = ftl_json_get(object, key);
    if (!v || v->type != FTL_JSON_NUMBER) return false;
    *out = v->number;
    return true;
}
