/* Single-precision GEMM for the head: C[M x N] (+)= A[M x K] * B[K x N], B and C row-major
 * with N contiguous, A given by two strides so that both X (forward, A = X[B x D]) and X^T
 * (backward, A[d][b] = X[b][d]) are read without a transpose copy.
 *
 * Cache-blocked (K in blocks of 256, A packed into MR-row panels) with register-tiled
 * microkernels: AVX-512 (8 x 48), AVX2+FMA (6 x 16) chosen at run time, portable C otherwise.
 * Each C element is one sequence of multiply-adds over k in order, so results do not depend on
 * the thread count or on where the element sits in a tile (only on the ISA path). */
#ifndef FTL_TRAIN_GEMM_H
#define FTL_TRAIN_GEMM_H

#include "train/pool.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct ftl_gemm_args {
    size_t M, N, K;
    const float *A;
    size_t a_row_stride, a_col_stride; /* A[i][k] = A[i * a_row_stride + k * a_col_stride] */
    const float *B;
    size_t ldb;
    float *C;
    size_t ldc;
    bool accumulate; /* false: C = A*B; true: C += A*B */
    ftl_pool_site *site; /* optional: decides by measurement whether threads pay for this call site */
} ftl_gemm_args;

typedef enum ftl_gemm_isa {
    FTL_GEMM_AUTO = 0,
    FTL_GEMM_PORTABLE,
    FTL_GEMM_AVX2,
    FTL_GEMM_AVX512,
} ftl_gemm_isa;

/* Runs on the worker pool when the product is large enough. */
void ftl_gemm(const ftl_gemm_args *g);
/* Selects a kernel (tests, benchmarks; FTL_GEMM_ISA=portable|avx2|avx512 in the environment does
 * the same); falls back to the best supported one. Returns the kernel now active. */
ftl_gemm_isa ftl_gemm_select(ftl_gemm_isa isa);
ftl_gemm_isa ftl_gemm_active(void);
bool ftl_gemm_supported(ftl_gemm_isa isa);
const char *ftl_gemm_isa_name(ftl_gemm_isa isa);

#endif
