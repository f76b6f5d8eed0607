/* WebDataset samples and labels over a tar index (see webdataset.h). */
#include "data/webdataset.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    /* A .cls or .json holds a label and a little metadata: a larger one is no label file. */
    LABEL_BYTES_MAX = 1 << 20,
    QUOTED_CAP = 300,
};

typedef struct quoted {
    char text[QUOTED_CAP];
} quoted;

static quoted quote(const char *s, size_t len) {
    quoted q;
    tar_quote(s, len, q.text, sizeof q.text);
    return q;
}

static quoted member_name(const tar_index *t, size_t m) { return quote(t->members[m].name, strlen(t->members[m].name)); }

/* KEY.EXT: the key ends at the first dot of the file name; false when there is no such dot with
 * something on both sides (`a/README`, `a/.hidden`, `a/b.`). */
static bool split_key(const char *name, size_t *key_len, const char **ext) {
    const char *slash = strrchr(name, '/');
    const char *file = slash ? slash + 1 : name;
    const char *dot = strchr(file, '.');
    if (!dot || dot == file || !dot[1]) return false;
    *key_len = (size_t)(dot - name);
    *ext = dot + 1;
    return true;
}

/* ASCII-only, so the comparison does not depend on the locale. */
static int ascii_casecmp(const char *a, const char *b) {
    for (;; a++, b++) {
        int x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z') x += 'a' - 'A';
        if (y >= 'A' && y <= 'Z') y += 'a' - 'A';
        if (x != y || !x) return x - y;
    }
}

typedef struct key_ref {
    const char *key;
    size_t sample;
} key_ref;

static int compare_key_refs(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->sample > y->sample) - (x->sample < y->sample);
}

typedef struct part_ref {
    size_t sample, position;
    const char *ext;
} part_ref;

static int compare_part_refs(const void *a, const void *b) {
    const part_ref *x = a, *y = b;
    if (x->sample != y->sample) return (x->sample > y->sample) - (x->sample < y->sample);
    int c = ascii_casecmp(x->ext, y->ext);
    return c ? c : (x->position > y->position) - (x->position < y->position);
}

/* By sorting, so a shard of a million members costs n log n, whatever its samples look like. */
static ftl_status check_keys_and_extensions(const tar_index *t, const webdataset_sample_list *l, size_t parts) {
    ftl_status st = FTL_OK;
    key_ref *keys = ftl_xmalloc((l->count ? l->count : 1) * sizeof *keys);
    for (size_t i = 0; i < l->count; i++) keys[i] = (key_ref){l->samples[i].key, i};
    qsort(keys, l->count, sizeof *keys, compare_key_refs);
    for (size_t i = 1; i < l->count && st == FTL_OK; i++) {
        if (strcmp(keys[i - 1].key, keys[i].key) != 0) continue;
        const webdataset_sample *a = &l->samples[keys[i - 1].sample], *b = &l->samples[keys[i].sample];
        st = ftl_fail(FTL_E_FORMAT, "%s: key %s comes back after other samples: members %s and %s (the members of a sample must be "
                      "adjacent)", t->path, quote(a->key, strlen(a->key)).text, member_name(t, a->parts[0].member).text,
                      member_name(t, b->parts[0].member).text);
    }
    free(keys);
    if (st != FTL_OK) return st;
    part_ref *refs = ftl_xmalloc((parts ? parts : 1) * sizeof *refs);
    size_t n = 0;
    for (size_t i = 0; i < l->count; i++)
        for (size_t j = 0; j < l->samples[i].part_count; j++) refs[n++] = (part_ref){i, j, l->samples[i].parts[j].ext};
    qsort(refs, n, sizeof *refs, compare_part_refs);
    for (size_t i = 1; i < n && st == FTL_OK; i++) {
        if (refs[i - 1].sample != refs[i].sample || ascii_casecmp(refs[i - 1].ext, refs[i].ext) != 0) continue;
        const webdataset_sample *s = &l->samples[refs[i].sample];
        st = ftl_fail(FTL_E_FORMAT, "%s: sample %s has two members of extension %s: %s and %s", t->path,
                      quote(s->key, strlen(s->key)).text, quote(refs[i].ext, strlen(refs[i].ext)).text,
                      member_name(t, s->parts[refs[i - 1].position].member).text,
                      member_name(t, s->parts[refs[i].position].member).text);
    }
    free(refs);
    return st;
}

ftl_status webdataset_samples(const tar_index *t, webdataset_sample_list **out) {
    *out = NULL;
    webdataset_sample_list *l = ftl_xcalloc(1, sizeof *l);
    l->part_storage = ftl_xmalloc((t->count ? t->count : 1) * sizeof *l->part_storage);
    size_t cap = 0, parts = 0;
    for (size_t m = 0; m < t->count; m++) {
        const char *name = t->members[m].name, *ext;
        size_t key_len;
        if (!split_key(name, &key_len, &ext)) {
            l->members_without_key++;
            continue;
        }
        webdataset_sample *s = l->count ? &l->samples[l->count - 1] : NULL;
        if (!s || strlen(s->key) != key_len || memcmp(s->key, name, key_len) != 0) {
            if (l->count == cap) {
                cap = cap ? cap * 2 : 64;
                l->samples = ftl_xrealloc(l->samples, cap * sizeof *l->samples);
            }
            s = &l->samples[l->count++];
            s->key = ftl_xmalloc(key_len + 1);
            memcpy(s->key, name, key_len);
            s->key[key_len] = '\0';
            s->parts = l->part_storage + parts; /* a sample's parts are consecutive */
            s->part_count = 0;
        }
        l->part_storage[parts++] = (webdataset_part){ext, m};
        s->part_count++;
    }
    ftl_status st = check_keys_and_extensions(t, l, parts);
    if (st != FTL_OK) {
        webdataset_samples_free(l);
        return st;
    }
    *out = l;
    return FTL_OK;
}

void webdataset_samples_free(webdataset_sample_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) free(l->samples[i].key);
    free(l->samples);
    free(l->part_storage);
    free(l);
}

bool webdataset_sample_find(const webdataset_sample *s, const char *ext, size_t *member) {
    for (size_t i = 0; i < s->part_count; i++)
        if (ascii_casecmp(s->parts[i].ext, ext) == 0) {
            *member = s->parts[i].member;
            return true;
        }
    return false;
}

static ftl_status read_label_member(const tar_index *t, size_t m, uint8_t **data, size_t *size) {
    if (t->members[m].size > LABEL_BYTES_MAX)
        return ftl_fail(FTL_E_FORMAT, "%s: member %s holds %llu bytes, more than the %d a label file may hold", t->path,
                        member_name(t, m).text, (unsigned long long)t->members[m].size, LABEL_BYTES_MAX);
    return tar_index_read(t, m, data, size);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* A .cls: an optional sign and decimal digits, ASCII whitespace around them. */
static ftl_status parse_cls(const tar_index *t, size_t m, const char *text, size_t n, int32_t *out) {
    size_t b = 0, e = n;
    while (b < e && is_space(text[b])) b++;
    while (e > b && is_space(text[e - 1])) e--;
    if (b == e) return ftl_fail(FTL_E_FORMAT, "%s: member %s: the label is empty, expected a decimal integer", t->path, member_name(t, m).text);
    size_t i = b;
    bool negative = text[i] == '-';
    if (text[i] == '-' || text[i] == '+') i++;
    int64_t v = 0;
    bool digits = i < e;
    for (; i < e; i++) {
        if (text[i] < '0' || text[i] > '9') {
            digits = false;
            break;
        }
        if (v <= (int64_t)INT32_MAX + 1) v = v * 10 + (text[i] - '0'); /* past that it is out of range anyway */
    }
    if (!digits)
        return ftl_fail(FTL_E_FORMAT, "%s: member %s: label %s is not a decimal integer", t->path, member_name(t, m).text,
                        quote(text + b, e - b).text);
    if (negative) v = -v;
    if (v > INT32_MAX || v < INT32_MIN)
        return ftl_fail(FTL_E_FORMAT, "%s: member %s: label %s is out of range for a 32-bit label", t->path, member_name(t, m).text,
                        quote(text + b, e - b).text);
    *out = (int32_t)v;
    return FTL_OK;
}

static const char *json_type_name(ftl_json_type type) {
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "value";
}

/* A JSON label field: an integer (int32), a non-empty string, or null (absent). */
static ftl_status take_json_label(const tar_index *t, size_t m, const char *field, const ftl_json *v, webdataset_label *out) {
    if (v->type == FTL_JSON_NUMBER) {
        if (!isfinite(v->number) || v->number != floor(v->number) || v->number < INT32_MIN || v->number > INT32_MAX)
            return ftl_fail(FTL_E_FORMAT, "%s: member %s: \"%s\" is %.17g, expected an integer in int32's range", t->path,
                            member_name(t, m).text, field, v->number);
        out->kind = WEBDATASET_LABEL_INDEX;
        out->index = (int32_t)v->number;
    } else if (v->type == FTL_JSON_STRING) {
        if (!v->string[0])
            return ftl_fail(FTL_E_FORMAT, "%s: member %s: \"%s\" is an empty string, expected a class name or an integer", t->path,
                            member_name(t, m).text, field);
        out->kind = WEBDATASET_LABEL_NAME;
        out->name = ftl_strdup(v->string);
    } else if (v->type != FTL_JSON_NULL) {
        return ftl_fail(FTL_E_FORMAT, "%s: member %s: \"%s\" is a JSON %s, expected an integer or a string", t->path,
                        member_name(t, m).text, field, json_type_name(v->type));
    }
    return FTL_OK;
}

/* "label" first, then "cls"; when both hold integers, or both strings, they must agree. */
static ftl_status parse_json(const tar_index *t, size_t m, const char *text, size_t n, webdataset_label *out) {
    ftl_json *doc = NULL;
    ftl_status st = ftl_json_parse(text, n, &doc);
    if (st != FTL_OK) return ftl_fail_context(st, "%s: member %s", t->path, member_name(t, m).text);
    if (doc->type != FTL_JSON_OBJECT) {
        st = ftl_fail(FTL_E_FORMAT, "%s: member %s is a JSON %s, expected an object with a \"label\" or \"cls\" field", t->path,
                      member_name(t, m).text, json_type_name(doc->type));
    } else {
        const ftl_json *label = ftl_json_get(doc, "label"), *cls = ftl_json_get(doc, "cls");
        if (label && label->type == FTL_JSON_NULL) label = NULL;
        if (label && cls && label->type == cls->type &&
            ((label->type == FTL_JSON_NUMBER && label->number != cls->number) ||
             (label->type == FTL_JSON_STRING && strcmp(label->string, cls->string) != 0)))
            st = ftl_fail(FTL_E_FORMAT, "%s: member %s: \"label\" and \"cls\" differ", t->path, member_name(t, m).text);
        else if (label) st = take_json_label(t, m, "label", label, out);
        else if (cls) st = take_json_label(t, m, "cls", cls, out);
    }
    ftl_json_free(doc);
    return st;
}

ftl_status webdataset_sample_label(const tar_index *t, const webdataset_sample *s, webdataset_label *out) {
    *out = (webdataset_label){.kind = WEBDATASET_LABEL_ABSENT};
    size_t m;
    bool cls = webdataset_sample_find(s, "cls", &m);
    if (!cls && !webdataset_sample_find(s, "json", &m)) return FTL_OK;
    uint8_t *data;
    size_t size;
    FTL_TRY(read_label_member(t, m, &data, &size));
    ftl_status st;
    if (cls) {
        st = parse_cls(t, m, (const char *)data, size, &out->index);
        if (st == FTL_OK) out->kind = WEBDATASET_LABEL_INDEX;
    } else {
        st = parse_json(t, m, (const char *)data, size, out);
    }
    free(data);
    if (st != FTL_OK) {
        webdataset_label_free(out);
        return st;
    }
    if (out->kind != WEBDATASET_LABEL_ABSENT) out->member = m;
    return FTL_OK;
}

void webdataset_label_free(webdataset_label *label) {
    free(label->name);
    *label = (webdataset_label){.kind = WEBDATASET_LABEL_ABSENT};
}
