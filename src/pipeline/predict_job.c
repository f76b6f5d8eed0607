/* `ftl predict MODEL.ftl IMAGE...`: the dataset recipe, the backbone and the head on each file. */
#include "ftl/image.h"
#include "ftl/pipeline.h"
#include "pipeline/classifier_backbone.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <string.h>

void ftl_predict_options_init(ftl_predict_options *o) {
    memset(o, 0, sizeof *o);
    o->top_k = 5;
}

struct ftl_predictor {
    classifier_backbone cb;
    ftl_image_prepper *prepper;
    uint8_t *canvas;
    float *features, *probs, *logits;
    int feature_rows; /* rows features holds */
    int top_k;
    bool tta;         /* flip TTA: each batch runs with its mirror images appended */
    uint8_t *pair;    /* [2 x count] images: the batch, then mirrored */
    size_t pair_bytes;
};

ftl_status ftl_predictor_open(const ftl_predict_options *o, ftl_predictor **out) {
    *out = NULL;
    if (o->top_k < 1 || o->top_k > 16) return ftl_fail(FTL_E_INVALID_ARG, "--top %d must be 1..16", o->top_k);
    ftl_predictor *p = ftl_xcalloc(1, sizeof *p);
    ftl_status st = classifier_backbone_open(&p->cb, o->model_path, o->backbone_path, 1, o->threads, o->device);
    if (st == FTL_OK) st = ftl_image_prepper_init(&p->prepper, p->cb.input_size);
    if (st != FTL_OK) {
        ftl_predictor_close(p);
        return st;
    }
    size_t s = (size_t)p->cb.input_size;
    p->canvas = ftl_xmalloc(s * s * 3);
    p->features = ftl_xmalloc((size_t)p->cb.clf.head.dim * sizeof(float));
    p->feature_rows = 1;
    p->probs = ftl_xmalloc((size_t)p->cb.clf.head.classes * sizeof(float));
    p->logits = ftl_xmalloc((size_t)p->cb.clf.head.classes * sizeof(float));
    p->top_k = o->top_k < p->cb.clf.head.classes ? o->top_k : (int)p->cb.clf.head.classes;
    const char *recorded = ftl_classifier_metadata(&p->cb.clf, FTL_MODEL_META_TTA);
    p->tta = o->tta == FTL_TTA_FLIP || (o->tta == FTL_TTA_AS_TRAINED && recorded && strcmp(recorded, "flip") == 0);
    *out = p;
    return FTL_OK;
}

/* Backbone and head on count images; features in p->features (grown as needed). With flip TTA the
 * mirror images go through the backbone in the same pass, their features after the batch's. */
static ftl_status predict_batch(ftl_predictor *p, const uint8_t *images_hwc, int count, int image_size, float *probs,
                                float *logits) {
    if (count < 0 || image_size < 1) return ftl_fail(FTL_E_INVALID_ARG, "%d images of %d x %d pixels", count, image_size, image_size);
    if (count == 0) return FTL_OK;
    int rows = p->tta ? 2 * count : count;
    if (rows > p->feature_rows) {
        free(p->features);
        p->features = ftl_xmalloc((size_t)rows * (size_t)p->cb.clf.head.dim * sizeof(float));
        p->feature_rows = rows;
    }
    const uint8_t *images = images_hwc;
    if (p->tta) {
        size_t bytes = (size_t)count * (size_t)image_size * (size_t)image_size * 3;
        if (2 * bytes > p->pair_bytes) {
            free(p->pair);
            p->pair = ftl_xmalloc(2 * bytes);
            p->pair_bytes = 2 * bytes;
        }
        memcpy(p->pair, images_hwc, bytes);
        ftl_image_flip_horizontal(images_hwc, p->pair + bytes, count, image_size);
        images = p->pair;
    }
    FTL_TRY(ftl_model_extract_features(p->cb.backbone, &p->cb.preprocess, images, rows, image_size, p->features));
    if (p->tta)
        return ftl_head_predict_tta(&p->cb.clf.head, p->features, p->features + (size_t)count * (size_t)p->cb.clf.head.dim,
                                    (size_t)count, probs, logits);
    return ftl_head_predict(&p->cb.clf.head, p->features, (size_t)count, probs, logits);
}

ftl_status ftl_predictor_predict(ftl_predictor *p, const uint8_t *images_hwc, int count, int image_size, float *probs) {
    return predict_batch(p, images_hwc, count, image_size, probs, NULL);
}

int64_t ftl_predictor_class_count(const ftl_predictor *p) { return p->cb.clf.head.classes; }
const char *ftl_predictor_class_name(const ftl_predictor *p, int64_t index) {
    return index >= 0 && index < p->cb.clf.head.classes ? p->cb.clf.class_names[index] : NULL;
}
int ftl_predictor_input_size(const ftl_predictor *p) { return p->cb.input_size; }
bool ftl_predictor_tta_flip(const ftl_predictor *p) { return p->tta; }

ftl_status ftl_predictor_run_file(ftl_predictor *p, const char *image_path, ftl_prediction *out) {
    memset(out, 0, sizeof *out);
    uint8_t *data;
    size_t size;
    FTL_TRY(ftl_read_file(image_path, &data, &size));
    ftl_image_info info;
    ftl_status st = ftl_image_prepper_run(p->prepper, data, size, p->canvas, &info);
    free(data);
    if (st != FTL_OK) return ftl_fail_context(st, "%s", image_path);
    FTL_TRY(predict_batch(p, p->canvas, 1, p->cb.input_size, p->probs, p->logits));
    int64_t c = p->cb.clf.head.classes;
    bool *taken = ftl_xcalloc((size_t)c, sizeof *taken);
    for (int r = 0; r < p->top_k; r++) {
        int64_t best = -1;
        for (int64_t k = 0; k < c; k++)
            if (!taken[k] && (best < 0 || p->logits[k] > p->logits[best])) best = k; /* ties: lower index, as eval */
        taken[best] = true;
        out->class_index[r] = (int)best;
        out->class_name[r] = p->cb.clf.class_names[best];
        out->probability[r] = p->probs[best];
        out->count++;
    }
    free(taken);
    return FTL_OK;
}

void ftl_predictor_close(ftl_predictor *p) {
    if (!p) return;
    ftl_image_prepper_free(p->prepper);
    classifier_backbone_close(&p->cb);
    free(p->canvas);
    free(p->features);
    free(p->probs);
    free(p->logits);
    free(p->pair);
    free(p);
}
