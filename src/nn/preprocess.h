/* Internal side of input preprocessing: a per-channel lookup table from pixel value to model
 * input (computed in double, so every scale gives the correctly rounded float), and the
 * uint8 HWC -> float NCHW/NHWC conversion of one image. */
#ifndef FTL_NN_PREPROCESS_H
#define FTL_NN_PREPROCESS_H

#include "ftl/nn.h"

void nn_preprocess_table(const ftl_nn_preprocess *p, float table[3][256]);
void nn_preprocess_image(const float table[3][256], const uint8_t *hwc, int h, int w, bool channels_last, float *dst);

#endif
