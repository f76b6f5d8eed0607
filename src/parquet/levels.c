/* Definition levels of any bit width (Parquet Encodings.md: RLE / bit-packing hybrid; the
 * deprecated BIT_PACKED, packed from the most significant bit). */
#include "parquet/levels.h"
#include "ftl/parquet.h"
#include "parquet/encoding.h"

#include <stdio.h>

int pq_level_bit_width(int max_level) {
    int bits = 0;
    while (max_level >> bits) bits++;
    return bits;
}

ftl_status pq_decode_def_levels(const uint8_t *p, size_t n, int encoding, bool v1, int max_level, int64_t page_values,
                                int64_t count, uint8_t *out, size_t *used, char *err, size_t err_cap) {
    int bw = pq_level_bit_width(max_level);
    if (max_level < 0 || bw > 8) {
        snprintf(err, err_cap, "definition levels up to %d are beyond ftl's limit of 255", max_level);
        return FTL_E_UNSUPPORTED;
    }
    if (count < 0 || count > page_values) {
        snprintf(err, err_cap, "%s", "definition levels: bad count");
        return FTL_E_FORMAT;
    }
    if (encoding == FTL_PARQUET_ENC_BIT_PACKED && v1) { /* no length: the page's values decide it */
        uint64_t bytes = ((uint64_t)page_values * (uint64_t)bw + 7) / 8;
        if (bytes > n || !pq_bitpacked_msb_decode(p, n, bw, out, (size_t)count)) {
            snprintf(err, err_cap, "%s", "definition levels run past the page");
            return FTL_E_FORMAT;
        }
        *used = (size_t)bytes;
    } else if (encoding == FTL_PARQUET_ENC_RLE || !v1) {
        size_t start = 0, len = n;
        if (v1) { /* v1 pages prefix the levels with their byte length */
            if (n < 4) {
                snprintf(err, err_cap, "%s", "definition levels are truncated");
                return FTL_E_FORMAT;
            }
            len = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
            start = 4;
            if (len > n - 4) {
                snprintf(err, err_cap, "%s", "definition levels run past the page");
                return FTL_E_FORMAT;
            }
        }
        pq_rle_decoder rle;
        pq_rle_init(&rle, p + start, len, bw);
        if (!pq_rle_decode_u8(&rle, out, (size_t)count)) {
            snprintf(err, err_cap, "definition levels: %s", rle.error);
            return FTL_E_FORMAT;
        }
        *used = start + len;
    } else {
        snprintf(err, err_cap, "%s", "definition levels in an encoding other than RLE or BIT_PACKED");
        return FTL_E_UNSUPPORTED;
    }
    if (max_level == (1 << bw) - 1) return FTL_OK; /* every value the bits can hold is valid */
    for (int64_t i = 0; i < count; i++)
        if (out[i] > max_level) {
            snprintf(err, err_cap, "definition level %d of value %lld is above the column's maximum %d", out[i], (long long)i,
                     max_level);
            return FTL_E_FORMAT;
        }
    return FTL_OK;
}
