/* Shape rules: the output shape of one node from its inputs', one function per op family, in execution
 * order. The shape pass (shape.c) and the load-time evaluator (fold.c) both use them; they call neither. */
#include "nn/ir/shape_rules.h"
#include "nn/ir/ops.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#define SHAPE_TXT(s) nn_shape_str(&(s), false, (char[128]){0}, 128)

static ftl_status slice_fail(const nn_node *n, const char *why) {
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): %s", n->name, n->op_type, why);
}

bool nn_op_is_value_only(nn_op op) {
    return op == NN_OP_SHAPE || op == NN_OP_GATHER || op == NN_OP_CAST || op == NN_OP_EQUAL || op == NN_OP_WHERE ||
           op == NN_OP_CONSTANTOFSHAPE || op == NN_OP_EXPAND || op == NN_OP_RANGE || op == NN_OP_MOD || op == NN_OP_NOT ||
           op == NN_OP_SCATTERND;
}

ftl_status nn_slice_bounds(const nn_graph *g, const nn_node *n, const nn_shape *x, int64_t *begin, int64_t *end,
                           int64_t *step) {
    for (int i = 0; i < x->rank; i++) begin[i] = 0, end[i] = x->d[i], step[i] = 1;
    const nn_tensor *ts[4] = {NULL, NULL, NULL, NULL};
    for (int k = 1; k < n->n_in && k < 5; k++) {
        if (n->in[k] < 0) continue;
        ts[k - 1] = &g->tensors[n->in[k]];
        if (!ts[k - 1]->data || ts[k - 1]->dtype != NN_I64 || ts[k - 1]->shape.rank > 1)
            return slice_fail(n, "starts, ends, axes and steps must be 1-D integer constants (or computed from shapes)");
    }
    int64_t m = ts[0]->count;
    for (int k = 1; k < 4; k++)
        if (ts[k] && ts[k]->count != m) return slice_fail(n, "starts, ends, axes and steps differ in length");
    if (m > x->rank) return slice_fail(n, "more starts than the input has axes");
    bool seen[NN_MAX_RANK] = {0};
    for (int64_t j = 0; j < m; j++) {
        int64_t a = ts[2] ? ((const int64_t *)ts[2]->data)[j] : j;
        if (a < 0) a += x->rank;
        if (a < 0 || a >= x->rank || seen[a]) return slice_fail(n, "an axis out of range or repeated");
        seen[a] = true;
        int64_t d = x->d[a], s = ts[3] ? ((const int64_t *)ts[3]->data)[j] : 1;
        if (s == 0) return slice_fail(n, "a step of 0");
        int64_t b = ((const int64_t *)ts[0]->data)[j], e = ((const int64_t *)ts[1]->data)[j];
        if (b < 0) b += d;
        if (e < 0 && e > INT64_MIN / 2) e += d;
        if (s > 0) {
            b = b < 0 ? 0 : b > d ? d : b;
            e = e < 0 ? 0 : e > d ? d : e;
        } else {
            b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
        }
        begin[a] = b, end[a] = e, step[a] = s;
    }
    return FTL_OK;
}

static ftl_status node_err(const nn_node *n, const char *fmt, const char *a, const char *b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    return ftl_fail(FTL_E_FORMAT, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

int64_t nn_window_out(int64_t in, int k, int stride, int dilation, int pad_begin, int pad_end, bool ceil_mode) {
    int64_t span = (int64_t)dilation * (k - 1) + 1;
    int64_t avail = in + pad_begin + pad_end - span;
    if (avail < 0) return 0;
    int64_t out = avail / stride + 1;
    if (ceil_mode && avail % stride) {
        out++;
        /* PyTorch/ONNX Runtime: the last window must start inside the input or the left padding */
        if ((out - 1) * stride >= in + pad_begin) out--;
    }
    return out;
}

static const nn_shape *in_shape(const nn_graph *g, const nn_node *n, int k) { return &g->tensors[n->in[k]].shape; }

static ftl_status need_rank(const nn_graph *g, const nn_node *n, int k, int rank) {
    const nn_tensor *t = &g->tensors[n->in[k]];
    if (t->shape.rank == rank) return FTL_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "input '%s' has shape %s, expected rank %d", t->name, SHAPE_TXT(t->shape), rank);
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

static void resolve_auto_pad(nn_params *p, const nn_shape *x) {
    if (!p->auto_pad[0]) return;
    for (int i = 0; i < 2; i++) {
        int64_t in = x->d[2 + i];
        if (strcmp(p->auto_pad, "VALID") == 0) {
            p->pad_begin[i] = p->pad_end[i] = 0;
            continue;
        }
        int64_t out = (in + p->stride[i] - 1) / p->stride[i];
        int64_t span = (int64_t)p->dilation[i] * (p->kernel[i] - 1) + 1;
        int64_t total = (out - 1) * p->stride[i] + span - in;
        if (total < 0) total = 0;
        int64_t small = total / 2, big = total - small;
        bool upper = strcmp(p->auto_pad, "SAME_UPPER") == 0;
        p->pad_begin[i] = (int)(upper ? small : big);
        p->pad_end[i] = (int)(upper ? big : small);
    }
}

static ftl_status spatial_out(const nn_node *n, const nn_shape *x, int64_t channels, nn_shape *y) {
    const nn_params *p = &n->p;
    *y = (nn_shape){.rank = 4, .d = {x->d[0], channels}};
    for (int i = 0; i < 2; i++) {
        int64_t o = nn_window_out(x->d[2 + i], p->kernel[i], p->stride[i], p->dilation[i], p->pad_begin[i], p->pad_end[i],
                                  p->ceil_mode);
        if (o < 1) {
            char msg[200];
            snprintf(msg, sizeof msg, "the %dx%d window (dilation %d, pads %d+%d) does not fit the %s input",
                     p->kernel[0], p->kernel[1], p->dilation[i], p->pad_begin[i], p->pad_end[i], SHAPE_TXT(*x));
            return node_err(n, "%s%s", msg, "");
        }
        y->d[2 + i] = o;
    }
    return FTL_OK;
}

static ftl_status infer_conv(nn_graph *g, nn_node *n, nn_shape *y) {
    FTL_TRY(need_rank(g, n, 0, 4));
    const nn_shape *x = in_shape(g, n, 0);
    const nn_tensor *w = &g->tensors[n->in[1]];
    if (!w->data || w->dtype != NN_F32)
        return node_err(n, "the weights '%s' must be a float initializer%s", w->name, "");
    if (w->shape.rank != 4)
        return node_err(n, "the weights '%s' have shape %s, expected 4-D [M, C/group, kH, kW]", w->name, SHAPE_TXT(w->shape));
    nn_params *p = &n->p;
    int64_t c = x->d[1], m = w->shape.d[0];
    if (c < 1 || m < 1 || w->shape.d[2] < 1 || w->shape.d[3] < 1) /* later stages divide by these */
        return node_err(n, "weights '%s' of shape %s, or its input, have a zero-size dimension", w->name, SHAPE_TXT(w->shape));
    if (c % p->group || m % p->group || w->shape.d[1] * p->group != c) {
        char msg[256];
        snprintf(msg, sizeof msg, "the input has %lld channels but the weights '%s' %s with group %d expect %lld",
                 (long long)c, w->name, SHAPE_TXT(w->shape), p->group, (long long)(w->shape.d[1] * p->group));
        return node_err(n, "%s%s", msg, "");
    }
    for (int i = 0; i < 2; i++) {
        if (p->kernel[i] && p->kernel[i] != w->shape.d[2 + i])
            return node_err(n, "kernel_shape does not match the weights '%s' %s", w->name, SHAPE_TXT(w->shape));
        p->kernel[i] = (int)w->shape.d[2 + i];
    }
    if (n->n_in > 2 && n->in[2] >= 0) {
        const nn_tensor *b = &g->tensors[n->in[2]];
        if (!b->data || b->dtype != NN_F32 || b->count != m || b->shape.rank != 1)
            return node_err(n, "the bias '%s' must be a float initializer of shape [M] (it is %s)", b->name, SHAPE_TXT(b->shape));
    }
    resolve_auto_pad(p, x);
    return spatial_out(n, x, m, y);
}

static ftl_status infer_pool(nn_graph *g, nn_node *n, nn_shape *y) {
    FTL_TRY(need_rank(g, n, 0, 4));
    const nn_shape *x = in_shape(g, n, 0);
    resolve_auto_pad(&n->p, x);
    return spatial_out(n, x, x->d[1], y);
}

static ftl_status infer_batchnorm(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    if (x->rank < 2) return need_rank(g, n, 0, 4);
    if (x->d[1] < 1) return node_err(n, "an input with no channels%s%s", "", "");
    for (int k = 1; k < 5; k++) {
        const nn_tensor *t = &g->tensors[n->in[k]];
        if (!t->data || t->dtype != NN_F32 || t->count != x->d[1])
            return node_err(n, "parameter '%s' must be a float initializer with one value per channel (it is %s)",
                            t->name, SHAPE_TXT(t->shape));
    }
    *y = *x;
    return FTL_OK;
}

static ftl_status infer_broadcast(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *a = in_shape(g, n, 0), *b = in_shape(g, n, 1);
    int r = a->rank > b->rank ? a->rank : b->rank;
    y->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char msg[300];
            snprintf(msg, sizeof msg, "cannot broadcast '%s' %s with '%s' %s", g->tensors[n->in[0]].name, SHAPE_TXT(*a),
                     g->tensors[n->in[1]].name, SHAPE_TXT(*b));
            return node_err(n, "%s%s", msg, "");
        }
        y->d[i] = da == 1 ? db : da;
    }
    return FTL_OK;
}

static ftl_status norm_axis(const nn_node *n, int64_t axis, int rank, bool inclusive, int *out) {
    int64_t lim = inclusive ? rank + 1 : rank;
    if (axis < -lim || axis >= lim) {
        char msg[96];
        snprintf(msg, sizeof msg, "axis %lld is out of range for rank %d", (long long)axis, rank);
        return node_err(n, "%s%s", msg, "");
    }
    *out = (int)(axis < 0 ? axis + lim : axis);
    return FTL_OK;
}

static ftl_status infer_reduce_mean(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    bool red[NN_MAX_RANK] = {0};
    if (n->p.n_axes <= 0) {
        for (int i = 0; i < x->rank; i++) red[i] = true;
    } else {
        for (int i = 0; i < n->p.n_axes; i++) {
            int a = 0;
            FTL_TRY(norm_axis(n, n->p.axes[i], x->rank, false, &a));
            red[a] = true;
        }
    }
    if (red[0] && x->rank > 1)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (ReduceMean): a mean over the batch axis is not supported", n->name);
    y->rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) y->d[y->rank++] = x->d[i];
        else if (n->p.keepdims) y->d[y->rank++] = 1;
    }
    return FTL_OK;
}

static ftl_status infer_reshape(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    const nn_tensor *s = &g->tensors[n->in[1]];
    /* Checked on every pass: a folded shape can differ from batch to batch. */
    if (!s->data || s->dtype != NN_I64 || s->shape.rank > 1 || s->count > NN_MAX_RANK)
        return node_err(n, "the shape input is not a constant int64 vector of at most 8 values%s%s", "", "");
    const int64_t *v = s->data;
    int infer = -1;
    int64_t known = 1;
    y->rank = (int)s->count;
    for (int i = 0; i < y->rank; i++) {
        int64_t d = v[i];
        if (d == 0 && !n->p.allowzero) {
            if (i >= x->rank) return node_err(n, "shape value 0 at a position past the input's rank%s%s", "", "");
            d = x->d[i];
        } else if (d == -1) {
            if (infer >= 0) return node_err(n, "the shape has more than one -1%s%s", "", "");
            infer = i;
            d = 1;
        } else if (d < 0) {
            return node_err(n, "the shape has a negative value%s%s", "", "");
        }
        y->d[i] = d;
        if (__builtin_mul_overflow(known, d, &known) || known > NN_MAX_TENSOR_ELEMENTS)
            return node_err(n, "the requested shape has more than 2^31 elements%s%s", "", "");
    }
    int64_t total = nn_shape_count(x);
    if (infer >= 0) {
        if (known == 0 || total % known) return node_err(n, "cannot reshape %s into the requested shape", SHAPE_TXT(*x), "");
        y->d[infer] = total / known;
    } else if (known != total) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot reshape %s (%lld values) into %s", SHAPE_TXT(*x), (long long)total, SHAPE_TXT(*y));
        return node_err(n, "%s%s", msg, "");
    }
    return FTL_OK;
}

static ftl_status infer_squeeze(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    bool drop[NN_MAX_RANK] = {0};
    if (n->p.n_axes < 0) {
        for (int i = 1; i < x->rank; i++) drop[i] = x->d[i] == 1; /* never squeeze the batch away */
    } else {
        for (int i = 0; i < n->p.n_axes; i++) {
            int a = 0;
            FTL_TRY(norm_axis(n, n->p.axes[i], x->rank, false, &a));
            if (x->d[a] != 1) return node_err(n, "squeezes an axis whose size is not 1 (input %s)", SHAPE_TXT(*x), "");
            drop[a] = true;
        }
    }
    y->rank = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) y->d[y->rank++] = x->d[i];
    return FTL_OK;
}

static ftl_status infer_unsqueeze(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    int r = x->rank + n->p.n_axes;
    if (r > NN_MAX_RANK) return node_err(n, "the result has too many dimensions%s%s", "", "");
    bool ins[NN_MAX_RANK] = {0};
    for (int i = 0; i < n->p.n_axes; i++) {
        int a = 0;
        FTL_TRY(norm_axis(n, n->p.axes[i], r, false, &a));
        if (ins[a]) return node_err(n, "an axis is repeated%s%s", "", "");
        ins[a] = true;
    }
    y->rank = r;
    for (int i = 0, k = 0; i < r; i++) y->d[i] = ins[i] ? 1 : x->d[k++];
    return FTL_OK;
}

static ftl_status infer_concat(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x0 = in_shape(g, n, 0);
    int a;
    FTL_TRY(norm_axis(n, n->p.axis, x0->rank, false, &a));
    n->p.axis = a;
    *y = *x0;
    for (int k = 1; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        const nn_shape *x = in_shape(g, n, k);
        bool ok = x->rank == x0->rank;
        for (int i = 0; ok && i < x->rank; i++)
            if (i != a && x->d[i] != x0->d[i]) ok = false;
        if (!ok) return node_err(n, "input '%s' %s does not match the others", g->tensors[n->in[k]].name, SHAPE_TXT(*x));
        y->d[a] += x->d[a];
    }
    return FTL_OK;
}

static ftl_status infer_gemm(nn_graph *g, nn_node *n, nn_shape *y) {
    FTL_TRY(need_rank(g, n, 0, 2));
    const nn_shape *a = in_shape(g, n, 0);
    const nn_tensor *b = &g->tensors[n->in[1]];
    if (!b->data || b->dtype != NN_F32 || b->shape.rank != 2)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Gemm): input B ('%s') must be a 2-D float initializer", n->name, b->name);
    if (n->p.trans_a) return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Gemm): attribute 'transA': only 0 is supported", n->name);
    int64_t k = b->shape.d[n->p.trans_b ? 1 : 0], m = b->shape.d[n->p.trans_b ? 0 : 1];
    if (k < 1 || m < 1) return node_err(n, "input B '%s' has a zero-size dimension%s", b->name, "");
    if (a->d[1] != k) {
        char msg[256];
        snprintf(msg, sizeof msg, "A is %s but B '%s' is %s (transB=%d)", SHAPE_TXT(*a), b->name, SHAPE_TXT(b->shape), n->p.trans_b);
        return node_err(n, "%s%s", msg, "");
    }
    if (n->n_in > 2 && n->in[2] >= 0) {
        const nn_tensor *c = &g->tensors[n->in[2]];
        bool ok = c->data && c->dtype == NN_F32 &&
                  (c->count == 1 || (c->count == m && c->shape.d[c->shape.rank - 1] == m));
        if (!ok)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Gemm): input C ('%s') must be a float initializer of shape "
                            "[%lld] or [1,%lld] (or a scalar)", n->name, c->name, (long long)m, (long long)m);
    }
    *y = (nn_shape){.rank = 2, .d = {a->d[0], m}};
    return FTL_OK;
}

/* MatMul of two activations: numpy semantics, leading dimensions broadcast. */
static ftl_status infer_batched_matmul(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *a = in_shape(g, n, 0), *b = in_shape(g, n, 1);
    if (a->rank < 2 || b->rank < 2)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (MatMul): 1-D operands are not supported", n->name);
    if (a->d[a->rank - 1] != b->d[b->rank - 2]) {
        char msg[256];
        snprintf(msg, sizeof msg, "A is %s but B is %s", SHAPE_TXT(*a), SHAPE_TXT(*b));
        return node_err(n, "%s%s", msg, "");
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    y->rank = r;
    for (int i = 0; i < r - 2; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return node_err(n, "batch dimensions that do not broadcast%s%s", "", "");
        y->d[i] = da == 1 ? db : da;
    }
    y->d[r - 2] = a->d[a->rank - 2];
    y->d[r - 1] = b->d[b->rank - 1];
    return FTL_OK;
}

static ftl_status infer_matmul(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *a = in_shape(g, n, 0);
    const nn_tensor *b = &g->tensors[n->in[1]];
    if (!b->data && !nn_is_const(g, n->in[0])) return infer_batched_matmul(g, n, y);
    if (!b->data || b->dtype != NN_F32 || b->shape.rank != 2)
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (MatMul): input B ('%s') must be a 2-D float initializer", n->name, b->name);
    if (a->rank < 2) return need_rank(g, n, 0, 2);
    if (b->shape.d[0] < 1 || b->shape.d[1] < 1) return node_err(n, "input B '%s' has a zero-size dimension%s", b->name, "");
    if (a->d[a->rank - 1] != b->shape.d[0]) {
        char msg[256];
        snprintf(msg, sizeof msg, "A is %s but B '%s' is %s", SHAPE_TXT(*a), b->name, SHAPE_TXT(b->shape));
        return node_err(n, "%s%s", msg, "");
    }
    *y = *a;
    y->d[a->rank - 1] = b->shape.d[1];
    return FTL_OK;
}

static ftl_status infer_pad(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    if (n->p.n_pads != 2 * x->rank) {
        char msg[96];
        snprintf(msg, sizeof msg, "pads has %d values, the input %s needs %d", n->p.n_pads, SHAPE_TXT(*x), 2 * x->rank);
        return node_err(n, "%s%s", msg, "");
    }
    *y = *x;
    for (int i = 0; i < x->rank; i++) {
        y->d[i] = x->d[i] + n->p.pads[i] + n->p.pads[i + x->rank];
        if (y->d[i] < 1) return node_err(n, "the padding removes a whole axis of %s", SHAPE_TXT(*x), "");
    }
    if (n->p.pads[0] || n->p.pads[x->rank])
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Pad): padding the batch axis is not supported", n->name);
    return FTL_OK;
}

static ftl_status infer_transpose(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    if (n->p.n_axes < 0) {
        n->p.n_axes = x->rank;
        for (int i = 0; i < x->rank; i++) n->p.axes[i] = x->rank - 1 - i;
    }
    if (n->p.n_axes != x->rank) return node_err(n, "perm does not match the input %s", SHAPE_TXT(*x), "");
    bool seen[NN_MAX_RANK] = {0};
    y->rank = x->rank;
    for (int i = 0; i < x->rank; i++) {
        int64_t a = n->p.axes[i];
        if (a < 0 || a >= x->rank || seen[a]) return node_err(n, "perm is not a permutation%s%s", "", "");
        seen[a] = true;
        y->d[i] = x->d[a];
    }
    return FTL_OK; /* moving the batch axis is allowed: such a graph runs in whole batches (no micro-batches) */
}

/* Slice on an activation: positive steps (Swin's patch merging takes every second row). */
static ftl_status infer_slice(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    int64_t b[NN_MAX_RANK], e[NN_MAX_RANK], st[NN_MAX_RANK];
    FTL_TRY(nn_slice_bounds(g, n, x, b, e, st));
    *y = *x;
    for (int i = 0; i < x->rank; i++) {
        if (st[i] < 1)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Slice): negative steps on an activation are not supported",
                            n->name);
        y->d[i] = e[i] > b[i] ? (e[i] - b[i] + st[i] - 1) / st[i] : 0;
        n->p.slice_begin[i] = b[i];
        n->p.slice_step[i] = st[i];
        if (y->d[i] < 1) return node_err(n, "the slice of %s is empty", SHAPE_TXT(*x), "");
    }
    return FTL_OK; /* axis 0 may be sliced where a Transpose moved the batch (whole-batch plans) */
}

/* Einsum as a batched matmul (ops.c parse_einsum): A and B seen in canonical axis order. */
static ftl_status infer_einsum(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *a = in_shape(g, n, 0), *b = in_shape(g, n, 1);
    int r = n->p.ein_rank;
    if (a->rank != r || b->rank != r) {
        char msg[192];
        snprintf(msg, sizeof msg, "the equation has %d letters per term but the inputs are %s and %s", r, SHAPE_TXT(*a),
                 SHAPE_TXT(*b));
        return node_err(n, "%s%s", msg, "");
    }
    nn_shape ca = {.rank = r}, cb = {.rank = r};
    for (int t = 0; t < r; t++) ca.d[n->p.ein_a[t]] = a->d[t], cb.d[n->p.ein_b[t]] = b->d[t];
    bool ok = ca.d[r - 1] == cb.d[r - 2];
    for (int t = 0; t < r - 2; t++) ok = ok && ca.d[t] == cb.d[t];
    if (!ok) {
        char msg[192];
        snprintf(msg, sizeof msg, "the inputs %s and %s disagree on a shared letter's size", SHAPE_TXT(*a), SHAPE_TXT(*b));
        return node_err(n, "%s%s", msg, "");
    }
    *y = ca;
    y->d[r - 1] = cb.d[r - 1];
    return FTL_OK;
}

/* Split along a non-batch axis: the sizes given, or equal parts (the last one smaller, as in
 * opset 18); n->p.split holds every output's size afterwards. */
static ftl_status infer_split(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    int a;
    FTL_TRY(norm_axis(n, n->p.axis, x->rank, false, &a));
    if (a == 0) return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Split): splitting the batch axis is not supported", n->name);
    n->p.axis = a;
    int64_t total = 0, dim = x->d[a];
    if (n->p.n_split < 0) { /* equal parts, recomputed for every shape (n_split stays -1) */
        int64_t part = (dim + n->n_out - 1) / n->n_out;
        for (int k = 0; k < n->n_out; k++) n->p.split[k] = k < n->n_out - 1 ? part : dim - part * (n->n_out - 1);
    }
    for (int k = 0; k < n->n_out; k++) {
        if (n->p.split[k] < 1) return node_err(n, "splits %s into an empty part", SHAPE_TXT(*x), "");
        if (n->p.split[k] > dim) break; /* (no overflowing sum: the size check below fails) */
        total += n->p.split[k];
    }
    if (total != dim) {
        char msg[128];
        snprintf(msg, sizeof msg, "the split sizes add up to %lld, axis %d of %s", (long long)total, a, SHAPE_TXT(*x));
        return node_err(n, "%s%s", msg, "");
    }
    *y = *x;
    y->d[a] = n->p.split[0];
    return FTL_OK;
}

/* Gather of one index from an activation (a ViT's class token): a slice of that position. */
static ftl_status infer_gather_one(nn_graph *g, nn_node *n, nn_shape *y) {
    const nn_shape *x = in_shape(g, n, 0);
    const nn_tensor *idx = &g->tensors[n->in[1]];
    int a;
    FTL_TRY(norm_axis(n, n->p.axis, x->rank, false, &a));
    /* axis 0 is the batch only while no Transpose moved it; where one did, plans run whole batches */
    int64_t k = ((const int64_t *)idx->data)[0];
    if (k < 0) k += x->d[a];
    if (k < 0 || k >= x->d[a]) return node_err(n, "the index is out of range for %s", SHAPE_TXT(*x), "");
    n->p.axis = a;
    for (int i = 0; i < NN_MAX_RANK; i++) n->p.slice_begin[i] = 0;
    n->p.slice_begin[a] = k;
    y->rank = 0; /* a scalar index drops the axis, a 1-element list keeps it */
    for (int i = 0; i < x->rank; i++)
        if (i != a) y->d[y->rank++] = x->d[i];
        else if (idx->shape.rank >= 1) y->d[y->rank++] = 1;
    return FTL_OK;
}

ftl_status nn_infer_node_shape(nn_graph *g, nn_node *n, nn_shape *y) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && g->tensors[n->in[k]].shape.rank < 0)
            return node_err(n, "input '%s' has no known shape%s", g->tensors[n->in[k]].name, "");
    const nn_shape *x = in_shape(g, n, 0);
    switch (n->op) {
    case NN_OP_CONV: return infer_conv(g, n, y);
    case NN_OP_MAXPOOL: case NN_OP_AVGPOOL: return infer_pool(g, n, y);
    case NN_OP_BATCHNORM: return infer_batchnorm(g, n, y);
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV: return infer_broadcast(g, n, y);
    case NN_OP_GLOBALAVGPOOL: case NN_OP_GLOBALMAXPOOL:
        FTL_TRY(need_rank(g, n, 0, 4));
        *y = (nn_shape){.rank = 4, .d = {x->d[0], x->d[1], 1, 1}};
        return FTL_OK;
    case NN_OP_REDUCEMEAN: return infer_reduce_mean(g, n, y);
    case NN_OP_FLATTEN: {
        int a = 0;
        FTL_TRY(norm_axis(n, n->p.axis, x->rank, true, &a));
        *y = (nn_shape){.rank = 2, .d = {1, 1}};
        for (int i = 0; i < x->rank; i++) y->d[i < a ? 0 : 1] *= x->d[i];
        if (a == 0) return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Flatten): axis 0 would merge the batch", n->name);
        return FTL_OK;
    }
    case NN_OP_RESHAPE: return infer_reshape(g, n, y);
    case NN_OP_SQUEEZE: return infer_squeeze(g, n, y);
    case NN_OP_UNSQUEEZE: return infer_unsqueeze(g, n, y);
    case NN_OP_CONCAT: return infer_concat(g, n, y);
    case NN_OP_GEMM: return infer_gemm(g, n, y);
    case NN_OP_MATMUL: return infer_matmul(g, n, y);
    case NN_OP_PAD: return infer_pad(g, n, y);
    case NN_OP_TRANSPOSE: return infer_transpose(g, n, y);
    case NN_OP_SLICE: return infer_slice(g, n, y);
    case NN_OP_EINSUM: return infer_einsum(g, n, y);
    case NN_OP_SPLIT: return infer_split(g, n, y);
    case NN_OP_LAYERNORM: {
        int a;
        FTL_TRY(norm_axis(n, n->p.axis, x->rank, false, &a));
        if (a != x->rank - 1)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (LayerNormalization): only the last axis is supported (axis %d "
                            "of rank %d)", n->name, n->p.axis, x->rank);
        for (int k = 1; k < n->n_in; k++) {
            const nn_tensor *t = n->in[k] >= 0 ? &g->tensors[n->in[k]] : NULL;
            if (t && (!t->data || t->dtype != NN_F32 || t->count != x->d[a]))
                return node_err(n, "scale and bias must be float constants of the last axis' size ('%s')", t->name, "");
        }
        *y = *x;
        return FTL_OK;
    }
    case NN_OP_SOFTMAX: {
        int a;
        FTL_TRY(norm_axis(n, n->p.axis, x->rank, false, &a));
        if (a == 0 && x->rank > 1) return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Softmax): over the batch axis", n->name);
        n->p.axis = a;
        *y = *x;
        return FTL_OK;
    }
    case NN_OP_GATHER:
        if (nn_is_const(g, n->in[1]) && g->tensors[n->in[1]].count == 1 && g->tensors[n->in[1]].dtype == NN_I64)
            return infer_gather_one(g, n, y);
        /* fall through */
    default:
        if (nn_op_is_value_only(n->op))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): runs on an activation ('%s'); ftl evaluates %s only on "
                            "constants and shapes (at load time)", n->name, n->op_type, g->tensors[n->in[0]].name, n->op_type);
        *y = *x;
        return FTL_OK; /* element-wise activations, Identity, Dropout */
    }
}
