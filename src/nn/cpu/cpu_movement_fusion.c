/* Chains of data movement run as one copy: a DAG of Slice, Concat, Transpose and reshape nodes from
 * one source tensor to one sink, whose intermediate tensors nothing else reads, becomes a single
 * table-driven copy of the source's contiguous runs into the sink's order. Swin's shifted windows
 * are the case: torch.roll as two Slices and a Concat per axis, then the window partition (Reshape,
 * Transpose, Reshape), and the same backwards after the attention, each three full copies of the
 * activations that are now one; its patch merging (every second row and column, four Slices into a
 * Concat) two copies that are now one. The table comes from running the chain on element indices for two
 * images (each must map to its own rows, as image 0 does), so any composition of these ops is exact.
 * FTL_NN_GATHER_CHAINS=0 keeps the nodes' own steps (A/B runs, tests). */
#include "nn/cpu/cpu_plan.h"
#include "nn/cpu/emit_common.h"
#include "nn/ir/ops.h"
#include "nn/ir/shape.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

enum { MIN_RUN_BYTES = 64 };

static bool is_movement(const nn_graph *g, const nn_node *n) {
    if (n->dead || n->n_post > 0 || n->n_out != 1 || n->out[0] < 0) return false;
    if (n->op == NN_OP_SLICE || n->op == NN_OP_CONCAT || n->op == NN_OP_TRANSPOSE || nn_op_is_reshape_like(n->op))
        return true;
    if (n->op != NN_OP_PAD) return false;
    const nn_shape *x = &g->tensors[n->in[0]].shape;
    for (int i = 0; i < 2 * x->rank; i++)
        if (n->p.pads[i] != 0) return false; /* only a pad of nothing (Swin's to a window multiple) */
    return true;
}

/* Row-major strides of shape s (elements). */
static void strides_of(const nn_shape *s, int64_t *st) {
    int64_t m = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = m;
        m *= s->d[i];
    }
}

/* out (node n's output, row-major) as indices taken from its inputs' index arrays. */
static void eval_node(const nn_graph *g, const nn_node *n, int32_t *const *in, int32_t *out) {
    const nn_shape *ys = &g->tensors[n->out[0]].shape, *xs = &g->tensors[n->in[0]].shape;
    int64_t count = nn_shape_count(ys), xst[NN_MAX_RANK], idx[NN_MAX_RANK] = {0};
    strides_of(xs, xst);
    if (nn_op_is_reshape_like(n->op) || n->op == NN_OP_PAD) {
        memcpy(out, in[0], (size_t)count * sizeof *out);
        return;
    }
    if (n->op == NN_OP_CONCAT) { /* each input's block along the axis, in order */
        int axis = n->p.axis;
        int64_t outer = 1, at = 0;
        for (int i = 0; i < axis; i++) outer *= ys->d[i];
        int64_t out_inner = count / outer;
        for (int k = 0; k < n->n_in; k++) {
            int64_t inner = nn_shape_count(&g->tensors[n->in[k]].shape) / outer;
            for (int64_t o = 0; o < outer; o++) memcpy(out + o * out_inner + at, in[k] + o * inner, (size_t)inner * sizeof *out);
            at += inner;
        }
        return;
    }
    for (int64_t i = 0; i < count; i++) { /* Transpose, Slice: each output element's input offset */
        int64_t off = 0;
        for (int a = 0; a < ys->rank; a++)
            off += n->op == NN_OP_TRANSPOSE ? idx[a] * xst[n->p.axes[a]]
                                            : (n->p.slice_begin[a] + idx[a] * n->p.slice_step[a]) * xst[a];
        out[i] = in[0][off];
        for (int a = ys->rank - 1; a >= 0 && ++idx[a] == ys->d[a]; a--) idx[a] = 0;
    }
}

/* The sink's index array (element of the source each of its elements copies), for the shapes now
 * inferred; NULL when a tensor is too large for 32-bit indices. nodes: the chain, in graph order. */
static int32_t *eval_chain(const nn_graph *g, const int *nodes, int n_nodes, int source) {
    int64_t n_src = nn_shape_count(&g->tensors[source].shape);
    if (n_src <= 0 || n_src >= INT32_MAX) return NULL;
    int32_t **arr = ftl_xcalloc((size_t)g->n_tensors + 1, sizeof *arr);
    arr[source] = ftl_xmalloc((size_t)n_src * sizeof **arr);
    for (int64_t i = 0; i < n_src; i++) arr[source][i] = (int32_t)i;
    bool ok = true;
    for (int k = 0; k < n_nodes && ok; k++) {
        const nn_node *n = &g->nodes[nodes[k]];
        int64_t count = nn_shape_count(&g->tensors[n->out[0]].shape);
        int32_t **in = ftl_xcalloc((size_t)n->n_in + 1, sizeof *in);
        for (int j = 0; j < n->n_in; j++) in[j] = n->in[j] >= 0 ? arr[n->in[j]] : NULL;
        ok = count > 0 && count < INT32_MAX && in[0]; /* a constant piece (a class token) is not movement */
        for (int j = 0; ok && n->op == NN_OP_CONCAT && j < n->n_in; j++) ok = in[j] != NULL;
        if (ok) {
            arr[n->out[0]] = ftl_xmalloc((size_t)count * sizeof **arr);
            eval_node(g, n, in, arr[n->out[0]]);
        }
        free(in);
    }
    int32_t *sink = ok ? arr[g->nodes[nodes[n_nodes - 1]].out[0]] : NULL;
    for (int t = 0; t < g->n_tensors; t++)
        if (arr[t] != sink) free(arr[t]);
    free(arr);
    return sink;
}

/* Who writes and who reads each tensor, built once per plan: a chain is grown from every candidate
 * sink, and scanning the whole graph per question cost Swin-T 0.9 s of model load. */
typedef struct graph_index {
    int *producer;            /* per tensor: the live node writing it, -1 none */
    int *reader_start, *readers; /* per tensor t: readers[reader_start[t] .. reader_start[t + 1]) (inputs and
                                    summing post-ops, a node once per slot) */
    bool *output;             /* per tensor: a graph output */
} graph_index;

static void index_graph(const nn_graph *g, graph_index *x) {
    int nt = g->n_tensors;
    x->producer = ftl_xmalloc(((size_t)nt + 1) * sizeof *x->producer);
    x->reader_start = ftl_xcalloc((size_t)nt + 2, sizeof *x->reader_start);
    x->output = ftl_xcalloc((size_t)nt + 1, sizeof *x->output);
    for (int t = 0; t < nt; t++) x->producer[t] = -1;
    for (int o = 0; o < g->n_outputs; o++)
        if (g->outputs[o] >= 0) x->output[g->outputs[o]] = true;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        int *at = pass ? ftl_xmalloc(((size_t)nt + 1) * sizeof *at) : NULL;
        if (pass) {
            for (int t = 0; t < nt; t++) x->reader_start[t + 1] += x->reader_start[t];
            memcpy(at, x->reader_start, (size_t)nt * sizeof *at);
            x->readers = ftl_xmalloc(((size_t)x->reader_start[nt] + 1) * sizeof *x->readers);
        }
        for (int j = 0; j < g->n_nodes; j++) {
            const nn_node *n = &g->nodes[j];
            if (n->dead) continue;
            if (!pass && n->n_out > 0 && n->out[0] >= 0) x->producer[n->out[0]] = j;
            for (int k = 0; k < n->n_in + n->n_post; k++) {
                int t = k < n->n_in ? n->in[k] : n->post[k - n->n_in].kind == NN_POST_SUM ? n->post[k - n->n_in].sum_tensor : -1;
                if (t < 0) continue;
                if (pass) x->readers[at[t]++] = j;
                else x->reader_start[t + 1]++;
            }
        }
        free(at);
    }
}

static void index_free(graph_index *x) {
    free(x->producer);
    free(x->reader_start);
    free(x->readers);
    free(x->output);
}

/* Whether every reader of tensor t is marked in `mark`, and t is no graph output. */
static bool read_only_by(const graph_index *x, int t, const bool *mark) {
    if (x->output[t]) return false;
    for (int r = x->reader_start[t]; r < x->reader_start[t + 1]; r++)
        if (!mark[x->readers[r]]) return false;
    return true;
}

/* Collects the chain ending at movement node s into nodes (graph order), its source and whether it
 * has a Concat and a Transpose; false when it is not one: several sources, a constant source, an
 * intermediate read outside the chain or watched, nodes of other micro-batches or of a fused attention.
 * in_chain: all false on entry and on return. */
static bool collect_chain(const nn_plan *p, const nn_graph *g, const graph_index *x, const bool *observe, int s,
                          bool *in_chain, int *nodes, int *n_nodes, int *source, bool *concat, bool *transpose) {
    in_chain[s] = true;
    int lowest = s;
    bool grew = true;
    while (grew) { /* movement producers of the chain's inputs join it once the chain reads all they write */
        grew = false;
        for (int i = s; i >= lowest; i--) {
            if (!in_chain[i]) continue;
            const nn_node *n = &g->nodes[i];
            for (int k = 0; k < n->n_in; k++) {
                int t = n->in[k], q = t >= 0 && !nn_is_const(g, t) ? x->producer[t] : -1;
                if (q >= 0 && !in_chain[q] && is_movement(g, &g->nodes[q]) && read_only_by(x, t, in_chain)) {
                    in_chain[q] = grew = true;
                    if (q < lowest) lowest = q;
                }
            }
        }
    }
    *source = -1;
    bool ok = true;
    for (int i = lowest; i <= s && ok; i++) /* the data the chain reads from outside it: one tensor */
        for (int k = 0; in_chain[i] && k < g->nodes[i].n_in && ok; k++) {
            int t = g->nodes[i].in[k];
            if (t < 0 || nn_is_const(g, t) || (x->producer[t] >= 0 && in_chain[x->producer[t]])) continue;
            ok = *source < 0 || *source == t;
            *source = t;
        }
    *n_nodes = 0;
    *concat = *transpose = false;
    int mb = p->node_mb ? p->node_mb[s] : p->batch;
    for (int i = lowest; i <= s; i++) {
        if (!in_chain[i]) continue;
        const nn_node *n = &g->nodes[i];
        nodes[(*n_nodes)++] = i;
        *concat |= n->op == NN_OP_CONCAT;
        *transpose |= n->op == NN_OP_TRANSPOSE;
        ok = ok && (p->node_mb ? p->node_mb[i] : p->batch) == mb && cpu_attention_role(p, i) == -1 &&
             !(observe && observe[n->out[0]]);
        ok = ok && (i == s || read_only_by(x, n->out[0], in_chain)); /* (joined so, but checked once more) */
    }
    for (int k = 0; k < *n_nodes; k++) in_chain[nodes[k]] = false;
    return ok && *source >= 0 && !nn_is_const(g, *source);
}

/* The Add that alone reads the chain's sink tensor y, adding a same-shape activation (Swin's residual
 * after the window reverse), at the chain's micro-batch: the copy adds it on the way, in fp32 (a bf16
 * plan's residual stream is fp32 too). -1 when there is none; *addend: the other summand. */
static int residual_add(const nn_plan *p, const nn_graph *g, const bool *observe, int s, int *addend) {
    int slot, a = nn_graph_sole_reader(g, g->nodes[s].out[0], &slot);
    if (a < 0) return -1;
    const nn_node *n = &g->nodes[a];
    if (n->op != NN_OP_ADD || n->n_in != 2 || n->n_post > 0 || n->in[1 - slot] < 0 || nn_is_const(g, n->in[1 - slot]) ||
        (p->node_mb && p->node_mb[a] != p->node_mb[s]) || cpu_attention_role(p, a) != -1 ||
        (observe && observe[g->nodes[s].out[0]]))
        return -1;
    const nn_shape *y = &g->tensors[g->nodes[s].out[0]].shape, *r = &g->tensors[n->in[1 - slot]].shape,
                   *o = &g->tensors[n->out[0]].shape;
    if (y->rank != r->rank || y->rank != o->rank) return -1;
    for (int i = 0; i < y->rank; i++)
        if (y->d[i] != r->d[i] || y->d[i] != o->d[i]) return -1;
    *addend = n->in[1 - slot];
    return a;
}

/* Whether the sink's table (batch images of n1 elements) holds, for every image, image 0's table
 * shifted by the image's place in the source (src1 elements each): the chain keeps images apart and
 * in order. And the runs: the greatest common length of image 0's contiguous stretches. */
static bool per_image_runs(const int32_t *map, int64_t n1, int64_t batch, int64_t src1, int64_t *run) {
    for (int64_t b = 1; b < batch; b++)
        for (int64_t i = 0; i < n1; i++)
            if (map[b * n1 + i] != map[i] + b * src1) return false;
    int64_t gcd = 0, start = 0;
    for (int64_t i = 1; i <= n1; i++) {
        if (i < n1 && map[i] == map[i - 1] + 1) continue;
        int64_t a = i - start, b = gcd;
        while (b) {
            int64_t r = a % b;
            a = b;
            b = r;
        }
        gcd = a;
        start = i;
    }
    *run = gcd;
    return gcd > 0;
}

/* A chain of data movement run as one copy (cpu_movement_fusion.c): the sink node's output copied from the
 * source tensor as runs of `run` elements, runs_per_image of them per image, run r of image b starting
 * at element b x src_per_image + run_src[r] of the source (plain row-major both); with an addend
 * (>= 0), the Add reading the sink (emit_node) is done on the way: out = copy + addend. */
typedef struct cpu_gather_op {
    int source, sink_node, addend, emit_node;
    int64_t run, runs_per_image, src_per_image;
    int64_t *run_src;
} cpu_gather_op;

/* The plan's movement chains, in the order their sinks come. */
/* The plan's chains and each node's role in them (here rather than in the plan: the feature's own
 * state, read by compile through cpu_movement_role). */
struct cpu_movement_chains {
    cpu_gather_op *ops;
    int n, cap;
    int *role;                /* per node: -1 its own steps, -2 part of a chain copied at its sink, k >= 0 the
                                 sink of chain k */
};

/* A chain found, before its index table is checked. */
typedef struct candidate {
    int *nodes, n_nodes, source, add, addend;
} candidate;

ftl_status cpu_gather_find(nn_plan *p, nn_graph *g, const bool *observe) {
    cpu_movement_chains *chains = p->chains = ftl_xcalloc(1, sizeof *p->chains);
    chains->role = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *chains->role);
    for (int i = 0; i < g->n_nodes; i++) chains->role[i] = -1;
    if (!cpu_switch_on("FTL_NN_GATHER_CHAINS") || p->int8) return FTL_OK;
    graph_index x;
    index_graph(g, &x);
    bool *in_chain = ftl_xcalloc((size_t)g->n_nodes + 1, sizeof *in_chain);
    int *nodes = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *nodes);
    candidate *cand = NULL;
    int n_cand = 0;
    for (int s = 0; s < g->n_nodes; s++) {
        const nn_node *sn = &g->nodes[s];
        if (!is_movement(g, sn) || cpu_attention_role(p, s) != -1) continue;
        bool movement_reader = false; /* the chain ends where no movement node reads on */
        for (int r = x.reader_start[sn->out[0]]; r < x.reader_start[sn->out[0] + 1]; r++)
            movement_reader |= is_movement(g, &g->nodes[x.readers[r]]);
        int n_nodes, source, addend = -1, add = -1;
        bool concat, transpose;
        if (movement_reader ||
            !collect_chain(p, g, &x, observe, s, in_chain, nodes, &n_nodes, &source, &concat, &transpose))
            continue;
        if (transpose) add = residual_add(p, g, observe, s, &addend);
        bool slice = false; /* slices into a Concat (Swin's patch merging): a copy each, then the Concat's */
        for (int j = 0; j < n_nodes && concat; j++) slice |= g->nodes[nodes[j]].op == NN_OP_SLICE;
        if (!(transpose && (concat || add >= 0)) && !(concat && slice)) continue; /* two passes over the data or more now */
        cand = ftl_xrealloc(cand, ((size_t)n_cand + 1) * sizeof *cand);
        cand[n_cand] = (candidate){.nodes = ftl_xmalloc((size_t)n_nodes * sizeof(int)), .n_nodes = n_nodes,
                                   .source = source, .add = add, .addend = addend};
        memcpy(cand[n_cand++].nodes, nodes, (size_t)n_nodes * sizeof(int));
    }
    free(in_chain);
    free(nodes);
    index_free(&x);
    /* the tables for 2 images (small, and enough to see): each image must map to its own rows, as image
     * 0 does shifted by its place, so the table of image 0 serves any micro-batch */
    ftl_status st = n_cand ? nn_infer_shapes(g, 2) : FTL_OK;
    int64_t batch = g->n_inputs > 0 && g->tensors[g->inputs[0]].shape.rank > 0 ? g->tensors[g->inputs[0]].shape.d[0] : 0;
    for (int c = 0; c < n_cand; c++) {
        candidate *k = &cand[c];
        int s = k->nodes[k->n_nodes - 1];
        int64_t src = nn_shape_count(&g->tensors[k->source].shape), n = nn_shape_count(&g->tensors[g->nodes[s].out[0]].shape);
        int64_t src1 = batch > 0 ? src / batch : 0, n1 = batch > 0 ? n / batch : 0, run = 0;
        int32_t *map = st == FTL_OK && batch > 0 && src % batch == 0 && n % batch == 0
                           ? eval_chain(g, k->nodes, k->n_nodes, k->source)
                           : NULL;
        bool ok = map && per_image_runs(map, n1, batch, src1, &run) && run * 4 >= MIN_RUN_BYTES;
        if (ok) {
            if (chains->n == chains->cap) {
                chains->cap = chains->cap ? 2 * chains->cap : 8;
                chains->ops = ftl_xrealloc(chains->ops, (size_t)chains->cap * sizeof *chains->ops);
            }
            cpu_gather_op *op = &chains->ops[chains->n];
            *op = (cpu_gather_op){.source = k->source, .sink_node = s, .run = run, .runs_per_image = n1 / run,
                                  .src_per_image = src1, .addend = k->addend,
                                  .emit_node = k->add >= 0 ? k->add : s};
            op->run_src = ftl_xmalloc((size_t)(n1 / run) * sizeof *op->run_src);
            for (int64_t r = 0; r < n1 / run; r++) op->run_src[r] = map[r * run];
            for (int j = 0; j < k->n_nodes; j++) chains->role[k->nodes[j]] = -2;
            chains->role[op->emit_node] = chains->n++;
            if (p->last_node[k->source] < op->emit_node) p->last_node[k->source] = op->emit_node; /* read there now */
        }
        free(map);
        free(k->nodes);
    }
    free(cand);
    if (st != FTL_OK) return st;
    return n_cand ? nn_infer_shapes(g, p->batch) : FTL_OK;
}

ftl_status cpu_gather_emit(nn_plan *p, nn_graph *g, int node) {
    const cpu_gather_op *op = &p->chains->ops[p->chains->role[node]];
    const nn_node *n = &g->nodes[node]; /* the sink, or the Add after it */
    char label[96];
    snprintf(label, sizeof label, "%.56s (%s, one copy%s)", n->name, n->op_type, op->addend >= 0 ? " + add" : "");
    FTL_TRY(cpu_rebatch(p, op->source));
    int v = p->tval[op->source];
    if (v < 0) return ftl_fail(FTL_E_INTERNAL, "node '%s': the source of its data movement has no value", n->name);
    dnnl_memory_desc_t plain; /* the adding copy reads f32 */
    cpu_plain_md(&plain, &g->tensors[op->source].shape, op->addend >= 0 ? dnnl_f32 : p->vals[v].md.data_type);
    if (!dnnl_memory_desc_equal(&p->vals[v].md, &plain)) FTL_TRY(cpu_ensure(p, op->source, &plain, &v));
    size_t elem = dnnl_data_type_size(p->vals[v].md.data_type);
    int64_t images = p->cur_mb, per = op->runs_per_image;
    int64_t *src = ftl_xmalloc((size_t)(images * per + 1) * sizeof *src);
    for (int64_t b = 0; b < images; b++)
        for (int64_t r = 0; r < per; r++) src[b * per + r] = (b * op->src_per_image + op->run_src[r]) * (int64_t)elem;
    /* written as bf16 where only bf16 readers take it (Swin's window partition feeding its QKV matmul) */
    dnnl_data_type_t dt = op->addend >= 0 ? p->vals[v].md.data_type : cpu_copy_type(p, g, p->vals[v].md.data_type, n->out[0]);
    dnnl_memory_desc_t out_md;
    cpu_plain_md(&out_md, &g->tensors[n->out[0]].shape, dt);
    int out = cpu_new_value(p, &out_md, cpu_new_buf(p, 0, p->last_node[n->out[0]]));
    cpu_bind(p, n->out[0], out);
    cpu_copy_plan *copy = cpu_copy_plan_gather(src, images * per, (size_t)op->run, elem, dnnl_data_type_size(dt));
    free(src);
    int r = -1;
    if (op->addend >= 0) {
        FTL_TRY(cpu_rebatch(p, op->addend));
        r = p->tval[op->addend];
        dnnl_memory_desc_t plain_r;
        cpu_plain_md(&plain_r, &g->tensors[op->addend].shape, dnnl_f32);
        if (r < 0 || !dnnl_memory_desc_equal(&p->vals[r].md, &plain_r)) FTL_TRY(cpu_ensure(p, op->addend, &plain_r, &r));
    }
    cpu_step *st = cpu_host_step(p, CPU_STEP_COPY, v, out, r >= 0 ? "ftl:gather_add" : "ftl:gather_copy", label);
    st->copy = copy;
    if (r >= 0) { /* arg 2: the summand, read where the destination is written */
        st->arg_key[2] = DNNL_ARG_SRC_1;
        st->arg_val[2] = r;
        st->nargs = 3;
        cpu_touch(p, r, p->n_steps - 1);
    }
    return FTL_OK;
}

void cpu_gather_free(nn_plan *p) {
    for (int k = 0; p->chains && k < p->chains->n; k++) free(p->chains->ops[k].run_src);
    if (p->chains) {
        free(p->chains->ops);
        free(p->chains->role);
    }
    free(p->chains);
}

int cpu_movement_role(const nn_plan *p, int node) { return p->chains && p->chains->role ? p->chains->role[node] : -1; }
