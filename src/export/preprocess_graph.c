/* Exact preprocessing as ONNX ops (see preprocess_graph.h).
 *
 * Pillow's 8-bit resize computes out = clip(floor((sum_k c_k p_k + 2^21) / 2^22), 0, 255) with
 * integer weights c_k (22 fractional bits). Those sums need 30 bits, more than float32 holds, so
 * each weight is split as c = h * 2^11 + l (h, l < 2^11 + 1): both matrix products are sums of
 * integers below 2^24, exact in float32 whatever the summation order (and in TF32, whose 11-bit
 * significand holds h and l). Then, with A = S_l + 2^21,
 *   floor((S_h 2^11 + A) / 2^22) = floor((S_h + floor(A / 2^11)) / 2^11),
 * every step exact. */
#include "export/preprocess_graph.h"
#include "image/image_internal.h"
#include "nn/preprocess.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

enum { SPLIT_BITS = 11 };
#define EXACT_LIMIT 16777216.0 /* 2^24: float32 integers are exact below it */

/* Transposes `x` from layout `*cur` (4 letters of n,c,y,x) to `want`. */
static const char *to_layout(onnx_builder *b, const char *x, char cur[5], const char *want) {
    if (strcmp(cur, want) == 0) return x;
    int64_t perm[4];
    for (int i = 0; i < 4; i++) perm[i] = strchr(cur, want[i]) - cur;
    const char *y = ob_fresh_name(b, "transpose");
    Onnx__NodeProto *n = ob_node(b, "Transpose", &x, 1, &y, 1);
    ob_attr_ints(b, n, "perm", perm, 4);
    memcpy(cur, want, 5);
    return y;
}

/* One resize pass along the last axis of `x` (in -> out pixels), exact as above. */
static ftl_status axis_pass(onnx_builder *b, const char *x, int in, int out, const char *axis, const char **result) {
    ftl_resample_axis a = {0};
    FTL_TRY(ftl_resample_axis_compute(&a, in, 0.0f, (float)in, out, FTL_IMAGE_FILTER_BILINEAR));
    float *wh = ftl_xcalloc((size_t)in * (size_t)out, sizeof *wh), *wl = ftl_xcalloc((size_t)in * (size_t)out, sizeof *wl);
    ftl_status st = FTL_OK;
    for (int o = 0; o < out && st == FTL_OK; o++) {
        double high = 0, low = 0;
        for (int t = 0; t < a.count[o]; t++) {
            int32_t c = a.coeffs[(size_t)o * (size_t)a.ksize + (size_t)t];
            if (c < 0) {
                st = ftl_fail(FTL_E_INTERNAL, "a negative bilinear weight");
                break;
            }
            size_t i = (size_t)(a.start[o] + t);
            wh[i * (size_t)out + (size_t)o] = (float)(c >> SPLIT_BITS);
            wl[i * (size_t)out + (size_t)o] = (float)(c & ((1 << SPLIT_BITS) - 1));
            high += 255.0 * (c >> SPLIT_BITS);
            low += 255.0 * (c & ((1 << SPLIT_BITS) - 1));
        }
        low += 1 << (FTL_RESAMPLE_PRECISION_BITS - 1);
        if (st == FTL_OK && (low >= EXACT_LIMIT || high + low / (1 << SPLIT_BITS) >= EXACT_LIMIT))
            st = ftl_fail(FTL_E_UNSUPPORTED, "resizing %d -> %d pixels reads too many inputs per output to be exact in "
                          "float32 (prep the dataset closer to the backbone's size)", in, out);
    }
    ftl_resample_axis_free(&a);
    if (st == FTL_OK) {
        char stem[64];
        int64_t dims[2] = {in, out};
        snprintf(stem, sizeof stem, "resize_%s_high", axis);
        const char *mh = ob_const_f32(b, stem, dims, 2, wh);
        snprintf(stem, sizeof stem, "resize_%s_low", axis);
        const char *ml = ob_const_f32(b, stem, dims, 2, wl);
        const char *sh = ob_op(b, "MatMul", "resize_sum_high", (const char *[]){x, mh}, 2);
        const char *sl = ob_op(b, "MatMul", "resize_sum_low", (const char *[]){x, ml}, 2);
        const char *half = ob_scalar_f32(b, "resize_half", (float)(1 << (FTL_RESAMPLE_PRECISION_BITS - 1)));
        const char *step = ob_scalar_f32(b, "resize_step", 1.0f / (1 << SPLIT_BITS));
        const char *a1 = ob_op(b, "Add", "resize_low_rounded", (const char *[]){sl, half}, 2);
        const char *a2 = ob_op(b, "Mul", "resize_low_scaled", (const char *[]){a1, step}, 2);
        const char *a3 = ob_op(b, "Floor", "resize_carry", (const char *[]){a2}, 1);
        const char *s1 = ob_op(b, "Add", "resize_sum", (const char *[]){sh, a3}, 2);
        const char *s2 = ob_op(b, "Mul", "resize_scaled", (const char *[]){s1, step}, 2);
        const char *s3 = ob_op(b, "Floor", "resize_rounded", (const char *[]){s2}, 1);
        const char *lo = ob_scalar_f32(b, "pixel_min", 0.0f), *hi = ob_scalar_f32(b, "pixel_max", 255.0f);
        *result = ob_op(b, "Clip", "resize_pixels", (const char *[]){s3, lo, hi}, 3);
    }
    free(wh);
    free(wl);
    return st;
}

static const char *cast(onnx_builder *b, const char *x, int to, const char *stem) {
    const char *y = ob_fresh_name(b, stem);
    Onnx__NodeProto *n = ob_node(b, "Cast", &x, 1, &y, 1);
    ob_attr_int(b, n, "to", to);
    return y;
}

ftl_status preprocess_graph_build(onnx_builder *b, const preprocess_graph_spec *spec, const char *images,
                                  const char *target, bool *resized) {
    const int s = spec->image_size;
    /* Pillow skips a pass whose axis keeps its size (the box is always the whole image) */
    bool need_h = spec->width != s, need_v = spec->height != s;
    *resized = need_h || need_v;
    char cur[5] = "nyxc";
    const char *x = images;
    if (*resized) {
        x = cast(b, x, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "pixels_float");
        if (need_h) { /* horizontal first, as Pillow */
            x = to_layout(b, x, cur, "nycx");
            FTL_TRY(axis_pass(b, x, s, spec->width, "x", &x));
        }
        if (need_v) {
            x = to_layout(b, x, cur, "ncxy");
            FTL_TRY(axis_pass(b, x, s, spec->height, "y", &x));
        }
    }
    x = cast(b, x, ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "pixel_index");
    x = to_layout(b, x, cur, spec->channels_last ? "nyxc" : "ncyx");

    /* the recorded scaling as one lookup table: index = 256 * channel + pixel */
    float table[3][256];
    nn_preprocess_table(spec->preprocess, table);
    int64_t table_dims[1] = {768};
    const char *lut = ob_const_f32(b, "scaling_table", table_dims, 1, &table[0][0]);
    int32_t offsets[3] = {0, 256, 512};
    int64_t off_nchw[4] = {1, 3, 1, 1}, off_nhwc[1] = {3};
    const char *off = ob_const(b, "channel_offset", ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
                               spec->channels_last ? off_nhwc : off_nchw, spec->channels_last ? 1 : 4, offsets,
                               sizeof offsets);
    const char *idx = ob_op(b, "Add", "table_index", (const char *[]){x, off}, 2);
    Onnx__NodeProto *g = ob_node(b, "Gather", (const char *[]){lut, idx}, 2, &target, 1);
    ob_attr_int(b, g, "axis", 0);
    return FTL_OK;
}
