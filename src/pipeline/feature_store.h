/* The cached feature vectors of one rank: global rows [begin, end) of a dataset, read from the
 * feature-cache part files that hold them (each part holds a contiguous range of rows), either
 * all in memory or streamed: row groups decoded on demand into a small least-recently-used set,
 * so memory stays bounded whatever the order the rows are asked for in. */
#ifndef FTL_PIPELINE_FEATURE_STORE_H
#define FTL_PIPELINE_FEATURE_STORE_H

#include "ftl/base.h"
#include "ftl/parquet.h"
#include <stdbool.h>
#include <stdint.h>

/* A features file holding global rows [begin, end), in order. */
typedef struct feature_part {
    char *path;
    int64_t begin, end;
} feature_part;

typedef struct feature_store_file {
    char *path;
    int64_t begin, end;          /* rows of the dataset it holds */
    int64_t use_begin, use_end;  /* the rows this store takes from it */
    ftl_parquet_file *parquet;
    int features_column, label_column;
    int64_t *group_first;        /* first file row of each row group, [groups + 1] */
    int groups;
} feature_store_file;

typedef struct feature_store_slot {
    int file, group;             /* -1 when empty */
    uint64_t used;               /* LRU clock */
    int64_t rows;
    float *features;
    int32_t *labels;
} feature_store_slot;

typedef struct feature_store {
    int64_t begin, end, dim;
    bool in_memory;
    float *features;             /* in memory: (end - begin) x dim */
    int32_t *labels;
    feature_store_file *files;
    int file_count;
    feature_store_slot *slots;   /* streamed */
    int slot_count;
    uint64_t clock;
    int64_t row_groups_read;
    ftl_parquet_column_values values;
} feature_store;

/* parts must cover [begin, end) (they may extend past it, and overlap: earlier parts win). */
ftl_status feature_store_open(feature_store *s, const feature_part *parts, int part_count, int64_t begin, int64_t end,
                              bool in_memory, int64_t stream_cache_bytes);
/* Row `row` (global) of this store: its features (valid until the next call) and label. */
ftl_status feature_store_get(feature_store *s, int64_t row, const float **features, int32_t *label);
void feature_store_close(feature_store *s);

#endif
