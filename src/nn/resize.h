/* Stand-in image resize used by the backbone's input preprocessing until src/image/ provides
 * ftl_image_resize(..., BILINEAR); keep callers on this one function so the swap is one line. */
#ifndef FTL_NN_RESIZE_H
#define FTL_NN_RESIZE_H

#include "ftl/base.h"

/* Pillow-compatible Image.resize(BILINEAR) of an RGB uint8 image (row-major, 3 bytes per
 * pixel): separable triangle filter whose support grows with the shrink factor (antialiased),
 * 22-bit fixed-point coefficients, horizontal pass then vertical, as Pillow 9 does. */
ftl_status nn_resize_bilinear_rgb(const uint8_t *src, int src_w, int src_h, uint8_t *dst, int dst_w, int dst_h);

#endif
