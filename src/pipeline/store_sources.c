/* Batch sources over a rank's cached features: global order for training, file order for validation. */
#include "pipeline/store_sources.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static void reserve(float **features, int32_t **labels, size_t *capacity, size_t want, int64_t dim) {
    if (want <= *capacity) return;
    free(*features);
    free(*labels);
    *features = ftl_xmalloc(want * (size_t)dim * sizeof(float) + 1);
    *labels = ftl_xmalloc(want * sizeof(int32_t) + 1);
    *capacity = want;
}

/* ---------------------------------------------------------------- global order */

ftl_status global_order_source_init(global_order_source *s, const ftl_loader_options *o, feature_store *store,
                                    feature_store *flipped, uint64_t flip_seed, int64_t total_rows, int world_size) {
    memset(s, 0, sizeof *s);
    s->order_options = *o;
    s->order_options.shard = 0;
    s->order_options.num_shards = 1; /* the single-process order, whatever the rank count */
    s->order_options.row_begin = s->order_options.row_end = 0;
    s->sources = ftl_xcalloc((size_t)o->source_count, sizeof *s->sources);
    for (int i = 0; i < o->source_count; i++) s->sources[i] = ftl_strdup(o->sources[i]);
    s->order_options.sources = (const char *const *)s->sources;
    s->store = store;
    s->flipped = flipped;
    s->flip_seed = flip_seed;
    s->total_rows = total_rows;
    s->world_size = world_size > 0 ? world_size : 1;
    s->pass = -1;
    return FTL_OK;
}

void global_order_source_free(global_order_source *s) {
    for (int i = 0; s->sources && i < s->order_options.source_count; i++) free(s->sources[i]);
    free(s->sources);
    free(s->sequence);
    free(s->batch_features);
    free(s->batch_labels);
    free(s->batch_positions);
    memset(s, 0, sizeof *s);
}

static ftl_status load_pass(global_order_source *s, int64_t pass) {
    free(s->sequence);
    s->sequence = NULL;
    FTL_TRY(ftl_loader_pass_rows(&s->order_options, pass, &s->sequence, &s->sequence_length));
    for (int64_t i = 0; i < s->sequence_length; i++)
        if (s->sequence[i] < 0 || s->sequence[i] >= s->total_rows)
            return ftl_fail(FTL_E_FORMAT, "the feature cache has %lld rows but the dataset has row %lld: rebuild the cache",
                            (long long)s->total_rows, (long long)s->sequence[i]);
    s->pass = pass;
    s->cursor = 0;
    return FTL_OK;
}

static ftl_status global_begin_pass(void *ctx) {
    global_order_source *s = ctx;
    return load_pass(s, s->pass + 1);
}

static ftl_status global_next_batch(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    global_order_source *s = ctx;
    memset(out, 0, sizeof *out);
    size_t global = max_count * (size_t)s->world_size;
    if (global > UINT32_MAX) return ftl_fail(FTL_E_INVALID_ARG, "a global batch of %zu rows is too large", global);
    reserve(&s->batch_features, &s->batch_labels, &s->batch_capacity, global, s->store->dim);
    if (s->positions_capacity < s->batch_capacity) {
        free(s->batch_positions);
        s->batch_positions = ftl_xmalloc(s->batch_capacity * sizeof(uint32_t) + 1);
        s->positions_capacity = s->batch_capacity;
    }
    size_t taken = 0, n = 0;
    int64_t dim = s->store->dim;
    while (taken < global) {
        if (s->pass < 0 || s->cursor >= s->sequence_length) {
            if (!wrap) break;
            FTL_TRY(load_pass(s, s->pass + 1));
            if (s->sequence_length == 0) return ftl_fail(FTL_E_INVALID_ARG, "the training data is empty");
        }
        int64_t row = s->sequence[s->cursor++];
        if (row >= s->store->begin && row < s->store->end) {
            const float *f;
            int32_t label;
            bool flip = s->flipped && ftl_augment_flip_draw(s->flip_seed, s->pass, row);
            FTL_TRY(feature_store_get(flip ? s->flipped : s->store, row, &f, &label));
            memcpy(s->batch_features + n * (size_t)dim, f, (size_t)dim * sizeof(float));
            s->batch_labels[n] = label;
            s->batch_positions[n] = (uint32_t)taken;
            n++;
        }
        taken++;
    }
    out->features = s->batch_features;
    out->labels = s->batch_labels;
    out->count = n;
    out->global_count = taken;
    out->positions = s->batch_positions;
    return FTL_OK;
}

enum { POSITION_WORDS = 4 };
static const uint64_t POSITION_MAGIC = 0x32726f6d656d6c66ull; /* "flmemor2" */

static ftl_status global_save_position(void *ctx, uint8_t **blob, size_t *size) {
    global_order_source *s = ctx;
    uint64_t w[POSITION_WORDS] = {POSITION_MAGIC, (uint64_t)s->total_rows, (uint64_t)s->pass, (uint64_t)s->cursor};
    *blob = ftl_xmalloc(sizeof w);
    memcpy(*blob, w, sizeof w);
    *size = sizeof w;
    return FTL_OK;
}

static ftl_status global_restore_position(void *ctx, const uint8_t *blob, size_t size) {
    global_order_source *s = ctx;
    uint64_t w[POSITION_WORDS];
    if (size != sizeof w) return ftl_fail(FTL_E_FORMAT, "data position has %zu bytes, expected %zu", size, sizeof w);
    memcpy(w, blob, sizeof w);
    if (w[0] != POSITION_MAGIC) return ftl_fail(FTL_E_FORMAT, "the data position is not from the feature-cache source");
    if (w[1] != (uint64_t)s->total_rows)
        return ftl_fail(FTL_E_INVALID_ARG, "the checkpoint was taken with %llu examples; this data has %lld",
                        (unsigned long long)w[1], (long long)s->total_rows);
    int64_t pass = (int64_t)w[2];
    if (pass < 0) {
        s->pass = -1;
        s->cursor = 0;
        return FTL_OK;
    }
    if (pass > INT32_MAX) return ftl_fail(FTL_E_FORMAT, "data position pass %lld is out of range", (long long)pass);
    FTL_TRY(load_pass(s, pass));
    if (w[3] > (uint64_t)s->sequence_length) return ftl_fail(FTL_E_FORMAT, "data position cursor past the pass");
    s->cursor = (int64_t)w[3];
    return FTL_OK;
}

ftl_batch_source global_order_source_as_batch_source(global_order_source *s) {
    int64_t *rows = NULL, n = 0;
    int64_t size = 0;
    if (ftl_loader_pass_rows(&s->order_options, 0, &rows, &n) == FTL_OK) size = n;
    free(rows);
    return (ftl_batch_source){.ctx = s, .size = size, .global_order = true, .begin_pass = global_begin_pass,
                              .next_batch = global_next_batch, .save_position = global_save_position,
                              .restore_position = global_restore_position};
}

/* ---------------------------------------------------------------- file order */

void file_order_source_init(file_order_source *s, feature_store *store) {
    memset(s, 0, sizeof *s);
    s->store = store;
    s->cursor = store->begin;
}

void file_order_source_free(file_order_source *s) {
    free(s->batch_features);
    free(s->batch_labels);
    memset(s, 0, sizeof *s);
}

static ftl_status file_begin_pass(void *ctx) {
    file_order_source *s = ctx;
    s->cursor = s->store->begin;
    return FTL_OK;
}

static ftl_status file_next_batch(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    (void)wrap;
    file_order_source *s = ctx;
    memset(out, 0, sizeof *out);
    reserve(&s->batch_features, &s->batch_labels, &s->batch_capacity, max_count, s->store->dim);
    size_t n = 0;
    int64_t dim = s->store->dim;
    while (n < max_count && s->cursor < s->store->end) {
        const float *f;
        int32_t label;
        FTL_TRY(feature_store_get(s->store, s->cursor++, &f, &label));
        memcpy(s->batch_features + n * (size_t)dim, f, (size_t)dim * sizeof(float));
        s->batch_labels[n++] = label;
    }
    out->features = s->batch_features;
    out->labels = s->batch_labels;
    out->count = n;
    out->global_count = n; /* local metrics only: the caller sums them over ranks */
    return FTL_OK;
}

ftl_batch_source file_order_source_as_batch_source(file_order_source *s) {
    return (ftl_batch_source){.ctx = s, .size = s->store->end - s->store->begin, .begin_pass = file_begin_pass,
                              .next_batch = file_next_batch};
}
