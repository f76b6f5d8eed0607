/* Page compression: snappy (snappy-c), gzip (zlib), zstd; "none" is a copy. */
#ifndef FTL_PARQUET_CODEC_H
#define FTL_PARQUET_CODEC_H

#include "ftl/parquet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool pq_codec_supported(int codec);
/* Largest plausible uncompressed size for `compressed` bytes of this codec (each format's worst
 * case expansion), so a corrupt size field cannot make the reader allocate gigabytes. */
uint64_t pq_codec_max_expansion(int codec, uint64_t compressed);
/* Decompresses src into exactly dst_size bytes of dst; false with a static message otherwise. */
bool pq_decompress(int codec, const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size, const char **err);
/* Upper bound of the compressed size of src_size bytes. */
size_t pq_compress_bound(int codec, size_t src_size);
/* Compresses into dst (capacity from pq_compress_bound); returns the size, or 0 with *err set. */
size_t pq_compress(int codec, int level, const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_cap, const char **err);

#endif
