/* Batches from features held in memory, reshuffled each pass with a seeded xoshiro256**.
 * The position (for checkpoints) is the RNG state before the current permutation plus the cursor:
 * the permutation itself is redrawn on restore, so the blob stays small for any data size. */
#include "ftl/train.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

static void draw_permutation(ftl_memory_source *src) {
    memcpy(src->pass_rng, src->rng, sizeof src->rng);
    for (int64_t i = 0; i < src->count; i++) src->order[i] = (uint32_t)i;
    if (src->shuffle) {
        ftl_rng r;
        memcpy(r.s, src->rng, sizeof r.s);
        ftl_rng_shuffle_u32(&r, src->order, (size_t)src->count);
        memcpy(src->rng, r.s, sizeof r.s);
    }
    src->cursor = 0;
    src->pass++;
}

ftl_status ftl_memory_source_init(ftl_memory_source *src, const float *features, const int32_t *labels,
                                  int64_t count, int64_t dim, bool shuffle, uint64_t seed) {
    memset(src, 0, sizeof *src);
    if (count < 0 || count > UINT32_MAX || dim < 1)
        return ftl_fail(FTL_E_INVALID_ARG, "in-memory source: %lld examples of dimension %lld not supported",
                        (long long)count, (long long)dim);
    src->features = features;
    src->labels = labels;
    src->count = count;
    src->dim = dim;
    src->shuffle = shuffle;
    ftl_rng r;
    ftl_rng_seed(&r, seed);
    memcpy(src->rng, r.s, sizeof r.s);
    src->order = ftl_xmalloc((size_t)(count ? count : 1) * sizeof *src->order);
    src->cursor = count; /* no pass drawn yet: the first batch starts one */
    return FTL_OK;
}

void ftl_memory_source_free(ftl_memory_source *src) {
    if (!src) return;
    free(src->order);
    free(src->batch_features);
    free(src->batch_labels);
    memset(src, 0, sizeof *src);
}

static ftl_status mem_begin_pass(void *ctx) {
    draw_permutation(ctx);
    return FTL_OK;
}

static ftl_status mem_next_batch(void *ctx, size_t max_count, bool wrap, ftl_feature_batch *out) {
    ftl_memory_source *src = ctx;
    memset(out, 0, sizeof *out);
    if (src->count == 0) {
        if (wrap) return ftl_fail(FTL_E_INVALID_ARG, "the training data is empty");
        return FTL_OK;
    }
    if (max_count > src->batch_capacity) {
        free(src->batch_features);
        free(src->batch_labels);
        src->batch_features = ftl_xmalloc(max_count * (size_t)src->dim * sizeof(float));
        src->batch_labels = ftl_xmalloc(max_count * sizeof(int32_t));
        src->batch_capacity = max_count;
    }
    size_t n = 0, row = (size_t)src->dim * sizeof(float);
    while (n < max_count) {
        if (src->cursor >= src->count) {
            if (!wrap && src->pass > 0) break;
            draw_permutation(src);
        }
        uint32_t idx = src->order[src->cursor++];
        memcpy(src->batch_features + n * (size_t)src->dim, src->features + (size_t)idx * (size_t)src->dim, row);
        src->batch_labels[n] = src->labels[idx];
        n++;
    }
    out->features = src->batch_features;
    out->labels = src->batch_labels;
    out->count = n;
    out->global_count = n; /* one process: the batch is the global batch */
    return FTL_OK;
}

enum { POSITION_WORDS = 12 };
static const uint64_t POSITION_MAGIC = 0x31637273656d6c66ull; /* "flmesrc1" little-endian */

static ftl_status mem_save_position(void *ctx, uint8_t **blob, size_t *size) {
    ftl_memory_source *src = ctx;
    uint64_t w[POSITION_WORDS] = {POSITION_MAGIC, (uint64_t)src->count, (uint64_t)src->pass, (uint64_t)src->cursor};
    memcpy(w + 4, src->pass_rng, 4 * sizeof(uint64_t));
    memcpy(w + 8, src->rng, 4 * sizeof(uint64_t));
    *blob = ftl_xmalloc(sizeof w);
    memcpy(*blob, w, sizeof w);
    *size = sizeof w;
    return FTL_OK;
}

static ftl_status mem_restore_position(void *ctx, const uint8_t *blob, size_t size) {
    ftl_memory_source *src = ctx;
    uint64_t w[POSITION_WORDS];
    if (size != sizeof w) return ftl_fail(FTL_E_FORMAT, "loader position: %zu bytes, expected %zu", size, sizeof w);
    memcpy(w, blob, sizeof w);
    if (w[0] != POSITION_MAGIC) return ftl_fail(FTL_E_FORMAT, "loader position is not from the in-memory loader");
    if (w[1] != (uint64_t)src->count)
        return ftl_fail(FTL_E_INVALID_ARG, "loader position is for %llu training examples, this data has %lld",
                        (unsigned long long)w[1], (long long)src->count);
    if (w[3] > w[1]) return ftl_fail(FTL_E_FORMAT, "loader position: cursor %llu past %llu examples",
                                     (unsigned long long)w[3], (unsigned long long)w[1]);
    if (w[2] == 0) { /* saved before any pass was drawn */
        memcpy(src->rng, w + 8, sizeof src->rng);
        src->pass = 0;
        src->cursor = src->count;
        return FTL_OK;
    }
    memcpy(src->rng, w + 4, sizeof src->rng);
    draw_permutation(src);
    if (memcmp(src->rng, w + 8, sizeof src->rng) != 0)
        return ftl_fail(FTL_E_FORMAT, "loader position: shuffle state does not match (saved with different data or shuffling)");
    src->pass = (int64_t)w[2];
    src->cursor = (int64_t)w[3];
    return FTL_OK;
}

ftl_batch_source ftl_memory_source_as_batch_source(ftl_memory_source *src) {
    return (ftl_batch_source){.ctx = src, .size = src->count, .begin_pass = mem_begin_pass,
                              .next_batch = mem_next_batch, .save_position = mem_save_position,
                              .restore_position = mem_restore_position};
}
