/* int8 calibration's cost against the int8 feature pass it serves, per image, on the same images:
 * ftl_nn_calibrate (fp32 model load + its passes + scales, no cache) and, with its scales, the int8
 * model's features of the same images (after one warm-up batch), plus the fp32 pass as the floor a
 * calibration that observes fp32 values cannot go under. Prints one JSON line per round, and the
 * scales' hash so runs of two builds can be checked for identical scales.
 * usage: calibration_cost MODEL.onnx IMAGES.rgb --size S --count N [--scale tf|torch] [--batch B]
 *                         [--threads T] [--method percentile|minmax] [--rounds R] */
#include "ftl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_clock.h"

static int fail(void) {
    fprintf(stderr, "calibration_cost: %s\n", ftl_last_error());
    return 1;
}

/* Seconds per image of one feature pass of `count` images at `precision` (model load excluded). */
static int feature_pass(const char *path, ftl_model_options o, const ftl_nn_preprocess *pp, const uint8_t *images,
                        int count, int size, double *per_image) {
    ftl_model *m;
    if (ftl_model_load(path, &o, &m) != FTL_OK) return fail();
    float *features = malloc((size_t)count * (size_t)ftl_model_get_info(m)->feature_dim * sizeof *features);
    int warm = count < o.batch ? count : o.batch;
    double t0 = 0;
    ftl_status st = ftl_model_extract_features(m, pp, images, warm, size, features);
    if (st == FTL_OK) {
        t0 = bench_now();
        st = ftl_model_extract_features(m, pp, images, count, size, features);
    }
    *per_image = (bench_now() - t0) / count;
    free(features);
    ftl_model_free(m);
    return st == FTL_OK ? 0 : fail();
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: calibration_cost MODEL.onnx IMAGES.rgb --size S --count N [--scale tf|torch] [--batch B] "
                        "[--threads T] [--method percentile|minmax] [--rounds R]\n");
        return 2;
    }
    ftl_model_options o;
    ftl_model_options_init(&o);
    int size = 0, count = 0, rounds = 1;
    const char *scale = "tf", *method_name = "percentile";
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--size") == 0) size = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--count") == 0) count = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--scale") == 0) scale = argv[i + 1];
        else if (strcmp(argv[i], "--batch") == 0) o.batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0) o.threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--method") == 0) method_name = argv[i + 1];
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "calibration_cost: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    ftl_nn_preprocess pp;
    ftl_nn_calibration_method method;
    if (ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF) != FTL_OK || ftl_nn_preprocess_parse(&pp, scale, NULL, NULL) != FTL_OK ||
        ftl_nn_calibration_method_parse(method_name, &method) != FTL_OK)
        return fail();
    uint8_t *images = NULL;
    size_t bytes = 0;
    FILE *f = fopen(argv[2], "rb");
    if (f && size > 0 && count > 0) {
        bytes = (size_t)count * (size_t)size * (size_t)size * 3;
        images = malloc(bytes);
        if (fread(images, 1, bytes, f) != bytes) bytes = 0;
    }
    if (f) fclose(f);
    if (!images || !bytes) {
        fprintf(stderr, "calibration_cost: %s does not hold %d images of %dx%dx3 bytes\n", argv[2], count, size, size);
        return 1;
    }
    for (int r = 1; r <= rounds; r++) {
        ftl_nn_int8_scales *scales = NULL;
        double t0 = bench_now();
        if (ftl_nn_calibrate(argv[1], &o, &pp, images, count, size, method, &scales) != FTL_OK) return fail();
        double calibration = (bench_now() - t0) / count, int8_pass, fp32_pass;
        ftl_model_options q = o;
        q.precision = FTL_NN_INT8;
        q.int8_scales = scales;
        if (feature_pass(argv[1], q, &pp, images, count, size, &int8_pass)) return 1;
        q.precision = FTL_NN_FP32;
        q.int8_scales = NULL;
        if (feature_pass(argv[1], q, &pp, images, count, size, &fp32_pass)) return 1;
        printf("{\"rep\":%d,\"count\":%d,\"calibration_s_per_image\":%.6f,\"int8_s_per_image\":%.6f,"
               "\"fp32_s_per_image\":%.6f,\"calibration_over_int8\":%.3f,\"scales\":%d,\"scales_hash\":\"%s\"}\n",
               r, count, calibration, int8_pass, fp32_pass, calibration / int8_pass, ftl_nn_int8_scales_count(scales),
               ftl_nn_int8_scales_hash(scales));
        fflush(stdout);
        ftl_nn_int8_scales_free(scales);
    }
    free(images);
    return 0;
}
