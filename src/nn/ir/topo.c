/* Topological order, pruning and use counts over the graph IR. */
#include "nn/ir/topo.h"
#include "util/alloc.h"
#include "util/error.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void nn_graph_compact(nn_graph *g) {
    int k = 0;
    /* folds run after a main node: renumber, a removed node's folds moving to the live one before it */
    int *renumber = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *renumber);
    for (int i = 0, live = -1; i < g->n_nodes; i++) {
        if (!g->nodes[i].dead) live++;
        renumber[i] = live;
    }
    for (int f = 0; f < g->n_folds; f++)
        if (g->folds[f].after >= 0) g->folds[f].after = renumber[g->folds[f].after];
    free(renumber);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) {
            nn_node *n = &g->nodes[i];
            free(n->name);
            free(n->op_type);
            free(n->in);
            free(n->out);
            for (int a = 0; a < n->n_attr; a++) {
                free(n->attr[a].name);
                free(n->attr[a].s);
                free(n->attr[a].ints);
                free(n->attr[a].floats);
            }
            free(n->attr);
            continue;
        }
        g->nodes[k++] = g->nodes[i];
    }
    g->n_nodes = k;
    nn_graph_update_producers(g);
}

void nn_graph_update_producers(nn_graph *g) {
    for (int t = 0; t < g->n_tensors; t++)
        if (!g->tensors[t].data) g->tensors[t].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int o = 0; o < g->nodes[i].n_out; o++)
                if (g->nodes[i].out[o] >= 0) g->tensors[g->nodes[i].out[o]].producer = i;
}

ftl_status nn_graph_sort(nn_graph *g) {
    int n = g->n_nodes;
    bool *ready = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *ready);
    bool *done = ftl_xcalloc((size_t)n + 1, sizeof *done);
    int *order = ftl_xmalloc(((size_t)n + 1) * sizeof *order);
    for (int t = 0; t < g->n_tensors; t++) ready[t] = g->tensors[t].data || g->tensors[t].is_input;
    int placed = 0;
    /* Repeated stable sweeps: one sweep for a graph already in order. */
    for (bool progress = true; progress && placed < n;) {
        progress = false;
        for (int i = 0; i < n; i++) {
            if (done[i]) continue;
            const nn_node *nd = &g->nodes[i];
            bool ok = true;
            for (int k = 0; k < nd->n_in && ok; k++)
                if (nd->in[k] >= 0 && !ready[nd->in[k]]) ok = false;
            if (!ok) continue;
            done[i] = true;
            order[placed++] = i;
            progress = true;
            for (int k = 0; k < nd->n_out; k++)
                if (nd->out[k] >= 0) ready[nd->out[k]] = true;
        }
    }
    ftl_status st = FTL_OK;
    if (placed < n) {
        int stuck = -1, missing = -1;
        for (int i = 0; i < n && stuck < 0; i++)
            if (!done[i])
                for (int k = 0; k < g->nodes[i].n_in; k++)
                    if (g->nodes[i].in[k] >= 0 && !ready[g->nodes[i].in[k]]) {
                        stuck = i;
                        missing = g->nodes[i].in[k];
                        break;
                    }
        st = ftl_fail(FTL_E_FORMAT, "the graph has a cycle: node '%s' (%s) waits for tensor '%s', which depends on its "
                      "own output (%d nodes on or behind the cycle)", g->nodes[stuck].name, g->nodes[stuck].op_type,
                      g->tensors[missing].name, n - placed);
    } else {
        nn_node *sorted = ftl_xmalloc(((size_t)n + 1) * sizeof *sorted);
        for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
        if (n > 0) memcpy(g->nodes, sorted, (size_t)n * sizeof *sorted); /* no nodes: g->nodes may be NULL */
        free(sorted);
        nn_graph_compact(g);
    }
    free(ready);
    free(done);
    free(order);
    return st;
}

/* Marks the inputs of fold f needed when its output is, else drops it; true when kept. */
static bool prune_fold(nn_graph *g, int f, bool *need) {
    nn_node *n = &g->folds[f].node;
    if (!need[n->out[0]]) {
        nn_node_free(n);
        n->dead = true;
        return false;
    }
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0) need[n->in[k]] = true;
    return true;
}

ftl_status nn_graph_prune(nn_graph *g, int feature) {
    bool *need = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *need);
    need[feature] = true;
    int f = g->n_folds - 1;
    for (int i = g->n_nodes - 1; i >= -1; i--) { /* reverse execution order, folds included */
        for (; f >= 0 && g->folds[f].after >= i; f--) prune_fold(g, f, need);
        if (i < 0) break;
        nn_node *n = &g->nodes[i];
        bool used = false;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && need[n->out[k]]) used = true;
        if (!used) {
            n->dead = true;
            continue;
        }
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) need[n->in[k]] = true;
    }
    int kept_folds = 0;
    for (int k = 0; k < g->n_folds; k++)
        if (!g->folds[k].node.dead) g->folds[kept_folds++] = g->folds[k];
    g->n_folds = kept_folds;
    int kept = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (need[g->inputs[i]]) g->inputs[kept++] = g->inputs[i];
    g->n_inputs = kept;
    free(need);
    nn_graph_compact(g);
    g->outputs[0] = feature;
    g->n_outputs = 1;
    if (g->tensors[feature].data)
        return ftl_fail(FTL_E_INVALID_ARG, "tensor '%s' is a constant, not computed from the input", g->tensors[feature].name);
    if (g->n_inputs != 1)
        return ftl_fail(FTL_E_UNSUPPORTED, "the features '%s' depend on %d graph inputs; ftl feeds exactly one image "
                        "tensor", g->tensors[feature].name, g->n_inputs);
    return FTL_OK;
}

int *nn_graph_use_counts(const nn_graph *g) {
    int *uses = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *uses);
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) uses[n->in[k]]++;
        for (int k = 0; k < n->n_post; k++)
            if (n->post[k].kind == NN_POST_SUM) uses[n->post[k].sum_tensor]++;
    }
    for (int f = 0; f < g->n_folds; f++) /* a Shape reads its input's shape: keep that tensor as it is */
        for (int k = 0; k < g->folds[f].node.n_in; k++)
            if (g->folds[f].node.in[k] >= 0) uses[g->folds[f].node.in[k]]++;
    for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++;
    return uses;
}

void nn_graph_last_readers(const nn_graph *g, int *last) {
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) last[n->in[k]] = i;
        for (int k = 0; k < n->n_post; k++)
            if (n->post[k].kind == NN_POST_SUM) last[n->post[k].sum_tensor] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = INT_MAX;
}
