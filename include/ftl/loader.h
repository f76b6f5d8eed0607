/* ftl public API: the streaming input pipeline (what Petastorm's make_batch_reader does for the
 * article). Reads Parquet datasets larger than memory as batches of fixed-size rows (a label
 * and a value: image bytes or feature vectors), sharded across ranks, shuffled, prefetched by
 * background threads, optionally cached on local disk, and resumable.
 *
 * Rules (documented in docs/LOADER.md):
 * - Sharding: rows are numbered in file order across all files; shard k of n owns rows
 *   [floor(k*N/n), floor((k+1)*N/n)): disjoint, complete, sizes differ by at most one row. A
 *   shard reads only the row groups overlapping its range, so fewer row groups than shards works.
 * - Equal batches: with equal_batches (training), every shard uses floor(N/n) rows per epoch and
 *   yields the same number of batches, so ranks never wait on each other at an epoch's end.
 * - Order: each pass over the shard visits its row-group pieces in a seeded random order, and rows
 *   go through a shuffle buffer (like tf.data's shuffle(buffer, seed)); the sequence is a pure
 *   function of (data, seed, shard), whatever the thread count.
 * - Epochs: with steps_per_epoch = 0 an epoch is one pass; otherwise the stream is endless and an
 *   epoch is steps_per_epoch batches (Keras' steps_per_epoch with an infinite reader). */
#ifndef FTL_LOADER_H
#define FTL_LOADER_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct ftl_loader ftl_loader;

#define FTL_LOADER_MAX_IMAGE_SIZE 4096  /* S; as ftl prep's --size */
#define FTL_LOADER_MAX_BATCH 65536

typedef struct ftl_loader_options {
    const char *const *sources;  /* Parquet files, or folders of part files (*.parquet) */
    int source_count;
    const char *value_column;    /* default "image" */
    const char *label_column;    /* default "label" */
    int label_offset;            /* added to every label (-1: Spark's 1-based file_to_label, as the article subtracts 1) */
    const char *path_column;     /* NULL: not read; e.g. "path" to get each row's path */
    bool path_optional;          /* a missing path column is not an error (batches get no paths) */
    int image_size;              /* S when the metadata has no ftl.image_size (rows are S*S*3 bytes); 0 = auto */
    int shard, num_shards;       /* default 0 of 1 */
    int64_t row_begin, row_end;  /* row_end > 0: this reader owns global rows [row_begin, row_end) instead of a shard */
    int batch_size;              /* default 16 */
    bool drop_remainder;         /* no short last batch in an epoch */
    bool shuffle;                /* seeded piece order + shuffle buffer (default on) */
    int64_t shuffle_buffer;      /* rows; default 400 as in the article; 0 or 1 = piece order only */
    uint64_t seed;               /* default 42 */
    int64_t epochs;              /* 0 = endless */
    int64_t steps_per_epoch;     /* 0 = an epoch is one pass over the shard */
    bool equal_batches;          /* trim every shard to the smallest shard's rows (training) */
    int threads;                 /* background readers; 0 = 1 for pixel rows, one per core (ftl_cpu_count) for a
                                    dataset that keeps encoded images (they are decoded on these threads) */
    int queue_row_groups;        /* decoded row-group pieces in flight; 0 = 2 x threads */
    const char *cache_dir;       /* local-disk cache of decoded row groups; NULL = none */
    int64_t cache_size_limit;    /* bytes; 0 = unlimited */
    const uint8_t *resume_position;  /* from ftl_loader_position_save; NULL = start */
    size_t resume_position_size;
} ftl_loader_options;

void ftl_loader_options_init(ftl_loader_options *options);

typedef struct ftl_batch {
    int64_t rows;              /* 0: the loader has finished its epochs */
    int64_t epoch, step;       /* 0-based epoch, and batch index within it */
    bool last_in_epoch;
    const int32_t *labels;     /* rows */
    const int64_t *row_index;  /* rows: each row's number in the dataset (all sources, 0-based) */
    const int64_t *row_pass;   /* rows: the pass over the data it was drawn in (0-based) */
    const uint8_t *values;     /* rows x row_bytes */
    int64_t row_bytes;
    const char *const *paths;  /* rows, when path_column was given; else NULL */
} ftl_batch;

typedef struct ftl_loader_stats {
    double wait_seconds;       /* time ftl_loader_next spent waiting for data */
    int64_t batches, rows;
    int64_t row_groups_read;   /* decoded row groups (from source or cache) */
    int64_t bytes_read;        /* value bytes decoded */
    int64_t cache_hits, cache_misses, cache_bytes;
} ftl_loader_stats;

/* Opens the sources, checks columns and row sizes, plans the shard and starts the background
 * readers. Errors name the file (and row group / column). */
ftl_status ftl_loader_open(const ftl_loader_options *options, ftl_loader **out);
/* The next batch (valid until the next call or close). A row whose value has the wrong length,
 * a corrupt page or a read error is an error naming the file, row group and row/column. */
ftl_status ftl_loader_next(ftl_loader *loader, ftl_batch *batch);
void ftl_loader_close(ftl_loader *loader);

int64_t ftl_loader_batches_per_epoch(const ftl_loader *loader);
int64_t ftl_loader_total_rows(const ftl_loader *loader);  /* all shards */
int64_t ftl_loader_shard_rows(const ftl_loader *loader);  /* this shard */
int64_t ftl_loader_shard_begin(const ftl_loader *loader); /* its first global row */
int64_t ftl_loader_epoch_rows(const ftl_loader *loader);  /* rows one pass delivers (after the equal-batches trim) */
int64_t ftl_loader_row_bytes(const ftl_loader *loader);
int ftl_loader_image_size(const ftl_loader *loader);      /* S, or 0 when rows are not images */
/* Whether every file's path column is a STRING (files without one count as such): prep writes
 * file names that are not UTF-8 as plain bytes, and a copy of the paths must keep them so. */
bool ftl_loader_paths_are_text(const ftl_loader *loader);
/* Key-value metadata of the first source file (e.g. ftl.classes); NULL when absent. */
const char *ftl_loader_metadata(const ftl_loader *loader, const char *key);
void ftl_loader_stats_get(const ftl_loader *loader, ftl_loader_stats *stats);

/* The global row indices (file order over all sources) that pass `pass` (0-based) of a loader
 * with these options delivers, in delivery order: the same sequence ftl_loader_next hands out,
 * computed from the files' footers alone. Sources that keep rows in memory (the feature cache)
 * use it to visit rows exactly as the streaming loader would. *rows is malloc'd. */
ftl_status ftl_loader_pass_rows(const ftl_loader_options *options, int64_t pass, int64_t **rows, int64_t *count);

/* The position after the last batch returned, as an opaque blob (malloc'd, caller frees) that
 * ftl_loader_options.resume_position accepts; resuming yields exactly the remaining sequence.
 * The blob records the plan (rows, shard, batch, seed, buffer) and is refused if they differ. */
ftl_status ftl_loader_position_save(const ftl_loader *loader, uint8_t **blob, size_t *size);

/* --augment flip: whether dataset row `row` is mirrored left-right in pass `pass` (0-based) of a
 * run seeded with `seed`; about half the rows each pass, independently per pass. */
bool ftl_augment_flip_draw(uint64_t seed, int64_t pass, int64_t row);

#endif
