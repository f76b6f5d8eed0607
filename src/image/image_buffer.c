/* Image buffers and scratch growth, below the decoders and resamplers that fill them. */
#include "image/image_internal.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

ftl_status ftl_image_grow(uint8_t **buf, size_t *cap, size_t need) {
    if (*cap >= need) return FTL_OK;
    /* Grow by half again so a run of slightly bigger images does not reallocate each time. */
    size_t want = need + need / 2;
    uint8_t *p = realloc(*buf, want);
    if (!p) {
        p = realloc(*buf, need);
        want = need;
    }
    if (!p) return ftl_fail(FTL_E_NOMEM, "out of memory (%zu bytes for image data)", need);
    *buf = p;
    *cap = want;
    return FTL_OK;
}

ftl_status ftl_image_alloc(ftl_image *img, int width, int height) {
    if (width < 1 || height < 1 || (long long)width * height > FTL_IMAGE_MAX_PIXELS)
        return ftl_fail(FTL_E_INVALID_ARG, "bad image size %dx%d", width, height);
    FTL_TRY(ftl_image_grow(&img->pixels, &img->capacity, (size_t)width * height * 3));
    img->width = width;
    img->height = height;
    return FTL_OK;
}

void ftl_image_free(ftl_image *img) {
    if (!img) return;
    free(img->pixels);
    memset(img, 0, sizeof *img);
}
