/* Pillow-compatible BILINEAR resize (see resize.h): the same coefficient construction and
 * fixed-point rounding, so results match Pillow byte for byte. */
#include "nn/resize.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PRECISION_BITS = 32 - 8 - 2 };

static double triangle(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Per output pixel: first input index, tap count, and ksize fixed-point weights. */
static int coeffs(int in_size, int out_size, int **bounds_out, int32_t **weights_out) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = ftl_xmalloc((size_t)out_size * 2 * sizeof *bounds);
    int32_t *w = ftl_xcalloc((size_t)out_size * (size_t)ksize, sizeof *w);
    double *k = ftl_xmalloc((size_t)ksize * sizeof *k);
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            k[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? k[x] / ww : k[x];
            w[(size_t)xx * ksize + x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *weights_out = w;
    return ksize;
}

static uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

ftl_status nn_resize_bilinear_rgb(const uint8_t *src, int src_w, int src_h, uint8_t *dst, int dst_w, int dst_h) {
    if (src_w < 1 || src_h < 1 || dst_w < 1 || dst_h < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "resize: bad size %dx%d -> %dx%d", src_w, src_h, dst_w, dst_h);
    int *bh, *bv;
    int32_t *kh, *kv;
    int ksh = coeffs(src_w, dst_w, &bh, &kh), ksv = coeffs(src_h, dst_h, &bv, &kv);
    /* horizontal pass over the rows the vertical pass reads */
    int y_first = bv[0], y_last = bv[2 * (dst_h - 1)] + bv[2 * (dst_h - 1) + 1];
    int rows = y_last - y_first;
    bool need_h = dst_w != src_w, need_v = dst_h != src_h;
    uint8_t *tmp = NULL;
    const uint8_t *mid = src;
    int mid_first = 0;
    if (need_h) {
        tmp = ftl_xmalloc((size_t)rows * dst_w * 3);
        for (int y = 0; y < rows; y++) {
            const uint8_t *in = src + (size_t)(y + y_first) * src_w * 3;
            uint8_t *out = tmp + (size_t)y * dst_w * 3;
            for (int x = 0; x < dst_w; x++) {
                const int32_t *k = kh + (size_t)x * ksh;
                int xmin = bh[2 * x], n = bh[2 * x + 1];
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < n; i++) {
                    const uint8_t *px = in + (size_t)(xmin + i) * 3;
                    s0 += px[0] * k[i];
                    s1 += px[1] * k[i];
                    s2 += px[2] * k[i];
                }
                out[3 * x] = clip8(s0);
                out[3 * x + 1] = clip8(s1);
                out[3 * x + 2] = clip8(s2);
            }
        }
        mid = tmp;
        mid_first = y_first;
    }
    int mid_w = need_h ? dst_w : src_w;
    if (need_v) {
        for (int y = 0; y < dst_h; y++) {
            const int32_t *k = kv + (size_t)y * ksv;
            int ymin = bv[2 * y] - mid_first, n = bv[2 * y + 1];
            for (int x = 0; x < mid_w; x++) {
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < n; i++) {
                    const uint8_t *px = mid + ((size_t)(ymin + i) * mid_w + x) * 3;
                    s0 += px[0] * k[i];
                    s1 += px[1] * k[i];
                    s2 += px[2] * k[i];
                }
                uint8_t *out = dst + ((size_t)y * dst_w + x) * 3;
                out[0] = clip8(s0);
                out[1] = clip8(s1);
                out[2] = clip8(s2);
            }
        }
    } else {
        memcpy(dst, mid + (size_t)(0) * mid_w * 3, (size_t)dst_h * dst_w * 3);
    }
    free(tmp);
    free(bh);
    free(bv);
    free(kh);
    free(kv);
    return FTL_OK;
}
