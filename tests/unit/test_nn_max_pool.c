/* ftl's max pool (src/nn/cpu/kernels/max_pool.c, `ftl:max_pool`): the MaxPool-after-convolution cases of
 * tests/ref/nn_cases.py against ONNX Runtime and bit for bit against oneDNN's pooling
 * (FTL_NN_FTL_MAXPOOL=0), in the channels-last and in the blocked conv layout, with odd sizes, ceil
 * mode, dilation and asymmetric pads; and Xception's four pools the same way. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Features of `path` for x (n images) with ftl's pool on or off; *pools = ftl:max_pool steps. */
static float *features(const char *path, const float *x, int n, bool ftl_pool, int *pools, int64_t *count) {
    setenv("FTL_NN_FTL_MAXPOOL", ftl_pool ? "1" : "0", 1);
    ftl_model *m = nn_test_load(path, n, NULL, NULL);
    unsetenv("FTL_NN_FTL_MAXPOOL");
    if (!m) return NULL;
    char *plan = nn_test_plan_text(m);
    *pools = 0;
    for (const char *p = plan; p && (p = strstr(p, "ftl:max_pool")) != NULL; p++) (*pools)++;
    free(plan);
    *count = ftl_model_get_info(m)->feature_dim * n;
    float *out = malloc((size_t)*count * sizeof *out);
    if (ftl_model_run(m, x, n, out) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run %s: %s", path, ftl_last_error());
        free(out);
        out = NULL;
    }
    ftl_model_free(m);
    return out;
}

/* Channels per block of the blocked conv layout: the vector width. */
static int conv_block(void) { return __builtin_cpu_supports("avx512f") ? 16 : 8; }

/* ftl's pool vs oneDNN's on one model and input: at least `expect` ftl steps, identical bits. */
static void compare(const char *what, const char *path, const float *x, int n, int expect, const nn_npy *ort) {
    int on_steps = 0, off_steps = 0;
    int64_t c1 = 0, c2 = 0;
    float *on = features(path, x, n, true, &on_steps, &c1), *off = features(path, x, n, false, &off_steps, &c2);
    printf("  %-44s %d ftl:max_pool steps (%d with it off)", what, on_steps, off_steps);
    CHECK(on_steps >= expect);
    CHECK_EQ_INT(off_steps, 0);
    if (on && off && c1 == c2) {
        bool same = memcmp(on, off, (size_t)c1 * sizeof *on) == 0;
        printf(", %s oneDNN's bits", same ? "equal to" : "NOT equal to");
        CHECK(same);
        if (ort) {
            CHECK_EQ_INT(c1, ort->count);
            if (c1 == ort->count) {
                double d = nn_max_abs_diff(on, ort->data, c1);
                printf(", max |ftl - ONNX Runtime| %.2g", d);
                CHECK(d <= 1e-4 * (nn_max_abs(ort->data, c1) > 1 ? nn_max_abs(ort->data, c1) : 1));
            }
        }
    } else {
        ftl_test_fail(__FILE__, __LINE__, "%s: features missing or of different sizes", what);
    }
    printf("\n");
    free(on);
    free(off);
}

TEST(nn_max_pool_after_conv_vs_onednn_and_onnxruntime) {
    if (!__builtin_cpu_supports("avx2")) {
        ftl_test_skip("all", "this CPU has no AVX2: MaxPool stays oneDNN's");
        return;
    }
    const char *cases[] = {"maxpool_after_conv_3x3_s2_p1", "maxpool_after_conv_ceil_dilated", "maxpool_after_conv_20ch_k2"};
    const int channels[] = {24, 16, 20}; /* the conv's outputs, as tests/ref/nn_cases.py builds them */
    const char *layouts[] = {"nhwc", "blocked"}; /* named: the default is blocked on AVX2 CPUs */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nn_model_ref r;
        bool have = nn_op_case_read(cases[i], &r);
        for (int l = 0; l < 2 && have; l++) {
            setenv("FTL_NN_LAYOUT", layouts[l], 1);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", cases[i] + strlen("maxpool_after_conv_"), l ? "blocked" : "channels-last");
            /* channels that do not fill the blocks (nChw16c with AVX-512, nChw8c with AVX2) are padded:
             * the blocked layout keeps oneDNN's pool there */
            int expect = l && channels[i] % conv_block() != 0 ? 0 : 1;
            compare(what, r.onnx, r.in.data, (int)r.in.shape[0], expect, &r.out);
            unsetenv("FTL_NN_LAYOUT");
        }
        nn_model_ref_free(&r);
    }
}

TEST(nn_max_pool_xception_vs_onednn) {
    if (!__builtin_cpu_supports("avx2")) {
        ftl_test_skip("all", "this CPU has no AVX2: MaxPool stays oneDNN's");
        return;
    }
    char *path = ftl_format("%s/models/xception_random.onnx", ftl_test_shared_dir());
    const int n = 2;
    const int64_t per = 3 * 299 * 299;
    float *x = malloc((size_t)(n * per) * sizeof *x);
    uint64_t s = 11;
    for (int64_t i = 0; i < n * per; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 4.0 - 2.0);
    }
    /* Xception's pools read 128, 256, 728 and 1024 channels, blocked: 728 fills no 16-channel block */
    const int pool_channels[] = {128, 256, 728, 1024};
    int expect = 0;
    for (int i = 0; i < 4; i++) expect += pool_channels[i] % conv_block() == 0;
    compare("Xception (random weights), 2 images", path, x, n, expect, NULL);
    free(x);
    free(path);
}
