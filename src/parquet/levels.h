/* Definition levels of a data page (internal): the RLE / bit-packed hybrid at any bit width, or
 * the deprecated BIT_PACKED encoding of old v1 pages, each level checked against the column's
 * maximum. (Columns inside lists are not read, so pages carry no repetition levels.) */
#ifndef FTL_PARQUET_LEVELS_H
#define FTL_PARQUET_LEVELS_H

#include "ftl/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bits per level for levels 0..max_level: ceil(log2(max_level + 1)). */
int pq_level_bit_width(int max_level);

/* Decodes the first `count` definition levels of a page holding `page_values` values into
 * out[0..count). v1 pages: p/n is the page's payload, levels first (RLE behind a 4-byte length,
 * or BIT_PACKED); *used gets the bytes the page's levels take, so the values start at p + *used.
 * v2 pages: p/n are the page's def_length level bytes (RLE, no length). FTL_E_FORMAT for data
 * that ends early or a level above max_level, FTL_E_UNSUPPORTED for another encoding; `err`
 * (err_cap bytes) gets the detail. */
ftl_status pq_decode_def_levels(const uint8_t *p, size_t n, int encoding, bool v1, int max_level, int64_t page_values,
                                int64_t count, uint8_t *out, size_t *used, char *err, size_t err_cap);

#endif
