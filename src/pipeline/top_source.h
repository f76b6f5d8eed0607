/* Phase 1 of a fine-tuning run on the frozen bottom's boundary rows: the features are what the
 * cut's frozen top (an inference model, ftl_model_options.top_of) makes of them, so every image
 * passes the bottom once per recipe. Either all at once into memory (the top's cost once), or per
 * batch over another batch source of boundary rows (rows too many for memory, --no-feature-cache). */
#ifndef FTL_PIPELINE_TOP_SOURCE_H
#define FTL_PIPELINE_TOP_SOURCE_H

#include "ftl/nn.h"
#include "ftl/train.h"
#include "pipeline/feature_store.h"

/* out: an in-memory store of the same rows and labels as `boundary`, each row run through `top`. */
ftl_status top_features_store(feature_store *boundary, ftl_model *top, feature_store *out);

/* A batch source whose batches are those of `inner` (boundary rows) run through `top`. */
typedef struct top_source {
    ftl_batch_source inner;
    ftl_model *top;          /* borrowed */
    int64_t dim;
    float *features;
    size_t capacity;         /* rows */
} top_source;

void top_source_init(top_source *s, ftl_batch_source inner, ftl_model *top);
void top_source_free(top_source *s);
ftl_batch_source top_source_as_batch_source(top_source *s);

#endif
