/* Flip test-time augmentation's arithmetic: the mean of two orientations' class probabilities,
 * carried as logits log(mean p) so every consumer of logits reads the averaged prediction. */
#include "ftl/train.h"
#include "util/alloc.h"
#include "util/error.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

ftl_status ftl_tta_parse(const char *text, bool allow_as_trained, ftl_tta *out) {
    if (text && strcmp(text, "none") == 0) *out = FTL_TTA_NONE;
    else if (text && strcmp(text, "flip") == 0) *out = FTL_TTA_FLIP;
    else if (text && allow_as_trained && strcmp(text, "model") == 0) *out = FTL_TTA_AS_TRAINED;
    else
        return ftl_fail(FTL_E_INVALID_ARG, "--tta %s: ftl's test-time augmentation is flip (the mean of the image's and its "
                        "mirror image's probabilities) or none%s", text ? text : "(nothing)",
                        allow_as_trained ? ", or model (what the model records)" : "");
    return FTL_OK;
}

const char *ftl_tta_name(ftl_tta tta) { return tta == FTL_TTA_FLIP ? "flip" : tta == FTL_TTA_NONE ? "none" : "model"; }

/* Softmax of one row into p (double), max-shifted so nothing overflows. */
static void softmax_row(const float *z, size_t c, double *p) {
    float m = z[0];
    for (size_t j = 1; j < c; j++) m = z[j] > m ? z[j] : m;
    double sum = 0;
    for (size_t j = 0; j < c; j++) sum += (p[j] = exp((double)z[j] - (double)m));
    for (size_t j = 0; j < c; j++) p[j] /= sum;
}

void ftl_tta_mean_logits(const float *za, const float *zb, size_t n, size_t c, float *out) {
    double pa[256], pb[256]; /* one row's probabilities: on the stack up to 256 classes */
    double *a = c <= 256 ? pa : ftl_xmalloc(c * sizeof *a), *b = c <= 256 ? pb : ftl_xmalloc(c * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        softmax_row(za + i * c, c, a);
        softmax_row(zb + i * c, c, b);
        for (size_t j = 0; j < c; j++) {
            double mean = 0.5 * (a[j] + b[j]);
            out[i * c + j] = (float)log(mean > DBL_MIN ? mean : DBL_MIN);
        }
    }
    if (a != pa) free(a), free(b);
}
