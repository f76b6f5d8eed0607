/* The shipped backbones against ONNX Runtime's outputs in ../shared/models/fixtures (fp32 within
 * 1e-4 absolute), bf16 against fp32 (cosine >= 0.999), and batch invariance. */
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    const char *model, *output;
    int size, count;
    const char *images[3];
    bool tf_scale; /* x = q/127.5 - 1; else (q - 128) / 128 */
} fixture;

static const fixture fixtures[] = {
    {"mobilenet_v1_1.0_224_embedding", "embedding", 224, 3, {"cat_224", "grace_hopper_224", "parrot_224"}, false},
    {"mobilenet_v2_1.0_224", "logits", 224, 3, {"cat_224", "grace_hopper_224", "parrot_224"}, false},
    {"mobilenet_v2_1.0_224_features", "features", 224, 3, {"cat_224", "grace_hopper_224", "parrot_224"}, false},
    {"mobilenet_v1_0.25_128", "logits", 128, 1, {"cat_128"}, false},
    {"xception_random", "features", 299, 1, {"cat_299"}, true},
};
enum { N_FIXTURES = sizeof fixtures / sizeof fixtures[0] };

static void preprocess_of(const fixture *f, ftl_nn_preprocess *pp) {
    if (f->tf_scale) {
        ftl_nn_preprocess_init(pp, FTL_NN_SCALE_TF);
    } else { /* the TFLite quantisation: (q - 128) / 128 = (q/255 - 128/255) / (128/255) */
        ftl_nn_preprocess_init(pp, FTL_NN_SCALE_CUSTOM);
        for (int c = 0; c < 3; c++) pp->mean[c] = pp->std[c] = 128.0f / 255.0f;
    }
}

/* The fixture images back to back; NULL (test failure recorded) when missing. */
static uint8_t *load_images(const fixture *f) {
    size_t per = (size_t)f->size * f->size * 3;
    uint8_t *all = malloc(per * f->count);
    for (int i = 0; i < f->count; i++) {
        char *path = ftl_format("%s/models/fixtures/%s.rgb", ftl_test_shared_dir(), f->images[i]);
        size_t size = 0;
        uint8_t *b = nn_test_read(path, &size);
        bool ok = b && size == per;
        if (!ok) ftl_test_fail(__FILE__, __LINE__, "fixture image %s missing or not %zu bytes", path, per);
        if (ok) memcpy(all + per * i, b, per);
        free(b);
        free(path);
        if (!ok) {
            free(all);
            return NULL;
        }
    }
    return all;
}

static float *run_model(const fixture *f, const uint8_t *images, ftl_nn_precision prec, int batch, int count,
                        long long *dim) {
    char *path = ftl_format("%s/models/%s.onnx", ftl_test_shared_dir(), f->model);
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.precision = prec;
    o.batch = batch;
    ftl_model *m = NULL;
    ftl_status st = ftl_model_load(path, &o, &m);
    free(path);
    if (st != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s: %s", f->model, ftl_last_error());
        return NULL;
    }
    *dim = ftl_model_get_info(m)->feature_dim;
    ftl_nn_preprocess pp;
    preprocess_of(f, &pp);
    float *out = malloc((size_t)count * (size_t)*dim * sizeof *out);
    st = ftl_model_extract_features(m, &pp, images, count, f->size, out);
    ftl_model_free(m);
    if (st != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run %s: %s", f->model, ftl_last_error());
        free(out);
        return NULL;
    }
    return out;
}

static void check_fixture(const fixture *f) {
    uint8_t *images = load_images(f);
    if (!images) return;
    char *ref_path = ftl_format("%s/models/fixtures/%s.%s.f32", ftl_test_shared_dir(), f->model, f->output);
    size_t size = 0;
    float *ref = (float *)nn_test_read(ref_path, &size);
    long long dim = 0;
    float *got = ref ? run_model(f, images, FTL_NN_FP32, 2, f->count, &dim) : NULL;
    if (!ref) ftl_test_fail(__FILE__, __LINE__, "reference %s missing", ref_path);
    if (got) {
        CHECK_EQ_INT(size, (size_t)f->count * (size_t)dim * 4);
        if (size == (size_t)f->count * (size_t)dim * 4) {
            double d = nn_max_abs_diff(got, ref, f->count * dim);
            if (!(d <= 1e-4)) ftl_test_fail(__FILE__, __LINE__, "%s: max |ftl - ORT| = %g > 1e-4", f->model, d);
            printf("  %s fp32: max |ftl - onnxruntime| = %.3g over %d x %lld\n", f->model, d, f->count, dim);
        }
    }
    free(got);
    free(ref);
    free(ref_path);
    free(images);
}

TEST(nn_fixture_mobilenet_v1_embedding) { check_fixture(&fixtures[0]); }
TEST(nn_fixture_mobilenet_v2_logits) { check_fixture(&fixtures[1]); }
TEST(nn_fixture_mobilenet_v2_features) { check_fixture(&fixtures[2]); }
TEST(nn_fixture_mobilenet_v1_025_128) { check_fixture(&fixtures[3]); }
TEST(nn_fixture_xception_external_data) { check_fixture(&fixtures[4]); }

/* bf16 features stay close to fp32 on every fixture model. */
TEST(nn_bf16_cosine_vs_fp32) {
    if (ftl_test_no_bf16_reason()) {
        ftl_test_skip("all", "%s", ftl_test_no_bf16_reason());
        return;
    }
    for (int i = 0; i < N_FIXTURES; i++) {
        const fixture *f = &fixtures[i];
        uint8_t *images = load_images(f);
        if (!images) return;
        long long dim = 0;
        float *a = run_model(f, images, FTL_NN_FP32, f->count, f->count, &dim);
        float *b = run_model(f, images, FTL_NN_BF16, f->count, f->count, &dim);
        if (a && b) {
            double c = nn_min_row_cosine(a, b, f->count, dim);
            printf("  %s bf16 vs fp32: min cosine %.6f, max |diff| %.3g\n", f->model, c, nn_max_abs_diff(a, b, f->count * dim));
            if (!(c >= 0.999)) ftl_test_fail(__FILE__, __LINE__, "%s: bf16 cosine %f < 0.999", f->model, c);
        }
        free(a);
        free(b);
        free(images);
    }
}

/* Rows do not depend on the batch: 13 images in batches of 13 (and 5+5+3) equal one at a time. */
TEST(nn_batch_invariance) {
    const fixture *f = &fixtures[1];
    uint8_t *three = load_images(f);
    if (!three) return;
    size_t per = (size_t)f->size * f->size * 3;
    uint8_t *images = malloc(per * 13);
    for (int i = 0; i < 13; i++) { /* vary rows: cycle the images and flip some bytes */
        memcpy(images + per * i, three + per * (i % 3), per);
        for (size_t k = (size_t)i; k < per; k += 997) images[per * i + k] ^= (uint8_t)(i * 17);
    }
    long long dim = 0;
    float *one = run_model(f, images, FTL_NN_FP32, 1, 13, &dim);
    float *all = run_model(f, images, FTL_NN_FP32, 13, 13, &dim);
    float *parts = run_model(f, images, FTL_NN_FP32, 5, 13, &dim);
    if (one && all && parts) {
        double d1 = nn_max_abs_diff(one, all, 13 * dim), d2 = nn_max_abs_diff(one, parts, 13 * dim);
        printf("  batch 1 vs 13: max |diff| %.3g; batch 1 vs 5+5+3: %.3g\n", d1, d2);
        CHECK(d1 <= 1e-5);
        CHECK(d2 <= 1e-5);
    }
    free(one);
    free(all);
    free(parts);
    free(images);
    free(three);
}
