/* Quantized ONNX ops -> ftl's float graph with the model's own scales (see qdq.h). */
#include "nn/ir/qdq.h"
#include "util/alloc.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_INT32 = 6 };

/* What an integer activation of the model holds: its quantization (per tensor). */
typedef struct qinfo {
    bool set;
    bool sums;                /* int32 sums of ConvInteger / MatMulInteger: scale 1, zero 0 */
    float scale;
    int zero, lo, hi;
    int type;                 /* ONNX data type */
    bool folded;              /* a constant a QuantizeLinear folded: scale_t / zero_t are its parameters */
    int scale_t, zero_t;
} qinfo;

/* A node's scale and zero point inputs, checked. */
typedef struct qparams {
    int64_t count;            /* 1: per tensor; else one per index of `axis` of the data */
    const float *scale;
    int64_t *zero;            /* count entries (allocated; zeros when the input is absent) */
    int type, lo, hi;
    int axis;
} qparams;

typedef struct lowering {
    nn_graph *g;
    qinfo *q;                 /* per tensor */
    int cap;
} lowering;

static const char *type_name(int type) {
    return type == ONNX_UINT8 ? "uint8" : type == ONNX_INT8 ? "int8" : type == ONNX_INT32 ? "int32" : "?";
}

static bool type_range(int type, int *lo, int *hi) {
    switch (type) {
    case ONNX_UINT8: *lo = 0, *hi = 255; return true;
    case ONNX_INT8: *lo = -128, *hi = 127; return true;
    case ONNX_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    default: return false;
    }
}

static qinfo *info(lowering *L, int t) {
    if (t >= L->cap) {
        int cap = L->g->n_tensors + 64;
        L->q = ftl_xrealloc(L->q, (size_t)cap * sizeof *L->q);
        memset(L->q + L->cap, 0, (size_t)(cap - L->cap) * sizeof *L->q);
        L->cap = cap;
    }
    return &L->q[t];
}

static bool is_int_const(const nn_graph *g, int t) {
    return t >= 0 && g->tensors[t].data && g->tensors[t].dtype == NN_I64 && !g->tensors[t].computed;
}

static ftl_status fail(const nn_node *n, const char *fmt, const char *detail) {
    return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): %s%s", n->name, n->op_type, fmt, detail ? detail : "");
}

static void qparams_free(qparams *p) {
    free(p->zero);
    p->zero = NULL;
}

/* Reads inputs scale_in / zero_in of n. data: the tensor they quantize (its constant type or its
 * qinfo gives the integer type when the zero point is absent; default_type otherwise). */
static ftl_status read_qparams(lowering *L, const nn_node *n, int scale_in, int zero_in, int data, int default_type,
                               qparams *p) {
    nn_graph *g = L->g;
    *p = (qparams){.axis = 1};
    int st = scale_in < n->n_in ? n->in[scale_in] : -1, zt = zero_in < n->n_in ? n->in[zero_in] : -1;
    if (st < 0 || !g->tensors[st].data || g->tensors[st].computed)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its scale (input %d) must be a constant; scales computed at run "
                        "time (dynamic quantization) are not supported", n->name, n->op_type, scale_in);
    const nn_tensor *s = &g->tensors[st];
    if (s->dtype != NN_F32) return fail(n, "its scale is not a float tensor", NULL);
    if (s->count < 1) return fail(n, "its scale is empty", NULL);
    if (s->shape.rank > 1) return fail(n, "its scale must be a scalar or a vector", NULL);
    p->count = s->count;
    p->scale = s->data;
    for (int64_t i = 0; i < p->count; i++)
        if (!(isfinite(p->scale[i]) && p->scale[i] > 0.0f)) {
            char d[96];
            snprintf(d, sizeof d, " (scale[%lld] = %g): every scale must be positive and finite", (long long)i,
                     (double)p->scale[i]);
            return fail(n, "bad scale", d);
        }
    if (zt >= 0) {
        const nn_tensor *z = &g->tensors[zt];
        if (!is_int_const(g, zt))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its zero point (input %d) must be an integer constant",
                            n->name, n->op_type, zero_in);
        if (z->count != p->count) {
            char d[96];
            snprintf(d, sizeof d, " (%lld zero points for %lld scales)", (long long)z->count, (long long)p->count);
            return fail(n, "its zero point and scale differ in length", d);
        }
        p->type = z->onnx_type;
    } else if (is_int_const(g, data)) {
        p->type = g->tensors[data].onnx_type;
    } else if (data >= 0 && info(L, data)->set) {
        p->type = info(L, data)->type;
    } else {
        p->type = default_type;
    }
    if (!type_range(p->type, &p->lo, &p->hi)) {
        char d[64];
        snprintf(d, sizeof d, " (ONNX type %d)", p->type);
        return fail(n, "ftl runs uint8 and int8 quantization (int32 for biases), not this integer type", d);
    }
    p->zero = ftl_xcalloc((size_t)p->count, sizeof *p->zero);
    if (zt >= 0) memcpy(p->zero, g->tensors[zt].data, (size_t)p->count * sizeof *p->zero);
    for (int64_t i = 0; i < p->count; i++)
        if (p->zero[i] < p->lo || p->zero[i] > p->hi) {
            char d[128];
            snprintf(d, sizeof d, " (zero point[%lld] = %lld): outside %s's range %d..%d", (long long)i,
                     (long long)p->zero[i], type_name(p->type), p->lo, p->hi);
            qparams_free(p);
            return fail(n, "bad zero point", d);
        }
    const nn_attr *a = nn_node_attr(n, "axis");
    if (a && a->type == NN_ATTR_INT) p->axis = (int)a->i;
    return FTL_OK;
}

/* The channel of element i of a tensor of shape s along axis (per-axis parameters), checked once by
 * axis_ok. */
static ftl_status axis_ok(const nn_node *n, const qparams *p, const nn_shape *s, int64_t *inner) {
    *inner = 1;
    if (p->count == 1) return FTL_OK;
    int axis = p->axis < 0 ? p->axis + s->rank : p->axis;
    if (axis < 0 || axis >= s->rank || s->d[axis] != p->count) {
        char d[128];
        snprintf(d, sizeof d, " (%lld scales along axis %d of a rank-%d tensor)", (long long)p->count, p->axis, s->rank);
        return fail(n, "per-axis scales do not match the tensor", d);
    }
    for (int k = axis + 1; k < s->rank; k++) *inner *= s->d[k];
    return FTL_OK;
}

/* vectorised as kernels/copy.c's conversions are (GCC's dynamic cost model; an AVX-512 copy picked at load) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "default"), optimize("vect-cost-model=dynamic")))
#endif
void nn_fake_quantize(const float *x, float *y, size_t n, float scale, int zero, int lo, int hi) {
    /* ONNX: q = saturate(round(x / s) + zp), half to even; the value q stands for is (q - zp) x s. The
     * clamp before rounding keeps the magic-number rounding exact (|v| <= 2^22) and vectorisable. */
    const float magic = 12582912.0f, vlo = (float)(lo - zero), vhi = (float)(hi - zero);
    for (size_t i = 0; i < n; i++) {
        float v = x[i] / scale;
        v = v < vlo ? vlo : v > vhi ? vhi : v;
        y[i] = ((v + magic) - magic) * scale;
    }
}

/* The float value of integer constant t under p: (q - zero) x scale, per axis. The constant's own
 * type must be p's. */
static ftl_status dequantize_const(lowering *L, const nn_node *n, int t, const qparams *p, float **out) {
    const nn_tensor *c = &L->g->tensors[t];
    if (c->onnx_type != p->type) {
        char d[128];
        snprintf(d, sizeof d, " ('%s' is ONNX type %d, its zero point %s)", c->name, c->onnx_type, type_name(p->type));
        return fail(n, "the data and its zero point differ in type", d);
    }
    int64_t inner;
    FTL_TRY(axis_ok(n, p, &c->shape, &inner));
    float *v = ftl_xmalloc((size_t)(c->count ? c->count : 1) * sizeof *v);
    const int64_t *q = c->data;
    for (int64_t i = 0; i < c->count; i++) {
        int64_t k = p->count == 1 ? 0 : (i / inner) % p->count;
        if (q[i] < p->lo || q[i] > p->hi) {
            free(v);
            char d[160];
            snprintf(d, sizeof d, " ('%s'[%lld] = %lld: outside %s's range)", c->name, (long long)i, (long long)q[i],
                     type_name(p->type));
            return fail(n, "bad integer data", d);
        }
        v[i] = (float)((double)(q[i] - p->zero[k]) * (double)p->scale[k]);
    }
    *out = v;
    return FTL_OK;
}

/* The model's weight scales when the weights' zero points are 0 (what int8 quantizes with): along the
 * per-axis parameters' axis, or one for all (*axis -1, w->d[0] copies). NULL otherwise. */
static float *weight_scales(const qparams *p, const nn_shape *w, int *axis_out) {
    *axis_out = -1;
    if (p->type != ONNX_INT8 || w->rank < 1 || w->d[0] < 1) return NULL; /* int8 kernels take s8 weights only */
    int axis = p->count > 1 ? (p->axis < 0 ? p->axis + w->rank : p->axis) : -1;
    if (axis >= w->rank || (axis >= 0 && w->d[axis] != p->count)) return NULL;
    for (int64_t i = 0; i < p->count; i++)
        if (p->zero[i] != 0) return NULL;
    int64_t n = axis >= 0 ? w->d[axis] : w->d[0];
    float *s = ftl_xmalloc((size_t)n * sizeof *s);
    for (int64_t o = 0; o < n; o++) s[o] = p->scale[axis >= 0 ? o : 0];
    *axis_out = axis;
    return s;
}

/* A new float constant named after `base`. */
static int new_const(nn_graph *g, const char *base, float *data, const nn_shape *shape) {
    char *b = ftl_strdup(base); /* the tensor array may move */
    int t = nn_graph_new_tensor(g, b);
    free(b);
    nn_tensor_set_data(&g->tensors[t], NN_F32, data, shape);
    return t;
}

static void set_inputs(nn_node *n, const int *in, int count) {
    n->in = ftl_xrealloc(n->in, (size_t)(count + 1) * sizeof *n->in);
    memcpy(n->in, in, (size_t)count * sizeof *in);
    n->n_in = count;
}

static void drop_attr(nn_node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) == 0) {
            free(n->attr[i].name);
            free(n->attr[i].s);
            free(n->attr[i].ints);
            free(n->attr[i].floats);
            n->attr[i] = n->attr[--n->n_attr];
            return;
        }
}

static void make_fake_quant(nn_node *n, int x, const qparams *p) {
    n->op = NN_OP_FAKEQUANT;
    set_inputs(n, &x, 1);
    drop_attr(n, "axis");
    n->p.q_scale = p->scale[0];
    n->p.q_zero = (int)p->zero[0];
    n->p.q_lo = p->lo;
    n->p.q_hi = p->hi;
}

/* An activation input of a quantized op: it must hold the integer tensor the op's parameters
 * describe (the representation holds one quantization per tensor). */
static ftl_status check_activation(lowering *L, const nn_node *n, int t, const qparams *p, const char *role) {
    const qinfo *q = info(L, t);
    const char *name = L->g->tensors[t].name;
    if (!q->set || q->sums)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its %s '%s' is not the output of a QuantizeLinear or QLinear "
                        "op, so ftl does not know its quantization", n->name, n->op_type, role, name);
    if (p->count != 1)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): per-axis quantization of the activation '%s' is not "
                        "supported (one scale per tensor)", n->name, n->op_type, name);
    if (q->scale != p->scale[0] || q->zero != p->zero[0] || q->type != p->type)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): reads '%s' as %s with scale %g and zero point %lld, but it was "
                        "quantized as %s with scale %g and zero point %d; ftl needs one quantization per tensor",
                        n->name, n->op_type, name, type_name(p->type), (double)p->scale[0], (long long)p->zero[0],
                        type_name(q->type), (double)q->scale, q->zero);
    return FTL_OK;
}

static void set_info(lowering *L, int t, const qparams *p) {
    *info(L, t) = (qinfo){.set = true, .scale = p->scale[0], .zero = (int)p->zero[0], .lo = p->lo, .hi = p->hi,
                          .type = p->type};
}

/* QuantizeLinear(x): FakeQuantize on an activation, folded on a constant. */
static ftl_status lower_quantize(lowering *L, int i) {
    nn_graph *g = L->g;
    nn_node *n = &g->nodes[i];
    int x = n->in[0], y = n->out[0];
    qparams p;
    FTL_TRY(read_qparams(L, n, 1, 2, -1, ONNX_UINT8, &p));
    ftl_status st = FTL_OK;
    if (p.type == ONNX_INT32) {
        st = fail(n, "quantizes to int32; ftl runs uint8 and int8 activations", NULL);
    } else if (info(L, x)->set) {
        st = fail(n, "its input is already an integer tensor", NULL);
    } else if (g->tensors[x].data && g->tensors[x].dtype == NN_F32 && !g->tensors[x].computed) {
        /* weights given as floats with a QuantizeLinear: the integers they become, as floats */
        const nn_tensor *c = &g->tensors[x];
        int64_t inner;
        st = axis_ok(n, &p, &c->shape, &inner);
        if (st == FTL_OK) {
            float *v = ftl_xmalloc((size_t)(c->count ? c->count : 1) * sizeof *v);
            const float *f = c->data;
            for (int64_t e = 0; e < c->count; e++) {
                int64_t k = p.count == 1 ? 0 : (e / inner) % p.count;
                nn_fake_quantize(&f[e], &v[e], 1, p.scale[k], (int)p.zero[k], p.lo, p.hi);
            }
            nn_shape s = c->shape;
            nn_tensor *out = &g->tensors[y];
            nn_tensor_set_data(out, NN_F32, v, &s);
            out->weight_scale = weight_scales(&p, &s, &out->weight_scale_axis);
            out->producer = -1;
            *info(L, y) = (qinfo){.set = false, .folded = true, .scale_t = n->in[1], .zero_t = n->n_in > 2 ? n->in[2] : -1};
            n->dead = true;
        }
    } else if (p.count != 1) {
        st = ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): per-axis quantization of the activation '%s' is not supported "
                      "(one scale per tensor)", n->name, n->op_type, g->tensors[x].name);
    } else {
        make_fake_quant(n, x, &p);
        set_info(L, y, &p);
    }
    qparams_free(&p);
    return st;
}

/* Whether a folded constant's QuantizeLinear parameters equal p. */
static bool same_params(const nn_graph *g, const qinfo *q, const qparams *p) {
    const nn_tensor *s = &g->tensors[q->scale_t];
    if (s->count != p->count || memcmp(s->data, p->scale, (size_t)p->count * sizeof(float)) != 0) return false;
    for (int64_t k = 0; k < p->count; k++) {
        int64_t z = q->zero_t >= 0 ? ((const int64_t *)g->tensors[q->zero_t].data)[k] : 0;
        if (z != p->zero[k]) return false;
    }
    return true;
}

/* DequantizeLinear(q): a float constant for integer weights, the identity on an activation (which
 * already holds the value). */
static ftl_status lower_dequantize(lowering *L, int i) {
    nn_graph *g = L->g;
    nn_node *n = &g->nodes[i];
    int x = n->in[0], y = n->out[0];
    qparams p;
    FTL_TRY(read_qparams(L, n, 1, 2, x, ONNX_UINT8, &p));
    ftl_status st = FTL_OK;
    if (is_int_const(g, x)) {
        float *v = NULL;
        st = dequantize_const(L, n, x, &p, &v);
        if (st == FTL_OK) {
            nn_shape s = g->tensors[x].shape;
            nn_tensor *out = &g->tensors[y];
            nn_tensor_set_data(out, NN_F32, v, &s);
            out->weight_scale = weight_scales(&p, &s, &out->weight_scale_axis);
            out->producer = -1;
            n->dead = true;
        }
    } else if (info(L, x)->folded) {
        /* the pair QuantizeLinear -> DequantizeLinear on float weights: the first already gave the value */
        if (!same_params(g, info(L, x), &p))
            st = ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): dequantizes '%s' with other scales or zero points than its "
                          "QuantizeLinear used", n->name, n->op_type, g->tensors[x].name);
        n->op = NN_OP_IDENTITY;
        set_inputs(n, &x, 1);
        drop_attr(n, "axis");
    } else {
        st = check_activation(L, n, x, &p, "input");
        if (st == FTL_OK) {
            n->op = NN_OP_IDENTITY;
            set_inputs(n, &x, 1);
            drop_attr(n, "axis");
        }
    }
    qparams_free(&p);
    return st;
}

/* Integer weights w (constant) under p as floats, scaled by 1 / divide (ConvInteger's sums). */
static ftl_status weights_of(lowering *L, const nn_node *n, int w, const qparams *p, float divide, int *out,
                             bool keep_scales) {
    nn_graph *g = L->g;
    if (!is_int_const(g, w))
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its weights '%s' must be an integer constant", n->name,
                        n->op_type, g->tensors[w].name);
    qparams q = *p;
    if (q.count > 1) q.axis = 0; /* QLinearConv's per-channel weight scales run along the output channels */
    float *v;
    FTL_TRY(dequantize_const(L, n, w, &q, &v));
    nn_shape s = g->tensors[w].shape;
    if (divide != 1.0f)
        for (int64_t e = 0; e < g->tensors[w].count; e++) v[e] /= divide;
    int t = new_const(g, g->tensors[w].name, v, &s);
    if (keep_scales) g->tensors[t].weight_scale = weight_scales(&q, &s, &g->tensors[t].weight_scale_axis);
    *out = t;
    return FTL_OK;
}

/* A FakeQuantize node after node i (whose output moves to a new tensor): the QLinear op's output. */
static void add_output_quant(lowering *L, int i, const qparams *p) {
    nn_graph *g = L->g;
    int y = g->nodes[i].out[0];
    char *base = ftl_strdup(g->tensors[y].name);
    int tmp = nn_graph_new_tensor(g, base);
    free(base);
    int f = nn_graph_add_node(g);
    nn_node *n = &g->nodes[i], *fq = &g->nodes[f];
    n->out[0] = tmp;
    g->tensors[tmp].producer = i;
    fq->name = ftl_format("%s/output_quant", n->name);
    fq->op_type = ftl_strdup(n->op_type);
    fq->n_out = 1;
    fq->out = ftl_xmalloc(2 * sizeof *fq->out);
    fq->out[0] = y;
    fq->in = NULL;
    fq->attr = ftl_xcalloc(1, sizeof *fq->attr);
    make_fake_quant(fq, tmp, p);
    g->tensors[y].producer = f;
    set_info(L, y, p);
}

/* QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B) -> Conv(x, W, B') + FakeQuantize(ys, yz). */
static ftl_status lower_qlinear_conv(lowering *L, int i) {
    nn_graph *g = L->g;
    nn_node *n = &g->nodes[i];
    int x = n->in[0], w = n->in[3], b = n->n_in > 8 ? n->in[8] : -1;
    qparams px, pw, py;
    FTL_TRY(read_qparams(L, n, 1, 2, x, ONNX_UINT8, &px));
    ftl_status st = read_qparams(L, n, 4, 5, w, ONNX_INT8, &pw);
    if (st != FTL_OK) {
        qparams_free(&px);
        return st;
    }
    st = read_qparams(L, n, 6, 7, -1, ONNX_UINT8, &py);
    if (st != FTL_OK) {
        qparams_free(&px);
        qparams_free(&pw);
        return st;
    }
    if (st == FTL_OK && py.count != 1) st = fail(n, "its output needs one scale (per tensor)", NULL);
    if (st == FTL_OK && (px.type == ONNX_INT32 || pw.type == ONNX_INT32 || py.type == ONNX_INT32))
        st = fail(n, "an int32 input, weight or output: ftl runs uint8 and int8 (int32 for the bias only)", NULL);
    if (st == FTL_OK) st = check_activation(L, n, x, &px, "input");
    int tw = -1, tb = -1;
    if (st == FTL_OK) st = weights_of(L, n, w, &pw, 1.0f, &tw, true);
    if (st == FTL_OK && b >= 0) { /* int32 sums' bias: scale x_scale x w_scale[m], zero 0 */
        n = &g->nodes[i];
        const nn_tensor *bt = &g->tensors[b];
        int64_t m = g->tensors[tw].shape.d[0];
        if (!is_int_const(g, b) || bt->count != m) {
            char d[96];
            snprintf(d, sizeof d, " ('%s': %lld values for %lld output channels)", bt->name, (long long)bt->count,
                     (long long)m);
            st = fail(n, "its bias must be an int32 constant, one per output channel", d);
        } else {
            float *v = ftl_xmalloc((size_t)m * sizeof *v);
            for (int64_t o = 0; o < m; o++)
                v[o] = (float)((double)((const int64_t *)bt->data)[o] * (double)px.scale[0] *
                               (double)pw.scale[pw.count == 1 ? 0 : o]);
            nn_shape s = {.rank = 1, .d = {m}};
            tb = new_const(g, bt->name, v, &s);
        }
    }
    if (st == FTL_OK) {
        n = &g->nodes[i];
        int in[3] = {x, tw, tb};
        set_inputs(n, in, tb >= 0 ? 3 : 2);
        n->op = NN_OP_CONV;
        add_output_quant(L, i, &py);
    }
    qparams_free(&px);
    qparams_free(&pw);
    qparams_free(&py);
    return st;
}

/* One input of QLinearMatMul / MatMulInteger as a float tensor: an activation holds its value; an
 * integer constant becomes floats (per-axis along its columns). */
static ftl_status matmul_operand(lowering *L, const nn_node *n, int t, qparams *p, float divide, const char *role,
                                 int *out) {
    nn_graph *g = L->g;
    if (!is_int_const(g, t)) {
        FTL_TRY(check_activation(L, n, t, p, role));
        *out = t;
        return FTL_OK;
    }
    bool is_a = t == n->in[0]; /* ONNX: A's per-axis parameters run along its rows, B's along its columns */
    if (p->count > 1) p->axis = g->tensors[t].shape.rank - (is_a ? 2 : 1);
    float *v;
    FTL_TRY(dequantize_const(L, n, t, p, &v));
    nn_shape s = g->tensors[t].shape;
    if (divide != 1.0f)
        for (int64_t e = 0; e < g->tensors[t].count; e++) v[e] /= divide;
    *out = new_const(g, g->tensors[t].name, v, &s);
    nn_tensor *w = &g->tensors[*out];
    if (divide == 1.0f && s.rank == 2 && !is_a) w->weight_scale = weight_scales(p, &s, &w->weight_scale_axis);
    return FTL_OK;
}

/* QLinearMatMul(a, as, az, b, bs, bz, ys, yz) -> MatMul + FakeQuantize(ys, yz). */
static ftl_status lower_qlinear_matmul(lowering *L, int i) {
    nn_graph *g = L->g;
    nn_node *n = &g->nodes[i];
    int a = n->in[0], b = n->in[3];
    qparams pa, pb, py;
    FTL_TRY(read_qparams(L, n, 1, 2, a, ONNX_UINT8, &pa));
    ftl_status st = read_qparams(L, n, 4, 5, b, ONNX_UINT8, &pb);
    if (st != FTL_OK) {
        qparams_free(&pa);
        return st;
    }
    st = read_qparams(L, n, 6, 7, -1, ONNX_UINT8, &py);
    if (st != FTL_OK) {
        qparams_free(&pa);
        qparams_free(&pb);
        return st;
    }
    if (py.count != 1) st = fail(n, "its output needs one scale (per tensor)", NULL);
    if (st == FTL_OK && (pa.type == ONNX_INT32 || pb.type == ONNX_INT32 || py.type == ONNX_INT32))
        st = fail(n, "an int32 input or output: ftl runs uint8 and int8", NULL);
    int ta = -1, tb = -1;
    if (st == FTL_OK) st = matmul_operand(L, n, a, &pa, 1.0f, "input A", &ta);
    if (st == FTL_OK) st = matmul_operand(L, &g->nodes[i], b, &pb, 1.0f, "input B", &tb);
    if (st == FTL_OK) {
        n = &g->nodes[i];
        int in[2] = {ta, tb};
        set_inputs(n, in, 2);
        n->op = NN_OP_MATMUL;
        add_output_quant(L, i, &py);
    }
    qparams_free(&pa);
    qparams_free(&pb);
    qparams_free(&py);
    return st;
}

/* ConvInteger(x, w, xz, wz) / MatMulInteger(a, b, az, bz): int32 sums of (x - xz)(w - wz). x holds
 * (x - xz) x s_x, so the sums are the float op with the weights divided by s_x. */
static ftl_status lower_integer_op(lowering *L, int i) {
    nn_graph *g = L->g;
    nn_node *n = &g->nodes[i];
    bool conv = n->op == NN_OP_CONVINTEGER;
    int x = n->in[0], w = n->in[1];
    const qinfo *qx = info(L, x);
    if (!qx->set || qx->sums)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its input '%s' is not the output of a QuantizeLinear or "
                        "QLinear op, so ftl does not know its quantization", n->name, n->op_type, g->tensors[x].name);
    float sx = qx->scale;
    /* the input's zero point must be the one it was quantized with: give the op a scale of s_x to check */
    int zx = n->n_in > 2 ? n->in[2] : -1, zw = n->n_in > 3 ? n->in[3] : -1;
    if (zx >= 0) {
        if (!is_int_const(g, zx) || g->tensors[zx].count != 1 || ((const int64_t *)g->tensors[zx].data)[0] != qx->zero)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): its input zero point must be a constant equal to the one "
                            "'%s' was quantized with (%d)", n->name, n->op_type, g->tensors[x].name, qx->zero);
    } else if (qx->zero != 0) {
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): it reads '%s' with zero point 0, but it was quantized with %d",
                        n->name, n->op_type, g->tensors[x].name, qx->zero);
    }
    /* the weights: (w - wz), no scale */
    qparams pw = {.count = 1, .axis = conv ? 0 : 1};
    float one = 1.0f;
    pw.scale = &one;
    pw.type = is_int_const(g, w) ? g->tensors[w].onnx_type : ONNX_INT8;
    if (!type_range(pw.type, &pw.lo, &pw.hi) || pw.type == ONNX_INT32)
        return fail(n, "its weights must be uint8 or int8", NULL);
    int64_t nz = 1;
    const int64_t *zv = NULL;
    if (zw >= 0) {
        if (!is_int_const(g, zw)) return fail(n, "its weight zero point must be an integer constant", NULL);
        nz = g->tensors[zw].count;
        zv = g->tensors[zw].data;
    }
    float *ones = ftl_xmalloc((size_t)(nz ? nz : 1) * sizeof *ones);
    for (int64_t k = 0; k < nz; k++) ones[k] = 1.0f;
    pw.count = nz ? nz : 1;
    pw.scale = ones;
    pw.zero = ftl_xcalloc((size_t)pw.count, sizeof *pw.zero);
    for (int64_t k = 0; zv && k < nz; k++) {
        pw.zero[k] = zv[k];
        if (zv[k] < pw.lo || zv[k] > pw.hi) {
            free(ones);
            qparams_free(&pw);
            return fail(n, "its weight zero point is outside its type's range", NULL);
        }
    }
    bool symmetric = pw.type == ONNX_INT8; /* s8 weights with zero points 0: int8 kernels take them as they are */
    for (int64_t k = 0; k < pw.count; k++) symmetric &= pw.zero[k] == 0;
    int tw;
    ftl_status st = conv ? weights_of(L, n, w, &pw, sx, &tw, false) : matmul_operand(L, n, w, &pw, sx, "input B", &tw);
    free(ones);
    qparams_free(&pw);
    if (st != FTL_OK) return st;
    nn_tensor *wt = &g->tensors[tw];
    if (symmetric && (conv || wt->shape.rank == 2) && wt->shape.rank >= 1 && wt->shape.d[0] > 0) {
        /* weights w / s_x at scale 1 / s_x are the integers w again: the int8 node sums them exactly */
        wt->weight_scale = ftl_xmalloc((size_t)wt->shape.d[0] * sizeof *wt->weight_scale);
        for (int64_t o = 0; o < wt->shape.d[0]; o++) wt->weight_scale[o] = 1.0f / sx;
        wt->weight_scale_axis = -1;
    }
    n = &g->nodes[i];
    int in[2] = {x, tw};
    set_inputs(n, in, 2);
    n->op = conv ? NN_OP_CONV : NN_OP_MATMUL;
    *info(L, n->out[0]) = (qinfo){.set = true, .sums = true, .scale = 1.0f, .type = ONNX_INT32, .lo = INT32_MIN,
                                  .hi = INT32_MAX};
    return FTL_OK;
}

/* Ops that move or pick integer values without computing with them: their output holds the same
 * quantization as their input. */
static bool passes_quantization(nn_op op) {
    return op == NN_OP_MAXPOOL || op == NN_OP_GLOBALMAXPOOL || op == NN_OP_RESHAPE || op == NN_OP_FLATTEN ||
           op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE || op == NN_OP_TRANSPOSE || op == NN_OP_IDENTITY ||
           op == NN_OP_CONCAT || op == NN_OP_SLICE || op == NN_OP_SPLIT;
}

static bool is_quant_op(nn_op op) {
    return op == NN_OP_QUANTIZELINEAR || op == NN_OP_DEQUANTIZELINEAR || op == NN_OP_QLINEARCONV ||
           op == NN_OP_QLINEARMATMUL || op == NN_OP_CONVINTEGER || op == NN_OP_MATMULINTEGER;
}

/* The ops between quantized ones: which integer tensors they read, and what that makes their outputs. */
static ftl_status check_other(lowering *L, int i, bool *changed) {
    nn_graph *g = L->g;
    nn_node *n = &g->nodes[i];
    const qinfo *first = NULL;
    int first_t = -1;
    for (int k = 0; k < n->n_in; k++) {
        int t = n->in[k];
        if (t < 0 || !info(L, t)->set) continue;
        const qinfo *q = info(L, t);
        bool data_input = k == 0 || n->op == NN_OP_CONCAT;
        if (n->op == NN_OP_CAST && q->sums) { /* Cast(int32 sums -> float): the value itself (rewritten in 3) */
            const nn_attr *to = nn_node_attr(n, "to");
            if (!to || to->type != NN_ATTR_INT || to->i != 1)
                return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Cast): casts the int32 sums '%s' to a type other than "
                                "float", n->name, g->tensors[t].name);
            return FTL_OK;
        }
        if (!passes_quantization(n->op) || !data_input || q->sums)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): reads the %s tensor '%s' directly; ftl runs integer "
                            "tensors only through DequantizeLinear, the QLinear and Integer ops, and ops that move "
                            "values (MaxPool, Reshape, Concat, ...)", n->name, n->op_type, type_name(q->type),
                            g->tensors[t].name);
        if (first && (q->scale != first->scale || q->zero != first->zero || q->type != first->type))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): joins '%s' and '%s', quantized with different scales or "
                            "zero points", n->name, n->op_type, g->tensors[first_t].name, g->tensors[t].name);
        first = q;
        first_t = t;
    }
    if (!first) return FTL_OK;
    qinfo copy = *first;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && !info(L, n->out[k])->set) {
            *info(L, n->out[k]) = copy;
            *changed = true;
        }
    return FTL_OK;
}

/* The inputs and outputs a quantized op needs, and the attributes ftl reads (before its parameters are
 * parsed, so the lowering never indexes past them): a malformed node is an error naming it. */
static ftl_status check_structure(const nn_graph *g, const nn_node *n) {
    static const struct {
        nn_op op;
        int min_in, max_in, required[5], n_required;
    } forms[] = {
        {NN_OP_QUANTIZELINEAR, 2, 3, {0, 1}, 2},        {NN_OP_DEQUANTIZELINEAR, 2, 3, {0, 1}, 2},
        {NN_OP_QLINEARCONV, 8, 9, {0, 1, 3, 4, 6}, 5}, {NN_OP_QLINEARMATMUL, 8, 8, {0, 1, 3, 4, 6}, 5},
        {NN_OP_CONVINTEGER, 2, 4, {0, 1}, 2},          {NN_OP_MATMULINTEGER, 2, 4, {0, 1}, 2},
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        if (forms[f].op != n->op) continue;
        if (n->n_in < forms[f].min_in || n->n_in > forms[f].max_in)
            return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): %d inputs, expected %d to %d", n->name, n->op_type, n->n_in,
                            forms[f].min_in, forms[f].max_in);
        for (int k = 0; k < forms[f].n_required; k++)
            if (n->in[forms[f].required[k]] < 0)
                return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): input %d is empty; it is required", n->name, n->op_type,
                                forms[f].required[k]);
        if (n->n_out < 1 || n->out[0] < 0 || (int64_t)n->out[0] >= g->n_tensors)
            return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): no output", n->name, n->op_type);
        if (n->op == NN_OP_QUANTIZELINEAR || n->op == NN_OP_DEQUANTIZELINEAR)
            for (int a = 0; a < n->n_attr; a++)
                if (strcmp(n->attr[a].name, "axis") != 0)
                    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): attribute '%s' is not supported (ftl reads "
                                    "per-tensor and per-axis quantization to uint8 and int8)", n->name, n->op_type,
                                    n->attr[a].name);
    }
    return FTL_OK;
}

ftl_status nn_qdq_lower(nn_graph *g) {
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && is_quant_op(g->nodes[i].op)) {
            any = true;
            FTL_TRY(check_structure(g, &g->nodes[i]));
        }
    if (!any) return FTL_OK;
    g->quantized = true;
    lowering L = {.g = g};
    info(&L, 0);
    int n_orig = g->n_nodes;
    ftl_status st = FTL_OK;
    /* 1. the integer tensors the quantizing ops make (their quantization is in their own inputs) */
    for (int i = 0; i < n_orig && st == FTL_OK; i++) {
        nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        if (n->op == NN_OP_QUANTIZELINEAR) {
            st = lower_quantize(&L, i);
        } else if (n->op == NN_OP_QLINEARCONV || n->op == NN_OP_QLINEARMATMUL) {
            qparams py;
            st = read_qparams(&L, n, 6, 7, -1, ONNX_UINT8, &py);
            if (st == FTL_OK) {
                if (py.type == ONNX_INT32) st = fail(n, "its output is int32: ftl runs uint8 and int8 outputs", NULL);
                else set_info(&L, n->out[0], &py);
                qparams_free(&py);
            }
        } else if (n->op == NN_OP_CONVINTEGER || n->op == NN_OP_MATMULINTEGER) {
            *info(&L, n->out[0]) = (qinfo){.set = true, .sums = true, .scale = 1.0f, .type = ONNX_INT32};
        }
    }
    /* 2. carried along by the ops that move values, in rounds (file order need not be topological);
     * anything else reading an integer tensor is refused */
    for (bool changed = true; changed && st == FTL_OK;) {
        changed = false;
        for (int i = 0; i < n_orig && st == FTL_OK; i++)
            if (!g->nodes[i].dead && !is_quant_op(g->nodes[i].op)) st = check_other(&L, i, &changed);
    }
    /* 3. rewrite: every integer activation's quantization is known now */
    for (int i = 0; i < n_orig && st == FTL_OK; i++) {
        nn_node *n = &g->nodes[i];
        if (n->dead) continue;
        switch (n->op) {
        case NN_OP_DEQUANTIZELINEAR: st = lower_dequantize(&L, i); break;
        case NN_OP_QLINEARCONV: st = lower_qlinear_conv(&L, i); break;
        case NN_OP_QLINEARMATMUL: st = lower_qlinear_matmul(&L, i); break;
        case NN_OP_CONVINTEGER: case NN_OP_MATMULINTEGER: st = lower_integer_op(&L, i); break;
        case NN_OP_CAST: /* of int32 sums to float (checked in 2): the value itself */
            if (n->in[0] >= 0 && info(&L, n->in[0])->sums) {
                n->op = NN_OP_IDENTITY;
                while (n->n_attr > 0) drop_attr(n, n->attr[0].name);
            }
            break;
        default: break;
        }
    }
    for (int k = 0; k < g->n_outputs && st == FTL_OK; k++) {
        int t = g->outputs[k];
        if (t < L.cap && L.q[t].set)
            st = ftl_fail(FTL_E_UNSUPPORTED, "graph output '%s' is a %s tensor; ftl returns float features: end the "
                          "graph with DequantizeLinear", g->tensors[t].name, type_name(L.q[t].type));
    }
    free(L.q);
    return st;
}
