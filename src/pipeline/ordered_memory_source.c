/* In-memory features in the streaming loader's order. */
#include "pipeline/ordered_memory_source.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdlib.h>
#include <string.h>

ftl_status ordered_memory_source_init(ordered_memory_source *s, const ftl_loader_options *o, const float *features,
                                      const int32_t *labels, int64_t total_rows, int64_t dim) {
    memset(s, 0, sizeof *s);
    s->order_options = *o;
    s->sources = ftl_xcalloc((size_t)o->source_count, sizeof *s->sources);
    for (int i = 0; i < o->source_count; i++) s->sources[i] = ftl_strdup(o->sources[i]);
    s->order_options.sources = (const char *const *)s->sources;
    s->features = features;
    s->labels = labels;
    s->total_rows = total_rows;
    s->dim = dim;
    s->pass = -1;
    return FTL_OK;
}

void ordered_memory_source_free(ordered_memory_source *s) {
    for (int i = 0; s->sources && i < s->order_options.source_count; i++) free(s->sources[i]);
    free(s->sources);
    free(s->sequence);
    free(s->batch_features);
    free(s->batch_labels);
    memset(s, 0, sizeof *s);
}

static ftl_status load_pass(ordered_memory_source *s, int64_t pass) {
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

static ftl_status begin_pass(void *ctx) {
    ordered_memory_source *s = ctx;
    return load_pass(s, s->pass + 1);
}

static ftl_status next_batch(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    ordered_memory_source *s = ctx;
    memset(out, 0, sizeof *out);
    if (max_count > s->batch_capacity) {
        free(s->batch_features);
        free(s->batch_labels);
        s->batch_features = ftl_xmalloc(max_count * (size_t)s->dim * sizeof(float));
        s->batch_labels = ftl_xmalloc(max_count * sizeof(int32_t));
        s->batch_capacity = max_count;
    }
    size_t n = 0;
    while (n < max_count) {
        if (s->pass < 0 || s->cursor >= s->sequence_length) {
            if (!wrap) break;
            FTL_TRY(load_pass(s, s->pass + 1));
            if (s->sequence_length == 0) return ftl_fail(FTL_E_INVALID_ARG, "the training data is empty");
        }
        int64_t row = s->sequence[s->cursor++];
        memcpy(s->batch_features + n * (size_t)s->dim, s->features + row * s->dim, (size_t)s->dim * sizeof(float));
        s->batch_labels[n] = s->labels[row];
        n++;
    }
    out->features = s->batch_features;
    out->labels = s->batch_labels;
    out->count = n;
    return FTL_OK;
}

enum { POSITION_WORDS = 4 };
static const uint64_t POSITION_MAGIC = 0x31726f6d656d6c66ull; /* "flmemor1" */

static ftl_status save_position(void *ctx, uint8_t **blob, size_t *size) {
    ordered_memory_source *s = ctx;
    uint64_t w[POSITION_WORDS] = {POSITION_MAGIC, (uint64_t)s->total_rows, (uint64_t)s->pass, (uint64_t)s->cursor};
    *blob = ftl_xmalloc(sizeof w);
    memcpy(*blob, w, sizeof w);
    *size = sizeof w;
    return FTL_OK;
}

static ftl_status restore_position(void *ctx, const uint8_t *blob, size_t size) {
    ordered_memory_source *s = ctx;
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
    FTL_TRY(load_pass(s, pass));
    if (w[3] > (uint64_t)s->sequence_length) return ftl_fail(FTL_E_FORMAT, "data position cursor past the pass");
    s->cursor = (int64_t)w[3];
    return FTL_OK;
}

ftl_batch_source ordered_memory_source_as_batch_source(ordered_memory_source *s) {
    int64_t *rows = NULL, n = 0;
    int64_t size = 0;
    if (ftl_loader_pass_rows(&s->order_options, 0, &rows, &n) == FTL_OK) size = n;
    free(rows);
    return (ftl_batch_source){.ctx = s, .size = size, .begin_pass = begin_pass, .next_batch = next_batch,
                              .save_position = save_position, .restore_position = restore_position};
}
