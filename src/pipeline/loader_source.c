/* The trainer's batch-source protocol over the streaming loader. */
#include "pipeline/loader_source.h"
#include "ftl/image.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>

ftl_status loader_source_open(loader_source *s, const ftl_loader_options *o, ftl_model *backbone,
                              const ftl_nn_preprocess *preprocess, int64_t dim) {
    memset(s, 0, sizeof *s);
    s->options = *o;
    s->sources = ftl_xcalloc((size_t)o->source_count, sizeof *s->sources);
    for (int i = 0; i < o->source_count; i++) s->sources[i] = ftl_strdup(o->sources[i]);
    s->options.sources = (const char *const *)s->sources;
    s->options.resume_position = NULL;
    s->options.resume_position_size = 0;
    s->backbone = backbone;
    s->preprocess = preprocess;
    s->dim = dim;
    ftl_status st = ftl_loader_open(&s->options, &s->loader);
    if (st == FTL_OK && !backbone && ftl_loader_row_bytes(s->loader) != dim * 4)
        st = ftl_fail(FTL_E_FORMAT, "%s: feature rows have %lld bytes, expected %lld floats", o->sources[0],
                      (long long)ftl_loader_row_bytes(s->loader), (long long)dim);
    if (st == FTL_OK && backbone)
        s->features = ftl_xmalloc((size_t)o->batch_size * (size_t)dim * sizeof(float));
    if (st != FTL_OK) loader_source_close(s);
    return st;
}

void loader_source_close(loader_source *s) {
    ftl_loader_close(s->loader);
    for (int i = 0; s->sources && i < s->options.source_count; i++) free(s->sources[i]);
    free(s->sources);
    free(s->features);
    free(s->images);
    memset(s, 0, sizeof *s);
}

/* Fetches the next loader batch (and runs the backbone on it in per-batch mode). */
static ftl_status fetch(loader_source *s, double *backbone_seconds) {
    FTL_TRY(ftl_loader_next(s->loader, &s->batch));
    if (s->batch.rows == 0) return ftl_fail(FTL_E_INTERNAL, "the loader ended; it should stream endlessly");
    s->offset = 0;
    s->have_batch = true;
    if (s->backbone) {
        double t0 = ftl_now();
        const uint8_t *images = s->batch.values;
        int size = ftl_loader_image_size(s->loader);
        if (s->flip || s->mirror_all) {
            size_t bytes = (size_t)s->batch.row_bytes;
            s->images = ftl_xrealloc(s->images, (size_t)s->batch.rows * bytes);
            memcpy(s->images, s->batch.values, (size_t)s->batch.rows * bytes);
            for (int64_t i = 0; i < s->batch.rows; i++)
                if (s->mirror_all || ftl_augment_flip_draw(s->flip_seed, s->batch.row_pass[i], s->batch.row_index[i]))
                    ftl_image_flip_horizontal(s->images + (size_t)i * bytes, s->images + (size_t)i * bytes, 1, size);
            images = s->images;
        }
        FTL_TRY(ftl_model_extract_features(s->backbone, s->preprocess, images, (int)s->batch.rows, size, s->features));
        *backbone_seconds += ftl_now() - t0;
    }
    return FTL_OK;
}

static ftl_status source_begin_pass(void *ctx) {
    loader_source *s = ctx;
    /* A pass starts with the loader's next epoch: skip what is left of an unfinished one. */
    double ignored = 0;
    while (s->have_batch && !s->batch.last_in_epoch) FTL_TRY(fetch(s, &ignored));
    s->have_batch = false;
    s->pass_ended = false;
    return FTL_OK;
}

static ftl_status source_next_batch(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    loader_source *s = ctx;
    memset(out, 0, sizeof *out);
    if (!wrap && s->pass_ended) return FTL_OK; /* the end of the pass: count 0 */
    double backbone = 0;
    if (!s->have_batch || s->offset == s->batch.rows) {
        if (s->have_batch && s->batch.last_in_epoch && !wrap) {
            s->pass_ended = true;
            return FTL_OK;
        }
        FTL_TRY(fetch(s, &backbone));
    }
    int64_t n = s->batch.rows - s->offset;
    if ((size_t)n > max_count) n = (int64_t)max_count;
    const float *rows = s->backbone ? s->features : (const float *)s->batch.values;
    out->features = rows + s->offset * s->dim;
    out->labels = s->batch.labels + s->offset;
    out->count = (size_t)n;
    /* Every rank streams its own shard with equal batches (Horovod's way): the global batch is
     * this batch on each of the ranks, this rank's rows at positions shard x n + i. */
    int shards = s->options.num_shards > 0 ? s->options.num_shards : 1;
    out->global_count = (size_t)n * (size_t)shards;
    out->position_base = (int64_t)s->options.shard * n;
    out->backbone_seconds = backbone;
    s->offset += n;
    if (!wrap && s->offset == s->batch.rows && s->batch.last_in_epoch) s->pass_ended = true;
    return FTL_OK;
}

static ftl_status source_save_position(void *ctx, uint8_t **blob, size_t *size) {
    loader_source *s = ctx;
    if (s->have_batch && s->offset != s->batch.rows)
        return ftl_fail(FTL_E_INTERNAL, "cannot save the data position in the middle of a batch");
    return ftl_loader_position_save(s->loader, blob, size);
}

static ftl_status source_restore_position(void *ctx, const uint8_t *blob, size_t size) {
    loader_source *s = ctx;
    ftl_loader_close(s->loader);
    s->loader = NULL;
    s->have_batch = s->pass_ended = false;
    ftl_loader_options o = s->options;
    o.resume_position = blob;
    o.resume_position_size = size;
    return ftl_loader_open(&o, &s->loader);
}

void loader_source_set_mirror_all(loader_source *s) { s->mirror_all = true; }

void loader_source_set_flip(loader_source *s, uint64_t seed) {
    s->flip = true;
    s->flip_seed = seed;
}

ftl_batch_source loader_source_as_batch_source(loader_source *s) {
    int shards = s->options.num_shards > 0 ? s->options.num_shards : 1;
    return (ftl_batch_source){.ctx = s, .size = ftl_loader_epoch_rows(s->loader) * shards,
                              .begin_pass = source_begin_pass, .next_batch = source_next_batch,
                              .save_position = source_save_position, .restore_position = source_restore_position};
}
