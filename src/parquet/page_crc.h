/* CRC-32 of page bodies: the zlib (IEEE 802.3) checksum Parquet page headers carry. Checking it
 * is most of the cost of reading one value out of a 1 MiB page, and zlib's table-driven crc32
 * runs at ~3 GB/s, so where the CPU has PCLMULQDQ the bytes are folded 64 at a time with
 * carry-less multiplications instead (the same value, ~10x faster). */
#ifndef FTL_PARQUET_PAGE_CRC_H
#define FTL_PARQUET_PAGE_CRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* crc32(0, data, size) as zlib computes it. */
uint32_t pq_crc32(const void *data, size_t size);
/* The two implementations pq_crc32 chooses between (for tests); the folded one runs zlib's where
 * !pq_crc32_folding_available(). */
uint32_t pq_crc32_zlib(const void *data, size_t size);
uint32_t pq_crc32_folded(const void *data, size_t size);
bool pq_crc32_folding_available(void);

#endif
