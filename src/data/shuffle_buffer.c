/* Shuffle buffer. Rows are copied in; an emitted row is passed to the callback before its slot
 * is overwritten, so no extra copy is needed. */
#include "data/shuffle_buffer.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

bool shuffle_buffer_init(shuffle_buffer *b, int64_t capacity, int64_t row_bytes, bool with_paths) {
    memset(b, 0, sizeof *b);
    b->capacity = capacity > 1 ? capacity : 0;
    b->row_bytes = row_bytes;
    b->with_paths = with_paths;
    if (!b->capacity) return true;
    if ((uint64_t)b->capacity > SIZE_MAX / (uint64_t)(row_bytes > 4 ? row_bytes : 4)) return false;
    b->labels = malloc((size_t)b->capacity * sizeof *b->labels);
    b->indices = malloc((size_t)b->capacity * sizeof *b->indices);
    b->values = malloc((size_t)(b->capacity * row_bytes));
    if (with_paths) b->paths = calloc((size_t)b->capacity, sizeof *b->paths);
    if (!b->labels || !b->indices || !b->values || (with_paths && !b->paths)) {
        shuffle_buffer_free(b);
        return false;
    }
    return true;
}

void shuffle_buffer_reseed(shuffle_buffer *b, uint64_t seed) { ftl_rng_seed(&b->rng, seed); }

static void store(shuffle_buffer *b, int64_t slot, int32_t label, int64_t index, const uint8_t *value, const char *path) {
    b->labels[slot] = label;
    b->indices[slot] = index;
    memcpy(b->values + slot * b->row_bytes, value, (size_t)b->row_bytes);
    if (b->with_paths) {
        free(b->paths[slot]);
        b->paths[slot] = ftl_strdup(path ? path : "");
    }
}

static void emit_slot(shuffle_buffer *b, int64_t slot, shuffle_emit_fn emit, void *ctx) {
    emit(ctx, b->labels[slot], b->indices[slot], b->values + slot * b->row_bytes, b->with_paths ? b->paths[slot] : NULL);
}

void shuffle_buffer_push(shuffle_buffer *b, int32_t label, int64_t index, const uint8_t *value, const char *path,
                         shuffle_emit_fn emit, void *ctx) {
    if (b->capacity == 0) {
        emit(ctx, label, index, value, path);
        return;
    }
    if (b->count < b->capacity) {
        store(b, b->count++, label, index, value, path);
        return;
    }
    int64_t j = (int64_t)ftl_rng_below(&b->rng, (uint64_t)b->capacity);
    emit_slot(b, j, emit, ctx);
    store(b, j, label, index, value, path);
}

void shuffle_buffer_drain(shuffle_buffer *b, shuffle_emit_fn emit, void *ctx) {
    while (b->count > 0) {
        int64_t j = (int64_t)ftl_rng_below(&b->rng, (uint64_t)b->count);
        emit_slot(b, j, emit, ctx);
        int64_t last = b->count - 1;
        if (j != last) {
            b->labels[j] = b->labels[last];
            b->indices[j] = b->indices[last];
            memcpy(b->values + j * b->row_bytes, b->values + last * b->row_bytes, (size_t)b->row_bytes);
            if (b->with_paths) {
                char *t = b->paths[j];
                b->paths[j] = b->paths[last];
                b->paths[last] = t;
            }
        }
        b->count--;
    }
}

void shuffle_buffer_free(shuffle_buffer *b) {
    if (b->paths)
        for (int64_t i = 0; i < b->capacity; i++) free(b->paths[i]);
    free(b->paths);
    free(b->labels);
    free(b->indices);
    free(b->values);
    memset(b, 0, sizeof *b);
}
