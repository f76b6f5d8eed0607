/* The frozen top of a cut over boundary rows: phase 1's features in a fine-tuning run. */
#include "pipeline/top_source.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/timing.h"

#include <stdlib.h>
#include <string.h>

enum { TOP_CHUNK_ROWS = 64 };

ftl_status top_features_store(feature_store *boundary, ftl_model *top, feature_store *out) {
    const ftl_model_info *info = ftl_model_get_info(top);
    memset(out, 0, sizeof *out);
    if (boundary->end > boundary->begin && boundary->dim != info->input_floats)
        return ftl_fail(FTL_E_INTERNAL, "the boundary rows have %lld floats, the frozen top takes %lld",
                        (long long)boundary->dim, info->input_floats);
    int64_t rows = boundary->end - boundary->begin, dim = info->feature_dim;
    out->begin = boundary->begin;
    out->end = boundary->end;
    out->dim = dim;
    out->in_memory = true;
    out->features = malloc((size_t)(rows * dim) * sizeof(float) + 1);
    out->labels = malloc((size_t)rows * sizeof(int32_t) + 1);
    float *chunk = malloc((size_t)(TOP_CHUNK_ROWS * boundary->dim) * sizeof(float) + 1);
    ftl_status st = out->features && out->labels && chunk ? FTL_OK
                    : ftl_fail(FTL_E_NOMEM, "out of memory for %lld rows of %lld features", (long long)rows, (long long)dim);
    for (int64_t at = 0; st == FTL_OK && at < rows; at += TOP_CHUNK_ROWS) {
        int64_t n = rows - at < TOP_CHUNK_ROWS ? rows - at : TOP_CHUNK_ROWS;
        for (int64_t i = 0; st == FTL_OK && i < n; i++) {
            const float *row;
            st = feature_store_get(boundary, boundary->begin + at + i, &row, &out->labels[at + i]);
            if (st == FTL_OK) memcpy(chunk + i * boundary->dim, row, (size_t)boundary->dim * sizeof(float));
        }
        if (st == FTL_OK) st = ftl_model_run(top, chunk, (int)n, out->features + at * dim);
    }
    free(chunk);
    if (st != FTL_OK) feature_store_close(out);
    return st;
}

void top_source_init(top_source *s, ftl_batch_source inner, ftl_model *top) {
    memset(s, 0, sizeof *s);
    s->inner = inner;
    s->top = top;
    s->dim = ftl_model_get_info(top)->feature_dim;
}

void top_source_free(top_source *s) {
    free(s->features);
    memset(s, 0, sizeof *s);
}

static ftl_status top_begin_pass(void *ctx) {
    top_source *s = ctx;
    return s->inner.begin_pass(s->inner.ctx);
}

static ftl_status top_next_batch(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    top_source *s = ctx;
    FTL_TRY(s->inner.next_batch(s->inner.ctx, max_count, wrap, out));
    if (out->count == 0) return FTL_OK;
    if (out->count > s->capacity) {
        free(s->features);
        s->features = ftl_xmalloc(out->count * (size_t)s->dim * sizeof(float));
        s->capacity = out->count;
    }
    double t0 = ftl_now();
    FTL_TRY(ftl_model_run(s->top, out->features, (int)out->count, s->features));
    out->backbone_seconds += ftl_now() - t0; /* the top is the backbone's part of this step */
    out->features = s->features;
    return FTL_OK;
}

static ftl_status top_save_position(void *ctx, uint8_t **blob, size_t *size) {
    top_source *s = ctx;
    return s->inner.save_position(s->inner.ctx, blob, size);
}

static ftl_status top_restore_position(void *ctx, const uint8_t *blob, size_t size) {
    top_source *s = ctx;
    return s->inner.restore_position(s->inner.ctx, blob, size);
}

ftl_batch_source top_source_as_batch_source(top_source *s) {
    ftl_batch_source b = s->inner;
    b.ctx = s;
    b.begin_pass = s->inner.begin_pass ? top_begin_pass : NULL;
    b.next_batch = top_next_batch;
    b.save_position = s->inner.save_position ? top_save_position : NULL;
    b.restore_position = s->inner.restore_position ? top_restore_position : NULL;
    return b;
}
