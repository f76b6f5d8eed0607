/* Batch sources for the trainer that read through the streaming loader: feature files larger
 * than memory, or images run through the backbone on every batch (--no-feature-cache, the
 * article's way). They implement the trainer's ftl_batch_source protocol on top of the loader's
 * own epochs: a pass of the trainer is a pass of the loader. */
#ifndef FTL_PIPELINE_LOADER_SOURCE_H
#define FTL_PIPELINE_LOADER_SOURCE_H

#include "ftl/loader.h"
#include "ftl/nn.h"
#include "ftl/train.h"

typedef struct loader_source {
    ftl_loader_options options;   /* kept to reopen the loader when a position is restored */
    char **sources;               /* owned copies of options.sources */
    ftl_loader *loader;
    /* per-batch backbone (NULL when the rows are already features) */
    ftl_model *backbone;
    const ftl_nn_preprocess *preprocess;
    int64_t dim;
    float *features;              /* the current loader batch as features */
    bool flip;                    /* --augment flip: mirror the rows ftl_augment_flip_draw picks first */
    uint64_t flip_seed;
    bool mirror_all;              /* --tta flip's validation: every row mirrored */
    uint8_t *images;              /* the batch with those rows mirrored */
    /* the current loader batch and how much of it was handed out */
    ftl_batch batch;
    int64_t offset;
    bool pass_ended;              /* the last batch of a pass was fully handed out */
    bool have_batch;
} loader_source;

/* Opens the loader (options are copied). backbone NULL: rows are float32 feature vectors of dim
 * `dim`; else rows are images that go through backbone/preprocess and come out as dim floats. */
ftl_status loader_source_open(loader_source *s, const ftl_loader_options *options, ftl_model *backbone,
                              const ftl_nn_preprocess *preprocess, int64_t dim);
/* --augment flip (per-batch backbone only): each row mirrored when ftl_augment_flip_draw(seed, its
 * pass, its dataset row) says so, the draw the feature cache makes. */
void loader_source_set_flip(loader_source *s, uint64_t seed);
/* Every row mirrored (per-batch backbone only): the mirror image of each validation image, for --tta flip. */
void loader_source_set_mirror_all(loader_source *s);
void loader_source_close(loader_source *s);
ftl_batch_source loader_source_as_batch_source(loader_source *s);

#endif
