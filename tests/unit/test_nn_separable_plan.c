/* The int8 plan's separable pairs (a 3x3 depthwise and the 1x1 reading it as one ftl:separable_int8 step,
 * src/nn/cpu/emit_conv.c; the default) against the same plan with the pairs left to oneDNN's two
 * primitives (FTL_NN_SEPARABLE_INT8=0): byte-identical features. On the per-op cases of tests/ref/nn_cases.py (odd
 * channel counts, rows shorter than the kernel's pixel block, a residual sum, MobileNetV2's ReLU6
 * depthwise into a linear 1x1 plus the block's input, a signed depthwise input, stride-2 pairs with
 * PyTorch's and TensorFlow's padding), with every tensor's scale from its fp32 range,
 * also within int8's error of ONNX Runtime's fp32 output; and on the shared Xception (random weights,
 * calibrated on synthetic images) where all 34 pairs fuse (block14's first reads the residual stream
 * without a ReLU: a signed input) and all four entry-flow pools with them, and on the real
 * MobileNetV2, its 12 stride-1 pairs (and, opted in, stride-2 ones): the planner keeps each pair (and its pool) at one micro-batch. */
#include "nn/cpu/kernels/separable_int8.h"
#include "nn/ir/quantize.h"
#include "nn/model_parts.h"
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_steps(ftl_model *m, const char *impl) {
    char *plan = nn_test_plan_text(m);
    int n = 0;
    for (const char *p = plan; p && (p = strstr(p, impl)) != NULL; p++) n++;
    free(plan);
    return n;
}

/* Scales for every computed tensor of the case from its fp32 values on the case's input (max |x| over
 * 255 where nothing is negative, else over 127), as a minmax calibration would make them. */
static ftl_nn_int8_scales *scales_from_fp32(const char *path, const nn_npy *x) {
    int batch = (int)x->shape[0];
    ftl_model *m = nn_test_load(path, batch, NULL, NULL);
    if (!m) return NULL;
    nn_model_parts parts;
    nn_model_get_parts(m, &parts);
    const nn_graph *g = parts.graph;
    char **names = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *names);
    float *scales = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *scales);
    bool *us = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *us);
    int count = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].data || !g->tensors[t].name[0]) continue;
        ftl_model *f = nn_test_load(path, batch, g->tensors[t].name, NULL);
        if (!f) continue;
        int64_t n = ftl_model_get_info(f)->feature_dim * batch;
        float *v = malloc((size_t)n * sizeof *v);
        if (ftl_model_run(f, x->data, batch, v) == FTL_OK) {
            float mn = INFINITY;
            for (int64_t i = 0; i < n; i++) mn = fminf(mn, v[i]);
            double mx = nn_max_abs(v, n);
            names[count] = (char *)g->tensors[t].name;
            us[count] = mn >= 0;
            scales[count] = nn_int8_scale_of(mx, us[count]);
            count++;
        }
        free(v);
        ftl_model_free(f);
    }
    ftl_nn_int8_scales *s = nn_int8_scales_make(names, scales, us, count, "minmax", batch);
    free(names);
    free(scales);
    free(us);
    ftl_model_free(m);
    return s;
}

/* The model in int8 with its pairs fused or left to oneDNN (stride-2 pairs too when asked: opt-in), its
 * fused steps and pooled ones counted; NULL (the test failed) when it does not load. */
static ftl_model *load_int8(const char *path, const ftl_model_options *base, ftl_nn_int8_scales *s, bool fused,
                            bool stride2, int *steps, int *pooled) {
    setenv("FTL_NN_SEPARABLE_INT8", fused ? "1" : "0", 1);
    setenv("FTL_NN_SEPARABLE_STRIDE2", stride2 ? "1" : "0", 1);
    ftl_model_options o = *base;
    o.precision = FTL_NN_INT8;
    o.int8_scales = s;
    ftl_model *m = NULL;
    ftl_status st = ftl_model_load(path, &o, &m);
    unsetenv("FTL_NN_SEPARABLE_INT8");
    unsetenv("FTL_NN_SEPARABLE_STRIDE2");
    if (st != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s in int8: %s", path, ftl_last_error());
        return NULL;
    }
    *steps = count_steps(m, "ftl:separable_int8");
    *pooled = count_steps(m, "ftl:separable_int8+max_pool");
    return m;
}

static float *int8_features(const char *path, const nn_npy *x, ftl_nn_int8_scales *s, bool fused, int *steps,
                            int *pooled, int64_t *count) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.batch = (int)x->shape[0];
    ftl_model *m = load_int8(path, &o, s, fused, fused, steps, pooled); /* the op cases' stride-2 pairs too */
    if (!m) return NULL;
    *count = ftl_model_get_info(m)->feature_dim * x->shape[0];
    float *y = malloc((size_t)*count * sizeof *y);
    if (ftl_model_run(m, x->data, (int)x->shape[0], y) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run %s in int8: %s", path, ftl_last_error());
        free(y);
        y = NULL;
    }
    ftl_model_free(m);
    return y;
}

/* want_pooled: of the fused steps, those that take the MaxPool after them in too */
static void check_case(const char *name, int want_fused, int want_pooled) {
    nn_model_ref r;
    if (!nn_op_case_read(name, &r)) return;
    ftl_nn_int8_scales *s = scales_from_fp32(r.onnx, &r.in);
    int on_steps = 0, off_steps = 0, on_pooled = 0, off_pooled = 0;
    int64_t n1 = 0, n2 = 0;
    float *fused = s ? int8_features(r.onnx, &r.in, s, true, &on_steps, &on_pooled, &n1) : NULL;
    float *apart = s ? int8_features(r.onnx, &r.in, s, false, &off_steps, &off_pooled, &n2) : NULL;
    if (fused && apart && CHECK(n1 == n2) && CHECK(n1 == r.out.count)) {
        size_t differ = 0;
        for (int64_t i = 0; i < n1; i++) differ += memcmp(fused + i, apart + i, sizeof *fused) != 0;
        double cos = nn_cosine(fused, r.out.data, n1);
        printf("  %-26s %d ftl:separable_int8 steps (%d with a MaxPool; %d with it off), %zu of %lld features differ from "
               "oneDNN's pair, cosine to ONNX Runtime (fp32) %.5f\n", name, on_steps, on_pooled, off_steps, differ,
               (long long)n1, cos);
        if (differ)
            ftl_test_fail(__FILE__, __LINE__, "%s: %zu of %lld int8 features differ between the fused pair and oneDNN's two "
                          "convolutions", name, differ, (long long)n1);
        CHECK_EQ_INT(on_steps, want_fused);
        CHECK_EQ_INT(on_pooled, want_pooled);
        CHECK_EQ_INT(off_steps, 0);
        if (!(cos >= 0.99))
            ftl_test_fail(__FILE__, __LINE__, "%s: int8 features' cosine to ONNX Runtime's fp32 output %.5f < 0.99", name, cos);
    }
    free(fused);
    free(apart);
    ftl_nn_int8_scales_free(s);
    nn_model_ref_free(&r);
}

TEST(nn_separable_int8_pairs_equal_onednn_and_onnxruntime) {
    if (ftl_test_no_int8_reason()) {
        ftl_test_skip("nn_separable_int8_pairs_equal_onednn_and_onnxruntime", "%s", ftl_test_no_int8_reason());
        return;
    }
    if (!cpu_separable_int8_available()) {
        ftl_test_skip("nn_separable_int8_pairs_equal_onednn_and_onnxruntime",
                      "this CPU lacks AVX-512 VBMI, which ftl's separable kernel needs (the pairs run as two convolutions)");
        return;
    }
    check_case("separable_pairs", 2, 0);
    check_case("separable_residual", 1, 0);
    check_case("separable_inverted_residual", 1, 0); /* a ReLU6 depthwise: u8 between */
    check_case("separable_pool", 2, 1);               /* the second pair's f32 output pooled */
    check_case("separable_pool_one_image", 1, 1);     /* one image: pooled rows in bands */
    check_case("separable_signed_then_stride2", 2, 0); /* an s8 depthwise input, then a stride-2 pair (padding 1) */
    check_case("separable_stride2_same", 1, 0);        /* the MobileNets' stride-2 pair: padding 0 before, 1 after */
    check_case("separable_block_boundary", 1, 1);      /* Xception's: a ReLU'd pair pooled, an s8 shortcut added */
}

/* A shared model's int8 features with its pairs fused against oneDNN's two primitives: byte-identical, the
 * fused steps and pooled ones counted. The L3 the planner assumes is fixed (FTL_NN_CACHE_BYTES), so its
 * micro-batches are the same on every machine: ones where, apart, a boundary would fall inside a pair or
 * between a pair and its pool (the planner keeps such runs at one micro-batch). */
static void check_model(const char *model, int size, int batch, int N, const char *cache_bytes, bool stride2,
                        int want_steps, int want_pooled) {
    char *path = ftl_format("%s/models/%s.onnx", ftl_test_shared_dir(), model);
    size_t bytes = (size_t)N * (size_t)size * (size_t)size * 3;
    uint8_t *img = malloc(bytes);
    uint64_t st = 7;
    for (size_t i = 0; i < bytes; i++) img[i] = (uint8_t)(nn_test_value(&st) * 127.5f + 127.5f);
    setenv("FTL_NN_CACHE_BYTES", cache_bytes, 1);
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.batch = batch; /* N images: a full batch and a partial one (its own plan) */
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    ftl_nn_int8_scales *s = NULL;
    if (ftl_nn_calibrate(path, &o, &pp, img, N, size, FTL_NN_CALIBRATION_PERCENTILE, &s) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "calibrate %s: %s", path, ftl_last_error());
    } else {
        float *f[2] = {NULL, NULL};
        int steps[2] = {0, 0}, pooled[2] = {0, 0};
        int64_t dim = 0;
        for (int fused = 0; fused < 2; fused++) {
            ftl_model *m = load_int8(path, &o, s, fused, stride2, &steps[fused], &pooled[fused]);
            if (!m) continue;
            dim = ftl_model_get_info(m)->feature_dim;
            f[fused] = malloc((size_t)(N * dim) * sizeof(float));
            if (ftl_model_extract_features(m, &pp, img, N, size, f[fused]) != FTL_OK)
                ftl_test_fail(__FILE__, __LINE__, "embed %s: %s", path, ftl_last_error());
            ftl_model_free(m);
        }
        if (f[0] && f[1]) {
            size_t differ = 0;
            for (int64_t i = 0; i < N * dim; i++) differ += memcmp(f[0] + i, f[1] + i, sizeof(float)) != 0;
            printf("  %s (batch %d, L3 taken as %s bytes%s): %d ftl:separable_int8 steps (%d with it off), %d of them "
                   "pooled, %zu of %lld features differ\n", model, batch, cache_bytes,
                   stride2 ? ", stride-2 pairs too" : "", steps[1], steps[0], pooled[1], differ, (long long)(N * dim));
            CHECK(differ == 0);
            CHECK_EQ_INT(steps[1], want_steps);
            CHECK_EQ_INT(steps[0], 0);
            CHECK_EQ_INT(pooled[1], want_pooled);
            CHECK_EQ_INT(pooled[0], 0);
        }
        free(f[0]);
        free(f[1]);
    }
    unsetenv("FTL_NN_CACHE_BYTES");
    ftl_nn_int8_scales_free(s);
    free(img);
    free(path);
}

static const char *no_separable_reason(void) {
    return ftl_test_no_int8_reason() ? ftl_test_no_int8_reason()
           : !cpu_separable_int8_available() ? "this CPU lacks AVX-512 VBMI, which ftl's separable kernel needs"
                                             : NULL;
}

/* All 34 pairs (block14's first with its s8 input), and all four entry-flow pools: with a 128 MiB L3, apart, blocks 3 and 4 would run their
 * pools at 16 images and their pairs at 8 (before the planner kept them together: 2 of 4 pooled). */
TEST(nn_separable_int8_xception_features_unchanged) {
    if (no_separable_reason()) {
        ftl_test_skip("nn_separable_int8_xception_features_unchanged", "%s", no_separable_reason());
        return;
    }
    check_model("xception_random", 299, 8, 10, "134217728", false, 34, 4);
}

/* The real MobileNetV2: all 12 stride-1 pairs (its first block runs in fp32); with a 32 MiB L3 at batch 16,
 * apart, the narrowing projections of blocks 2, 12 and 16 would fit more images than their depthwise
 * (before the planner kept them together: 10 fused). With the stride-2 pairs opted in, those the planner
 * runs at one micro-batch too. */
TEST(nn_separable_int8_mobilenet_v2_pairs_at_one_micro_batch) {
    if (no_separable_reason()) {
        ftl_test_skip("nn_separable_int8_mobilenet_v2_pairs_at_one_micro_batch", "%s", no_separable_reason());
        return;
    }
    check_model("mobilenet_v2_1.0_224_features", 224, 16, 18, "33554432", false, 12, 0);
    check_model("mobilenet_v2_1.0_224_features", 224, 16, 18, "33554432", true, 15, 0); /* and 3 of its 4 stride-2 pairs */
}
