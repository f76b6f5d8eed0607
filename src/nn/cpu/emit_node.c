/* The CPU backend's op table: each op's emitter found by its nn_op, so adding an op is one line here
 * next to its emitter in the family's file. An op with no entry is refused naming the node. */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "util/error.h"

/* ReduceMean over exactly H and W of a 4-D tensor: a global average pool. */
static bool reduce_is_spatial(const nn_graph *g, const nn_node *n) {
    const nn_shape *xs = shape_of(g, n->in[0]);
    if (xs->rank != 4 || n->p.n_axes != 2) return false;
    bool red[4] = {0};
    for (int i = 0; i < 2; i++) {
        int64_t a = n->p.axes[i] < 0 ? n->p.axes[i] + 4 : n->p.axes[i];
        if (a < 0 || a > 3) return false;
        red[a] = true;
    }
    return red[2] && red[3];
}

/* ReduceMean over H and W is a global average pool; over other axes oneDNN's reduction. */
static ftl_status emit_reduce_mean_or_pool(nn_plan *p, nn_graph *g, const nn_node *n) {
    if (!reduce_is_spatial(g, n)) return cpu_emit_reduce_mean(p, g, n);
    return cpu_emit_pool(p, g, n);
}

/* A product with a constant runs as an inner product (or matmul) with packed weights; of two
 * activations as a batched matmul. */
static ftl_status emit_product(nn_plan *p, nn_graph *g, const nn_node *n) {
    if (n->op == NN_OP_MATMUL && !nn_is_const(g, n->in[1])) return cpu_emit_batched_matmul(p, g, n);
    return cpu_emit_inner_product(p, g, n);
}

/* The optimiser folds Erf into GELU where the pattern matches; one left alone has no kernel. */
static ftl_status refuse_erf(nn_plan *p, nn_graph *g, const nn_node *n) {
    (void)p, (void)g;
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Erf): supported only inside GELU (0.5 x (1 + erf(x / sqrt 2)))",
                    n->name);
}

/* 4-D BatchNormalization was folded into a Conv or became a 1x1 depthwise one by the optimiser. */
static ftl_status refuse_batchnorm(nn_plan *p, nn_graph *g, const nn_node *n) {
    (void)p, (void)g;
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (BatchNormalization): only 4-D inputs are supported", n->name);
}

static const cpu_emitter emitters[NN_OP_COUNT] = {
    [NN_OP_CONV] = cpu_emit_conv,
    [NN_OP_FAKEQUANT] = cpu_emit_fake_quant_node,
    [NN_OP_RELU] = cpu_emit_activation, [NN_OP_CLIP] = cpu_emit_activation, [NN_OP_LEAKYRELU] = cpu_emit_activation,
    [NN_OP_SIGMOID] = cpu_emit_activation, [NN_OP_HARDSIGMOID] = cpu_emit_activation,
    [NN_OP_HARDSWISH] = cpu_emit_activation, [NN_OP_TANH] = cpu_emit_activation, [NN_OP_SQRT] = cpu_emit_activation,
    [NN_OP_POW] = cpu_emit_activation, [NN_OP_GELU] = cpu_emit_activation, [NN_OP_SILU] = cpu_emit_activation,
    [NN_OP_ERF] = refuse_erf,
    [NN_OP_ADD] = cpu_emit_binary, [NN_OP_SUB] = cpu_emit_binary, [NN_OP_MUL] = cpu_emit_binary,
    [NN_OP_DIV] = cpu_emit_binary,
    [NN_OP_MAXPOOL] = cpu_emit_pool, [NN_OP_AVGPOOL] = cpu_emit_pool, [NN_OP_GLOBALAVGPOOL] = cpu_emit_pool,
    [NN_OP_GLOBALMAXPOOL] = cpu_emit_pool,
    [NN_OP_REDUCEMEAN] = emit_reduce_mean_or_pool,
    [NN_OP_FLATTEN] = cpu_emit_view, [NN_OP_RESHAPE] = cpu_emit_view, [NN_OP_SQUEEZE] = cpu_emit_view,
    [NN_OP_UNSQUEEZE] = cpu_emit_view, [NN_OP_IDENTITY] = cpu_emit_view, [NN_OP_DROPOUT] = cpu_emit_view,
    [NN_OP_TRANSPOSE] = cpu_emit_transpose,
    [NN_OP_SPLIT] = cpu_emit_split,
    [NN_OP_CONCAT] = cpu_emit_concat,
    [NN_OP_PAD] = cpu_emit_pad,
    [NN_OP_SLICE] = cpu_emit_slice,
    [NN_OP_GATHER] = cpu_emit_gather_one,
    [NN_OP_SOFTMAX] = cpu_emit_softmax,
    [NN_OP_LAYERNORM] = cpu_emit_layernorm,
    [NN_OP_GEMM] = emit_product, [NN_OP_MATMUL] = emit_product,
    [NN_OP_EINSUM] = cpu_emit_einsum,
    [NN_OP_BATCHNORM] = refuse_batchnorm,
};

ftl_status cpu_emit_node(nn_plan *p, nn_graph *g, int node) {
    const nn_node *n = &g->nodes[node];
    cpu_emitter emit = (unsigned)n->op < NN_OP_COUNT ? emitters[n->op] : NULL;
    if (!emit) return cpu_fail_node(n, "not supported by the CPU backend");
    return emit(p, g, n);
}
