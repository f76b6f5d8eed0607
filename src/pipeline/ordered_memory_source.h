/* A batch source over feature vectors held in memory that visits rows in exactly the order the
 * streaming loader would deliver them from the image dataset (ftl_loader_pass_rows): training
 * from the feature cache then sees the same batches as training with the backbone recomputed on
 * every batch (--no-feature-cache), so both give the same model up to float rounding. */
#ifndef FTL_PIPELINE_ORDERED_MEMORY_SOURCE_H
#define FTL_PIPELINE_ORDERED_MEMORY_SOURCE_H

#include "ftl/loader.h"
#include "ftl/train.h"

typedef struct ordered_memory_source {
    ftl_loader_options order_options;  /* the image loader whose order is followed (sources copied) */
    char **sources;
    const float *features;             /* [total_rows x dim], dataset (file) order; borrowed */
    const int32_t *labels;             /* [total_rows] */
    int64_t total_rows, dim;
    int64_t *sequence;                 /* rows of the current pass */
    int64_t sequence_length, cursor, pass; /* pass: index of the current pass, -1 before the first */
    float *batch_features;
    int32_t *batch_labels;
    size_t batch_capacity;
} ordered_memory_source;

ftl_status ordered_memory_source_init(ordered_memory_source *s, const ftl_loader_options *order_options,
                                      const float *features, const int32_t *labels, int64_t total_rows, int64_t dim);
void ordered_memory_source_free(ordered_memory_source *s);
ftl_batch_source ordered_memory_source_as_batch_source(ordered_memory_source *s);

#endif
