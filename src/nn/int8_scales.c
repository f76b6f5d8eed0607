/* The int8 scales table that calibration makes and model files and feature files record: the
 * tensors' scales, its identity hash, its JSON form. Apart from calibration.c, which runs a model:
 * the model reads the table's hash for its own identity. */
#include "ftl/nn.h"
#include "nn/ir/quantize.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/sha256.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SCALES = 1 << 20 };

void ftl_nn_int8_scales_free(ftl_nn_int8_scales *s) {
    if (!s) return;
    for (int i = 0; i < s->count; i++) free(s->names[i]);
    free(s->names);
    free(s->scale);
    free(s->is_unsigned);
    free(s);
}

const char *ftl_nn_int8_scales_hash(const ftl_nn_int8_scales *s) { return s->hash; }
const char *ftl_nn_int8_scales_method(const ftl_nn_int8_scales *s) { return s->method; }
int ftl_nn_int8_scales_rows(const ftl_nn_int8_scales *s) { return s->rows; }
int ftl_nn_int8_scales_count(const ftl_nn_int8_scales *s) { return s->count; }

/* The identity: every field, scales as exact hex floats. */
void nn_int8_scales_rehash(ftl_nn_int8_scales *s) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "int8 scales v1\n%s\n%d\n", s->method, s->rows);
    for (int i = 0; i < s->count; i++) ftl_strbuf_printf(&b, "%s %a %d\n", s->names[i], (double)s->scale[i], s->is_unsigned[i]);
    ftl_strbuf_append(&b, "", 1);
    ftl_sha256_hex_of_string(b.data, s->hash);
    ftl_strbuf_free(&b);
}

ftl_nn_int8_scales *nn_int8_scales_make(char *const *names, const float *scales, const bool *is_unsigned, int count,
                                        const char *method, int rows) {
    ftl_nn_int8_scales *s = ftl_xcalloc(1, sizeof *s);
    s->names = ftl_xcalloc((size_t)count + 1, sizeof *s->names);
    s->scale = ftl_xcalloc((size_t)count + 1, sizeof *s->scale);
    s->is_unsigned = ftl_xcalloc((size_t)count + 1, sizeof *s->is_unsigned);
    for (int i = 0; i < count; i++) {
        s->names[i] = ftl_strdup(names[i]);
        s->scale[i] = scales[i];
        s->is_unsigned[i] = is_unsigned[i];
    }
    s->count = count;
    snprintf(s->method, sizeof s->method, "%s", method);
    s->rows = rows;
    nn_int8_scales_rehash(s);
    return s;
}

char *ftl_nn_int8_scales_json(const ftl_nn_int8_scales *s) {
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "{\"method\":");
    ftl_json_append_string(&b, s->method);
    ftl_strbuf_printf(&b, ",\"rows\":%d,\"hash\":\"%s\",\"tensors\":[", s->rows, s->hash);
    for (int i = 0; i < s->count; i++) {
        ftl_strbuf_printf(&b, "%s[", i ? "," : "");
        ftl_json_append_string(&b, s->names[i]);
        ftl_strbuf_printf(&b, ",%.9g,%s]", (double)s->scale[i], s->is_unsigned[i] ? "true" : "false");
    }
    ftl_strbuf_append(&b, "]}", 3);
    return b.data;
}

ftl_status ftl_nn_int8_scales_from_json(const char *json, const char *where, ftl_nn_int8_scales **out) {
    *out = NULL;
    ftl_json *root = NULL;
    if (!json) return ftl_fail(FTL_E_FORMAT, "%s: no int8 scales recorded", where);
    ftl_status st = ftl_json_parse(json, strlen(json), &root);
    if (st != FTL_OK) return ftl_fail_context(st, "%s: int8 scales", where);
    const ftl_json *tensors = ftl_json_get(root, "tensors");
    const char *method = ftl_json_get_string(root, "method"), *hash = ftl_json_get_string(root, "hash");
    double rows = -1;
    if (root->type != FTL_JSON_OBJECT || !tensors || tensors->type != FTL_JSON_ARRAY || !method || !hash ||
        strlen(method) >= 32 || !ftl_json_get_number(root, "rows", &rows) || !(rows >= 1 && rows <= 1e9) ||
        tensors->count > MAX_SCALES) {
        ftl_json_free(root);
        return ftl_fail(FTL_E_FORMAT, "%s: int8 scales: expected {\"method\", \"rows\" >= 1, \"hash\", \"tensors\": "
                        "[[name, scale, unsigned], ...]}", where);
    }
    ftl_nn_int8_scales *s = ftl_xcalloc(1, sizeof *s);
    snprintf(s->method, sizeof s->method, "%s", method);
    s->rows = (int)rows;
    s->names = ftl_xcalloc(tensors->count + 1, sizeof *s->names);
    s->scale = ftl_xcalloc(tensors->count + 1, sizeof *s->scale);
    s->is_unsigned = ftl_xcalloc(tensors->count + 1, sizeof *s->is_unsigned);
    for (size_t i = 0; i < tensors->count && st == FTL_OK; i++) {
        const ftl_json *e = &tensors->items[i];
        if (e->type != FTL_JSON_ARRAY || e->count != 3 || e->items[0].type != FTL_JSON_STRING ||
            e->items[1].type != FTL_JSON_NUMBER || e->items[2].type != FTL_JSON_BOOL) {
            st = ftl_fail(FTL_E_FORMAT, "%s: int8 scales: entry %zu is not [name, scale, unsigned]", where, i);
            break;
        }
        double v = e->items[1].number;
        if (!(v > 0) || !isfinite(v) || v > 3.4e38) {
            st = ftl_fail(FTL_E_FORMAT, "%s: int8 scales: tensor '%s' has scale %g; a scale must be positive and finite",
                          where, e->items[0].string, v);
            break;
        }
        s->names[i] = ftl_strdup(e->items[0].string);
        s->scale[i] = (float)v;
        s->is_unsigned[i] = e->items[2].boolean;
        s->count++;
    }
    if (st == FTL_OK) {
        nn_int8_scales_rehash(s);
        if (strcmp(s->hash, hash) != 0)
            st = ftl_fail(FTL_E_FORMAT, "%s: int8 scales: their hash %s does not match the recorded %.64s (the table "
                          "was changed)", where, s->hash, hash);
    }
    ftl_json_free(root);
    if (st != FTL_OK) {
        ftl_nn_int8_scales_free(s);
        return st;
    }
    *out = s;
    return FTL_OK;
}
