/* Backbone forward throughput of ftl, measured like the peer (bench/peer/benchutil.py): warm-up
 * (first call = primitive creation, then >= 1 s), then reps of >= min_rep_s each; prints one
 * JSON line per configuration with every rep's images/s and the median.
 * usage: ftl_bench MODEL.onnx --batch B --precision fp32|bf16|tf32 --threads T [--reps N] [--min-rep-s S]
 *                  [--micro-batch M] (0 = the engine's choice) [--device cpu|cuda|auto] */
#include "ftl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_clock.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ftl_bench MODEL.onnx [--batch B] [--precision fp32|bf16|int8] [--threads T] [--reps N] [--min-rep-s S] [--micro-batch M] [--conv-algorithm auto|direct] [--device cpu|cuda|auto] [--debug 1]\n");
        return 2;
    }
    ftl_model_options o;
    ftl_model_options_init(&o);
    int reps = 5;
    double min_rep_s = 1.0;
    const char *precision = "fp32";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--batch") == 0) o.batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0) o.threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--precision") == 0) precision = argv[i + 1];
        else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--min-rep-s") == 0) min_rep_s = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--features-from") == 0) o.features_from = argv[i + 1];
        else if (strcmp(argv[i], "--micro-batch") == 0) o.micro_batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--device") == 0) {
            if (ftl_device_parse(argv[i + 1], &o.device) != FTL_OK)
                return fprintf(stderr, "ftl_bench: %s\n", ftl_last_error()), 2;
        }
        else if (strcmp(argv[i], "--conv-algorithm") == 0) {
            if (ftl_nn_conv_algorithm_parse(argv[i + 1], &o.conv_algorithm) != FTL_OK)
                return fprintf(stderr, "ftl_bench: %s\n", ftl_last_error()), 2;
        } else if (strcmp(argv[i], "--debug") == 0) {
            if (atoi(argv[i + 1])) ftl_log_set_level(FTL_LOG_DEBUG);
        }
        else {
            fprintf(stderr, "ftl_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    ftl_model *m;
    double t0 = bench_now();
    ftl_status st = ftl_nn_precision_parse(precision, &o.precision);
    ftl_nn_int8_scales *scales = NULL; /* int8: calibrated on synthetic images (the speed does not depend on them) */
    if (st == FTL_OK && o.precision == FTL_NN_INT8) {
        ftl_nn_preprocess pp;
        ftl_nn_preprocess_init(&pp, FTL_NN_SCALE_TF);
        st = ftl_nn_calibrate(argv[1], &o, &pp, NULL, 32, 0, FTL_NN_CALIBRATION_PERCENTILE, &scales);
        o.int8_scales = scales;
    }
    if (st == FTL_OK) st = ftl_model_load(argv[1], &o, &m);
    if (st != FTL_OK) {
        fprintf(stderr, "ftl_bench: %s\n", ftl_last_error());
        return 1;
    }
    double load_s = bench_now() - t0;
    const ftl_model_info *info = ftl_model_get_info(m);
    size_t in_count = (size_t)o.batch * (size_t)info->input_floats; /* images, or any other input (token rows) */
    float *in = malloc(in_count * sizeof *in), *out = malloc((size_t)o.batch * (size_t)info->feature_dim * sizeof *out);
    uint64_t x = 12345;
    for (size_t i = 0; i < in_count; i++) { /* normal-ish random input like torch.randn */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        in[i] = (float)((double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0) * 1.7f;
    }
    t0 = bench_now();
    if (ftl_model_run(m, in, o.batch, out) != FTL_OK) {
        fprintf(stderr, "ftl_bench: %s\n", ftl_last_error());
        return 1;
    }
    double first = bench_now() - t0, per_call = first;
    for (t0 = bench_now(); bench_now() - t0 < 1.0 && first < 5.0;) { /* warm-up */
        double a = bench_now();
        ftl_model_run(m, in, o.batch, out);
        per_call = bench_now() - a;
    }
    int k = (int)(min_rep_s / per_call) + 1;
    double *rates = malloc((size_t)reps * sizeof *rates);
    for (int r = 0; r < reps; r++) {
        double a = bench_now();
        for (int i = 0; i < k; i++) ftl_model_run(m, in, o.batch, out);
        rates[r] = (double)k * o.batch / (bench_now() - a);
    }
    printf("{\"engine\":\"ftl\",\"model\":\"%s\",\"batch\":%d,\"precision\":\"%s\",\"threads\":%d,\"macs_per_img\":%lld,"
           "\"conv_algorithm\":\"%s\",\"winograd_convs\":%d,\"micro_batch\":%d,\"micro_batch_min\":%d,\"load_s\":%.3f,\"first_call_s\":%.3f,\"calls_per_rep\":%d,\"rates\":[",
           argv[1], o.batch, precision, info->threads, info->macs_per_image, ftl_nn_conv_algorithm_name(info->conv_algorithm),
           info->winograd_convs, info->micro_batch, info->micro_batch_min, load_s, first, k);
    for (int r = 0; r < reps; r++) printf("%s%.3f", r ? "," : "", rates[r]);
    qsort(rates, (size_t)reps, sizeof *rates, bench_cmp_double);
    double med = reps % 2 ? rates[reps / 2] : 0.5 * (rates[reps / 2 - 1] + rates[reps / 2]);
    printf("],\"median\":%.3f,\"gflops\":%.1f,\"backend\":\"%s\",\"device\":\"%s\"}\n", med,
           med * 2e-9 * (double)info->macs_per_image, info->backend, ftl_device_kind_name(info->device_kind));
    free(rates);
    free(in);
    free(out);
    ftl_model_free(m);
    ftl_nn_int8_scales_free(scales);
    return 0;
}
