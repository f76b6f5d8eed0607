/* Class lists of datasets. */
#include "pipeline/dataset_classes.h"
#include "ftl/parquet.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

/* Class names: the dataset's ftl.classes, else "0".."K-1" with K = largest label + 1. */
ftl_status dataset_read_classes(const char *const *sources, const char *label_column, int label_offset, char ***names,
                                int64_t *count) {
    char **paths;
    int n;
    FTL_TRY(loader_expand_sources(sources, 1, &paths, &n));
    ftl_parquet_file *f = NULL;
    ftl_status st = ftl_parquet_open(paths[0], &f);
    const char *json = st == FTL_OK ? ftl_parquet_metadata_get(f, FTL_META_CLASSES) : NULL;
    *names = NULL;
    *count = 0;
    if (st == FTL_OK && json && label_offset != 0)
        st = ftl_fail(FTL_E_INVALID_ARG, "%s names its classes (%s): its labels are 0-based already, --label-offset %d does not "
                      "apply", paths[0], FTL_META_CLASSES, label_offset);
    if (st == FTL_OK && json) {
        ftl_json *v;
        st = ftl_json_parse(json, strlen(json), &v);
        if (st == FTL_OK && (v->type != FTL_JSON_ARRAY || v->count == 0))
            st = ftl_fail(FTL_E_FORMAT, "%s: %s is not a list of class names", paths[0], FTL_META_CLASSES);
        for (size_t i = 0; st == FTL_OK && i < v->count; i++)
            if (v->items[i].type != FTL_JSON_STRING) st = ftl_fail(FTL_E_FORMAT, "%s: class %zu is not a string", paths[0], i);
        if (st == FTL_OK) {
            *count = (int64_t)v->count;
            *names = ftl_xcalloc(v->count, sizeof **names);
            for (size_t i = 0; i < v->count; i++) (*names)[i] = ftl_strdup(v->items[i].string);
        }
        if (v) ftl_json_free(v);
    } else if (st == FTL_OK) {
        /* No class list (a Spark or pyarrow dataset): scan the labels. */
        int64_t max_label = -1, min_label = INT64_MAX;
        for (int k = 0; st == FTL_OK && k < n; k++) {
            ftl_parquet_file *g = NULL;
            st = ftl_parquet_open(paths[k], &g);
            int c = st == FTL_OK ? ftl_parquet_find_column(g, label_column) : -1;
            if (st == FTL_OK && c < 0) st = ftl_fail(FTL_E_NOT_FOUND, "%s: no column '%s'", paths[k], label_column);
            if (st == FTL_OK && ftl_parquet_column(g, c)->type != FTL_PARQUET_INT32 &&
                ftl_parquet_column(g, c)->type != FTL_PARQUET_INT64)
                st = ftl_fail(FTL_E_UNSUPPORTED, "%s: column '%s' is %s; labels must be INT32 or INT64 class indexes", paths[k],
                              label_column, ftl_parquet_type_name(ftl_parquet_column(g, c)->type));
            ftl_parquet_column_values v = {0};
            for (int rg = 0; st == FTL_OK && rg < ftl_parquet_num_row_groups(g); rg++) {
                st = ftl_parquet_read_column(g, rg, c, &v);
                for (int64_t i = 0; st == FTL_OK && i < v.rows; i++) {
                    int64_t x = 0;
                    if (v.validity && !v.validity[i]) continue;
                    if (v.type == FTL_PARQUET_INT32) {
                        int32_t y;
                        memcpy(&y, (uint8_t *)v.values + 4 * i, 4);
                        x = y;
                    } else {
                        memcpy(&x, (uint8_t *)v.values + 8 * i, 8);
                    }
                    if (x < INT32_MIN || x > INT32_MAX) { /* no class index; also keeps the sum below in range */
                        st = ftl_fail(FTL_E_FORMAT, "%s: label %lld is out of range", paths[k], (long long)x);
                        break;
                    }
                    x += label_offset;
                    if (x > max_label) max_label = x;
                    if (x < min_label) min_label = x;
                }
            }
            ftl_parquet_column_values_free(&v);
            ftl_parquet_close(g);
        }
        if (st == FTL_OK && min_label < 0)
            st = ftl_fail(FTL_E_FORMAT, "%s: label %lld%s is negative: labels must be 0..K-1", sources[0],
                          (long long)(min_label - label_offset), label_offset ? " (before --label-offset)" : "");
        if (st == FTL_OK && (max_label < 0 || max_label > 1000000))
            st = ftl_fail(FTL_E_FORMAT, "%s: labels must be 0..K-1 (largest label %lld)", sources[0], (long long)max_label);
        if (st == FTL_OK) {
            *count = max_label + 1;
            *names = ftl_xcalloc((size_t)*count, sizeof **names);
            for (int64_t i = 0; i < *count; i++) (*names)[i] = ftl_format("%lld", (long long)i);
            if (min_label >= 1)
                ftl_log_warn("%s has no class names (%s metadata) and its smallest label is %lld: classes 0..%lld make %lld "
                             "classes, %lld of them without any image; if the labels are 1-based (Spark's file_to_label "
                             "gives 001.ak47 -> 1, and the article subtracts 1), pass --label-offset -%lld",
                             paths[0], FTL_META_CLASSES, (long long)min_label, (long long)max_label, (long long)max_label + 1,
                             (long long)min_label, (long long)min_label);
            else
                ftl_log_warn("%s has no class names (%s metadata); using 0..%lld", paths[0], FTL_META_CLASSES, (long long)max_label);
        }
    }
    ftl_parquet_close(f);
    for (int k = 0; k < n; k++) free(paths[k]);
    free(paths);
    return st;
}

void dataset_free_classes(char **names, int64_t count) {
    for (int64_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

ftl_status dataset_check_classes(const char *const *sources, const char *label_column, int label_offset, char *const *names,
                                 int64_t count, const char *what) {
    char **mine = NULL;
    int64_t n = 0;
    FTL_TRY(dataset_read_classes(sources, label_column, label_offset, &mine, &n));
    ftl_status st = FTL_OK;
    bool same = n == count;
    for (int64_t i = 0; same && i < n; i++) same = strcmp(mine[i], names[i]) == 0;
    if (!same) {
        char *a = ftl_json_string_array(mine, n), *b = ftl_json_string_array(names, count);
        /* Without a class list, labels only have to fit (a Spark dataset's names are "0".."K-1"). */
        bool numbered = n <= count;
        for (int64_t i = 0; numbered && i < n; i++) {
            char expect[32];
            snprintf(expect, sizeof expect, "%lld", (long long)i);
            numbered = strcmp(mine[i], expect) == 0;
        }
        if (!numbered)
            st = ftl_fail(FTL_E_INVALID_ARG, "%s has classes %s but %s has %s: the labels would mean different things",
                          sources[0], a, what, b);
        free(a);
        free(b);
    }
    dataset_free_classes(mine, n);
    return st;
}

/* A label statistic's value (PLAIN: little-endian INT32 or INT64); false when it is not one. */
static bool stat_value(const uint8_t *bytes, uint32_t length, ftl_parquet_type type, int64_t *out) {
    if (!bytes) return false;
    if (type == FTL_PARQUET_INT32 && length == 4) {
        int32_t x;
        memcpy(&x, bytes, 4);
        *out = x;
        return true;
    }
    if (type == FTL_PARQUET_INT64 && length == 8) {
        memcpy(out, bytes, 8);
        return true;
    }
    return false;
}

static ftl_status label_out_of_range(const char *path, int rg, const char *where, int64_t stored, int label_offset,
                                     int64_t count) {
    return ftl_fail(FTL_E_FORMAT, "%s: row group %d: %s label %lld%s is not a class: the dataset has %lld classes "
                    "(labels 0..%lld)", path, rg, where, (long long)stored, label_offset ? " (before --label-offset)" : "",
                    (long long)count, (long long)count - 1);
}

/* One file's labels into counts. */
static ftl_status count_file_labels(ftl_parquet_file *g, const char *path, const char *label_column, int label_offset,
                                    int64_t count, int64_t *counts) {
    int c = ftl_parquet_find_column(g, label_column);
    if (c < 0) return ftl_fail(FTL_E_NOT_FOUND, "%s: no column '%s'", path, label_column);
    ftl_parquet_type type = ftl_parquet_column(g, c)->type;
    if (type != FTL_PARQUET_INT32 && type != FTL_PARQUET_INT64)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: column '%s' is %s; labels must be INT32 or INT64 class indexes", path,
                        label_column, ftl_parquet_type_name(type));
    int groups = ftl_parquet_num_row_groups(g);
    for (int rg = 0; rg < groups; rg++) { /* the footer's min/max: a bad label found without reading a row */
        ftl_parquet_chunk_info ci;
        int64_t lo, hi;
        if (ftl_parquet_chunk_info_get(g, rg, c, &ci) != FTL_OK || !ci.has_min_max) continue;
        if (!stat_value(ci.min_value, ci.min_length, type, &lo) || !stat_value(ci.max_value, ci.max_length, type, &hi)) continue;
        if (lo + label_offset < 0 || lo > INT32_MAX)
            return label_out_of_range(path, rg, "its smallest", lo, label_offset, count);
        if (hi > INT32_MAX || hi + label_offset >= count)
            return label_out_of_range(path, rg, "its largest", hi, label_offset, count);
    }
    ftl_clear_error();
    ftl_parquet_column_values v = {0};
    ftl_status st = FTL_OK;
    for (int rg = 0; st == FTL_OK && rg < groups; rg++) {
        st = ftl_parquet_read_column(g, rg, c, &v);
        for (int64_t i = 0; st == FTL_OK && i < v.rows; i++) {
            if (v.validity && !v.validity[i]) {
                st = ftl_fail(FTL_E_FORMAT, "%s: row group %d: row %lld: '%s' is null", path, rg, (long long)i, label_column);
                break;
            }
            int64_t x;
            if (v.type == FTL_PARQUET_INT32) {
                int32_t y;
                memcpy(&y, (const uint8_t *)v.values + 4 * i, 4);
                x = y;
            } else {
                memcpy(&x, (const uint8_t *)v.values + 8 * i, 8);
            }
            int64_t label = x >= INT32_MIN && x <= INT32_MAX ? x + label_offset : -1; /* no overflow in the sum */
            if (label < 0 || label >= count) {
                char where[48];
                snprintf(where, sizeof where, "row %lld:", (long long)i);
                st = label_out_of_range(path, rg, where, x, label_offset, count);
                break;
            }
            counts[label]++;
        }
    }
    ftl_parquet_column_values_free(&v);
    return st;
}

ftl_status dataset_count_labels(const char *const *sources, const char *label_column, int label_offset, int64_t count,
                                int64_t *counts) {
    memset(counts, 0, (size_t)count * sizeof *counts);
    char **paths;
    int n;
    FTL_TRY(loader_expand_sources(sources, 1, &paths, &n));
    ftl_status st = FTL_OK;
    for (int k = 0; st == FTL_OK && k < n; k++) {
        ftl_parquet_file *g = NULL;
        st = ftl_parquet_open(paths[k], &g);
        if (st == FTL_OK) st = count_file_labels(g, paths[k], label_column, label_offset, count, counts);
        ftl_parquet_close(g);
    }
    for (int k = 0; k < n; k++) free(paths[k]);
    free(paths);
    return st;
}
