/* Layer normalization over the last axis on the CPU, with the input and the output each fp32 or bf16:
 *
 *     y[r] = (x[r] - mean(x[r])) / sqrt(var(x[r]) + epsilon) * gamma + beta
 *
 * mean and variance (two passes, the second over x - mean) in fp32, the output rounded once. bf16
 * plans use it so that a layer norm reads the fp32 residual stream and writes the bf16 its products
 * read (oneDNN 2.6's layer normalization takes one data type for both, which cost a conversion per
 * layer norm), or reads a bf16 convolution's output and writes the fp32 stream. */
#ifndef FTL_NN_LAYERNORM_H
#define FTL_NN_LAYERNORM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nn_layernorm {
    const void *x;
    bool x_bf16;
    void *y;
    bool y_bf16;
    int64_t rows, channels;   /* rows of `channels` contiguous values, both tensors row-major */
    const float *gamma, *beta; /* channels each */
    float epsilon;
} nn_layernorm;

/* Runs l on `threads` OpenMP threads (rows split among them); rows do not depend on the split. */
void nn_layernorm_run(const nn_layernorm *l, int threads);
/* The path nn_layernorm_run takes: "avx512", or "plain" (same sums in the same order: same bits but
 * for bf16 outputs of denormals, which AVX512-BF16's conversion flushes). */
const char *nn_layernorm_isa(void);

#endif
