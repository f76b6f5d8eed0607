/* Load-time evaluation of shape arithmetic and constant subgraphs (see fold.h). Values are
 * float or int64 (booleans as 0/1 int64), at most FOLD_MAX_ELEMENTS elements; every index read
 * from a tensor is bounds-checked. */
#include "nn/ir/fold.h"
#include "nn/ir/shape_rules.h"
#include "util/alloc.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_MAX_ELEMENTS ((int64_t)1 << 26)

typedef struct value {
    nn_dtype dtype;
    nn_shape shape;
    const void *data;
    int64_t count;
} value;

static ftl_status fail(const nn_node *n, const char *why) {
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): %s", n->name, n->op_type, why);
}

static bool evaluable(nn_op op) {
    switch (op) {
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV: case NN_OP_CONCAT: case NN_OP_UNSQUEEZE:
    case NN_OP_SQUEEZE: case NN_OP_RESHAPE: case NN_OP_FLATTEN: case NN_OP_IDENTITY: case NN_OP_DROPOUT:
    case NN_OP_SLICE: case NN_OP_TRANSPOSE: case NN_OP_POW: case NN_OP_SQRT:
        return true;
    default: return nn_op_is_value_only(op);
    }
}

bool nn_fold_possible(const nn_graph *g, const nn_node *n) {
    if (!evaluable(n->op)) return false;
    if (n->op == NN_OP_SHAPE) return g->tensors[n->in[0]].shape.rank >= 0;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && !g->tensors[n->in[k]].data) return false;
    return true;
}

static value value_of(const nn_graph *g, int t) {
    const nn_tensor *x = &g->tensors[t];
    return (value){x->dtype, x->shape, x->data, x->count};
}

static double get(const value *v, int64_t i) {
    return v->dtype == NN_F32 ? (double)((const float *)v->data)[i] : (double)((const int64_t *)v->data)[i];
}

static int64_t get_i(const value *v, int64_t i) {
    return v->dtype == NN_I64 ? ((const int64_t *)v->data)[i] : (int64_t)((const float *)v->data)[i];
}

/* Output buffer for `count` elements of dtype. */
static void *alloc_out(nn_dtype dt, int64_t count) {
    return ftl_xcalloc((size_t)(count ? count : 1), dt == NN_F32 ? sizeof(float) : sizeof(int64_t));
}

static void put(void *out, nn_dtype dt, int64_t i, double v) {
    if (dt == NN_F32) ((float *)out)[i] = (float)v;
    else ((int64_t *)out)[i] = (int64_t)v;
}

static ftl_status check_count(const nn_node *n, const nn_shape *s, int64_t *count) {
    int64_t c = 1;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] < 0 || __builtin_mul_overflow(c, s->d[i], &c) || c > FOLD_MAX_ELEMENTS)
            return fail(n, "a value computed at load time would exceed 2^26 elements");
    *count = c;
    return FTL_OK;
}

/* Strides of `s` seen from an output of rank r (numpy broadcasting: size-1 axes repeat). */
static void broadcast_strides(const nn_shape *s, int r, int64_t *strides) {
    int64_t st = 1;
    for (int i = r - 1; i >= 0; i--) {
        int k = i - (r - s->rank);
        if (k < 0) {
            strides[i] = 0;
            continue;
        }
        strides[i] = s->d[k] == 1 ? 0 : st;
        st *= s->d[k];
    }
}

static ftl_status broadcast_shape(const nn_node *n, const value *v, int nv, nn_shape *y) {
    int r = 0;
    for (int k = 0; k < nv; k++)
        if (v[k].shape.rank > r) r = v[k].shape.rank;
    y->rank = r;
    for (int i = 0; i < r; i++) {
        int64_t d = 1;
        for (int k = 0; k < nv; k++) {
            int j = i - (r - v[k].shape.rank);
            int64_t e = j >= 0 ? v[k].shape.d[j] : 1;
            if (e != 1 && d != 1 && e != d) return fail(n, "inputs that do not broadcast");
            if (e != 1) d = e;
        }
        y->d[i] = d;
    }
    return FTL_OK;
}

/* Element i of the output in terms of each input's offset. */
static void offsets(const nn_shape *y, int64_t i, const int64_t (*strides)[NN_MAX_RANK], int nv, int64_t *off) {
    for (int k = 0; k < nv; k++) off[k] = 0;
    for (int a = y->rank - 1; a >= 0; a--) {
        int64_t c = y->d[a] ? i % y->d[a] : 0;
        i = y->d[a] ? i / y->d[a] : 0;
        for (int k = 0; k < nv; k++) off[k] += c * strides[k][a];
    }
}

static ftl_status eval_elementwise(const nn_node *n, const value *v, int nv, nn_dtype *dt, nn_shape *y, void **out,
                                   int64_t *count) {
    FTL_TRY(broadcast_shape(n, v, nv, y));
    FTL_TRY(check_count(n, y, count));
    int64_t strides[3][NN_MAX_RANK];
    for (int k = 0; k < nv; k++) broadcast_strides(&v[k].shape, y->rank, strides[k]);
    const value *a = n->op == NN_OP_WHERE ? &v[1] : &v[0], *b = n->op == NN_OP_WHERE ? &v[2] : &v[nv > 1 ? 1 : 0];
    if (n->op != NN_OP_NOT && n->op != NN_OP_POW && a->dtype != b->dtype) return fail(n, "inputs of different types");
    *dt = n->op == NN_OP_EQUAL || n->op == NN_OP_NOT ? NN_I64 : a->dtype;
    *out = alloc_out(*dt, *count);
    for (int64_t i = 0; i < *count; i++) {
        int64_t off[3];
        offsets(y, i, (const int64_t(*)[NN_MAX_RANK])strides, nv, off);
        if (a->dtype == NN_I64 && n->op != NN_OP_NOT && n->op != NN_OP_WHERE && n->op != NN_OP_POW && n->op != NN_OP_SQRT) {
            int64_t x = ((const int64_t *)v[0].data)[off[0]], z = ((const int64_t *)v[1].data)[off[1]], r = 0;
            switch (n->op) {
            /* two's-complement wrap as ONNX Runtime's int64 kernels (signed overflow is UB in C) */
            case NN_OP_ADD: r = (int64_t)((uint64_t)x + (uint64_t)z); break;
            case NN_OP_SUB: r = (int64_t)((uint64_t)x - (uint64_t)z); break;
            case NN_OP_MUL: r = (int64_t)((uint64_t)x * (uint64_t)z); break;
            case NN_OP_DIV:
            case NN_OP_MOD:
                if (z == 0) return fail(n, "integer division by zero");
                if (z == -1) r = n->op == NN_OP_DIV ? (int64_t)(0 - (uint64_t)x) : 0; /* INT64_MIN / -1 traps */
                else if (n->op == NN_OP_DIV) r = x / z; /* C and ONNX Runtime: truncation */
                else {
                    r = x % z;
                    if (!n->p.fmod && r != 0 && ((r < 0) != (z < 0))) r += z; /* the divisor's sign */
                }
                break;
            case NN_OP_EQUAL: r = x == z; break;
            default: return fail(n, "internal: not an element-wise op");
            }
            ((int64_t *)*out)[i] = r;
            continue;
        }
        double r;
        switch (n->op) {
        case NN_OP_ADD: r = get(&v[0], off[0]) + get(&v[1], off[1]); break;
        case NN_OP_SUB: r = get(&v[0], off[0]) - get(&v[1], off[1]); break;
        case NN_OP_MUL: r = get(&v[0], off[0]) * get(&v[1], off[1]); break;
        case NN_OP_DIV: r = get(&v[0], off[0]) / get(&v[1], off[1]); break;
        case NN_OP_MOD: {
            double x = get(&v[0], off[0]), z = get(&v[1], off[1]);
            if (!n->p.fmod) return fail(n, "a float Mod needs fmod=1");
            r = fmod(x, z);
            break;
        }
        case NN_OP_EQUAL: r = get(&v[0], off[0]) == get(&v[1], off[1]); break;
        case NN_OP_NOT: r = get(&v[0], off[0]) == 0; break;
        case NN_OP_POW: r = pow(get(&v[0], off[0]), get(&v[1], off[1])); break;
        case NN_OP_SQRT: r = sqrt(get(&v[0], off[0])); break;
        case NN_OP_WHERE: r = get(&v[0], off[0]) != 0 ? get(&v[1], off[1]) : get(&v[2], off[2]); break;
        default: return fail(n, "internal: not an element-wise op");
        }
        if (*dt == NN_F32) {
            /* the arithmetic in float, as ONNX Runtime computes it */
            float x = (float)get(&v[0], off[0]), z = nv > 1 ? (float)get(&v[1], off[1]) : 0.0f;
            ((float *)*out)[i] = n->op == NN_OP_ADD ? x + z : n->op == NN_OP_SUB ? x - z : n->op == NN_OP_MUL ? x * z
                               : n->op == NN_OP_DIV ? x / z : n->op == NN_OP_POW ? powf(x, z)
                               : n->op == NN_OP_SQRT ? sqrtf(x) : (float)r;
        }
        else ((int64_t *)*out)[i] = (int64_t)r;
    }
    return FTL_OK;
}

static int64_t slice_len(int64_t b, int64_t e, int64_t s) {
    if (s > 0) return e > b ? (e - b + s - 1) / s : 0;
    return b > e ? (b - e + (-s) - 1) / (-s) : 0;
}

static ftl_status eval_slice(const nn_graph *g, const nn_node *n, const value *x, nn_shape *y, void **out, int64_t *count) {
    int64_t b[NN_MAX_RANK], e[NN_MAX_RANK], s[NN_MAX_RANK];
    FTL_TRY(nn_slice_bounds(g, n, &x->shape, b, e, s));
    *y = x->shape;
    for (int i = 0; i < x->shape.rank; i++) y->d[i] = slice_len(b[i], e[i], s[i]);
    FTL_TRY(check_count(n, y, count));
    *out = alloc_out(x->dtype, *count);
    int64_t in_strides[NN_MAX_RANK], st = 1;
    for (int i = x->shape.rank - 1; i >= 0; i--) in_strides[i] = st, st *= x->shape.d[i];
    for (int64_t i = 0; i < *count; i++) {
        int64_t rem = i, off = 0;
        for (int a = y->rank - 1; a >= 0; a--) {
            int64_t c = rem % y->d[a];
            rem /= y->d[a];
            off += (b[a] + c * s[a]) * in_strides[a];
        }
        put(*out, x->dtype, i, get(x, off));
    }
    return FTL_OK;
}

static ftl_status eval_gather(const nn_node *n, const value *x, const value *idx, nn_shape *y, void **out, int64_t *count) {
    if (idx->dtype != NN_I64) return fail(n, "indices must be integers");
    int r = x->shape.rank, axis = n->p.axis < 0 ? n->p.axis + r : n->p.axis;
    if (axis < 0 || axis >= r) return fail(n, "axis out of range");
    if (r - 1 + idx->shape.rank > NN_MAX_RANK) return fail(n, "the result has too many dimensions");
    y->rank = 0;
    for (int i = 0; i < axis; i++) y->d[y->rank++] = x->shape.d[i];
    for (int i = 0; i < idx->shape.rank; i++) y->d[y->rank++] = idx->shape.d[i];
    for (int i = axis + 1; i < r; i++) y->d[y->rank++] = x->shape.d[i];
    FTL_TRY(check_count(n, y, count));
    int64_t outer = 1, inner = 1, d = x->shape.d[axis];
    for (int i = 0; i < axis; i++) outer *= x->shape.d[i];
    for (int i = axis + 1; i < r; i++) inner *= x->shape.d[i];
    *out = alloc_out(x->dtype, *count);
    int64_t o = 0;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < idx->count; j++) {
            int64_t k = ((const int64_t *)idx->data)[j];
            if (k < 0) k += d;
            if (k < 0 || k >= d) {
                free(*out);
                *out = NULL;
                return fail(n, "an index out of range");
            }
            for (int64_t c = 0; c < inner; c++) put(*out, x->dtype, o++, get(x, (a * d + k) * inner + c));
        }
    return FTL_OK;
}

static ftl_status eval_concat(const nn_graph *g, const nn_node *n, nn_dtype *dt, nn_shape *y, void **out, int64_t *count) {
    const value v0 = value_of(g, n->in[0]);
    int r = v0.shape.rank, axis = n->p.axis < 0 ? n->p.axis + r : n->p.axis;
    if (axis < 0 || axis >= r) return fail(n, "axis out of range");
    *y = v0.shape;
    y->d[axis] = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        value v = value_of(g, n->in[k]);
        if (v.dtype != v0.dtype || v.shape.rank != r) return fail(n, "inputs of different types or ranks");
        for (int i = 0; i < r; i++)
            if (i != axis && v.shape.d[i] != v0.shape.d[i]) return fail(n, "inputs that do not match");
        y->d[axis] += v.shape.d[axis];
    }
    FTL_TRY(check_count(n, y, count));
    *dt = v0.dtype;
    *out = alloc_out(*dt, *count);
    int64_t outer = 1;
    for (int i = 0; i < axis; i++) outer *= y->d[i];
    int64_t o = 0;
    for (int64_t a = 0; a < outer; a++)
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0) continue;
            value v = value_of(g, n->in[k]);
            int64_t block = v.count / (outer ? outer : 1);
            for (int64_t c = 0; c < block; c++) put(*out, *dt, o++, get(&v, a * block + c));
        }
    return FTL_OK;
}

/* ScatterND: a copy of data with the slices named by the last axis of indices replaced by updates. */
static ftl_status eval_scatternd(const nn_node *n, const value *x, const value *idx, const value *upd, nn_shape *y,
                                 void **out, int64_t *count) {
    if (idx->dtype != NN_I64 || idx->shape.rank < 1) return fail(n, "indices must be integers of rank >= 1");
    if (upd->dtype != x->dtype) return fail(n, "updates of another type than the data");
    int q = idx->shape.rank, k = (int)idx->shape.d[q - 1], r = x->shape.rank;
    if (k < 1 || k > r) return fail(n, "the indices' last dimension exceeds the data's rank");
    /* updates must be indices.shape[:-1] + data.shape[k:] */
    if (upd->shape.rank != q - 1 + r - k) return fail(n, "updates of the wrong rank");
    for (int i = 0; i < q - 1; i++)
        if (upd->shape.d[i] != idx->shape.d[i]) return fail(n, "updates that do not match the indices");
    for (int i = k; i < r; i++)
        if (upd->shape.d[q - 1 + i - k] != x->shape.d[i]) return fail(n, "updates that do not match the data");
    *y = x->shape;
    *count = x->count;
    size_t es = x->dtype == NN_F32 ? sizeof(float) : sizeof(int64_t);
    *out = alloc_out(x->dtype, *count);
    memcpy(*out, x->data, (size_t)(*count ? *count : 1) * es);
    int64_t slice = 1;
    for (int i = k; i < r; i++) slice *= x->shape.d[i];
    int64_t tuples = k ? idx->count / k : 0;
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = 0;
        for (int j = 0; j < k; j++) {
            int64_t v = ((const int64_t *)idx->data)[t * k + j], d = x->shape.d[j];
            if (v < 0) v += d;
            if (v < 0 || v >= d) {
                free(*out);
                *out = NULL;
                return fail(n, "an index out of range");
            }
            off = off * d + v;
        }
        memcpy((char *)*out + (size_t)(off * slice) * es, (const char *)upd->data + (size_t)(t * slice) * es,
               (size_t)slice * es);
    }
    return FTL_OK;
}

static ftl_status eval_node(nn_graph *g, nn_node *n, nn_dtype *dt, nn_shape *y, void **out, int64_t *count) {
    value v[3];
    int nv = 0;
    for (int k = 0; k < n->n_in && nv < 3; k++)
        if (n->in[k] >= 0) v[nv++] = value_of(g, n->in[k]);
    *out = NULL;
    switch (n->op) {
    case NN_OP_SHAPE: {
        const nn_shape *s = &g->tensors[n->in[0]].shape;
        int64_t b = n->p.start, e = n->p.end;
        if (b < 0) b += s->rank;
        if (e < 0) e += s->rank;
        b = b < 0 ? 0 : b > s->rank ? s->rank : b;
        e = e < b ? b : e > s->rank ? s->rank : e;
        *dt = NN_I64;
        *y = (nn_shape){.rank = 1, .d = {e - b}};
        *count = e - b;
        *out = alloc_out(NN_I64, *count);
        for (int64_t i = b; i < e; i++) ((int64_t *)*out)[i - b] = s->d[i];
        return FTL_OK;
    }
    case NN_OP_GATHER: *dt = v[0].dtype; return eval_gather(n, &v[0], &v[1], y, out, count);
    case NN_OP_SCATTERND: *dt = v[0].dtype; return eval_scatternd(n, &v[0], &v[1], &v[2], y, out, count);
    case NN_OP_SLICE: *dt = v[0].dtype; return eval_slice(g, n, &v[0], y, out, count);
    case NN_OP_CONCAT: return eval_concat(g, n, dt, y, out, count);
    case NN_OP_CAST: {
        int to = n->p.cast_to; /* FLOAT 1, FLOAT16 10, DOUBLE 11, BFLOAT16 16; STRING 8 */
        if (to == 8) return fail(n, "a cast to string");
        *dt = to == 1 || to == 10 || to == 11 || to == 16 ? NN_F32 : NN_I64;
        *y = v[0].shape;
        *count = v[0].count;
        *out = alloc_out(*dt, *count);
        for (int64_t i = 0; i < *count; i++) {
            double x = get(&v[0], i);
            if (to == 9) x = x != 0; /* BOOL */
            else if (*dt == NN_I64) x = trunc(x);
            put(*out, *dt, i, x);
        }
        return FTL_OK;
    }
    case NN_OP_CONSTANTOFSHAPE: {
        if (v[0].dtype != NN_I64 || v[0].shape.rank != 1 || v[0].count > NN_MAX_RANK)
            return fail(n, "the shape must be a 1-D integer tensor");
        y->rank = (int)v[0].count;
        for (int i = 0; i < y->rank; i++) y->d[i] = ((const int64_t *)v[0].data)[i];
        FTL_TRY(check_count(n, y, count));
        const nn_attr *a = nn_node_attr(n, "value");
        value fillv = {NN_F32, {0}, (const float[]){0.0f}, 1};
        if (a) fillv = value_of(g, a->tensor);
        *dt = fillv.dtype;
        *out = alloc_out(*dt, *count);
        double f = get(&fillv, 0);
        for (int64_t i = 0; i < *count; i++) put(*out, *dt, i, f);
        return FTL_OK;
    }
    case NN_OP_EXPAND: {
        if (v[1].dtype != NN_I64 || v[1].shape.rank != 1 || v[1].count > NN_MAX_RANK)
            return fail(n, "the shape must be a 1-D integer tensor");
        value target = {v[0].dtype, {.rank = (int)v[1].count}, NULL, 0};
        for (int i = 0; i < target.shape.rank; i++) target.shape.d[i] = ((const int64_t *)v[1].data)[i];
        value both[2] = {v[0], target};
        FTL_TRY(broadcast_shape(n, both, 2, y));
        FTL_TRY(check_count(n, y, count));
        int64_t strides[NN_MAX_RANK];
        broadcast_strides(&v[0].shape, y->rank, strides);
        *dt = v[0].dtype;
        *out = alloc_out(*dt, *count);
        for (int64_t i = 0; i < *count; i++) {
            int64_t off;
            offsets(y, i, (const int64_t(*)[NN_MAX_RANK])&strides, 1, &off);
            put(*out, *dt, i, get(&v[0], off));
        }
        return FTL_OK;
    }
    case NN_OP_RANGE: {
        if (v[0].count != 1 || v[1].count != 1 || v[2].count != 1) return fail(n, "needs scalar start, limit and delta");
        double start = get(&v[0], 0), limit = get(&v[1], 0), delta = get(&v[2], 0);
        if (delta == 0) return fail(n, "a delta of 0");
        double c = ceil((limit - start) / delta);
        if (!(c <= (double)FOLD_MAX_ELEMENTS)) return fail(n, "too many elements");
        *count = c > 0 ? (int64_t)c : 0;
        *dt = v[0].dtype;
        *y = (nn_shape){.rank = 1, .d = {*count}};
        *out = alloc_out(*dt, *count);
        for (int64_t i = 0; i < *count; i++) put(*out, *dt, i, *dt == NN_I64 ? (double)(get_i(&v[0], 0) + i * get_i(&v[2], 0)) : start + (double)i * delta);
        return FTL_OK;
    }
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV: case NN_OP_MOD: case NN_OP_EQUAL:
    case NN_OP_WHERE: case NN_OP_NOT: case NN_OP_POW: case NN_OP_SQRT:
        return eval_elementwise(n, v, nv, dt, y, out, count);
    case NN_OP_TRANSPOSE: {
        int r = v[0].shape.rank;
        if (n->p.n_axes >= 0 && n->p.n_axes != r) return fail(n, "perm does not match the input's rank");
        int64_t perm[NN_MAX_RANK];
        bool seen[NN_MAX_RANK] = {0};
        *y = v[0].shape;
        for (int i = 0; i < r; i++) {
            perm[i] = n->p.n_axes < 0 ? r - 1 - i : n->p.axes[i];
            if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]) return fail(n, "perm is not a permutation");
            seen[perm[i]] = true;
            y->d[i] = v[0].shape.d[perm[i]];
        }
        *dt = v[0].dtype;
        *count = v[0].count;
        *out = alloc_out(*dt, *count);
        int64_t in_strides[NN_MAX_RANK], st = 1;
        for (int i = r - 1; i >= 0; i--) in_strides[i] = st, st *= v[0].shape.d[i];
        for (int64_t i = 0; i < *count; i++) {
            int64_t rem = i, off = 0;
            for (int a = r - 1; a >= 0; a--) {
                int64_t c = rem % y->d[a];
                rem /= y->d[a];
                off += c * in_strides[perm[a]];
            }
            put(*out, *dt, i, get(&v[0], off));
        }
        return FTL_OK;
    }
    default: /* re-indexing: the same values in a new shape */
        FTL_TRY(nn_infer_node_shape(g, n, y));
        *dt = v[0].dtype;
        *count = v[0].count;
        *out = alloc_out(*dt, *count);
        memcpy(*out, v[0].data, (size_t)(*count ? *count : 1) * (*dt == NN_F32 ? sizeof(float) : sizeof(int64_t)));
        return FTL_OK;
    }
}

ftl_status nn_fold_eval(nn_graph *g, nn_node *n) {
    nn_dtype dt = NN_I64;
    nn_shape y = {0};
    void *data = NULL;
    int64_t count = 0;
    ftl_status st = eval_node(g, n, &dt, &y, &data, &count);
    if (st != FTL_OK) {
        free(data);
        return st;
    }
    nn_tensor *t = &g->tensors[n->out[0]];
    size_t bytes = (size_t)(count ? count : 1) * (dt == NN_F32 ? sizeof(float) : sizeof(int64_t));
    if (t->data && t->dtype == dt && t->count == count && memcmp(t->data, data, bytes) == 0) {
        free(data); /* unchanged: plans keep pointing at the same bytes */
        t->shape = y;
    } else {
        if (t->data) {
            if (g->n_retired == g->cap_retired) {
                g->cap_retired = g->cap_retired ? 2 * g->cap_retired : 16;
                g->retired = ftl_xrealloc(g->retired, (size_t)g->cap_retired * sizeof *g->retired);
            }
            g->retired[g->n_retired++] = t->data;
            t->data = NULL;
        }
        nn_tensor_set_data(t, dt, data, &y);
    }
    t->computed = true;
    t->producer = -1;
    return FTL_OK;
}
