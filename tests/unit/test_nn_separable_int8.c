/* ftl's int8 separable convolution (src/nn/cpu/kernels/separable_int8.c) against the two convolutions
 * written here from their definition, one value at a time: the depthwise 3x3 sum of u8 (or s8) x s8 (zero
 * padding), (sum + bias) x scale saturated to [-128, 127] and rounded to nearest even; the 1x1 sum of
 * those s8 x s8, (sum + bias) x scale, the post-ops in order (ReLU then x its scale; or + the previous
 * value), saturated and rounded for u8 / s8 outputs; with a ReLU6 depthwise its output is u8. Bit for bit, on odd shapes (one pixel, rows
 * shorter than a 12-pixel block, channel and output counts off the vector widths), every output type,
 * 1 and 2 threads; and with the 3x3 stride-2 max pool of the f32 output taken in (each window's max over
 * the pixels inside the image; padded at the start, the end or both). The plan-level comparison (fused against oneDNN's two primitives, and against
 * ONNX Runtime) is in test_nn_separable_plan.c. */
#include "nn/cpu/kernels/separable_int8.h"
#include "test.h"
#include "util/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sep_case {
    int images, height, width, channels, outputs;
    cpu_separable_output output;
    int n_post;
    cpu_separable_post post[2];
    int dw_n_post; /* activations: the depthwise output is then u8 */
    cpu_separable_post dw_post[1];
    bool pool; /* a 3x3 stride-2 max pool of the output with these paddings */
    int pad_top, pad_bottom, pad_left, pad_right;
    bool src_signed; /* the input is s8 (its bytes read as int8_t), else u8 */
    bool stride2;    /* a stride-2 depthwise padded by these (each 0 or 1), else stride 1 padded by 1 */
    int dw_pad_top, dw_pad_bottom, dw_pad_left, dw_pad_right;
} sep_case;

/* The depthwise's output size. */
static int dw_out(const sep_case *c, int size, int pad_begin, int pad_end) {
    return c->stride2 ? (size + pad_begin + pad_end - 3) / 2 + 1 : size;
}

static int pooled_size(int size, int pad_begin, int pad_end) { return (size + pad_begin + pad_end - 3) / 2 + 1; }

static float act(const cpu_separable_post *a, float v) {
    float r = v > a->lo ? v : a->lo; /* max, then min, then the scale */
    r = r < a->hi ? r : a->hi;
    return r * a->scale;
}

static float saturate_round(float v, float lo, float hi) { return nearbyintf(fminf(fmaxf(v, lo), hi)); }

/* The reference: dst as the two convolutions make it (dst holds the summand on entry for a sum). */
static void reference(const sep_case *c, const cpu_separable_int8_desc *d, const uint8_t *x, void *pooled_dst) {
    int C = c->channels, O = c->outputs, IH = c->height, IW = c->width;
    int H = dw_out(c, IH, c->dw_pad_top, c->dw_pad_bottom), W = dw_out(c, IW, c->dw_pad_left, c->dw_pad_right);
    int s = c->stride2 ? 2 : 1, pt = c->stride2 ? c->dw_pad_top : 1, pl = c->stride2 ? c->dw_pad_left : 1;
    int32_t *mid = malloc((size_t)C * sizeof *mid);
    void *dst = c->pool ? malloc((size_t)c->images * H * W * O * sizeof(float)) : pooled_dst;
    for (int n = 0; n < c->images; n++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                for (int ch = 0; ch < C; ch++) {
                    int32_t acc = 0;
                    for (int i = 0; i < 3; i++)
                        for (int j = 0; j < 3; j++) {
                            int hh = s * h - pt + i, ww = s * w - pl + j;
                            if (hh < 0 || hh >= IH || ww < 0 || ww >= IW) continue;
                            uint8_t b = x[(((size_t)n * IH + hh) * IW + ww) * C + ch];
                            acc += (c->src_signed ? (int32_t)(int8_t)b : (int32_t)b) * d->dw_weights[ch * 9 + i * 3 + j];
                        }
                    float v = ((float)acc + d->dw_bias[ch]) * d->dw_scales[ch];
                    for (int k = 0; k < c->dw_n_post; k++) v = act(&c->dw_post[k], v);
                    mid[ch] = c->dw_n_post ? (int32_t)saturate_round(v, 0.0f, 255.0f) : (int32_t)saturate_round(v, -128.0f, 127.0f);
                }
                size_t pixel = ((size_t)n * H + h) * W + w;
                for (int o = 0; o < O; o++) {
                    int32_t acc = 0;
                    for (int ch = 0; ch < C; ch++) acc += (int32_t)mid[ch] * d->pw_weights[(size_t)o * C + ch];
                    float v = ((float)acc + d->pw_bias[o]) * d->pw_scales[o];
                    size_t at = pixel * (size_t)O + (size_t)o;
                    for (int k = 0; k < c->n_post; k++) {
                        if (c->post[k].sum) v = v + ((float *)dst)[at];
                        else v = act(&c->post[k], v);
                    }
                    if (c->output == CPU_SEPARABLE_F32) ((float *)dst)[at] = v;
                    else if (c->output == CPU_SEPARABLE_U8) ((uint8_t *)dst)[at] = (uint8_t)saturate_round(v, 0.0f, 255.0f);
                    else ((int8_t *)dst)[at] = (int8_t)saturate_round(v, -128.0f, 127.0f);
                }
            }
    free(mid);
    if (!c->pool) return;
    int PH = pooled_size(H, c->pad_top, c->pad_bottom), PW = pooled_size(W, c->pad_left, c->pad_right);
    for (int n = 0; n < c->images; n++)
        for (int i = 0; i < PH; i++)
            for (int j = 0; j < PW; j++)
                for (int o = 0; o < O; o++) {
                    bool any = false;
                    float m = 0.0f;
                    for (int h = 2 * i - c->pad_top; h < 2 * i - c->pad_top + 3; h++)
                        for (int w = 2 * j - c->pad_left; w < 2 * j - c->pad_left + 3; w++) {
                            if (h < 0 || h >= H || w < 0 || w >= W) continue;
                            float v = ((float *)dst)[(((size_t)n * H + h) * W + w) * O + o];
                            if (!any || v > m) m = v;
                            any = true;
                        }
                    ((float *)pooled_dst)[(((size_t)n * PH + i) * PW + j) * O + o] = m;
                }
    free(dst);
}

static void run_case(const sep_case *c, int threads, uint64_t seed) {
    int C = c->channels, O = c->outputs;
    size_t pixels = (size_t)c->images * c->height * c->width;
    int OH = dw_out(c, c->height, c->dw_pad_top, c->dw_pad_bottom), OW = dw_out(c, c->width, c->dw_pad_left, c->dw_pad_right);
    int PH = c->pool ? pooled_size(c->height, c->pad_top, c->pad_bottom) : 0,
        PW = c->pool ? pooled_size(c->width, c->pad_left, c->pad_right) : 0;
    size_t out_pixels = c->pool ? (size_t)c->images * PH * PW : (size_t)c->images * OH * OW,
           out_bytes = out_pixels * (size_t)O * (c->output == CPU_SEPARABLE_F32 ? 4 : 1);
    uint8_t *x = malloc(pixels * (size_t)C);
    int8_t *dw = malloc((size_t)C * 9), *pw = malloc((size_t)O * C);
    float *dws = malloc((size_t)C * 4), *dwb = malloc((size_t)C * 4), *pws = malloc((size_t)O * 4), *pwb = malloc((size_t)O * 4);
    uint64_t r = seed;
    for (size_t i = 0; i < pixels * (size_t)C; i++) x[i] = ftl_splitmix64(&r) % 10 < 3 ? 0 : (uint8_t)ftl_splitmix64(&r);
    for (int i = 0; i < C * 9; i++) dw[i] = (int8_t)((int)(ftl_splitmix64(&r) % 255) - 127);
    for (size_t i = 0; i < (size_t)O * C; i++) pw[i] = (int8_t)((int)(ftl_splitmix64(&r) % 255) - 127);
    /* scales that spread the sums over the output range, so saturation and rounding both happen */
    for (int i = 0; i < C; i++) {
        dws[i] = (float)(1.0 / (40000.0 * (0.3 + (double)(ftl_splitmix64(&r) % 1000) / 1000.0)) * 127.0);
        dwb[i] = (float)((int)(ftl_splitmix64(&r) % 20001) - 10000) * 0.37f;
    }
    double spread = sqrt((double)C) * 40.0 * 73.0;
    for (int o = 0; o < O; o++) {
        pws[o] = (float)(255.0 / (2.0 * spread) * (0.3 + (double)(ftl_splitmix64(&r) % 1000) / 1000.0));
        pwb[o] = (float)((int)(ftl_splitmix64(&r) % 20001) - 10000) * 3.1f;
    }
    cpu_separable_int8_desc d = {.channels = C, .outputs = O, .height = c->height, .width = c->width, .dw_weights = dw,
                                 .dw_scales = dws, .dw_bias = dwb, .pw_weights = pw, .pw_scales = pws, .pw_bias = pwb,
                                 .n_post = c->n_post, .output = c->output, .dw_n_post = c->dw_n_post,
                                 .mid_unsigned = c->dw_n_post > 0, .pool_height = PH, .pool_width = PW,
                                 .pool_pad_top = c->pad_top, .pool_pad_left = c->pad_left, .src_signed = c->src_signed,
                                 .stride2 = c->stride2, .dw_pad_top = c->dw_pad_top, .dw_pad_left = c->dw_pad_left,
                                 .out_height = OH, .out_width = OW};
    memcpy(d.post, c->post, sizeof c->post);
    memcpy(d.dw_post, c->dw_post, sizeof c->dw_post);
    uint8_t *want = malloc(out_bytes), *got = malloc(out_bytes);
    for (size_t i = 0; i < out_bytes / 4 && c->output == CPU_SEPARABLE_F32; i++) /* the summand */
        ((float *)want)[i] = (float)((int)(ftl_splitmix64(&r) % 2001) - 1000) * 0.01f;
    memcpy(got, want, out_bytes);
    /* +inf: a pooled value the kernel leaves unwritten, or takes the max with instead of storing at its window's
     * first row, stays +inf (a NaN would not do: the max passes the other operand) */
    for (size_t i = 0; c->pool && i < out_bytes / 4; i++) ((float *)got)[i] = INFINITY;
    cpu_separable_int8 *k = cpu_separable_int8_make(&d);
    if (!CHECK(k != NULL)) return;
    reference(c, &d, x, want);
    cpu_separable_int8_run(k, x, c->images, got, threads);
    size_t differ = 0, first = 0;
    if (c->output == CPU_SEPARABLE_F32) {
        for (size_t i = 0; i < out_bytes / 4; i++)
            if (memcmp((float *)want + i, (float *)got + i, 4) != 0 && differ++ == 0) first = i;
    } else {
        for (size_t i = 0; i < out_bytes; i++)
            if (want[i] != got[i] && differ++ == 0) first = i;
    }
    if (differ)
        ftl_test_fail(__FILE__, __LINE__, "%d x %dx%d, %d -> %d channels, output %d, %d post-ops, pool %d, signed %d, "
                      "stride2 %d, %d threads: %zu of %zu values differ (first at %zu)", c->images, c->height, c->width, C, O,
                      (int)c->output, c->n_post, (int)c->pool, (int)c->src_signed, (int)c->stride2, threads, differ,
                      out_bytes / (c->output == CPU_SEPARABLE_F32 ? 4 : 1), first);
    cpu_separable_int8_free(k);
    free(x), free(dw), free(pw), free(dws), free(dwb), free(pws), free(pwb), free(want), free(got);
}

TEST(nn_separable_int8_equals_the_two_convolutions) {
    if (!cpu_separable_int8_available()) {
        ftl_test_skip("nn_separable_int8_equals_the_two_convolutions",
                      "this CPU lacks AVX-512 VNNI or VBMI, which the kernel needs (ftl runs the two convolutions apart)");
        return;
    }
    const cpu_separable_post relu = {.lo = 0, .hi = INFINITY, .scale = 1.0f}, relu_scaled = {.lo = 0, .hi = INFINITY, .scale = 0.37f},
                             sum = {.sum = true}, relu6 = {.lo = 0, .hi = 6.0f, .scale = 1.0f},
                             dw_relu6 = {.lo = 0, .hi = 1.0f, .scale = 255.0f}; /* clipped, times the u8 output scale */
    const sep_case cases[] = {
        {1, 1, 1, 1, 1, CPU_SEPARABLE_U8, 1, {relu}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {2, 5, 7, 20, 33, CPU_SEPARABLE_U8, 1, {relu_scaled}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {3, 11, 13, 100, 72, CPU_SEPARABLE_S8, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {2, 5, 9, 24, 40, CPU_SEPARABLE_U8, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0}, /* u8 without an activation: negatives clamp to 0 */
        /* activations the u8 fast path must leave to the general one: a negative scale, an upper bound below 0 */
        {1, 4, 6, 20, 24, CPU_SEPARABLE_U8, 1, {{.lo = 0.2f, .hi = 3.0f, .scale = -0.5f}}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {1, 4, 6, 20, 24, CPU_SEPARABLE_U8, 1, {{.lo = 0.0f, .hi = -1.0f, .scale = 1.0f}}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {1, 3, 40, 17, 48, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {2, 9, 4, 64, 31, CPU_SEPARABLE_F32, 1, {relu}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {2, 6, 6, 48, 40, CPU_SEPARABLE_F32, 1, {sum}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {1, 7, 5, 33, 64, CPU_SEPARABLE_F32, 2, {sum, relu}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {1, 7, 5, 33, 64, CPU_SEPARABLE_F32, 2, {relu, sum}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {4, 19, 19, 728, 728, CPU_SEPARABLE_U8, 1, {relu_scaled}, 0, {{0}}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0}, /* Xception's middle flow */
        /* MobileNet's: a ReLU6 depthwise (u8 between them), a linear 1x1, with and without a residual sum */
        {2, 14, 14, 144, 24, CPU_SEPARABLE_F32, 0, {{0}}, 1, {dw_relu6}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {2, 7, 9, 96, 24, CPU_SEPARABLE_F32, 1, {sum}, 1, {dw_relu6}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        {1, 5, 13, 40, 40, CPU_SEPARABLE_U8, 1, {relu6}, 1, {dw_relu6}, false, 0, 0, 0, 0, false, false, 0, 0, 0, 0},
        /* pooled: Xception's entry-flow end (padding 1, odd and even sizes); one image (its pooled rows in
         * bands); rows of 37 (several per chunk); padding at the end only, at the start only (a window of one
         * row), one pixel */
        {2, 13, 10, 20, 33, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, true, 1, 1, 1, 1, false, false, 0, 0, 0, 0},
        {1, 8, 19, 16, 20, CPU_SEPARABLE_F32, 1, {relu}, 0, {{0}}, true, 0, 1, 0, 1, false, false, 0, 0, 0, 0},
        {2, 12, 37, 64, 48, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, true, 1, 1, 1, 1, false, false, 0, 0, 0, 0},
        {1, 15, 9, 24, 17, CPU_SEPARABLE_F32, 1, {relu}, 0, {{0}}, true, 2, 0, 2, 0, false, false, 0, 0, 0, 0},
        {3, 1, 1, 16, 16, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, true, 1, 1, 1, 1, false, false, 0, 0, 0, 0},
        /* an s8 input (Xception's block14, and a residual stream read without a ReLU): every border of the
         * image padded with its zero, odd channel counts, each output type, a ReLU6 depthwise, a pool */
        {1, 1, 1, 1, 1, CPU_SEPARABLE_U8, 1, {relu}, 0, {{0}}, false, 0, 0, 0, 0, true, false, 0, 0, 0, 0},
        {2, 5, 7, 20, 33, CPU_SEPARABLE_U8, 1, {relu_scaled}, 0, {{0}}, false, 0, 0, 0, 0, true, false, 0, 0, 0, 0},
        {3, 11, 13, 100, 72, CPU_SEPARABLE_S8, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, true, false, 0, 0, 0, 0},
        {2, 6, 6, 48, 40, CPU_SEPARABLE_F32, 1, {sum}, 0, {{0}}, false, 0, 0, 0, 0, true, false, 0, 0, 0, 0},
        {2, 7, 9, 96, 24, CPU_SEPARABLE_F32, 1, {sum}, 1, {dw_relu6}, false, 0, 0, 0, 0, true, false, 0, 0, 0, 0},
        {2, 10, 10, 1024, 48, CPU_SEPARABLE_U8, 1, {relu_scaled}, 0, {{0}}, false, 0, 0, 0, 0, true, false, 0, 0, 0, 0},
        {2, 13, 10, 20, 33, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, true, 1, 1, 1, 1, true, false, 0, 0, 0, 0},
        /* a stride-2 depthwise: the MobileNets' SAME padding (0 before, 1 after on even sizes), PyTorch's (1 all
         * round) on odd and even sizes, none, each side alone; a ReLU6 depthwise into a linear 1x1, an s8 input,
         * one pixel out, rows shorter than a block */
        {2, 14, 14, 144, 24, CPU_SEPARABLE_F32, 0, {{0}}, 1, {dw_relu6}, false, 0, 0, 0, 0, false, true, 0, 1, 0, 1},
        {2, 12, 10, 96, 40, CPU_SEPARABLE_U8, 1, {relu6}, 1, {dw_relu6}, false, 0, 0, 0, 0, false, true, 0, 1, 0, 1},
        {3, 11, 13, 100, 72, CPU_SEPARABLE_S8, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, false, true, 1, 1, 1, 1},
        {2, 10, 8, 20, 33, CPU_SEPARABLE_U8, 1, {relu_scaled}, 0, {{0}}, false, 0, 0, 0, 0, false, true, 1, 1, 1, 1},
        {1, 9, 11, 24, 17, CPU_SEPARABLE_F32, 1, {relu}, 0, {{0}}, false, 0, 0, 0, 0, false, true, 0, 0, 0, 0},
        {2, 8, 7, 17, 31, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, true, true, 1, 0, 0, 1},
        {1, 7, 8, 16, 20, CPU_SEPARABLE_U8, 1, {relu}, 0, {{0}}, false, 0, 0, 0, 0, true, true, 0, 1, 1, 0},
        {2, 2, 2, 16, 16, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, false, true, 0, 1, 0, 1},
        {2, 28, 28, 192, 64, CPU_SEPARABLE_F32, 0, {{0}}, 1, {dw_relu6}, false, 0, 0, 0, 0, false, true, 0, 1, 0, 1},
        /* windows that end one short of the image (its last row and column unread): no padding on even sizes,
         * padding before only on odd ones; and an s8 input padded after */
        {2, 10, 12, 20, 33, CPU_SEPARABLE_U8, 1, {relu}, 0, {{0}}, false, 0, 0, 0, 0, false, true, 0, 0, 0, 0},
        {1, 7, 9, 24, 17, CPU_SEPARABLE_F32, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, true, true, 1, 0, 1, 0},
        {2, 8, 8, 17, 31, CPU_SEPARABLE_S8, 0, {{0}}, 0, {{0}}, false, 0, 0, 0, 0, true, true, 0, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int threads = 1; threads <= 2; threads++) run_case(&cases[i], threads, 1000 + i);
}

TEST(nn_separable_int8_refuses_what_it_cannot_do) {
    int8_t w[9] = {0}, v[1] = {0};
    cpu_separable_post sum = {.sum = true};
    float one = 1.0f, zero = 0.0f;
    cpu_separable_int8_desc d = {.channels = 1, .outputs = 1, .height = 1, .width = 1, .dw_weights = w, .dw_scales = &one,
                                 .dw_bias = &zero, .pw_weights = v, .pw_scales = &one, .pw_bias = &zero,
                                 .output = CPU_SEPARABLE_U8, .n_post = 1, .post = {{.sum = true}}};
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a sum into an integer output */
    d.output = CPU_SEPARABLE_F32;
    d.dw_n_post = 1;
    d.dw_post[0] = sum;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a sum into the depthwise output */
    d.dw_n_post = 0;
    d.n_post = CPU_SEPARABLE_MAX_POSTS + 1;
    CHECK(cpu_separable_int8_make(&d) == NULL);
    d.n_post = 0;
    d.channels = 0;
    CHECK(cpu_separable_int8_make(&d) == NULL);
    d.channels = 1;
    d.height = d.width = 5;
    d.pool_height = d.pool_width = 3;
    d.pool_pad_top = d.pool_pad_left = 1;
    cpu_separable_int8 *ok = cpu_separable_int8_make(&d);
    CHECK(ok != NULL); /* 5x5 pooled to 3x3 with padding 1: the one it takes */
    cpu_separable_int8_free(ok);
    d.output = CPU_SEPARABLE_U8;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a pool of an integer output */
    d.output = CPU_SEPARABLE_F32;
    d.n_post = 1;
    d.post[0] = sum;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a pool after a sum */
    d.n_post = 0;
    d.pool_height = 4;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a window (row 5) past the image */
    d.pool_height = 3;
    d.pool_width = 4;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a window (column 5) past the image */
    d.pool_width = 3;
    d.pool_pad_left = 3;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a window (columns -3 to -1) before it */
    d.pool_pad_left = 1;
    d.pool_pad_top = 3;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a window (rows -3 to -1) above it */
    /* stride 2 on the 5x5 image: 2x2 out with padding 0 or 1 before (then the last row and column go
     * unread) is taken; a pool with it, padding 2 before, or an output past the padding after are not */
    d.pool_height = d.pool_width = d.pool_pad_top = d.pool_pad_left = 0;
    d.stride2 = true;
    d.out_height = d.out_width = 2;
    ok = cpu_separable_int8_make(&d);
    CHECK(ok != NULL);
    cpu_separable_int8_free(ok);
    d.dw_pad_top = d.dw_pad_left = 1;
    ok = cpu_separable_int8_make(&d);
    CHECK(ok != NULL);
    cpu_separable_int8_free(ok);
    d.pool_height = d.pool_width = 2;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* a pool after a stride-2 depthwise */
    d.pool_height = d.pool_width = 0;
    d.dw_pad_top = 2;
    CHECK(cpu_separable_int8_make(&d) == NULL);
    d.dw_pad_top = 1;
    d.out_height = 4;
    CHECK(cpu_separable_int8_make(&d) == NULL); /* rows 5 to 7: two past the image */
}
