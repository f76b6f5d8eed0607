/* The shape pass: every node's output shape for a concrete batch, in execution order, by the
 * per-op rules (shape_rules.c), with shape arithmetic and constant subgraphs evaluated on the way
 * (fold.c). */
#include "nn/ir/shape.h"
#include "nn/ir/fold.h"
#include "nn/ir/ops.h"
#include "nn/ir/shape_rules.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHAPE_TXT(s) nn_shape_str(&(s), false, (char[128]){0}, 128)

static ftl_status node_err(const nn_node *n, const char *fmt, const char *a, const char *b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

/* A shape every later stage can size buffers from: no negative dimension, at most
 * NN_MAX_TENSOR_ELEMENTS elements. */
static bool shape_size_ok(const nn_shape *s) {
    int64_t c = 1;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] < 0 || __builtin_mul_overflow(c, s->d[i], &c) || c > NN_MAX_TENSOR_ELEMENTS) return false;
    return true;
}

static bool is_const_foldable(nn_op op) {
    return op == NN_OP_IDENTITY || op == NN_OP_DROPOUT || op == NN_OP_RESHAPE || op == NN_OP_FLATTEN ||
           op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE;
}

/* Moves main node i into the fold list, to be evaluated after main node `after`. */
static void extract_fold(nn_graph *g, int i, int after) {
    if (g->n_folds == g->cap_folds) {
        g->cap_folds = g->cap_folds ? 2 * g->cap_folds : 64;
        g->folds = ftl_xrealloc(g->folds, (size_t)g->cap_folds * sizeof *g->folds);
    }
    int at = g->n_folds; /* keep the list ordered by `after` (stable) */
    while (at > 0 && g->folds[at - 1].after > after) at--;
    memmove(&g->folds[at + 1], &g->folds[at], (size_t)(g->n_folds - at) * sizeof *g->folds);
    g->folds[at] = (nn_fold){.node = g->nodes[i], .after = after};
    g->n_folds++;
    nn_node *n = &g->nodes[i];
    memset(n, 0, sizeof *n); /* its strings and edges now belong to the fold */
    n->dead = true;
}

static ftl_status run_folds(nn_graph *g, int *next, int upto) {
    for (; *next < g->n_folds && g->folds[*next].after <= upto; (*next)++) {
        nn_node *f = &g->folds[*next].node;
        if (f->p.deferred) FTL_TRY(nn_node_reparse_params(g, f));
        if (!nn_fold_possible(g, f))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): an input is no longer a constant", f->name, f->op_type);
        FTL_TRY(nn_fold_eval(g, f));
    }
    return FTL_OK;
}

ftl_status nn_infer_shapes(nn_graph *g, int64_t batch) {
    if (g->batch_locked > 0) batch = g->batch_locked;
    for (int t = 0; t < g->n_tensors; t++)
        if (!g->tensors[t].data && !g->tensors[t].is_input) g->tensors[t].shape.rank = -1;
    for (int i = 0; i < g->n_inputs; i++) {
        nn_tensor *in = &g->tensors[g->inputs[i]];
        in->shape.d[0] = batch;
        if (!shape_size_ok(&in->shape))
            return ftl_fail(FTL_E_FORMAT, "graph input '%s' has shape %s: more than 2^31 elements or a negative "
                            "dimension", in->name, SHAPE_TXT(in->shape));
    }
    int next_fold = 0, last_live = -1;
    FTL_TRY(run_folds(g, &next_fold, -1));
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && g->tensors[n->in[k]].shape.rank < 0 && !g->tensors[n->in[k]].data)
                return node_err(n, "input '%s' has no known shape%s", g->tensors[n->in[k]].name, "");
        if (n->p.deferred) FTL_TRY(nn_node_reparse_params(g, n));
        bool all_const = true, any_computed = false;
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0) continue;
            if (!nn_is_const(g, n->in[k]) && !(k > 0 && n->op == NN_OP_RESHAPE)) all_const = false;
            if (g->tensors[n->in[k]].computed) any_computed = true;
        }
        if ((all_const && (any_computed || !is_const_foldable(n->op)) && nn_fold_possible(g, n)) ||
            (n->op == NN_OP_SHAPE && nn_fold_possible(g, n))) {
            /* shape arithmetic, or arithmetic on constants: evaluated now and for every batch */
            FTL_TRY(nn_fold_eval(g, n));
            extract_fold(g, i, last_live);
            next_fold++; /* just evaluated */
            continue;
        }
        nn_shape y;
        FTL_TRY(nn_infer_node_shape(g, n, &y));
        if (!shape_size_ok(&y))
            return node_err(n, "its output would have shape %s: more than 2^31 elements or a negative dimension",
                            SHAPE_TXT(y), "");
        nn_tensor *out = &g->tensors[n->out[0]];
        if (all_const && is_const_foldable(n->op) && g->tensors[n->in[0]].data) {
            /* a re-indexing of a constant is that constant with a new shape */
            nn_tensor *src = &g->tensors[n->in[0]];
            size_t bytes = (size_t)(src->count ? src->count : 1) * (src->dtype == NN_F32 ? sizeof(float) : sizeof(int64_t));
            void *copy = malloc(bytes);
            if (!copy) return ftl_fail(FTL_E_NOMEM, "out of memory");
            memcpy(copy, src->data, bytes);
            nn_tensor_set_data(out, src->dtype, copy, &y);
            out->producer = -1;
            n->dead = true;
            continue;
        }
        if (all_const)
            return node_err(n, "all its inputs are constants; computing constants at load time is not supported for "
                            "this op%s%s", "", "");
        out->shape = y;
        for (int k = 1; n->op == NN_OP_SPLIT && k < n->n_out; k++) /* Split's other parts */
            if (n->out[k] >= 0) {
                g->tensors[n->out[k]].shape = y;
                g->tensors[n->out[k]].shape.d[n->p.axis] = n->p.split[k];
            }
        last_live = i;
        FTL_TRY(run_folds(g, &next_fold, i));
    }
    return FTL_OK;
}
