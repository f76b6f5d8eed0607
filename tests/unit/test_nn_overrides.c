/* Fine-tuned tensors replacing a backbone's initializers at load (ftl_model_options.overrides): with
 * MobileNetV2's last convolution (Conv_1, then ReLU6, then the global average pool) given zero weights
 * and a bias b, every image's features are exactly clip(b, 0, 6); the model's identity changes with
 * the overrides and equals the file's checksum without them; a name or size that does not fit is an
 * error naming the tensor; and the public fine-tuning API (ftl_finetune_*). */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ftl_model *load_with(const char *path, const ftl_tensor_override *ov, int n) {
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = 2;
    o.overrides = ov;
    o.n_overrides = n;
    ftl_model *m = NULL;
    if (ftl_model_load(path, &o, &m) != FTL_OK) return NULL;
    return m;
}

TEST(nn_overrides_replace_initializers) {
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    enum { OC = 1280, IC = 320 };
    float *w = calloc((size_t)OC * IC, sizeof *w), b[OC];
    for (int c = 0; c < OC; c++) b[c] = (float)((c * 37) % 97) / 12.0f - 1.5f; /* below 0, inside, above 6 */
    ftl_tensor_override ov[2] = {{"MobilenetV2/Conv_1/Relu6/W", w, (int64_t)OC * IC}, {"MobilenetV2/Conv_1/Relu6/B", b, OC}};
    ftl_model *plain = load_with(path, NULL, 0), *tuned = load_with(path, ov, 2);
    CHECK(plain && tuned);
    if (plain && tuned) {
        const ftl_model_info *pi = ftl_model_get_info(plain), *ti = ftl_model_get_info(tuned);
        CHECK_STR_EQ(pi->identity, pi->sha256);
        CHECK_STR_EQ(ti->sha256, pi->sha256);
        CHECK(strcmp(ti->identity, pi->identity) != 0);
        int64_t per = (int64_t)pi->channels * pi->height * pi->width;
        float *x = malloc((size_t)(3 * per) * sizeof *x), *f = malloc((size_t)(3 * OC) * sizeof *f);
        for (int64_t i = 0; i < 3 * per; i++) x[i] = (float)((i * 2654435761u) % 2000) / 1000.0f - 1.0f;
        CHECK(ti->feature_dim == OC);
        if (ti->feature_dim == OC && ftl_model_run(tuned, x, 3, f) == FTL_OK) {
            double worst = 0;
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < OC; c++) {
                    float want = b[c] < 0 ? 0.0f : b[c] > 6 ? 6.0f : b[c];
                    double d = f[r * OC + c] - want;
                    worst = d < 0 ? (-d > worst ? -d : worst) : (d > worst ? d : worst);
                }
            printf("  features vs clip(bias, 0, 6): max |diff| %.3g\n", worst);
            CHECK(worst <= 1e-6 * 6); /* the pool sums 49 equal floats of up to 6 */
        }
        /* the same overrides give the same identity; another value another one */
        ftl_model *again = load_with(path, ov, 2);
        b[5] += 1.0f;
        ftl_model *other = load_with(path, ov, 2);
        CHECK(again && other);
        if (again) CHECK_STR_EQ(ftl_model_get_info(again)->identity, ti->identity);
        if (other) CHECK(strcmp(ftl_model_get_info(other)->identity, ti->identity) != 0);
        ftl_model_free(again);
        ftl_model_free(other);
        free(x);
        free(f);
    }
    ftl_model_free(plain);
    ftl_model_free(tuned);
    /* names and sizes that do not fit the graph */
    ftl_tensor_override unknown = {"no/such/tensor", b, OC}, short_bias = {"MobilenetV2/Conv_1/Relu6/B", b, OC - 1};
    CHECK(load_with(path, &unknown, 1) == NULL);
    CHECK(strstr(ftl_last_error(), "fine-tuned tensor 'no/such/tensor' is not a float initializer") != NULL);
    CHECK(load_with(path, &short_bias, 1) == NULL);
    CHECK(strstr(ftl_last_error(), "has 1279 values, the model's has 1280") != NULL);
    free(w);
    free(path);
}

/* The public fine-tuning API on MobileNetV2 with --fine-tune-last 4: what it trains and takes equals
 * what `ftl inspect --fine-tune-last 4` lists (one boundary tensor of 7,840 floats per image, 882,560
 * trained values in 8 tensors, 1,280 features), a forward + backward runs, and each trained tensor's
 * block starts where the previous one ends. */
TEST(nn_finetune_public_api) {
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    ftl_model_options o;
    ftl_model_options_init(&o);
    ftl_fine_tune_cut cut = {4, NULL};
    ftl_finetune *f = NULL;
    if (ftl_finetune_open(path, &o, &cut, 2, &f) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
    } else {
        const ftl_finetune_info *i = ftl_finetune_get_info(f);
        CHECK_EQ_INT(i->n_boundary, 1);
        CHECK_EQ_INT(i->boundary_floats, 7840);
        CHECK_EQ_INT(i->feature_dim, 1280);
        CHECK_EQ_INT(i->param_count, 882560);
        CHECK_EQ_INT(i->n_params, 8);
        long long per = 0, next = 0;
        CHECK_STR_EQ(ftl_finetune_boundary_name(f, 0, &per), "MobilenetV2/expanded_conv_15/add/add"); /* block 15's residual sum */
        CHECK_EQ_INT(per, 7840);
        for (int k = 0; k < i->n_params; k++) {
            long long count, offset;
            CHECK(ftl_finetune_param_name(f, k, &count, &offset) != NULL);
            CHECK_EQ_INT(offset, next);
            next = offset + count;
        }
        CHECK_EQ_INT(next, i->param_count);
        float *x = calloc(2 * 7840, sizeof *x), *feat = malloc(2 * 1280 * sizeof *feat), *df = malloc(2 * 1280 * sizeof *df);
        for (int k = 0; k < 2 * 7840; k++) x[k] = (float)(k % 13) / 4.0f;
        for (int k = 0; k < 2 * 1280; k++) df[k] = 1.0f;
        const float *in[1] = {x};
        CHECK(ftl_finetune_forward(f, in, feat) == FTL_OK);
        CHECK(ftl_finetune_backward(f, df) == FTL_OK);
        double gsum = 0;
        for (long long k = 0; k < i->param_count; k++) gsum += ftl_finetune_grads(f)[k] * ftl_finetune_grads(f)[k];
        CHECK(gsum > 0); /* a gradient reached the parameters */
        free(x);
        free(feat);
        free(df);
    }
    ftl_finetune_free(f);
    cut.last_convs = 0;
    cut.from_tensor = "nope";
    CHECK(ftl_finetune_open(path, &o, &cut, 2, &f) == FTL_E_NOT_FOUND);
    free(path);
}

/* --precision bf16 for the top: the convolutions read bf16 copies of their inputs and fp32 master
 * weights, write fp32. Against the fp32 plan on the same input: features and the whole gradient
 * block agree to bf16's precision (cosine >= 0.999, relative error < 2%), and the master weights the
 * optimiser updates stay fp32 (the blocks are the same layout and length). */
static double cosine_and_rel(const float *a, const float *b, long long n, double *rel) {
    double ab = 0, aa = 0, bb = 0, dd = 0;
    for (long long k = 0; k < n; k++) {
        ab += (double)a[k] * b[k], aa += (double)a[k] * a[k], bb += (double)b[k] * b[k];
        dd += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
    }
    *rel = sqrt(dd / (aa > 0 ? aa : 1));
    return ab / sqrt(aa * bb > 0 ? aa * bb : 1);
}

TEST(nn_finetune_bf16_top_matches_fp32) {
    if (ftl_test_no_bf16_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_bf16_reason());
        return;
    }
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    ftl_fine_tune_cut cut = {4, NULL};
    ftl_finetune *f32 = NULL, *b16 = NULL;
    ftl_model_options o;
    ftl_model_options_init(&o);
    REQUIRE_OK(ftl_finetune_open(path, &o, &cut, 4, &f32));
    o.precision = FTL_NN_BF16;
    REQUIRE_OK(ftl_finetune_open(path, &o, &cut, 4, &b16));
    const ftl_finetune_info *i = ftl_finetune_get_info(b16);
    CHECK_EQ_INT(ftl_finetune_get_info(f32)->bf16_convs, 0);
    CHECK_EQ_INT(i->bf16_convs, 4); /* oneDNN has bf16 training kernels for all four (emulated without AVX512-BF16) */
    CHECK_EQ_INT(i->param_count, ftl_finetune_get_info(f32)->param_count);
    long long nx = 4 * i->boundary_floats, nf = 4 * i->feature_dim;
    float *x = malloc((size_t)nx * sizeof *x), *fa = malloc((size_t)nf * sizeof *fa), *fb = malloc((size_t)nf * sizeof *fb);
    float *df = malloc((size_t)nf * sizeof *df);
    uint64_t r = 7;
    for (long long k = 0; k < nx; k++) x[k] = (float)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 40) / (1 << 24) * 6;
    for (long long k = 0; k < nf; k++) df[k] = (float)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 40) / (1 << 24) - 0.5f;
    REQUIRE_OK(ftl_finetune_forward_rows(f32, x, 4, fa));
    REQUIRE_OK(ftl_finetune_forward_rows(b16, x, 4, fb));
    double rel, cos = cosine_and_rel(fa, fb, nf, &rel);
    printf("  bf16 top: features cosine %.6f, relative error %.4f\n", cos, rel);
    CHECK(cos >= 0.999 && rel < 0.02);
    REQUIRE_OK(ftl_finetune_backward_rows(f32, df, 4));
    REQUIRE_OK(ftl_finetune_backward_rows(b16, df, 4));
    cos = cosine_and_rel(ftl_finetune_grads(f32), ftl_finetune_grads(b16), i->param_count, &rel);
    printf("  bf16 top: gradient cosine %.6f, relative error %.4f\n", cos, rel);
    CHECK(cos >= 0.999 && rel < 0.03);
    /* the master weights are the fp32 values of the file in both */
    CHECK(memcmp(ftl_finetune_params(f32), ftl_finetune_params(b16), (size_t)i->param_count * sizeof(float)) == 0);
    free(x), free(fa), free(fb), free(df);
    ftl_finetune_free(f32);
    ftl_finetune_free(b16);
    free(path);
}
