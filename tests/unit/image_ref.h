/* Reads the Pillow reference tables that tests/ref/gen_image.py writes under $BUILD/ref/image. */
#ifndef FTL_TEST_IMAGE_REF_H
#define FTL_TEST_IMAGE_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One row of recipe.tsv: Pillow's scale_image on one file at one size. */
typedef struct image_ref_row {
    char set[32], root[16], path[512], note[512];
    int size, w, h, x, y;
    bool ok;
    long long offset;
} image_ref_row;

/* One row of resize.tsv. */
typedef struct resize_ref_row {
    char name[128], filter[16];
    int sw, sh, dw, dh;
    long long src_offset, dst_offset;
} resize_ref_row;

/* Loads every row of recipe.tsv whose set equals `set` (all rows when NULL); fails the
 * calling test (and returns 0) when the reference is missing. Caller frees *rows. */
int image_ref_load(const char *set, image_ref_row **rows);
int resize_ref_load(resize_ref_row **rows);
/* The file a row names ($SHARED/... or $BUILD/ref/image/...). */
void image_ref_path(const image_ref_row *r, char *out, size_t out_size);
/* Reads n bytes at offset from recipe.bin / resize.bin into buf. */
bool image_ref_read(const char *bin_name, long long offset, uint8_t *buf, size_t n);

/* Pixel difference statistics between two equally sized byte buffers. */
typedef struct pixel_diff {
    double mean_abs;
    int max_abs;
    size_t differing;
} pixel_diff;
pixel_diff pixel_diff_of(const uint8_t *a, const uint8_t *b, size_t n);

#endif
