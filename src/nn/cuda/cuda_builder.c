/* The CUDA plan's builder, below the op emitters (cuda_ops.c) and the driver (cuda_plan.c), calling
 * neither: tensor placement (views), device memory, constants, steps, and the element-wise and fill
 * steps every emitter uses (see cuda_plan.h). */
#include "nn/cuda/cuda_plan.h"
#include "util/alloc.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

int cu_elem_size(int dtype) { return dtype == KA_BF16 ? 2 : 4; }

void cu_layout_strides(int layout, int rank, const int64_t *d, int64_t *s) {
    if (layout == CU_LAYOUT_NHWC && rank == 4) {
        s[1] = 1;
        s[3] = d[1];
        s[2] = d[3] * d[1];
        s[0] = d[2] * d[3] * d[1];
        return;
    }
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        s[i] = stride;
        stride *= d[i];
    }
}

bool cu_view_is(const cu_view *v, int layout) {
    int64_t want[NN_MAX_RANK];
    cu_layout_strides(layout, v->rank, v->dims, want);
    for (int i = 0; i < v->rank; i++)
        if (v->dims[i] > 1 && v->strides[i] != want[i]) return false;
    return true;
}

int cu_new_view(nn_plan *p, const cu_view *v) {
    if (p->n_views == p->cap_views) {
        p->cap_views = p->cap_views ? 2 * p->cap_views : 256;
        p->views = ftl_xrealloc(p->views, (size_t)p->cap_views * sizeof *p->views);
    }
    p->views[p->n_views] = *v;
    return p->n_views++;
}

void cu_bind(nn_plan *p, int t, int view) {
    p->tval[t] = view;
    int b = p->views[view].buf;
    if (b >= 0 && p->last_node[t] > p->bufs[b].last) p->bufs[b].last = p->last_node[t];
}

ftl_status cu_device_alloc(nn_plan *p, size_t bytes, CUdeviceptr *ptr) {
    CUresult r = p->L->cuMemAlloc(ptr, bytes ? bytes : 16);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t free_b = 0, total = 0;
        p->L->cuMemGetInfo(&free_b, &total);
        int fits = p->batch;
        while (fits > 1 && (double)p->peak_bytes / p->batch * fits + (double)bytes > (double)(p->peak_bytes + free_b))
            fits /= 2;
        return ftl_fail(FTL_E_NOMEM,
                        "GPU out of memory at batch %d: %.1f MiB more needed with %.1f MiB of activations and %.1f MiB "
                        "of weights placed, %.1f of %.1f MiB free; try --batch %d or smaller",
                        p->batch, (double)bytes / 1048576.0, (double)p->peak_bytes / 1048576.0,
                        (double)p->const_bytes / 1048576.0, (double)free_b / 1048576.0, (double)total / 1048576.0,
                        fits < p->batch ? fits : p->batch / 2 > 0 ? p->batch / 2 : 1);
    }
    return cuda_check(r, "cuMemAlloc");
}

/* A buffer of at least `bytes` for a tensor read until node `last`: a free one close in size, or new. */
static ftl_status pool_buffer(nn_plan *p, size_t bytes, int last, int *out) {
    int best = -1;
    for (int i = 0; i < p->n_bufs; i++) {
        const cu_buf *b = &p->bufs[i];
        if (b->busy || b->bytes < bytes || b->bytes > 2 * bytes + (1 << 20)) continue;
        if (best < 0 || b->bytes < p->bufs[best].bytes) best = i;
    }
    if (best < 0) {
        CUdeviceptr ptr;
        FTL_TRY(cu_device_alloc(p, bytes, &ptr));
        if (p->n_bufs == p->cap_bufs) {
            p->cap_bufs = p->cap_bufs ? 2 * p->cap_bufs : 64;
            p->bufs = ftl_xrealloc(p->bufs, (size_t)p->cap_bufs * sizeof *p->bufs);
        }
        p->bufs[p->n_bufs] = (cu_buf){.ptr = ptr, .bytes = bytes};
        p->peak_bytes += bytes;
        best = p->n_bufs++;
    }
    p->bufs[best].busy = true;
    p->bufs[best].last = last;
    *out = best;
    return FTL_OK;
}

ftl_status cu_alloc_view(nn_plan *p, int t, const nn_shape *s, int layout, int dtype, int *view) {
    cu_view v = {.dtype = dtype, .rank = s->rank};
    size_t count = 1;
    for (int i = 0; i < s->rank; i++) {
        v.dims[i] = s->d[i];
        count *= (size_t)s->d[i];
    }
    cu_layout_strides(layout, v.rank, v.dims, v.strides);
    FTL_TRY(pool_buffer(p, count * (size_t)cu_elem_size(dtype), t >= 0 ? p->last_node[t] : p->cur_node, &v.buf));
    v.ptr = p->bufs[v.buf].ptr;
    *view = cu_new_view(p, &v);
    return FTL_OK;
}

ftl_status cu_upload(nn_plan *p, const void *host, size_t bytes, CUdeviceptr *out) {
    FTL_TRY(cu_device_alloc(p, bytes, out));
    if (p->n_consts == p->cap_consts) {
        p->cap_consts = p->cap_consts ? 2 * p->cap_consts : 64;
        p->consts = ftl_xrealloc(p->consts, (size_t)p->cap_consts * sizeof *p->consts);
    }
    p->consts[p->n_consts++] = *out;
    p->const_bytes += bytes;
    return cuda_check(p->L->cuMemcpyHtoD(*out, host, bytes), "copying weights to the GPU");
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                /* round to nearest even */
}

ftl_status cu_const_view(nn_plan *p, const nn_graph *g, int t, int dtype, int *view) {
    const nn_tensor *c = &g->tensors[t];
    if (c->dtype != NN_F32)
        return ftl_fail(FTL_E_UNSUPPORTED, "constant '%s': only float constants reach the GPU", c->name);
    cu_view v = {.buf = -1, .dtype = dtype, .rank = c->shape.rank};
    for (int i = 0; i < v.rank; i++) v.dims[i] = c->shape.d[i];
    cu_layout_strides(CU_LAYOUT_PLAIN, v.rank, v.dims, v.strides);
    size_t n = (size_t)c->count;
    if (dtype == KA_BF16) {
        uint16_t *h = ftl_xmalloc(n * sizeof *h + 2);
        for (size_t i = 0; i < n; i++) h[i] = to_bf16(((const float *)c->data)[i]);
        ftl_status st = cu_upload(p, h, n * sizeof *h, &v.ptr);
        free(h);
        FTL_TRY(st);
    } else {
        FTL_TRY(cu_upload(p, c->data, n * sizeof(float), &v.ptr));
    }
    *view = cu_new_view(p, &v);
    return FTL_OK;
}

ftl_status cu_input_view(nn_plan *p, const nn_graph *g, int t, int *view) {
    if (p->tval[t] >= 0) {
        *view = p->tval[t];
        return FTL_OK;
    }
    if (!nn_is_const(g, t)) return ftl_fail(FTL_E_INTERNAL, "tensor '%s' used before it is computed", g->tensors[t].name);
    FTL_TRY(cu_const_view(p, g, t, KA_F32, view));
    p->tval[t] = *view;
    return FTL_OK;
}

ftl_status cu_ensure(nn_plan *p, int t, int layout, int dtype, int *view) {
    int v = p->tval[t];
    if (v < 0) return ftl_fail(FTL_E_INTERNAL, "tensor %d has no value on the GPU", t);
    if (p->views[v].dtype == dtype && cu_view_is(&p->views[v], layout)) {
        *view = v;
        return FTL_OK;
    }
    for (int i = 0; i < p->n_alts; i++)
        if (p->alts[i].tensor == t && p->alts[i].layout == layout && p->alts[i].dtype == dtype) {
            *view = p->alts[i].view;
            return FTL_OK;
        }
    nn_shape s = {.rank = p->views[v].rank};
    for (int i = 0; i < s.rank; i++) s.d[i] = p->views[v].dims[i];
    int out;
    FTL_TRY(cu_alloc_view(p, t, &s, layout, dtype, &out));
    char label[96];
    snprintf(label, sizeof label, "to %s %s (tensor %d)", layout == CU_LAYOUT_NHWC ? "NHWC" : "plain",
             dtype == KA_BF16 ? "bf16" : "f32", t);
    FTL_TRY(cu_emit_ew(p, label, out, KA_COPY, &v, 1, NULL, NULL));
    if (p->n_alts == p->cap_alts) {
        p->cap_alts = p->cap_alts ? 2 * p->cap_alts : 64;
        p->alts = ftl_xrealloc(p->alts, (size_t)p->cap_alts * sizeof *p->alts);
    }
    p->alts[p->n_alts++] = (cu_alt){t, layout, dtype, out};
    *view = out;
    return FTL_OK;
}

void cu_drop_steps(nn_plan *p, int from) {
    const cuda_libs *L = p->L;
    for (int i = from; i < p->n_steps; i++) {
        cu_step *s = &p->steps[i];
        if (s->xd) L->cudnnDestroyTensorDescriptor(s->xd);
        if (s->yd) L->cudnnDestroyTensorDescriptor(s->yd);
        if (s->bd) L->cudnnDestroyTensorDescriptor(s->bd);
        if (s->wd) L->cudnnDestroyFilterDescriptor(s->wd);
        if (s->cd) L->cudnnDestroyConvolutionDescriptor(s->cd);
        if (s->ad) L->cudnnDestroyActivationDescriptor(s->ad);
    }
    p->n_steps = from < p->n_steps ? from : p->n_steps;
}

cu_step *cu_new_step(nn_plan *p, cu_step_kind kind, const char *label) {
    if (p->n_steps == p->cap_steps) {
        p->cap_steps = p->cap_steps ? 2 * p->cap_steps : 128;
        p->steps = ftl_xrealloc(p->steps, (size_t)p->cap_steps * sizeof *p->steps);
    }
    cu_step *s = &p->steps[p->n_steps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    snprintf(s->label, sizeof s->label, "%s", label);
    return s;
}

void cu_launch_dims(const nn_plan *p, int64_t work, unsigned per_block, unsigned *grid, unsigned *block) {
    int64_t blocks = (work + per_block - 1) / per_block, cap = (int64_t)(p->sm_count > 0 ? p->sm_count : 80) * 32;
    *block = 256;
    *grid = (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

/* The output's dims in its memory order (largest stride first; NHWC's C last), so that merging can
 * join what is adjacent in memory. A stable insertion sort over at most eight dims. */
static void memory_order(ka_ew_args *a) {
    for (int i = 1; i < a->rank; i++)
        for (int j = i; j > 0 && a->out.stride[j - 1] < a->out.stride[j]; j--) {
            int64_t t = a->dims[j];
            a->dims[j] = a->dims[j - 1], a->dims[j - 1] = t;
            t = a->out.stride[j];
            a->out.stride[j] = a->out.stride[j - 1], a->out.stride[j - 1] = t;
            for (int k = 0; k < a->n_in; k++) {
                t = a->in[k].stride[j];
                a->in[k].stride[j] = a->in[k].stride[j - 1], a->in[k].stride[j - 1] = t;
            }
        }
}

/* Output dims merged where every operand's memory runs on from one dim into the next. */
static void merge_dims(ka_ew_args *a) {
    int r = 0;
    for (int d = 0; d < a->rank; d++) {
        if (a->dims[d] == 1) continue;
        bool merge = r > 0;
        for (int k = -1; merge && k < a->n_in; k++) {
            const int64_t *s = k < 0 ? a->out.stride : a->in[k].stride;
            merge = s[r - 1] == s[d] * a->dims[d];
        }
        if (merge) {
            a->dims[r - 1] *= a->dims[d];
            a->out.stride[r - 1] = a->out.stride[d];
            for (int k = 0; k < a->n_in; k++) a->in[k].stride[r - 1] = a->in[k].stride[d];
        } else {
            a->dims[r] = a->dims[d];
            a->out.stride[r] = a->out.stride[d];
            for (int k = 0; k < a->n_in; k++) a->in[k].stride[r] = a->in[k].stride[d];
            r++;
        }
    }
    if (r == 0) { /* a single element */
        a->dims[0] = 1;
        a->out.stride[0] = 1;
        for (int k = 0; k < a->n_in; k++) a->in[k].stride[0] = 0;
        r = 1;
    }
    a->rank = r;
}

static void tensor_arg(const cu_view *v, const cu_view *out, ka_tensor *t) {
    memset(t, 0, sizeof *t);
    t->ptr = v->ptr;
    t->dtype = v->dtype;
    for (int d = 0; d < out->rank; d++) { /* right-aligned broadcasting */
        int s = d - (out->rank - v->rank);
        t->stride[d] = s >= 0 && v->dims[s] == out->dims[d] ? v->strides[s] : 0;
    }
}

ftl_status cu_emit_ew(nn_plan *p, const char *label, int out, int op, const int *in, int n_in, const nn_node *post_of,
                      const int *sum_views) {
    cu_step *s = cu_new_step(p, CU_STEP_KERNEL, label);
    ka_ew_args *a = &s->args.ew;
    const cu_view *o = &p->views[out];
    a->rank = o->rank;
    a->op = op;
    a->total = 1;
    for (int d = 0; d < o->rank; d++) {
        a->dims[d] = o->dims[d];
        a->total *= o->dims[d];
    }
    a->out.ptr = o->ptr;
    a->out.dtype = o->dtype;
    for (int d = 0; d < o->rank; d++) a->out.stride[d] = o->strides[d];
    for (int k = 0; k < n_in; k++) tensor_arg(&p->views[in[k]], o, &a->in[k]);
    a->n_in = n_in;
    int sums = 0;
    for (int k = 0; post_of && k < post_of->n_post; k++) {
        const nn_postop *q = &post_of->post[k];
        if (a->n_post == KA_MAX_POST) return ftl_fail(FTL_E_UNSUPPORTED, "%s: more than %d post-ops", label, KA_MAX_POST);
        ka_post *kp = &a->post[a->n_post++];
        if (q->kind == NN_POST_SUM) {
            if (a->n_in == KA_MAX_IN) return ftl_fail(FTL_E_UNSUPPORTED, "%s: too many summed inputs", label);
            tensor_arg(&p->views[sum_views[sums++]], o, &a->in[a->n_in]);
            *kp = (ka_post){.act = -1, .in = a->n_in++};
        } else {
            *kp = (ka_post){.act = (int)q->act.kind, .in = -1, .alpha = q->act.alpha, .beta = q->act.beta};
        }
    }
    memory_order(a);
    merge_dims(a);
    s->fn = p->f_ew;
    cu_launch_dims(p, a->total, 256, &s->grid, &s->block);
    snprintf(s->impl, sizeof s->impl, "ftl_ew (rank %d, %d inputs, %d post-ops)", a->rank, a->n_in, a->n_post);
    return FTL_OK;
}

ftl_status cu_emit_fill(nn_plan *p, const char *label, int view, float value) {
    const cu_view *v = &p->views[view];
    cu_step *s = cu_new_step(p, CU_STEP_KERNEL, label);
    int64_t count = 1;
    for (int d = 0; d < v->rank; d++) count *= v->dims[d];
    s->args.fill = (ka_fill_args){.count = count, .out = v->ptr, .dtype = v->dtype, .value = value};
    s->fn = p->f_fill;
    cu_launch_dims(p, count, 256, &s->grid, &s->block);
    snprintf(s->impl, sizeof s->impl, "ftl_fill");
    return FTL_OK;
}
