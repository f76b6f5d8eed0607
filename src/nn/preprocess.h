/* Internal side of input preprocessing: a per-channel lookup table from pixel value to model
 * input (computed in double, so every scale gives the correctly rounded float), and the
 * uint8 HWC -> float NCHW/NHWC conversion of one image. */
#ifndef FTL_NN_PREPROCESS_H
#define FTL_NN_PREPROCESS_H

#include "ftl/nn.h"

void nn_preprocess_table(const ftl_nn_preprocess *p, float table[3][256]);
void nn_preprocess_image(const float table[3][256], const uint8_t *hwc, int h, int w, bool channels_last, float *dst);

/* Per-thread state of batch preprocessing: the resampler's cached coefficients and a resized image. */
typedef struct nn_preprocess_worker {
    void *resample;           /* ftl_resample_scratch */
    uint8_t *resized;
    size_t resized_cap;
} nn_preprocess_worker;

/* `rows` images of image_size x image_size x 3 bytes -> model input rows of h x w (resized with
 * Pillow's BILINEAR when the sizes differ), on up to `threads` threads (the backbone's own, idle
 * between its runs); workers[threads] keep their buffers between calls. Rows are independent, so
 * the result does not depend on the thread count. */
ftl_status nn_preprocess_batch(const float table[3][256], const uint8_t *images, int rows, int image_size, int h, int w,
                               bool channels_last, int threads, nn_preprocess_worker *workers, float *dst);
void nn_preprocess_workers_free(nn_preprocess_worker *workers, int threads);

#endif
