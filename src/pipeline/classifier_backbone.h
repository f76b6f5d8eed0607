/* A trained model file together with the backbone it was trained on: what eval and predict
 * need. The backbone's sha256 must match the one recorded at training time, and the recorded
 * preprocessing is rebuilt and checked to reproduce the recorded description exactly. */
#ifndef FTL_PIPELINE_CLASSIFIER_BACKBONE_H
#define FTL_PIPELINE_CLASSIFIER_BACKBONE_H

#include "ftl/nn.h"
#include "ftl/train.h"

typedef struct classifier_backbone {
    ftl_classifier clf;
    ftl_model *backbone;
    ftl_nn_preprocess preprocess;
    ftl_nn_precision precision;
    ftl_nn_conv_algorithm conv_algorithm;
    ftl_device_kind device;
    char *backbone_path;
    int input_size;   /* S of the dataset images the model was trained on */
    ftl_nn_int8_scales *int8_scales; /* precision int8: the calibration the model file recorded */
} classifier_backbone;

/* What MODEL.ftl records about its backbone (strings point into the classifier's metadata). */
typedef struct classifier_recipe {
    const char *backbone_path, *backbone_sha256, *feature_tensor, *scaling_json;
    int input_size;
    ftl_nn_preprocess preprocess;
    ftl_nn_precision precision;
    ftl_nn_conv_algorithm conv_algorithm;
    const char *int8_scales_json; /* precision int8 */
} classifier_recipe;

/* Reads and checks the recipe of a loaded model file (errors name model_path). */
ftl_status classifier_recipe_read(const ftl_classifier *clf, const char *model_path, classifier_recipe *r);
/* The backbone to open: `override` when given, else the recorded path; it must exist. Caller frees. */
ftl_status classifier_backbone_locate(const classifier_recipe *r, const char *model_path, const char *override,
                                      char **path);
/* The error for a backbone whose sha256 is not the recorded one. */
ftl_status classifier_backbone_mismatch(const char *backbone_path, const char *sha256, const char *model_path,
                                        const char *recorded);

/* backbone_override: a path to use instead of the recorded one (same sha256 required). A model
 * trained with --precision tf32 (GPU) runs fp32 on the CPU. */
ftl_status classifier_backbone_open(classifier_backbone *cb, const char *model_path, const char *backbone_override,
                                    int batch, int threads, ftl_device_kind device);
void classifier_backbone_close(classifier_backbone *cb);

#endif
