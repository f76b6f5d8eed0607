/* Per-axis resampling coefficients, computed exactly as Pillow 9.4's Resample.c does
 * (precompute_coeffs + normalize_coeffs_8bpc), so the fixed-point results match bit for bit.
 * Every floating-point step keeps Pillow's types and order: the box edges are floats, the rest
 * doubles; no fused multiply-add (it would change the rounding of `center`). */
#pragma GCC optimize("fp-contract=off")

#include "image/image_internal.h"
#include "util/error.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static double filter_box(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

static double filter_bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_hamming(double x) {
    if (x < 0.0) x = -x;
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x = x * M_PI;
    /* Pillow writes the window constants as floats. */
    return sin(x) / x * (0.54f + 0.46f * cos(x));
}

static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double filter_lanczos(double x) {
    if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
    return 0.0;
}

typedef struct filter_def {
    double (*fn)(double);
    double support;
} filter_def;

static const filter_def filters[] = {
    [FTL_IMAGE_FILTER_BOX] = {filter_box, 0.5},
    [FTL_IMAGE_FILTER_BILINEAR] = {filter_bilinear, 1.0},
    [FTL_IMAGE_FILTER_HAMMING] = {filter_hamming, 1.0},
    [FTL_IMAGE_FILTER_BICUBIC] = {filter_bicubic, 2.0},
    [FTL_IMAGE_FILTER_LANCZOS] = {filter_lanczos, 3.0},
};

void ftl_resample_axis_free(ftl_resample_axis *a) {
    free(a->start);
    free(a->count);
    free(a->coeffs);
    memset(a, 0, sizeof *a);
}

ftl_status ftl_resample_axis_compute(ftl_resample_axis *a, int in_size, float in0, float in1,
                                     int out_size, ftl_image_filter filter) {
    if (a->valid && a->in_size == in_size && a->out_size == out_size && a->in0 == in0 &&
        a->in1 == in1 && a->filter == filter)
        return FTL_OK;
    if ((unsigned)filter > FTL_IMAGE_FILTER_LANCZOS)
        return ftl_fail(FTL_E_INVALID_ARG, "unknown resampling filter %d", (int)filter);
    if (in_size < 1 || out_size < 1 || !(in0 >= 0) || !(in1 <= (float)in_size) || !(in1 > in0))
        return ftl_fail(FTL_E_INVALID_ARG, "bad resampling box [%g, %g) for %d -> %d pixels",
                        (double)in0, (double)in1, in_size, out_size);
    const filter_def *f = &filters[filter];

    double scale = (double)(in1 - in0) / out_size; /* float subtraction, as Pillow */
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    if ((size_t)out_size > (size_t)INT_MAX / (size_t)ksize)
        return ftl_fail(FTL_E_INVALID_ARG, "resampling %d -> %d pixels needs too many weights",
                        in_size, out_size);

    a->valid = false;
    size_t nco = (size_t)out_size * (size_t)ksize;
    if (a->cap_out < (size_t)out_size) {
        int *s = realloc(a->start, (size_t)out_size * sizeof *s);
        if (s) a->start = s;
        int *c = realloc(a->count, (size_t)out_size * sizeof *c);
        if (c) a->count = c;
        if (!s || !c) return ftl_fail(FTL_E_NOMEM, "out of memory for resampling weights");
        a->cap_out = (size_t)out_size;
    }
    if (a->cap_coeffs < nco) {
        int32_t *k = realloc(a->coeffs, nco * sizeof *k);
        if (!k) return ftl_fail(FTL_E_NOMEM, "out of memory for resampling weights");
        a->coeffs = k;
        a->cap_coeffs = nco;
    }

    /* Raw weights of one output; the heap only for extreme reductions (ksize > 1024). */
    double wstack[1024];
    double *w = wstack;
    if (ksize > 1024 && !(w = malloc((size_t)ksize * sizeof *w)))
        return ftl_fail(FTL_E_NOMEM, "out of memory for resampling weights");
    double ss = 1.0 / filterscale;
    int first = in_size, last = 0;
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        if (xmax < 0) xmax = 0;
        if (xmax > ksize) xmax = ksize; /* cannot happen; keeps the table in bounds */
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            w[x] = f->fn((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = a->coeffs + (size_t)xx * ksize;
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            double fixed = v * (1 << FTL_RESAMPLE_PRECISION_BITS);
            k[x] = (int32_t)(v < 0 ? -0.5 + fixed : 0.5 + fixed);
        }
        for (int x = xmax; x < ksize; x++) k[x] = 0;
        a->start[xx] = xmin;
        a->count[xx] = xmax;
        if (xmax > 0) {
            if (xmin < first) first = xmin;
            if (xmin + xmax > last) last = xmin + xmax;
        }
    }
    if (w != wstack) free(w);
    if (first > last) first = last = 0;
    a->in_size = in_size;
    a->out_size = out_size;
    a->in0 = in0;
    a->in1 = in1;
    a->filter = filter;
    a->ksize = ksize;
    a->first = first;
    a->last = last;
    a->valid = true;
    return FTL_OK;
}
