/* Pillow's separable resampling for RGB8 images (ImagingResampleInner): a horizontal pass into an
 * 8-bit intermediate (only the rows the vertical pass reads), then a vertical pass. Pixel sums
 * are exact int32 fixed-point products, so every kernel variant (scalar, AVX2, AVX-512) gives
 * Pillow's bytes exactly; they differ only in how they walk memory. */
#include "image/image_internal.h"
#include "util/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const ftl_resample_kernels kernels_scalar = {"scalar", ftl_hpass_scalar, ftl_vpass_scalar, 0};

const ftl_resample_kernels *ftl_resample_kernels_named(const char *name) {
    if (!strcmp(name, "scalar")) return &kernels_scalar;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!strcmp(name, "avx2") && __builtin_cpu_supports("avx2")) return &ftl_resample_kernels_avx2;
    if (!strcmp(name, "avx512") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw"))
        return &ftl_resample_kernels_avx512;
#endif
    return NULL;
}

static const ftl_resample_kernels *auto_kernels;
static const ftl_resample_kernels *forced_kernels;
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void choose_kernels(void) {
    const char *cap = getenv("FTL_IMAGE_SIMD");
    const char *order[] = {"avx512", "avx2", "scalar"};
    int from = 0;
    for (int i = 0; cap && i < 3; i++)
        if (!strcmp(cap, order[i])) from = i;
    for (int i = from; i < 3 && !auto_kernels; i++) auto_kernels = ftl_resample_kernels_named(order[i]);
}

const ftl_resample_kernels *ftl_resample_kernels_get(void) {
    if (forced_kernels) return forced_kernels;
    pthread_once(&kernels_once, choose_kernels);
    return auto_kernels;
}

void ftl_resample_kernels_force(const ftl_resample_kernels *k) { forced_kernels = k; }

void ftl_resample_scratch_free(ftl_resample_scratch *s) {
    for (int i = 0; i < 4; i++) {
        ftl_resample_axis_free(&s->horiz[i]);
        ftl_resample_axis_free(&s->vert[i]);
    }
    free(s->tmp);
    free(s->strip);
    memset(s, 0, sizeof *s);
}

/* Finds (or computes into the least recently used slot) the table for this axis. */
static ftl_status axis_lookup(ftl_resample_axis cache[4], int in_size, float in0, float in1,
                              int out_size, ftl_image_filter filter, ftl_resample_axis **out) {
    int hit = 3;
    for (int i = 0; i < 4; i++) {
        ftl_resample_axis *a = &cache[i];
        if (a->valid && a->in_size == in_size && a->out_size == out_size && a->in0 == in0 &&
            a->in1 == in1 && a->filter == filter) {
            hit = i;
            break;
        }
    }
    if (hit != 0) { /* move to front */
        ftl_resample_axis t = cache[hit];
        memmove(&cache[1], &cache[0], (size_t)hit * sizeof t);
        cache[0] = t;
    }
    *out = &cache[0];
    return ftl_resample_axis_compute(&cache[0], in_size, in0, in1, out_size, filter);
}

ftl_status ftl_resample_rgb(ftl_resample_scratch *s, const uint8_t *src, int sw, int sh,
                            const float box[4], uint8_t *dst, int dw, int dh,
                            ftl_image_filter filter) {
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "cannot resize %dx%d to %dx%d", sw, sh, dw, dh);
    /* Pillow skips a pass whose axis keeps its size and whole box. */
    bool need_h = dw != sw || box[0] != 0 || box[2] != (float)dw;
    bool need_v = dh != sh || box[1] != 0 || box[3] != (float)dh;
    const size_t src_stride = (size_t)sw * 3, dst_stride = (size_t)dw * 3;
    if (!need_h && !need_v) {
        memcpy(dst, src, dst_stride * (size_t)dh);
        return FTL_OK;
    }
    const ftl_resample_kernels *kern = ftl_resample_kernels_get();
    ftl_resample_axis *hx = NULL, *vy = NULL;
    if (need_h) FTL_TRY(axis_lookup(s->horiz, sw, box[0], box[2], dw, filter, &hx));
    if (need_v) FTL_TRY(axis_lookup(s->vert, sh, box[1], box[3], dh, filter, &vy));

    if (need_h && kern->strip_rows > 0) {
        /* The SIMD horizontal pass transposes strip_rows rows of the source at a time. */
        /* input strip + output strip (16 bytes per column each) + bounce rows, 64-aligned */
        size_t in_cols = (size_t)(hx->last - hx->first) * 3, out_cols = (size_t)dw * 3;
        size_t need = (size_t)kern->strip_rows * (in_cols + 2 * out_cols) + 4 * 64 + 64;
        FTL_TRY(ftl_image_grow(&s->strip, &s->strip_cap, need));
    }
    if (need_h && !need_v) {
        kern->hpass(src, src_stride, sh, dst, dst_stride, hx, s->strip);
        return FTL_OK;
    }
    if (!need_h) {
        kern->vpass(src + (size_t)vy->first * src_stride, src_stride, dst, dst_stride,
                    (int)dst_stride, vy);
        return FTL_OK;
    }
    /* Only the rows the vertical pass reads go through the horizontal pass (as in Pillow). */
    int rows = vy->last - vy->first;
    size_t tmp_need = dst_stride * (size_t)rows;
    FTL_TRY(ftl_image_grow(&s->tmp, &s->tmp_cap, tmp_need));
    kern->hpass(src + (size_t)vy->first * src_stride, src_stride, rows, s->tmp, dst_stride, hx,
                s->strip);
    kern->vpass(s->tmp, dst_stride, dst, dst_stride, (int)dst_stride, vy);
    return FTL_OK;
}
