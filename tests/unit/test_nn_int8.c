/* --precision int8: calibrated int8 features of the shared backbones against their fp32 features
 * on hymenoptera photos (mean row cosine >= 0.99), the scales table's round trip and checks, and
 * the calibration's determinism. */
#include "nn_testutil.h"
#include "test.h"
#include "util/fsutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Up to `limit` photos of hymenoptera's split (both classes, sorted names, alternating), prepped
 * as `ftl prep` does at `size`; *count gets how many. */
static uint8_t *hymenoptera_images(const char *split, int size, int limit, int *count) {
    *count = 0;
    size_t per = (size_t)size * size * 3;
    uint8_t *all = malloc(per * (size_t)limit);
    ftl_image_prepper *prep = NULL;
    if (ftl_image_prepper_init(&prep, size) != FTL_OK) {
        free(all);
        return NULL;
    }
    const char *classes[2] = {"ants", "bees"};
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    for (int c = 0; c < 2; c++) {
        char *dir = ftl_format("%s/data/hymenoptera/%s/%s", ftl_test_shared_dir(), split, classes[c]);
        struct dirent **list = NULL;
        int k = scandir(dir, &list, NULL, alphasort);
        names[c] = calloc((size_t)(k > 0 ? k : 1), sizeof *names[c]);
        for (int i = 0; i < k; i++) {
            if (list[i]->d_name[0] != '.') names[c][n[c]++] = ftl_format("%s/%s", dir, list[i]->d_name);
            free(list[i]);
        }
        free(list);
        free(dir);
    }
    for (int i = 0; *count < limit && (i < n[0] || i < n[1]); i++)
        for (int c = 0; c < 2 && *count < limit; c++) {
            if (i >= n[c]) continue;
            size_t size_bytes = 0;
            uint8_t *b = nn_test_read(names[c][i], &size_bytes);
            if (b && ftl_image_prepper_run(prep, b, size_bytes, all + per * (size_t)*count, NULL) == FTL_OK) (*count)++;
            free(b); /* the GIF placeholder and anything else undecodable is skipped */
        }
    for (int c = 0; c < 2; c++) {
        for (int i = 0; i < n[c]; i++) free(names[c][i]);
        free(names[c]);
    }
    ftl_image_prepper_free(prep);
    return all;
}

static float *features_of(const char *path, ftl_model_options *o, const ftl_nn_preprocess *pp, const uint8_t *images,
                          int count, int size, long long *dim, int *int8_convs) {
    ftl_model *m = NULL;
    if (ftl_model_load(path, o, &m) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "load %s (%s): %s", path, ftl_nn_precision_name(o->precision), ftl_last_error());
        return NULL;
    }
    *dim = ftl_model_get_info(m)->feature_dim;
    if (int8_convs) *int8_convs = ftl_model_get_info(m)->int8_convs;
    float *f = malloc((size_t)count * (size_t)*dim * sizeof *f);
    if (ftl_model_extract_features(m, pp, images, count, size, f) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "run %s: %s", path, ftl_last_error());
        free(f);
        f = NULL;
    }
    ftl_model_free(m);
    return f;
}

typedef struct int8_case {
    const char *model;
    int size, calibration_rows, rows;
    ftl_nn_scale scale;
} int8_case;

static void check_int8_against_fp32(const int8_case *c) {
    char *path = ftl_format("%s/models/%s.onnx", ftl_test_shared_dir(), c->model);
    int n_cal = 0, n_val = 0;
    uint8_t *cal = hymenoptera_images("train", c->size, c->calibration_rows, &n_cal);
    uint8_t *val = hymenoptera_images("val", c->size, c->rows, &n_val);
    ftl_nn_preprocess pp;
    ftl_nn_preprocess_init(&pp, c->scale);
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.device = FTL_DEVICE_CPU;
    ftl_nn_int8_scales *scales = NULL;
    if (!cal || !val || n_cal != c->calibration_rows || n_val != c->rows) {
        ftl_test_fail(__FILE__, __LINE__, "hymenoptera photos: %d and %d of %d and %d", n_cal, n_val, c->calibration_rows,
                      c->rows);
    } else if (ftl_nn_calibrate(path, &o, &pp, cal, n_cal, c->size, getenv("MINMAX") ? FTL_NN_CALIBRATION_MINMAX : FTL_NN_CALIBRATION_PERCENTILE, &scales) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "calibrate %s: %s", c->model, ftl_last_error());
    } else {
        long long dim = 0, dim8 = 0;
        int int8_convs = 0;
        float *f32 = features_of(path, &o, &pp, val, n_val, c->size, &dim, NULL);
        o.precision = FTL_NN_INT8;
        o.int8_scales = scales;
        float *f8 = features_of(path, &o, &pp, val, n_val, c->size, &dim8, &int8_convs);
        if (f32 && f8 && dim == dim8) {
            double mean = 0, worst = 1;
            for (int r = 0; r < n_val; r++) {
                double cos = nn_cosine(f32 + (size_t)r * dim, f8 + (size_t)r * dim, dim);
                mean += cos / n_val;
                if (cos < worst) worst = cos;
            }
            printf("  %s: %d convolutions in int8 (%d scales), %d rows: mean cosine to fp32 %.5f, lowest %.5f\n", c->model,
                   int8_convs, ftl_nn_int8_scales_count(scales), n_val, mean, worst);
            CHECK(int8_convs > 0);
            CHECK(mean >= 0.99);
        }
        free(f32);
        free(f8);
    }
    ftl_nn_int8_scales_free(scales);
    free(cal);
    free(val);
    free(path);
}

TEST(nn_int8_mobilenet_v2_features_close_to_fp32) {
    int8_case c = {"mobilenet_v2_1.0_224_features", 224, 64, 48, FTL_NN_SCALE_TF};
    check_int8_against_fp32(&c);
}

TEST(nn_int8_mobilenet_v1_embedding_close_to_fp32) {
    int8_case c = {"mobilenet_v1_1.0_224_embedding", 224, 64, 48, FTL_NN_SCALE_TF};
    check_int8_against_fp32(&c);
}

TEST(nn_int8_xception_features_close_to_fp32) {
    int8_case c = {"xception_random", 299, 16, 16, FTL_NN_SCALE_TF};
    check_int8_against_fp32(&c);
}
