/* A seeded shuffle buffer over fixed-size rows, with tf.data's shuffle(buffer_size) semantics:
 * once full, each incoming row evicts a uniformly chosen buffered row; drain() empties the rest
 * in random order. The emitted order depends only on the seed and the input order. */
#ifndef FTL_DATA_SHUFFLE_BUFFER_H
#define FTL_DATA_SHUFFLE_BUFFER_H

#include "util/rng.h"
#include <stdbool.h>
#include <stdint.h>

/* index: the caller's number for the row (the loader: its row in the dataset), carried along. */
typedef void (*shuffle_emit_fn)(void *ctx, int32_t label, int64_t index, const uint8_t *value, const char *path);

typedef struct shuffle_buffer {
    int64_t capacity, count, row_bytes;
    bool with_paths;
    int32_t *labels;
    int64_t *indices;
    uint8_t *values;
    char **paths;
    ftl_rng rng;
} shuffle_buffer;

/* False when the memory cannot be allocated (the capacity comes from a flag). */
bool shuffle_buffer_init(shuffle_buffer *b, int64_t capacity, int64_t row_bytes, bool with_paths);
void shuffle_buffer_reseed(shuffle_buffer *b, uint64_t seed);
/* Adds a row; when the buffer is full first emits a random buffered row. capacity <= 1: the row
 * is emitted straight away. */
void shuffle_buffer_push(shuffle_buffer *b, int32_t label, int64_t index, const uint8_t *value, const char *path,
                         shuffle_emit_fn emit, void *ctx);
void shuffle_buffer_drain(shuffle_buffer *b, shuffle_emit_fn emit, void *ctx);
void shuffle_buffer_free(shuffle_buffer *b);

#endif
