/* int8 calibration: the fp32 model run once over sample images, the statistics of every tensor an int8
 * convolution reads (calibration_stats.c), and from them the scales table (int8_scales.c), cached per
 * model and sample. */
#include "ftl/nn.h"
#include "ftl/profile.h"
#include "nn/model_parts.h"
#include "nn/calibration_stats.h"
#include "nn/ir/quantize.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"
#include "util/fsutil.h"
#include "util/sha256.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double PERCENTILE = 0.9999;

ftl_status ftl_nn_calibration_method_parse(const char *text, ftl_nn_calibration_method *method) {
    if (strcmp(text, "percentile") == 0 || strcmp(text, "percentile-99.99") == 0) *method = FTL_NN_CALIBRATION_PERCENTILE;
    else if (strcmp(text, "minmax") == 0 || strcmp(text, "min-max") == 0) *method = FTL_NN_CALIBRATION_MINMAX;
    else return ftl_fail(FTL_E_INVALID_ARG, "--calibration-method '%s': expected percentile or minmax", text);
    return FTL_OK;
}

const char *ftl_nn_calibration_method_name(ftl_nn_calibration_method method) {
    return method == FTL_NN_CALIBRATION_MINMAX ? "minmax" : "percentile-99.99";
}

typedef struct calibration_run {
    nn_calibration_stats *stats; /* per graph tensor */
    const bool *histogram;       /* the two-pass way's pass 2: the tensors it histograms (NULL in pass 1) */
    int threads;
} calibration_run;

static void observe(void *ctx, int tensor, const float *values, size_t count) {
    calibration_run *c = ctx;
    if (!c->histogram) nn_calibration_stats_add(&c->stats[tensor], values, count, c->threads);
    else if (c->histogram[tensor]) nn_calibration_stats_add_histogram(&c->stats[tensor], values, count);
}

/* The most values tensor t can show in `runs` plan runs of `rows` images each (0 when its size per image
 * is not known: then it takes the two-pass way). */
static uint64_t most_values(const nn_tensor *t, int runs, int rows) {
    if (t->shape.rank < 1) return 0;
    uint64_t per_image = 1;
    for (int d = 1; d < t->shape.rank; d++) {
        if (t->shape.d[d] <= 0) return 0;
        per_image *= (uint64_t)t->shape.d[d];
    }
    return per_image * (uint64_t)runs * (uint64_t)rows;
}

/* The tails' memory stays under TAIL_BUDGET: past it (a calibration set of tens of thousands of large
 * images), the largest tensors take the two-pass way, whose histogram is 16 KiB. */
static void keep_tails_within(uint64_t *sized_for, int n, double fraction) {
    const double TAIL_BUDGET = 512.0 * 1024 * 1024;
    for (;;) {
        double bytes = 0;
        int largest = -1;
        for (int t = 0; t < n; t++) {
            if (!sized_for[t]) continue;
            bytes += 2.0 * (1.0 - fraction) * (double)sized_for[t] * sizeof(float);
            if (largest < 0 || sized_for[t] > sized_for[largest]) largest = t;
        }
        if (bytes <= TAIL_BUDGET || largest < 0) return;
        sized_for[largest] = 0;
    }
}

/* Runs `count` images (batch at a time) through the watching model. */
static ftl_status run_images(ftl_model *m, const ftl_nn_preprocess *pp, const uint8_t *images_hwc, int count,
                             int image_size, int batch, float *features) {
    size_t image_bytes = (size_t)image_size * (size_t)image_size * 3;
    for (int done = 0; done < count; done += batch) {
        int rows = count - done < batch ? count - done : batch;
        FTL_TRY(ftl_model_extract_features(m, pp, images_hwc + (size_t)done * image_bytes, rows, image_size, features));
    }
    return FTL_OK;
}

/* The file in cache_dir that holds the calibration of model m (its identity, feature tensor and
 * preprocessing) by `method` on exactly these images. */
static char *cache_file_of(const char *cache_dir, const ftl_model *m, const ftl_model_options *o,
                           const ftl_nn_preprocess *pp, const uint8_t *images, int count, int image_size,
                           ftl_nn_calibration_method method, ftl_nn_precision computed_in) {
    char images_hex[65], key[65];
    ftl_sha256 h;
    uint8_t digest[32];
    ftl_sha256_init(&h);
    ftl_sha256_update(&h, images, (size_t)count * (size_t)image_size * (size_t)image_size * 3);
    ftl_sha256_final(&h, digest);
    ftl_sha256_hex(digest, images_hex);
    char *pre = ftl_nn_preprocess_json(pp, m, image_size);
    /* the version tag changes with anything that changes a calibration for the same inputs (which
     * tensors are eligible, the statistics): old files then no longer match */
    char *text = ftl_format("ftl int8 calibration 1\n%s\n%s\n%s\n%s\n%d %d\n%s\n%s", ftl_model_get_info(m)->identity,
                            o->features_from ? o->features_from : "", pre ? pre : "",
                            ftl_nn_calibration_method_name(method), count, image_size, images_hex,
                            computed_in == FTL_NN_FP32 ? "" : "computed in bf16\n"); /* fp32: the keys as before */
    ftl_sha256_hex_of_string(text, key);
    free(text);
    free(pre);
    return ftl_format("%s/int8-calibration-%.32s.json", cache_dir, key);
}

/* A calibration the cache holds for these inputs (NULL when none or unreadable: then it is redone). */
static ftl_nn_int8_scales *cached_calibration(const char *file, int count, ftl_nn_calibration_method method) {
    if (!ftl_path_exists(file)) return NULL;
    uint8_t *bytes = NULL;
    size_t size = 0;
    ftl_nn_int8_scales *s = NULL;
    if (ftl_read_file(file, &bytes, &size) == FTL_OK) {
        char *text = ftl_xmalloc(size + 1);
        memcpy(text, bytes, size);
        text[size] = 0;
        if (ftl_nn_int8_scales_from_json(text, file, &s) != FTL_OK ||
            strcmp(s->method, ftl_nn_calibration_method_name(method)) != 0 || s->rows != count) {
            ftl_log_warn("int8: ignoring the cached calibration %s (%s); calibrating again", file,
                         s ? "made another way" : ftl_last_error());
            ftl_nn_int8_scales_free(s);
            s = NULL;
        }
        free(text);
    }
    free(bytes);
    return s;
}

/* Keeps a calibration for the next run; a cache that cannot be written costs only that. */
static void cache_calibration(const char *cache_dir, const char *file, const ftl_nn_int8_scales *s) {
    char *json = ftl_nn_int8_scales_json(s);
    if (ftl_make_dirs(cache_dir) != FTL_OK || ftl_write_file_atomic(file, json, strlen(json)) != FTL_OK)
        ftl_log_warn("int8: cannot keep the calibration in %s (%s)", file, ftl_last_error());
    free(json);
}

/* The precision calibration computes the model's activations in: FTL_NN_CALIBRATION_PRECISION = fp32,
 * bf16 or auto (the default): bf16 where the CPU runs it at least 1.2x fp32's rate, as --precision auto
 * decides (AMD's Zen 4 and 5: twice; Intel's AVX512-BF16 Xeons: half, so fp32 there). The fp32 pass over
 * the calibration images is nearly all of calibration's time; in bf16 each tensor's threshold moves by
 * about bf16's rounding (0.4%), a third of one int8 step. */
static ftl_status calibration_precision(const ftl_model_options *o, ftl_nn_precision *out) {
    const char *e = getenv("FTL_NN_CALIBRATION_PRECISION");
    *out = FTL_NN_FP32;
    if (e && strcmp(e, "fp32") == 0) return FTL_OK;
    if (e && strcmp(e, "bf16") == 0) {
        if (!ftl_nn_cpu_bf16_available())
            return ftl_fail(FTL_E_UNSUPPORTED, "FTL_NN_CALIBRATION_PRECISION=bf16: this CPU has no bf16 kernels in oneDNN "
                            "(bf16 needs AVX-512); use fp32 or auto");
        *out = FTL_NN_BF16;
        return FTL_OK;
    }
    if (e && *e && strcmp(e, "auto") != 0)
        return ftl_fail(FTL_E_INVALID_ARG, "FTL_NN_CALIBRATION_PRECISION='%s': expected fp32, bf16 or auto", e);
    if (!ftl_nn_cpu_bf16_available()) return FTL_OK; /* no peaks to measure */
    char why[160];
    FTL_TRY(ftl_nn_precision_auto(FTL_DEVICE_CPU, o->threads, out, why, sizeof why));
    if (*out == FTL_NN_BF16) ftl_log_info("int8: calibration computes in %s", why);
    else {
        *out = FTL_NN_FP32;
        ftl_log_debug("int8: calibration computes in %s", why);
    }
    return FTL_OK;
}

ftl_status ftl_nn_calibrate(const char *path, const ftl_model_options *o, const ftl_nn_preprocess *pp,
                            const uint8_t *images_hwc, int count, int image_size, ftl_nn_calibration_method method,
                            ftl_nn_int8_scales **out) {
    return ftl_nn_calibrate_cached(path, o, pp, images_hwc, count, image_size, method, NULL, out, NULL);
}

ftl_status ftl_nn_calibrate_cached(const char *path, const ftl_model_options *o, const ftl_nn_preprocess *pp,
                                   const uint8_t *images_hwc, int count, int image_size, ftl_nn_calibration_method method,
                                   const char *cache_dir, ftl_nn_int8_scales **out, char **reused_from) {
    *out = NULL;
    if (reused_from) *reused_from = NULL;
    if (count < 1) return ftl_fail(FTL_E_INVALID_ARG, "%s: calibration needs at least one image", path);
    ftl_model_options fo = *o;
    fo.device = FTL_DEVICE_CPU; /* int8 runs on the CPU, and only its plans hand values to an observer */
    FTL_TRY(calibration_precision(o, &fo.precision));
    fo.int8_scales = NULL;
    calibration_run c = {0};
    ftl_model *m;
    FTL_TRY(nn_model_load_watching(path, &fo, observe, &c, &m));
    nn_model_parts parts;
    nn_model_get_parts(m, &parts);
    const nn_graph *g = parts.graph;
    if (g->quantized) { /* a quantized model runs with its own scales: nothing to calibrate */
        ftl_model_free(m);
        ftl_log_info("%s: the model is quantized (QuantizeLinear / QLinear ops): int8 uses its own scales and zero "
                     "points, no calibration", path);
        *out = nn_int8_scales_make(NULL, NULL, NULL, 0, "model", count);
        return FTL_OK;
    }
    char *cache_file = cache_dir && images_hwc
                           ? cache_file_of(cache_dir, m, o, pp, images_hwc, count, image_size, method, fo.precision)
                           : NULL;
    if (cache_file && (*out = cached_calibration(cache_file, count, method))) {
        ftl_model_free(m);
        if (reused_from) *reused_from = cache_file;
        else free(cache_file);
        return FTL_OK;
    }
    const ftl_model_info *info = ftl_model_get_info(m);
    int64_t dim = info->feature_dim;
    int batch = o->batch > 0 ? o->batch : 16;
    float *features = ftl_xmalloc((size_t)batch * (size_t)dim * sizeof *features);
    ftl_status st = FTL_OK;
    uint8_t *synthetic = NULL;
    if (!images_hwc) {
        image_size = info->height;
        if (info->channels != 3 || image_size < 1)
            st = ftl_fail(FTL_E_UNSUPPORTED, "%s: synthetic calibration images need an RGB image input", path);
        size_t bytes = (size_t)count * (size_t)(image_size > 0 ? image_size : 1) * (size_t)(image_size > 0 ? image_size : 1) * 3;
        synthetic = ftl_xmalloc(bytes);
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t k = 0; k < bytes; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            synthetic[k] = (uint8_t)(x >> 56);
        }
        images_hwc = synthetic;
    }
    /* One pass: each tensor keeps the tail its percentile needs, sized for the most values it can show
     * (a graph locked to its batch runs padded batches, whose rows are seen too). */
    double fraction = method == FTL_NN_CALIBRATION_PERCENTILE ? PERCENTILE : 1.0;
    bool one_pass = !getenv("FTL_NN_CALIBRATION_ONE_PASS") || strcmp(getenv("FTL_NN_CALIBRATION_ONE_PASS"), "0") != 0;
    int runs = (count + batch - 1) / batch, run_rows = info->fixed_batch > batch ? info->fixed_batch : batch;
    c.stats = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *c.stats);
    c.threads = info->threads;
    /* tails only for the tensors the observer is handed: the others would hold memory and count
     * against the budget for nothing */
    uint64_t *sized_for = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *sized_for);
    bool *watched = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *watched);
    nn_int8_watched(g, watched);
    for (int t = 0; t < g->n_tensors && one_pass && fraction < 1.0; t++)
        if (watched[t]) sized_for[t] = most_values(&g->tensors[t], runs, run_rows);
    free(watched);
    keep_tails_within(sized_for, g->n_tensors, fraction);
    for (int t = 0; t < g->n_tensors; t++) nn_calibration_stats_init(&c.stats[t], sized_for[t], fraction);
    free(sized_for);
    if (st == FTL_OK) st = run_images(m, pp, images_hwc, count, image_size, batch, features);
    /* the two-pass way, for the tensors the tail cannot answer: their histograms over the range found */
    bool *second = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *second);
    int n_second = 0;
    for (int t = 0; t < g->n_tensors && st == FTL_OK && fraction < 1.0; t++)
        if (c.stats[t].count && isnan(nn_calibration_threshold(&c.stats[t], fraction))) {
            second[t] = true;
            n_second++;
        }
    if (n_second) {
        ftl_log_debug("int8 calibration of %s: %d tensor(s) take a second pass (histograms)", path, n_second);
        c.histogram = second;
        st = run_images(m, pp, images_hwc, count, image_size, batch, features);
    }
    free(second);
    free(features);
    free(synthetic);
    ftl_nn_int8_scales *s = NULL;
    if (st == FTL_OK) {
        s = ftl_xcalloc(1, sizeof *s);
        snprintf(s->method, sizeof s->method, "%s", ftl_nn_calibration_method_name(method));
        s->rows = count;
        s->names = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *s->names);
        s->scale = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *s->scale);
        s->is_unsigned = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *s->is_unsigned);
        for (int t = 0; t < g->n_tensors && st == FTL_OK; t++) {
            const nn_calibration_stats *r = &c.stats[t];
            if (!r->count) continue;
            if (!isfinite(r->absmax) || r->not_a_number)
                st = ftl_fail(FTL_E_FORMAT, "%s: calibration: tensor '%s' took non-finite values (%s) on the calibration "
                              "images", path, g->tensors[t].name, r->not_a_number ? "NaN" : "infinity");
            bool is_unsigned = r->min >= 0;
            double threshold = nn_calibration_threshold(r, fraction);
            s->names[s->count] = ftl_strdup(g->tensors[t].name);
            s->scale[s->count] = nn_int8_scale_of(threshold, is_unsigned);
            s->is_unsigned[s->count] = is_unsigned;
            s->count++;
        }
        if (st == FTL_OK) nn_int8_scales_rehash(s);
    }
    for (int t = 0; t < g->n_tensors; t++) nn_calibration_stats_free(&c.stats[t]);
    free(c.stats);
    ftl_model_free(m);
    if (st != FTL_OK) {
        ftl_nn_int8_scales_free(s);
        free(cache_file);
        return st;
    }
    if (cache_file) cache_calibration(cache_dir, cache_file, s);
    free(cache_file);
    *out = s;
    return FTL_OK;
}
