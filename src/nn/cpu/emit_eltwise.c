/* CPU emitters for element-wise ops: activations (oneDNN eltwise, or a u8 conversion where only int8
 * convolutions read a ReLU), a quantized model's FakeQuantize, and binary Add/Sub/Mul/Div with
 * broadcasting (oneDNN binary, constants expanded where its broadcast has only a reference kernel). */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static ftl_status eltwise_step(nn_plan *p, const nn_node *n, int src, int dst, dnnl_alg_kind_t alg, float alpha,
                               float beta) {
    char label[96];
    label_of(n, label, sizeof label);
    dnnl_eltwise_desc_t ed;
    CPU_TRY(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &p->vals[src].md, alpha, beta), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &ed, NULL, false, "eltwise", &pd));
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {src, dst};
    return cpu_emit_prim(p, pd, keys, vals, 2, 1, label);
}

ftl_status cpu_emit_activation(nn_plan *p, nn_graph *g, const nn_node *n) {
    (void)g;
    const nn_act *a = &n->p.act;
    int src = p->tval[n->in[0]];
    int y = n->out[0];
    if (a->kind == NN_ACT_RELU && p->int8 && p->int8->written[y] && p->int8->scale[y] > 0 &&
        p->vals[src].md.data_type == dnnl_f32) {
        /* only int8 nodes read it as u8, whose saturation at 0 is the ReLU: one conversion, no ReLU pass */
        dnnl_memory_desc_t md = p->vals[src].md;
        md.data_type = dnnl_u8;
        char label[96];
        label_of(n, label, sizeof label);
        int dst = cpu_new_output(p, y, &md);
        return cpu_emit_quantize(p, src, dst, p->int8->scale[y], cpu_int8_zero(p->int8, y), label);
    }
    int dst = cpu_inplace_output(p, n->out[0], src, &p->vals[src].md);
    switch (a->kind) {
    case NN_ACT_RELU: return eltwise_step(p, n, src, dst, dnnl_eltwise_relu, 0, 0);
    case NN_ACT_LEAKYRELU: return eltwise_step(p, n, src, dst, dnnl_eltwise_relu, a->alpha, 0);
    case NN_ACT_CLIP: return eltwise_step(p, n, src, dst, dnnl_eltwise_clip_v2, a->alpha, a->beta);
    case NN_ACT_SIGMOID: return eltwise_step(p, n, src, dst, dnnl_eltwise_logistic, 0, 0);
    case NN_ACT_HARDSWISH: return eltwise_step(p, n, src, dst, dnnl_eltwise_hardswish, 0, 0);
    case NN_ACT_TANH: return eltwise_step(p, n, src, dst, dnnl_eltwise_tanh, 0, 0);
    case NN_ACT_SQRT: return eltwise_step(p, n, src, dst, dnnl_eltwise_sqrt, 0, 0);
    case NN_ACT_POW: return eltwise_step(p, n, src, dst, dnnl_eltwise_pow, 1.0f, a->alpha);
    case NN_ACT_GELU_ERF: return eltwise_step(p, n, src, dst, dnnl_eltwise_gelu_erf, 0, 0);
    case NN_ACT_GELU_TANH: return eltwise_step(p, n, src, dst, dnnl_eltwise_gelu_tanh, 0, 0);
    case NN_ACT_SILU: return eltwise_step(p, n, src, dst, dnnl_eltwise_swish, 1.0f, 0);
    case NN_ACT_HARDSIGMOID: /* clip(alpha*x + beta, 0, 1): two passes, the second in place */
        FTL_TRY(eltwise_step(p, n, src, dst, dnnl_eltwise_linear, a->alpha, a->beta));
        return eltwise_step(p, n, dst, dst, dnnl_eltwise_clip_v2, 0.0f, 1.0f);
    }
    return ftl_fail(FTL_E_INTERNAL, "activation");
}

/* A quantized model's FakeQuantize: ftl's element-wise loop on the f32 value in its current layout. */
ftl_status cpu_emit_fake_quant_node(nn_plan *p, nn_graph *g, const nn_node *n) {
    (void)g;
    int src = p->tval[n->in[0]];
    dnnl_memory_desc_t md = p->vals[src].md;
    if (md.data_type != dnnl_f32) { /* bf16 plans: quantize the f32 value */
        md.data_type = dnnl_f32;
        FTL_TRY(cpu_ensure(p, n->in[0], &md, &src));
    }
    int dst = cpu_inplace_output(p, n->out[0], src, &md);
    char label[96];
    label_of(n, label, sizeof label);
    cpu_emit_fake_quant(p, src, dst, n->p.q_scale, n->p.q_zero, n->p.q_lo, n->p.q_hi, label);
    return FTL_OK;
}

static dnnl_alg_kind_t binary_alg(nn_op op) {
    switch (op) {
    case NN_OP_SUB: return dnnl_binary_sub;
    case NN_OP_MUL: return dnnl_binary_mul;
    case NN_OP_DIV: return dnnl_binary_div;
    default: return dnnl_binary_add;
    }
}

/* `data` of shape `from` broadcast (numpy rules, same rank) to shape `to`; the caller frees. */
static float *expand_const(const float *data, const nn_shape *from, const nn_shape *to) {
    int64_t total = nn_shape_count(to);
    float *out = ftl_xmalloc((size_t)total * sizeof *out);
    int64_t idx[NN_MAX_RANK] = {0};
    for (int64_t i = 0; i < total; i++) {
        int64_t src = 0;
        for (int a = 0; a < to->rank; a++) src = src * from->d[a] + (from->d[a] == 1 ? 0 : idx[a]);
        out[i] = data[src];
        for (int a = to->rank - 1; a >= 0 && ++idx[a] == to->d[a]; a--) idx[a] = 0;
    }
    return out;
}

/* A per-channel operand (squeeze-and-excitation's [N,C,1,1] gate) onto a channel-blocked image: oneDNN's
 * jit binary wants it blocked the same way, plain it runs the reference kernel (30x slower). True, with
 * *md1 that blocked layout, when oneDNN has a jit kernel for it. */
static bool blocked_gate(nn_plan *p, const nn_node *n, const dnnl_memory_desc_t *md0, const nn_shape *bs,
                         const nn_shape *ys, bool negate, dnnl_memory_desc_t *md1) {
    dnnl_format_tag_t tag = ys->rank == 4 ? cpu_image_tag(md0) : dnnl_format_tag_undef;
    if (tag != dnnl_aBcd8b && tag != dnnl_aBcd16b) return false;
    dnnl_dims_t bd;
    dims_of(bs, bd);
    dnnl_binary_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(md1, 4, bd, md0->data_type, tag) != dnnl_success ||
        dnnl_binary_desc_init(&desc, binary_alg(n->op), md0, md1, md0) != dnnl_success ||
        cpu_node_pd(p, n, &desc, n, negate, "binary", &pd) != FTL_OK)
        return false;
    bool fast = !cpu_pd_is_reference(pd);
    dnnl_primitive_desc_destroy(pd);
    return fast;
}

ftl_status cpu_emit_binary(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *ys = shape_of(g, n->out[0]);
    int a = n->in[0], b = n->in[1];
    nn_shape as = expand_rank(shape_of(g, a), ys->rank), bs = expand_rank(shape_of(g, b), ys->rank);
    bool negate = false;
    /* oneDNN broadcasts only the second source: put the full-shape operand first */
    if (!same_dims(&as, ys) || nn_is_const(g, a)) {
        if (!same_dims(&bs, ys) || nn_is_const(g, b))
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): broadcasting both operands (%s and %s) is not supported",
                            n->name, n->op_type, g->tensors[a].name, g->tensors[b].name);
        if (n->op == NN_OP_DIV)
            return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (Div): dividing a broadcast or constant tensor by a full "
                            "tensor is not supported", n->name);
        int t = a;
        a = b;
        b = t;
        nn_shape ts = as;
        as = bs;
        bs = ts;
        negate = n->op == NN_OP_SUB; /* b - a = -(a - b) */
    }
    int src0 = p->tval[a], src1;
    dnnl_memory_desc_t md0 = p->vals[src0].md, md1;
    if (nn_is_const(g, b)) {
        dnnl_memory_desc_t plain;
        cpu_plain_md(&plain, &bs, dnnl_f32);
        FTL_TRY(cpu_const_value(p, g->tensors[b].data, &plain, &plain, &src1));
    } else if (same_dims(&bs, ys)) {
        FTL_TRY(cpu_ensure(p, b, &md0, &src1));
    } else if (shape_of(g, b)->rank == ys->rank && blocked_gate(p, n, &md0, &bs, ys, negate, &md1)) {
        FTL_TRY(cpu_ensure(p, b, &md1, &src1));
    } else {
        int v = p->tval[b];
        cpu_plain_md(&md1, &bs, p->vals[v].md.data_type);
        if (shape_of(g, b)->rank != ys->rank) {
            dnnl_memory_desc_t plain_b;
            cpu_plain_md(&plain_b, shape_of(g, b), p->vals[v].md.data_type);
            FTL_TRY(cpu_ensure(p, b, &plain_b, &v));
            src1 = cpu_new_value(p, &md1, p->vals[v].buf); /* same bytes, rank padded with 1s */
        } else {
            FTL_TRY(cpu_ensure(p, b, &md1, &src1));
        }
    }
    md1 = p->vals[src1].md;
    dnnl_memory_desc_t dst_md = md0;
    dnnl_binary_desc_t bdsc;
    CPU_TRY(dnnl_binary_desc_init(&bdsc, binary_alg(n->op), &md0, &md1, &dst_md), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &bdsc, n, negate, "binary", &pd));
    if (nn_is_const(g, b) && cpu_pd_is_reference(pd)) {
        /* a broadcast oneDNN has no fast kernel for (Swin's attention mask, [1,W,1,T,T] onto
         * [N,W,H,T,T]): the constant expanded to the whole image, broadcast over the batch only */
        nn_shape full = *ys;
        full.d[0] = bs.d[0];
        if (nn_shape_count(&full) <= ((int64_t)1 << 24)) {
            float *wide = expand_const(g->tensors[b].data, &bs, &full);
            dnnl_memory_desc_t plain;
            cpu_plain_md(&plain, &full, dnnl_f32);
            ftl_status st = cpu_const_value(p, wide, &plain, &plain, &src1);
            free(wide);
            dnnl_primitive_desc_t fast = NULL;
            if (st == FTL_OK) CPU_TRY(dnnl_binary_desc_init(&bdsc, binary_alg(n->op), &md0, &plain, &dst_md), label);
            if (st == FTL_OK) st = cpu_node_pd(p, n, &bdsc, n, negate, "binary", &fast);
            if (st != FTL_OK) {
                dnnl_primitive_desc_destroy(pd);
                return st;
            }
            dnnl_primitive_desc_destroy(pd);
            pd = fast;
        }
    }
    int dst = cpu_inplace_output(p, n->out[0], src0, &dst_md);
    int keys[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, vals[3] = {src0, src1, dst};
    return cpu_emit_prim(p, pd, keys, vals, 3, 2, label);
}
