/* Depthwise-separable runs in the graph IR (see separable.h). */
#include "nn/ir/separable.h"

/* Output slot 0 of node n names a tensor of the graph. */
static bool has_output(const nn_graph *g, const nn_node *n) {
    return n->n_out >= 1 && n->out[0] >= 0 && n->out[0] < g->n_tensors;
}

static bool const_or_absent(const nn_graph *g, const nn_node *n, int slot) {
    return n->n_in <= slot || n->in[slot] < 0 || nn_is_const(g, n->in[slot]);
}

/* Node r is a Conv with constant weights (and bias, when it has one). */
static bool conv_with_const_weights(const nn_graph *g, const nn_node *r) {
    return r->op == NN_OP_CONV && !r->dead && r->n_in >= 2 && nn_is_const(g, r->in[1]) && const_or_absent(g, r, 2);
}

static bool depthwise_3x3(const nn_graph *g, const nn_node *n, bool allow_stride2) {
    if (!conv_with_const_weights(g, n) || n->n_in < 1 || n->in[0] < 0 || n->in[0] >= g->n_tensors ||
        nn_is_const(g, n->in[0]) || !has_output(g, n))
        return false;
    const nn_shape *x = &g->tensors[n->in[0]].shape, *y = &g->tensors[n->out[0]].shape;
    const nn_params *p = &n->p;
    if (x->rank != 4 || y->rank != 4 || p->group < 2 || p->group != x->d[1] || y->d[1] != x->d[1] ||
        p->kernel[0] != 3 || p->kernel[1] != 3 || p->dilation[0] != 1 || p->dilation[1] != 1)
        return false;
    int stride = p->stride[0];
    if (p->stride[1] != stride || (stride != 1 && (stride != 2 || !allow_stride2))) return false;
    for (int i = 0; i < 2; i++) /* stride 1: padded by 1 all round ("same"); stride 2: by 0 or 1 on each side */
        if (stride == 1 ? p->pad_begin[i] != 1 || p->pad_end[i] != 1
                        : p->pad_begin[i] < 0 || p->pad_begin[i] > 1 || p->pad_end[i] < 0 || p->pad_end[i] > 1)
            return false;
    return true;
}

int nn_separable_pointwise(const nn_graph *g, int n, bool allow_stride2) {
    if (n < 0 || n >= g->n_nodes || !depthwise_3x3(g, &g->nodes[n], allow_stride2)) return -1;
    int slot, m = nn_graph_sole_reader(g, g->nodes[n].out[0], &slot);
    if (m <= n || slot != 0 || !nn_graph_only_dead_between(g, n, m)) return -1;
    const nn_node *r = &g->nodes[m];
    const nn_params *rp = &r->p;
    if (!conv_with_const_weights(g, r) || rp->group != 1 || rp->kernel[0] != 1 || rp->kernel[1] != 1 ||
        rp->stride[0] != 1 || rp->stride[1] != 1 || rp->pad_begin[0] || rp->pad_begin[1] || rp->pad_end[0] ||
        rp->pad_end[1])
        return -1;
    return m;
}

int nn_separable_pool(const nn_graph *g, int m) {
    if (m < 0 || m >= g->n_nodes || !has_output(g, &g->nodes[m])) return -1;
    int slot, q = nn_graph_sole_reader(g, g->nodes[m].out[0], &slot);
    if (q <= m || slot != 0 || !nn_graph_only_dead_between(g, m, q)) return -1;
    const nn_node *pool = &g->nodes[q];
    const nn_params *pp = &pool->p;
    if (pool->op != NN_OP_MAXPOOL || pool->n_post || !has_output(g, pool) || (pool->n_out > 1 && pool->out[1] >= 0) ||
        g->tensors[pool->out[0]].shape.rank != 4)
        return -1;
    for (int i = 0; i < 2; i++)
        if (pp->kernel[i] != 3 || pp->stride[i] != 2 || pp->dilation[i] != 1) return -1;
    return q;
}
