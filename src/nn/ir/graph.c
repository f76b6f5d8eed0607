/* Graph IR storage: tensor and node arrays, name lookup. */
#include "nn/ir/graph.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[NN_OP_COUNT] = {
    [NN_OP_CONV] = "Conv", [NN_OP_BATCHNORM] = "BatchNormalization", [NN_OP_RELU] = "Relu",
    [NN_OP_CLIP] = "Clip", [NN_OP_LEAKYRELU] = "LeakyRelu", [NN_OP_SIGMOID] = "Sigmoid",
    [NN_OP_HARDSIGMOID] = "HardSigmoid", [NN_OP_HARDSWISH] = "HardSwish", [NN_OP_TANH] = "Tanh",
    [NN_OP_ADD] = "Add", [NN_OP_SUB] = "Sub", [NN_OP_MUL] = "Mul", [NN_OP_DIV] = "Div",
    [NN_OP_MAXPOOL] = "MaxPool", [NN_OP_AVGPOOL] = "AveragePool",
    [NN_OP_GLOBALAVGPOOL] = "GlobalAveragePool", [NN_OP_GLOBALMAXPOOL] = "GlobalMaxPool",
    [NN_OP_REDUCEMEAN] = "ReduceMean", [NN_OP_FLATTEN] = "Flatten", [NN_OP_RESHAPE] = "Reshape",
    [NN_OP_SQUEEZE] = "Squeeze", [NN_OP_UNSQUEEZE] = "Unsqueeze", [NN_OP_CONCAT] = "Concat",
    [NN_OP_GEMM] = "Gemm", [NN_OP_MATMUL] = "MatMul", [NN_OP_PAD] = "Pad",
    [NN_OP_IDENTITY] = "Identity", [NN_OP_DROPOUT] = "Dropout", [NN_OP_TRANSPOSE] = "Transpose",
    [NN_OP_CONSTANT] = "Constant", [NN_OP_SHAPE] = "Shape", [NN_OP_GATHER] = "Gather", [NN_OP_CAST] = "Cast",
    [NN_OP_SLICE] = "Slice", [NN_OP_EQUAL] = "Equal", [NN_OP_WHERE] = "Where",
    [NN_OP_CONSTANTOFSHAPE] = "ConstantOfShape", [NN_OP_EXPAND] = "Expand", [NN_OP_RANGE] = "Range",
    [NN_OP_MOD] = "Mod", [NN_OP_NOT] = "Not", [NN_OP_SCATTERND] = "ScatterND", [NN_OP_POW] = "Pow", [NN_OP_SQRT] = "Sqrt", [NN_OP_ERF] = "Erf",
    [NN_OP_SOFTMAX] = "Softmax", [NN_OP_GELU] = "Gelu", [NN_OP_LAYERNORM] = "LayerNormalization",
    [NN_OP_EINSUM] = "Einsum", [NN_OP_SPLIT] = "Split", [NN_OP_QUANTIZELINEAR] = "QuantizeLinear",
    [NN_OP_DEQUANTIZELINEAR] = "DequantizeLinear", [NN_OP_QLINEARCONV] = "QLinearConv",
    [NN_OP_QLINEARMATMUL] = "QLinearMatMul", [NN_OP_CONVINTEGER] = "ConvInteger", [NN_OP_MATMULINTEGER] = "MatMulInteger",
    [NN_OP_FAKEQUANT] = "FakeQuantize", [NN_OP_SILU] = "SiLU",
};

static bool elementwise_pass(nn_op op) {
    return op == NN_OP_BATCHNORM || op == NN_OP_RELU || op == NN_OP_CLIP || op == NN_OP_LEAKYRELU ||
           op == NN_OP_SIGMOID || op == NN_OP_HARDSIGMOID || op == NN_OP_HARDSWISH || op == NN_OP_TANH;
}

bool nn_graph_reads_channels_last(const nn_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        int in_rank = n->n_in > 0 && n->in[0] >= 0 ? g->tensors[n->in[0]].shape.rank : 0;
        if (n->op == NN_OP_LAYERNORM || (n->op == NN_OP_SOFTMAX && in_rank >= 3)) return true;
        if (n->op == NN_OP_TRANSPOSE && in_rank == 4) return true;
    }
    return false;
}

bool nn_graph_find_pointwise_depthwise(const nn_graph *g, int64_t min_expansion) {
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *d = &g->nodes[i];
        if (d->dead || d->op != NN_OP_CONV || d->p.group <= 1 || d->n_in < 2 || d->in[0] < 0 || d->in[1] < 0) continue;
        const nn_shape *w = &g->tensors[d->in[1]].shape; /* depthwise 3x3: [group, 1, 3, 3] */
        if (w->rank != 4 || w->d[0] != d->p.group || w->d[1] != 1 || w->d[2] != 3 || w->d[3] != 3) continue;
        int t = d->in[0];
        for (int hops = 0; hops < 4 && t >= 0; hops++) {
            int pr = g->tensors[t].producer;
            if (pr < 0) break;
            const nn_node *n = &g->nodes[pr];
            if (n->op == NN_OP_CONV) {
                const nn_shape *pw = n->n_in > 1 && n->in[1] >= 0 ? &g->tensors[n->in[1]].shape : NULL;
                if (pw && pw->rank == 4 && pw->d[2] == 1 && pw->d[3] == 1 && n->p.group <= 1 &&
                    pw->d[0] >= min_expansion * pw->d[1])
                    return true;
                break;
            }
            if (!elementwise_pass(n->op) || n->n_in < 1) break;
            t = n->in[0];
        }
    }
    return false;
}

bool nn_graph_only_dead_between(const nn_graph *g, int a, int b) {
    for (int k = a + 1; k < b; k++)
        if (!g->nodes[k].dead) return false;
    return true;
}

int nn_graph_sole_reader(const nn_graph *g, int t, int *slot) {
    int found = -1, found_slot = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == t) return -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *r = &g->nodes[i];
        if (r->dead) continue;
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] == t) {
                if (found >= 0) return -1;
                found = i;
                found_slot = k;
            }
        for (int k = 0; k < r->n_post; k++)
            if (r->post[k].kind == NN_POST_SUM && r->post[k].sum_tensor == t) return -1;
    }
    if (slot) *slot = found_slot;
    return found;
}

const char *nn_op_name(nn_op op) { return op >= 0 && op < NN_OP_COUNT ? op_names[op] : "?"; }

nn_graph *nn_graph_new(void) {
    nn_graph *g = ftl_xcalloc(1, sizeof *g);
    g->hash_cap = 1024;
    g->hash = ftl_xmalloc((size_t)g->hash_cap * sizeof *g->hash);
    for (int i = 0; i < g->hash_cap; i++) g->hash[i] = -1;
    return g;
}

static void free_attrs(nn_node *n) {
    for (int i = 0; i < n->n_attr; i++) {
        free(n->attr[i].name);
        free(n->attr[i].s);
        free(n->attr[i].ints);
        free(n->attr[i].floats);
    }
    free(n->attr);
}

void nn_node_free(nn_node *n) {
    free(n->name);
    free(n->op_type);
    free(n->in);
    free(n->out);
    free_attrs(n);
    memset(n, 0, sizeof *n);
}

void nn_graph_free(nn_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_tensors; i++) {
        free(g->tensors[i].name);
        free(g->tensors[i].data);
        free(g->tensors[i].weight_scale);
    }
    for (int i = 0; i < g->n_nodes; i++) nn_node_free(&g->nodes[i]);
    for (int i = 0; i < g->n_folds; i++) nn_node_free(&g->folds[i].node);
    for (int i = 0; i < g->n_retired; i++) free(g->retired[i]);
    free(g->folds);
    free(g->retired);
    free(g->tensors);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->hash);
    free(g->producer);
    free(g);
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

int nn_graph_find(const nn_graph *g, const char *name) {
    if (!name) return -1;
    size_t mask = (size_t)g->hash_cap - 1;
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        int t = g->hash[i];
        if (t < 0) return -1;
        if (strcmp(g->tensors[t].name, name) == 0) return t;
    }
}

static void hash_insert(nn_graph *g, int t) {
    size_t mask = (size_t)g->hash_cap - 1;
    size_t i = hash_name(g->tensors[t].name) & mask;
    while (g->hash[i] >= 0) i = (i + 1) & mask;
    g->hash[i] = t;
}

ftl_status nn_graph_add_tensor(nn_graph *g, const char *name, int *index) {
    if (nn_graph_find(g, name) >= 0) return ftl_fail(FTL_E_FORMAT, "tensor '%s' is defined twice", name);
    if (g->n_tensors == g->cap_tensors) {
        g->cap_tensors = g->cap_tensors ? 2 * g->cap_tensors : 256;
        g->tensors = ftl_xrealloc(g->tensors, (size_t)g->cap_tensors * sizeof *g->tensors);
    }
    if (2 * (g->n_tensors + 1) > g->hash_cap) {
        free(g->hash);
        g->hash_cap *= 2;
        g->hash = ftl_xmalloc((size_t)g->hash_cap * sizeof *g->hash);
        for (int i = 0; i < g->hash_cap; i++) g->hash[i] = -1;
        for (int i = 0; i < g->n_tensors; i++) hash_insert(g, i);
    }
    int t = g->n_tensors++;
    g->tensors[t] = (nn_tensor){.name = ftl_strdup(name), .producer = -1, .shape = {.rank = -1}};
    hash_insert(g, t);
    *index = t;
    return FTL_OK;
}

int nn_graph_new_tensor(nn_graph *g, const char *base) {
    for (int k = 0;; k++) {
        char *name = ftl_format("%s/ftl%d", base, k);
        int t;
        bool ok = nn_graph_find(g, name) < 0 && nn_graph_add_tensor(g, name, &t) == FTL_OK;
        free(name);
        if (ok) return t;
    }
}

int nn_graph_add_node(nn_graph *g) {
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 256;
        g->nodes = ftl_xrealloc(g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    }
    int n = g->n_nodes++;
    memset(&g->nodes[n], 0, sizeof g->nodes[n]);
    return n;
}

void nn_tensor_set_data(nn_tensor *t, nn_dtype dtype, void *data, const nn_shape *shape) {
    free(t->data);
    t->dtype = dtype;
    t->data = data;
    t->shape = *shape;
    t->count = nn_shape_count(shape);
}

int64_t nn_graph_shape_batch(const nn_graph *g) {
    return g->n_inputs && g->tensors[g->inputs[0]].shape.d[0] > 0 ? g->tensors[g->inputs[0]].shape.d[0] : 1;
}

bool nn_is_const(const nn_graph *g, int t) { return t >= 0 && t < g->n_tensors && g->tensors[t].data != NULL; }

/* Saturates at INT64_MAX instead of overflowing (shapes are checked against
 * NN_MAX_TENSOR_ELEMENTS when inferred; this keeps the check itself well defined). */
int64_t nn_shape_count(const nn_shape *s) {
    int64_t c = 1;
    for (int i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(c, s->d[i], &c)) return INT64_MAX;
    return c;
}

const char *nn_shape_str(const nn_shape *s, bool batch_symbolic, char *buf, size_t size) {
    if (s->rank < 0) {
        snprintf(buf, size, "[?]");
        return buf;
    }
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->rank && used < size; i++) {
        if (i == 0 && batch_symbolic)
            used += (size_t)snprintf(buf + used, size - used, "N");
        else
            used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)s->d[i]);
    }
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

const nn_attr *nn_node_attr(const nn_node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) == 0) return &n->attr[i];
    return NULL;
}
