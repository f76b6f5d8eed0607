/* Attention in the CPU plan: finds MatMul(Q, K^T) -> [x or / scalar, + constant, reshape]* ->
 * Softmax(last axis) -> MatMul(., V) in the graph and runs it as one fused step (nn/attention.h) at
 * the second MatMul, the nodes before it emitting nothing. The scores tensor is never written, and a
 * K^T that is a transposed view of K is read in place. A scalar multiplying Q alone (Swin's q x
 * scale, ViT's q / sqrt(d)) moves into the kernel's scale; the constants added to the scores (a
 * relative position bias, Swin's shifted-window mask behind its reshape to [B/nW, nW, H, T, T])
 * become one table indexed by the scores' leading index modulo its period.
 * FTL_NN_FUSED_ATTENTION=0 keeps the separate steps (A/B runs, tests). */
#include "nn/cpu/kernels/attention.h"
#include "nn/cpu/cpu_int8.h"
#include "nn/cpu/cpu_plan.h"
#include "nn/ir/topo.h"
#include "util/alloc.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CHAIN = 16, MAX_BIAS_FLOATS = 1 << 24 };

/* A fused attention (cpu_attention_fusion.c): graph nodes qk (Q x K^T) to pv (x V), tensors Q, K^T, V, the
 * scale and the constant bias table [period][rows][keys] (NULL: none). */
typedef struct cpu_attention_op {
    int qk, pv;
    int q, kt, v;
    float scale;
    float *bias;
    int64_t period;
} cpu_attention_op;

/* The plan's fused attentions, in the order their second MatMuls come, and each node's role in them
 * (here rather than in the plan: the feature's own state, read by others through cpu_attention_role). */
struct cpu_attention_list {
    cpu_attention_op *ops;
    int n, cap;
    int *role;                /* per node: -1 its own steps, -2 part of a fused attention emitted later (or of
                                 another node's fused step: cpu_attention_mark_absorbed), k >= 0 where
                                 attention k is emitted */
};

/* A constant added to the scores, with the factor later scalars multiplied it by and the scores'
 * shape where it was added. */
typedef struct bias_term {
    int tensor;
    double factor;
    nn_shape at;
} bias_term;

static bool is_reshape(nn_op op) {
    return op == NN_OP_RESHAPE || op == NN_OP_FLATTEN || op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE;
}

/* The value of a constant float scalar (count 1), or NaN. */
static double scalar_const(const nn_graph *g, int t) {
    const nn_tensor *c = &g->tensors[t];
    if (t < 0 || !c->data || c->count != 1 || c->dtype != NN_F32) return NAN;
    return ((const float *)c->data)[0];
}

/* Node n is x * c or c * x (Mul) or x / c (Div) with c a constant scalar: returns c's factor and x. */
static bool scaled_by_scalar(const nn_graph *g, const nn_node *n, double *factor, int *x) {
    if (n->n_in != 2 || n->n_post > 0) return false;
    if (n->op == NN_OP_DIV) {
        double c = scalar_const(g, n->in[1]);
        if (!isfinite(c) || c == 0 || nn_is_const(g, n->in[0])) return false;
        *factor = 1.0 / c;
        *x = n->in[0];
        return true;
    }
    if (n->op != NN_OP_MUL) return false;
    for (int k = 0; k < 2; k++) {
        double c = scalar_const(g, n->in[k]);
        if (isfinite(c) && !nn_is_const(g, n->in[1 - k])) {
            *factor = c;
            *x = n->in[1 - k];
            return true;
        }
    }
    return false;
}

static bool same_lead(const nn_shape *a, const nn_shape *b) {
    if (a->rank != b->rank || a->rank < 3) return false;
    for (int i = 0; i < a->rank - 2; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

/* The period of constant c (numpy-broadcast onto scores of shape `at`) over the flattened leading
 * index, and whether it is usable: it may vary only with leading axes after the first (the batch).
 * 0: not usable. */
static int64_t period_of(const nn_shape *c, const nn_shape *at) {
    int lead = at->rank - 2, off = at->rank - c->rank;
    if (off < 0) return 0;
    for (int i = 0; i < c->rank; i++)
        if (c->d[i] != 1 && c->d[i] != at->d[i + off]) return 0;
    int first = -1;
    for (int i = 0; i < lead; i++)
        if (i - off >= 0 && c->d[i - off] != 1) {
            first = i;
            break;
        }
    if (first == 0) return 0;
    int64_t period = 1;
    for (int i = first < 0 ? lead : first; i < lead; i++) period *= at->d[i];
    return period;
}

/* Adds factor x constant c (broadcast onto `at`, leading index modulo `period`) into table
 * [period][rows][keys]. */
static void add_term(float *table, int64_t period, int64_t rows, int64_t keys, const nn_tensor *c, const nn_shape *at,
                     double factor) {
    int r = at->rank, off = r - c->shape.rank;
    const float *data = c->data;
    int64_t idx[NN_MAX_RANK] = {0}, lead = period;
    /* the table's leading index p maps to the last leading axes of `at` (its period spans exactly them) */
    for (int64_t p = 0; p < lead; p++) {
        int64_t rest = p;
        for (int i = r - 3; i >= 0; i--) {
            idx[i] = rest % at->d[i];
            rest /= at->d[i];
        }
        for (int64_t y = 0; y < rows; y++)
            for (int64_t x = 0; x < keys; x++) {
                idx[r - 2] = y;
                idx[r - 1] = x;
                int64_t src = 0;
                for (int i = 0; i < c->shape.rank; i++) src = src * c->shape.d[i] + (c->shape.d[i] == 1 ? 0 : idx[i + off]);
                table[(p * rows + y) * keys + x] += (float)(factor * (double)data[src]);
            }
    }
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static bool observed(const bool *observe, int t) { return observe && t >= 0 && observe[t]; }

/* Matches the pattern ending in Softmax node sm; on success fills op and marks the absorbed nodes. */
static bool match(nn_plan *p, const nn_graph *g, const int *uses, const bool *observe, int sm, cpu_attention_op *op) {
    const nn_node *s = &g->nodes[sm];
    const nn_shape *ss = &g->tensors[s->in[0]].shape;
    if (s->n_post > 0 || ss->rank < 3 || ss->rank - 2 > NN_ATTN_MAX_LEAD || s->p.axis != ss->rank - 1) return false;
    int prob = s->out[0];
    if (uses[prob] != 1 || observed(observe, prob)) return false;
    int pv = p->last_node[prob];
    if (pv <= sm || pv >= g->n_nodes) return false;
    const nn_node *pvn = &g->nodes[pv];
    if (pvn->op != NN_OP_MATMUL || pvn->n_in != 2 || pvn->in[0] != prob || nn_is_const(g, pvn->in[1]) || pvn->n_post > 0)
        return false;
    /* walk back from the softmax's input to the first MatMul */
    int chain[MAX_CHAIN], n_chain = 0, t = s->in[0], qk = -1;
    while (n_chain < MAX_CHAIN) {
        int pr = g->tensors[t].producer;
        if (pr < 0 || uses[t] != 1 || observed(observe, t)) return false;
        const nn_node *n = &g->nodes[pr];
        if (n->dead || n->n_post > 0) return false;
        if (n->op == NN_OP_MATMUL) {
            if (n->n_in != 2 || nn_is_const(g, n->in[0]) || nn_is_const(g, n->in[1])) return false;
            qk = pr;
            break;
        }
        chain[n_chain++] = pr;
        double f;
        int x;
        if (is_reshape(n->op)) {
            const nn_shape *a = &g->tensors[n->in[0]].shape, *b = &g->tensors[n->out[0]].shape;
            if (a->rank < 3 || b->rank < 3 || a->d[a->rank - 1] != b->d[b->rank - 1] || a->d[a->rank - 2] != b->d[b->rank - 2])
                return false;
            t = n->in[0];
        } else if (n->op == NN_OP_ADD && n->n_in == 2 && nn_is_const(g, n->in[0]) != nn_is_const(g, n->in[1])) {
            int c = nn_is_const(g, n->in[0]) ? n->in[0] : n->in[1];
            if (g->tensors[c].dtype != NN_F32) return false;
            t = c == n->in[0] ? n->in[1] : n->in[0];
        } else if (scaled_by_scalar(g, n, &f, &x)) {
            t = x;
        } else {
            return false;
        }
    }
    if (qk < 0) return false;
    const nn_node *qkn = &g->nodes[qk];
    const nn_shape *ks = &g->tensors[qkn->in[1]].shape, *vs = &g->tensors[pvn->in[1]].shape;
    const nn_shape *qs = &g->tensors[qkn->in[0]].shape, *sc = &g->tensors[qkn->out[0]].shape;
    if (!same_lead(qs, sc) || !same_lead(ks, sc) || !same_lead(vs, sc) || sc->rank - 2 > NN_ATTN_MAX_LEAD) return false;
    int64_t rows = sc->d[sc->rank - 2], keys = sc->d[sc->rank - 1], depth = qs->d[qs->rank - 1];
    if (ks->d[ks->rank - 2] != depth || ks->d[ks->rank - 1] != keys || vs->d[vs->rank - 2] != keys || rows < 1 ||
        keys < 1 || depth < 1 || vs->d[vs->rank - 1] < 1)
        return false;
    if (ss->d[ss->rank - 2] != rows || ss->d[ss->rank - 1] != keys) return false;
    /* the scale and bias, in the order the graph applies them */
    double scale = 1.0;
    int q = qkn->in[0], qpr = g->tensors[q].producer, absorbed_q = -1;
    double f;
    int x;
    if (qpr >= 0 && uses[q] == 1 && !observed(observe, q) && scaled_by_scalar(g, &g->nodes[qpr], &f, &x)) {
        scale = f;
        absorbed_q = qpr;
        q = x;
    }
    bias_term terms[MAX_CHAIN];
    int n_terms = 0;
    int64_t period = 1;
    for (int i = n_chain - 1; i >= 0; i--) {
        const nn_node *n = &g->nodes[chain[i]];
        if (is_reshape(n->op)) continue;
        if (n->op == NN_OP_ADD) {
            int c = nn_is_const(g, n->in[0]) ? n->in[0] : n->in[1];
            const nn_shape *at = &g->tensors[n->out[0]].shape;
            int64_t per = period_of(&g->tensors[c].shape, at), per_image = 1;
            for (int k = 1; k < at->rank - 2; k++) per_image *= at->d[k];
            if (per == 0 || per_image % per != 0) return false;
            period = period / gcd64(period, per) * per;
            terms[n_terms++] = (bias_term){c, 1.0, *at};
        } else if (scaled_by_scalar(g, n, &f, &x)) {
            scale *= f;
            for (int k = 0; k < n_terms; k++) terms[k].factor *= f;
        }
    }
    if (n_terms > 0 && period * rows * keys > MAX_BIAS_FLOATS) return false;
    /* every absorbed node runs at the second MatMul's micro-batch */
    int mb = p->node_mb ? p->node_mb[pv] : p->batch;
    int absorbed[MAX_CHAIN + 3], n_abs = 0;
    for (int i = 0; i < n_chain; i++) absorbed[n_abs++] = chain[i];
    absorbed[n_abs++] = qk;
    absorbed[n_abs++] = sm;
    if (absorbed_q >= 0) absorbed[n_abs++] = absorbed_q;
    for (int i = 0; i < n_abs; i++)
        if ((p->node_mb ? p->node_mb[absorbed[i]] : p->batch) != mb || p->attention->role[absorbed[i]] != -1) return false;
    if (p->attention->role[pv] != -1) return false;

    *op = (cpu_attention_op){.qk = qk, .pv = pv, .q = q, .kt = qkn->in[1], .v = pvn->in[1], .scale = (float)scale,
                             .period = period};
    if (n_terms > 0) {
        op->bias = ftl_xcalloc((size_t)(period * rows * keys), sizeof *op->bias);
        for (int k = 0; k < n_terms; k++) {
            /* the term's own period divides the table's: its pattern repeats across the table */
            int64_t per = period_of(&g->tensors[terms[k].tensor].shape, &terms[k].at);
            float *tmp = ftl_xcalloc((size_t)(per * rows * keys), sizeof *tmp);
            add_term(tmp, per, rows, keys, &g->tensors[terms[k].tensor], &terms[k].at, terms[k].factor);
            for (int64_t i = 0; i < period; i++)
                for (int64_t e = 0; e < rows * keys; e++) op->bias[i * rows * keys + e] += tmp[(i % per) * rows * keys + e];
            free(tmp);
        }
    }
    for (int i = 0; i < n_abs; i++) p->attention->role[absorbed[i]] = -2;
    /* Q and K^T are now read at the second MatMul */
    if (p->last_node[op->q] < pv) p->last_node[op->q] = pv;
    if (p->last_node[op->kt] < pv) p->last_node[op->kt] = pv;
    return true;
}

ftl_status cpu_attention_find(nn_plan *p, const nn_graph *g, const bool *observe) {
    cpu_attention_list *list = p->attention = ftl_xcalloc(1, sizeof *p->attention);
    list->role = ftl_xmalloc(((size_t)g->n_nodes + 1) * sizeof *list->role);
    for (int i = 0; i < g->n_nodes; i++) list->role[i] = -1;
    if (!cpu_switch_on("FTL_NN_FUSED_ATTENTION") || !nn_attention_available() || cpu_int8_has_zero(p->int8)) return FTL_OK;
    int *uses = nn_graph_use_counts(g);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != NN_OP_SOFTMAX || g->nodes[i].dead) continue;
        cpu_attention_op op;
        if (!match(p, g, uses, observe, i, &op)) continue;
        if (list->n == list->cap) {
            list->cap = list->cap ? 2 * list->cap : 16;
            list->ops = ftl_xrealloc(list->ops, (size_t)list->cap * sizeof *list->ops);
        }
        list->role[op.pv] = list->n;
        list->ops[list->n++] = op;
    }
    free(uses);
    return FTL_OK;
}

bool cpu_attention_reads_only(const nn_plan *p, const nn_graph *g, int t, int depth) {
    if (!p->attention || !p->attention->role || p->attention->n == 0 || depth > 4 || t < 0 || !cpu_one_chunk_until_read(p, t)) return false;
    int mb = p->node_mb ? p->node_mb[p->cur_node] : p->batch, readers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        bool reads = false;
        for (int k = 0; k < n->n_in; k++) reads |= n->in[k] == t;
        for (int k = 0; k < n->n_post; k++) reads |= n->post[k].kind == NN_POST_SUM && n->post[k].sum_tensor == t;
        if (!reads) continue;
        readers++;
        if ((p->node_mb ? p->node_mb[i] : p->batch) != mb) return false;
        if (p->attention->role[i] != -1) continue;
        bool view_op = (n->op == NN_OP_GATHER || n->op == NN_OP_TRANSPOSE || n->op == NN_OP_SLICE) && n->in[0] == t &&
                       n->n_post == 0;
        if (!view_op || !cpu_attention_reads_only(p, g, n->out[0], depth + 1)) return false;
    }
    return readers > 0;
}

/* The value of tensor t as a plain strided layout of f32 or bf16 (a view when it already is one). */
static ftl_status strided_value(nn_plan *p, const nn_graph *g, int t, int *val) {
    int v = p->tval[t];
    if (v < 0) return ftl_fail(FTL_E_INTERNAL, "tensor %d has no value", t);
    const dnnl_memory_desc_t *md = &p->vals[v].md;
    bool plain = md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 0 && md->ndims == g->tensors[t].shape.rank;
    if (plain && (md->data_type == dnnl_f32 || md->data_type == dnnl_bf16)) {
        *val = v;
        return FTL_OK;
    }
    dnnl_memory_desc_t want;
    cpu_plain_md(&want, &g->tensors[t].shape, md->data_type == dnnl_bf16 ? dnnl_bf16 : dnnl_f32);
    return cpu_ensure(p, t, &want, val);
}

/* The Transpose node that is the only reader of t (at the current micro-batch), or NULL. */
static const nn_node *sole_transpose_reader(const nn_plan *p, const nn_graph *g, int t) {
    int slot, i = nn_graph_sole_reader(g, t, &slot);
    if (i < 0) return NULL;
    const nn_node *n = &g->nodes[i];
    if (n->op != NN_OP_TRANSPOSE || slot != 0 || n->n_post > 0 ||
        (p->node_mb ? p->node_mb[i] : p->batch) != (p->node_mb ? p->node_mb[p->cur_node] : p->batch))
        return NULL;
    return n;
}

ftl_status cpu_attention_emit(nn_plan *p, nn_graph *g, int node) {
    const cpu_attention_op *op = &p->attention->ops[p->attention->role[node]];
    const nn_node *n = &g->nodes[node];
    FTL_TRY(cpu_rebatch(p, op->q));
    FTL_TRY(cpu_rebatch(p, op->kt));
    int vq, vk, vv;
    FTL_TRY(strided_value(p, g, op->q, &vq));
    FTL_TRY(strided_value(p, g, op->kt, &vk));
    FTL_TRY(strided_value(p, g, op->v, &vv));
    const nn_shape *ys = &g->tensors[n->out[0]].shape;
    if (op->bias) { /* the table's period must divide this micro-batch's leading index */
        int64_t lead = 1;
        for (int i = 0; i < ys->rank - 2; i++) lead *= ys->d[i];
        if (lead % op->period != 0)
            return ftl_fail(FTL_E_INTERNAL, "node '%s': attention bias period %lld does not divide %lld", n->name,
                            (long long)op->period, (long long)lead);
    }
    dnnl_memory_desc_t out_md;
    cpu_plain_md(&out_md, ys, p->vals[vq].md.data_type);
    const nn_node *tr = sole_transpose_reader(p, g, n->out[0]);
    if (tr) { /* laid out so that the transpose (heads back next to each other) is a plain view: no copy */
        dnnl_memory_desc_t y_plain;
        cpu_plain_md(&y_plain, &g->tensors[tr->out[0]].shape, out_md.data_type);
        dnnl_dims_t strides;
        for (int i = 0; i < ys->rank; i++) strides[tr->p.axes[i]] = y_plain.format_desc.blocking.strides[i];
        dnnl_dims_t dims;
        for (int i = 0; i < ys->rank; i++) dims[i] = ys->d[i];
        CPU_TRY(dnnl_memory_desc_init_by_strides(&out_md, ys->rank, dims, out_md.data_type, strides), "attention output");
    }
    int b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
    int out = cpu_new_value(p, &out_md, b);
    cpu_bind(p, n->out[0], out);
    char label[96];
    snprintf(label, sizeof label, "%s (Attention)", n->name);
    int vals[4] = {vq, vk, vv, out};
    cpu_step *st = cpu_new_step(p, label);
    st->kind = CPU_STEP_ATTENTION;
    st->nargs = 4;
    st->writes = 3;
    st->attn = p->attention->role[node];
    st->also_node = op->qk;
    snprintf(st->impl, sizeof st->impl, "ftl:attention");
    for (int k = 0; k < 4; k++) {
        st->arg_val[k] = vals[k];
        cpu_touch(p, vals[k], p->n_steps - 1);
    }
    return FTL_OK;
}

static void operand_of(const cpu_value *v, nn_attn_operand *o, int n_lead) {
    void *h = NULL;
    dnnl_memory_get_data_handle(v->mem, &h);
    const dnnl_memory_desc_t *md = &v->md;
    size_t elem = dnnl_data_type_size(md->data_type);
    o->data = (char *)h + (size_t)md->offset0 * elem;
    o->bf16 = md->data_type == dnnl_bf16;
    const dnnl_dims_t *s = &md->format_desc.blocking.strides;
    for (int i = 0; i < n_lead; i++) o->lead_stride[i] = (*s)[i];
    o->row_stride = (*s)[n_lead];
    o->col_stride = (*s)[n_lead + 1];
}

void cpu_attention_run(nn_plan *p, const cpu_step *s) {
    const cpu_attention_op *op = &p->attention->ops[s->attn];
    const dnnl_memory_desc_t *qm = &p->vals[s->arg_val[0]].md, *km = &p->vals[s->arg_val[1]].md;
    const dnnl_memory_desc_t *vm = &p->vals[s->arg_val[2]].md;
    int r = qm->ndims;
    nn_attention a = {.n_lead = r - 2, .rows = qm->dims[r - 2], .depth = qm->dims[r - 1], .keys = km->dims[r - 1],
                      .vdepth = vm->dims[r - 1], .scale = op->scale, .bias = op->bias, .bias_period = op->period};
    for (int i = 0; i < r - 2; i++) a.lead[i] = qm->dims[i];
    operand_of(&p->vals[s->arg_val[0]], &a.q, r - 2);
    operand_of(&p->vals[s->arg_val[1]], &a.kt, r - 2);
    operand_of(&p->vals[s->arg_val[2]], &a.v, r - 2);
    operand_of(&p->vals[s->arg_val[3]], &a.out, r - 2);
    nn_attention_run(&a, p->threads);
}

void cpu_attention_free(nn_plan *p) {
    for (int i = 0; p->attention && i < p->attention->n; i++) free(p->attention->ops[i].bias);
    if (p->attention) {
        free(p->attention->ops);
        free(p->attention->role);
    }
    free(p->attention);
}

int cpu_attention_role(const nn_plan *p, int node) {
    return p->attention && p->attention->role ? p->attention->role[node] : -1;
}

void cpu_attention_mark_absorbed(nn_plan *p, int node) {
    if (p->attention && p->attention->role) p->attention->role[node] = -2;
}
