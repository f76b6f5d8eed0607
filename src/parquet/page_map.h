/* Page maps for single-value reads (internal): where each data page of a column chunk starts
 * and which row it begins with, so that one row's page can be read alone; and the chunk's
 * decoded dictionary. Built once per chunk on first use, cached in the file handle. */
#ifndef FTL_PARQUET_PAGE_MAP_H
#define FTL_PARQUET_PAGE_MAP_H

#include "parquet/column_decode.h"

typedef struct pq_page_loc {
    int64_t offset;        /* file offset of the page header */
    int64_t length;        /* header and body bytes */
    int64_t first_row;     /* row (within the row group) of the page's first value */
} pq_page_loc;

typedef struct pq_dictionary {
    ftl_parquet_column_values bufs;  /* the dictionary page's bytes and entry index */
    pq_decoder d;                    /* its dict_* fields describe the dictionary */
} pq_dictionary;

typedef struct pq_page_map {
    int64_t rows;                    /* the row group's */
    int64_t page_count;
    pq_page_loc *pages;              /* data pages in row order */
    bool from_offset_index;          /* taken from the chunk's OffsetIndex, not a header walk */
    bool has_dictionary;             /* the chunk starts with a dictionary page (at dict.offset) */
    pq_page_loc dict;
    pq_dictionary *dictionary;       /* decoded on first use, under the file's cache_lock */
} pq_page_map;

/* The chunk's page map, built on first use (the OffsetIndex when the file has a consistent one,
 * else a walk over the page headers that checks they tile the chunk and hold its rows). */
ftl_status pq_page_map_get(pq_chunk_ctx *c, const pq_page_map **out);
/* The chunk's dictionary (NULL when it has no dictionary page), decoded on first use. */
ftl_status pq_page_map_dictionary(pq_chunk_ctx *c, const pq_page_map *m, const pq_dictionary **out);
/* Builds a map without caching it: from the OffsetIndex when `use_offset_index` and the file
 * has a consistent one, else by walking the headers (tests compare the two). */
ftl_status pq_page_map_build(pq_chunk_ctx *c, bool use_offset_index, pq_page_map **out);
void pq_page_map_free(pq_page_map *m);
/* Frees every cached map of the file (at close). */
void pq_page_cache_free(ftl_parquet_file *f);

#endif
