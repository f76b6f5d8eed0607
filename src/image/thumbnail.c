/* Pillow 9.4's Image.thumbnail((S, S), LANCZOS) (reducing_gap=2.0) on an RGB image that is no
 * longer a JpegImageFile (the recipe converts first, so draft() does nothing): the size from
 * preserve_aspect_ratio(), then Image.resize(): an integer box `reduce` by
 * int(src / dst / reducing_gap) per axis when either is > 1, then Lanczos from the reduced
 * image over the fractional box (0, 0, W / fx, H / fy). Then the centred paste on white. */
#include "image/image_internal.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Image.thumbnail's round_aspect(): floor or ceil, whichever the key ranks first (floor on a
 * tie, as Python's min keeps the first), at least 1. */
static int round_aspect_width(double number, double aspect, int y) {
    double lo = floor(number), hi = ceil(number);
    double klo = fabs(aspect - lo / y), khi = fabs(aspect - hi / y);
    double r = khi < klo ? hi : lo;
    return r < 1 ? 1 : (int)r;
}

static int round_aspect_height(double number, double aspect, int x) {
    double lo = floor(number), hi = ceil(number);
    double klo = lo == 0 ? 0 : fabs(aspect - x / lo);
    double khi = hi == 0 ? 0 : fabs(aspect - x / hi);
    double r = khi < klo ? hi : lo;
    return r < 1 ? 1 : (int)r;
}

void ftl_image_thumbnail_size(int src_width, int src_height, int size, int *width, int *height) {
    int x = size, y = size;
    if (x >= src_width && y >= src_height) {
        *width = src_width;
        *height = src_height;
        return;
    }
    double aspect = (double)src_width / src_height;
    if ((double)x / y >= aspect)
        x = round_aspect_width(y * aspect, aspect, y);
    else
        y = round_aspect_height(x / aspect, aspect, x);
    *width = x;
    *height = y;
}

void ftl_thumb_plan_make(int src_w, int src_h, int size, ftl_thumb_plan *plan) {
    memset(plan, 0, sizeof *plan);
    ftl_image_thumbnail_size(src_w, src_h, size, &plan->width, &plan->height);
    plan->reduce_x = plan->reduce_y = 1;
    if (plan->width == src_w && plan->height == src_h) return; /* fits: pasted as it is */
    plan->resize = true;
    const double reducing_gap = 2.0;
    int fx = (int)((double)src_w / plan->width / reducing_gap);
    int fy = (int)((double)src_h / plan->height / reducing_gap);
    if (fx < 1) fx = 1;
    if (fy < 1) fy = 1;
    plan->box[0] = plan->box[1] = 0.0f;
    if (fx > 1 || fy > 1) {
        plan->reduce_x = fx;
        plan->reduce_y = fy;
        /* Python divides in double; ImagingResample receives the box as C floats. */
        plan->box[2] = (float)((double)src_w / fx);
        plan->box[3] = (float)((double)src_h / fy);
    } else {
        plan->box[2] = (float)src_w;
        plan->box[3] = (float)src_h;
    }
}

ftl_status ftl_image_thumbnail(const ftl_image *src, int size, ftl_image *dst) {
    if (!src || !src->pixels || src->width < 1 || src->height < 1 || size < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "thumbnail: empty image or size %d", size);
    if (dst == src) return ftl_fail(FTL_E_INVALID_ARG, "thumbnail: dst must differ from src");
    ftl_thumb_plan plan;
    ftl_thumb_plan_make(src->width, src->height, size, &plan);
    FTL_TRY(ftl_image_alloc(dst, plan.width, plan.height));
    if (!plan.resize) {
        memcpy(dst->pixels, src->pixels, (size_t)src->width * src->height * 3);
        return FTL_OK;
    }
    ftl_image reduced = {0};
    const ftl_image *from = src;
    if (plan.reduce_x > 1 || plan.reduce_y > 1) {
        FTL_TRY(ftl_image_alloc(&reduced, (src->width + plan.reduce_x - 1) / plan.reduce_x,
                                (src->height + plan.reduce_y - 1) / plan.reduce_y));
        ftl_reduce_rgb(src->pixels, src->width, src->height, plan.reduce_x, plan.reduce_y,
                       reduced.pixels);
        from = &reduced;
    }
    ftl_resample_scratch scratch = {0};
    ftl_status st = ftl_resample_rgb(&scratch, from->pixels, from->width, from->height, plan.box,
                                     dst->pixels, plan.width, plan.height,
                                     FTL_IMAGE_FILTER_LANCZOS);
    ftl_resample_scratch_free(&scratch);
    ftl_image_free(&reduced);
    return st;
}

ftl_status ftl_image_resize(const ftl_image *src, int width, int height, ftl_image_filter filter,
                            ftl_image *dst) {
    if (!src || !src->pixels || src->width < 1 || src->height < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "resize: empty source image");
    if (width < 1 || height < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "resize: height and width must be > 0 (got %dx%d)",
                        width, height);
    if (dst == src) return ftl_fail(FTL_E_INVALID_ARG, "resize: dst must differ from src");
    FTL_TRY(ftl_image_alloc(dst, width, height));
    const float box[4] = {0.0f, 0.0f, (float)src->width, (float)src->height};
    ftl_resample_scratch scratch = {0};
    ftl_status st = ftl_resample_rgb(&scratch, src->pixels, src->width, src->height, box,
                                     dst->pixels, width, height, filter);
    ftl_resample_scratch_free(&scratch);
    return st;
}

void ftl_image_paste_centered(const ftl_image *thumb, int size, uint8_t *canvas) {
    memset(canvas, 255, (size_t)size * size * 3);
    int w = thumb->width < size ? thumb->width : size;
    int h = thumb->height < size ? thumb->height : size;
    int ox = (size - w) / 2, oy = (size - h) / 2;
    for (int y = 0; y < h; y++)
        memcpy(canvas + ((size_t)(oy + y) * size + ox) * 3,
               thumb->pixels + (size_t)y * thumb->width * 3, (size_t)w * 3);
}
