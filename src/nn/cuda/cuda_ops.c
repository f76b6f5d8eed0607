/* The CUDA backend's emitters, one per op: convolutions on cuDNN (NHWC), Gemm/MatMul on cuBLAS,
 * everything else on ftl's kernels or as free views (see cuda_plan.h). */
#include "nn/cuda/cuda_plan.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void label_of(const nn_node *n, char *buf, size_t size) { snprintf(buf, size, "%s (%s)", n->name, n->op_type); }
static const nn_shape *shape_of(const nn_graph *g, int t) { return &g->tensors[t].shape; }

static cudnnDataType_t cudnn_type(int dtype) { return dtype == KA_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

/* The views of a node's summed post-op inputs, in post-op order. */
static ftl_status sum_views(nn_plan *p, const nn_graph *g, const nn_node *n, int *views) {
    int k = 0;
    for (int i = 0; i < n->n_post; i++)
        if (n->post[i].kind == NN_POST_SUM) FTL_TRY(cu_input_view(p, g, n->post[i].sum_tensor, &views[k++]));
    return FTL_OK;
}

/* Post-ops of a node whose own result is already in `out`: one element-wise pass in place. */
static ftl_status emit_epilogue(nn_plan *p, const nn_graph *g, const nn_node *n, int out, const int *extra, int n_extra,
                                int op, const char *label) {
    if (n->n_post == 0 && n_extra == 0) return FTL_OK;
    int in[KA_MAX_IN] = {out}, sums[KA_MAX_POST];
    for (int k = 0; k < n_extra; k++) in[1 + k] = extra[k];
    FTL_TRY(sum_views(p, g, n, sums));
    return cu_emit_ew(p, label, out, n_extra ? op : KA_COPY, in, 1 + n_extra, n, sums);
}

/* The convolution's input view in `layout`; cuDNN pads symmetrically, so asymmetric padding becomes
 * an explicit zero-padded copy and an unpadded convolution (*ph, *pw: the padding left to cuDNN). */
static ftl_status conv_input(nn_plan *p, const nn_graph *g, const nn_node *n, int layout, const char *label, int *view,
                             int *ph_out, int *pw_out) {
    const nn_shape *xs = shape_of(g, n->in[0]);
    int dt = p->act_dtype, x;
    FTL_TRY(cu_ensure(p, n->in[0], layout, dt, &x));
    int ph = n->p.pad_begin[0], pw = n->p.pad_begin[1];
    if (n->p.pad_end[0] != ph || n->p.pad_end[1] != pw) {
        /* cuDNN pads symmetrically: an explicit zero-padded copy, then an unpadded convolution */
        nn_shape padded = *xs;
        padded.d[2] += n->p.pad_begin[0] + n->p.pad_end[0];
        padded.d[3] += n->p.pad_begin[1] + n->p.pad_end[1];
        int pv;
        FTL_TRY(cu_alloc_view(p, -1, &padded, layout, dt, &pv));
        FTL_TRY(cu_emit_fill(p, label, pv, 0.0f));
        cu_view inner = p->views[pv];
        for (int d = 0; d < 4; d++) inner.dims[d] = xs->d[d];
        inner.ptr += (CUdeviceptr)((ph * inner.strides[2] + pw * inner.strides[3]) * cu_elem_size(dt));
        int iv = cu_new_view(p, &inner);
        FTL_TRY(cu_emit_ew(p, label, iv, KA_COPY, &x, 1, NULL, NULL));
        x = pv;
        ph = pw = 0;
    }
    *view = x, *ph_out = ph, *pw_out = pw;
    return FTL_OK;
}

/* The filter uploaded in the layout's order: KRSC for NHWC (transposed on the host), else KCRS. */
static ftl_status conv_weights(nn_plan *p, nn_graph *g, const nn_node *n, int layout, int *view) {
    const nn_tensor *wt = &g->tensors[n->in[1]];
    int64_t K = wt->shape.d[0], Cg = wt->shape.d[1], R = wt->shape.d[2], S = wt->shape.d[3];
    int dt = p->act_dtype, wv, tw = n->in[1];
    if (layout == CU_LAYOUT_NHWC) { /* OIHW -> OHWI */
        nn_tensor tmp = *wt;
        float *ohwi = ftl_xmalloc((size_t)wt->count * sizeof *ohwi);
        for (int64_t o = 0; o < K; o++)
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t r = 0; r < R; r++)
                    for (int64_t q = 0; q < S; q++)
                        ohwi[((o * R + r) * S + q) * Cg + c] = ((const float *)wt->data)[((o * Cg + c) * R + r) * S + q];
        tmp.data = ohwi;
        nn_tensor saved = g->tensors[tw];
        g->tensors[tw] = tmp;
        ftl_status st = cu_const_view(p, g, tw, dt, &wv);
        g->tensors[tw] = saved;
        free(ohwi);
        FTL_TRY(st);
    } else {
        FTL_TRY(cu_const_view(p, g, tw, dt, &wv));
    }
    *view = wv;
    return FTL_OK;
}

/* The step's cuDNN descriptors (input x, output, filter, convolution with padding ph/pw), checked
 * against the graph's output shape. */
static ftl_status conv_descriptors(nn_plan *p, const nn_graph *g, const nn_node *n, cu_step *s, int x, int layout,
                                   int ph, int pw, const char *label) {
    const cuda_libs *L = p->L;
    const nn_shape *ys = shape_of(g, n->out[0]), *ws = shape_of(g, n->in[1]);
    int64_t K = ws->d[0], Cg = ws->d[1], R = ws->d[2], S = ws->d[3];
    cudnnTensorFormat_t format = layout == CU_LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnDataType_t ct = cudnn_type(p->act_dtype);
    FTL_TRY(cuda_check_cudnn(L->cudnnCreateTensorDescriptor(&s->xd), label));
    FTL_TRY(cuda_check_cudnn(L->cudnnCreateTensorDescriptor(&s->yd), label));
    FTL_TRY(cuda_check_cudnn(L->cudnnCreateFilterDescriptor(&s->wd), label));
    FTL_TRY(cuda_check_cudnn(L->cudnnCreateConvolutionDescriptor(&s->cd), label));
    const cu_view *xv = &p->views[x];
    FTL_TRY(cuda_check_cudnn(L->cudnnSetTensor4dDescriptor(s->xd, format, ct, (int)xv->dims[0], (int)xv->dims[1],
                                                           (int)xv->dims[2], (int)xv->dims[3]),
                             label));
    FTL_TRY(cuda_check_cudnn(L->cudnnSetTensor4dDescriptor(s->yd, format, ct, (int)ys->d[0], (int)ys->d[1], (int)ys->d[2],
                                                           (int)ys->d[3]),
                             label));
    FTL_TRY(cuda_check_cudnn(L->cudnnSetFilter4dDescriptor(s->wd, ct, format, (int)K, (int)Cg, (int)R, (int)S), label));
    FTL_TRY(cuda_check_cudnn(L->cudnnSetConvolution2dDescriptor(s->cd, ph, pw, n->p.stride[0], n->p.stride[1],
                                                                n->p.dilation[0], n->p.dilation[1],
                                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                             label));
    FTL_TRY(cuda_check_cudnn(L->cudnnSetConvolutionGroupCount(s->cd, n->p.group > 0 ? n->p.group : 1), label));
    /* fp32 means fp32: no TF32 tensor cores unless asked for */
    cudnnMathType_t math = p->precision == NN_PREC_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    FTL_TRY(cuda_check_cudnn(L->cudnnSetConvolutionMathType(s->cd, math), label));
    int on, oc, oh, ow;
    FTL_TRY(cuda_check_cudnn(L->cudnnGetConvolution2dForwardOutputDim(s->cd, s->xd, s->wd, &on, &oc, &oh, &ow), label));
    if (on != ys->d[0] || oc != ys->d[1] || oh != ys->d[2] || ow != ys->d[3])
        return ftl_fail(FTL_E_INTERNAL, "%s: cuDNN computes output [%d,%d,%d,%d], the graph [%lld,%lld,%lld,%lld]", label,
                        on, oc, oh, ow, (long long)ys->d[0], (long long)ys->d[1], (long long)ys->d[2],
                        (long long)ys->d[3]);
    return FTL_OK;
}

/* The fastest algorithm for this shape, measured once (deterministic ones only when asked), then
 * run once. */
static ftl_status conv_algorithm(nn_plan *p, cu_step *s, int layout, const char *label) {
    const cuda_libs *L = p->L;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    cudnnStatus_t fs = L->cudnnFindConvolutionForwardAlgorithmEx(p->dnn, s->xd, (void *)s->x, s->wd, (void *)s->w, s->cd,
                                                                 s->yd, (void *)s->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                                                 perf, (void *)p->search_ws, p->search_ws_bytes);
    if (fs != CUDNN_STATUS_SUCCESS) { /* a layout or type it refuses: the other layout may do */
        cuda_check_cudnn(fs, label);
        return ftl_fail(FTL_E_UNSUPPORTED, "%s", ftl_last_error());
    }
    /* Each row was timed with a math type (cuDNN also tries DEFAULT_MATH, which allows TF32): fp32
     * takes FMA rows only; the others run with the row's own math type. */
    int pick = -1;
    for (int i = 0; i < found && pick < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= p->search_ws_bytes &&
            (!p->deterministic || perf[i].determinism == CUDNN_DETERMINISTIC) &&
            (p->precision != NN_PREC_F32 || perf[i].mathType == CUDNN_FMA_MATH))
            pick = i;
    if (pick < 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "cuDNN has no %salgorithm for this convolution in %s",
                        p->deterministic ? "deterministic " : "", layout == CU_LAYOUT_NHWC ? "NHWC" : "NCHW");
    s->algo = perf[pick].algo;
    s->workspace = perf[pick].memory;
    FTL_TRY(cuda_check_cudnn(L->cudnnSetConvolutionMathType(s->cd, perf[pick].mathType), label));
    const float one = 1.0f, zero = 0.0f;
    /* one run now, so that a combination cuDNN refuses at run time shows while there is a way out */
    if (L->cudnnConvolutionForward(p->dnn, &one, s->xd, (void *)s->x, s->wd, (void *)s->w, s->cd, s->algo,
                                   (void *)p->search_ws, s->workspace, &zero, s->yd, (void *)s->y) != CUDNN_STATUS_SUCCESS)
        return ftl_fail(FTL_E_UNSUPPORTED, "cuDNN's algorithm %d does not run this convolution in %s", (int)s->algo,
                        layout == CU_LAYOUT_NHWC ? "NHWC" : "NCHW");
    if (s->workspace > p->workspace_bytes) p->workspace_bytes = s->workspace;
    p->convs++;
    return FTL_OK;
}

/* The bias and post-ops: fused into cuDNN's call where it can (y = relu(conv + z + bias) in fp32),
 * else one element-wise pass over y. */
static ftl_status conv_bias_and_post_ops(nn_plan *p, nn_graph *g, const nn_node *n, cu_step *s, int y, int layout,
                                         const char *label) {
    const cuda_libs *L = p->L;
    int64_t K = shape_of(g, n->in[1])->d[0];
    cudnnTensorFormat_t format = layout == CU_LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    int dt = p->act_dtype;
    const float one = 1.0f;
    int bias = -1;
    if (n->n_in > 2 && n->in[2] >= 0) FTL_TRY(cu_const_view(p, g, n->in[2], KA_F32, &bias));
    /* cuDNN fuses bias, one residual sum and ReLU (y = relu(conv + z + bias)) in fp32 */
    bool relu_last = n->n_post > 0 && n->post[n->n_post - 1].kind == NN_POST_ACT &&
                     n->post[n->n_post - 1].act.kind == NN_ACT_RELU;
    bool fusable = dt == KA_F32 && bias >= 0 && relu_last &&
                   (n->n_post == 1 || (n->n_post == 2 && n->post[0].kind == NN_POST_SUM));
    int zv = -1;
    if (fusable && n->n_post == 2) FTL_TRY(cu_ensure(p, n->post[0].sum_tensor, layout, dt, &zv));
    if (fusable) {
        FTL_TRY(cuda_check_cudnn(L->cudnnCreateTensorDescriptor(&s->bd), label));
        FTL_TRY(cuda_check_cudnn(L->cudnnSetTensor4dDescriptor(s->bd, format, CUDNN_DATA_FLOAT, 1, (int)K, 1, 1), label));
        FTL_TRY(cuda_check_cudnn(L->cudnnCreateActivationDescriptor(&s->ad), label));
        FTL_TRY(cuda_check_cudnn(L->cudnnSetActivationDescriptor(s->ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                                 label));
        s->bias = p->views[bias].ptr;
        s->z = zv >= 0 ? p->views[zv].ptr : s->y;
        s->alpha2 = zv >= 0 ? 1.0f : 0.0f;
        if (L->cudnnConvolutionBiasActivationForward(p->dnn, &one, s->xd, (void *)s->x, s->wd, (void *)s->w, s->cd, s->algo,
                                                     (void *)p->search_ws, s->workspace, &s->alpha2, s->yd, (void *)s->z,
                                                     s->bd, (void *)s->bias, s->ad, s->yd,
                                                     (void *)s->y) == CUDNN_STATUS_SUCCESS) {
            p->fused_convs++;
            snprintf(s->impl, sizeof s->impl, "cudnn conv+bias+%srelu %s algo %d, %zu B workspace", zv >= 0 ? "sum+" : "",
                     layout == CU_LAYOUT_NHWC ? "NHWC" : "NCHW", (int)s->algo, s->workspace);
            return FTL_OK;
        }
        /* this algorithm has no fused form: the convolution alone, then one pass for the rest */
        L->cudnnDestroyActivationDescriptor(s->ad);
        L->cudnnDestroyTensorDescriptor(s->bd);
        s->ad = NULL;
        s->bd = NULL;
    }
    snprintf(s->impl, sizeof s->impl, "cudnn conv %s algo %d, %zu B workspace", layout == CU_LAYOUT_NHWC ? "NHWC" : "NCHW",
             (int)s->algo, s->workspace);
    /* bias as a [C,1,1] broadcast, then the post-ops, in one pass over y */
    int extra[1];
    int n_extra = 0;
    if (bias >= 0) {
        cu_view bv = p->views[bias];
        bv.rank = 3;
        bv.dims[0] = K, bv.dims[1] = 1, bv.dims[2] = 1;
        bv.strides[0] = 1, bv.strides[1] = 1, bv.strides[2] = 1;
        extra[n_extra++] = cu_new_view(p, &bv);
    }
    return emit_epilogue(p, g, n, y, extra, n_extra, KA_ADD, label);
}

/* The convolution in one layout: NHWC (tensor cores; KRSC filters) or plain NCHW (KCRS, the ONNX
 * order). FTL_E_UNSUPPORTED when cuDNN has no algorithm that runs it in that layout. */
static ftl_status conv_in_layout(nn_plan *p, nn_graph *g, const nn_node *n, int layout, const char *label) {
    int x, ph, pw, wv, y;
    FTL_TRY(conv_input(p, g, n, layout, label, &x, &ph, &pw));
    FTL_TRY(conv_weights(p, g, n, layout, &wv));
    FTL_TRY(cu_alloc_view(p, n->out[0], shape_of(g, n->out[0]), layout, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);

    cu_step *s = cu_new_step(p, CU_STEP_CONV, label);
    s->x = p->views[x].ptr;
    s->w = p->views[wv].ptr;
    s->y = p->views[y].ptr;
    FTL_TRY(conv_descriptors(p, g, n, s, x, layout, ph, pw, label));
    FTL_TRY(conv_algorithm(p, s, layout, label));
    return conv_bias_and_post_ops(p, g, n, s, y, layout, label);
}

/* Convolutions run NHWC; where cuDNN has nothing that runs one so (a data type, group count or
 * algorithm it refuses), it runs NCHW instead, which cuDNN covers most widely. */
static ftl_status emit_conv(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    if (shape_of(g, n->in[0])->rank != 4) return ftl_fail(FTL_E_UNSUPPORTED, "only 2-D convolutions run on the GPU");
    int mark = p->n_steps, alts = p->n_alts;
    ftl_status st = conv_in_layout(p, g, n, CU_LAYOUT_NHWC, label);
    if (st != FTL_E_UNSUPPORTED) return st;
    ftl_log_debug("cuda: %s: %s; running it NCHW", label, ftl_last_error());
    ftl_clear_error();
    cu_drop_steps(p, mark); /* the NHWC attempt's steps */
    p->n_alts = alts; /* copies those steps would have made */
    p->tval[n->out[0]] = -1;
    return conv_in_layout(p, g, n, CU_LAYOUT_PLAIN, label);
}

/* The layout an element-wise result takes: NHWC when a same-shaped 4-D input has it. */
static int ew_layout(const nn_plan *p, const nn_graph *g, const nn_node *n) {
    const nn_shape *ys = shape_of(g, n->out[0]);
    for (int k = 0; k < n->n_in; k++) {
        int t = n->in[k];
        if (t < 0 || p->tval[t] < 0) continue;
        const cu_view *v = &p->views[p->tval[t]];
        if (ys->rank == 4 && v->rank == 4 && v->dims[2] == ys->d[2] && v->dims[3] == ys->d[3] && v->dims[1] == ys->d[1] &&
            !cu_view_is(v, CU_LAYOUT_PLAIN) && cu_view_is(v, CU_LAYOUT_NHWC))
            return CU_LAYOUT_NHWC;
    }
    return CU_LAYOUT_PLAIN;
}

static ftl_status emit_elementwise(nn_plan *p, nn_graph *g, const nn_node *n, int op, int n_in) {
    char label[96];
    label_of(n, label, sizeof label);
    int in[KA_MAX_IN], sums[KA_MAX_POST], y;
    for (int k = 0; k < n_in; k++) FTL_TRY(cu_input_view(p, g, n->in[k], &in[k]));
    FTL_TRY(sum_views(p, g, n, sums));
    FTL_TRY(cu_alloc_view(p, n->out[0], shape_of(g, n->out[0]), ew_layout(p, g, n), p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    if (op == KA_COPY) { /* a standalone activation: the node's own act, then its post-ops */
        nn_node as_post = *n;
        as_post.n_post = 0;
        as_post.post[as_post.n_post++] = (nn_postop){.kind = NN_POST_ACT, .act = n->p.act};
        for (int k = 0; k < n->n_post && as_post.n_post < NN_MAX_POSTOPS; k++) as_post.post[as_post.n_post++] = n->post[k];
        return cu_emit_ew(p, label, y, KA_COPY, in, 1, &as_post, sums);
    }
    return cu_emit_ew(p, label, y, op, in, n_in, n, sums);
}

static ftl_status emit_pool(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int x, y;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    if (xs->rank != 4) return ftl_fail(FTL_E_UNSUPPORTED, "only 2-D pooling runs on the GPU");
    FTL_TRY(cu_alloc_view(p, n->out[0], ys, CU_LAYOUT_NHWC, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    const cu_view *xv = &p->views[x];
    cu_step *s = cu_new_step(p, CU_STEP_KERNEL, label);
    bool global = n->op == NN_OP_GLOBALAVGPOOL || n->op == NN_OP_GLOBALMAXPOOL || n->op == NN_OP_REDUCEMEAN;
    if (global) { /* a reduction over H and W for each (n, c) */
        ka_reduce_args *a = &s->args.reduce;
        a->rank = 2;
        a->dims[0] = xs->d[0], a->dims[1] = xs->d[1];
        a->in.ptr = xv->ptr, a->in.dtype = xv->dtype;
        a->in.stride[0] = xv->strides[0], a->in.stride[1] = xv->strides[1];
        a->red_rank = 2;
        a->red_dims[0] = xs->d[2], a->red_dims[1] = xs->d[3];
        a->red_stride[0] = xv->strides[2], a->red_stride[1] = xv->strides[3];
        a->red_count = xs->d[2] * xs->d[3];
        a->total = xs->d[0] * xs->d[1];
        a->is_max = n->op == NN_OP_GLOBALMAXPOOL;
        a->out = p->views[y].ptr, a->out_dtype = p->act_dtype;
        s->fn = p->f_reduce;
        cu_launch_dims(p, a->total, 256, &s->grid, &s->block);
        snprintf(s->impl, sizeof s->impl, "ftl_reduce (%s over %lld)", a->is_max ? "max" : "mean", (long long)a->red_count);
        return FTL_OK;
    }
    ka_pool_args *a = &s->args.pool;
    *a = (ka_pool_args){.n = (int)xs->d[0], .c = (int)xs->d[1], .h = (int)xs->d[2], .w = (int)xs->d[3],
                        .oh = (int)ys->d[2], .ow = (int)ys->d[3], .kh = n->p.kernel[0], .kw = n->p.kernel[1],
                        .sh = n->p.stride[0], .sw = n->p.stride[1],
                        .dh = n->p.dilation[0] > 0 ? n->p.dilation[0] : 1, .dw = n->p.dilation[1] > 0 ? n->p.dilation[1] : 1,
                        .ph = n->p.pad_begin[0], .pw = n->p.pad_begin[1], .peh = n->p.pad_end[0],
                        .pew = n->p.pad_end[1], .is_max = n->op == NN_OP_MAXPOOL,
                        .count_include_pad = n->p.count_include_pad, .out_order = {0, 2, 3, 1},
                        .in = xv->ptr, .out = p->views[y].ptr, .in_dtype = xv->dtype, .out_dtype = p->act_dtype};
    for (int d = 0; d < 4; d++) a->in_stride[d] = xv->strides[d];
    a->total = (int64_t)a->n * a->c * a->oh * a->ow;
    s->fn = p->f_pool;
    cu_launch_dims(p, a->total, 256, &s->grid, &s->block);
    snprintf(s->impl, sizeof s->impl, "ftl_pool (%s %dx%d)", a->is_max ? "max" : "avg", a->kh, a->kw);
    return FTL_OK;
}

/* ReduceMean over any axes: kept axes outermost in the output, reduced ones walked by strides. */
static ftl_status emit_reduce_mean(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int x, y;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    FTL_TRY(cu_alloc_view(p, n->out[0], shape_of(g, n->out[0]), CU_LAYOUT_PLAIN, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    const cu_view *xv = &p->views[x];
    bool reduced[NN_MAX_RANK] = {false};
    if (n->p.n_axes < 0)
        for (int d = 0; d < xs->rank; d++) reduced[d] = true;
    for (int k = 0; k < n->p.n_axes; k++) {
        int64_t ax = n->p.axes[k] < 0 ? n->p.axes[k] + xs->rank : n->p.axes[k];
        if (ax >= 0 && ax < xs->rank) reduced[ax] = true;
    }
    cu_step *s = cu_new_step(p, CU_STEP_KERNEL, label);
    ka_reduce_args *a = &s->args.reduce;
    a->in.ptr = xv->ptr, a->in.dtype = xv->dtype;
    a->total = 1, a->red_count = 1;
    for (int d = 0; d < xs->rank; d++) {
        if (reduced[d]) {
            a->red_dims[a->red_rank] = xs->d[d];
            a->red_stride[a->red_rank++] = xv->strides[d];
            a->red_count *= xs->d[d];
        } else {
            a->dims[a->rank] = xs->d[d];
            a->in.stride[a->rank++] = xv->strides[d];
            a->total *= xs->d[d];
        }
    }
    if (a->rank == 0) a->dims[0] = 1, a->rank = 1;
    a->out = p->views[y].ptr, a->out_dtype = p->act_dtype;
    s->fn = p->f_reduce;
    cu_launch_dims(p, a->total, 256, &s->grid, &s->block);
    snprintf(s->impl, sizeof s->impl, "ftl_reduce (mean over %lld)", (long long)a->red_count);
    return FTL_OK;
}

/* Reshape-like ops: the same bytes, viewed with the output's dims (plain input needed). */
static ftl_status emit_view(nn_plan *p, nn_graph *g, const nn_node *n) {
    int x;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    FTL_TRY(cu_ensure(p, n->in[0], CU_LAYOUT_PLAIN, p->views[x].dtype, &x));
    cu_view v = p->views[x];
    const nn_shape *ys = shape_of(g, n->out[0]);
    v.rank = ys->rank;
    for (int d = 0; d < v.rank; d++) v.dims[d] = ys->d[d];
    cu_layout_strides(CU_LAYOUT_PLAIN, v.rank, v.dims, v.strides);
    cu_bind(p, n->out[0], cu_new_view(p, &v));
    return FTL_OK;
}

static ftl_status emit_transpose(nn_plan *p, nn_graph *g, const nn_node *n) {
    int x;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    cu_view in = p->views[x], v = in;
    for (int d = 0; d < in.rank; d++) {
        int from = n->p.n_axes > 0 ? (int)n->p.axes[d] : in.rank - 1 - d;
        v.dims[d] = in.dims[from];
        v.strides[d] = in.strides[from];
    }
    cu_bind(p, n->out[0], cu_new_view(p, &v));
    return FTL_OK;
}

static ftl_status emit_slice(nn_plan *p, nn_graph *g, const nn_node *n) {
    int x;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    cu_view v = p->views[x];
    const nn_shape *ys = shape_of(g, n->out[0]);
    int64_t first = 0;
    for (int d = 0; d < v.rank; d++) {
        first += n->p.slice_begin[d] * v.strides[d];
        v.strides[d] *= n->p.slice_step[d];
        v.dims[d] = ys->d[d];
    }
    v.ptr += (CUdeviceptr)(first * cu_elem_size(v.dtype));
    cu_bind(p, n->out[0], cu_new_view(p, &v));
    return FTL_OK;
}

static ftl_status emit_gather_one(nn_plan *p, nn_graph *g, const nn_node *n) {
    int x;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    cu_view in = p->views[x], v = in;
    int axis = n->p.axis;
    v.ptr += (CUdeviceptr)(n->p.slice_begin[axis] * in.strides[axis] * cu_elem_size(in.dtype));
    v.rank = 0;
    for (int d = 0; d < in.rank; d++)
        if (d != axis) v.dims[v.rank] = in.dims[d], v.strides[v.rank++] = in.strides[d];
    cu_bind(p, n->out[0], cu_new_view(p, &v));
    return FTL_OK;
}

static ftl_status emit_split(nn_plan *p, nn_graph *g, const nn_node *n) {
    int x;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    int64_t at = 0;
    for (int k = 0; k < n->n_out; k++) {
        cu_view v = p->views[x];
        v.ptr += (CUdeviceptr)(at * v.strides[n->p.axis] * cu_elem_size(v.dtype));
        v.dims[n->p.axis] = n->p.split[k];
        at += n->p.split[k];
        if (n->out[k] >= 0) cu_bind(p, n->out[k], cu_new_view(p, &v));
    }
    (void)g;
    return FTL_OK;
}

static ftl_status emit_concat(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *ys = shape_of(g, n->out[0]);
    int axis = n->p.axis < 0 ? n->p.axis + ys->rank : n->p.axis;
    int layout = ys->rank == 4 && axis == 1 ? ew_layout(p, g, n) : CU_LAYOUT_PLAIN;
    int y;
    FTL_TRY(cu_alloc_view(p, n->out[0], ys, layout, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        int x;
        FTL_TRY(cu_input_view(p, g, n->in[k], &x));
        cu_view part = p->views[y];
        part.ptr += (CUdeviceptr)(at * part.strides[axis] * cu_elem_size(part.dtype));
        part.dims[axis] = p->views[x].dims[axis];
        at += part.dims[axis];
        if (part.dims[axis] == 0) continue;
        int pv = cu_new_view(p, &part);
        FTL_TRY(cu_emit_ew(p, label, pv, KA_COPY, &x, 1, NULL, NULL));
    }
    return FTL_OK;
}

static ftl_status emit_pad(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ys = shape_of(g, n->out[0]);
    int x, y;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    FTL_TRY(cu_alloc_view(p, n->out[0], ys, ew_layout(p, g, n), p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    FTL_TRY(cu_emit_fill(p, label, y, n->p.pad_value));
    cu_view src = p->views[x], dst = p->views[y];
    int r = xs->rank;
    int64_t src_first = 0, dst_first = 0;
    for (int i = 0; i < r; i++) { /* negative pads crop */
        int64_t b = n->p.pads[i], e = n->p.pads[i + r];
        src_first += (b < 0 ? -b : 0) * src.strides[i];
        dst_first += (b > 0 ? b : 0) * dst.strides[i];
        src.dims[i] = dst.dims[i] = xs->d[i] - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
    }
    src.ptr += (CUdeviceptr)(src_first * cu_elem_size(src.dtype));
    dst.ptr += (CUdeviceptr)(dst_first * cu_elem_size(dst.dtype));
    int sv = cu_new_view(p, &src), dv = cu_new_view(p, &dst);
    return cu_emit_ew(p, label, dv, KA_COPY, &sv, 1, NULL, NULL);
}

static ftl_status emit_rows(nn_plan *p, nn_graph *g, const nn_node *n, bool layernorm) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]);
    int x, y;
    FTL_TRY(cu_input_view(p, g, n->in[0], &x));
    FTL_TRY(cu_ensure(p, n->in[0], CU_LAYOUT_PLAIN, p->views[x].dtype, &x));
    FTL_TRY(cu_alloc_view(p, n->out[0], shape_of(g, n->out[0]), CU_LAYOUT_PLAIN, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    int axis = layernorm ? xs->rank - 1 : (n->p.axis < 0 ? n->p.axis + xs->rank : n->p.axis);
    cu_step *s = cu_new_step(p, CU_STEP_KERNEL, label);
    ka_rows_args *a = &s->args.rows;
    a->outer = a->inner = 1;
    for (int d = 0; d < axis; d++) a->outer *= xs->d[d];
    for (int d = axis + 1; d < xs->rank; d++) a->inner *= xs->d[d];
    a->len = xs->d[axis];
    a->in = p->views[x].ptr, a->in_dtype = p->views[x].dtype;
    a->out = p->views[y].ptr, a->out_dtype = p->act_dtype;
    if (layernorm) {
        int sv;
        FTL_TRY(cu_const_view(p, g, n->in[1], KA_F32, &sv));
        a->scale = p->views[sv].ptr;
        if (n->n_in > 2 && n->in[2] >= 0) {
            int hv;
            FTL_TRY(cu_const_view(p, g, n->in[2], KA_F32, &hv));
            a->shift = p->views[hv].ptr;
        }
        a->epsilon = n->p.epsilon;
    }
    s->fn = layernorm ? p->f_layernorm : p->f_softmax;
    cu_launch_dims(p, a->outer * a->inner * 32, 256, &s->grid, &s->block);
    snprintf(s->impl, sizeof s->impl, "%s (%lld rows of %lld)", layernorm ? "ftl_layernorm" : "ftl_softmax",
             (long long)(a->outer * a->inner), (long long)a->len);
    return emit_epilogue(p, g, n, y, NULL, 0, KA_COPY, label);
}

static cublasComputeType_t compute_type(const nn_plan *p) {
    return p->precision == NN_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/* Row-major Y[M,N] = A[M,K] B[K,N] is column-major Y^T = B^T A^T: cuBLAS's A is our B. */
static void gemm_step(nn_plan *p, cu_step *s, CUdeviceptr a, bool trans_a, CUdeviceptr b, bool trans_b, CUdeviceptr y,
                      int64_t M, int64_t N, int64_t K, int batch, int64_t stride_a, int64_t stride_b, float alpha) {
    s->op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    s->op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    s->m = (int)N, s->n = (int)M, s->k = (int)K;
    s->a = b, s->lda = trans_b ? K : N, s->stride_a = stride_b;
    s->b = a, s->ldb = trans_a ? M : K, s->stride_b = stride_a;
    s->c = y, s->ldc = N, s->stride_c = M * N;
    s->batch = batch;
    s->alpha = alpha;
    s->type = p->act_dtype == KA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    s->compute = compute_type(p);
    snprintf(s->impl, sizeof s->impl, "cublas gemm %lldx%lldx%lld%s x%d", (long long)M, (long long)N, (long long)K,
             p->act_dtype == KA_BF16 ? " bf16" : p->precision == NN_PREC_TF32 ? " tf32" : "", batch);
}

/* Gemm, and MatMul by a constant: activations [.., K] times weights, as one GEMM over all rows. */
static ftl_status emit_linear(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *xs = shape_of(g, n->in[0]), *ws = shape_of(g, n->in[1]), *ys = shape_of(g, n->out[0]);
    bool gemm = n->op == NN_OP_GEMM;
    bool ta = gemm && n->p.trans_a, tb = gemm && n->p.trans_b;
    if (ta) return ftl_fail(FTL_E_UNSUPPORTED, "Gemm transA=1 of an activation does not run on the GPU");
    for (int d = 0; d + 2 < ws->rank; d++)
        if (ws->d[d] != 1) return ftl_fail(FTL_E_UNSUPPORTED, "a batched constant MatMul operand does not run on the GPU");
    int64_t K = xs->d[xs->rank - 1], N = ys->d[ys->rank - 1], M = nn_shape_count(xs) / K;
    int x, w, y;
    FTL_TRY(cu_ensure(p, n->in[0], CU_LAYOUT_PLAIN, p->act_dtype, &x));
    FTL_TRY(cu_const_view(p, g, n->in[1], p->act_dtype, &w));
    FTL_TRY(cu_alloc_view(p, n->out[0], ys, CU_LAYOUT_PLAIN, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    cu_step *s = cu_new_step(p, CU_STEP_GEMM, label);
    gemm_step(p, s, p->views[x].ptr, false, p->views[w].ptr, tb, p->views[y].ptr, M, N, K, 1, 0, 0,
              gemm ? n->p.alpha : 1.0f);
    int extra[1], n_extra = 0;
    if (n->n_in > 2 && n->in[2] >= 0) { /* + beta C (Gemm's, or the bias the optimiser moved into a MatMul) */
        const nn_tensor *c = &g->tensors[n->in[2]];
        float beta = gemm ? n->p.beta : 1.0f;
        float *scaled = ftl_xmalloc((size_t)c->count * sizeof *scaled + 4);
        for (int64_t i = 0; i < c->count; i++) scaled[i] = beta * ((const float *)c->data)[i];
        nn_tensor saved = g->tensors[n->in[2]];
        g->tensors[n->in[2]].data = scaled;
        ftl_status st = cu_const_view(p, g, n->in[2], KA_F32, &extra[0]);
        g->tensors[n->in[2]] = saved;
        free(scaled);
        FTL_TRY(st);
        n_extra = 1;
    }
    return emit_epilogue(p, g, n, y, extra, n_extra, KA_ADD, label);
}

/* A copy of matrix operand v ([.., rows, cols]) with the output's batch axes, by broadcasting. */
static ftl_status expand_batch(nn_plan *p, int v, const nn_shape *ys, int64_t rows, int64_t cols, const char *label,
                               int *out) {
    nn_shape s = *ys;
    s.d[s.rank - 2] = rows;
    s.d[s.rank - 1] = cols;
    FTL_TRY(cu_alloc_view(p, -1, &s, CU_LAYOUT_PLAIN, p->views[v].dtype, out));
    return cu_emit_ew(p, label, *out, KA_COPY, &v, 1, NULL, NULL);
}

/* Einsum in its batched-matmul form (ops.c): both operands viewed in canonical axis order
 * ([batch.., i, k] and [batch.., k, j]), made contiguous, multiplied as a strided batch. */
static ftl_status emit_einsum(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *ys = shape_of(g, n->out[0]);
    int r = n->p.ein_rank, ops[2];
    for (int k = 0; k < 2; k++) {
        int x;
        FTL_TRY(cu_input_view(p, g, n->in[k], &x));
        cu_view in = p->views[x], canon = in;
        const int8_t *map = k == 0 ? n->p.ein_a : n->p.ein_b;
        for (int t = 0; t < r; t++) {
            canon.dims[map[t]] = in.dims[t];
            canon.strides[map[t]] = in.strides[t];
        }
        int cv = cu_new_view(p, &canon);
        if (canon.dtype != p->act_dtype || !cu_view_is(&canon, CU_LAYOUT_PLAIN)) {
            nn_shape s = {.rank = r};
            for (int d = 0; d < r; d++) s.d[d] = canon.dims[d];
            int copy;
            FTL_TRY(cu_alloc_view(p, -1, &s, CU_LAYOUT_PLAIN, p->act_dtype, &copy));
            FTL_TRY(cu_emit_ew(p, label, copy, KA_COPY, &cv, 1, NULL, NULL));
            cv = copy;
        }
        ops[k] = cv;
    }
    const cu_view *av = &p->views[ops[0]], *bv = &p->views[ops[1]];
    int64_t M = av->dims[r - 2], K = av->dims[r - 1], N = bv->dims[r - 1], batch = 1;
    for (int d = 0; d < r - 2; d++) {
        if (av->dims[d] != bv->dims[d]) return ftl_fail(FTL_E_UNSUPPORTED, "Einsum with broadcast batch letters");
        batch *= av->dims[d];
    }
    int y;
    FTL_TRY(cu_alloc_view(p, n->out[0], ys, CU_LAYOUT_PLAIN, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    cu_step *s = cu_new_step(p, CU_STEP_GEMM, label);
    gemm_step(p, s, av->ptr, false, bv->ptr, false, p->views[y].ptr, M, N, K, (int)batch, M * K, K * N, 1.0f);
    return emit_epilogue(p, g, n, y, NULL, 0, KA_COPY, label);
}

/* MatMul of two activations ([.., M, K] x [.., K, N], e.g. attention): a strided batch. */
static ftl_status emit_batched_matmul(nn_plan *p, nn_graph *g, const nn_node *n) {
    char label[96];
    label_of(n, label, sizeof label);
    const nn_shape *as = shape_of(g, n->in[0]), *bs = shape_of(g, n->in[1]), *ys = shape_of(g, n->out[0]);
    if (as->rank < 2 || bs->rank < 2) return ftl_fail(FTL_E_UNSUPPORTED, "MatMul of vectors does not run on the GPU");
    int64_t M = as->d[as->rank - 2], K = as->d[as->rank - 1], N = bs->d[bs->rank - 1];
    int64_t batch = nn_shape_count(ys) / (M * N), a_batch = nn_shape_count(as) / (M * K),
            b_batch = nn_shape_count(bs) / (K * N);
    int a, b, y;
    FTL_TRY(cu_ensure(p, n->in[0], CU_LAYOUT_PLAIN, p->act_dtype, &a));
    FTL_TRY(cu_ensure(p, n->in[1], CU_LAYOUT_PLAIN, p->act_dtype, &b));
    /* an operand broadcast along part of the batch axes: copied out to the whole batch first */
    if (a_batch != batch && a_batch != 1) {
        FTL_TRY(expand_batch(p, a, ys, M, K, label, &a));
        a_batch = batch;
    }
    if (b_batch != batch && b_batch != 1) {
        FTL_TRY(expand_batch(p, b, ys, K, N, label, &b));
        b_batch = batch;
    }
    FTL_TRY(cu_alloc_view(p, n->out[0], ys, CU_LAYOUT_PLAIN, p->act_dtype, &y));
    cu_bind(p, n->out[0], y);
    cu_step *s = cu_new_step(p, CU_STEP_GEMM, label);
    gemm_step(p, s, p->views[a].ptr, false, p->views[b].ptr, false, p->views[y].ptr, M, N, K, (int)batch,
              a_batch == 1 ? 0 : M * K, b_batch == 1 ? 0 : K * N, 1.0f);
    return emit_epilogue(p, g, n, y, NULL, 0, KA_COPY, label);
}

ftl_status cu_emit_node(nn_plan *p, nn_graph *g, int node) {
    const nn_node *n = &g->nodes[node];
    switch (n->op) {
    case NN_OP_CONV: return emit_conv(p, g, n);
    case NN_OP_RELU: case NN_OP_CLIP: case NN_OP_LEAKYRELU: case NN_OP_SIGMOID: case NN_OP_HARDSIGMOID:
    case NN_OP_HARDSWISH: case NN_OP_TANH: case NN_OP_SQRT: case NN_OP_POW: case NN_OP_GELU: case NN_OP_SILU:
        return emit_elementwise(p, g, n, KA_COPY, 1);
    case NN_OP_ADD: return emit_elementwise(p, g, n, KA_ADD, 2);
    case NN_OP_SUB: return emit_elementwise(p, g, n, KA_SUB, 2);
    case NN_OP_MUL: return emit_elementwise(p, g, n, KA_MUL, 2);
    case NN_OP_DIV: return emit_elementwise(p, g, n, KA_DIV, 2);
    case NN_OP_MAXPOOL: case NN_OP_AVGPOOL: case NN_OP_GLOBALAVGPOOL: case NN_OP_GLOBALMAXPOOL:
        return emit_pool(p, g, n);
    case NN_OP_REDUCEMEAN: return emit_reduce_mean(p, g, n);
    case NN_OP_FLATTEN: case NN_OP_RESHAPE: case NN_OP_SQUEEZE: case NN_OP_UNSQUEEZE: case NN_OP_IDENTITY:
    case NN_OP_DROPOUT:
        return emit_view(p, g, n);
    case NN_OP_TRANSPOSE: return emit_transpose(p, g, n);
    case NN_OP_SLICE: return emit_slice(p, g, n);
    case NN_OP_GATHER: return emit_gather_one(p, g, n);
    case NN_OP_SPLIT: return emit_split(p, g, n);
    case NN_OP_EINSUM: return emit_einsum(p, g, n);
    case NN_OP_CONCAT: return emit_concat(p, g, n);
    case NN_OP_PAD: return emit_pad(p, g, n);
    case NN_OP_SOFTMAX: return emit_rows(p, g, n, false);
    case NN_OP_LAYERNORM: return emit_rows(p, g, n, true);
    case NN_OP_GEMM: return emit_linear(p, g, n);
    case NN_OP_MATMUL:
        if (nn_is_const(g, n->in[1])) return emit_linear(p, g, n);
        return emit_batched_matmul(p, g, n);
    default:
        return ftl_fail(FTL_E_UNSUPPORTED, "op %s is not on the GPU backend yet (--device cpu runs it)", n->op_type);
    }
}
