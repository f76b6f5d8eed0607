/* Input preprocessing: scaling presets, parsing from the command line, and
 * the per-image conversion uint8 HWC -> float model input. */
#include "nn/preprocess.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float torch_mean[3] = {0.485f, 0.456f, 0.406f}, torch_std[3] = {0.229f, 0.224f, 0.225f};

ftl_status ftl_nn_preprocess_init(ftl_nn_preprocess *p, ftl_nn_scale scale) {
    memset(p, 0, sizeof *p);
    p->scale = scale;
    p->resize = FTL_NN_RESIZE_BILINEAR;
    for (int c = 0; c < 3; c++) {
        p->mean[c] = scale == FTL_NN_SCALE_TORCH ? torch_mean[c] : 0.5f;
        p->std[c] = scale == FTL_NN_SCALE_TORCH ? torch_std[c] : 0.5f;
    }
    if (scale != FTL_NN_SCALE_TF && scale != FTL_NN_SCALE_TORCH && scale != FTL_NN_SCALE_CUSTOM)
        return ftl_fail(FTL_E_INVALID_ARG, "unknown input scale %d", (int)scale);
    return FTL_OK;
}

const char *ftl_nn_scale_name(ftl_nn_scale scale) {
    return scale == FTL_NN_SCALE_TF ? "tf" : scale == FTL_NN_SCALE_TORCH ? "torch" : "custom";
}

static ftl_status parse_triple(const char *what, const char *text, float out[3]) {
    float v[3];
    int n = 0;
    const char *s = text;
    while (n < 3) {
        errno = 0;
        char *end;
        double x = strtod(s, &end);
        if (end == s || errno || !isfinite(x)) break;
        v[n++] = (float)x;
        while (*end == ' ') end++;
        if (*end == 0) {
            s = end;
            break;
        }
        if (*end != ',') {
            s = end;
            n = -1;
            break;
        }
        s = end + 1;
    }
    if ((n != 1 && n != 3) || *s)
        return ftl_fail(FTL_E_INVALID_ARG, "--%s '%s': expected one number or three comma-separated numbers (R,G,B)", what, text);
    for (int c = 0; c < 3; c++) out[c] = n == 1 ? v[0] : v[c];
    return FTL_OK;
}

ftl_status ftl_nn_preprocess_parse(ftl_nn_preprocess *p, const char *scale, const char *mean, const char *std) {
    if (scale) {
        if (strcmp(scale, "tf") == 0) FTL_TRY(ftl_nn_preprocess_init(p, FTL_NN_SCALE_TF));
        else if (strcmp(scale, "torch") == 0) FTL_TRY(ftl_nn_preprocess_init(p, FTL_NN_SCALE_TORCH));
        else return ftl_fail(FTL_E_INVALID_ARG, "--input-scale '%s': expected tf (x/127.5-1) or torch (ImageNet mean/std)", scale);
    }
    if (mean) {
        FTL_TRY(parse_triple("mean", mean, p->mean));
        p->scale = FTL_NN_SCALE_CUSTOM;
    }
    if (std) {
        FTL_TRY(parse_triple("std", std, p->std));
        for (int c = 0; c < 3; c++)
            if (!(p->std[c] > 0)) return ftl_fail(FTL_E_INVALID_ARG, "--std '%s': values must be > 0", std);
        p->scale = FTL_NN_SCALE_CUSTOM;
    }
    return FTL_OK;
}

void nn_preprocess_table(const ftl_nn_preprocess *p, float table[3][256]) {
    for (int c = 0; c < 3; c++)
        for (int q = 0; q < 256; q++) {
            if (p->scale == FTL_NN_SCALE_TF) table[c][q] = (float)(q / 127.5 - 1.0); /* exactly Keras' formula */
            else table[c][q] = (float)((q / 255.0 - (double)p->mean[c]) / (double)p->std[c]);
        }
}

void nn_preprocess_image(const float table[3][256], const uint8_t *hwc, int h, int w, bool channels_last, float *dst) {
    size_t plane = (size_t)h * w;
    if (channels_last) {
        for (size_t i = 0; i < plane * 3; i++) dst[i] = table[i % 3][hwc[i]];
        return;
    }
    float *r = dst, *g = dst + plane, *b = dst + 2 * plane;
    for (size_t i = 0; i < plane; i++) {
        r[i] = table[0][hwc[3 * i]];
        g[i] = table[1][hwc[3 * i + 1]];
        b[i] = table[2][hwc[3 * i + 2]];
    }
}
