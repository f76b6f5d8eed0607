/* The static part of the loader: which files and row groups exist, which rows belong to this
 * shard, how many rows an epoch uses, and the seeded order of row-group pieces in each pass. */
#ifndef FTL_DATA_LOADER_PLAN_H
#define FTL_DATA_LOADER_PLAN_H

#include "ftl/loader.h"
#include "ftl/parquet.h"

typedef struct loader_file {
    char *path;
    ftl_parquet_file *parquet;
    int label_column, value_column, path_column;  /* -1 when absent (path only) */
    /* a dataset that keeps encoded images (ftl-dataset-2): which each row holds, and the paths that
     * name a row that fails to decode (-1 when absent) */
    bool encoded;
    int format_column, name_column;
    int64_t first_row;                            /* global index of its first row */
    int64_t *row_group_first_row;                 /* global index of each row group's first row */
    uint64_t size, mtime_ns;                      /* identity for the disk cache */
} loader_file;

/* Rows [row_begin, row_end) of one row group, all inside this shard. */
typedef struct loader_piece {
    int file, row_group;
    int64_t row_begin, row_end;
} loader_piece;

typedef struct loader_plan {
    loader_file *files;
    int file_count;
    int64_t total_rows;
    int64_t row_bytes;
    int image_size;
    bool any_encoded;                /* some file keeps encoded images: readers decode */
    int shard, num_shards;
    int64_t shard_begin, shard_end;  /* global rows owned by this shard */
    loader_piece *pieces;            /* in file order */
    int piece_count;
    int64_t rows_per_pass;           /* rows a pass emits (after the equal-batches trim) */
    int64_t batches_per_epoch;
} loader_plan;

/* Files named by `sources`: files as given, folders searched for *.parquet part files (sorted). */
ftl_status loader_expand_sources(const char *const *sources, int source_count, char ***paths, int *count);
/* S of a dataset's images: `override` when > 0, else the first file's ftl.image_size. */
/* Rows of a dataset: the sum over its files' footers. */
ftl_status loader_total_rows(const char *const *sources, int source_count, int64_t *rows);
ftl_status loader_dataset_image_size(const char *const *sources, int source_count, int override, int *size);
ftl_status loader_plan_build(const ftl_loader_options *options, loader_plan *plan);
void loader_plan_free(loader_plan *plan);
/* order[0..piece_count): the pieces of pass `pass` (identity order when !shuffle). */
void loader_plan_pass_order(const loader_plan *plan, uint64_t seed, int64_t pass, bool shuffle, int *order);
/* A 64-bit seed for one (seed, pass, shard, stream) combination. */
uint64_t loader_mix_seed(uint64_t seed, int64_t pass, int shard, uint64_t stream);

#endif
