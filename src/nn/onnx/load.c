/* Model-loading pipeline (see load.h). */
#include "nn/onnx/load.h"
#include "nn/onnx/onnx_import.h"
#include "nn/ir/ops.h"
#include "nn/ir/qdq.h"
#include "nn/ir/quantize.h"
#include "nn/ir/shape.h"
#include "nn/ir/topo.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ftl_status nn_load_checked(const char *path, nn_graph **out, char *sha256_hex) {
    return nn_load_checked_expecting(path, out, sha256_hex, NULL, NULL);
}

ftl_status nn_load_checked_expecting(const char *path, nn_graph **out, char *sha256_hex, const char *expected_sha256,
                                     const char *expected_of) {
    nn_graph *g;
    char sha[65] = "";
    FTL_TRY(nn_onnx_import(path, &g, sha));
    if (sha256_hex) memcpy(sha256_hex, sha, sizeof sha);
    /* before anything reads the graph: another backbone's first symptom (a missing tensor) would hide the cause */
    if (expected_sha256 && strcmp(sha, expected_sha256) != 0) {
        nn_graph_free(g);
        if (expected_of)
            return ftl_fail(FTL_E_INVALID_ARG, "%s has sha256 %.16s..., but %s was trained on a backbone with sha256 "
                            "%.16s...", path, sha, expected_of, expected_sha256);
        return ftl_fail(FTL_E_INVALID_ARG, "%s has sha256 %.16s..., not the expected %.16s...", path, sha, expected_sha256);
    }
    ftl_status st = nn_qdq_lower(g);
    for (int i = 0; i < g->n_nodes && st == FTL_OK; i++)
        if (!g->nodes[i].dead) st = nn_node_parse_params(g, &g->nodes[i]);
    if (st == FTL_OK) {
        nn_graph_compact(g);
        st = nn_graph_sort(g);
    }
    if (st == FTL_OK && g->n_inputs == 0) st = ftl_fail(FTL_E_UNSUPPORTED, "the graph has no runtime input");
    if (st == FTL_OK) {
        st = nn_infer_shapes(g, 1);
        /* an export with a fixed batch may have baked it into Reshape shapes: then it runs at that batch */
        if (st == FTL_OK && g->fixed_batch > 0) {
            st = nn_infer_shapes(g, 2);
            if (st == FTL_OK) st = nn_infer_shapes(g, 1);
        }
        if (st != FTL_OK && g->fixed_batch > 0) {
            char first[512];
            snprintf(first, sizeof first, "%s", ftl_last_error());
            g->batch_locked = g->fixed_batch;
            st = nn_infer_shapes(g, g->batch_locked);
            if (st != FTL_OK) ftl_fail(st, "%s", first);
            else ftl_log_info("%s: the graph works only at its fixed batch of %lld (%s); ftl runs it %lld images at a time",
                              path, (long long)g->batch_locked, first, (long long)g->batch_locked);
        }
    }
    if (st == FTL_OK) nn_graph_compact(g);
    if (st != FTL_OK) {
        nn_graph_free(g);
        return ftl_fail_context(st, "%s", path);
    }
    *out = g;
    return FTL_OK;
}

ftl_status nn_graph_override(nn_graph *g, const char *path, const ftl_tensor_override *ov, int n) {
    for (int k = 0; k < n; k++) {
        int t = ov[k].name ? nn_graph_find(g, ov[k].name) : -1;
        nn_tensor *x = t >= 0 ? &g->tensors[t] : NULL;
        if (!x || !x->data || x->computed || x->dtype != NN_F32)
            return ftl_fail(FTL_E_FORMAT, "%s: fine-tuned tensor '%s' is not a float initializer of this model (was the "
                            "classifier trained on another backbone?)", path, ov[k].name ? ov[k].name : "");
        if (x->count != ov[k].count || !ov[k].data)
            return ftl_fail(FTL_E_FORMAT, "%s: fine-tuned tensor '%s' has %lld values, the model's has %lld", path,
                            ov[k].name, (long long)ov[k].count, (long long)x->count);
        memcpy(x->data, ov[k].data, (size_t)ov[k].count * sizeof(float));
        free(x->weight_scale); /* tuned values are no longer the model's integers: they run as floats */
        x->weight_scale = NULL;
    }
    return FTL_OK;
}

ftl_status nn_select_features(const nn_graph *g, const char *name, int *tensor) {
    if (!name || !*name) {
        *tensor = g->outputs[0];
        return FTL_OK;
    }
    int t = nn_graph_find(g, name);
    if (t >= 0 && (g->tensors[t].producer >= 0 || g->tensors[t].is_input)) {
        *tensor = t;
        return FTL_OK;
    }
    /* suggest computed tensors whose name contains the request (or vice versa) */
    char hint[512] = "";
    size_t used = 0;
    int shown = 0;
    for (int i = 0; i < g->n_tensors && shown < 5; i++) {
        const nn_tensor *c = &g->tensors[i];
        if (c->producer < 0 || !(strstr(c->name, name) || strstr(name, c->name))) continue;
        used += (size_t)snprintf(hint + used, sizeof hint - used, "%s'%s'", shown ? ", " : "; similar: ", c->name);
        shown++;
        if (used >= sizeof hint) break;
    }
    return ftl_fail(FTL_E_NOT_FOUND, "--features-from '%s': no tensor of that name is computed by the graph%s "
                    "(`ftl inspect MODEL --tensors` lists them)", name, hint);
}

long long nn_node_macs(const nn_graph *g, int i) {
    const nn_node *n = &g->nodes[i];
    if (n->dead) return 0;
    const nn_shape *y = &g->tensors[n->out[0]].shape;
    long long m = 0;
    if (n->op == NN_OP_CONV) {
        const nn_shape *w = &g->tensors[n->in[1]].shape;
        m = nn_shape_count(y) * w->d[1] * w->d[2] * w->d[3];
    } else if (n->op == NN_OP_GEMM || n->op == NN_OP_MATMUL) {
        const nn_shape *x = &g->tensors[n->in[0]].shape;
        m = nn_shape_count(y) * x->d[x->rank - 1];
    } else if (n->op == NN_OP_EINSUM) { /* the contracted letter's size */
        const nn_shape *x = &g->tensors[n->in[0]].shape;
        for (int t = 0; t < x->rank; t++)
            if (n->p.ein_a[t] == x->rank - 1) m += nn_shape_count(y) * x->d[t];
    }
    return m;
}

void nn_graph_cost(const nn_graph *g, long long *params, long long *macs) {
    bool *counted = calloc((size_t)g->n_tensors + 1, 1);
    long long p = 0, m = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int t = n->in[k];
            if (t >= 0 && g->tensors[t].data && g->tensors[t].dtype == NN_F32 && counted && !counted[t]) {
                counted[t] = true;
                if (g->tensors[t].count > 1 || n->op != NN_OP_CLIP) p += g->tensors[t].count;
            }
        }
        m += nn_node_macs(g, i);
    }
    free(counted);
    *params = p;
    *macs = g->batch_locked > 1 ? m / g->batch_locked : m; /* shapes are for the locked batch */
}

ftl_status nn_prepare_for_run(nn_graph *g, int feature, nn_optimize_stats *stats) {
    FTL_TRY(nn_graph_prune(g, feature));
    FTL_TRY(nn_infer_shapes(g, 1));
    nn_graph_compact(g);
    FTL_TRY(nn_optimize(g, stats));
    if (g->quantized && nn_qdq_fold_fake_quant(g) > 0) nn_graph_compact(g);
    return FTL_OK;
}
