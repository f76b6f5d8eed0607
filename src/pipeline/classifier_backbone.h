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
    char *backbone_path;
    int input_size;   /* S of the dataset images the model was trained on */
} classifier_backbone;

/* backbone_override: a path to use instead of the recorded one (same sha256 required). */
ftl_status classifier_backbone_open(classifier_backbone *cb, const char *model_path, const char *backbone_override,
                                    int batch, int threads);
void classifier_backbone_close(classifier_backbone *cb);

#endif
