/* The dataset-bytes input's state in a CUDA plan (input_u8, submit_u8, collect_u8, run_u8 in
 * cuda_plan.c): two slots, so that the copy of one batch to the device (on copy_stream) overlaps the
 * compute of the other (on the plan's stream), and the u8 -> float table the device scales with. */
#ifndef FTL_NN_CUDA_U8_INPUT_H
#define FTL_NN_CUDA_U8_INPUT_H

#include "nn/cuda/cuda_libs.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct cu_slot {
    uint8_t *u8_host;         /* pinned */
    CUdeviceptr u8_dev;
    float *out_host;          /* pinned features of this slot's batch */
    CUevent copied, done;
    bool busy;                /* submitted, not collected */
} cu_slot;

/* Its own struct, made by the first input_u8 (of an image plan), so plans fed floats carry nothing of
 * it; kept when making its slots failed (made false), so that later batches go through the float
 * input without trying again. */
typedef struct cu_u8_input {
    bool made;                /* the slots, stream and table are there (false: making them failed) */
    cu_slot slots[2];
    int next_slot;            /* the slot input_u8 hands out */
    int pending[2], n_pending; /* submitted slots, oldest first */
    CUstream copy_stream;
    CUdeviceptr table_dev;
    float table_host[3][256]; /* what table_dev holds (uploaded again only when the caller's differs) */
    bool table_set;
} cu_u8_input;

#endif
