/* Fused scaled dot-product attention on the CPU: for every leading index l (batch x heads, windows),
 *
 *     out[l] = softmax(scale * Q[l] K^T[l] + bias[l mod period]) V[l]
 *
 * in one pass per block of query rows, the T x T scores kept in a per-thread buffer (cache) instead
 * of written out and read back by separate matmul, add and softmax steps. Operands are read through
 * their strides, so a transposed K or a head sliced out of a QKV tensor costs no copy. fp32
 * accumulation; bf16 operands run as bf16 dot products (pairs per instruction) where the CPU has
 * AVX512-BF16, else widened on load; a bf16 output is rounded to bf16. */
#ifndef FTL_NN_ATTENTION_H
#define FTL_NN_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

enum { NN_ATTN_MAX_LEAD = 6 };

/* A matrix per leading index: element (l, r, c) at data[lead offset + r * row_stride + c * col_stride]
 * (strides in elements; the lead offset from lead_stride over the leading dims, outermost first). */
typedef struct nn_attn_operand {
    void *data;
    bool bf16;
    int64_t lead_stride[NN_ATTN_MAX_LEAD];
    int64_t row_stride, col_stride;
} nn_attn_operand;

typedef struct nn_attention {
    int n_lead;
    int64_t lead[NN_ATTN_MAX_LEAD];
    int64_t rows, keys, depth, vdepth; /* Q rows x depth, K^T depth x keys, V keys x vdepth, out rows x vdepth */
    float scale;
    const float *bias;                 /* [period][rows][keys] added to the scaled scores; NULL: none */
    int64_t bias_period;
    nn_attn_operand q, kt, v, out;
} nn_attention;

/* Whether this CPU runs the fused kernel (AVX-512F, or AVX2 + FMA); without it the plan keeps the
 * separate steps. */
bool nn_attention_available(void);
/* The kernels' ISA: "avx512", "avx2" (FTL_NN_ATTENTION_ISA=avx2 picks them on an AVX-512 CPU), "none". */
const char *nn_attention_isa(void);
/* Runs a on `threads` OpenMP threads; requires nn_attention_available(). */
void nn_attention_run(const nn_attention *a, int threads);

#endif
