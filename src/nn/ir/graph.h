/* The backbone graph IR: tensors (activations and constants) and nodes in execution order,
 * independent of ONNX's protobuf structs and of any backend. Built by onnx_import.c, checked
 * by topo.c / shape.c, rewritten by optimize.c, compiled by a backend (backend.h). */
#ifndef FTL_NN_GRAPH_H
#define FTL_NN_GRAPH_H

#include "ftl/base.h"
#include <stdbool.h>
#include <stdint.h>

enum { NN_MAX_RANK = 8, NN_MAX_POSTOPS = 8, NN_MAX_SPLIT = 32 };
/* The most elements one tensor (for the batch shapes are inferred at) may have: 2^31, i.e. 8 GiB
 * of float32. A larger one is a malformed or hostile model, refused before anything is sized. */
#define NN_MAX_TENSOR_ELEMENTS ((int64_t)1 << 31)

typedef struct nn_shape {
    int rank;                 /* -1: not known yet */
    int64_t d[NN_MAX_RANK];
} nn_shape;

typedef enum nn_dtype { NN_F32 = 0, NN_I64 } nn_dtype;

typedef struct nn_tensor {
    char *name;
    nn_dtype dtype;
    nn_shape shape;           /* for activations: the shape at the batch last inferred */
    void *data;               /* constants only (float or int64_t), owned; NULL for activations */
    int64_t count;            /* elements of data */
    int producer;             /* node index, -1 for graph inputs and constants */
    bool is_input;            /* a graph input fed at run time */
    bool computed;            /* data computed from shapes by a fold (recomputed for every batch) */
    int onnx_type;            /* constants read from the file: their ONNX data type (0 otherwise) */
    float *weight_scale;      /* weights a quantized model gave as integers (qdq.c): the model's scales, so int8
                                 runs on its integers: one per index of weight_scale_axis (shape.d[axis] entries),
                                 or with axis -1 one scale for all (shape.d[0] copies of it); NULL otherwise */
    int weight_scale_axis;
    float int8_scale;         /* a quantized model's activation that int8 convolutions read in its integer form
                                 (nn_qdq_fold_fake_quant): its scale (> 0), zero point and type; 0 otherwise */
    int int8_zero;
    bool int8_unsigned;
} nn_tensor;

typedef enum nn_op {
    NN_OP_CONV, NN_OP_BATCHNORM, NN_OP_RELU, NN_OP_CLIP, NN_OP_LEAKYRELU, NN_OP_SIGMOID,
    NN_OP_HARDSIGMOID, NN_OP_HARDSWISH, NN_OP_TANH, NN_OP_ADD, NN_OP_SUB, NN_OP_MUL, NN_OP_DIV,
    NN_OP_MAXPOOL, NN_OP_AVGPOOL, NN_OP_GLOBALAVGPOOL, NN_OP_GLOBALMAXPOOL, NN_OP_REDUCEMEAN,
    NN_OP_FLATTEN, NN_OP_RESHAPE, NN_OP_SQUEEZE, NN_OP_UNSQUEEZE, NN_OP_CONCAT, NN_OP_GEMM,
    NN_OP_MATMUL, NN_OP_PAD, NN_OP_IDENTITY, NN_OP_DROPOUT, NN_OP_TRANSPOSE, NN_OP_CONSTANT,
    /* evaluated at load time (shape arithmetic); Slice also runs on activations */
    NN_OP_SHAPE, NN_OP_GATHER, NN_OP_CAST, NN_OP_SLICE, NN_OP_EQUAL, NN_OP_WHERE, NN_OP_CONSTANTOFSHAPE,
    NN_OP_EXPAND, NN_OP_RANGE, NN_OP_MOD, NN_OP_NOT, NN_OP_SCATTERND,
    /* transformer ops */
    NN_OP_POW, NN_OP_SQRT, NN_OP_ERF, NN_OP_SOFTMAX, NN_OP_GELU, NN_OP_LAYERNORM, NN_OP_EINSUM, NN_OP_SPLIT,
    /* quantized models: read from the file, then rewritten by qdq.c into float ops and FAKEQUANT */
    NN_OP_QUANTIZELINEAR, NN_OP_DEQUANTIZELINEAR, NN_OP_QLINEARCONV, NN_OP_QLINEARMATMUL, NN_OP_CONVINTEGER,
    NN_OP_MATMULINTEGER,
    /* ftl's own (never read from a file): y = (clamp(round(x / s) + zp, lo, hi) - zp) x s, a tensor's value
     * as its quantized form holds it */
    NN_OP_FAKEQUANT,
    /* ftl's own: x * sigmoid(x) (SiLU, swish), recognised from the Sigmoid and Mul exporters write */
    NN_OP_SILU,
    NN_OP_COUNT
} nn_op;

typedef enum nn_attr_type {
    NN_ATTR_INT, NN_ATTR_FLOAT, NN_ATTR_STRING, NN_ATTR_INTS, NN_ATTR_FLOATS, NN_ATTR_TENSOR, NN_ATTR_OTHER
} nn_attr_type;

typedef struct nn_attr {
    char *name;
    nn_attr_type type;
    int64_t i;
    float f;
    char *s;
    int64_t *ints;
    float *floats;
    int n;                    /* elements of ints / floats */
    int tensor;               /* NN_ATTR_TENSOR: index of a constant tensor */
} nn_attr;

/* Element-wise activation in a form every backend can express (oneDNN eltwise algs, cuDNN
 * activations). HARDSIGMOID = clip(alpha*x+beta, 0, 1). */
typedef enum nn_act_kind {
    NN_ACT_RELU, NN_ACT_LEAKYRELU, NN_ACT_CLIP, NN_ACT_SIGMOID, NN_ACT_HARDSIGMOID, NN_ACT_HARDSWISH,
    NN_ACT_TANH, NN_ACT_SQRT, NN_ACT_POW, /* POW: x^alpha */
    NN_ACT_GELU_ERF,                      /* 0.5 x (1 + erf(x / sqrt 2)), recognised from its ops */
    NN_ACT_GELU_TANH,                     /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), ONNX Gelu "tanh" */
    NN_ACT_SILU                           /* x sigmoid(x) (EfficientNet's SiLU), recognised from its ops */
} nn_act_kind;

typedef struct nn_act {
    nn_act_kind kind;
    float alpha, beta;        /* leaky slope; clip min/max; hardsigmoid alpha/beta */
} nn_act;

/* Work fused into a node by the optimiser, applied in order to its output. */
typedef struct nn_postop {
    enum { NN_POST_ACT, NN_POST_SUM } kind;
    nn_act act;
    int sum_tensor;           /* NN_POST_SUM: out += this tensor (same shape) */
} nn_postop;

/* Operator parameters, parsed and checked from the attributes (ops.c). */
typedef struct nn_params {
    /* Conv, pools: spatial (2-D) geometry */
    int kernel[2], stride[2], dilation[2];
    int pad_begin[2], pad_end[2];     /* explicit, after auto_pad resolution at shape time */
    char auto_pad[16];                /* "", "SAME_UPPER", "SAME_LOWER", "VALID" */
    int group;
    bool ceil_mode, count_include_pad;
    /* activations */
    nn_act act;
    /* BatchNormalization */
    float epsilon;
    /* Gemm */
    float alpha, beta;
    int trans_a, trans_b;
    /* axis ops */
    int axis;                         /* Flatten, Concat */
    int64_t axes[NN_MAX_RANK];        /* Squeeze/Unsqueeze/ReduceMean/Transpose perm */
    int n_axes;                       /* -1: not given (Squeeze all ones, ReduceMean all) */
    bool keepdims;
    /* Pad: [begin..., end...] per axis, constant value */
    int64_t pads[2 * NN_MAX_RANK];
    int n_pads;
    float pad_value;
    bool allowzero;                   /* Reshape */
    /* Shape start/end; Cast target (ONNX TensorProto data type); Mod fmod */
    int64_t start, end;
    int cast_to;
    bool fmod;
    /* Slice on activations: begin and length per axis (steps of 1), from its constant inputs */
    int64_t slice_begin[NN_MAX_RANK], slice_step[NN_MAX_RANK];
    /* Einsum as a batched matmul: input axis t of A (B) is axis ein_a[t] (ein_b[t]) of the
     * canonical [batch..., i, k] ([batch..., k, j]); the output is [batch..., i, j] */
    int8_t ein_a[NN_MAX_RANK], ein_b[NN_MAX_RANK];
    int ein_rank;
    /* Split: the size of each output along `axis` (from the split input or attribute, or equal) */
    int64_t split[NN_MAX_SPLIT];
    int n_split;
    /* FakeQuantize: scale, zero point and the integer type's range */
    float q_scale;
    int q_zero, q_lo, q_hi;
    /* a parameter input (Reshape shape, axes, pads, Clip min/max) was not a constant when the
     * node was parsed: it is computed from shapes, and the node is parsed again once it is */
    bool deferred;
} nn_params;

typedef struct nn_node {
    char *name;               /* never NULL: the ONNX name or "<op_type>#<index>" */
    char *op_type;            /* as written in the model */
    nn_op op;
    int n_in, n_out;
    int *in, *out;            /* tensor indices; -1 for an omitted optional input */
    int n_attr;
    nn_attr *attr;
    nn_params p;
    int n_post;
    nn_postop post[NN_MAX_POSTOPS];
    bool dead;                /* removed by the optimiser */
} nn_node;

/* A node evaluated during shape inference (shape arithmetic, constant subgraphs): after main
 * node `after` (-1: before all), its output's data is computed for the current batch. */
typedef struct nn_fold {
    nn_node node;
    int after;
} nn_fold;

typedef struct nn_graph {
    nn_tensor *tensors;
    int n_tensors, cap_tensors;
    nn_node *nodes;           /* in execution (topological) order after nn_graph_sort */
    int n_nodes, cap_nodes;
    int *inputs;              /* runtime graph inputs (initializers excluded) */
    int n_inputs;
    int *outputs;
    int n_outputs;
    nn_fold *folds;           /* in evaluation order */
    int n_folds, cap_folds;
    void **retired;           /* earlier data of computed tensors: plans compiled then may point there */
    int n_retired, cap_retired;
    /* name lookup: open addressing over tensor indices */
    int *hash;
    int hash_cap;
    /* model facts for inspect */
    int64_t ir_version, opset;
    char *producer;
    int64_t fixed_batch;      /* the input's batch as written in the file (0: dynamic) */
    bool quantized;           /* a quantized model (QuantizeLinear / QLinear ops): runs with its own scales */
    int64_t batch_locked;     /* > 0: the graph only works at this batch (the export baked it into
                                 constants); every shape inference then uses it */
    bool pointwise_depthwise; /* the whole backbone (before any cut) has a 1x1 conv feeding a 3x3 depthwise
                                 conv (nn_graph_find_pointwise_depthwise): its CPU plans, and those of its
                                 cut's halves alike, run blocked so they give the same bits */
    bool blocked_images;      /* the whole backbone's fp32 CPU plans (cut halves alike) run their images channel-blocked
                                 (nChw8c) though it has no such pairs: AVX2 CPUs, convolutional backbones
                                 (nn_cpu_blocked_images) */
} nn_graph;

/* Whether a 3x3 depthwise convolution reads a 1x1 convolution's output, directly or through
 * BatchNormalization and activation nodes (MobileNetV2's expand -> depthwise), the 1x1 expanding its
 * channels at least min_expansion times. */
bool nn_graph_find_pointwise_depthwise(const nn_graph *g, int64_t min_expansion);
/* Whether the graph reads image channels as a last axis: a LayerNormalization (ViT, Swin, ConvNeXt's
 * norms over channels), an attention's Softmax (of 3 or more dimensions: a classifier's softmax over
 * [N, classes] does not count) or a Transpose of a 4-D tensor (ConvNeXt's permutes). */
bool nn_graph_reads_channels_last(const nn_graph *g);
/* The live node that alone reads tensor t, through one input slot (stored in *slot when not NULL); -1
 * when t is a graph output, is read by no node or by more than one, twice by one, or as a summand. */
int nn_graph_sole_reader(const nn_graph *g, int t, int *slot);
/* Whether every node after a and before b is dead (a step doing b's work where a's runs skips none). */
bool nn_graph_only_dead_between(const nn_graph *g, int a, int b);
nn_graph *nn_graph_new(void);
void nn_graph_free(nn_graph *g);
/* The tensor called `name`, or -1. */
int nn_graph_find(const nn_graph *g, const char *name);
/* Adds a tensor (the name is copied) and returns its index; fails on a duplicate name. */
ftl_status nn_graph_add_tensor(nn_graph *g, const char *name, int *index);
/* A fresh tensor whose name derives from `base` and does not clash. */
int nn_graph_new_tensor(nn_graph *g, const char *base);
/* Appends a node (fields zeroed) and returns its index. */
int nn_graph_add_node(nn_graph *g);
/* Frees a node's names, edges and attributes (the node itself is not freed). */
void nn_node_free(nn_node *n);
/* Sets a constant's data (takes ownership). */
void nn_tensor_set_data(nn_tensor *t, nn_dtype dtype, void *data, const nn_shape *shape);

bool nn_is_const(const nn_graph *g, int t);
/* The batch the shapes were last inferred for (the graph input's first dimension; 1 when unknown). */
int64_t nn_graph_shape_batch(const nn_graph *g);
int64_t nn_shape_count(const nn_shape *s);
/* "[N,3,224,224]"-style text into buf; batch_symbolic prints dims[0] as N. */
const char *nn_shape_str(const nn_shape *s, bool batch_symbolic, char *buf, size_t size);
const char *nn_op_name(nn_op op);
/* The attribute called `name`, or NULL. */
const nn_attr *nn_node_attr(const nn_node *n, const char *name);

#endif
