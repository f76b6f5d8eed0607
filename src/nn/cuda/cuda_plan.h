/* Internals of the CUDA backend, shared by its three layers, whose calls point one way:
 * cuda_plan.c (the driver: compile, run) -> cuda_ops.c (one emitter per op) -> cuda_builder.c
 * (views, buffers, constants, steps; it calls neither).
 *
 * A view is a tensor's placement: device address, data type, logical (ONNX) dims and element
 * strides, so NHWC, plain row-major, transposed, sliced and broadcast tensors are all views and
 * Transpose/Slice/Split/Gather/Reshape cost nothing until an op needs another placement
 * (cuda_ensure copies then, once per tensor and placement). Convolutions run NHWC (cuDNN's tensor
 * core layout); matmuls, softmax and layer norm want plain row-major. Buffers are allocated on the
 * device while compiling and reused once the last node reading them has run, so a plan's memory is
 * the peak of live activations, fixed before the first run. */
#ifndef FTL_NN_CUDA_PLAN_H
#define FTL_NN_CUDA_PLAN_H

#include "nn/backend.h"
#include "nn/cuda/cuda_libs.h"
#include "nn/cuda/kernel_args.h"

enum { CU_LAYOUT_PLAIN = 0, CU_LAYOUT_NHWC = 1 };

typedef struct cu_buf {
    CUdeviceptr ptr;
    size_t bytes;
    int last;                 /* last node reading a tensor that lives here */
    bool busy;
} cu_buf;

typedef struct cu_view {
    CUdeviceptr ptr;          /* element 0 */
    int buf;                  /* pool buffer, -1 for a constant */
    int dtype;                /* ka_dtype */
    int rank;
    int64_t dims[NN_MAX_RANK], strides[NN_MAX_RANK];
} cu_view;

typedef enum cu_step_kind { CU_STEP_KERNEL, CU_STEP_CONV, CU_STEP_GEMM } cu_step_kind;

typedef struct cu_step {
    cu_step_kind kind;
    char label[96];
    char impl[96];
    /* kernel */
    CUfunction fn;
    unsigned grid, block;
    union {
        ka_ew_args ew;
        ka_reduce_args reduce;
        ka_pool_args pool;
        ka_rows_args rows;
        ka_fill_args fill;
    } args;
    /* convolution */
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;   /* set: bias + sum + ReLU fused into cuDNN's call */
    cudnnConvolutionFwdAlgo_t algo;
    size_t workspace;
    CUdeviceptr x, w, y, z, bias;
    float alpha2;
    /* gemm (column-major terms: C[m x n] = op(A) op(B), batch of them) */
    cublasOperation_t op_a, op_b;
    int m, n, k, batch;
    long long lda, ldb, ldc, stride_a, stride_b, stride_c;
    CUdeviceptr a, b, c;
    cudaDataType_t type;
    cublasComputeType_t compute;
    float alpha;
} cu_step;

/* A copy of a tensor in another placement, made once. */
typedef struct cu_alt {
    int tensor, layout, dtype, view;
} cu_alt;

/* Per-feature state lives with its feature, held here by pointer: CUDA Graph capture
 * (cuda_graph_capture.h) and the dataset-bytes input (cuda_u8_input.h). */
typedef struct cu_graph_capture cu_graph_capture;
typedef struct cu_u8_input cu_u8_input;

struct nn_plan {
    const cuda_libs *L;
    int device;
    CUcontext ctx;
    CUstream stream;
    CUmodule module;
    CUfunction f_ew, f_reduce, f_pool, f_softmax, f_layernorm, f_preprocess, f_fill;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    nn_precision precision;
    int act_dtype;            /* activations: KA_BF16 for bf16, else KA_F32 */
    bool deterministic;
    int batch;
    int sm_count;
    cu_buf *bufs;
    int n_bufs, cap_bufs;
    cu_view *views;
    int n_views, cap_views;
    cu_step *steps;
    int n_steps, cap_steps;
    cu_alt *alts;
    int n_alts, cap_alts;
    CUdeviceptr *consts;
    int n_consts, cap_consts;
    int *tval;                /* graph tensor -> view */
    int *last_node;           /* graph tensor -> last node reading it */
    int cur_node;
    size_t const_bytes, peak_bytes, live_bytes;
    CUdeviceptr search_ws;    /* algorithm search scratch while compiling */
    size_t search_ws_bytes;
    CUdeviceptr workspace;    /* the largest workspace a step needs */
    size_t workspace_bytes;
    CUdeviceptr blas_workspace; /* cuBLAS's own, set so its calls can be captured in a CUDA Graph */
    cu_graph_capture *capture; /* the steps in a CUDA Graph (cuda_graph_capture.h; NULL: FTL_CUDA_GRAPHS unused) */
    int convs, fused_convs;
    /* input (plain float32 in the graph's layout) and output (plain float32 features) */
    int input_tensor;
    CUdeviceptr input_dev;
    float *input_host;        /* pinned */
    size_t input_floats;
    int in_h, in_w, in_nhwc;
    cu_u8_input *u8_input;    /* dataset bytes in, two slots (cuda_u8_input.h; NULL: input_u8 not used yet) */
    int output_view;
    float *output_host;       /* pinned */
    int64_t out_count;
};

/* Placement (cuda_builder.c) */
int cu_elem_size(int dtype);
void cu_layout_strides(int layout, int rank, const int64_t *dims, int64_t *strides);
bool cu_view_is(const cu_view *v, int layout);
int cu_new_view(nn_plan *p, const cu_view *v);
/* A fresh contiguous tensor of this shape and placement for graph tensor t (its lifetime). */
ftl_status cu_alloc_view(nn_plan *p, int t, const nn_shape *s, int layout, int dtype, int *view);
/* Tensor t's view in `layout` and `dtype`, copied once when its own placement differs. */
ftl_status cu_ensure(nn_plan *p, int t, int layout, int dtype, int *view);
/* A graph constant uploaded (dtype), plain in its own shape. */
ftl_status cu_const_view(nn_plan *p, const nn_graph *g, int t, int dtype, int *view);
ftl_status cu_upload(nn_plan *p, const void *host, size_t bytes, CUdeviceptr *out);
/* Device memory; out of memory names the batch that would fit. */
ftl_status cu_device_alloc(nn_plan *p, size_t bytes, CUdeviceptr *ptr);
void cu_bind(nn_plan *p, int t, int view);
/* The tensor a view input `t` of a node reads: its current view, or the constant uploaded. */
ftl_status cu_input_view(nn_plan *p, const nn_graph *g, int t, int *view);

/* Steps (cuda_builder.c) */
cu_step *cu_new_step(nn_plan *p, cu_step_kind kind, const char *label);
/* Releases steps from..n_steps-1 (their cuDNN descriptors) and forgets them. */
void cu_drop_steps(nn_plan *p, int from);
/* out = op(in...) then the node's post-ops, element by element over out's dims; inputs are
 * broadcast to them by ONNX rules (right-aligned, size-1 axes repeat). */
ftl_status cu_emit_ew(nn_plan *p, const char *label, int out, int op, const int *in, int n_in, const nn_node *post_of,
                      const int *sum_views);
ftl_status cu_emit_fill(nn_plan *p, const char *label, int view, float value);
void cu_launch_dims(const nn_plan *p, int64_t work, unsigned per_block, unsigned *grid, unsigned *block);

/* The node's steps, by its op (cuda_ops.c). */
ftl_status cu_emit_node(nn_plan *p, nn_graph *g, int node);

#endif
