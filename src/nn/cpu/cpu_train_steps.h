/* The fine-tuning training plan's steps and state (train_plan.h), shared by its compile
 * (cpu_train_compile.c: per op, forward steps and backward steps) and its lifetime and runs
 * (cpu_train_plan.c), which calls the compile and never the reverse. */
#ifndef FTL_NN_CPU_TRAIN_STEPS_H
#define FTL_NN_CPU_TRAIN_STEPS_H

#include "nn/train_plan.h"
#include "nn/cpu/cpu_plan.h"

#include <dnnl.h>

enum { TP_MAX_ARGS = 10, TP_MAX_CONCAT = 64 }; /* arguments of an adapted primitive; Concat inputs on oneDNN */

typedef enum tp_kind {
    TP_PRIM,      /* a oneDNN primitive */
    TP_ACCUM,     /* dst[i] += src[i] */
    TP_BINARY,    /* forward Add/Mul with numpy broadcast (both operands) */
    TP_BINARY_BWD,/* gradient of one operand of an Add/Mul: dy (times the other operand), summed over its broadcast axes */
    TP_CONCAT,    /* forward: copy inputs into place along an axis */
    TP_SPLIT_BWD, /* backward of Concat: dst += the slab of src for one input */
    TP_GLOBAL_AVG,    /* dst[n*C + c] = mean over (h, w) of src (GlobalAveragePool; src in any layout) */
    TP_GLOBAL_AVG_BWD /* dst(n, c, h, w) = src[n*C + c] / (H*W) */
} tp_kind;

typedef struct tp_step {
    tp_kind kind;
    dnnl_primitive_t prim;
    dnnl_exec_arg_t *args;      /* n_args, owned */
    int n_args;
    float *src, *dst, *other;   /* ACCUM / BINARY(_BWD) / CONCAT / SPLIT */
    const float *a, *b;
    int64_t count;
    bool mul;                   /* BINARY: Mul, else Add */
    nn_shape ys, as, bs;        /* BINARY(_BWD): output and operand shapes at the output's rank */
    int64_t outer, chunk, stride, offset; /* CONCAT / SPLIT_BWD: per outer index, chunk floats at offset in stride */
    char what[80];              /* the node and the work, for the profile */
    bool boundary_only;         /* computes only a boundary tensor's gradient: skipped unless asked for */
    bool superseded;            /* a reorder whose copy a step running before it makes: never run */
    double flops;               /* a convolution's floating-point operations per run (2 per multiply-add) */
    int64_t *offsets;           /* GLOBAL_AVG(_BWD): where (n, c, 0, 0) is in the spatial tensor's layout, [N*C], owned */
    int64_t h_stride, w_stride, height, width, clear_floats; /* ... its spatial strides; floats to zero first (padding) */
    double seconds;             /* profiling: time in this step since the last reset */
} tp_step;

typedef struct tp_list {
    tp_step *s;
    int n, cap;
} tp_list;

struct nn_train_plan {
    const nn_graph *g;
    const nn_trainable *tr;
    int batch;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    float **act, **grad;        /* per graph tensor (NULL: not in the plan); views alias */
    bool *owned;                /* act/grad allocated for this tensor (not a view) */
    int64_t *count;             /* floats per tensor at the batch */
    int64_t *room;              /* floats its buffers hold: count, or more for a blocked layout's padded channels */
    /* Layouts: a tensor whose producer and readers are all convolutions, activations or BNs keeps
     * the layout its producing convolution chose (act and grad alike), so no reorder runs between
     * them; every other tensor is plain (the host loops, views and the caller read those). */
    bool *may_block;            /* may take a blocked layout */
    dnnl_memory_desc_t *layout; /* its buffers' layout once chosen (ndims 0: plain) */
    float *params, *pgrads;
    bool borrowed_block;        /* params/pgrads belong to the caller (a trainer's one block) */
    int64_t n_params;
    int64_t *offset;            /* per tr->params[k] */
    int *param_of;              /* graph tensor -> index in tr->params (-1) */
    /* A gradient with one contribution is written straight into its buffer, which then needs no
     * clearing and no scratch to be added from; the others are cleared and summed into. */
    int *root;                  /* graph tensor -> the tensor owning its buffers (views share them) */
    int *writers, *param_writers; /* contributions to each owned gradient buffer / parameter gradient */
    bool *direct, *param_direct;  /* written whole by its only contribution */
    tp_list fwd, bwd;
    bool bf16;                  /* convolutions read bf16 copies of their inputs (fp32 master weights) */
    int bf16_convs;             /* convolutions that run so (the others found no bf16 kernel) */
    dnnl_memory_t *mems;
    int n_mems, cap_mems;
    void **scratch;
    int n_scratch, cap_scratch;
    int feature;
    const char *node_name;      /* the node being compiled (each step's label) */
    struct tp_reordered *reordered; /* inputs reordered into a primitive's layout, to be reused */
    int n_reordered, cap_reordered;
    bool profiling;
    bool marking_boundary_only; /* steps pushed now serve only a boundary gradient */
    double conv_flops;          /* of the convolution being compiled (each of its three primitives) */
    bool skip_boundary_only;    /* this backward needs no boundary gradient */
    int64_t profiled_steps;     /* forward + backward pairs timed */
    double host_clear_seconds;  /* clearing the gradient buffers */
};

/* View ops (Reshape, Flatten, ...): they share their input's buffers. */
bool tp_is_view(nn_op op);
/* The error for a node fine-tuning cannot train through, naming it and why. */
ftl_status tp_fail_node(const nn_node *n, const char *why);
/* Node n's forward steps into p->fwd and backward steps into p->bwd (run reversed). */
ftl_status tp_compile_node(nn_train_plan *p, const nn_node *n);

#endif
