/* Pillow's Image.reduce((fx, fy)) (Reduce.c) for RGB8: each output pixel is the mean of an
 * fx x fy block, rounded with Pillow's reciprocal multiply; blocks at the right and bottom edges
 * that are cut short are averaged over the pixels they have (ImagingReduceCorners). */
#include "image/image_internal.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

/* Pillow's division_UINT32(n, 8): 2^32 / (256 n), computed in float and truncated. */
static uint32_t reciprocal(uint32_t n) {
    float max_int = (float)((1 << 30) * 4.0);
    uint32_t max_dividend = (uint32_t)256 * n;
    return (uint32_t)(max_int / (float)max_dividend);
}

static inline uint8_t block_mean(uint32_t sum, uint32_t n, uint32_t mult) {
    return (uint8_t)(((sum + n / 2) * mult) >> 24);
}

void ftl_reduce_rgb(const uint8_t *src, int sw, int sh, int fx, int fy, uint8_t *dst) {
    const int ow = (sw + fx - 1) / fx, oh = (sh + fy - 1) / fy;
    const size_t row_bytes = (size_t)sw * 3;
    /* Column sums over the fy rows of a block row: sums up to 255 * fy fit easily. */
    uint32_t stack_sums[3 * 1024];
    uint32_t *colsum = row_bytes <= 3 * 1024 ? stack_sums : ftl_xmalloc(row_bytes * sizeof *colsum);
    for (int y = 0; y < oh; y++) {
        int y0 = y * fy, ny = sh - y0 < fy ? sh - y0 : fy;
        const uint8_t *r = src + (size_t)y0 * row_bytes;
        for (size_t i = 0; i < row_bytes; i++) colsum[i] = r[i];
        for (int j = 1; j < ny; j++) {
            r += row_bytes;
            for (size_t i = 0; i < row_bytes; i++) colsum[i] += r[i];
        }
        uint8_t *o = dst + (size_t)y * ow * 3;
        uint32_t n_full = (uint32_t)(fx * ny), mult_full = reciprocal(n_full);
        for (int x = 0; x < ow; x++) {
            int x0 = x * fx, nx = sw - x0 < fx ? sw - x0 : fx;
            uint32_t n = (uint32_t)(nx * ny), mult = nx == fx ? mult_full : reciprocal(n);
            const uint32_t *c = colsum + (size_t)x0 * 3;
            uint32_t s0 = 0, s1 = 0, s2 = 0;
            for (int i = 0; i < nx; i++) {
                s0 += c[3 * i + 0];
                s1 += c[3 * i + 1];
                s2 += c[3 * i + 2];
            }
            o[3 * x + 0] = block_mean(s0, n, mult);
            o[3 * x + 1] = block_mean(s1, n, mult);
            o[3 * x + 2] = block_mean(s2, n, mult);
        }
    }
    if (colsum != stack_sums) free(colsum);
}
