/* Opening MODEL.ftl with its backbone. */
#include "nn/device_caps.h"
#include "pipeline/classifier_backbone.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/log.h"

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

ftl_status classifier_recipe_read(const ftl_classifier *clf, const char *model_path, classifier_recipe *r) {
    memset(r, 0, sizeof *r);
    r->backbone_path = ftl_classifier_metadata(clf, FTL_MODEL_META_BACKBONE_PATH);
    r->backbone_sha256 = ftl_classifier_metadata(clf, FTL_MODEL_META_BACKBONE_SHA256);
    r->feature_tensor = ftl_classifier_metadata(clf, FTL_MODEL_META_FEATURE_TENSOR);
    r->scaling_json = ftl_classifier_metadata(clf, FTL_MODEL_META_INPUT_SCALING);
    const char *size = ftl_classifier_metadata(clf, FTL_MODEL_META_INPUT_SIZE);
    const char *precision = ftl_classifier_metadata(clf, "ftl.precision");
    const char *conv_algorithm = ftl_classifier_metadata(clf, "ftl.conv_algorithm");
    if (!r->backbone_path || !r->backbone_sha256 || !r->feature_tensor || !r->scaling_json || !size)
        return ftl_fail(FTL_E_FORMAT, "%s: not a model trained by ftl train (backbone metadata missing)", model_path);
    char *end;
    long s = strtol(size, &end, 10);
    if (*end || s < 1 || s > 65535) return ftl_fail(FTL_E_FORMAT, "%s: bad input size '%s'", model_path, size);
    r->input_size = (int)s;
    FTL_TRY(ftl_nn_precision_parse(precision ? precision : "fp32", &r->precision));
    r->int8_scales_json = ftl_classifier_metadata(clf, FTL_MODEL_META_INT8_SCALES);
    if (r->precision == FTL_NN_INT8 && !r->int8_scales_json)
        return ftl_fail(FTL_E_FORMAT, "%s: trained with --precision int8 but records no calibration (%s)", model_path,
                        FTL_MODEL_META_INT8_SCALES);
    FTL_TRY(ftl_nn_conv_algorithm_parse(conv_algorithm ? conv_algorithm : "direct", &r->conv_algorithm)); /* older models: direct */
    return preprocess_from_json(model_path, r->scaling_json, &r->preprocess);
}

ftl_status classifier_backbone_locate(const classifier_recipe *r, const char *model_path, const char *override,
                                      char **path) {
    *path = NULL;
    const char *p = override ? override : r->backbone_path;
    if (!ftl_path_exists(p)) {
        if (override) return ftl_fail(FTL_E_NOT_FOUND, "--backbone %s: no such file", p);
        return ftl_fail(FTL_E_NOT_FOUND, "the backbone %s recorded in %s does not exist (pass --backbone PATH)", p,
                        model_path);
    }
    *path = ftl_strdup(p);
    return FTL_OK;
}

ftl_status classifier_backbone_mismatch(const char *backbone_path, const char *sha256, const char *model_path,
                                        const char *recorded) {
    return ftl_fail(FTL_E_INVALID_ARG, "%s has sha256 %.16s..., but %s was trained on a backbone with sha256 %.16s...",
                    backbone_path, sha256, model_path, recorded);
}

ftl_status classifier_backbone_open(classifier_backbone *cb, const char *model_path, const char *override, int batch,
                                    int threads, ftl_device_kind device) {
    memset(cb, 0, sizeof *cb);
    FTL_TRY(ftl_classifier_load(model_path, &cb->clf));
    classifier_recipe r;
    ftl_status st = classifier_recipe_read(&cb->clf, model_path, &r);
    if (st == FTL_OK) {
        cb->input_size = r.input_size;
        cb->precision = r.precision;
        cb->conv_algorithm = r.conv_algorithm;
        ftl_device d;
        if (cb->precision == FTL_NN_TF32 && ftl_device_select(device, -1, &d) == FTL_OK && !nn_device_caps_of(d.kind)->tf32) {
            ftl_log_info("%s was trained with --precision tf32 (GPU tensor cores); the CPU runs it in fp32", model_path);
            cb->precision = FTL_NN_FP32;
        }
        cb->preprocess = r.preprocess;
        st = classifier_backbone_locate(&r, model_path, override, &cb->backbone_path);
        if (st == FTL_OK && cb->precision == FTL_NN_INT8) /* the same scales as training: the same features */
            st = ftl_nn_int8_scales_from_json(r.int8_scales_json, model_path, &cb->int8_scales);
    }
    if (st == FTL_OK) {
        ftl_model_options mo;
        ftl_model_options_init(&mo);
        mo.features_from = r.feature_tensor;
        mo.precision = cb->precision;
        mo.int8_scales = cb->int8_scales;
        mo.conv_algorithm = cb->conv_algorithm;
        mo.threads = threads;
        mo.device = device;
        cb->device = device;
        mo.batch = batch > 0 ? batch : 16;
        mo.overrides = cb->clf.tuned; /* a fine-tuned model's backbone tensors */
        mo.n_overrides = cb->clf.n_tuned;
        mo.expected_sha256 = r.backbone_sha256; /* another backbone is named as such, not by what it lacks */
        mo.expected_sha256_of = model_path;
        st = ftl_model_load(cb->backbone_path, &mo, &cb->backbone);
    }
    if (st == FTL_OK) {
        const ftl_model_info *info = ftl_model_get_info(cb->backbone);
        const char *identity = ftl_classifier_metadata(&cb->clf, FTL_MODEL_META_BACKBONE_IDENTITY);
        if (strcmp(info->sha256, r.backbone_sha256) != 0)
            st = classifier_backbone_mismatch(cb->backbone_path, info->sha256, model_path, r.backbone_sha256);
        else if (identity && strcmp(identity, info->identity) != 0)
            st = ftl_fail(FTL_E_FORMAT, "%s: its fine-tuned backbone tensors give identity %.16s..., the file records "
                          "%.16s... (a damaged or edited model)", model_path, info->identity, identity);
        else if (info->feature_dim != cb->clf.head.dim)
            st = ftl_fail(FTL_E_FORMAT, "%s: the head takes %lld features, the backbone gives %lld", model_path,
                          (long long)cb->clf.head.dim, (long long)info->feature_dim);
    }
    if (st == FTL_OK) {
        char *again = ftl_nn_preprocess_json(&cb->preprocess, cb->backbone, cb->input_size);
        if (strcmp(again, r.scaling_json) != 0)
            st = ftl_fail(FTL_E_FORMAT, "%s: cannot reproduce the recorded preprocessing %s (got %s)", model_path,
                          r.scaling_json, again);
        free(again);
    }
    if (st != FTL_OK) classifier_backbone_close(cb);
    return st;
}

void classifier_backbone_close(classifier_backbone *cb) {
    ftl_model_free(cb->backbone);
    ftl_classifier_free(&cb->clf);
    free(cb->backbone_path);
    ftl_nn_int8_scales_free(cb->int8_scales);
    memset(cb, 0, sizeof *cb);
}
