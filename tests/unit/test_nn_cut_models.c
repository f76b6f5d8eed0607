/* A fine-tune cut's two halves as inference models: the frozen bottom (its features are the boundary
 * rows) and the frozen top (it reads those rows). Bottom then top must give the full backbone's
 * features up to float reassociation (1e-5 relative), for a cut crossed by one tensor and one crossed
 * by two; the top's features carry an identity of their own, and it refuses images. */
#include "test.h"
#include "ftl/nn.h"
#include "ftl/train.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>

static void check_halves(int last_convs, int expect_boundary_tensors) {
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    ftl_fine_tune_cut cut = {.last_convs = last_convs};
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = 4;
    o.device = FTL_DEVICE_CPU;
    ftl_model *full = NULL, *bottom = NULL, *top = NULL;
    REQUIRE(ftl_model_load(path, &o, &full) == FTL_OK);
    o.bottom_of = &cut;
    REQUIRE(ftl_model_load(path, &o, &bottom) == FTL_OK);
    o.bottom_of = NULL;
    o.top_of = &cut;
    if (ftl_model_load(path, &o, &top) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "the top of last %d: %s", last_convs, ftl_last_error());
        ftl_model_free(full);
        ftl_model_free(bottom);
        free(path);
        return;
    }
    const ftl_model_info *fi = ftl_model_get_info(full), *bi = ftl_model_get_info(bottom), *ti = ftl_model_get_info(top);
    CHECK_EQ_INT(ti->input_floats, bi->feature_dim);
    CHECK_EQ_INT(ti->feature_dim, fi->feature_dim);
    CHECK_STR_EQ(ti->feature_name, fi->feature_name);
    CHECK(strcmp(ti->identity, fi->identity) != 0);
    ftl_finetune *ft = NULL;
    if (CHECK(ftl_finetune_open(path, NULL, &cut, 1, &ft) == FTL_OK)) {
        CHECK_EQ_INT(ftl_finetune_get_info(ft)->n_boundary, expect_boundary_tensors);
        ftl_finetune_free(ft);
    }
    const int n = 5; /* a full plan of 4 and a partial one of 1 */
    uint8_t *images = malloc((size_t)n * 224 * 224 * 3);
    uint64_t s = 99;
    for (size_t i = 0; i < (size_t)n * 224 * 224 * 3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (uint8_t)(s >> 56);
    }
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
    float *want = malloc((size_t)(n * fi->feature_dim) * sizeof(float));
    float *rows = malloc((size_t)(n * bi->feature_dim) * sizeof(float));
    float *got = malloc((size_t)(n * ti->feature_dim) * sizeof(float));
    CHECK(ftl_model_extract_features(full, &pp, images, n, 224, want) == FTL_OK);
    CHECK(ftl_model_extract_features(bottom, &pp, images, n, 224, rows) == FTL_OK);
    CHECK(ftl_model_run(top, rows, n, got) == FTL_OK);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < n * fi->feature_dim; i++) {
        double d = fabs((double)got[i] - want[i]);
        worst = d > worst ? d : worst;
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    }
    printf("  last %d (%d boundary tensors, %lld floats): max |bottom+top - full| %.3g of max |feature| %.3g\n",
           last_convs, expect_boundary_tensors, (long long)bi->feature_dim, worst, scale);
    CHECK(scale > 0);
    CHECK(worst <= 1e-5 * scale);
    /* the top reads boundary rows: an image batch is refused with the reason */
    CHECK(ftl_model_extract_features(top, &pp, images, 1, 224, got) != FTL_OK);
    CHECK(strstr(ftl_last_error(), "not an RGB image tensor") != NULL);
    free(images), free(want), free(rows), free(got);
    ftl_model_free(full);
    ftl_model_free(bottom);
    ftl_model_free(top);
    free(path);
}

TEST(nn_cut_bottom_then_top_gives_the_full_features_one_boundary_tensor) { check_halves(4, 1); }
TEST(nn_cut_bottom_then_top_gives_the_full_features_two_boundary_tensors) { check_halves(5, 2); }

TEST(nn_cut_model_refuses_bottom_and_top_at_once) {
    char *path = ftl_format("%s/models/mobilenet_v2_1.0_224_features.onnx", ftl_test_shared_dir());
    ftl_fine_tune_cut cut = {.last_convs = 4};
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    o.bottom_of = o.top_of = &cut;
    ftl_model *m = NULL;
    CHECK(ftl_model_load(path, &o, &m) != FTL_OK);
    CHECK(m == NULL);
    CHECK(strstr(ftl_last_error(), "bottom or the top") != NULL);
    free(path);
}
