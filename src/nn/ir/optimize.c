/* Graph rewrites that every backend benefits from (see optimize.h). Arithmetic on weights is
 * done in double so folding does not add rounding of its own. */
#include "nn/ir/optimize.h"
#include "nn/ir/ops.h"
#include "nn/ir/topo.h"
#include "util/alloc.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_output(const nn_graph *g, int t) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == t) return true;
    return false;
}

/* Every live reader of `from` reads `to` instead. */
static void replace_uses(nn_graph *g, int from, int to) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == from) n->in[k] = to;
        for (int k = 0; k < n->n_post; k++)
            if (n->post[k].kind == NN_POST_SUM && n->post[k].sum_tensor == from) n->post[k].sum_tensor = to;
    }
    for (int f = 0; f < g->n_folds; f++)
        for (int k = 0; k < g->folds[f].node.n_in; k++)
            if (g->folds[f].node.in[k] == from) g->folds[f].node.in[k] = to;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == from) g->outputs[i] = to;
}

/* The only live node reading t (as a plain input), or -1. */
static int sole_consumer(const nn_graph *g, int t, int after) {
    int found = -1;
    for (int f = 0; f < g->n_folds; f++) /* read by shape arithmetic: it must stay a tensor of its own */
        for (int k = 0; k < g->folds[f].node.n_in; k++)
            if (g->folds[f].node.in[k] == t) return -1;
    for (int i = after + 1; i < g->n_nodes; i++) {
        const nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == t) {
                if (found >= 0 && found != i) return -1;
                found = i;
            }
    }
    return found;
}

/* A Pad of nothing on every side (Swin's pad to a multiple of the window where the size is one). */
static bool pad_is_empty(const nn_graph *g, const nn_node *n) {
    if (n->op != NN_OP_PAD || n->p.deferred || n->p.n_pads != 2 * g->tensors[n->in[0]].shape.rank) return false;
    for (int i = 0; i < n->p.n_pads; i++)
        if (n->p.pads[i] != 0) return false;
    return true;
}

/* Identity, Dropout and empty Pads: their readers read the input instead (so a bf16 plan sees through
 * them to the products that read a layer norm's output, and writes it as bf16). */
static void remove_identities(nn_graph *g, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *n = &g->nodes[i];
        if (n->dead || (n->op != NN_OP_IDENTITY && n->op != NN_OP_DROPOUT && !pad_is_empty(g, n))) continue;
        replace_uses(g, n->out[0], n->in[0]);
        n->dead = true;
        s->identities++;
    }
}

static bool pad_is_spatial_zero(const nn_graph *g, const nn_node *n) {
    if (n->p.pad_value != 0.0f || g->tensors[n->in[0]].shape.rank != 4 || n->p.n_pads != 8) return false;
    const int64_t *p = n->p.pads;
    for (int i = 0; i < 8; i++)
        if (p[i] < 0) return false;
    return p[0] == 0 && p[1] == 0 && p[4] == 0 && p[5] == 0;
}

static void fold_pads(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *pad = &g->nodes[i];
        if (pad->dead || pad->op != NN_OP_PAD || !pad_is_spatial_zero(g, pad)) continue;
        int t = pad->out[0];
        if (is_output(g, t)) continue;
        int readers = 0, convs = 0;
        for (int j = i + 1; j < g->n_nodes; j++) {
            nn_node *c = &g->nodes[j];
            if (c->dead) continue;
            for (int k = 0; k < c->n_in; k++)
                if (c->in[k] == t) {
                    readers++;
                    if (k == 0 && c->op == NN_OP_CONV && !c->p.auto_pad[0]) convs++;
                }
        }
        if (readers != convs || readers != uses[t]) continue;
        for (int j = i + 1; j < g->n_nodes; j++) {
            nn_node *c = &g->nodes[j];
            if (c->dead || c->op != NN_OP_CONV || c->in[0] != t) continue;
            c->p.pad_begin[0] += (int)pad->p.pads[2];
            c->p.pad_begin[1] += (int)pad->p.pads[3];
            c->p.pad_end[0] += (int)pad->p.pads[6];
            c->p.pad_end[1] += (int)pad->p.pads[7];
            c->in[0] = pad->in[0];
        }
        pad->dead = true;
        s->pads_folded++;
    }
}

/* scale[c] = gamma / sqrt(var + eps), shift[c] = beta - mean * scale (double precision). */
static void bn_affine(const nn_graph *g, const nn_node *bn, int64_t c, double *scale, double *shift) {
    const float *gamma = g->tensors[bn->in[1]].data, *beta = g->tensors[bn->in[2]].data;
    const float *mean = g->tensors[bn->in[3]].data, *var = g->tensors[bn->in[4]].data;
    for (int64_t i = 0; i < c; i++) {
        scale[i] = (double)gamma[i] / sqrt((double)var[i] + (double)bn->p.epsilon);
        shift[i] = (double)beta[i] - (double)mean[i] * scale[i];
    }
}

static int new_const(nn_graph *g, const char *base, float *data, nn_shape shape) {
    int t = nn_graph_new_tensor(g, base);
    nn_tensor_set_data(&g->tensors[t], NN_F32, data, &shape);
    return t;
}

static void set_conv_inputs(nn_node *n, int x, int w, int b) {
    if (n->n_in < 3) {
        n->in = ftl_xrealloc(n->in, 3 * sizeof *n->in);
        n->n_in = 3;
    }
    n->in[0] = x;
    n->in[1] = w;
    n->in[2] = b;
}

static void fold_batchnorms(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *bn = &g->nodes[i];
        if (bn->dead || bn->op != NN_OP_BATCHNORM) continue;
        int x = bn->in[0];
        const nn_shape *xs = &g->tensors[x].shape;
        int64_t c = xs->d[1];
        double *scale = ftl_xmalloc((size_t)c * sizeof *scale), *shift = ftl_xmalloc((size_t)c * sizeof *shift);
        bn_affine(g, bn, c, scale, shift);
        int pi = g->tensors[x].producer;
        nn_node *conv = pi >= 0 ? &g->nodes[pi] : NULL;
        if (conv && conv->op == NN_OP_CONV && conv->n_post == 0 && uses[x] == 1 && !is_output(g, x)) {
            const nn_tensor *w = &g->tensors[conv->in[1]];
            const float *b = conv->n_in > 2 && conv->in[2] >= 0 ? g->tensors[conv->in[2]].data : NULL;
            int64_t per = w->count / c;
            float *nw = ftl_xmalloc((size_t)w->count * sizeof *nw), *nb = ftl_xmalloc((size_t)c * sizeof *nb);
            for (int64_t m = 0; m < c; m++) {
                for (int64_t k = 0; k < per; k++)
                    nw[m * per + k] = (float)((double)((const float *)w->data)[m * per + k] * scale[m]);
                nb[m] = (float)((b ? (double)b[m] : 0.0) * scale[m] + shift[m]);
            }
            nn_shape ws = w->shape, bs = {.rank = 1, .d = {c}};
            /* a quantized model's integer weights stay integers under a per-channel factor: their scales
             * take its magnitude, so the folded conv still runs in int8 on them */
            float *wscale = NULL;
            if (w->weight_scale && w->weight_scale_axis <= 0) { /* scales along the output channels (or one) */
                wscale = ftl_xmalloc((size_t)c * sizeof *wscale);
                for (int64_t m = 0; m < c; m++)
                    wscale[m] = scale[m] != 0 ? (float)((double)w->weight_scale[m] * fabs(scale[m])) : w->weight_scale[m];
            }
            char *base = ftl_strdup(w->name); /* new tensors may move the tensor array */
            int tw = new_const(g, base, nw, ws);
            int tb = new_const(g, base, nb, bs);
            g->tensors[tw].weight_scale = wscale;
            g->tensors[tw].weight_scale_axis = 0;
            free(base);
            conv = &g->nodes[pi];
            set_conv_inputs(conv, conv->in[0], tw, tb);
            conv->out[0] = bn->out[0];
            g->tensors[bn->out[0]].producer = pi;
            bn->dead = true;
            s->bn_folded++;
        } else if (xs->rank == 4) {
            /* y = x * scale + shift per channel: a 1x1 depthwise convolution, which fuses like any conv */
            float *nw = ftl_xmalloc((size_t)c * sizeof *nw), *nb = ftl_xmalloc((size_t)c * sizeof *nb);
            for (int64_t m = 0; m < c; m++) {
                nw[m] = (float)scale[m];
                nb[m] = (float)shift[m];
            }
            int tw = new_const(g, bn->name, nw, (nn_shape){.rank = 4, .d = {c, 1, 1, 1}});
            int tb = new_const(g, bn->name, nb, (nn_shape){.rank = 1, .d = {c}});
            bn = &g->nodes[i];
            set_conv_inputs(bn, x, tw, tb);
            bn->op = NN_OP_CONV;
            memset(&bn->p, 0, sizeof bn->p);
            bn->p.kernel[0] = bn->p.kernel[1] = 1;
            bn->p.stride[0] = bn->p.stride[1] = bn->p.dilation[0] = bn->p.dilation[1] = 1;
            bn->p.group = (int)c;
            s->bn_to_conv++;
        }
        free(scale);
        free(shift);
    }
}

static bool same_shape(const nn_shape *a, const nn_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

static bool accepts_act(nn_op op) {
    return op == NN_OP_CONV || op == NN_OP_GEMM || op == NN_OP_MATMUL || op == NN_OP_ADD || op == NN_OP_SUB ||
           op == NN_OP_MUL || op == NN_OP_DIV;
}

/* Ops whose kernels add a summand into their output (a sum post-op): convolutions, and the
 * Gemm / MatMul by constant weights that run as one matmul (a transformer's residual Adds). */
static bool takes_sum(const nn_graph *g, const nn_node *n) {
    return n->op == NN_OP_CONV || ((n->op == NN_OP_GEMM || n->op == NN_OP_MATMUL) && n->n_in >= 2 && nn_is_const(g, n->in[1]));
}

static void fuse_postops(nn_graph *g, nn_optimize_stats *s) {
    int *uses = nn_graph_use_counts(g);
    int moves = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *p = &g->nodes[i];
        if (p->dead || !accepts_act(p->op)) continue;
        for (;;) {
            int out = p->out[0];
            if (uses[out] != 1 || is_output(g, out) || p->n_post >= NN_MAX_POSTOPS) break;
            int ci = sole_consumer(g, out, i);
            if (ci < 0) break;
            nn_node *c = &g->nodes[ci];
            if (nn_op_is_activation(c->op) && c->in[0] == out) {
                p->post[p->n_post++] = (nn_postop){.kind = NN_POST_ACT, .act = c->p.act};
                s->acts_fused++;
            } else if (takes_sum(g, p) && c->op == NN_OP_ADD) {
                bool has_sum = false;
                for (int k = 0; k < p->n_post; k++)
                    if (p->post[k].kind == NN_POST_SUM) has_sum = true;
                int other = c->in[0] == out ? c->in[1] : c->in[0];
                if (has_sum || other == out || nn_is_const(g, other)) break;
                if (!same_shape(&g->tensors[other].shape, &g->tensors[out].shape)) break;
                int op = g->tensors[other].producer;
                if (op >= ci) break;
                bool other_fuses = op > i && takes_sum(g, &g->nodes[op]) && uses[other] == 1 && !is_output(g, other);
                for (int k = 0; other_fuses && k < g->nodes[op].n_post; k++)
                    if (g->nodes[op].post[k].kind == NN_POST_SUM) other_fuses = false;
                if (other_fuses) break; /* the later conv takes the sum; moving this one could ping-pong */
                if (op > i && moves < g->n_nodes) { /* (bounded: every move must make progress) */
                    moves++;
                    /* the other operand is computed after this conv: run the conv later, just
                     * before the Add (valid: the Add is its only reader), then fuse there */
                    nn_node moved = *p;
                    memmove(&g->nodes[i], &g->nodes[i + 1], (size_t)(ci - 1 - i) * sizeof *g->nodes);
                    g->nodes[ci - 1] = moved;
                    nn_graph_update_producers(g);
                    i--;
                    break;
                }
                if (op > i) break;
                p->post[p->n_post++] = (nn_postop){.kind = NN_POST_SUM, .sum_tensor = other};
                s->sums_fused++;
            } else {
                break;
            }
            p->out[0] = c->out[0];
            g->tensors[c->out[0]].producer = i;
            c->dead = true;
        }
    }
    free(uses);
}

/* The value of a constant scalar float tensor, or NaN. */
static double scalar_of(const nn_graph *g, int t) {
    const nn_tensor *c = &g->tensors[t];
    if (!c->data || c->count != 1) return NAN;
    return c->dtype == NN_F32 ? ((const float *)c->data)[0] : (double)((const int64_t *)c->data)[0];
}

/* The input of binary node n that is not `t` (-1 when neither is). */
static int other_input(const nn_node *n, int t) { return n->in[0] == t ? n->in[1] : n->in[1] == t ? n->in[0] : -1; }

/* The one live node reading t, when t has exactly one use. */
static nn_node *only_reader(nn_graph *g, const int *uses, int t, nn_op op) {
    if (uses[t] != 1) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == t) return n->op == op ? n : NULL;
    }
    return NULL;
}

/* The end of both GELU forms, x * (1 + f) * 0.5 with the products in either order, from the output
 * of the Add of 1: the last Mul (and in *m1 the first), or NULL. */
static nn_node *gelu_tail(nn_graph *g, const int *uses, int one_plus, int x, nn_node **m1_out) {
    nn_node *m1 = only_reader(g, uses, one_plus, NN_OP_MUL);
    if (!m1) return NULL;
    int other = other_input(m1, one_plus);
    if (other != x && scalar_of(g, other) != 0.5) return NULL;
    nn_node *m2 = only_reader(g, uses, m1->out[0], NN_OP_MUL);
    if (!m2) return NULL;
    int last = other_input(m2, m1->out[0]);
    if (!(other == x ? scalar_of(g, last) == 0.5 : last == x)) return NULL;
    *m1_out = m1;
    return m2;
}

/* m2 becomes GELU of x. */
static void make_gelu(nn_node *m2, int x, nn_act_kind kind) {
    m2->op = NN_OP_GELU;
    m2->in[0] = x;
    m2->n_in = 1;
    m2->p.act = (nn_act){kind, 0, 0};
}

/* The node producing t when it is a single-use Mul of x by a constant scalar c (either side). */
static nn_node *mul_by_scalar(nn_graph *g, const int *uses, int t, double c, double tol, int *x) {
    int pt = g->tensors[t].producer;
    if (pt < 0 || uses[t] != 1 || g->nodes[pt].op != NN_OP_MUL) return NULL;
    nn_node *m = &g->nodes[pt];
    for (int k = 0; k < 2; k++)
        if (fabs(scalar_of(g, m->in[k]) - c) < tol) {
            *x = m->in[1 - k];
            return m;
        }
    return NULL;
}

/* The single-use Mul producing t as x * x * x (either order), and in *sq its x * x; or NULL. */
static nn_node *cube_of(nn_graph *g, const int *uses, int t, int x, nn_node **sq) {
    int pt = g->tensors[t].producer;
    if (pt < 0 || uses[t] != 1 || g->nodes[pt].op != NN_OP_MUL) return NULL;
    nn_node *c = &g->nodes[pt];
    int other = c->in[0] == x ? c->in[1] : c->in[1] == x ? c->in[0] : -1;
    int ps = other >= 0 ? g->tensors[other].producer : -1;
    if (ps < 0 || uses[other] != 1 || g->nodes[ps].op != NN_OP_MUL || g->nodes[ps].in[0] != x || g->nodes[ps].in[1] != x)
        return NULL;
    *sq = &g->nodes[ps];
    return c;
}

/* GELU as exporters write it, 0.5 * x * (1 + erf(x / sqrt 2)) (Div or Mul by 1/sqrt 2, the two
 * products in either order), becomes one Gelu node: oneDNN's gelu_erf, one pass instead of five. */
static void fuse_gelu(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *erf = &g->nodes[i];
        if (erf->dead || erf->op != NN_OP_ERF) continue;
        int scaled = erf->in[0], pre = g->tensors[scaled].producer;
        if (pre < 0 || uses[scaled] != 1) continue;
        nn_node *d = &g->nodes[pre];
        int x = -1;
        if (d->op == NN_OP_DIV && fabs(scalar_of(g, d->in[1]) - M_SQRT2) < 1e-6) x = d->in[0];
        if (d->op == NN_OP_MUL) mul_by_scalar(g, uses, scaled, M_SQRT1_2, 1e-6, &x);
        if (x < 0 || nn_is_const(g, x)) continue;
        nn_node *add = only_reader(g, uses, erf->out[0], NN_OP_ADD), *m1 = NULL;
        if (!add || scalar_of(g, other_input(add, erf->out[0])) != 1.0) continue;
        nn_node *m2 = gelu_tail(g, uses, add->out[0], x, &m1);
        if (!m2) continue;
        make_gelu(m2, x, NN_ACT_GELU_ERF);
        d->dead = erf->dead = add->dead = m1->dead = true;
        s->acts_fused++;
    }
}

/* GELU's tanh approximation as torch.onnx writes it, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 *
 * x * x * x))), becomes one Gelu node on oneDNN's gelu_tanh: one pass instead of nine. */
static void fuse_gelu_tanh(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *th = &g->nodes[i];
        if (th->dead || th->op != NN_OP_TANH) continue;
        int a = -1;
        nn_node *mu = mul_by_scalar(g, uses, th->in[0], 0.7978845608, 1e-6, &a);
        int pa = mu ? g->tensors[a].producer : -1;
        if (pa < 0 || uses[a] != 1 || g->nodes[pa].op != NN_OP_ADD) continue;
        nn_node *add = &g->nodes[pa], *mc = NULL, *cube = NULL, *sq = NULL;
        int x = -1;
        for (int side = 0; side < 2 && !cube; side++) { /* x + 0.044715 * x^3, either side */
            int c = -1;
            mc = mul_by_scalar(g, uses, add->in[side], 0.044715, 1e-7, &c);
            x = add->in[1 - side];
            if (mc && !nn_is_const(g, x)) cube = cube_of(g, uses, c, x, &sq);
        }
        if (!cube) continue;
        nn_node *one = only_reader(g, uses, th->out[0], NN_OP_ADD), *m1 = NULL;
        if (!one || scalar_of(g, other_input(one, th->out[0])) != 1.0) continue;
        nn_node *m2 = gelu_tail(g, uses, one->out[0], x, &m1);
        if (!m2) continue;
        make_gelu(m2, x, NN_ACT_GELU_TANH);
        sq->dead = cube->dead = mc->dead = add->dead = mu->dead = th->dead = one->dead = m1->dead = true;
        s->acts_fused++;
    }
}

static bool const_vector(const nn_graph *g, int t, int64_t c);

/* Linear layers as exporters write them for 3-D inputs, MatMul(x, W) then Add(bias): the bias moves
 * into the MatMul (a third input, as Gemm's C), so the product writes x W + b in one pass and an
 * activation after it can fuse too. */
static void fuse_linear_bias(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *mm = &g->nodes[i];
        if (mm->dead || mm->op != NN_OP_MATMUL || mm->n_in != 2 || !nn_is_const(g, mm->in[1]) || nn_is_const(g, mm->in[0]))
            continue;
        const nn_tensor *w = &g->tensors[mm->in[1]];
        if (w->shape.rank != 2 || is_output(g, mm->out[0])) continue;
        nn_node *add = only_reader(g, uses, mm->out[0], NN_OP_ADD);
        if (!add || add->n_post) continue;
        int b = other_input(add, mm->out[0]);
        const nn_tensor *bt = b >= 0 ? &g->tensors[b] : NULL;
        if (!bt || !const_vector(g, b, w->shape.d[1]) || bt->shape.d[bt->shape.rank - 1] != w->shape.d[1]) continue;
        mm->in = ftl_xrealloc(mm->in, 3 * sizeof *mm->in);
        mm->in[2] = b;
        mm->n_in = 3;
        mm->out[0] = add->out[0];
        g->tensors[add->out[0]].producer = i;
        add->dead = true;
        s->acts_fused++;
    }
}

/* Whether ReduceMean node n averages exactly the last axis of its input. */
static bool mean_of_last_axis(const nn_graph *g, const nn_node *n) {
    if (n->op != NN_OP_REDUCEMEAN || n->p.n_axes != 1 || !n->p.keepdims) return false;
    int r = g->tensors[n->in[0]].shape.rank;
    return n->p.axes[0] == -1 || n->p.axes[0] == r - 1;
}

/* A float constant of `c` values (a layer norm's scale or shift). */
static bool const_vector(const nn_graph *g, int t, int64_t c) {
    const nn_tensor *v = &g->tensors[t];
    return v->data && v->dtype == NN_F32 && v->count == c;
}

/* LayerNorm as exporters write it at opset 13 - d = x - mean(x); y = d / sqrt(mean(d^2) + eps) *
 * gamma + beta, over the last axis - becomes one LayerNormalization node (oneDNN's layer
 * normalization: one pass instead of eight, no temporaries). */
static void fuse_layernorm(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *mean = &g->nodes[i];
        if (mean->dead || !mean_of_last_axis(g, mean) || uses[mean->out[0]] != 1) continue;
        int x = mean->in[0];
        nn_node *sub = only_reader(g, uses, mean->out[0], NN_OP_SUB);
        if (!sub || sub->in[0] != x || sub->in[1] != mean->out[0] || uses[sub->out[0]] != 2) continue;
        nn_node *pw = NULL, *div = NULL;
        for (int k = 0; k < g->n_nodes; k++) {
            nn_node *c = &g->nodes[k];
            if (c->dead || c->n_in < 1 || c->in[0] != sub->out[0]) continue;
            if (c->op == NN_OP_POW && c->p.act.alpha == 2.0f) pw = c;
            else if (c->op == NN_OP_DIV) div = c;
        }
        if (!pw || !div) continue;
        nn_node *var = only_reader(g, uses, pw->out[0], NN_OP_REDUCEMEAN);
        if (!var || !mean_of_last_axis(g, var)) continue;
        nn_node *add_eps = only_reader(g, uses, var->out[0], NN_OP_ADD);
        if (!add_eps) continue;
        double eps = scalar_of(g, other_input(add_eps, var->out[0]));
        if (!(eps >= 0)) continue;
        nn_node *sq = only_reader(g, uses, add_eps->out[0], NN_OP_SQRT);
        if (!sq || div->in[1] != sq->out[0] || uses[sq->out[0]] != 1) continue;
        nn_node *mul = only_reader(g, uses, div->out[0], NN_OP_MUL);
        if (!mul) continue;
        int64_t c = g->tensors[x].shape.d[g->tensors[x].shape.rank - 1];
        int gamma = other_input(mul, div->out[0]);
        if (gamma < 0 || !const_vector(g, gamma, c)) continue;
        nn_node *add = only_reader(g, uses, mul->out[0], NN_OP_ADD);
        int beta = add ? other_input(add, mul->out[0]) : -1;
        if (!add || beta < 0 || !const_vector(g, beta, c)) continue;
        /* the final Add becomes LayerNormalization(x, gamma, beta) */
        add->op = NN_OP_LAYERNORM;
        add->in = ftl_xrealloc(add->in, 3 * sizeof *add->in);
        add->n_in = 3;
        add->in[0] = x;
        add->in[1] = gamma;
        add->in[2] = beta;
        add->p.axis = -1;
        add->p.epsilon = (float)eps;
        add->n_post = 0;
        mean->dead = sub->dead = pw->dead = var->dead = add_eps->dead = sq->dead = div->dead = mul->dead = true;
        s->acts_fused++;
    }
}

/* SiLU as exporters write it, x * Sigmoid(x) (the Mul's operands in either order, the sigmoid read by
 * the Mul alone), becomes one SiLU node: oneDNN's swish, fused into the convolution before it as a
 * post-op instead of a sigmoid pass and a multiply pass over the tensor (EfficientNet's activations). */
static void fuse_silu(nn_graph *g, const int *uses, nn_optimize_stats *s) {
    for (int i = 0; i < g->n_nodes; i++) {
        nn_node *sig = &g->nodes[i];
        if (sig->dead || sig->op != NN_OP_SIGMOID || sig->n_in != 1) continue;
        int x = sig->in[0];
        if (x < 0 || nn_is_const(g, x)) continue;
        nn_node *m = only_reader(g, uses, sig->out[0], NN_OP_MUL);
        if (!m || m->n_in != 2 || other_input(m, sig->out[0]) != x) continue;
        m->op = NN_OP_SILU;
        m->in[0] = x;
        m->n_in = 1;
        m->p.act = (nn_act){NN_ACT_SILU, 1.0f, 0};
        sig->dead = true;
        s->acts_fused++;
    }
}

ftl_status nn_optimize(nn_graph *g, nn_optimize_stats *stats) {
    nn_optimize_stats local = {0};
    nn_optimize_stats *s = stats ? stats : &local;
    memset(s, 0, sizeof *s);
    remove_identities(g, s);
    nn_graph_compact(g);
    /* each rewrite sees the use counts of the graph the previous one left */
    void (*const passes[])(nn_graph *, const int *, nn_optimize_stats *) = {fold_pads, fold_batchnorms, fuse_linear_bias,
                                                                            fuse_gelu, fuse_gelu_tanh, fuse_silu,
                                                                            fuse_layernorm};
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        int *uses = nn_graph_use_counts(g);
        passes[i](g, uses, s);
        free(uses);
        nn_graph_compact(g);
    }
    fuse_postops(g, s);
    nn_graph_compact(g);
    return FTL_OK;
}
