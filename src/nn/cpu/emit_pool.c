/* CPU emitter for pooling: max and average pools (ftl's max pool where it beats oneDNN's,
 * kernels/max_pool.c), global pools and a ReduceMean over H and W. */
#include "nn/cpu/emit_common.h"
#include "nn/cpu/emitters.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* ONNX Runtime divides an average window by its size clipped to [-pad_begin, size + pad_end): a
 * ceil_mode overhang past the padding is not counted, while oneDNN's include-padding average divides
 * by the whole kernel. Multiply each output position by kernel area / ONNX divisor, in place. */
static ftl_status avgpool_overhang_fix(nn_plan *p, const nn_node *n, const nn_shape *xs, const nn_shape *ys, int dst,
                                       const char *label) {
    const nn_params *pp = &n->p;
    int64_t oh = ys->d[2], ow = ys->d[3];
    float *f = ftl_xmalloc((size_t)(oh * ow) * sizeof *f);
    for (int64_t y = 0; y < oh; y++)
        for (int64_t x = 0; x < ow; x++) {
            int64_t h0 = y * pp->stride[0] - pp->pad_begin[0], w0 = x * pp->stride[1] - pp->pad_begin[1];
            int64_t h1 = h0 + pp->kernel[0], w1 = w0 + pp->kernel[1];
            if (h1 > xs->d[2] + pp->pad_end[0]) h1 = xs->d[2] + pp->pad_end[0];
            if (w1 > xs->d[3] + pp->pad_end[1]) w1 = xs->d[3] + pp->pad_end[1];
            f[y * ow + x] = (float)((double)pp->kernel[0] * pp->kernel[1] / (double)((h1 - h0) * (w1 - w0)));
        }
    nn_shape fs = {.rank = 4, .d = {1, 1, oh, ow}};
    dnnl_memory_desc_t fmd;
    cpu_plain_md(&fmd, &fs, dnnl_f32);
    int fv;
    ftl_status st = cpu_const_value(p, f, &fmd, &fmd, &fv);
    free(f);
    FTL_TRY(st);
    dnnl_binary_desc_t bd;
    CPU_TRY(dnnl_binary_desc_init(&bd, dnnl_binary_mul, &p->vals[dst].md, &fmd, &p->vals[dst].md), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &bd, NULL, false, "binary", &pd));
    int keys[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST}, vals[3] = {dst, fv, dst};
    return cpu_emit_prim(p, pd, keys, vals, 3, 2, label);
}

/* MaxPool as ftl's loop (kernels/max_pool.c) when src is f32 in a layout it reads; the output in src's
 * layout. *emitted false, nothing done, otherwise. */
static ftl_status emit_ftl_max_pool(nn_plan *p, const nn_node *n, const nn_shape *ys, int src, bool *emitted,
                                    const char *label) {
    *emitted = false;
    const dnnl_memory_desc_t *smd = &p->vals[src].md;
    if (smd->data_type != dnnl_f32 || ys->rank != 4) return FTL_OK;
    dnnl_format_tag_t tag = cpu_image_tag(smd);
    if (tag == dnnl_format_tag_undef) return FTL_OK;
    dnnl_dims_t dd;
    dims_of(ys, dd);
    dd[0] = smd->dims[0]; /* the value's micro-batch */
    dnnl_memory_desc_t dst_md;
    CPU_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, dnnl_f32, tag), label);
    const nn_params *pp = &n->p;
    int64_t kernel[2] = {pp->kernel[0], pp->kernel[1]}, stride[2] = {pp->stride[0], pp->stride[1]};
    int64_t dilation[2] = {pp->dilation[0], pp->dilation[1]}, pad[2] = {pp->pad_begin[0], pp->pad_begin[1]};
    cpu_pool_plan *plan = NULL;
    if (!cpu_pool_plan_make(smd, &dst_md, kernel, stride, dilation, pad, &plan)) return FTL_OK;
    int dst = cpu_new_output(p, n->out[0], &dst_md);
    cpu_host_step(p, CPU_STEP_MAXPOOL, src, dst, "ftl:max_pool", label)->pool = plan;
    *emitted = true;
    return FTL_OK;
}

ftl_status cpu_emit_pool(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int src = p->tval[n->in[0]];
    bool windowed = n->op == NN_OP_MAXPOOL || n->op == NN_OP_AVGPOOL;
    if (windowed && xs->rank == 4 && xs->d[1] > 1 && row_major_md(&p->vals[src].md) && cpu_conv_layout(p) != dnnl_abcd) {
        /* a pool after a convolution that wrote plain NCHW (AlexNet's 3-channel 11x11 conv runs as a
         * GEMM): oneDNN pools plain images with a scalar loop, 30x slower than a reorder and its jit */
        dnnl_memory_desc_t conv_md;
        dnnl_dims_t xd;
        dims_of(xs, xd);
        CPU_TRY(dnnl_memory_desc_init_by_tag(&conv_md, 4, xd, p->vals[src].md.data_type, cpu_conv_layout(p)), label);
        FTL_TRY(cpu_ensure(p, n->in[0], &conv_md, &src));
    }
    dnnl_memory_desc_t src_md = p->vals[src].md, dst_any;
    any_md(&dst_any, ys, src_md.data_type);
    dnnl_dims_t k, st, dil = {0, 0}, pl = {0, 0}, pr = {0, 0};
    dnnl_alg_kind_t alg;
    bool overhang = false; /* ceil_mode window past the explicit padding, with count_include_pad */
    if (n->op == NN_OP_GLOBALAVGPOOL || n->op == NN_OP_GLOBALMAXPOOL || n->op == NN_OP_REDUCEMEAN) {
        k[0] = xs->d[2];
        k[1] = xs->d[3];
        st[0] = st[1] = 1;
        alg = n->op == NN_OP_GLOBALMAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    } else {
        const nn_params *pp = &n->p;
        for (int i = 0; i < 2; i++) {
            k[i] = pp->kernel[i];
            st[i] = pp->stride[i];
            dil[i] = pp->dilation[i] - 1;
            pl[i] = pp->pad_begin[i];
            int64_t span = (int64_t)pp->dilation[i] * (pp->kernel[i] - 1) + 1;
            pr[i] = (ys->d[2 + i] - 1) * pp->stride[i] + span - xs->d[2 + i] - pl[i]; /* incl. ceil_mode overhang */
        }
        if (n->op == NN_OP_MAXPOOL) alg = dnnl_pooling_max;
        else if (!pp->count_include_pad) alg = dnnl_pooling_avg_exclude_padding;
        else {
            alg = dnnl_pooling_avg_include_padding;
            for (int i = 0; i < 2; i++)
                if (pr[i] > pp->pad_end[i]) overhang = true;
        }
    }
    if (n->op == NN_OP_MAXPOOL && cpu_pool_ftl_wanted()) {
        bool emitted = false;
        FTL_TRY(emit_ftl_max_pool(p, n, ys, src, &emitted, label));
        if (emitted) return FTL_OK;
    }
    nn_shape ys4 = *ys;
    if (n->op == NN_OP_REDUCEMEAN && ys->rank != 4) ys4 = (nn_shape){.rank = 4, .d = {xs->d[0], xs->d[1], 1, 1}};
    any_md(&dst_any, &ys4, src_md.data_type);
    dnnl_pooling_v2_desc_t pdsc;
    CPU_TRY(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &src_md, &dst_any, st, k, dil, pl, pr), label);
    dnnl_primitive_desc_t pd;
    FTL_TRY(cpu_node_pd(p, n, &pdsc, NULL, false, "pooling", &pd));
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int dst;
    if (ys4.rank == ys->rank) {
        dst = cpu_new_output(p, n->out[0], &dst_md);
    } else { /* ReduceMean without keepdims: pool to [N,C,1,1], then view as [N,C] */
        int b = cpu_new_buf(p, 0, p->last_node[n->out[0]]);
        dst = cpu_new_value(p, &dst_md, b);
    }
    int keys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST}, vals[2] = {src, dst};
    FTL_TRY(cpu_emit_prim(p, pd, keys, vals, 2, 1, label));
    if (overhang) FTL_TRY(avgpool_overhang_fix(p, n, xs, ys, dst, label));
    if (ys4.rank != ys->rank) {
        dnnl_memory_desc_t plain4, plain;
        cpu_plain_md(&plain4, &ys4, dst_md.data_type);
        int pv = dst;
        if (!dnnl_memory_desc_equal(&plain4, &dst_md)) {
            pv = cpu_new_value(p, &plain4, cpu_new_buf(p, 0, p->last_node[n->out[0]]));
            FTL_TRY(cpu_emit_reorder(p, dst, pv, label));
        }
        cpu_plain_md(&plain, ys, dst_md.data_type);
        cpu_bind(p, n->out[0], cpu_new_value(p, &plain, p->vals[pv].buf));
    }
    return FTL_OK;
}
