/* The trainer's batch sources over one rank's cached features (a feature_store):
 * - global order (training): the rows of every global batch are the streaming loader's
 *   single-process order over the whole image dataset (ftl_loader_pass_rows with one shard), so
 *   they depend only on (data, seed, epoch). Each rank hands out the rows of each global batch
 *   that it holds, with their positions in it; any number of ranks sees the same global batches
 *   and trains the same model, and the position (pass, cursor) resumes under any rank count.
 *   With one rank this is exactly the order --no-feature-cache trains in.
 * - file order (validation): this rank's rows, once each; the metrics are summed over ranks. */
#ifndef FTL_PIPELINE_STORE_SOURCES_H
#define FTL_PIPELINE_STORE_SOURCES_H

#include "ftl/loader.h"
#include "ftl/train.h"
#include "pipeline/feature_store.h"

typedef struct global_order_source {
    ftl_loader_options order_options;  /* the image loader whose order is followed (sources copied) */
    char **sources;
    feature_store *store;              /* this rank's rows; borrowed */
    feature_store *flipped;            /* the same rows mirrored (--augment flip), or NULL; borrowed */
    uint64_t flip_seed;                /* ftl_augment_flip_draw picks a row's orientation per pass */
    int world_size;
    int64_t total_rows;
    int64_t *sequence;                 /* rows of the current pass */
    int64_t sequence_length, cursor, pass; /* pass: index of the current pass, -1 before the first */
    float *batch_features;
    int32_t *batch_labels;
    uint32_t *batch_positions;
    size_t batch_capacity, positions_capacity;
} global_order_source;

/* flipped: NULL, or the mirrored images' features of the same rows, drawn per (flip_seed, pass, row). */
ftl_status global_order_source_init(global_order_source *s, const ftl_loader_options *order_options,
                                    feature_store *store, feature_store *flipped, uint64_t flip_seed, int64_t total_rows,
                                    int world_size);
void global_order_source_free(global_order_source *s);
ftl_batch_source global_order_source_as_batch_source(global_order_source *s);

typedef struct file_order_source {
    feature_store *store;
    int64_t cursor;
    float *batch_features;
    int32_t *batch_labels;
    size_t batch_capacity;
} file_order_source;

void file_order_source_init(file_order_source *s, feature_store *store);
void file_order_source_free(file_order_source *s);
ftl_batch_source file_order_source_as_batch_source(file_order_source *s);

#endif
