/* CPU emitters for normalisations over an axis: LayerNormalization, Softmax and a ReduceMean that is
 * not a spatial pool. */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* LayerNormalization over the last axis: oneDNN's layer normalization with scale and shift; in bf16
 * plans ftl's kernel (nn/layernorm.h), which reads and writes fp32 and bf16 as the neighbours need
 * where oneDNN 2.6's takes one type for both (a conversion per layer norm). FTL_NN_BF16_LAYERNORM=0
 * keeps oneDNN's. */
ftl_status cpu_emit_layernorm(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int v = p->tval[n->in[0]];
    dnnl_memory_desc_t plain;
    cpu_plain_md(&plain, xs, p->vals[v].md.data_type);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    int64_t c = xs->d[xs->rank - 1];
    const float *scale = g->tensors[n->in[1]].data, *shift = NULL;
    if (n->n_in > 2 && n->in[2] >= 0) shift = g->tensors[n->in[2]].data;
    if (p->precision == NN_PREC_BF16 && !p->int8 && c > 0 && cpu_switch_on("FTL_NN_BF16_LAYERNORM")) {
        /* the input as it is (a bf16 conv's output, the fp32 residual stream), the output in bf16 where
         * only bf16 products read it, else fp32 (a residual stream) */
        dnnl_memory_desc_t out_md;
        cpu_plain_md(&out_md, xs, cpu_copy_type(p, g, dnnl_f32, n->out[0]));
        int out = cpu_new_output(p, n->out[0], &out_md);
        cpu_step *st = cpu_host_step(p, CPU_STEP_LAYERNORM, v, out, "ftl:layer_norm", label);
        st->ln_params = ftl_xcalloc(2 * (size_t)c, sizeof *st->ln_params);
        memcpy(st->ln_params, scale, (size_t)c * sizeof *scale);
        if (shift) memcpy(st->ln_params + c, shift, (size_t)c * sizeof *shift);
        st->ln_epsilon = n->p.epsilon;
        return FTL_OK;
    }
    float *zeros = NULL;
    if (!shift) shift = zeros = ftl_xcalloc((size_t)c, sizeof *zeros);
    dnnl_memory_desc_t vec;
    dnnl_dims_t vd = {c};
    dnnl_memory_desc_init_by_tag(&vec, 1, vd, dnnl_f32, dnnl_a);
    int sv, hv;
    ftl_status st = cpu_const_value(p, scale, &vec, &vec, &sv);
    if (st == FTL_OK) st = cpu_const_value(p, shift, &vec, &vec, &hv);
    free(zeros);
    FTL_TRY(st);
    dnnl_layer_normalization_desc_t ld;
    CPU_TRY(dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &plain, NULL, n->p.epsilon,
                                                       dnnl_use_scale | dnnl_use_shift), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &ld, NULL, false, "layer normalization", &pd));
    int out = cpu_new_output(p, n->out[0], &plain);
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST}, vals[4] = {v, sv, hv, out};
    return cpu_emit_prim(p, pd, keys, vals, 4, 3, label);
}

/* Softmax over one axis (oneDNN's accurate softmax: max subtracted, sums in fp32). */
ftl_status cpu_emit_softmax(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    int v = p->tval[n->in[0]];
    dnnl_memory_desc_t plain;
    cpu_plain_md(&plain, shape_of(g, n->in[0]), p->vals[v].md.data_type);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    dnnl_softmax_v2_desc_t sd;
    CPU_TRY(dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, dnnl_softmax_accurate, &plain, &plain,
                                              n->p.axis), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &sd, NULL, false, "softmax", &pd));
    int out = cpu_new_output(p, n->out[0], &plain);
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {v, out};
    return cpu_emit_prim(p, pd, keys, vals, 2, 1, label);
}

/* A mean over any non-batch axes (a layer norm's statistics): oneDNN's reduction on plain layouts. */
ftl_status cpu_emit_reduce_mean(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int v = p->tval[n->in[0]];
    dnnl_data_type_t dt = p->vals[v].md.data_type;
    dnnl_memory_desc_t plain, kept, out_md;
    cpu_plain_md(&plain, xs, dt);
    FTL_TRY(cpu_ensure(p, n->in[0], &plain, &v));
    nn_shape ks = *xs; /* the output with the reduced axes kept as 1s */
    bool red[NN_MAX_RANK] = {0};
    for (int i = 0; i < n->p.n_axes; i++) red[n->p.axes[i] < 0 ? n->p.axes[i] + xs->rank : n->p.axes[i]] = true;
    for (int i = 0; i < xs->rank; i++)
        if (red[i] || n->p.n_axes <= 0) ks.d[i] = 1;
    cpu_plain_md(&kept, &ks, dt);
    dnnl_reduction_desc_t rd;
    CPU_TRY(dnnl_reduction_desc_init(&rd, dnnl_reduction_mean, &plain, &kept, 0.0f, 0.0f), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &rd, n, false, "reduction", &pd));
    int tmp = cpu_new_value(p, &kept, cpu_new_buf(p, 0, p->cur_node));
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {v, tmp};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, 2, 1, label));
    cpu_plain_md(&out_md, shape_of(g, n->out[0]), dt);
    cpu_bind(p, n->out[0], cpu_new_value(p, &out_md, p->vals[tmp].buf));
    return FTL_OK;
}
