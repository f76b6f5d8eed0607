/* The feature cache: with a frozen backbone every epoch sees the same features, so each image
 * goes through the backbone once (ftl embed) and training epochs read the stored vectors. The
 * file name is a key over everything that determines the features (dataset fingerprint,
 * backbone sha256, feature tensor, preprocessing, precision, columns), and the file's own
 * metadata is checked again before reuse: a stale cache is rebuilt, never silently reused. */
#ifndef FTL_PIPELINE_FEATURE_CACHE_H
#define FTL_PIPELINE_FEATURE_CACHE_H

#include "ftl/embed.h"
#include "ftl/nn.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct feature_cache_request {
    const char *const *sources;       /* the image dataset */
    int source_count;
    const char *what;                 /* "train" / "val", for messages */
    const ftl_embed_options *embed;   /* backbone, preprocessing, precision, columns, batch, threads */
    const ftl_model *model;           /* the loaded backbone (sha256, feature tensor, input geometry) */
    const char *cache_dir;
} feature_cache_request;

/* The path of an up-to-date features file for the request (malloc'd), embedding first when
 * there is none or it is stale. *reused tells which. */
ftl_status feature_cache_get(const feature_cache_request *r, char **path, bool *reused);
/* The same without embedding: *path is NULL when the cache has no valid file. */
ftl_status feature_cache_lookup(const feature_cache_request *r, char **path);

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
