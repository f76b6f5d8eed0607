/* The unfrozen part of a backbone for fine-tuning (trainable.h). */
#include "nn/ir/trainable.h"
#include "nn/ir/topo.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

const char *nn_param_role_name(nn_param_role role) {
    switch (role) {
    case NN_PARAM_WEIGHT: return "weight";
    case NN_PARAM_BIAS: return "bias";
    case NN_PARAM_BN_SCALE: return "scale";
    case NN_PARAM_BN_SHIFT: return "shift";
    }
    return "?";
}

void nn_trainable_free(nn_trainable *t) {
    free(t->node);
    free(t->params);
    free(t->boundary);
    memset(t, 0, sizeof *t);
}

/* A float initializer (not a value computed from shapes) of more than one value: what a trainable
 * node can train. Scalars (Clip bounds, GELU's 0.5) and integer inputs (shapes, axes) are not. */
static bool is_weight(const nn_graph *g, int t) {
    const nn_tensor *x = &g->tensors[t];
    return x->data && !x->computed && x->dtype == NN_F32 && x->count > 1;
}

/* The role of input k of node n when it is a trained parameter; false for the others (a BN's
 * mean and variance, which inference-mode BN keeps fixed, and everything not a weight). */
static bool param_role(const nn_graph *g, const nn_node *n, int k, nn_param_role *role) {
    if (n->in[k] < 0 || !is_weight(g, n->in[k])) return false;
    switch (n->op) {
    case NN_OP_BATCHNORM:
        if (k != 1 && k != 2) return false;
        *role = k == 1 ? NN_PARAM_BN_SCALE : NN_PARAM_BN_SHIFT;
        return true;
    case NN_OP_CONV: case NN_OP_GEMM:
        *role = k == 2 ? NN_PARAM_BIAS : NN_PARAM_WEIGHT;
        return true;
    case NN_OP_RESHAPE: case NN_OP_EXPAND: case NN_OP_SLICE: case NN_OP_GATHER: return false; /* index inputs */
    default:
        *role = NN_PARAM_WEIGHT;
        return true;
    }
}

static ftl_status select_nodes(const nn_graph *g, const nn_cut_spec *spec, bool *on, int *n_convs) {
    int first = -1, from = -1;
    if (spec->last_convs > 0) {
        int convs = 0;
        for (int i = 0; i < g->n_nodes; i++) convs += !g->nodes[i].dead && g->nodes[i].op == NN_OP_CONV;
        if (spec->last_convs > convs)
            return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-last %d: the graph has %d Conv node%s before its feature "
                            "tensor", spec->last_convs, convs, convs == 1 ? "" : "s");
        for (int i = 0, seen = 0; i < g->n_nodes; i++)
            if (!g->nodes[i].dead && g->nodes[i].op == NN_OP_CONV && ++seen == convs - spec->last_convs + 1) first = i;
    } else {
        const char *name = spec->from_tensor ? spec->from_tensor : "";
        from = nn_graph_find(g, name);
        if (from < 0)
            return ftl_fail(FTL_E_NOT_FOUND, "--fine-tune-from '%s': no tensor of that name (`ftl inspect MODEL "
                            "--tensors` lists them)", name);
        if (g->tensors[from].data || (g->tensors[from].producer < 0 && !g->tensors[from].is_input))
            return ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-from '%s': a constant, not an activation", name);
    }
    /* forward reachability in execution order: a node is unfrozen when it is a selected Conv or
     * reads a tensor an unfrozen node wrote (or the cut tensor itself) */
    bool *hot = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *hot);
    if (from >= 0) hot[from] = true;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        bool u = first >= 0 && i >= first && n->op == NN_OP_CONV;
        for (int k = 0; k < n->n_in && !u; k++) u = n->in[k] >= 0 && hot[n->in[k]];
        on[i] = u;
        if (u)
            for (int k = 0; k < n->n_out; k++)
                if (n->out[k] >= 0) hot[n->out[k]] = true;
        if (u && n->op == NN_OP_CONV) (*n_convs)++;
    }
    free(hot);
    return FTL_OK;
}

ftl_status nn_trainable_select(const nn_graph *g, const nn_cut_spec *spec, nn_trainable *out) {
    memset(out, 0, sizeof *out);
    out->node = ftl_xcalloc((size_t)g->n_nodes + 1, sizeof *out->node);
    ftl_status st = select_nodes(g, spec, out->node, &out->n_convs);
    if (st != FTL_OK) {
        nn_trainable_free(out);
        return st;
    }
    int64_t batch = nn_graph_shape_batch(g);
    bool *listed = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *listed);
    out->params = ftl_xmalloc(((size_t)g->n_tensors + 1) * sizeof *out->params);
    out->boundary = ftl_xmalloc(((size_t)g->n_tensors + 1) * sizeof *out->boundary);
    for (int i = 0; i < g->n_nodes && st == FTL_OK; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int t = n->in[k];
            if (t < 0 || listed[t]) continue;
            nn_param_role role;
            if (out->node[i] && param_role(g, n, k, &role)) {
                listed[t] = true;
                out->params[out->n_params++] = (nn_trainable_param){t, i, role};
                out->param_count += g->tensors[t].count;
            } else if (out->node[i] && !nn_is_const(g, t)) {
                int p = g->tensors[t].producer;
                if (p < 0 || !out->node[p]) { /* a frozen activation crossing the cut */
                    listed[t] = true;
                    out->boundary[out->n_boundary++] = t;
                    out->boundary_floats += nn_shape_count(&g->tensors[t].shape) / batch;
                }
            }
        }
        out->n_nodes += out->node[i];
    }
    /* a trained initializer must not also feed the frozen part (training it would change the
     * frozen part's outputs, and with them the cached boundary) */
    for (int i = 0; i < g->n_nodes && st == FTL_OK; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead || out->node[i]) continue;
        for (int k = 0; k < n->n_in && st == FTL_OK; k++)
            for (int q = 0; q < out->n_params && n->in[k] >= 0; q++)
                if (out->params[q].tensor == n->in[k])
                    st = ftl_fail(FTL_E_UNSUPPORTED, "initializer '%s' is read by frozen node '%s' and by unfrozen node "
                                  "'%s': move the cut so both sides are frozen or both trained", g->tensors[n->in[k]].name,
                                  n->name, g->nodes[out->params[q].node].name);
    }
    free(listed);
    if (st == FTL_OK && out->n_nodes == 0)
        st = ftl_fail(FTL_E_INVALID_ARG, "--fine-tune-from '%s': no node before the feature tensor depends on it",
                      spec->from_tensor ? spec->from_tensor : "");
    if (st != FTL_OK) nn_trainable_free(out);
    return st;
}

static int add_node_of(nn_graph *g, nn_op op, const char *op_type, const char *name, const int *in, int n_in, int out) {
    int i = nn_graph_add_node(g);
    nn_node *n = &g->nodes[i];
    n->op = op;
    n->op_type = ftl_strdup(op_type);
    n->name = ftl_strdup(name);
    n->n_in = n_in;
    n->in = ftl_xmalloc((size_t)n_in * sizeof *n->in);
    memcpy(n->in, in, (size_t)n_in * sizeof *n->in);
    n->n_out = 1;
    n->out = ftl_xmalloc(sizeof *n->out);
    n->out[0] = out;
    n->p.axis = 1;
    g->tensors[out].producer = i;
    return i;
}

/* The cut's name, as the boundary tensors' rows are named in the feature cache. */
static char *boundary_name(const nn_cut_spec *spec) {
    return spec->last_convs > 0 ? ftl_format("ftl.boundary(last %d)", spec->last_convs)
                                : ftl_format("ftl.boundary(from %s)", spec->from_tensor);
}

ftl_status nn_bottom_output(nn_graph *g, const nn_cut_spec *spec, int *feature) {
    nn_trainable tr;
    FTL_TRY(nn_trainable_select(g, spec, &tr));
    if (tr.n_boundary == 1) {
        *feature = tr.boundary[0];
        nn_trainable_free(&tr);
        return FTL_OK;
    }
    int *flat = ftl_xmalloc((size_t)tr.n_boundary * sizeof *flat);
    for (int k = 0; k < tr.n_boundary; k++) {
        const char *base = g->tensors[tr.boundary[k]].name;
        flat[k] = nn_graph_new_tensor(g, base);
        char *name = ftl_format("ftl.flatten_boundary_%d", k);
        add_node_of(g, NN_OP_FLATTEN, "Flatten", name, &tr.boundary[k], 1, flat[k]);
        free(name);
    }
    /* Named by the cut: the feature cache keys its rows by this name. */
    char *base = boundary_name(spec);
    int out = nn_graph_new_tensor(g, base);
    free(base);
    add_node_of(g, NN_OP_CONCAT, "Concat", "ftl.concat_boundary", flat, tr.n_boundary, out);
    free(flat);
    nn_trainable_free(&tr);
    *feature = out;
    return FTL_OK;
}

/* Unfrozen nodes (of the first `nodes`, those tr knows) read `to` where they read `from`. */
static void rewire_top(nn_graph *g, const nn_trainable *tr, int nodes, int from, int to) {
    for (int i = 0; i < nodes; i++)
        for (int k = 0; tr->node[i] && k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == from) g->nodes[i].in[k] = to;
    /* shape arithmetic on the boundary (a Shape of it) reads the new tensor, of the same shape */
    for (int f = 0; f < g->n_folds; f++)
        for (int k = 0; k < g->folds[f].node.n_in; k++)
            if (g->folds[f].node.in[k] == from) g->folds[f].node.in[k] = to;
}

ftl_status nn_top_input(nn_graph *g, const nn_cut_spec *spec, int feature) {
    nn_trainable tr;
    FTL_TRY(nn_trainable_select(g, spec, &tr));
    if (tr.n_boundary > NN_MAX_SPLIT) {
        int n = tr.n_boundary;
        nn_trainable_free(&tr);
        return ftl_fail(FTL_E_UNSUPPORTED, "the cut is crossed by %d tensors; the frozen top takes at most %d", n,
                        NN_MAX_SPLIT);
    }
    char *base = boundary_name(spec);
    int in = nn_graph_new_tensor(g, base);
    free(base);
    int nodes = g->n_nodes; /* before the split and reshapes are added */
    if (tr.n_boundary == 1) {
        g->tensors[in].shape = g->tensors[tr.boundary[0]].shape;
        rewire_top(g, &tr, nodes, tr.boundary[0], in);
    } else { /* one row per image, split back into the tensors in boundary order */
        g->tensors[in].shape = (nn_shape){.rank = 2, .d = {1, tr.boundary_floats}};
        int flat[NN_MAX_SPLIT];
        for (int k = 0; k < tr.n_boundary; k++) flat[k] = nn_graph_new_tensor(g, "ftl.boundary_part");
        int split = nn_graph_add_node(g);
        nn_node *n = &g->nodes[split];
        n->op = NN_OP_SPLIT;
        n->op_type = ftl_strdup("Split");
        n->name = ftl_strdup("ftl.split_boundary");
        n->n_in = 1;
        n->in = ftl_xmalloc(sizeof *n->in);
        n->in[0] = in;
        n->n_out = tr.n_boundary;
        n->out = ftl_xmalloc((size_t)tr.n_boundary * sizeof *n->out);
        n->p.axis = 1;
        n->p.n_split = tr.n_boundary;
        for (int k = 0; k < tr.n_boundary; k++) {
            const nn_shape *bs = &g->tensors[tr.boundary[k]].shape;
            n->out[k] = flat[k];
            n->p.split[k] = nn_shape_count(bs) / bs->d[0];
        }
        for (int k = 0; k < tr.n_boundary; k++) {
            nn_shape bs = g->tensors[tr.boundary[k]].shape; /* a copy: new tensors move the array */
            int shape = nn_graph_new_tensor(g, "ftl.boundary_shape");
            int64_t *dims = ftl_xmalloc((size_t)bs.rank * sizeof *dims);
            dims[0] = 0; /* the batch, copied from the input */
            for (int i = 1; i < bs.rank; i++) dims[i] = bs.d[i];
            nn_tensor_set_data(&g->tensors[shape], NN_I64, dims, &(nn_shape){.rank = 1, .d = {bs.rank}});
            int tensor = nn_graph_new_tensor(g, g->tensors[tr.boundary[k]].name);
            int pair[2] = {flat[k], shape};
            char *name = ftl_format("ftl.reshape_boundary_%d", k);
            add_node_of(g, NN_OP_RESHAPE, "Reshape", name, pair, 2, tensor);
            free(name);
            rewire_top(g, &tr, nodes, tr.boundary[k], tensor);
        }
    }
    nn_trainable_free(&tr);
    g->tensors[in].is_input = true;
    g->tensors[in].producer = -1;
    /* sorted with the image input still there (the bottom's nodes wait on it), then pruned to the new one */
    g->inputs = ftl_xrealloc(g->inputs, ((size_t)g->n_inputs + 1) * sizeof *g->inputs);
    g->inputs[g->n_inputs++] = in;
    FTL_TRY(nn_graph_sort(g));
    FTL_TRY(nn_graph_prune(g, feature));
    for (int t = 0; t < g->n_tensors; t++) g->tensors[t].is_input = t == in;
    return FTL_OK;
}
