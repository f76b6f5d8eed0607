/* Opening MODEL.ftl with its backbone. */
#include "pipeline/classifier_backbone.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"

#include <stdlib.h>
#include <string.h>

static ftl_status preprocess_from_json(const char *model_path, const char *json, ftl_nn_preprocess *pp) {
    ftl_json *v;
    if (ftl_json_parse(json, strlen(json), &v) != FTL_OK)
        return ftl_fail(FTL_E_FORMAT, "%s: the recorded preprocessing is not valid JSON", model_path);
    const char *scale = ftl_json_get_string(v, "scale");
    ftl_status st = FTL_OK;
    if (!scale) st = ftl_fail(FTL_E_FORMAT, "%s: the recorded preprocessing has no scale", model_path);
    else if (strcmp(scale, "tf") == 0) st = ftl_nn_preprocess_init(pp, FTL_NN_SCALE_TF);
    else if (strcmp(scale, "torch") == 0) st = ftl_nn_preprocess_init(pp, FTL_NN_SCALE_TORCH);
    else {
        st = ftl_nn_preprocess_init(pp, FTL_NN_SCALE_CUSTOM);
        const ftl_json *mean = ftl_json_get(v, "mean"), *std = ftl_json_get(v, "std");
        if (st == FTL_OK && (!mean || !std || mean->count != 3 || std->count != 3))
            st = ftl_fail(FTL_E_FORMAT, "%s: the recorded preprocessing has no mean/std", model_path);
        for (int c = 0; st == FTL_OK && c < 3; c++) {
            pp->mean[c] = (float)mean->items[c].number;
            pp->std[c] = (float)std->items[c].number;
        }
    }
    ftl_json_free(v);
    return st;
}

ftl_status classifier_backbone_open(classifier_backbone *cb, const char *model_path, const char *override, int batch,
                                    int threads) {
    memset(cb, 0, sizeof *cb);
    FTL_TRY(ftl_classifier_load(model_path, &cb->clf));
    const char *path = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_BACKBONE_PATH);
    const char *sha = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_BACKBONE_SHA256);
    const char *tensor = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_FEATURE_TENSOR);
    const char *scaling = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_INPUT_SCALING);
    const char *size = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_INPUT_SIZE);
    const char *precision = ftl_classifier_metadata(&cb->clf, "ftl.precision");
    const char *conv_algorithm = ftl_classifier_metadata(&cb->clf, "ftl.conv_algorithm");
    ftl_status st = FTL_OK;
    if (!path || !sha || !tensor || !scaling || !size)
        st = ftl_fail(FTL_E_FORMAT, "%s: not a model trained by ftl train (backbone metadata missing)", model_path);
    if (st == FTL_OK) {
        char *end;
        long s = strtol(size, &end, 10);
        if (*end || s < 1 || s > 65535) st = ftl_fail(FTL_E_FORMAT, "%s: bad input size '%s'", model_path, size);
        cb->input_size = (int)s;
    }
    if (st == FTL_OK) st = ftl_nn_precision_parse(precision ? precision : "fp32", &cb->precision);
    if (st == FTL_OK) st = ftl_nn_conv_algorithm_parse(conv_algorithm ? conv_algorithm : "direct", &cb->conv_algorithm); /* older models: direct */
    if (st == FTL_OK) st = preprocess_from_json(model_path, scaling, &cb->preprocess);
    if (st == FTL_OK) {
        cb->backbone_path = ftl_strdup(override ? override : path);
        if (!ftl_path_exists(cb->backbone_path))
            st = ftl_fail(FTL_E_NOT_FOUND, "the backbone %s recorded in %s does not exist (pass --backbone PATH)",
                          cb->backbone_path, model_path);
    }
    if (st == FTL_OK) {
        ftl_model_options mo;
        ftl_model_options_init(&mo);
        mo.features_from = tensor;
        mo.precision = cb->precision;
        mo.conv_algorithm = cb->conv_algorithm;
        mo.threads = threads;
        mo.batch = batch > 0 ? batch : 16;
        st = ftl_model_load(cb->backbone_path, &mo, &cb->backbone);
    }
    if (st == FTL_OK) {
        const ftl_model_info *info = ftl_model_get_info(cb->backbone);
        if (strcmp(info->sha256, sha) != 0)
            st = ftl_fail(FTL_E_INVALID_ARG, "%s has sha256 %.16s..., but %s was trained on a backbone with sha256 %.16s...",
                          cb->backbone_path, info->sha256, model_path, sha);
        else if (info->feature_dim != cb->clf.head.dim)
            st = ftl_fail(FTL_E_FORMAT, "%s: the head takes %lld features, the backbone gives %lld", model_path,
                          (long long)cb->clf.head.dim, (long long)info->feature_dim);
    }
    if (st == FTL_OK) {
        char *again = ftl_nn_preprocess_json(&cb->preprocess, cb->backbone, cb->input_size);
        if (strcmp(again, scaling) != 0)
            st = ftl_fail(FTL_E_FORMAT, "%s: cannot reproduce the recorded preprocessing %s (got %s)", model_path, scaling, again);
        free(again);
    }
    if (st != FTL_OK) classifier_backbone_close(cb);
    return st;
}

void classifier_backbone_close(classifier_backbone *cb) {
    ftl_model_free(cb->backbone);
    ftl_classifier_free(&cb->clf);
    free(cb->backbone_path);
    memset(cb, 0, sizeof *cb);
}
