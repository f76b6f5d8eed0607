/* Feature cache: keys, reuse checks, embedding on a miss, loading into memory. */
#include "pipeline/feature_cache.h"
#include "ftl/parquet.h"
#include "data/dataset.h"
#include "data/loader_plan.h"
#include "nn/device_caps.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/string_list.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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


char *dataset_quick_identity(const char *const *sources, int source_count) {
    char **paths;
    int count;
    if (loader_expand_sources(sources, source_count, &paths, &count) != FTL_OK) return ftl_strdup("(unreadable)");
    ftl_strbuf b = {0};
    ftl_strbuf_printf(&b, "%d file%s", count, count == 1 ? "" : "s");
    for (int i = 0; i < count; i++) {
        uint64_t size = 0;
        ftl_file_size(paths[i], &size);
        ftl_parquet_file *f = NULL;
        int64_t rows = -1;
        if (ftl_parquet_open(paths[i], &f) == FTL_OK) rows = ftl_parquet_num_rows(f);
        ftl_parquet_close(f);
        ftl_strbuf_printf(&b, "; %s: %llu bytes, %lld rows", base_name(paths[i]), (unsigned long long)size, (long long)rows);
        free(paths[i]);
    }
    free(paths);
    return b.data;
}

void feature_cache_parts_free(feature_cache_parts *p) {
    for (int i = 0; i < p->count; i++) free(p->parts[i].path);
    free(p->parts);
    memset(p, 0, sizeof *p);
}

static int part_order(const void *a, const void *b) {
    const feature_part *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end; /* the longest first */
}

/* The valid parts of this key in the cache folder, sorted. */
static void list_parts(const char *dir, const char *prefix, const cache_identity *id, feature_part **parts, int *count) {
    *parts = NULL;
    *count = 0;
    ftl_string_list names = {0};
    if (ftl_list_folder(dir, &names) != FTL_OK) return;
    size_t plen = strlen(prefix);
    const char *suffix = ".features.parquet";
    for (int64_t i = 0; i < names.count; i++) {
        const char *n = names.items[i];
        long long b, e;
        int used = 0;
        if (strncmp(n, prefix, plen) != 0 || sscanf(n + plen, "%lld-%lld%n", &b, &e, &used) != 2 || b < 0 || e <= b ||
            strcmp(n + plen + used, suffix) != 0)
            continue;
        char *path = ftl_format("%s/%s", dir, n);
        const char *why = stale_reason(path, id);
        if (why) {
            ftl_log_warn("feature cache: %s is stale (%s); not using it", path, why);
            free(path);
            continue;
        }
        *parts = ftl_xrealloc(*parts, (size_t)(*count + 1) * sizeof **parts);
        (*parts)[(*count)++] = (feature_part){path, b, e};
    }
    ftl_string_list_free(&names);
    if (*count > 1) qsort(*parts, (size_t)*count, sizeof **parts, part_order);
}

/* Why the row groups of part p that hold rows [from, to) no longer have the bytes they were written
 * with (a page CRC or header that does not match), or NULL when they do: a cache damaged on disk is
 * rebuilt, never trained on, and the check happens before any work rather than in an epoch. */
static char *part_damage(const feature_part *p, int64_t from, int64_t to) {
    ftl_parquet_file *f;
    if (ftl_parquet_open(p->path, &f) != FTL_OK) return ftl_strdup(ftl_last_error());
    char *why = NULL;
    int64_t first = p->begin;
    for (int g = 0; g < ftl_parquet_num_row_groups(f) && !why; g++) {
        int64_t n = ftl_parquet_row_group_rows(f, g);
        if (first < to && first + n > from && ftl_parquet_check_row_group(f, g, NULL) != FTL_OK)
            why = ftl_strdup(ftl_last_error());
        first += n;
    }
    ftl_parquet_close(f);
    return why;
}

static ftl_status embed_part(const feature_cache_request *r, const char *fingerprint, const char *path, int64_t begin,
                             int64_t end) {
    const ftl_embed_options *e = r->embed;
    ftl_embed_options eo = *e;
    eo.sources = r->sources;
    eo.source_count = r->source_count;
    eo.output_path = path;
    eo.overwrite = true;
    eo.row_begin = begin;
    eo.row_end = end;
    eo.shard = 0;
    eo.num_shards = 1;
    eo.collectives = NULL; /* this rank's part only */
    eo.source_fingerprint = fingerprint;
    eo.flip = r->flipped;
    ftl_embed_summary summary;
    ftl_dist_phase_begin(r->collectives, "building its feature cache part");
    ftl_status st = ftl_embed_run(&eo, &summary);
    ftl_dist_phase_end(r->collectives);
    if (st == FTL_OK)
        ftl_log_info("feature cache: %lld %s images in %.1f s (%.1f images/s, %.1f%% waiting for data)",
                     (long long)summary.rows, r->what, summary.seconds,
                     summary.seconds > 0 ? (double)summary.rows / summary.seconds : 0.0,
                     summary.seconds > 0 ? 100.0 * summary.wait_seconds / summary.seconds : 0.0);
    return st;
}

static ftl_status cache_resolve(const feature_cache_request *r, bool embed_on_miss, feature_cache_parts *out) {
    memset(out, 0, sizeof *out);
    const ftl_embed_options *e = r->embed;
    const ftl_model_info *info = ftl_model_get_info(r->model);
    int image_size;
    FTL_TRY(loader_dataset_image_size(r->sources, r->source_count, e->image_size, &image_size));
    FTL_TRY(loader_total_rows(r->sources, r->source_count, &out->total_rows));
    int64_t begin = r->row_end > 0 ? r->row_begin : 0, end = r->row_end > 0 ? r->row_end : out->total_rows;
    if (begin < 0 || end > out->total_rows || begin > end)
        return ftl_fail(FTL_E_INTERNAL, "rows %lld-%lld are outside the dataset's %lld", (long long)begin, (long long)end,
                        (long long)out->total_rows);
    out->begin = begin;
    out->end = end;
    cache_identity id = {.backbone_sha256 = info->sha256, .feature_tensor = info->feature_name,
                         .precision = ftl_nn_precision_name(e->precision),
                         .conv_algorithm = ftl_nn_conv_algorithm_name(e->conv_algorithm)};
    if (r->fingerprint) snprintf(id.fingerprint, sizeof id.fingerprint, "%s", r->fingerprint);
    else FTL_TRY(ftl_dataset_fingerprint(r->sources, r->source_count, id.fingerprint));
    id.preprocess = ftl_nn_preprocess_json(&e->preprocess, r->model, image_size);
    /* The backbone's identity: its sha256, or with fine-tuned tensors a hash over them too, so a
     * tuned backbone never reuses the frozen one's features. The leading tag changes with any kernel
     * that changes feature bits (4: the fused attention of ViT and Swin; 5: bf16 plans keep linear
     * products read only as bf16 in bf16; 6: the fused attention and the 1x1 -> depthwise fusion on AVX2 CPUs;
     * 7: AVX2 CPUs run convolutional backbones channel-blocked; SiLU as one swish op; 8: the attention's
     * softmax writes terms below e^-44 as 0 and, with AVX-512, takes a 1-2 column key tail by gathers). */
    char *key_text = ftl_format("ftl-feature-cache-8\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\nlabel offset %d", id.fingerprint,
                                info->identity, id.feature_tensor, id.preprocess, id.precision, id.conv_algorithm,
                                e->image_column ? e->image_column : "image",
                                e->label_column ? e->label_column : "label", e->label_offset);
    if (e->precision == FTL_NN_BF16) { /* bf16 plans: 2, Swin's residuals added after the window reverse in
                                          fp32 (a bf16 add before); 3, ftl's layer norm (fp32 in, bf16 out, no
                                          conversion after): bf16 keys change, fp32 keys do not */
        char *k = ftl_format("%s\nbf16 plan 3", key_text);
        free(key_text);
        key_text = k;
    }
    const nn_device_caps *caps = nn_device_caps_of(info->device_kind);
    if (caps->gpu) { /* GPU features are not CPU features (CPU keys unchanged): "device cuda" */
        char *k = ftl_format("%s\ndevice %s", key_text, caps->name);
        free(key_text);
        key_text = k;
    }
    if (r->flipped) { /* the mirrored images: a key of their own (unflipped keys unchanged) */
        char *k = ftl_format("%s\nflipped", key_text);
        free(key_text);
        key_text = k;
    }
    char key[65];
    ftl_sha256_hex_of_string(key_text, key);
    free(key_text);
    char stem[96];
    snprintf(stem, sizeof stem, "%.60s", base_name(r->sources[0]));
    char *dot = strstr(stem, ".parquet");
    if (dot) *dot = '\0';
    ftl_status st = ftl_make_dirs(r->cache_dir);
    char *prefix = ftl_format("%s-%.16s.rows-", stem, key);
    feature_part *have = NULL;
    int have_count = 0;
    if (st == FTL_OK) list_parts(r->cache_dir, prefix, &id, &have, &have_count);
    /* Cover [begin, end) with the parts there are, embedding the gaps. */
    bool *taken = ftl_xcalloc((size_t)(have_count ? have_count : 1), sizeof *taken);
    int64_t at = begin;
    int usable = have_count;
    out->reused = true;
    while (st == FTL_OK && at < end) {
        int best = -1;
        for (int i = 0; i < have_count; i++)
            if (have[i].begin <= at && have[i].end > at && (best < 0 || have[i].end > have[best].end)) best = i;
        char *damage = best >= 0 ? part_damage(&have[best], at, have[best].end < end ? have[best].end : end) : NULL;
        if (damage) {
            size_t named = strlen(have[best].path); /* the reader's message starts with the path */
            const char *detail = strncmp(damage, have[best].path, named) == 0 && damage[named] == ':' ? damage + named + 2 : damage;
            ftl_log_warn("feature cache: %s is damaged (%s); %s", have[best].path, detail,
                         embed_on_miss ? "removing it and computing its rows again" : "not using it");
            if (embed_on_miss) unlink(have[best].path);
            free(damage);
            ftl_clear_error();
            have[best].begin = have[best].end = INT64_MAX; /* out of every later choice and gap */
            usable--;
            continue;
        }
        if (best >= 0) {
            taken[best] = true;
            out->parts = ftl_xrealloc(out->parts, (size_t)(out->count + 1) * sizeof *out->parts);
            out->parts[out->count++] = (feature_part){ftl_strdup(have[best].path), have[best].begin, have[best].end};
            at = have[best].end;
            continue;
        }
        int64_t gap_end = end;
        for (int i = 0; i < have_count; i++)
            if (have[i].begin > at && have[i].begin < gap_end) gap_end = have[i].begin;
        out->reused = false;
        if (!embed_on_miss) {
            feature_cache_parts_free(out);
            break;
        }
        char *path = ftl_format("%s/%s%lld-%lld.features.parquet", r->cache_dir, prefix, (long long)at, (long long)gap_end);
        if (usable == 0)
            ftl_log_info("feature cache: computing %s features of %s%s (rows %lld-%lld) into %s", r->what, r->sources[0],
                         r->flipped ? ", mirrored" : "", (long long)at, (long long)gap_end, path);
        else
            ftl_log_info("feature cache: computing %s features of rows %lld-%lld, which %s does not hold (its parts of "
                         "this key come from a run over other rows, e.g. another number of ranks)",
                         r->what, (long long)at, (long long)gap_end, r->cache_dir);
        st = embed_part(r, id.fingerprint, path, at, gap_end);
        if (st == FTL_OK) {
            out->parts = ftl_xrealloc(out->parts, (size_t)(out->count + 1) * sizeof *out->parts);
            out->parts[out->count++] = (feature_part){path, at, gap_end};
            path = NULL;
        }
        free(path);
        at = gap_end;
    }
    if (st == FTL_OK && out->count > 0 && out->reused)
        ftl_log_info("feature cache: reusing %d part%s in %s for %s (rows %lld-%lld)", out->count, out->count == 1 ? "" : "s",
                     r->cache_dir, r->what, (long long)begin, (long long)end);
    for (int i = 0; i < have_count; i++) free(have[i].path);
    free(have);
    free(taken);
    free(prefix);
    free(id.preprocess);
    if (st != FTL_OK) feature_cache_parts_free(out);
    return st;
}

ftl_status feature_cache_get(const feature_cache_request *r, feature_cache_parts *out) {
    return cache_resolve(r, true, out);
}

ftl_status feature_cache_lookup(const feature_cache_request *r, feature_cache_parts *out) {
    return cache_resolve(r, false, out);
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
