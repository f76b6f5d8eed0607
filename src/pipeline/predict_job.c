/* `ftl predict MODEL.ftl IMAGE...`: the dataset recipe, the backbone and the head on each file. */
#include "ftl/image.h"
#include "ftl/pipeline.h"
#include "pipeline/classifier_backbone.h"
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
    int top_k;
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
    p->probs = ftl_xmalloc((size_t)p->cb.clf.head.classes * sizeof(float));
    p->logits = ftl_xmalloc((size_t)p->cb.clf.head.classes * sizeof(float));
    p->top_k = o->top_k < p->cb.clf.head.classes ? o->top_k : (int)p->cb.clf.head.classes;
    *out = p;
    return FTL_OK;
}

ftl_status ftl_predictor_run_file(ftl_predictor *p, const char *image_path, ftl_prediction *out) {
    memset(out, 0, sizeof *out);
    uint8_t *data;
    size_t size;
    FTL_TRY(ftl_read_file(image_path, &data, &size));
    ftl_image_info info;
    ftl_status st = ftl_image_prepper_run(p->prepper, data, size, p->canvas, &info);
    free(data);
    if (st != FTL_OK) return ftl_fail_context(st, "%s", image_path);
    FTL_TRY(ftl_model_extract_features(p->cb.backbone, &p->cb.preprocess, p->canvas, 1, p->cb.input_size, p->features));
    FTL_TRY(ftl_head_predict(&p->cb.clf.head, p->features, 1, p->probs, p->logits));
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
    free(p);
}
