/* Input preprocessing: the resize the backbone uses (ftl_image_resize BILINEAR) equals Pillow's Image.resize(BILINEAR) byte for byte
 * (pairs made by tests/ref/nn_cases.py), scale presets and command-line parsing. */
#include "ftl/image.h"
#include "nn_testutil.h"
#include "test.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

TEST(nn_resize_matches_pillow) {
    char *dir = ftl_format("%s/ref/nn/ops/resize", ftl_test_build_dir());
    char *mpath = ftl_format("%s/manifest.txt", dir);
    size_t size;
    char *text = (char *)nn_test_read(mpath, &size);
    if (!text) ftl_test_fail(__FILE__, __LINE__, "%s missing: run tests/ref/gen_nn.sh", mpath);
    int cases = 0;
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
        char name[64];
        int sw, sh, dw, dh;
        if (sscanf(line, "%63s %d %d %d %d", name, &sw, &sh, &dw, &dh) != 5) continue;
        char *sp = ftl_format("%s/%s.src.rgb", dir, name), *dp = ftl_format("%s/%s.dst.rgb", dir, name);
        size_t ss = 0, ds = 0;
        uint8_t *src = nn_test_read(sp, &ss), *want = nn_test_read(dp, &ds);
        if (src && want && ss == (size_t)sw * sh * 3 && ds == (size_t)dw * dh * 3) {
            const ftl_image in = {.width = sw, .height = sh, .pixels = src};
            ftl_image out = {0};
            CHECK_OK(ftl_image_resize(&in, dw, dh, FTL_IMAGE_FILTER_BILINEAR, &out));
            const uint8_t *got = out.pixels ? out.pixels : want;
            size_t diff = 0;
            for (size_t i = 0; i < ds; i++) diff += got[i] != want[i];
            printf("  %-20s %zu of %zu bytes differ from Pillow\n", name, diff, ds);
            if (diff) ftl_test_fail(__FILE__, __LINE__, "%s differs from Pillow in %zu bytes", name, diff);
            ftl_image_free(&out);
            cases++;
        } else {
            ftl_test_fail(__FILE__, __LINE__, "%s: reference files missing or wrong size", name);
        }
        free(src);
        free(want);
        free(sp);
        free(dp);
    }
    CHECK(cases >= 7);
    free(text);
    free(mpath);
    free(dir);
}

TEST(nn_preprocess_presets_and_parsing) {
    ftl_nn_preprocess p;
    CHECK_OK(ftl_nn_preprocess_init(&p, FTL_NN_SCALE_TORCH));
    CHECK_NEAR(p.mean[0], 0.485, 1e-7);
    CHECK_NEAR(p.std[2], 0.225, 1e-7);
    CHECK_OK(ftl_nn_preprocess_parse(&p, "tf", NULL, NULL));
    CHECK_EQ_INT(p.scale, FTL_NN_SCALE_TF);
    CHECK_OK(ftl_nn_preprocess_parse(&p, NULL, "0.1,0.2,0.3", "0.5"));
    CHECK_EQ_INT(p.scale, FTL_NN_SCALE_CUSTOM);
    CHECK_NEAR(p.mean[1], 0.2, 1e-7);
    CHECK_NEAR(p.std[1], 0.5, 1e-7);
    CHECK_EQ_INT(ftl_nn_preprocess_parse(&p, "caffe", NULL, NULL), FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "--input-scale 'caffe'");
    CHECK_EQ_INT(ftl_nn_preprocess_parse(&p, NULL, "1,2", NULL), FTL_E_INVALID_ARG);
    CHECK_EQ_INT(ftl_nn_preprocess_parse(&p, NULL, "0.5,abc,1", NULL), FTL_E_INVALID_ARG);
    CHECK_EQ_INT(ftl_nn_preprocess_parse(&p, NULL, NULL, "0.5,0,1"), FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "--std");
}

/* The JSON record names everything a later run must reproduce. */
TEST(nn_preprocess_json_record) {
    char *path = ftl_format("%s/models/mobilenet_v1_0.25_128.onnx", ftl_test_shared_dir());
    ftl_model *m;
    ftl_model_options o;
    ftl_model_options_init(&o);
    REQUIRE_OK(ftl_model_load(path, &o, &m));
    ftl_nn_preprocess p;
    ftl_nn_preprocess_init(&p, FTL_NN_SCALE_TF);
    char *j = ftl_nn_preprocess_json(&p, m, 299);
    CHECK_CONTAINS(j, "\"scale\":\"tf\"");
    CHECK_CONTAINS(j, "\"layout\":\"NCHW\"");
    CHECK_CONTAINS(j, "\"input\":[3,128,128]");
    CHECK_CONTAINS(j, "\"resize\":\"bilinear");
    free(j);
    j = ftl_nn_preprocess_json(&p, m, 128);
    CHECK_CONTAINS(j, "\"resize\":\"none\"");
    free(j);
    const ftl_model_info *i = ftl_model_get_info(m);
    CHECK_STR_EQ(i->sha256, "a960683b683d7743bfdaacb310c6bad090fa7aafd562bfcba23c6148c905e5b1"); /* models/README.md */
    CHECK_EQ_INT(i->params, 467593);
    CHECK_EQ_INT(i->feature_dim, 1001);
    ftl_model_free(m);
    free(path);
}
