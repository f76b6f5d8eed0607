/* ftl's int8 separable convolution (src/nn/cpu/kernels/separable_int8.c: a 3x3 depthwise -> 1x1 pair in
 * one step) against oneDNN 2.6 running the two as separate primitives on the same shapes (Xception@299's
 * at the micro-batches ftl runs them, and an odd one), the same scales, biases and ReLU. Checks the
 * fused results against oneDNN's (u8 outputs: exact) and prints GOP/s and % of the given VNNI peak for
 * both and oneDNN's 1x1 alone. The kernel's first version, written here (commit 3d24ae5), ran the
 * small-channel shapes 15-50% faster than the one in src at the time (its general epilogue; fixed in
 * session 31): see docs/BENCHMARKS.md, issue 52.
 *
 * build: cc -O2 -std=c17 -Iinclude -Isrc -fopenmp bench/nn/dw_pw_int8.c build/libftl.a -ldnnl -lm
 * usage: dw_pw_int8 [--threads T] [--reps R] [--peak GOP/s] [--only NAME-PART] */
#define _GNU_SOURCE
#include <immintrin.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/cpu/kernels/separable_int8.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CHECK_DNNL(x)                                                                                                 \
    do {                                                                                                              \
        dnnl_status_t s_ = (x);                                                                                       \
        if (s_ != dnnl_success) {                                                                                     \
            fprintf(stderr, "%s:%d: oneDNN status %d: %s\n", __FILE__, __LINE__, (int)s_, #x);                     \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) exit(1);
    memset(p, 0, (n + 63) / 64 * 64);
    return p;
}

/* ---------------------------------------------------------------------------------------------- */
/* oneDNN: the same two convolutions as primitives (what ftl's int8 plan runs today)              */

typedef struct onednn_sep {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_t dw, pw;
    dnnl_memory_t x, mid, y, dww, dwb, pww, pwb;
} onednn_sep;

static dnnl_primitive_t conv_prim(dnnl_engine_t eng, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                                  const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, int groups,
                                  const float *scales, int count, float act_scale, bool relu, dnnl_memory_desc_t *wei_out) {
    dnnl_convolution_desc_t cd;
    dnnl_dims_t stride = {1, 1}, pad = {groups > 1, groups > 1};
    dnnl_memory_desc_t any_w;
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&any_w, wei->ndims, wei->dims, dnnl_s8, dnnl_format_tag_any));
    CHECK_DNNL(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, src, &any_w, bias, dst,
                                                  stride, pad, pad));
    dnnl_primitive_attr_t attr;
    CHECK_DNNL(dnnl_primitive_attr_create(&attr));
    CHECK_DNNL(dnnl_primitive_attr_set_output_scales(attr, count, 1 << 1, scales));
    if (relu) {
        dnnl_post_ops_t po;
        CHECK_DNNL(dnnl_post_ops_create(&po));
        CHECK_DNNL(dnnl_post_ops_append_eltwise(po, act_scale, dnnl_eltwise_relu, 0.f, 0.f));
        CHECK_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
    *wei_out = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    fprintf(stderr, "  oneDNN %s: %s\n", groups > 1 ? "depthwise" : "pointwise", impl);
    dnnl_primitive_t p;
    CHECK_DNNL(dnnl_primitive_create(&p, pd));
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return p;
}

static dnnl_memory_t mem_from(dnnl_engine_t eng, dnnl_stream_t s, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *have,
                              void *data) {
    dnnl_memory_t src, dst;
    CHECK_DNNL(dnnl_memory_create(&src, have, eng, data));
    CHECK_DNNL(dnnl_memory_create(&dst, want, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    CHECK_DNNL(dnnl_reorder_primitive_desc_create(&rpd, have, eng, want, eng, NULL));
    dnnl_primitive_t r;
    CHECK_DNNL(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    CHECK_DNNL(dnnl_primitive_execute(r, s, 2, args));
    CHECK_DNNL(dnnl_stream_wait(s));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(src);
    return dst;
}

/* ---------------------------------------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_time(void (*fn)(void *), void *ctx, int reps) {
    double *t = malloc((size_t)reps * sizeof *t);
    fn(ctx);
    for (int r = 0; r < reps; r++) {
        double a = now();
        fn(ctx);
        t[r] = now() - a;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

typedef struct run_ctx {
    const cpu_separable_int8 *k;
    onednn_sep *d;
    const uint8_t *x;
    uint8_t *y;
    int N, H, W, threads;
} run_ctx;

static void run_fused(void *p) {
    run_ctx *c = p;
    cpu_separable_int8_run(c->k, c->x, c->N, c->y, c->threads);
}

static void run_onednn(void *p) {
    run_ctx *c = p;
    onednn_sep *d = c->d;
    dnnl_exec_arg_t a1[4] = {{DNNL_ARG_SRC, d->x}, {DNNL_ARG_WEIGHTS, d->dww}, {DNNL_ARG_BIAS, d->dwb}, {DNNL_ARG_DST, d->mid}};
    dnnl_exec_arg_t a2[4] = {{DNNL_ARG_SRC, d->mid}, {DNNL_ARG_WEIGHTS, d->pww}, {DNNL_ARG_BIAS, d->pwb}, {DNNL_ARG_DST, d->y}};
    CHECK_DNNL(dnnl_primitive_execute(d->dw, d->stream, 4, a1));
    CHECK_DNNL(dnnl_primitive_execute(d->pw, d->stream, 4, a2));
    CHECK_DNNL(dnnl_stream_wait(d->stream));
}

static void run_onednn_pw(void *p) {
    run_ctx *c = p;
    onednn_sep *d = c->d;
    dnnl_exec_arg_t a2[4] = {{DNNL_ARG_SRC, d->mid}, {DNNL_ARG_WEIGHTS, d->pww}, {DNNL_ARG_BIAS, d->pwb}, {DNNL_ARG_DST, d->y}};
    CHECK_DNNL(dnnl_primitive_execute(d->pw, d->stream, 4, a2));
    CHECK_DNNL(dnnl_stream_wait(d->stream));
}

static const char *only; /* --only: the shapes whose name holds it */
static int shapes_run;

static void one_shape(const char *name, int N, int H, int W, int C, int O, int threads, int reps, double peak) {
    if (only && !strstr(name, only)) return;
    shapes_run++;
    rng = 0x9e3779b97f4a7c15ull; /* each shape's data the same whether it runs alone (--only) or after others */
    for (const char *c = name; *c; c++) rng = rng * 31 + (unsigned char)*c;
    size_t xs = (size_t)N * H * W * C, ys = (size_t)N * H * W * O;
    uint8_t *x = xalloc(xs), *y_fused = xalloc(ys + 64);
    int8_t *w = xalloc((size_t)C * 9), *v = xalloc((size_t)C * O);
    for (size_t i = 0; i < xs; i++) x[i] = (uint8_t)(rnd() % 200 < 60 ? 0 : rnd() & 255); /* ReLU'd: some zeros */
    for (int i = 0; i < C * 9; i++) w[i] = (int8_t)((int)(rnd() % 255) - 127);
    for (size_t i = 0; i < (size_t)C * O; i++) v[i] = (int8_t)((int)(rnd() % 255) - 127);
    float *dw_scale = xalloc((size_t)C * 4), *dw_bias = xalloc((size_t)C * 4), *pw_scale = xalloc((size_t)O * 4),
          *pw_bias = xalloc((size_t)O * 4);
    for (int c = 0; c < C; c++) {
        dw_scale[c] = 127.0f / (3.0f * 32000.0f) * (0.5f + (float)(rnd() % 1000) / 1000.0f);
        dw_bias[c] = (float)((int)(rnd() % 20001) - 10000) * 0.37f;
    }
    float sd = sqrtf((float)C) * 40.0f * 73.0f;
    for (int o = 0; o < O; o++) {
        pw_scale[o] = 255.0f / (2.0f * sd) * (0.5f + (float)(rnd() % 1000) / 1000.0f);
        pw_bias[o] = (float)((int)(rnd() % 20001) - 10000) * 3.1f;
    }
    const float act_scale = 1.0f;
    cpu_separable_int8_desc desc = {.channels = C, .outputs = O, .height = H, .width = W, .dw_weights = w,
                                    .dw_scales = dw_scale, .dw_bias = dw_bias, .pw_weights = v, .pw_scales = pw_scale,
                                    .pw_bias = pw_bias, .n_post = 1, .post = {{.lo = 0, .hi = INFINITY, .scale = act_scale}},
                                    .output = CPU_SEPARABLE_U8};
    cpu_separable_int8 *k = cpu_separable_int8_make(&desc);
    if (!k) exit(1);

    onednn_sep d = {0};
    CHECK_DNNL(dnnl_engine_create(&d.eng, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&d.stream, d.eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t xmd, midmd, ymd, dwwmd, pwwmd, dwbmd, pwbmd, dww_want, pww_want;
    dnnl_dims_t xd = {N, C, H, W}, yd = {N, O, H, W}, dwd = {C, 1, 1, 3, 3}, pwd = {O, C, 1, 1}, cb = {C}, ob = {O};
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&xmd, 4, xd, dnnl_u8, dnnl_nhwc));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&midmd, 4, xd, dnnl_s8, dnnl_nhwc));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&ymd, 4, yd, dnnl_u8, dnnl_nhwc));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&dwwmd, 5, dwd, dnnl_s8, dnnl_goihw));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&pwwmd, 4, pwd, dnnl_s8, dnnl_oihw));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&dwbmd, 1, cb, dnnl_f32, dnnl_a));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&pwbmd, 1, ob, dnnl_f32, dnnl_a));
    d.dw = conv_prim(d.eng, &xmd, &dwwmd, &dwbmd, &midmd, C, dw_scale, C, 1.0f, false, &dww_want);
    d.pw = conv_prim(d.eng, &midmd, &pwwmd, &pwbmd, &ymd, 1, pw_scale, O, act_scale, true, &pww_want);
    d.dww = mem_from(d.eng, d.stream, &dww_want, &dwwmd, w);
    d.pww = mem_from(d.eng, d.stream, &pww_want, &pwwmd, v);
    CHECK_DNNL(dnnl_memory_create(&d.dwb, &dwbmd, d.eng, dw_bias));
    CHECK_DNNL(dnnl_memory_create(&d.pwb, &pwbmd, d.eng, pw_bias));
    CHECK_DNNL(dnnl_memory_create(&d.x, &xmd, d.eng, x));
    CHECK_DNNL(dnnl_memory_create(&d.mid, &midmd, d.eng, DNNL_MEMORY_ALLOCATE));
    CHECK_DNNL(dnnl_memory_create(&d.y, &ymd, d.eng, DNNL_MEMORY_ALLOCATE));

    run_ctx c = {k, &d, x, y_fused, N, H, W, threads};
    double t_fused = median_time(run_fused, &c, reps), t_dnnl = median_time(run_onednn, &c, reps),
           t_pw = median_time(run_onednn_pw, &c, reps);
    /* correctness: rerun both once and compare the pointwise outputs */
    run_fused(&c);
    run_onednn(&c);
    uint8_t *yd_ = NULL;
    CHECK_DNNL(dnnl_memory_get_data_handle(d.y, (void **)&yd_));
    size_t off1 = 0, offmore = 0;
    int worst = 0;
    for (size_t i = 0; i < ys; i++) {
        int e = abs((int)y_fused[i] - (int)yd_[i]);
        off1 += e == 1;
        offmore += e > 1;
        if (e > worst) worst = e;
    }
    double ops = 2.0 * N * H * W * ((double)C * O + 9.0 * C) / 1e9, pw_ops = 2.0 * N * H * W * (double)C * O / 1e9;
    printf("%-22s N%d %3dx%-3d %4d->%-4d fused %7.3f ms %6.0f GOP/s %4.1f%% | oneDNN dw+pw %7.3f ms %6.0f GOP/s %4.1f%% "
           "(pw alone %6.3f ms %4.1f%%) | fused/oneDNN %.2fx | outputs off by 1: %zu, by more: %zu (worst %d) of %zu\n",
           name, N, H, W, C, O, t_fused * 1e3, ops / t_fused, 100 * ops / t_fused / peak, t_dnnl * 1e3, ops / t_dnnl,
           100 * ops / t_dnnl / peak, t_pw * 1e3, 100 * pw_ops / t_pw / peak, t_dnnl / t_fused, off1, offmore, worst, ys);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int threads = 2, reps = 30;
    double peak = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--peak")) peak = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
    }
    if (peak <= 0) peak = 1800; /* GOP/s; pass the profiler's reading with --peak */
    omp_set_num_threads(threads);
    one_shape("middle sepconv", 4, 19, 19, 728, 728, threads, reps, peak);
    one_shape("block4 sep2", 2, 37, 37, 728, 728, threads, reps, peak);
    one_shape("block4 sep1", 2, 37, 37, 256, 728, threads, reps, peak);
    one_shape("block3 sep2", 2, 74, 74, 256, 256, threads, reps, peak);
    one_shape("block3 sep1", 2, 74, 74, 128, 256, threads, reps, peak);
    one_shape("block2 sep2", 2, 147, 147, 128, 128, threads, reps, peak);
    one_shape("block2 sep1", 2, 147, 147, 64, 128, threads, reps, peak);
    one_shape("block14 sep1", 4, 10, 10, 1024, 1536, threads, reps, peak);
    one_shape("odd channels", 3, 11, 13, 100, 72, threads, reps, peak);
    if (!shapes_run) {
        fprintf(stderr, "dw_pw_int8: no shape's name holds '%s'\n", only);
        return 2;
    }
    return 0;
}
