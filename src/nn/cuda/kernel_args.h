/* Arguments of ftl's own CUDA kernels (kernels.cu), shared by the host code that fills them
 * (cuda_builder.c, cuda_ops.c). Plain C: both nvcc and the C compiler read it. Each kernel takes one struct by
 * value; tensors are addressed by element strides over the output's dimensions, so one kernel
 * serves every layout (NHWC, plain, transposed or broadcast views). */
#ifndef FTL_NN_CUDA_KERNEL_ARGS_H
#define FTL_NN_CUDA_KERNEL_ARGS_H

#include <stdint.h>

enum { KA_MAX_RANK = 8, KA_MAX_IN = 4, KA_MAX_POST = 8 };

typedef enum ka_dtype { KA_F32 = 0, KA_BF16 = 1 } ka_dtype;

/* out = combine(in0, in1, in2) */
typedef enum ka_ew_op { KA_COPY = 0, KA_ADD, KA_SUB, KA_MUL, KA_DIV, KA_FMA /* in0 * in1 + in2 */ } ka_ew_op;

/* Element-wise activations: the same list and parameters as nn_act_kind (graph.h). */
typedef enum ka_act {
    KA_RELU = 0, KA_LEAKYRELU, KA_CLIP, KA_SIGMOID, KA_HARDSIGMOID, KA_HARDSWISH, KA_TANH, KA_SQRT, KA_POW,
    KA_GELU_ERF, KA_GELU_TANH, KA_SILU
} ka_act;

typedef struct ka_tensor {
    uint64_t ptr;                    /* device address of element 0 of the view */
    int32_t dtype;                   /* ka_dtype */
    int32_t pad_;
    int64_t stride[KA_MAX_RANK];     /* per output dimension (0: broadcast) */
} ka_tensor;

/* One post-op: an activation (in < 0) or `+= input in`. */
typedef struct ka_post {
    int32_t act, in;
    float alpha, beta;
} ka_post;

/* Every element of the output view, dims outermost first. */
typedef struct ka_ew_args {
    int64_t total;
    int32_t rank, op;
    int32_t n_in, n_post;
    int64_t dims[KA_MAX_RANK];
    ka_tensor out;                   /* strides: where each output element goes (any view) */
    ka_tensor in[KA_MAX_IN];
    ka_post post[KA_MAX_POST];
} ka_ew_args;

/* out[o] = mean or max over the reduced dims of the input; o runs over the kept dims (rank
 * kept, contiguous output), the reduced ones (rank red) by their own strides. */
typedef struct ka_reduce_args {
    int64_t total;
    int32_t rank, red_rank;
    int32_t is_max, out_dtype;
    int64_t dims[KA_MAX_RANK], red_dims[KA_MAX_RANK];
    int64_t red_stride[KA_MAX_RANK];
    ka_tensor in;                    /* stride[] over the kept dims */
    uint64_t out;
    int64_t red_count;
} ka_reduce_args;

/* 2-D max/average pooling of logical [N,C,H,W] views, written contiguously in the output's
 * order: out_order[k] is the logical axis of output dim k (outermost first). */
typedef struct ka_pool_args {
    int64_t total;
    int32_t n, c, h, w, oh, ow;
    int32_t kh, kw, sh, sw, dh, dw, ph, pw; /* pads at the start */
    int32_t peh, pew;                /* pads at the end: an average counts padding up to there */
    int32_t is_max, count_include_pad;
    int32_t out_order[4];
    int64_t in_stride[4];            /* logical N, C, H, W */
    uint64_t in, out;
    int32_t in_dtype, out_dtype;
} ka_pool_args;

/* Row-wise ops on contiguous [outer, len, inner] data. */
typedef struct ka_rows_args {
    int64_t outer, len, inner;
    uint64_t in, out;
    int32_t in_dtype, out_dtype;
    uint64_t scale, shift;           /* layer norm: len floats each (shift may be 0) */
    float epsilon;
    int32_t pad_;
} ka_rows_args;

/* Dataset bytes (N x H x W x 3 uint8) -> the model input through a 3 x 256 table, written as
 * NHWC or NCHW. */
typedef struct ka_preprocess_args {
    int64_t total;                   /* N * H * W * 3 */
    int32_t h, w, nhwc, out_dtype;
    uint64_t in, table, out;
} ka_preprocess_args;

typedef struct ka_fill_args {
    int64_t count;
    uint64_t out;
    int32_t dtype;
    float value;
} ka_fill_args;

#endif
