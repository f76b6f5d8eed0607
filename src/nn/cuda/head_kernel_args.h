/* Arguments of the head's CUDA kernels (head_kernels.cu), filled by cuda_head.c. Plain C: both
 * nvcc and the C compiler read it. One struct by value per kernel. */
#ifndef FTL_NN_CUDA_HEAD_KERNEL_ARGS_H
#define FTL_NN_CUDA_HEAD_KERNEL_ARGS_H

#include <stdint.h>

/* Inverted dropout of rows [n x dim], each row's mask drawn from its own stream as the CPU head
 * draws it (src/train/head.c): keyed by (seed, step, position in the global batch). */
typedef struct ka_dropout_args {
    int64_t rows, dim;
    uint64_t seed;
    int64_t step, position_base;
    uint64_t positions;            /* uint32 per row, or 0: row i is at position_base + i */
    uint32_t threshold;            /* keep when 16 bits of the draw are below it */
    float scale;                   /* 1 / (1 - p) */
    uint64_t in, out;              /* float [rows x dim] */
} ka_dropout_args;

/* Softmax cross-entropy of logits [rows x classes] (+ bias), one warp per row: the row's loss
 * (double) and whether its first maximum is the label; with dz: (softmax - target) x grad_scale,
 * target = onehot, or (1 - e) onehot + e / classes with label smoothing e (then the loss is the
 * smoothed one), in the CPU head's arithmetic (src/train/head.c). */
typedef struct ka_ce_args {
    int64_t rows, classes;
    uint64_t logits, bias, labels; /* float, float [classes], int32 [rows] */
    uint64_t dz;                   /* float [rows x classes], or 0 (evaluation) */
    uint64_t loss, correct;        /* double [rows], int32 [rows] */
    float grad_scale;
    float label_smoothing;         /* e; 0 = none (and always 0 in evaluation) */
} ka_ce_args;

/* grad_bias[j] = sum over rows (in order) of dz[row][j]. */
typedef struct ka_bias_grad_args {
    int64_t rows, classes;
    uint64_t dz, out;
} ka_bias_grad_args;

enum { KA_OPT_NADAM = 0, KA_OPT_ADAM = 1, KA_OPT_SGD = 2 };

/* One optimizer step over count elements (include/ftl/train.h gives the sequence). */
typedef struct ka_optimizer_args {
    int64_t count;
    uint64_t params, grads, m, v;
    int32_t kind, nesterov, has_momentum, pad_;
    float wd, b1, omb1, b2, omb2, inv_bc2_sqrt, eps, c_grad, c_m, momentum, neg_lr, pad2_;
} ka_optimizer_args;

#endif
