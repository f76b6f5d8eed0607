/* The scalar resampling kernels: the reference every SIMD variant matches byte for byte, and the
 * fallback the AVX kernels call for the columns their lanes do not cover. */
#include "image/image_internal.h"

static inline uint8_t clip_fixed(int32_t v) {
    v >>= FTL_RESAMPLE_PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void ftl_hpass_scalar(const uint8_t *in, size_t in_stride, int rows, uint8_t *out,
                      size_t out_stride, const ftl_resample_axis *ax, uint8_t *strip) {
    (void)strip;
    const int ksize = ax->ksize;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = in + (size_t)r * in_stride;
        uint8_t *o = out + (size_t)r * out_stride;
        for (int xx = 0; xx < ax->out_size; xx++) {
            const int32_t *k = ax->coeffs + (size_t)xx * ksize;
            const uint8_t *p = row + (size_t)ax->start[xx] * 3;
            int32_t s0 = 1 << (FTL_RESAMPLE_PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int t = 0; t < ax->count[xx]; t++) {
                s0 += p[3 * t + 0] * k[t];
                s1 += p[3 * t + 1] * k[t];
                s2 += p[3 * t + 2] * k[t];
            }
            o[3 * xx + 0] = clip_fixed(s0);
            o[3 * xx + 1] = clip_fixed(s1);
            o[3 * xx + 2] = clip_fixed(s2);
        }
    }
}

void ftl_vpass_scalar(const uint8_t *in, size_t in_stride, uint8_t *out, size_t out_stride,
                      int bytes, const ftl_resample_axis *ax) {
    const int ksize = ax->ksize;
    int32_t acc[256];
    for (int yy = 0; yy < ax->out_size; yy++) {
        const int32_t *k = ax->coeffs + (size_t)yy * ksize;
        const uint8_t *base = in + (size_t)(ax->start[yy] - ax->first) * in_stride;
        uint8_t *o = out + (size_t)yy * out_stride;
        for (int x0 = 0; x0 < bytes; x0 += 256) {
            int n = bytes - x0 < 256 ? bytes - x0 : 256;
            for (int x = 0; x < n; x++) acc[x] = 1 << (FTL_RESAMPLE_PRECISION_BITS - 1);
            for (int t = 0; t < ax->count[yy]; t++) {
                const uint8_t *p = base + (size_t)t * in_stride + x0;
                int32_t kt = k[t];
                for (int x = 0; x < n; x++) acc[x] += p[x] * kt;
            }
            for (int x = 0; x < n; x++) o[x0 + x] = clip_fixed(acc[x]);
        }
    }
}
