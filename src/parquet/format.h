/* Parquet file structures (the parts of parquet.thrift that ftl uses), their parsing from the
 * footer and page headers, and their serialisation for the writer. */
#ifndef FTL_PARQUET_FORMAT_H
#define FTL_PARQUET_FORMAT_H

#include "ftl/parquet.h"
#include "parquet/thrift.h"

#include <stdbool.h>
#include <stdint.h>

#define PQ_MAGIC "PAR1"
#define PQ_MAGIC_ENCRYPTED "PARE"

enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };
enum { PQ_DATA_PAGE = 0, PQ_INDEX_PAGE = 1, PQ_DICTIONARY_PAGE = 2, PQ_DATA_PAGE_V2 = 3 };
enum { PQ_CONVERTED_UTF8 = 0, PQ_CONVERTED_COUNT = 22 };

const char *pq_converted_type_name(int converted_type);
const char *pq_page_type_name(int page_type);

typedef struct pq_stats {
    bool has_null_count;
    int64_t null_count;
    bool has_min, has_max;               /* min_value / max_value */
    const uint8_t *min, *max;            /* point into the footer buffer */
    uint32_t min_len, max_len;
} pq_stats;

typedef struct pq_chunk {
    int type;                            /* physical type from the column metadata */
    uint32_t encodings;                  /* bit mask of 1u << encoding */
    int codec;
    int64_t num_values;
    int64_t total_uncompressed_size, total_compressed_size;
    int64_t data_page_offset;
    bool has_dictionary_page_offset;
    int64_t dictionary_page_offset;
    bool has_file_path;                  /* data in another file: not supported */
    bool has_offset_index;               /* ColumnChunk's offset_index_offset and _length */
    int64_t offset_index_offset;
    int32_t offset_index_length;
    bool path_mismatch;                  /* path_in_schema differs from the schema leaf */
    pq_stats stats;
    int64_t start, length;               /* derived byte range of the chunk (validated) */
} pq_chunk;

typedef struct pq_row_group {
    pq_chunk *chunks;                    /* one per leaf column */
    int64_t num_rows;
    int64_t total_byte_size;
} pq_row_group;

typedef struct pq_schema_element {
    char *name;
    int type;                            /* physical type, -1 for a group */
    int32_t type_length;
    int repetition;                      /* -1 when absent (the root) */
    int32_t num_children;
    int converted_type;                  /* -1 when absent */
    char logical[64];                    /* "" when absent */
} pq_schema_element;

/* FileMetaData; strings are NUL-terminated copies, statistics point into `footer`. */
typedef struct pq_file_metadata {
    int32_t version;
    int64_t num_rows;
    int schema_count;
    pq_schema_element *schema;
    int row_group_count;
    pq_row_group *row_groups;            /* chunks filled for `chunk_count` columns each */
    int chunk_count;                     /* columns per row group as the footer lists them */
    int kv_count;
    char **kv_keys, **kv_values;         /* value NULL when absent */
    char *created_by;                    /* NULL when absent */
} pq_file_metadata;

/* Parses FileMetaData from the footer bytes; on failure fills `err` (static text) and the byte
 * offset. The footer buffer must outlive the metadata (statistics point into it). */
bool pq_parse_file_metadata(const uint8_t *footer, size_t size, pq_file_metadata *md, const char **err, size_t *err_offset);
void pq_file_metadata_free(pq_file_metadata *md);

typedef struct pq_page_header {
    int type;
    int32_t uncompressed_size, compressed_size;
    bool has_crc;
    uint32_t crc;
    bool has_data_header;                /* DataPageHeader (v1) or DataPageHeaderV2 present */
    bool has_dictionary_header;
    int32_t num_values;
    int encoding;
    int def_encoding, rep_encoding;      /* v1 */
    int32_t num_nulls, num_rows;         /* v2 */
    int32_t def_length, rep_length;      /* v2: level bytes (never compressed) */
    bool is_compressed;                  /* v2 (default true) */
} pq_page_header;

/* Parses one page header from data[0..size); *header_size gets its length. */
bool pq_parse_page_header(const uint8_t *data, size_t size, pq_page_header *h, size_t *header_size, const char **err);

/* ---- serialisation (writer) ---- */
typedef struct pq_write_stats {
    bool has_min_max;
    uint8_t min[8], max[8];
    uint32_t min_max_len;
    int64_t null_count;
} pq_write_stats;

/* Adds rows [from, to) of a column's writer input to its chunk statistics. */
void pq_stats_update(const ftl_parquet_column_def *c, const ftl_parquet_column_data *d, int64_t from, int64_t to, pq_write_stats *s);
/* Normalises the bounds once the chunk is complete (signed zeros). */
void pq_stats_finish(const ftl_parquet_column_def *c, pq_write_stats *s);

/* A DATA_PAGE (v1) header for PLAIN values with RLE levels. */
void pq_write_data_page_header(thrift_writer *w, int32_t uncompressed, int32_t compressed, bool has_crc, uint32_t crc,
                               int32_t num_values);

#endif
