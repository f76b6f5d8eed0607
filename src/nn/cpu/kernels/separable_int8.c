/* ftl's int8 separable convolution (see separable_int8.h). Tiles of whole 12-pixel blocks over the
 * flattened images (rows cut anywhere), sized so that a tile's depthwise output (~32 KiB) stays in L1:
 *   depthwise, by VNNI: each input column's three rows (16-channel chunks) go into one zmm, a byte
 *     permute makes each channel's lane (top, middle, bottom, 0), and that vector serves the three
 *     outputs reading the column: three vpdpbusd per 16 outputs. An s8 result is kept as u8 (+128).
 *   1x1, by VNNI: 12 pixels x 32 outputs in 24 named accumulators (GCC spills an array of them), two
 *     weight vectors per 12 broadcasts, the 128 x sum-of-weights compensation taken off after.
 * bench/nn/dw_pw_int8.c measures it against oneDNN's two primitives on Xception's shapes: bit-exact,
 * about as fast alone; in the whole model it saves the depthwise output's round trip through memory.
 * With a pool (desc.pool_height > 0) the tiles are whole rows instead: per image and band of pooled rows,
 * chunks of 1x1 rows into a buffer that stays in L2, each row then max-pooled into its pooled rows.
 * Built with -fopenmp. */
#include "nn/cpu/kernels/separable_int8.h"
#include "util/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_SEPARABLE_INT8 1
#define SEP_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
#endif

enum { PX = 12, SLAB = 32, TILE_BYTES = 32 << 10 };

/* The 1x1's epilogue, chosen once per kernel: the cases Xception and the MobileNets are made of get
 * code without the general loop over post-ops and output types, which at 64-256 channels costs as much
 * as the products themselves. */
typedef enum epilogue_kind {
    EPILOGUE_ANY,
    EPILOGUE_U8_ACTIVATED, /* u8 out after one activation that is never negative (ReLU, ReLU6) */
    EPILOGUE_F32,          /* f32 out, no post-ops */
    EPILOGUE_F32_ACTIVATED, /* f32 out after one activation */
    EPILOGUE_F32_SUM,      /* f32 out, the summand added */
} epilogue_kind;

/* EPILOGUE_U8_ACTIVATED needs the activation's result finite or +inf and never negative: bounds of at
 * least 0 (the lower one finite) and a finite scale of at least 0 (no 0 x inf, no NaN). */
static epilogue_kind epilogue_for(const cpu_separable_int8_desc *d) {
    const cpu_separable_post *a = &d->post[0];
    if (d->output == CPU_SEPARABLE_U8 && d->n_post == 1 && !a->sum && isfinite(a->lo) && a->lo >= 0.0f &&
        a->hi >= 0.0f && isfinite(a->scale) && a->scale >= 0.0f)
        return EPILOGUE_U8_ACTIVATED;
    if (d->output == CPU_SEPARABLE_F32 && d->n_post == 0) return EPILOGUE_F32;
    if (d->output == CPU_SEPARABLE_F32 && d->n_post == 1) return a->sum ? EPILOGUE_F32_SUM : EPILOGUE_F32_ACTIVATED;
    return EPILOGUE_ANY;
}

/* A pool the kernel takes: an f32 output without a sum, every window holding a pixel of the image. */
static bool pool_fits(const cpu_separable_int8_desc *d) {
    if (d->output != CPU_SEPARABLE_F32 || d->pool_width < 1) return false;
    for (int i = 0; i < d->n_post; i++)
        if (d->post[i].sum) return false;
    return d->pool_pad_top >= 0 && d->pool_pad_top <= 2 && d->pool_pad_left >= 0 && d->pool_pad_left <= 2 &&
           2 * (d->pool_height - 1) - d->pool_pad_top <= d->height - 1 &&
           2 * (d->pool_width - 1) - d->pool_pad_left <= d->width - 1;
}

/* Rows of the 1x1 per chunk of the pooled path, which keeps whole rows: enough pixels that the last
 * 12-pixel block wastes little (Xception's 147, 74, 37 and 19-pixel rows would waste 6-23% one by one),
 * the fewest that do. */
static int pool_chunk_rows(int height, int width) {
    int best = 1;
    double best_waste = 1.0;
    for (int r = 1; r <= height && (r == 1 || r * width <= 192); r++) {
        int pixels = r * width, blocks = (pixels + PX - 1) / PX;
        double waste = (double)(blocks * PX - pixels) / (blocks * PX);
        if (pixels >= 96 && waste <= 1.0 / 24) return r;
        if (waste < best_waste - 1e-9) {
            best = r;
            best_waste = waste;
        }
    }
    return best;
}

struct cpu_separable_int8 {
    cpu_separable_int8_desc d;
    int cq, oq;              /* channels rounded up to 16, outputs to a slab */
    int8_t *dw_w;            /* [3 tap columns][cq][4]: the column's (top, middle, bottom, 0) */
    int32_t *dw_comp;        /* [cq]: 128 x the sum of the channel's 9 weights (an s8 input's +128), or 0 */
    float *dw_bias, *dw_scale;  /* [cq], zeros past the channels */
    int8_t *pw_w;            /* [oq / SLAB][cq / 4][SLAB][4] */
    int32_t *pw_comp;        /* [oq]: 128 x the sum of the output's weights (an s8 input's +128), or 0 */
    float *pw_bias, *pw_scale;  /* [oq] */
    epilogue_kind epilogue;
    int pool_rows;           /* the pooled path's rows of the 1x1 per chunk (pool_chunk_rows) */
};

bool cpu_separable_int8_wanted(void) {
    const char *e = getenv("FTL_NN_SEPARABLE_INT8");
    return !(e && strcmp(e, "0") == 0) && cpu_separable_int8_available();
}

bool cpu_separable_stride2_wanted(void) {
    const char *e = getenv("FTL_NN_SEPARABLE_STRIDE2");
    return e && strcmp(e, "1") == 0 && cpu_separable_int8_wanted();
}

bool cpu_separable_pool_wanted(void) {
    const char *e = getenv("FTL_NN_SEPARABLE_POOL");
    return !(e && strcmp(e, "0") == 0) && cpu_separable_int8_wanted();
}

bool cpu_separable_int8_available(void) {
#ifdef HAVE_SEPARABLE_INT8
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx512vbmi");
#else
    return false;
#endif
}

void cpu_separable_int8_free(cpu_separable_int8 *k) {
    if (!k) return;
    free(k->dw_w);
    free(k->dw_comp);
    free(k->dw_bias);
    free(k->dw_scale);
    free(k->pw_w);
    free(k->pw_comp);
    free(k->pw_bias);
    free(k->pw_scale);
    free(k);
}

cpu_separable_int8 *cpu_separable_int8_make(const cpu_separable_int8_desc *d) {
    if (d->channels < 1 || d->outputs < 1 || d->height < 1 || d->width < 1 || d->n_post < 0 ||
        d->n_post > CPU_SEPARABLE_MAX_POSTS)
        return NULL;
    if (d->dw_n_post < 0 || d->dw_n_post > CPU_SEPARABLE_MAX_POSTS) return NULL;
    for (int i = 0; i < d->n_post; i++)
        if (d->post[i].sum && d->output != CPU_SEPARABLE_F32) return NULL;
    for (int i = 0; i < d->dw_n_post; i++)
        if (d->dw_post[i].sum) return NULL;
    if (d->pool_height > 0 && (d->stride2 || !pool_fits(d))) return NULL;
    if (d->stride2) { /* windows pad at most 1 before and after the image; the last may also end one short of
                       * it (-1: the last row or column unread, as floor sizes leave on even inputs) */
        int pad_bottom = 2 * (d->out_height - 1) + 3 - d->dw_pad_top - d->height,
            pad_right = 2 * (d->out_width - 1) + 3 - d->dw_pad_left - d->width;
        if (d->dw_pad_top < 0 || d->dw_pad_top > 1 || d->dw_pad_left < 0 || d->dw_pad_left > 1 || d->out_height < 1 ||
            d->out_width < 1 || pad_bottom < -1 || pad_bottom > 1 || pad_right < -1 || pad_right > 1)
            return NULL;
    }
    cpu_separable_int8 *k = ftl_xcalloc(1, sizeof *k);
    k->d = *d;
    int C = d->channels, O = d->outputs;
    k->cq = (C + 15) / 16 * 16;
    k->oq = (O + SLAB - 1) / SLAB * SLAB;
    k->dw_w = ftl_xcalloc((size_t)3 * (size_t)k->cq * 4, 1);
    for (int j = 0; j < 3; j++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < 3; i++) k->dw_w[((size_t)j * (size_t)k->cq + (size_t)c) * 4 + (size_t)i] = d->dw_weights[c * 9 + i * 3 + j];
    k->dw_comp = ftl_xcalloc((size_t)k->cq * sizeof(int32_t), 1);
    for (int c = 0; c < C && d->src_signed; c++)
        for (int i = 0; i < 9; i++) k->dw_comp[c] += 128 * d->dw_weights[c * 9 + i];
    k->dw_bias = ftl_xcalloc((size_t)k->cq * sizeof(float), 1);
    k->dw_scale = ftl_xcalloc((size_t)k->cq * sizeof(float), 1);
    memcpy(k->dw_bias, d->dw_bias, (size_t)C * sizeof(float));
    memcpy(k->dw_scale, d->dw_scales, (size_t)C * sizeof(float));
    k->pw_w = ftl_xcalloc((size_t)k->oq * (size_t)k->cq, 1);
    size_t at = 0;
    for (int o0 = 0; o0 < k->oq; o0 += SLAB)
        for (int c4 = 0; c4 < k->cq / 4; c4++)
            for (int o = o0; o < o0 + SLAB; o++)
                for (int b = 0; b < 4; b++) {
                    int c = c4 * 4 + b;
                    k->pw_w[at++] = o < O && c < C ? d->pw_weights[(size_t)o * (size_t)C + (size_t)c] : 0;
                }
    k->pw_comp = ftl_xcalloc((size_t)k->oq * sizeof(int32_t), 1);
    for (int o = 0; o < O; o++) {
        int32_t s = 0;
        for (int c = 0; c < C; c++) s += d->pw_weights[(size_t)o * (size_t)C + (size_t)c];
        k->pw_comp[o] = d->mid_unsigned ? 0 : 128 * s;
    }
    k->pw_bias = ftl_xcalloc((size_t)k->oq * sizeof(float), 1);
    k->pw_scale = ftl_xcalloc((size_t)k->oq * sizeof(float), 1);
    memcpy(k->pw_bias, d->pw_bias, (size_t)O * sizeof(float));
    memcpy(k->pw_scale, d->pw_scales, (size_t)O * sizeof(float));
    k->epilogue = epilogue_for(d);
    k->pool_rows = d->pool_height > 0 ? pool_chunk_rows(d->height, d->width) : 0;
    if (!d->stride2) { /* the kept desc spells out stride 1's geometry too */
        k->d.dw_pad_top = k->d.dw_pad_left = 1;
        k->d.out_height = d->height;
        k->d.out_width = d->width;
    }
    k->d.dw_weights = NULL; /* the caller's arrays: not kept */
    k->d.dw_scales = k->d.dw_bias = k->d.pw_scales = k->d.pw_bias = NULL;
    k->d.pw_weights = NULL;
    return k;
}

#ifdef HAVE_SEPARABLE_INT8
/* A post-op's constants as vectors (sum: none), made once per block, not per value. */
typedef struct post_vectors {
    bool sum;
    __m512 lo, hi, scale;
} post_vectors;

SEP_TARGET static inline void post_vectors_make(const cpu_separable_post *a, int n, post_vectors *v) {
    for (int i = 0; i < n; i++)
        v[i] = (post_vectors){.sum = a[i].sum, .lo = _mm512_set1_ps(a[i].lo), .hi = _mm512_set1_ps(a[i].hi),
                              .scale = _mm512_set1_ps(a[i].scale)};
}

/* An activation post-op as oneDNN's eltwise clip / ReLU with a scale: max, then min, then the scale. */
SEP_TARGET static inline __m512 activate(const post_vectors *a, __m512 f) {
    return _mm512_mul_ps(_mm512_min_ps(_mm512_max_ps(f, a->lo), a->hi), a->scale);
}

/* The 1x1's sum as oneDNN scales it: (acc - compensation + bias) x scale, in that order. */
SEP_TARGET static inline __m512 requantize(__m512i acc, __m512i comp, __m512 bias, __m512 scale) {
    return _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, comp)), bias), scale);
}

/* The depthwise output of image x's output row h, pixels [w0, w0 + n), into mid (u8 = s8 + 128, cq each). An
 * s8 input (src_signed) is read as u8 = s8 + 128, the padding as 128 (its zero), and 128 x the weights' sum
 * taken off: the same exact sums. At stride 1 each output shares two input columns with the next, at
 * stride 2 one. Inlined per case, so the common one carries none of the others. */
SEP_TARGET static inline __attribute__((always_inline)) void depthwise_segment_of(const cpu_separable_int8 *k,
                                                                                 const uint8_t *x, int h, int w0, int n,
                                                                                 uint8_t *mid, const bool src_signed,
                                                                                 const int stride) {
    const int C = k->d.channels, H = k->d.height, W = k->d.width, blocks = k->cq / 16;
    /* byte 4c + i of the permuted vector: chunk i's channel c (i < 3), chunk 3 (zeros) for i = 3 */
    static const uint8_t order[64] = {
        0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51, 4, 20, 36, 52, 5, 21, 37, 53, 6, 22, 38, 54, 7, 23, 39, 55,
        8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};
    const __m512i idx = _mm512_loadu_si512(order);
    const __m128i flip = _mm_set1_epi8(k->d.mid_unsigned ? 0 : (char)0x80);
    const __m128i in_flip = _mm_set1_epi8((char)0x80);               /* s8 -> u8, and a padded row */
    const __m512i pad = src_signed ? _mm512_set1_epi8((char)0x80) : _mm512_setzero_si512(); /* a padded column */
    const __m512 u8_lo = _mm512_setzero_ps(), s8_hi = _mm512_set1_ps(127.0f);
    const size_t row = (size_t)W * (size_t)C, cq = (size_t)k->cq;
    const int n_post = k->d.dw_n_post;
    const bool mid_unsigned = k->d.mid_unsigned;
    post_vectors post[CPU_SEPARABLE_MAX_POSTS];
    post_vectors_make(k->d.dw_post, n_post, post);
    const int top = stride * h - k->d.dw_pad_top; /* the window's first input row, >= -1 */
    const uint8_t *up = top >= 0 ? x + (size_t)top * row : NULL, *mi = top + 1 < H ? x + (size_t)(top + 1) * row : NULL,
                  *dn = top + 2 < H ? x + (size_t)(top + 2) * row : NULL;
    for (int b = 0; b < blocks; b++) {
        int c0 = b * 16;
        __mmask16 live = C - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c0)) - 1);
        const __m512i t0 = _mm512_loadu_si512(k->dw_w + (size_t)c0 * 4),
                      t1 = _mm512_loadu_si512(k->dw_w + ((size_t)k->cq + (size_t)c0) * 4),
                      t2 = _mm512_loadu_si512(k->dw_w + ((size_t)2 * (size_t)k->cq + (size_t)c0) * 4);
        const __m512 bias = _mm512_loadu_ps(k->dw_bias + c0), scale = _mm512_loadu_ps(k->dw_scale + c0);
        const __m512i start = src_signed ? _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(k->dw_comp + c0))
                                         : _mm512_setzero_si512();
#define LOAD_ROW(r, w) (src_signed ? ((r) ? _mm_xor_si128(_mm_maskz_loadu_epi8(live, (r) + (size_t)(w) * C + c0), in_flip) \
                                          : in_flip)                                                                 \
                                   : ((r) ? _mm_maskz_loadu_epi8(live, (r) + (size_t)(w) * C + c0) : _mm_setzero_si128()))
#define COLUMN(w)                                                                                                     \
    _mm512_permutexvar_epi8(                                                                                          \
        idx, _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(LOAD_ROW(up, w)), LOAD_ROW(mi, w), 1),    \
                                LOAD_ROW(dn, w), 2))
        int col = stride * w0 - k->d.dw_pad_left; /* the window's first input column, >= -1 */
        __m512i left = pad, centre = pad;
        if (col >= 0) left = COLUMN(col);
        if (col + 1 < W) centre = COLUMN(col + 1);
        for (int w = w0; w < w0 + n; w++, col += stride) {
            __m512i right = pad;
            if (col + 2 < W) right = COLUMN(col + 2);
            __m512i acc = _mm512_dpbusd_epi32(start, left, t0);
            acc = _mm512_dpbusd_epi32(acc, centre, t1);
            acc = _mm512_dpbusd_epi32(acc, right, t2);
            __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(acc), bias), scale);
            for (int i = 0; i < n_post; i++) f = activate(&post[i], f);
            /* oneDNN saturates to the type's range before converting (a NaN: to its lower bound); the
             * saturating conversions do the rest: an s8's value below -2^31 or NaN (min_ps passes its second
             * operand's NaN) converts to 0x80000000 -> -128, a u8's above 2^31 to 0x80000000 -> 255, and a
             * u8's NaN became 0 in the max (its first operand's NaN gives the second) */
            __m128i q = mid_unsigned ? _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(_mm512_max_ps(f, u8_lo)))
                                     : _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(s8_hi, f)));
            _mm_storeu_si128((__m128i *)(mid + (size_t)(w - w0) * cq + (size_t)c0), _mm_xor_si128(q, flip));
            if (stride == 1) {
                left = centre;
                centre = right;
            } else {
                left = right;
                centre = pad;
                if (w + 1 < w0 + n && col + 3 < W) centre = COLUMN(col + 3);
            }
        }
#undef COLUMN
#undef LOAD_ROW
    }
}

SEP_TARGET static void depthwise_segment(const cpu_separable_int8 *k, const uint8_t *x, int h, int w0, int n,
                                         uint8_t *mid) {
    if (k->d.stride2) depthwise_segment_of(k, x, h, w0, n, mid, k->d.src_signed, 2);
    else if (k->d.src_signed) depthwise_segment_of(k, x, h, w0, n, mid, true, 1);
    else depthwise_segment_of(k, x, h, w0, n, mid, false, 1);
}

/* EPILOGUE_U8_ACTIVATED: the activation leaves no negative value, so the unsigned saturating
 * conversion does oneDNN's saturation (a value past 2^31 converts to 0x80000000, which saturates to 255;
 * a NaN became the activation's lower bound in the max). */
SEP_TARGET static inline void finish_u8_activated(const cpu_separable_int8 *k, const __m512i *acc, int pixels, int o,
                                                  __mmask16 live, uint8_t *dst, size_t first) {
    const bool full = live == (__mmask16)0xffff;
    const size_t outputs = (size_t)k->d.outputs;
    post_vectors a;
    post_vectors_make(k->d.post, 1, &a);
    const __m512i comp = _mm512_loadu_si512(k->pw_comp + o);
    const __m512 bias = _mm512_loadu_ps(k->pw_bias + o), scale = _mm512_loadu_ps(k->pw_scale + o);
    uint8_t *y = dst + first * outputs + (size_t)o;
    for (int i = 0; i < pixels; i++, y += outputs) {
        __m512 f = activate(&a, requantize(acc[2 * i], comp, bias, scale));
        __m128i q = _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(f));
        if (full) _mm_storeu_si128((__m128i *)y, q);
        else _mm_mask_storeu_epi8(y, live, q);
    }
}

/* EPILOGUE_F32, EPILOGUE_F32_ACTIVATED and EPILOGUE_F32_SUM. */
SEP_TARGET static inline void finish_f32(const cpu_separable_int8 *k, const __m512i *acc, int pixels, int o,
                                         __mmask16 live, float *dst, size_t first, bool activated, bool sum) {
    const bool full = live == (__mmask16)0xffff;
    const size_t outputs = (size_t)k->d.outputs;
    const __m512i comp = _mm512_loadu_si512(k->pw_comp + o);
    const __m512 bias = _mm512_loadu_ps(k->pw_bias + o), scale = _mm512_loadu_ps(k->pw_scale + o);
    post_vectors a;
    post_vectors_make(k->d.post, activated, &a);
    float *y = dst + first * outputs + (size_t)o;
    for (int i = 0; i < pixels; i++, y += outputs) {
        __m512 f = requantize(acc[2 * i], comp, bias, scale);
        if (activated) f = activate(&a, f);
        if (sum) f = _mm512_add_ps(f, full ? _mm512_loadu_ps(y) : _mm512_maskz_loadu_ps(live, y));
        if (full) _mm512_storeu_ps(y, f);
        else _mm512_mask_storeu_ps(y, live, f);
    }
}

/* Requantization, the post-ops in order and the store of `pixels` pixels' vectors of 16 outputs from o.
 * Full vectors take plain loads and stores (AVX-512 masked stores are slow on AMD's cores). */
SEP_TARGET static inline void finish_any(const cpu_separable_int8 *k, const __m512i *acc, int pixels, int o,
                                         __mmask16 live, void *dst, size_t first) {
    const bool full = live == (__mmask16)0xffff;
    const int n_post = k->d.n_post, outputs = k->d.outputs;
    const cpu_separable_output type = k->d.output;
    post_vectors post[CPU_SEPARABLE_MAX_POSTS];
    post_vectors_make(k->d.post, n_post, post);
    const __m512i comp = _mm512_loadu_si512(k->pw_comp + o);
    const __m512 bias = _mm512_loadu_ps(k->pw_bias + o), scale = _mm512_loadu_ps(k->pw_scale + o);
    const __m512 lo = _mm512_set1_ps(type == CPU_SEPARABLE_S8 ? -128.0f : 0.0f),
                 hi = _mm512_set1_ps(type == CPU_SEPARABLE_S8 ? 127.0f : 255.0f);
    for (int i = 0; i < pixels; i++) {
        size_t at = (first + (size_t)i) * (size_t)outputs + (size_t)o;
        __m512 f = requantize(acc[2 * i], comp, bias, scale);
        for (int p = 0; p < n_post; p++) {
            if (post[p].sum)
                f = _mm512_add_ps(f, full ? _mm512_loadu_ps((const float *)dst + at)
                                          : _mm512_maskz_loadu_ps(live, (const float *)dst + at));
            else f = activate(&post[p], f);
        }
        if (type == CPU_SEPARABLE_F32) {
            if (full) _mm512_storeu_ps((float *)dst + at, f);
            else _mm512_mask_storeu_ps((float *)dst + at, live, f);
            continue;
        }
        f = _mm512_min_ps(_mm512_max_ps(f, lo), hi); /* saturate before converting, as oneDNN does */
        __m128i q = type == CPU_SEPARABLE_U8 ? _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(f))
                                             : _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(f));
        if (full) _mm_storeu_si128((__m128i *)((uint8_t *)dst + at), q);
        else _mm_mask_storeu_epi8((uint8_t *)dst + at, live, q);
    }
}

#define ROW_DECL(i) __m512i a##i##0 = zero, a##i##1 = zero
#define ROW_STEP(i)                                                                                                   \
    do {                                                                                                              \
        __m512i b = _mm512_set1_epi32(*(const int32_t *)(m + (size_t)(i) * cq));                                    \
        a##i##0 = _mm512_dpbusd_epi32(a##i##0, b, w0);                                                               \
        a##i##1 = _mm512_dpbusd_epi32(a##i##1, b, w1);                                                               \
    } while (0)
#define ROW_SAVE(i)                                                                                                   \
    do {                                                                                                              \
        acc[i][0] = a##i##0;                                                                                          \
        acc[i][1] = a##i##1;                                                                                          \
    } while (0)

/* PX pixels of mid x the SLAB outputs from o0; writes the first `pixels` (from dst pixel `first`). */
SEP_TARGET static void pointwise_block(const cpu_separable_int8 *k, const uint8_t *mid, const int8_t *wslab, int o0,
                                       int pixels, void *dst, size_t first) {
    const size_t cq = (size_t)k->cq;
    const __m512i zero = _mm512_setzero_si512();
    ROW_DECL(0); ROW_DECL(1); ROW_DECL(2); ROW_DECL(3); ROW_DECL(4); ROW_DECL(5);
    ROW_DECL(6); ROW_DECL(7); ROW_DECL(8); ROW_DECL(9); ROW_DECL(10); ROW_DECL(11);
    const uint8_t *m = mid;
    const int8_t *wp = wslab;
    for (size_t c4 = 0; c4 < cq / 4; c4++, m += 4, wp += 4 * SLAB) {
        __m512i w0 = _mm512_loadu_si512(wp), w1 = _mm512_loadu_si512(wp + 64);
        ROW_STEP(0); ROW_STEP(1); ROW_STEP(2); ROW_STEP(3); ROW_STEP(4); ROW_STEP(5);
        ROW_STEP(6); ROW_STEP(7); ROW_STEP(8); ROW_STEP(9); ROW_STEP(10); ROW_STEP(11);
    }
    __m512i acc[PX][2];
    ROW_SAVE(0); ROW_SAVE(1); ROW_SAVE(2); ROW_SAVE(3); ROW_SAVE(4); ROW_SAVE(5);
    ROW_SAVE(6); ROW_SAVE(7); ROW_SAVE(8); ROW_SAVE(9); ROW_SAVE(10); ROW_SAVE(11);
    const int O = k->d.outputs;
    for (int j = 0; j < SLAB / 16; j++) {
        int o = o0 + j * 16;
        if (o >= O) break;
        __mmask16 live = O - o >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (O - o)) - 1);
        switch (k->epilogue) {
        case EPILOGUE_U8_ACTIVATED: finish_u8_activated(k, &acc[0][j], pixels, o, live, dst, first); break;
        case EPILOGUE_F32: finish_f32(k, &acc[0][j], pixels, o, live, dst, first, false, false); break;
        case EPILOGUE_F32_ACTIVATED: finish_f32(k, &acc[0][j], pixels, o, live, dst, first, true, false); break;
        case EPILOGUE_F32_SUM: finish_f32(k, &acc[0][j], pixels, o, live, dst, first, false, true); break;
        case EPILOGUE_ANY: finish_any(k, &acc[0][j], pixels, o, live, dst, first); break;
        }
    }
}

/* The 1x1 over `pixels` pixels of mid into dst from pixel `first`: whole output rows per 12-pixel block
 * (the weights from L2), each block's outputs written out whole, which measured faster in Xception than
 * keeping one slab of weights in L1 over the tile. */
SEP_TARGET static void pointwise_pixels(const cpu_separable_int8 *k, const uint8_t *mid, int pixels, void *dst,
                                        size_t first) {
    for (int p = 0; p < pixels; p += PX)
        for (int o0 = 0; o0 < k->oq; o0 += SLAB)
            pointwise_block(k, mid + (size_t)p * (size_t)k->cq, k->pw_w + (size_t)o0 * (size_t)k->cq, o0,
                            pixels - p < PX ? pixels - p : PX, dst, first + (size_t)p);
}

/* Pixels [p0, p1) of the flattened images: their depthwise output into mid, then per 12-pixel block every
 * slab of the 1x1 over it. */
SEP_TARGET static void run_tile(const cpu_separable_int8 *k, const uint8_t *src, long p0, long p1, uint8_t *mid,
                                void *dst) {
    const int H = k->d.out_height, W = k->d.out_width;
    const long image = (long)H * W;
    const size_t image_in = (size_t)k->d.height * (size_t)k->d.width * (size_t)k->d.channels;
    for (long p = p0; p < p1;) {
        int n = (int)(p / image), h = (int)(p / W % H), w = (int)(p % W);
        int len = (long)(W - w) < p1 - p ? W - w : (int)(p1 - p);
        depthwise_segment(k, src + (size_t)n * image_in, h, w, len, mid + (size_t)(p - p0) * (size_t)k->cq);
        p += len;
    }
    pointwise_pixels(k, mid, (int)(p1 - p0), dst, (size_t)p0);
}

/* Row r of the 1x1's output (row: width x outputs f32) into the pooled rows of [oh0, oh1) whose windows
 * hold it: each pooled pixel's max over the window's columns, then over its rows (the window's first row
 * stores, the others take the max with what is there). */
SEP_TARGET static void pool_row(const cpu_separable_int8 *k, const float *row, int r, int oh0, int oh1, float *dst) {
    const int O = k->d.outputs, W = k->d.width, PW = k->d.pool_width, pt = k->d.pool_pad_top, pl = k->d.pool_pad_left;
    int lo = r + pt - 2, first = lo <= 0 ? 0 : (lo + 1) / 2, last = (r + pt) / 2;
    if (first < oh0) first = oh0;
    if (last > oh1 - 1) last = oh1 - 1;
    if (first > last) return;
    const size_t out_row = (size_t)PW * (size_t)O;
    float *a = dst + (size_t)first * out_row, *b = last > first ? a + out_row : NULL;
    int top_a = 2 * first - pt, top_b = top_a + 2;
    const bool store_a = r == (top_a > 0 ? top_a : 0), store_b = r == (top_b > 0 ? top_b : 0);
    const bool full = O % 16 == 0;
#define LOAD(p) (full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(live, p))
#define STORE(p, v) (full ? _mm512_storeu_ps(p, v) : _mm512_mask_storeu_ps(p, live, v))
    for (int j = 0; j < PW; j++) {
        int c0 = 2 * j - pl, ca = c0 > 0 ? c0 : 0, cb = c0 + 2 < W - 1 ? c0 + 2 : W - 1;
        for (int o = 0; o < O; o += 16) {
            __mmask16 live = O - o >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (O - o)) - 1);
            __m512 m = LOAD(row + (size_t)ca * (size_t)O + (size_t)o);
            for (int c = ca + 1; c <= cb; c++) m = _mm512_max_ps(m, LOAD(row + (size_t)c * (size_t)O + (size_t)o));
            size_t at = (size_t)j * (size_t)O + (size_t)o;
            STORE(a + at, store_a ? m : _mm512_max_ps(LOAD(a + at), m));
            if (b) STORE(b + at, store_b ? m : _mm512_max_ps(LOAD(b + at), m));
        }
    }
#undef LOAD
#undef STORE
}

/* The pooled path: per image and band of pooled rows [oh0, oh1), the 1x1's rows their windows cover, a
 * chunk of whole rows at a time (depthwise, 1x1 into `rows`, then each row into the pooled rows). */
SEP_TARGET static void run_pooled_band(const cpu_separable_int8 *k, const uint8_t *x, int oh0, int oh1, uint8_t *mid,
                                       float *rows, float *dst) {
    const int H = k->d.height, W = k->d.width, O = k->d.outputs, pt = k->d.pool_pad_top;
    int ra = 2 * oh0 - pt, rb = 2 * (oh1 - 1) - pt + 3;
    if (ra < 0) ra = 0;
    if (rb > H) rb = H;
    for (int r = ra; r < rb; r += k->pool_rows) {
        int n = rb - r < k->pool_rows ? rb - r : k->pool_rows, pixels = n * W;
        for (int i = 0; i < n; i++) depthwise_segment(k, x, r + i, 0, W, mid + (size_t)i * (size_t)W * (size_t)k->cq);
        pointwise_pixels(k, mid, pixels, rows, 0);
        for (int i = 0; i < n; i++) pool_row(k, rows + (size_t)i * (size_t)W * (size_t)O, r + i, oh0, oh1, dst);
    }
}

static void run_pooled(const cpu_separable_int8 *k, const uint8_t *src, int images, float *dst, int threads) {
    const int PH = k->d.pool_height;
    /* bands enough for every thread to have two items; each band recomputes the row it shares with the
     * band above */
    int bands = images >= 2 * threads ? 1 : (2 * threads + images - 1) / images;
    if (bands > PH) bands = PH;
    int band = (PH + bands - 1) / bands;
    bands = (PH + band - 1) / band;
    long items = (long)images * bands;
    int team = threads > 1 && items > 1 ? (items < threads ? (int)items : threads) : 1;
    const size_t image_in = (size_t)k->d.height * (size_t)k->d.width * (size_t)k->d.channels,
                 image_out = (size_t)PH * (size_t)k->d.pool_width * (size_t)k->d.outputs,
                 chunk = (size_t)k->pool_rows * (size_t)k->d.width;
#pragma omp parallel num_threads(team)
    {
        /* a chunk plus the last block's overrun (computed, not stored) */
        uint8_t *mid = ftl_xcalloc((chunk + PX) * (size_t)k->cq, 1);
        float *rows = ftl_xcalloc(chunk * (size_t)k->d.outputs, sizeof *rows);
#pragma omp for schedule(static)
        for (long t = 0; t < items; t++) {
            int n = (int)(t / bands), oh0 = (int)(t % bands) * band, oh1 = oh0 + band < PH ? oh0 + band : PH;
            run_pooled_band(k, src + (size_t)n * image_in, oh0, oh1, mid, rows, dst + (size_t)n * image_out);
        }
        free(mid);
        free(rows);
    }
}
#endif

void cpu_separable_int8_run(const cpu_separable_int8 *k, const uint8_t *src, int images, void *dst, int threads) {
#ifdef HAVE_SEPARABLE_INT8
    if (k->d.pool_height > 0) {
        run_pooled(k, src, images, dst, threads);
        return;
    }
    int per_tile = TILE_BYTES / k->cq / PX * PX;
    if (per_tile < PX) per_tile = PX;
    long total = (long)images * k->d.out_height * k->d.out_width, tiles = (total + per_tile - 1) / per_tile;
    int team = threads > 1 && tiles > 1 ? (tiles < threads ? (int)tiles : threads) : 1;
#pragma omp parallel num_threads(team)
    {
        /* a whole tile plus the last block's overrun (its rows past the tile are computed, not stored) */
        uint8_t *mid = ftl_xcalloc(((size_t)per_tile + PX) * (size_t)k->cq, 1);
#pragma omp for schedule(static)
        for (long t = 0; t < tiles; t++) {
            long p0 = t * per_tile, p1 = p0 + per_tile < total ? p0 + per_tile : total;
            run_tile(k, src, p0, p1, mid, dst);
        }
        free(mid);
    }
#else
    (void)k, (void)src, (void)images, (void)dst, (void)threads;
#endif
}
