/* Where the head's training flushes tiny values to 0 so that denormal floats do not pile up:
 * an operation with a denormal input or result takes a microcode assist (~100x slower), and as
 * training widens the logit gaps more softmax terms, gradients and decaying moments fall there
 * each epoch, which made epochs grow several-fold on the same data. Flushing at the source
 * (rather than FTZ/DAZ flags, which are per thread and would change the backbone's feature bits)
 * keeps every thread and the GPU head on the same numbers. Shared by the CPU head
 * (src/train) and the GPU head's kernels (src/nn/cuda/head_kernels.cu). */
#ifndef FTL_TRAIN_DENORMAL_FLUSH_H
#define FTL_TRAIN_DENORMAL_FLUSH_H

/* Softmax terms e^(z - max) with z - max below this are written as 0: e^-44 = 7.8e-20, so every
 * term kept stays a normal float after the scaling by 1 / sum and 1 / batch (>= 7.8e-29 for
 * 10^5 classes and batches of 10^4), and so do its products with features above ~1e-9. */
#define FTL_SOFTMAX_CUTOFF (-44.0f)
/* Gradient entries below this magnitude (2^-50 = 8.9e-16; after weight decay is added) count as
 * 0 in the optimizer, so that g * g and its share (1 - beta2) of the second moment stay normal. */
#define FTL_GRAD_FLUSH 0x1p-50f
/* Moments (and sgd's momentum buffer) below 2^-100 (7.9e-31) become 0, so that their decay
 * (times beta or the momentum, >= 2^-26) never lands below FLT_MIN; next to eps = 1e-7 in Adam's
 * denominator such a moment moves no weight. */
#define FTL_MOMENT_FLUSH 0x1p-100f

#endif
