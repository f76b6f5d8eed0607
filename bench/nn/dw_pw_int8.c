/* A candidate kernel for the int8 separable convolution (depthwise 3x3 -> pointwise 1x1, Xception's
 * and MobileNet's building block) against oneDNN 2.6 running the two as separate primitives on the
 * same shapes (Xception@299's at the micro-batches ftl runs them): the depthwise output of a few rows
 * stays in L1 as the pointwise product's input instead of a round trip through memory. Checks the
 * fused results against oneDNN's (the depthwise s8 and the pointwise u8, exact or off by one from
 * float rounding) and prints GOP/s and % of the measured VNNI peak for both.
 *
 * The depthwise uses VNNI too: each input column's three rows (16-channel chunks) go into one zmm, a
 * byte permute makes each channel's lane hold (top, middle, bottom, 0), and that vector serves the
 * three outputs reading the column (three vpdpbusd per 16 outputs). The pointwise is a 12-pixel x
 * 32-output register block (24 accumulators, a slab of weights small enough for L1 with the tile)
 * over the depthwise output held as u8 (s8 + 128, compensated by 128 x the weights' sums); tiles are
 * whole pixel blocks of the flattened images, so no block is wasted at a row's end.
 *
 * Not wired into ftl's plans yet (a candidate for Xception's and the MobileNets' int8 separable
 * convolutions): see docs/BENCHMARKS.md for what it measured.
 *
 * build: cc -O2 -std=c17 -march=native -fopenmp bench/nn/dw_pw_int8.c -ldnnl -lm -o dw_pw_int8
 * usage: dw_pw_int8 [--threads T] [--reps R] */
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
/* The fused kernel                                                                               */

typedef struct sep_int8 {
    int C, O, Cq, Oq;       /* channels in and out; Cq, Oq rounded up to 16 */
    int8_t *dw_w;           /* [3 tap columns][Cq][4]: the column's (top, middle, bottom, 0) */
    float *dw_bias, *dw_scale; /* [Cq]: s8 = sat(round((acc + bias) x scale)) */
    int8_t *pw_w;           /* slabs of up to 64 outputs: [slab][Cq/4][outputs in slab][4] */
    int32_t *pw_comp;       /* [Oq]: 128 x the sum of output o's weights (the u8 shift) */
    float *pw_bias, *pw_scale, act_scale; /* u8 = sat(round(relu((acc + bias) x scale) x act_scale)) */
} sep_int8;

/* dw weights w[c][3][3], pw weights v[o][c] */
static void sep_int8_pack(sep_int8 *k, int C, int O, const int8_t *w, const int8_t *v) {
    k->C = C;
    k->O = O;
    k->Cq = (C + 15) / 16 * 16;
    k->Oq = (O + 31) / 32 * 32; /* whole slabs of 32 outputs (the last one padded with zero weights) */
    k->dw_w = xalloc((size_t)3 * k->Cq * 4);
    for (int j = 0; j < 3; j++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < 3; i++) k->dw_w[((size_t)j * k->Cq + c) * 4 + i] = w[c * 9 + i * 3 + j];
    k->pw_w = xalloc((size_t)k->Oq * k->Cq);
    k->pw_comp = xalloc((size_t)k->Oq * sizeof(int32_t));
    size_t at = 0;
    for (int o0 = 0; o0 < k->Oq; o0 += 32) {
        for (int c4 = 0; c4 < k->Cq / 4; c4++)
            for (int o = o0; o < o0 + 32; o++)
                for (int b = 0; b < 4; b++) {
                    int c = c4 * 4 + b;
                    k->pw_w[at++] = o < O && c < C ? v[(size_t)o * C + c] : 0;
                }
    }
    for (int o = 0; o < O; o++) {
        int32_t s = 0;
        for (int c = 0; c < C; c++) s += v[(size_t)o * C + c];
        k->pw_comp[o] = 128 * s;
    }
}

/* The depthwise 3x3 (stride 1, pad 1) of output row h, pixels [w0, w0 + n), into mid (u8 = s8 + 128, Cq per pixel). Each
 * input column's three rows are permuted once into (top, middle, bottom, 0) per channel lane and serve
 * the three outputs that read that column: three vpdpbusd per 16 outputs. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) static void
dw_segment(const sep_int8 *k, const uint8_t *x, int H, int W, int h, int w0, int n, uint8_t *mid) {
    const int C = k->C, blocks = k->Cq / 16;
    /* byte 4c + i of the permuted vector: chunk i's channel c (i < 3), chunk 3 (zeros) for i = 3 */
    static const uint8_t idx_bytes[64] = {
        0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51, 4, 20, 36, 52, 5, 21, 37, 53, 6, 22, 38, 54, 7, 23, 39, 55,
        8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};
    const __m512i idx = _mm512_loadu_si512(idx_bytes);
    const __m128i flip = _mm_set1_epi8((char)0x80);
    const size_t row = (size_t)W * C;
    const uint8_t *up = h > 0 ? x + (size_t)(h - 1) * row : NULL, *mi = x + (size_t)h * row,
                  *dn = h + 1 < H ? x + (size_t)(h + 1) * row : NULL;
    for (int b = 0; b < blocks; b++) {
        int c0 = b * 16;
        __mmask16 live = C - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c0)) - 1);
        const __m512i t0 = _mm512_loadu_si512(k->dw_w + (size_t)c0 * 4),
                      t1 = _mm512_loadu_si512(k->dw_w + ((size_t)k->Cq + c0) * 4),
                      t2 = _mm512_loadu_si512(k->dw_w + ((size_t)2 * k->Cq + c0) * 4);
        const __m512 bias = _mm512_loadu_ps(k->dw_bias + c0), scale = _mm512_loadu_ps(k->dw_scale + c0);
#define COLUMN(w)                                                                                                     \
    _mm512_permutexvar_epi8(                                                                                          \
        idx, _mm512_inserti32x4(                                                                                      \
                 _mm512_inserti32x4(_mm512_castsi128_si512(up ? _mm_maskz_loadu_epi8(live, up + (size_t)(w) * C + c0)  \
                                                              : _mm_setzero_si128()),                                 \
                                    _mm_maskz_loadu_epi8(live, mi + (size_t)(w) * C + c0), 1),                        \
                 dn ? _mm_maskz_loadu_epi8(live, dn + (size_t)(w) * C + c0) : _mm_setzero_si128(), 2))
        __m512i left = _mm512_setzero_si512(), centre = COLUMN(w0);
        if (w0 > 0) left = COLUMN(w0 - 1);
        for (int w = w0; w < w0 + n; w++) {
            __m512i right = _mm512_setzero_si512();
            if (w + 1 < W) right = COLUMN(w + 1);
            __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), left, t0);
            acc = _mm512_dpbusd_epi32(acc, centre, t1);
            acc = _mm512_dpbusd_epi32(acc, right, t2);
            __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(acc), bias), scale);
            __m128i s8 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(f));
            _mm_storeu_si128((__m128i *)(mid + (size_t)(w - w0) * k->Cq + c0), _mm_xor_si128(s8, flip));
            left = centre;
            centre = right;
        }
#undef COLUMN
    }
}

/* PX pixels x 32 outputs over the Cq channels of mid, stores the first `pixels` rows. Named
 * accumulators: GCC keeps an array of 24 vectors on the stack. Two weight vectors per 12 broadcasts:
 * a 32-output slab of weights (23 KiB at 728 channels) stays in L1 with the tile. */
#define PX 12
#define SLAB 32
#define ROW_DECL(i) __m512i a##i##0 = zero, a##i##1 = zero
#define ROW_STEP(i)                                                                                                   \
    do {                                                                                                              \
        __m512i b = _mm512_set1_epi32(*(const int32_t *)(m + (size_t)(i) * Cq));                                    \
        a##i##0 = _mm512_dpbusd_epi32(a##i##0, b, w0);                                                               \
        a##i##1 = _mm512_dpbusd_epi32(a##i##1, b, w1);                                                               \
    } while (0)
#define ROW_SAVE(i)                                                                                                   \
    do {                                                                                                              \
        acc[i][0] = a##i##0;                                                                                          \
        acc[i][1] = a##i##1;                                                                                          \
    } while (0)

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void
pw_block(const sep_int8 *k, const uint8_t *mid, const int8_t *wslab, int o0, int pixels, uint8_t *y, size_t ystride) {
    const size_t Cq = (size_t)k->Cq;
    const __m512i zero = _mm512_setzero_si512();
    ROW_DECL(0); ROW_DECL(1); ROW_DECL(2); ROW_DECL(3); ROW_DECL(4); ROW_DECL(5);
    ROW_DECL(6); ROW_DECL(7); ROW_DECL(8); ROW_DECL(9); ROW_DECL(10); ROW_DECL(11);
    const uint8_t *m = mid;
    const int8_t *wp = wslab;
    for (size_t c4 = 0; c4 < Cq / 4; c4++, m += 4, wp += 4 * SLAB) {
        __m512i w0 = _mm512_loadu_si512(wp), w1 = _mm512_loadu_si512(wp + 64);
        ROW_STEP(0); ROW_STEP(1); ROW_STEP(2); ROW_STEP(3); ROW_STEP(4); ROW_STEP(5);
        ROW_STEP(6); ROW_STEP(7); ROW_STEP(8); ROW_STEP(9); ROW_STEP(10); ROW_STEP(11);
    }
    __m512i acc[PX][2];
    ROW_SAVE(0); ROW_SAVE(1); ROW_SAVE(2); ROW_SAVE(3); ROW_SAVE(4); ROW_SAVE(5);
    ROW_SAVE(6); ROW_SAVE(7); ROW_SAVE(8); ROW_SAVE(9); ROW_SAVE(10); ROW_SAVE(11);
    for (int j = 0; j < SLAB / 16; j++) {
        int o = o0 + j * 16;
        if (o >= k->O) break;
        __mmask16 live = k->O - o >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k->O - o)) - 1);
        __m512i comp = _mm512_loadu_si512(k->pw_comp + o);
        __m512 bias = _mm512_loadu_ps(k->pw_bias + o), scale = _mm512_loadu_ps(k->pw_scale + o);
        __m512 act = _mm512_set1_ps(k->act_scale), fzero = _mm512_setzero_ps();
        for (int i = 0; i < pixels; i++) {
            __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], comp));
            f = _mm512_mul_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_add_ps(f, bias), scale), fzero), act);
            __m128i u8 = _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(f));
            _mm_mask_storeu_epi8(y + (size_t)i * ystride + o, live, u8);
        }
    }
}

static void pw_rows(const sep_int8 *k, const uint8_t *mid, int pixels, uint8_t *y) {
    for (int o0 = 0; o0 < k->Oq; o0 += SLAB) {
        const int8_t *wslab = k->pw_w + (size_t)o0 * k->Cq;
        for (int p = 0; p < pixels; p += PX)
            pw_block(k, mid + (size_t)p * k->Cq, wslab, o0, pixels - p < PX ? pixels - p : PX, y + (size_t)p * k->O,
                     (size_t)k->O);
    }
}

/* x: u8 [N][H][W][C], y: u8 [N][H][W][O]; tiles of whole pixel blocks over the flattened images
 * (rows cut anywhere) whose depthwise output fits ~32 KiB. */
static void sep_int8_run(const sep_int8 *k, const uint8_t *x, int N, int H, int W, uint8_t *y, int threads) {
    int per_tile = (32 << 10) / k->Cq / PX * PX;
    if (per_tile < PX) per_tile = PX;
    long total = (long)N * H * W, tiles = (total + per_tile - 1) / per_tile;
#pragma omp parallel num_threads(threads)
    {
        uint8_t *mid = xalloc(((size_t)per_tile + PX) * k->Cq);
#pragma omp for schedule(static)
        for (long t = 0; t < tiles; t++) {
            long p0 = t * per_tile, p1 = p0 + per_tile < total ? p0 + per_tile : total;
            for (long p = p0; p < p1;) { /* row segments */
                int n = (int)(p / ((long)H * W)), h = (int)(p / W % H), w = (int)(p % W);
                int len = W - w < p1 - p ? W - w : (int)(p1 - p);
                dw_segment(k, x + (size_t)n * H * W * k->C, H, W, h, w, len, mid + (size_t)(p - p0) * k->Cq);
                p += len;
            }
            pw_rows(k, mid, (int)(p1 - p0), y + (size_t)p0 * k->O);
        }
        free(mid);
    }
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
    const sep_int8 *k;
    onednn_sep *d;
    const uint8_t *x;
    uint8_t *y;
    int N, H, W, threads;
} run_ctx;

static void run_fused(void *p) {
    run_ctx *c = p;
    sep_int8_run(c->k, c->x, c->N, c->H, c->W, c->y, c->threads);
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

static void one_shape(const char *name, int N, int H, int W, int C, int O, int threads, int reps, double peak) {
    size_t xs = (size_t)N * H * W * C, ys = (size_t)N * H * W * O;
    uint8_t *x = xalloc(xs), *y_fused = xalloc(ys + 64);
    int8_t *w = xalloc((size_t)C * 9), *v = xalloc((size_t)C * O);
    for (size_t i = 0; i < xs; i++) x[i] = (uint8_t)(rnd() % 200 < 60 ? 0 : rnd() & 255); /* ReLU'd: some zeros */
    for (int i = 0; i < C * 9; i++) w[i] = (int8_t)((int)(rnd() % 255) - 127);
    for (size_t i = 0; i < (size_t)C * O; i++) v[i] = (int8_t)((int)(rnd() % 255) - 127);
    sep_int8 k = {0};
    sep_int8_pack(&k, C, O, w, v);
    k.dw_bias = xalloc((size_t)k.Cq * 4);
    k.dw_scale = xalloc((size_t)k.Cq * 4);
    k.pw_bias = xalloc((size_t)k.Oq * 4);
    k.pw_scale = xalloc((size_t)k.Oq * 4);
    for (int c = 0; c < C; c++) {
        k.dw_scale[c] = 127.0f / (3.0f * 32000.0f) * (0.5f + (float)(rnd() % 1000) / 1000.0f);
        k.dw_bias[c] = (float)((int)(rnd() % 20001) - 10000) * 0.37f;
    }
    float sd = sqrtf((float)C) * 40.0f * 73.0f;
    for (int o = 0; o < O; o++) {
        k.pw_scale[o] = 255.0f / (2.0f * sd) * (0.5f + (float)(rnd() % 1000) / 1000.0f);
        k.pw_bias[o] = (float)((int)(rnd() % 20001) - 10000) * 3.1f;
    }
    k.act_scale = 1.0f;

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
    d.dw = conv_prim(d.eng, &xmd, &dwwmd, &dwbmd, &midmd, C, k.dw_scale, C, 1.0f, false, &dww_want);
    d.pw = conv_prim(d.eng, &midmd, &pwwmd, &pwbmd, &ymd, 1, k.pw_scale, O, k.act_scale, true, &pww_want);
    d.dww = mem_from(d.eng, d.stream, &dww_want, &dwwmd, w);
    d.pww = mem_from(d.eng, d.stream, &pww_want, &pwwmd, v);
    CHECK_DNNL(dnnl_memory_create(&d.dwb, &dwbmd, d.eng, k.dw_bias));
    CHECK_DNNL(dnnl_memory_create(&d.pwb, &pwbmd, d.eng, k.pw_bias));
    CHECK_DNNL(dnnl_memory_create(&d.x, &xmd, d.eng, x));
    CHECK_DNNL(dnnl_memory_create(&d.mid, &midmd, d.eng, DNNL_MEMORY_ALLOCATE));
    CHECK_DNNL(dnnl_memory_create(&d.y, &ymd, d.eng, DNNL_MEMORY_ALLOCATE));

    run_ctx c = {&k, &d, x, y_fused, N, H, W, threads};
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
    return 0;
}
