/* Raw labels (integers or text) into class indexes and names. */
#include "data/prep_labels.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CLASSES = 1 << 20 };

static void grow(prep_labels *l) {
    l->ints = ftl_xrealloc(l->ints, (size_t)(l->count + 1) * sizeof *l->ints);
    l->texts = ftl_xrealloc(l->texts, (size_t)(l->count + 1) * sizeof *l->texts);
}

void prep_labels_add_int(prep_labels *l, int64_t value) {
    grow(l);
    l->ints[l->count] = value;
    l->texts[l->count++] = NULL;
    l->int_count++;
}

void prep_labels_add_text(prep_labels *l, char *text) {
    grow(l);
    l->ints[l->count] = 0;
    l->texts[l->count++] = text;
    l->text_count++;
}

static bool names_from_array(prep_labels *l, const ftl_json *array, const char *from) {
    if (!array || array->type != FTL_JSON_ARRAY || array->count == 0) return false;
    for (size_t i = 0; i < array->count; i++)
        if (array->items[i].type != FTL_JSON_STRING) return false;
    l->names = ftl_xcalloc(array->count, sizeof *l->names);
    for (size_t i = 0; i < array->count; i++) l->names[i] = ftl_strdup(array->items[i].string);
    l->name_count = (int64_t)array->count;
    l->names_from = ftl_strdup(from);
    return true;
}

bool prep_labels_names_from_metadata(prep_labels *l, const char *ftl_classes, const char *huggingface, const char *column,
                                     const char *file) {
    if (l->names) return true;
    ftl_json *v = NULL;
    bool found = false;
    if (ftl_classes && ftl_json_parse(ftl_classes, strlen(ftl_classes), &v) == FTL_OK) {
        char *from = ftl_format("the ftl.classes metadata of %s", file);
        found = names_from_array(l, v, from);
        free(from);
    }
    ftl_json_free(v);
    v = NULL;
    /* {"info": {"features": {"label": {"names": [...], "_type": "ClassLabel"}}}} */
    if (!found && huggingface && ftl_json_parse(huggingface, strlen(huggingface), &v) == FTL_OK) {
        const ftl_json *feature = ftl_json_get(ftl_json_get(ftl_json_get(v, "info"), "features"), column);
        const char *type = ftl_json_get_string(feature, "_type");
        if (type && strcmp(type, "ClassLabel") == 0) {
            char *from = ftl_format("the Hugging Face ClassLabel names of '%s' in %s", column, file);
            found = names_from_array(l, ftl_json_get(feature, "names"), from);
            free(from);
        }
    }
    ftl_json_free(v);
    return found;
}

/* "001.ak47" -> "ak47": Caltech-style numeric prefixes are dropped from display names. */
static char *display_name_of(const char *folder) {
    const char *p = folder;
    while (isdigit((unsigned char)*p)) p++;
    if (p > folder && (*p == '.' || *p == '_' || *p == '-') && p[1] != '\0') return ftl_strdup(p + 1);
    return ftl_strdup(folder);
}

void prep_labels_set_class_names(prep_source *s) {
    s->class_names = ftl_xcalloc((size_t)s->class_count, sizeof *s->class_names);
    for (int i = 0; i < s->class_count; i++) s->class_names[i] = display_name_of(s->class_folders[i]);
    /* Stripping prefixes must not merge two classes; fall back to folder names if it would. */
    for (int i = 0; i < s->class_count; i++)
        for (int j = i + 1; j < s->class_count; j++)
            if (strcmp(s->class_names[i], s->class_names[j]) == 0) {
                for (int k = 0; k < s->class_count; k++) {
                    free(s->class_names[k]);
                    s->class_names[k] = ftl_strdup(s->class_folders[k]);
                }
                return;
            }
}

static int compare_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Integer labels: the names from metadata, or "0".."max" when there are none. */
static ftl_status finish_ints(prep_labels *l, prep_source *s, prep_item_namer name_item) {
    int64_t max = -1;
    for (int64_t i = 0; i < l->count; i++) {
        int64_t v = l->ints[i];
        bool bad = v < 0 || (l->names ? v >= l->name_count : v >= MAX_CLASSES);
        if (bad) {
            char *name = name_item(s, &s->items[i]);
            ftl_status st = l->names ? ftl_fail(FTL_E_INVALID_ARG, "%s: label %lld is out of range: %s names %lld classes "
                                                "(0..%lld)", name, (long long)v, l->names_from, (long long)l->name_count,
                                                (long long)l->name_count - 1)
                                     : ftl_fail(FTL_E_INVALID_ARG, "%s: label %lld: integer labels must be 0..%d",
                                                name, (long long)v, MAX_CLASSES - 1);
            free(name);
            return st;
        }
        if (v > max) max = v;
    }
    int64_t n = l->names ? l->name_count : max + 1;
    s->class_count = (int)n;
    s->class_folders = ftl_xcalloc((size_t)n, sizeof *s->class_folders);
    for (int64_t c = 0; c < n; c++)
        s->class_folders[c] = l->names ? ftl_strdup(l->names[c]) : ftl_format("%lld", (long long)c);
    for (int64_t i = 0; i < l->count; i++) s->items[i].label = (int)l->ints[i];
    return FTL_OK;
}

/* Text labels: the distinct texts sorted (byte order, as folder names are) are the classes. */
static ftl_status finish_texts(prep_labels *l, prep_source *s) {
    char **sorted = ftl_xmalloc((size_t)l->count * sizeof *sorted);
    memcpy(sorted, l->texts, (size_t)l->count * sizeof *sorted);
    qsort(sorted, (size_t)l->count, sizeof *sorted, compare_text);
    int64_t n = 0;
    for (int64_t i = 0; i < l->count; i++)
        if (n == 0 || strcmp(sorted[n - 1], sorted[i]) != 0) sorted[n++] = sorted[i];
    if (n > MAX_CLASSES) {
        free(sorted);
        return ftl_fail(FTL_E_INVALID_ARG, "%lld distinct labels: more than %d classes", (long long)n, MAX_CLASSES);
    }
    s->class_count = (int)n;
    s->class_folders = ftl_xcalloc((size_t)n, sizeof *s->class_folders);
    for (int64_t c = 0; c < n; c++) s->class_folders[c] = ftl_strdup(sorted[c]);
    for (int64_t i = 0; i < l->count; i++) {
        char **hit = bsearch(&l->texts[i], sorted, (size_t)n, sizeof *sorted, compare_text);
        s->items[i].label = (int)(hit - sorted);
    }
    free(sorted);
    return FTL_OK;
}

ftl_status prep_labels_finish(prep_labels *l, prep_source *s, prep_item_namer name_item) {
    if (l->count != s->item_count)
        return ftl_fail(FTL_E_INTERNAL, "%lld labels for %lld items", (long long)l->count, (long long)s->item_count);
    if (l->int_count && l->text_count) {
        int64_t first_text = 0;
        while (!l->texts[first_text]) first_text++;
        char *name = name_item(s, &s->items[first_text]);
        ftl_status st = ftl_fail(FTL_E_INVALID_ARG, "%s: label '%s' is text where other labels are integers: one source's "
                                 "labels are all of one kind", name, l->texts[first_text]);
        free(name);
        return st;
    }
    FTL_TRY(l->text_count ? finish_texts(l, s) : finish_ints(l, s, name_item));
    prep_labels_set_class_names(s);
    int64_t *per_class = ftl_xcalloc((size_t)s->class_count, sizeof *per_class);
    for (int64_t i = 0; i < s->item_count; i++) per_class[s->items[i].label]++;
    for (int c = 0; c < s->class_count; c++) s->empty_class_count += per_class[c] == 0;
    free(per_class);
    return FTL_OK;
}

void prep_labels_free(prep_labels *l) {
    for (int64_t i = 0; i < l->count; i++) free(l->texts[i]);
    free(l->texts);
    free(l->ints);
    for (int64_t i = 0; i < l->name_count; i++) free(l->names[i]);
    free(l->names);
    free(l->names_from);
    memset(l, 0, sizeof *l);
}
