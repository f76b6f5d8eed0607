/* The fine-tuning training plan on oneDNN (train_plan.h), its compile: per op, forward steps into
 * p->fwd and backward steps into p->bwd, and the builder they share (steps, scratch, memories, layout
 * adapters, gradient targets); cpu_train_plan.c holds its lifetime and runs. Every activation of the
 * unfrozen part keeps its own fp32 buffer and gradient buffer (view ops share them), plain or in the
 * layout its convolution chose; a backward primitive writes a gradient with one contribution in
 * place, and otherwise into per-step scratch then added into it, so a tensor read by several nodes,
 * or a parameter read twice, sums its contributions. */
#include "nn/cpu/cpu_train_steps.h"
#include "util/alloc.h"
#include "util/error.h"

#include <dnnl_debug.h>
#include <stdlib.h>
#include <string.h>

/* A step labelled with the node being compiled and its work. */
static tp_step *push_labelled(nn_train_plan *p, tp_list *l, const char *work) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->s = ftl_xrealloc(l->s, (size_t)l->cap * sizeof *l->s);
    }
    tp_step *s = &l->s[l->n++];
    memset(s, 0, sizeof *s);
    s->boundary_only = p->marking_boundary_only;
    snprintf(s->what, sizeof s->what, "%.48s: %s", p->node_name ? p->node_name : "?", work);
    return s;
}

static float *new_scratch(nn_train_plan *p, int64_t count) {
    if (p->n_scratch == p->cap_scratch) {
        p->cap_scratch = p->cap_scratch ? 2 * p->cap_scratch : 64;
        p->scratch = ftl_xrealloc(p->scratch, (size_t)p->cap_scratch * sizeof *p->scratch);
    }
    float *f = ftl_xcalloc((size_t)(count ? count : 1), sizeof *f);
    p->scratch[p->n_scratch++] = f;
    return f;
}

static ftl_status mem_of(nn_train_plan *p, const dnnl_memory_desc_t *md, void *data, dnnl_memory_t *m) {
    if (p->n_mems == p->cap_mems) {
        p->cap_mems = p->cap_mems ? 2 * p->cap_mems : 128;
        p->mems = ftl_xrealloc(p->mems, (size_t)p->cap_mems * sizeof *p->mems);
    }
    CPU_TRY(dnnl_memory_create(m, md, p->engine, data ? data : DNNL_MEMORY_NONE), "training plan memory");
    p->mems[p->n_mems++] = *m;
    return FTL_OK;
}

/* A primitive step from pd; args as (key, md, data) triples. */
static ftl_status add_prim(nn_train_plan *p, tp_list *l, dnnl_primitive_desc_t pd, int n, const int *keys,
                           const dnnl_memory_desc_t *const *mds, void *const *data) {
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    dnnl_prop_kind_t prop = dnnl_prop_kind_undef;
    dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
    if (kind != dnnl_reorder) dnnl_primitive_desc_query(pd, dnnl_query_prop_kind, 0, &prop);
    char work[40];
    snprintf(work, sizeof work, "%s%s%s", dnnl_prim_kind2str(kind), prop != dnnl_prop_kind_undef ? " " : "",
             prop != dnnl_prop_kind_undef ? dnnl_prop_kind2str(prop) : "");
    tp_step *s = push_labelled(p, l, work);
    s->kind = TP_PRIM;
    if (kind == dnnl_convolution) s->flops = p->conv_flops;
    dnnl_status_t st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) {
        l->n--;
        return cpu_check(st, "training primitive");
    }
    s->args = ftl_xcalloc((size_t)n, sizeof *s->args);
    s->n_args = n;
    for (int k = 0; k < n; k++) {
        FTL_TRY(mem_of(p, mds[k], data[k], &s->args[k].memory));
        s->args[k].arg = keys[k];
    }
    return FTL_OK;
}

static void add_accum(nn_train_plan *p, tp_list *l, float *src, float *dst, int64_t count) {
    tp_step *s = push_labelled(p, l, "gradient sum");
    s->kind = TP_ACCUM;
    s->src = src;
    s->dst = dst;
    s->count = count;
}

/* One argument of a primitive whose data lives in a plain buffer: when the primitive chose another
 * layout (blocked channels, for speed), a reorder into a scratch buffer of its layout runs before it
 * (inputs) or back into the plain buffer after it (outputs). */
typedef struct tp_io {
    int key;
    dnnl_query_t query;
    int index;
    const dnnl_memory_desc_t *plain;
    void *data;
    bool output;
} tp_io;

static ftl_status push_reorder(nn_train_plan *p, tp_list *l, const dnnl_memory_desc_t *from, void *src,
                               const dnnl_memory_desc_t *to, void *dst) {
    dnnl_primitive_desc_t pd;
    CPU_TRY(dnnl_reorder_primitive_desc_create(&pd, from, p->engine, to, p->engine, NULL), "training reorder");
    int keys[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    const dnnl_memory_desc_t *mds[2] = {from, to};
    void *data[2] = {src, dst};
    return add_prim(p, l, pd, 2, keys, mds, data);
}

typedef struct tp_reordered {
    const void *plain;
    dnnl_memory_desc_t md;
    void *copy;
    bool backward;              /* made by a backward step (at bwd.s[step]), else by a forward one */
    int step;
} tp_reordered;

static void remember_reordered(nn_train_plan *p, const void *plain, const dnnl_memory_desc_t *md, void *copy,
                               bool backward, int step) {
    if (p->n_reordered == p->cap_reordered) {
        p->cap_reordered = p->cap_reordered ? 2 * p->cap_reordered : 16;
        p->reordered = ftl_xrealloc(p->reordered, (size_t)p->cap_reordered * sizeof *p->reordered);
    }
    p->reordered[p->n_reordered++] = (tp_reordered){plain, *md, copy, backward, step};
}

static tp_reordered *reordered_copy(const nn_train_plan *p, const void *plain, const dnnl_memory_desc_t *md, bool backward) {
    for (int i = 0; i < p->n_reordered; i++)
        if (p->reordered[i].backward == backward && p->reordered[i].plain == plain &&
            dnnl_memory_desc_equal(&p->reordered[i].md, md))
            return &p->reordered[i];
    return NULL;
}

/* Adds pd's primitive to l with layout adapters; `reversed`: l runs back to front (the backward
 * list), so what runs after the primitive is pushed first. Takes ownership of pd. */
static ftl_status add_adapted(nn_train_plan *p, tp_list *l, dnnl_primitive_desc_t pd, int n, const tp_io *io,
                              bool reversed) {
    const dnnl_memory_desc_t *mds[TP_MAX_ARGS];
    dnnl_memory_desc_t chosen[TP_MAX_ARGS];
    void *data[TP_MAX_ARGS];
    int keys[TP_MAX_ARGS];
    bool adapt[TP_MAX_ARGS];
    ftl_status st = FTL_OK;
    for (int k = 0; k < n; k++) {
        chosen[k] = *dnnl_primitive_desc_query_md(pd, io[k].query, io[k].index);
        adapt[k] = chosen[k].ndims > 0 && !dnnl_memory_desc_equal(&chosen[k], io[k].plain);
        keys[k] = io[k].key;
        mds[k] = adapt[k] ? &chosen[k] : io[k].plain;
        /* An input already reordered into this layout is read from that copy: a forward one (an
         * activation, a weight: unchanged until the step's backward) by later forward steps and by
         * the backward; a backward one (a gradient, complete before either reads it) by another
         * backward step. In the reversed list the step pushed later runs first: its reorder fills
         * the copy, and the earlier one's is superseded. */
        tp_reordered *done = adapt[k] && !io[k].output ? reordered_copy(p, io[k].data, &chosen[k], false) : NULL;
        if (done) {
            data[k] = done->copy;
            adapt[k] = false;
            continue;
        }
        /* (not from a step that may be skipped: a boundary gradient's) */
        done = adapt[k] && !io[k].output && reversed && !p->marking_boundary_only
                   ? reordered_copy(p, io[k].data, &chosen[k], true) : NULL;
        if (done) {
            data[k] = done->copy;
            l->s[done->step].superseded = true;
            continue; /* its reorder, pushed below, becomes the record's */
        }
        data[k] = adapt[k] ? new_scratch(p, (int64_t)(dnnl_memory_desc_get_size(&chosen[k]) / sizeof(float)) + 1)
                           : io[k].data;
    }
    /* executed: input reorders, the primitive, output reorders (pushed the other way round when
     * the list runs backwards) */
    for (int group = 0; group < 3 && st == FTL_OK; group++) {
        if (group == 1) {
            st = add_prim(p, l, pd, n, keys, mds, data);
            pd = NULL;
            continue;
        }
        bool outputs = (group == 0) == reversed;
        for (int k = 0; k < n && st == FTL_OK; k++) {
            if (!adapt[k] || io[k].output != outputs) continue;
            st = outputs ? push_reorder(p, l, &chosen[k], data[k], io[k].plain, io[k].data)
                         : push_reorder(p, l, io[k].plain, io[k].data, &chosen[k], data[k]);
            if (st != FTL_OK || outputs) continue;
            if (reversed && p->marking_boundary_only) continue;
            tp_reordered *had = reordered_copy(p, io[k].data, &chosen[k], reversed);
            if (had) had->step = l->n - 1; /* the copy is now made by this step (it runs first) */
            else remember_reordered(p, io[k].data, &chosen[k], data[k], reversed, l->n - 1);
        }
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st;
}

static const nn_shape *shape_of(const nn_train_plan *p, int t) { return &p->g->tensors[t].shape; }

static void plain(dnnl_memory_desc_t *md, const nn_shape *s) { cpu_plain_md(md, s, dnnl_f32); }

/* The layout of tensor t's buffers (the view's owner's for a view). */
static void layout_of(const nn_train_plan *p, int t, dnnl_memory_desc_t *md) {
    if (p->layout && p->layout[t].ndims > 0) *md = p->layout[t];
    else plain(md, &p->g->tensors[t].shape);
}

/* Floats of t's buffers in their layout (what a whole-gradient write or sum covers). */
static int64_t floats_of(const nn_train_plan *p, int t) {
    dnnl_memory_desc_t md;
    layout_of(p, t, &md);
    return (int64_t)(dnnl_memory_desc_get_size(&md) / sizeof(float));
}

/* t takes layout md when it may (and its buffers have room); else it stays plain. */
static void choose_layout(nn_train_plan *p, int t, const dnnl_memory_desc_t *md) {
    if (!p->may_block[t] || md->data_type != dnnl_f32 || md->format_kind != dnnl_blocked || md->ndims != 4 ||
        (int64_t)(dnnl_memory_desc_get_size(md) / sizeof(float)) > p->room[t])
        return;
    for (int k = 0; k < md->format_desc.blocking.inner_nblks; k++) /* the pooling loops step over h and w */
        if (md->format_desc.blocking.inner_idxs[k] >= 2) return;
    p->layout[t] = *md;
}

/* The float offset of element idx in a blocked layout (outer strides, then the inner blocks). */
static int64_t offset_in(const dnnl_memory_desc_t *md, const int64_t *idx) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int64_t rest[DNNL_MAX_NDIMS], inner = 0, scale = 1;
    for (int d = 0; d < md->ndims; d++) rest[d] = idx[d];
    for (int k = b->inner_nblks - 1; k >= 0; k--) {
        int d = (int)b->inner_idxs[k];
        inner += rest[d] % b->inner_blks[k] * scale;
        scale *= b->inner_blks[k];
        rest[d] /= b->inner_blks[k];
    }
    int64_t off = md->offset0 + inner;
    for (int d = 0; d < md->ndims; d++) off += rest[d] * b->strides[d];
    return off;
}

/* The data and gradient of input tensor t of a node: an activation of the plan, a trained
 * parameter (gradient in the block), or a fixed constant (no gradient). */
static float *data_of(nn_train_plan *p, int t) {
    if (p->param_of[t] >= 0) return p->params + p->offset[p->param_of[t]];
    if (p->act[t]) return p->act[t];
    return (float *)p->g->tensors[t].data;
}

static float *grad_of(nn_train_plan *p, int t) {
    if (p->param_of[t] >= 0) return p->pgrads + p->offset[p->param_of[t]];
    return p->grad[t];
}

/* Where a backward step that writes the whole gradient of tensor t (count floats) puts it: straight
 * into t's gradient when that is its only contribution, else into scratch then added into it (the
 * sum is pushed now: the backward list runs in reverse, so it runs after the step pushed next). */
static float *gradient_target(nn_train_plan *p, int t, int64_t count) {
    float *g = grad_of(p, t);
    if (!g) return new_scratch(p, count); /* nothing reads it */
    int k = p->param_of[t];
    if ((k >= 0 ? p->param_writers[k] : p->writers[p->root[t]]) == 1) {
        if (k >= 0) p->param_direct[k] = true;
        else p->direct[p->root[t]] = true;
        return g;
    }
    float *d = new_scratch(p, count);
    add_accum(p, &p->bwd, d, g, count);
    return d;
}

ftl_status tp_fail_node(const nn_node *n, const char *why) {
    return ftl_fail(FTL_E_UNSUPPORTED, "node '%s' (%s): fine-tuning cannot train through it: %s", n->name, n->op_type, why);
}

/* ---- per-op compilation: forward step(s) into p->fwd, backward steps into p->bwd (run reversed) ---- */

/* Conv forward, backward data and backward weights, each in the layouts oneDNN prefers (blocked
 * channels: plain NCHW runs its slow gemm-based kernels, 10-30x slower for depthwise and 1x1
 * convolutions), with reorders from and to the plan's plain buffers. */
/* in_type: what the primitives read (src, weights, diff_dst: f32, or bf16 copies made by the
 * reorders from the plain fp32 buffers); what they write (dst, diff_src, diff_weights) stays f32. */
static bool is_boundary(const nn_train_plan *p, int t) {
    for (int k = 0; k < p->tr->n_boundary; k++)
        if (p->tr->boundary[k] == t) return true;
    return false;
}

static ftl_status compile_conv_as(nn_train_plan *p, const nn_node *n, dnnl_data_type_t in_type) {
    const nn_shape *xs = shape_of(p, n->in[0]), *ys = shape_of(p, n->out[0]), *ws = shape_of(p, n->in[1]);
    if (xs->rank != 4) return tp_fail_node(n, "only 2-D convolutions");
    int gr = n->p.group;
    bool bias = n->n_in > 2 && n->in[2] >= 0;
    dnnl_memory_desc_t x, y, w, b, xa, ya, wa, xo, yi;
    layout_of(p, n->in[0], &x);
    dnnl_dims_t xd, yd;
    for (int i = 0; i < 4; i++) xd[i] = xs->d[i], yd[i] = ys->d[i];
    dnnl_memory_desc_init_by_tag(&xa, 4, xd, in_type, dnnl_format_tag_any);  /* src read */
    dnnl_memory_desc_init_by_tag(&xo, 4, xd, dnnl_f32, dnnl_format_tag_any); /* diff_src written */
    dnnl_memory_desc_init_by_tag(&ya, 4, yd, dnnl_f32, dnnl_format_tag_any); /* dst written */
    dnnl_memory_desc_init_by_tag(&yi, 4, yd, in_type, dnnl_format_tag_any);  /* diff_dst read */
    if (gr > 1) {
        dnnl_dims_t wd = {gr, ws->d[0] / gr, ws->d[1], ws->d[2], ws->d[3]};
        dnnl_memory_desc_init_by_tag(&w, 5, wd, dnnl_f32, dnnl_goihw);
        dnnl_memory_desc_init_by_tag(&wa, 5, wd, in_type, dnnl_format_tag_any);
    } else {
        plain(&w, ws);
        dnnl_dims_t wd = {ws->d[0], ws->d[1], ws->d[2], ws->d[3]};
        dnnl_memory_desc_init_by_tag(&wa, 4, wd, in_type, dnnl_format_tag_any);
    }
    dnnl_memory_desc_t wo = wa; /* diff_weights: f32 */
    wo.data_type = dnnl_f32;
    dnnl_dims_t bd = {ws->d[0]}, st = {n->p.stride[0], n->p.stride[1]}, dil = {n->p.dilation[0] - 1, n->p.dilation[1] - 1};
    dnnl_dims_t pl = {n->p.pad_begin[0], n->p.pad_begin[1]}, pr = {n->p.pad_end[0], n->p.pad_end[1]};
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_a);
    /* every primitive descriptor first: when one of them has no kernel for in_type, nothing has
     * been added to the plan yet and the caller can try fp32 */
    bool want_w = p->param_of[n->in[1]] >= 0 || (bias && p->param_of[n->in[2]] >= 0), want_d = p->grad[n->in[0]] != NULL;
    dnnl_convolution_desc_t fd, dd, wdsc;
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    bool ok = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &xa, &wa,
                                                         bias ? &b : NULL, &ya, st, dil, pl, pr) == dnnl_success &&
              dnnl_primitive_desc_create(&fpd, &fd, NULL, p->engine, NULL) == dnnl_success;
    if (ok && want_w)
        ok = dnnl_dilated_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &xa, &wo, bias ? &b : NULL,
                                                                 &yi, st, dil, pl, pr) == dnnl_success &&
             dnnl_primitive_desc_create(&wpd, &wdsc, NULL, p->engine, fpd) == dnnl_success;
    if (ok && want_d)
        ok = dnnl_dilated_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &xo, &wa, &yi, st, dil, pl,
                                                              pr) == dnnl_success &&
             dnnl_primitive_desc_create(&dpd, &dd, NULL, p->engine, fpd) == dnnl_success;
    if (!ok) {
        if (fpd) dnnl_primitive_desc_destroy(fpd);
        if (wpd) dnnl_primitive_desc_destroy(wpd);
        if (dpd) dnnl_primitive_desc_destroy(dpd);
        return ftl_fail(FTL_E_UNSUPPORTED, "node '%s': oneDNN has no %s convolution for training with these shapes",
                        n->name, in_type == dnnl_bf16 ? "bf16" : "fp32");
    }
    /* the output keeps the layout the forward chose, where its readers allow */
    choose_layout(p, n->out[0], dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0));
    layout_of(p, n->out[0], &y);
    float *X = data_of(p, n->in[0]), *W = data_of(p, n->in[1]), *B = bias ? data_of(p, n->in[2]) : NULL;
    float *Y = p->act[n->out[0]], *dY = p->grad[n->out[0]];
    p->conv_flops = 2.0 * (double)nn_shape_count(ys) * (double)(ws->d[1] * ws->d[2] * ws->d[3]); /* each output: C/g x kH x kW MACs */
    /* add_adapted takes ownership of each descriptor it is given */
    tp_io fio[4] = {{DNNL_ARG_SRC, dnnl_query_src_md, 0, &x, X, false},
                    {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0, &w, W, false},
                    {DNNL_ARG_DST, dnnl_query_dst_md, 0, &y, Y, true},
                    {DNNL_ARG_BIAS, dnnl_query_weights_md, 1, &b, B, false}};
    ftl_status s = add_adapted(p, &p->fwd, fpd, bias ? 4 : 3, fio, false);
    /* weights (and bias) gradient, into scratch, then added to the parameter gradients */
    if (wpd && s == FTL_OK) {
        /* the backward list runs in reverse: any accumulations (run last) are pushed first */
        float *dW = gradient_target(p, n->in[1], nn_shape_count(ws)), *dB = bias ? gradient_target(p, n->in[2], ws->d[0]) : NULL;
        tp_io io[4] = {{DNNL_ARG_SRC, dnnl_query_src_md, 0, &x, X, false},
                       {DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0, &y, dY, false},
                       {DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md, 0, &w, dW, true},
                       {DNNL_ARG_DIFF_BIAS, dnnl_query_diff_weights_md, 1, &b, dB, true}};
        s = add_adapted(p, &p->bwd, wpd, bias ? 4 : 3, io, true);
        wpd = NULL;
    }
    /* data gradient (of a boundary tensor: computed only when the caller asks for it) */
    if (dpd && s == FTL_OK) {
        p->marking_boundary_only = is_boundary(p, n->in[0]);
        float *dX = gradient_target(p, n->in[0], floats_of(p, n->in[0]));
        tp_io io[3] = {{DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0, &y, dY, false},
                       {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0, &w, W, false},
                       {DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, 0, &x, dX, true}};
        s = add_adapted(p, &p->bwd, dpd, 3, io, true);
        p->marking_boundary_only = false;
        dpd = NULL;
    }
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    if (dpd) dnnl_primitive_desc_destroy(dpd);
    p->conv_flops = 0;
    return s;
}

/* Convolutions in bf16 where asked and oneDNN has the kernels for all three passes; else fp32 (a
 * failed bf16 attempt has added nothing to the plan). */
static ftl_status compile_conv(nn_train_plan *p, const nn_node *n) {
    if (p->bf16) {
        int fwd = p->fwd.n, bwd = p->bwd.n;
        ftl_status st = compile_conv_as(p, n, dnnl_bf16);
        if (st == FTL_OK) {
            p->bf16_convs++;
            return FTL_OK;
        }
        /* fp32 is tried only when nothing of the bf16 attempt is in the plan (it fails before the first step) */
        if (p->fwd.n != fwd || p->bwd.n != bwd) return st;
        ftl_clear_error();
    }
    return compile_conv_as(p, n, dnnl_f32);
}

static ftl_status compile_batchnorm(nn_train_plan *p, const nn_node *n) {
    const nn_shape *xs = shape_of(p, n->in[0]);
    if (xs->rank < 2) return tp_fail_node(n, "needs a channel axis");
    int64_t c = xs->d[1];
    dnnl_memory_desc_t x, v;
    layout_of(p, n->in[0], &x); /* and the output takes the input's layout */
    choose_layout(p, n->out[0], &x);
    if (p->layout[n->out[0]].ndims == 0) plain(&x, xs); /* both plain unless both may block */
    dnnl_dims_t cd = {c};
    dnnl_memory_desc_init_by_tag(&v, 1, cd, dnnl_f32, dnnl_a);
    /* inference mode: the moving mean and variance are inputs (fixed), scale and shift are trained */
    unsigned flags = dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift;
    dnnl_batch_normalization_desc_t fd, bd;
    CPU_TRY(dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &x, n->p.epsilon, flags), n->name);
    dnnl_primitive_desc_t fpd, bpd, copy;
    CPU_TRY(dnnl_primitive_desc_create(&fpd, &fd, NULL, p->engine, NULL), n->name);
    float *X = data_of(p, n->in[0]), *S = data_of(p, n->in[1]), *T = data_of(p, n->in[2]);
    float *M = data_of(p, n->in[3]), *V = data_of(p, n->in[4]), *Y = p->act[n->out[0]];
    int fkeys[6] = {DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST};
    const dnnl_memory_desc_t *fmds[6] = {&x, &v, &v, &v, &v, &x};
    void *fdata[6] = {X, M, V, S, T, Y};
    ftl_status s = cpu_check(dnnl_primitive_desc_clone(&copy, fpd), n->name);
    if (s == FTL_OK) s = add_prim(p, &p->fwd, copy, 6, fkeys, fmds, fdata);
    if (s == FTL_OK)
        s = cpu_check(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &x, &x, n->p.epsilon, flags), n->name);
    if (s == FTL_OK) s = cpu_check(dnnl_primitive_desc_create(&bpd, &bd, NULL, p->engine, fpd), n->name);
    dnnl_primitive_desc_destroy(fpd);
    if (s != FTL_OK) return s;
    float *dX = gradient_target(p, n->in[0], (int64_t)(dnnl_memory_desc_get_size(&x) / sizeof(float)));
    float *dS = gradient_target(p, n->in[1], c);
    float *dT = gradient_target(p, n->in[2], c);
    int bkeys[9] = {DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DIFF_DST,
                    DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
    const dnnl_memory_desc_t *bmds[9] = {&x, &v, &v, &v, &v, &x, &x, &v, &v};
    void *bdata[9] = {X, M, V, S, T, p->grad[n->out[0]], dX, dS, dT};
    return add_prim(p, &p->bwd, bpd, 9, bkeys, bmds, bdata);
}

static bool eltwise_alg(const nn_act *a, dnnl_alg_kind_t *alg, float *alpha, float *beta) {
    *alpha = 0, *beta = 0;
    switch (a->kind) {
    case NN_ACT_RELU: *alg = dnnl_eltwise_relu; return true;
    case NN_ACT_LEAKYRELU: *alg = dnnl_eltwise_relu, *alpha = a->alpha; return true;
    case NN_ACT_CLIP: *alg = dnnl_eltwise_clip_v2, *alpha = a->alpha, *beta = a->beta; return true;
    case NN_ACT_SIGMOID: *alg = dnnl_eltwise_logistic; return true;
    case NN_ACT_HARDSWISH: *alg = dnnl_eltwise_hardswish; return true;
    case NN_ACT_TANH: *alg = dnnl_eltwise_tanh; return true;
    case NN_ACT_GELU_ERF: *alg = dnnl_eltwise_gelu_erf; return true;
    case NN_ACT_GELU_TANH: *alg = dnnl_eltwise_gelu_tanh; return true;
    case NN_ACT_SILU: *alg = dnnl_eltwise_swish, *alpha = 1.0f; return true;
    default: return false;
    }
}

static ftl_status compile_eltwise(nn_train_plan *p, const nn_node *n) {
    dnnl_alg_kind_t alg;
    float alpha, beta;
    if (!eltwise_alg(&n->p.act, &alg, &alpha, &beta)) return tp_fail_node(n, "no backward for this activation");
    const nn_shape *xs = shape_of(p, n->in[0]);
    dnnl_memory_desc_t x;
    layout_of(p, n->in[0], &x); /* and the output takes the input's layout */
    choose_layout(p, n->out[0], &x);
    if (p->layout[n->out[0]].ndims == 0) plain(&x, xs); /* both plain unless both may block */
    dnnl_eltwise_desc_t fd, bd;
    dnnl_primitive_desc_t fpd, bpd, copy;
    CPU_TRY(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &x, alpha, beta), n->name);
    CPU_TRY(dnnl_primitive_desc_create(&fpd, &fd, NULL, p->engine, NULL), n->name);
    float *X = data_of(p, n->in[0]);
    int fkeys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    const dnnl_memory_desc_t *mds2[2] = {&x, &x};
    void *fdata[2] = {X, p->act[n->out[0]]};
    ftl_status s = cpu_check(dnnl_primitive_desc_clone(&copy, fpd), n->name);
    if (s == FTL_OK) s = add_prim(p, &p->fwd, copy, 2, fkeys, mds2, fdata);
    if (s == FTL_OK && p->grad[n->in[0]]) {
        s = cpu_check(dnnl_eltwise_backward_desc_init(&bd, alg, &x, &x, alpha, beta), n->name);
        if (s == FTL_OK) s = cpu_check(dnnl_primitive_desc_create(&bpd, &bd, NULL, p->engine, fpd), n->name);
        if (s == FTL_OK) {
            float *dX = gradient_target(p, n->in[0], (int64_t)(dnnl_memory_desc_get_size(&x) / sizeof(float)));
            int bkeys[3] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC};
            const dnnl_memory_desc_t *mds3[3] = {&x, &x, &x};
            void *bdata[3] = {X, p->grad[n->out[0]], dX};
            s = add_prim(p, &p->bwd, bpd, 3, bkeys, mds3, bdata);
        }
    }
    dnnl_primitive_desc_destroy(fpd);
    return s;
}

static ftl_status compile_pool(nn_train_plan *p, const nn_node *n) {
    const nn_shape *xs = shape_of(p, n->in[0]), *ys = shape_of(p, n->out[0]);
    if (xs->rank != 4) return tp_fail_node(n, "only 2-D pooling");
    if (n->op == NN_OP_GLOBALAVGPOOL) { /* host loops over the input's layout (oneDNN's is slow on plain NCHW) */
        dnnl_memory_desc_t x;
        layout_of(p, n->in[0], &x);
        int64_t outer = xs->d[0] * xs->d[1];
        int64_t *offsets = ftl_xmalloc((size_t)outer * sizeof *offsets);
        for (int64_t o = 0; o < outer; o++) {
            int64_t idx[4] = {o / xs->d[1], o % xs->d[1], 0, 0};
            offsets[o] = offset_in(&x, idx);
        }
        int64_t at_h[4] = {0, 0, 1, 0}, at_w[4] = {0, 0, 0, 1};
        tp_step *f = push_labelled(p, &p->fwd, "global average");
        f->kind = TP_GLOBAL_AVG;
        f->a = data_of(p, n->in[0]);
        f->dst = p->act[n->out[0]];
        f->outer = outer;
        f->offsets = offsets;
        f->height = xs->d[2], f->width = xs->d[3];
        f->h_stride = xs->d[2] > 1 ? offset_in(&x, at_h) - offsets[0] : 0;
        f->w_stride = xs->d[3] > 1 ? offset_in(&x, at_w) - offsets[0] : 0;
        if (p->grad[n->in[0]]) {
            int64_t floats = (int64_t)(dnnl_memory_desc_get_size(&x) / sizeof(float));
            float *dX = gradient_target(p, n->in[0], floats);
            tp_step *b = push_labelled(p, &p->bwd, "global average backward");
            *b = *f;
            snprintf(b->what, sizeof b->what, "%.48s: global average backward", n->name);
            b->kind = TP_GLOBAL_AVG_BWD;
            b->offsets = ftl_xmalloc((size_t)outer * sizeof *offsets);
            memcpy(b->offsets, offsets, (size_t)outer * sizeof *offsets);
            b->a = p->grad[n->out[0]];
            b->dst = dX;
            b->clear_floats = floats > nn_shape_count(xs) ? floats : 0; /* a padded layout: zeros in the padding */
        }
        return FTL_OK;
    }
    dnnl_dims_t k, st, dil = {0, 0}, pl = {0, 0}, pr = {0, 0};
    dnnl_alg_kind_t alg;
    if (n->op == NN_OP_GLOBALAVGPOOL || n->op == NN_OP_GLOBALMAXPOOL) {
        k[0] = xs->d[2], k[1] = xs->d[3], st[0] = st[1] = 1;
        alg = n->op == NN_OP_GLOBALMAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    } else {
        for (int i = 0; i < 2; i++) {
            k[i] = n->p.kernel[i], st[i] = n->p.stride[i], dil[i] = n->p.dilation[i] - 1, pl[i] = n->p.pad_begin[i];
            int64_t span = (int64_t)n->p.dilation[i] * (n->p.kernel[i] - 1) + 1;
            pr[i] = (ys->d[2 + i] - 1) * n->p.stride[i] + span - xs->d[2 + i] - pl[i]; /* what the output uses */
        }
        alg = n->op == NN_OP_MAXPOOL ? dnnl_pooling_max
              : n->p.count_include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
        for (int i = 0; i < 2; i++) /* ONNX divides such windows by their clipped size, oneDNN by the kernel's */
            if (alg == dnnl_pooling_avg_include_padding && pr[i] > n->p.pad_end[i])
                return tp_fail_node(n, "an average over ceil_mode windows past the padding");
    }
    dnnl_memory_desc_t x, y;
    plain(&x, xs);
    plain(&y, ys);
    dnnl_pooling_v2_desc_t fd, bd;
    dnnl_primitive_desc_t fpd, bpd, copy;
    CPU_TRY(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, alg, &x, &y, st, k, dil, pl, pr), n->name);
    CPU_TRY(dnnl_primitive_desc_create(&fpd, &fd, NULL, p->engine, NULL), n->name);
    const dnnl_memory_desc_t *ws_md = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    dnnl_memory_desc_t ws = *ws_md;
    size_t ws_size = dnnl_memory_desc_get_size(&ws);
    void *WS = ws_size ? new_scratch(p, (int64_t)(ws_size / sizeof(float) + 1)) : NULL;
    int keys[3] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE};
    const dnnl_memory_desc_t *mds[3] = {&x, &y, &ws};
    void *data[3] = {data_of(p, n->in[0]), p->act[n->out[0]], WS};
    ftl_status s = cpu_check(dnnl_primitive_desc_clone(&copy, fpd), n->name);
    if (s == FTL_OK) s = add_prim(p, &p->fwd, copy, WS ? 3 : 2, keys, mds, data);
    if (s == FTL_OK && p->grad[n->in[0]]) {
        s = cpu_check(dnnl_pooling_v2_backward_desc_init(&bd, alg, &x, &y, st, k, dil, pl, pr), n->name);
        if (s == FTL_OK) s = cpu_check(dnnl_primitive_desc_create(&bpd, &bd, NULL, p->engine, fpd), n->name);
        if (s == FTL_OK) {
            float *dX = gradient_target(p, n->in[0], nn_shape_count(xs));
            int bkeys[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_WORKSPACE};
            const dnnl_memory_desc_t *bmds[3] = {&y, &x, &ws};
            void *bdata[3] = {p->grad[n->out[0]], dX, WS};
            s = add_prim(p, &p->bwd, bpd, WS ? 3 : 2, bkeys, bmds, bdata);
        }
    }
    dnnl_primitive_desc_destroy(fpd);
    return s;
}

/* Gemm (transA 0, alpha = beta = 1, C absent or one value per output) and MatMul with a constant
 * [K, O] weight: oneDNN inner products over rows of the flattened input. */
static ftl_status compile_linear(nn_train_plan *p, const nn_node *n) {
    const nn_shape *xs = shape_of(p, n->in[0]), *ws = shape_of(p, n->in[1]);
    bool gemm = n->op == NN_OP_GEMM;
    if (gemm && (n->p.trans_a || n->p.alpha != 1.0f || n->p.beta != 1.0f))
        return tp_fail_node(n, "only transA = 0 and alpha = beta = 1");
    if (ws->rank != 2 || !nn_is_const(p->g, n->in[1])) return tp_fail_node(n, "needs a 2-D constant weight");
    bool trans_b = gemm && n->p.trans_b;
    int64_t kdim = xs->d[xs->rank - 1], outs = trans_b ? ws->d[0] : ws->d[1], rows = nn_shape_count(xs) / kdim;
    bool bias = gemm && n->n_in > 2 && n->in[2] >= 0;
    if (bias && p->g->tensors[n->in[2]].count != outs) return tp_fail_node(n, "C must hold one value per output");
    dnnl_memory_desc_t x, w, b, y;
    dnnl_dims_t xd = {rows, kdim}, wd = {outs, kdim}, bd = {outs}, yd = {rows, outs};
    dnnl_memory_desc_init_by_tag(&x, 2, xd, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&w, 2, wd, dnnl_f32, trans_b ? dnnl_ab : dnnl_ba); /* ONNX B is [O,K] or [K,O] */
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_a);
    dnnl_memory_desc_init_by_tag(&y, 2, yd, dnnl_f32, dnnl_ab);
    dnnl_inner_product_desc_t fd, dd, wdsc;
    dnnl_primitive_desc_t fpd, dpd, wpd, copy;
    CPU_TRY(dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, &x, &w, bias ? &b : NULL, &y), n->name);
    CPU_TRY(dnnl_primitive_desc_create(&fpd, &fd, NULL, p->engine, NULL), n->name);
    float *X = data_of(p, n->in[0]), *W = data_of(p, n->in[1]), *B = bias ? data_of(p, n->in[2]) : NULL;
    int keys[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    const dnnl_memory_desc_t *mds[4] = {&x, &w, &y, &b};
    void *data[4] = {X, W, p->act[n->out[0]], B};
    ftl_status s = cpu_check(dnnl_primitive_desc_clone(&copy, fpd), n->name);
    if (s == FTL_OK) s = add_prim(p, &p->fwd, copy, bias ? 4 : 3, keys, mds, data);
    float *dY = p->grad[n->out[0]];
    if (s == FTL_OK && (p->param_of[n->in[1]] >= 0 || (bias && p->param_of[n->in[2]] >= 0))) {
        s = cpu_check(dnnl_inner_product_backward_weights_desc_init(&wdsc, &x, &w, bias ? &b : NULL, &y), n->name);
        if (s == FTL_OK) s = cpu_check(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, p->engine, fpd), n->name);
        if (s == FTL_OK) {
            float *dW = gradient_target(p, n->in[1], outs * kdim), *dB = bias ? gradient_target(p, n->in[2], outs) : NULL;
            int bkeys[4] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS};
            const dnnl_memory_desc_t *bmds[4] = {&x, &y, &w, &b};
            void *bdata[4] = {X, dY, dW, dB};
            s = add_prim(p, &p->bwd, wpd, bias ? 4 : 3, bkeys, bmds, bdata);
        }
    }
    if (s == FTL_OK && p->grad[n->in[0]]) {
        s = cpu_check(dnnl_inner_product_backward_data_desc_init(&dd, &x, &w, &y), n->name);
        if (s == FTL_OK) s = cpu_check(dnnl_primitive_desc_create(&dpd, &dd, NULL, p->engine, fpd), n->name);
        if (s == FTL_OK) {
            float *dX = gradient_target(p, n->in[0], rows * kdim);
            int bkeys[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
            const dnnl_memory_desc_t *bmds[3] = {&y, &w, &x};
            void *bdata[3] = {dY, W, dX};
            s = add_prim(p, &p->bwd, dpd, 3, bkeys, bmds, bdata);
        }
    }
    dnnl_primitive_desc_destroy(fpd);
    return s;
}

static nn_shape at_rank(const nn_shape *s, int rank) {
    nn_shape r = {.rank = rank};
    int pad = rank - s->rank;
    for (int i = 0; i < rank; i++) r.d[i] = i < pad ? 1 : s->d[i - pad];
    return r;
}

/* Add/Mul where neither operand has the output's shape (both broadcast): element-wise loops. */
static ftl_status compile_binary_loops(nn_train_plan *p, const nn_node *n) {
    const nn_shape *ys = shape_of(p, n->out[0]);
    tp_step *f = push_labelled(p, &p->fwd, "broadcast binary");
    f->kind = TP_BINARY;
    f->mul = n->op == NN_OP_MUL;
    f->ys = *ys;
    f->as = at_rank(shape_of(p, n->in[0]), ys->rank);
    f->bs = at_rank(shape_of(p, n->in[1]), ys->rank);
    f->a = data_of(p, n->in[0]);
    f->b = data_of(p, n->in[1]);
    f->dst = p->act[n->out[0]];
    /* d/da = dy (* b), summed over a's broadcast axes; the same for b */
    for (int k = 0; k < 2; k++) {
        int t = n->in[k];
        float *g = grad_of(p, t);
        if (!g) continue;
        tp_step *s = push_labelled(p, &p->bwd, "broadcast binary backward");
        s->kind = TP_BINARY_BWD;
        s->mul = f->mul;
        s->ys = *ys;
        s->as = k == 0 ? f->as : f->bs;    /* the operand whose gradient this is */
        s->bs = k == 0 ? f->bs : f->as;    /* the other one (its values multiply dy for Mul) */
        s->a = p->grad[n->out[0]];
        s->b = k == 0 ? f->b : f->a;
        s->dst = g;
    }
    return FTL_OK;
}

static bool same_shape(const nn_shape *a, const nn_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

/* A primitive step on plain fp32 buffers of the given shapes. */
static ftl_status add_plain_prim(nn_train_plan *p, tp_list *l, dnnl_primitive_desc_t pd, int n, const int *keys,
                                 const nn_shape *const *shapes, void *const *data) {
    dnnl_memory_desc_t md[TP_MAX_ARGS];
    const dnnl_memory_desc_t *mds[TP_MAX_ARGS];
    for (int k = 0; k < n; k++) {
        plain(&md[k], shapes[k]);
        mds[k] = &md[k];
    }
    return add_prim(p, l, pd, n, keys, mds, data);
}

static ftl_status binary_pd(nn_train_plan *p, dnnl_alg_kind_t alg, const nn_shape *a, const nn_shape *b, const nn_shape *y,
                            const char *name, dnnl_primitive_desc_t *pd) {
    dnnl_memory_desc_t am, bm, ym;
    plain(&am, a), plain(&bm, b), plain(&ym, y);
    dnnl_binary_desc_t d;
    CPU_TRY(dnnl_binary_desc_init(&d, alg, &am, &bm, &ym), name);
    CPU_TRY(dnnl_primitive_desc_create(pd, &d, NULL, p->engine, NULL), name);
    return FTL_OK;
}

/* Sum of src (shape from) over the axes where `to` is 1. */
static ftl_status reduce_pd(nn_train_plan *p, const nn_shape *from, const nn_shape *to, const char *name,
                            dnnl_primitive_desc_t *pd) {
    dnnl_memory_desc_t fm, tm;
    plain(&fm, from), plain(&tm, to);
    dnnl_reduction_desc_t d;
    CPU_TRY(dnnl_reduction_desc_init(&d, dnnl_reduction_sum, &fm, &tm, 0.0f, 0.0f), name);
    CPU_TRY(dnnl_primitive_desc_create(pd, &d, NULL, p->engine, NULL), name);
    return FTL_OK;
}

/* Add/Mul with numpy broadcasting on oneDNN: forward a binary primitive (its first source must have
 * the output's shape, so the operands swap when the second one has it: both ops commute). Backward,
 * operand k's gradient is dy (Add) or dy x the other operand (Mul, a binary primitive), summed over
 * k's broadcast axes (a reduction primitive), then added into its gradient. */
static ftl_status compile_binary(nn_train_plan *p, const nn_node *n) {
    const nn_shape *ys = shape_of(p, n->out[0]);
    nn_shape sh[2] = {at_rank(shape_of(p, n->in[0]), ys->rank), at_rank(shape_of(p, n->in[1]), ys->rank)};
    int full = same_shape(&sh[0], ys) ? 0 : same_shape(&sh[1], ys) ? 1 : -1;
    if (full < 0) return compile_binary_loops(p, n);
    bool mul = n->op == NN_OP_MUL;
    dnnl_alg_kind_t alg = mul ? dnnl_binary_mul : dnnl_binary_add;
    int other = 1 - full;
    float *v[2] = {data_of(p, n->in[0]), data_of(p, n->in[1])};
    dnnl_primitive_desc_t pd;
    FTL_TRY(binary_pd(p, alg, &sh[full], &sh[other], ys, n->name, &pd));
    int keys[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST};
    const nn_shape *shapes[3] = {&sh[full], &sh[other], ys};
    void *data[3] = {v[full], v[other], p->act[n->out[0]]};
    FTL_TRY(add_plain_prim(p, &p->fwd, pd, 3, keys, shapes, data));
    float *dY = p->grad[n->out[0]];
    for (int k = 0; k < 2; k++) {
        float *g = grad_of(p, n->in[k]);
        if (!g) continue;
        int64_t count = nn_shape_count(&sh[k]);
        bool reduce = !same_shape(&sh[k], ys); /* a broadcast operand: sum over its broadcast axes */
        /* what runs, in order: the product (Mul), the reduction (a broadcast operand), the accumulation;
         * pushed the other way round, as the backward list runs back to front */
        float *prod = mul ? new_scratch(p, nn_shape_count(ys)) : dY;
        float *sum = reduce ? new_scratch(p, count) : prod;
        add_accum(p, &p->bwd, sum, g, count);
        if (reduce) {
            FTL_TRY(reduce_pd(p, ys, &sh[k], n->name, &pd));
            int rkeys[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
            const nn_shape *rs[2] = {ys, &sh[k]};
            void *rd[2] = {prod, sum};
            FTL_TRY(add_plain_prim(p, &p->bwd, pd, 2, rkeys, rs, rd));
        }
        if (mul) { /* dy x the other operand, at the output's shape */
            FTL_TRY(binary_pd(p, dnnl_binary_mul, ys, &sh[1 - k], ys, n->name, &pd));
            const nn_shape *ms[3] = {ys, &sh[1 - k], ys};
            void *md[3] = {dY, v[1 - k], prod};
            FTL_TRY(add_plain_prim(p, &p->bwd, pd, 3, keys, ms, md));
        }
    }
    return FTL_OK;
}

/* Concat of more inputs than one oneDNN primitive takes here: copies. */
static ftl_status compile_concat_loops(nn_train_plan *p, const nn_node *n) {
    const nn_shape *ys = shape_of(p, n->out[0]);
    int axis = n->p.axis < 0 ? n->p.axis + ys->rank : n->p.axis;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= ys->d[i];
    for (int i = axis + 1; i < ys->rank; i++) inner *= ys->d[i];
    int64_t at = 0, stride = ys->d[axis] * inner;
    for (int k = 0; k < n->n_in; k++) {
        int t = n->in[k];
        if (t < 0) continue;
        int64_t chunk = shape_of(p, t)->d[axis] * inner;
        tp_step *f = push_labelled(p, &p->fwd, "concat copy loop");
        f->kind = TP_CONCAT;
        f->a = data_of(p, t);
        f->dst = p->act[n->out[0]];
        f->outer = outer, f->chunk = chunk, f->stride = stride, f->offset = at;
        float *g = grad_of(p, t);
        if (g) {
            tp_step *s = push_labelled(p, &p->bwd, "concat backward loop");
            s->kind = TP_SPLIT_BWD;
            s->a = p->grad[n->out[0]];
            s->dst = g;
            s->outer = outer, s->chunk = chunk, s->stride = stride, s->offset = at;
        }
        at += chunk;
    }
    return FTL_OK;
}

/* Concat on oneDNN: forward a concat primitive; backward, each input's slab of dy (a sub-memory of
 * it) reordered into scratch, then added into the input's gradient. */
static ftl_status compile_concat(nn_train_plan *p, const nn_node *n) {
    const nn_shape *ys = shape_of(p, n->out[0]);
    int axis = n->p.axis < 0 ? n->p.axis + ys->rank : n->p.axis, count = 0;
    for (int k = 0; k < n->n_in; k++) count += n->in[k] >= 0;
    if (count + 1 > TP_MAX_CONCAT) return compile_concat_loops(p, n);
    dnnl_memory_desc_t *src = ftl_xcalloc((size_t)count + 1, sizeof *src), y;
    const dnnl_memory_desc_t **mds = ftl_xcalloc((size_t)count + 2, sizeof *mds);
    void **data = ftl_xcalloc((size_t)count + 2, sizeof *data);
    int *keys = ftl_xcalloc((size_t)count + 2, sizeof *keys);
    plain(&y, ys);
    int j = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        plain(&src[j], shape_of(p, n->in[k]));
        mds[j] = &src[j], data[j] = data_of(p, n->in[k]), keys[j] = DNNL_ARG_MULTIPLE_SRC + j;
        j++;
    }
    mds[count] = &y, data[count] = p->act[n->out[0]], keys[count] = DNNL_ARG_DST;
    dnnl_primitive_desc_t pd;
    ftl_status st = cpu_check(dnnl_concat_primitive_desc_create(&pd, &y, count, axis, src, NULL, p->engine), n->name);
    if (st == FTL_OK) st = add_prim(p, &p->fwd, pd, count + 1, keys, mds, data);
    int64_t at = 0;
    for (int k = 0; k < n->n_in && st == FTL_OK; k++) {
        int t = n->in[k];
        if (t < 0) continue;
        const nn_shape *ts = shape_of(p, t);
        float *g = grad_of(p, t);
        if (g) {
            dnnl_dims_t dims, offs = {0};
            for (int i = 0; i < ts->rank; i++) dims[i] = ts->d[i];
            offs[axis] = at;
            dnnl_memory_desc_t slab, to;
            plain(&to, ts);
            float *part = new_scratch(p, nn_shape_count(ts));
            st = cpu_check(dnnl_memory_desc_init_submemory(&slab, &y, dims, offs), n->name);
            add_accum(p, &p->bwd, part, g, nn_shape_count(ts));
            if (st == FTL_OK) st = push_reorder(p, &p->bwd, &slab, p->grad[n->out[0]], &to, part);
        }
        at += ts->d[axis];
    }
    free(src), free(mds), free(data), free(keys);
    return st;
}

bool tp_is_view(nn_op op) {
    return op == NN_OP_RESHAPE || op == NN_OP_FLATTEN || op == NN_OP_SQUEEZE || op == NN_OP_UNSQUEEZE ||
           op == NN_OP_IDENTITY || op == NN_OP_DROPOUT;
}

ftl_status tp_compile_node(nn_train_plan *p, const nn_node *n) {
    switch (n->op) {
    case NN_OP_CONV: return compile_conv(p, n);
    case NN_OP_BATCHNORM: return compile_batchnorm(p, n);
    case NN_OP_RELU: case NN_OP_CLIP: case NN_OP_LEAKYRELU: case NN_OP_SIGMOID: case NN_OP_HARDSWISH: case NN_OP_TANH:
    case NN_OP_GELU: case NN_OP_SILU:
        return compile_eltwise(p, n);
    case NN_OP_MAXPOOL: case NN_OP_AVGPOOL: case NN_OP_GLOBALAVGPOOL: case NN_OP_GLOBALMAXPOOL:
        return compile_pool(p, n);
    case NN_OP_GEMM: case NN_OP_MATMUL: return compile_linear(p, n);
    case NN_OP_ADD: case NN_OP_MUL: return compile_binary(p, n);
    case NN_OP_CONCAT: return compile_concat(p, n);
    default:
        if (tp_is_view(n->op)) return FTL_OK; /* shares its input's buffers (set up in create) */
        return tp_fail_node(n, "no backward for this op yet");
    }
}
