/* Fine-tuning step time of ftl's training plan (src/nn/cpu/cpu_train_plan.c): the unfrozen top of a backbone
 * (--fine-tune-last N) forward + backward on one batch of boundary tensors, median of reps of >= 1 s;
 * and the frozen bottom's inference per batch up to the boundary (what the boundary cache saves).
 * Prints one JSON line.
 * usage: plan_step MODEL.onnx --last N [--batch B] [--threads T] [--reps R] */
#include "ftl.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_clock.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: plan_step MODEL.onnx --last N [--batch B] [--threads T] [--reps R]\n");
        return 2;
    }
    int last = 4, batch = 16, threads = 2, reps = 5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--last")) last = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    omp_set_num_threads(threads);
    ftl_model_options mo;
    ftl_model_options_init(&mo);
    ftl_fine_tune_cut cut = {last, NULL};
    ftl_finetune *ft;
    if (ftl_finetune_open(argv[1], &mo, &cut, batch, &ft) != FTL_OK) {
        fprintf(stderr, "plan_step: %s\n", ftl_last_error());
        return 1;
    }
    const ftl_finetune_info *fi = ftl_finetune_get_info(ft);
    float **in = malloc((size_t)fi->n_boundary * sizeof *in);
    for (int k = 0; k < fi->n_boundary; k++) {
        long long per = 0;
        ftl_finetune_boundary_name(ft, k, &per);
        int64_t c = per * batch;
        in[k] = malloc((size_t)c * sizeof(float));
        for (int64_t i = 0; i < c; i++) in[k][i] = (float)((i * 2654435761u) % 600) / 100.0f;
    }
    int64_t nf = fi->feature_dim * batch;
    float *feat = malloc((size_t)nf * sizeof *feat), *df = malloc((size_t)nf * sizeof *df);
    for (int64_t i = 0; i < nf; i++) df[i] = (float)((i % 7) - 3) * 1e-3f;
    double t0 = bench_now();
    while (bench_now() - t0 < 1.0) { /* warm-up */
        ftl_finetune_forward(ft, (const float *const *)in, feat);
        ftl_finetune_backward(ft, df);
    }
    double *step_ms = malloc((size_t)reps * sizeof *step_ms);
    for (int r = 0; r < reps; r++) {
        int n = 0;
        double t = bench_now();
        do {
            ftl_finetune_forward(ft, (const float *const *)in, feat);
            ftl_finetune_backward(ft, df);
            n++;
        } while (bench_now() - t < 1.0);
        step_ms[r] = 1e3 * (bench_now() - t) / n;
    }
    qsort(step_ms, (size_t)reps, sizeof *step_ms, bench_cmp_double);
    /* where a step's time goes (timed steps wait for each primitive: a little slower than above) */
    ftl_finetune_set_profiling(ft, true);
    double tp = bench_now();
    do {
        ftl_finetune_forward(ft, (const float *const *)in, feat);
        ftl_finetune_backward(ft, df);
    } while (bench_now() - tp < 1.0);
    ftl_finetune_print_profile(ft, stderr);
    ftl_cpu_peak peak;
    if (ftl_cpu_peak_measure(threads, &peak) == FTL_OK)
        fprintf(stderr, "peak: fp32 %.1f GFLOP/s on %d threads (%s; %.1f measured on all at once)\n", peak.fp32_gflops,
                threads, peak.isa_fp32, peak.fp32_measured);
    ftl_finetune_set_profiling(ft, false);
    /* the frozen bottom: inference up to the (first) boundary tensor, what the cache replaces */
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.batch = batch;
    o.threads = threads;
    o.features_from = ftl_finetune_boundary_name(ft, 0, NULL);
    ftl_model *m = NULL;
    double bottom_ms = -1;
    if (ftl_model_load(argv[1], &o, &m) == FTL_OK) {
        const ftl_model_info *mi = ftl_model_get_info(m);
        int64_t per = (int64_t)mi->channels * mi->height * mi->width;
        float *x = calloc((size_t)(per * batch), sizeof *x), *y = malloc((size_t)(mi->feature_dim * batch) * sizeof *y);
        for (int w = 0; w < 3; w++) ftl_model_run(m, x, batch, y);
        double *bm = malloc((size_t)reps * sizeof *bm);
        for (int r = 0; r < reps; r++) {
            int n = 0;
            double t = bench_now();
            do {
                ftl_model_run(m, x, batch, y);
                n++;
            } while (bench_now() - t < 1.0);
            bm[r] = 1e3 * (bench_now() - t) / n;
        }
        qsort(bm, (size_t)reps, sizeof *bm, bench_cmp_double);
        bottom_ms = bm[reps / 2];
        free(bm);
        free(x);
        free(y);
        ftl_model_free(m);
    }
    printf("{\"engine\":\"ftl\",\"model\":\"%s\",\"last\":%d,\"batch\":%d,\"threads\":%d,\"unfrozen_nodes\":%d,"
           "\"trained_values\":%lld,\"boundary_floats_per_image\":%lld,\"top_step_ms\":%.3f,\"bottom_forward_ms\":%.3f}\n",
           argv[1], last, batch, threads, fi->unfrozen_nodes, fi->param_count, fi->boundary_floats, step_ms[reps / 2],
           bottom_ms);
    return 0;
}
