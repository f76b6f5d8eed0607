/* A batch of dataset images -> model input, shared over the backbone's OpenMP threads: between two
 * backbone runs those threads are idle, and on a 2-core machine the resize (299 -> 224) and the
 * table lookup of a batch cost about a third of MobileNetV2's own time when done on one thread.
 * Built with -fopenmp (this file only; see the Makefile) so it uses the same thread team as oneDNN. */
#include "nn/preprocess.h"
#include "image/image_internal.h"
#include "util/error.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

ftl_status nn_preprocess_batch(const float table[3][256], const uint8_t *images, int rows, int image_size, int h, int w,
                               bool channels_last, int threads, nn_preprocess_worker *workers, float *dst) {
    if (threads < 1) threads = 1;
    if (threads > rows) threads = rows > 0 ? rows : 1;
    bool resize = image_size != h || image_size != w;
    size_t image_bytes = (size_t)image_size * (size_t)image_size * 3, input_floats = (size_t)h * (size_t)w * 3;
    size_t resized_bytes = (size_t)h * (size_t)w * 3;
    for (int t = 0; t < threads && resize; t++) { /* buffers made before the team starts: no allocation inside */
        nn_preprocess_worker *wk = &workers[t];
        if (!wk->resample) wk->resample = calloc(1, sizeof(ftl_resample_scratch));
        if (wk->resized_cap < resized_bytes) {
            free(wk->resized);
            wk->resized = malloc(resized_bytes);
            wk->resized_cap = wk->resized ? resized_bytes : 0;
        }
        if (!wk->resample || !wk->resized) return ftl_fail(FTL_E_NOMEM, "out of memory for resizing a batch");
    }
    const float box[4] = {0.0f, 0.0f, (float)image_size, (float)image_size};
    ftl_status status[256] = {FTL_OK};
    if (threads > 256) threads = 256;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int r = 0; r < rows; r++) {
        int t = omp_get_thread_num();
        const uint8_t *img = images + (size_t)r * image_bytes;
        if (resize) {
            nn_preprocess_worker *wk = &workers[t];
            ftl_status st = ftl_resample_rgb(wk->resample, img, image_size, image_size, box, wk->resized, w, h,
                                             FTL_IMAGE_FILTER_BILINEAR);
            if (st != FTL_OK) {
                status[t] = st;
                continue;
            }
            img = wk->resized;
        }
        nn_preprocess_image(table, img, h, w, channels_last, dst + (size_t)r * input_floats);
    }
    for (int t = 0; t < threads; t++)
        if (status[t] != FTL_OK) return status[t];
    return FTL_OK;
}

void nn_preprocess_workers_free(nn_preprocess_worker *workers, int threads) {
    for (int t = 0; workers && t < threads; t++) {
        if (workers[t].resample) ftl_resample_scratch_free(workers[t].resample);
        free(workers[t].resample);
        free(workers[t].resized);
    }
    free(workers);
}
