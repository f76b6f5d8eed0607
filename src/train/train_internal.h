/* Helpers shared by the files of src/train (not part of the public API). */
#ifndef FTL_TRAIN_INTERNAL_H
#define FTL_TRAIN_INTERNAL_H

#include "ftl/train.h"
#include "util/json.h"

/* 64-byte aligned, zeroed float array; aborts when memory is exhausted (sizes are never read
 * from files before being checked). Free with free(). */
float *ftl_train_alloc_floats(size_t count);

#endif
