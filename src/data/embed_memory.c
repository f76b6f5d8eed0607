/* Features of images a program holds (ftl/embed.h ftl_embed_images, _files, _dataset): the same
 * backbone pass as `ftl embed`, for callers that want the rows in memory rather than in Parquet. */
#include "ftl/embed.h"
#include "ftl/image.h"
#include "ftl/loader.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <stdlib.h>
#include <string.h>

static int chunk_of(const ftl_model *m) {
    int b = ftl_model_get_info(m)->batch;
    return b > 0 ? b : 16;
}

ftl_status ftl_embed_images(ftl_model *m, const ftl_nn_preprocess *pp, const uint8_t *images_hwc, int64_t count,
                            int height, int width, float *features) {
    if (count < 0 || height < 1 || width < 1 || height > 16384 || width > 16384)
        return ftl_fail(FTL_E_INVALID_ARG, "%lld images of %d x %d pixels: expected a positive size up to 16384",
                        (long long)count, height, width);
    int64_t dim = ftl_model_get_info(m)->feature_dim, chunk = chunk_of(m);
    size_t image_bytes = (size_t)height * (size_t)width * 3;
    int side = height > width ? height : width;
    /* not square: each image padded to a square, centered on white, as ftl prep pads a thumbnail */
    uint8_t *canvas = height == width ? NULL : malloc((size_t)chunk * (size_t)side * (size_t)side * 3);
    if (height != width && !canvas) return ftl_fail(FTL_E_NOMEM, "no memory for %lld padded images of %d x %d",
                                                    (long long)chunk, side, side);
    ftl_status st = FTL_OK;
    for (int64_t at = 0; st == FTL_OK && at < count; at += chunk) {
        int n = (int)(count - at < chunk ? count - at : chunk);
        const uint8_t *batch = images_hwc + (size_t)at * image_bytes;
        if (canvas) {
            for (int i = 0; i < n; i++) {
                ftl_image img = {.width = width, .height = height, .pixels = (uint8_t *)(batch + (size_t)i * image_bytes),
                                 .capacity = image_bytes};
                ftl_image_paste_centered(&img, side, canvas + (size_t)i * side * side * 3);
            }
            batch = canvas;
        }
        st = ftl_interrupt_check();
        if (st == FTL_OK) st = ftl_model_extract_features(m, pp, batch, n, side, features + at * dim);
    }
    free(canvas);
    return st;
}

ftl_status ftl_embed_files(ftl_model *m, const ftl_nn_preprocess *pp, const char *const *paths, int64_t count, int size,
                           float *features) {
    if (count < 0 || size < 1 || size > 16384)
        return ftl_fail(FTL_E_INVALID_ARG, "image size %d: expected 1..16384", size);
    ftl_image_prepper *prepper = NULL;
    FTL_TRY(ftl_image_prepper_init(&prepper, size));
    int64_t dim = ftl_model_get_info(m)->feature_dim, chunk = chunk_of(m);
    size_t canvas_bytes = (size_t)size * (size_t)size * 3;
    uint8_t *canvas = malloc((size_t)chunk * canvas_bytes);
    ftl_status st = canvas ? FTL_OK : ftl_fail(FTL_E_NOMEM, "no memory for %lld images of %d x %d", (long long)chunk, size, size);
    for (int64_t at = 0; st == FTL_OK && at < count; at += chunk) {
        int n = (int)(count - at < chunk ? count - at : chunk);
        for (int i = 0; st == FTL_OK && i < n; i++) {
            uint8_t *data = NULL;
            size_t bytes = 0;
            st = ftl_read_file(paths[at + i], &data, &bytes);
            if (st == FTL_OK) st = ftl_image_prepper_run(prepper, data, bytes, canvas + (size_t)i * canvas_bytes, NULL);
            free(data);
            if (st != FTL_OK) st = ftl_fail_context(st, "%s", paths[at + i]);
        }
        if (st == FTL_OK) st = ftl_interrupt_check();
        if (st == FTL_OK) st = ftl_model_extract_features(m, pp, canvas, n, size, features + at * dim);
    }
    free(canvas);
    ftl_image_prepper_free(prepper);
    return st;
}

ftl_status ftl_embed_dataset(ftl_model *m, const ftl_nn_preprocess *pp, const char *path, float **features,
                             int32_t **labels, int64_t *rows) {
    *features = NULL, *labels = NULL, *rows = 0;
    ftl_loader_options lo;
    ftl_loader_options_init(&lo);
    const char *sources[1] = {path};
    lo.sources = sources;
    lo.source_count = 1;
    lo.batch_size = chunk_of(m);
    lo.shuffle = false;
    lo.epochs = 1;
    ftl_loader *l = NULL;
    FTL_TRY(ftl_loader_open(&lo, &l));
    int64_t total = ftl_loader_shard_rows(l), dim = ftl_model_get_info(m)->feature_dim, done = 0;
    float *f = malloc((size_t)(total > 0 ? total : 1) * (size_t)dim * sizeof *f);
    int32_t *y = malloc((size_t)(total > 0 ? total : 1) * sizeof *y);
    ftl_status st = f && y ? FTL_OK : ftl_fail(FTL_E_NOMEM, "%s: no memory for %lld feature rows", path, (long long)total);
    int size = ftl_loader_image_size(l);
    if (st == FTL_OK && size < 1) st = ftl_fail(FTL_E_FORMAT, "%s: its rows are not square RGB images", path);
    ftl_batch b;
    while (st == FTL_OK && (st = ftl_interrupt_check()) == FTL_OK && (st = ftl_loader_next(l, &b)) == FTL_OK && b.rows > 0) {
        if (done + b.rows > total) {
            st = ftl_fail(FTL_E_FORMAT, "%s: more rows than the %lld its metadata declares", path, (long long)total);
            break;
        }
        st = ftl_model_extract_features(m, pp, b.values, (int)b.rows, size, f + done * dim);
        memcpy(y + done, b.labels, (size_t)b.rows * sizeof *y);
        done += b.rows;
    }
    ftl_loader_close(l);
    if (st != FTL_OK) {
        free(f);
        free(y);
        return st;
    }
    *features = f, *labels = y, *rows = done;
    return FTL_OK;
}
