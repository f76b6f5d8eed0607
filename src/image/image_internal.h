/* Internal pieces of the image module: decoders, Pillow-exact resampling kernels, scratch state. */
#ifndef FTL_IMAGE_INTERNAL_H
#define FTL_IMAGE_INTERNAL_H

#include "ftl/image.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Pillow's fixed point: 22 fractional bits, so 8-bit pixel * coefficient sums fit an int32
 * with headroom for the filters' negative lobes (Resample.c PRECISION_BITS = 32 - 8 - 2). */
#define FTL_RESAMPLE_PRECISION_BITS 22

/* ---- Coefficients of one axis (Resample.c precompute_coeffs + normalize_coeffs_8bpc) ---- */

typedef struct ftl_resample_axis {
    /* What the table was computed for (the cache key). */
    int in_size, out_size;
    float in0, in1;
    ftl_image_filter filter;
    bool valid;
    /* The table: output i reads `count[i]` inputs from `start[i]` with weights coeffs[i*ksize..]. */
    int ksize;
    int *start, *count;
    int32_t *coeffs;
    size_t cap_out, cap_coeffs;
    /* The span of inputs any output reads: [first, last). */
    int first, last;
} ftl_resample_axis;

/* Fills `a` unless it already holds this table (reuse across same-sized images). in0/in1 is the
 * source box along the axis in float, as Pillow passes it to ImagingResample. */
ftl_status ftl_resample_axis_compute(ftl_resample_axis *a, int in_size, float in0, float in1,
                                     int out_size, ftl_image_filter filter);
void ftl_resample_axis_free(ftl_resample_axis *a);

/* ---- Resampling with reusable scratch ---------------------------------------------------- */

typedef struct ftl_resample_scratch {
    ftl_resample_axis horiz[4], vert[4]; /* small caches, most recently used first */
    uint8_t *tmp;                        /* horizontal pass output */
    size_t tmp_cap;
    uint8_t *strip;                      /* transposed input strip (SIMD horizontal pass) */
    size_t strip_cap;
} ftl_resample_scratch;

void ftl_resample_scratch_free(ftl_resample_scratch *s);

/* ImagingResample(src, (dw, dh), filter, box) for 3-channel 8-bit images; box = {x0, y0, x1, y1}
 * in source pixels (floats, as Pillow keeps them). dst must hold dw*dh*3 bytes. */
ftl_status ftl_resample_rgb(ftl_resample_scratch *s, const uint8_t *src, int sw, int sh,
                            const float box[4], uint8_t *dst, int dw, int dh,
                            ftl_image_filter filter);

/* Pillow's Image.reduce((fx, fy)): box averages with its rounding; output is
 * ceil(sw/fx) x ceil(sh/fy). */
void ftl_reduce_rgb(const uint8_t *src, int sw, int sh, int fx, int fy, uint8_t *dst);

/* ---- Kernels (scalar here, SIMD variants chosen at run time) ------------------------------ */

/* Horizontal pass over `rows` rows of 3-channel pixels: out row r = filter(in row r). */
typedef void (*ftl_hpass_fn)(const uint8_t *in, size_t in_stride, int rows, uint8_t *out,
                             size_t out_stride, const ftl_resample_axis *ax, uint8_t *strip);
/* Vertical pass: out row i = sum_t coeffs[i][t] * in row (start[i] + t), over `bytes` bytes. */
typedef void (*ftl_vpass_fn)(const uint8_t *in, size_t in_stride, uint8_t *out,
                             size_t out_stride, int bytes, const ftl_resample_axis *ax);

void ftl_hpass_scalar(const uint8_t *in, size_t in_stride, int rows, uint8_t *out,
                      size_t out_stride, const ftl_resample_axis *ax, uint8_t *strip);
void ftl_vpass_scalar(const uint8_t *in, size_t in_stride, uint8_t *out, size_t out_stride,
                      int bytes, const ftl_resample_axis *ax);

typedef struct ftl_resample_kernels {
    const char *name;    /* "avx512", "avx2", "scalar" */
    ftl_hpass_fn hpass;
    ftl_vpass_fn vpass;
    int strip_rows;      /* rows the horizontal pass transposes at once (0: no strip) */
} ftl_resample_kernels;

/* The fastest kernels this CPU runs (FTL_IMAGE_SIMD=scalar|avx2|avx512 caps the choice). */
const ftl_resample_kernels *ftl_resample_kernels_get(void);
/* Kernels by name, NULL when this CPU or build lacks them (tests compare all variants). */
const ftl_resample_kernels *ftl_resample_kernels_named(const char *name);
/* For tests: force a kernel set (NULL restores the automatic choice). */
void ftl_resample_kernels_force(const ftl_resample_kernels *k);

#if defined(__x86_64__) || defined(__i386__)
extern const ftl_resample_kernels ftl_resample_kernels_avx2;
extern const ftl_resample_kernels ftl_resample_kernels_avx512;
#endif

/* ---- Decoders ---------------------------------------------------------------------------- */

typedef struct ftl_image_decoder {
    void *tj;              /* TurboJPEG handle, created on first use */
    uint8_t *scratch;      /* CMYK samples, PNG rows */
    size_t scratch_cap;
    char warning[160];     /* the decoder's first recoverable complaint of the last call */
} ftl_image_decoder;

void ftl_image_decoder_free(ftl_image_decoder *d);

/* Reads only the header: format and stored size. */
ftl_status ftl_image_decoder_probe(ftl_image_decoder *d, const uint8_t *data, size_t size,
                                   ftl_image_format *format, int *width, int *height);
/* Decodes to RGB as Pillow's open().convert('RGB'). dct_scale 1, 2, 4 or 8 decodes a JPEG at
 * 1/dct_scale in the DCT domain (ignored for PNG). */
ftl_status ftl_image_decoder_run(ftl_image_decoder *d, const uint8_t *data, size_t size,
                                 int dct_scale, ftl_image *out, ftl_image_format *format);

/* One image format's decoder. The decoders register here (ftl_image_codecs in image.c lists them)
 * and image.c picks one by the sniffed format, so it never names a decoder's functions. */
typedef struct ftl_image_codec {
    ftl_image_format format;
    ftl_status (*probe)(ftl_image_decoder *d, const uint8_t *data, size_t size, int *w, int *h);
    /* dct_scale is a hint a codec may ignore (only JPEG decodes at a reduced scale). */
    ftl_status (*decode)(ftl_image_decoder *d, const uint8_t *data, size_t size, int dct_scale,
                         ftl_image *out);
} ftl_image_codec;

extern const ftl_image_codec ftl_image_codec_jpeg;
extern const ftl_image_codec ftl_image_codec_png;

/* Grows a scratch buffer (contents not kept). */
ftl_status ftl_image_grow(uint8_t **buf, size_t *cap, size_t need);

/* ---- The thumbnail plan (Image.thumbnail + Image.resize with reducing_gap=2.0) ------------ */

typedef struct ftl_thumb_plan {
    int width, height;  /* thumbnail size */
    bool resize;        /* false: the image fits (or already has that size): copy */
    int reduce_x, reduce_y;
    float box[4];       /* Lanczos source box in reduced coordinates */
} ftl_thumb_plan;

void ftl_thumb_plan_make(int src_w, int src_h, int size, ftl_thumb_plan *plan);

#endif
