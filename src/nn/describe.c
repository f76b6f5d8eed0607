/* `ftl inspect MODEL.onnx`: a human-readable summary of an ONNX backbone. */
#include "ftl/nn.h"
#include "nn/onnx/load.h"
#include "nn/ir/topo.h"
#include "nn/ir/trainable.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static const char *with_commas(long long v, char *buf, size_t size) {
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", v < 0 ? -v : v);
    size_t len = strlen(raw), o = 0;
    if (v < 0 && o + 1 < size) buf[o++] = '-';
    for (size_t i = 0; i < len && o + 2 < size; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

bool ftl_model_path_is_onnx(const char *path) {
    size_t len = strlen(path);
    if (len >= 5 && strcmp(path + len - 5, ".onnx") == 0) return true;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char head[9] = {0};
    size_t n = fread(head, 1, 9, f);
    fclose(f);
    /* safetensors (MODEL.ftl, checkpoints): an 8-byte little-endian header length, then '{'; its first
     * byte is 0x08 whenever the length is 8 more than a multiple of 256 */
    if (n == 9 && head[8] == '{' && head[5] == 0 && head[6] == 0 && head[7] == 0) return false;
    /* ModelProto starts with field 1 (ir_version, varint): tag byte 0x08; Parquet starts "PAR1" */
    return n >= 2 && head[0] == 0x08 && memcmp(head, "PAR1", 4) != 0;
}

static void print_op_counts(const nn_graph *g, FILE *out) {
    int counts[NN_OP_COUNT] = {0}, total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead) {
            counts[g->nodes[i].op]++;
            total++;
        }
    fprintf(out, "nodes       %d:", total);
    for (int shown = 0;; shown++) {
        int best = -1;
        for (int op = 0; op < NN_OP_COUNT; op++)
            if (counts[op] && (best < 0 || counts[op] > counts[best])) best = op;
        if (best < 0) break;
        fprintf(out, "%s %s %d", shown ? "," : "", nn_op_name((nn_op)best), counts[best]);
        counts[best] = 0;
    }
    fprintf(out, "\n");
}

static void print_tensor_line(const nn_graph *g, const char *label, int t, FILE *out) {
    char s[128];
    fprintf(out, "%-11s %s %s float32", label, g->tensors[t].name, nn_shape_str(&g->tensors[t].shape, true, s, sizeof s));
    const nn_shape *x = &g->tensors[t].shape;
    if (g->tensors[t].is_input && x->rank == 4) {
        bool nhwc = (x->d[3] == 3 || x->d[3] == 1) && x->d[1] != 3 && x->d[1] != 1;
        fprintf(out, " (%s, %lld channels, %lldx%lld)", nhwc ? "NHWC" : "NCHW", (long long)(nhwc ? x->d[3] : x->d[1]),
                (long long)(nhwc ? x->d[1] : x->d[2]), (long long)(nhwc ? x->d[2] : x->d[3]));
    }
    fprintf(out, "\n");
}

/* The tensors a user most likely wants features from (what --features-from takes): pooled outputs
 * (global pools, spatial means, the Flatten after them), a token picked from a sequence (a ViT's
 * class token) and the input of every fully connected layer (the classic fc6/fc7 features); the
 * last few in execution order, the nearest the output first. */
/* A ReduceMean over every position, keeping the channels: the spatial axes of NCHW or NHWC, or the
 * tokens of [N, tokens, channels]. */
static bool reduces_positions(const nn_graph *g, const nn_node *n) {
    int r = g->tensors[n->in[0]].shape.rank;
    if (n->op != NN_OP_REDUCEMEAN || r < 3 || n->p.n_axes <= 0) return false;
    unsigned mask = 0;
    for (int k = 0; k < n->p.n_axes; k++) mask |= 1u << (unsigned)((n->p.axes[k] + r) % r);
    unsigned all = (1u << (unsigned)r) - 1;
    return r == 3 ? mask == 2u : (mask == (all & ~3u) || mask == (all & ~1u & ~(1u << (unsigned)(r - 1))));
}

static void print_cut_candidates(const nn_graph *g, FILE *out) {
    enum { SHOW = 6 };
    int *cand = ftl_xmalloc((size_t)(g->n_nodes + 1) * 2 * sizeof *cand), n = 0;
    const char **why = ftl_xmalloc((size_t)(g->n_nodes + 1) * 2 * sizeof *why);
    int64_t batch = nn_graph_shape_batch(g);
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *nd = &g->nodes[i];
        if (nd->dead || g->tensors[nd->out[0]].shape.d[0] != batch) continue;
        const nn_shape *y = &g->tensors[nd->out[0]].shape;
        if (nd->op == NN_OP_GLOBALAVGPOOL || nd->op == NN_OP_GLOBALMAXPOOL || reduces_positions(g, nd))
            cand[n] = nd->out[0], why[n++] = "pooled";
        else if (nd->op == NN_OP_FLATTEN && y->rank == 2)
            cand[n] = nd->out[0], why[n++] = "flattened";
        else if (nd->op == NN_OP_GATHER && y->rank == 2)
            cand[n] = nd->out[0], why[n++] = "one token of a sequence";
        if ((nd->op == NN_OP_GEMM || (nd->op == NN_OP_MATMUL && nn_is_const(g, nd->in[1]))) && !nn_is_const(g, nd->in[0]) &&
            g->tensors[nd->in[0]].shape.rank == 2 && g->tensors[nd->in[0]].shape.d[0] == batch)
            cand[n] = nd->in[0], why[n++] = "input of a fully connected layer";
    }
    int shown = 0;
    char s[128];
    for (int k = n - 1; k >= 0 && shown < SHOW; k--) {
        bool dup = false;
        for (int j = k + 1; j < n; j++) dup = dup || cand[j] == cand[k];
        if (dup) continue;
        const nn_tensor *t = &g->tensors[cand[k]];
        int64_t per = t->shape.d[0] > 0 ? nn_shape_count(&t->shape) / t->shape.d[0] : 0;
        fprintf(out, "%-11s %s %s: %lld floats per image (%s)\n", shown ? "" : "cut at", t->name,
                nn_shape_str(&t->shape, true, s, sizeof s), (long long)per, why[k]);
        shown++;
    }
    if (!shown) fprintf(out, "cut at      (no pooled or fully connected tensors: see --tensors)\n");
    free(cand);
    free(why);
}

ftl_status ftl_model_describe(const char *path, const ftl_model_options *options, FILE *out) {
    nn_graph *g;
    char sha[65];
    FTL_TRY(nn_load_checked(path, &g, sha));
    char a[64], b[64], s[128];
    fprintf(out, "model       %s\nsha256      %s\nformat      ONNX IR %lld, opset %lld, producer \"%s\"\n", path, sha,
            (long long)g->ir_version, (long long)g->opset, g->producer ? g->producer : "");
    for (int i = 0; i < g->n_inputs; i++) print_tensor_line(g, "input", g->inputs[i], out);
    for (int i = 0; i < g->n_outputs; i++) print_tensor_line(g, "output", g->outputs[i], out);
    print_op_counts(g, out);
    long long params, macs;
    nn_graph_cost(g, &params, &macs);
    fprintf(out, "parameters  %s float32 (%.1f MiB)\n", with_commas(params, a, sizeof a), (double)params * 4 / 1048576.0);
    fprintf(out, "MACs/image  %s (%.3f GFLOP per image)\n", with_commas(macs, b, sizeof b), 2e-9 * (double)macs);
    print_cut_candidates(g, out);
    int feature;
    ftl_status st = nn_select_features(g, options ? options->features_from : NULL, &feature);
    nn_optimize_stats os;
    if (st == FTL_OK) st = nn_graph_prune(g, feature);
    long long fparams = 0, fmacs = 0;
    if (st == FTL_OK) nn_graph_cost(g, &fparams, &fmacs);
    if (st == FTL_OK) st = nn_prepare_for_run(g, feature, &os);
    if (st == FTL_OK) {
        const nn_shape *f = &g->tensors[g->outputs[0]].shape;
        fprintf(out, "features    %s %s: %lld floats per image", g->tensors[g->outputs[0]].name,
                nn_shape_str(f, true, s, sizeof s), (long long)(nn_shape_count(f) / (f->d[0] ? f->d[0] : 1)));
        if (fmacs != macs || fparams != params)
            fprintf(out, " (pruned graph: %s parameters, %s MACs/image)", with_commas(fparams, a, sizeof a),
                    with_commas(fmacs, b, sizeof b));
        fprintf(out, "\noptimised   %d nodes: %d BatchNormalization folded into Conv, %d as 1x1 depthwise Conv, %d "
                "activations and %d residual Adds fused, %d Pads folded, %d Identity/Dropout/empty Pad dropped\n",
                g->n_nodes, os.bn_folded, os.bn_to_conv, os.acts_fused, os.sums_fused, os.pads_folded, os.identities);
    }
    nn_graph_free(g);
    if (st != FTL_OK) return ftl_fail_context(st, "%s", path);
    return FTL_OK;
}

ftl_status ftl_model_list_tensors(const char *path, FILE *out) {
    nn_graph *g;
    FTL_TRY(nn_load_checked(path, &g, NULL));
    char s[128];
    for (int i = 0; i < g->n_inputs; i++)
        fprintf(out, "%s\t%s\t(graph input)\n", g->tensors[g->inputs[i]].name,
                nn_shape_str(&g->tensors[g->inputs[i]].shape, true, s, sizeof s));
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        fprintf(out, "%s\t%s\t%s (%s)\n", g->tensors[n->out[0]].name,
                nn_shape_str(&g->tensors[n->out[0]].shape, true, s, sizeof s), n->name, n->op_type);
    }
    nn_graph_free(g);
    return FTL_OK;
}

ftl_status ftl_model_describe_fine_tune(const char *path, const ftl_model_options *options, const ftl_fine_tune_cut *cut,
                                        FILE *out) {
    nn_graph *g;
    FTL_TRY(nn_load_checked(path, &g, NULL));
    int feature;
    ftl_status st = nn_select_features(g, options ? options->features_from : NULL, &feature);
    if (st == FTL_OK) st = nn_graph_prune(g, feature);
    nn_trainable tr;
    nn_cut_spec spec = {cut->last_convs, cut->from_tensor};
    if (st == FTL_OK) st = nn_trainable_select(g, &spec, &tr);
    if (st != FTL_OK) {
        nn_graph_free(g);
        return ftl_fail_context(st, "%s", path);
    }
    char a[32], b[32], s[128];
    if (cut->last_convs > 0) fprintf(out, "fine-tune   --fine-tune-last %d:", cut->last_convs);
    else fprintf(out, "fine-tune   --fine-tune-from %s:", cut->from_tensor);
    fprintf(out, " %d nodes unfrozen (%d Conv), %d parameter tensors, %s values; %d boundary tensor%s, %s floats per "
            "image (%.1f KiB as float32)\n", tr.n_nodes, tr.n_convs, tr.n_params, with_commas(tr.param_count, a, sizeof a),
            tr.n_boundary, tr.n_boundary == 1 ? "" : "s", with_commas(tr.boundary_floats, b, sizeof b),
            (double)tr.boundary_floats * 4 / 1024.0);
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && tr.node[i]) fprintf(out, "unfrozen    %s (%s)\n", g->nodes[i].name, g->nodes[i].op_type);
    for (int k = 0; k < tr.n_params; k++) {
        const nn_tensor *t = &g->tensors[tr.params[k].tensor];
        fprintf(out, "param       %s %s %s, %lld values (node %s)\n", t->name, nn_shape_str(&t->shape, false, s, sizeof s),
                nn_param_role_name(tr.params[k].role), (long long)t->count, g->nodes[tr.params[k].node].name);
    }
    int64_t batch = nn_graph_shape_batch(g);
    for (int k = 0; k < tr.n_boundary; k++) {
        const nn_tensor *t = &g->tensors[tr.boundary[k]];
        fprintf(out, "boundary    %s %s: %lld floats per image\n", t->name, nn_shape_str(&t->shape, true, s, sizeof s),
                (long long)(nn_shape_count(&t->shape) / batch));
    }
    nn_trainable_free(&tr);
    nn_graph_free(g);
    return FTL_OK;
}
