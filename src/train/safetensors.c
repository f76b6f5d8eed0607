/* safetensors reader and writer (format: github.com/huggingface/safetensors, "Format" section).
 * The reader validates every field against the file before using it, so truncated, bit-flipped
 * or hostile files fail with a message naming the file and tensor, never a crash. The writer
 * records a CRC32C of each tensor's bytes in the metadata, and the reader checks a tensor's bytes
 * when they are first read, so a flipped bit in the data is refused too. */
#include "ftl/train.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/log.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; ftl supports little-endian hosts only"
#endif

static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {
    [FTL_DTYPE_F32] = {"F32", 4}, [FTL_DTYPE_F64] = {"F64", 8}, [FTL_DTYPE_F16] = {"F16", 2},
    [FTL_DTYPE_BF16] = {"BF16", 2}, [FTL_DTYPE_I8] = {"I8", 1}, [FTL_DTYPE_I16] = {"I16", 2},
    [FTL_DTYPE_I32] = {"I32", 4}, [FTL_DTYPE_I64] = {"I64", 8}, [FTL_DTYPE_U8] = {"U8", 1},
    [FTL_DTYPE_U16] = {"U16", 2}, [FTL_DTYPE_U32] = {"U32", 4}, [FTL_DTYPE_U64] = {"U64", 8},
    [FTL_DTYPE_BOOL] = {"BOOL", 1},
};
enum { DTYPE_COUNT = (int)(sizeof dtype_table / sizeof dtype_table[0]) };

size_t ftl_dtype_size(ftl_dtype dtype) { return (int)dtype >= 0 && (int)dtype < DTYPE_COUNT ? dtype_table[dtype].size : 0; }
const char *ftl_dtype_name(ftl_dtype dtype) {
    return (int)dtype >= 0 && (int)dtype < DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

static bool dtype_parse(const char *name, ftl_dtype *out) {
    for (int i = 0; i < DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0) {
            *out = (ftl_dtype)i;
            return true;
        }
    return false;
}

/* ---------------------------------------------------------------- reader */

/* A tensor's recorded CRC32C, and whether its bytes were checked against it already. */
typedef struct tensor_checksum {
    uint32_t expected;
    bool verified;
} tensor_checksum;

struct ftl_safetensors {
    char *path;
    uint8_t *buf;
    size_t size;
    ftl_safetensors_tensor *tensors;
    size_t tensor_count;
    ftl_kv *meta;
    size_t meta_count;
    tensor_checksum *checksums; /* [tensor_count], parallel to tensors; NULL: the file records none */
};

void ftl_safetensors_close(ftl_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->tensor_count; i++) free((char *)st->tensors[i].name);
    for (size_t i = 0; i < st->meta_count; i++) {
        free((char *)st->meta[i].key);
        free((char *)st->meta[i].value);
    }
    free(st->tensors);
    free(st->meta);
    free(st->checksums);
    free(st->buf);
    free(st->path);
    free(st);
}

/* A JSON number that is a non-negative integer representable exactly (< 2^53). */
static bool json_uint(const ftl_json *v, uint64_t *out) {
    if (!v || v->type != FTL_JSON_NUMBER || !(v->number >= 0) || v->number > 9007199254740992.0 ||
        v->number != floor(v->number))
        return false;
    *out = (uint64_t)v->number;
    return true;
}

static ftl_status parse_metadata(ftl_safetensors *st, const ftl_json *m) {
    if (m->type != FTL_JSON_OBJECT)
        return ftl_fail(FTL_E_FORMAT, "%s: \"__metadata__\" is not an object of strings", st->path);
    st->meta = ftl_xcalloc(m->count, sizeof *st->meta);
    for (size_t i = 0; i < m->count; i++) {
        if (m->items[i].type != FTL_JSON_STRING)
            return ftl_fail(FTL_E_FORMAT, "%s: metadata value of \"%s\" is not a string", st->path, m->keys[i]);
        for (size_t j = 0; j < st->meta_count; j++)
            if (strcmp(st->meta[j].key, m->keys[i]) == 0)
                return ftl_fail(FTL_E_FORMAT, "%s: metadata key \"%s\" appears twice", st->path, m->keys[i]);
        st->meta[st->meta_count].key = ftl_strdup(m->keys[i]);
        st->meta[st->meta_count].value = ftl_strdup(m->items[i].string);
        st->meta_count++;
    }
    return FTL_OK;
}

static ftl_status parse_tensor(ftl_safetensors *st, const char *name, const ftl_json *e, uint64_t data_size,
                               ftl_safetensors_tensor *t, uint64_t *begin_out) {
    if (e->type != FTL_JSON_OBJECT)
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": header entry is not an object", st->path, name);
    const char *dtype = ftl_json_get_string(e, "dtype");
    if (!dtype) return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": missing \"dtype\"", st->path, name);
    if (!dtype_parse(dtype, &t->dtype))
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: tensor \"%s\": unknown dtype \"%.40s\"", st->path, name, dtype);
    const ftl_json *shape = ftl_json_get(e, "shape");
    if (!shape || shape->type != FTL_JSON_ARRAY)
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": missing \"shape\" array", st->path, name);
    if (shape->count > FTL_SAFETENSORS_MAX_DIMS)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: tensor \"%s\": %zu dimensions (at most %d supported)", st->path,
                        name, shape->count, FTL_SAFETENSORS_MAX_DIMS);
    t->ndim = (int)shape->count;
    uint64_t elements = 1;
    bool too_big = false;
    for (size_t i = 0; i < shape->count; i++) {
        uint64_t d;
        if (!json_uint(&shape->items[i], &d))
            return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": shape[%zu] is not a non-negative integer", st->path,
                            name, i);
        t->shape[i] = (int64_t)d;
        /* Compare against the data size before multiplying so the product cannot overflow. */
        if (d != 0 && elements > data_size / d) too_big = true;
        else elements *= d;
    }
    const ftl_json *off = ftl_json_get(e, "data_offsets");
    uint64_t begin, end;
    if (!off || off->type != FTL_JSON_ARRAY || off->count != 2 || !json_uint(&off->items[0], &begin) ||
        !json_uint(&off->items[1], &end))
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": \"data_offsets\" is not [begin, end]", st->path, name);
    if (begin > end)
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": data_offsets [%llu, %llu] end before they begin", st->path,
                        name, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return ftl_fail(FTL_E_FORMAT,
                        "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the data section (%llu bytes); "
                        "the file is truncated or corrupt",
                        st->path, name, (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)data_size);
    size_t esize = ftl_dtype_size(t->dtype);
    if (too_big || elements > data_size / esize || elements * esize != end - begin) {
        char need[32] = "more than the file's";
        if (!too_big) /* elements <= data size here, so the product cannot overflow */
            snprintf(need, sizeof need, "%llu", (unsigned long long)(elements * esize));
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": shape and dtype %s need %s bytes but data_offsets span %llu",
                        st->path, name, dtype, need, (unsigned long long)(end - begin));
    }
    t->element_count = elements;
    t->byte_size = end - begin;
    *begin_out = begin;
    return FTL_OK;
}

static int compare_by_offset(const void *a, const void *b) {
    const ftl_safetensors_tensor *x = a, *y = b;
    return x->data < y->data ? -1 : x->data > y->data ? 1 : (x->byte_size > y->byte_size) - (x->byte_size < y->byte_size);
}

static ftl_status parse_file(ftl_safetensors *st) {
    if (st->size < 8)
        return ftl_fail(FTL_E_FORMAT, "%s: not a safetensors file: %zu bytes, shorter than the 8-byte header length",
                        st->path, st->size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | st->buf[i];
    if (header_len > st->size - 8)
        return ftl_fail(FTL_E_FORMAT,
                        "%s: header length %llu exceeds the file size (%zu bytes): truncated or not a safetensors file",
                        st->path, (unsigned long long)header_len, st->size);
    const char *header = (const char *)st->buf + 8;
    if (header_len < 2 || header[0] != '{')
        return ftl_fail(FTL_E_FORMAT, "%s: not a safetensors file: the header does not start with '{'", st->path);
    ftl_json *root = NULL;
    ftl_status s = ftl_json_parse(header, (size_t)header_len, &root);
    if (s != FTL_OK) return ftl_fail_context(s, "%s: header", st->path);
    if (root->type != FTL_JSON_OBJECT) {
        ftl_json_free(root);
        return ftl_fail(FTL_E_FORMAT, "%s: header is not a JSON object", st->path);
    }
    uint64_t data_size = st->size - 8 - header_len;
    const uint8_t *data = st->buf + 8 + header_len;
    st->tensors = ftl_xcalloc(root->count, sizeof *st->tensors);
    for (size_t i = 0; i < root->count && s == FTL_OK; i++) {
        const char *name = root->keys[i];
        if (strcmp(name, "__metadata__") == 0) {
            if (st->meta) s = ftl_fail(FTL_E_FORMAT, "%s: \"__metadata__\" appears twice", st->path);
            else s = parse_metadata(st, &root->items[i]);
            continue;
        }
        for (size_t j = 0; j < st->tensor_count && s == FTL_OK; j++)
            if (strcmp(st->tensors[j].name, name) == 0)
                s = ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\" appears twice in the header", st->path, name);
        if (s != FTL_OK) break;
        ftl_safetensors_tensor t = {0};
        uint64_t begin = 0;
        s = parse_tensor(st, name, &root->items[i], data_size, &t, &begin);
        if (s != FTL_OK) break;
        t.name = ftl_strdup(name);
        t.data = data + begin;
        st->tensors[st->tensor_count++] = t;
    }
    ftl_json_free(root);
    if (s != FTL_OK) return s;

    /* The tensors must tile the data section exactly (no overlap, no holes, nothing after). */
    ftl_safetensors_tensor *sorted = ftl_xmalloc((st->tensor_count ? st->tensor_count : 1) * sizeof *sorted);
    memcpy(sorted, st->tensors, st->tensor_count * sizeof *sorted);
    qsort(sorted, st->tensor_count, sizeof *sorted, compare_by_offset);
    uint64_t expect = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < st->tensor_count && s == FTL_OK; i++) {
        uint64_t begin = (uint64_t)(sorted[i].data - data);
        if (begin < expect)
            s = ftl_fail(FTL_E_FORMAT, "%s: tensors \"%s\" and \"%s\" overlap in the data section", st->path,
                         prev ? prev : "?", sorted[i].name);
        else if (begin > expect)
            s = ftl_fail(FTL_E_FORMAT, "%s: bytes %llu..%llu of the data section belong to no tensor (before \"%s\")",
                         st->path, (unsigned long long)expect, (unsigned long long)begin, sorted[i].name);
        expect = begin + sorted[i].byte_size;
        prev = sorted[i].name;
    }
    free(sorted);
    if (s == FTL_OK && expect != data_size)
        s = ftl_fail(FTL_E_FORMAT, "%s: %llu bytes after the last tensor belong to no tensor", st->path,
                     (unsigned long long)(data_size - expect));
    return s;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Exactly 8 hex digits. */
static bool parse_crc_text(const char *text, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        int d = hex_digit(text[i]);
        if (d < 0) return false;
        v = v << 4 | (uint32_t)d;
    }
    if (text[8] != '\0') return false;
    *out = v;
    return true;
}

/* The FTL_SAFETENSORS_META_CRC32C entry: one CRC for every tensor, and none for a tensor the file
 * does not hold (a header edited by hand, or cut short, is refused rather than half-checked). */
static ftl_status parse_checksums(ftl_safetensors *st) {
    const char *text = ftl_safetensors_metadata(st, FTL_SAFETENSORS_META_CRC32C);
    if (!text) return FTL_OK;
    ftl_json *v = NULL;
    ftl_status s = ftl_json_parse(text, strlen(text), &v);
    if (s != FTL_OK) return ftl_fail_context(s, "%s: metadata \"%s\"", st->path, FTL_SAFETENSORS_META_CRC32C);
    st->checksums = ftl_xcalloc(st->tensor_count ? st->tensor_count : 1, sizeof *st->checksums);
    bool *seen = ftl_xcalloc(st->tensor_count ? st->tensor_count : 1, sizeof *seen);
    if (v->type != FTL_JSON_OBJECT)
        s = ftl_fail(FTL_E_FORMAT, "%s: metadata \"%s\" is not a JSON object of tensor names and CRCs", st->path,
                     FTL_SAFETENSORS_META_CRC32C);
    for (size_t i = 0; s == FTL_OK && i < v->count; i++) {
        const char *name = v->keys[i];
        size_t at = 0;
        while (at < st->tensor_count && strcmp(st->tensors[at].name, name) != 0) at++;
        uint32_t crc = 0;
        if (at == st->tensor_count)
            s = ftl_fail(FTL_E_FORMAT, "%s: metadata \"%s\" names tensor \"%s\", which the file does not hold", st->path,
                         FTL_SAFETENSORS_META_CRC32C, name);
        else if (seen[at])
            s = ftl_fail(FTL_E_FORMAT, "%s: metadata \"%s\" names tensor \"%s\" twice", st->path,
                         FTL_SAFETENSORS_META_CRC32C, name);
        else if (v->items[i].type != FTL_JSON_STRING || !parse_crc_text(v->items[i].string, &crc))
            s = ftl_fail(FTL_E_FORMAT, "%s: metadata \"%s\": the CRC of tensor \"%s\" is not 8 hex digits", st->path,
                         FTL_SAFETENSORS_META_CRC32C, name);
        else {
            seen[at] = true;
            st->checksums[at].expected = crc;
        }
    }
    for (size_t i = 0; s == FTL_OK && i < st->tensor_count; i++)
        if (!seen[i])
            s = ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\" has no CRC in metadata \"%s\" (the header was edited?)",
                         st->path, st->tensors[i].name, FTL_SAFETENSORS_META_CRC32C);
    free(seen);
    ftl_json_free(v);
    return s;
}

ftl_status ftl_safetensors_open_buffer(const void *data, size_t size, const char *name, ftl_safetensors **out) {
    *out = NULL;
    ftl_safetensors *st = ftl_xcalloc(1, sizeof *st);
    st->path = ftl_strdup(name);
    st->buf = ftl_xmalloc(size);
    memcpy(st->buf, data, size);
    st->size = size;
    ftl_status s = parse_file(st);
    if (s == FTL_OK) s = parse_checksums(st);
    if (s != FTL_OK) {
        ftl_safetensors_close(st);
        return s;
    }
    *out = st;
    return FTL_OK;
}

ftl_status ftl_safetensors_open(const char *path, ftl_safetensors **out) {
    *out = NULL;
    ftl_safetensors *st = ftl_xcalloc(1, sizeof *st);
    st->path = ftl_strdup(path);
    ftl_status s = ftl_read_file(path, &st->buf, &st->size);
    if (s == FTL_OK) s = parse_file(st);
    if (s == FTL_OK) s = parse_checksums(st);
    if (s != FTL_OK) {
        ftl_safetensors_close(st);
        return s;
    }
    *out = st;
    return FTL_OK;
}

const char *ftl_safetensors_path(const ftl_safetensors *st) { return st->path; }
size_t ftl_safetensors_tensor_count(const ftl_safetensors *st) { return st->tensor_count; }
const ftl_safetensors_tensor *ftl_safetensors_tensor_at(const ftl_safetensors *st, size_t index) {
    return index < st->tensor_count ? &st->tensors[index] : NULL;
}

const ftl_safetensors_tensor *ftl_safetensors_find(const ftl_safetensors *st, const char *name) {
    for (size_t i = 0; i < st->tensor_count; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *ftl_safetensors_metadata(const ftl_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}

size_t ftl_safetensors_metadata_count(const ftl_safetensors *st) { return st->meta_count; }
ftl_kv ftl_safetensors_metadata_at(const ftl_safetensors *st, size_t index) {
    return index < st->meta_count ? st->meta[index] : (ftl_kv){NULL, NULL};
}

bool ftl_safetensors_has_checksums(const ftl_safetensors *st) { return st->checksums != NULL; }

bool ftl_safetensors_checksum(const ftl_safetensors *st, const ftl_safetensors_tensor *t, uint32_t *expected) {
    if (!st->checksums || t < st->tensors || t >= st->tensors + st->tensor_count) return false;
    *expected = st->checksums[t - st->tensors].expected;
    return true;
}

/* The note that a file cannot be verified, once per path in a process (a command may open a
 * file more than once: resume reads the checkpoint's metadata before its tensors). */
static void note_no_checksums(const char *path) {
    enum { REMEMBERED = 64 };
    static char *noted[REMEMBERED];
    static int noted_count;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    bool seen = false;
    for (int i = 0; i < noted_count && !seen; i++) seen = strcmp(noted[i], path) == 0;
    if (!seen && noted_count < REMEMBERED) noted[noted_count++] = ftl_strdup(path);
    pthread_mutex_unlock(&lock);
    if (!seen)
        ftl_log_info("note: %s carries no tensor checksums (written before ftl recorded them), so its tensors cannot "
                     "be verified", path);
}

ftl_status ftl_safetensors_verify(const ftl_safetensors *st, const ftl_safetensors_tensor *t) {
    if (t < st->tensors || t >= st->tensors + st->tensor_count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: ftl_safetensors_verify: not one of this file's tensors", st->path);
    if (!st->checksums) {
        note_no_checksums(st->path);
        return FTL_OK;
    }
    tensor_checksum *c = &st->checksums[t - st->tensors];
    if (c->verified) return FTL_OK;
    uint32_t found = ftl_crc32c(0, t->data, (size_t)t->byte_size);
    if (found != c->expected)
        return ftl_fail(FTL_E_FORMAT,
                        "%s: tensor \"%s\" is damaged: its %llu bytes have CRC32C %08x, the file recorded %08x when it "
                        "was written",
                        st->path, t->name, (unsigned long long)t->byte_size, found, c->expected);
    c->verified = true;
    return FTL_OK;
}

ftl_status ftl_safetensors_verify_all(const ftl_safetensors *st) {
    for (size_t i = 0; i < st->tensor_count; i++) FTL_TRY(ftl_safetensors_verify(st, &st->tensors[i]));
    return FTL_OK;
}

static void append_shape(ftl_strbuf *b, int ndim, const int64_t *shape) {
    ftl_strbuf_append(b, "[", 1);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) ftl_strbuf_printf(b, "%s*", i ? ", " : "");
        else ftl_strbuf_printf(b, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    ftl_strbuf_append(b, "]", 1);
}

ftl_status ftl_safetensors_read(const ftl_safetensors *st, const char *name, ftl_dtype dtype, int ndim,
                                const int64_t *shape, void *dst, size_t dst_bytes) {
    const ftl_safetensors_tensor *t = ftl_safetensors_find(st, name);
    if (!t) return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\" is missing", st->path, name);
    bool ok = t->dtype == dtype;
    if (ndim >= 0) {
        ok = ok && t->ndim == ndim;
        for (int i = 0; ok && i < ndim; i++) ok = shape[i] < 0 || shape[i] == t->shape[i];
    }
    if (!ok) {
        ftl_strbuf want = {0}, got = {0};
        ftl_strbuf_printf(&want, "%s ", ftl_dtype_name(dtype));
        if (ndim >= 0) append_shape(&want, ndim, shape);
        else ftl_strbuf_append(&want, "(any shape)", 11);
        ftl_strbuf_printf(&got, "%s ", ftl_dtype_name(t->dtype));
        append_shape(&got, t->ndim, t->shape);
        ftl_status s = ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": expected %s, found %s", st->path, name, want.data,
                                got.data);
        ftl_strbuf_free(&want);
        ftl_strbuf_free(&got);
        return s;
    }
    if (t->byte_size != dst_bytes)
        return ftl_fail(FTL_E_FORMAT, "%s: tensor \"%s\": %llu bytes, expected %zu", st->path, name,
                        (unsigned long long)t->byte_size, dst_bytes);
    FTL_TRY(ftl_safetensors_verify(st, t));
    if (dst_bytes) memcpy(dst, t->data, dst_bytes);
    return FTL_OK;
}

/* ---------------------------------------------------------------- writer */

typedef struct writer_tensor {
    char *name;
    ftl_dtype dtype;
    int ndim;
    int64_t shape[FTL_SAFETENSORS_MAX_DIMS];
    const void *data;
    uint64_t bytes;
} writer_tensor;

struct ftl_safetensors_writer {
    writer_tensor *tensors;
    size_t count, cap;
    ftl_kv *meta;
    size_t meta_count, meta_cap;
    bool invalid;
    char *invalid_reason;
    bool no_replace;
};

ftl_safetensors_writer *ftl_safetensors_writer_new(void) { return ftl_xcalloc(1, sizeof(ftl_safetensors_writer)); }

void ftl_safetensors_writer_free(ftl_safetensors_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->count; i++) free(w->tensors[i].name);
    for (size_t i = 0; i < w->meta_count; i++) {
        free((char *)w->meta[i].key);
        free((char *)w->meta[i].value);
    }
    free(w->tensors);
    free(w->meta);
    free(w->invalid_reason);
    free(w);
}

void ftl_safetensors_writer_add(ftl_safetensors_writer *w, const char *name, ftl_dtype dtype, int ndim,
                                const int64_t *shape, const void *data) {
    if (w->invalid) return;
    if (ndim < 0 || ndim > FTL_SAFETENSORS_MAX_DIMS || ftl_dtype_size(dtype) == 0) {
        w->invalid = true;
        w->invalid_reason = ftl_format("tensor \"%s\": unsupported dtype or %d dimensions", name, ndim);
        return;
    }
    if (w->count == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 8;
        w->tensors = ftl_xrealloc(w->tensors, w->cap * sizeof *w->tensors);
    }
    writer_tensor *t = &w->tensors[w->count++];
    memset(t, 0, sizeof *t);
    t->name = ftl_strdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        if (shape[i] < 0) {
            w->invalid = true;
            w->invalid_reason = ftl_format("tensor \"%s\": negative dimension", name);
        }
        n *= (uint64_t)(shape[i] > 0 ? shape[i] : 0);
    }
    t->data = data;
    t->bytes = n * ftl_dtype_size(dtype);
}

void ftl_safetensors_writer_set_metadata(ftl_safetensors_writer *w, const char *key, const char *value) {
    for (size_t i = 0; i < w->meta_count; i++)
        if (strcmp(w->meta[i].key, key) == 0) {
            free((char *)w->meta[i].value);
            w->meta[i].value = ftl_strdup(value);
            return;
        }
    if (w->meta_count == w->meta_cap) {
        w->meta_cap = w->meta_cap ? w->meta_cap * 2 : 8;
        w->meta = ftl_xrealloc(w->meta, w->meta_cap * sizeof *w->meta);
    }
    w->meta[w->meta_count++] = (ftl_kv){ftl_strdup(key), ftl_strdup(value)};
}

void ftl_safetensors_writer_set_no_replace(ftl_safetensors_writer *w, bool no_replace) { w->no_replace = no_replace; }

ftl_status ftl_safetensors_writer_write(ftl_safetensors_writer *w, const char *path) {
    if (w->invalid) return ftl_fail(FTL_E_INVALID_ARG, "%s: %s", path, w->invalid_reason);
    for (size_t i = 0; i < w->count; i++) {
        if (strcmp(w->tensors[i].name, "__metadata__") == 0)
            return ftl_fail(FTL_E_INVALID_ARG, "%s: \"__metadata__\" is reserved, not a tensor name", path);
        for (size_t j = 0; j < i; j++)
            if (strcmp(w->tensors[i].name, w->tensors[j].name) == 0)
                return ftl_fail(FTL_E_INVALID_ARG, "%s: tensor \"%s\" added twice", path, w->tensors[i].name);
    }
    /* Each tensor's CRC32C, replacing any the caller copied from another file. */
    ftl_strbuf crcs = {0};
    ftl_strbuf_append(&crcs, "{", 1);
    for (size_t i = 0; i < w->count; i++) {
        if (i) ftl_strbuf_append(&crcs, ",", 1);
        ftl_json_append_string(&crcs, w->tensors[i].name);
        ftl_strbuf_printf(&crcs, ":\"%08x\"", ftl_crc32c(0, w->tensors[i].data, (size_t)w->tensors[i].bytes));
    }
    ftl_strbuf_append(&crcs, "}", 1);
    ftl_safetensors_writer_set_metadata(w, FTL_SAFETENSORS_META_CRC32C, crcs.data);
    ftl_strbuf_free(&crcs);
    ftl_strbuf h = {0};
    ftl_strbuf_append(&h, "{", 1);
    bool first = true;
    if (w->meta_count) {
        ftl_strbuf_append(&h, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < w->meta_count; i++) {
            if (i) ftl_strbuf_append(&h, ",", 1);
            ftl_json_append_string(&h, w->meta[i].key);
            ftl_strbuf_append(&h, ":", 1);
            ftl_json_append_string(&h, w->meta[i].value);
        }
        ftl_strbuf_append(&h, "}", 1);
        first = false;
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->count; i++) {
        const writer_tensor *t = &w->tensors[i];
        if (!first) ftl_strbuf_append(&h, ",", 1);
        first = false;
        ftl_json_append_string(&h, t->name);
        ftl_strbuf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", ftl_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) ftl_strbuf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        ftl_strbuf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                          (unsigned long long)(offset + t->bytes));
        offset += t->bytes;
    }
    ftl_strbuf_append(&h, "}", 1);
    /* Pad with spaces so the data section starts 8-byte aligned (as the reference writer does). */
    while ((8 + h.len) % 8) ftl_strbuf_append(&h, " ", 1);

    uint8_t len_bytes[8];
    for (int i = 0; i < 8; i++) len_bytes[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    ftl_atomic_file f;
    ftl_status s = ftl_atomic_open(&f, path);
    f.no_replace = w->no_replace;
    if (s == FTL_OK) s = ftl_write_all(f.fp, len_bytes, 8, path);
    if (s == FTL_OK) s = ftl_write_all(f.fp, h.data, h.len, path);
    for (size_t i = 0; i < w->count && s == FTL_OK; i++)
        s = ftl_write_all(f.fp, w->tensors[i].data, (size_t)w->tensors[i].bytes, path);
    if (s == FTL_OK) s = ftl_atomic_commit(&f);
    else ftl_atomic_abort(&f);
    ftl_strbuf_free(&h);
    return s;
}
