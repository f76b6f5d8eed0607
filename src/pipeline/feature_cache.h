/* The feature cache: with a frozen backbone every epoch sees the same features, so each image
 * goes through the backbone once (ftl embed) and training epochs read the stored vectors. The
 * file name is a key over everything that determines the features (dataset fingerprint,
 * backbone sha256, feature tensor, preprocessing, precision, columns), and the file's own
 * metadata is checked again before reuse: a stale cache is rebuilt, never silently reused. So are
 * the page CRCs of the rows a run takes from it: a part damaged on disk is rebuilt too. */
#ifndef FTL_PIPELINE_FEATURE_CACHE_H
#define FTL_PIPELINE_FEATURE_CACHE_H

#include "ftl/embed.h"
#include "ftl/nn.h"
#include "ftl/dist.h"
#include "pipeline/feature_store.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct feature_cache_request {
    const char *const *sources;       /* the image dataset */
    int source_count;
    const char *what;                 /* "train" / "val", for messages */
    const ftl_embed_options *embed;   /* backbone, preprocessing, precision, columns, batch, threads */
    const ftl_model *model;           /* the loaded backbone (sha256, feature tensor, input geometry) */
    const char *cache_dir;
    int64_t row_begin, row_end;       /* the rows this rank needs; row_end 0: all of them */
    const ftl_collectives *collectives; /* embedding is announced as a long phase (stall inspector) */
    const char *fingerprint;          /* ftl_dataset_fingerprint of sources if already computed, else NULL */
    bool flipped;                     /* the images mirrored left-right (--augment flip's other orientation) */
} feature_cache_request;

/* The cache is a set of part files per key, each holding a contiguous range of the dataset's rows
 * ("NAME-KEY.rows-B-E.features.parquet"): a rank's part under N ranks, or the whole set under one.
 * A request is served from the parts that hold its rows, whatever rank count wrote them; the
 * missing rows are embedded into a new part, with a message saying which and why. */
typedef struct feature_cache_parts {
    feature_part *parts;              /* sorted by begin; they cover the requested rows */
    int count;
    int64_t total_rows;               /* rows of the whole dataset */
    int64_t begin, end;               /* the rows requested */
    bool reused;                      /* nothing had to be embedded */
} feature_cache_parts;

ftl_status feature_cache_get(const feature_cache_request *r, feature_cache_parts *out);
/* The same without embedding: out->count is 0 when the cache does not hold every requested row. */
ftl_status feature_cache_lookup(const feature_cache_request *r, feature_cache_parts *out);
void feature_cache_parts_free(feature_cache_parts *p);
/* A cheap identity of a dataset (its files' names, sizes and row counts), for checking that every
 * rank sees the same data at start. malloc'd. */
char *dataset_quick_identity(const char *const *sources, int source_count);

/* Features of a file in memory, in file order. */
typedef struct feature_table {
    int64_t rows, dim;
    float *features;   /* rows x dim */
    int32_t *labels;
    char *classes_json; /* ftl.classes of the file, or NULL */
} feature_table;

ftl_status feature_table_load(const char *path, feature_table *t);
void feature_table_free(feature_table *t);
/* Rows and dimension from the footer alone (to decide between memory and streaming). */
ftl_status feature_file_shape(const char *path, int64_t *rows, int64_t *dim);

#endif
