/* CPU emitters for products: Gemm and MatMul with a constant (inner product or matmul, int8 or bf16 where
 * the plan says, with ConvNeXt's layer tail as post-ops), MatMul of two activations and the batched
 * Einsum, both on oneDNN's matmul. */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "nn/ir/quantize.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* MatMul of two activations (attention): oneDNN matmul, leading dimensions broadcast. */
/* A oneDNN matmul of A (layout ma over buffer abuf) by B (mb over bbuf) into the node's output (md):
 * the views let a broadcast batch or a permutation cost no copy. */
static ftl_status emit_matmul_of_views(nn_plan *p, const nn_node *n, const char *label, const dnnl_memory_desc_t *ma,
                                       int abuf, const dnnl_memory_desc_t *mb, int bbuf, const dnnl_memory_desc_t *md) {
    int a = cpu_new_value(p, ma, abuf), b = cpu_new_value(p, mb, bbuf);
    dnnl_matmul_desc_t mm;
    CPU_TRY(dnnl_matmul_desc_init(&mm, ma, mb, NULL, md), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &mm, n, false, "matmul", &pd));
    int out = cpu_new_output(p, n->out[0], md);
    int keys[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, vals[3] = {a, b, out};
    return cpu_emit_prim(p, pd, keys, vals, 3, 2, label);
}

ftl_status cpu_emit_batched_matmul(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *ys = shape_of(g, n->out[0]);
    int va = p->tval[n->in[0]], vb = p->tval[n->in[1]];
    dnnl_data_type_t dt = p->vals[va].md.data_type;
    nn_shape as = expand_rank(shape_of(g, n->in[0]), ys->rank), bs = expand_rank(shape_of(g, n->in[1]), ys->rank);
    dnnl_memory_desc_t pa, pb, ma, mb, md;
    cpu_plain_md(&pa, shape_of(g, n->in[0]), dt);
    cpu_plain_md(&pb, shape_of(g, n->in[1]), dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &pa, &va));
    FTL_TRY(cpu_ensure(p, n->in[1], &pb, &vb));
    cpu_plain_md(&ma, &as, dt);
    cpu_plain_md(&mb, &bs, dt);
    cpu_plain_md(&md, ys, dt);
    return emit_matmul_of_views(p, n, label, &ma, p->vals[va].buf, &mb, p->vals[vb].buf, &md);
}

/* Einsum in its batched-matmul form: A and B enter oneDNN's matmul as permuted (strided) views of
 * their plain layouts, so a K^T costs no copy. */
ftl_status cpu_emit_einsum(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    int va = p->tval[n->in[0]], vb = p->tval[n->in[1]], perm_a[NN_MAX_RANK], perm_b[NN_MAX_RANK];
    dnnl_data_type_t dt = p->vals[va].md.data_type;
    dnnl_memory_desc_t pa, pb, ma, mb, md;
    cpu_plain_md(&pa, shape_of(g, n->in[0]), dt);
    cpu_plain_md(&pb, shape_of(g, n->in[1]), dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &pa, &va));
    FTL_TRY(cpu_ensure(p, n->in[1], &pb, &vb));
    for (int t = 0; t < n->p.ein_rank; t++) perm_a[t] = n->p.ein_a[t], perm_b[t] = n->p.ein_b[t];
    CPU_TRY(dnnl_memory_desc_permute_axes(&ma, &pa, perm_a), label);
    CPU_TRY(dnnl_memory_desc_permute_axes(&mb, &pb, perm_b), label);
    cpu_plain_md(&md, shape_of(g, n->out[0]), dt);
    return emit_matmul_of_views(p, n, label, &ma, p->vals[va].buf, &mb, p->vals[vb].buf, &md);
}

/* The node that alone reads t (not a graph output, not a summand), at the current micro-batch; -1 else. */
static int sole_reader(const nn_plan *p, const nn_graph *g, int t) {
    int found = nn_graph_sole_reader(g, t, NULL);
    if (found < 0 || cpu_attention_role(p, found) != -1) return -1;
    if (p->node_mb && p->node_mb[found] != p->node_mb[p->cur_node]) return -1;
    return found;
}

/* ConvNeXt's block tail after its second linear layer: y = x + scale * transpose(product), the
 * product [N,H,W,C] permuted to [N,C,H,W], scaled per channel (layer scale) and added to the block's
 * input x. Found, it runs as the product's post-ops (x scale, + x), its three nodes emit nothing. */
typedef struct layer_tail {
    int transpose, mul, add;  /* nodes */
    int residual;             /* tensor x */
    const float *scale;       /* C values */
} layer_tail;

static bool find_layer_tail(const nn_plan *p, const nn_graph *g, const nn_node *n, layer_tail *t) {
    const nn_shape *ys = shape_of(g, n->out[0]);
    if (ys->rank != 4 || has_sum_post(n)) return false;
    int64_t c = ys->d[3];
    t->transpose = sole_reader(p, g, n->out[0]);
    if (t->transpose < 0) return false;
    const nn_node *tr = &g->nodes[t->transpose];
    if (tr->op != NN_OP_TRANSPOSE || tr->p.axes[0] != 0 || tr->p.axes[1] != 3 || tr->p.axes[2] != 1 || tr->p.axes[3] != 2)
        return false;
    t->mul = sole_reader(p, g, tr->out[0]);
    if (t->mul < 0) return false;
    const nn_node *mul = &g->nodes[t->mul];
    if (mul->op != NN_OP_MUL || mul->n_post > 0 || mul->n_in != 2) return false;
    int sc = mul->in[0] == tr->out[0] ? mul->in[1] : mul->in[0];
    const nn_tensor *st = &g->tensors[sc];
    if (!nn_is_const(g, sc) || st->dtype != NN_F32 || st->count != c) return false;
    nn_shape e = expand_rank(&st->shape, 4); /* [1, C, 1, 1] */
    if (e.d[0] != 1 || e.d[1] != c || e.d[2] != 1 || e.d[3] != 1) return false;
    t->add = sole_reader(p, g, mul->out[0]);
    if (t->add < 0) return false;
    const nn_node *add = &g->nodes[t->add];
    if (add->op != NN_OP_ADD || add->n_post > 0 || add->n_in != 2) return false;
    t->residual = add->in[0] == mul->out[0] ? add->in[1] : add->in[0];
    if (nn_is_const(g, t->residual) || !same_dims(shape_of(g, t->residual), shape_of(g, tr->out[0])) ||
        p->tval[t->residual] < 0)
        return false;
    t->scale = st->data;
    return true;
}

/* Whether the product may write over x's buffer: x has no reader left but the tail's Add, and no node
 * before that Add reads the buffer. */
static bool residual_overwritable(const nn_plan *p, const nn_graph *g, const layer_tail *t, int xv) {
    int b = p->vals[xv].buf;
    if (b < 0 || p->vals[xv].md.offset0 != 0 || p->bufs[b].last_node > t->add) return false;
    for (int i = p->cur_node + 1; i <= t->add; i++) {
        const nn_node *r = &g->nodes[i];
        if (i == t->add) continue;
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] >= 0 && p->tval[r->in[k]] >= 0 && p->vals[p->tval[r->in[k]]].buf == b) return false;
    }
    return true;
}

/* The product's step with its tail (find_layer_tail): the destination starts as x (in the channels-last
 * layout whose bytes are the product's [N*H*W, C] rows), the post-ops scale and add it. */
static ftl_status emit_product_with_tail(nn_plan *p, nn_graph *g, dnnl_primitive_desc_t pd,
                                         const layer_tail *t, int src_v, int wei_v, int bias_v,
                                         const dnnl_memory_desc_t *scale_md, int scale_index, const char *label) {
    const nn_shape *xs4 = shape_of(g, t->residual);
    dnnl_dims_t d4;
    dims_of(xs4, d4);
    dnnl_memory_desc_t x_cl, dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_desc_init_by_tag(&x_cl, 4, d4, dnnl_f32, dnnl_acdb);
    int xv, scale_v, b;
    FTL_TRY(cpu_rebatch(p, t->residual));
    ftl_status st = cpu_ensure(p, t->residual, &x_cl, &xv);
    if (st == FTL_OK) st = cpu_const_value(p, t->scale, scale_md, scale_md, &scale_v);
    if (st == FTL_OK && residual_overwritable(p, g, t, xv) && p->vals[xv].buf != p->vals[src_v].buf) {
        b = p->vals[xv].buf;
    } else if (st == FTL_OK) { /* x is still read: the product starts from a copy of it */
        b = cpu_new_buf(p, 0, p->last_node[g->nodes[t->add].out[0]]);
        st = cpu_emit_reorder(p, xv, cpu_new_value(p, &x_cl, b), label);
    }
    if (st != FTL_OK) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    int dst_v = cpu_new_value(p, &dst_md, b);
    int keys[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_ATTR_MULTIPLE_POST_OP(scale_index) | DNNL_ARG_SRC_1,
                   DNNL_ARG_BIAS};
    int vals[5] = {src_v, wei_v, dst_v, scale_v, bias_v};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, bias_v >= 0 ? 5 : 4, 2, label));
    cpu_bind(p, g->nodes[t->add].out[0], cpu_new_value(p, &x_cl, b));
    cpu_attention_mark_absorbed(p, t->transpose);
    cpu_attention_mark_absorbed(p, t->mul);
    cpu_attention_mark_absorbed(p, t->add);
    return FTL_OK;
}

/* The product's weights as an [outs, k] array (B, transposed unless Gemm's trans_b, times alpha) and
 * *bias its bias times beta (NULL: none). */
static float *linear_weights(const nn_graph *g, const nn_node *n, int64_t k, int64_t outs, bool trans_b, float alpha,
                             float beta, float **bias_out) {
    const float *B = g->tensors[n->in[1]].data;
    float *wt = ftl_xmalloc((size_t)(outs * k) * sizeof *wt); /* [outs, k] */
    for (int64_t o = 0; o < outs; o++)
        for (int64_t i = 0; i < k; i++) wt[o * k + i] = alpha * (trans_b ? B[o * k + i] : B[i * outs + o]);
    float *bias = NULL;
    if (n->n_in > 2 && n->in[2] >= 0) { /* Gemm's C, or the bias the optimiser moved into a MatMul */
        const nn_tensor *ct = &g->tensors[n->in[2]];
        bias = ftl_xmalloc((size_t)outs * sizeof *bias);
        for (int64_t o = 0; o < outs; o++) bias[o] = beta * ((const float *)ct->data)[ct->count == 1 ? 0 : o];
    }
    *bias_out = bias;
    return wt;
}

/* The int8 product's s8 weights and output scales from wt, *bias replaced by the bias over the output
 * scales (a quantized model's weight scales where it gives them). */
static void quantize_linear(const nn_plan *p, const nn_node *n, const nn_tensor *bt, const float *wt, int64_t outs,
                            int64_t k, float **bias, int8_t **qw_out, float **qscales_out) {
    int8_t *qw = ftl_xmalloc((size_t)(outs * k));
    float *qscales = ftl_xmalloc((size_t)outs * sizeof *qscales);
    float *qbias = ftl_xmalloc((size_t)outs * sizeof *qbias), sx = p->int8->scale[n->in[0]];
    if (cpu_int8_has_zero(p->int8)) {
        float *ws = ftl_xmalloc((size_t)outs * sizeof *ws);
        for (int64_t o = 0; o < outs; o++) ws[o] = bt->weight_scale[bt->weight_scale_axis < 0 ? 0 : o];
        nn_quantize_conv_weights_with(wt, outs, k, sx, ws, *bias, qw, qscales, qbias);
        free(ws);
    } else {
        nn_quantize_conv_weights(wt, outs, k, sx, *bias, qw, qscales, qbias);
    }
    free(*bias);
    *bias = qbias;
    *qw_out = qw;
    *qscales_out = qscales;
}

/* The product's output: over the summand's buffer for a residual Add post-op (or a copy of it), else a
 * new buffer; then its step. */
static ftl_status emit_product_output(nn_plan *p, const nn_node *n, dnnl_primitive_desc_t pd, int src_v, int wei_v,
                                      int bias_v, const dnnl_memory_desc_t *dst_md, const dnnl_memory_desc_t *plain_y,
                                      const char *label) {
    ftl_status st = FTL_OK;
    int sum_t = -1;
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == NN_POST_SUM) sum_t = n->post[k].sum_tensor;
    int b = -1;
    if (sum_t >= 0) {
        /* dst += summand (a residual Add): the matmul writes over the summand's buffer, or over a
         * copy of it when the summand is still needed later */
        int sv;
        st = cpu_ensure(p, sum_t, plain_y, &sv);
        if (st == FTL_OK && (!cpu_can_overwrite(p, sv) || p->vals[sv].buf == p->vals[src_v].buf)) {
            b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
            st = cpu_emit_reorder(p, sv, cpu_new_value(p, plain_y, b), label);
        } else if (st == FTL_OK) {
            b = p->vals[sv].buf;
        }
        if (st != FTL_OK) {
            dnnl_primitive_desc_destroy(pd);
            return st;
        }
    } else {
        b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
    }
    int dst_v = cpu_new_value(p, dst_md, b);
    cpu_bind(p, n->out[0], cpu_new_value(p, plain_y, b));
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int vals[4] = {src_v, wei_v, dst_v, bias_v};
    return cpu_emit_prim(p, pd, keys, vals, bias_v >= 0 ? 4 : 3, 2, label);
}

/* Gemm and MatMul with constant B: an inner product over the last axis. */
ftl_status cpu_emit_inner_product(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    const nn_tensor *bt = &g->tensors[n->in[1]];
    bool gemm = n->op == NN_OP_GEMM;
    int64_t k = xs->d[xs->rank - 1], outs = ys->d[ys->rank - 1], rows = nn_shape_count(xs) / k;
    bool trans_b = gemm && n->p.trans_b;
    float alpha = gemm ? n->p.alpha : 1.0f, beta = gemm ? n->p.beta : 1.0f;
    float *bias = NULL, *wt = linear_weights(g, n, k, outs, trans_b, alpha, beta, &bias);
    /* int8: u8/s8 rows times s8 weights per output column, quantized as convolutions' are (a quantized
     * model's: its own integers and scales, when it gives them so), the bias over the output scales */
    const int waxis = nn_int8_linear_out_axis(g, n);
    bool model_weights = bt->weight_scale && (bt->weight_scale_axis == -1 || bt->weight_scale_axis == waxis) &&
                         alpha == 1.0f;
    bool q = cpu_node_int8(p, n) && (!cpu_int8_has_zero(p->int8) || model_weights);
    int8_t *qw = NULL;
    float *qscales = NULL;
    if (q) quantize_linear(p, n, bt, wt, outs, k, &bias, &qw, &qscales);
    /* many rows (a transformer's tokens): oneDNN's matmul, faster there than its inner product
     * (~1.2-1.4x at 394 x 768 x 3072 on AVX-512, bench/transformers); few rows (a CNN head): inner product.
     * A quantized model's source zero point needs the matmul. */
    int zsrc = q ? cpu_int8_zero(p->int8, n->in[0]) : 0;
    bool use_matmul = rows >= 64 || zsrc != 0;
    dnnl_data_type_t dt = q ? int8_type(p, n->in[0]) : cpu_compute_type(p), wdt = q ? dnnl_s8 : dt;
    dnnl_data_type_t wplain = q ? dnnl_s8 : dnnl_f32;
    dnnl_memory_desc_t src_md, wei_any, wei_plain, bias_md, dst_any;
    dnnl_dims_t sd = {rows, k}, wd = {outs, k}, wd_kn = {k, outs}, bd = {outs}, bd2 = {1, outs}, dd = {rows, outs};
    dnnl_memory_desc_init_by_tag(&src_md, 2, sd, dt, dnnl_ab);
    if (use_matmul) { /* weights [k, outs] over the same [outs, k] array */
        dnnl_memory_desc_init_by_tag(&wei_any, 2, wd_kn, wdt, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&wei_plain, 2, wd_kn, wplain, dnnl_ba);
        dnnl_memory_desc_init_by_tag(&bias_md, 2, bd2, dnnl_f32, dnnl_ab);
    } else {
        dnnl_memory_desc_init_by_tag(&wei_any, 2, wd, wdt, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&wei_plain, 2, wd, wplain, dnnl_ab);
        dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    }
    bool bf16_out = dt == dnnl_bf16 && !has_sum_post(n) && cpu_switch_on("FTL_NN_BF16_PRODUCTS") &&
                    cpu_read_as_bf16_only(p, g, n->out[0], 0);
    dnnl_memory_desc_init_by_tag(&dst_any, 2, dd, bf16_out ? dnnl_bf16 : dnnl_f32, dnnl_ab);
    dnnl_inner_product_desc_t ipd;
    dnnl_matmul_desc_t mmd;
    dnnl_status_t s = use_matmul ? dnnl_matmul_desc_init(&mmd, &src_md, &wei_any, bias ? &bias_md : NULL, &dst_any)
                                 : dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_inference, &src_md, &wei_any,
                                                                        bias ? &bias_md : NULL, &dst_any);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    layer_tail tail = {0};
    bool has_tail = !q && use_matmul && dt == dnnl_f32 && find_layer_tail(p, g, n, &tail);
    dnnl_memory_desc_t scale_md;
    dnnl_dims_t scale_dims = {1, outs};
    dnnl_memory_desc_init_by_tag(&scale_md, 2, scale_dims, dnnl_f32, dnnl_ab);
    int scale_index = -1;
    ftl_status st = cpu_check(s, label);
    if (st == FTL_OK)
        st = q          ? cpu_make_attr_int8(n, &attr, qscales, outs, 1.0f, zsrc, 0)
             : has_tail ? cpu_make_attr_scaled_sum(n, &scale_md, &attr, &scale_index)
                        : cpu_make_attr(n, &attr, false);
    if (st == FTL_OK) {
        s = dnnl_primitive_desc_create(&pd, use_matmul ? (const void *)&mmd : (const void *)&ipd, attr, p->engine, NULL);
        dnnl_primitive_attr_destroy(attr);
        if (s != dnnl_success)
            st = ftl_fail_context(cpu_check(s, use_matmul ? "matmul" : "inner product"), "node '%s' (%s)", n->name, n->op_type);
    }
    /* Without AVX-512, oneDNN 2.6's matmul has no fast kernel for the tail's per-channel scale and sum
     * post-ops (measured: ConvNeXt-T's MatMuls 1,000x slower on an AVX2 EPYC, in its reference kernel):
     * then the product runs with the node's own post-ops and the tail as the nodes it is. */
    if (st == FTL_OK && has_tail && cpu_pd_is_reference(pd)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        has_tail = false;
        st = cpu_make_attr(n, &attr, false);
        if (st == FTL_OK) {
            s = dnnl_primitive_desc_create(&pd, &mmd, attr, p->engine, NULL);
            dnnl_primitive_attr_destroy(attr);
            if (s != dnnl_success) st = ftl_fail_context(cpu_check(s, "matmul"), "node '%s' (%s)", n->name, n->op_type);
        }
    }
    int src_v = -1, wei_v = -1, bias_v = -1;
    if (st == FTL_OK) {
        /* the input as a plain [rows, k] matrix of the compute type */
        int v = p->tval[n->in[0]];
        dnnl_memory_desc_t plain;
        cpu_plain_md(&plain, xs, dt);
        st = cpu_ensure(p, n->in[0], &plain, &v);
        if (st == FTL_OK) src_v = cpu_new_value(p, &src_md, p->vals[v].buf);
    }
    if (st == FTL_OK) {
        dnnl_memory_desc_t wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        st = cpu_const_value(p, q ? (const void *)qw : wt, &wei_plain, &wei_md, &wei_v);
    }
    if (st == FTL_OK && bias) st = cpu_const_value(p, bias, &bias_md, &bias_md, &bias_v);
    free(wt);
    free(bias);
    free(qw);
    free(qscales);
    if (st != FTL_OK) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        return st;
    }
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), plain_y;
    cpu_plain_md(&plain_y, ys, bf16_out ? dnnl_bf16 : dnnl_f32);
    if (has_tail) return emit_product_with_tail(p, g, pd, &tail, src_v, wei_v, bias_v, &scale_md, scale_index, label);
    return emit_product_output(p, n, pd, src_v, wei_v, bias_v, &dst_md, &plain_y, label);
}
