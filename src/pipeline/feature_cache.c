/* Feature cache: keys, reuse checks, embedding on a miss, loading into memory. */
#include "pipeline/feature_cache.h"
#include "ftl/parquet.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/sha256.h"

#include <stdlib.h>
#include <string.h>

typedef struct cache_identity {
    char fingerprint[65];
    char *preprocess;       /* JSON */
    const char *backbone_sha256, *feature_tensor, *precision, *conv_algorithm;
} cache_identity;

static const char *base_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    const char *p = path + n;
    while (p > path && p[-1] != '/') p--;
    return p;
}

/* Why a cached file cannot be reused, or NULL when it can. */
static const char *stale_reason(const char *path, const cache_identity *id) {
    ftl_parquet_file *f;
    if (ftl_parquet_open(path, &f) != FTL_OK) return "it cannot be read";
    const struct { const char *key, *want, *what; } checks[] = {
        {FTL_META_SOURCE_FINGERPRINT, id->fingerprint, "the dataset changed"},
        {FTL_META_BACKBONE_SHA256, id->backbone_sha256, "the backbone changed"},
        {FTL_META_FEATURE_TENSOR, id->feature_tensor, "the feature tensor changed"},
        {FTL_META_PREPROCESS, id->preprocess, "the preprocessing changed"},
        {FTL_META_PRECISION, id->precision, "the precision changed"},
        {FTL_META_CONV_ALGORITHM, id->conv_algorithm, "the convolution algorithm changed"},
    };
    const char *reason = NULL;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0] && !reason; i++) {
        const char *have = ftl_parquet_metadata_get(f, checks[i].key);
        if (!have || strcmp(have, checks[i].want) != 0) reason = checks[i].what;
    }
    if (!reason && ftl_parquet_find_column(f, FTL_COLUMN_FEATURES) < 0) reason = "it has no features column";
    ftl_parquet_close(f);
    return reason;
}

static ftl_status cache_resolve(const feature_cache_request *r, bool embed_on_miss, char **path, bool *reused) {
    *path = NULL;
    *reused = false;
    const ftl_embed_options *e = r->embed;
    const ftl_model_info *info = ftl_model_get_info(r->model);
    int image_size;
    FTL_TRY(loader_dataset_image_size(r->sources, r->source_count, e->image_size, &image_size));
    cache_identity id = {.backbone_sha256 = info->sha256, .feature_tensor = info->feature_name,
                         .precision = ftl_nn_precision_name(e->precision),
                         .conv_algorithm = ftl_nn_conv_algorithm_name(e->conv_algorithm)};
    FTL_TRY(ftl_dataset_fingerprint(r->sources, r->source_count, id.fingerprint));
    id.preprocess = ftl_nn_preprocess_json(&e->preprocess, r->model, image_size);
    char *key_text = ftl_format("ftl-feature-cache-2\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s", id.fingerprint, id.backbone_sha256,
                                id.feature_tensor, id.preprocess, id.precision, id.conv_algorithm,
                                e->image_column ? e->image_column : "image",
                                e->label_column ? e->label_column : "label");
    char key[65];
    ftl_sha256_hex_of_string(key_text, key);
    free(key_text);
    char stem[96];
    snprintf(stem, sizeof stem, "%.60s", base_name(r->sources[0]));
    char *dot = strstr(stem, ".parquet");
    if (dot) *dot = '\0';
    ftl_status st = ftl_make_dirs(r->cache_dir);
    char *file = ftl_format("%s/%s-%.16s.features.parquet", r->cache_dir, stem, key);
    if (st == FTL_OK && ftl_path_exists(file)) {
        const char *why = stale_reason(file, &id);
        if (!why) {
            *reused = true;
            ftl_log_info("feature cache: reusing %s for %s", file, r->what);
        } else {
            ftl_log_warn("feature cache: %s is stale (%s); %s", file, why,
                         embed_on_miss ? "rebuilding it" : "computing the features from the images instead");
        }
    }
    if (st == FTL_OK && !*reused && !embed_on_miss) {
        free(id.preprocess);
        free(file);
        return FTL_OK; /* lookup only: no valid file */
    }
    if (st == FTL_OK && !*reused) {
        ftl_log_info("feature cache: computing %s features of %s into %s", r->what, r->sources[0], file);
        ftl_embed_options eo = *e;
        eo.sources = r->sources;
        eo.source_count = r->source_count;
        eo.output_path = file;
        eo.overwrite = true;
        ftl_embed_summary summary;
        st = ftl_embed_run(&eo, &summary);
        if (st == FTL_OK)
            ftl_log_info("feature cache: %lld %s images in %.1f s (%.1f images/s, %.1f%% waiting for data)",
                         (long long)summary.rows, r->what, summary.seconds,
                         summary.seconds > 0 ? (double)summary.rows / summary.seconds : 0.0,
                         summary.seconds > 0 ? 100.0 * summary.wait_seconds / summary.seconds : 0.0);
    }
    free(id.preprocess);
    if (st != FTL_OK) {
        free(file);
        return st;
    }
    *path = file;
    return FTL_OK;
}

ftl_status feature_cache_get(const feature_cache_request *r, char **path, bool *reused) {
    return cache_resolve(r, true, path, reused);
}

ftl_status feature_cache_lookup(const feature_cache_request *r, char **path) {
    bool reused = false;
    return cache_resolve(r, false, path, &reused);
}

ftl_status feature_file_shape(const char *path, int64_t *rows, int64_t *dim) {
    ftl_parquet_file *f;
    FTL_TRY(ftl_parquet_open(path, &f));
    int c = ftl_parquet_find_column(f, FTL_COLUMN_FEATURES);
    ftl_status st = FTL_OK;
    if (c < 0 || ftl_parquet_column(f, c)->type != FTL_PARQUET_FIXED_LEN_BYTE_ARRAY ||
        ftl_parquet_column(f, c)->fixed_length % 4 != 0)
        st = ftl_fail(FTL_E_FORMAT, "%s: no FIXED_LEN_BYTE_ARRAY '%s' column of float32 vectors", path, FTL_COLUMN_FEATURES);
    else {
        *rows = ftl_parquet_num_rows(f);
        *dim = ftl_parquet_column(f, c)->fixed_length / 4;
    }
    ftl_parquet_close(f);
    return st;
}

ftl_status feature_table_load(const char *path, feature_table *t) {
    memset(t, 0, sizeof *t);
    FTL_TRY(feature_file_shape(path, &t->rows, &t->dim));
    ftl_parquet_file *f;
    FTL_TRY(ftl_parquet_open(path, &f));
    int fc = ftl_parquet_find_column(f, FTL_COLUMN_FEATURES), lc = ftl_parquet_find_column(f, FTL_COLUMN_LABEL);
    ftl_status st = lc < 0 ? ftl_fail(FTL_E_FORMAT, "%s: no '%s' column", path, FTL_COLUMN_LABEL) : FTL_OK;
    if (st == FTL_OK && ftl_parquet_column(f, lc)->type != FTL_PARQUET_INT32)
        st = ftl_fail(FTL_E_FORMAT, "%s: '%s' must be INT32", path, FTL_COLUMN_LABEL);
    t->features = ftl_xmalloc((size_t)(t->rows * t->dim) * sizeof(float) + 1);
    t->labels = ftl_xmalloc((size_t)t->rows * sizeof(int32_t) + 1);
    ftl_parquet_column_values v = {0};
    int64_t at = 0;
    for (int g = 0; st == FTL_OK && g < ftl_parquet_num_row_groups(f); g++) {
        int64_t n = ftl_parquet_row_group_rows(f, g);
        if (at + n > t->rows) st = ftl_fail(FTL_E_FORMAT, "%s: row groups hold more rows than the footer says", path);
        if (st == FTL_OK) st = ftl_parquet_read_column(f, g, fc, &v);
        if (st == FTL_OK && (v.rows != n || v.null_count))
            st = ftl_fail(FTL_E_FORMAT, "%s: row group %d: bad features column", path, g);
        if (st == FTL_OK) memcpy(t->features + at * t->dim, v.values, (size_t)(n * t->dim) * sizeof(float));
        if (st == FTL_OK) st = ftl_parquet_read_column(f, g, lc, &v);
        if (st == FTL_OK && (v.rows != n || v.null_count))
            st = ftl_fail(FTL_E_FORMAT, "%s: row group %d: bad label column", path, g);
        if (st == FTL_OK) memcpy(t->labels + at, v.values, (size_t)n * sizeof(int32_t));
        at += n;
    }
    const char *classes = ftl_parquet_metadata_get(f, FTL_META_CLASSES);
    if (st == FTL_OK && classes) t->classes_json = ftl_strdup(classes);
    ftl_parquet_column_values_free(&v);
    ftl_parquet_close(f);
    if (st != FTL_OK) feature_table_free(t);
    return st;
}

void feature_table_free(feature_table *t) {
    free(t->features);
    free(t->labels);
    free(t->classes_json);
    memset(t, 0, sizeof *t);
}
