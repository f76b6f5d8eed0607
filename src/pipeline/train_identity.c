/* The identity a training run records in every checkpoint and model (backbone, classes, features,
 * preprocessing, precision, ...): what a resume or a reuse compares. */
#include "pipeline/train_run.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

void train_run_meta_init(train_run_meta *m, const train_run *r, const ftl_train_options *o) {
    const ftl_model_info *info = r->backbone ? ftl_model_get_info(r->backbone) : NULL;
    m->dim = ftl_format("%lld", (long long)r->dim);
    m->offset = ftl_format("%d", o->embed.label_offset);
    m->shuffle = ftl_format("%lld", (long long)o->shuffle_buffer);
    m->scales = o->embed.int8_scales ? ftl_nn_int8_scales_json(o->embed.int8_scales) : ftl_strdup("");
    ftl_kv kv[TRAIN_RUN_META_COUNT] = {
        {FTL_MODEL_META_BACKBONE_SHA256, info ? info->sha256 : ""},
        {FTL_MODEL_META_BACKBONE_PATH, o->embed.backbone_path},
        {FTL_MODEL_META_CLASSES, r->classes_json ? r->classes_json : "[]"},
        {FTL_MODEL_META_FEATURE_DIM, m->dim},
        {FTL_MODEL_META_FEATURE_TENSOR, info ? info->feature_name : ""},
        {FTL_MODEL_META_INPUT_SCALING, r->preprocess_json ? r->preprocess_json : ""},
        {"ftl.precision", ftl_nn_precision_name(o->embed.precision)},
        {"ftl.device", info && info->device ? info->device : ""},
        {"ftl.conv_algorithm", ftl_nn_conv_algorithm_name(o->embed.conv_algorithm)},
        {"ftl.label_offset", m->offset},
        {"ftl.augment", o->augment_flip ? "flip" : "none"},
        {FTL_MODEL_META_TTA, o->tta_flip ? "flip" : "none"}, /* the monitored metric's meaning */
        {"ftl.shuffle_buffer", m->shuffle},
        {FTL_MODEL_META_INT8_SCALES, m->scales},
    };
    memcpy(m->kv, kv, sizeof kv);
}

void train_run_meta_free(train_run_meta *m) {
    free(m->dim), free(m->offset), free(m->shuffle), free(m->scales);
    memset(m, 0, sizeof *m);
}
