/* ftl's layer-norm kernel (bf16 plans): against a double-precision reference on odd shapes (channels
 * under, at and past the 16-lane vectors, rows no multiple of the 4-row blocks), each of the four
 * input/output type pairs; a bf16 output equal to the fp32 output rounded once; the same bits on 1, 2
 * and 3 threads and on the AVX-512 and the plain path; and in a bf16 plan of the torchvision Swin, the
 * kernel's steps in place of oneDNN's layer norms and their conversions, features against PyTorch and
 * against the plan with oneDNN's layer norm. */
#include "nn_testutil.h"
#include "test.h"
#include "nn/cpu/kernels/layernorm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct ln_case {
    const char *name;
    int64_t rows, channels;
    float offset; /* added to every input: a mean far from 0, as residual streams have */
} ln_case;

/* Runs the kernel on x (fp32 values; as bf16 where x_bf16) into an fp32 array, whatever its output type. */
static void run_kernel(const ln_case *c, const float *x, bool x_bf16, bool y_bf16, const float *gamma,
                       const float *beta, int threads, float *y) {
    int64_t n = c->rows * c->channels;
    uint16_t *x16 = malloc((size_t)(n > 0 ? n : 1) * sizeof *x16), *y16 = malloc((size_t)(n > 0 ? n : 1) * sizeof *y16);
    for (int64_t i = 0; i < n; i++) x16[i] = nn_test_to_bf16(x[i]);
    nn_layernorm l = {.x = x_bf16 ? (const void *)x16 : (const void *)x, .x_bf16 = x_bf16,
                      .y = y_bf16 ? (void *)y16 : (void *)y, .y_bf16 = y_bf16, .rows = c->rows,
                      .channels = c->channels, .gamma = gamma, .beta = beta, .epsilon = 1e-5f};
    nn_layernorm_run(&l, threads);
    if (y_bf16)
        for (int64_t i = 0; i < n; i++) y[i] = nn_test_from_bf16(y16[i]);
    free(x16);
    free(y16);
}

/* The reference in double over the values the kernel reads (x rounded to bf16 where it reads bf16). */
static void reference(const ln_case *c, const float *x, bool x_bf16, const float *gamma, const float *beta, float *y) {
    for (int64_t r = 0; r < c->rows; r++) {
        const float *row = x + r * c->channels;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < c->channels; j++) mean += x_bf16 ? nn_test_from_bf16(nn_test_to_bf16(row[j])) : row[j];
        mean /= (double)c->channels;
        for (int64_t j = 0; j < c->channels; j++) {
            double d = (x_bf16 ? nn_test_from_bf16(nn_test_to_bf16(row[j])) : row[j]) - mean;
            var += d * d;
        }
        double inv = 1.0 / sqrt(var / (double)c->channels + 1e-5);
        for (int64_t j = 0; j < c->channels; j++) {
            double v = x_bf16 ? nn_test_from_bf16(nn_test_to_bf16(row[j])) : row[j];
            y[r * c->channels + j] = (float)((v - mean) * inv * gamma[j] + beta[j]);
        }
    }
}

static bool same_bits(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

static void run_case(const ln_case *c) {
    int64_t n = c->rows * c->channels;
    float *x = malloc((size_t)n * sizeof *x), *gamma = malloc((size_t)c->channels * sizeof *gamma),
          *beta = malloc((size_t)c->channels * sizeof *beta), *ref = malloc((size_t)n * sizeof *ref),
          *y = malloc((size_t)n * sizeof *y), *y32 = malloc((size_t)n * sizeof *y32),
          *other = malloc((size_t)n * sizeof *other);
    uint64_t state = (uint64_t)(c->rows * 131 + c->channels);
    for (int64_t i = 0; i < n; i++) x[i] = c->offset + 3.0f * nn_test_value(&state);
    for (int64_t j = 0; j < c->channels; j++) gamma[j] = 1.0f + 0.5f * nn_test_value(&state), beta[j] = 0.25f * nn_test_value(&state);
    for (int xb = 0; xb < 2; xb++) {
        reference(c, x, xb, gamma, beta, ref);
        run_kernel(c, x, xb, false, gamma, beta, 2, y32);
        char what[128];
        snprintf(what, sizeof what, "%s, %s -> fp32", c->name, xb ? "bf16" : "fp32");
        nn_check_close(__FILE__, __LINE__, what, y32, ref, n, 1e-5);
        run_kernel(c, x, xb, true, gamma, beta, 2, y);
        /* the bf16 output is the fp32 output rounded once (nearest even) */
        int64_t differ = 0;
        for (int64_t i = 0; i < n; i++) differ += nn_test_from_bf16(nn_test_to_bf16(y32[i])) != y[i];
        printf("  %-52s bf16 output = fp32 output rounded: %lld of %lld differ\n", what, (long long)differ, (long long)n);
        CHECK_EQ_INT(differ, 0);
        /* rows do not depend on the thread count or the path */
        for (int threads = 1; threads <= 3; threads += 2) {
            run_kernel(c, x, xb, false, gamma, beta, threads, other);
            if (!same_bits(other, y32, n)) ftl_test_fail(__FILE__, __LINE__, "%s: %d threads changed bits", what, threads);
        }
        setenv("FTL_NN_LAYERNORM_ISA", "plain", 1);
        run_kernel(c, x, xb, false, gamma, beta, 2, other);
        if (!same_bits(other, y32, n)) ftl_test_fail(__FILE__, __LINE__, "%s: the plain path's bits differ", what);
        run_kernel(c, x, xb, true, gamma, beta, 2, other);
        if (!same_bits(other, y, n)) ftl_test_fail(__FILE__, __LINE__, "%s: the plain path's bf16 bits differ", what);
        unsetenv("FTL_NN_LAYERNORM_ISA");
    }
    free(x);
    free(gamma);
    free(beta);
    free(ref);
    free(y);
    free(y32);
    free(other);
}

TEST(nn_layernorm_kernel_odd_shapes) {
    printf("  path: %s\n", nn_layernorm_isa());
    const ln_case cases[] = {
        {"one row, one channel", 1, 1, 0.0f},
        {"5 rows x 7 channels (under one vector)", 5, 7, 0.0f},
        {"13 rows x 96 (Swin's first stage)", 13, 96, 0.0f},
        {"37 rows x 17 (one lane past a vector)", 37, 17, 0.0f},
        {"6 rows x 768, mean 40 (a residual stream)", 6, 768, 40.0f},
        {"3 rows x 33, mean -7", 3, 33, -7.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

static int count_of(const char *text, const char *needle) {
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++) k++;
    return k;
}

/* Reorder steps in a plan's text: lines of "reorder of tensor". */
static int reorders_of(const char *plan) { return count_of(plan, "reorder of tensor"); }

TEST(nn_layernorm_in_bf16_plans) {
    if (ftl_test_no_bf16_reason()) { /* ftl's layer norm kernel itself: nn_layernorm_kernel_odd_shapes */
        ftl_test_skip("all", "%s", ftl_test_no_bf16_reason());
        return;
    }
    nn_model_ref r;
    if (!nn_torchvision_ref_read("swin_small_cfg", &r)) {
        nn_model_ref_free(&r);
        return;
    }
    int64_t per = r.out.count / 3;
    float *own = malloc((size_t)r.out.count * sizeof *own), *onednn = malloc((size_t)r.out.count * sizeof *onednn);
    int steps[2] = {0, 0}, reorders[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        ftl_model *m = nn_test_load_precision(r.onnx, 3, NULL, FTL_NN_BF16, pass == 1 ? "FTL_NN_BF16_LAYERNORM" : NULL);
        if (!m) break;
        char *plan = nn_test_plan_text(m);
        steps[pass] = count_of(plan, "ftl:layer_norm");
        reorders[pass] = reorders_of(plan);
        free(plan);
        if (ftl_model_run(m, r.in.data, 3, pass == 0 ? own : onednn) != FTL_OK)
            ftl_test_fail(__FILE__, __LINE__, "run: %s", ftl_last_error());
        ftl_model_free(m);
    }
    printf("  ftl:layer_norm steps %d (oneDNN's plan %d), reorders %d (oneDNN's plan %d)\n", steps[0], steps[1],
           reorders[0], reorders[1]);
    CHECK(steps[0] > 0);
    CHECK_EQ_INT(steps[1], 0);
    CHECK(reorders[0] < reorders[1]); /* the conversions around the layer norms are gone */
    double vs_torch = nn_min_row_cosine(own, r.out.data, 3, per), vs_onednn = nn_min_row_cosine(own, onednn, 3, per);
    printf("  bf16 features: min row cosine vs PyTorch %.6f, vs oneDNN's layer norm %.6f\n", vs_torch, vs_onednn);
    CHECK(vs_torch >= 0.999);
    CHECK(vs_onednn >= 0.999);
    free(own);
    free(onednn);
    nn_model_ref_free(&r);
}
